# The two commands of the README, and what CI runs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup serve test clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $@

setup: $(VENV)/.installed

# Set up, build the synthetic demo data set and serve it on http://127.0.0.1:8000.
serve: setup
	$(BIN)/metrics-kit serve

# Every test: unit, golden values, HTTP against the real server, schemathesis.
test: setup
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
