//! Errors of the controllers: client-go's (a configuration problem, or the API server's answer).

pub use client::{Error, Result};
