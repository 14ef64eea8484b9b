//! Mirrors pkg/controller/namespace/namespace_controller.go and
//! deletion/namespaced_resources_deleter.go.
//!
//! Deleting a namespace only marks it Terminating: it keeps the `kubernetes` finalizer in
//! `spec.finalizers`. This controller then, for each such namespace:
//! 1. discovers every namespaced resource the API server serves that can be deleted;
//! 2. deletes every object of each in the namespace (pods go gracefully, so this may take a
//!    while and is retried);
//! 3. once nothing is left, removes the finalizer through the `finalize` subresource, and the
//!    API server deletes the namespace.

use std::collections::HashSet;
use std::time::Duration;

use api::core::v1::well_known::FINALIZER_KUBERNETES;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::discovery::{Discovery, Scope, verbs};
use kube::runtime::watcher;

use crate::error::{Error, Result};

/// How soon a namespace that still has content is looked at again.
const REQUEUE: Duration = Duration::from_secs(1);

pub struct NamespaceController {
    /// Lists and watches for the caches: the controller manager's own client (see
    /// [`crate::controller_context`]).
    informers: kube::Client,
    /// Everything else: the controller's own client.
    client: kube::Client,
}

impl NamespaceController {
    pub fn new(informers: kube::Client, client: kube::Client) -> Self {
        Self { informers, client }
    }

    /// Watches namespaces and works on the terminating ones; a periodic pass retries those that
    /// still had content.
    pub async fn run(self) -> Result<()> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let mut events = watcher(Api::<Namespace>::all(self.informers.clone()), watcher::Config::default()).boxed();
        let mut pending: HashSet<String> = HashSet::new();
        let mut tick = tokio::time::interval(REQUEUE);
        loop {
            tokio::select! {
                ev = events.next() => match ev {
                    Some(Ok(watcher::Event::Apply(ns) | watcher::Event::InitApply(ns))) => {
                        if is_terminating(&ns) {
                            pending.insert(ns.metadata.name.clone().unwrap_or_default());
                        }
                    }
                    Some(Ok(watcher::Event::Delete(ns))) => {
                        pending.remove(&ns.metadata.name.clone().unwrap_or_default());
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        // The watcher retries by itself; wait a little so a dead API server is not hammered.
                        tracing::warn!(target: "controllers::namespace", error = %e, "namespace watch failed");
                        tokio::time::sleep(REQUEUE).await;
                    }
                    None => return Ok(()),
                },
                _ = tick.tick() => {
                    for name in pending.clone() {
                        match self.sync(&api, &name).await {
                            Ok(true) => { pending.remove(&name); }
                            Ok(false) => {}
                            Err(e) => tracing::warn!(target: "controllers::namespace", namespace = %name, error = %e, "namespace deletion will be retried"),
                        }
                    }
                }
            }
        }
    }

    /// One pass over a terminating namespace; true once it is finalized (or gone).
    pub async fn sync(&self, api: &Api<Namespace>, name: &str) -> Result<bool> {
        let Some(ns) = api.get_opt(name).await.map_err(Error::Kube)? else { return Ok(true) };
        if !is_terminating(&ns) {
            return Ok(true);
        }
        let remaining = self.delete_content(name).await?;
        if remaining > 0 {
            tracing::info!(target: "controllers::namespace", namespace = %name, remaining, "waiting for content to be deleted");
            return Ok(false);
        }
        // Step 3: remove our finalizer; the API server deletes the namespace.
        let mut ns = ns;
        if let Some(spec) = ns.spec.as_mut() {
            spec.finalizers = Some(spec.finalizers.take().unwrap_or_default().into_iter().filter(|f| f != FINALIZER_KUBERNETES).collect());
        }
        api.replace_subresource("finalize", name, &PostParams::default(), &ns).await.map_err(Error::Kube)?;
        tracing::info!(target: "controllers::namespace", namespace = %name, "namespace finalized");
        Ok(true)
    }

    /// Steps 1 and 2: deletes everything in the namespace; returns how many objects remain.
    async fn delete_content(&self, ns: &str) -> Result<usize> {
        let discovery = Discovery::new(self.client.clone()).run().await.map_err(Error::Kube)?;
        let mut remaining = 0;
        for group in discovery.groups() {
            for (ar, caps) in group.recommended_resources() {
                if caps.scope != Scope::Namespaced || !caps.supports_operation(verbs::DELETE) || !caps.supports_operation(verbs::LIST) {
                    continue;
                }
                let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &ar);
                for obj in api.list(&ListParams::default()).await.map_err(Error::Kube)?.items {
                    let Some(name) = obj.metadata.name.clone() else { continue };
                    if obj.metadata.deletion_timestamp.is_some() {
                        continue; // already going (a pod in its grace period)
                    }
                    match api.delete(&name, &DeleteParams::background()).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(s)) if s.code == 404 => {}
                        Err(e) => return Err(Error::Kube(e)),
                    }
                }
                // What is still listed after the deletes waits for its grace period or finalizers.
                remaining += api.list(&ListParams::default()).await.map_err(Error::Kube)?.items.len();
            }
        }
        Ok(remaining)
    }
}

pub fn is_terminating(ns: &Namespace) -> bool {
    ns.metadata.deletion_timestamp.is_some()
        && ns.spec.as_ref().and_then(|s| s.finalizers.as_ref()).is_some_and(|f| f.iter().any(|x| x == FINALIZER_KUBERNETES))
}
