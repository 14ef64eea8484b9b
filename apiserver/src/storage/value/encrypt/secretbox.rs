//! Mirrors k8s.io/apiserver/pkg/storage/value/encrypt/secretbox/secretbox.go: the `secretbox`
//! provider, NaCl's XSalsa20-Poly1305 with a 32-byte key. The stored bytes after the prefix are
//! a random 24-byte nonce and the box (the 16-byte Poly1305 tag, then the ciphertext), as Go's
//! `secretbox.Seal` lays them out.

use crypto_secretbox::aead::{Aead, KeyInit};
use crypto_secretbox::{Key, Nonce, XSalsa20Poly1305};

use crate::storage::value::{Error, Result, Transformer};

const PROVIDER: &str = "secretbox";

/// The nonce's length (secretbox's nonceSize).
pub const NONCE_LEN: usize = 24;
/// The only key length secretbox takes.
pub const KEY_LEN: usize = 32;

/// `k8s:enc:secretbox:v1:<name>:`, what the configuration gives each secretbox key.
pub fn secretbox_prefix(name: &str) -> Vec<u8> {
    format!("k8s:enc:{PROVIDER}:v1:{name}:").into_bytes()
}

/// One secretbox key.
pub struct SecretboxTransformer {
    name: String,
    cipher: XSalsa20Poly1305,
}

impl SecretboxTransformer {
    /// `None` unless `key` is 32 bytes.
    pub fn new(name: &str, key: &[u8]) -> Option<Self> {
        if key.len() != KEY_LEN {
            return None;
        }
        Some(Self { name: name.to_string(), cipher: XSalsa20Poly1305::new(Key::from_slice(key)) })
    }
}

impl Transformer for SecretboxTransformer {
    fn transform_from_storage(&self, data: &[u8], _context: &[u8]) -> Result<Vec<u8>> {
        let error = |reason| Error::Decrypt { provider: PROVIDER, key: self.name.clone(), reason };
        if data.len() < NONCE_LEN {
            return Err(error("the data is shorter than a nonce"));
        }
        let (nonce, sealed) = data.split_at(NONCE_LEN);
        // Poly1305 authenticates the box: a wrong key or changed bytes fail here.
        self.cipher.decrypt(Nonce::from_slice(nonce), sealed).map_err(|_| error("the box could not be opened with this key"))
    }

    fn transform_to_storage(&self, data: &[u8], _context: &[u8]) -> Result<Vec<u8>> {
        let error = || Error::Encrypt { provider: PROVIDER, key: self.name.clone() };
        let mut nonce = [0u8; NONCE_LEN];
        aws_lc_rs::rand::fill(&mut nonce).map_err(|_| error())?;
        let sealed = self.cipher.encrypt(Nonce::from_slice(&nonce), data).map_err(|_| error())?;
        let mut out = Vec::with_capacity(NONCE_LEN + sealed.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_only_32_byte_keys() {
        assert!(SecretboxTransformer::new("k", &[1; 32]).is_some());
        assert!(SecretboxTransformer::new("k", &[1; 16]).is_none());
    }

    #[test]
    fn a_changed_byte_does_not_open() {
        let t = SecretboxTransformer::new("k", &[1; 32]).unwrap();
        let mut sealed = t.transform_to_storage(b"payload", b"").unwrap();
        let last = sealed.len() - 1;
        sealed[last] ^= 1;
        assert!(t.transform_from_storage(&sealed, b"").is_err());
    }
}
