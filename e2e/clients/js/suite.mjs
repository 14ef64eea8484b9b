// kubelab's client suite for the official Kubernetes JavaScript client (@kubernetes/client-node 1.1.2).
//
// Each check is one thing a user of the client does, against the API server of $KUBECONFIG
// (loaded as a user's kubeconfig is: HTTPS, a client certificate, the cluster's CA) or else at
// $KUBELAB_API_URL (plain HTTP, no credentials), in a namespace of its own. It prints one line per check:
// `ok <name>`, `FAIL <name>: <why>`, or `xfail <name>: <gap> (<why>)` for a check listed in
// KNOWN_GAPS, and exits 1 if any check failed — including a listed check that passed, so that the
// list is emptied as the server catches up.
//
// Environment:
//   KUBECONFIG           the kubeconfig to connect with (its current context)
//   KUBELAB_API_URL      without KUBECONFIG: the API server, e.g. http://127.0.0.1:8080
//   KUBELAB_NODE         the node the pods run on (required: pods name it in spec.nodeName)
//   KUBELAB_IMAGE        the image the pods run (default docker.io/library/busybox:1.36)
//   KUBELAB_CLIENTS_DIR  where scripts/fetch-clients.sh installed the clients
//                        (default /var/cache/kubelab/clients; this suite imports
//                        <dir>/js/node_modules/@kubernetes/client-node: an ES module import does
//                        not search NODE_PATH)
//   KUBELAB_CHECKS       comma-separated check names to run (default: all)

import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough, Readable, Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';

// Checks the API server is known to fail, with why. A listed check that fails prints `xfail`; one
// that passes fails the suite, so that the entry is removed once the server is fixed.
const KNOWN_GAPS = {};

const CLIENTS_DIR = process.env.KUBELAB_CLIENTS_DIR || '/var/cache/kubelab/clients';
const CLIENT_DIR = join(CLIENTS_DIR, 'js', 'node_modules', '@kubernetes', 'client-node');
if (!existsSync(join(CLIENT_DIR, 'package.json'))) {
    console.error(`the JavaScript client is not installed in ${CLIENT_DIR}: run \`make deps\` (scripts/fetch-clients.sh)`);
    process.exit(2);
}
const k8s = await import(pathToFileURL(join(CLIENT_DIR, 'dist', 'index.js')).href);

// One check may take this long before it is abandoned (the pod checks wait for a container to start).
const CHECK_TIMEOUT = 90_000;
// Waiting for a pod to run, or for an object to go.
const WAIT_TIMEOUT = 60_000;
// Waiting for the garbage collector (kube-controller-manager's acts within a second or two).
const GC_TIMEOUT = 20_000;
const MANAGER = 'kubelab-suite';

class Failed extends Error {}

function ensure(cond, why) {
    if (!cond) {
        throw new Failed(why);
    }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const show = (v) => JSON.stringify(v);
const sameJson = (a, b) => show(a) === show(b);

const CHECKS = [];
function check(name, fn) {
    CHECKS.push([name, fn]);
}

// The body of an ApiException, parsed: the client hands it over as text or as an object.
function errorBody(e) {
    if (typeof e.body === 'string') {
        try {
            return JSON.parse(e.body);
        } catch {
            return e.body;
        }
    }
    return e.body;
}

// Runs `fn`, which must throw the client's ApiException with `code` and a Status body whose
// reason is `reason`; returns that Status.
async function apiError(fn, code, reason) {
    try {
        await fn();
    } catch (e) {
        if (!(e instanceof k8s.ApiException)) {
            throw e;
        }
        const body = errorBody(e);
        ensure(e.code === code, `expected HTTP ${code} ${reason}, got ${e.code}: ${show(body)}`);
        ensure(body && body.kind === 'Status' && body.apiVersion === 'v1', `the error body is not a v1 Status: ${show(body)}`);
        ensure(body.status === 'Failure' && body.code === code, `Status has status ${body.status} code ${body.code}`);
        ensure(body.reason === reason, `Status reason ${body.reason}, expected ${reason}: ${show(body)}`);
        return body;
    }
    throw new Failed(`expected HTTP ${code} ${reason}; the call succeeded`);
}

// Polls `probe` (returning [done, what was seen]) every 0.2 s until it is done.
async function waitFor(what, probe, timeout = WAIT_TIMEOUT) {
    const deadline = Date.now() + timeout;
    let seen = '';
    while (Date.now() < deadline) {
        let done;
        [done, seen] = await probe();
        if (done) {
            return;
        }
        await sleep(200);
    }
    throw new Failed(`timed out after ${timeout / 1000}s waiting for ${what}: ${seen}`);
}

const names = (items) => items.map((i) => i.metadata.name).sort();

class Suite {
    constructor() {
        this.node = process.env.KUBELAB_NODE;
        this.image = process.env.KUBELAB_IMAGE || 'docker.io/library/busybox:1.36';
        this.ns = 'client-js-' + randomBytes(3).toString('hex');
        this.kc = new k8s.KubeConfig();
        if (process.env.KUBECONFIG) {
            this.kc.loadFromFile(process.env.KUBECONFIG);
        } else {
            this.kc.loadFromOptions({
                // The client refuses a plain http:// server unless TLS verification is off (there
                // is no TLS to verify).
                clusters: [{ name: 'kubelab', server: process.env.KUBELAB_API_URL, skipTLSVerify: true }],
                users: [{ name: 'suite' }],
                contexts: [{ name: 'kubelab', cluster: 'kubelab', user: 'suite' }],
                currentContext: 'kubelab',
            });
        }
        this.url = this.kc.getCurrentCluster().server;
        this.core = this.kc.makeApiClient(k8s.CoreV1Api);
        this.coordination = this.kc.makeApiClient(k8s.CoordinationV1Api);
        this.apps = this.kc.makeApiClient(k8s.AppsV1Api);
        this.batch = this.kc.makeApiClient(k8s.BatchV1Api);
        this.objects = k8s.KubernetesObjectApi.makeApiClient(this.kc);
    }

    configmap(name, { data = { k: 'v' }, labels, finalizers } = {}) {
        return this.core.createNamespacedConfigMap({ namespace: this.ns, body: { metadata: { name, labels, finalizers }, data } });
    }

    getCm(name) {
        return this.core.readNamespacedConfigMap({ name, namespace: this.ns });
    }

    podBody(name, script, labels) {
        return {
            metadata: { name, labels },
            spec: {
                nodeName: this.node,
                restartPolicy: 'Never',
                terminationGracePeriodSeconds: 1,
                containers: [{ name: 'main', image: this.image, command: ['sh', '-c', script] }],
            },
        };
    }

    pod(name, script, labels) {
        return this.core.createNamespacedPod({ namespace: this.ns, body: this.podBody(name, script, labels) });
    }

    readPod(name) {
        return this.core.readNamespacedPod({ name, namespace: this.ns });
    }

    async waitRunning(name) {
        await waitFor(`pod ${name} Running`, async () => {
            const p = await this.readPod(name);
            const phase = p.status && p.status.phase;
            ensure(phase !== 'Succeeded' && phase !== 'Failed', `pod ${name} ended: ${phase}`);
            return [phase === 'Running', `phase ${phase}`];
        });
    }

    async waitGone(read, what, timeout = WAIT_TIMEOUT) {
        await waitFor(`${what} to be gone`, async () => {
            try {
                const o = await read();
                return [false, `still there: deletionTimestamp ${o.metadata.deletionTimestamp}, finalizers ${show(o.metadata.finalizers)}`];
            } catch (e) {
                if (e instanceof k8s.ApiException && e.code === 404) {
                    return [true, ''];
                }
                throw e;
            }
        }, timeout);
    }

    patchCm(name, body, strategy, extra = {}) {
        return this.core.patchNamespacedConfigMap({ name, namespace: this.ns, body, ...extra }, k8s.setHeaderOptions('Content-Type', strategy));
    }

    // Clears the finalizers a patch check left, so that the namespace can go.
    clearFinalizers(name) {
        return this.patchCm(name, { metadata: { finalizers: null } }, k8s.PatchStrategy.MergePatch);
    }
}

// --- create and get ---

check('create-namespace', async (s) => {
    const ns = await s.core.createNamespace({ body: { metadata: { name: s.ns, labels: { suite: 'js' } } } });
    ensure(ns.metadata.name === s.ns && ns.metadata.uid, `created namespace: ${show(ns.metadata)}`);
    ensure(ns.status && ns.status.phase === 'Active', `namespace phase ${ns.status && ns.status.phase}`);
    // kube-apiserver labels every namespace with its name (the NamespaceDefaultLabelName feature).
    ensure(sameJson(ns.metadata.labels, { 'kubernetes.io/metadata.name': s.ns, suite: 'js' }), `namespace labels ${show(ns.metadata.labels)}`);
});

check('create-configmap', async (s) => {
    const info = await s.core.createNamespacedConfigMapWithHttpInfo({
        namespace: s.ns,
        body: { metadata: { name: 'created', labels: { app: 'created' } }, data: { greeting: 'hello' } },
    });
    ensure(info.httpStatusCode === 201, `HTTP ${info.httpStatusCode}, expected 201 Created`);
    const cm = await s.getCm('created');
    ensure(sameJson(cm.data, { greeting: 'hello' }) && sameJson(cm.metadata.labels, { app: 'created' }), `read back: data ${show(cm.data)} labels ${show(cm.metadata.labels)}`);
    ensure(cm.metadata.uid && cm.metadata.resourceVersion && cm.metadata.creationTimestamp instanceof Date, `metadata not filled in: ${show(cm.metadata)}`);
});

check('create-pod', async (s) => {
    const info = await s.core.createNamespacedPodWithHttpInfo({ namespace: s.ns, body: s.podBody('created', 'sleep 3600') });
    ensure(info.httpStatusCode === 201, `HTTP ${info.httpStatusCode}, expected 201 Created`);
    const p = info.data;
    ensure(p.metadata.uid && p.spec.nodeName === s.node, `created pod: uid ${p.metadata.uid} node ${p.spec.nodeName}`);
    await s.waitRunning('created');
});

check('create-lease', async (s) => {
    const body = {
        metadata: { name: 'leader' },
        spec: { holderIdentity: 'suite-a', leaseDurationSeconds: 15, acquireTime: '2026-01-02T03:04:05.123456Z', leaseTransitions: 0 },
    };
    const l = await s.coordination.createNamespacedLease({ namespace: s.ns, body });
    ensure(l.spec.holderIdentity === 'suite-a' && l.spec.leaseDurationSeconds === 15, `created lease spec ${show(l.spec)}`);
    const got = await s.coordination.readNamespacedLease({ name: 'leader', namespace: s.ns });
    ensure(got.kind === 'Lease' && got.apiVersion === 'coordination.k8s.io/v1', `kind ${got.kind} apiVersion ${got.apiVersion}`);
    // MicroTime keeps its microseconds.
    ensure(new Date(got.spec.acquireTime).toISOString() === '2026-01-02T03:04:05.123Z' && String(got.spec.acquireTime).includes('05.123456'),
        `acquireTime ${show(got.spec.acquireTime)}`);
});

check('get', async (s) => {
    const ns = await s.core.readNamespace({ name: s.ns });
    ensure(ns.kind === 'Namespace' && ns.apiVersion === 'v1', `namespace kind ${ns.kind} apiVersion ${ns.apiVersion}`);
    const cm = await s.getCm('created');
    ensure(cm.kind === 'ConfigMap' && cm.metadata.namespace === s.ns && sameJson(cm.data, { greeting: 'hello' }), `configmap: ${show(cm)}`);
    const p = await s.readPod('created');
    ensure(p.kind === 'Pod' && p.status.phase === 'Running' && p.status.podIP, `pod: kind ${p.kind} phase ${p.status.phase} ip ${p.status.podIP}`);
});

// --- namespaces and leases ---

check('namespace-list-and-delete', async (s) => {
    const other = s.ns + '-x';
    await s.core.createNamespace({ body: { metadata: { name: other } } });
    const listed = await s.core.listNamespace({ labelSelector: `kubernetes.io/metadata.name in (${s.ns},${other})` });
    ensure(sameJson(names(listed.items), [s.ns, other].sort()), `namespaces by kubernetes.io/metadata.name: ${show(names(listed.items))}`);
    // A finalizer on a configmap inside holds the namespace in Terminating until it is taken off.
    await s.core.createNamespacedConfigMap({ namespace: other, body: { metadata: { name: 'inside', finalizers: ['example.com/hold'] } } });
    await s.core.deleteNamespace({ name: other });
    const ns = await s.core.readNamespace({ name: other });
    ensure(ns.metadata.deletionTimestamp instanceof Date && ns.status.phase === 'Terminating',
        `after the delete: deletionTimestamp ${ns.metadata.deletionTimestamp} phase ${ns.status && ns.status.phase}`);
    await apiError(() => s.core.createNamespacedConfigMap({ namespace: other, body: { metadata: { name: 'late' } } }), 403, 'Forbidden');
    await waitFor('the namespace controller to delete the configmap inside', async () => {
        const cm = await s.core.readNamespacedConfigMap({ name: 'inside', namespace: other });
        return [Boolean(cm.metadata.deletionTimestamp), 'no deletionTimestamp yet'];
    });
    await s.core.patchNamespacedConfigMap({ name: 'inside', namespace: other, body: { metadata: { finalizers: null } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
    await s.waitGone(() => s.core.readNamespace({ name: other }), `namespace ${other}`);
});

check('lease-update', async (s) => {
    const l = await s.coordination.readNamespacedLease({ name: 'leader', namespace: s.ns });
    l.spec.holderIdentity = 'suite-b';
    l.spec.renewTime = '2026-01-02T03:04:20.000001Z';
    l.spec.leaseTransitions = 1;
    const updated = await s.coordination.replaceNamespacedLease({ name: 'leader', namespace: s.ns, body: l });
    ensure(updated.spec.holderIdentity === 'suite-b' && updated.spec.leaseTransitions === 1, `after the update: ${show(updated.spec)}`);
    ensure(Number(updated.metadata.resourceVersion) > Number(l.metadata.resourceVersion), `resourceVersion ${updated.metadata.resourceVersion} after ${l.metadata.resourceVersion}`);
    // The stale copy loses, as a second candidate's would.
    l.spec.holderIdentity = 'suite-c';
    await apiError(() => s.coordination.replaceNamespacedLease({ name: 'leader', namespace: s.ns, body: l }), 409, 'Conflict');
    const leases = await s.coordination.listNamespacedLease({ namespace: s.ns });
    ensure(sameJson(names(leases.items), ['leader']) && leases.items[0].spec.holderIdentity === 'suite-b', `leases: ${show(leases.items.map((i) => i.spec))}`);
});

// --- lists ---

check('list-label-selector', async (s) => {
    for (const [name, labels] of [['sel-a', { app: 'a', tier: 'web' }], ['sel-b', { app: 'b', tier: 'db' }], ['sel-c', { app: 'c' }]]) {
        await s.configmap(name, { labels: { sel: 'yes', ...labels } });
    }
    const cases = [
        ['sel=yes,app=a', ['sel-a']],
        ['sel=yes,app in (a,b)', ['sel-a', 'sel-b']],
        ['sel=yes,app notin (a)', ['sel-b', 'sel-c']],
        ['sel=yes,tier', ['sel-a', 'sel-b']],
        ['sel=yes,!tier', ['sel-c']],
        ['sel=yes,app!=a,tier', ['sel-b']],
    ];
    for (const [labelSelector, want] of cases) {
        const got = names((await s.core.listNamespacedConfigMap({ namespace: s.ns, labelSelector })).items);
        ensure(sameJson(got, want), `labelSelector ${show(labelSelector)}: ${show(got)}, expected ${show(want)}`);
    }
});

check('list-field-selector', async (s) => {
    await s.configmap('field-a', { labels: { field: 'yes' } });
    await s.configmap('field-b', { labels: { field: 'yes' } });
    let got = names((await s.core.listNamespacedConfigMap({ namespace: s.ns, fieldSelector: 'metadata.name=field-a' })).items);
    ensure(sameJson(got, ['field-a']), `fieldSelector metadata.name=field-a: ${show(got)}`);
    got = names((await s.core.listNamespacedConfigMap({ namespace: s.ns, labelSelector: 'field=yes', fieldSelector: 'metadata.name!=field-a' })).items);
    ensure(sameJson(got, ['field-b']), `fieldSelector metadata.name!=field-a with labelSelector field=yes: ${show(got)}`);
    const all = await s.core.listConfigMapForAllNamespaces({ fieldSelector: `metadata.namespace=${s.ns},metadata.name=field-b` });
    got = all.items.map((i) => [i.metadata.namespace, i.metadata.name]);
    ensure(sameJson(got, [[s.ns, 'field-b']]), `all namespaces, fieldSelector metadata.namespace=${s.ns},metadata.name=field-b: ${show(got)}`);
    const pods = await s.core.listNamespacedPod({ namespace: s.ns, fieldSelector: `spec.nodeName=${s.node},status.phase=Running` });
    ensure(names(pods.items).includes('created'), `pods with spec.nodeName=${s.node},status.phase=Running: ${show(names(pods.items))}`);
    await apiError(() => s.core.listNamespacedConfigMap({ namespace: s.ns, fieldSelector: 'data.k=v' }), 400, 'BadRequest');
});

// Lists configmaps `limit` at a time, following `continue`; returns the pages' names.
async function paged(s, limit, labelSelector, betweenPages) {
    const pages = [];
    let token;
    for (;;) {
        const page = await s.core.listNamespacedConfigMap({ namespace: s.ns, limit, _continue: token, labelSelector });
        pages.push(page.items.map((i) => i.metadata.name));
        ensure(page.items.length <= limit, `page ${pages.length} has ${page.items.length} items, over limit=${limit}`);
        token = page.metadata._continue;
        if (!token) {
            return pages;
        }
        ensure(pages.length < 20, `more than 20 pages of ${limit}: ${show(pages)}`);
        if (betweenPages) {
            await betweenPages(pages.length);
        }
    }
}

check('list-paging', async (s) => {
    const want = Array.from({ length: 12 }, (_, i) => `page-${String(i).padStart(2, '0')}`);
    for (const name of want) {
        await s.configmap(name, { labels: { paging: 'yes' } });
    }
    const pages = await paged(s, 5, 'paging=yes');
    ensure(sameJson(pages.flat().sort(), want), `limit=5 pages ${show(pages)}: every object exactly once expected`);
    ensure(sameJson(pages.map((p) => p.length), [5, 5, 2]), `page sizes ${show(pages.map((p) => p.length))}, expected [5,5,2]`);
});

check('list-paging-consistent', async (s) => {
    // Pages after the first come from the first page's resourceVersion: an object created
    // between pages is not in them.
    const want = Array.from({ length: 6 }, (_, i) => `snap-${String(i).padStart(2, '0')}`);
    for (const name of want) {
        await s.configmap(name, { labels: { snap: 'yes' } });
    }
    const pages = await paged(s, 2, 'snap=yes', (n) => s.configmap(`snap-late-${n}`, { labels: { snap: 'yes' } }));
    ensure(sameJson(pages.flat().sort(), want), `objects created between pages showed up, or objects went missing: ${show(pages)}`);
});

// --- watch ---

// A configmap watch in the suite's namespace with `query`; resolves with its events
// ({type, name, object}) once `stopAfter(events)` holds or the server ends the watch.
function watchEvents(s, query, stopAfter, timeout = 30_000) {
    return new Promise((resolve, reject) => {
        const events = [];
        let controller;
        let finished = false;
        const finish = (err) => {
            if (finished) {
                return;
            }
            finished = true;
            clearTimeout(timer);
            if (controller) {
                controller.abort();
            }
            if (err) {
                reject(err);
            } else {
                resolve(events);
            }
        };
        const timer = setTimeout(() => finish(new Failed(`the watch did not end in ${timeout / 1000}s: events ${show(events.map((e) => e.type))}`)), timeout);
        new k8s.Watch(s.kc)
            .watch(`/api/v1/namespaces/${s.ns}/configmaps`, query, (type, object) => {
                events.push({ type, name: object && object.metadata && object.metadata.name, object });
                if (stopAfter(events)) {
                    finish();
                }
            }, (err) => finish(err && err.name !== 'AbortError' ? err : undefined))
            .then((c) => {
                controller = c;
                if (finished) {
                    c.abort();
                }
            }, finish);
    });
}

check('watch-from-resource-version', async (s) => {
    await s.configmap('watch-1', { labels: { watch: 'yes' } });
    const rv = (await s.core.listNamespacedConfigMap({ namespace: s.ns, labelSelector: 'watch=yes' })).metadata.resourceVersion;
    ensure(rv, 'the list has no resourceVersion');
    // The changes happen before the watch starts: it must replay them from the list's version.
    await s.configmap('watch-2', { labels: { watch: 'yes' } });
    await s.patchCm('watch-1', { data: { k: 'patched' } }, k8s.PatchStrategy.MergePatch);
    await s.core.deleteNamespacedConfigMap({ name: 'watch-2', namespace: s.ns });
    await s.core.deleteNamespacedConfigMap({ name: 'watch-1', namespace: s.ns });
    const want = [['ADDED', 'watch-2'], ['MODIFIED', 'watch-1'], ['DELETED', 'watch-2'], ['DELETED', 'watch-1']];
    const events = await watchEvents(s, { resourceVersion: rv, labelSelector: 'watch=yes', timeoutSeconds: 10 }, (ev) => ev.length >= want.length);
    const got = events.map((e) => [e.type, e.name]);
    ensure(sameJson(got, want), `events from resourceVersion ${rv}: ${show(got)}, expected ${show(want)}`);
    ensure(sameJson(events[1].object.data, { k: 'patched' }), `MODIFIED carries ${show(events[1].object.data)}`);
    ensure(sameJson(events[3].object.data, { k: 'patched' }), `DELETED carries ${show(events[3].object.data)}, expected the last state`);
    const rvs = events.map((e) => Number(e.object.metadata.resourceVersion));
    ensure(rvs.every((v, i) => i === 0 || v > rvs[i - 1]), `event resourceVersions not increasing: ${show(rvs)}`);
});

check('watch-bookmarks', async (s) => {
    // allowWatchBookmarks: the stream still carries the changes, and a BOOKMARK (kind and
    // resourceVersion only) arrives before it ends, at a version that covers what changed since
    // outside the watch's selector (kube-apiserver: 2 s before the deadline and every minute;
    // kubelab: every 10 s).
    const rv = (await s.core.listNamespacedConfigMap({ namespace: s.ns })).metadata.resourceVersion;
    await s.configmap('bookmark-1', { labels: { bookmark: 'yes' } });
    let other;
    const start = Date.now();
    const events = await watchEvents(s, { resourceVersion: rv, allowWatchBookmarks: true, labelSelector: 'bookmark=yes', timeoutSeconds: 15 }, (ev) => {
        if (ev[ev.length - 1].name === 'bookmark-1' && !other) {
            other = s.configmap('bookmark-other');
        }
        return ev[ev.length - 1].type === 'BOOKMARK';
    });
    const took = (Date.now() - start) / 1000;
    const types = events.map((e) => e.type);
    ensure(!types.includes('ERROR'), `an ERROR event: ${show(events.filter((e) => e.type === 'ERROR'))}`);
    ensure(events.some((e) => e.type === 'ADDED' && e.name === 'bookmark-1'), `the change did not arrive: ${show(types)}`);
    ensure(types[types.length - 1] === 'BOOKMARK', `no BOOKMARK in ${took}s of a 15 s watch: events ${show(types)}`);
    const b = events[events.length - 1].object;
    ensure(b.kind === 'ConfigMap' && b.apiVersion === 'v1', `bookmark object kind/apiVersion: ${show(b)}`);
    const otherRv = Number((await other).metadata.resourceVersion);
    ensure(Number(b.metadata.resourceVersion) >= otherRv, `bookmark resourceVersion ${b.metadata.resourceVersion} behind bookmark-other's ${otherRv}`);
});

check('watch-bookmark-before-timeout', async (s) => {
    const rv = (await s.core.listNamespacedConfigMap({ namespace: s.ns })).metadata.resourceVersion;
    const start = Date.now();
    const events = await watchEvents(s, { resourceVersion: rv, allowWatchBookmarks: true, labelSelector: 'nothing=matches', timeoutSeconds: 4 },
        (ev) => ev[ev.length - 1].type === 'BOOKMARK');
    const types = events.map((e) => e.type);
    ensure(sameJson(types, ['BOOKMARK']), `events ${show(types)} in ${(Date.now() - start) / 1000}s of a watch with timeoutSeconds=4; expected one BOOKMARK before it ended`);
});

check('informer', async (s) => {
    // The client's informer: list, then watch from the list's version, into a local cache.
    const path = `/api/v1/namespaces/${s.ns}/configmaps`;
    const informer = k8s.makeInformer(s.kc, path, () => s.core.listNamespacedConfigMap({ namespace: s.ns, labelSelector: 'informer=yes' }), 'informer=yes');
    const seen = [];
    informer.on(k8s.ADD, (o) => seen.push(['ADD', o.metadata.name]));
    informer.on(k8s.UPDATE, (o) => seen.push(['UPDATE', o.metadata.name]));
    informer.on(k8s.DELETE, (o) => seen.push(['DELETE', o.metadata.name]));
    let informerError;
    informer.on(k8s.ERROR, (e) => {
        informerError = e;
    });
    await s.configmap('inf-1', { labels: { informer: 'yes' } });
    await informer.start();
    try {
        await s.configmap('inf-2', { labels: { informer: 'yes' } });
        await s.patchCm('inf-1', { data: { k: 'changed' } }, k8s.PatchStrategy.MergePatch);
        await s.core.deleteNamespacedConfigMap({ name: 'inf-2', namespace: s.ns });
        const want = [['ADD', 'inf-1'], ['ADD', 'inf-2'], ['UPDATE', 'inf-1'], ['DELETE', 'inf-2']];
        await waitFor('the informer to see every change', async () => {
            ensure(!informerError, `informer error: ${informerError}`);
            return [sameJson(seen, want), show(seen)];
        }, 20_000);
        const cached = informer.list(s.ns).map((o) => [o.metadata.name, o.data]);
        ensure(sameJson(cached, [['inf-1', { k: 'changed' }]]), `the informer's cache: ${show(cached)}`);
    } finally {
        await informer.stop();
    }
});

// --- patch ---

check('patch-strategic-merge', async (s) => {
    // finalizers merge as a set (patchStrategy "merge" on ObjectMeta.finalizers); a JSON merge
    // patch would replace them.
    await s.configmap('smp', { data: { a: '1', b: '2' }, finalizers: ['example.com/one'] });
    try {
        const cm = await s.patchCm('smp', { metadata: { finalizers: ['example.com/two'] }, data: { a: null, c: '3' } }, k8s.PatchStrategy.StrategicMergePatch);
        ensure(sameJson(cm.metadata.finalizers, ['example.com/one', 'example.com/two']), `finalizers after the patch: ${show(cm.metadata.finalizers)}, expected both`);
        ensure(sameJson(cm.data, { b: '2', c: '3' }), `data after the patch: ${show(cm.data)}`);
    } finally {
        await s.clearFinalizers('smp');
    }
});

check('patch-json-merge', async (s) => {
    await s.configmap('merge', { data: { a: '1', b: '2' }, finalizers: ['example.com/one'] });
    try {
        const cm = await s.patchCm('merge', { metadata: { finalizers: ['example.com/two'], labels: { patched: 'merge' } }, data: { a: null, c: '3' } },
            k8s.PatchStrategy.MergePatch);
        ensure(sameJson(cm.metadata.finalizers, ['example.com/two']), `finalizers after a merge patch: ${show(cm.metadata.finalizers)}, expected the list replaced`);
        ensure(sameJson(cm.data, { b: '2', c: '3' }), `data after the patch: ${show(cm.data)}`);
        ensure(sameJson(cm.metadata.labels, { patched: 'merge' }), `labels after the patch: ${show(cm.metadata.labels)}`);
    } finally {
        await s.clearFinalizers('merge');
    }
});

check('patch-json-patch', async (s) => {
    // The generated API's default content type for a patch is application/json-patch+json.
    await s.configmap('jsonpatch', { data: { a: '1', b: '2' } });
    const ops = [
        { op: 'test', path: '/data/a', value: '1' },
        { op: 'replace', path: '/data/a', value: 'one' },
        { op: 'remove', path: '/data/b' },
        { op: 'add', path: '/metadata/labels', value: { patched: 'json' } },
    ];
    const cm = await s.core.patchNamespacedConfigMap({ name: 'jsonpatch', namespace: s.ns, body: ops });
    ensure(sameJson(cm.data, { a: 'one' }) && sameJson(cm.metadata.labels, { patched: 'json' }), `after the patch: data ${show(cm.data)} labels ${show(cm.metadata.labels)}`);
    await apiError(() => s.patchCm('jsonpatch', [{ op: 'test', path: '/data/a', value: '1' }], k8s.PatchStrategy.JsonPatch), 422, 'Invalid');
    ensure(sameJson((await s.getCm('jsonpatch')).data, { a: 'one' }), 'a failed JSON patch changed the object');
});

check('patch-server-side-apply', async (s) => {
    // KubernetesObjectApi.patch with PatchStrategy.ServerSideApply: apply-patch+yaml with a
    // fieldManager; it creates the object when missing and records the manager in managedFields.
    const spec = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'applied', namespace: s.ns, labels: { owner: 'suite' } }, data: { a: '1' } };
    let cm = await s.objects.patch(spec, undefined, undefined, MANAGER, undefined, k8s.PatchStrategy.ServerSideApply);
    ensure(sameJson(cm.data, { a: '1' }), `created by apply: data ${show(cm.data)}`);
    spec.data = { a: '2', b: '3' };
    cm = await s.objects.patch(spec, undefined, undefined, MANAGER, undefined, k8s.PatchStrategy.ServerSideApply);
    ensure(sameJson(cm.data, { a: '2', b: '3' }), `after the second apply: data ${show(cm.data)}`);
    const managers = (cm.metadata.managedFields || []).map((m) => [m.manager, m.operation]);
    ensure(managers.some(([m, op]) => m === MANAGER && op === 'Apply'), `managedFields ${show(managers)}, expected [${MANAGER}, Apply]`);
    // Another manager taking a field it does not own is a conflict, unless it forces.
    const other = { ...spec, data: { a: 'other' } };
    const st = await apiError(() => s.objects.patch(other, undefined, undefined, 'other-manager', undefined, k8s.PatchStrategy.ServerSideApply), 409, 'Conflict');
    ensure(/conflict/i.test(st.message || ''), `Status message ${show(st.message)}`);
    cm = await s.objects.patch(other, undefined, undefined, 'other-manager', true, k8s.PatchStrategy.ServerSideApply);
    ensure(cm.data.a === 'other', `after a forced apply: data ${show(cm.data)}`);
});

check('patch-lease', async (s) => {
    const l = await s.coordination.patchNamespacedLease({ name: 'leader', namespace: s.ns, body: { spec: { holderIdentity: 'suite-d' } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch));
    ensure(l.spec.holderIdentity === 'suite-d' && l.spec.leaseDurationSeconds === 15, `lease after a strategic merge patch: ${show(l.spec)}`);
});

// --- update, delete ---

check('update-stale-resource-version', async (s) => {
    await s.configmap('stale');
    const old = await s.getCm('stale');
    const fresh = await s.getCm('stale');
    fresh.data = { k: 'first' };
    await s.core.replaceNamespacedConfigMap({ name: 'stale', namespace: s.ns, body: fresh });
    old.data = { k: 'second' };
    const st = await apiError(() => s.core.replaceNamespacedConfigMap({ name: 'stale', namespace: s.ns, body: old }), 409, 'Conflict');
    ensure((st.message || '').includes('the object has been modified'), `Status message ${show(st.message)}`);
    ensure(sameJson((await s.getCm('stale')).data, { k: 'first' }), 'the stale update was written');
});

check('delete-background', async (s) => {
    await s.configmap('del-bg');
    const st = await s.core.deleteNamespacedConfigMap({ name: 'del-bg', namespace: s.ns, propagationPolicy: 'Background' });
    // kube-apiserver answers a configmap delete with a Status.
    ensure(st.kind === 'Status' && st.status === 'Success', `the answer: kind ${st.kind} status ${st.status}`);
    await s.waitGone(() => s.getCm('del-bg'), 'configmap del-bg');
});

check('delete-foreground', async (s) => {
    // Foreground: the owner stays, with the foregroundDeletion finalizer, until the garbage
    // collector has deleted its blocking dependents. The client's return type for a delete is
    // V1Status (whose metadata has no finalizers), so the owner is read back instead; the
    // dependent holds a finalizer of its own, so that the owner is still there to be read.
    const owner = await s.configmap('owner-fg');
    const ref = { apiVersion: 'v1', kind: 'ConfigMap', name: 'owner-fg', uid: owner.metadata.uid, blockOwnerDeletion: true };
    await s.core.createNamespacedConfigMap({ namespace: s.ns, body: { metadata: { name: 'dependent-fg', ownerReferences: [ref], finalizers: ['kubelab.test/hold'] } } });
    await s.core.deleteNamespacedConfigMap({ name: 'owner-fg', namespace: s.ns, propagationPolicy: 'Foreground' });
    const marked = await s.getCm('owner-fg');
    ensure((marked.metadata.finalizers || []).includes('foregroundDeletion') && marked.metadata.deletionTimestamp,
        `the owner: finalizers ${show(marked.metadata.finalizers)} deletionTimestamp ${show(marked.metadata.deletionTimestamp)}`);
    await waitFor('the dependent to be deleted by the collector', async () => {
        const d = await s.getCm('dependent-fg');
        return [Boolean(d.metadata.deletionTimestamp), `deletionTimestamp ${show(d.metadata.deletionTimestamp)}`];
    }, GC_TIMEOUT);
    const held = await s.getCm('dependent-fg');
    held.metadata.finalizers = [];
    await s.core.replaceNamespacedConfigMap({ name: 'dependent-fg', namespace: s.ns, body: held });
    await s.waitGone(() => s.getCm('dependent-fg'), 'the dependent configmap', GC_TIMEOUT);
    await s.waitGone(() => s.getCm('owner-fg'), 'the owner configmap');
});

check('delete-foreground-pod', async (s) => {
    // A running pod without dependents: graceful deletion first, then it goes.
    await s.pod('del-fg', 'sleep 3600');
    await s.waitRunning('del-fg');
    await s.core.deleteNamespacedPod({ name: 'del-fg', namespace: s.ns, propagationPolicy: 'Foreground' });
    await s.waitGone(() => s.readPod('del-fg'), 'pod del-fg');
});

check('delete-orphan', async (s) => {
    // Orphan: the owner goes at once, and the garbage collector removes the owner reference
    // from the dependent instead of deleting it.
    const owner = await s.configmap('owner-orphan');
    const ref = { apiVersion: 'v1', kind: 'ConfigMap', name: 'owner-orphan', uid: owner.metadata.uid };
    await s.core.createNamespacedConfigMap({ namespace: s.ns, body: { metadata: { name: 'dependent-orphan', ownerReferences: [ref] } } });
    await s.core.deleteNamespacedConfigMap({ name: 'owner-orphan', namespace: s.ns, propagationPolicy: 'Orphan' });
    await s.waitGone(() => s.getCm('owner-orphan'), 'the owner configmap');
    await waitFor('the dependent to lose its owner reference', async () => {
        const d = await s.getCm('dependent-orphan');
        return [!(d.metadata.ownerReferences || []).length, `ownerReferences ${show(d.metadata.ownerReferences)}`];
    }, GC_TIMEOUT);
});

check('delete-background-dependents', async (s) => {
    // Background: the owner goes at once, the garbage collector deletes the dependent after it.
    const owner = await s.configmap('owner-bg');
    const ref = { apiVersion: 'v1', kind: 'ConfigMap', name: 'owner-bg', uid: owner.metadata.uid };
    await s.core.createNamespacedConfigMap({ namespace: s.ns, body: { metadata: { name: 'dependent-bg', ownerReferences: [ref] } } });
    await s.core.deleteNamespacedConfigMap({ name: 'owner-bg', namespace: s.ns, propagationPolicy: 'Background' });
    await apiError(() => s.getCm('owner-bg'), 404, 'NotFound');
    await s.waitGone(() => s.getCm('dependent-bg'), 'the dependent configmap', GC_TIMEOUT);
});

check('delete-grace-period', async (s) => {
    await s.pod('del-grace', "trap 'exit 0' TERM; sleep 3600 & wait");
    await s.waitRunning('del-grace');
    const p = await s.core.deleteNamespacedPod({ name: 'del-grace', namespace: s.ns, gracePeriodSeconds: 5 });
    // A running pod is deleted gracefully: the answer is the pod, marked for deletion.
    ensure(p.kind === 'Pod' && p.metadata.deletionTimestamp, `the answer: kind ${p.kind} deletionTimestamp ${p.metadata && p.metadata.deletionTimestamp}`);
    ensure(p.metadata.deletionGracePeriodSeconds === 5, `deletionGracePeriodSeconds ${p.metadata.deletionGracePeriodSeconds}, expected 5`);
    await s.waitGone(() => s.readPod('del-grace'), 'pod del-grace');
    await s.configmap('del-now');
    await s.core.deleteNamespacedConfigMap({ name: 'del-now', namespace: s.ns, gracePeriodSeconds: 0 });
    await apiError(() => s.getCm('del-now'), 404, 'NotFound');
});

// --- workloads (the controller manager, the scheduler and the node agent at work) ---

// A rollout or a Job on real containers (pods created, scheduled, started, reported).
const ROLLOUT_TIMEOUT = 60_000;

// As `kubectl rollout status` judges it: the controller saw the latest spec, and every replica
// is updated and available, with no old ones left.
async function waitRolledOut(s, name, replicas) {
    await waitFor(`deployment ${name} rolled out to ${replicas}`, async () => {
        const d = await s.apps.readNamespacedDeployment({ name, namespace: s.ns });
        const st = d.status || {};
        const ok = (st.observedGeneration || 0) >= d.metadata.generation && st.updatedReplicas === replicas && st.replicas === replicas && st.availableReplicas === replicas;
        return [ok, `generation ${d.metadata.generation} observed ${st.observedGeneration} replicas ${st.replicas} updated ${st.updatedReplicas} available ${st.availableReplicas}`];
    }, ROLLOUT_TIMEOUT);
}

check('deployment-rollout', async (s) => {
    const labels = { app: 'web' };
    const body = {
        metadata: { name: 'web' },
        spec: {
            replicas: 2,
            selector: { matchLabels: labels },
            template: { metadata: { labels }, spec: { terminationGracePeriodSeconds: 1, containers: [{ name: 'main', image: s.image, command: ['sleep', '3600'] }] } },
        },
    };
    const d = await s.apps.createNamespacedDeployment({ namespace: s.ns, body });
    ensure(d.spec.strategy.type === 'RollingUpdate' && d.spec.revisionHistoryLimit === 10, `defaults: ${show(d.spec.strategy)} ${d.spec.revisionHistoryLimit}`);
    await waitRolledOut(s, 'web', 2);
    // The scale subresource, read and patched as an autoscaling/v1 Scale.
    const sc = await s.apps.readNamespacedDeploymentScale({ name: 'web', namespace: s.ns });
    ensure(sc.spec.replicas === 2 && sc.status.replicas === 2 && sc.status.selector === 'app=web', `scale: ${show(sc)}`);
    await s.apps.patchNamespacedDeploymentScale({ name: 'web', namespace: s.ns, body: { spec: { replicas: 1 } } }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
    await waitRolledOut(s, 'web', 1);
    // A new template: a second ReplicaSet, revision 2, takes over.
    const patch = { spec: { template: { spec: { containers: [{ name: 'main', env: [{ name: 'COLOR', value: 'blue' }] }] } } } };
    await s.apps.patchNamespacedDeployment({ name: 'web', namespace: s.ns, body: patch }, k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch));
    await waitRolledOut(s, 'web', 1);
    const sets = (await s.apps.listNamespacedReplicaSet({ namespace: s.ns, labelSelector: 'app=web' })).items;
    const revisions = sets.map((rs) => (rs.metadata.annotations || {})['deployment.kubernetes.io/revision']).sort();
    ensure(sameJson(revisions, ['1', '2']), `ReplicaSet revisions ${show(revisions)}`);
    const next = sets.find((rs) => rs.metadata.annotations['deployment.kubernetes.io/revision'] === '2');
    ensure(next.spec.replicas === 1 && next.metadata.ownerReferences[0].name === 'web', `the new ReplicaSet: ${next.spec.replicas} ${show(next.metadata.ownerReferences)}`);
    // Deleted in the foreground: the Deployment goes after its ReplicaSets and pods.
    await s.apps.deleteNamespacedDeployment({ name: 'web', namespace: s.ns, propagationPolicy: 'Foreground' });
    await s.waitGone(() => s.apps.readNamespacedDeployment({ name: 'web', namespace: s.ns }), 'deployment web', ROLLOUT_TIMEOUT);
    const left = (await s.apps.listNamespacedReplicaSet({ namespace: s.ns, labelSelector: 'app=web' })).items;
    ensure(left.length === 0, `ReplicaSets left after a foreground delete: ${show(names(left))}`);
});

check('job-complete', async (s) => {
    const body = {
        metadata: { name: 'twice' },
        spec: { completions: 2, parallelism: 1, backoffLimit: 2, template: { spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: s.image, command: ['sh', '-c', 'echo done'] }] } } },
    };
    const j = await s.batch.createNamespacedJob({ namespace: s.ns, body });
    ensure(j.spec.selector && j.spec.selector.matchLabels['batch.kubernetes.io/controller-uid'] === j.metadata.uid, `generated selector ${show(j.spec.selector)}`);
    await waitFor('job twice Complete with 2 succeeded', async () => {
        const st = (await s.batch.readNamespacedJobStatus({ name: 'twice', namespace: s.ns })).status || {};
        const complete = (st.conditions || []).some((c) => c.type === 'Complete' && c.status === 'True');
        return [complete && st.succeeded === 2, `succeeded ${st.succeeded} failed ${st.failed} conditions ${show(st.conditions)}`];
    }, ROLLOUT_TIMEOUT);
    const st = (await s.batch.readNamespacedJob({ name: 'twice', namespace: s.ns })).status;
    ensure(st.startTime && st.completionTime && st.completionTime >= st.startTime, `times ${st.startTime} → ${st.completionTime}`);
});

// --- server-side dry run ---

check('dry-run', async (s) => {
    const cm = await s.core.createNamespacedConfigMap({ namespace: s.ns, body: { metadata: { name: 'dry' }, data: { k: 'v' } }, dryRun: 'All' });
    ensure(cm.metadata.name === 'dry' && sameJson(cm.data, { k: 'v' }), `the answer: ${show(cm)}`);
    await apiError(() => s.getCm('dry'), 404, 'NotFound');
    const before = await s.configmap('dry-patch');
    const patched = await s.patchCm('dry-patch', { data: { k: 'changed' } }, k8s.PatchStrategy.MergePatch, { dryRun: 'All' });
    ensure(sameJson(patched.data, { k: 'changed' }), `the dry-run answer shows data ${show(patched.data)}`);
    await s.core.deleteNamespacedConfigMap({ name: 'dry-patch', namespace: s.ns, dryRun: 'All' });
    const after = await s.getCm('dry-patch');
    ensure(sameJson(after.data, { k: 'v' }) && after.metadata.resourceVersion === before.metadata.resourceVersion && !after.metadata.deletionTimestamp,
        `after a dry-run patch and delete: data ${show(after.data)} resourceVersion ${after.metadata.resourceVersion} (was ${before.metadata.resourceVersion})`);
});

// --- storage (the PersistentVolume binder and the protection controllers) ---

// Waiting for the PersistentVolume binder (it acts on each change, and resyncs every 15 s) or a
// protection controller.
const STORAGE_TIMEOUT = 30_000;
const PV_PROTECTION = 'kubernetes.io/pv-protection';
const PVC_PROTECTION = 'kubernetes.io/pvc-protection';

check('storage-claims', async (s) => {
    // A class and a volume of this run's own (cluster-scoped, so named after the namespace): the
    // claim can bind to nothing else, and a rerun or the other suite never meets them.
    const storage = s.kc.makeApiClient(k8s.StorageV1Api);
    const name = s.ns;
    const claim = 'data';
    const labels = { 'kubelab-suite': s.ns };
    const readPv = () => s.core.readPersistentVolume({ name });
    const readClaim = () => s.core.readNamespacedPersistentVolumeClaim({ name: claim, namespace: s.ns });
    const pvPhase = (want) => async () => {
        const pv = await readPv();
        return [pv.status.phase === want, `phase ${pv.status.phase} claimRef ${show(pv.spec.claimRef)}`];
    };
    try {
        await storage.createStorageClass({
            body: { metadata: { name }, provisioner: 'kubernetes.io/no-provisioner', reclaimPolicy: 'Retain', volumeBindingMode: 'Immediate' },
        });
        const got = await storage.readStorageClass({ name });
        ensure(got.kind === 'StorageClass' && got.apiVersion === 'storage.k8s.io/v1' && got.provisioner === 'kubernetes.io/no-provisioner',
            `class: kind ${got.kind} apiVersion ${got.apiVersion} provisioner ${got.provisioner}`);
        ensure(got.reclaimPolicy === 'Retain' && got.volumeBindingMode === 'Immediate', `class: reclaimPolicy ${got.reclaimPolicy} volumeBindingMode ${got.volumeBindingMode}`);

        // A static volume (never mounted): StorageObjectInUseProtection adds pv-protection.
        const pv = await s.core.createPersistentVolume({
            body: {
                metadata: { name, labels },
                spec: {
                    storageClassName: name,
                    capacity: { storage: '1Gi' },
                    accessModes: ['ReadWriteOnce'],
                    hostPath: { path: '/tmp/kubelab-client-suite', type: 'DirectoryOrCreate' },
                },
            },
        });
        ensure(sameJson(pv.metadata.finalizers, [PV_PROTECTION]), `volume finalizers ${show(pv.metadata.finalizers)}`);
        // A static volume's reclaim policy defaults to Retain (the class's applies to provisioned ones).
        ensure(pv.spec.persistentVolumeReclaimPolicy === 'Retain' && pv.spec.volumeMode === 'Filesystem',
            `volume defaults: reclaim policy ${pv.spec.persistentVolumeReclaimPolicy} volumeMode ${pv.spec.volumeMode}`);
        ensure(['Pending', 'Available'].includes(pv.status.phase), `a new volume's phase ${pv.status.phase}`);
        await waitFor(`volume ${name} Available`, pvPhase('Available'), STORAGE_TIMEOUT);
        const listed = await s.core.listPersistentVolume({ labelSelector: `kubelab-suite=${s.ns}` });
        ensure(sameJson(names(listed.items), [name]), `volumes with kubelab-suite=${s.ns}: ${show(names(listed.items))}`);

        // A claim of that class, half its size: the binder binds it to the volume.
        let c = await s.core.createNamespacedPersistentVolumeClaim({
            namespace: s.ns,
            body: { metadata: { name: claim }, spec: { storageClassName: name, accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '512Mi' } } } },
        });
        ensure(sameJson(c.metadata.finalizers, [PVC_PROTECTION]), `claim finalizers ${show(c.metadata.finalizers)}`);
        await waitFor(`claim ${claim} Bound`, async () => {
            const got = await readClaim();
            return [got.status.phase === 'Bound', `phase ${got.status.phase} volumeName ${got.spec.volumeName}`];
        }, STORAGE_TIMEOUT);
        c = await readClaim();
        ensure(c.spec.volumeName === name && sameJson(c.status.capacity, { storage: '1Gi' }) && sameJson(c.status.accessModes, ['ReadWriteOnce']),
            `bound claim: volumeName ${c.spec.volumeName} capacity ${show(c.status.capacity)} accessModes ${show(c.status.accessModes)}`);
        await waitFor(`volume ${name} Bound`, pvPhase('Bound'), STORAGE_TIMEOUT);
        let ref = (await readPv()).spec.claimRef;
        ensure(ref && ref.kind === 'PersistentVolumeClaim' && ref.namespace === s.ns && ref.name === claim && ref.uid === c.metadata.uid,
            `the volume's claimRef ${show(ref)}, expected claim ${s.ns}/${claim} uid ${c.metadata.uid}`);

        // A claim without a size is invalid.
        const st = await apiError(() => s.core.createNamespacedPersistentVolumeClaim({
            namespace: s.ns,
            body: { metadata: { name: 'nosize' }, spec: { storageClassName: name, accessModes: ['ReadWriteOnce'] } },
        }), 422, 'Invalid');
        ensure((st.message || '').includes('spec.resources[storage]: Required value'), `message ${show(st.message)}`);
        const causes = (st.details && st.details.causes) || [];
        ensure(causes.some((x) => x.field === 'spec.resources[storage]' && x.reason === 'FieldValueRequired'), `causes ${show(causes)}`);

        // The claim deleted: pvc-protection lets it go (no pod uses it), and the volume, Retain,
        // is Released, still naming it.
        let gone = await s.core.deleteNamespacedPersistentVolumeClaim({ name: claim, namespace: s.ns });
        ensure(gone.kind === 'PersistentVolumeClaim' && gone.metadata.deletionTimestamp, `the answer: kind ${gone.kind} deletionTimestamp ${gone.metadata && gone.metadata.deletionTimestamp}`);
        await s.waitGone(readClaim, `claim ${claim}`, STORAGE_TIMEOUT);
        await waitFor(`volume ${name} Released`, pvPhase('Released'), STORAGE_TIMEOUT);
        ref = (await readPv()).spec.claimRef;
        ensure(ref && ref.name === claim, `the released volume's claimRef ${show(ref)}`);

        // The volume deleted: pv-protection lets it go, as it is no longer Bound.
        gone = await s.core.deletePersistentVolume({ name });
        ensure(gone.kind === 'PersistentVolume' && gone.metadata.deletionTimestamp, `the answer: kind ${gone.kind} deletionTimestamp ${gone.metadata && gone.metadata.deletionTimestamp}`);
        await s.waitGone(readPv, `volume ${name}`, STORAGE_TIMEOUT);
        gone = await storage.deleteStorageClass({ name });
        ensure(gone.kind === 'StorageClass' && gone.metadata && gone.metadata.name === name, `the answer: ${show(gone)}`);
        await apiError(() => storage.readStorageClass({ name }), 404, 'NotFound');
    } finally {
        // After a failure: whatever is left goes, without waiting (a volume may wait for pv-protection).
        for (const del of [
            () => s.core.deleteNamespacedPersistentVolumeClaim({ name: claim, namespace: s.ns }),
            () => s.core.deletePersistentVolume({ name }),
            () => storage.deleteStorageClass({ name }),
        ]) {
            await del().catch(() => {});
        }
    }
});

// --- errors ---

check('error-404', async (s) => {
    const st = await apiError(() => s.getCm('no-such-configmap'), 404, 'NotFound');
    ensure(st.message === 'configmaps "no-such-configmap" not found', `message ${show(st.message)}`);
    ensure(st.details && st.details.name === 'no-such-configmap' && st.details.kind === 'configmaps', `details ${show(st.details)}`);
});

check('error-409', async (s) => {
    await s.configmap('twice');
    const st = await apiError(() => s.configmap('twice'), 409, 'AlreadyExists');
    ensure(st.message === 'configmaps "twice" already exists', `message ${show(st.message)}`);
});

check('error-422', async (s) => {
    const st = await apiError(() => s.configmap('Not_A_Name'), 422, 'Invalid');
    ensure((st.message || '').startsWith('ConfigMap "Not_A_Name" is invalid: metadata.name: Invalid value: "Not_A_Name"'), `message ${show(st.message)}`);
    const causes = (st.details && st.details.causes) || [];
    ensure(causes.some((c) => c.field === 'metadata.name' && c.reason === 'FieldValueInvalid'), `causes ${show(causes)}`);
});

// --- exec and logs ---

// A writable that keeps what is written to it.
function collector() {
    const chunks = [];
    const w = new Writable({
        write(chunk, _enc, cb) {
            chunks.push(Buffer.from(chunk));
            cb();
        },
    });
    w.text = () => Buffer.concat(chunks).toString();
    return w;
}

// Runs `command` in pod `created`'s container; resolves with stdout, stderr and the final Status
// once the server has sent that Status and closed the stream.
function execIn(s, command, stdin) {
    return new Promise((resolve, reject) => {
        const out = collector();
        const err = collector();
        let status;
        new k8s.Exec(s.kc)
            .exec(s.ns, 'created', 'main', command, out, err, stdin || null, false, (st) => {
                status = st;
            })
            .then((ws) => {
                ws.on('close', () => resolve({ out: out.text(), err: err.text(), status }));
                ws.on('error', reject);
            }, reject);
    });
}

// The exit code a Status from exec carries: 0 for Success, else its ExitCode cause.
function exitCode(st) {
    if (!st) {
        return undefined;
    }
    if (st.status === 'Success') {
        return 0;
    }
    const cause = ((st.details && st.details.causes) || []).find((c) => c.reason === 'ExitCode');
    return cause ? Number(cause.message) : `no ExitCode cause in ${show(st)}`;
}

check('exec', async (s) => {
    let r = await execIn(s, ['sh', '-c', 'echo out; echo err >&2; exit 3']);
    ensure(r.out === 'out\n' && r.err === 'err\n' && exitCode(r.status) === 3, `stdout ${show(r.out)} stderr ${show(r.err)} status ${show(r.status)}`);
    ensure(r.status.reason === 'NonZeroExitCode', `Status reason ${r.status.reason}`);
    r = await execIn(s, ['echo', 'a b', 'c']);
    ensure(r.out === 'a b c\n' && exitCode(r.status) === 0, `stdout ${show(r.out)} status ${show(r.status)}`);
});

check('exec-stdin', async (s) => {
    const input = new PassThrough();
    const running = execIn(s, ['sh', '-c', 'read line; echo got:$line'], input);
    input.end('hello\n');
    const r = await running;
    ensure(r.out === 'got:hello\n' && exitCode(r.status) === 0, `stdout ${show(r.out)} status ${show(r.status)}`);
    // Until EOF: `cat` ends when stdin does.
    const r2 = await execIn(s, ['cat'], Readable.from(['one\n', 'two\n']));
    ensure(r2.out === 'one\ntwo\n' && exitCode(r2.status) === 0, `cat: stdout ${show(r2.out)} status ${show(r2.status)}`);
});

const LOGGER = 'i=1; while true; do echo line-$i; i=$((i+1)); sleep 0.2; done';

const logLines = (text) => text.split('\n').filter((l) => l);

function consecutive(lines, first) {
    const nums = lines.map((l) => Number(l.replace(/^line-/, '')));
    return nums.length > 0 && nums.every((n, i) => n === nums[0] + i) && (first === undefined || nums[0] === first);
}

// Reads the log of pod `logger` with `options` through the client's Log class, until the server
// ends it or, with `until`, until `until(text)` holds.
function readLog(s, options, until) {
    return new Promise((resolve, reject) => {
        const out = collector();
        let controller;
        let done = false;
        const finish = (err) => {
            if (done) {
                return;
            }
            done = true;
            clearTimeout(timer);
            if (controller) {
                controller.abort();
            }
            if (err) {
                reject(err);
            } else {
                resolve(out.text());
            }
        };
        const timer = setTimeout(() => finish(new Failed(`the log did not end in 20s: ${show(out.text())}`)), 20_000);
        if (until) {
            const original = out._write.bind(out);
            out._write = (chunk, enc, cb) => original(chunk, enc, () => {
                cb();
                if (until(out.text())) {
                    finish();
                }
            });
        }
        // The response body is piped into `out`, which finishes when the server ends the log (the
        // client never calls a `done` callback, so none is given).
        out.on('finish', () => finish());
        new k8s.Log(s.kc)
            .log(s.ns, 'logger', 'main', out, options)
            .then((c) => {
                controller = c;
                if (done) {
                    c.abort();
                }
            }, finish);
    });
}

async function loggerPod(s) {
    try {
        await s.readPod('logger');
    } catch (e) {
        if (!(e instanceof k8s.ApiException && e.code === 404)) {
            throw e;
        }
        await s.pod('logger', LOGGER);
    }
    await s.waitRunning('logger');
    await waitFor('5 log lines', async () => {
        const text = await s.core.readNamespacedPodLog({ name: 'logger', namespace: s.ns });
        return [logLines(text).length >= 5, `log so far ${show(text)}`];
    });
}

check('logs-read', async (s) => {
    await loggerPod(s);
    const lines = logLines(await s.core.readNamespacedPodLog({ name: 'logger', namespace: s.ns, container: 'main' }));
    ensure(lines.length >= 5 && consecutive(lines, 1), `log ${show(lines)}`);
    const viaLog = logLines(await readLog(s, {}));
    ensure(viaLog.length >= 5 && consecutive(viaLog, 1), `log through the Log class: ${show(viaLog)}`);
});

check('logs-tail', async (s) => {
    await loggerPod(s);
    const lines = logLines(await s.core.readNamespacedPodLog({ name: 'logger', namespace: s.ns, tailLines: 2 }));
    ensure(lines.length === 2 && consecutive(lines) && lines[0] !== 'line-1', `tailLines=2: ${show(lines)}`);
});

check('logs-follow', async (s) => {
    await loggerPod(s);
    const seen = logLines(await s.core.readNamespacedPodLog({ name: 'logger', namespace: s.ns })).length;
    // Lines written after the request started must arrive on the open stream.
    const text = await readLog(s, { follow: true }, (t) => logLines(t).length >= seen + 5);
    const lines = logLines(text);
    ensure(lines.length >= seen + 5 && consecutive(lines, 1), `followed log ${show(lines)}`);
});

// --- runner ---

function describe(e) {
    if (e instanceof k8s.ApiException) {
        return `ApiException HTTP ${e.code}: ${show(errorBody(e))}`;
    }
    if (e instanceof Failed) {
        return e.message;
    }
    const where = ((e && e.stack) || '').split('\n').find((l) => l.includes('suite.mjs')) || '';
    return `${(e && e.name) || 'Error'}: ${e && e.message ? e.message : e} ${where.trim()}`;
}

async function main() {
    if (!process.env.KUBELAB_NODE) {
        console.error('KUBELAB_NODE is not set');
        return 2;
    }
    if (!process.env.KUBECONFIG && !process.env.KUBELAB_API_URL) {
        console.error('neither KUBECONFIG nor KUBELAB_API_URL is set');
        return 2;
    }
    const all = CHECKS.map(([n]) => n);
    const only = (process.env.KUBELAB_CHECKS || '').split(',').filter((n) => n);
    const unknown = [...Object.keys(KNOWN_GAPS), ...only].filter((n) => !all.includes(n));
    if (unknown.length) {
        console.error(`no such checks: ${show(unknown)}`);
        return 2;
    }
    const s = new Suite();
    const version = JSON.parse(readFileSync(join(CLIENT_DIR, 'package.json'), 'utf8')).version;
    console.log(`javascript client ${version} against ${s.url}, namespace ${s.ns}`);
    const counts = { ok: 0, FAIL: 0, xfail: 0 };
    for (const [name, fn] of CHECKS) {
        if (only.length && !only.includes(name) && name !== 'create-namespace') {
            continue;
        }
        let why;
        let timer;
        try {
            await Promise.race([
                fn(s),
                new Promise((_, reject) => {
                    timer = setTimeout(() => reject(new Failed(`the check took longer than ${CHECK_TIMEOUT / 1000}s`)), CHECK_TIMEOUT);
                }),
            ]);
        } catch (e) {
            why = describe(e);
        } finally {
            clearTimeout(timer);
        }
        const gap = KNOWN_GAPS[name];
        if (gap && why) {
            counts.xfail++;
            console.log(`xfail ${name}: ${gap} (${why})`);
        } else if (gap) {
            counts.FAIL++;
            console.log(`FAIL ${name}: passed, but KNOWN_GAPS lists it (${gap}): remove it from the list`);
        } else if (why) {
            counts.FAIL++;
            console.log(`FAIL ${name}: ${why}`);
        } else {
            counts.ok++;
            console.log(`ok ${name}`);
        }
    }
    try {
        await s.core.deleteNamespace({ name: s.ns });
    } catch (e) {
        console.log(`(cleanup: deleting namespace ${s.ns}: ${describe(e)})`);
    }
    console.log(`javascript client suite: ${counts.ok} ok, ${counts.FAIL} FAIL, ${counts.xfail} xfail`);
    return counts.FAIL ? 1 : 0;
}

// Exit explicitly: an abandoned check may leave a socket open.
main().then((code) => process.exit(code), (e) => {
    console.error(e);
    process.exit(2);
});
