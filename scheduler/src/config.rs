//! Mirrors kube-scheduler's pkg/scheduler/apis/config: the `KubeSchedulerConfiguration` file
//! (`--config`) and its defaults.
//!
//! The subset read (one profile; anything else is an error that names the field):
//!
//! ```yaml
//! apiVersion: kubescheduler.config.k8s.io/v1
//! kind: KubeSchedulerConfiguration
//! percentageOfNodesToScore: 0          # 0 = adaptive, as kube-scheduler
//! profiles:
//! - schedulerName: default-scheduler
//!   plugins:
//!     multiPoint:                      # every extension point the plugin implements
//!       enabled: [{name: NodeAffinity, weight: 5}]
//!       disabled: [{name: InterPodAffinity}]   # or {name: "*"} for all defaults
//!     score:
//!       disabled: [{name: NodeResourcesBalancedAllocation}]
//!   pluginConfig:
//!   - name: NodeResourcesFit
//!     args:
//!       scoringStrategy:
//!         type: MostAllocated          # default LeastAllocated
//!         resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}]
//!   - name: VolumeBinding
//!     args:
//!       bindTimeoutSeconds: 600        # PreBind's wait for the pod's claims to be bound
//! ```
//!
//! The default profile enables every plugin in [`crate::plugins::ALL`] with kube-scheduler's score
//! weights: TaintToleration 3, NodeAffinity 2, PodTopologySpread 2, InterPodAffinity 2,
//! NodeResourcesFit 1, NodeResourcesBalancedAllocation 1.

use std::collections::BTreeMap;

use api::core::v1::well_known::DEFAULT_SCHEDULER_NAME;
use serde::Deserialize;

use crate::plugins::{self, PluginArgs};
use crate::plugins::node_resources_fit::{ScoringStrategy, ScoringStrategyType};


/// The effective configuration of the one profile.
#[derive(Clone, Debug)]
pub struct Profile {
    pub scheduler_name: String,
    /// Enabled plugins, in order.
    pub plugins: Vec<String>,
    /// Score weight per plugin (only plugins with a Score point use theirs).
    pub weights: BTreeMap<String, i64>,
    /// Plugins whose Score point is disabled while their other points stay on.
    pub score_disabled: Vec<String>,
    pub args: PluginArgs,
    /// 0 = adaptive.
    pub percentage_of_nodes_to_score: u32,
}

pub fn default_weight(plugin: &str) -> i64 {
    match plugin {
        plugins::taint_toleration::NAME => 3,
        plugins::node_affinity::NAME | plugins::pod_topology_spread::NAME | plugins::inter_pod_affinity::NAME => 2,
        _ => 1,
    }
}

impl Default for Profile {
    fn default() -> Self {
        Profile {
            scheduler_name: DEFAULT_SCHEDULER_NAME.into(),
            plugins: plugins::ALL.iter().map(|s| s.to_string()).collect(),
            weights: plugins::ALL.iter().map(|p| (p.to_string(), default_weight(p))).collect(),
            score_disabled: Vec::new(),
            args: PluginArgs::default(),
            percentage_of_nodes_to_score: 0,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileConfig {
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default)]
    percentage_of_nodes_to_score: Option<u32>,
    #[serde(default)]
    leader_election: Option<serde_json::Value>,
    #[serde(default)]
    profiles: Vec<FileProfile>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileProfile {
    scheduler_name: Option<String>,
    #[serde(default)]
    plugins: FilePlugins,
    #[serde(default)]
    plugin_config: Vec<FilePluginConfig>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FilePlugins {
    #[serde(default)]
    multi_point: PluginList,
    #[serde(default)]
    score: PluginList,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct PluginList {
    #[serde(default)]
    enabled: Vec<PluginRef>,
    #[serde(default)]
    disabled: Vec<PluginRef>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PluginRef {
    name: String,
    weight: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePluginConfig {
    name: String,
    args: serde_json::Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FitArgs {
    #[serde(default)]
    scoring_strategy: Option<FileScoringStrategy>,
}

/// VolumeBindingArgs (its `shape`, for capacity scoring, is not read: kubelab has no
/// VolumeBinding Score).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct VolumeBindingArgs {
    bind_timeout_seconds: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileScoringStrategy {
    #[serde(rename = "type", default)]
    type_: ScoringStrategyType,
    #[serde(default)]
    resources: Vec<PluginRef>,
}

fn known(name: &str) -> Result<(), String> {
    if plugins::ALL.contains(&name) {
        Ok(())
    } else {
        Err(format!("unknown plugin {name:?} (known: {})", plugins::ALL.join(", ")))
    }
}

impl Profile {
    /// Parses a KubeSchedulerConfiguration (YAML or JSON) into the effective profile.
    pub fn parse(text: &str) -> Result<Profile, String> {
        let file: FileConfig = serde_norway::from_str(text).map_err(|e| format!("invalid scheduler configuration: {e}"))?;
        if let Some(kind) = &file.kind
            && kind != "KubeSchedulerConfiguration"
        {
            return Err(format!("kind {kind:?}: expected KubeSchedulerConfiguration"));
        }
        if let Some(v) = &file.api_version
            && !v.starts_with("kubescheduler.config.k8s.io/")
        {
            return Err(format!("apiVersion {v:?}: expected kubescheduler.config.k8s.io/v1"));
        }
        let _ = file.leader_election; // flags decide leader election; accepted for compatibility
        let mut p = Profile::default();
        if let Some(pct) = file.percentage_of_nodes_to_score {
            if pct > 100 {
                return Err(format!("percentageOfNodesToScore {pct}: must be 0–100"));
            }
            p.percentage_of_nodes_to_score = pct;
        }
        if file.profiles.len() > 1 {
            return Err("only one profile is supported".into());
        }
        let Some(fp) = file.profiles.into_iter().next() else { return Ok(p) };
        if let Some(name) = fp.scheduler_name {
            p.scheduler_name = name;
        }
        for d in &fp.plugins.multi_point.disabled {
            if d.name == "*" {
                p.plugins.clear();
            } else {
                known(&d.name)?;
                p.plugins.retain(|n| *n != d.name);
            }
        }
        for e in &fp.plugins.multi_point.enabled {
            known(&e.name)?;
            if !p.plugins.contains(&e.name) {
                p.plugins.push(e.name.clone());
            }
            if let Some(w) = e.weight {
                p.weights.insert(e.name.clone(), w);
            }
        }
        for d in &fp.plugins.score.disabled {
            if d.name == "*" {
                p.score_disabled = plugins::ALL.iter().map(|s| s.to_string()).collect();
            } else {
                known(&d.name)?;
                p.score_disabled.push(d.name.clone());
            }
        }
        for e in &fp.plugins.score.enabled {
            known(&e.name)?;
            p.score_disabled.retain(|n| *n != e.name);
            if !p.plugins.contains(&e.name) {
                p.plugins.push(e.name.clone());
            }
            if let Some(w) = e.weight {
                p.weights.insert(e.name.clone(), w);
            }
        }
        for (name, w) in &p.weights {
            if *w <= 0 || *w > 100 {
                return Err(format!("plugin {name}: weight {w} must be between 1 and 100"));
            }
        }
        for pc in fp.plugin_config {
            known(&pc.name)?;
            if pc.name == plugins::volume_binding::NAME {
                let args: VolumeBindingArgs = serde_json::from_value(pc.args).map_err(|e| format!("pluginConfig {}: {e}", pc.name))?;
                if let Some(t) = args.bind_timeout_seconds {
                    if t == 0 {
                        return Err(format!("pluginConfig {}: bindTimeoutSeconds must be positive", pc.name));
                    }
                    p.args.bind_timeout_seconds = t;
                }
                continue;
            }
            if pc.name != plugins::node_resources_fit::NAME {
                return Err(format!("pluginConfig for {}: this plugin takes no arguments in kubelab", pc.name));
            }
            let args: FitArgs = serde_json::from_value(pc.args).map_err(|e| format!("pluginConfig {}: {e}", pc.name))?;
            if let Some(s) = args.scoring_strategy {
                let mut st = ScoringStrategy { type_: s.type_, ..Default::default() };
                for r in s.resources {
                    let w = r.weight.unwrap_or(1);
                    match r.name.as_str() {
                        "cpu" => st.cpu_weight = w,
                        "memory" => st.memory_weight = w,
                        other => return Err(format!("scoringStrategy resource {other:?}: only cpu and memory are scored")),
                    }
                }
                p.args.scoring_strategy = st;
            }
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_profile_has_every_plugin() {
        let p = Profile::parse("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n").unwrap();
        assert_eq!(p.plugins.len(), plugins::ALL.len());
        assert_eq!(p.weights["TaintToleration"], 3);
        assert_eq!(p.args.scoring_strategy.type_, ScoringStrategyType::LeastAllocated);
        assert_eq!(p.args.bind_timeout_seconds, 600);
        let volumes: Vec<&str> = p.plugins.iter().map(String::as_str).filter(|n| n.starts_with("Volume") || *n == "NodeVolumeLimits").collect();
        assert_eq!(volumes, vec!["VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding"], "Kubernetes' order, after NodeResourcesFit");
    }

    #[test]
    fn volume_binding_timeout() {
        let p = Profile::parse("profiles: [{pluginConfig: [{name: VolumeBinding, args: {bindTimeoutSeconds: 30}}]}]").unwrap();
        assert_eq!(p.args.bind_timeout_seconds, 30);
        assert!(Profile::parse("profiles: [{pluginConfig: [{name: VolumeBinding, args: {bindTimeoutSeconds: 0}}]}]").is_err());
    }

    #[test]
    fn profile_overrides() {
        let p = Profile::parse(
            r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 50
profiles:
- schedulerName: packer
  plugins:
    multiPoint:
      disabled: [{name: InterPodAffinity}]
      enabled: [{name: NodeAffinity, weight: 5}]
    score:
      disabled: [{name: NodeResourcesBalancedAllocation}]
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 2}, {name: memory, weight: 1}]
"#,
        )
        .unwrap();
        assert_eq!(p.scheduler_name, "packer");
        assert_eq!(p.percentage_of_nodes_to_score, 50);
        assert!(!p.plugins.contains(&"InterPodAffinity".to_string()));
        assert_eq!(p.weights["NodeAffinity"], 5);
        assert_eq!(p.score_disabled, vec!["NodeResourcesBalancedAllocation".to_string()]);
        assert_eq!(
            p.args.scoring_strategy,
            ScoringStrategy { type_: ScoringStrategyType::MostAllocated, cpu_weight: 2, memory_weight: 1 }
        );
    }

    #[test]
    fn bad_configurations_name_the_problem() {
        for (text, needle) in [
            ("kind: Pod", "KubeSchedulerConfiguration"),
            ("profiles: [{plugins: {multiPoint: {enabled: [{name: Nope}]}}}]", "unknown plugin \"Nope\""),
            ("percentageOfNodesToScore: 150", "0–100"),
            ("profiles: [{plugins: {multiPoint: {enabled: [{name: NodeAffinity, weight: 0}]}}}]", "weight 0"),
            ("bogusField: 1", "bogusField"),
            ("profiles: [{}, {}]", "one profile"),
        ] {
            let err = Profile::parse(text).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
