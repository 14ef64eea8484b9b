//! Mirrors k8s.io/apiserver/pkg/audit/request.go (`NewEventFromRequest`, `LogRequestObject`,
//! `LogResponseObject`, `LogAnnotation`) and apis/audit/v1's Event: one request's record.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};

use super::policy::{Decision, Level, Stage};
use crate::authentication::user::UserInfo;
use crate::authorization::authorizer::Attributes;

/// A request's Event while the request runs (kept with the request).
#[derive(Clone, Debug)]
pub struct Event {
    pub decision: Decision,
    id: String,
    received: DateTime<Utc>,
    fields: Map<String, Value>,
    annotations: Map<String, Value>,
}

fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

impl Event {
    /// The Event of the request `a` describes (its user as authenticated), received at
    /// `received`, at the policy's `decision`.
    pub fn new(decision: Decision, received: DateTime<Utc>, request_uri: &str, a: &Attributes<'_>, source_ip: Option<String>, user_agent: Option<&str>) -> Event {
        let mut fields = Map::new();
        fields.insert("requestURI".into(), json!(request_uri));
        fields.insert("verb".into(), json!(a.verb));
        fields.insert("user".into(), a.user.to_json());
        fields.insert("sourceIPs".into(), json!(source_ip.into_iter().collect::<Vec<_>>()));
        if let Some(agent) = user_agent {
            fields.insert("userAgent".into(), json!(agent));
        }
        if a.resource_request {
            let mut object = Map::new();
            for (key, value) in [("resource", a.resource), ("namespace", a.namespace), ("name", a.name), ("apiGroup", a.api_group), ("apiVersion", a.api_version), ("subresource", a.subresource)] {
                if !value.is_empty() {
                    object.insert(key.into(), json!(value));
                }
            }
            fields.insert("objectRef".into(), Value::Object(object));
        }
        Event { decision, id: uuid::Uuid::new_v4().to_string(), received, fields, annotations: Map::new() }
    }

    pub fn level(&self) -> Level {
        self.decision.level
    }

    /// The user the request acts as (impersonation).
    pub fn impersonated(&mut self, user: &UserInfo) {
        self.fields.insert("impersonatedUser".into(), user.to_json());
    }

    /// `LogAnnotation`: what a filter adds (the authorizer's decision and reason).
    pub fn annotate(&mut self, key: &str, value: &str) {
        self.annotations.insert(key.into(), json!(value));
    }

    /// `LogRequestObject`: the request's body names the object when the path does not (a
    /// create), and is kept at level Request and above.
    pub fn request_object(&mut self, object: Value) {
        if let Some(Value::Object(target)) = self.fields.get_mut("objectRef")
            && !target.contains_key("name")
            && let Some(name) = object.pointer("/metadata/name").and_then(Value::as_str).filter(|n| !n.is_empty())
        {
            target.insert("name".into(), json!(name));
        }
        if self.level() >= Level::Request {
            self.fields.insert("requestObject".into(), object);
        }
    }

    /// `LogResponseObject`: the answer's body, at level RequestResponse.
    pub fn response_object(&mut self, object: Value) {
        if self.level() >= Level::RequestResponse {
            self.fields.insert("responseObject".into(), object);
        }
    }

    /// The answer's status (`responseStatus`): its code, and for an error its Status's fields.
    pub fn response_status(&mut self, code: u16, status: Option<&Value>) {
        let mut s = Map::new();
        s.insert("metadata".into(), json!({}));
        if let Some(status) = status.filter(|s| s.get("kind").and_then(Value::as_str) == Some("Status")) {
            for key in ["status", "message", "reason"] {
                if let Some(v) = status.get(key).filter(|v| v.as_str().is_some_and(|s| !s.is_empty())) {
                    s.insert(key.into(), v.clone());
                }
            }
        }
        s.insert("code".into(), json!(code));
        self.fields.insert("responseStatus".into(), Value::Object(s));
    }

    /// The Event as written at `stage`, or None if the policy leaves that stage (or the whole
    /// request) out.
    pub fn at(&self, stage: Stage) -> Option<Value> {
        if self.level() == Level::None || self.decision.omit_stages.contains(&stage) {
            return None;
        }
        let mut e = Map::new();
        e.insert("kind".into(), json!("Event"));
        e.insert("apiVersion".into(), json!("audit.k8s.io/v1"));
        e.insert("level".into(), json!(self.level().as_str()));
        e.insert("auditID".into(), json!(self.id));
        e.insert("stage".into(), json!(stage.as_str()));
        for (k, v) in &self.fields {
            if stage == Stage::RequestReceived && (k == "responseStatus" || k == "responseObject") {
                continue;
            }
            e.insert(k.clone(), v.clone());
        }
        e.insert("requestReceivedTimestamp".into(), json!(timestamp(self.received)));
        e.insert("stageTimestamp".into(), json!(timestamp(if stage == Stage::RequestReceived { self.received } else { Utc::now() })));
        if !self.annotations.is_empty() {
            e.insert("annotations".into(), Value::Object(self.annotations.clone()));
        }
        Some(Value::Object(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_carries_what_its_level_asks() {
        let info = crate::endpoints::requestinfo::PathInfo::parse("POST", "/api/v1/namespaces/team/pods", "");
        let jane = UserInfo { name: "jane".into(), groups: vec!["devs".into()], ..Default::default() };
        let a = crate::filters::authorization::attributes(&jane, &info);
        let metadata = Decision { level: Level::Metadata, omit_stages: vec![] };
        let mut e = Event::new(metadata, Utc::now(), "/api/v1/namespaces/team/pods", &a, Some("127.0.0.1".into()), Some("kubectl/v1.33"));
        e.request_object(json!({"kind": "Pod", "metadata": {"name": "web"}}));
        e.annotate("authorization.k8s.io/decision", "allow");
        let received = e.at(Stage::RequestReceived).expect("written");
        assert_eq!(received["verb"], "create");
        assert_eq!(received["objectRef"], json!({"resource": "pods", "namespace": "team", "apiVersion": "v1", "name": "web"}), "a create's object named by its body");
        assert_eq!(received["user"], json!({"username": "jane", "groups": ["devs"]}));
        assert!(received.get("requestObject").is_none(), "not at Metadata");
        e.response_status(201, None);
        let complete = e.at(Stage::ResponseComplete).expect("written");
        assert_eq!((complete["auditID"].clone(), complete["responseStatus"]["code"].clone()), (received["auditID"].clone(), json!(201)));
        assert_eq!(complete["annotations"]["authorization.k8s.io/decision"], "allow");

        let request = Decision { level: Level::Request, omit_stages: vec![Stage::RequestReceived] };
        let mut e = Event::new(request, Utc::now(), "/x", &a, None, None);
        e.request_object(json!({"kind": "Pod"}));
        assert!(e.at(Stage::RequestReceived).is_none(), "omitted");
        assert_eq!(e.at(Stage::ResponseComplete).expect("written")["requestObject"], json!({"kind": "Pod"}));
        let none = Event::new(Decision { level: Level::None, omit_stages: vec![] }, Utc::now(), "/x", &a, None, None);
        assert!(none.at(Stage::ResponseComplete).is_none());
    }
}
