//! Mirrors the body limit of k8s.io/apiserver/pkg/endpoints/handlers/rest.go (`limitedReadBody`,
//! `--max-request-bytes`): a body is read whole, up to the limit, before any handler sees it; a
//! larger one is answered 413 with a Status, and nothing is written. Kubernetes reads the body in
//! each handler; here it is read once, for all of them, after the filters that may refuse the
//! request without it.

use actix_web::web;
use futures::StreamExt;

use crate::error::{Error, Result};

/// Reads the body up to `limit` bytes.
pub async fn read(mut payload: web::Payload, limit: usize) -> Result<web::Bytes> {
    let mut buf = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| Error::BadRequest(format!("error reading the request body: {e}")))?;
        if buf.len() + chunk.len() > limit {
            return Err(Error::TooLarge(limit));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}
