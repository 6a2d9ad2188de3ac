# dralab: the two things a newcomer runs are `make lab` (the main job) and `make test` (the tests).
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: lab lab-node lab-node-chart test bench-quick env vcore binaries binaries-local binaries-matrix tools chart-tools \
	chart-images lint unit clean-cluster system-local system-node system-chart system-test

## env: a virtual environment with both distributions installed editable: the product (dralab, .) and
## the lab kit (dralab-kit, kit/) with its test tools (the kit's test extra brings its provision, bench
## and lab extras along: the tests exercise them all)
EXTRAS ?= test
env: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml kit/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e . -e './kit[$(EXTRAS)]'
	touch $@

## system-PROFILE: the Debian packages a profile needs, from the one list kit/dralab_kit/cluster/debian-packages.txt:
## installed when make runs as root on Debian/Ubuntu, else named with the apt-get line (and make stops)
## before any build. `local` is what `make lab` needs; `make test` also needs `node` and `test`.
system-local:
	scripts/system-packages local
system-node:
	scripts/system-packages local node
system-chart:
	scripts/system-packages local node chart
system-test:
	scripts/system-packages local node chart test

## vcore: the in-container enforcement library, its fake runtimes and probe
vcore: system-local
	$(MAKE) -s -C vcore

## binaries-local: what the local profile runs (Kubernetes v1.35 control plane, etcd, kwok), built from Go modules into the cache (once per machine)
binaries-local: env system-local
	$(BIN)/dralab cluster build

## binaries: binaries-local and the real node (kubelet, containerd, runc, CNI), for the node profiles and `make test`
binaries: env system-node
	$(BIN)/dralab cluster build --real-node

## binaries-matrix: the control planes of the other Kubernetes versions `make test` replays Lab 20 on
K8S_MATRIX ?= v1.37.2
binaries-matrix: env system-local
	set -e; for v in $(K8S_MATRIX); do $(BIN)/dralab cluster build --kubernetes $$v; done

## chart-tools: helm and actionlint from their Go modules (the chart and workflow checks use them)
chart-tools: env
	$(BIN)/python -c "from dralab_kit.provision.tools import ensure_tool; ensure_tool('helm', True); ensure_tool('actionlint', True)"

## chart-images: what the node-chart profile installs: dralab's image, built from the Dockerfile without a Docker
## daemon on a base made from Debian packages, and cert-manager (binaries from its Go module, images, chart), into the cache
chart-images: env vcore system-chart
	$(BIN)/dralab image build
	$(BIN)/python -m dralab_kit.cluster.certmanager build

## tools: chart-tools, and the Pulumi CLI and kubernetes provider (for `dralab infra`), from Go modules
tools: chart-tools
	$(BIN)/dralab infra build

## lab: bring up the local cluster and replay Lab 20 as assertions; prints the report path. The cluster
## stays up for `dralab` commands by hand; `make clean-cluster` (or `dralab cluster down`) stops it.
lab: system-local env vcore binaries-local
	@$(BIN)/dralab lab run lab20-ascend-hami-dra; rc=$$?; \
	echo "the local cluster 'dralab' is still running: 'make clean-cluster' (or '$(BIN)/dralab cluster down') stops it"; \
	exit $$rc

## lint: ruff over the whole tree, mypy (strict, [tool.mypy] in pyproject.toml) over the product, the whole kit
## (dralab_kit with bench/, harness/, labs/) and infra/
lint: env
	$(BIN)/ruff check .
	$(BIN)/mypy

## unit: the fast tier only (no cluster)
unit: env vcore
	$(BIN)/pytest -n 2 tests/unit tests/security -m "not integration"

## test: lint, then every test (unit, integration and the lab replays on the local profile), then Lab 20 on the real
## node (profile node), and Lab 20 and the device-health lab (taints: on by default from 1.36) on the local profile of
## each other Kubernetes version of K8S_MATRIX
test: system-test env vcore binaries binaries-matrix tools chart-images lint
	$(BIN)/pytest -n 2 --dist loadgroup
	$(BIN)/pytest -n 0 --dralab-profile node kit/labs/lab20-ascend-hami-dra/lab.yaml
	$(BIN)/pytest -n 0 --dralab-profile node-chart kit/labs/lab20-ascend-hami-dra/lab.yaml
	set -e; for v in $(K8S_MATRIX); do \
	  $(BIN)/pytest -n 0 --dralab-kubernetes $$v kit/labs/lab20-ascend-hami-dra/lab.yaml kit/labs/device-health-taints/lab.yaml; done

## bench-quick: the CI-sized benchmarks (--quick) into $(BENCH_QUICK_OUT) with their rendered report;
## the figures are recorded, never a pass/fail (a shared CI machine is too noisy): only a benchmark
## that cannot run fails the target. Full runs go into bench/results (see README, Tests and benchmarks).
BENCH_QUICK_OUT ?= reports/bench-quick
BENCH_QUICK ?= admission driver concurrency prefer vcore fleet fleet-quiet caches
bench-quick: env vcore binaries
	$(BIN)/dralab cluster up
	set -e; for b in $(BENCH_QUICK); do $(BIN)/dralab bench $$b --quick --out $(BENCH_QUICK_OUT); done
	$(BIN)/dralab bench report --results $(BENCH_QUICK_OUT) --out $(BENCH_QUICK_OUT)/REPORT.md
	sed -n '/^## Verdicts/,/^## Where/p' $(BENCH_QUICK_OUT)/REPORT.md | sed '$$d'

## lab-node: Lab 20 on the real kubelet + containerd node (profile node)
lab-node: system-node env vcore binaries
	$(BIN)/dralab lab run lab20-ascend-hami-dra --profile node

## lab-node-chart: Lab 20 on the real node with dralab installed from its image and chart, and cert-manager (profile node-chart)
lab-node-chart: system-chart env vcore binaries chart-tools chart-images
	$(BIN)/dralab lab run lab20-ascend-hami-dra --profile node-chart

clean-cluster: env
	-$(BIN)/dralab cluster down
