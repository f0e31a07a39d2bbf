"""A layer of a functional model called on a value the builder computes (``layers.Embedding(n, d)(tf.range(n))``,
the positional embedding of many transformer examples): Keras calls it eagerly where the model is built, so the
model holds its output as a constant, the layer is not in ``model.layers`` and its weights are never trained.
fwport refuses it with that explanation (an nn.Embedding would be a different, trained model), and the claim is
checked against Keras (passes/functional.py)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

PACK = load_pack("tf2torch")

POSITIONS = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

NUM = 6
DIM = 8


def build():
    inputs = keras.Input(shape=(NUM, 3))
    x = layers.Dense(DIM)(inputs)
    positions = tf.range(start=0, limit=NUM, delta=1)
    pos = layers.Embedding(input_dim=NUM, output_dim=DIM)(positions)
    x = x + pos
    x = layers.GlobalAveragePooling1D()(x)
    return keras.Model(inputs, layers.Dense(2)(x))
'''


def _errors(src: str) -> list:
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)
    return [(f.line, f.message) for f in r.findings if f.severity.value == "error"]


@pytest.mark.parametrize("call", ["(positions)", "(tf.range(NUM))", "(np.arange(NUM))"])
def test_a_layer_called_on_a_value_of_the_builder_is_refused_with_why(call):
    src = POSITIONS.replace("(positions)", call).replace("import tensorflow as tf", "import numpy as np\nimport tensorflow as tf")
    errs = _errors(src)
    line = src.lstrip("\n").split("\n").index(f"    pos = layers.Embedding(input_dim=NUM, output_dim=DIM){call}") + 1
    assert any(at == line and "layers.Embedding(...) called on " in m and "its weights are never trained" in m
               for at, m in errs), errs
    assert any("left as written" in m for _, m in errs)


@pytest.mark.parametrize("old, new", [
    ("(positions)", "(positions.numpy() if positions else None)"),
    ("tf.range(start=0, limit=NUM, delta=1)", "make_positions(NUM)"),  # a function fwport does not know
])
def test_an_unknown_value_keeps_the_general_message(old, new):
    errs = _errors(POSITIONS.replace(old, new))
    assert not any("never trained" in m for _, m in errs), errs
    assert any("must be a tensor of the model" in m for _, m in errs), errs


def test_keras_keeps_that_layer_out_of_the_model(tmp_path):
    """The finding's claim, checked: the Embedding is not in model.layers, and no weight of it is trained."""
    pytest.importorskip("tensorflow")
    (tmp_path / "m.py").write_text(textwrap.dedent(POSITIONS).lstrip("\n"))
    probe = ("import m; model = m.build(); "
             "print(sorted(type(l).__name__ for l in model.layers)); "
             "print(sorted(tuple(w.shape) for w in model.trainable_weights))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    names, weights = out.stdout.strip().splitlines()[-2:]
    assert "Embedding" not in names and "Dense" in names
    assert "(6, 8)" not in weights and "(3, 8)" in weights
