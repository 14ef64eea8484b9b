//! Mirrors the body limit of k8s.io/apiserver/pkg/endpoints/handlers/rest.go (`limitedReadBody`,
//! `--max-request-bytes`): a body is read whole, up to the limit, before any handler sees it; a
//! larger one is answered 413 with a Status once the rest of it has been read and dropped (up to
//! 16 MiB more), and nothing is written. Kubernetes reads the body in
//! each handler; here it is read once, for all of them, after the filters that may refuse the
//! request without it; the body of a request they refuse is read and dropped ([`discard`]).

use std::time::Duration;

use actix_web::error::PayloadError;
use actix_web::web;
use futures::{Stream, StreamExt};

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

/// How long the body of a refused request is read for, at most: a client that trickles it
/// gets its answer (and the connection closed) when this has passed.
const DISCARD_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads and drops the body of a request refused before its body was read — a 401 or a 403 —
/// so that a client still sending it reads the answer, as a client sending a too-large body reads
/// its 413 ([`read`]). kube-apiserver's filters refuse such a request without reading the body
/// too; Go's server then reads and drops up to 256 KiB of what is left, answers with `Connection:
/// close`, half-closes and waits a moment for the client to take the answer. Here what is left is
/// read up to `limit` plus what a too-large body may still send (16 MiB), for at most
/// [`DISCARD_TIMEOUT`]; a longer or slower body meets a closed connection, as from Go's. An
/// upgrade's payload is the connection itself, and is left alone. Returns whether it was all read.
pub async fn discard<S>(upgrade: bool, mut payload: S, limit: usize) -> bool
where
    S: Stream<Item = std::result::Result<web::Bytes, PayloadError>> + Unpin,
{
    if upgrade {
        return false;
    }
    let limit = limit.saturating_add(DRAIN_LIMIT);
    let drained = async {
        let mut seen = 0usize;
        while seen <= limit {
            match payload.next().await {
                Some(Ok(c)) => seen += c.len(),
                Some(Err(_)) => return false,
                None => return true,
            }
        }
        false
    };
    tokio::time::timeout(DISCARD_TIMEOUT, drained).await.unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(n: usize, size: usize) -> impl Stream<Item = std::result::Result<web::Bytes, PayloadError>> + Unpin {
        futures::stream::iter((0..n).map(move |_| Ok(web::Bytes::from(vec![b'x'; size]))))
    }

    #[tokio::test]
    async fn a_refused_body_is_drained_up_to_its_bound() {
        assert!(discard(false, chunks(0, 0), 10).await, "no body");
        assert!(discard(false, chunks(10, 1024 * 1024), 3 * 1024 * 1024).await, "10 MiB: within 3 MiB + 16 MiB");
        assert!(!discard(false, chunks(20, 1024 * 1024), 0).await, "20 MiB: past 16 MiB, left for the connection's close");
        let failing = futures::stream::iter([Ok(web::Bytes::from_static(b"x")), Err(PayloadError::Incomplete(None))]);
        assert!(!discard(false, failing, 10).await);
        // An upgrade's payload is the connection: never read (this one would never end).
        assert!(!discard(true, futures::stream::pending(), 10).await);
    }
}
