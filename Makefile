# The README's commands (make lab, make test; make serve), and what CI runs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup lab serve test clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $@

setup: $(VENV)/.installed

# Set up, build the synthetic demo data set and its aggregates, and open JupyterLab on notebooks/.
lab: setup
	$(BIN)/metrics-kit lab

# Set up, build the synthetic demo data set and serve it on http://127.0.0.1:8000.
serve: setup
	$(BIN)/metrics-kit serve

# Every test: unit, golden values, HTTP against the real server, schemathesis, and the notebooks
# (nbval on their stored outputs, papermill with other parameters; see notebooks/README.md).
test: setup
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
