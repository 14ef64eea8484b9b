//! Mirrors pkg/controller/job/indexed_job_utils.go: Indexed Jobs. Each pod carries its
//! completion index (0 … completions−1) in the `batch.kubernetes.io/job-completion-index`
//! annotation and label, a hostname `<job>-<index>` and the `JOB_COMPLETION_INDEX` variable;
//! the Job is complete once every index has succeeded, which `status.completedIndexes` records
//! as compressed ranges ("1,3-5,7").

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodTemplateSpec};

/// The annotation (and label) holding a pod's index (`batch.JobCompletionIndexAnnotation`).
pub const JOB_COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// The environment variable each container gets (`JobCompletionIndexEnvName`).
pub const JOB_COMPLETION_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

/// Sorted, disjoint, non-adjacent inclusive intervals of indexes (`orderedIntervals`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OrderedIntervals(pub Vec<(usize, usize)>);

impl OrderedIntervals {
    /// From a set of indexes.
    pub fn from_indexes(indexes: impl IntoIterator<Item = usize>) -> Self {
        let sorted: BTreeSet<usize> = indexes.into_iter().collect();
        let mut v: Vec<(usize, usize)> = Vec::new();
        for ix in sorted {
            match v.last_mut() {
                Some((_, last)) if *last + 1 == ix => *last = ix,
                _ => v.push((ix, ix)),
            }
        }
        OrderedIntervals(v)
    }

    /// parseIndexesFromString: the indexes below `completions` that `s` names; what does not
    /// parse is skipped.
    pub fn parse(s: &str, completions: usize) -> Self {
        let mut all = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) else { continue };
            all.extend((a..=b.min(completions.saturating_sub(1))).take_while(|i| *i < completions));
        }
        Self::from_indexes(all)
    }

    /// withOrderedIndexes: these intervals plus `more`.
    pub fn with_indexes(&self, more: impl IntoIterator<Item = usize>) -> Self {
        Self::from_indexes(self.iter().chain(more))
    }

    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().flat_map(|(a, b)| *a..=*b)
    }

    pub fn total(&self) -> usize {
        self.0.iter().map(|(a, b)| b - a + 1).sum()
    }

    pub fn has(&self, ix: usize) -> bool {
        self.0.iter().any(|(a, b)| *a <= ix && ix <= *b)
    }
}

impl fmt::Display for OrderedIntervals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (a, b)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match b - a {
                0 => write!(f, "{a}")?,
                1 => write!(f, "{a},{b}")?,
                _ => write!(f, "{a}-{b}")?,
            }
        }
        Ok(())
    }
}

/// getCompletionIndex: the pod's index, if its annotation holds one.
pub fn completion_index(pod: &Pod) -> Option<usize> {
    pod.metadata.annotations.as_ref()?.get(JOB_COMPLETION_INDEX)?.parse().ok()
}

/// calculateSucceededIndexes: the indexes recorded in the status, and those plus the indexes
/// of succeeded pods not yet counted (still carrying the tracking finalizer).
pub fn succeeded_indexes(completed_indexes: &str, completions: usize, pods: &[Arc<Pod>], has_finalizer: impl Fn(&Pod) -> bool) -> (OrderedIntervals, OrderedIntervals) {
    let prev = OrderedIntervals::parse(completed_indexes, completions);
    let new = pods.iter().filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded") && has_finalizer(p)).filter_map(|p| completion_index(p)).filter(|ix| *ix < completions);
    let all = prev.with_indexes(new);
    (prev, all)
}

/// firstPendingIndexes: the lowest `count` indexes neither succeeded nor held by an active pod.
pub fn first_pending_indexes(succeeded: &OrderedIntervals, active: &[Arc<Pod>], count: usize, completions: usize) -> Vec<usize> {
    let held: HashSet<usize> = active.iter().filter_map(|p| completion_index(p)).collect();
    (0..completions).filter(|ix| !succeeded.has(*ix) && !held.contains(ix)).take(count).collect()
}

/// appendDuplicatedIndexPodsForRemoval: of the active pods, those to delete because their index
/// is missing, out of range or held by another pod as well (one pod per index stays: the one
/// `keep_first` puts first), and those left.
pub fn duplicated_index_pods(active: &[Arc<Pod>], completions: usize, keep_first: impl Fn(&Pod, &Pod) -> std::cmp::Ordering) -> (Vec<Arc<Pod>>, Vec<Arc<Pod>>) {
    let mut sorted: Vec<Arc<Pod>> = active.to_vec();
    sorted.sort_by(|a, b| completion_index(a).cmp(&completion_index(b)).then_with(|| keep_first(a, b)));
    let (mut rm, mut left) = (Vec::new(), Vec::new());
    let mut last: Option<usize> = None;
    for p in sorted {
        match completion_index(&p) {
            Some(ix) if ix < completions && last != Some(ix) => {
                last = Some(ix);
                left.push(p);
            }
            _ => rm.push(p),
        }
    }
    (rm, left)
}

/// The template of index `ix`'s pod: the annotation and label, the hostname, and each
/// container's `JOB_COMPLETION_INDEX` from the annotation (downward API).
pub fn template_for_index(template: &PodTemplateSpec, job_name: &str, ix: usize) -> PodTemplateSpec {
    let mut t = template.clone();
    let meta = t.metadata.get_or_insert_with(Default::default);
    meta.annotations.get_or_insert_with(Default::default).insert(JOB_COMPLETION_INDEX.into(), ix.to_string());
    meta.labels.get_or_insert_with(Default::default).insert(JOB_COMPLETION_INDEX.into(), ix.to_string());
    if let Some(spec) = t.spec.as_mut() {
        spec.hostname = Some(format!("{job_name}-{ix}"));
        let env = EnvVar {
            name: JOB_COMPLETION_INDEX_ENV.into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector { field_path: format!("metadata.annotations['{JOB_COMPLETION_INDEX}']"), api_version: None }),
                ..EnvVarSource::default()
            }),
            value: None,
        };
        for c in spec.init_containers.iter_mut().flatten().chain(spec.containers.iter_mut()) {
            let vars = c.env.get_or_insert_with(Vec::new);
            if !vars.iter().any(|v| v.name == JOB_COMPLETION_INDEX_ENV) {
                vars.push(env.clone());
            }
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, ix: Option<&str>, phase: &str) -> Arc<Pod> {
        let mut v = json!({"metadata": {"name": name}, "status": {"phase": phase}});
        if let Some(ix) = ix {
            v["metadata"]["annotations"] = json!({JOB_COMPLETION_INDEX: ix});
        }
        Arc::new(serde_json::from_value(v).expect("pod"))
    }

    #[test]
    fn completed_indexes_are_compressed_ranges() {
        // (indexes, text)
        let cases: [(&[usize], &str); 5] = [(&[], ""), (&[0], "0"), (&[0, 1], "0,1"), (&[0, 1, 2, 5, 7, 8, 9], "0-2,5,7-9"), (&[3, 1, 2], "1-3")];
        for (ixs, text) in cases {
            let iv = OrderedIntervals::from_indexes(ixs.iter().copied());
            assert_eq!(iv.to_string(), text);
            assert_eq!(iv.total(), ixs.len());
            assert_eq!(OrderedIntervals::parse(text, 100), iv, "{text}");
        }
        // Out of range, or not parsing: left out.
        assert_eq!(OrderedIntervals::parse("1,3-7,x,9", 5).to_string(), "1,3,4");
        assert_eq!(OrderedIntervals::parse("0-2", 5).with_indexes([4, 3]).to_string(), "0-4");
        assert!(OrderedIntervals::parse("0-2,6", 9).has(6) && !OrderedIntervals::parse("0-2,6", 9).has(3));
    }

    #[test]
    fn pending_indexes_skip_the_succeeded_and_the_running() {
        let done = OrderedIntervals::parse("0,2", 6);
        let active = [pod("a", Some("1"), "Running"), pod("b", None, "Running")];
        assert_eq!(first_pending_indexes(&done, &active, 2, 6), [3, 4]);
        assert_eq!(first_pending_indexes(&done, &active, 9, 6), [3, 4, 5]);
        let pods = [pod("s", Some("3"), "Succeeded"), pod("f", Some("4"), "Failed"), pod("big", Some("9"), "Succeeded")];
        let (prev, all) = succeeded_indexes("0,2", 6, &pods, |_| true);
        assert_eq!((prev.to_string(), all.to_string()), ("0,2".to_string(), "0,2,3".to_string()));
        let (_, all) = succeeded_indexes("0,2", 6, &pods, |_| false);
        assert_eq!(all.to_string(), "0,2", "counted already (no finalizer)");
    }

    #[test]
    fn duplicated_and_invalid_indexes_are_removed() {
        let active = [pod("a", Some("1"), "Running"), pod("b", Some("1"), "Pending"), pod("c", None, "Running"), pod("d", Some("7"), "Running"), pod("e", Some("0"), "Running")];
        let running_first = |a: &Pod, b: &Pod| {
            let phase = |p: &Pod| p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
            phase(b).cmp(&phase(a)) // "Running" > "Pending": Running first
        };
        let (rm, left) = duplicated_index_pods(&active, 3, running_first);
        let names = |v: &[Arc<Pod>]| -> Vec<String> { v.iter().filter_map(|p| p.metadata.name.clone()).collect() };
        assert_eq!(names(&left), ["e", "a"]);
        let mut rm = names(&rm);
        rm.sort();
        assert_eq!(rm, ["b", "c", "d"]);
    }

    #[test]
    fn an_index_template() {
        let template: PodTemplateSpec = serde_json::from_value(json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}})).expect("template");
        let t = template_for_index(&template, "work", 3);
        let meta = t.metadata.clone().unwrap_or_default();
        assert_eq!(meta.annotations.unwrap_or_default().get(JOB_COMPLETION_INDEX).map(String::as_str), Some("3"));
        assert_eq!(meta.labels.unwrap_or_default().get(JOB_COMPLETION_INDEX).map(String::as_str), Some("3"));
        let spec = t.spec.expect("spec");
        assert_eq!(spec.hostname.as_deref(), Some("work-3"));
        let env = &spec.containers[0].env.as_ref().expect("env")[0];
        assert_eq!(env.name, JOB_COMPLETION_INDEX_ENV);
        assert_eq!(env.value_from.as_ref().and_then(|v| v.field_ref.as_ref()).map(|f| f.field_path.as_str()), Some("metadata.annotations['batch.kubernetes.io/job-completion-index']"));
    }
}
