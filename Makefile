# The two commands of the README: `make demo` and `make test`. Both install what they need.
#
# Where: the active virtual environment ($VIRTUAL_ENV), else a project one in .venv, created on
# first use from $(PYTHON). Never the system Python: a distribution's Python refuses pip installs
# (PEP 668, "externally managed") and nothing here needs --break-system-packages.
# .venv sees the base Python's packages (--system-site-packages): a machine that already has
# torch/TensorFlow installed (CI) reuses them instead of downloading gigabytes again.
PYTHON ?= python3
VENV ?= .venv
DEMO ?= fixtures/tf2torch/mnist_convnet

ifeq ($(strip $(VIRTUAL_ENV)),)
PY ?= $(VENV)/bin/python
ENV := $(VENV)/bin/python
else
PY ?= python3
ENV :=
endif

.PHONY: install demo test bench docs

$(VENV)/bin/python:
	@echo "creating the virtual environment $(VENV) (from $(PYTHON), reusing its installed packages)"
	@$(PYTHON) -m venv --system-site-packages $(VENV) || { rm -rf $(VENV); \
	  echo "make: cannot create $(VENV) with '$(PYTHON) -m venv'; on Debian/Ubuntu: apt install python3-venv" \
	       "(or activate a virtual environment of your own and run make again)" >&2; exit 1; }

install: $(ENV)
	$(PY) -m pip install --quiet -e '.[verify,dev]'

# Translate a bundled Keras model to PyTorch, run the result (no TensorFlow in that process),
# then prove it computes the same model.
demo: install
	mkdir -p out
	$(PY) -m fwport tf2torch $(DEMO)/model.py -o out/model_torch.py
	$(PY) scripts/run_translated.py out/model_torch.py $(DEMO)/verify.json
	$(PY) -m fwport verify $(DEMO)/model.py out/model_torch.py --model build_model --input 'float32[2,28,28,1]' --check forward,grad,step

# The suite runs on every core (pytest-xdist), each test file whole on one worker (--dist loadfile), so a
# file's module fixtures (a translation its tests share) are built once. `make test JOBS=0`: one process.
# --durations: the slowest tests close every run's log (the CI budget is 90 minutes; watch them there).
JOBS ?= auto
test: install
	$(PY) -m pytest -q -n $(JOBS) --dist loadfile --durations=30 $(PYTEST_ARGS)

bench: install
	$(PY) bench/bench_translate.py
	$(PY) bench/bench_verify.py

docs: $(ENV)
	$(PY) -m fwport.core.docgen
