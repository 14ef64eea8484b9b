//! Mirrors kube-controller-manager's `ControllerContext` (cmd/kube-controller-manager/app/
//! controllermanager.go): what every controller is started with.
//!
//! Kubernetes splits a controller's requests between two identities:
//! - its caches are filled by the shared informers, which list and watch with the controller
//!   manager's own credentials (the root client builder's `"shared-informers"` client, whose
//!   user `system:kube-controller-manager` may list and watch everything);
//! - everything else it does — gets, creates, updates, patches, deletes, events — goes through
//!   the client its [`ControllerClientBuilder`] gives it under its own name, so that with
//!   `--use-service-account-credentials` the RBAC role `system:controller:<name>` bounds its
//!   writes.
//!
//! kubelab's controllers keep their own caches rather than sharing informers, but each watches
//! with [`ControllerContext::informers`] and acts with [`ControllerContext::client`], so the API
//! server sees the same two identities as in Kubernetes.

use crate::Result;
use crate::clientbuilder::ControllerClientBuilder;

/// The clients a controller is started with (Kubernetes' `ControllerContext`, reduced to them).
pub(crate) struct ControllerContext {
    /// The client every controller lists and watches with: the controller manager's own
    /// (Kubernetes' `InformerFactory`, built on `rootClientBuilder.ClientOrDie("shared-informers")`;
    /// kubelab uses the root client as it is, where Kubernetes only adds `/shared-informers` to
    /// its User-Agent).
    pub(crate) informers: kube::Client,
    /// How each controller gets the client it acts with (Kubernetes' `ClientBuilder`).
    pub(crate) client_builder: ControllerClientBuilder,
}

impl ControllerContext {
    /// The client the controller `name` acts with (its Kubernetes service account name, such as
    /// `deployment-controller`).
    pub(crate) async fn client(&self, name: &str) -> Result<kube::Client> {
        self.client_builder.client(name).await
    }
}
