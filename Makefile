# skycore: every entry point a user or CI needs. All install steps live here and in
# harness/cloud/system.py (apt packages), so a fresh machine works with no prior set-up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SHELL := /bin/bash
PYTEST_WORKERS ?= 2
## Workers per suite: smoke mostly waits (clusters, outages, recoveries), so it takes one
## more; the two suites run side by side in `make test`. PYTEST_DURATIONS: how many of the
## slowest tests each suite prints (0: every one).
INTEGRATION_WORKERS ?= $(PYTEST_WORKERS)
SMOKE_WORKERS ?= 3
PYTEST_DURATIONS ?= 30
RUN_ID ?= dy
SUITE_LOGS := build/test-logs
## Prints "<what>: <seconds since $$start> s" (from /proc/uptime, a monotonic clock).
SINCE = awk -v s="$$start" -v what=
## $(call PHASE_DONE,what): prints the phase's time (since $$begun) and the time since $$start,
## then starts the next phase.
PHASE_DONE = now=$$(cut -d' ' -f1 /proc/uptime); awk -v a="$$start" -v b="$$begun" -v c="$$now" \
	'BEGIN {printf "%s: %.1f s (%.1f s since make test began)\n", "$(1)", c - b, c - a}'; begun=$$now

.PHONY: venv up down status demo test lint unit integration smoke suites flaky clean

venv: $(VENV)/.installed

## The venv, installed again when pyproject.toml changes: with uv (from PyPI), or with pip
## when uv cannot be had. The venv is made without pip (ensurepip takes 10-30 s here) and the
## system's pip, when it has one, puts uv into it (pip --python); else the venv's own pip,
## installed then, does (uv puts pip into the venv either way). Python caches a module's
## bytecode at its first import; where PYTHONDONTWRITEBYTECODE is set it never does, so there
## uv compiles it all at install (as pip always does; about half a minute more on 2 cores), or
## every run would compile what it imports again. Times are read from /proc/uptime (monotonic).
UV_COMPILE := $(if $(PYTHONDONTWRITEBYTECODE),--compile-bytecode)
VENV_PIP := $(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip >/dev/null
$(VENV)/.installed: pyproject.toml
	@start=$$(cut -d' ' -f1 /proc/uptime); \
	test -x $(BIN)/python || $(PYTHON) -m venv --without-pip $(VENV) || exit 1; \
	if { $(PYTHON) -m pip --python $(BIN)/python install -q uv || { $(VENV_PIP) && $(BIN)/python -m pip install -q uv; }; } \
	    >$(VENV)/uv-install.log 2>&1 && $(BIN)/uv --version >/dev/null 2>&1; then \
	  how=uv; $(BIN)/uv pip install -q $(UV_COMPILE) --python $(BIN)/python --upgrade-package pip pip -e '.[dev]' || exit 1; \
	else \
	  how=pip; echo "venv: uv cannot be had (see $(VENV)/uv-install.log); installing with pip"; \
	  { $(VENV_PIP); } && $(BIN)/python -m pip install -q --upgrade pip && $(BIN)/python -m pip install -q -e '.[dev]' || exit 1; \
	fi; \
	awk -v s="$$start" -v how="$$how" '{printf "[%5.1f s] venv: installed with %s\n", $$1 - s, how}' /proc/uptime
	@touch $@

## Bring the local cloud up: apt packages, dockerd, node image, emulators, config. apt
## installs mmdebstrap (with the system's python, stdlib only) while the venv installs.
SYSTEM_AND_VENV = $(PYTHON) -m harness.cloud.system & early=$$!; \
	$(MAKE) --no-print-directory venv; made=$$?; wait $$early; [ $$made = 0 ]
up:
	@$(SYSTEM_AND_VENV) && $(BIN)/harness up

down: venv
	$(BIN)/harness down

status: venv
	$(BIN)/harness status

## The main job: launch the seed's comp_test.yaml on the local cloud, then tear it down.
demo: up
	$(BIN)/skycore launch tests/fixtures/comp_test.yaml -c comp-test --env RUN_ID=$(RUN_ID) -y --down
	@echo "demo: done. skycore and harness are in $(BIN); put them on your PATH with: source $(BIN)/activate"

## The whole test suite on both cores: the venv (apt packages beside it), then lint beside
## the unit tests (they need only the venv; mypy uses one core, each printed when it ends)
## while `harness up` brings the local cloud up (its lines prefixed "up: ", also kept in
## build/test-logs/up.log), then `suites`: integration and smoke side by side. Lint or unit
## failing stops it before the suites. Each phase's time is printed at its end.
test:
	@start=$$(cut -d' ' -f1 /proc/uptime); begun=$$start; mkdir -p $(SUITE_LOGS); \
	$(SYSTEM_AND_VENV) || exit 1; \
	$(call PHASE_DONE,test: venv and apt packages); \
	( set -o pipefail; $(BIN)/harness up 2>&1 | tee $(SUITE_LOGS)/up.log | sed -u 's/^/up: /' ) & cloud=$$!; \
	$(MAKE) --no-print-directory -j2 --output-sync=target lint unit; checks=$$?; \
	wait $$cloud; rup=$$?; \
	$(call PHASE_DONE,test: lint and unit with harness up beside them); \
	[ $$checks = 0 ] || { echo "test: lint or unit failed: the suites do not run"; exit 1; }; \
	[ $$rup = 0 ] || { echo "test: harness up failed (exit $$rup, $(SUITE_LOGS)/up.log)"; exit 1; }; \
	$(MAKE) --no-print-directory suites; rc=$$?; \
	$(call PHASE_DONE,test: suites); \
	exit $$rc

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy skycore harness
	$(BIN)/shellcheck -s bash skycore/node/*.sh

## Unit tests need no dockerd, emulator or FUSE.
unit: venv
	$(BIN)/pytest tests/unit -n $(PYTEST_WORKERS)

integration: venv
	$(BIN)/pytest tests/integration -n $(INTEGRATION_WORKERS) -rfE --durations=$(PYTEST_DURATIONS)

## integration and smoke side by side, each its own pytest session (INTEGRATION_WORKERS and
## SMOKE_WORKERS workers); both always run to the end and the target fails if either failed.
## Their lines are printed as they come, prefixed with the suite's name; each suite's whole
## output is kept in build/test-logs/, and its time and the failed tests of both are listed
## again at the very end (with the logs they point to, printed by the harness plugin in each
## suite's own summary).
suites: venv
	@mkdir -p $(SUITE_LOGS); start=$$(cut -d' ' -f1 /proc/uptime); \
	run() { ( set -o pipefail; $(MAKE) --no-print-directory $$1 2>&1 | tee $(SUITE_LOGS)/$$1.log | sed -u "s/^/$$1: /" ); rc=$$?; \
	  $(SINCE)"suites: $$1" -v rc=$$rc '{printf "%s: exit %d after %.1f s\n", what, rc, $$1 - s}' /proc/uptime > $(SUITE_LOGS)/$$1.time; \
	  return $$rc; }; \
	run integration & pi=$$!; run smoke & ps=$$!; \
	wait $$pi; ri=$$?; wait $$ps; rs=$$?; \
	for suite in integration smoke; do \
	  grep -E '^(FAILED|ERROR) ' $(SUITE_LOGS)/$$suite.log | cut -c1-400 | sed "s/^/suites: $$suite: /"; \
	done; \
	cat $(SUITE_LOGS)/integration.time $(SUITE_LOGS)/smoke.time; \
	echo "suites: integration exit $$ri, smoke exit $$rs (whole outputs: $(SUITE_LOGS)/)"; \
	[ $$ri = 0 ] && [ $$rs = 0 ]

## The smoke suite N times in a row (make flaky N=3): prints each run's time and result, and
## every test that failed at least once with its failure line. Exit 1 if any run failed.
## LOAD=1 keeps one core busy beside the runs (tools/cpu_hog.py).
N ?= 3
LOAD ?= 0
flaky: up
	$(BIN)/python tools/flaky.py --runs $(N) --logs $(SUITE_LOGS)/flaky $(if $(filter 1,$(LOAD)),--load) -- \
	  $(BIN)/pytest tests/smoke -n $(SMOKE_WORKERS) --dist loadgroup -rfE -p no:cacheprovider

## No --store: every registered store (built-ins and installed store packages) runs.
smoke: venv
	$(BIN)/pytest tests/smoke -n $(SMOKE_WORKERS) --dist loadgroup -rfE --durations=$(PYTEST_DURATIONS) --matrix-report bench/results/matrix-report.html

## One store by name or alias: make smoke-r2, make smoke-s3, make smoke-aws, ...
smoke-%: venv
	$(BIN)/pytest tests/smoke -n $(PYTEST_WORKERS) --dist loadgroup --store $*

clean:
	rm -rf $(VENV) .tox .mypy_cache .ruff_cache .pytest_cache

## The recipe matrix (tests/matrix): the same scenarios on s3 and gcs with skycore's mount
## recipe and with SkyPilot's (its venv installed first), one pytest session per store and
## recipe, then the side-by-side report (build/recipe-matrix/report.html and report.md).
## Every session runs to the end and a failed test still has its row in the report; the
## target then exits non-zero. Times are read from /proc/uptime (monotonic).
MATRIX_DIR := build/recipe-matrix
MATRIX_STORES ?= s3 gcs
MATRIX_RECIPES ?= skycore skypilot
.PHONY: skypilot-matrix
skypilot-matrix: venv
	@start=$$(cut -d' ' -f1 /proc/uptime); rc=0; \
	$(BIN)/python -m harness.recipes.skypilot_venv || rc=1; \
	rm -f $(MATRIX_DIR)/*.json; \
	for recipe in $(MATRIX_RECIPES); do for store in $(MATRIX_STORES); do \
	  begun=$$(cut -d' ' -f1 /proc/uptime); \
	  $(BIN)/pytest tests/matrix -n $(PYTEST_WORKERS) --dist loadgroup -rfE \
	    --store $$store --recipe $$recipe || rc=1; \
	  awk -v s="$$begun" -v run="$$store $$recipe" \
	    '{printf "skypilot-matrix: %s: %.1f s\n", run, $$1 - s}' /proc/uptime; \
	done; done; \
	$(BIN)/python -m harness.recipes.matrix_report $(MATRIX_DIR) -o $(MATRIX_DIR)/report.html || rc=1; \
	awk -v s="$$start" '{printf "skypilot-matrix: %.1f s in all\n", $$1 - s}' /proc/uptime; \
	exit $$rc
