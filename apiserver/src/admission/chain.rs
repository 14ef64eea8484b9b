//! Mirrors k8s.io/apiserver/pkg/admission/chain.go: the plugins in order — every mutating plugin
//! that handles the request (on the request, then on the object), then, on the object the store
//! is about to write, every validating one. The first refusal ends the request.

use serde_json::Value;

use super::interfaces::{Attributes, MutationInterface, ValidationInterface};
use crate::error::Result;
use crate::registry::generic::typed::Object;

pub struct Chain {
    mutating: Vec<Box<dyn MutationInterface>>,
    validating: Vec<Box<dyn ValidationInterface>>,
}

impl Chain {
    pub fn new(mutating: Vec<Box<dyn MutationInterface>>, validating: Vec<Box<dyn ValidationInterface>>) -> Self {
        Self { mutating, validating }
    }

    /// The mutating phase on the request (`Admit`), from the handler, before the store's create
    /// or delete.
    pub async fn admit(&self, a: &Attributes<'_>) -> Result<()> {
        for plugin in self.mutating.iter().filter(|p| p.handles(a)) {
            plugin.admit(a).await?;
        }
        Ok(())
    }

    /// Whether a mutating plugin handles the request: a patch is applied once more for admission
    /// only then.
    pub fn handles(&self, a: &Attributes<'_>) -> bool {
        self.mutating.iter().any(|p| p.handles(a))
    }

    /// The mutating phase on the object (`Admit`'s changes), from the store's BeforeCreate, once
    /// the type's defaults are applied.
    pub fn admit_object(&self, a: &Attributes<'_>, obj: &mut Object) -> Result<()> {
        for plugin in self.mutating.iter().filter(|p| p.handles(a)) {
            plugin.admit_object(a, obj)?;
        }
        Ok(())
    }

    /// The validating phase (`Validate`), from the store, on the object about to be written.
    pub fn validate(&self, a: &Attributes<'_>, obj: &Value) -> Result<()> {
        for plugin in self.validating.iter().filter(|p| p.handles(a)) {
            plugin.validate(a, obj)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use futures::future::LocalBoxFuture;
    use serde_json::json;

    use super::*;
    use crate::admission::interfaces::Operation;
    use crate::authentication::user::UserInfo;
    use crate::error::Error;
    use crate::printers::tablegenerator::DefaultPrinter;
    use crate::registry::generic::strategy::ResourceInfo;
    use crate::registry::generic::typed::Typed;

    static WIDGETS: ResourceInfo = ResourceInfo {
        group: "example.com",
        version: "v1",
        kind: "Widget",
        plural: "widgets",
        singular: "widget",
        namespaced: true,
        short_names: &[],
        storage_name: "widgets",
        subresources: &[],
        categories: &[],
        codec: &Typed::<serde_json::Value>::NEW,
        printer: &DefaultPrinter,
    };

    /// A test plugin that records each step it runs (`admit <name>`, `object <name>`, `check
    /// <name>`), adds its name to `metadata.labels`, and refuses an object labelled
    /// `refuse=<name>` or, on the request, a name `refuse-<name>`.
    struct Recorder {
        name: &'static str,
        seen: Arc<Mutex<Vec<String>>>,
        deletes: bool,
    }

    impl Recorder {
        fn record(&self, step: &str) {
            self.seen.lock().expect("not poisoned").push(format!("{step} {}", self.name));
        }

        fn refuses(&self, refused: bool) -> Result<()> {
            if refused { Err(Error::Forbidden(format!("{} refuses", self.name))) } else { Ok(()) }
        }
    }

    impl MutationInterface for Recorder {
        fn name(&self) -> &'static str {
            self.name
        }
        fn handles(&self, a: &Attributes<'_>) -> bool {
            a.operation == Operation::Create || self.deletes
        }
        fn admit<'a>(&'a self, a: &'a Attributes<'a>) -> LocalBoxFuture<'a, Result<()>> {
            Box::pin(async move {
                self.record("admit");
                self.refuses(a.name == format!("refuse-{}", self.name))
            })
        }
        fn admit_object(&self, _a: &Attributes<'_>, obj: &mut Object) -> Result<()> {
            self.record("object");
            let obj = obj.json_mut();
            self.refuses(obj.pointer("/metadata/labels/refuse") == Some(&json!(self.name)))?;
            obj["metadata"]["labels"][self.name] = json!("admitted");
            Ok(())
        }
    }

    impl ValidationInterface for Recorder {
        fn name(&self) -> &'static str {
            self.name
        }
        fn handles(&self, _a: &Attributes<'_>) -> bool {
            true
        }
        fn validate(&self, _a: &Attributes<'_>, obj: &Value) -> Result<()> {
            self.record("check");
            self.refuses(obj.pointer("/metadata/labels/refuse") == Some(&json!(self.name)))
        }
    }

    #[test]
    fn mutating_plugins_run_in_order_then_validating_ones_and_the_first_refusal_ends_it() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let steps = || std::mem::take(&mut *seen.lock().expect("not poisoned"));
        let plugin = |name, deletes| Recorder { name, seen: seen.clone(), deletes };
        let chain = Chain::new(vec![Box::new(plugin("first", true)), Box::new(plugin("second", false))], vec![Box::new(plugin("third", false))]);
        let user = UserInfo::default();
        let create = Attributes { operation: Operation::Create, user: &user, resource: &WIDGETS, subresource: "", namespace: Some("default"), name: "w", dry_run: false, object: None, old_object: None };
        let run = |a: &Attributes<'_>, obj: Value| -> Result<Value> {
            futures::executor::block_on(chain.admit(a))?;
            let mut obj = Object::new(obj);
            chain.admit_object(a, &mut obj)?;
            let obj = obj.into_json();
            chain.validate(a, &obj)?;
            Ok(obj)
        };

        let obj = run(&create, json!({"metadata": {"name": "w"}})).expect("admitted");
        assert_eq!(steps(), ["admit first", "admit second", "object first", "object second", "check third"]);
        assert_eq!(obj["metadata"]["labels"], json!({"first": "admitted", "second": "admitted"}), "each plugin sees the one before");

        let err = run(&create, json!({"metadata": {"name": "w", "labels": {"refuse": "first"}}})).expect_err("refused");
        assert_eq!(err.to_string(), "first refuses");
        assert_eq!(steps(), ["admit first", "admit second", "object first"], "the chain stops at the first refusal");

        let refused_request = Attributes { name: "refuse-first", ..create };
        assert!(run(&refused_request, json!({})).is_err());
        assert_eq!(steps(), ["admit first"], "a refused request never reaches its object");

        let delete = Attributes { operation: Operation::Delete, ..create };
        futures::executor::block_on(chain.admit(&delete)).expect("admitted");
        assert_eq!(steps(), ["admit first"], "only the plugins that handle a delete");
    }
}
