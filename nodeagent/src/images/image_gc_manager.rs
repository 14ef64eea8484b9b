//! Mirrors kubelet's images/image_gc_manager.go: image garbage collection.
//!
//! The manager remembers, for every image on the node, when it was first seen and when a
//! container (running or not) last used it ([`ImageGcManager::detect_images`], every
//! [`IMAGE_GC_PERIOD`]). When the image filesystem's usage reaches `--image-gc-high-threshold`
//! percent it removes unused images — least recently used first — until usage is back under
//! `--image-gc-low-threshold`. Never removed: the sandbox (pause) image, images any container
//! uses, images the runtime pins, and images seen for less than `--minimum-image-ttl-duration`.
//!
//! The choice of images ([`select_images_to_free`]) is pure and table-tested; the filesystem is
//! the one CRI's `ImageFsInfo` names (containerd's snapshotter directory), measured with
//! `statvfs`, or `--root-dir`'s when the runtime does not say.
//!
//! When a pass cannot free enough, a Warning `FreeDiskSpaceFailed` event goes on the Node, and
//! a failed pass records `ImageGCFailed`, as the kubelet does.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_cri::v1 as api;
use k8s_openapi::api::core::v1::ObjectReference;

use crate::cri::RemoteRuntime;
use crate::error::{Error, Result};
use crate::events::{Recorder, WARNING};

/// How often images are detected and collected (kubelet's ImageGCPeriod: 5 min; the eviction
/// manager also asks for a pass when the image filesystem runs short).
pub(crate) const IMAGE_GC_PERIOD: Duration = Duration::from_secs(300);
/// Node event reasons (kubelet's events package).
pub(crate) const FREE_DISK_SPACE_FAILED: &str = "FreeDiskSpaceFailed";
pub(crate) const IMAGE_GC_FAILED: &str = "ImageGCFailed";

/// kubelet's ImageGCPolicy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageGcPolicy {
    /// At or above this percent of the image filesystem in use, collect (`--image-gc-high-threshold`, 85).
    pub high_threshold_percent: u8,
    /// Collect down to this percent (`--image-gc-low-threshold`, 80).
    pub low_threshold_percent: u8,
    /// Images seen for less than this are never removed (`--minimum-image-ttl-duration`, 2 min).
    pub min_age: Duration,
}

impl Default for ImageGcPolicy {
    fn default() -> ImageGcPolicy {
        ImageGcPolicy { high_threshold_percent: 85, low_threshold_percent: 80, min_age: Duration::from_secs(120) }
    }
}

impl ImageGcPolicy {
    /// The checks kubelet's NewImageGCManager makes.
    pub(crate) fn validate(&self) -> std::result::Result<(), String> {
        if self.high_threshold_percent > 100 {
            return Err(format!("--image-gc-high-threshold must be in [0, 100], got {}", self.high_threshold_percent));
        }
        if self.low_threshold_percent > 100 {
            return Err(format!("--image-gc-low-threshold must be in [0, 100], got {}", self.low_threshold_percent));
        }
        if self.low_threshold_percent > self.high_threshold_percent {
            return Err(format!(
                "--image-gc-low-threshold ({}) must not be above --image-gc-high-threshold ({})",
                self.low_threshold_percent, self.high_threshold_percent
            ));
        }
        Ok(())
    }
}

/// What the manager remembers of one image (imageRecord).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ImageRecord {
    pub(crate) first_detected: DateTime<Utc>,
    pub(crate) last_used: DateTime<Utc>,
    pub(crate) size: u64,
}

/// One image that may be removed, with its record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EvictionInfo {
    pub(crate) id: String,
    pub(crate) record: ImageRecord,
}

/// The images to remove to free `bytes_to_free` (freeSpace's choice): not in use, not pinned,
/// old enough; least recently used first, then first detected. Returns the ids in removal order
/// and the bytes they free (which may be short of the target).
pub(crate) fn select_images_to_free(
    records: &HashMap<String, ImageRecord>,
    in_use: &HashSet<String>,
    pinned: &HashSet<String>,
    bytes_to_free: i64,
    min_age: Duration,
    now: DateTime<Utc>,
) -> (Vec<String>, i64) {
    let min_age = chrono::Duration::from_std(min_age).unwrap_or(chrono::Duration::MAX);
    let mut candidates: Vec<EvictionInfo> = records
        .iter()
        .filter(|(id, _)| !in_use.contains(*id) && !pinned.contains(*id))
        .filter(|(_, r)| now - r.first_detected >= min_age)
        .map(|(id, r)| EvictionInfo { id: id.clone(), record: r.clone() })
        .collect();
    candidates.sort_by(|a, b| {
        a.record
            .last_used
            .cmp(&b.record.last_used)
            .then(a.record.first_detected.cmp(&b.record.first_detected))
            .then(a.id.cmp(&b.id))
    });
    let mut freed = 0i64;
    let mut out = vec![];
    for c in candidates {
        if freed >= bytes_to_free {
            break;
        }
        freed += i64::try_from(c.record.size).unwrap_or(i64::MAX);
        out.push(c.id);
    }
    (out, freed)
}

/// How many bytes to free, given the image filesystem's state (GarbageCollect's arithmetic):
/// nothing below the high threshold, else down to the low one.
pub(crate) fn bytes_to_free(capacity: i64, available: i64, policy: &ImageGcPolicy) -> i64 {
    if capacity <= 0 {
        return 0;
    }
    let usage_percent = 100 - available.saturating_mul(100) / capacity;
    if usage_percent < i64::from(policy.high_threshold_percent) {
        return 0;
    }
    (capacity.saturating_mul(100 - i64::from(policy.low_threshold_percent)) / 100 - available).max(0)
}

pub(crate) struct ImageGcManager {
    runtime: RemoteRuntime,
    recorder: Recorder,
    node_ref: ObjectReference,
    policy: ImageGcPolicy,
    /// `--pod-infra-container-image`: always considered in use.
    sandbox_image: String,
    /// Measured when the runtime does not name its image filesystem.
    fallback_dir: PathBuf,
    records: Mutex<HashMap<String, ImageRecord>>,
    /// One pass at a time: the periodic loop and the eviction manager both call in.
    running: tokio::sync::Mutex<()>,
}

/// The result of one collection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct GcResult {
    pub(crate) removed: Vec<String>,
    pub(crate) freed: i64,
}

impl ImageGcManager {
    pub(crate) fn new(
        runtime: RemoteRuntime,
        recorder: Recorder,
        node_name: &str,
        policy: ImageGcPolicy,
        sandbox_image: String,
        fallback_dir: PathBuf,
    ) -> ImageGcManager {
        let node_ref = ObjectReference {
            kind: Some("Node".into()),
            name: Some(node_name.to_string()),
            uid: Some(node_name.to_string()),
            ..Default::default()
        };
        ImageGcManager {
            runtime,
            recorder,
            node_ref,
            policy,
            sandbox_image,
            fallback_dir,
            records: Mutex::new(HashMap::new()),
            running: tokio::sync::Mutex::new(()),
        }
    }

    /// The image filesystem: where the runtime keeps image layers (ImageFsInfo's mountpoint),
    /// else the agent's root directory.
    pub(crate) async fn image_fs_dir(&self) -> PathBuf {
        match self.runtime.image_fs_info().await {
            Ok(info) => info
                .image_filesystems
                .iter()
                .filter_map(|f| f.fs_id.as_ref().map(|id| id.mountpoint.clone()))
                .find(|m| !m.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| self.fallback_dir.clone()),
            Err(e) => {
                tracing::debug!(target: "kubelet::image_gc", error = %e, "ImageFsInfo failed; measuring the root directory");
                self.fallback_dir.clone()
            }
        }
    }

    /// detectImages: refresh the records from the runtime; returns the images in use (by id).
    pub(crate) async fn detect_images(&self, now: DateTime<Utc>) -> Result<(HashSet<String>, HashSet<String>)> {
        let images = self.runtime.list_images().await?;
        let containers = self.runtime.list_containers(None).await?;
        let mut in_use = HashSet::new();
        let mut pinned: HashSet<String> = images.iter().filter(|i| i.pinned).map(|i| i.id.clone()).collect();
        // The sandbox image is always in use (pause runs in every sandbox, but CRI lists no
        // containers for sandboxes).
        if let Ok(Some(i)) = self.runtime.image_status(&self.sandbox_image).await {
            pinned.insert(i.id);
        }
        for c in &containers {
            if let Some(img) = images.iter().find(|i| image_matches(i, &c.image_ref) || c.image.as_ref().is_some_and(|s| image_matches(i, &s.image))) {
                in_use.insert(img.id.clone());
            }
        }
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let present: HashSet<&str> = images.iter().map(|i| i.id.as_str()).collect();
        records.retain(|id, _| present.contains(id.as_str()));
        for i in &images {
            let r = records.entry(i.id.clone()).or_insert_with(|| ImageRecord { first_detected: now, last_used: DateTime::<Utc>::MIN_UTC, size: i.size });
            r.size = i.size;
            if in_use.contains(&i.id) || pinned.contains(&i.id) {
                r.last_used = now;
            }
        }
        Ok((in_use, pinned))
    }

    /// GarbageCollect: if the image filesystem is at or over the high threshold, remove unused
    /// images until it is under the low one. Events on the Node say when that fails.
    pub(crate) async fn garbage_collect(&self) -> Result<GcResult> {
        let r = self.garbage_collect_inner().await;
        if let Err(e) = &r {
            self.recorder.object_event(self.node_ref.clone(), WARNING, IMAGE_GC_FAILED, e.to_string());
        }
        r
    }

    async fn garbage_collect_inner(&self) -> Result<GcResult> {
        let _one = self.running.lock().await;
        let dir = self.image_fs_dir().await;
        let d = dir.clone();
        let fs = tokio::task::spawn_blocking(move || crate::stats::fs_stats(&d))
            .await?
            .ok_or_else(|| Error::Measure { what: "image filesystem", path: dir.clone() })?;
        let want = bytes_to_free(fs.capacity, fs.available, &self.policy);
        if want == 0 {
            return Ok(GcResult::default());
        }
        tracing::info!(target: "kubelet::image_gc", usage_percent = fs.usage_percent(), high = self.policy.high_threshold_percent, low = self.policy.low_threshold_percent, bytes_to_free = want, "image filesystem over the high threshold");
        let result = self.free_space(want).await?;
        if result.freed < want {
            let message = format!(
                "Failed to garbage collect required amount of images. Attempted to free {want} bytes, but only found {} bytes eligible to free.",
                result.freed
            );
            self.recorder.object_event(self.node_ref.clone(), WARNING, FREE_DISK_SPACE_FAILED, message);
        }
        Ok(result)
    }

    /// freeSpace: remove images, least recently used first, until `bytes` are freed or no image
    /// is eligible.
    pub(crate) async fn free_space(&self, bytes: i64) -> Result<GcResult> {
        let now = Utc::now();
        let (in_use, pinned) = self.detect_images(now).await?;
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let (ids, _) = select_images_to_free(&records, &in_use, &pinned, bytes, self.policy.min_age, now);
        let mut result = GcResult::default();
        for id in ids {
            tracing::info!(target: "kubelet::image_gc", image = %id, size = records.get(&id).map(|r| r.size).unwrap_or(0), "removing an unused image");
            match self.runtime.remove_image(&id).await {
                Ok(()) => {
                    result.freed += records.get(&id).map(|r| i64::try_from(r.size).unwrap_or(i64::MAX)).unwrap_or(0);
                    self.records.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                    result.removed.push(id);
                }
                Err(e) => tracing::warn!(target: "kubelet::image_gc", image = %id, error = %e, "removing an image"),
            }
        }
        Ok(result)
    }
}

/// Whether `reference` (an id, a tag, a digest) names image `i`.
fn image_matches(i: &api::Image, reference: &str) -> bool {
    !reference.is_empty()
        && (i.id == reference
            || i.repo_tags.iter().any(|t| t == reference)
            || i.repo_digests.iter().any(|d| d == reference))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(s, 0).single().unwrap_or_default()
    }

    fn rec(first: i64, last: i64, size: u64) -> ImageRecord {
        ImageRecord { first_detected: t(first), last_used: if last < 0 { DateTime::<Utc>::MIN_UTC } else { t(last) }, size }
    }

    #[test]
    fn image_selection_table() {
        let records = HashMap::from([
            ("busybox".to_string(), rec(0, 900, 100)),
            ("pause".to_string(), rec(0, 900, 10)),
            ("old".to_string(), rec(0, 100, 50)),
            ("older".to_string(), rec(0, 50, 30)),
            ("never-used".to_string(), rec(10, -1, 20)),
            ("fresh".to_string(), rec(990, -1, 1000)),
        ]);
        let in_use = HashSet::from(["busybox".to_string()]);
        let pinned = HashSet::from(["pause".to_string()]);
        let min_age = Duration::from_secs(60);
        let now = t(1000);
        // Never used before anything used long ago; in-use, pinned and fresh images never.
        assert_eq!(
            select_images_to_free(&records, &in_use, &pinned, i64::MAX, min_age, now),
            (vec!["never-used".to_string(), "older".to_string(), "old".to_string()], 100)
        );
        // Stop as soon as enough is freed.
        assert_eq!(select_images_to_free(&records, &in_use, &pinned, 20, min_age, now), (vec!["never-used".to_string()], 20));
        assert_eq!(select_images_to_free(&records, &in_use, &pinned, 21, min_age, now).0.len(), 2);
        assert_eq!(select_images_to_free(&records, &in_use, &pinned, 0, min_age, now).0, Vec::<String>::new());
        // Without a minimum age even the fresh image may go.
        assert!(select_images_to_free(&records, &in_use, &pinned, i64::MAX, Duration::ZERO, now).0.contains(&"fresh".to_string()));
    }

    #[test]
    fn thresholds_decide_how_much_to_free() {
        let p = ImageGcPolicy { high_threshold_percent: 85, low_threshold_percent: 80, min_age: Duration::ZERO };
        assert_eq!(bytes_to_free(1000, 200, &p), 0, "80% used: under the high threshold");
        assert_eq!(bytes_to_free(1000, 150, &p), 50, "85% used: down to 80%");
        assert_eq!(bytes_to_free(1000, 100, &p), 100);
        let all = ImageGcPolicy { high_threshold_percent: 1, low_threshold_percent: 0, min_age: Duration::ZERO };
        assert_eq!(bytes_to_free(1000, 900, &all), 100, "everything in use is to be freed");
        assert_eq!(bytes_to_free(0, 0, &p), 0);
        assert!(p.validate().is_ok());
        assert!(ImageGcPolicy { low_threshold_percent: 90, ..p }.validate().unwrap_err().contains("must not be above"));
        assert!(ImageGcPolicy { high_threshold_percent: 101, ..p }.validate().is_err());
    }

    /// Against the fake CRI: an unused image goes, the one a container uses and the sandbox
    /// image stay.
    #[tokio::test]
    async fn unused_images_are_removed_in_use_and_sandbox_images_stay() {
        use crate::cri::fake::FakeRuntime;
        let dir = tempfile::tempdir().expect("tmp");
        let (fake, server) = FakeRuntime::start(dir.path()).await.expect("fake CRI");
        for i in ["busybox:1.36", "registry.k8s.io/pause:3.9", "docker.io/library/unused:1"] {
            fake.add_image(i);
        }
        let rt = RemoteRuntime::connect(&server.endpoint()).await.expect("connect");
        let cfg = api::PodSandboxConfig {
            metadata: Some(api::PodSandboxMetadata { name: "p".into(), uid: "u".into(), namespace: "default".into(), attempt: 0 }),
            ..Default::default()
        };
        let sb = rt.run_pod_sandbox(cfg.clone(), "").await.expect("sandbox");
        let c = api::ContainerConfig {
            metadata: Some(api::ContainerMetadata { name: "c".into(), attempt: 0 }),
            image: Some(api::ImageSpec { image: "busybox:1.36".into(), ..Default::default() }),
            ..Default::default()
        };
        let id = rt.create_container(&sb, c, cfg).await.expect("create");
        fake.exit_container(&id, 0); // in use even when not running
        let policy = ImageGcPolicy { high_threshold_percent: 1, low_threshold_percent: 0, min_age: Duration::ZERO };
        let m = ImageGcManager::new(rt.clone(), Recorder::default(), "n", policy, "registry.k8s.io/pause:3.9".into(), dir.path().into());
        let r = m.free_space(i64::MAX).await.expect("free");
        assert_eq!(r.removed.len(), 1, "{r:?}");
        let left: Vec<String> = rt.list_images().await.expect("list").into_iter().flat_map(|i| i.repo_tags).collect();
        assert_eq!(left, vec!["docker.io/library/busybox:1.36".to_string(), "registry.k8s.io/pause:3.9".to_string()]);
        assert_eq!(m.image_fs_dir().await, PathBuf::from("/var/lib/fake-cri"), "the runtime names its image filesystem");
    }
}
