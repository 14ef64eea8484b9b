//! Mirrors kubeadm's `kubeadm token` (cmd/kubeadm/app/cmd/token.go) and the two bootstrap token
//! phases of `kubeadm init` (phases/bootstraptoken/node/token.go and tlsbootstrap.go), with the
//! token format of k8s.io/cluster-bootstrap: how a new node is let in with nothing but a short
//! shared secret.
//!
//! 1. A bootstrap token is `<id>.<secret>` (6 and 16 characters of `[a-z0-9]`), kept as the Secret
//!    `kube-system/bootstrap-token-<id>` of type `bootstrap.kubernetes.io/token` ([`secret_for`]):
//!    the API server (`--enable-bootstrap-token-auth`) takes it as the user
//!    `system:bootstrap:<id>` in `system:bootstrappers` and the Secret's `auth-extra-groups`,
//!    until its `expiration`; the controller manager's token cleaner deletes it then.
//! 2. What those groups may do ([`apply_tls_bootstrap_rbac`], kubeadm's four objects): the group
//!    of kubeadm's default node token may create CertificateSigningRequests (`system:node-
//!    bootstrapper`) and have a node client certificate approved (`…:nodeclient`), and may get
//!    Nodes (`kubeadm:get-nodes`); nodes may have their renewed certificates approved
//!    (`…:selfnodeclient`). The controller manager approves and signs.
//! 3. `kubelab token create` makes a token ([`Create`]) and, with `--bootstrap-kubeconfig`,
//!    writes the kubeconfig `kubeadm join` writes for the kubelet (`bootstrap-kubelet.conf`): the
//!    cluster's server and CA from the admin kubeconfig, the token as the user. A node agent
//!    started with it as `--bootstrap-kubeconfig` asks for its client certificate and joins.
//!    `list` and `delete` are kubeadm's; `rbac` applies step 2 (for a cluster not made by
//!    `kubelab up`, such as the lab).
//!
//! Where kubelab differs from kubeadm: no `kubeadm join` (the node agent's flags do its work), so
//! no discovery through the signed `cluster-info` ConfigMap: the bootstrap kubeconfig carries the
//! CA itself, as a kubeconfig handed to the new node would.

use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use chrono::{DateTime, SecondsFormat, Utc};
use clap::{Args, Subcommand};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

/// The namespace of bootstrap token Secrets.
const KUBE_SYSTEM: &str = "kube-system";
/// Their type.
const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// kubeadm's group for the tokens it makes to join nodes.
pub const DEFAULT_NODE_TOKEN_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";
/// What a token may be used for (`usage-bootstrap-<usage>`).
const USAGES: [&str; 2] = ["signing", "authentication"];
/// The field manager of what [`apply_tls_bootstrap_rbac`] applies.
const MANAGER: &str = "kubelab-up";

/// `kubelab token`.
#[derive(Args, Debug)]
pub struct TokenArgs {
    #[command(subcommand)]
    pub command: TokenCommand,
    /// The kubeconfig to talk to the API server with (an administrator's).
    #[arg(long, global = true, default_value = "/var/lib/kubelab/pki/admin.conf")]
    pub kubeconfig: PathBuf,
}

#[derive(Subcommand, Debug)]
pub enum TokenCommand {
    /// Create a bootstrap token on the server and print it (kubeadm token create).
    Create(Create),
    /// List the bootstrap tokens on the server (kubeadm token list).
    List,
    /// Delete bootstrap tokens, each given as its id or the whole token (kubeadm token delete).
    Delete {
        #[arg(required = true)]
        tokens: Vec<String>,
    },
    /// Print a new random token without creating it (kubeadm token generate).
    Generate,
    /// Let bootstrap tokens join nodes: apply kubeadm's TLS bootstrap RBAC (what `kubeadm init
    /// phase bootstrap-token` applies; `kubelab up` applies it at every start).
    Rbac,
}

/// `kubelab token create [token]`.
#[derive(Args, Debug)]
pub struct Create {
    /// The token to create (`[a-z0-9]{6}.[a-z0-9]{16}`); a random one when not given.
    pub token: Option<String>,
    /// How long until the token is deleted ("0" for never), as Go durations: 24h, 90m, 1h30m.
    #[arg(long, default_value = "24h0m0s")]
    pub ttl: String,
    /// A human-friendly description of the token's use.
    #[arg(long, default_value = "")]
    pub description: String,
    /// Extra groups the token authenticates as (each `system:bootstrappers:…`).
    #[arg(long, value_delimiter = ',', default_value = DEFAULT_NODE_TOKEN_GROUP)]
    pub groups: Vec<String>,
    /// What the token may be used for: signing, authentication.
    #[arg(long, value_delimiter = ',', default_value = "signing,authentication")]
    pub usages: Vec<String>,
    /// Also write a kubeconfig for a node agent's --bootstrap-kubeconfig (kubeadm join's
    /// bootstrap-kubelet.conf): this cluster's server and CA, the token as the user.
    #[arg(long)]
    pub bootstrap_kubeconfig: Option<PathBuf>,
}

/// A token's two halves (cluster-bootstrap's `BootstrapTokenString`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootstrapToken {
    pub id: String,
    pub secret: String,
}

impl BootstrapToken {
    /// Parse `<id>.<secret>`; the error is kubeadm's.
    pub fn parse(token: &str) -> anyhow::Result<Self> {
        let ok = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        match token.split_once('.') {
            Some((id, secret)) if ok(id, 6) && ok(secret, 16) => Ok(Self { id: id.into(), secret: secret.into() }),
            _ => bail!("the bootstrap token {token:?} was not of the form \"^([a-z0-9]{{6}})\\.([a-z0-9]{{16}})$\""),
        }
    }

    /// A random token, each character one of the 36 (cluster-bootstrap's GenerateBootstrapToken).
    pub fn generate() -> anyhow::Result<Self> {
        const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        let mut bytes = Vec::with_capacity(22);
        let mut urandom = std::fs::File::open("/dev/urandom").context("opening /dev/urandom")?;
        // Rejection sampling keeps every character equally likely (252 = 7 × 36).
        while bytes.len() < 22 {
            let mut b = [0u8; 32];
            urandom.read_exact(&mut b).context("reading /dev/urandom")?;
            bytes.extend(b.iter().filter(|&&x| x < 252).map(|&x| CHARS[(x % 36) as usize]));
        }
        let s = String::from_utf8(bytes[..22].to_vec()).expect("ASCII");
        Ok(Self { id: s[..6].into(), secret: s[6..].into() })
    }

    pub fn secret_name(&self) -> String {
        format!("bootstrap-token-{}", self.id)
    }
}

impl std::fmt::Display for BootstrapToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.id, self.secret)
    }
}

/// A Go duration as kubeadm's `--ttl` takes it (`24h`, `1h30m`, `90s`, `0`).
pub fn parse_go_duration(s: &str) -> anyhow::Result<Duration> {
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let (mut total, mut rest) = (0f64, s);
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let value: f64 = rest[..digits].parse().map_err(|_| anyhow::anyhow!("time: invalid duration {s:?}"))?;
        rest = &rest[digits..];
        let unit = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let seconds = match &rest[..unit] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "" => bail!("time: missing unit in duration {s:?}"),
            u => bail!("time: unknown unit {u:?} in duration {s:?}"),
        };
        total += value * seconds;
        rest = &rest[unit..];
    }
    Ok(Duration::from_secs_f64(total))
}

/// Step 1: the Secret kubeadm makes for a token (bootstraptoken/v1's `BootstrapTokenToSecret`),
/// after checking the groups and usages as kubeadm does.
pub fn secret_for(token: &BootstrapToken, description: &str, expiration: Option<DateTime<Utc>>, usages: &[String], groups: &[String]) -> anyhow::Result<Secret> {
    for usage in usages {
        if !USAGES.contains(&usage.as_str()) {
            bail!("invalid bootstrap token usage string: {usage}, valid usage options: {}", USAGES.join(","));
        }
    }
    for group in groups {
        let rest = group.strip_prefix("system:bootstrappers:").unwrap_or("");
        let ok = !rest.is_empty()
            && rest.len() <= 256
            && rest.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b':' || b == b'-')
            && rest.bytes().last().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        if !ok {
            bail!("bootstrap group {group:?} is invalid (must match ^system:bootstrappers:[a-z0-9:-]{{0,255}}[a-z0-9]$)");
        }
    }
    let mut data = serde_json::Map::new();
    data.insert("token-id".into(), json!(token.id));
    data.insert("token-secret".into(), json!(token.secret));
    if !description.is_empty() {
        data.insert("description".into(), json!(description));
    }
    if let Some(at) = expiration {
        data.insert("expiration".into(), json!(at.to_rfc3339_opts(SecondsFormat::Secs, true)));
    }
    for usage in usages {
        data.insert(format!("usage-bootstrap-{usage}"), json!("true"));
    }
    if !groups.is_empty() {
        data.insert("auth-extra-groups".into(), json!(groups.join(",")));
    }
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": token.secret_name(), "namespace": KUBE_SYSTEM},
        "type": SECRET_TYPE,
        "stringData": data,
    }))?)
}

/// Step 2: kubeadm's TLS bootstrap RBAC, applied at every start of `kubelab up` and by
/// `kubelab token rbac` (server-side apply, so that a second run changes nothing).
pub async fn apply_tls_bootstrap_rbac(kube: &kube::Client) -> anyhow::Result<()> {
    let pp = PatchParams::apply(MANAGER).force();
    let role: ClusterRole = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "kubeadm:get-nodes"},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}],
    }))?;
    Api::<ClusterRole>::all(kube.clone()).patch("kubeadm:get-nodes", &pp, &Patch::Apply(&role)).await.context("applying the ClusterRole kubeadm:get-nodes")?;
    let bindings = [
        ("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", DEFAULT_NODE_TOKEN_GROUP),
        ("kubeadm:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", DEFAULT_NODE_TOKEN_GROUP),
        ("kubeadm:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"),
        ("kubeadm:get-nodes", "kubeadm:get-nodes", DEFAULT_NODE_TOKEN_GROUP),
    ];
    for (name, role, group) in bindings {
        let binding: ClusterRoleBinding = serde_json::from_value(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
        }))?;
        Api::<ClusterRoleBinding>::all(kube.clone()).patch(name, &pp, &Patch::Apply(&binding)).await.with_context(|| format!("applying the ClusterRoleBinding {name}"))?;
    }
    Ok(())
}

/// Step 3: `kubelab token`.
pub fn run(args: TokenArgs) -> anyhow::Result<()> {
    if let TokenCommand::Generate = args.command {
        println!("{}", BootstrapToken::generate()?);
        return Ok(());
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("start the async runtime")?;
    rt.block_on(async {
        let kube = client::client(&client::Connection::Kubeconfig(args.kubeconfig.clone())).await?;
        let secrets = Api::<Secret>::namespaced(kube, KUBE_SYSTEM);
        match args.command {
            TokenCommand::Create(c) => create(&secrets, &args.kubeconfig, c).await,
            TokenCommand::List => list(&secrets).await,
            TokenCommand::Delete { tokens } => delete(&secrets, &tokens).await,
            TokenCommand::Rbac => {
                apply_tls_bootstrap_rbac(&secrets.into_client()).await?;
                println!("the TLS bootstrap RBAC is in place: the default node token's group may ask for node client certificates, which are approved");
                Ok(())
            }
            TokenCommand::Generate => unreachable!("handled above"),
        }
    })
}

async fn create(secrets: &Api<Secret>, admin: &Path, c: Create) -> anyhow::Result<()> {
    let token = match &c.token {
        Some(t) => BootstrapToken::parse(t)?,
        None => BootstrapToken::generate()?,
    };
    let ttl = parse_go_duration(&c.ttl).with_context(|| format!("--ttl {:?}", c.ttl))?;
    let expiration = (!ttl.is_zero()).then(|| Utc::now() + chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::MAX));
    let secret = secret_for(&token, &c.description, expiration, &c.usages, &c.groups)?;
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => bail!("a token with id {:?} already exists", token.id),
        Err(e) => return Err(e).context("creating the bootstrap token's Secret"),
    }
    if let Some(path) = &c.bootstrap_kubeconfig {
        write_bootstrap_kubeconfig(admin, &token, path)?;
        eprintln!("bootstrap kubeconfig written to {}", path.display());
    }
    println!("{token}");
    Ok(())
}

/// kubeadm join's `bootstrap-kubelet.conf`: the admin kubeconfig's server and CA, the token as
/// the user `tls-bootstrap-token-user`, mode 0600 (it holds a credential).
fn write_bootstrap_kubeconfig(admin: &Path, token: &BootstrapToken, path: &Path) -> anyhow::Result<()> {
    let kc = kube::config::Kubeconfig::read_from(admin).with_context(|| format!("reading {}", admin.display()))?;
    let current = kc.current_context.clone().unwrap_or_default();
    let context = kc.contexts.iter().find(|c| c.name == current).and_then(|c| c.context.as_ref()).with_context(|| format!("{}: no current context", admin.display()))?;
    let cluster = kc.clusters.iter().find(|c| c.name == context.cluster).and_then(|c| c.cluster.as_ref()).with_context(|| format!("{}: no cluster {:?}", admin.display(), context.cluster))?;
    let server = cluster.server.clone().with_context(|| format!("{}: the cluster has no server", admin.display()))?;
    let ca = match (&cluster.certificate_authority_data, &cluster.certificate_authority) {
        (Some(data), _) => data.clone(),
        (None, Some(file)) => {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.encode(std::fs::read(file).with_context(|| format!("reading {file}"))?)
        }
        (None, None) => bail!("{}: the cluster has no certificate authority", admin.display()),
    };
    let mut text = String::new();
    writeln!(text, "apiVersion: v1\nkind: Config\nclusters:\n- name: kubernetes\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}")?;
    writeln!(text, "contexts:\n- name: tls-bootstrap-token-user@kubernetes\n  context:\n    cluster: kubernetes\n    user: tls-bootstrap-token-user")?;
    writeln!(text, "current-context: tls-bootstrap-token-user@kubernetes\nusers:\n- name: tls-bootstrap-token-user\n  user:\n    token: {token}")?;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path).with_context(|| format!("writing {}", path.display()))?;
    std::io::Write::write_all(&mut f, text.as_bytes()).with_context(|| format!("writing {}", path.display()))
}

async fn list(secrets: &Api<Secret>) -> anyhow::Result<()> {
    let list = secrets.list(&ListParams::default().fields(&format!("type={SECRET_TYPE}"))).await.context("listing the bootstrap tokens")?;
    println!("{:<24}{:<8}{:<22}{:<26}{:<32}EXTRA GROUPS", "TOKEN", "TTL", "EXPIRES", "USAGES", "DESCRIPTION");
    let now = Utc::now();
    for s in list.items {
        let get = |k: &str| s.data.as_ref().and_then(|d| d.get(k)).map(|ByteString(b)| String::from_utf8_lossy(b).into_owned());
        let (Some(id), Some(secret)) = (get("token-id"), get("token-secret")) else { continue };
        let expires = get("expiration").and_then(|e| DateTime::parse_from_rfc3339(&e).ok()).map(|e| e.with_timezone(&Utc));
        let (ttl, expires) = match expires {
            Some(at) => (human(at - now), at.to_rfc3339_opts(SecondsFormat::Secs, true)),
            None => ("<forever>".into(), "<never>".into()),
        };
        let usages: Vec<&str> = USAGES.iter().copied().filter(|u| get(&format!("usage-bootstrap-{u}")).as_deref() == Some("true")).collect();
        let description = get("description").unwrap_or_else(|| "<none>".into());
        println!("{:<24}{:<8}{:<22}{:<26}{:<32}{}", format!("{id}.{secret}"), ttl, expires, usages.join(","), description, get("auth-extra-groups").unwrap_or_default());
    }
    Ok(())
}

/// A TTL as kubeadm prints it (`23h`, `59m`, `<invalid>` once past).
fn human(d: chrono::Duration) -> String {
    let s = d.num_seconds();
    match s {
        ..0 => "<invalid>".into(),
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        7200..172800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

async fn delete(secrets: &Api<Secret>, tokens: &[String]) -> anyhow::Result<()> {
    for t in tokens {
        let id = match BootstrapToken::parse(t) {
            Ok(token) => token.id,
            Err(_) if t.len() == 6 && t.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) => t.clone(),
            Err(_) => bail!("given token didn't match pattern \"^([a-z0-9]{{6}})$\" or \"^([a-z0-9]{{6}})\\.([a-z0-9]{{16}})$\""),
        };
        secrets.delete(&format!("bootstrap-token-{id}"), &DeleteParams::default()).await.with_context(|| format!("failed to delete bootstrap token {id:?}"))?;
        println!("bootstrap token {id:?} deleted");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_parse_generate_and_name_their_secret() {
        let t = BootstrapToken::parse("abcdef.0123456789abcdef").unwrap();
        assert_eq!((t.id.as_str(), t.secret.as_str(), t.secret_name().as_str()), ("abcdef", "0123456789abcdef", "bootstrap-token-abcdef"));
        for bad in ["abcdef0123456789abcdef", "ABCDEF.0123456789abcdef", "abcde.0123456789abcdef", "abcdef.0123456789abcde", "abcdef.0123456789abcdeF"] {
            assert!(BootstrapToken::parse(bad).is_err(), "{bad}");
        }
        let g = BootstrapToken::generate().unwrap();
        assert_eq!(BootstrapToken::parse(&g.to_string()).unwrap(), g);
        assert_ne!(BootstrapToken::generate().unwrap(), g);
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("24h0m0s").unwrap(), Duration::from_secs(86400));
        assert_eq!(parse_go_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_go_duration("10").is_err());
        assert!(parse_go_duration("3d").is_err());
    }

    #[test]
    fn the_secret_is_kubeadms() {
        let t = BootstrapToken::parse("abcdef.0123456789abcdef").unwrap();
        let at = DateTime::parse_from_rfc3339("2030-01-02T03:04:05Z").unwrap().with_timezone(&Utc);
        let s = secret_for(&t, "join", Some(at), &["signing".into(), "authentication".into()], &[DEFAULT_NODE_TOKEN_GROUP.into()]).unwrap();
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["metadata"]["name"], "bootstrap-token-abcdef");
        assert_eq!(v["metadata"]["namespace"], "kube-system");
        assert_eq!(v["type"], "bootstrap.kubernetes.io/token");
        let d = &v["stringData"];
        assert_eq!((d["token-id"].as_str(), d["token-secret"].as_str()), (Some("abcdef"), Some("0123456789abcdef")));
        assert_eq!(d["expiration"], "2030-01-02T03:04:05Z");
        assert_eq!((d["usage-bootstrap-signing"].as_str(), d["usage-bootstrap-authentication"].as_str()), (Some("true"), Some("true")));
        assert_eq!(d["auth-extra-groups"], DEFAULT_NODE_TOKEN_GROUP);
        assert_eq!(d["description"], "join");
        let e = secret_for(&t, "", None, &["bogus".into()], &[]).unwrap_err().to_string();
        assert!(e.contains("invalid bootstrap token usage string: bogus"), "{e}");
        for g in ["system:masters", "system:bootstrappers:", "system:bootstrappers:Foo", "system:bootstrappers:x-"] {
            assert!(secret_for(&t, "", None, &[], &[g.into()]).is_err(), "{g}");
        }
        assert!(!secret_for(&t, "", None, &[], &[]).unwrap().string_data.unwrap().contains_key("expiration"));
    }
}
