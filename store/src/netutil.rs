//! Socket options of the store's TCP connections: accepted ones (client and peer ports) and the
//! ones a member dials to its peers. Mirrors etcd's `client/pkg/transport` (the socket options
//! its listeners and dialers set).
//!
//! Two options, each for a delay measured on this project's machines:
//! - **Nagle's algorithm off** (`TCP_NODELAY`). With it, a response larger than a segment waits
//!   for the client's delayed ACK (40 ms) before its last piece leaves.
//! - **No BBR on loopback.** BBR paces what a connection sends at the rate it has measured and
//!   keeps in flight only about twice the bandwidth-delay product. On loopback the delay is a few
//!   microseconds, so that is two segments: a 300 kB range response went out in 128 kB bursts, and
//!   after each the member waited for an ACK that the client delays up to 40 ms. One range read
//!   in fifty took 10 to 100 ms instead of 2 (BENCHMARKS.md). There is no network on loopback for
//!   congestion control to protect, so such connections use CUBIC (Linux's default), or Reno
//!   where CUBIC cannot be had. A machine's own choice stands for every other connection.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Once;

use tokio::net::TcpStream;

/// Congestion control algorithms a loopback connection is moved to from BBR, best first. Reno
/// is built into every Linux kernel and allowed to unprivileged processes.
const LOOPBACK_ALGORITHMS: [&str; 2] = ["cubic", "reno"];

/// Sets the options above on a connection, accepted or dialed.
pub fn tune(stream: &TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    if stream.peer_addr()?.ip().is_loopback() {
        avoid_bbr(stream);
    }
    Ok(())
}

/// Dials a peer's URL (`http://host:port`) with the options above: the connector of the peer
/// transport's channels.
pub async fn dial(uri: tonic::transport::Uri) -> io::Result<hyper_util::rt::TokioIo<TcpStream>> {
    let invalid = || io::Error::new(io::ErrorKind::InvalidInput, format!("no host and port in peer URL {uri}"));
    let host = uri.host().ok_or_else(invalid)?.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().ok_or_else(invalid)?;
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port)).await?.collect();
    let stream = TcpStream::connect(&addrs[..]).await?;
    tune(&stream)?;
    Ok(hyper_util::rt::TokioIo::new(stream))
}

/// Moves a connection off BBR. Nothing changes when it does not use BBR, and a refusal is only
/// logged: the connection works either way, only slower for large responses.
fn avoid_bbr(stream: &TcpStream) {
    static LOGGED: Once = Once::new();
    let fd = stream.as_raw_fd();
    match congestion_control(fd) {
        Ok(current) if current.starts_with("bbr") => {
            let chosen = LOOPBACK_ALGORITHMS.into_iter().find(|a| set_congestion_control(fd, a).is_ok());
            LOGGED.call_once(|| match chosen {
                Some(a) => tracing::info!(target: "store::net", from = %current, to = a, "loopback connections do not use BBR (its pacing stalls large responses)"),
                None => tracing::warn!(target: "store::net", current = %current, "could not move loopback connections off BBR; large responses will be slow"),
            });
        }
        Ok(_) => {}
        Err(e) => tracing::debug!(target: "store::net", error = %e, "cannot read the connection's congestion control"),
    }
}

/// The connection's congestion control algorithm (`TCP_CONGESTION`).
pub fn congestion_control(fd: i32) -> io::Result<String> {
    let mut name = [0u8; 16];
    let mut len = name.len() as libc::socklen_t;
    // SAFETY: `name` is writable for `len` bytes, and the kernel writes at most that many.
    let r = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_mut_ptr().cast(), &mut len) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let name = &name[..len as usize];
    let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

fn set_congestion_control(fd: i32, algorithm: &str) -> io::Result<()> {
    // SAFETY: the kernel reads `algorithm.len()` bytes of the name.
    let r = unsafe {
        libc::setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, algorithm.as_ptr().cast(), algorithm.len() as libc::socklen_t)
    };
    if r != 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loopback pair: the accepted end and the dialed end.
    async fn pair() -> (TcpStream, TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (dialed, accepted) = tokio::join!(TcpStream::connect(addr), l.accept());
        (accepted.unwrap().0, dialed.unwrap())
    }

    #[tokio::test]
    async fn a_loopback_connection_is_moved_off_bbr_and_any_other_is_left_alone() {
        let (accepted, dialed) = pair().await;
        let before = congestion_control(accepted.as_raw_fd()).unwrap();
        tune(&accepted).unwrap();
        assert!(accepted.nodelay().unwrap());
        let after = congestion_control(accepted.as_raw_fd()).unwrap();
        if before.starts_with("bbr") {
            assert!(LOOPBACK_ALGORITHMS.contains(&after.as_str()), "still {after}");
        } else {
            assert_eq!(after, before, "a machine's choice other than BBR stands");
        }

        // Forced onto BBR where the kernel has it: tuning moves it off.
        if set_congestion_control(dialed.as_raw_fd(), "bbr").is_ok() {
            tune(&dialed).unwrap();
            let now = congestion_control(dialed.as_raw_fd()).unwrap();
            assert!(LOOPBACK_ALGORITHMS.contains(&now.as_str()), "still {now}");
        }
    }

    #[tokio::test]
    async fn dial_connects_to_a_peer_url_with_nagle_off() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: tonic::transport::Uri = format!("http://{}", l.local_addr().unwrap()).parse().unwrap();
        let io = dial(uri).await.unwrap();
        assert!(io.inner().nodelay().unwrap());
        let no_port: tonic::transport::Uri = "http://127.0.0.1".parse().unwrap();
        assert_eq!(dial(no_port).await.unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }
}
