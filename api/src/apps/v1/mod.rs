//! Mirrors pkg/apis/apps/v1.

pub mod defaults;
