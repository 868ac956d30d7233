# skycore: every entry point a user or CI needs. All install steps live here and in
# harness/system.py (apt packages), so a fresh machine works with no prior set-up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTEST_WORKERS ?= 2
RUN_ID ?= dy

.PHONY: venv up down status demo test lint unit integration smoke clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $@

## Bring the local cloud up: apt packages, dockerd, node image, emulators, config.
up: venv
	$(BIN)/harness up

down: venv
	$(BIN)/harness down

status: venv
	$(BIN)/harness status

## The main job: launch the seed's comp_test.yaml on the local cloud, then tear it down.
demo: up
	$(BIN)/skycore launch tests/fixtures/comp_test.yaml -c comp-test --env RUN_ID=$(RUN_ID) -y --down

## The whole test suite: lint, unit tests (no cloud), integration tests (real emulators,
## dockerd, FUSE), smoke tests on every registered store.
test: up
	$(MAKE) --no-print-directory lint unit integration smoke

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy skycore harness

## Unit tests need no dockerd, emulator or FUSE.
unit: venv
	$(BIN)/pytest tests/unit -n $(PYTEST_WORKERS)

integration: venv
	$(BIN)/pytest tests/integration -n $(PYTEST_WORKERS)

## No --store: every registered store (built-ins and installed backend packages) runs.
smoke: venv
	$(BIN)/pytest tests/smoke -n $(PYTEST_WORKERS) --dist loadgroup --matrix-report bench/results/matrix-report.html

## One store by name or alias: make smoke-r2, make smoke-s3, make smoke-aws, ...
smoke-%: venv
	$(BIN)/pytest tests/smoke -n $(PYTEST_WORKERS) --dist loadgroup --store $*

clean:
	rm -rf $(VENV) .tox .mypy_cache .ruff_cache .pytest_cache
