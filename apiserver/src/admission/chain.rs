//! Mirrors k8s.io/apiserver/pkg/admission/chain.go: the plugins in order — every mutating plugin
//! that handles the request, then (on the object the store is about to write) every validating
//! one. The first refusal ends the request.

use serde_json::Value;

use super::interfaces::{Attributes, MutationInterface, ValidationInterface};
use crate::error::Result;

pub struct Chain {
    mutating: Vec<Box<dyn MutationInterface>>,
    validating: Vec<Box<dyn ValidationInterface>>,
}

impl Chain {
    pub fn new(mutating: Vec<Box<dyn MutationInterface>>, validating: Vec<Box<dyn ValidationInterface>>) -> Self {
        Self { mutating, validating }
    }

    /// The mutating phase (`Admit`), from the handler, before the store's create or delete.
    pub async fn admit(&self, a: &Attributes<'_>, mut obj: Option<&mut Value>) -> Result<()> {
        for plugin in self.mutating.iter().filter(|p| p.handles(a)) {
            plugin.admit(a, obj.as_deref_mut()).await?;
        }
        Ok(())
    }

    /// The validating phase (`Validate`), from the store, once BeforeCreate has run.
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

    /// A test plugin that records when it runs, adds its name to `metadata.labels` (mutating),
    /// and refuses objects labelled `refuse=<its name>`.
    struct Recorder {
        name: &'static str,
        seen: Arc<Mutex<Vec<String>>>,
        deletes: bool,
    }

    impl Recorder {
        fn refuses(&self, obj: &Value) -> Result<()> {
            self.seen.lock().expect("not poisoned").push(self.name.to_string());
            match obj.pointer("/metadata/labels/refuse") == Some(&json!(self.name)) {
                true => Err(Error::Forbidden(format!("{} refuses", self.name))),
                false => Ok(()),
            }
        }
    }

    impl MutationInterface for Recorder {
        fn name(&self) -> &'static str {
            self.name
        }
        fn handles(&self, a: &Attributes<'_>) -> bool {
            a.operation == Operation::Create || self.deletes
        }
        fn admit<'a>(&'a self, _a: &'a Attributes<'a>, obj: Option<&'a mut Value>) -> LocalBoxFuture<'a, Result<()>> {
            Box::pin(async move {
                let Some(obj) = obj else { return self.refuses(&json!({})) };
                self.refuses(obj)?;
                obj["metadata"]["labels"][self.name] = json!("admitted");
                Ok(())
            })
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
            self.refuses(obj)
        }
    }

    #[test]
    fn mutating_plugins_run_in_order_then_validating_ones_and_the_first_refusal_ends_it() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let plugin = |name, deletes| Recorder { name, seen: seen.clone(), deletes };
        let chain = Chain::new(vec![Box::new(plugin("first", true)), Box::new(plugin("second", false))], vec![Box::new(plugin("check", false))]);
        let create = Attributes { operation: Operation::Create, resource: &WIDGETS, namespace: Some("default"), name: "w", dry_run: false };
        let mut obj = json!({"metadata": {"name": "w"}});
        futures::executor::block_on(chain.admit(&create, Some(&mut obj))).expect("admitted");
        chain.validate(&create, &obj).expect("valid");
        assert_eq!(*seen.lock().expect("not poisoned"), ["first", "second", "check"]);
        assert_eq!(obj["metadata"]["labels"], json!({"first": "admitted", "second": "admitted"}), "each plugin sees the one before");

        seen.lock().expect("not poisoned").clear();
        let mut refused = json!({"metadata": {"name": "w", "labels": {"refuse": "first"}}});
        let err = futures::executor::block_on(chain.admit(&create, Some(&mut refused))).expect_err("refused");
        assert_eq!(err.to_string(), "first refuses");
        assert_eq!(*seen.lock().expect("not poisoned"), ["first"], "the chain stops at the first refusal");

        seen.lock().expect("not poisoned").clear();
        let delete = Attributes { operation: Operation::Delete, ..create };
        futures::executor::block_on(chain.admit(&delete, None)).expect("admitted");
        assert_eq!(*seen.lock().expect("not poisoned"), ["first"], "only the plugins that handle a delete");
    }
}
