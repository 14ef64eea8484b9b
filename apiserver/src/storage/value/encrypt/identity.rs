//! Mirrors k8s.io/apiserver/pkg/storage/value/encrypt/identity/identity.go: the `identity`
//! provider, which stores bytes as they are.

use crate::storage::value::{ENCRYPTED_PREFIX, Error, Result, Transformer};

/// Writes bytes unchanged and reads any bytes but encrypted ones (identity.go's
/// EncryptCheckTransformer): its prefix is empty, so it is asked about everything, and refusing
/// `k8s:enc:` lets the providers after it read what they encrypted.
pub struct IdentityTransformer;

impl Transformer for IdentityTransformer {
    fn transform_from_storage(&self, data: &[u8], _context: &[u8]) -> Result<Vec<u8>> {
        if data.starts_with(ENCRYPTED_PREFIX) {
            return Err(Error::EncryptedDataForIdentity);
        }
        Ok(data.to_vec())
    }

    fn transform_to_storage(&self, data: &[u8], _context: &[u8]) -> Result<Vec<u8>> {
        Ok(data.to_vec())
    }
}
