# One command each: `make demo` (set up + run the main job), `make test` (set up + run the tests).
.PHONY: setup demo test test-fast lint format typecheck bench ui

setup:
	bash scripts/setup.sh

demo: setup
	.venv/bin/fm --root $${FM_ROOT:-./fm_data} demo

test: setup lint typecheck
	.venv/bin/python -m pytest -q

test-fast: setup
	.venv/bin/python -m pytest -q -m "not slow"

lint:
	.venv/bin/ruff format --check .
	.venv/bin/ruff check .

format:
	.venv/bin/ruff format .
	.venv/bin/ruff check --fix .

typecheck:
	.venv/bin/pyright

bench: setup
	.venv/bin/python bench/pipeline.py
	.venv/bin/python bench/loader.py
	.venv/bin/python bench/dedup.py
	.venv/bin/python bench/tokenizer_speed.py
	.venv/bin/python bench/scale.py

ui: setup
	FM_ROOT=$${FM_ROOT:-$$(pwd)/fm_data} DAGSTER_HOME=$${DAGSTER_HOME:-$$(pwd)/fm_data/dagster_home} sh -c \
	  '.venv/bin/python -m fm_assets.defs.instance "$$DAGSTER_HOME" && exec .venv/bin/dagster dev -w workspace.yaml'
