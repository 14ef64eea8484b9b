//! Mirrors k8s.io/apiserver/pkg/registry/rest/rest.go (the interfaces a resource's storage
//! implements: Creater, GetterWithOptions, Getter + Updater of another form, Connecter) and the
//! storage map a group's `APIGroupInfo` carries (k8s.io/apiserver/pkg/server): every resource's store, with the
//! subresources its own code serves, each by the interface it implements; and the resources that
//! have no store at all and only take creates ([`CreateOnly`]: the reviews).

use std::sync::Arc;

use actix_web::{HttpRequest, HttpResponse, web};
use futures::future::LocalBoxFuture;
use serde_json::Value;

use super::options::WriteOptions;
use super::store::Registry;
use super::strategy::ResourceInfo;
use crate::authentication::Authenticator;
use crate::authentication::user::UserInfo;
use crate::authorization::authorizer::Authorizer;
use crate::kubelet_client::KubeletClient;
use crate::serviceaccount::jwt::TokenIssuer;
use crate::error::Result;

/// A subresource's create: `POST` with a body (pods/binding, pods/eviction,
/// serviceaccounts/token), and the query's CreateOptions (validated: a dry run must write
/// nothing). Its answer: the object it made (a TokenRequest with its token), or None for a
/// Success Status (a binding, an eviction).
pub type CreateFunc = for<'a> fn(RestRequest<'a>, Value, WriteOptions) -> LocalBoxFuture<'a, Result<Option<Value>>>;
/// A subresource's get: `GET`, its answer streamed (pods/log).
pub type GetFunc = for<'a> fn(RestRequest<'a>) -> LocalBoxFuture<'a, Result<HttpResponse>>;
/// A subresource's connect: the connection is handed over (pods/exec, pods/attach, pods/portforward).
pub type ConnectFunc = for<'a> fn(RestRequest<'a>, web::Payload) -> LocalBoxFuture<'a, Result<HttpResponse>>;

/// rest.Getter + rest.Updater of the object in another form (`deployments/scale`: an
/// autoscaling/v1 Scale). A GET answers `get(object)`; a PUT sends the form, a PATCH patches it,
/// and `update(object, form)` is the object to write, updated as any update of it is.
#[derive(Clone, Copy)]
pub struct View {
    /// The form's kind and apiVersion.
    pub kind: &'static str,
    pub api_version: &'static str,
    pub get: fn(&Value) -> Result<Value>,
    pub update: fn(&Value, &Value) -> Result<Value>,
}

/// A subresource served by its resource's own code rather than by the generic handlers (the
/// `status` and `finalize` views of an object are the generic handlers'). Kubernetes registers a
/// REST storage at `pods/<sub>`, and the interfaces it implements decide its routes; here the
/// variant does.
#[derive(Clone, Copy)]
pub enum SubresourceRest {
    /// rest.Creater: `POST`, answered 201 with what it made, or a Success Status.
    Create(CreateFunc),
    /// rest.GetterWithOptions: `GET`.
    Get(GetFunc),
    /// rest.Getter + rest.Updater of another form of the object: `GET`, `PUT`, `PATCH`.
    View(View),
    /// rest.Connecter: any method. What follows the request is the upgraded stream, so its body
    /// is never read, and the request is long-running.
    Connect(ConnectFunc),
}

/// What a subresource's code is called with: the request, its object, and what it may reach
/// beyond its own resource (the other stores; the HTTP client for node agents).
#[derive(Clone, Copy)]
pub struct RestRequest<'a> {
    pub req: &'a HttpRequest,
    pub registries: &'a Registries,
    pub kubelet: &'a KubeletClient,
    /// What signs service account tokens (`--service-account-signing-key-file`), if anything.
    pub token_issuer: Option<&'a TokenIssuer>,
    pub registry: &'a Registry,
    pub namespace: &'a str,
    pub name: &'a str,
    pub subresource: &'a str,
}

/// One resource as the server serves it: its generic store, and the subresources its own code
/// serves, by name.
pub struct Installed {
    pub registry: Arc<Registry>,
    pub subresources: &'static [(&'static str, SubresourceRest)],
}

/// A resource with no storage that only takes creates (a storage implementing rest.Creater and
/// nothing else: TokenReview, SelfSubjectReview, the access reviews). Its create is handed the
/// decoded object and answers it with its status filled in; nothing is written anywhere.
#[derive(Clone, Copy)]
pub struct CreateOnly {
    pub info: &'static ResourceInfo,
    pub create: ReviewFunc,
}

/// A create-only resource's create.
pub type ReviewFunc = fn(&ReviewRequest<'_>, Value) -> Result<Value>;

/// What a review's code is called with: who asks, in which namespace (the path's), and what
/// answers the question (the authorizers; the token authenticators).
pub struct ReviewRequest<'a> {
    pub user: &'a UserInfo,
    pub namespace: Option<&'a str>,
    pub authorizer: &'a dyn Authorizer,
    pub authenticator: &'a Authenticator,
}

/// Every resource the server serves: those with a store, and the create-only ones.
pub struct Registries {
    pub stored: Vec<Installed>,
    pub create_only: Vec<CreateOnly>,
}

impl Registries {
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<Registry>> {
        self.iter().find(|r| r.info().group == group && r.info().version == version && r.info().plural == plural).cloned()
    }

    /// The store of a resource the server installs (a programming error otherwise).
    pub fn of(&self, info: &ResourceInfo) -> Arc<Registry> {
        self.get(info.group, info.version, info.plural).expect("resource installed")
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<Registry>> {
        self.stored.iter().map(|r| &r.registry)
    }

    /// The create-only resource `plural` of a group version, if served.
    pub fn create_only(&self, group: &str, version: &str, plural: &str) -> Option<&CreateOnly> {
        self.create_only.iter().find(|c| c.info.group == group && c.info.version == version && c.info.plural == plural)
    }

    /// What discovery and OpenAPI list: every served resource, with the verbs it takes.
    pub fn infos(&self) -> impl Iterator<Item = (&'static ResourceInfo, &'static [&'static str])> {
        self.iter().map(|r| (r.info(), r.info().verbs())).chain(self.create_only.iter().map(|c| (c.info, &["create"][..])))
    }

    /// The code that serves `registry`'s subresource `name`, if its own code does.
    pub fn subresource(&self, registry: &Registry, name: &str) -> Option<SubresourceRest> {
        let installed = self.stored.iter().find(|r| std::ptr::eq(&*r.registry, registry))?;
        installed.subresources.iter().find(|(n, _)| *n == name).map(|(_, rest)| *rest)
    }
}
