//! Mirrors kubelet's pkg/kubelet/images/puller.go: image pulls one at a time (its
//! `serialImagePuller`, `--serialize-image-pulls`, the default) or several at once, at most
//! `--max-parallel-image-pulls` (its `parallelImagePuller`; no limit without the flag). A pull
//! waits here for its turn, first come first served; the wait shows in the `Pulled` event
//! ("in 1.2s (3.4s including waiting)").

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// `--serialize-image-pulls` and `--max-parallel-image-pulls`, checked as kubelet's validation
/// checks them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullOptions {
    /// One pull at a time (kubelet's default: true).
    pub serialize: bool,
    /// With `serialize` off: at most this many pulls at once (none: no limit).
    pub max_parallel: Option<u32>,
}

impl Default for PullOptions {
    fn default() -> PullOptions {
        PullOptions { serialize: true, max_parallel: None }
    }
}

impl PullOptions {
    /// kubelet's `ValidateKubeletConfiguration` rules for the two fields, in its words.
    pub fn validate(&self) -> Result<(), String> {
        match self.max_parallel {
            Some(0) => Err("invalid configuration: maxParallelImagePulls (--max-parallel-image-pulls) 0 must be a positive number".into()),
            Some(n) if self.serialize && n > 1 => {
                Err("invalid configuration: maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls (--serialize-image-pulls) is set to false".into())
            }
            _ => Ok(()),
        }
    }

    /// How many pulls may run at once (none: no limit).
    fn slots(&self) -> Option<usize> {
        if self.serialize { Some(1) } else { self.max_parallel.map(|n| n as usize) }
    }
}

/// Hands out turns to pull.
pub(crate) struct Puller {
    slots: Option<Arc<Semaphore>>,
}

impl Puller {
    pub(crate) fn new(opts: &PullOptions) -> Puller {
        Puller { slots: opts.slots().map(|n| Arc::new(Semaphore::new(n))) }
    }

    /// Waits for a turn; the pull holds the returned permit until it is done.
    pub(crate) async fn turn(&self) -> Option<OwnedSemaphorePermit> {
        match &self.slots {
            // The semaphore is never closed.
            Some(s) => s.clone().acquire_owned().await.ok(),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn validation_is_kubelets() {
        assert!(PullOptions::default().validate().is_ok());
        assert!(PullOptions { serialize: true, max_parallel: Some(1) }.validate().is_ok());
        assert!(PullOptions { serialize: false, max_parallel: Some(5) }.validate().is_ok());
        assert!(PullOptions { serialize: false, max_parallel: None }.validate().is_ok());
        assert!(PullOptions { serialize: true, max_parallel: Some(2) }.validate().unwrap_err().contains("cannot be larger than 1 unless SerializeImagePulls"));
        assert!(PullOptions { serialize: false, max_parallel: Some(0) }.validate().unwrap_err().contains("must be a positive number"));
    }

    /// How many turns are out at once, asked for by `n` pulls of 20 ms each.
    async fn most_at_once(opts: PullOptions, n: usize) -> usize {
        let puller = Arc::new(Puller::new(&opts));
        let (now, most) = (Arc::new(std::sync::atomic::AtomicUsize::new(0)), Arc::new(std::sync::atomic::AtomicUsize::new(0)));
        let mut tasks = vec![];
        for _ in 0..n {
            let (puller, now, most) = (puller.clone(), now.clone(), most.clone());
            tasks.push(tokio::spawn(async move {
                let _turn = puller.turn().await;
                let at = now.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                most.fetch_max(at, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                now.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            }));
        }
        for t in tasks {
            t.await.expect("task");
        }
        most.load(std::sync::atomic::Ordering::SeqCst)
    }

    #[tokio::test(start_paused = true)]
    async fn turns_follow_the_options() {
        assert_eq!(most_at_once(PullOptions::default(), 4).await, 1, "serialized");
        assert_eq!(most_at_once(PullOptions { serialize: false, max_parallel: Some(2) }, 5).await, 2, "at most two");
        assert_eq!(most_at_once(PullOptions { serialize: false, max_parallel: None }, 5).await, 5, "no limit");
    }
}
