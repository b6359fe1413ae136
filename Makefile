# The two commands of the README are `make run` and `make test`; everything else is a step they use.
# Every step is idempotent: a stamp file or a content hash decides whether it has work to do.
SHELL := /bin/bash
# Python caches compiled modules (and pytest its rewritten test modules) in __pycache__/, which git
# ignores. A machine that turns the cache off (PYTHONDONTWRITEBYTECODE, set on the machines we run on) makes
# every test worker and every `chaos` process compile the whole harness again: each of make test's
# workers spent about 5 s more collecting.
unexport PYTHONDONTWRITEBYTECODE
PY    := .venv/bin/python
PIP   := .venv/bin/pip
CHAOS := .venv/bin/chaos
STAMP := .venv/.stamp-$(shell cat pyproject.toml cluster-impl/pyproject.toml | sha256sum | cut -c1-16)
DEBS  := debootstrap zookeeper libfaketime faketime iptables openjdk-17-jre-headless openssh-client chromium

.PHONY: run test deps venv image check bench bench-cluster bench-broker bench-cluster-impl bench-check bench-run \
        bench-detect bench-fuzz bench-sim bench-fleet bench-txn clean-cluster tansu docs test-fast

# The default chaos run: 5 nodes, 60 s of the queue workload under every fault family, checked.
# ARGS: flags of `chaos run` (make run ARGS='--nodes 3 --seed 7').
ARGS :=
run: deps venv image
	@$(CHAOS) run $(ARGS)

# Tansu (crates.io), the foreign broker of `--system tansu`: built with cargo once per machine (about
# 20 minutes on 2 cores; log in .build/logs/), then a layer of the node image. Never part of `make run`.
tansu: deps venv image
	@$(CHAOS) systems tansu --build

# Three pytest-xdist workers on two cores: most tests wait (on containers, ZooKeeper sessions, JVMs)
# rather than compute. Every module with a Docker test runs in one of them (tests/conftest.py).
# WORKERS=0 runs the suite in this process, one test at a time.
WORKERS := 3
test: deps venv image tansu check
	$(PY) -m pytest -p no:cacheprovider -n $(WORKERS) --durations=25

# The inner loop: the unit tier (no Docker, ZooKeeper or Spark, nothing slow). Not what CI runs.
test-fast: venv
	$(PY) -m pytest -p no:cacheprovider -q -n $(WORKERS) -m "not docker and not zookeeper and not spark and not slow"

# Install steps are quiet: one line each, their tools' output in $(LOGS)/ (shown when a step fails).
LOGS := .build/logs
QUIETLY = mkdir -p $(LOGS); log=$(LOGS)/$(1).log; if ! ( $(2) ) >$$log 2>&1; then tail -40 $$log; \
          echo "$(1) failed; the whole log is $$log"; exit 1; fi

# Debian packages the host needs: debootstrap builds the node image, zookeeper/libfaketime serve the
# process-level tests, Java 17 runs Spark. apt-get runs only when something is missing.
deps:
	@missing=""; for p in $(DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(call QUIETLY,apt,apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing); \
	fi

venv: $(STAMP)

# `test -x pip`: an interrupted earlier attempt leaves a venv without pip
$(STAMP): pyproject.toml cluster-impl/pyproject.toml
	@echo "installing the Python environment (.venv)"
	@$(call QUIETLY,pip,test -x $(PIP) || python3 -m venv --clear .venv; $(PIP) install -q --upgrade pip && \
	  $(PIP) install -q -e '.[dev]' -e './cluster-impl[dev]')
	@rm -f .venv/.stamp-* && touch $@

# The node image: built from Debian packages and our own wheels, cached by a content hash label.
image: venv
	@$(PY) -m harness.image build

# The picture of docs/design.md, drawn from the import graph and the run's phases (tests/docs checks
# that the committed one is current).
docs: venv
	@$(PY) docs/layers.py

check: venv
	.venv/bin/ruff check kernel harness workloads nemesis results cluster-impl tests docs
	.venv/bin/mypy kernel harness workloads nemesis results cluster-impl/logbroker cluster-impl/logsim

bench: bench-cluster bench-broker bench-cluster-impl bench-check bench-run bench-fuzz bench-detect

bench-cluster: deps venv image
	$(PY) -m harness.bench.cluster --out bench-results/cluster.json

bench-broker: venv
	$(PY) cluster-impl/bench/broker.py --out bench-results/broker.json

bench-cluster-impl: deps venv
	$(PY) cluster-impl/bench/cluster.py --out bench-results/cluster-impl.json

# the simulator: simulated seconds per wall second, seeds per hour, time to detect per bug switch
bench-sim: venv
	$(PY) -m harness.bench.sim --out bench-results/sim.json

# sim-search on a Spark standalone cluster (master + 2 one-core workers here) against --jobs 2
bench-fleet: venv
	$(PY) harness/bench/fleet.py --seeds 500 --out bench-results/fleet.json

bench-fuzz: venv
	$(PY) cluster-impl/bench/fuzz.py --out bench-results/fuzz.json

# transactional produce on three brokers (1, 10, 100 records per transaction) beside acks=all
bench-txn: deps venv
	$(PY) cluster-impl/bench/txn.py --out bench-results/txn.json

bench-check: deps venv
	$(PY) -m results.bench --out bench-results/check.json

bench-run: deps venv image
	$(PY) -m harness.bench.run --out bench-results/run.json

# The detection matrix: every bug switch with 5 fresh seeds each (targeted and full mixes), then as
# many runs of the clean cluster; about two hours on 2 cores.
bench-detect: deps venv image
	$(CHAOS) detect --seeds 5 --every-seed --store bench-results/detect-store --out bench-results/detect.json

clean-cluster: venv
	$(CHAOS) cluster down --all
