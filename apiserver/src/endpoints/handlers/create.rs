//! Mirrors k8s.io/apiserver/pkg/endpoints/handlers/create.go: POST of a new object, and POST of a
//! subresource its resource's code serves (rest.Creater: pods/binding, pods/eviction).
//!
//! A create, step by step (each step's span, if it has one, is what `kubelab trace` shows):
//! 0. the query's CreateOptions: `dryRun` must be `All` if set (422 otherwise);
//! 1. decode the body through the typed object (`decode`): unknown fields are warnings, or 400
//!    under `fieldValidation=Strict`; the name and namespace must be the URL's;
//! 2. the resource's tracing hook: a pod carries this request's trace context (podtrace::otel);
//! 3. record the managed fields of what the client sent (under `fieldManager`, else the
//!    User-Agent's program name);
//! 4. mutating admission on the request (`admission`: NamespaceLifecycle checks the namespace);
//! 5. the store's create: BeforeCreate — the type's defaults (`SetDefaults_<Kind>`), mutating
//!    admission on the object, PrepareForCreate, Validate (`defaulting and validation`) —,
//!    validating admission, the write (`store write`);
//! 6. name the new object in the request's span (pods), and create what comes with it (a
//!    namespace's `default` service account).
//!
//! A dry run (`?dryRun=All`) runs every step but the write in step 5 and what follows a write in
//! step 6, and answers 201 with the object as it would have been written (without a
//! resourceVersion, as kube-apiserver answers it).
//!
//! A create-only resource (a review, [`create_only`]) takes steps 0 and 1, then its own code
//! answers: there is nothing to admit or write.

use std::collections::HashMap;

use actix_web::{HttpRequest, HttpResponse};
use serde_json::Value;

use crate::admission::interfaces::{Attributes, Operation};
use crate::config::Api;
use crate::authentication::user::UserInfo;
use crate::endpoints::request::{Target, check_name_and_namespace, created_status, decode, decode_as, parse_body, query, field_manager, record_managed_fields, request_user, respond};
use crate::error::{Error, Result};
use crate::registry::generic::options::WriteOptions;
use crate::registry::generic::rest::{CreateFunc, CreateOnly, RestRequest, ReviewRequest};
use crate::registry::generic::store::{CreateAdmission, Registry, name_of};

/// `POST .../<resource>`.
pub async fn create(req: &HttpRequest, body: &[u8], api: &Api, t: &Target, q: &HashMap<String, String>) -> Result<HttpResponse> {
    let reg = &t.registry;
    // Step 0: the options.
    let opts = WriteOptions::from_query("CreateOptions", q)?;
    // Step 1: decode.
    let (mut obj, warnings) = tracing::debug_span!(target: "apiserver", "decode", pod_uid = tracing::field::Empty).in_scope(|| {
        let obj = parse_body(req, body)?;
        let (obj, warnings) = decode(reg, obj, q)?;
        check_name_and_namespace(t, &obj)?;
        Ok::<_, Error>((obj, warnings))
    })?;
    // Step 2: with --otlp-endpoint, a pod carries this request's trace context to the scheduler
    // and the node agent (podtrace::otel); without, it is left as it came.
    if obj.get("kind").and_then(Value::as_str) == Some("Pod") {
        podtrace::otel::annotate(&mut obj);
    }
    // Step 3: managed fields.
    let obj = record_managed_fields(obj, None, field_manager(req, q).as_deref(), "Update");
    // Steps 4 and 5.
    let user = request_user(req)?;
    let created = create_object(api, &user, reg, t.namespace.as_deref(), obj, opts.is_dry_run()).await?;
    // Step 6: the request names the object it created, so a tracing UI finds the create by it.
    if let Some(uid) = podtrace::trace_uid(&created) {
        tracing::Span::current().record(podtrace::KEY_FIELD, uid);
    }
    if !opts.is_dry_run() {
        api.after_create(reg, &created).await;
    }
    Ok(respond(201, &created, &warnings))
}

/// Steps 4 and 5 of a create, shared with server-side apply's create of an absent object:
/// mutating admission on the request, the checks of the object's writer (RBAC's escalation
/// checks, as a policy-based storage runs them before the store's create), then the store's
/// create with admission on the object and validating admission.
pub async fn create_object(api: &Api, user: &UserInfo, reg: &Registry, namespace: Option<&str>, obj: Value, dry_run: bool) -> Result<Value> {
    // The object's name is known here unless the server is to generate it (in BeforeCreate).
    let name = name_of(&obj).to_string();
    let request_object = obj.clone();
    let attributes = Attributes { operation: Operation::Create, user, resource: reg.info(), subresource: "", namespace, name: &name, dry_run, object: Some(&request_object), old_object: None };
    // Step 4.
    api.admission.admit(&attributes).await?;
    reg.strategy.check_writer(&api.writer(user), &obj)?;
    // Step 5.
    let admission = CreateAdmission {
        user: Some(user),
        mutate: &|obj| api.admission.admit_object(&attributes, obj),
        validate: &|obj| api.admission.validate(&attributes, obj),
    };
    reg.create_with(namespace, obj, dry_run, &admission).await
}

/// `POST .../<resource>/<name>/<subresource>` of a subresource its resource's code serves
/// (rest.Creater): answered 201 with the object it made, or a Success Status. The query's CreateOptions (`dryRun`) are
/// validated here and handed to the subresource's code, which honours them. The request is
/// admitted first, with the body (an Eviction, a TokenRequest) as its object: NodeRestriction
/// decides which pods a node may evict and for which it may request tokens.
pub async fn create_subresource(req: &HttpRequest, body: &[u8], api: &Api, r: RestRequest<'_>, serve: CreateFunc) -> Result<HttpResponse> {
    let opts = WriteOptions::from_query("CreateOptions", &query(req))?;
    let obj = parse_body(req, body)?;
    let user = request_user(req)?;
    let namespace = Some(r.namespace).filter(|ns| !ns.is_empty());
    let attributes = Attributes {
        operation: Operation::Create,
        user: &user,
        resource: r.registry.info(),
        subresource: r.subresource,
        namespace,
        name: r.name,
        dry_run: opts.is_dry_run(),
        object: Some(&obj),
        old_object: None,
    };
    api.admission.admit(&attributes).await?;
    match serve(r, obj, opts).await? {
        Some(made) => Ok(respond(201, &made, &[])),
        None => Ok(respond(201, &created_status(), &[])),
    }
}

/// `POST` of a create-only resource (rest.Creater alone: the reviews): steps 0 and 1, the path's
/// namespace given to the object (or a 400 if it names another), then the resource's code with
/// the request's user. The answer and the decoding's warnings.
pub fn create_only(req: &HttpRequest, body: &[u8], api: &Api, resource: CreateOnly, namespace: Option<&str>) -> Result<(Value, Vec<String>)> {
    let q = query(req);
    // Step 0: the options are checked; a dry run is what a review always is.
    WriteOptions::from_query("CreateOptions", &q)?;
    // Step 1.
    let obj = parse_body(req, body)?;
    let (mut obj, warnings) = decode_as(resource.info, obj, &q)?;
    if let Some(ns) = namespace {
        match obj.pointer("/metadata/namespace").and_then(Value::as_str) {
            Some(body_ns) if !body_ns.is_empty() && body_ns != ns => {
                return Err(Error::BadRequest("the namespace of the provided object does not match the namespace sent on the request".into()));
            }
            _ => obj["metadata"]["namespace"] = Value::from(ns),
        }
    }
    let user = request_user(req)?;
    let review = ReviewRequest { user: &user, namespace, authorizer: api.authorizer.as_ref(), authenticator: &api.authenticator };
    let mut answer = (resource.create)(&review, obj)?;
    // The answer is of the version asked (a review served under two versions is one code).
    answer["apiVersion"] = Value::from(resource.info.api_version());
    Ok((answer, warnings))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Pod, PodSpec};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use serde_json::json;

    use super::*;
    use crate::admission::chain::Chain;
    use crate::admission::interfaces::testing::NOBODY;
    use crate::admission::{default_toleration_seconds, priority, service_account};
    use crate::registry::core::pod::strategy::{PODS, PodStrategy};
    use crate::registry::generic::strategy::Strategy;
    use crate::registry::generic::typed::Object;

    /// A pod as BeforeCreate leaves it, but for its metadata: defaulted, admitted by the chain's
    /// pod plugins, prepared by PrepareForCreate.
    fn defaulted(json: Value) -> Pod {
        let accounts = Box::new(service_account::testing::plugin(service_account::testing::Accounts::with_default()));
        let chain = Chain::new(vec![accounts, Box::new(priority::PLUGIN), Box::new(default_toleration_seconds::DefaultTolerationSeconds::default())], vec![]);
        let attributes = Attributes { operation: Operation::Create, user: &NOBODY, resource: &PODS, subresource: "", namespace: Some("default"), name: "web", dry_run: false, object: None, old_object: None };
        let mut obj = Object::new(json);
        PodStrategy.set_defaults(&mut obj);
        chain.admit_object(&attributes, &mut obj).expect("admitted");
        PodStrategy.prepare_for_create(&mut obj);
        serde_json::from_value(obj.into_json()).expect("a pod")
    }

    fn spec(p: &Pod) -> &PodSpec {
        p.spec.as_ref().expect("defaulted pod has a spec")
    }

    fn minimal() -> Value {
        json!({"metadata": {"name": "web"}, "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}]}})
    }

    #[test]
    fn admission_and_status_on_create() {
        let p = defaulted(minimal());
        let s = spec(&p);
        assert_eq!(s.priority, Some(0));
        assert_eq!(s.preemption_policy.as_deref(), Some("PreemptLowerPriority"));
        assert_eq!(s.service_account_name.as_deref(), Some("default"));
        assert_eq!(s.service_account.as_deref(), Some("default"));
        let status = p.status.as_ref().expect("status");
        assert_eq!(status.phase.as_deref(), Some("Pending"));
        assert_eq!(status.qos_class.as_deref(), Some("BestEffort"));
        assert_eq!(status.conditions, None);
    }

    #[test]
    fn pod_spec_defaults_keep_what_is_set() {
        let p = defaulted(json!({"metadata": {"name": "web"}, "spec": {
            "restartPolicy": "Never", "dnsPolicy": "Default", "terminationGracePeriodSeconds": 0,
            "schedulerName": "mine", "securityContext": {"runAsUser": 1000}, "enableServiceLinks": false,
            "serviceAccountName": "builder", "serviceAccount": "stale",
            "containers": [{"name": "app", "image": "busybox", "imagePullPolicy": "Never",
                "terminationMessagePath": "/tmp/msg", "terminationMessagePolicy": "FallbackToLogsOnError"}]}}));
        let s = spec(&p);
        assert_eq!(s.restart_policy.as_deref(), Some("Never"));
        assert_eq!(s.dns_policy.as_deref(), Some("Default"));
        assert_eq!(s.termination_grace_period_seconds, Some(0));
        assert_eq!(s.scheduler_name.as_deref(), Some("mine"));
        assert_eq!(
            s.security_context.as_ref().and_then(|c| c.run_as_user),
            Some(1000)
        );
        assert_eq!(s.enable_service_links, Some(false));
        assert_eq!(s.service_account_name.as_deref(), Some("builder"));
        assert_eq!(
            s.service_account.as_deref(),
            Some("builder"),
            "the deprecated field mirrors the new one"
        );
        let c = &s.containers[0];
        assert_eq!(c.image_pull_policy.as_deref(), Some("Never"));
        assert_eq!(c.termination_message_path.as_deref(), Some("/tmp/msg"));
        assert_eq!(
            c.termination_message_policy.as_deref(),
            Some("FallbackToLogsOnError")
        );
    }

    #[test]
    fn ports_env_and_resources() {
        let p = defaulted(
            json!({"spec": {"containers": [{"name": "app", "image": "nginx:1",
            "ports": [{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}],
            "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    {"name": "X", "valueFrom": {"fieldRef": {"apiVersion": "v2", "fieldPath": "metadata.name"}}},
                    {"name": "PLAIN", "value": "1"}],
            "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "100m"}}}]}}),
        );
        let c = &spec(&p).containers[0];
        let ports = c.ports.as_ref().expect("ports");
        assert_eq!(ports[0].protocol.as_deref(), Some("TCP"));
        assert_eq!(ports[1].protocol.as_deref(), Some("UDP"));
        assert_eq!(
            ports[0].host_port, None,
            "hostPort is defaulted only with hostNetwork"
        );
        let env = c.env.as_ref().expect("env");
        let api_version = |i: usize| {
            env[i]
                .value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .and_then(|f| f.api_version.clone())
        };
        assert_eq!(api_version(0).as_deref(), Some("v1"));
        assert_eq!(api_version(1).as_deref(), Some("v2"));
        assert!(env[2].value_from.is_none());
        let r = c.resources.as_ref().expect("resources");
        let requests = r.requests.as_ref().expect("requests");
        assert_eq!(
            requests.get("cpu"),
            Some(&Quantity("100m".into())),
            "an explicit request stays"
        );
        assert_eq!(
            requests.get("memory"),
            Some(&Quantity("128Mi".into())),
            "a missing request takes the limit"
        );
        assert_eq!(
            p.status.as_ref().and_then(|s| s.qos_class.as_deref()),
            Some("Burstable")
        );

        // Limits only: requests copy them all, and the pod becomes Guaranteed.
        let p = defaulted(
            json!({"spec": {"containers": [{"name": "app", "image": "nginx:1",
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}),
        );
        let r = spec(&p).containers[0]
            .resources
            .as_ref()
            .expect("resources");
        assert_eq!(r.requests, r.limits);
        assert_eq!(
            p.status.as_ref().and_then(|s| s.qos_class.as_deref()),
            Some("Guaranteed")
        );

        // Requests only: nothing is copied the other way.
        let p = defaulted(
            json!({"spec": {"containers": [{"name": "app", "image": "nginx:1",
            "resources": {"requests": {"memory": "1Gi"}}}]}}),
        );
        let r = spec(&p).containers[0]
            .resources
            .as_ref()
            .expect("resources");
        assert_eq!(r.limits, None);
    }

    #[test]
    fn status_is_replaced_and_gates_add_a_condition() {
        let mut j = minimal();
        j["status"] = json!({"phase": "Running", "podIP": "10.0.0.9"});
        j["spec"]["schedulingGates"] = json!([{"name": "example.com/wait"}]);
        let p = defaulted(j);
        let status = p.status.as_ref().expect("status");
        assert_eq!(status.phase.as_deref(), Some("Pending"));
        assert_eq!(status.pod_ip, None);
        let conditions = status.conditions.as_ref().expect("conditions");
        assert_eq!(conditions.len(), 1);
        assert_eq!(
            (
                conditions[0].type_.as_str(),
                conditions[0].status.as_str(),
                conditions[0].reason.as_deref()
            ),
            ("PodScheduled", "False", Some("SchedulingGated"))
        );
    }

    #[test]
    fn pod_without_spec_is_defaulted() {
        let p = defaulted(json!({"metadata": {"name": "x"}}));
        assert_eq!(spec(&p).restart_policy.as_deref(), Some("Always"));
        assert_eq!(
            p.status.as_ref().and_then(|s| s.qos_class.as_deref()),
            Some("BestEffort")
        );
    }

    #[test]
    fn defaulting_is_idempotent() {
        let once = defaulted(
            json!({"spec": {"containers": [{"name": "app", "image": "a:1",
            "resources": {"limits": {"cpu": "1"}}, "livenessProbe": {"httpGet": {"port": 80}}}],
            "volumes": [{"name": "v"}]}}),
        );
        let twice = defaulted(serde_json::to_value(&once).expect("serializes"));
        assert_eq!(once, twice);
    }
}
