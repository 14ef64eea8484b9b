//! Mirrors kubeadm's cmd/kubeadm/app/cmd/certs.go: `kubelab certs generate` makes or renews
//! the cluster's certificates and kubeconfigs from flags (what `kubeadm init phase certs all`
//! and `phase kubeconfig all` do), and `kubelab certs check-expiration` shows when each ends;
//! `kubelab certs kubeconfig` is cmd/kubeconfig.go's `kubeadm kubeconfig user`.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};

use super::certlist::{self, KubeadmCert};
use super::kubeconfig;
use super::{ClusterSpec, DEFAULT_CERT_DIR, NodeSpec};

/// `kubelab certs`.
#[derive(Args, Debug)]
pub struct CertsArgs {
    #[command(subcommand)]
    pub command: CertsCommand,
}

#[derive(Subcommand, Debug)]
pub enum CertsCommand {
    /// Make the cluster's CAs, certificates, service account key pair and kubeconfigs, keeping
    /// the ones that are good and renewing the stale (kubeadm init phase certs and kubeconfig).
    Generate(GenerateArgs),
    /// Show when each certificate and CA expires, embedded ones included (kubeadm certs
    /// check-expiration).
    CheckExpiration(DirArgs),
    /// Print a kubeconfig for a user, with a client certificate signed by the cluster's CA
    /// (kubeadm kubeconfig user).
    Kubeconfig(KubeconfigArgs),
}

/// Where the files are.
#[derive(Args, Debug)]
pub struct DirArgs {
    /// Where certificates, keys and kubeconfigs are kept (`kubelab up` keeps them in
    /// <data-dir>/pki).
    #[arg(long, default_value = DEFAULT_CERT_DIR)]
    pub cert_dir: PathBuf,
}

/// `kubelab certs kubeconfig`'s flags, as `kubeadm kubeconfig user` names them.
#[derive(Args, Debug)]
pub struct KubeconfigArgs {
    #[command(flatten)]
    pub dirs: DirArgs,
    /// The user: the client certificate's common name.
    #[arg(long)]
    pub client_name: String,
    /// A group of the user: the client certificate's organization (one at most).
    #[arg(long = "org")]
    pub orgs: Vec<String>,
    /// The API server's URL.
    #[arg(long, default_value = "https://127.0.0.1:6443")]
    pub server: String,
}

/// `kubelab certs generate`'s flags: kubeadm init's, and `--node` for the nodes' kubelets.
#[derive(Args, Debug)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub dirs: DirArgs,
    /// The API server's URL written into the kubeconfigs; its host goes into the API server's
    /// certificate.
    #[arg(long, default_value = "https://127.0.0.1:6443")]
    pub server: String,
    /// The control plane node's name: in the API server's and etcd's certificates (default: the
    /// hostname).
    #[arg(long)]
    pub node_name: Option<String>,
    /// A node whose kubelet gets a serving certificate and a kubeconfig: NAME or NAME=IP[,IP…]
    /// (repeat the flag for each node).
    #[arg(long = "node")]
    pub nodes: Vec<NodeSpec>,
    /// The addresses the API server is reached at, comma-separated: in its certificate and etcd's.
    #[arg(long, value_delimiter = ',')]
    pub apiserver_advertise_address: Vec<IpAddr>,
    /// More names or addresses for the API server's certificate, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub apiserver_cert_extra_sans: Vec<String>,
    /// The Services' range: its first address, the `kubernetes` Service's, goes into the API
    /// server's certificate.
    #[arg(long, default_value = "10.96.0.0/12")]
    pub service_cidr: String,
    /// The cluster domain.
    #[arg(long, default_value = "cluster.local")]
    pub service_dns_domain: String,
}

impl GenerateArgs {
    pub fn into_spec(self) -> anyhow::Result<ClusterSpec> {
        let node_name = self.node_name.unwrap_or_else(client::hostname).to_lowercase();
        let mut spec = ClusterSpec::new(self.server, node_name);
        spec.nodes = self.nodes;
        spec.advertise_addresses = self.apiserver_advertise_address;
        spec.apiserver_cert_extra_sans = self.apiserver_cert_extra_sans;
        spec.service_ip = first_address(&self.service_cidr).with_context(|| format!("--service-cidr {}", self.service_cidr))?;
        spec.dns_domain = self.service_dns_domain;
        spec.validate()?;
        Ok(spec)
    }
}

/// Runs `kubelab certs`.
pub fn run(args: CertsArgs) -> anyhow::Result<()> {
    match args.command {
        CertsCommand::Generate(args) => {
            let cert_dir = args.dirs.cert_dir.clone();
            let spec = args.into_spec()?;
            println!("[certs] Using certificateDir folder {:?}", cert_dir.display().to_string());
            for (name, outcome) in super::ensure(&cert_dir, &spec)? {
                println!("{}", super::describe(&name, &outcome));
            }
        }
        CertsCommand::CheckExpiration(dirs) => print!("{}", check_expiration(&dirs.cert_dir, Utc::now())?),
        CertsCommand::Kubeconfig(args) => print!("{}", user_kubeconfig(&args)?),
    }
    Ok(())
}

/// A kubeconfig for any user, signed by the cluster's CA and not kept anywhere (kubeadm's
/// `kubeadm kubeconfig user`): handed to whoever the user is.
pub fn user_kubeconfig(args: &KubeconfigArgs) -> anyhow::Result<String> {
    super::server_host(&args.server)?;
    // The user's name goes into the YAML as it is: held to what names and `system:` users use.
    let plain = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.:@_".contains(&b));
    anyhow::ensure!(plain(&args.client_name), "--client-name {:?}: letters, digits and - . : @ _ only", args.client_name);
    let ca = pki::CertificateAuthority::load(&args.dirs.cert_dir, certlist::CA)?;
    let kc = kubeconfig::KubeConfigSpec { file_name: String::new(), client_name: args.client_name.clone(), organizations: args.orgs.clone() };
    let client = ca.sign(&kc.config())?;
    Ok(kubeconfig::render(&args.server, ca.cert_pem(), &kc.client_name, &client))
}

/// The first address of a range (kubeadm's `GetAPIServerVirtualIP`): 10.96.0.0/12 gives
/// 10.96.0.1.
pub fn first_address(cidr: &str) -> anyhow::Result<IpAddr> {
    let (ip, len) = cidr.split_once('/').context("want ADDRESS/LENGTH")?;
    let ip: IpAddr = ip.parse().context("not an IP address")?;
    let len: u32 = len.parse().context("not a prefix length")?;
    let bits = if ip.is_ipv4() { 32 } else { 128 };
    anyhow::ensure!(len < bits, "a /{len} has no address after its network's");
    let raw = match ip {
        IpAddr::V4(v4) => u32::from(v4) as u128,
        IpAddr::V6(v6) => u128::from(v6),
    };
    let network = raw & !(u128::MAX >> (128 - bits + len)) & (u128::MAX >> (128 - bits));
    Ok(match ip {
        IpAddr::V4(_) => IpAddr::from(std::net::Ipv4Addr::from((network as u32) + 1)),
        IpAddr::V6(_) => IpAddr::from(std::net::Ipv6Addr::from(network + 1)),
    })
}

/// One row: a name, when it expires, and (for a certificate) its CA; `None` when its file is
/// missing.
struct Row {
    name: String,
    not_after: Option<DateTime<Utc>>,
    ca_name: &'static str,
    externally_managed: bool,
}

/// kubeadm's two tables: the certificates (kubeconfigs' embedded ones too) and the CAs, each
/// sorted by name, with the time left as `kubectl get` shows ages.
pub fn check_expiration(cert_dir: &Path, now: DateTime<Utc>) -> anyhow::Result<String> {
    // The per-node files are those present; only the names and files of the list matter here.
    let mut spec = ClusterSpec::new("https://localhost", "localhost");
    spec.nodes = node_names(cert_dir)?.into_iter().map(|name| NodeSpec { name, ips: vec![] }).collect();
    let list = certlist::cert_list(&spec)?;
    // A CA without its key here is one kubelab does not sign with: kubeadm's external CA.
    let external = |ca_name: &str| -> anyhow::Result<bool> {
        let ca = list.iter().find(|c| c.name == ca_name).context("unknown CA")?;
        let (_, key) = pki::paths_for_cert_and_key(cert_dir, &ca.base_name);
        Ok(!key.try_exists().with_context(|| format!("looking for {}", key.display()))?)
    };
    let expiry = |path: &Path| -> anyhow::Result<Option<DateTime<Utc>>> {
        match pki::info_from_file(path) {
            Ok(info) => Ok(Some(info.not_after)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e.into()),
        }
    };
    let mut certs = Vec::new();
    let mut cas = Vec::new();
    for KubeadmCert { name, base_name, ca_name, .. } in &list {
        let (crt, _) = pki::paths_for_cert_and_key(cert_dir, base_name);
        let not_after = expiry(&crt)?;
        if ca_name.is_empty() {
            cas.push(Row { name: name.clone(), not_after, ca_name, externally_managed: external(name)? });
        } else {
            certs.push(Row { name: name.clone(), not_after, ca_name, externally_managed: external(ca_name)? });
        }
    }
    for kc in kubeconfig::kubeconfig_specs(&spec) {
        let path = cert_dir.join(&kc.file_name);
        let not_after = match path.try_exists().with_context(|| format!("looking for {}", path.display()))? {
            false => None,
            true => Some(kubeconfig::read(&path)?.client.info().with_context(|| format!("{}: client-certificate-data", path.display()))?.not_after),
        };
        certs.push(Row { name: kc.file_name, not_after, ca_name: certlist::CA, externally_managed: external(certlist::CA)? });
    }
    certs.sort_by(|a, b| a.name.cmp(&b.name));
    cas.sort_by(|a, b| a.name.cmp(&b.name));

    let date = |t: DateTime<Utc>| t.format("%b %d, %Y %H:%M UTC").to_string();
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let mut table = vec![vec!["CERTIFICATE".to_string(), "EXPIRES".into(), "RESIDUAL TIME".into(), "CERTIFICATE AUTHORITY".into(), "EXTERNALLY MANAGED".into()]];
    for r in &certs {
        table.push(match r.not_after {
            Some(t) => vec![r.name.clone(), date(t), short_human_duration(t - now), r.ca_name.to_string(), yes_no(r.externally_managed).into()],
            None => vec![format!("!MISSING! {}", r.name)],
        });
    }
    let mut out = tabulate(&table);
    out.push('\n');
    let mut table = vec![vec!["CERTIFICATE AUTHORITY".to_string(), "EXPIRES".into(), "RESIDUAL TIME".into(), "EXTERNALLY MANAGED".into()]];
    for r in &cas {
        table.push(match r.not_after {
            Some(t) => vec![r.name.clone(), date(t), short_human_duration(t - now), yes_no(r.externally_managed).into()],
            None => vec![format!("!MISSING! {}", r.name)],
        });
    }
    out.push_str(&tabulate(&table));
    Ok(out)
}

/// The nodes that have a kubelet certificate or kubeconfig here, sorted.
fn node_names(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(names),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    for entry in entries {
        let file = entry.with_context(|| format!("reading {}", dir.display()))?.file_name();
        let node = file.to_str().and_then(|f| f.strip_prefix("kubelet-")).and_then(|f| f.strip_suffix(".crt").or_else(|| f.strip_suffix(".conf")));
        if let Some(node) = node.filter(|n| super::is_dns1123_subdomain(n)) {
            names.push(node.to_string());
        }
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// Go's tabwriter as kubeadm sets it up (minimum width 10, padding 3): every cell but a row's
/// last is padded to its column's widest.
fn tabulate(rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = Vec::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(row.len().saturating_sub(1)) {
            let w = (cell.chars().count() + 3).max(10);
            match widths.get_mut(i) {
                Some(max) => *max = (*max).max(w),
                None => widths.push(w),
            }
        }
    }
    let mut out = String::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i + 1 < row.len() {
                let _ = write!(out, "{cell:<width$}", width = widths[i]);
            } else {
                out.push_str(cell);
            }
        }
        out.push('\n');
    }
    out
}

/// apimachinery's `duration.ShortHumanDuration`: one unit, rounded down — seconds, minutes,
/// hours, days, then years.
pub fn short_human_duration(d: chrono::Duration) -> String {
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    let (minutes, hours) = (d.num_minutes(), d.num_hours());
    if seconds < 60 {
        format!("{seconds}s")
    } else if minutes < 60 {
        format!("{minutes}m")
    } else if hours < 24 {
        format!("{hours}h")
    } else if hours < 24 * 365 {
        format!("{}d", hours / 24)
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::*;

    #[test]
    fn short_human_durations() {
        let cases = [
            (Duration::seconds(-5), "<invalid>"),
            (Duration::milliseconds(-500), "0s"),
            (Duration::seconds(59), "59s"),
            (Duration::seconds(60), "1m"),
            (Duration::minutes(59), "59m"),
            (Duration::hours(23), "23h"),
            (Duration::hours(24), "1d"),
            (Duration::days(364), "364d"),
            (Duration::days(365), "1y"),
            (Duration::days(3649), "9y"),
        ];
        for (d, want) in cases {
            assert_eq!(short_human_duration(d), want, "{d}");
        }
    }

    #[test]
    fn first_addresses() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(first_address("10.96.0.0/12").unwrap(), ip("10.96.0.1"));
        assert_eq!(first_address("10.100.7.9/16").unwrap(), ip("10.100.0.1"));
        assert_eq!(first_address("fd00:10:96::/108").unwrap(), ip("fd00:10:96::1"));
        assert_eq!(first_address("0.0.0.0/0").unwrap(), ip("0.0.0.1"));
        for bad in ["10.96.0.0", "10.96.0.0/32", "10.96.0/12", "10.96.0.0/x"] {
            assert!(first_address(bad).is_err(), "{bad}");
        }
    }

    /// Columns as Go's tabwriter aligns them: the widest cell plus three, ten at least; a
    /// row's last cell is not padded.
    #[test]
    fn tabulates_as_go() {
        let rows = vec![vec!["A".to_string(), "LONGER HEADER".into(), "X".into()], vec!["a-long-name".into(), "b".into(), "c".into()], vec!["!MISSING! x".into()]];
        assert_eq!(tabulate(&rows), "A             LONGER HEADER   X\na-long-name   b               c\n!MISSING! x\n");
    }

    /// The tables of a cluster made by `generate`: every certificate and kubeconfig with its CA
    /// and a year left, the CAs with ten; a file removed shows as missing, a CA key removed as
    /// externally managed.
    #[test]
    fn check_expiration_tables() {
        let dir = tempfile::tempdir().unwrap();
        let pki_dir = dir.path().join("pki");
        let mut spec = ClusterSpec::new("https://127.0.0.1:6443", "cp");
        spec.nodes = vec!["cp".parse().unwrap()];
        super::super::ensure(&pki_dir, &spec).unwrap();
        std::fs::remove_file(pki_dir.join("scheduler.conf")).unwrap();
        std::fs::remove_file(pki_dir.join("front-proxy-ca.key")).unwrap();
        let ca = pki::info_from_file(&pki_dir.join("ca.crt")).unwrap();
        let now = ca.not_before + Duration::days(1);
        let text = check_expiration(&pki_dir, now).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let columns = |line: &str| line.split("   ").map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect::<Vec<_>>();
        assert_eq!(columns(lines[0]), ["CERTIFICATE", "EXPIRES", "RESIDUAL TIME", "CERTIFICATE AUTHORITY", "EXTERNALLY MANAGED"]);
        let names: Vec<String> = lines[1..].iter().take_while(|l| !l.is_empty()).map(|l| columns(l)[0].clone()).collect();
        assert_eq!(
            names,
            [
                "admin.conf", "apiserver", "apiserver-etcd-client", "apiserver-kubelet-client", "controller-manager.conf",
                "csi-hostpath.conf", "dns.conf", "etcd-healthcheck-client", "etcd-peer", "etcd-server", "front-proxy-client", "kubelet-cp", "kubelet-cp.conf",
                "proxy.conf", "!MISSING! scheduler.conf",
            ]
        );
        let admin = columns(lines[1]);
        assert_eq!(admin[2..], ["364d", "ca", "no"]);
        assert!(admin[1].ends_with(" UTC") && admin[1].contains(&(ca.not_before.format("%Y").to_string().parse::<i32>().unwrap() + 1).to_string()), "{admin:?}");
        let front_proxy = lines.iter().find(|l| l.starts_with("front-proxy-client")).unwrap();
        assert_eq!(columns(front_proxy)[3..], ["front-proxy-ca", "yes"]);

        let cas_at = lines.iter().position(|l| l.starts_with("CERTIFICATE AUTHORITY")).unwrap();
        let cas: Vec<Vec<String>> = lines[cas_at + 1..].iter().map(|l| columns(l)).collect();
        let summary: Vec<(&str, &str, &str)> = cas.iter().map(|c| (c[0].as_str(), c[2].as_str(), c[3].as_str())).collect();
        assert_eq!(summary, [("ca", "9y", "no"), ("etcd-ca", "9y", "no"), ("front-proxy-ca", "9y", "yes")]);
    }

    /// `kubelab certs kubeconfig` prints a kubeconfig for the user and group asked for, signed
    /// by the cluster's CA, and writes nothing.
    #[test]
    fn a_users_kubeconfig() {
        let dir = tempfile::tempdir().unwrap();
        let pki_dir = dir.path().join("pki");
        super::super::ensure(&pki_dir, &ClusterSpec::new("https://127.0.0.1:6443", "cp")).unwrap();
        let files = std::fs::read_dir(&pki_dir).unwrap().count();
        let args = |name: &str, orgs: &[&str]| KubeconfigArgs {
            dirs: DirArgs { cert_dir: pki_dir.clone() },
            client_name: name.into(),
            orgs: orgs.iter().map(|o| o.to_string()).collect(),
            server: "https://cp:6443".into(),
        };
        let text = user_kubeconfig(&args("jane", &["devs"])).unwrap();
        assert_eq!(std::fs::read_dir(&pki_dir).unwrap().count(), files);
        let path = dir.path().join("jane.conf");
        std::fs::write(&path, text).unwrap();
        let jane = kubeconfig::read(&path).unwrap();
        assert_eq!(jane.server, "https://cp:6443");
        let info = jane.client.info().unwrap();
        assert_eq!((info.subject.common_name.as_str(), info.subject.organizations.as_slice()), ("jane", &["devs".to_string()][..]));
        let ca = pki::CertificateAuthority::load(&pki_dir, "ca").unwrap();
        assert!(ca.signed(&jane.client.cert_der().unwrap()));

        assert!(user_kubeconfig(&args("jane doe", &[])).is_err());
        assert!(user_kubeconfig(&args("jane", &["devs", "ops"])).is_err(), "one organization at most");
        let nowhere = KubeconfigArgs { dirs: DirArgs { cert_dir: dir.path().join("none") }, ..args("jane", &[]) };
        assert!(format!("{:#}", user_kubeconfig(&nowhere).unwrap_err()).contains("none/ca.crt"));
    }

    /// `generate`'s flags make the spec kubeadm's flags would.
    #[test]
    fn generate_flags() {
        use clap::Parser as _;
        let cli = crate::Cli::try_parse_from([
            "kubelab", "certs", "generate", "--cert-dir", "/p", "--server", "https://cp:6443", "--node-name", "CP",
            "--node", "cp=10.0.0.2", "--node", "n1=10.0.0.3,fd00::3", "--apiserver-advertise-address", "10.0.0.2",
            "--apiserver-cert-extra-sans", "api.lab,10.0.0.100", "--service-cidr", "10.100.0.0/16", "--service-dns-domain", "lab.local",
        ])
        .unwrap();
        let crate::Command::Certs(CertsArgs { command: CertsCommand::Generate(args) }) = cli.command else { panic!("not certs generate") };
        assert_eq!(args.dirs.cert_dir, Path::new("/p"));
        let spec = args.into_spec().unwrap();
        assert_eq!(spec.node_name, "cp");
        assert_eq!(spec.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["cp", "n1"]);
        assert_eq!(spec.nodes[1].ips.len(), 2);
        assert_eq!(spec.advertise_addresses, ["10.0.0.2".parse::<IpAddr>().unwrap()]);
        assert_eq!(spec.apiserver_cert_extra_sans, ["api.lab", "10.0.0.100"]);
        assert_eq!(spec.service_ip, "10.100.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(spec.dns_domain, "lab.local");

        let defaults = crate::Cli::try_parse_from(["kubelab", "certs", "check-expiration"]).unwrap();
        let crate::Command::Certs(CertsArgs { command: CertsCommand::CheckExpiration(dirs) }) = defaults.command else { panic!() };
        assert_eq!(dirs.cert_dir, Path::new("/var/lib/kubelab/pki"));
        assert!(crate::Cli::try_parse_from(["kubelab", "certs", "generate", "--node", "N 1"]).is_err());
    }
}
