# Two commands set everything up on a fresh machine (Python 3.11, pip and gcc):
#   make demo   - the main job: installs only what it needs (requirements/demo.txt)
#   make test   - the test suite: installs the rest (requirements/test.txt)
#   make test-numpy1 - a quick subset of the suite under numpy 1.26 in its own venv
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

.PHONY: demo test test-all test-numpy1 venv bench lock clean

# numpy 1.x support is checked, not claimed: a second venv with the test lock but numpy
# 1.26.4 (Fluid 1.x users run numpy 1.x; ray's launcher tests stay in .venv), and the tests
# most sensitive to numpy's version (dtype promotion, scalar conversion, 0-D values)
NP1_VENV := .venv-np1
NP1_PY := $(NP1_VENV)/bin/python
NP1_NUMPY := numpy==1.26.4
NP1_STAMP := $(NP1_VENV)/.installed-$(shell cat pyproject.toml requirements/test.txt | cksum | cut -d' ' -f1)
NP1_TESTS := tests/core tests/test_zero_d.py tests/test_fluid1_shapes.py \
    tests/ops/test_tensor_ops.py tests/ops/test_math_ops.py tests/ops/test_reduce_ops.py \
    tests/ops/test_logic_ops.py tests/ops/test_quantize_ops.py tests/ops/test_loss_ops.py \
    tests/ops/test_sampled_ops.py tests/ops/test_mask_targets_ops.py tests/ops/test_sparse_kernels.py \
    tests/test_optimizers.py tests/test_io.py tests/distributed/test_remote_prefetch.py

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
$(NP1_PY):
	$(PY) -m venv $(NP1_VENV)

$(NP1_STAMP): pyproject.toml requirements/test.txt | $(NP1_PY)
	@echo "make: installing the test lock with $(NP1_NUMPY) into $(NP1_VENV)/"
	grep -vE '^(numpy|ray)==' requirements/test.txt > $(NP1_VENV)/requirements.txt
	$(NP1_PY) -m pip install --progress-bar on -r $(NP1_VENV)/requirements.txt '$(NP1_NUMPY)'
	$(NP1_PY) -m pip install --progress-bar on --no-deps -e .
	@rm -f $(NP1_VENV)/.installed-*; touch $@

test-numpy1: $(NP1_STAMP)
	OPENBLAS_NUM_THREADS=1 $(NP1_PY) -m pytest -q -n 2 -m "not slow" $(NP1_TESTS)

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
	rm -rf $(VENV) $(NP1_VENV) build *.egg-info
