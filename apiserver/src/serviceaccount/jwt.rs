//! Mirrors pkg/serviceaccount/jwt.go: signing a token's claims as a JWS (compact form, ES256,
//! the key's id in the header as kube-apiserver derives it: the SHA-256 of its public key's DER,
//! base64url) and checking one as a bearer token ([`JwtTokenAuthenticator`]) — its issuer, its
//! signature against the keys of `--service-account-key-file`, then its claims
//! ([`super::claims`]).

use std::path::Path;

use aws_lc_rs::digest::{SHA256, digest};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair, UnparsedPublicKey};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{PrivatePkcs8KeyDer, SubjectPublicKeyInfoDer};
use serde_json::{Value, json};

use super::claims::validate;
use super::tokengetter::ServiceAccountTokenGetter;
use crate::authentication::token::TokenAuthenticator;
use crate::authentication::user::UserInfo;

/// The DER header of a P-256 SubjectPublicKeyInfo; the uncompressed point follows it.
const P256_SPKI_PREFIX: [u8; 26] = [0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00];

/// The signing key (`--service-account-signing-key-file`) and the issuer it signs as
/// (`JWTTokenGenerator`).
pub struct TokenGenerator {
    key: EcdsaKeyPair,
    key_id: String,
    pub issuer: String,
}

impl TokenGenerator {
    /// Reads a PKCS#8 P-256 key (`sa.key`).
    pub fn from_file(path: &Path, issuer: &str) -> Result<Self, String> {
        let der = PrivatePkcs8KeyDer::from_pem_file(path).map_err(|e| format!("--service-account-signing-key-file {}: {e}", path.display()))?;
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der.secret_pkcs8_der())
            .map_err(|e| format!("--service-account-signing-key-file {}: not an ECDSA P-256 key ({e})", path.display()))?;
        let key_id = key_id(&[P256_SPKI_PREFIX.as_slice(), key.public_key().as_ref()].concat());
        Ok(TokenGenerator { key, key_id, issuer: issuer.to_string() })
    }

    /// The key that verifies what this signs (when no `--service-account-key-file` is given).
    pub fn public_key(&self) -> PublicKey {
        PublicKey { key_id: self.key_id.clone(), point: self.key.public_key().as_ref().to_vec() }
    }

    /// `claims` (with `iss` set to the issuer) signed: `header.payload.signature`.
    pub fn generate_token(&self, mut claims: Value) -> Result<String, String> {
        claims["iss"] = json!(self.issuer);
        let header = json!({"alg": "ES256", "kid": self.key_id});
        let signing_input = format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
        let signature = self.key.sign(&SystemRandom::new(), signing_input.as_bytes()).map_err(|e| format!("signing a token: {e}"))?;
        Ok(format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref())))
    }
}

/// What the TokenRequest API issues tokens with: the signer, the audiences a token is for
/// when its request names none (`--api-audiences`), and the longest life a token may be given
/// (`--service-account-max-token-expiration`, seconds; 0: no limit).
pub struct TokenIssuer {
    pub generator: TokenGenerator,
    pub audiences: Vec<String>,
    pub max_expiration_seconds: i64,
}

/// A key that verifies tokens (`--service-account-key-file`).
pub struct PublicKey {
    key_id: String,
    point: Vec<u8>,
}

impl PublicKey {
    /// Every P-256 public key of a PEM file (`sa.pub`, PKIX `PUBLIC KEY` blocks).
    pub fn from_file(path: &Path) -> Result<Vec<Self>, String> {
        let keys: Vec<SubjectPublicKeyInfoDer<'static>> = SubjectPublicKeyInfoDer::pem_file_iter(path)
            .map_err(|e| format!("--service-account-key-file {}: {e}", path.display()))?
            .collect::<Result<_, _>>()
            .map_err(|e| format!("--service-account-key-file {}: {e}", path.display()))?;
        if keys.is_empty() {
            return Err(format!("--service-account-key-file {}: no PUBLIC KEY in it", path.display()));
        }
        keys.iter()
            .map(|spki| {
                let der: &[u8] = spki.as_ref();
                match der.strip_prefix(P256_SPKI_PREFIX.as_slice()) {
                    Some(point) if point.len() == 65 => Ok(PublicKey { key_id: key_id(der), point: point.to_vec() }),
                    _ => Err(format!("--service-account-key-file {}: not an ECDSA P-256 public key (kubelab signs ES256 only)", path.display())),
                }
            })
            .collect()
    }
}

/// The key's id (`keyIDFromPublicKey`).
fn key_id(spki_der: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(digest(&SHA256, spki_der).as_ref())
}

/// A token split and decoded, its signature not yet checked.
pub struct Parsed {
    pub header: Value,
    pub claims: Value,
    signing_input: String,
    signature: Vec<u8>,
}

/// Splits a compact JWS. None: not a JWT at all (another authenticator's token).
pub fn parse(token: &str) -> Option<Parsed> {
    let mut parts = token.split('.');
    let (header, payload, signature) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let decode = |part: &str| URL_SAFE_NO_PAD.decode(part).ok();
    let header: Value = serde_json::from_slice(&decode(header)?).ok()?;
    let claims: Value = serde_json::from_slice(&decode(payload)?).ok()?;
    Some(Parsed { header, claims, signing_input: token[..token.len() - signature.len() - 1].to_string(), signature: decode(signature)? })
}

impl Parsed {
    /// Whether one of `keys` signed it (the one its `kid` names, or any when it names none).
    pub fn verify(&self, keys: &[PublicKey]) -> Result<(), String> {
        if self.header.get("alg").and_then(Value::as_str) != Some("ES256") {
            return Err("invalid signature: the token is not signed with ES256".into());
        }
        let kid = self.header.get("kid").and_then(Value::as_str);
        let signed = keys
            .iter()
            .filter(|k| kid.is_none_or(|kid| kid == k.key_id))
            .any(|k| UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &k.point).verify(self.signing_input.as_bytes(), &self.signature).is_ok());
        if signed { Ok(()) } else { Err("invalid signature".into()) }
    }
}

/// Service account tokens as a bearer token authenticator (`JWTTokenAuthenticator`): a JWT of
/// one of `issuers` (any other token is someone else's), signed by one of `keys`, whose claims
/// still hold.
pub struct JwtTokenAuthenticator {
    pub issuers: Vec<String>,
    pub keys: Vec<PublicKey>,
    pub getter: Box<dyn ServiceAccountTokenGetter>,
}

impl TokenAuthenticator for JwtTokenAuthenticator {
    fn authenticate_token(&self, token: &str, audiences: &[String]) -> Result<Option<UserInfo>, String> {
        let Some(parsed) = parse(token) else { return Ok(None) };
        let issuer = parsed.claims.get("iss").and_then(Value::as_str).unwrap_or("");
        if !self.issuers.iter().any(|i| i == issuer) {
            return Ok(None);
        }
        parsed.verify(&self.keys)?;
        validate(&parsed.claims, self.getter.as_ref(), audiences, chrono::Utc::now().timestamp()).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key pair written as `kubelab certs` writes sa.key and sa.pub.
    pub(crate) fn key_files(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
        let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new()).expect("a key");
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, doc.as_ref()).expect("the key");
        let pem = |label: &str, der: &[u8]| {
            let b64 = base64::engine::general_purpose::STANDARD.encode(der);
            let lines: Vec<&str> = b64.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).expect("ascii")).collect();
            format!("-----BEGIN {label}-----\n{}\n-----END {label}-----\n", lines.join("\n"))
        };
        let (k, p) = (dir.join("sa.key"), dir.join("sa.pub"));
        std::fs::write(&k, pem("PRIVATE KEY", doc.as_ref())).expect("sa.key");
        std::fs::write(&p, pem("PUBLIC KEY", &[P256_SPKI_PREFIX.as_slice(), key.public_key().as_ref()].concat())).expect("sa.pub");
        (k, p)
    }

    #[test]
    fn signed_tokens_verify_and_tampered_ones_do_not() {
        let dir = tempfile::tempdir().expect("a directory");
        let (key, public) = key_files(dir.path());
        let generator = TokenGenerator::from_file(&key, "https://kubernetes.default.svc").expect("a generator");
        let keys = PublicKey::from_file(&public).expect("the public key");
        let token = generator.generate_token(json!({"sub": "system:serviceaccount:team:reader"})).expect("a token");
        let parsed = parse(&token).expect("a JWT");
        assert_eq!(parsed.claims["iss"], "https://kubernetes.default.svc");
        assert_eq!(parsed.header["kid"], keys[0].key_id);
        parsed.verify(&keys).expect("signed by sa.key");

        let (h, rest) = token.split_once('.').expect("three parts");
        let (_, sig) = rest.split_once('.').expect("three parts");
        let forged = format!("{h}.{}.{sig}", URL_SAFE_NO_PAD.encode(r#"{"sub":"system:serviceaccount:kube-system:admin"}"#));
        assert_eq!(parse(&forged).expect("a JWT").verify(&keys).unwrap_err(), "invalid signature");
        let other_dir = tempfile::tempdir().expect("a directory");
        let (_, other) = key_files(other_dir.path());
        let other = PublicKey::from_file(&other).expect("another key");
        assert!(parsed.verify(&other).is_err(), "another key does not verify it");
        assert!(parse("not-a-jwt").is_none() && parse("a.b").is_none());
    }
}
