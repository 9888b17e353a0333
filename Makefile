# Thin layer over `python -m bench`. Every target that needs Python first makes
# sure the virtual environment exists and matches pyproject.toml (a stamp file
# keeps that check instant once done).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.stratbench-installed
# CPU build of TensorFlow unless an NVIDIA driver is visible; override with
# `make TF_EXTRA=tf bench` to keep a TensorFlow you installed yourself.
TF_EXTRA ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo gpu || echo cpu)
# The JAX lane (`--backend jax`): CPU jax by default, except beside the GPU build of
# TensorFlow, where the default installs no JAX: the default sweep is TensorFlow only, and
# JAX's CUDA wheels (about 1 GB, resolved against TensorFlow's CUDA pins) would be paid
# inside make bench's budget. JAX_EXTRA=jax-cuda installs them (what `--backend jax` needs
# on GPUs; it says so before anything runs), JAX_EXTRA=jax the CPU jax, JAX_EXTRA= (empty)
# no JAX anywhere.
JAX_EXTRA ?= $(if $(filter gpu,$(TF_EXTRA)),,jax)
COMMA := ,
# What the venv installs: the project with its TensorFlow, JAX and dev extras.
EXTRAS = .[$(TF_EXTRA)$(if $(JAX_EXTRA),$(COMMA)$(JAX_EXTRA)),dev]
# Expanded once (`?=` would re-run `date` at every use and split one sweep in two).
ifndef OUT
OUT    := results/bench-$(shell date +%Y%m%d-%H%M%S)
endif
ARGS   ?=
# TensorFlow's major.minor as installed (whichever distribution brings it).
TF_MINOR = $(PY) -c "import importlib.metadata as m; print('.'.join(m.version(m.packages_distributions()['tensorflow'][0]).split('.')[:2]))"

.DEFAULT_GOAL := help
.PHONY: help venv bench smoke gpu-smoke test test-onednn lint overhead gate-power probes clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'
	@echo "  variables: OUT=<sweep dir> ARGS='<extra bench run args>' TF_EXTRA=cpu|gpu|tf JAX_EXTRA=jax|jax-cuda| (JAX's CUDA wheels only with JAX_EXTRA=jax-cuda; none by default beside TF_EXTRA=gpu)"

# uv installs the same packages several times faster than pip (a fresh install is part of
# make bench's budget). --compile-bytecode: uv writes no .pyc files by default (pip does),
# and where PYTHONDONTWRITEBYTECODE is set (these machines set it) no process writes them
# later either: every TensorFlow process then compiled TensorFlow's Python anew, 6.9-7.7 s
# to import it against 3.2-3.3 s with them, and a sweep's processes paid it each time.
# pip stays the fallback where uv cannot be had or fails (no wheel for the platform; uv
# reads no pip.conf, so an index set only there is pip's alone), and is what
# INSTALLER=pip asks for.
INSTALLER ?= uv
# The keras2 extra, see pyproject.toml.
KERAS2 = "tf-keras==$$($(TF_MINOR)).*"
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@done=; if [ "$(INSTALLER)" = uv ] && { $(PY) -m uv --version >/dev/null 2>&1 || \
	     $(PY) -m pip install --quiet uv; } && $(PY) -m uv --version >/dev/null 2>&1; then \
	  echo "uv pip install -e \"$(EXTRAS)\""; \
	  uv="$(PY) -m uv pip install --quiet --compile-bytecode --python $(PY)"; \
	  $$uv -e "$(EXTRAS)" && $$uv --no-deps $(KERAS2) && done=1; \
	fi; \
	if [ -z "$$done" ]; then \
	  [ "$(INSTALLER)" = pip ] || echo "uv unavailable or failed: installing with pip"; \
	  echo "pip install -e \"$(EXTRAS)\""; \
	  $(PY) -m pip install --quiet --upgrade pip && \
	  $(PY) -m pip install --quiet -e "$(EXTRAS)" && \
	  $(PY) -m pip install --quiet --no-deps $(KERAS2); \
	fi
	@touch $(STAMP)

venv: $(STAMP) ## create the virtual environment and install the project

# The all-reduce probe first (about 20 s) so that the sweep's report can project scaling
# from it; a failed probe is recorded in the sweep and does not stop the sweep.
# The whole of `make bench` fits BENCH_BUDGET_S, counted from the command's start: the
# install of a fresh clone is in it. The sweep's budget is what the install and the
# all-reduce probe left, less BENCH_REPORT_S for the report and the TensorBoard export
# after it (BENCH_MIN_S at least, said aloud, where the install took nearly all of it).
BENCH_BUDGET_S ?= 600
BENCH_REPORT_S ?= 15
BENCH_MIN_S ?= 60
# Taken when make reads this file, before any prerequisite (the venv) is built; `:=` so
# that it is read once.
BENCH_START := $(shell date +%s)
bench: $(STAMP) ## run the default sweep for this hardware and print a summary
	@start=$(BENCH_START); \
	echo "install and checks: $$(( $$(date +%s) - start )) s of the $(BENCH_BUDGET_S) s budget"; \
	$(PY) -m bench allreduce --max-seconds 0.5 --out $(OUT) || echo "all-reduce probe failed: the sweep goes on without it"; \
	left=$$(( $(BENCH_BUDGET_S) - $(BENCH_REPORT_S) - $$(date +%s) + start )); \
	if [ $$left -lt $(BENCH_MIN_S) ]; then \
	  echo "only $$left s left of BENCH_BUDGET_S=$(BENCH_BUDGET_S): the sweep gets $(BENCH_MIN_S) s, so make bench overruns"; \
	  left=$(BENCH_MIN_S); \
	fi; \
	echo "$(PY) -m bench run --preset default --out $(OUT) --budget $${left}s $(ARGS)"; \
	$(PY) -m bench run --preset default --out $(OUT) --budget $${left}s $(ARGS)

smoke: $(STAMP) ## a tiny sweep end to end (about a minute)
	$(PY) -m bench run --preset smoke --out $(or $(SMOKE_OUT),results/smoke-$(shell date +%Y%m%d-%H%M%S)) $(ARGS)

# On a GPU machine, first: one_device, mirrored and multi_worker_mirrored on 2 GPUs with
# NCCL_DEBUG=INFO, mixed_float16 once, /dev/shm, peer access and CUPTI checked; one file
# to attach to a bug report (exit 2 where no GPU is visible, 3 when a run did not train).
gpu-smoke: $(STAMP) ## does TensorFlow train on this machine's GPUs? (about 3 minutes, one file for a bug report)
	$(PY) -m bench gpu-smoke $(if $(SMOKE_OUT),--out $(SMOKE_OUT)) $(ARGS)

# The suite in two parts. First everything but the tests marked `alone`, on TEST_WORKERS
# pytest-xdist workers, each file whole on one worker, longest first (conftest.py): one
# process alone kept 1.2 of the 2 cores busy, waiting on its TensorFlow children. Then
# the `alone` tests, whose assertions rest on real timings, one at a time with nothing
# beside them. `python -m pytest` runs the same tests in one process.
# The suite writes bytecode caches where PYTHONDONTWRITEBYTECODE is set (these machines
# set it): without them every pytest process rewrote the asserts of all 100 test modules
# anew (10 s of collection against 4 s from its cache, three processes a run) and every
# child process compiled the project's modules again. They go to __pycache__ folders,
# which git ignores.
TEST_ENV = env -u PYTHONDONTWRITEBYTECODE
TEST_WORKERS ?= 2
test: $(STAMP) ## run the test suite
	$(TEST_ENV) $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not alone"
	$(TEST_ENV) $(PY) -m pytest -m alone

# Machines of this kind differ: oneDNN is on by default on CPUs with AVX-512 VNNI/BF16 or
# AMX (kernels named _MklMatMul, other noise) and off elsewhere. Both ways on any machine.
test-onednn: $(STAMP) ## the suite with oneDNN forced on, then forced off (CI runs this)
	TF_ENABLE_ONEDNN_OPTS=1 $(MAKE) --no-print-directory test
	TF_ENABLE_ONEDNN_OPTS=0 $(MAKE) --no-print-directory test

lint: $(STAMP) ## ruff, mypy and the import contracts (pyproject.toml)
	$(VENV)/bin/ruff check bench workloads reports tests scripts benchmarks conftest.py
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

overhead: $(STAMP) ## harness vs the minimal loop per in-process strategy (ok / HARNESS SLOWER below 0.95x), and vs plain fit (prints figures; exit 0 unless a run fails)
	$(PY) -m scripts.overhead $(ARGS)

# Takes up to (A/A + A/B) x the budget: about an hour with the defaults on a 2-core machine.
gate-power: $(STAMP) ## bench ab's verdicts on this machine: 10 A/A and 10 A/B (+10.5% work) comparisons against the targets (prints figures)
	$(PY) -m scripts.gate_power $(ARGS)

probes: $(STAMP) ## all-reduce bus bandwidth and communication-fraction figures (prints figures)
	$(PY) -m scripts.probe_figures $(ARGS)

.PHONY: stability
# A=<sweep dir> B=<sweep dir>: agree / equivalent-consistent / not settled / disagree per
# machine, workload and batch, then the verdict (the script's exit code in words) and the
# median half-width of the answers' intervals.
stability: $(STAMP) ## do two sweeps recommend the same? A=<dir> B=<dir> (prints its verdict with the script's exit code; make exits 2 on any but 0)
	@test -n "$(A)" -a -n "$(B)" || { echo "usage: make stability A=results/<sweep> B=results/<sweep>"; exit 2; }
	$(PY) -m scripts.stability $(A) $(B)

.PHONY: report
# SWEEP=<sweep dir> (required); REPORT_OUT=<dir> (default SWEEP/report).
report: $(STAMP) ## HTML/Markdown/CSV report of SWEEP=<dir> (make bench writes one itself)
	@test -n "$(SWEEP)" || { echo "usage: make report SWEEP=results/<sweep dir>"; exit 2; }
	$(PY) -m bench report $(SWEEP) $(if $(REPORT_OUT),--out $(REPORT_OUT))

.PHONY: nightly
# NIGHTLY_OUT / ARGS (e.g. ARGS='--runs 3 --threshold 10%'). `python -m bench nightly` exits
# 4 regression, 5 cannot tell at this noise, 3 runs failed. With a side in ARGS (e.g.
# ARGS='--baseline-python /srv/pinned/bin/python --matrix small --budget 25m') it is the A/B
# nightly: bench ab's interleaved sessions against that side, each ratio stored in the
# history and its series searched for steps; exits 0 same/improved, 4 regressed, 5 unknown
# after the budget, 3 runs failed. make turns any non-zero code into 2 (see
# docs/regression-tracking.md; CI that needs the code calls python -m bench nightly).
nightly: $(STAMP) ## nightly matrix (2 runs each) -> history -> compare with the last 5 nightlies; ARGS='--baseline-python PATH': A/B against a pinned env
	$(PY) -m bench nightly $(if $(NIGHTLY_OUT),--out $(NIGHTLY_OUT)) $(ARGS)

clean: ## remove the virtual environment and caches (keeps results/)
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
