//! A private image registry for the end-to-end tests: Debian's `docker-registry` (the CNCF
//! distribution registry) on a free loopback port, serving HTTPS with a certificate for
//! 127.0.0.1 of a CA of its own, and asking every client for a password (htpasswd, bcrypt), the way a private
//! registry of a company does; `skopeo copy` pushes the project's image tarballs to it.
//!
//! containerd trusts it through a `hosts.toml` in its registry directory
//! ([`nodeagent::cri::containerd_config::write_registry_host`]); pods get the password through a
//! `kubernetes.io/dockerconfigjson` Secret ([`Registry::dockerconfigjson`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine as _;

use crate::ports::{self, Port};
use crate::process::{Process, run_ok};

/// The user the registry knows.
pub const USER: &str = "puller";

/// A running registry; stopped on drop.
pub struct Registry {
    dir: PathBuf,
    port: Port,
    process: Process,
    password: String,
}

/// Whether the machine has what [`Registry::start`] runs (`make deps` installs them).
pub fn prerequisites() -> Result<(), String> {
    let missing: Vec<&str> = ["docker-registry", "skopeo", "htpasswd", "openssl"]
        .into_iter()
        .filter(|p| !Command::new("sh").args(["-c", &format!("command -v {p}")]).output().is_ok_and(|o| o.status.success()))
        .collect();
    if missing.is_empty() { Ok(()) } else { Err(format!("{} (make deps installs docker-registry, skopeo and apache2-utils)", missing.join(", "))) }
}

impl Registry {
    /// Starts a registry keeping its files (certificate, password file, storage, logs) in `dir`,
    /// and waits until it answers.
    pub async fn start(dir: &Path) -> anyhow::Result<Registry> {
        prerequisites().map_err(anyhow::Error::msg)?;
        std::fs::create_dir_all(dir.join("data"))?;
        let port = ports::reserve()?;
        // A CA of the registry's own, and its serving certificate for 127.0.0.1 (rustls, like
        // Go, wants a CA and a leaf, not one self-signed certificate for both).
        let path = |f: &str| dir.join(f).to_string_lossy().into_owned();
        let (crt, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
        run_ok("openssl", &[&["req", "-x509"][..], &ec, &["-days", "2", "-subj", "/CN=kubelab-e2e-registry-ca", "-keyout", &path("ca.key"), "-out", &path("ca.crt")]].concat())?;
        run_ok("openssl", &[&["req"][..], &ec, &["-subj", "/CN=kubelab-e2e-registry", "-keyout", &path("tls.key"), "-out", &path("tls.csr")]].concat())?;
        std::fs::write(dir.join("tls.ext"), "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")?;
        run_ok("openssl", &["x509", "-req", "-days", "2", "-in", &path("tls.csr"), "-CA", &path("ca.crt"), "-CAkey", &path("ca.key"), "-CAcreateserial", "-extfile", &path("tls.ext"), "-out", &path("tls.crt")])?;
        let password = format!("pw-{}-{}", std::process::id(), port.port);
        let htpasswd = run_ok("htpasswd", &["-Bbn", USER, &password])?;
        std::fs::write(dir.join("htpasswd"), htpasswd)?;
        let config = format!(
            "version: 0.1\nlog: {{level: info}}\nstorage:\n  filesystem: {{rootdirectory: {data}}}\n  delete: {{enabled: true}}\nhttp:\n  addr: 127.0.0.1:{port}\n  tls: {{certificate: {crt}, key: {key}}}\nauth:\n  htpasswd: {{realm: kubelab-e2e-registry, path: {htpasswd}}}\n",
            data = dir.join("data").display(),
            port = port.port,
            crt = crt.display(),
            key = key.display(),
            htpasswd = dir.join("htpasswd").display(),
        );
        std::fs::write(dir.join("config.yml"), config)?;
        let config_arg = dir.join("config.yml").to_string_lossy().into_owned();
        let process = Process::spawn("registry", Path::new("/usr/bin/docker-registry"), &["serve".into(), config_arg], &dir.join("logs"), &[])?;
        let registry = Registry { dir: dir.to_path_buf(), port, process, password };
        registry.wait_ready().await?;
        Ok(registry)
    }

    /// Until `/v2/` answers 401 (it asks for the password: it is up).
    async fn wait_ready(&self) -> anyhow::Result<()> {
        let cert = reqwest::Certificate::from_pem(&std::fs::read(self.ca_file())?)?;
        let http = reqwest::Client::builder().add_root_certificate(cert).timeout(Duration::from_secs(2)).build()?;
        let url = format!("https://{}/v2/", self.host());
        let deadline = Instant::now() + crate::scaled(Duration::from_secs(20));
        loop {
            match http.get(&url).send().await {
                Ok(r) if r.status() == reqwest::StatusCode::UNAUTHORIZED => return Ok(()),
                r if Instant::now() > deadline => anyhow::bail!("the registry at {url} did not come up: {r:?}\n{}", self.process.log_tail(20)),
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// `127.0.0.1:<port>`: the registry part of its images' references.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port.port)
    }

    /// The CA clients verify it with.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// Pushes the OCI image-layout tarball `tar` as `<host>/<repository>` (`private/busybox:1.36`)
    /// with `skopeo copy`; returns the full reference.
    pub fn push(&self, tar: &Path, repository: &str) -> anyhow::Result<String> {
        self.copy(&format!("oci-archive:{}", tar.display()), repository)
    }

    /// `skopeo copy <source> docker://<host>/<repository>` with the password.
    fn copy(&self, source: &str, repository: &str) -> anyhow::Result<String> {
        let certs = self.dir.join("skopeo-certs");
        std::fs::create_dir_all(&certs)?;
        std::fs::copy(self.ca_file(), certs.join("ca.crt"))?;
        let reference = format!("{}/{repository}", self.host());
        let creds = format!("{USER}:{}", self.password);
        run_ok("skopeo", &[
            "copy", "--quiet", "--dest-cert-dir", &certs.to_string_lossy(), "--dest-creds", &creds,
            source, &format!("docker://{reference}"),
        ])?;
        Ok(reference)
    }

    /// Pushes the OCI image layout directory `layout` (its only image) as `<host>/<repository>`;
    /// returns the full reference.
    pub fn push_layout(&self, layout: &Path, repository: &str) -> anyhow::Result<String> {
        self.copy(&format!("oci:{}", layout.display()), repository)
    }

    /// A `.dockerconfigjson` (`kubectl create secret docker-registry`'s) holding `password`
    /// for this registry.
    pub fn dockerconfigjson(&self, password: &str) -> String {
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{password}"));
        serde_json::json!({"auths": {self.host(): {"username": USER, "password": password, "auth": auth}}}).to_string()
    }

    /// The right password.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The registry's log (each request it served, and why it refused one).
    pub fn log(&self) -> String {
        self.process.log_tail(40)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.process.terminate();
    }
}
