//! The transformers' errors (what storage/value's transformers return as Go errors). The store
//! turns each into an Internal error naming the key it was reading or writing.

/// Why a value could not be transformed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No configured provider's prefix begins the stored bytes (prefixTransformers' "no matching
    /// prefix found"): data encrypted with a key that is no longer in the configuration.
    #[error("no matching prefix found: the data begins with {found:?}, which no configured provider reads")]
    NoMatchingPrefix { found: String },
    /// The identity provider was asked to read encrypted bytes (identity's EncryptCheckTransformer).
    #[error("identity transformer tried to read encrypted data")]
    EncryptedDataForIdentity,
    /// The bytes carry the key's prefix but do not decrypt with it (a wrong key under a reused
    /// name, or data damaged in the store).
    #[error("{provider} key {key:?}: {reason}")]
    Decrypt { provider: &'static str, key: String, reason: &'static str },
    /// The cipher failed while encrypting (it does not, short of a broken random source).
    #[error("{provider} key {key:?}: encryption failed")]
    Encrypt { provider: &'static str, key: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
