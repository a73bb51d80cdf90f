# Two commands matter on a fresh machine: `make run` and `make test`.
# Everything else here is a step of those two.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# Binaries built from Go modules are cached here, keyed by version.
export CAPTF_CACHE_DIR ?= $(HOME)/.cache/captf

.PHONY: all venv test unit lint typecheck lint-imports check kube tofu helm capi registry promtool aws chart release apiserver run decide-examples bench bench-watch bench-capi bench-fleet chaos test-aws clean

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,dev]'
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

lint-imports: $(STAMP)
	$(BIN)/lint-imports

check: lint typecheck lint-imports

# Builds kube-apiserver, kube-controller-manager and etcd from their Go modules (cached; warm calls return at once).
kube:
	hack/kube/build.sh

# OpenTofu and the local provider, built from Go modules into a filesystem mirror (cached).
tofu:
	hack/tofu/build.sh

# helm, built from its Go module (cached), lints and renders charts/captf in the tests.
helm:
	hack/helm/build.sh

# promtool, built from Prometheus's Go module (cached), checks and tests the alerts and
# the dashboard's queries in manifests/monitoring/.
promtool:
	hack/promtool/build.sh

# Cluster API's core manager, kubeadm bootstrap manager and clusterctl from their Go module, with
# the CRDs and webhook manifests the manager needs beside them (cached).
capi:
	hack/capi/build.sh

# The OCI registry (distribution) the local cluster runs on loopback, and crane to push to
# it, built from their Go modules (cached).
registry:
	hack/registry/build.sh

# hashicorp/aws, built from its Go module into a filesystem mirror beside the `local`
# provider's (cached). Opt in, never a step of `make test`: the first build costs about
# 2,500 CPU seconds and 9 GB of memory (README, "Measured here").
aws:
	hack/aws/build.sh

# The AWS reference modules (modules/aws) end to end against moto, under Cluster API's
# controllers: builds the provider first. The tests are marked `aws`; `make test` skips them.
test-aws: check kube tofu capi registry aws
	$(BIN)/pytest -m aws

# Each CRD's v1beta1 (from its v1alpha1 and controller/core/conversion/changes.py), then
# charts/captf and the clusterctl repository of this release
# (clusterctl/infrastructure-terraform/<version>/) are generated from manifests/; run after
# changing a manifest.
chart: $(STAMP)
	$(BIN)/captf dev crds
	$(BIN)/captf dev chart
	$(BIN)/captf dev clusterctl

# A clusterctl release of this checkout: clusterctl/infrastructure-terraform/$(VERSION)/
# (components with the image $(IMAGE):$(VERSION), metadata, templates, the image recipe,
# checksums), the same bytes every time (docs/upgrading.md, "Releases").
IMAGE ?= ghcr.io/captf-io/captf
release: $(STAMP)
	@[[ "$(VERSION)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$$ ]] || { echo "make release VERSION=vX.Y.Z" >&2; exit 2; }
	$(BIN)/captf dev release --version $(VERSION) --image $(IMAGE)

# The suite mostly waits (on controllers at a time scale, on Jobs, on API servers), so two
# workers, each with its own API servers, take 0.53 of one's wall time on two cores (902 s
# against 1,715 s); a file's tests stay in one worker, with its module fixtures.
# The default stays one process (TEST_WORKERS=0) for now: the last two two-worker runs each
# failed a different e2e test that passes alone; TEST_WORKERS=2 for the faster run.
TEST_WORKERS ?= 0
test: check kube tofu helm capi registry promtool
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --durations=40

# Fast loop while editing: only the tests that need no API server.
unit: $(STAMP)
	$(BIN)/pytest -m 'not kube and not e2e'

apiserver: $(STAMP) kube
	$(BIN)/captf dev apiserver --kubeconfig .local/kubeconfig

decide-examples: $(STAMP)
	@for f in examples/snapshots/*.yaml; do printf '%-50s ' "$$f"; $(BIN)/captf decide -f "$$f"; done

# The main job: control plane, Cluster API, process node, controller, a Cluster API cluster
# provisioned by the example modules (or MODULES=DIR's), a live timeline.
# TIME_SCALE=K makes one minute last 60/K seconds. MODULES=DIR runs the role modules of
# DIR/cluster, DIR/machine and DIR/machinepool instead of examples/modules.
TIME_SCALE ?= 30
run: $(STAMP) kube tofu capi registry
	$(BIN)/captf dev run --time-scale $(TIME_SCALE)$(if $(MODULES), --modules $(MODULES))

# The scale benchmark on its own API server (one JSON line last); OBJECTS=N to change N.
bench: $(STAMP) kube
	$(BIN)/captf bench scale --objects $${OBJECTS:-10000}

# Cluster API scale on `make run`'s cluster: a MachineDeployment to MACHINES and back, our
# controller's CPU against Cluster API's manager and kube-apiserver, the runner's against
# bare OpenTofu (one JSON line last; docs/performance.md).
MACHINES ?= 100
BENCH_TIME_SCALE ?= 1
bench-capi: $(STAMP) kube tofu capi registry
	$(BIN)/captf bench capi --machines $(MACHINES) --time-scale $(BENCH_TIME_SCALE)

# A fleet held for HOURS of controller time at FLEET_TIME_SCALE: background Jobs against
# a scale-up's changes, with the schedules off and on (one JSON line last;
# docs/performance.md). FLEET_ARGS passes more flags (--help lists them).
FLEET_MACHINES ?= 30
FLEET_CLUSTERS ?= 3
FLEET_HOURS ?= 1
FLEET_TIME_SCALE ?= 30
bench-fleet: $(STAMP) kube tofu capi registry
	$(BIN)/captf bench fleet --machines $(FLEET_MACHINES) --clusters $(FLEET_CLUSTERS) --hours $(FLEET_HOURS) --time-scale $(FLEET_TIME_SCALE) $(FLEET_ARGS)

# Our watch cache against kubernetes_asyncio's; needs `make apiserver` running.
bench-watch: $(STAMP) kube
	$(BIN)/captf bench watch --objects $${OBJECTS:-10000}

# Fault injection on the whole system (not part of `make test`; docs/chaos.md).
# The report is the last line on stdout; CHAOS_ARGS passes more flags (--help lists them).
FAULTS ?= 1000
chaos: $(STAMP) kube tofu capi
	$(BIN)/python -m tests.chaos --faults $(FAULTS) $(CHAOS_ARGS)

clean:
	rm -rf $(VENV) .local .mypy_cache .pytest_cache .ruff_cache
