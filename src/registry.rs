//! `kubelab up`'s image registry add-on: mirrors kind's "local registry" recipe
//! (kind.sigs.k8s.io/docs/user/local-registry: a `registry:2` container beside the cluster, a
//! `certs.d/<host>/hosts.toml` in each node's containerd, images pushed to `localhost:<port>`), and
//! the lab's registry (deploy/lab/lab), which adds what kind leaves out: TLS and a password.
//!
//! With `--registry`, [`start`] runs Debian's `docker-registry` (the CNCF distribution registry,
//! what `registry:2` is) as a child of `kubelab up`, as containerd is:
//!
//! 1. Its serving certificate, `<data>/registry/tls.crt` and `.key`, signed by the cluster CA
//!    (`<data>/pki/ca.crt`) for `127.0.0.1` and `localhost`; made once, renewed as the cluster's
//!    own certificates are ([`pki::ensure_cert`]).
//! 2. Its password: user [`USER`], a random password made once and kept in
//!    `<data>/registry/password` (root only), written as a bcrypt htpasswd file by `htpasswd -B`
//!    (no bcrypt crate in the workspace).
//! 3. Its `config.yml` (storage in `<data>/registry/storage`, HTTPS on `127.0.0.1:<port>`, the
//!    htpasswd file), and the process, its output in `<data>/logs/registry.log`; it answers once
//!    its port accepts connections.
//! 4. containerd trusts it: a `hosts.toml` under containerd's `certs.d` for `127.0.0.1:<port>`
//!    and `localhost:<port>`, naming the cluster CA ([`write_registry_host`]; containerd reads it
//!    at each pull, no restart).
//! 5. The project's images pushed to it with `skopeo copy` from the image directory
//!    `kubelab up` imports from: `library/busybox:1.36` and `pause:3.9` (the lab's names).
//! 6. Once the API server answers, [`Registry::apply_pull_secret`]: the `kubernetes.io/dockerconfigjson`
//!    Secret `default/registry-credentials`, which a pod names in `imagePullSecrets` (what
//!    `kubectl create secret docker-registry` makes).
//!
//! With `--registry-host HOST[:PORT]` (and `--registry-ca FILE`), nothing runs: step 4 alone, for
//! a registry the user runs. Without a CA no file is written: containerd then checks the
//! registry's certificate against the machine's CAs, its default.
//!
//! Implementation caveats:
//! - The registry listens on loopback only: the node (containerd on this machine) reaches it,
//!   pods do not (kind's recipe connects its registry to the cluster's network).
//! - The images are pushed again at each start (skopeo skips the blobs already there); an image
//!   deleted from the registry comes back.
//! - The serving certificate is not one of `kubelab certs check-expiration`'s: it is kept here,
//!   beside the registry, as the lab keeps its registry's.
//! - One user, one password, every repository (no token server, no per-repository access).
//! - A later `kubelab up` without `--registry` leaves the `hosts.toml` files and the pull secret
//!   in place, naming a registry that no longer runs.
//! - Ready means its port accepts connections (kubelab has no HTTPS client of its own to ask
//!   `/v2/`); the first push is what proves it serves.

use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use base64::Engine as _;
use clap::Args;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use nodeagent::cri::containerd_config::write_registry_host;

/// The user the registry knows.
pub const USER: &str = "kubelab";
/// The pull secret in `default` (the lab's name).
pub const PULL_SECRET: &str = "registry-credentials";
/// What is pushed at each start: the tarball in the image directory, the repository and tag.
pub const IMAGES: &[(&str, &str)] = &[("busybox.tar", "library/busybox:1.36"), ("pause.tar", "pause:3.9")];
/// The registry's binary (Debian's package docker-registry).
const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// `kubelab up`'s registry flags (flattened into [`crate::up::UpArgs`]).
#[derive(Args, Clone, Debug, Default)]
pub struct RegistryArgs {
    /// Run an image registry for the cluster (HTTPS with a certificate of the cluster CA, user
    /// `kubelab` with the password in <data-dir>/registry/password), push the project's images
    /// to it, and create the pull secret default/registry-credentials.
    #[arg(long, conflicts_with = "registry_host")]
    pub registry: bool,
    /// The port of `--registry` on 127.0.0.1.
    #[arg(long, default_value_t = 5000)]
    pub registry_port: u16,
    /// Instead, trust a registry the user runs (`HOST[:PORT]`, as images name it): containerd
    /// pulls `HOST[:PORT]/…` over HTTPS, checking `--registry-ca` if given.
    #[arg(long)]
    pub registry_host: Option<String>,
    /// The CA that `--registry-host`'s certificate is signed by (default: the machine's CAs).
    #[arg(long, requires = "registry_host")]
    pub registry_ca: Option<PathBuf>,
}

/// A registry the node pulls from: the one `kubelab up` runs (stopped on [`Registry::stop`] or
/// drop), or the user's.
pub struct Registry {
    /// `host[:port]`, as image references name it.
    host: String,
    /// The process and the password of the registry `kubelab up` runs.
    running: Option<(Child, String)>,
    /// What the progress line says.
    summary: String,
}

/// Sets up what `args` ask for (nothing: `None`). `certs_d` is containerd's registry
/// `config_path`.
pub async fn start(args: &RegistryArgs, data: &Path, image_dir: &Path, certs_d: &Path) -> anyhow::Result<Option<Registry>> {
    if let Some(host) = &args.registry_host {
        let trust = match &args.registry_ca {
            Some(ca) => {
                let ca = ca.canonicalize().with_context(|| format!("--registry-ca {}", ca.display()))?;
                write_registry_host(certs_d, host, &ca).with_context(|| format!("trusting {host}"))?;
                format!("its certificate checked against {}", ca.display())
            }
            None => "its certificate checked against the machine's CAs".to_string(),
        };
        return Ok(Some(Registry { host: host.clone(), running: None, summary: format!("registry {host} trusted ({trust})") }));
    }
    if !args.registry {
        return Ok(None);
    }
    let (data, image_dir, certs_d, port) = (data.to_path_buf(), image_dir.to_path_buf(), certs_d.to_path_buf(), args.registry_port);
    // Files and skopeo: blocking work, off the executor. The process itself is started here, on
    // a thread that lives as long as the cluster: its parent-death signal fires when the thread
    // that started it ends, and a blocking-pool thread ends when it has been idle a while.
    let prepared = {
        let data = data.clone();
        tokio::task::spawn_blocking(move || prepare(&data, port)).await??
    };
    let registry = spawn(prepared)?;
    tokio::task::spawn_blocking(move || finish(registry, &data, &image_dir, &certs_d, port)).await?.map(Some)
}

/// What steps 1 to 3 leave for the process: its configuration, log and password.
struct Prepared {
    config: std::path::PathBuf,
    log_path: std::path::PathBuf,
    password: String,
    port: u16,
}

/// Steps 1 to 3 of the module's doc, up to the process.
fn prepare(data: &Path, port: u16) -> anyhow::Result<Prepared> {
    for (bin, package) in [(REGISTRY_BIN, "docker-registry"), ("/usr/bin/skopeo", "skopeo"), ("/usr/bin/htpasswd", "apache2-utils")] {
        if !Path::new(bin).is_file() {
            bail!("--registry needs {bin}: run `make deps` (or apt-get install {package})");
        }
    }
    if let Err(e) = TcpListener::bind(("127.0.0.1", port)) {
        bail!("port {port} on 127.0.0.1 is not free ({e}): choose another with --registry-port");
    }
    let dir = data.join("registry");
    std::fs::create_dir_all(dir.join("storage")).with_context(|| format!("creating {}", dir.display()))?;
    let pki = data.join("pki");

    // Step 1: the serving certificate, of the cluster CA.
    let ca = pki::CertificateAuthority::load(&pki, crate::certs::certlist::CA).context("the cluster CA")?;
    let config = pki::Config {
        common_name: "kubelab-registry".into(),
        organizations: vec![],
        alt_names: pki::AltNames { dns_names: vec!["localhost".into()], ips: vec![std::net::Ipv4Addr::LOCALHOST.into()] },
        usages: vec![pki::Usage::ServerAuth],
    };
    pki::ensure_cert(&dir, "tls", &ca, &config, pki::DEFAULT_RENEW_BEFORE).context("the registry's serving certificate")?;

    // Step 2: the password, and the htpasswd file (bcrypt), made from it at each start.
    let password = password(&dir.join("password"))?;
    write_private(&dir.join("htpasswd"), &htpasswd(&password)?)?;

    // Step 3: the configuration (paths as JSON strings, which YAML reads whatever they hold) and
    // the process.
    let path = |f: &str| serde_json::Value::String(dir.join(f).display().to_string()).to_string();
    let config = format!(
        "# Written by kubelab up (src/registry.rs).\nversion: 0.1\nlog: {{level: info}}\nstorage:\n  filesystem: {{rootdirectory: {storage}}}\n  delete: {{enabled: true}}\nhttp:\n  addr: 127.0.0.1:{port}\n  tls: {{certificate: {crt}, key: {key}}}\nauth:\n  htpasswd: {{realm: kubelab, path: {htpasswd}}}\n",
        storage = path("storage"),
        crt = path("tls.crt"),
        key = path("tls.key"),
        htpasswd = path("htpasswd"),
    );
    std::fs::write(dir.join("config.yml"), config)?;
    Ok(Prepared { config: dir.join("config.yml"), log_path: data.join("logs/registry.log"), password, port })
}

/// Step 3's process.
fn spawn(p: Prepared) -> anyhow::Result<(Registry, std::path::PathBuf)> {
    let log = std::fs::File::options().create(true).append(true).open(&p.log_path)?;
    let mut cmd = Command::new(REGISTRY_BIN);
    cmd.arg("serve").arg(&p.config).stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
    // SAFETY: prctl in the child before exec; no allocation.
    unsafe {
        use std::os::unix::process::CommandExt;
        // If kubelab up dies, the registry follows (as containerd does).
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    let child = cmd.spawn().context("starting docker-registry")?;
    // From here on, an error stops the registry (drop).
    let registry = Registry { host: format!("127.0.0.1:{}", p.port), running: Some((child, p.password)), summary: String::new() };
    Ok((registry, p.log_path))
}

/// Steps 4 and 5, once the process answers.
fn finish((mut registry, log_path): (Registry, std::path::PathBuf), data: &Path, image_dir: &Path, certs_d: &Path, port: u16) -> anyhow::Result<Registry> {
    let host = registry.host.clone();
    let dir = data.join("registry");
    let pki = data.join("pki");
    registry.wait_listening(port, &log_path)?;

    // Step 4: containerd trusts it, by either name its certificate has.
    for host in [host.clone(), format!("localhost:{port}")] {
        write_registry_host(certs_d, &host, &pki.join("ca.crt")).with_context(|| format!("trusting {host}"))?;
    }

    // Step 5: the project's images, pushed with skopeo (the CA in a directory of its own: skopeo
    // reads every *.key there as a client key).
    let certs = dir.join("client-certs");
    std::fs::create_dir_all(&certs)?;
    std::fs::copy(pki.join("ca.crt"), certs.join("ca.crt"))?;
    let mut pushed = Vec::new();
    for (tar, repository) in IMAGES {
        let tar = image_dir.join(tar);
        if !tar.is_file() {
            continue;
        }
        registry.push(&tar, repository, &certs).with_context(|| format!("pushing {} (the registry's log: {})", tar.display(), log_path.display()))?;
        pushed.push(*repository);
    }
    registry.summary = format!("registry https://{host} (user {USER}; {} pushed)", pushed.join(", "));
    Ok(registry)
}

/// The password in `path`, or a new random one written there (mode 0600).
fn password(path: &Path) -> anyhow::Result<String> {
    if let Ok(p) = std::fs::read_to_string(path)
        && !p.trim().is_empty()
    {
        return Ok(p.trim().to_string());
    }
    use std::io::Read as _;
    let mut bytes = [0u8; 18];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).context("reading /dev/urandom")?;
    let password = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    write_private(path, &password)?;
    Ok(password)
}

/// Writes `text` to `path`, which only its owner may read (mode 0600 from its creation).
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path).with_context(|| format!("creating {}", path.display()))?;
    f.write_all(text.as_bytes()).with_context(|| format!("writing {}", path.display()))
}

/// `USER:<bcrypt hash>`, by `htpasswd -niB` (the password on its stdin, never on a command line).
fn htpasswd(password: &str) -> anyhow::Result<String> {
    let mut child = Command::new("htpasswd")
        .args(["-niB", USER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running htpasswd")?;
    child.stdin.take().context("htpasswd's stdin")?.write_all(password.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!("htpasswd failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// A `.dockerconfigjson` holding `password` for each of `hosts`.
fn dockerconfigjson(hosts: &[String], password: &str) -> String {
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{password}"));
    let auths: serde_json::Map<String, serde_json::Value> =
        hosts.iter().map(|h| (h.clone(), serde_json::json!({"username": USER, "password": password, "auth": auth}))).collect();
    serde_json::json!({ "auths": auths }).to_string()
}

impl Registry {
    /// Until the registry's port accepts connections (it listens once its TLS and storage are
    /// set up); an exit is an error naming its log.
    fn wait_listening(&mut self, port: u16, log: &Path) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some((child, _)) = &mut self.running
                && let Some(st) = child.try_wait()?
            {
                bail!("docker-registry exited ({st}); see {}", log.display());
            }
            if std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1)).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("docker-registry did not listen on 127.0.0.1:{port} within 30 s; see {}", log.display());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `skopeo copy oci-archive:<tar> docker://<host>/<repository>` with the password.
    fn push(&self, tar: &Path, repository: &str, cert_dir: &Path) -> anyhow::Result<()> {
        let Some((_, password)) = &self.running else { bail!("not a registry kubelab up runs") };
        let out = Command::new("skopeo")
            .args(["copy", "--quiet", "--dest-cert-dir"])
            .arg(cert_dir)
            .arg("--dest-creds")
            .arg(format!("{USER}:{password}"))
            .arg(format!("oci-archive:{}", tar.display()))
            .arg(format!("docker://{}/{repository}", self.host))
            .stdin(Stdio::null())
            .output()
            .context("running skopeo")?;
        if !out.status.success() {
            bail!("skopeo copy failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
        }
        Ok(())
    }

    /// Step 6: the pull secret `default/registry-credentials`, created or brought up to date (a
    /// registry of the user's has none: its credentials are the user's).
    pub async fn apply_pull_secret(&self, kube: &kube::Client) -> anyhow::Result<Option<String>> {
        let Some((_, password)) = &self.running else { return Ok(None) };
        let port = self.host.rsplit_once(':').map(|(_, p)| p).unwrap_or_default();
        let json = dockerconfigjson(&[self.host.clone(), format!("localhost:{port}")], password);
        let secrets: kube::Api<Secret> = kube::Api::namespaced(kube.clone(), "default");
        let data = std::collections::BTreeMap::from([(".dockerconfigjson".to_string(), ByteString(json.into_bytes()))]);
        match secrets.get_opt(PULL_SECRET).await? {
            Some(s) if s.data.as_ref() == Some(&data) => {}
            Some(mut s) => {
                s.data = Some(data);
                secrets.replace(PULL_SECRET, &kube::api::PostParams::default(), &s).await?;
            }
            None => {
                let s = Secret {
                    metadata: kube::api::ObjectMeta { name: Some(PULL_SECRET.into()), namespace: Some("default".into()), ..Default::default() },
                    type_: Some("kubernetes.io/dockerconfigjson".into()),
                    data: Some(data),
                    ..Default::default()
                };
                secrets.create(&kube::api::PostParams::default(), &s).await?;
            }
        }
        Ok(Some(format!("pull secret default/{PULL_SECRET} for {}", self.host)))
    }

    /// SIGTERM, then SIGKILL after 10 s; nothing for a registry of the user's.
    pub fn stop(&mut self) {
        let Some((mut child, _)) = self.running.take() else { return };
        // SAFETY: kill on the PID of our own child, not yet waited for.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl std::fmt::Display for Registry {
    /// The progress line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.summary)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Secret's JSON names every host with the same user and password, `auth` their base64.
    #[test]
    fn the_pull_secret_names_both_hosts() {
        let json: serde_json::Value = serde_json::from_str(&dockerconfigjson(&["127.0.0.1:5000".into(), "localhost:5000".into()], "pw")).expect("JSON");
        for host in ["127.0.0.1:5000", "localhost:5000"] {
            let entry = &json["auths"][host];
            assert_eq!((entry["username"].as_str(), entry["password"].as_str()), (Some(USER), Some("pw")), "{json}");
            assert_eq!(entry["auth"].as_str(), Some(base64::engine::general_purpose::STANDARD.encode("kubelab:pw").as_str()));
        }
    }

    /// The password is made once, root-only, and read back the next time.
    #[test]
    fn the_password_is_kept() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("password");
        let first = password(&path).expect("made");
        assert!(first.len() >= 24 && first.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'), "{first}");
        assert_eq!(std::fs::metadata(&path).expect("metadata").permissions().mode() & 0o777, 0o600);
        assert_eq!(password(&path).expect("read"), first);
    }

    /// The flags: `--registry` and `--registry-host` exclude each other, `--registry-ca` needs a host.
    #[test]
    fn the_flags() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            registry: RegistryArgs,
        }
        use clap::Parser as _;
        let parse = |args: &[&str]| Cli::try_parse_from(std::iter::once("up").chain(args.iter().copied())).map(|c| c.registry);
        let run = parse(&["--registry"]).expect("--registry");
        assert!(run.registry && run.registry_port == 5000 && run.registry_host.is_none());
        assert_eq!(parse(&["--registry-host", "r.example:5000", "--registry-ca", "/ca.crt"]).expect("a host").registry_ca, Some(PathBuf::from("/ca.crt")));
        assert!(parse(&["--registry", "--registry-host", "r:5000"]).is_err());
        assert!(parse(&["--registry-ca", "/ca.crt"]).is_err());
    }
}
