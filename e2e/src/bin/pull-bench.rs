//! pull-bench: how long the node agent's image pull takes — CRI `PullImage` on containerd, with
//! the registry credentials, as `kuberuntime_image.rs` calls it — against `ctr images pull` of the
//! same image from the same registry on the same containerd, in the same run.
//!
//! A private registry (Debian's distribution registry with TLS and a password,
//! `e2e::registry`) holds two images of one layer of random bytes (incompressible: the layer is
//! as large as the image), 5 MB and 100 MB by default. Each round pulls an image both ways, in
//! alternating order, each pull followed by `ctr images rm --sync` of every reference (checked:
//! the layer is gone from the content store) so that the next one downloads and unpacks
//! everything again. Prints the median and every round's time, and the ratio of the
//! medians (CRI / ctr).
//!
//! `cargo run --release -p e2e --bin pull-bench -- --help`

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use e2e::bench::machine;
use e2e::containerd::Containerd;
use e2e::process::run_ok;
use e2e::registry::{Registry, USER};
use k8s_cri::v1 as cri;

#[derive(Parser, Debug)]
#[command(about = "Benchmark image pulls through CRI (the node agent's) against ctr, from a local registry")]
struct Args {
    /// Image sizes in MB (one random layer each).
    #[arg(long, value_delimiter = ',', default_value = "5,100")]
    sizes: Vec<u64>,
    /// Rounds per size (each pulls both ways).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
}

fn sha256(path: &Path) -> anyhow::Result<String> {
    Ok(run_ok("sha256sum", &[&path.to_string_lossy()])?.split_whitespace().next().context("sha256sum printed nothing")?.to_string())
}

/// An OCI image layout in `dir` with one gzipped layer holding `mb` MB of random bytes, tagged
/// `tag`; returns the layer's compressed size and digest.
fn make_image(dir: &Path, mb: u64, tag: &str) -> anyhow::Result<(u64, String)> {
    let blobs = dir.join("blobs/sha256");
    let root = dir.join("rootfs");
    std::fs::create_dir_all(&blobs)?;
    std::fs::create_dir_all(&root)?;
    run_ok("sh", &["-c", &format!("head -c {} /dev/urandom > {}/data", mb * 1_000_000, root.display())])?;
    let tar = dir.join("layer.tar");
    run_ok("tar", &["-C", &root.to_string_lossy(), "-cf", &tar.to_string_lossy(), "data"])?;
    let diff_id = sha256(&tar)?;
    run_ok("gzip", &["-1", "-f", &tar.to_string_lossy()])?;
    let gz = dir.join("layer.tar.gz");
    let (layer, layer_size) = (sha256(&gz)?, std::fs::metadata(&gz)?.len());
    std::fs::rename(&gz, blobs.join(&layer))?;
    let write_blob = |text: String| -> anyhow::Result<(String, usize)> {
        let tmp = dir.join("blob.json");
        std::fs::write(&tmp, &text)?;
        let digest = sha256(&tmp)?;
        std::fs::rename(&tmp, blobs.join(&digest))?;
        Ok((digest, text.len()))
    };
    let (config, config_size) = write_blob(
        serde_json::json!({"architecture": "amd64", "os": "linux", "config": {}, "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{diff_id}")]}}).to_string(),
    )?;
    let (manifest, manifest_size) = write_blob(
        serde_json::json!({
            "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": format!("sha256:{config}"), "size": config_size},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": format!("sha256:{layer}"), "size": layer_size}]
        })
        .to_string(),
    )?;
    std::fs::write(
        dir.join("index.json"),
        serde_json::json!({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": format!("sha256:{manifest}"), "size": manifest_size, "annotations": {"org.opencontainers.image.ref.name": tag}}]}).to_string(),
    )?;
    std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#)?;
    std::fs::remove_dir_all(&root)?;
    Ok((layer_size, format!("sha256:{layer}")))
}

fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2]
}

fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    e2e::registry::prerequisites().map_err(anyhow::Error::msg)?;
    let tmp = tempfile::Builder::new().prefix("kubelab-pull-bench-").tempdir()?;
    let registry = Registry::start(&tmp.path().join("registry")).await?;
    let containerd = Containerd::start(&tmp.path().join("containerd")).await?;
    nodeagent::cri::containerd_config::write_registry_host(&containerd.registry_config_path(), &registry.host(), &registry.ca_file())?;
    let rt = containerd.runtime().await?;
    let socket = containerd.socket().to_string_lossy().into_owned();
    let hosts_dir = containerd.registry_config_path().to_string_lossy().into_owned();
    let creds = format!("{USER}:{}", registry.password());
    let ctr = |args: &[&str]| -> anyhow::Result<String> { run_ok("ctr", &[&["--address", &socket, "-n", "k8s.io"][..], args].concat()) };

    println!("pull-bench on {}", machine());
    println!("registry: Debian's docker-registry on {} (HTTPS, htpasswd); containerd {}", registry.host(), run_ok("containerd", &["--version"])?.trim());
    println!("| image | rounds | CRI PullImage (node agent's path), median | ctr images pull, median | CRI / ctr | CRI rounds | ctr rounds |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for mb in &args.sizes {
        let layout = tmp.path().join(format!("image-{mb}mb"));
        let (layer, layer_digest) = make_image(&layout, *mb, "1")?;
        let reference = registry.push_layout(&layout, &format!("bench/data-{mb}mb:1"))?;
        let auth = cri::AuthConfig { username: USER.into(), password: registry.password().into(), server_address: format!("https://{}", registry.host()), ..Default::default() };
        let (mut via_cri, mut via_ctr) = (vec![], vec![]);
        for round in 0..args.rounds {
            for first_cri in [round % 2 == 0, round % 2 != 0] {
                let start = Instant::now();
                if first_cri {
                    rt.pull_image(&reference, Some(auth.clone()), None).await.with_context(|| format!("CRI pull of {reference}"))?;
                    via_cri.push(start.elapsed());
                } else {
                    ctr(&["images", "pull", "--hosts-dir", &hosts_dir, "--user", &creds, &reference])?;
                    via_ctr.push(start.elapsed());
                }
                // Every reference to the image (the tag, and the ID and digest references CRI
                // adds), removed synchronously: its blobs and snapshots are gone before the next
                // pull, which must download and unpack all of it again.
                let refs = ctr(&["images", "ls", "-q"])?;
                let refs: Vec<&str> = refs.lines().filter(|l| !l.is_empty()).collect();
                ctr(&[&["images", "rm", "--sync"][..], &refs].concat())?;
                let content = ctr(&["content", "ls", "-q"])?;
                anyhow::ensure!(!content.contains(&layer_digest), "the layer {layer_digest} is still in containerd's content store after removing the image");
            }
        }
        let (c, t) = (median(&via_cri), median(&via_ctr));
        let list = |v: &[Duration]| v.iter().map(|d| format!("{:.3}", d.as_secs_f64())).collect::<Vec<_>>().join(", ");
        println!(
            "| {mb} MB (one layer, {:.1} MB compressed) | {} | {} | {} | {:.2} | {} | {} |",
            layer as f64 / 1e6,
            args.rounds,
            secs(c),
            secs(t),
            c.as_secs_f64() / t.as_secs_f64(),
            list(&via_cri),
            list(&via_ctr)
        );
    }
    drop(rt);
    containerd.stop().await?;
    Ok(())
}
