# The habits: make install / test / lint / bench; make plugin=NAME test for one plugin.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PLUGIN_DIRS := $(sort $(wildcard plugins/*))
STAMP := $(VENV)/.installed
# llama.cpp's llama-server and a real GGUF for the model-stage tests; see docs/llama-server.md.
# LLAMA_SERVER_ARGS=--build-from-source ignores the prebuilt wheels in ../shared/wheels.
LLAMA_SERVER_INSTALL := contrib/llama-server/install.py
LLAMA_SERVER_ARGS ?=
plugin ?=
PLUGIN_DIR := $(firstword $(wildcard plugins/$(plugin) plugins/slm-rerank-$(plugin)))

.PHONY: install test lint bench bench-quick bench-model clean

install: $(STAMP)

$(STAMP): pyproject.toml $(wildcard plugins/*/pyproject.toml) $(wildcard contrib/llama-server/*.py)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]' $(foreach p,$(PLUGIN_DIRS),-e $(p))
	$(BIN)/python $(LLAMA_SERVER_INSTALL) $(LLAMA_SERVER_ARGS)
	touch $@

test: install
ifeq ($(plugin),)
	$(BIN)/python -m pytest -q
else
	@test -n "$(PLUGIN_DIR)" || (echo "no plugin '$(plugin)' under plugins/" >&2; exit 2)
	$(BIN)/python -m pytest -q $(PLUGIN_DIR)
endif

lint: install
	$(BIN)/ruff check .

bench: install
	$(BIN)/python -m pip install -q -r tests/bench/requirements.txt
	$(BIN)/python tests/bench/run.py $(BENCH_ARGS)

bench-quick: install
	$(BIN)/python tests/bench/quick.py $(BENCH_ARGS)

# The model stage on the benchmark cases, against SLM_ENDPOINT (or -e URL in BENCH_ARGS).
bench-model: install
	cd tests/bench && ../../$(BIN)/python model_quality.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info plugins/*/*.egg-info
