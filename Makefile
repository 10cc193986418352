# Two commands on a fresh machine:  make demo  and  make test
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python

.PHONY: demo test check test-e2e lint venv tools scanners scan postgres node-packages cluster-up cluster-stop cluster-down chart-crd clean bench bench-real-node bench-failover bench-archive bench-upgrade bench-autogrow

demo: venv node-packages ## start the local control plane and the operator, apply the seed CR, show it Ready
	bash hack/demo.sh

TEST_WORKERS ?= 4
QUICK_LOG := .cluster/make-check.log
FIRST_LOG := .cluster/make-check-first.log
IDLE_LOG  := .cluster/make-check-idle.log
UP_LOG    := .cluster/bringup.log
# make check's tests in make test: the units first (beside the cluster's start); the ones that only compute
# (renders, scanners, pure functions) beside the e2e pass, on the CPU it leaves (hack/background.py); the
# rest beside the serial pass (the hack/ scripts' and PostgreSQL's, which wait on timers, and the probe's).
# Together they are make check's.
QUICK_FIRST := tests/unit
QUICK_IDLE  := tests/chart bench --ignore=tests/chart/test_probe_script.py
QUICK_REST  := tests/hack tests/postgres tests/chart/test_probe_script.py

test: tools node-packages ## every check and test: make lint and the unit tests while the cluster starts, the e2e tests across TEST_WORKERS pytest-xdist workers sharing the local cluster (the chart and scanner tests beside them on the CPU they leave), then the serial ones (the cluster alone, little CPU) with the rest of make check beside them (hack/ and PostgreSQL scripts: no cluster needed)
	@# The test cluster starts (the system's Python: hack/ and bringup.py need no venv) while pip installs the
	@# venv on one core; then make lint and the unit tests take the core the start leaves idle, going on
	@# into the e2e pass's first seconds rather than holding it back, and the e2e workers start and collect
	@# (their cluster fixture waits on the cluster lock the start holds; its log is printed as it ends).
	@# Should the start fail, the tests' cluster fixture tries again and says why.
	mkdir -p $(dir $(QUICK_LOG)); \
	  { PYTHONPATH=tests $(PYTHON) -m e2e.bringup > $(UP_LOG) 2>&1; cat $(UP_LOG); } & up_pid=$$!; \
	  $(MAKE) --no-print-directory venv scanners postgres; made=$$?; \
	  [ $$made -eq 0 ] || { wait $$up_pid; PYTHONPATH=tests $(PYTHON) -m e2e.bringup down; exit $$made; }; \
	  { $(MAKE) --no-print-directory lint && MYDB_KEEP_CLUSTER=1 $(PY) -m pytest $(QUICK_FIRST); } > $(FIRST_LOG) 2>&1 & \
	  first_pid=$$!; \
	  MYDB_KEEP_CLUSTER=1 $(PYTHON) hack/background.py run -- $(PY) -m pytest -n 2 $(QUICK_IDLE) > $(IDLE_LOG) 2>&1 & \
	  idle_pid=$$!; \
	  MYDB_KEEP_CLUSTER=1 $(PY) -m pytest -n $(TEST_WORKERS) -m "not serial" tests/e2e; parallel=$$?; \
	  $(PYTHON) hack/background.py foreground $$idle_pid; \
	  MYDB_KEEP_CLUSTER=1 $(PY) -m pytest -n 3 $(QUICK_REST) > $(QUICK_LOG) 2>&1 & quick_pid=$$!; \
	  $(PY) -m pytest -m serial tests/e2e; serial=$$?; \
	  wait $$up_pid; wait $$first_pid; first=$$?; wait $$idle_pid; idle=$$?; wait $$quick_pid; quick=$$?; \
	  $(PYTHON) hack/background.py remove; \
	  echo "===== make check, part 1: make lint and the unit tests, run from the cluster's start ($(FIRST_LOG)) ====="; \
	  cat $(FIRST_LOG); \
	  echo "===== make check, part 2: the chart and scanner tests, run beside the e2e pass on the CPU it left ($(IDLE_LOG)) ====="; \
	  cat $(IDLE_LOG); \
	  echo "===== make check, part 3: the other tests, run beside the serial pass ($(QUICK_LOG)) ====="; \
	  cat $(QUICK_LOG); \
	  echo "make test: make lint and unit tests exit $$first, e2e parallel pass exit $$parallel, serial pass exit $$serial, make check's chart tests exit $$idle, its other tests exit $$quick"; \
	  [ $$first -eq 0 ] && [ $$parallel -eq 0 ] && [ $$serial -eq 0 ] && [ $$idle -eq 0 ] && [ $$quick -eq 0 ]

lint: venv ## ruff (lint, format) and mypy --strict on operator/, bench/ and hack/, the import-linter layers on operator/ (pyproject.toml configures each), shellcheck on every shell script of the chart and hack/
	$(VENV)/bin/ruff check operator bench hack
	$(VENV)/bin/ruff format --check operator bench hack
	@# mypy's cache outside the clone, beside the tools' builds: a fresh clone checks in 1 s instead of 10.
	MYPY_CACHE_DIR=$${MYDB_CACHE:-$$HOME/.cache/mydb-operator}/mypy $(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	@command -v shellcheck >/dev/null || { echo "make lint: no shellcheck (make node-packages installs it)" >&2; exit 1; }
	shellcheck -x -P SCRIPTDIR charts/mydatabase/scripts/*.sh hack/*.sh

check: venv lint scanners postgres ## the quick tier (under 2 minutes): static checks, then every test that needs no cluster (units, charts, hack/ scripts, PostgreSQL scripts)
	$(PY) -m pytest -n $(TEST_WORKERS) $(QUICK_FIRST) tests/chart tests/hack tests/postgres bench

test-e2e: venv tools node-packages ## the tests on the local cluster only, parallel then serial as in make test
	MYDB_KEEP_CLUSTER=1 $(PY) -m pytest -n $(TEST_WORKERS) -m "not serial" tests/e2e; \
	  parallel=$$?; $(PY) -m pytest -m serial tests/e2e; serial=$$?; [ $$parallel -eq 0 ] && [ $$serial -eq 0 ]

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

tools: ## build (or reuse) etcd, kube-*, kubectl, kubelet, kube-proxy, kwok, helm, CoreDNS, the registry and kube-router
	@# Side by side: on a cold cache kube-router's module downloads overlap the other tools' compiling.
	bash hack/build-kube-router.sh >/dev/null & router=$$!; bash hack/build-tools.sh >/dev/null && wait $$router

scanners: ## install (or reuse) checkov in a venv of its own and kube-score, pinned in hack/versions.env, for tests/chart/test_scanners.py
	bash hack/build-scanners.sh >/dev/null

scan: venv tools scanners ## checkov and kube-score on the seed render and the operator chart: counts and every finding, as rows for docs/security-review.md
	$(PY) hack/scan.py

node-packages: ## containerd, runc, CNI plugins, iptables, buildah, debootstrap for the real node (apt, only when missing)
	bash hack/install-node-packages.sh

postgres: ## PostgreSQL 15 for tests/postgres (apt, only when missing)
	bash hack/install-postgres.sh

BENCH_SIZES ?= 10,100
BENCH_IDLE  ?= 70
bench: venv tools $(VENV)/.bench-installed ## benchmark: N databases at once vs the floor (default BENCH_SIZES=10,100 BENCH_IDLE=70; add 300 for the full run); docs/benchmarks.md
	BENCH_SIZES=$(BENCH_SIZES) BENCH_IDLE=$(BENCH_IDLE) $(PY) -m bench

bench-real-node: venv tools $(VENV)/.bench-installed ## the seed on the real node: the operator against the floor, apply to Ready (after make demo; docs/benchmarks.md)
	$(PY) -m bench.real_node

bench-failover: venv tools $(VENV)/.bench-installed ## failover, switchover and node faults on the real nodes: how long writes stop (after make demo; docs/high-availability.md)
	$(PY) -m bench.failover

bench-archive: venv tools $(VENV)/.bench-installed ## the continuous archive on the real node: its lag (the recovery point objective) and a restore's time (after make demo; docs/backups.md)
	$(PY) -m bench.archive

bench-upgrade: venv tools $(VENV)/.bench-installed ## a major upgrade (15 to 17) on the real node: how long writes stop and the whole takes (after make demo; docs/upgrading.md)
	$(PY) -m bench.upgrade

bench-autogrow: venv tools $(VENV)/.bench-installed ## storageAutoGrow on the real node: from a volume crossing its threshold to grown filesystems (after make demo; docs/benchmarks.md)
	$(PY) -m bench.autogrow

$(VENV)/.bench-installed: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install --quiet -e '.[bench]'
	touch $@

cluster-up: node-packages ## start the local cluster and its real node (a no-op when it is healthy)
	$(PYTHON) hack/cluster.py up

cluster-stop: ## pause the cluster: stop its processes, keep its state; cluster-up or make demo resumes it
	$(PYTHON) hack/cluster.py stop

cluster-down: ## stop every process the cluster (and the demo) started, remove its state
	$(PYTHON) hack/cluster.py down

chart-crd: ## copy crds/ into charts/mydatabase-operator/files/ (run after every CRD change; a test checks it)
	bash hack/sync-chart-crd.sh

clean: cluster-down
	rm -rf $(VENV) .pytest_cache
