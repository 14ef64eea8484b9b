//! Mirrors the body limit of k8s.io/apiserver/pkg/endpoints/handlers/rest.go (`limitedReadBody`,
//! `--max-request-bytes`): a body is read whole, up to the limit, before any handler sees it; a
//! larger one is answered 413 with a Status once the rest of it has been read and dropped (up to
//! 16 MiB more), and nothing is written. Kubernetes reads the body in
//! each handler; here it is read once, for all of them, after the filters that may refuse the
//! request without it.

use actix_web::web;
use futures::StreamExt;

use crate::error::{Error, Result};

/// How much of a too-large body is still read (and dropped) before the 413 is sent.
const DRAIN_LIMIT: usize = 16 * 1024 * 1024;

/// Reads the body up to `limit` bytes.
pub async fn read(mut payload: web::Payload, limit: usize) -> Result<web::Bytes> {
    let mut buf = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| Error::BadRequest(format!("error reading the request body: {e}")))?;
        if buf.len() + chunk.len() > limit {
            // The client is likely still sending: a 413 sent now, with the connection closed
            // under it, reaches kubectl as "broken pipe" instead of the Status. What follows is
            // read and dropped first, up to DRAIN_LIMIT more (Go's server drains 256 KiB; a
            // body past that still gets the close).
            let mut seen = buf.len() + chunk.len();
            drop(buf);
            while seen <= limit.saturating_add(DRAIN_LIMIT) {
                match payload.next().await {
                    Some(Ok(c)) => seen += c.len(),
                    _ => break,
                }
            }
            return Err(Error::TooLarge(format!("limit is {limit}")));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}
