//! Errors of this crate, mirroring the error values apimachinery's packages return.
//!
//! Selectors and patches fail on user input, so every variant carries a message worded as
//! Kubernetes words it: the API server copies it verbatim into a `metav1.Status`. Turning an
//! error into an HTTP status happens at the API server's edge, guided by `http_code()`.

use thiserror::Error;

/// Several error messages as one, as `utilerrors.NewAggregate` (pkg/util/errors) prints them:
/// one alone, else `[a, b]`.
pub fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Errors from parsing selectors (`labels`, `fields`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// A label selector that does not parse or whose keys/values are invalid
    /// (labels.Parse's error text).
    #[error("{0}")]
    InvalidLabelSelector(String),
    /// A field selector that does not parse (fields.ParseSelector's error text).
    #[error("{0}")]
    InvalidFieldSelector(String),
    /// A field selector naming a field the resource does not index.
    #[error("field label not supported: {0}")]
    FieldNotSupported(String),
}

impl Error {
    /// Every selector error is the client's fault: 400 Bad Request.
    pub fn http_code(&self) -> u16 {
        400
    }
}

/// Errors from applying a JSON, merge or strategic merge patch.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PatchError {
    /// The patch document itself is malformed (not JSON, wrong shape, unknown directive):
    /// 400 Bad Request, as the API server answers for an undecodable patch.
    #[error("{0}")]
    BadPatch(String),
    /// The patch is well formed but cannot be applied to this object (a JSON patch `test`
    /// that fails, a path that does not exist): 422 Unprocessable Entity.
    #[error("{0}")]
    CannotApply(String),
}

impl PatchError {
    pub fn http_code(&self) -> u16 {
        match self {
            PatchError::BadPatch(_) => 400,
            PatchError::CannotApply(_) => 422,
        }
    }
}

/// Errors from server-side apply.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ApplyError {
    /// Fields owned by other managers that the applied configuration sets to a different value;
    /// each entry is `(manager, field path)`. 409 Conflict unless the client sends `force=true`.
    #[error("{}", conflict_message(.0))]
    Conflict(Vec<(String, String)>),
    /// The applied configuration could not be merged (it is not an object, a keyed list item
    /// lacks its key, ...); the status code is the patch error's (400 or 422).
    #[error(transparent)]
    Patch(#[from] PatchError),
}

/// `StatusCause.reason` of each conflict in a 409 from server-side apply.
pub const FIELD_MANAGER_CONFLICT: &str = "FieldManagerConflict";

impl ApplyError {
    /// The `details.causes` of the 409 Status, as `(message, field)`; the reason of each is
    /// [`FIELD_MANAGER_CONFLICT`]. Empty for other errors.
    pub fn conflict_causes(&self) -> Vec<(String, String)> {
        match self {
            ApplyError::Conflict(conflicts) => conflicts
                .iter()
                .map(|(manager, path)| (format!("conflict with \"{manager}\""), path.clone()))
                .collect(),
            ApplyError::Patch(_) => Vec::new(),
        }
    }

    pub fn http_code(&self) -> u16 {
        match self {
            ApplyError::Conflict(_) => 409,
            ApplyError::Patch(e) => e.http_code(),
        }
    }
}

/// Kubernetes' wording (structured-merge-diff's `Conflicts.Error`): one conflict on one line,
/// several grouped by manager with one `- path` line each.
fn conflict_message(conflicts: &[(String, String)]) -> String {
    if let [(manager, path)] = conflicts {
        return format!("Apply failed with 1 conflict: conflict with \"{manager}\": {path}");
    }
    let mut by_manager: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for (manager, path) in conflicts {
        by_manager.entry(manager).or_default().push(path);
    }
    let mut msg = format!("Apply failed with {} conflicts: ", conflicts.len());
    let groups: Vec<String> = by_manager
        .iter()
        .map(|(manager, paths)| {
            let lines: Vec<String> = paths.iter().map(|p| format!("- {p}")).collect();
            format!("conflicts with \"{manager}\":\n{}", lines.join("\n"))
        })
        .collect();
    msg.push_str(&groups.join("\n"));
    msg
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_messages() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (
                &[("kubectl-client-side-apply", ".spec.replicas")],
                "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\": .spec.replicas",
            ),
            (
                &[("a", ".spec.x"), ("b", ".spec.y"), ("a", ".spec.z")],
                "Apply failed with 3 conflicts: conflicts with \"a\":\n- .spec.x\n- .spec.z\nconflicts with \"b\":\n- .spec.y",
            ),
        ];
        for (conflicts, want) in cases {
            let c = conflicts
                .iter()
                .map(|(m, p)| (m.to_string(), p.to_string()))
                .collect();
            let err = ApplyError::Conflict(c);
            assert_eq!(err.to_string(), *want);
            assert_eq!(err.http_code(), 409);
            assert_eq!(err.conflict_causes().len(), conflicts.len());
            assert_eq!(
                err.conflict_causes()[0],
                (
                    format!("conflict with \"{}\"", conflicts[0].0),
                    conflicts[0].1.to_string()
                )
            );
        }
    }
}
