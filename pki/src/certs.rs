//! Mirrors kubeadm's cmd/kubeadm/app/phases/certs/certs.go (`writeCertificateFilesIfNotExist`,
//! `CreateServiceAccountKeyAndPublicKeyFiles`) with the expiry check of its `renewal` package:
//! keep what is good, make what is missing, issue again what is stale — and say which.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rcgen::{KeyPair, PKCS_ECDSA_P256_SHA256};

use crate::cert::{self, Config};
use crate::error::{Error, Result};
use crate::keyutil;
use crate::pki_helpers::{CertAndKey, CertificateAuthority, paths_for_cert_and_key};

/// kubeadm's base name of the service account signing key pair: `sa.key` and `sa.pub`.
pub const SERVICE_ACCOUNT_KEY_BASE_NAME: &str = "sa";

/// What an `ensure_*` call did, for its caller to log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// There was nothing; it was made.
    Created,
    /// There was something that would not do; it was made again.
    Renewed(RenewReason),
    /// What was there is good and was left alone.
    Kept,
}

/// Why a certificate (or key) that exists is made again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RenewReason {
    /// It cannot be read or parsed (a half-written or foreign file).
    Unreadable(String),
    /// The CA did not sign it (the CA was made again, or it came from elsewhere).
    NotSignedByCa,
    /// The key file does not hold the certificate's key.
    KeyMismatch,
    /// It is not what the configuration asks for any more: a field, what it has and what is
    /// wanted (a new name for the API server, say).
    Mismatch { field: &'static str, had: String, want: String },
    /// It expires within the renewal window.
    ExpiresSoon { not_after: DateTime<Utc> },
}

impl fmt::Display for RenewReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RenewReason::Unreadable(e) => write!(f, "unreadable ({e})"),
            RenewReason::NotSignedByCa => f.write_str("not signed by the CA"),
            RenewReason::KeyMismatch => f.write_str("the key does not match the certificate"),
            RenewReason::Mismatch { field, had, want } => write!(f, "{field} changed from {had} to {want}"),
            RenewReason::ExpiresSoon { not_after } => write!(f, "expires {}", not_after.format("%Y-%m-%d %H:%M UTC")),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Created => f.write_str("created"),
            Outcome::Renewed(why) => write!(f, "renewed: {why}"),
            Outcome::Kept => f.write_str("kept"),
        }
    }
}

/// The CA `<dir>/<name>.crt` + `.key`: loaded when both exist, made (self-signed, ten years)
/// when neither does. Half of a pair is an error: a new CA would orphan everything the old one
/// signed. A CA is never renewed here; one near its end shows in `check-expiration`.
pub fn ensure_ca(dir: &Path, name: &str, common_name: &str) -> Result<(CertificateAuthority, Outcome)> {
    let (crt, key) = paths_for_cert_and_key(dir, name);
    match (exists(&crt)?, exists(&key)?) {
        (true, true) => Ok((CertificateAuthority::load(dir, name)?, Outcome::Kept)),
        (false, false) => {
            let ca = CertificateAuthority::new(common_name)?;
            ca.write(dir, name)?;
            Ok((ca, Outcome::Created))
        }
        (true, false) => Err(Error::Incomplete { present: crt, missing: key }),
        (false, true) => Err(Error::Incomplete { present: key, missing: crt }),
    }
}

/// The certificate `<dir>/<name>.crt` + `.key` as `config` describes it, signed by `ca`: kept
/// when [`renewal_reason`] finds nothing wrong with it, else (re)issued with a new key.
pub fn ensure_cert(dir: &Path, name: &str, ca: &CertificateAuthority, config: &Config, renew_before: Duration) -> Result<Outcome> {
    let (crt, key) = paths_for_cert_and_key(dir, name);
    let outcome = if !exists(&crt)? && !exists(&key)? {
        Outcome::Created
    } else {
        let reason = match CertAndKey::load(dir, name) {
            Ok(existing) => renewal_reason(&existing, ca, config, renew_before, Utc::now()),
            Err(e) => Some(RenewReason::Unreadable(e.to_string())),
        };
        match reason {
            None => return Ok(Outcome::Kept),
            Some(why) => Outcome::Renewed(why),
        }
    };
    ca.sign(config)?.write(dir, name)?;
    Ok(outcome)
}

/// The decision [`ensure_cert`] acts on, kept free of I/O: why `existing` cannot stay as the
/// certificate `config` describes, signed by `ca`, at `now` — or `None` when it can. A
/// certificate whose end is less than `renew_before` away is renewed
/// ([`crate::DEFAULT_RENEW_BEFORE`] says why 30 days).
pub fn renewal_reason(
    existing: &CertAndKey,
    ca: &CertificateAuthority,
    config: &Config,
    renew_before: Duration,
    now: DateTime<Utc>,
) -> Option<RenewReason> {
    let der = match existing.cert_der() {
        Ok(der) => der,
        Err(e) => return Some(RenewReason::Unreadable(e.to_string())),
    };
    let parsed = match cert::parse_full(&der, "certificate") {
        Ok(parsed) => parsed,
        Err(e) => return Some(RenewReason::Unreadable(e.to_string())),
    };
    let info = match cert::cert_info(&parsed) {
        Ok(info) => info,
        Err(e) => return Some(RenewReason::Unreadable(e.to_string())),
    };
    if !ca.signed(&der) {
        return Some(RenewReason::NotSignedByCa);
    }
    match keyutil::private_key_from_pem(&existing.key_pem, "key") {
        Ok(key) if keyutil::public_key_bits(&key) == parsed.public_key().subject_public_key.data.as_ref() => {}
        Ok(_) => return Some(RenewReason::KeyMismatch),
        Err(e) => return Some(RenewReason::Unreadable(e.to_string())),
    }
    let mismatch = |field, had: String, want: String| (had != want).then_some(RenewReason::Mismatch { field, had, want });
    let want_alt = config.alt_names.dedup();
    let had_alt = info.alt_names.dedup();
    let checks = [
        mismatch("common name", format!("{:?}", info.subject.common_name), format!("{:?}", config.common_name)),
        mismatch("organizations", sorted(&info.subject.organizations), sorted(&config.organizations)),
        mismatch("usages", sorted(&info.usages), sorted(&config.usages)),
        mismatch("DNS names", sorted(&had_alt.dns_names), sorted(&want_alt.dns_names)),
        mismatch("IP addresses", sorted(&had_alt.ips), sorted(&want_alt.ips)),
        mismatch("CA", info.is_ca.to_string(), false.to_string()),
    ];
    if let Some(reason) = checks.into_iter().flatten().next() {
        return Some(reason);
    }
    let left = info.not_after.signed_duration_since(now);
    let window = chrono::Duration::from_std(renew_before).unwrap_or(chrono::Duration::MAX);
    (left < window).then_some(RenewReason::ExpiresSoon { not_after: info.not_after })
}

/// The service account signing key pair: `<dir>/sa.key` (PKCS#8 PEM, 0600) and `<dir>/sa.pub`
/// (PKIX PEM, 0600), an ECDSA P-256 key the API server signs ES256 tokens with (kubeadm's
/// `CreateServiceAccountKeyAndPublicKeyFiles`). A key once made is kept for good — a new one
/// would invalidate every token issued — so an unreadable sa.key is an error, while a missing
/// or stale sa.pub is written again from it.
pub fn ensure_service_account_key_pair(dir: &Path) -> Result<Outcome> {
    let key_path = dir.join(format!("{SERVICE_ACCOUNT_KEY_BASE_NAME}.key"));
    let pub_path = dir.join(format!("{SERVICE_ACCOUNT_KEY_BASE_NAME}.pub"));
    if exists(&key_path)? {
        let key = keyutil::private_key_from_file(&key_path)?;
        let reason = match std::fs::read(&pub_path) {
            Ok(pem) => match keyutil::public_key_bits_from_pem(&pem, &pub_path.display().to_string()) {
                Ok(bits) if bits == keyutil::public_key_bits(&key) => return Ok(Outcome::Kept),
                Ok(_) => RenewReason::KeyMismatch,
                Err(e) => RenewReason::Unreadable(e.to_string()),
            },
            Err(e) => RenewReason::Unreadable(Error::io("reading", &pub_path)(e).to_string()),
        };
        keyutil::write_key(&pub_path, key.public_key_pem().as_bytes())?;
        return Ok(Outcome::Renewed(reason));
    }
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(|source| Error::Sign { what: "the service account key".into(), source })?;
    keyutil::write_key(&key_path, key.serialize_pem().as_bytes())?;
    keyutil::write_key(&pub_path, key.public_key_pem().as_bytes())?;
    Ok(Outcome::Created)
}

fn exists(path: &Path) -> Result<bool> {
    path.try_exists().map_err(Error::io("looking for", path))
}

fn sorted<T: Ord + fmt::Display + Clone>(items: &[T]) -> String {
    let mut items = items.to_vec();
    items.sort();
    items.dedup();
    format!("[{}]", items.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", "))
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;
    use crate::cert::{AltNames, Usage};
    use crate::{CERTIFICATE_VALIDITY, DEFAULT_RENEW_BEFORE};

    fn apiserver(dns: &[&str], ips: &[&str]) -> Config {
        Config {
            common_name: "kube-apiserver".into(),
            organizations: vec![],
            alt_names: AltNames {
                dns_names: dns.iter().map(|s| s.to_string()).collect(),
                ips: ips.iter().map(|s| s.parse::<IpAddr>().unwrap()).collect(),
            },
            usages: vec![Usage::ServerAuth],
        }
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    /// The first call makes the CA, the next ones load it; half a CA is not papered over.
    #[test]
    fn ensure_ca_makes_then_keeps() {
        let dir = tempfile::tempdir().unwrap();
        let (made, outcome) = ensure_ca(dir.path(), "ca", "kubernetes").unwrap();
        assert_eq!(outcome, Outcome::Created);
        let (kept, outcome) = ensure_ca(dir.path(), "ca", "kubernetes").unwrap();
        assert_eq!(outcome, Outcome::Kept);
        assert_eq!(kept.cert_der(), made.cert_der());
        assert_eq!(mode(&dir.path().join("ca.key")), 0o600);
        assert_eq!(mode(&dir.path().join("ca.crt")), 0o644);

        std::fs::remove_file(dir.path().join("ca.key")).unwrap();
        let e = ensure_ca(dir.path(), "ca", "kubernetes").unwrap_err();
        assert!(matches!(&e, Error::Incomplete { missing, .. } if missing.ends_with("ca.key")), "{e}");
        assert!(dir.path().join("ca.crt").exists(), "the certificate is left as it was");
    }

    /// A good certificate is kept as it is; a new SAN, the renewal window, another CA, a
    /// foreign key or a damaged file each get it issued again, with that reason.
    #[test]
    fn ensure_cert_keeps_or_reissues() {
        let dir = tempfile::tempdir().unwrap();
        let (ca, _) = ensure_ca(dir.path(), "ca", "kubernetes").unwrap();
        let config = apiserver(&["kubernetes", "localhost"], &["10.96.0.1"]);
        let ensure = |ca: &CertificateAuthority, config: &Config, renew_before| ensure_cert(dir.path(), "apiserver", ca, config, renew_before).unwrap();
        let files = || CertAndKey::load(dir.path(), "apiserver").unwrap();

        assert_eq!(ensure(&ca, &config, DEFAULT_RENEW_BEFORE), Outcome::Created);
        assert_eq!(mode(&dir.path().join("apiserver.key")), 0o600);
        assert_eq!(mode(&dir.path().join("apiserver.crt")), 0o644);
        let first = files();
        assert_eq!(ensure(&ca, &config, DEFAULT_RENEW_BEFORE), Outcome::Kept);
        assert_eq!(files(), first, "not rewritten");
        let reordered = apiserver(&["localhost", "kubernetes", "localhost"], &["10.96.0.1"]);
        assert_eq!(ensure(&ca, &reordered, DEFAULT_RENEW_BEFORE), Outcome::Kept, "names are a set");

        let more = apiserver(&["kubernetes", "localhost", "cp.example"], &["10.96.0.1"]);
        let want = RenewReason::Mismatch { field: "DNS names", had: "[kubernetes, localhost]".into(), want: "[cp.example, kubernetes, localhost]".into() };
        assert_eq!(ensure(&ca, &more, DEFAULT_RENEW_BEFORE), Outcome::Renewed(want));
        assert_ne!(files(), first);
        assert_eq!(files().info().unwrap().alt_names.dns_names, ["cp.example", "kubernetes", "localhost"]);
        assert_eq!(ensure(&ca, &more, DEFAULT_RENEW_BEFORE), Outcome::Kept);

        let longer_than_a_certificate_lives = CERTIFICATE_VALIDITY + Duration::from_secs(24 * 3600);
        assert!(matches!(ensure(&ca, &more, longer_than_a_certificate_lives), Outcome::Renewed(RenewReason::ExpiresSoon { .. })));

        let other_ca = CertificateAuthority::new("kubernetes").unwrap();
        assert_eq!(ensure(&other_ca, &more, DEFAULT_RENEW_BEFORE), Outcome::Renewed(RenewReason::NotSignedByCa));
        assert!(other_ca.signed(&files().cert_der().unwrap()));

        let (_, key_path) = paths_for_cert_and_key(dir.path(), "apiserver");
        std::fs::write(&key_path, other_ca.sign(&more).unwrap().key_pem).unwrap();
        assert_eq!(ensure(&other_ca, &more, DEFAULT_RENEW_BEFORE), Outcome::Renewed(RenewReason::KeyMismatch));
        assert_eq!(mode(&key_path), 0o600, "the key written again has its mode back");

        std::fs::write(dir.path().join("apiserver.crt"), "half a cert").unwrap();
        assert!(matches!(ensure(&other_ca, &more, DEFAULT_RENEW_BEFORE), Outcome::Renewed(RenewReason::Unreadable(_))));
        std::fs::remove_file(dir.path().join("apiserver.crt")).unwrap();
        assert!(matches!(ensure(&other_ca, &more, DEFAULT_RENEW_BEFORE), Outcome::Renewed(RenewReason::Unreadable(e)) if e.contains("apiserver.crt")));
        assert_eq!(ensure(&other_ca, &more, DEFAULT_RENEW_BEFORE), Outcome::Kept);
    }

    /// renewal_reason, one certificate against configurations and clocks: the first difference
    /// found is the reason, and the renewal window is measured from `now`.
    #[test]
    fn renewal_reasons() {
        let ca = CertificateAuthority::new("kubernetes").unwrap();
        let base = Config {
            common_name: "system:node:n1".into(),
            organizations: vec!["system:nodes".into()],
            alt_names: AltNames::default(),
            usages: vec![Usage::ClientAuth],
        };
        let existing = ca.sign(&base).unwrap();
        let not_after = existing.info().unwrap().not_after;
        let now = Utc::now();
        let month = DEFAULT_RENEW_BEFORE;
        let mismatch = |field, had: &str, want: &str| Some(RenewReason::Mismatch { field, had: had.into(), want: want.into() });
        let cases: Vec<(&str, Config, DateTime<Utc>, Option<RenewReason>)> = vec![
            ("as issued", base.clone(), now, None),
            ("another user", Config { common_name: "system:node:n2".into(), ..base.clone() }, now, mismatch("common name", "\"system:node:n1\"", "\"system:node:n2\"")),
            ("another group", Config { organizations: vec!["system:masters".into()], ..base.clone() }, now, mismatch("organizations", "[system:nodes]", "[system:masters]")),
            ("also serving", Config { usages: vec![Usage::ServerAuth, Usage::ClientAuth], ..base.clone() }, now, mismatch("usages", "[client auth]", "[server auth, client auth]")),
            (
                "an address",
                Config { alt_names: AltNames { dns_names: vec![], ips: vec!["10.0.0.1".parse().unwrap()] }, ..base.clone() },
                now,
                mismatch("IP addresses", "[]", "[10.0.0.1]"),
            ),
            ("31 days before the end", base.clone(), not_after - chrono::Duration::days(31), None),
            ("29 days before the end", base.clone(), not_after - chrono::Duration::days(29), Some(RenewReason::ExpiresSoon { not_after })),
            ("after the end", base.clone(), not_after + chrono::Duration::days(1), Some(RenewReason::ExpiresSoon { not_after })),
        ];
        for (name, config, at, want) in cases {
            assert_eq!(renewal_reason(&existing, &ca, &config, month, at), want, "{name}");
        }
        let swapped = CertAndKey { key_pem: ca.sign(&base).unwrap().key_pem, ..existing.clone() };
        assert_eq!(renewal_reason(&swapped, &ca, &base, month, now), Some(RenewReason::KeyMismatch));
    }

    /// sa.key is made once and never replaced; sa.pub follows it.
    #[test]
    fn the_service_account_key_pair() {
        let dir = tempfile::tempdir().unwrap();
        let (key, public) = (dir.path().join("sa.key"), dir.path().join("sa.pub"));
        assert_eq!(ensure_service_account_key_pair(dir.path()).unwrap(), Outcome::Created);
        let private_pem = std::fs::read_to_string(&key).unwrap();
        let public_pem = std::fs::read_to_string(&public).unwrap();
        assert!(private_pem.starts_with("-----BEGIN PRIVATE KEY-----"), "PKCS#8");
        assert!(public_pem.starts_with("-----BEGIN PUBLIC KEY-----"), "PKIX");
        assert_eq!((mode(&key), mode(&public)), (0o600, 0o600));
        assert_eq!(ensure_service_account_key_pair(dir.path()).unwrap(), Outcome::Kept);

        std::fs::remove_file(&public).unwrap();
        assert!(matches!(ensure_service_account_key_pair(dir.path()).unwrap(), Outcome::Renewed(RenewReason::Unreadable(_))));
        assert_eq!(std::fs::read_to_string(&public).unwrap(), public_pem);
        std::fs::write(&public, KeyPair::generate().unwrap().public_key_pem()).unwrap();
        assert_eq!(ensure_service_account_key_pair(dir.path()).unwrap(), Outcome::Renewed(RenewReason::KeyMismatch));
        assert_eq!(std::fs::read_to_string(&public).unwrap(), public_pem);
        assert_eq!(std::fs::read_to_string(&key).unwrap(), private_pem, "sa.key never changes");

        std::fs::write(&key, "not a key").unwrap();
        assert!(matches!(ensure_service_account_key_pair(dir.path()), Err(Error::Key { .. })));
        assert_eq!(std::fs::read_to_string(&key).unwrap(), "not a key", "an unreadable sa.key is not replaced");
    }
}
