# The two commands of the README: `make demo` and `make test`. Both install what they need.
PY ?= python3
DEMO ?= fixtures/tf2torch/mnist_convnet

.PHONY: install demo test bench docs

install:
	$(PY) -m pip install --quiet -e '.[verify,dev]'

# Translate a bundled Keras model to PyTorch, run the result (no TensorFlow in that process),
# then prove it computes the same model.
demo: install
	mkdir -p out
	$(PY) -m fwport tf2torch $(DEMO)/model.py -o out/model_torch.py
	$(PY) scripts/run_translated.py out/model_torch.py $(DEMO)/verify.json
	$(PY) -m fwport verify $(DEMO)/model.py out/model_torch.py --model build_model --input 'float32[2,28,28,1]' --check forward,grad,step

test: install
	$(PY) -m pytest -q

bench: install
	$(PY) bench/bench_translate.py
	$(PY) bench/bench_verify.py

docs:
	$(PY) -m fwport.core.docgen
