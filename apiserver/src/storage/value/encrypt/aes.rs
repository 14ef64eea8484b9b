//! Mirrors k8s.io/apiserver/pkg/storage/value/encrypt/aes/aes.go (its CBC transformer): the
//! `aescbc` provider. The stored bytes after the prefix are a random 16-byte IV and the
//! PKCS#7-padded AES-CBC ciphertext, with a 128-, 192- or 256-bit key.
//!
//! CBC authenticates nothing: a wrong key is noticed only as bad padding. Kubernetes keeps the
//! provider for the clusters that use it (and recommends secretbox or aesgcm with KMS); so does
//! kubelab, whose `kubelab up` writes an aescbc key as the kube-apiserver docs' example does.

use aws_lc_rs::cipher::{
    AES_128, AES_192, AES_256, AES_CBC_IV_LEN, Algorithm, DecryptionContext, EncryptionContext,
    PaddedBlockDecryptingKey, PaddedBlockEncryptingKey, UnboundCipherKey,
};
use aws_lc_rs::iv::FixedLength;

use crate::storage::value::{Error, Result, Transformer};

const PROVIDER: &str = "aescbc";

/// `k8s:enc:aescbc:v1:<name>:`, what the configuration gives each aescbc key.
pub fn aescbc_prefix(name: &str) -> Vec<u8> {
    format!("k8s:enc:{PROVIDER}:v1:{name}:").into_bytes()
}

/// The key sizes aescbc takes (aes.NewCipher's).
pub fn algorithm(key_len: usize) -> Option<&'static Algorithm> {
    match key_len {
        16 => Some(&AES_128),
        24 => Some(&AES_192),
        32 => Some(&AES_256),
        _ => None,
    }
}

/// One aescbc key (aes.go's cbc transformer).
pub struct CbcTransformer {
    name: String,
    encrypting: PaddedBlockEncryptingKey,
    decrypting: PaddedBlockDecryptingKey,
}

impl CbcTransformer {
    /// `None` unless `key` is 16, 24 or 32 bytes.
    pub fn new(name: &str, key: &[u8]) -> Option<Self> {
        let algorithm = algorithm(key.len())?;
        let unbound = || UnboundCipherKey::new(algorithm, key).ok();
        Some(Self {
            name: name.to_string(),
            encrypting: PaddedBlockEncryptingKey::cbc_pkcs7(unbound()?).ok()?,
            decrypting: PaddedBlockDecryptingKey::cbc_pkcs7(unbound()?).ok()?,
        })
    }

    fn decrypt_error(&self, reason: &'static str) -> Error {
        Error::Decrypt { provider: PROVIDER, key: self.name.clone(), reason }
    }
}

impl Transformer for CbcTransformer {
    fn transform_from_storage(&self, data: &[u8], _context: &[u8]) -> Result<Vec<u8>> {
        // Step 1: the IV, then at least one whole block.
        if data.len() < AES_CBC_IV_LEN * 2 {
            return Err(self.decrypt_error("the data is shorter than an IV and a block"));
        }
        let (iv, ciphertext) = data.split_at(AES_CBC_IV_LEN);
        if !ciphertext.len().is_multiple_of(AES_CBC_IV_LEN) {
            return Err(self.decrypt_error("the data is not a multiple of the block size"));
        }
        let iv: [u8; AES_CBC_IV_LEN] = iv.try_into().map_err(|_| self.decrypt_error("no IV"))?;
        // Step 2: decrypt in place and strip the PKCS#7 padding.
        let mut buf = ciphertext.to_vec();
        let plain = self
            .decrypting
            .decrypt(&mut buf, DecryptionContext::Iv128(FixedLength::from(iv)))
            .map_err(|_| self.decrypt_error("invalid padding: the data was not encrypted with this key"))?;
        Ok(plain.to_vec())
    }

    fn transform_to_storage(&self, data: &[u8], _context: &[u8]) -> Result<Vec<u8>> {
        let encrypt_error = || Error::Encrypt { provider: PROVIDER, key: self.name.clone() };
        // A fresh random IV for every write, stored in front of the ciphertext.
        let mut iv = [0u8; AES_CBC_IV_LEN];
        aws_lc_rs::rand::fill(&mut iv).map_err(|_| encrypt_error())?;
        let mut buf = data.to_vec();
        self.encrypting.less_safe_encrypt(&mut buf, EncryptionContext::Iv128(FixedLength::from(iv))).map_err(|_| encrypt_error())?;
        let mut out = Vec::with_capacity(AES_CBC_IV_LEN + buf.len());
        out.extend_from_slice(&iv);
        out.extend_from_slice(&buf);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_only_aes_key_sizes() {
        for (len, ok) in [(16, true), (24, true), (32, true), (0, false), (15, false), (31, false), (64, false)] {
            assert_eq!(CbcTransformer::new("k", &vec![7; len]).is_some(), ok, "{len}");
        }
    }

    #[test]
    fn pads_with_pkcs7() {
        let t = CbcTransformer::new("k", &[3; 16]).unwrap();
        // A full block of plaintext gets a full block of padding.
        assert_eq!(t.transform_to_storage(&[0; 16], b"").unwrap().len(), 16 + 32);
        assert_eq!(t.transform_to_storage(&[0; 15], b"").unwrap().len(), 16 + 16);
        let sealed = t.transform_to_storage(b"", b"").unwrap();
        assert_eq!(t.transform_from_storage(&sealed, b"").unwrap(), b"");
    }
}
