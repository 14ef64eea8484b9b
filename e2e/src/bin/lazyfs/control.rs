//! The control socket: one command a line, one answer a line.
//! Part of lazyfs (main.rs).

use super::*;

/// A socket file left by a lazyfs that was killed is removed; one that answers is in use.
pub fn remove_stale_socket(path: &Path) -> anyhow::Result<()> {
    if fs::symlink_metadata(path).is_err() {
        return Ok(());
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        bail!("the control socket {} is in use by a running lazyfs", path.display());
    }
    fs::remove_file(path).with_context(|| format!("removing the stale control socket {}", path.display()))
}

pub async fn serve(listener: UnixListener, state: Arc<Mutex<passthrough::State>>, notifier: Notifier, unmount: mpsc::Sender<()>) {
    loop {
        match listener.accept().await {
            Ok((conn, _)) => {
                tokio::spawn(connection(conn, state.clone(), notifier.clone(), unmount.clone()));
            }
            Err(e) => eprintln!("lazyfs: control socket: {e}"),
        }
    }
}

async fn connection(conn: UnixStream, state: Arc<Mutex<passthrough::State>>, notifier: Notifier, unmount: mpsc::Sender<()>) {
    let (r, mut w) = conn.into_split();
    let mut lines = BufReader::new(r).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let cmd = line.trim().to_string();
        let answer = match cmd.as_str() {
            "clear-cache" => {
                let (state, notifier) = (state.clone(), notifier.clone());
                // The lock and the kernel's invalidation may wait on file I/O: not on the
                // runtime's thread.
                let dropped = tokio::task::spawn_blocking(move || {
                    let (dropped, inos) = state.lock().unwrap_or_else(|p| p.into_inner()).clear_cache();
                    passthrough::invalidate(&notifier, &inos);
                    dropped
                })
                .await;
                match dropped {
                    Ok(n) => {
                        eprintln!("lazyfs: clear-cache dropped {n} unsynced bytes");
                        format!("ok {n}")
                    }
                    Err(e) => format!("error {e}"),
                }
            }
            "status" => {
                let state = state.clone();
                match tokio::task::spawn_blocking(move || state.lock().unwrap_or_else(|p| p.into_inner()).status()).await {
                    Ok((bytes, files)) => format!("ok {bytes} {files}"),
                    Err(e) => format!("error {e}"),
                }
            }
            "unmount" => "ok".to_string(),
            other => format!("error unknown command {other:?} (clear-cache, status, unmount)"),
        };
        if w.write_all(format!("{answer}\n").as_bytes()).await.is_err() {
            return;
        }
        if cmd == "unmount" {
            let _ = w.flush().await;
            let _ = unmount.send(()).await;
            return;
        }
    }
}
