//! Real plugins: small shell scripts in a temporary bin dir.

use std::os::unix::fs::PermissionsExt as _;
use std::time::{Duration, Instant};

use super::*;

const V1: &str = "credentialprovider.kubelet.k8s.io/v1";

/// A plugin that counts its runs (a line each in `count`), keeps its request in `request`, and
/// answers `body` (a shell word list after `echo`).
fn script(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\necho run >> \"$COUNT_FILE\"\ncat > \"$REQUEST_FILE\"\n{body}\n")).expect("write plugin");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

fn runs(count: &Path) -> usize {
    std::fs::read_to_string(count).map(|s| s.lines().count()).unwrap_or(0)
}

struct Lab {
    dir: tempfile::TempDir,
    bin: PathBuf,
    config: PathBuf,
}

impl Lab {
    fn new() -> Lab {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).expect("bin dir");
        let config = dir.path().join("credential-provider.yaml");
        Lab { dir, bin, config }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A provider entry of the config, its runs counted in `<name>.count`.
    fn provider(&self, name: &str, match_images: &str, args: &str) -> String {
        format!(
            "- name: {name}\n  matchImages: [{match_images}]\n  defaultCacheDuration: 0s\n  apiVersion: {V1}\n  args: [{args}]\n  env:\n  - {{name: COUNT_FILE, value: {}}}\n  - {{name: REQUEST_FILE, value: {}}}\n",
            self.file(&format!("{name}.count")).display(),
            self.file(&format!("{name}.request")).display()
        )
    }

    fn register(&self, providers: &[String], timeout: Duration) -> Result<CredentialProviders, RegisterError> {
        let yaml = format!("apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n{}", providers.concat());
        std::fs::write(&self.config, yaml).expect("config");
        CredentialProviders::register_with_timeout(&self.config, &self.bin, timeout)
    }
}

fn response(user: &str, cache_key_type: &str, cache_duration: Option<&str>) -> String {
    let duration = cache_duration.map(|d| format!(r#","cacheDuration":"{d}""#)).unwrap_or_default();
    format!(
        r#"echo '{{"kind":"CredentialProviderResponse","apiVersion":"{V1}","cacheKeyType":"{cache_key_type}"{duration},"auth":{{"*.registry.io":{{"username":"'"{user}"'","password":"pw"}}}}}}'"#
    )
}

#[tokio::test]
async fn a_plugin_is_run_and_its_answer_kept() {
    let lab = Lab::new();
    // The username is the plugin's first argument: args reach it.
    script(&lab.bin, "registry-cache", &response("$1", "Registry", Some("1h")));
    let providers = lab.register(&[lab.provider("registry-cache", "'*.registry.io'", "from-plugin")], EXEC_PLUGIN_TIMEOUT).expect("register");
    let count = lab.file("registry-cache.count");

    let creds = providers.keyring("a.registry.io/team/app").await.lookup("a.registry.io/team/app");
    assert_eq!(usernames(&creds), ["from-plugin"]);
    assert_eq!(creds[0].password, "pw");
    assert_eq!(runs(&count), 1);
    let request = std::fs::read_to_string(lab.file("registry-cache.request")).expect("request");
    assert_eq!(request.trim_end(), format!(r#"{{"kind":"CredentialProviderRequest","apiVersion":"{V1}","image":"a.registry.io/team/app"}}"#));

    // Another image of the registry: the Registry answer is kept for an hour.
    assert_eq!(usernames(&providers.keyring("a.registry.io/other").await.lookup("a.registry.io/other")), ["from-plugin"]);
    assert_eq!(runs(&count), 1, "answered from the cache");
    // An image the provider does not match: not run.
    assert!(providers.keyring("quay.io/x").await.lookup("quay.io/x").is_empty());
    assert_eq!(runs(&count), 1);
    // Two hours later the answer has expired: run again.
    let p = &providers.providers()[0];
    let later = Instant::now() + Duration::from_secs(2 * 3600);
    assert!(p.provide("a.registry.io/other", later).await.expect("provide").contains_key("*.registry.io"));
    assert_eq!(runs(&count), 2);
}

#[tokio::test]
async fn cache_key_types_and_durations() {
    let lab = Lab::new();
    // (plugin, its answer, images asked in turn, runs expected)
    let cases = [
        ("image", response("u", "Image", Some("1h")), vec!["a.registry.io/x", "a.registry.io/x", "a.registry.io/y"], 2),
        ("registry", response("u", "Registry", Some("1h")), vec!["a.registry.io/x", "a.registry.io/y", "b.registry.io/x"], 2),
        ("global", response("u", "Global", Some("1h")), vec!["a.registry.io/x", "b.registry.io/y"], 1),
        ("zero", response("u", "Global", Some("0s")), vec!["a.registry.io/x", "a.registry.io/x"], 2),
        // No cacheDuration: the provider's defaultCacheDuration, here 0s: not kept.
        ("default", response("u", "Global", None), vec!["a.registry.io/x", "a.registry.io/x"], 2),
    ];
    for (name, answer, _, _) in &cases {
        script(&lab.bin, name, answer);
    }
    let providers = lab.register(&cases.iter().map(|(name, ..)| lab.provider(name, "'*.registry.io'", "")).collect::<Vec<_>>(), EXEC_PLUGIN_TIMEOUT).expect("register");
    for (i, (name, _, images, want)) in cases.iter().enumerate() {
        for image in images {
            providers.providers()[i].provide(image, Instant::now()).await.expect("provide");
        }
        assert_eq!(runs(&lab.file(&format!("{name}.count"))), *want, "{name}");
    }
}

#[tokio::test]
async fn failing_and_slow_plugins_give_clear_errors_and_the_others_still_answer() {
    let lab = Lab::new();
    script(&lab.bin, "failing", "echo 'no credentials for you' >&2\nexit 3");
    script(&lab.bin, "slow", "exec sleep 30");
    script(&lab.bin, "wrong-version", r#"echo '{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1beta1","cacheKeyType":"Image"}'"#);
    script(&lab.bin, "bad-key-type", r#"echo '{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1","cacheKeyType":"Pod"}'"#);
    script(&lab.bin, "garbage", "echo '{not json'");
    script(&lab.bin, "good", &response("good", "Image", None));
    let names = ["failing", "slow", "wrong-version", "bad-key-type", "garbage", "good"];
    let providers = lab.register(&names.map(|n| lab.provider(n, "'*.registry.io'", "")), Duration::from_millis(500)).expect("register");
    let image = "r.registry.io/app";

    let start = Instant::now();
    assert_eq!(usernames(&providers.keyring(image).await.lookup(image)), ["good"], "the working plugin's credentials");
    assert!(start.elapsed() < Duration::from_secs(10), "the slow plugin was cut off");

    let errors: Vec<String> = {
        let mut v = vec![];
        for p in &providers.providers()[..5] {
            v.push(p.provide(image, Instant::now()).await.expect_err(p.name()).to_string());
        }
        v
    };
    assert_eq!(
        errors,
        [
            "error execing credential provider plugin failing for image r.registry.io/app: exit status 3: no credentials for you",
            "error execing credential provider plugin slow for image r.registry.io/app: context deadline exceeded",
            "apiVersion from credential plugin response did not match expected apiVersion:credentialprovider.kubelet.k8s.io/v1, actual apiVersion:credentialprovider.kubelet.k8s.io/v1beta1",
            r#"credential provider plugin did not return a valid cacheKeyType: "Pod""#,
            "error reading GVK from response: key must be a string at line 1 column 2",
        ]
    );
}

#[test]
fn registration_refuses_bad_set_ups() {
    let lab = Lab::new();
    script(&lab.bin, "good", &response("u", "Image", None));
    std::fs::write(lab.bin.join("not-executable"), "#!/bin/sh\n").expect("write");
    let ok = lab.provider("good", "'*.registry.io'", "");
    let err = |r: Result<CredentialProviders, RegisterError>| r.expect_err("refused").to_string();

    assert_eq!(CredentialProviders::register(&lab.config, &lab.file("nope")).expect_err("no bin dir").to_string(), format!("plugin binary directory {} did not exist", lab.file("nope").display()));
    assert_eq!(CredentialProviders::register(Path::new(""), &lab.bin).expect_err("no config").to_string(), "credential provider config path is empty");
    assert_eq!(err(lab.register(&[lab.provider("missing", "'*.registry.io'", "")], EXEC_PLUGIN_TIMEOUT)), format!("plugin binary executable {} did not exist", lab.bin.join("missing").display()));
    assert_eq!(
        err(lab.register(&[lab.provider("not-executable", "'*.registry.io'", "")], EXEC_PLUGIN_TIMEOUT)),
        format!("error inspecting binary executable {}: permission denied", lab.bin.join("not-executable").display())
    );
    assert_eq!(err(lab.register(&[ok.clone(), ok.clone()], EXEC_PLUGIN_TIMEOUT)), r#"failed to validate credential provider config: providers.name: Duplicate value: "good""#);
    assert_eq!(
        err(lab.register(&[lab.provider("good", "", "")], EXEC_PLUGIN_TIMEOUT)),
        "failed to validate credential provider config: providers.matchImages: Required value: at least 1 item in matchImages is required"
    );
    assert_eq!(
        err(lab.register(&[lab.provider("a b", "'%x'", "")], EXEC_PLUGIN_TIMEOUT)),
        r#"failed to validate credential provider config: [providers.name: Invalid value: "a b": provider name cannot contain spaces, providers.matchImages: Invalid value: "%x": match image is invalid: parse "https://%x": invalid URL escape "%x"]"#
    );
    std::fs::write(&lab.config, "apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n").expect("config");
    assert!(CredentialProviders::register(&lab.config, &lab.bin).expect_err("wrong kind").to_string().ends_with(r#"failed to decode "KubeletConfiguration" (wrong Kind)"#));
    assert_eq!(lab.register(&[ok], EXEC_PLUGIN_TIMEOUT).expect("valid").providers().len(), 1);
}
