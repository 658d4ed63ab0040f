# Two commands for a newcomer: `make demo` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The CPU build of torch is installed before the project so that pip never pulls a CUDA build.
# Elsewhere, override it: `make TORCH_SPEC=torch demo` after choosing your index (see README).
TORCH_SPEC ?= torch==2.13.0
THREADS ?= 1
TIMM_SPEC ?= timm==1.0.29
STAMP  := $(VENV)/.foveal-installed

.PHONY: setup demo test test-slow lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/pip install --quiet -e ".[dev]"
	# timm for the tests and benchmarks that swap foveal's attention into its ViTs, without its dependencies:
	# they would pull torchvision and with it a CUDA torch (tests/_timm.py says how timm imports without it)
	$(BIN)/pip install --quiet --no-deps "$(TIMM_SPEC)"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/foveal demo --threads $(THREADS)

# One test process per core (pytest-xdist); each test runs on one thread (tests/conftest.py).
test: $(STAMP)
	$(BIN)/python -m pytest -n auto

# The long end-to-end checks (recipes' quick presets converging); CI runs them after `make test`.
test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow -n auto

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks studies scripts
	$(BIN)/ruff format --check src tests benchmarks studies scripts
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/foveal bench

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
