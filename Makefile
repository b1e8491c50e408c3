# The two commands of the README. Both build .venv from the project's own files.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -qq --upgrade pip
# setuptools boxes a UserWarning about editable installs on every install (each of its
# editable modes has one); it says nothing about this project, so a planner is not shown it.
# -qq: pip's errors only, not its warnings about the machine's own index settings
	@PYTHONWARNINGS=ignore::UserWarning $(PY) -m pip install -qq -e '.[test]'
# the package's bytecode, once: a shell with PYTHONDONTWRITEBYTECODE set would else
# compile reserve's modules afresh on every run (about 0.25 s)
	@$(PY) -m compileall -q reserve
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/reserve select --budget 30 --overwrite

# Quiet on success (ruff --quiet prints only what it finds); every finding is printed.
lint: $(STAMP)
	@$(VENV)/bin/ruff check --quiet .
	@$(VENV)/bin/ruff format --check --quiet .

# One worker per core; a test file stays on one worker (its module fixtures are built once).
# On success it prints the dots and the summary line; a failure prints its report.
test: lint
	@$(VENV)/bin/pytest -q -n auto --dist loadfile

bench: $(STAMP)
	$(PY) -m benchmarks.bench_table2
	$(PY) -m benchmarks.bench_scale

clean:
	rm -rf $(VENV) build *.egg-info
