//! Mirrors printCertificateSigningRequest in pkg/printers/internalversion/printers.go: NAME, AGE,
//! SIGNERNAME, REQUESTOR, REQUESTEDDURATION, CONDITION.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::duration::human_duration;
use crate::printers::fields::{age, arr_at, get, name, str_at};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};

pub struct CertificateSigningRequestPrinter;

impl Printer for CertificateSigningRequestPrinter {
    fn columns(&self) -> Vec<Column> {
        vec![
            name_col(),
            age_col(),
            col("SignerName", "string", "signerName indicates the requested signer, and is a qualified name.", 0),
            col("Requestor", "string", "request contains an x509 certificate signing request encoded in a \"CERTIFICATE REQUEST\" PEM block.", 0),
            col("RequestedDuration", "string", "expirationSeconds is the requested duration of validity of the issued certificate.", 0),
            col("Condition", "string", "conditions applied to the request. Known conditions are \"Approved\", \"Denied\", and \"Failed\".", 0),
        ]
    }

    fn row(&self, csr: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let signer_name = Some(str_at(csr, &["spec", "signerName"])).filter(|s| !s.is_empty()).unwrap_or("<none>");
        let requested_duration = get(csr, &["spec", "expirationSeconds"])
            .and_then(Value::as_i64)
            .map_or_else(|| "<none>".to_string(), |s| human_duration(chrono::Duration::seconds(s)));
        vec![
            name(csr).into(),
            age(csr, now).into(),
            signer_name.into(),
            str_at(csr, &["spec", "username"]).into(),
            requested_duration.into(),
            extract_csr_status(csr).into(),
        ]
    }
}

/// extractCSRStatus: Denied before Approved before Pending, then `,Failed` and `,Issued`.
fn extract_csr_status(csr: &Value) -> String {
    let has = |t: &str| arr_at(csr, &["status", "conditions"]).iter().any(|c| str_at(c, &["type"]) == t);
    let mut status = if has("Denied") {
        "Denied"
    } else if has("Approved") {
        "Approved"
    } else {
        "Pending"
    }
    .to_string();
    if has("Failed") {
        status.push_str(",Failed");
    }
    if !str_at(csr, &["status", "certificate"]).is_empty() {
        status.push_str(",Issued");
    }
    status
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn csr_cells() {
        let spec = json!({"signerName": "kubernetes.io/kube-apiserver-client", "username": "jane", "expirationSeconds": 86400});
        let condition = |types: &[&str]| json!(types.iter().map(|t| json!({"type": t, "status": "True"})).collect::<Vec<_>>());
        let row = |name: &str, signer: &str, user: &str, duration: &str, condition: &str| {
            vec![json!(name), json!("10s"), json!(signer), json!(user), json!(duration), json!(condition)]
        };
        let cases = [
            (object(json!({"spec": spec})), row("x", "kubernetes.io/kube-apiserver-client", "jane", "24h", "Pending")),
            (object(json!({"spec": spec, "status": {"conditions": condition(&["Approved"])}})), row("x", "kubernetes.io/kube-apiserver-client", "jane", "24h", "Approved")),
            (
                object(json!({"spec": spec, "status": {"conditions": condition(&["Approved"]), "certificate": "Y2VydA=="}})),
                row("x", "kubernetes.io/kube-apiserver-client", "jane", "24h", "Approved,Issued"),
            ),
            (
                object(json!({"spec": spec, "status": {"conditions": condition(&["Approved", "Denied", "Failed"])}})),
                row("x", "kubernetes.io/kube-apiserver-client", "jane", "24h", "Denied,Failed"),
            ),
            (object(json!({"spec": {}})), row("x", "<none>", "", "<none>", "Pending")),
        ];
        assert_printer(
            &CertificateSigningRequestPrinter,
            &cases,
            &[("Name", 0), ("Age", 0), ("SignerName", 0), ("Requestor", 0), ("RequestedDuration", 0), ("Condition", 0)],
        );
    }
}
