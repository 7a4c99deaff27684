# Newcomer commands: `make demo` (set up + run the main job), `make test` (set up + run the tests).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint clean

$(VENV)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	bash .ci/ensure-opencl $(BIN)/python
	touch $@

demo: $(VENV)/.installed
	$(BIN)/polyfuse demo

# pytest exits 5 when it collected no test: that is a failure here, not a pass.
test: $(VENV)/.installed
	$(BIN)/python -m pytest -q; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$rc

lint: $(VENV)/.installed
	$(BIN)/ruff check polyfuse tests analysis

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
