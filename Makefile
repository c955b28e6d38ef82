# Two entry points for a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs what it needs (pinned by constraints.txt), servers included.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/pip
STAMP  := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False

.PHONY: demo test test-unit services install bench bench-latency lint check

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# torch first, pinned: an unpinned torch would pull a multi-GB CUDA build
$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) install --quiet torch==2.13.0
	CMAKE_BUILD_PARALLEL_LEVEL=2 $(PIP) install --quiet -c constraints.txt -e '.[all,dev]'
	touch $(STAMP)

install: $(STAMP)

# Redis from Debian: the exact layer / invalidation integration tests run a real server
services:
	@command -v redis-server >/dev/null 2>&1 || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }

demo: install
	$(BIN)/agent-cache demo

test: install services
	$(BIN)/python -c "import FlagEmbedding, sentence_transformers, chromadb, llama_cpp.server"
	$(BIN)/python -m pytest

test-unit: install
	$(BIN)/python -m pytest tests/unit

bench: install
	$(BIN)/agent-cache bench core

bench-latency: install
	$(PIP) install --quiet -c constraints.txt -e '.[bench]'
	$(BIN)/agent-cache bench latency

lint: install
	$(BIN)/ruff check agent_cache integrations tests
	$(BIN)/mypy

# The gate CI runs before `make test`: lint, format, types (strict on agent_cache and
# integrations, see [tool.mypy] in pyproject.toml) and the unit tests. No services, no
# model downloads (HF_HUB_OFFLINE above; unit tests use agent_cache.testing fakes).
check: install
	$(BIN)/ruff check agent_cache integrations tests
	$(BIN)/ruff format --check agent_cache integrations tests
	$(BIN)/mypy
	$(BIN)/python -m pytest -q tests/unit
