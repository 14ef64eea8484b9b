//! Mirrors Kubernetes' pkg/printers: server-side Tables, what `kubectl get` prints.
//!
//! `kubectl get` asks for `application/json;as=Table;v=v1;g=meta.k8s.io` and prints whatever columns
//! the server returns, so the server, not kubectl, decides what `READY`, `STATUS` or `ROLES` mean.
//! Kubernetes registers one `TableHandler` per kind (column definitions plus a `printX` function that
//! turns one object into cells, pkg/printers/internalversion/printers.go). Here each resource's
//! folder under [`crate::registry`] holds its [`tablegenerator::Printer`] (`printer.rs`), and its
//! `ResourceInfo` names it; this module holds what every printer shares:
//!
//! - [`tablegenerator`]: the `Printer` interface, the NAME/AGE default, and the Table itself
//!   ([`tablegenerator::table`], [`tablegenerator::table_json`]);
//! - [`fields`]: reading an object's fields as Go's zero values would;
//! - [`duration`]: `HumanDuration`, the AGE column's format.
//!
//! The server always prints as if `-o wide` were given (`GenerateOptions{Wide: true}`): every row
//! carries the priority-1 cells too, and kubectl hides those columns unless asked for them.
//!
//! Objects arrive as JSON rather than typed structs on purpose: a printer must never fail, and reading
//! a missing or malformed field as "absent" is exactly what Go's zero values give the Go printers.
//!
//! Implementation caveats (left out on purpose):
//! - A kind without a printer of its own gets NAME and AGE ([`tablegenerator::DefaultPrinter`]);
//!   the real apiserver's fallback prints NAME and a `date`-typed "Created At" instead. Roles and
//!   ClusterRoles, whose storage asks for that fallback by name, get it here too
//!   ([`tablegenerator::DefaultTableConvertor`]).
//! - Column descriptions are short paraphrases, not the full OpenAPI field docs Kubernetes uses.
//! - Event's FIRST SEEN falls back to `metadata.creationTimestamp` when both `firstTimestamp` and
//!   `eventTime` are missing (Kubernetes prints `<unknown>`).
//! - Rows carry the Pod `Completed` row condition but no `includeObject=Object` support: the row
//!   object is always the metadata.

pub mod duration;
pub mod fields;
pub mod tablegenerator;
