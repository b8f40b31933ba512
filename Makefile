# The README's commands. Every target is safe to re-run.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.setup-stamp
EDITABLES := -e "./retrieval[faiss]" -e ".[retrieval,eval,dev]" -e ./examples/embedded_world
# Everything generated (embedded world, indexes, tiny models) is cached here: the scripts' own default, so that
# `make gpu-check` and `bash scripts/gpu_check.sh` (or any other command) build each piece once.
export MR_SEARCH_CACHE ?= $(HOME)/.cache/mr_search
# Python keeps the bytecode of what it imports (setup installs without compiling, below). Where the environment sets
# PYTHONDONTWRITEBYTECODE (this project's CPU machines do), nothing would be kept and every process would compile
# what it imports again: `import torch, transformers, ray, verl` took 31 s instead of 11 s on the 2-core machine (busy
# with another job), and the suite's training runs start several such processes each.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup quickstart gpu-check test test-verl-next serve bench eval compare lint clean

# Installs the environment, then builds the embedded default's cached assets (seconds once built).
setup: $(STAMP)
	PATH="$(abspath $(VENV))/bin:$$PATH" bash examples/embedded_world/scripts/prepare.sh

# Re-installs only when a pyproject.toml changes. torch==2.13.0 pinned: on the project's CPU machines that exact
# version lies on local disk (an unpinned `torch` would pull a CUDA build). Through uv when it can (scripts/uv_pip.py:
# pip's own configuration passed on; 35 s against pip's 97 s on the 2-core machine with fresh caches, the same
# distributions at the same versions), else with pip, torch first.
# The retrieval service is its own distribution (retrieval/pyproject.toml): named on the same command line, it is
# what satisfies this project's `[retrieval]` extra (pip takes no relative path from an extra).
# --no-compile (uv compiles nothing unless asked): pip would compile every installed module to bytecode, one file
# after another (21,911 files; torch's alone took 27 of its 42 s to install on the project's 2-core machine, busy with
# another job); Python compiles what it imports, once (~4,200 modules for a process that imports verl, the plugin, Ray
# and transformers).
# The browser for the viewer's test installs from apt beside pip: both mostly wait on downloads (apt's install of
# chromium alone took 41 s on a fresh CPU machine of the project's, after pip). Its log is printed once both are done.
$(STAMP): pyproject.toml retrieval/pyproject.toml examples/embedded_world/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	bash scripts/setup_browser.sh >$(VENV)/setup-browser.log 2>&1 & browser=$$!; \
	  if $(PIP) install -q uv && $(PY) scripts/uv_pip.py $(VENV)/bin/uv $(PY) -q --upgrade-package pip pip \
	    "torch==2.13.0" $(EDITABLES); \
	  then status=0; \
	  elif $(PIP) install -q --upgrade pip && $(PIP) install -q --no-compile "torch==2.13.0" \
	    && $(PIP) install -q --no-compile $(EDITABLES); \
	  then status=0; else status=$$?; fi; \
	  wait $$browser || true; cat $(VENV)/setup-browser.log; exit $$status
	touch $(STAMP)

# The embedded default on any machine: on a GPU node too (the transformers rollout on one GPU), never the paper preset.
# Its closing lines say what four updates show and what they do not.
quickstart: setup
	PATH="$(abspath $(VENV))/bin:$$PATH" PRESET=embedded bash train_grpo_step.sh
	@echo "quickstart: what this showed: the whole MR-Search loop ran on verl's trainer (K = 3 attempts with search,"
	@echo "  per-attempt rewards and advantages, FSDP updates, checkpoints) for 4 updates of 4 questions x 4."
	@echo "  Four updates do not train a policy: each EM@k above is 16 sampled meta-episodes, so a negative gain"
	@echo "  (later attempts worse than the first) says nothing about the method. Whether training makes later"
	@echo "  attempts better is the lab's question (make compare): reports/comparison/README.md"

# On a GPU node, in the environment that has verl and SGLang (ROLLOUT_ENGINE=vllm for vLLM): two real steps, a resume
# inside the launch and a third step, then the checks of a GPU run as a table.
gpu-check:
	bash scripts/gpu_check.sh

# Lint, then the suite on both cores. Its embedded runs train on a warm start of 0.3 of the default's steps
# (examples/embedded_world/mr_search_embedded/warmstart/scale.py): their checks need a policy that writes the protocol
# and earns mixed rewards, not the default's accuracy, and the full one takes ~3 more minutes to build on a 2-core CPU
# without native bf16. Set MR_SEARCH_WARMSTART_SCALE=1 to test on the full one.
test: export MR_SEARCH_WARMSTART_SCALE ?= 0.3
test: setup
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m ruff check .
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m pytest -q --timeout=900 -n 2 --dist loadgroup --durations=10 tests examples/embedded_world/tests

# The part of the suite that touches verl (registration, the agent loop's token path, the trainer mode, the advantage
# entry, the CPU backend's guards) against another verl: VERL_WHEEL=path/to/verl-*.whl, a wheel built beforehand from a
# verl checkout (`pip wheel --no-deps --no-build-isolation -w DIR CHECKOUT`; docs/verl-next.md). Its own venv holds the
# project's environment exactly (.venv's versions, from the local caches: no network) with only verl replaced, so
# whatever breaks is verl's change. CI does not run it; the pin in pyproject.toml stays until a released verl passes.
VERL_NEXT_VENV ?= .venv-verl-next
VERL_NEXT_TESTS ?= tests/mr_search/test_plugin.py tests/mr_search/agent/test_registration.py \
  tests/mr_search/agent/test_qwen3_protocol.py tests/mr_search/agent/test_contract_path.py \
  tests/mr_search/agent/test_malformed_turns.py tests/mr_search/agent/test_verl_token_path.py \
  tests/mr_search/agent/test_partial_rollout.py \
  tests/mr_search/ops/test_trainer_registration.py tests/mr_search/trainer/test_trainer.py \
  tests/mr_search/advantage/test_verl_entry.py tests/mr_search/cpu/test_registration.py \
  tests/mr_search/cpu/test_workarounds.py
test-verl-next: setup
	test -n "$(VERL_WHEEL)" -a -f "$(VERL_WHEEL)" || { echo "test-verl-next: set VERL_WHEEL to a verl wheel" >&2; exit 2; }
	rm -rf $(VERL_NEXT_VENV) && $(PYTHON) -m venv $(VERL_NEXT_VENV)
	$(VENV)/bin/uv pip freeze --python $(PY) --exclude-editable | grep -v -E '^(verl|uv|pip)==' >$(VERL_NEXT_VENV)/freeze.txt
	$(PY) scripts/uv_pip.py $(VENV)/bin/uv $(VERL_NEXT_VENV)/bin/python -q --offline -r $(VERL_NEXT_VENV)/freeze.txt
	$(PY) scripts/uv_pip.py $(VENV)/bin/uv $(VERL_NEXT_VENV)/bin/python -q --offline --no-deps "$(VERL_WHEEL)" \
	  -e ./retrieval -e . -e ./examples/embedded_world
	$(VERL_NEXT_VENV)/bin/python -c "import verl; print('test-verl-next: verl', verl.__version__, verl.__file__)"
	PATH="$(abspath $(VERL_NEXT_VENV))/bin:$$PATH" $(VERL_NEXT_VENV)/bin/python -m pytest -q -p no:xdist \
	  -p no:cacheprovider --timeout=900 $(VERL_NEXT_TESTS)

serve: setup
	PATH="$(abspath $(VENV))/bin:$$PATH" bash retrieval_launch.sh

bench: setup
	PATH="$(abspath $(VENV))/bin:$$PATH" bash scripts/run_benchmarks.sh

eval: setup
	PATH="$(abspath $(VENV))/bin:$$PATH" bash examples/embedded_world/scripts/eval.sh

compare: setup
	PATH="$(abspath $(VENV))/bin:$$PATH" bash examples/embedded_world/scripts/compare.sh

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# The runs, the install stamp and ./.cache (the tests' cache outside make); the shared cache ($(MR_SEARCH_CACHE))
# stays: remove it by hand to rebuild everything.
clean:
	rm -rf .cache runs $(STAMP)
