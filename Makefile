# Two commands set everything up on a fresh machine (Python 3.11, pip, gcc):
#   make demo   - the main job
#   make test   - the test suite
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)

.PHONY: demo test venv bench clean

# exact versions from constraints.txt; pyproject.toml states the compatible ranges
$(STAMP): pyproject.toml constraints.txt
	@test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q -c constraints.txt -e '.[test,demo,ray]'
	@rm -f $(VENV)/.installed-*; touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VPY) examples/demo.py

test: $(STAMP)
	OPENBLAS_NUM_THREADS=1 $(VPY) -m pytest -q -n 2 tests

bench: $(STAMP)
	$(VPY) benchmarks/dispatch.py

clean:
	rm -rf $(VENV) build *.egg-info
