//! Mirrors k8s.io/apiserver/pkg/storage/value/transformer.go: what happens to an object's bytes
//! between the codec and the store — encryption at rest.
//!
//! A [`Transformer`] turns the bytes the store would keep into the bytes it does keep
//! ([`Transformer::transform_to_storage`]) and back ([`Transformer::transform_from_storage`]).
//! The providers ([`encrypt::aes`], [`encrypt::secretbox`], [`encrypt::identity`]) each do it
//! with one key; [`PrefixTransformers`] puts them together as a resource's provider list in an
//! `EncryptionConfiguration` says:
//!
//! 1. A write uses the first provider, whose bytes begin with its prefix
//!    (`k8s:enc:aescbc:v1:<key name>:`, `k8s:enc:secretbox:v1:<key name>:`; identity's is empty).
//! 2. A read tries every provider whose prefix begins the bytes, in order, and strips it. The
//!    identity provider matches any bytes, but refuses those that begin with `k8s:enc:`, so the
//!    next provider gets them: identity first turns encryption off while what is encrypted stays
//!    readable; identity last keeps what was written before encryption was turned on readable.
//! 3. A read that no provider took is an error ("no matching prefix found"): the data stays
//!    in the store as it is, until a configuration with its key reads it.
//! 4. A read by any provider but the first is *stale*: the next write of the object rewrites it
//!    with the first, even when nothing in it changed. Rotating a key is putting the new one
//!    first and rewriting every object (`kubectl get secrets -A -o json | kubectl replace -f -`).
//!
//! The key the data is stored under is the data's context (authenticated data for the AEAD
//! providers, such as Kubernetes' aesgcm); CBC and secretbox use none.

pub mod encrypt;
pub mod error;

pub use error::{Error, Result};

/// The prefix every encrypting provider's bytes begin with (identity refuses to read them).
pub const ENCRYPTED_PREFIX: &[u8] = b"k8s:enc:";

/// One provider with one key: storage/value's Transformer interface.
pub trait Transformer: Send + Sync {
    /// The stored bytes (their prefix already stripped) back into the object's bytes.
    fn transform_from_storage(&self, data: &[u8], context: &[u8]) -> Result<Vec<u8>>;
    /// The object's bytes into what is stored (without the prefix).
    fn transform_to_storage(&self, data: &[u8], context: &[u8]) -> Result<Vec<u8>>;
}

/// A provider with the prefix its bytes carry (transformer.go's PrefixTransformer).
pub struct PrefixTransformer {
    pub prefix: Vec<u8>,
    pub transformer: Box<dyn Transformer>,
}

impl PrefixTransformer {
    pub fn new(prefix: impl Into<Vec<u8>>, transformer: Box<dyn Transformer>) -> Self {
        Self { prefix: prefix.into(), transformer }
    }
}

/// A read: the object's bytes, and whether they should be rewritten with the first provider.
#[derive(Debug, PartialEq, Eq)]
pub struct Read {
    pub data: Vec<u8>,
    pub stale: bool,
}

/// A resource's providers, in the configuration's order (transformer.go's prefixTransformers).
pub struct PrefixTransformers {
    transformers: Vec<PrefixTransformer>,
}

impl PrefixTransformers {
    /// `transformers` must not be empty (the configuration's validation sees to it).
    pub fn new(transformers: Vec<PrefixTransformer>) -> Self {
        assert!(!transformers.is_empty(), "a resource's provider list is never empty");
        Self { transformers }
    }

    /// Step 2 and 3: the first provider whose prefix begins `data` and that reads it.
    pub fn transform_from_storage(&self, data: &[u8], context: &[u8]) -> Result<Read> {
        for (i, t) in self.transformers.iter().enumerate() {
            let Some(rest) = data.strip_prefix(t.prefix.as_slice()) else { continue };
            match t.transformer.transform_from_storage(rest, context) {
                // Identity matches everything: when it refuses, the next provider is asked.
                Err(_) if t.prefix.is_empty() => continue,
                Err(e) => return Err(e),
                Ok(data) => return Ok(Read { data, stale: i != 0 }),
            }
        }
        Err(Error::NoMatchingPrefix { found: encrypted_prefix(data) })
    }

    /// Step 1: the first provider writes, with its prefix.
    pub fn transform_to_storage(&self, data: &[u8], context: &[u8]) -> Result<Vec<u8>> {
        let first = &self.transformers[0];
        let sealed = first.transformer.transform_to_storage(data, context)?;
        let mut out = Vec::with_capacity(first.prefix.len() + sealed.len());
        out.extend_from_slice(&first.prefix);
        out.extend_from_slice(&sealed);
        Ok(out)
    }
}

/// What an error says the data began with: `k8s:enc:<provider>:v1:<key name>:` when it has that
/// shape, else its first bytes.
fn encrypted_prefix(data: &[u8]) -> String {
    if data.starts_with(ENCRYPTED_PREFIX) {
        // k8s:enc:<provider>:<version>:<name>: is five colons in.
        let mut colons = 0;
        for (i, b) in data.iter().enumerate().take(256) {
            if *b == b':' {
                colons += 1;
                if colons == 5 {
                    return String::from_utf8_lossy(&data[..=i]).into_owned();
                }
            }
        }
    }
    String::from_utf8_lossy(&data[..data.len().min(16)]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::encrypt::aes::{CbcTransformer, aescbc_prefix};
    use super::encrypt::identity::IdentityTransformer;
    use super::encrypt::secretbox::{SecretboxTransformer, secretbox_prefix};
    use super::*;

    const KEY: &[u8] = b"/registry/secrets/default/s";

    fn aescbc(name: &str, key: &[u8]) -> PrefixTransformer {
        PrefixTransformer::new(aescbc_prefix(name), Box::new(CbcTransformer::new(name, key).unwrap()))
    }

    fn secretbox(name: &str, key: &[u8]) -> PrefixTransformer {
        PrefixTransformer::new(secretbox_prefix(name), Box::new(SecretboxTransformer::new(name, key).unwrap()))
    }

    fn identity() -> PrefixTransformer {
        PrefixTransformer::new(Vec::new(), Box::new(IdentityTransformer))
    }

    #[test]
    fn writes_with_the_first_provider_and_kubernetes_prefix() {
        let t = PrefixTransformers::new(vec![aescbc("key1", &[1; 32]), identity()]);
        let stored = t.transform_to_storage(b"{\"data\":\"c2VjcmV0\"}", KEY).unwrap();
        assert!(stored.starts_with(b"k8s:enc:aescbc:v1:key1:"));
        // The prefix, a 16-byte IV, then whole AES blocks (PKCS#7 always pads).
        let body = stored.len() - b"k8s:enc:aescbc:v1:key1:".len();
        assert_eq!(body, 16 + 32);
        assert!(!stored.windows(8).any(|w| w == b"c2VjcmV0"));
        assert_eq!(t.transform_from_storage(&stored, KEY).unwrap(), Read { data: b"{\"data\":\"c2VjcmV0\"}".to_vec(), stale: false });

        let t = PrefixTransformers::new(vec![secretbox("box", &[2; 32])]);
        let stored = t.transform_to_storage(b"hello", KEY).unwrap();
        // The prefix, a 24-byte nonce, the 16-byte Poly1305 tag, the sealed bytes.
        assert!(stored.starts_with(b"k8s:enc:secretbox:v1:box:"));
        assert_eq!(stored.len(), b"k8s:enc:secretbox:v1:box:".len() + 24 + 16 + 5);
        assert_eq!(t.transform_from_storage(&stored, KEY).unwrap().data, b"hello");
    }

    #[test]
    fn every_write_has_a_fresh_iv() {
        let t = PrefixTransformers::new(vec![aescbc("key1", &[1; 16])]);
        assert_ne!(t.transform_to_storage(b"same", KEY).unwrap(), t.transform_to_storage(b"same", KEY).unwrap());
    }

    #[test]
    fn identity_reads_what_was_written_before_encryption() {
        let t = PrefixTransformers::new(vec![aescbc("key1", &[1; 24]), identity()]);
        assert_eq!(t.transform_from_storage(b"{\"kind\":\"Secret\"}", KEY).unwrap(), Read { data: b"{\"kind\":\"Secret\"}".to_vec(), stale: true });
    }

    #[test]
    fn identity_first_still_reads_encrypted_data_and_writes_plain() {
        let old = PrefixTransformers::new(vec![aescbc("key1", &[1; 32])]);
        let stored = old.transform_to_storage(b"payload", KEY).unwrap();
        let t = PrefixTransformers::new(vec![identity(), aescbc("key1", &[1; 32])]);
        assert_eq!(t.transform_from_storage(&stored, KEY).unwrap(), Read { data: b"payload".to_vec(), stale: true });
        assert_eq!(t.transform_to_storage(b"payload", KEY).unwrap(), b"payload");
    }

    #[test]
    fn rotation_reads_the_old_key_as_stale_and_writes_the_new() {
        let before = PrefixTransformers::new(vec![aescbc("key1", &[1; 32]), identity()]);
        let stored = before.transform_to_storage(b"payload", KEY).unwrap();
        let rotated = PrefixTransformers::new(vec![aescbc("key2", &[2; 32]), aescbc("key1", &[1; 32]), identity()]);
        assert_eq!(rotated.transform_from_storage(&stored, KEY).unwrap(), Read { data: b"payload".to_vec(), stale: true });
        let rewritten = rotated.transform_to_storage(b"payload", KEY).unwrap();
        assert!(rewritten.starts_with(b"k8s:enc:aescbc:v1:key2:"));
        assert!(!rotated.transform_from_storage(&rewritten, KEY).unwrap().stale);
        // Once key1 is gone, only the rewritten data reads.
        let after = PrefixTransformers::new(vec![aescbc("key2", &[2; 32]), identity()]);
        assert_eq!(after.transform_from_storage(&rewritten, KEY).unwrap().data, b"payload");
        let err = after.transform_from_storage(&stored, KEY).unwrap_err();
        assert!(matches!(&err, Error::NoMatchingPrefix { found } if found == "k8s:enc:aescbc:v1:key1:"), "{err}");
        assert!(err.to_string().starts_with("no matching prefix found"), "{err}");
    }

    #[test]
    fn a_wrong_key_under_the_same_name_fails_to_decrypt() {
        let stored = PrefixTransformers::new(vec![aescbc("k", &[1; 32])]).transform_to_storage(b"0123456789abcdef-payload", KEY).unwrap();
        let wrong = PrefixTransformers::new(vec![aescbc("k", &[9; 32]), identity()]);
        // CBC is not authenticated: a wrong key shows as bad padding most of the time, or as
        // garbage that is not the payload.
        match wrong.transform_from_storage(&stored, KEY) {
            Err(e) => assert!(matches!(e, Error::Decrypt { .. }), "{e}"),
            Ok(read) => assert_ne!(read.data, b"0123456789abcdef-payload"),
        }
        let sealed = PrefixTransformers::new(vec![secretbox("k", &[1; 32])]).transform_to_storage(b"x", KEY).unwrap();
        let err = PrefixTransformers::new(vec![secretbox("k", &[9; 32])]).transform_from_storage(&sealed, KEY).unwrap_err();
        assert!(matches!(err, Error::Decrypt { provider: "secretbox", .. }), "{err}");
    }

    #[test]
    fn unprefixed_data_without_identity_matches_nothing() {
        let t = PrefixTransformers::new(vec![secretbox("k", &[1; 32])]);
        let err = t.transform_from_storage(b"{\"kind\":\"Secret\"}", KEY).unwrap_err();
        assert!(matches!(&err, Error::NoMatchingPrefix { found } if found == "{\"kind\":\"Secret\""), "{err}");
    }

    #[test]
    fn truncated_ciphertext_is_an_error_not_a_panic() {
        let t = PrefixTransformers::new(vec![aescbc("k", &[1; 32]), secretbox("b", &[1; 32])]);
        for data in [&b"k8s:enc:aescbc:v1:k:"[..], b"k8s:enc:aescbc:v1:k:0123456789abcdef0", b"k8s:enc:secretbox:v1:b:short"] {
            assert!(matches!(t.transform_from_storage(data, KEY), Err(Error::Decrypt { .. })), "{data:?}");
        }
    }
}
