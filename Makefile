# One command each: `make demo` (set up + run the main job), `make test` (set up + run the tests).
# The environment comes from requirements/lock.txt (`make lock` re-resolves it; see README "Dependencies").
.PHONY: setup lock lock-upgrade demo test test-fast lint format typecheck bench ui

VENV ?= .venv
export VENV

setup:
	bash scripts/setup.sh

lock:
	bash scripts/lock.sh

lock-upgrade:
	UPGRADE=1 bash scripts/lock.sh

demo: setup
	$(VENV)/bin/fm --root $${FM_ROOT:-./fm_data} demo

test: setup lint typecheck
	$(VENV)/bin/python -m pytest -q

test-fast: setup
	$(VENV)/bin/python -m pytest -q -m "not slow"

lint:
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

format:
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

typecheck:
	$(VENV)/bin/pyright --pythonpath $(VENV)/bin/python

bench: setup
	$(VENV)/bin/python bench/pipeline.py
	$(VENV)/bin/python bench/loader.py
	$(VENV)/bin/python bench/dedup.py
	$(VENV)/bin/python bench/tokenizer_speed.py
	$(VENV)/bin/python bench/scale.py
	$(VENV)/bin/python bench/fixed_costs.py

ui: setup
	FM_ROOT=$${FM_ROOT:-$$(pwd)/fm_data} DAGSTER_HOME=$${DAGSTER_HOME:-$$(pwd)/fm_data/dagster_home} sh -c \
	  '$(VENV)/bin/python -m fm_assets.defs.instance "$$DAGSTER_HOME" && exec $(VENV)/bin/dagster dev -w workspace.yaml'
