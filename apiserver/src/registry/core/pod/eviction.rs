//! Mirrors pkg/registry/core/pod/storage/eviction.go's EvictionREST: `POST pods/<name>/eviction`
//! deletes the pod with the eviction's delete options. There are no PodDisruptionBudgets to
//! consult, so an eviction is a delete. It is a dry run when the eviction's
//! `deleteOptions.dryRun` or the request's `?dryRun` says so (what `kubectl drain
//! --dry-run=server` sends is the former); when both are set they must agree.

use futures::future::LocalBoxFuture;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::registry::generic::options::{DeleteOptions, DryRun, WriteOptions};
use crate::registry::generic::rest::RestRequest;

/// `POST pods/<name>/eviction` (rest.Creater).
pub fn create(r: RestRequest<'_>, eviction: Value, opts: WriteOptions) -> LocalBoxFuture<'_, Result<()>> {
    Box::pin(async move {
        let mut delete = DeleteOptions::from_json(eviction.get("deleteOptions").unwrap_or(&Value::Null));
        delete.dry_run.validate("DeleteOptions")?;
        delete.dry_run = propagate_dry_run(&delete.dry_run, &opts.dry_run)?;
        r.registry.delete(Some(r.namespace), r.name, &delete).await?;
        Ok(())
    })
}

/// The eviction's dry-run (`propagateDryRun`): the body's, or the request's when the body has
/// none; both set, they must be the same.
fn propagate_dry_run(body: &DryRun, request: &DryRun) -> Result<DryRun> {
    if !body.is_dry_run() {
        return Ok(request.clone());
    }
    if request.is_dry_run() && request != body {
        // Go's `%v` of the two []string.
        return Err(Error::BadRequest(format!("Non-matching dry-run options in request and content: [{}] and [{}]", request.0.join(" "), body.0.join(" "))));
    }
    Ok(body.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eviction_is_a_dry_run_when_either_says_so_and_both_agree() {
        let all = DryRun(vec!["All".into()]);
        let none = DryRun::default();
        assert_eq!(propagate_dry_run(&none, &none).expect("ok"), none);
        assert_eq!(propagate_dry_run(&all, &none).expect("ok"), all, "kubectl drain --dry-run=server: the body's");
        assert_eq!(propagate_dry_run(&none, &all).expect("ok"), all, "?dryRun=All");
        assert_eq!(propagate_dry_run(&all, &all).expect("ok"), all);
        let twice = DryRun(vec!["All".into(), "All".into()]);
        let e = propagate_dry_run(&twice, &all).expect_err("they differ");
        assert_eq!(e.code(), 400);
        assert_eq!(e.to_string(), "Non-matching dry-run options in request and content: [All] and [All All]");
    }
}
