//! Mirrors pkg/controller/certificates/cleaner/cleaner.go: `csrcleaner`, which deletes
//! certificate signing requests nobody needs any more — kubelets make one at every rotation, so
//! without it they pile up.
//!
//! Every [`POLLING_INTERVAL`] (and once its cache has synced), each request in the cache is
//! judged by [`should_delete`] and deleted if:
//! 1. approved and issued, and approved more than an hour ago ([`APPROVED_EXPIRATION`]);
//! 2. denied more than an hour ago ([`DENIED_EXPIRATION`]);
//! 3. failed more than an hour ago (the same);
//! 4. pending (no conditions) and created more than a day ago ([`PENDING_EXPIRATION`]);
//! 5. approved and issued, and its certificate has expired.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams};
use kube::runtime::reflector;
use kube::runtime::{WatchStreamExt, watcher};

use crate::certificates::certificate_controller::has_certificate;
use crate::error::{Error, Result};

/// The controller's name (kube-controller-manager's `csrcleaner`).
pub const NAME: &str = "csrcleaner";
const TARGET: &str = "controllers::csrcleaner";
/// How often every request is looked at.
pub const POLLING_INTERVAL: Duration = Duration::from_secs(3600);
pub const APPROVED_EXPIRATION: Duration = Duration::from_secs(3600);
pub const DENIED_EXPIRATION: Duration = Duration::from_secs(3600);
pub const PENDING_EXPIRATION: Duration = Duration::from_secs(24 * 3600);

/// `isOlderThan`: a time that is set and more than `d` before `now`.
fn is_older_than(t: Option<&Time>, d: Duration, now: Timestamp) -> bool {
    t.is_some_and(|t| now.duration_since(t.0).as_secs_f64() > d.as_secs_f64())
}

/// `isExpired`: the first certificate of `status.certificate` ends before `now` (one that
/// cannot be read is not expired).
fn is_expired(csr: &CertificateSigningRequest, now: Timestamp) -> bool {
    let Some(pem) = csr.status.as_ref().and_then(|s| s.certificate.as_ref()).filter(|c| !c.0.is_empty()) else { return false };
    let Ok(certs) = pki::parse_certs_pem(&pem.0, "status.certificate") else { return false };
    let Ok(info) = pki::parse_der(&certs[0]) else { return false };
    info.not_after.timestamp() < now.as_second()
}

/// Steps 1–5: why the request should be deleted, or `None`.
pub fn should_delete(csr: &CertificateSigningRequest, now: Timestamp) -> Option<&'static str> {
    let conditions = csr.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    let issued = has_certificate(csr);
    let condition_older = |type_: &str, d| conditions.iter().any(|c| c.type_ == type_ && is_older_than(c.last_update_time.as_ref(), d, now));
    if issued && condition_older("Approved", APPROVED_EXPIRATION) {
        return Some("more than 1h0m0s old and approved");
    }
    if condition_older("Denied", DENIED_EXPIRATION) {
        return Some("more than 1h0m0s old and denied");
    }
    if condition_older("Failed", DENIED_EXPIRATION) {
        return Some("more than 1h0m0s old and failed");
    }
    if conditions.is_empty() && is_older_than(csr.metadata.creation_timestamp.as_ref(), PENDING_EXPIRATION, now) {
        return Some("more than 24h0m0s old and unhandled");
    }
    if issued && conditions.iter().any(|c| c.type_ == "Approved") && is_expired(csr, now) {
        return Some("the associated certificate is expired");
    }
    None
}

pub struct CsrCleanerController {
    informers: kube::Client,
    client: kube::Client,
}

impl CsrCleanerController {
    pub fn new(informers: kube::Client, client: kube::Client) -> Self {
        Self { informers, client }
    }

    /// Watches requests into a cache and cleans it every [`POLLING_INTERVAL`].
    pub async fn run(self) -> Result<()> {
        let (csrs, csrs_w) = reflector::store::<CertificateSigningRequest>();
        let informer = async {
            let api = Api::<CertificateSigningRequest>::all(self.informers.clone());
            let mut stream = std::pin::pin!(reflector::reflector(csrs_w, watcher(api, watcher::Config::default())).default_backoff());
            while let Some(ev) = stream.next().await {
                if let Err(e) = ev {
                    tracing::warn!(target: TARGET, error = %e, "watch failed; retrying");
                }
            }
        };
        let work = async {
            if csrs.wait_until_ready().await.is_err() {
                return;
            }
            loop {
                for csr in csrs.state() {
                    if let Err(e) = self.handle(&csr).await {
                        tracing::warn!(target: TARGET, csr = csr.metadata.name.as_deref().unwrap_or_default(), error = %e, "cleaning failed");
                    }
                }
                tokio::time::sleep(POLLING_INTERVAL).await;
            }
        };
        tokio::select! {
            () = informer => {}
            () = work => {}
        }
        Ok(())
    }

    async fn handle(&self, csr: &CertificateSigningRequest) -> Result<()> {
        let Some(why) = should_delete(csr, Timestamp::now()) else { return Ok(()) };
        let name = csr.metadata.name.as_deref().unwrap_or_default();
        tracing::info!(target: TARGET, csr = name, why, "cleaning");
        match Api::<CertificateSigningRequest>::all(self.client.clone()).delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
            Err(e) => Err(Error::Message(format!("unable to delete CSR {name:?}: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const NOW: i64 = 1_800_000_000;

    fn at(ago_secs: i64) -> String {
        Timestamp::from_second(NOW - ago_secs).expect("t").to_string()
    }

    fn csr(created_ago: i64, conditions: Value, certificate: Option<&str>) -> CertificateSigningRequest {
        let mut csr: CertificateSigningRequest = serde_json::from_value(json!({
            "metadata": {"name": "r", "creationTimestamp": at(created_ago)},
            "spec": {"request": "", "signerName": "x"}, "status": {"conditions": conditions},
        }))
        .expect("a CSR");
        if let (Some(status), Some(c)) = (csr.status.as_mut(), certificate) {
            status.certificate = Some(k8s_openapi::ByteString(c.as_bytes().to_vec()));
        }
        csr
    }

    fn cond(type_: &str, ago: i64) -> Value {
        json!({"type": type_, "status": "True", "lastUpdateTime": at(ago)})
    }

    #[test]
    fn ages() {
        let now = Timestamp::from_second(NOW).expect("t");
        let ca = pki::CertificateAuthority::new("kubernetes").expect("a CA");
        let live = ca
            .sign(&pki::Config { common_name: "system:node:n1".into(), usages: vec![pki::Usage::ClientAuth], ..Default::default() })
            .expect("signed")
            .cert_pem;
        let (h, m) = (3600, 60);
        // (request, whether it goes)
        let cases = [
            (csr(2 * h, json!([cond("Approved", 2 * h)]), Some(&live)), Some("more than 1h0m0s old and approved")),
            (csr(2 * h, json!([cond("Approved", 50 * m)]), Some(&live)), None),
            // Approved but not yet issued: the signer's business, not the cleaner's.
            (csr(2 * h, json!([cond("Approved", 2 * h)]), None), None),
            (csr(2 * h, json!([cond("Denied", 61 * m)]), None), Some("more than 1h0m0s old and denied")),
            (csr(2 * h, json!([cond("Denied", 59 * m)]), None), None),
            (csr(2 * h, json!([cond("Approved", 30 * m), cond("Failed", 2 * h)]), None), Some("more than 1h0m0s old and failed")),
            (csr(25 * h, json!([]), None), Some("more than 24h0m0s old and unhandled")),
            (csr(23 * h, json!([]), None), None),
            // A condition without a time never ages.
            (csr(48 * h, json!([{"type": "Denied", "status": "True"}]), None), None),
        ];
        for (c, want) in cases {
            assert_eq!(should_delete(&c, now), want, "{:?}", c.status);
        }
        // Expired: an issued certificate whose end has passed (judged a year and a day on).
        let later = Timestamp::from_second(Timestamp::now().as_second() + 366 * 24 * h).expect("t");
        let fresh = csr(0, json!([cond("Approved", 0)]), Some(&live));
        let issued_recently = |c: &CertificateSigningRequest| {
            let mut c = c.clone();
            let t = Time(Timestamp::from_second(later.as_second() - 10).expect("t"));
            c.status.as_mut().and_then(|s| s.conditions.as_mut()).expect("conditions")[0].last_update_time = Some(t);
            c
        };
        assert_eq!(should_delete(&issued_recently(&fresh), later), Some("the associated certificate is expired"));
        assert_eq!(should_delete(&issued_recently(&fresh), Timestamp::now()), None);
    }
}
