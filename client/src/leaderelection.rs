//! Mirrors client-go's tools/leaderelection: one active replica among several, decided by who holds
//! a coordination.k8s.io Lease.
//!
//! The holder renews `spec.renewTime` every `retry_period`. A candidate takes the Lease over once it
//! has seen the same record, unchanged, for `lease_duration` by its own clock (client-go's
//! "observed time": clocks of different machines are never compared). Every write carries the
//! resourceVersion it read, so two candidates racing for an expired Lease cannot both win. A leader
//! that cannot renew within `renew_deadline` stops leading; callers exit, as kube-scheduler does,
//! rather than risk two leaders.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::time::Instant;

/// Kubernetes' defaults: 15 s lease, 10 s renew deadline, 2 s retry.
#[derive(Clone, Debug)]
pub struct Config {
    pub namespace: String,
    pub name: String,
    /// Unique per replica: hostname plus a random suffix, as client-go's callers make it.
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl Config {
    pub fn new(namespace: &str, name: &str) -> Config {
        Config {
            namespace: namespace.to_string(),
            name: name.to_string(),
            identity: format!("{}_{}", crate::hostname(), uuid::Uuid::new_v4()),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Leadership was lost: the Lease could not be renewed within the renew deadline.
#[derive(Debug, thiserror::Error)]
#[error("leader election lost: the lease {0} could not be renewed in time")]
pub struct LeadershipLost(pub String);

pub struct LeaderElector {
    api: Api<Lease>,
    cfg: Config,
    /// The last record seen and when it was first seen in that state (client-go's observedTime).
    observed: Option<(LeaseSpec, Instant)>,
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

impl LeaderElector {
    pub fn new(client: kube::Client, cfg: Config) -> LeaderElector {
        LeaderElector { api: Api::namespaced(client, &cfg.namespace), cfg, observed: None }
    }

    pub fn identity(&self) -> &str {
        &self.cfg.identity
    }

    /// Waits until this replica holds the Lease, runs `work` while renewing it, and returns what
    /// `work` returns — or `LeadershipLost` as soon as a renewal misses the deadline (`work` is
    /// dropped then).
    pub async fn run<F: Future>(&mut self, work: F) -> Result<F::Output, LeadershipLost> {
        let lease = format!("{}/{}", self.cfg.namespace, self.cfg.name);
        loop {
            if self.try_acquire_or_renew().await {
                break;
            }
            tokio::time::sleep(self.cfg.retry_period).await;
        }
        tracing::info!(target: "leaderelection", lease, identity = self.cfg.identity, "successfully acquired lease");
        let cfg = self.cfg.clone();
        let renew = async {
            let mut last_renew = Instant::now();
            loop {
                tokio::time::sleep(cfg.retry_period).await;
                let attempt = tokio::time::timeout(cfg.renew_deadline, self.try_acquire_or_renew()).await;
                if attempt == Ok(true) {
                    last_renew = Instant::now();
                } else if last_renew.elapsed() >= cfg.renew_deadline {
                    return;
                }
            }
        };
        tokio::select! {
            out = work => Ok(out),
            () = renew => {
                tracing::error!(target: "leaderelection", lease, "leader election lost");
                Err(LeadershipLost(lease))
            }
        }
    }

    /// Gives the Lease up if this replica holds it (client-go's ReleaseOnCancel), so that a
    /// standby takes over at once instead of after the lease duration.
    pub async fn release(&mut self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.cfg.name).await else { return };
        let Some(spec) = lease.spec.as_mut() else { return };
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now());
        match self.api.replace(&self.cfg.name, &PostParams::default(), &lease).await {
            Ok(_) => tracing::info!(target: "leaderelection", lease = self.cfg.name, "released the lease"),
            Err(e) => tracing::warn!(target: "leaderelection", "could not release the lease: {e}"),
        }
    }

    /// One attempt (client-go's tryAcquireOrRenew): true when this replica holds the Lease after it.
    async fn try_acquire_or_renew(&mut self) -> bool {
        let me = self.cfg.identity.clone();
        let secs = i32::try_from(self.cfg.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let current = match self.api.get_opt(&self.cfg.name).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(target: "leaderelection", "error retrieving lease {}/{}: {e}", self.cfg.namespace, self.cfg.name);
                return false;
            }
        };
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(self.cfg.name.clone()), namespace: Some(self.cfg.namespace.clone()), ..Default::default() },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me),
                    lease_duration_seconds: Some(secs),
                    acquire_time: Some(now()),
                    renew_time: Some(now()),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(l) => {
                    self.observed = l.spec.map(|s| (s, Instant::now()));
                    true
                }
                Err(_) => false, // another replica created it first
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        match &self.observed {
            Some((seen, _)) if *seen == spec => {}
            _ => self.observed = Some((spec.clone(), Instant::now())),
        }
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let (_, observed_at) = self.observed.as_ref().expect("set above");
        let duration = spec.lease_duration_seconds.map_or(self.cfg.lease_duration, |s| Duration::from_secs(s.max(0) as u64));
        if !holder.is_empty() && holder != me && observed_at.elapsed() < duration {
            return false; // held by someone else, and renewed recently
        }
        let mut next = spec.clone();
        if holder != me {
            next.acquire_time = Some(now());
            next.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + i32::from(!holder.is_empty()));
        }
        next.holder_identity = Some(me);
        next.lease_duration_seconds = Some(secs);
        next.renew_time = Some(now());
        lease.spec = Some(next);
        match self.api.replace(&self.cfg.name, &PostParams::default(), &lease).await {
            Ok(l) => {
                self.observed = l.spec.map(|s| (s, Instant::now()));
                true
            }
            Err(e) => {
                tracing::debug!(target: "leaderelection", "lease update failed: {e}");
                false
            }
        }
    }
}
