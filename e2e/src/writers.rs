//! Concurrent writers that remember exactly which writes the store acknowledged.
//!
//! Each writer puts unique keys (`<prefix>w<NN>/<seq>`) in order, retrying a failed put
//! on the next endpoint until it succeeds or the writers are stopped. Only a put that
//! returned OK is recorded: that is the set a store must never lose.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::GetOptions;

use crate::RPC_TIMEOUT;

type Acked = Arc<Mutex<BTreeMap<String, String>>>;

/// Writers running in the background on the current tokio runtime.
pub struct Writers {
    stop: Arc<AtomicBool>,
    acked: Acked,
    count: Arc<AtomicU64>,
    errors: Arc<Mutex<Vec<String>>>,
    handles: Vec<tokio::task::JoinHandle<()>>,
}

impl Writers {
    /// Starts `n` writers; writer w starts on `endpoints[w % len]`.
    pub fn start(endpoints: Vec<String>, n: usize, prefix: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let acked: Acked = Arc::default();
        let count = Arc::new(AtomicU64::new(0));
        let errors = Arc::new(Mutex::new(Vec::new()));
        let handles = (0..n)
            .map(|w| {
                tokio::spawn(write_loop(
                    w,
                    endpoints.clone(),
                    prefix.to_string(),
                    stop.clone(),
                    acked.clone(),
                    count.clone(),
                    errors.clone(),
                ))
            })
            .collect();
        Self {
            stop,
            acked,
            count,
            errors,
            handles,
        }
    }

    /// Number of acknowledged writes so far.
    pub fn acked(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }

    /// Waits until `more` further writes have been acknowledged.
    pub async fn wait_for_more(&self, more: u64, deadline: Duration) -> anyhow::Result<()> {
        let target = self.acked() + more;
        crate::poll_until(
            &format!("{more} more acknowledged writes"),
            deadline,
            Duration::from_millis(50),
            || async {
                if self.acked() >= target {
                    Ok(Some(()))
                } else {
                    anyhow::bail!(
                        "{} of {target} acknowledged; recent errors: {:?}",
                        self.acked(),
                        self.recent_errors(3)
                    )
                }
            },
        )
        .await
    }

    /// The last `n` errors the writers saw.
    pub fn recent_errors(&self, n: usize) -> Vec<String> {
        let e = self.errors.lock().unwrap_or_else(|e| e.into_inner());
        e[e.len().saturating_sub(n)..].to_vec()
    }

    /// Stops the writers (an in-flight put may still finish, bounded by the RPC timeout)
    /// and returns every acknowledged write, plus the number of errors seen.
    pub async fn stop(self) -> (BTreeMap<String, String>, usize) {
        self.stop.store(true, Ordering::SeqCst);
        for h in self.handles {
            let _ = h.await;
        }
        let acked = std::mem::take(&mut *self.acked.lock().unwrap_or_else(|e| e.into_inner()));
        let errors = self.errors.lock().unwrap_or_else(|e| e.into_inner()).len();
        (acked, errors)
    }
}

async fn write_loop(
    w: usize,
    endpoints: Vec<String>,
    prefix: String,
    stop: Arc<AtomicBool>,
    acked: Acked,
    count: Arc<AtomicU64>,
    errors: Arc<Mutex<Vec<String>>>,
) {
    let mut idx = w % endpoints.len();
    let mut clients: Vec<Option<etcd_client::Client>> = vec![None; endpoints.len()];
    let mut seq = 0u64;
    'keys: while !stop.load(Ordering::SeqCst) {
        let key = format!("{prefix}w{w:02}/{seq:06}");
        let value = format!("value-{w}-{seq}");
        loop {
            if stop.load(Ordering::SeqCst) {
                break 'keys; // this put was never acknowledged: it does not count
            }
            let res = async {
                if clients[idx].is_none() {
                    clients[idx] =
                        Some(crate::connect(&[endpoints[idx].clone()], RPC_TIMEOUT).await?);
                }
                let c = clients[idx].as_mut().expect("just connected");
                match tokio::time::timeout(RPC_TIMEOUT, c.put(key.clone(), value.clone(), None))
                    .await
                {
                    Ok(r) => r.map(|_| ()).map_err(anyhow::Error::from),
                    Err(_) => anyhow::bail!("put timed out after {RPC_TIMEOUT:?}"),
                }
            }
            .await;
            match res {
                Ok(()) => {
                    acked
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(key, value);
                    count.fetch_add(1, Ordering::SeqCst);
                    seq += 1;
                    break;
                }
                Err(e) => {
                    errors
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(format!("{}: {e:#}", endpoints[idx]));
                    clients[idx] = None;
                    idx = (idx + 1) % endpoints.len();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
}

/// Reads `prefix` from member endpoint `endpoint` alone with a serializable (member-local)
/// range and lists what differs from `expected`: missing keys and wrong values.
pub async fn diff_on_member(
    endpoint: &str,
    prefix: &str,
    expected: &BTreeMap<String, String>,
) -> anyhow::Result<Vec<String>> {
    let mut c = crate::connect(&[endpoint.to_string()], RPC_TIMEOUT).await?;
    let opts = GetOptions::new().with_prefix().with_serializable();
    let resp = match tokio::time::timeout(RPC_TIMEOUT * 2, c.get(prefix, Some(opts))).await {
        Ok(r) => r?,
        Err(_) => anyhow::bail!("serializable range on {endpoint} timed out"),
    };
    let mut have = BTreeMap::new();
    for kv in resp.kvs() {
        have.insert(
            String::from_utf8_lossy(kv.key()).into_owned(),
            String::from_utf8_lossy(kv.value()).into_owned(),
        );
    }
    let mut diff = Vec::new();
    for (k, v) in expected {
        match have.get(k) {
            None => diff.push(format!("missing {k}")),
            Some(got) if got != v => diff.push(format!("{k}: want {v:?}, got {got:?}")),
            Some(_) => {}
        }
    }
    Ok(diff)
}

/// Waits until member endpoint `endpoint` serves every key of `expected` with its value.
pub async fn wait_member_has(
    endpoint: &str,
    prefix: &str,
    expected: &BTreeMap<String, String>,
    deadline: Duration,
) -> anyhow::Result<()> {
    crate::poll_until(
        &format!(
            "{endpoint} to serve all {} acknowledged keys",
            expected.len()
        ),
        deadline,
        Duration::from_millis(200),
        || async {
            let diff = diff_on_member(endpoint, prefix, expected).await?;
            if diff.is_empty() {
                Ok(Some(()))
            } else {
                anyhow::bail!(
                    "{} of {} keys missing or wrong, e.g. {:?}",
                    diff.len(),
                    expected.len(),
                    &diff[..diff.len().min(5)]
                )
            }
        },
    )
    .await
}
