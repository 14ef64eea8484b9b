#!/usr/bin/env python3
"""kubelab's client suite for the official Kubernetes Python client (kubernetes 32.0.1).

Each check is one thing a user of the client does, against the API server of $KUBECONFIG (loaded
as a user's kubeconfig is: HTTPS, a client certificate, the cluster's CA) or else at
$KUBELAB_API_URL (plain HTTP, no credentials), in a namespace of its own. It prints one line per check:
`ok <name>`, `FAIL <name>: <why>`, or `xfail <name>: <gap> (<why>)` for a check listed in
KNOWN_GAPS, and exits 1 if any check failed — including a listed check that passed, so that the
list is emptied as the server catches up.

Environment:
  KUBECONFIG           the kubeconfig to connect with (its current context)
  KUBELAB_API_URL      without KUBECONFIG: the API server, e.g. http://127.0.0.1:8080
  KUBELAB_NODE         the node the pods run on (required: pods name it in spec.nodeName)
  KUBELAB_IMAGE        the image the pods run (default docker.io/library/busybox:1.36)
  KUBELAB_CLIENTS_DIR  where scripts/fetch-clients.sh installed the clients
                       (default /var/cache/kubelab/clients; this suite imports <dir>/python)
  KUBELAB_CHECKS       comma-separated check names to run (default: all)
  KUBELAB_CLIENT_DEBUG=1  log every request and response (urllib3's and the client's debug log)
"""

import datetime
import json
import logging
import os
import signal
import sys
import tempfile
import time
import traceback
import uuid

# Checks the API server is known to fail, with why. A listed check that fails prints `xfail`; one
# that passes fails the suite, so that the entry is removed once the server is fixed.
KNOWN_GAPS = {}

CLIENTS_DIR = os.environ.get("KUBELAB_CLIENTS_DIR", "/var/cache/kubelab/clients")
sys.path.insert(0, os.path.join(CLIENTS_DIR, "python"))
try:
    import kubernetes
    from kubernetes import client, config, watch
    from kubernetes.client.rest import ApiException
    from kubernetes.dynamic import DynamicClient
    from kubernetes.stream import stream
except ImportError as e:
    sys.exit(f"the Python client is not installed in {CLIENTS_DIR}/python ({e}): run `make deps` (scripts/fetch-clients.sh)")

# One check may take this long before it is stopped (the pod checks wait for a container to start).
CHECK_TIMEOUT = 90
# Waiting for a pod to run, or for an object to go.
WAIT_TIMEOUT = 60
# Waiting for the garbage collector (kube-controller-manager's acts within a second or two).
GC_TIMEOUT = 20
# Every request but a watch or a followed log gives up after this long.
REQUEST_TIMEOUT = 20
# A rollout or a Job on real containers (pods created, scheduled, started, reported).
ROLLOUT_TIMEOUT = 60

MANAGER = "kubelab-suite"


class Failed(Exception):
    """A check's expectation that did not hold."""


def ensure(cond, why):
    if not cond:
        raise Failed(why)


class CheckTimeout(BaseException):
    """Raised from SIGALRM: a BaseException, so that no `except Exception` inside a check swallows it."""


CHECKS = []


def check(name):
    def register(fn):
        CHECKS.append((name, fn))
        return fn
    return register


class Suite:
    def __init__(self):
        self.node = os.environ["KUBELAB_NODE"]
        self.image = os.environ.get("KUBELAB_IMAGE", "docker.io/library/busybox:1.36")
        self.ns = "client-python-" + uuid.uuid4().hex[:6]
        conf = client.Configuration()
        if os.environ.get("KUBECONFIG"):
            config.load_kube_config(config_file=os.environ["KUBECONFIG"], client_configuration=conf)
        else:
            conf.host = os.environ["KUBELAB_API_URL"]
        self.url = conf.host
        if os.environ.get("KUBELAB_CLIENT_DEBUG") == "1":
            conf.debug = True
        self.api = client.ApiClient(conf)
        self.core = client.CoreV1Api(self.api)
        self.coordination = client.CoordinationV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self._dynamic = None
        self._cache_dir = tempfile.mkdtemp(prefix="kubelab-python-suite-")

    @property
    def dynamic(self):
        """The dynamic client: discovery first, then any patch content type and server-side apply."""
        if self._dynamic is None:
            self._dynamic = DynamicClient(self.api, cache_file=os.path.join(self._cache_dir, "discovery.json"))
        return self._dynamic

    def configmaps(self):
        return self.dynamic.resources.get(api_version="v1", kind="ConfigMap")

    # --- objects ---

    def configmap(self, name, data=None, labels=None, finalizers=None):
        meta = client.V1ObjectMeta(name=name, labels=labels, finalizers=finalizers)
        return self.core.create_namespaced_config_map(self.ns, client.V1ConfigMap(metadata=meta, data=data or {"k": "v"}), _request_timeout=REQUEST_TIMEOUT)

    def pod_body(self, name, script, labels=None):
        return client.V1Pod(
            metadata=client.V1ObjectMeta(name=name, labels=labels),
            spec=client.V1PodSpec(
                node_name=self.node,
                restart_policy="Never",
                termination_grace_period_seconds=1,
                containers=[client.V1Container(name="main", image=self.image, command=["sh", "-c", script])],
            ),
        )

    def pod(self, name, script, labels=None):
        return self.core.create_namespaced_pod(self.ns, self.pod_body(name, script, labels), _request_timeout=REQUEST_TIMEOUT)

    def get_cm(self, name):
        return self.core.read_namespaced_config_map(name, self.ns, _request_timeout=REQUEST_TIMEOUT)

    def wait_running(self, name):
        def running():
            p = self.core.read_namespaced_pod(name, self.ns, _request_timeout=REQUEST_TIMEOUT)
            phase = p.status.phase if p.status else None
            ensure(phase not in ("Succeeded", "Failed"), f"pod {name} ended: {phase}")
            return phase == "Running", f"phase {phase}"
        wait_for(f"pod {name} Running", running)

    def wait_gone(self, read, what, timeout=WAIT_TIMEOUT):
        def gone():
            try:
                obj = read()
            except ApiException as e:
                if e.status == 404:
                    return True, ""
                raise
            return False, f"still there: deletionTimestamp {obj.metadata.deletion_timestamp}, finalizers {obj.metadata.finalizers}"
        wait_for(f"{what} to be gone", gone, timeout)

    def names(self, items):
        return sorted(i.metadata.name for i in items)


def wait_for(what, probe, timeout=WAIT_TIMEOUT):
    """Polls `probe` (returning (done, what was seen)) every 0.2 s until it is done."""
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline:
        done, seen = probe()
        if done:
            return
        time.sleep(0.2)
    raise Failed(f"timed out after {timeout}s waiting for {what}: {seen}")


def api_error(fn, status, reason):
    """Runs `fn`, which must raise the client's ApiException with `status` and a Status body whose
    reason is `reason`; returns that Status (a dict)."""
    try:
        fn()
    except ApiException as e:
        ensure(e.status == status, f"expected HTTP {status} {reason}, got {e.status}: {e.body}")
        try:
            body = json.loads(e.body)
        except (TypeError, ValueError):
            raise Failed(f"HTTP {e.status}, but the body is not a Status: {e.body!r}")
        ensure(body.get("kind") == "Status" and body.get("apiVersion") == "v1", f"the error body is not a v1 Status: {body}")
        ensure(body.get("status") == "Failure" and body.get("code") == status, f"Status has status {body.get('status')!r} code {body.get('code')!r}")
        ensure(body.get("reason") == reason, f"Status reason {body.get('reason')!r}, expected {reason!r}: {body}")
        return body
    raise Failed(f"expected HTTP {status} {reason}; the call succeeded")


# --- create and get ---

@check("create-namespace")
def create_namespace(s):
    ns = s.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=s.ns, labels={"suite": "python"})), _request_timeout=REQUEST_TIMEOUT)
    ensure(ns.metadata.name == s.ns and ns.metadata.uid, f"created namespace: {ns.metadata}")
    ensure(ns.status and ns.status.phase == "Active", f"namespace phase {ns.status and ns.status.phase}")
    # kube-apiserver labels every namespace with its name (the NamespaceDefaultLabelName feature).
    ensure(ns.metadata.labels == {"kubernetes.io/metadata.name": s.ns, "suite": "python"}, f"namespace labels {ns.metadata.labels}")


@check("create-configmap")
def create_configmap(s):
    _, code, _ = s.core.create_namespaced_config_map_with_http_info(
        s.ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="created", labels={"app": "created"}), data={"greeting": "hello"}),
        _request_timeout=REQUEST_TIMEOUT)
    ensure(code == 201, f"HTTP {code}, expected 201 Created")
    cm = s.get_cm("created")
    ensure(cm.data == {"greeting": "hello"} and cm.metadata.labels == {"app": "created"}, f"read back: data {cm.data} labels {cm.metadata.labels}")
    ensure(cm.metadata.uid and cm.metadata.resource_version and cm.metadata.creation_timestamp, f"metadata not filled in: {cm.metadata}")


@check("create-pod")
def create_pod(s):
    p, code, _ = s.core.create_namespaced_pod_with_http_info(s.ns, s.pod_body("created", "sleep 3600"), _request_timeout=REQUEST_TIMEOUT)
    ensure(code == 201, f"HTTP {code}, expected 201 Created")
    ensure(p.metadata.uid and p.spec.node_name == s.node, f"created pod: uid {p.metadata.uid} node {p.spec.node_name}")
    s.wait_running("created")


@check("get")
def get(s):
    ns = s.core.read_namespace(s.ns, _request_timeout=REQUEST_TIMEOUT)
    ensure(ns.kind == "Namespace" and ns.api_version == "v1", f"namespace kind {ns.kind} apiVersion {ns.api_version}")
    cm = s.get_cm("created")
    ensure(cm.kind == "ConfigMap" and cm.metadata.namespace == s.ns and cm.data == {"greeting": "hello"}, f"configmap: {cm}")
    p = s.core.read_namespaced_pod("created", s.ns, _request_timeout=REQUEST_TIMEOUT)
    ensure(p.kind == "Pod" and p.status.phase == "Running" and p.status.pod_ip, f"pod: kind {p.kind} phase {p.status.phase} ip {p.status.pod_ip}")


@check("create-lease")
def create_lease(s):
    body = client.V1Lease(metadata=client.V1ObjectMeta(name="leader"),
                          spec=client.V1LeaseSpec(holder_identity="suite-a", lease_duration_seconds=15, lease_transitions=0,
                                                  acquire_time=datetime.datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=datetime.timezone.utc)))
    l = s.coordination.create_namespaced_lease(s.ns, body, _request_timeout=REQUEST_TIMEOUT)
    ensure(l.spec.holder_identity == "suite-a" and l.spec.lease_duration_seconds == 15, f"created lease spec {l.spec}")
    got = s.coordination.read_namespaced_lease("leader", s.ns, _request_timeout=REQUEST_TIMEOUT)
    ensure(got.kind == "Lease" and got.api_version == "coordination.k8s.io/v1", f"kind {got.kind} apiVersion {got.api_version}")
    # MicroTime keeps its microseconds.
    ensure(got.spec.acquire_time == body.spec.acquire_time, f"acquireTime {got.spec.acquire_time}, expected {body.spec.acquire_time}")


# --- namespaces and leases ---

@check("namespace-list-and-delete")
def namespace_list_and_delete(s):
    other = s.ns + "-x"
    s.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=other)), _request_timeout=REQUEST_TIMEOUT)
    listed = s.core.list_namespace(label_selector=f"kubernetes.io/metadata.name in ({s.ns},{other})", _request_timeout=REQUEST_TIMEOUT)
    ensure(s.names(listed.items) == sorted([s.ns, other]), f"namespaces by kubernetes.io/metadata.name: {s.names(listed.items)}")
    # A finalizer on a configmap inside holds the namespace in Terminating until it is taken off.
    s.core.create_namespaced_config_map(other, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="inside", finalizers=["example.com/hold"])),
                                        _request_timeout=REQUEST_TIMEOUT)
    # kube-apiserver answers with the namespace, now Terminating. The client's return type is
    # V1Status, so the raw answer is read.
    resp = s.core.delete_namespace(other, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
    ns = json.loads(resp.data)
    ensure(ns.get("kind") == "Namespace" and ns["metadata"].get("deletionTimestamp") and ns.get("status", {}).get("phase") == "Terminating",
           f"the answer: {ns}")
    api_error(lambda: s.core.create_namespaced_config_map(other, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="late")), _request_timeout=REQUEST_TIMEOUT),
              403, "Forbidden")

    def inside_deleted():
        cm = s.core.read_namespaced_config_map("inside", other, _request_timeout=REQUEST_TIMEOUT)
        return cm.metadata.deletion_timestamp is not None, "no deletionTimestamp yet"
    wait_for("the namespace controller to delete the configmap inside", inside_deleted)
    s.core.patch_namespaced_config_map("inside", other, {"metadata": {"finalizers": None}}, _request_timeout=REQUEST_TIMEOUT)
    s.wait_gone(lambda: s.core.read_namespace(other, _request_timeout=REQUEST_TIMEOUT), f"namespace {other}")


@check("lease-update")
def lease_update(s):
    l = s.coordination.read_namespaced_lease("leader", s.ns, _request_timeout=REQUEST_TIMEOUT)
    old_rv = l.metadata.resource_version
    l.spec.holder_identity = "suite-b"
    l.spec.renew_time = datetime.datetime(2026, 1, 2, 3, 4, 20, 1, tzinfo=datetime.timezone.utc)
    l.spec.lease_transitions = 1
    updated = s.coordination.replace_namespaced_lease("leader", s.ns, l, _request_timeout=REQUEST_TIMEOUT)
    ensure(updated.spec.holder_identity == "suite-b" and updated.spec.lease_transitions == 1 and updated.spec.renew_time == l.spec.renew_time,
           f"after the update: {updated.spec}")
    ensure(int(updated.metadata.resource_version) > int(old_rv), f"resourceVersion {updated.metadata.resource_version} after {old_rv}")
    # The stale copy loses, as a second candidate's would.
    l.spec.holder_identity = "suite-c"
    api_error(lambda: s.coordination.replace_namespaced_lease("leader", s.ns, l, _request_timeout=REQUEST_TIMEOUT), 409, "Conflict")
    leases = s.coordination.list_namespaced_lease(s.ns, _request_timeout=REQUEST_TIMEOUT).items
    ensure(s.names(leases) == ["leader"] and leases[0].spec.holder_identity == "suite-b", f"leases: {[i.spec for i in leases]}")


# --- lists ---

@check("list-label-selector")
def list_label_selector(s):
    for name, labels in [("sel-a", {"app": "a", "tier": "web"}), ("sel-b", {"app": "b", "tier": "db"}), ("sel-c", {"app": "c"})]:
        s.configmap(name, labels={"sel": "yes", **labels})
    cases = [
        ("sel=yes,app=a", ["sel-a"]),
        ("sel=yes,app in (a,b)", ["sel-a", "sel-b"]),
        ("sel=yes,app notin (a)", ["sel-b", "sel-c"]),
        ("sel=yes,tier", ["sel-a", "sel-b"]),
        ("sel=yes,!tier", ["sel-c"]),
        ("sel=yes,app!=a,tier", ["sel-b"]),
    ]
    for selector, want in cases:
        got = s.names(s.core.list_namespaced_config_map(s.ns, label_selector=selector, _request_timeout=REQUEST_TIMEOUT).items)
        ensure(got == want, f"labelSelector {selector!r}: {got}, expected {want}")


@check("list-field-selector")
def list_field_selector(s):
    s.configmap("field-a", labels={"field": "yes"})
    s.configmap("field-b", labels={"field": "yes"})
    got = s.names(s.core.list_namespaced_config_map(s.ns, field_selector="metadata.name=field-a", _request_timeout=REQUEST_TIMEOUT).items)
    ensure(got == ["field-a"], f"fieldSelector metadata.name=field-a: {got}")
    got = s.names(s.core.list_namespaced_config_map(s.ns, label_selector="field=yes", field_selector="metadata.name!=field-a", _request_timeout=REQUEST_TIMEOUT).items)
    ensure(got == ["field-b"], f"fieldSelector metadata.name!=field-a with labelSelector field=yes: {got}")
    got = sorted((i.metadata.namespace, i.metadata.name) for i in s.core.list_config_map_for_all_namespaces(
        field_selector=f"metadata.namespace={s.ns},metadata.name=field-b", _request_timeout=REQUEST_TIMEOUT).items)
    ensure(got == [(s.ns, "field-b")], f"all namespaces, fieldSelector metadata.namespace={s.ns},metadata.name=field-b: {got}")
    pods = s.core.list_namespaced_pod(s.ns, field_selector=f"spec.nodeName={s.node},status.phase=Running", _request_timeout=REQUEST_TIMEOUT).items
    ensure("created" in s.names(pods), f"pods with spec.nodeName={s.node},status.phase=Running: {s.names(pods)}")
    api_error(lambda: s.core.list_namespaced_config_map(s.ns, field_selector="data.k=v", _request_timeout=REQUEST_TIMEOUT), 400, "BadRequest")


def paged(s, limit, between_pages=None, **kw):
    """Lists configmaps `limit` at a time, following `continue`; returns the pages' names."""
    pages, token = [], None
    while True:
        page = s.core.list_namespaced_config_map(s.ns, limit=limit, _continue=token, _request_timeout=REQUEST_TIMEOUT, **kw)
        pages.append([i.metadata.name for i in page.items])
        token = page.metadata._continue
        ensure(len(page.items) <= limit, f"page {len(pages)} has {len(page.items)} items, over limit={limit}")
        if not token:
            return pages
        ensure(len(pages) < 20, f"more than 20 pages of {limit}: {pages}")
        if between_pages:
            between_pages(len(pages))


@check("list-paging")
def list_paging(s):
    want = [f"page-{i:02}" for i in range(12)]
    for name in want:
        s.configmap(name, labels={"paging": "yes"})
    pages = paged(s, 5, label_selector="paging=yes")
    got = [n for page in pages for n in page]
    ensure(sorted(got) == want, f"limit=5 pages {pages}: every object exactly once expected, got {len(got)} names, {len(set(got))} distinct")
    ensure([len(p) for p in pages] == [5, 5, 2], f"page sizes {[len(p) for p in pages]}, expected [5, 5, 2]")


@check("list-paging-consistent")
def list_paging_consistent(s):
    # Pages after the first are served from the first page's resourceVersion: an object created
    # between pages is not in them (the API concepts' "Retrieving large results sets in chunks").
    want = [f"snap-{i:02}" for i in range(6)]
    for name in want:
        s.configmap(name, labels={"snap": "yes"})
    created = []

    def create_one(page):
        name = f"snap-late-{page}"
        s.configmap(name, labels={"snap": "yes"})
        created.append(name)
    pages = paged(s, 2, between_pages=create_one, label_selector="snap=yes")
    got = sorted(n for page in pages for n in page)
    ensure(got == want, f"objects created between pages ({created}) showed up, or objects went missing: {pages}")


# --- watch ---

def watch_events(s, stop_after, **kw):
    """A configmap watch in the suite's namespace; returns its events as dicts with type, name,
    object (the client's model) and raw object. `stop_after(events)` ends it early."""
    w = watch.Watch()
    events = []
    for e in w.stream(s.core.list_namespaced_config_map, s.ns, **kw):
        obj = e["raw_object"]
        events.append({"type": e["type"], "name": obj.get("metadata", {}).get("name"), "object": e["object"], "raw": obj})
        if stop_after(events):
            w.stop()
            break
    return events


@check("watch-from-resource-version")
def watch_from_resource_version(s):
    s.configmap("watch-1", labels={"watch": "yes"})
    rv = s.core.list_namespaced_config_map(s.ns, label_selector="watch=yes", _request_timeout=REQUEST_TIMEOUT).metadata.resource_version
    ensure(rv, "the list has no resourceVersion")
    # The changes happen before the watch starts: it must replay them from the list's version.
    s.configmap("watch-2", labels={"watch": "yes"})
    s.core.patch_namespaced_config_map("watch-1", s.ns, {"data": {"k": "patched"}}, _request_timeout=REQUEST_TIMEOUT)
    s.core.delete_namespaced_config_map("watch-2", s.ns, _request_timeout=REQUEST_TIMEOUT)
    s.core.delete_namespaced_config_map("watch-1", s.ns, _request_timeout=REQUEST_TIMEOUT)
    want = [("ADDED", "watch-2"), ("MODIFIED", "watch-1"), ("DELETED", "watch-2"), ("DELETED", "watch-1")]
    events = watch_events(s, lambda ev: len(ev) >= len(want), resource_version=rv, label_selector="watch=yes",
                          timeout_seconds=10, _request_timeout=REQUEST_TIMEOUT)
    got = [(e["type"], e["name"]) for e in events]
    ensure(got == want, f"events from resourceVersion {rv}: {got}, expected {want}")
    ensure(events[1]["raw"]["data"] == {"k": "patched"}, f"MODIFIED carries {events[1]['raw'].get('data')}")
    ensure(events[3]["raw"]["data"] == {"k": "patched"}, f"DELETED carries {events[3]['raw'].get('data')}, expected the last state")
    rvs = [int(e["raw"]["metadata"]["resourceVersion"]) for e in events]
    ensure(rvs == sorted(rvs) and len(set(rvs)) == len(rvs), f"event resourceVersions not increasing: {rvs}")


@check("watch-bookmarks")
def watch_bookmarks(s):
    # allowWatchBookmarks=true: the stream still carries the changes, and a BOOKMARK (kind and
    # resourceVersion only) arrives before it ends, at a version that covers what changed since
    # outside the watch's selector — so that a client resumes from there, not from its last event.
    # kube-apiserver sends one 2 s before the watch's deadline and about every minute (cacher's
    # cache_watcher.go, nextBookmarkTime); kubelab every 10 s.
    rv = s.core.list_namespaced_config_map(s.ns, _request_timeout=REQUEST_TIMEOUT).metadata.resource_version
    s.configmap("bookmark-1", labels={"bookmark": "yes"})
    other = []

    def stop_after(ev):
        if ev[-1]["name"] == "bookmark-1" and not other:
            other.append(s.configmap("bookmark-other"))
        return ev[-1]["type"] == "BOOKMARK"
    start = time.monotonic()
    events = watch_events(s, stop_after, resource_version=rv, allow_watch_bookmarks=True, label_selector="bookmark=yes",
                          timeout_seconds=15, _request_timeout=30)
    took = time.monotonic() - start
    types = [e["type"] for e in events]
    ensure("ERROR" not in types, f"an ERROR event: {[e['raw'] for e in events if e['type'] == 'ERROR']}")
    ensure(("ADDED", "bookmark-1") in [(e["type"], e["name"]) for e in events], f"the change did not arrive: {types}")
    ensure(types and types[-1] == "BOOKMARK", f"no BOOKMARK in {took:.1f}s of a 15 s watch: events {types}")
    b = events[-1]["raw"]
    ensure(b.get("kind") == "ConfigMap" and b.get("apiVersion") == "v1", f"bookmark object kind/apiVersion: {b}")
    other_rv = int(other[0].metadata.resource_version)
    ensure(int(b["metadata"]["resourceVersion"]) >= other_rv, f"bookmark resourceVersion {b['metadata']['resourceVersion']} behind bookmark-other's {other_rv}")


@check("watch-bookmark-before-timeout")
def watch_bookmark_before_timeout(s):
    # A watch with timeoutSeconds=4 gets its bookmark ~2 s before the deadline on kube-apiserver,
    # so that a client can resume from the newest version when the server closes the watch.
    rv = s.core.list_namespaced_config_map(s.ns, _request_timeout=REQUEST_TIMEOUT).metadata.resource_version
    start = time.monotonic()
    events = watch_events(s, lambda ev: ev[-1]["type"] == "BOOKMARK", resource_version=rv, allow_watch_bookmarks=True,
                          label_selector="nothing=matches", timeout_seconds=4, _request_timeout=REQUEST_TIMEOUT)
    took = time.monotonic() - start
    types = [e["type"] for e in events]
    ensure(types == ["BOOKMARK"], f"events {types} in {took:.1f}s of a watch with timeoutSeconds=4; expected one BOOKMARK before it ended")


# --- patch ---

@check("patch-strategic-merge")
def patch_strategic_merge(s):
    # The typed API sends a dict as application/strategic-merge-patch+json. finalizers merge as a
    # set (patchStrategy "merge" on ObjectMeta.finalizers); a JSON merge patch would replace them.
    s.configmap("smp", data={"a": "1", "b": "2"}, finalizers=["example.com/one"])
    try:
        cm = s.core.patch_namespaced_config_map("smp", s.ns, {"metadata": {"finalizers": ["example.com/two"]}, "data": {"a": None, "c": "3"}},
                                                _request_timeout=REQUEST_TIMEOUT)
        ensure(cm.metadata.finalizers == ["example.com/one", "example.com/two"], f"finalizers after the patch: {cm.metadata.finalizers}, expected both")
        ensure(cm.data == {"b": "2", "c": "3"}, f"data after the patch: {cm.data}")
    finally:
        s.configmaps().patch(name="smp", namespace=s.ns, body={"metadata": {"finalizers": None}}, content_type="application/merge-patch+json")


@check("patch-json-merge")
def patch_json_merge(s):
    s.configmap("merge", data={"a": "1", "b": "2"}, finalizers=["example.com/one"])
    cm = s.configmaps().patch(name="merge", namespace=s.ns, content_type="application/merge-patch+json",
                              body={"metadata": {"finalizers": ["example.com/two"], "labels": {"patched": "merge"}}, "data": {"a": None, "c": "3"}})
    try:
        ensure(cm.metadata.finalizers == ["example.com/two"], f"finalizers after a merge patch: {cm.metadata.finalizers}, expected the list replaced")
        ensure(dict(cm.data) == {"b": "2", "c": "3"}, f"data after the patch: {cm.data}")
        ensure(dict(cm.metadata.labels) == {"patched": "merge"}, f"labels after the patch: {cm.metadata.labels}")
    finally:
        s.configmaps().patch(name="merge", namespace=s.ns, body={"metadata": {"finalizers": None}}, content_type="application/merge-patch+json")


@check("patch-json-patch")
def patch_json_patch(s):
    # The typed API sends a list as application/json-patch+json.
    s.configmap("jsonpatch", data={"a": "1", "b": "2"})
    ops = [
        {"op": "test", "path": "/data/a", "value": "1"},
        {"op": "replace", "path": "/data/a", "value": "one"},
        {"op": "remove", "path": "/data/b"},
        {"op": "add", "path": "/metadata/labels", "value": {"patched": "json"}},
    ]
    cm = s.core.patch_namespaced_config_map("jsonpatch", s.ns, ops, _request_timeout=REQUEST_TIMEOUT)
    ensure(cm.data == {"a": "one"} and cm.metadata.labels == {"patched": "json"}, f"after the patch: data {cm.data} labels {cm.metadata.labels}")
    # A failed `test` operation leaves the object alone: 422 (patch.go's applyJSPatch).
    api_error(lambda: s.core.patch_namespaced_config_map("jsonpatch", s.ns, [{"op": "test", "path": "/data/a", "value": "1"}], _request_timeout=REQUEST_TIMEOUT),
              422, "Invalid")
    ensure(s.get_cm("jsonpatch").data == {"a": "one"}, "a failed JSON patch changed the object")


@check("patch-server-side-apply")
def patch_server_side_apply(s):
    # DynamicClient.server_side_apply: application/apply-patch+yaml with fieldManager; it creates
    # the object when it is missing, and records the manager in managedFields.
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied", "labels": {"owner": "suite"}}, "data": {"a": "1"}}
    cm = s.dynamic.server_side_apply(s.configmaps(), body=body, namespace=s.ns, field_manager=MANAGER)
    ensure(dict(cm.data) == {"a": "1"}, f"created by apply: data {cm.data}")
    body["data"] = {"a": "2", "b": "3"}
    cm = s.dynamic.server_side_apply(s.configmaps(), body=body, name="applied", namespace=s.ns, field_manager=MANAGER)
    ensure(dict(cm.data) == {"a": "2", "b": "3"}, f"after the second apply: data {cm.data}")
    managers = [(m["manager"], m["operation"]) for m in (cm.metadata.managedFields or [])]
    ensure((MANAGER, "Apply") in managers, f"managedFields: {managers}, expected ({MANAGER}, Apply)")


@check("patch-lease")
def patch_lease(s):
    l = s.coordination.patch_namespaced_lease("leader", s.ns, {"spec": {"holderIdentity": "suite-d"}}, _request_timeout=REQUEST_TIMEOUT)
    ensure(l.spec.holder_identity == "suite-d" and l.spec.lease_duration_seconds == 15, f"lease after a strategic merge patch: {l.spec}")


# --- update, delete ---

@check("update-stale-resource-version")
def update_stale(s):
    s.configmap("stale")
    old = s.get_cm("stale")
    fresh = s.get_cm("stale")
    fresh.data = {"k": "first"}
    s.core.replace_namespaced_config_map("stale", s.ns, fresh, _request_timeout=REQUEST_TIMEOUT)
    old.data = {"k": "second"}
    st = api_error(lambda: s.core.replace_namespaced_config_map("stale", s.ns, old, _request_timeout=REQUEST_TIMEOUT), 409, "Conflict")
    ensure("the object has been modified" in st.get("message", ""), f"Status message {st.get('message')!r}")
    ensure(s.get_cm("stale").data == {"k": "first"}, "the stale update was written")


@check("delete-background")
def delete_background(s):
    s.configmap("del-bg")
    st = s.core.delete_namespaced_config_map("del-bg", s.ns, propagation_policy="Background", _request_timeout=REQUEST_TIMEOUT)
    # kube-apiserver answers a configmap delete with a Status (its registry does not set
    # ReturnDeletedObject); the client's return type is V1Status.
    ensure(st.kind == "Status" and st.status == "Success", f"the answer: kind {st.kind} status {st.status}")
    s.wait_gone(lambda: s.get_cm("del-bg"), "configmap del-bg")


def owned(s, name, owner, block=None):
    """A configmap `name` that `owner` (a configmap) owns."""
    ref = client.V1OwnerReference(api_version="v1", kind="ConfigMap", name=owner.metadata.name, uid=owner.metadata.uid, block_owner_deletion=block)
    return s.core.create_namespaced_config_map(s.ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, owner_references=[ref])),
                                               _request_timeout=REQUEST_TIMEOUT)


@check("delete-foreground")
def delete_foreground(s):
    # Foreground: the owner stays, with the foregroundDeletion finalizer, until the garbage
    # collector has deleted its blocking dependents. The client's return type is V1Status; a
    # foreground delete answers with the object, so the raw answer is read.
    owner = s.configmap("owner-fg")
    owned(s, "dependent-fg", owner, block=True)
    resp = s.core.delete_namespaced_config_map("owner-fg", s.ns, propagation_policy="Foreground", _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
    answer = json.loads(resp.data)
    ensure(answer.get("kind") == "ConfigMap" and "foregroundDeletion" in answer["metadata"].get("finalizers", []) and answer["metadata"].get("deletionTimestamp"),
           f"the answer: {answer}")
    s.wait_gone(lambda: s.get_cm("dependent-fg"), "the dependent configmap", GC_TIMEOUT)
    s.wait_gone(lambda: s.get_cm("owner-fg"), "the owner configmap")


@check("delete-foreground-pod")
def delete_foreground_pod(s):
    # A running pod without dependents: graceful deletion first, then it goes.
    s.pod("del-fg", "sleep 3600")
    s.wait_running("del-fg")
    s.core.delete_namespaced_pod("del-fg", s.ns, propagation_policy="Foreground", _request_timeout=REQUEST_TIMEOUT)
    s.wait_gone(lambda: s.core.read_namespaced_pod("del-fg", s.ns, _request_timeout=REQUEST_TIMEOUT), "pod del-fg")


@check("delete-orphan")
def delete_orphan(s):
    # Orphan: the owner goes, and the garbage collector takes the owner reference off the
    # dependent instead of deleting it.
    owner = s.configmap("owner-orphan")
    owned(s, "dependent-orphan", owner)
    s.core.delete_namespaced_config_map("owner-orphan", s.ns, propagation_policy="Orphan", _request_timeout=REQUEST_TIMEOUT)
    s.wait_gone(lambda: s.get_cm("owner-orphan"), "the owner configmap")

    def orphaned():
        refs = s.get_cm("dependent-orphan").metadata.owner_references
        return not refs, f"ownerReferences {refs}"
    wait_for("the dependent to lose its owner reference", orphaned, GC_TIMEOUT)


@check("delete-background-dependents")
def delete_background_dependents(s):
    # Background: the owner goes at once, the garbage collector deletes the dependent after it.
    owner = s.configmap("owner-bg")
    owned(s, "dependent-bg", owner)
    s.core.delete_namespaced_config_map("owner-bg", s.ns, propagation_policy="Background", _request_timeout=REQUEST_TIMEOUT)
    api_error(lambda: s.get_cm("owner-bg"), 404, "NotFound")
    s.wait_gone(lambda: s.get_cm("dependent-bg"), "the dependent configmap", GC_TIMEOUT)


@check("delete-grace-period")
def delete_grace_period(s):
    s.pod("del-grace", "trap 'exit 0' TERM; sleep 3600 & wait")
    s.wait_running("del-grace")
    p = s.core.delete_namespaced_pod("del-grace", s.ns, grace_period_seconds=5, _request_timeout=REQUEST_TIMEOUT)
    # A running pod is deleted gracefully: the answer is the pod, marked for deletion.
    ensure(p.kind == "Pod" and p.metadata.deletion_timestamp is not None, f"the answer: kind {p.kind} deletionTimestamp {p.metadata.deletion_timestamp}")
    ensure(p.metadata.deletion_grace_period_seconds == 5, f"deletionGracePeriodSeconds {p.metadata.deletion_grace_period_seconds}, expected 5")
    s.wait_gone(lambda: s.core.read_namespaced_pod("del-grace", s.ns, _request_timeout=REQUEST_TIMEOUT), "pod del-grace")
    s.configmap("del-now")
    s.core.delete_namespaced_config_map("del-now", s.ns, grace_period_seconds=0, _request_timeout=REQUEST_TIMEOUT)
    api_error(lambda: s.get_cm("del-now"), 404, "NotFound")


# --- server-side dry run ---

# --- workloads (the controller manager, the scheduler and the node agent at work) ---

def deployment_body(name, replicas, env=None):
    container = client.V1Container(name="main", image=None, command=["sleep", "3600"], env=env)
    labels = {"app": name}
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1DeploymentSpec(
            replicas=replicas,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(metadata=client.V1ObjectMeta(labels=labels),
                                              spec=client.V1PodSpec(termination_grace_period_seconds=1, containers=[container])),
        ),
    )


def wait_rolled_out(s, name, replicas):
    """As `kubectl rollout status` judges it: the controller saw the latest spec, and every
    replica is updated and available, with no old ones left."""
    def done():
        d = s.apps.read_namespaced_deployment(name, s.ns, _request_timeout=REQUEST_TIMEOUT)
        st = d.status
        seen = f"generation {d.metadata.generation} observed {st.observed_generation} replicas {st.replicas} updated {st.updated_replicas} available {st.available_replicas}"
        ok = (st.observed_generation or 0) >= d.metadata.generation and st.updated_replicas == replicas and st.replicas == replicas and st.available_replicas == replicas
        return ok, seen
    wait_for(f"deployment {name} rolled out to {replicas}", done, ROLLOUT_TIMEOUT)


@check("deployment-rollout")
def deployment_rollout(s):
    body = deployment_body("web", 2)
    body.spec.template.spec.containers[0].image = s.image
    d = s.apps.create_namespaced_deployment(s.ns, body, _request_timeout=REQUEST_TIMEOUT)
    ensure(d.spec.strategy.type == "RollingUpdate" and d.spec.revision_history_limit == 10, f"defaults: {d.spec.strategy} {d.spec.revision_history_limit}")
    wait_rolled_out(s, "web", 2)
    # The scale subresource, read and patched as an autoscaling/v1 Scale.
    sc = s.apps.read_namespaced_deployment_scale("web", s.ns, _request_timeout=REQUEST_TIMEOUT)
    ensure(sc.spec.replicas == 2 and sc.status.replicas == 2 and sc.status.selector == "app=web", f"scale: {sc}")
    s.apps.patch_namespaced_deployment_scale("web", s.ns, {"spec": {"replicas": 1}}, _request_timeout=REQUEST_TIMEOUT)
    wait_rolled_out(s, "web", 1)
    # A new template: a second ReplicaSet, revision 2, takes over.
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "main", "env": [{"name": "COLOR", "value": "blue"}]}]}}}}
    s.apps.patch_namespaced_deployment("web", s.ns, patch, _request_timeout=REQUEST_TIMEOUT)
    wait_rolled_out(s, "web", 1)
    sets = s.apps.list_namespaced_replica_set(s.ns, label_selector="app=web", _request_timeout=REQUEST_TIMEOUT).items
    revisions = sorted((rs.metadata.annotations or {}).get("deployment.kubernetes.io/revision") for rs in sets)
    ensure(revisions == ["1", "2"], f"ReplicaSet revisions {revisions}")
    new = [rs for rs in sets if rs.metadata.annotations.get("deployment.kubernetes.io/revision") == "2"][0]
    ensure(new.spec.replicas == 1 and new.metadata.owner_references[0].name == "web", f"the new ReplicaSet: {new.spec.replicas} {new.metadata.owner_references}")
    pods = s.core.list_namespaced_pod(s.ns, label_selector="app=web", _request_timeout=REQUEST_TIMEOUT).items
    live = [p for p in pods if p.metadata.deletion_timestamp is None]
    ensure(len(live) == 1 and live[0].metadata.owner_references[0].name == new.metadata.name, f"pods {[(p.metadata.name, p.metadata.owner_references) for p in live]}")
    # Deleted in the foreground: the Deployment goes after its ReplicaSets and pods.
    s.apps.delete_namespaced_deployment("web", s.ns, propagation_policy="Foreground", _request_timeout=REQUEST_TIMEOUT)
    s.wait_gone(lambda: s.apps.read_namespaced_deployment("web", s.ns, _request_timeout=REQUEST_TIMEOUT), "deployment web", ROLLOUT_TIMEOUT)
    left = s.apps.list_namespaced_replica_set(s.ns, label_selector="app=web", _request_timeout=REQUEST_TIMEOUT).items
    ensure(not left, f"ReplicaSets left after a foreground delete: {[r.metadata.name for r in left]}")


@check("job-complete")
def job_complete(s):
    container = client.V1Container(name="main", image=s.image, command=["sh", "-c", "echo done"])
    job = client.V1Job(
        metadata=client.V1ObjectMeta(name="twice"),
        spec=client.V1JobSpec(completions=2, parallelism=1, backoff_limit=2,
                              template=client.V1PodTemplateSpec(spec=client.V1PodSpec(restart_policy="Never", containers=[container]))),
    )
    j = s.batch.create_namespaced_job(s.ns, job, _request_timeout=REQUEST_TIMEOUT)
    ensure(j.spec.selector and j.spec.selector.match_labels.get("batch.kubernetes.io/controller-uid") == j.metadata.uid, f"generated selector {j.spec.selector}")

    def complete():
        st = s.batch.read_namespaced_job_status("twice", s.ns, _request_timeout=REQUEST_TIMEOUT).status
        conds = {c.type: c.status for c in (st.conditions or [])}
        return conds.get("Complete") == "True" and st.succeeded == 2, f"succeeded {st.succeeded} failed {st.failed} conditions {conds}"
    wait_for("job twice Complete with 2 succeeded", complete, ROLLOUT_TIMEOUT)
    st = s.batch.read_namespaced_job("twice", s.ns, _request_timeout=REQUEST_TIMEOUT).status
    ensure(st.completion_time and st.start_time and st.completion_time >= st.start_time, f"times {st.start_time} → {st.completion_time}")


@check("dry-run-create")
def dry_run_create(s):
    cm = s.core.create_namespaced_config_map(s.ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="dry"), data={"k": "v"}), dry_run="All",
                                             _request_timeout=REQUEST_TIMEOUT)
    ensure(cm.metadata.name == "dry" and cm.data == {"k": "v"}, f"the answer: {cm}")
    api_error(lambda: s.get_cm("dry"), 404, "NotFound")
    p = s.core.create_namespaced_pod(s.ns, s.pod_body("dry", "sleep 3600"), dry_run="All", _request_timeout=REQUEST_TIMEOUT)
    ensure(p.metadata.name == "dry", f"the answer: {p.metadata}")
    api_error(lambda: s.core.read_namespaced_pod("dry", s.ns, _request_timeout=REQUEST_TIMEOUT), 404, "NotFound")


@check("dry-run-patch")
def dry_run_patch(s):
    before = s.configmap("dry-patch", data={"k": "v"})
    cm = s.core.patch_namespaced_config_map("dry-patch", s.ns, {"data": {"k": "changed"}}, dry_run="All", _request_timeout=REQUEST_TIMEOUT)
    ensure(cm.data == {"k": "changed"}, f"the dry-run answer shows data {cm.data}, expected the patched object")
    after = s.get_cm("dry-patch")
    ensure(after.data == {"k": "v"} and after.metadata.resource_version == before.metadata.resource_version,
           f"after a dry-run patch: data {after.data} resourceVersion {after.metadata.resource_version} (was {before.metadata.resource_version})")


@check("dry-run-delete")
def dry_run_delete(s):
    # The Python client sends the delete's dryRun as a query parameter (?dryRun=All).
    before = s.configmap("dry-delete")
    s.core.delete_namespaced_config_map("dry-delete", s.ns, dry_run="All", _request_timeout=REQUEST_TIMEOUT)
    after = s.get_cm("dry-delete")
    ensure(after.metadata.resource_version == before.metadata.resource_version and after.metadata.deletion_timestamp is None,
           f"after a dry-run delete: resourceVersion {after.metadata.resource_version} (was {before.metadata.resource_version})")
    s.core.delete_namespaced_pod("created", s.ns, dry_run="All", grace_period_seconds=0, _request_timeout=REQUEST_TIMEOUT)
    p = s.core.read_namespaced_pod("created", s.ns, _request_timeout=REQUEST_TIMEOUT)
    ensure(p.metadata.deletion_timestamp is None and p.status.phase == "Running", f"pod after a dry-run delete: deletionTimestamp {p.metadata.deletion_timestamp} phase {p.status.phase}")


@check("dry-run-delete-options")
def dry_run_delete_options(s):
    # The same in a DeleteOptions body, as kubectl (client-go) sends it.
    before = s.configmap("dry-delete-body")
    s.core.delete_namespaced_config_map("dry-delete-body", s.ns, body=client.V1DeleteOptions(dry_run=["All"]), _request_timeout=REQUEST_TIMEOUT)
    after = s.get_cm("dry-delete-body")
    ensure(after.metadata.resource_version == before.metadata.resource_version and after.metadata.deletion_timestamp is None,
           f"after a dry-run delete: resourceVersion {after.metadata.resource_version} (was {before.metadata.resource_version})")


# --- storage (the PersistentVolume binder and the protection controllers) ---

# Waiting for the PersistentVolume binder (it acts on each change, and resyncs every 15 s) or a
# protection controller.
STORAGE_TIMEOUT = 30
PV_PROTECTION = "kubernetes.io/pv-protection"
PVC_PROTECTION = "kubernetes.io/pvc-protection"


@check("storage-claims")
def storage_claims(s):
    # A class and a volume of this run's own (cluster-scoped, so named after the namespace): the
    # claim can bind to nothing else, and a rerun or the other suite never meets them.
    storage = client.StorageV1Api(s.api)
    name, claim = s.ns, "data"
    labels = {"kubelab-suite": s.ns}

    def read_pv():
        return s.core.read_persistent_volume(name, _request_timeout=REQUEST_TIMEOUT)

    def read_claim():
        return s.core.read_namespaced_persistent_volume_claim(claim, s.ns, _request_timeout=REQUEST_TIMEOUT)

    def pv_phase(want):
        def probe():
            pv = read_pv()
            return pv.status.phase == want, f"phase {pv.status.phase} claimRef {pv.spec.claim_ref}"
        return probe

    try:
        sc = client.V1StorageClass(metadata=client.V1ObjectMeta(name=name), provisioner="kubernetes.io/no-provisioner",
                                   reclaim_policy="Retain", volume_binding_mode="Immediate")
        storage.create_storage_class(sc, _request_timeout=REQUEST_TIMEOUT)
        got = storage.read_storage_class(name, _request_timeout=REQUEST_TIMEOUT)
        ensure(got.kind == "StorageClass" and got.api_version == "storage.k8s.io/v1" and got.provisioner == "kubernetes.io/no-provisioner",
               f"class: kind {got.kind} apiVersion {got.api_version} provisioner {got.provisioner}")
        ensure(got.reclaim_policy == "Retain" and got.volume_binding_mode == "Immediate",
               f"class: reclaimPolicy {got.reclaim_policy} volumeBindingMode {got.volume_binding_mode}")

        # A static volume (never mounted): StorageObjectInUseProtection adds pv-protection.
        pv = s.core.create_persistent_volume(client.V1PersistentVolume(
            metadata=client.V1ObjectMeta(name=name, labels=labels),
            spec=client.V1PersistentVolumeSpec(
                storage_class_name=name, capacity={"storage": "1Gi"}, access_modes=["ReadWriteOnce"],
                host_path=client.V1HostPathVolumeSource(path="/tmp/kubelab-client-suite", type="DirectoryOrCreate"))),
            _request_timeout=REQUEST_TIMEOUT)
        ensure(pv.metadata.finalizers == [PV_PROTECTION], f"volume finalizers {pv.metadata.finalizers}")
        # A static volume's reclaim policy defaults to Retain (the class's applies to provisioned ones).
        ensure(pv.spec.persistent_volume_reclaim_policy == "Retain" and pv.spec.volume_mode == "Filesystem",
               f"volume defaults: reclaim policy {pv.spec.persistent_volume_reclaim_policy} volumeMode {pv.spec.volume_mode}")
        ensure(pv.status.phase in ("Pending", "Available"), f"a new volume's phase {pv.status.phase}")
        wait_for(f"volume {name} Available", pv_phase("Available"), STORAGE_TIMEOUT)
        listed = s.core.list_persistent_volume(label_selector=f"kubelab-suite={s.ns}", _request_timeout=REQUEST_TIMEOUT).items
        ensure(s.names(listed) == [name], f"volumes with kubelab-suite={s.ns}: {s.names(listed)}")

        # A claim of that class, half its size: the binder binds it to the volume.
        c = s.core.create_namespaced_persistent_volume_claim(s.ns, client.V1PersistentVolumeClaim(
            metadata=client.V1ObjectMeta(name=claim),
            spec=client.V1PersistentVolumeClaimSpec(storage_class_name=name, access_modes=["ReadWriteOnce"],
                                                    resources=client.V1VolumeResourceRequirements(requests={"storage": "512Mi"}))),
            _request_timeout=REQUEST_TIMEOUT)
        ensure(c.metadata.finalizers == [PVC_PROTECTION], f"claim finalizers {c.metadata.finalizers}")

        def claim_bound():
            c = read_claim()
            return c.status.phase == "Bound", f"phase {c.status.phase} volumeName {c.spec.volume_name}"
        wait_for(f"claim {claim} Bound", claim_bound, STORAGE_TIMEOUT)
        c = read_claim()
        ensure(c.spec.volume_name == name and c.status.capacity == {"storage": "1Gi"} and c.status.access_modes == ["ReadWriteOnce"],
               f"bound claim: volumeName {c.spec.volume_name} capacity {c.status.capacity} accessModes {c.status.access_modes}")
        wait_for(f"volume {name} Bound", pv_phase("Bound"), STORAGE_TIMEOUT)
        ref = read_pv().spec.claim_ref
        ensure(ref and ref.kind == "PersistentVolumeClaim" and (ref.namespace, ref.name, ref.uid) == (s.ns, claim, c.metadata.uid),
               f"the volume's claimRef {ref}, expected claim {s.ns}/{claim} uid {c.metadata.uid}")

        # A claim without a size is invalid.
        nosize = client.V1PersistentVolumeClaim(metadata=client.V1ObjectMeta(name="nosize"),
                                                spec=client.V1PersistentVolumeClaimSpec(storage_class_name=name, access_modes=["ReadWriteOnce"]))
        st = api_error(lambda: s.core.create_namespaced_persistent_volume_claim(s.ns, nosize, _request_timeout=REQUEST_TIMEOUT), 422, "Invalid")
        ensure("spec.resources[storage]: Required value" in st.get("message", ""), f"message {st.get('message')!r}")
        causes = st.get("details", {}).get("causes", [])
        ensure(any(x.get("field") == "spec.resources[storage]" and x.get("reason") == "FieldValueRequired" for x in causes), f"causes {causes}")

        # The claim deleted: pvc-protection lets it go (no pod uses it), and the volume, Retain,
        # is Released, still naming it.
        gone = s.core.delete_namespaced_persistent_volume_claim(claim, s.ns, _request_timeout=REQUEST_TIMEOUT)
        ensure(gone.kind == "PersistentVolumeClaim" and gone.metadata.deletion_timestamp is not None, f"the answer: kind {gone.kind} deletionTimestamp {gone.metadata.deletion_timestamp}")
        s.wait_gone(read_claim, f"claim {claim}", STORAGE_TIMEOUT)
        wait_for(f"volume {name} Released", pv_phase("Released"), STORAGE_TIMEOUT)
        ref = read_pv().spec.claim_ref
        ensure(ref and ref.name == claim, f"the released volume's claimRef {ref}")

        # The volume deleted: pv-protection lets it go, as it is no longer Bound.
        gone = s.core.delete_persistent_volume(name, _request_timeout=REQUEST_TIMEOUT)
        ensure(gone.kind == "PersistentVolume" and gone.metadata.deletion_timestamp is not None, f"the answer: kind {gone.kind} deletionTimestamp {gone.metadata.deletion_timestamp}")
        s.wait_gone(read_pv, f"volume {name}", STORAGE_TIMEOUT)
        gone = storage.delete_storage_class(name, _request_timeout=REQUEST_TIMEOUT)
        ensure(gone.kind == "StorageClass" and gone.metadata.name == name, f"the answer: kind {gone.kind} name {gone.metadata.name}")
        api_error(lambda: storage.read_storage_class(name, _request_timeout=REQUEST_TIMEOUT), 404, "NotFound")
    finally:
        # After a failure: whatever is left goes, without waiting (a volume may wait for pv-protection).
        for delete in (lambda: s.core.delete_namespaced_persistent_volume_claim(claim, s.ns, _request_timeout=REQUEST_TIMEOUT),
                       lambda: s.core.delete_persistent_volume(name, _request_timeout=REQUEST_TIMEOUT),
                       lambda: storage.delete_storage_class(name, _request_timeout=REQUEST_TIMEOUT)):
            try:
                delete()
            except (ApiException, ValueError):
                pass


# --- errors ---

@check("error-404")
def error_404(s):
    st = api_error(lambda: s.get_cm("no-such-configmap"), 404, "NotFound")
    ensure(st.get("message") == 'configmaps "no-such-configmap" not found', f"message {st.get('message')!r}")
    ensure(st.get("details", {}).get("name") == "no-such-configmap" and st["details"].get("kind") == "configmaps", f"details {st.get('details')}")


@check("error-409")
def error_409(s):
    s.configmap("twice")
    st = api_error(lambda: s.configmap("twice"), 409, "AlreadyExists")
    ensure(st.get("message") == 'configmaps "twice" already exists', f"message {st.get('message')!r}")


@check("error-422")
def error_422(s):
    st = api_error(lambda: s.configmap("Not_A_Name"), 422, "Invalid")
    ensure(st.get("message", "").startswith('ConfigMap "Not_A_Name" is invalid: metadata.name: Invalid value: "Not_A_Name"'), f"message {st.get('message')!r}")
    causes = st.get("details", {}).get("causes", [])
    ensure(any(c.get("field") == "metadata.name" and c.get("reason") == "FieldValueInvalid" for c in causes), f"causes {causes}")


# --- exec and logs ---

@check("exec")
def exec_(s):
    ws = stream(s.core.connect_get_namespaced_pod_exec, "created", s.ns, command=["sh", "-c", "echo out; echo err >&2; exit 3"],
                stdin=False, stdout=True, stderr=True, tty=False, _preload_content=False)
    ws.run_forever(timeout=30)
    out, err, code = ws.read_stdout(timeout=0), ws.read_stderr(timeout=0), ws.returncode
    ensure(out == "out\n" and err == "err\n" and code == 3, f"stdout {out!r} stderr {err!r} exit code {code!r}")
    # The convenience form: stdout and stderr as one string.
    got = stream(s.core.connect_get_namespaced_pod_exec, "created", s.ns, command=["echo", "a b", "c"], stdout=True, stderr=True, stdin=False, tty=False)
    ensure(got == "a b c\n", f"preloaded output {got!r}")


@check("exec-stdin")
def exec_stdin(s):
    ws = stream(s.core.connect_get_namespaced_pod_exec, "created", s.ns, command=["sh", "-c", "read line; echo got:$line"],
                stdin=True, stdout=True, stderr=True, tty=False, _preload_content=False)
    ws.write_stdin("hello\n")
    ws.run_forever(timeout=30)
    out, code = ws.read_stdout(timeout=0), ws.returncode
    ensure(out == "got:hello\n" and code == 0, f"stdout {out!r} exit code {code!r}")


LOGGER = "i=1; while true; do echo line-$i; i=$((i+1)); sleep 0.2; done"


def log_lines(text):
    return [line for line in text.split("\n") if line]


def consecutive(lines, first=None):
    nums = [int(line.removeprefix("line-")) for line in lines]
    return nums == list(range(nums[0], nums[0] + len(nums))) and (first is None or nums[0] == first)


def logger_pod(s):
    try:
        s.core.read_namespaced_pod("logger", s.ns, _request_timeout=REQUEST_TIMEOUT)
    except ApiException as e:
        if e.status != 404:
            raise
        s.pod("logger", LOGGER)
    s.wait_running("logger")

    def has_lines():
        text = s.core.read_namespaced_pod_log("logger", s.ns, _request_timeout=REQUEST_TIMEOUT)
        return len(log_lines(text)) >= 5, f"log so far {text!r}"
    wait_for("5 log lines", has_lines)


@check("logs-read")
def logs_read(s):
    logger_pod(s)
    lines = log_lines(s.core.read_namespaced_pod_log("logger", s.ns, container="main", _request_timeout=REQUEST_TIMEOUT))
    ensure(len(lines) >= 5 and consecutive(lines, first=1), f"log {lines}")


@check("logs-tail")
def logs_tail(s):
    logger_pod(s)
    lines = log_lines(s.core.read_namespaced_pod_log("logger", s.ns, tail_lines=2, _request_timeout=REQUEST_TIMEOUT))
    ensure(len(lines) == 2 and consecutive(lines) and lines[0] != "line-1", f"tailLines=2: {lines}")


@check("logs-follow")
def logs_follow(s):
    logger_pod(s)
    seen = len(log_lines(s.core.read_namespaced_pod_log("logger", s.ns, _request_timeout=REQUEST_TIMEOUT)))
    resp = s.core.read_namespaced_pod_log("logger", s.ns, follow=True, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
    lines, buf = [], b""
    try:
        # Lines written after the request started must arrive on the open stream.
        while len(lines) < seen + 5:
            chunk = resp.read1(4096) if hasattr(resp, "read1") else resp.read(64)
            ensure(chunk, f"the followed log ended after {lines}")
            buf += chunk
            *complete, buf = buf.split(b"\n")
            lines += [c.decode() for c in complete if c]
    finally:
        resp.release_conn()
    ensure(consecutive(lines, first=1), f"followed log {lines}")


# --- runner ---

def on_alarm(_sig, _frame):
    raise CheckTimeout(f"the check took longer than {CHECK_TIMEOUT}s")


def describe(e):
    if isinstance(e, ApiException):
        return f"{type(e).__name__} HTTP {e.status}: {(e.body or e.reason or '').strip()}"
    if isinstance(e, (Failed, CheckTimeout)):
        return str(e)
    frame = traceback.extract_tb(e.__traceback__)[-1]
    return f"{type(e).__name__}: {e} (at {os.path.basename(frame.filename)}:{frame.lineno})"


def main():
    if os.environ.get("KUBELAB_CLIENT_DEBUG") == "1":
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
    if not os.environ.get("KUBELAB_NODE"):
        sys.exit("KUBELAB_NODE is not set")
    if not os.environ.get("KUBECONFIG") and not os.environ.get("KUBELAB_API_URL"):
        sys.exit("neither KUBECONFIG nor KUBELAB_API_URL is set")
    names = [n for n, _ in CHECKS]
    unknown = sorted(set(KNOWN_GAPS) - set(names))
    only = [n for n in os.environ.get("KUBELAB_CHECKS", "").split(",") if n]
    unknown += sorted(set(only) - set(names))
    if unknown:
        sys.exit(f"no such checks: {unknown}")
    s = Suite()
    print(f"python client {kubernetes.__version__} against {s.url}, namespace {s.ns}", flush=True)
    signal.signal(signal.SIGALRM, on_alarm)
    counts = {"ok": 0, "FAIL": 0, "xfail": 0}
    for name, fn in CHECKS:
        if only and name not in only and name != "create-namespace":
            continue
        signal.alarm(CHECK_TIMEOUT)
        try:
            fn(s)
            why = None
        except (Exception, CheckTimeout) as e:
            why = describe(e)
        finally:
            signal.alarm(0)
        gap = KNOWN_GAPS.get(name)
        if gap and why:
            counts["xfail"] += 1
            print(f"xfail {name}: {gap} ({why})", flush=True)
        elif gap:
            counts["FAIL"] += 1
            print(f"FAIL {name}: passed, but KNOWN_GAPS lists it ({gap}): remove it from the list", flush=True)
        elif why:
            counts["FAIL"] += 1
            print(f"FAIL {name}: {why}", flush=True)
        else:
            counts["ok"] += 1
            print(f"ok {name}", flush=True)
    try:
        s.core.delete_namespace(s.ns, _request_timeout=REQUEST_TIMEOUT)
    except ApiException as e:
        print(f"(cleanup: deleting namespace {s.ns}: HTTP {e.status})", flush=True)
    print(f"python client suite: {counts['ok']} ok, {counts['FAIL']} FAIL, {counts['xfail']} xfail", flush=True)
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
