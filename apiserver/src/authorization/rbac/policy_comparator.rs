//! Mirrors pkg/registry/rbac/validation/policy_comparator.go (`Covers`): whether one set of
//! policy rules grants everything another does. The default policy's reconciliation adds the
//! rules a role is missing by it, and the escalation checks refuse a role or binding that
//! would grant what its author does not hold.

use serde_json::Value;

/// One atomic permission: a single verb on a single group's resource (and object name), or on a
/// single non-resource URL (`BreakdownRule`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Atom {
    pub verb: String,
    pub group: Option<String>,
    pub resource: Option<String>,
    pub name: Option<String>,
    pub url: Option<String>,
}

fn strings<'a>(rule: &'a Value, field: &str) -> Vec<&'a str> {
    rule.get(field).and_then(Value::as_array).map(|l| l.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}

/// A rule broken into its atoms.
pub fn breakdown(rule: &Value) -> Vec<Atom> {
    let verbs = strings(rule, "verbs");
    let names = strings(rule, "resourceNames");
    let mut atoms = Vec::new();
    for group in strings(rule, "apiGroups") {
        for resource in strings(rule, "resources") {
            for verb in &verbs {
                let atom = |name: Option<&str>| Atom { verb: verb.to_string(), group: Some(group.into()), resource: Some(resource.into()), name: name.map(String::from), url: None };
                if names.is_empty() {
                    atoms.push(atom(None));
                } else {
                    atoms.extend(names.iter().map(|n| atom(Some(n))));
                }
            }
        }
    }
    for url in strings(rule, "nonResourceURLs") {
        for verb in &verbs {
            atoms.push(Atom { verb: verb.to_string(), group: None, resource: None, name: None, url: Some(url.into()) });
        }
    }
    atoms
}

/// Whether `owner` (a list of rules) covers `atom` (`ruleCovers` for one of them at least).
pub fn covers_atom(owner: &[Value], atom: &Atom) -> bool {
    owner.iter().any(|rule| {
        let verbs = strings(rule, "verbs");
        if !(verbs.contains(&"*") || verbs.contains(&atom.verb.as_str())) {
            return false;
        }
        if let Some(url) = &atom.url {
            return strings(rule, "nonResourceURLs").iter().any(|u| u == url || u.strip_suffix('*').is_some_and(|p| url.starts_with(p)));
        }
        let (Some(group), Some(resource)) = (&atom.group, &atom.resource) else { return false };
        let groups = strings(rule, "apiGroups");
        if !(groups.contains(&"*") || groups.contains(&group.as_str())) {
            return false;
        }
        let resources = strings(rule, "resources");
        let resource_covered = resources.contains(&"*")
            || resources.contains(&resource.as_str())
            || resource.split_once('/').is_some_and(|(_, sub)| resources.contains(&format!("*/{sub}").as_str()));
        if !resource_covered {
            return false;
        }
        let names = strings(rule, "resourceNames");
        match &atom.name {
            None => names.is_empty(),
            Some(name) => names.is_empty() || names.contains(&name.as_str()),
        }
    })
}

/// Whether `owner` covers every rule of `servant`, and the atoms it does not (`Covers`).
pub fn covers(owner: &[Value], servant: &[Value]) -> (bool, Vec<Atom>) {
    let missing: Vec<Atom> = servant.iter().flat_map(breakdown).filter(|a| !covers_atom(owner, a)).collect();
    (missing.is_empty(), missing)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn covering() {
        let owner = vec![
            json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "pods/log"]}),
            json!({"verbs": ["*"], "apiGroups": ["apps"], "resources": ["*/scale"]}),
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
            json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/api/*"]}),
        ];
        let yes = [
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}),
            json!({"verbs": ["list", "get"], "apiGroups": [""], "resources": ["pods/log"]}),
            json!({"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments/scale"]}),
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}),
            json!({"verbs": ["get"], "nonResourceURLs": ["/api/v1", "/healthz"]}),
        ];
        for rule in &yes {
            assert!(covers(&owner, std::slice::from_ref(rule)).0, "{rule}");
        }
        let no = [
            json!({"verbs": ["watch"], "apiGroups": [""], "resources": ["pods"]}),
            json!({"verbs": ["get"], "apiGroups": ["*"], "resources": ["pods"]}),
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/exec"]}),
            json!({"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments"]}),
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}),
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["b"]}),
            json!({"verbs": ["get"], "nonResourceURLs": ["/healthz/ready"]}),
            json!({"verbs": ["post"], "nonResourceURLs": ["/healthz"]}),
        ];
        for rule in &no {
            assert!(!covers(&owner, std::slice::from_ref(rule)).0, "{rule}");
        }
        let (ok, missing) = covers(&owner, &[json!({"verbs": ["get", "delete"], "apiGroups": [""], "resources": ["pods"]})]);
        assert!(!ok);
        assert_eq!(missing.len(), 1);
        assert_eq!(missing[0].verb, "delete");
    }
}
