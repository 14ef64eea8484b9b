//! Drives a three-member store with Debian's `etcdctl` (API v3), the way a person would.
//!
//! Each test starts its own cluster and runs twice, once with the endpoints written as URLs
//! (`http://127.0.0.1:P`, as etcd's documentation writes them) and once as `host:port`:
//! `<test>::url` and `<test>::host_port`. `E2E_STORE=etcd` runs the same checks against real
//! etcd 3.4 (that is how the expected outputs below were established).

use std::time::Duration;

use e2e::etcdctl::Etcdctl;
use e2e::{StoreCluster, StoreOptions, flavor_from_env};
use serde_json::Value;

/// How etcdctl's `--endpoints` are written.
#[derive(Clone, Copy, Debug)]
enum Form {
    Url,
    HostPort,
}

impl Form {
    /// `url` (`http://host:port`) written this way.
    fn of(self, url: &str) -> String {
        match self {
            Form::Url => url.to_string(),
            Form::HostPort => url.trim_start_matches("http://").to_string(),
        }
    }
}

/// Each test as `<test>::url` and `<test>::host_port`.
macro_rules! both_forms {
    ($($name:ident),* $(,)?) => { $(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn url() { super::$name(super::Form::Url).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn host_port() { super::$name(super::Form::HostPort).await }
        }
    )* };
}

both_forms!(etcdctl_put_get_del_txn_compact, etcdctl_watch, etcdctl_lease_lifecycle, etcdctl_member_list_endpoint_status_and_health_on_every_member);

async fn cluster(form: Form) -> (StoreCluster, Etcdctl) {
    // Fail (never skip) when etcdctl is missing: the message says `make deps`.
    let ctl_check = e2e::etcdctl::etcdctl_bin();
    if let Err(e) = ctl_check {
        panic!("{e:#}");
    }
    let c = StoreCluster::start(3, StoreOptions::for_flavor(flavor_from_env()))
        .await
        .expect("start cluster");
    let endpoints: Vec<String> = c.client_endpoints().iter().map(|e| form.of(e)).collect();
    let ctl = Etcdctl::new(&endpoints).expect("etcdctl");
    (c, ctl)
}

fn ok(ctl: &Etcdctl, args: &[&str]) -> String {
    ctl.run(args)
        .and_then(|o| o.ok())
        .unwrap_or_else(|e| panic!("{e:#}"))
}

fn ok_stdin(ctl: &Etcdctl, args: &[&str], stdin: &str) -> String {
    ctl.run_stdin(args, Some(stdin))
        .and_then(|o| o.ok())
        .unwrap_or_else(|e| panic!("{e:#}"))
}

fn json(ctl: &Etcdctl, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.push("-w");
    a.push("json");
    let out = ok(ctl, &a);
    serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("etcdctl {args:?} -w json printed non-JSON ({e}): {out}"))
}

fn int(v: &Value, path: &[&str]) -> i64 {
    let mut cur = v;
    for p in path {
        cur = match p.parse::<usize>() {
            Ok(i) if cur.is_array() => &cur[i],
            _ => &cur[*p],
        };
    }
    // etcdctl prints int64s as numbers; uint64 member ids may not fit an i64.
    cur.as_i64()
        .or_else(|| cur.as_u64().map(|u| u as i64))
        .unwrap_or_else(|| panic!("{path:?} is not a number in {v}"))
}

fn lines(s: &str) -> Vec<&str> {
    s.lines().filter(|l| !l.is_empty()).collect()
}

/// Standard base64 (etcdctl's JSON prints keys and values that way).
fn b64(data: &str) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let b = data.as_bytes();
    let mut out = String::new();
    for chunk in b.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &x)| acc | (x as u32) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Every `kubelab store` member runs without transparent huge pages (see `no_huge_pages` in
/// src/main.rs): the kernel zeroing fresh 2 MiB pages cost the store a tenth of its CPU.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelab_members_run_without_transparent_huge_pages() {
    let c = StoreCluster::start(3, StoreOptions::for_flavor(e2e::Flavor::Kubelab)).await.expect("start cluster");
    for i in 0..c.len() {
        let pid = c.member(i).pid().expect("member running");
        assert_eq!(e2e::process::thp_enabled(pid), Some(false), "member {i} (pid {pid}) has transparent huge pages");
    }
}

async fn etcdctl_put_get_del_txn_compact(form: Form) {
    let (c, ctl) = cluster(form).await;
    // Write through one member, read through another: followers must forward/serve.
    let m0 = ctl.with_endpoints(&[form.of(&c.endpoint(0))]);
    let m2 = ctl.with_endpoints(&[form.of(&c.endpoint(2))]);

    // put / get
    assert_eq!(ok(&m0, &["put", "foo", "bar"]).trim(), "OK");
    assert_eq!(lines(&ok(&m2, &["get", "foo"])), ["foo", "bar"]);
    let first = json(&m2, &["get", "foo"]);
    let rev1 = int(&first, &["kvs", "0", "mod_revision"]);
    assert_eq!(ok(&m0, &["put", "foo", "bar2"]).trim(), "OK");

    // -w json: revisions, version, base64 key/value, header revision.
    let got = json(&ctl, &["get", "foo"]);
    let kv = &got["kvs"][0];
    assert_eq!(kv["key"], b64("foo"), "{got}");
    assert_eq!(kv["value"], b64("bar2"), "{got}");
    assert_eq!(int(&got, &["kvs", "0", "create_revision"]), rev1, "{got}");
    let rev2 = int(&got, &["kvs", "0", "mod_revision"]);
    assert!(rev2 > rev1, "mod_revision must grow: {rev1} then {rev2}");
    assert_eq!(int(&got, &["kvs", "0", "version"]), 2, "{got}");
    assert!(int(&got, &["header", "revision"]) >= rev2, "{got}");
    assert_eq!(int(&got, &["count"]), 1, "{got}");

    // --rev reads history.
    assert_eq!(
        lines(&ok(&ctl, &["get", "foo", &format!("--rev={rev1}")])),
        ["foo", "bar"]
    );

    // --prefix, --keys-only, --limit
    for (k, v) in [
        ("/pfx/a", "1"),
        ("/pfx/b", "2"),
        ("/pfx/c", "3"),
        ("/pfy/x", "no"),
    ] {
        assert_eq!(ok(&ctl, &["put", k, v]).trim(), "OK");
    }
    assert_eq!(
        lines(&ok(&m2, &["get", "/pfx/", "--prefix"])),
        ["/pfx/a", "1", "/pfx/b", "2", "/pfx/c", "3"]
    );
    assert_eq!(
        lines(&ok(&ctl, &["get", "/pfx/", "--prefix", "--keys-only"])),
        ["/pfx/a", "/pfx/b", "/pfx/c"]
    );
    let limited = json(&ctl, &["get", "/pfx/", "--prefix", "--limit=2"]);
    assert_eq!(
        limited["kvs"].as_array().map(Vec::len),
        Some(2),
        "{limited}"
    );
    assert_eq!(limited["more"], true, "{limited}");
    assert_eq!(int(&limited, &["count"]), 3, "{limited}");
    // range end given explicitly: [/pfx/a, /pfx/c)
    assert_eq!(
        lines(&ok(&ctl, &["get", "/pfx/a", "/pfx/c", "--keys-only"])),
        ["/pfx/a", "/pfx/b"]
    );

    // del
    assert_eq!(ok(&m0, &["del", "/pfx/a"]).trim(), "1");
    assert_eq!(ok(&m2, &["get", "/pfx/a"]).trim(), "");
    assert_eq!(ok(&ctl, &["del", "/pfx/", "--prefix"]).trim(), "2");
    assert_eq!(
        lines(&ok(&ctl, &["get", "/pf", "--prefix"])),
        ["/pfy/x", "no"]
    );
    assert_eq!(ok(&ctl, &["del", "/nothing-here"]).trim(), "0");

    // txn from stdin: compares on mod revision and value, then success / failure branches.
    let txn = format!(
        "mod(\"foo\") = \"{rev2}\"\nvalue(\"foo\") = \"bar2\"\n\nput foo bar3\nput txnkey took-success\n\nput txnkey took-failure\n\n"
    );
    let out = ok_stdin(&m2, &["txn"], &txn);
    assert_eq!(lines(&out), ["SUCCESS", "OK", "OK"], "txn output: {out}");
    assert_eq!(
        lines(&ok(&ctl, &["get", "txnkey"])),
        ["txnkey", "took-success"]
    );
    assert_eq!(lines(&ok(&ctl, &["get", "foo"])), ["foo", "bar3"]);
    // Same compares again: foo's mod revision moved on, so the failure branch runs.
    let out = ok_stdin(&m0, &["txn"], &txn);
    assert_eq!(lines(&out), ["FAILURE", "OK"], "txn output: {out}");
    assert_eq!(
        lines(&ok(&ctl, &["get", "txnkey"])),
        ["txnkey", "took-failure"]
    );
    // The apiserver's create: mod("k") = "0" means "does not exist"; failure branch reads it back.
    let create = "mod(\"created\") = \"0\"\n\nput created once\n\nget created\n\n";
    assert_eq!(lines(&ok_stdin(&ctl, &["txn"], create)), ["SUCCESS", "OK"]);
    assert_eq!(
        lines(&ok_stdin(&ctl, &["txn"], create)),
        ["FAILURE", "created", "once"]
    );
    let j: Value = serde_json::from_str(ok_stdin(&ctl, &["txn", "-w", "json"], create).trim())
        .expect("txn json");
    assert!(j["succeeded"].is_null() || j["succeeded"] == false, "{j}");
    assert_eq!(
        j["responses"][0]["Response"]["ResponseRange"]["kvs"][0]["value"],
        b64("once"),
        "{j}"
    );

    // compaction: old revisions go away with the exact etcd error.
    let mut revs = Vec::new();
    for n in 1..=5 {
        ok(&ctl, &["put", "hist", &format!("v{n}")]);
        revs.push(int(
            &json(&ctl, &["get", "hist"]),
            &["kvs", "0", "mod_revision"],
        ));
    }
    let out = ok(&ctl, &["compact", &revs[2].to_string()]);
    assert_eq!(out.trim(), format!("compacted revision {}", revs[2]));
    let old = ctl
        .run(&["get", "hist", &format!("--rev={}", revs[0])])
        .expect("run etcdctl");
    assert!(
        !old.success,
        "get at a compacted revision must fail: {old:?}"
    );
    assert!(
        old.stderr.contains("required revision has been compacted"),
        "stderr: {}",
        old.stderr
    );
    assert_eq!(
        lines(&ok(&ctl, &["get", "hist", &format!("--rev={}", revs[2])])),
        ["hist", "v3"]
    );
    assert_eq!(
        lines(&ok(&ctl, &["get", "hist", &format!("--rev={}", revs[4])])),
        ["hist", "v5"]
    );
    c.check_alive_or_panic();
}

async fn etcdctl_watch(form: Form) {
    let (c, ctl) = cluster(form).await;
    ok(&ctl, &["put", "/w/seed", "0"]);
    let rev = int(&json(&ctl, &["get", "/w/seed"]), &["header", "revision"]);

    // Watch from the next revision so no event can slip by before the watch is set up.
    let mut w = ctl
        .with_endpoints(&[form.of(&c.endpoint(1))])
        .spawn(&["watch", "/w/", "--prefix", &format!("--rev={}", rev + 1)])
        .expect("start etcdctl watch");
    let m2 = ctl.with_endpoints(&[form.of(&c.endpoint(2))]);
    ok(&m2, &["put", "/w/a", "1"]);
    ok(&m2, &["put", "/w/b", "2"]);
    ok(&m2, &["del", "/w/a"]);
    ok(&m2, &["put", "/other", "not-watched"]);
    w.expect_lines(
        &["PUT", "/w/a", "1", "PUT", "/w/b", "2", "DELETE", "/w/a"],
        Duration::from_secs(15),
    )
    .expect("watch events");
    assert!(
        !w.seen.iter().any(|l| l.contains("other")),
        "watch saw a key outside its prefix: {:?}",
        w.seen
    );

    // A live watch (no --rev) gets new events too, with --prev-kv.
    let mut live = ctl
        .spawn(&["watch", "/live", "--prev-kv"])
        .expect("start live watch");
    // No way to know from outside when the watch is registered: keep writing until seen.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let mut n = 0;
    loop {
        n += 1;
        ok(&ctl, &["put", "/live", &format!("v{n}")]);
        if live
            .expect_lines(&["PUT", "/live"], Duration::from_millis(500))
            .is_ok()
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "live watch saw nothing: {:?}",
            live.seen
        );
    }
    n += 1;
    ok(&ctl, &["put", "/live", &format!("v{n}")]);
    // --prev-kv prints the previous key/value before the new one.
    live.expect_lines(
        &[
            "PUT",
            "/live",
            &format!("v{}", n - 1),
            "/live",
            &format!("v{n}"),
        ],
        Duration::from_secs(10),
    )
    .expect("watch with --prev-kv");

    // Watching from a compacted revision is refused with the compaction error.
    let now = int(&json(&ctl, &["get", "/w/b"]), &["header", "revision"]);
    ok(&ctl, &["compact", &now.to_string()]);
    let gone = ctl
        .spawn(&["watch", "/w/", "--prefix", &format!("--rev={rev}")])
        .expect("start watch");
    let (success, out, err) = gone
        .wait_exit(Duration::from_secs(15))
        .expect("watch on a compacted revision ends");
    assert!(!success, "watch from a compacted revision must fail");
    let all = format!("{}\n{err}", out.join("\n"));
    assert!(
        all.contains("required revision has been compacted"),
        "output: {all}"
    );
    c.check_alive_or_panic();
}

fn lease_id(grant_output: &str) -> String {
    // "lease 694d7a1c0f1bb30b granted with TTL(60s)"
    let words: Vec<&str> = grant_output.split_whitespace().collect();
    assert!(
        words.len() >= 3 && words[0] == "lease" && words[2] == "granted",
        "unexpected grant output: {grant_output}"
    );
    words[1].to_string()
}

async fn etcdctl_lease_lifecycle(form: Form) {
    let (c, ctl) = cluster(form).await;
    let out = ok(&ctl, &["lease", "grant", "60"]);
    let id = lease_id(&out);
    assert!(out.contains("TTL(60s)"), "{out}");

    ok(&ctl, &["put", "/lease/a", "1", &format!("--lease={id}")]);
    ok(&ctl, &["put", "/lease/b", "2", &format!("--lease={id}")]);
    ok(&ctl, &["put", "/lease/keep", "3"]);
    let got = json(&ctl, &["get", "/lease/a"]);
    assert_eq!(
        format!("{:016x}", int(&got, &["kvs", "0", "lease"])),
        id,
        "key must carry the lease: {got}"
    );

    let ka = ok(&ctl, &["lease", "keep-alive", "--once", &id]);
    assert!(
        ka.contains(&format!("lease {id} keepalived with TTL(")),
        "{ka}"
    );

    let ttl = ok(&ctl, &["lease", "timetolive", &id, "--keys"]);
    assert!(
        ttl.contains(&format!("lease {id} granted with TTL(60s), remaining(")),
        "{ttl}"
    );
    assert!(
        ttl.contains("/lease/a") && ttl.contains("/lease/b") && !ttl.contains("/lease/keep"),
        "{ttl}"
    );

    let list = ok(&ctl, &["lease", "list"]);
    assert!(list.contains(&id), "lease list: {list}");

    let rv = ok(&ctl, &["lease", "revoke", &id]);
    assert_eq!(rv.trim(), format!("lease {id} revoked"));
    // Keys attached to the lease are deleted on every member.
    for i in 0..c.len() {
        let m = ctl.with_endpoints(&[form.of(&c.endpoint(i))]);
        e2e::poll_until(
            "lease keys gone",
            Duration::from_secs(10),
            Duration::from_millis(100),
            || {
                let m = m.clone();
                async move {
                    let out = m
                        .run(&[
                            "get",
                            "/lease/",
                            "--prefix",
                            "--keys-only",
                            "--consistency=s",
                        ])?
                        .ok()?;
                    Ok((lines(&out) == ["/lease/keep"]).then_some(()))
                }
            },
        )
        .await
        .expect("keys attached to a revoked lease are deleted");
    }
    let ttl = ok(&ctl, &["lease", "timetolive", &id]);
    assert!(ttl.contains("already expired"), "{ttl}");

    // A short lease expires by itself and takes its key along.
    let short = lease_id(&ok(&ctl, &["lease", "grant", "2"]));
    ok(
        &ctl,
        &["put", "/lease/short", "x", &format!("--lease={short}")],
    );
    e2e::poll_until(
        "expired lease's key gone",
        Duration::from_secs(15),
        Duration::from_millis(200),
        || {
            let ctl = ctl.clone();
            async move {
                Ok(ok(&ctl, &["get", "/lease/short"])
                    .trim()
                    .is_empty()
                    .then_some(()))
            }
        },
    )
    .await
    .expect("key of an expired lease is deleted");
    c.check_alive_or_panic();
}

async fn etcdctl_member_list_endpoint_status_and_health_on_every_member(form: Form) {
    let (c, ctl) = cluster(form).await;

    // A member publishes its name and client URLs through raft once it has started (etcd
    // lists it as "unstarted", with no name, until then): give that a bounded moment.
    let mut list = json(&ctl, &["member", "list"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while list["members"].as_array().is_some_and(|ms| {
        ms.iter()
            .any(|m| m["name"].as_str().unwrap_or("").is_empty())
    }) && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(250)).await;
        list = json(&ctl, &["member", "list"]);
    }
    let members = list["members"]
        .as_array()
        .unwrap_or_else(|| panic!("no members: {list}"));
    assert_eq!(members.len(), 3, "{list}");
    let mut names: Vec<String> = members
        .iter()
        .map(|m| m["name"].as_str().unwrap_or("").to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["member-0", "member-1", "member-2"], "{list}");
    for m in members {
        let urls = m["clientURLs"].to_string();
        let i: usize = m["name"]
            .as_str()
            .and_then(|n| n.strip_prefix("member-"))
            .and_then(|n| n.parse().ok())
            .expect("name");
        assert!(
            urls.contains(&c.endpoint(i)),
            "member {} advertises {urls}, expected {}",
            m["name"],
            c.endpoint(i)
        );
    }
    let simple = ok(&ctl, &["member", "list"]);
    assert_eq!(lines(&simple).len(), 3, "{simple}");

    let mut leaders = Vec::new();
    let mut ids = Vec::new();
    for i in 0..c.len() {
        let ep = c.endpoint(i);
        // etcdctl 3.4 dials each endpoint of `endpoint status|health` with the endpoint string
        // as the HTTP/2 :authority, so `http://127.0.0.1:P` arrives there verbatim; the store
        // repairs it as Go's gRPC server tolerates it (store/src/authority.rs).
        let target = form.of(&ep);
        {
            let one = ctl.with_endpoints(std::slice::from_ref(&target));
            let out = one
                .run(&["endpoint", "status", "-w", "json"])
                .expect("run etcdctl");
            assert!(
                out.success,
                "`endpoint status` on member-{i} with the {form:?} endpoint {target} failed: {}{}",
                out.stdout, out.stderr
            );
            let st: Value = serde_json::from_str(out.stdout.trim())
                .unwrap_or_else(|e| panic!("{e}: {}", out.stdout));
            let s = &st[0];
            assert_eq!(s["Endpoint"], target.as_str(), "{st}");
            let id = s["Status"]["header"]["member_id"]
                .as_u64()
                .unwrap_or_else(|| panic!("member_id: {st}"));
            let leader = s["Status"]["leader"]
                .as_u64()
                .unwrap_or_else(|| panic!("leader: {st}"));
            assert!(
                s["Status"]["raftTerm"].as_u64().unwrap_or(0) > 0,
                "raftTerm: {st}"
            );
            assert!(
                s["Status"]["raftIndex"].as_u64().unwrap_or(0) > 0,
                "raftIndex: {st}"
            );
            assert!(
                !s["Status"]["version"].as_str().unwrap_or("").is_empty(),
                "version: {st}"
            );
            ids.push(id);
            leaders.push(leader);
            // the table/simple output works too
            ok(&one, &["endpoint", "status"]);

            let h = one.run(&["endpoint", "health"]).expect("run etcdctl");
            let text = format!("{}{}", h.stdout, h.stderr);
            assert!(
                h.success && text.contains(&format!("{target} is healthy")),
                "`endpoint health` on member-{i} with the {form:?} endpoint {target}: {text}"
            );
        }

        let (code, body) = c
            .metrics_get(i, "/health")
            .await
            .unwrap_or_else(|e| panic!("GET /health on member-{i}: {e:#}"));
        assert_eq!(code, 200, "GET /health on member-{i}: {body}");
        assert!(
            body.replace(' ', "").contains(r#""health":"true""#),
            "GET /health on member-{i}: {body}"
        );
        let (code, metrics) = c
            .metrics_get(i, "/metrics")
            .await
            .unwrap_or_else(|e| panic!("GET /metrics on member-{i}: {e:#}"));
        assert_eq!(code, 200, "GET /metrics on member-{i}");
        assert!(
            metrics.lines().any(|l| l.starts_with("# TYPE ")),
            "/metrics on member-{i} is not Prometheus text"
        );
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "member ids must differ: {ids:x?}");
    assert!(
        leaders.iter().all(|l| *l == leaders[0] && ids.contains(l)),
        "members disagree on the leader: {leaders:x?} (ids {ids:x?})"
    );
    let listed: Vec<u64> = members.iter().filter_map(|m| m["ID"].as_u64()).collect();
    for id in &ids {
        assert!(
            listed.contains(id),
            "member id {id:x} from status is not in member list {listed:x?}"
        );
    }
    c.check_alive_or_panic();
}

trait CheckAlive {
    fn check_alive_or_panic(self);
}

impl CheckAlive for StoreCluster {
    fn check_alive_or_panic(mut self) {
        if let Err(e) = self.check_alive() {
            panic!("{e:#}");
        }
    }
}
