# Two entry points that work on a fresh machine: `make demo` and `make test`.
# Each creates .venv on first use. Python 3.10 (what ROS 2 Humble runs) is preferred when present.
PYTHON ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.10.*/bin/python3.10) $(shell command -v python3.10 2>/dev/null) python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint typecheck pytest bench bench-full soak clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.core: $(BIN)/python setup.py
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.test: $(VENV)/.core setup.py
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	# The test peer sequence-ai 0.1.0 installs its own `sequence-ai` script; put ours back.
	$(BIN)/python -m pip install -q --no-deps --force-reinstall -e .
	touch $@

demo: $(VENV)/.core
	$(BIN)/python -m sequence_ai_core.demo

lint: $(VENV)/.test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check sequence_ai_core sequence_ai_ros

typecheck: $(VENV)/.test
	$(BIN)/mypy sequence_ai_core

pytest: $(VENV)/.test
	$(BIN)/python -m pytest -q

test: lint typecheck pytest

bench: $(VENV)/.test
	$(BIN)/python -m bench

bench-full: $(VENV)/.test
	$(BIN)/python -m bench --full

soak: $(VENV)/.test
	$(BIN)/python -m pytest -q -s -m soak

clean:
	rm -rf $(VENV) build *.egg-info
