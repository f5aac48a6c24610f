# The README's commands (make lab, make test; make check, make serve, make dashboard), and what CI runs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The venv of `make test-lowest`, made anew by every run.
LOWEST := .venv-lowest
# --prefer-binary: a wheel of an older release rather than building a newer sdist. pip keeps the
# wheels it builds (pyspark's, ~4 min from its sdist) in its cache, so a clean .venv reinstalls fast.
PIP := $(BIN)/python -m pip install --quiet --prefer-binary

.PHONY: setup lab dashboard serve check docs test test-lowest system-packages clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip

# JupyterLab and the HTTP server: what `make lab` and `make serve` use.
$(VENV)/.lab: pyproject.toml | $(BIN)/python
	$(PIP) -e '.[lab,serve]'
	touch $@

# Voilà too: what `make dashboard` uses ([dashboard] includes [lab]).
$(VENV)/.dashboard: pyproject.toml | $(BIN)/python
	$(PIP) -e '.[dashboard,serve]'
	touch $@

# Everything the tests and checks need ([test] includes [lab], [serve] and [dashboard]).
$(VENV)/.test: pyproject.toml | $(BIN)/python
	$(PIP) -e '.[test,spark]'
	touch $@

setup: $(VENV)/.test

# Set up, build the synthetic demo data set and its aggregates, and open JupyterLab on notebooks/.
lab: $(VENV)/.lab
	$(BIN)/metrics-kit lab

# Set up, build the synthetic demo data set and serve the quickstart notebook as a dashboard (Voilà:
# its controls and charts, no code) on 127.0.0.1; the address to open is printed with its token.
# Another notebook: make dashboard NOTEBOOK=dex
NOTEBOOK ?= quickstart
dashboard: $(VENV)/.dashboard
	$(BIN)/metrics-kit dashboard $(NOTEBOOK)

# Set up, build the synthetic demo data set and serve it on http://127.0.0.1:8000.
serve: $(VENV)/.lab
	$(BIN)/metrics-kit serve

# Lint, formatting and types: ruff over the code, tests, benchmarks and notebooks; mypy over the
# package (strict on spec/ and client/, see pyproject.toml).
check: $(VENV)/.test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The documentation site, from docs/ (Sphinx, the PyData theme, MyST-NB: see docs/conf.py), into
# docs/_build/html. Warnings are errors; --keep-going lists them all before failing. -E reads every
# source again, so that a warning of an unchanged page is not skipped.
docs: $(VENV)/.test
	$(BIN)/python -m sphinx -b html -E -W --keep-going -q -d docs/_build/doctrees docs docs/_build/html

# The Debian packages the tests need (.ci/apt-packages): installed when missing if we are root,
# else the command to run is printed.
system-packages:
	@bash .ci/system-packages

# Every test: the checks, the unit and service tests at the lowest versions we declare
# (test-lowest), the site that `make docs` builds, then at the newest every test: unit, golden
# values, HTTP against the real server, schemathesis, the notebooks (nbval, papermill), the browser
# tests (the notebooks in JupyterLab, their charts pointed at and zoomed, the notebooks as dashboards
# in Voilà, and the built site) and the Spark builds. `-m unit` and the
# other markers in pyproject.toml select one kind: .venv/bin/python -m pytest -m unit
# --durations: the slowest tests in the log, to keep CI inside its time.
test: system-packages check test-lowest docs
	$(BIN)/python -m pytest --durations=15

# The unit and service tests with every direct dependency at the lowest version pyproject.toml
# allows (uv's lowest-direct resolution; what they depend on resolves as usual), in a venv of their
# own made anew: a floor that no longer works fails here rather than in an analyst's install. Raise
# the floor (and environment.yml's) rather than skip a test. Left to the full run: the slow tests; the
# //metrics case of test_unknown_path, whose own client (requests before 2.33) sends /metrics; and
# test_no_transactions_give_no_rows, whose empty pandas frame has untyped (object) columns before pandas 3;
# and test_metrics_table_is_current: docs/metrics.md holds the SQL as the newest Ibis and sqlglot print
# it (test_definitions runs the queries at the lowest versions too, and gets the build's values).
test-lowest: $(VENV)/.test
	rm -rf $(LOWEST)
	$(BIN)/uv venv --quiet --python $(BIN)/python $(LOWEST)
	$(BIN)/uv pip install --quiet --python $(LOWEST)/bin/python --resolution lowest-direct -e '.[test]'
	$(LOWEST)/bin/python -m pytest -p no:cacheprovider -m "(unit or service) and not slow" tests/unit tests/service \
		--deselect "tests/service/test_http.py::test_unknown_path[//metrics]" \
		--deselect tests/service/test_engine_passes.py::test_no_transactions_give_no_rows \
		--deselect tests/unit/test_docs.py::test_metrics_table_is_current

clean:
	rm -rf $(VENV) $(LOWEST) .pytest_cache .hypothesis .mypy_cache .ruff_cache docs/_build docs/generated
