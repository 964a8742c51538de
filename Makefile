# Two commands set everything up on a fresh machine (Python 3.11, pip and gcc):
#   make demo   - the main job: installs only what it needs (requirements/demo.txt)
#   make test   - the test suite: installs the rest (requirements/test.txt)
# The locks are generated from pyproject.toml by pip-tools: `make lock` regenerates them
# (keeping the pins that still fit; `make lock UPGRADE=1` takes the newest that fit).
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
PIP := $(VPY) -m pip install --progress-bar on
stamp = $(VENV)/.installed-$(1)-$(shell cat pyproject.toml requirements/$(1).txt | cksum | cut -d' ' -f1)
DEMO_STAMP := $(call stamp,demo)
TEST_STAMP := $(call stamp,test)
COMPILE := $(VENV)/bin/pip-compile --quiet --allow-unsafe --strip-extras --no-emit-find-links \
           --no-emit-index-url $(if $(UPGRADE),--upgrade) pyproject.toml

.PHONY: demo test test-all venv bench lock clean

$(VPY):
	$(PY) -m venv $(VENV)

# each lock is complete (every package pinned), so pip installs it as it is, then the
# package itself without resolving anything
$(DEMO_STAMP): pyproject.toml requirements/demo.txt | $(VPY)
	@echo "make: installing what the demo needs (requirements/demo.txt) into $(VENV)/"
	$(PIP) -r requirements/demo.txt
	$(PIP) --no-deps -e .
	@rm -f $(VENV)/.installed-demo-*; touch $@

$(TEST_STAMP): pyproject.toml requirements/test.txt | $(VPY)
	@echo "make: installing the test suite's packages (requirements/test.txt) into $(VENV)/"
	$(PIP) -r requirements/test.txt
	$(PIP) --no-deps -e .
	@rm -f $(VENV)/.installed-test-*; touch $@

venv: $(TEST_STAMP)

demo: $(DEMO_STAMP)
	$(VPY) examples/demo.py

# the CI suite; test-all adds the slow tier (tests/conftest.py: SLOW)
test: $(TEST_STAMP)
	OPENBLAS_NUM_THREADS=1 $(VPY) -m pytest -q -n 2 -m "not slow" tests

test-all: $(TEST_STAMP)
	OPENBLAS_NUM_THREADS=1 $(VPY) -m pytest -q -n 2 tests

bench: $(TEST_STAMP)
	$(VPY) benchmarks/dispatch.py

lock: | $(VPY)
	$(PIP) 'pip-tools>=7.4,<8'
	$(COMPILE) --extra demo --output-file requirements/demo.txt
	$(COMPILE) --extra test --extra ray --extra tensorboard --extra examples \
	    --output-file requirements/test.txt

clean:
	rm -rf $(VENV) build *.egg-info
