# Quickstart: `make run` (set up + main example) and `make test` (set up + tests).
# Finds a Python >= 3.12: $(PYTHON) if given, else pyenv's 3.12/3.13, else python3.13/3.12/python3 on PATH.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

find_python = $(shell \
  for c in "$(PYTHON)" "$$(pyenv prefix 3.12 2>/dev/null)/bin/python" "$$(pyenv prefix 3.13 2>/dev/null)/bin/python" \
           python3.13 python3.12 python3; do \
    [ -n "$$c" ] || continue; \
    if command -v "$$c" >/dev/null 2>&1 && "$$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then \
      echo "$$c"; break; fi; done)

.PHONY: setup run test lint test-slow bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@PYBIN="$(find_python)"; \
	if [ -z "$$PYBIN" ]; then echo "error: eqdsl needs Python >= 3.12 (egglog 14); none found. Set PYTHON=/path/to/python3.12" >&2; exit 1; fi; \
	echo "using $$PYBIN"; \
	[ -x $(PY) ] || "$$PYBIN" -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,onnx,qgym,sweep,ray]'
	@touch $(STAMP)

run: setup
	$(VENV)/bin/eqdsl run examples/arith/config.yaml
	$(VENV)/bin/eqdsl run examples/sharing/config.yaml
	$(VENV)/bin/eqdsl run examples/onnx/config.yaml

test: setup lint
	$(PY) -m pytest -q

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

test-slow: setup
	$(PY) -m pytest -q -m slow

bench: setup
	$(PY) benchmarks/extract.py

clean:
	rm -rf $(VENV) results .pytest_cache
