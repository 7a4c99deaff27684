# Newcomer commands (see README.md):
#   make demo       set up .venv (first time ~1-2 min), then fuse the bundled BERT QKV graph
#   make test       the full test suite, as CI runs it (.ci/run)
#   make test-fast  the suite without the tests marked slow (about 1.5 min on 2 cores; for edits)
#   make analysis   the research scripts under analysis/
#   make fuzz       a differential fuzzing campaign: MINUTES=10 SEED=0 FUZZ_JOBS=2 [CASES=N]
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# pytest-xdist workers: one per core (set JOBS=1 to run in one process)
JOBS ?= auto

.PHONY: demo test test-fast lint analysis figures fuzz clean

$(VENV)/.installed: setup.cfg pyproject.toml
	@echo "polyfuse setup [1/4]: creating $(VENV) with $(PYTHON)"
	@$(PYTHON) -m venv $(VENV)
	@echo "polyfuse setup [2/4]: upgrading pip"
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@echo "polyfuse setup [3/4]: installing polyfuse and its dependencies from PyPI" \
		"(islpy-barvinok, pyopencl, onnx, onnxruntime, ...; about a minute)"
	@$(BIN)/python -m pip install --quiet -e '.[test]'
	@echo "polyfuse setup [4/4]: checking that an OpenCL device can build a kernel"
	@bash .ci/ensure-opencl $(BIN)/python
	@touch $@

demo: $(VENV)/.installed
	$(BIN)/polyfuse demo

# pytest exits 5 when it collected no test: that is a failure here, not a pass.
test: $(VENV)/.installed
	$(BIN)/python -m pytest -n $(JOBS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$rc

test-fast: $(VENV)/.installed
	$(BIN)/python -m pytest -n $(JOBS) -m "not slow"

lint: $(VENV)/.installed
	$(BIN)/ruff check polyfuse tests analysis docs

analysis: $(VENV)/.installed
	@for s in analysis/*.py; do echo "== $$s"; $(BIN)/python $$s || exit 1; done

# random ONNX models against onnxruntime and mutated example programs against their unfused
# model; failures (with a repro.sh each) and summary.json under FUZZ_OUT
MINUTES ?= 10
SEED ?= 0
FUZZ_JOBS ?= 2
FUZZ_OUT ?= out/fuzz-$(SEED)
fuzz: $(VENV)/.installed
	$(BIN)/python -m polyfuse.oracle.fuzz --minutes $(MINUTES) --seed $(SEED) \
		--jobs $(FUZZ_JOBS) --out $(FUZZ_OUT) $(if $(CASES),--cases $(CASES))

figures: $(VENV)/.installed
	$(BIN)/python docs/make_figures.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
