# Quick start: `make demo`, `make test`. Everything installs into .venv from python3 alone.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck bench bench-quick instructions soak soak-quick chaos chaos-scale memory watch-began clean check-packaging check-install lock

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/watcher demo

test: $(STAMP)
	$(BIN)/ruff format --check watcher tests bench deploy/grafana
	$(BIN)/ruff check watcher tests bench deploy/grafana
	$(BIN)/mypy watcher tests bench deploy/grafana/dashboard.py
	$(BIN)/lint-imports  # the layers and the pure steps' contracts (pyproject.toml)
	$(BIN)/watcher check --config examples/watcher.yaml
	deploy/ensure-postgresql  # the PostgreSQL tests' server binaries (installs them as root)
	deploy/ensure-monitoring  # Prometheus, promtool, Alertmanager for the deploy/ tests (installs them as root)
	$(BIN)/pytest -n 4 --dist worksteal --durations=15  # mostly waiting on subprocesses: 4 workers on 2 cores; idle ones steal queued tests

lint: $(STAMP)
	$(BIN)/ruff check watcher tests bench deploy/grafana

# The long randomized runs (bench/README.md); not part of `make test`.
soak: $(STAMP)
	$(BIN)/python bench/soak.py all

bench: $(STAMP)
	$(BIN)/python bench/bench.py

bench-quick: $(STAMP)
	$(BIN)/python bench/bench.py --quick

# Instructions per quiet poll, the daemon's against the lean poller's, counted by callgrind: a
# figure that repeats on a noisy machine (bench/instructions.py, about a minute; needs valgrind).
instructions: $(STAMP)
	$(BIN)/python bench/instructions.py

# What the daemon holds per watched address at 10,000 and 100,000: RSS by stage and
# tracemalloc's top allocation sites (bench/memory.py, about 5 minutes).
memory: $(STAMP)
	$(BIN)/python bench/memory.py --trace

soak-quick: $(STAMP)
	$(BIN)/python bench/soak.py all --quick

# Three instances on one throwaway PostgreSQL under kill -9, pauses and a server restart.
chaos: $(STAMP)
	deploy/ensure-postgresql  # the throwaway server's binaries (installs them as root)
	$(BIN)/python bench/chaos.py

# 2,000 addresses baselined under rpc.budget over about 100 s, with a kill -9 and a reload:
# every transaction after its watch began notified once, none before (about 3 minutes).
watch-began: $(STAMP)
	$(BIN)/python bench/watch_began.py

chaos-scale: $(STAMP)
	deploy/ensure-postgresql  # the throwaway server's binaries (installs them as root)
	$(BIN)/python bench/chaos.py --scale
	$(BIN)/python bench/memory.py --sizes 1000000 --latency 0.03  # one instance, SQLite, the ledger 30 ms away as in bench: peak RSS, sweeps, CPU

typecheck: $(STAMP)
	$(BIN)/mypy watcher tests bench deploy/grafana/dashboard.py

# The deployment files: systemd unit (verify, security score), Dockerfile (hadolint), and no
# binary file in the tree but the simulator's recorded answers (deploy/check-binaries).
check-packaging: $(STAMP)
	VENV=$(CURDIR)/$(VENV) deploy/check-packaging

# The README's systemd install steps as root, under a scratch root (deploy/check-install).
check-install:
	deploy/check-install

# Renew the pinned, hash-checked dependency set the Docker image installs.
lock: $(STAMP)
	$(BIN)/pip install --quiet uv
	$(BIN)/uv pip compile pyproject.toml --generate-hashes --python-version 3.11 \
	    -o deploy/requirements.lock

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
