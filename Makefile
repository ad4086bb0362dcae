# Two commands on a fresh machine: `make demo` (the main job) and `make test` (the suite).
# Both create .venv at the repo root and install the project into it first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
export PREFECT_SERVER_ANALYTICS_ENABLED ?= false

.PHONY: install demo test llama bench ui serve clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,lake,dask]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/researchflow batch examples/topics.csv

# The suite on parallel pytest-xdist workers: one more than the cores, as many tests wait on a
# server or a subprocess (on 2 cores, 3 workers: 478 s against 539 s for 2); TEST_WORKERS=0:
# one process. Tests that must share a worker carry an xdist_group mark (tests/conftest.py).
TEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; print(1 + (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))')
test: $(STAMP) llama
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

# llama.cpp's llama-server for the real-model tests (tests/local_model): built from the pinned
# source once per machine (~16 min on 2 cores), then found in ~/.cache/researchflow/llama-server.
llama: $(STAMP)
	$(PY) -m tests.local_model.llama

bench: $(STAMP)
	$(PY) bench/overflow.py
	$(PY) bench/corpus.py --no-before
	$(PY) bench/corpus_limits.py
	$(PY) bench/offline_quality.py
	$(PY) bench/title_topics.py  # needs Debian's python3.11-doc, postgresql-doc-15, debian-reference-zh-cn
	$(PY) bench/demo_memory.py
	$(PY) bench/faults.py
	$(PY) bench/depth.py
	$(PY) bench/web.py
	$(PY) bench/rerun.py
	$(PY) bench/local_model.py
	$(PY) bench/overhead.py
	$(PY) bench/scale.py
	$(PY) bench/scale.py --pacing

ui: $(STAMP)
	$(VENV)/bin/researchflow ui --host 127.0.0.1 --port 4200

serve: $(STAMP)  # needs PREFECT_API_URL (see `make ui`); options: .venv/bin/researchflow serve --help
	$(VENV)/bin/researchflow serve

clean:
	rm -rf $(VENV) .pytest_cache researchflow.duckdb
