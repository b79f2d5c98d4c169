# polyvox: `make serve` starts the server, `make test` runs ruff, mypy, the layer contract and the whole suite.
#   make serve                          the embedded CPU voice on http://127.0.0.1:8000 (no PyTorch installed)
#   make serve PORT=8080 HOST=0.0.0.0   another port or address (--port, --host; POLYVOX_PORT, POLYVOX_HOST)
#   make serve MODEL=openbmb/VoxCPM2    VoxCPM2: installs the voxcpm extra and PyTorch first (--model)
PYTHON ?= python3
# Where the environment goes: `make install VENV=/tmp/x` builds another one exactly as `make serve` does
# (.ci/serve_smoke.sh proves the README's first command that way).
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# PyTorch, for VoxCPM only (`make serve MODEL=...`, `make install-voxcpm`, the test environment): on
# machines without nvidia-smi this pinned version (pip's CPU wheel where its index has one), else torch>=2.5.
TORCH_CPU := torch==2.13.0
# The index torch is installed from; empty (the default): pip's own. Where PyPI's torch would be the
# CUDA build on a machine without a GPU, as the Dockerfiles do:
#   make serve MODEL=openbmb/VoxCPM2 TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
TORCH_INDEX_URL ?=
TORCH_INDEX := $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL))
# What `make serve` passes to `polyvox serve`, taken from make's command line only (a PORT or MODEL
# already in the shell's environment is not): MODEL (--model), PORT (--port), HOST (--host).
arg = $(if $(filter command line,$(origin $(1))),$($(1)))
SERVE_FLAGS := $(if $(call arg,MODEL),--model $(call arg,MODEL)) $(if $(call arg,HOST),--host $(call arg,HOST)) \
	$(if $(call arg,PORT),--port $(call arg,PORT))

.PHONY: serve test test-fast typecheck lint format docs install install-voxcpm install-test install-browser clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.torch: $(VENV)/bin/python
	@if command -v nvidia-smi >/dev/null 2>&1; then $(INSTALL) $(TORCH_INDEX) "torch>=2.5"; \
	else $(INSTALL) $(TORCH_INDEX) $(TORCH_CPU); fi
	@touch $@

# The embedded voice's environment: no PyTorch.
$(VENV)/.installed: $(VENV)/bin/python pyproject.toml
	$(INSTALL) -e ".[embedded,text]"
	@touch $@

# ... and VoxCPM's: the voxcpm extra, after the torch build chosen above, and the aligner its word timestamps use.
$(VENV)/.installed-voxcpm: $(VENV)/.torch $(VENV)/.installed
	$(INSTALL) -e ".[embedded,text,voxcpm,align]"
	@touch $@

# The test extras are not byte-compiled as they install (--no-compile): pip compiles every module of every
# package (transformers alone has 2,500) and the suite imports a small part of them, whose bytecode Python
# writes on first import instead (TEST_ENV): `make install-test` took 131 s here, 86 s without (BENCHMARKS.md).
# An environment the test targets build is installed so throughout, PyTorch and the serving extras too
# (NO_COMPILE, given to every prerequisite): PyTorch's 2,284 modules took 11 s of the install's one core.
# `make serve` and `make install` compile theirs: a server's environment may be read-only, or run with
# the bytecode cache off.
NO_COMPILE ?=
install-test test test-fast typecheck lint format: NO_COMPILE := --no-compile
# ... and by uv (tools/uv_install.py, which hands it pip's own configuration, and falls back on pip): after
# `make install`, pip took 45 s to resolve and install PyTorch, the voxcpm extra and the test extras with
# empty caches (34 s with warm ones), uv 22 s (9 s), the same packages at the same versions (BENCHMARKS.md).
# `make serve` and `make install` use pip itself.
INSTALL = $(PIP) install -q $(NO_COMPILE)
install-test test test-fast typecheck lint format: INSTALL = $(PY) tools/uv_install.py -q $(NO_COMPILE)
$(VENV)/.installed-test: $(VENV)/.installed-voxcpm tools/uv_install.py
	$(INSTALL) -e ".[embedded,text,voxcpm,align,test]"
	# The official VoxCPM2 implementation, for parity tests only; its heavy extras are not needed.
	$(INSTALL) --no-deps voxcpm==2.0.3
	@touch $@

install: $(VENV)/.installed
install-voxcpm: $(VENV)/.installed-voxcpm
install-test: $(VENV)/.installed-test

# Headless Chromium for the playground's browser tests (tests/web skips them without it): the Debian
# packages, installed as root when missing (Playwright's own browser download is not used).
install-browser:
	@[ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver; }

serve: $(if $(call arg,MODEL),$(VENV)/.installed-voxcpm,$(VENV)/.installed)
	$(VENV)/bin/polyvox serve $(SERVE_FLAGS)

# The tests run side by side in TEST_WORKERS processes (pytest-xdist; a test file stays in one worker, so
# its module-scoped servers start once): one at a time the suite keeps one core busy, waiting the rest (for a
# server, a process, a socket), so two workers on a 2-core machine like CI's took about 60 % of its wall
# time, measured side by side on one machine (BENCHMARKS.md). Three, one more than CI's cores, fill most of
# the cores two left idle: from a fresh clone in CI's flow, 561 and 529 s of `make test` against 606 and
# 557 s with two, run by turns (BENCHMARKS.md); on a machine with more cores and memory, raise it. The
# files go out heaviest kind first (tests/conftest.py: clusters, browsers, processes..., unit tests last),
# not xdist's default of the files with the most tests first, which left the one-test files that start
# processes for the end.
TEST_WORKERS ?= 3
# Python's bytecode cache on for the tests even where the environment turns it off (PYTHONDONTWRITEBYTECODE):
# the suite starts hundreds of Python processes (`polyvox serve`, engine processes, the CLI), and without it
# each compiles the src/ it imports anew.
TEST_ENV := PYTHONDONTWRITEBYTECODE=

# The type checker runs beside the tests rather than before them (half a minute of one core from cold, while
# the tests still wait on servers and processes now and then); either failing fails the target.
test: $(VENV)/.installed-test
	$(VENV)/bin/ruff check src tests bench tools
	$(VENV)/bin/lint-imports
	@$(VENV)/bin/mypy src > $(VENV)/mypy.out 2>&1 & mypy=$$!; \
	$(TEST_ENV) $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder; tests=$$?; \
	wait $$mypy; typed=$$?; echo "mypy src:"; cat $(VENV)/mypy.out; \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ]

# The daily loop: the tests of kind `unit` and `server` (no subprocess, no browser; the kinds: markers in
# pyproject.toml), side by side in one worker more than the machine has cores: these tests wait on their
# in-process servers now and then, and on two cores a third worker took 112 s where two took 121 (idle
# core-seconds 10 instead of 38; BENCHMARKS.md). `make test` runs every kind.
FAST_WORKERS ?= $(shell $(PYTHON) -c "import os; print((os.cpu_count() or 1) + 1)")
test-fast: $(VENV)/.installed-test
	$(TEST_ENV) $(PY) -m pytest -q -m "unit or server" -n $(FAST_WORKERS) --dist loadfile --no-loadscope-reorder

# The type checker over src/ (its settings: [tool.mypy] in pyproject.toml); `make test` runs it too.
typecheck: $(VENV)/.installed-test
	$(VENV)/bin/mypy src

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check src tests bench tools
	$(VENV)/bin/ruff format --check src tests bench tools
	$(VENV)/bin/lint-imports

format: $(VENV)/.installed-test
	$(VENV)/bin/ruff format src tests bench tools
	$(VENV)/bin/ruff check --fix src tests bench tools

docs: $(VENV)/.installed
	$(PY) -m polyvox.settings.readme_table

clean:
	rm -rf $(VENV) build dist src/*.egg-info
