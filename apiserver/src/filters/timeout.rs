//! Mirrors k8s.io/apiserver/pkg/endpoints/filters/request_deadline.go (WithRequestDeadline: the
//! `?timeout=` a client asks for) and k8s.io/apiserver/pkg/server/filters/timeout.go
//! (WithTimeoutForNonLongRunningRequests): a request that is not long-running gets
//! `--request-timeout` (a minute), or less if its `?timeout=` asks for less, and is answered 504
//! when that runs out. Watches, exec, attach and log are long-running and exempt.
//!
//! As in Kubernetes, the handler is not stopped when the client is answered: it runs on in its own
//! task and what it answers is dropped ("the operation may still complete", the 504 says in
//! Kubernetes' words), so a write it was making is made, and what follows it too.

use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, web};

use super::request_info::RequestInfo;
use crate::endpoints::request::error_response;
use crate::error::Error;

/// What a client that waited too long is told (`apierrors.NewTimeoutError`'s message).
pub const TIMEOUT_MESSAGE: &str = "request did not complete within the allotted timeout";

/// Runs `handler` within the request's timeout, unless the request is long-running.
pub async fn with_timeout(req: &HttpRequest, info: &RequestInfo, request_timeout: Duration, handler: impl Future<Output = HttpResponse> + 'static) -> HttpResponse {
    if info.long_running {
        return handler.await;
    }
    let timeout = match requested_timeout(req) {
        Ok(asked) => effective_timeout(asked, request_timeout),
        Err(e) => return error_response(&Error::BadRequest(format!("invalid timeout specified in the request URL - {e}"))),
    };
    let task = actix_web::rt::spawn(handler);
    match tokio::time::timeout(timeout, task).await {
        Ok(Ok(resp)) => resp,
        // A panic in the handler is the panic-recovery filter's to answer.
        Ok(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Ok(Err(e)) => error_response(&Error::Internal(format!("the request's handler did not finish: {e}"))),
        Err(_) => error_response(&Error::Timeout(TIMEOUT_MESSAGE.into())),
    }
}

/// The `timeout` query parameter (its first value, as Go's `Query().Get` reads it), if given.
fn requested_timeout(req: &HttpRequest) -> Result<Option<i64>, String> {
    let query = web::Query::<Vec<(String, String)>>::from_query(req.query_string()).map(|q| q.into_inner()).unwrap_or_default();
    match query.into_iter().find(|(k, _)| k == "timeout").map(|(_, v)| v).filter(|v| !v.is_empty()) {
        Some(v) => parse_go_duration(&v).map(Some),
        None => Ok(None),
    }
}

/// The client's timeout when it is shorter than the server's; the server's otherwise (a timeout
/// of 0 or less asks for none).
fn effective_timeout(asked_nanos: Option<i64>, request_timeout: Duration) -> Duration {
    match asked_nanos {
        Some(n) if n > 0 && (n as u128) < request_timeout.as_nanos() => Duration::from_nanos(n as u64),
        _ => request_timeout,
    }
}

/// Go's `time.ParseDuration`, in nanoseconds: a signed sequence of decimal numbers, each with an
/// optional fraction and a unit (`ns`, `us`/`µs`, `ms`, `s`, `m`, `h`), such as `30s`, `1m30s`,
/// `1.5h` or `-2ms`; `0` needs no unit. The errors read as Go's.
pub fn parse_go_duration(orig: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {}", go_quote(orig));
    let (neg, mut s) = match orig.as_bytes().first() {
        Some(b'-') => (true, &orig[1..]),
        Some(b'+') => (false, &orig[1..]),
        _ => (false, orig),
    };
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    const LIMIT: u128 = 1 << 63;
    let mut total: u128 = 0;
    while !s.is_empty() {
        // A number: [0-9]*(\.[0-9]*)?, with at least one digit.
        let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
        let whole_len = digits(s);
        let whole: u128 = if whole_len == 0 { 0 } else { s[..whole_len].parse().map_err(|_| invalid())? };
        if whole > LIMIT {
            return Err(invalid());
        }
        s = &s[whole_len..];
        // The fraction's digits as an integer over a power of ten; as in Go, digits past what
        // an int64 holds are read but dropped.
        let (mut fraction, mut scale, mut fraction_len, mut overflow) = (0u128, 1f64, 0, false);
        if let Some(rest) = s.strip_prefix('.') {
            fraction_len = digits(rest);
            for d in rest[..fraction_len].bytes() {
                let next = fraction * 10 + u128::from(d - b'0');
                if overflow || next > LIMIT {
                    overflow = true;
                    continue;
                }
                (fraction, scale) = (next, scale * 10.0);
            }
            s = &rest[fraction_len..];
        }
        if whole_len == 0 && fraction_len == 0 {
            return Err(invalid());
        }
        // A unit: everything up to the next number.
        let unit_len = s.bytes().take_while(|b| *b != b'.' && !b.is_ascii_digit()).count();
        if unit_len == 0 {
            return Err(format!("time: missing unit in duration {}", go_quote(orig)));
        }
        let unit = &s[..unit_len];
        s = &s[unit_len..];
        let nanos_per_unit: u128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(format!("time: unknown unit {} in duration {}", go_quote(unit), go_quote(orig))),
        };
        let mut value = whole.checked_mul(nanos_per_unit).filter(|v| *v <= LIMIT).ok_or_else(invalid)?;
        if fraction > 0 {
            // Scaled in floating point, as Go does.
            value += (fraction as f64 * (nanos_per_unit as f64 / scale)) as u128;
            if value > LIMIT {
                return Err(invalid());
            }
        }
        total += value;
        if total > LIMIT {
            return Err(invalid());
        }
    }
    match (neg, i64::try_from(total)) {
        (true, _) => Ok((total as i128).wrapping_neg() as i64),
        (false, Ok(n)) => Ok(n),
        (false, Err(_)) => Err(invalid()),
    }
}

/// Go's `time.quote`: double quotes, `"` and `\` escaped, bytes of other than printable ASCII as
/// `\xNN`.
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            ' '..='~' => {
                if c == '"' || c == '\\' {
                    out.push('\\');
                }
                out.push(c);
            }
            _ => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[test]
    fn go_durations() {
        let ok = [
            ("0", 0),
            ("+0", 0),
            ("-0", 0),
            ("5s", 5_000_000_000),
            ("30s", 30_000_000_000),
            ("1m0s", 60_000_000_000),
            ("1h2m3.5s", 3_723_500_000_000),
            ("1.5h", 5_400_000_000_000),
            ("300ms", 300_000_000),
            ("-2ms", -2_000_000),
            (".5s", 500_000_000),
            ("1.s", 1_000_000_000),
            ("0.3s", 300_000_000),
            ("1.000000000000000000001s", 1_000_000_000),
            ("2us", 2_000),
            ("2\u{b5}s", 2_000),
            ("2\u{3bc}s", 2_000),
            ("7ns", 7),
            ("9223372036854775807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
        ];
        for (s, want) in ok {
            assert_eq!(parse_go_duration(s), Ok(want), "{s}");
        }
        let bad = [
            ("", "time: invalid duration \"\""),
            ("-", "time: invalid duration \"-\""),
            ("abc", "time: invalid duration \"abc\""),
            (".s", "time: invalid duration \".s\""),
            ("5", "time: missing unit in duration \"5\""),
            ("1h5", "time: missing unit in duration \"1h5\""),
            ("3x", "time: unknown unit \"x\" in duration \"3x\""),
            ("3\u{e9}", "time: unknown unit \"\\xc3\\xa9\" in duration \"3\\xc3\\xa9\""),
            ("9223372036854775808ns", "time: invalid duration \"9223372036854775808ns\""),
            ("3000000h", "time: invalid duration \"3000000h\""),
        ];
        for (s, want) in bad {
            assert_eq!(parse_go_duration(s), Err(want.to_string()), "{s}");
        }
    }

    #[test]
    fn the_client_may_ask_for_less_never_for_more() {
        let minute = Duration::from_secs(60);
        assert_eq!(effective_timeout(None, minute), minute);
        assert_eq!(effective_timeout(Some(5_000_000_000), minute), Duration::from_secs(5));
        assert_eq!(effective_timeout(Some(0), minute), minute, "0: no timeout of the client's own");
        assert_eq!(effective_timeout(Some(-1), minute), minute);
        assert_eq!(effective_timeout(Some(120_000_000_000), minute), minute, "longer than the server allows");
    }

    fn info(long_running: bool) -> RequestInfo {
        RequestInfo { verb: "LIST".into(), resource: "pods".into(), connect: false, long_running, path_info: Default::default() }
    }

    fn request(query: &str) -> HttpRequest {
        actix_web::test::TestRequest::get().uri(&format!("/api/v1/pods{query}")).to_http_request()
    }

    /// A handler that answers 200 after `delay`, and says when it finished.
    fn slow(delay: Duration, done: Rc<AtomicBool>) -> impl Future<Output = HttpResponse> + 'static {
        async move {
            tokio::time::sleep(delay).await;
            done.store(true, Ordering::SeqCst);
            HttpResponse::Ok().finish()
        }
    }

    async fn status_of(resp: HttpResponse) -> (u16, serde_json::Value) {
        let code = resp.status().as_u16();
        let body = actix_web::body::to_bytes(resp.into_body()).await.expect("a body");
        (code, serde_json::from_slice(&body).unwrap_or_default())
    }

    #[actix_rt::test]
    async fn a_request_that_runs_out_of_time_is_answered_504_and_its_handler_goes_on() {
        let done = Rc::new(AtomicBool::new(false));
        let server_timeout = Duration::from_millis(100);
        let resp = with_timeout(&request(""), &info(false), server_timeout, slow(Duration::from_millis(400), done.clone())).await;
        let (code, status) = status_of(resp).await;
        assert_eq!(code, 504);
        assert_eq!(
            status,
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                               "message": "Timeout: request did not complete within the allotted timeout",
                               "reason": "Timeout", "details": {}, "code": 504})
        );
        assert!(!done.load(Ordering::SeqCst));
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(done.load(Ordering::SeqCst), "the handler ran to its end after the 504");
    }

    #[actix_rt::test]
    async fn the_timeout_parameter_shortens_the_wait_and_is_checked() {
        let done = Rc::new(AtomicBool::new(false));
        let minute = Duration::from_secs(60);
        let resp = with_timeout(&request("?timeout=50ms"), &info(false), minute, slow(Duration::from_secs(30), done.clone())).await;
        assert_eq!(resp.status().as_u16(), 504);
        let resp = with_timeout(&request("?timeout=5s&timeout=1ms"), &info(false), minute, slow(Duration::from_millis(20), done.clone())).await;
        assert_eq!(resp.status().as_u16(), 200, "the first value counts");
        let resp = with_timeout(&request("?timeout=10"), &info(false), minute, slow(Duration::ZERO, done.clone())).await;
        let (code, status) = status_of(resp).await;
        assert_eq!((code, status["reason"].as_str()), (400, Some("BadRequest")));
        assert_eq!(status["message"], "invalid timeout specified in the request URL - time: missing unit in duration \"10\"");
    }

    #[actix_rt::test]
    async fn long_running_requests_have_no_timeout() {
        let done = Rc::new(AtomicBool::new(false));
        let resp = with_timeout(&request("?watch=true&timeout=1ms"), &info(true), Duration::from_millis(10), slow(Duration::from_millis(200), done.clone())).await;
        assert_eq!(resp.status().as_u16(), 200);
        assert!(done.load(Ordering::SeqCst));
    }

    #[actix_rt::test]
    async fn a_panic_in_a_timed_handler_reaches_the_panic_recovery() {
        let req = request("");
        let handler = async {
            panic!("boom");
        };
        let not_long_running = info(false);
        let timed = with_timeout(&req, &not_long_running, Duration::from_secs(5), async move {
            handler.await;
            HttpResponse::Ok().finish()
        });
        let resp = crate::filters::panic_recovery::with_panic_recovery(&req, timed).await;
        assert_eq!(resp.status().as_u16(), 500);
    }
}
