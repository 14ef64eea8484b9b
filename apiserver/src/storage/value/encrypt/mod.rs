//! Mirrors k8s.io/apiserver/pkg/storage/value/encrypt: the providers of an
//! `EncryptionConfiguration` that kubelab has, each a [`super::Transformer`] for one key.
//!
//! - [`aes`]: `aescbc` (encrypt/aes/aes.go's CBC transformer).
//! - [`secretbox`]: `secretbox` (encrypt/secretbox/secretbox.go).
//! - [`identity`]: `identity` (encrypt/identity/identity.go): no encryption.

pub mod aes;
pub mod identity;
pub mod secretbox;
