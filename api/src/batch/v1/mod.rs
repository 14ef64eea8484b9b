//! Mirrors pkg/apis/batch/v1.

pub mod defaults;
