//! Mirrors kubelet's pkg/kubelet/images: how images get onto the node.
//!
//! Kubelet's image manager pulls from a registry (`EnsureImageExists` with the pod's pull policy,
//! in kuberuntime's `kuberuntime_image.rs`), one pull at a time or several ([`puller`]), and its
//! image GC frees disk. Images can also arrive as OCI image-layout tarballs (built by `make
//! images`, see `deploy/images/build.sh`) dropped into the agent's `--image-dir`, for a machine
//! without a registry: [`ImageImporter`] loads each new or changed tarball into containerd's
//! `k8s.io` namespace, where CRI's `ImageStatus` then finds it and a pull is not needed.

pub(crate) mod image_gc_manager;
pub(crate) mod image_import;
pub mod puller;

use std::time::Duration;

pub use image_gc_manager::ImageGcPolicy;
pub use image_import::{ImageImporter, parse_imported};
pub use puller::PullOptions;

/// The containerd namespace the CRI plugin keeps its images, containers and sandboxes in. An image
/// imported into any other namespace is invisible to `ImageStatus`.
pub(crate) const CRI_NAMESPACE: &str = "k8s.io";

/// Where the importer finds `ctr` (Debian's containerd package installs it here).
pub(crate) const DEFAULT_CTR: &str = "/usr/bin/ctr";

/// How often [`ImageImporter::run`] looks at the image directory. A directory listing and a `stat`
/// per tarball are cheap; two seconds keeps "drop a tarball in, start a pod" responsive.
pub(crate) const IMPORT_PERIOD: Duration = Duration::from_secs(2);

/// How long one `ctr images import` may take before it is killed and retried on the next pass.
/// Importing the busybox image takes ~0.2 s; this only catches a containerd that stopped answering.
pub(crate) const IMPORT_TIMEOUT: Duration = Duration::from_secs(300);
