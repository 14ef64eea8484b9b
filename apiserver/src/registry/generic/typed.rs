//! Mirrors the typed decoding of k8s.io/apimachinery's serializers (runtime.Decode into the Go
//! type, with strict field checking): a request body goes through its k8s-openapi type and back,
//! which checks its types, finds the fields the type does not know and gives the canonical JSON.
//! The same type gives the OpenAPI schema.

use std::any::Any;
use std::marker::PhantomData;

use schemars::{JsonSchema, SchemaGenerator};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Error, Result};

/// How a resource's objects are decoded and described: through their k8s-openapi type. A
/// resource names its codec in its `ResourceInfo` (`&Typed::<Pod>::NEW`).
pub trait Codec: Send + Sync {
    /// Decodes into the typed object and back: the canonical JSON and the fields the type does not
    /// know, as paths (`spec.bogusField`).
    fn decode(&self, kind: &str, v: Value) -> Result<(Value, Vec<String>)>;

    /// Adds the type's OpenAPI schema (and those it refers to) to `generator`; returns the name it
    /// is defined under (`io.k8s.api.core.v1.Pod`).
    fn openapi_schema(&self, generator: &mut SchemaGenerator) -> String;
}

/// The codec of a k8s-openapi type.
pub struct Typed<T>(PhantomData<fn() -> T>);

impl<T> Typed<T> {
    pub const NEW: Self = Typed(PhantomData);
}

impl<T: DeserializeOwned + Serialize + JsonSchema> Codec for Typed<T> {
    fn decode(&self, kind: &str, v: Value) -> Result<(Value, Vec<String>)> {
        typed_roundtrip::<T>(kind, v)
    }

    fn openapi_schema(&self, generator: &mut SchemaGenerator) -> String {
        generator.subschema_for::<T>();
        T::schema_name().into_owned()
    }
}

/// The codec of a kind served under a version k8s-openapi has no type for, whose fields are
/// those of a version it has (`authentication.k8s.io/v1beta1` SelfSubjectReview is v1's): the
/// object is decoded as `api_version`'s type and keeps the version it was sent as.
pub struct SameAs {
    pub codec: &'static dyn Codec,
    /// The version `codec`'s type checks for.
    pub api_version: &'static str,
}

impl Codec for SameAs {
    fn decode(&self, kind: &str, mut v: Value) -> Result<(Value, Vec<String>)> {
        let sent = v.get("apiVersion").cloned();
        if let Some(map) = v.as_object_mut() {
            map.insert("apiVersion".into(), Value::from(self.api_version));
        }
        let (mut canonical, unknown) = self.codec.decode(kind, v)?;
        if let (Some(sent), Some(map)) = (sent, canonical.as_object_mut()) {
            map.insert("apiVersion".into(), sent);
        }
        Ok((canonical, unknown))
    }

    fn openapi_schema(&self, generator: &mut SchemaGenerator) -> String {
        self.codec.openapi_schema(generator)
    }
}

/// A new object on its way through BeforeCreate, changed by several hands in turn — the type's
/// defaults, mutating admission, PrepareForCreate — each of which may work on the JSON or on the
/// typed form. The typed form is decoded by the first hand that asks for it and encoded back once,
/// at the end: decoding and encoding a pod costs more than everything those hands do to it.
pub struct Object {
    json: Value,
    typed: Option<Box<dyn Decoded>>,
}

/// A typed form, and how to encode it back.
trait Decoded {
    fn encode(&self) -> Option<Value>;
    fn as_any(&mut self) -> &mut dyn Any;
}

impl<T: Serialize + 'static> Decoded for T {
    fn encode(&self) -> Option<Value> {
        serde_json::to_value(self).ok()
    }
    fn as_any(&mut self) -> &mut dyn Any {
        self
    }
}

impl Object {
    pub fn new(json: Value) -> Self {
        Self { json, typed: None }
    }

    /// The object as a `T`, decoded on first use; `None` when it does not decode as one (the
    /// hand that asked leaves it alone, and validation will say what is wrong).
    pub fn typed_mut<T: DeserializeOwned + Serialize + 'static>(&mut self) -> Option<&mut T> {
        if !self.typed.as_mut().is_some_and(|t| t.as_any().is::<T>()) {
            self.sync_json();
            self.typed = Some(Box::new(T::deserialize(&self.json).ok()?));
        }
        self.typed.as_mut().and_then(|t| t.as_any().downcast_mut::<T>())
    }

    /// The object as JSON (the typed form, if any, encoded back first).
    pub fn json_mut(&mut self) -> &mut Value {
        self.sync_json();
        &mut self.json
    }

    pub fn into_json(mut self) -> Value {
        self.sync_json();
        self.json
    }

    /// Encodes the typed form back into the JSON, and forgets it. (Should the encoding fail, the
    /// JSON stays what it was before the typed form was changed.)
    fn sync_json(&mut self) {
        if let Some(v) = self.typed.take().and_then(|t| t.encode()) {
            self.json = v;
        }
    }
}

/// Decodes `v` into `T` and back. Fields the type does not know are returned as paths.
pub fn typed_roundtrip<T: DeserializeOwned + Serialize>(kind: &str, v: Value) -> Result<(Value, Vec<String>)> {
    // From a borrow: `v` is still needed to find the unknown fields.
    let typed = T::deserialize(&v).map_err(|e| Error::BadRequest(format!("error decoding {kind}: {e}")))?;
    let canonical = serde_json::to_value(&typed).map_err(|e| Error::Internal(e.to_string()))?;
    let mut unknown = Vec::new();
    unknown_fields(&v, &canonical, "", &mut unknown);
    Ok((canonical, unknown))
}

fn unknown_fields(input: &Value, known: &Value, path: &str, out: &mut Vec<String>) {
    match (input, known) {
        (Value::Object(i), Value::Object(k)) => {
            // A field's path is only spelled out when it is needed: most fields are known scalars.
            let p = |key: &str| if path.is_empty() { key.to_string() } else { format!("{path}.{key}") };
            for (key, iv) in i {
                match k.get(key) {
                    Some(kv) if has_fields(iv) => unknown_fields(iv, kv, &p(key), out),
                    Some(_) => {}
                    // Nulls and empty values are dropped by the typed form without being unknown.
                    None if iv.is_null() || is_empty(iv) => {}
                    None => out.push(p(key)),
                }
            }
        }
        (Value::Array(i), Value::Array(k)) => {
            for (n, (iv, kv)) in i.iter().zip(k).enumerate().filter(|(_, (iv, _))| has_fields(iv)) {
                unknown_fields(iv, kv, &format!("{path}[{n}]"), out);
            }
        }
        _ => {}
    }
}

/// Whether `v` can hold fields of its own (an object, or an array that may hold objects).
fn has_fields(v: &Value) -> bool {
    matches!(v, Value::Object(_) | Value::Array(_))
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Null => true,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    use super::*;

    #[test]
    fn schemas_are_named_as_kube_openapi_names_them() {
        let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
        assert_eq!(Typed::<Pod>::NEW.openapi_schema(&mut generator), "io.k8s.api.core.v1.Pod");
        assert_eq!(Typed::<Lease>::NEW.openapi_schema(&mut generator), "io.k8s.api.coordination.v1.Lease");
        let defs = generator.take_definitions(true);
        assert!(defs.contains_key("io.k8s.api.core.v1.Pod") && defs.contains_key("io.k8s.api.core.v1.PodSpec"), "{:?}", defs.keys());
    }

    #[test]
    fn an_object_is_decoded_once_for_every_hand_and_encoded_back() {
        let mut obj = Object::new(json!({"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c"}]}}));
        obj.typed_mut::<Pod>().expect("a pod").spec.as_mut().expect("spec").restart_policy = Some("Never".into());
        let pod = obj.typed_mut::<Pod>().expect("still a pod");
        assert_eq!(pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()), Some("Never"), "the same typed form");
        obj.json_mut()["status"] = json!({"phase": "Pending"});
        assert_eq!(obj.typed_mut::<Pod>().and_then(|p| p.status.clone()).and_then(|s| s.phase), Some("Pending".into()), "JSON changes reach the typed form");
        assert_eq!(
            obj.into_json(),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
                   "spec": {"containers": [{"name": "c"}], "restartPolicy": "Never"}, "status": {"phase": "Pending"}}),
            "the typed form's encoding (which writes apiVersion and kind)"
        );
        let mut not_a_pod = Object::new(json!({"spec": "nope"}));
        assert!(not_a_pod.typed_mut::<Pod>().is_none());
        assert_eq!(not_a_pod.into_json(), json!({"spec": "nope"}), "left as it was");
    }

    #[test]
    fn unknown_fields_are_found_and_dropped() {
        let pod = json!({"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "bogus": 1}], "extra": {"a": 1}, "empty": {}}});
        let (canonical, unknown) = Typed::<Pod>::NEW.decode("Pod", pod).expect("decodes");
        assert_eq!(unknown, vec!["spec.containers[0].bogus", "spec.extra"]);
        assert!(canonical.pointer("/spec/extra").is_none());
    }
}
