"""compile of a keras.Model subclass whose call returns several outputs (issue 9, tf2torch). Keras gives each output
its loss (one loss: the same for each; a list or dict: one per output) and trains on their sum times loss_weights=;
the written loops compute one loss of one output: with one loss the translation used to write them anyway (the tuple
of outputs reached the loss and failed at run time). Now the compile is an error naming the outputs, as a list or
dict of losses already was; a subclass of one output still compiles.

Numbers: Keras's evaluate of such a model with loss="mse" is the sum of each output's MSE (the sum the error message
tells to write), computed by Keras and by NumPy from the model's outputs.
"""
from __future__ import annotations

import textwrap

import numpy as np

from helpers import error_findings
from runners import run_side

from fwport.core.pipeline import translate_source

SRC = '''
import numpy as np
import keras
from keras import layers


class Two(keras.Model):
    def __init__(self):
        super().__init__()
        self.a = layers.Dense(3)
        self.b = layers.Dense(1)

    def call(self, x):
        return self.a(x), self.b(x)


model = Two()
model.compile(optimizer="sgd", loss="mse")
x = np.linspace(-1, 1, 32, dtype="float32").reshape(8, 4)
ya = np.linspace(0, 1, 24, dtype="float32").reshape(8, 3)
yb = np.linspace(1, 0, 8, dtype="float32").reshape(8, 1)
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
a, b = model(x)
loss = model.evaluate(x, [ya, yb], batch_size=8, verbose=0)
print("RESULT " + json.dumps({"evaluate": loss, "a": np.asarray(a).tolist(), "b": np.asarray(b).tolist()}))
'''


def _errors(src: str) -> list:
    r = translate_source(textwrap.dedent(src).lstrip("\\n"), "model.py")
    return [f.message for f in error_findings(r)]


def test_keras_sums_each_outputs_loss(tmp_path):
    out = run_side(tmp_path / "keras", "keras", SRC, DRIVER, "keras")
    total = out["evaluate"][0] if isinstance(out["evaluate"], list) else out["evaluate"]
    a, b = np.array(out["a"]), np.array(out["b"])
    ya = np.linspace(0, 1, 24).reshape(8, 3)
    yb = np.linspace(1, 0, 8).reshape(8, 1)
    np.testing.assert_allclose(total, ((a - ya) ** 2).mean() + ((b - yb) ** 2).mean(), rtol=1e-5)
    assert ((b - yb) ** 2).mean() > 0.01  # the second output's loss matters


def test_one_loss_for_several_subclass_outputs_is_an_error():
    found = _errors(SRC + "model.fit(x, [ya, yb], epochs=1, verbose=0)\n")
    assert any("call returns several outputs" in m and "(self.a(x), self.b(x))" in m for m in found), found
    listed = _errors(SRC.replace('loss="mse"', 'loss=["mse", "mae"], loss_weights=[1.0, 0.5]')
                     + "model.fit(x, [ya, yb], epochs=1, verbose=0)\n")
    assert any("loss per output" in m for m in listed), listed
    one = SRC.replace("return self.a(x), self.b(x)", "return self.a(x)")
    assert _errors(one + "model.fit(x, ya, epochs=1, verbose=0)\n") == []
