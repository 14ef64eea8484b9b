//! Mirrors pkg/apis/storage/v1.

pub mod defaults;
