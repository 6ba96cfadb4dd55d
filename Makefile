# fwbridge: `make demo` and `make test` work on a fresh clone of a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: demo test test-fast lint pytest bench clean

# The first run downloads and installs about 60 packages: pip names each one as it goes
# (a progress bar on a terminal, plain lines in a CI log), so a minute is not silent.
$(STAMP): pyproject.toml
	@echo "setting up $(VENV): fwbridge (editable) with every extra; about a minute on a fresh machine"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --progress-bar on --no-color \
	    -e '.[test,plot,ros2,mcap,foxglove,canstacks]'
	touch $(STAMP)
	@echo "$(VENV) is ready"

## demo: the main job, simulated end to end (no hardware, no network)
demo: $(STAMP)
	$(BIN)/fwbridge demo

## test: every test, plus ruff and mypy
test: lint pytest

## test-fast: ruff, mypy and the in-process tests: every test but those that start a
## process, open a pty, run QEMU or network namespaces (tests/kinds.py marks them) or are slow
FAST := not (process or pty or qemu or netns or slow)
test-fast: override PYTEST_ARGS += -m "$(FAST)"
test-fast: lint pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python build_backend/typecheck.py

# pytest exits 5 when it collected no test: that is a broken suite, not a pass.
pytest: $(STAMP)
	@$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests" >&2; exit 1; fi; \
	exit $$rc

## bench: every benchmark, figures and baselines from one run
bench: $(STAMP)
	$(BIN)/python -m bench.report --plots

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
