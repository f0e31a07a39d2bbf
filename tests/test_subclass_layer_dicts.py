"""Keras layers held in a dict by a Model subclass (``self.heads = {"a": layers.Dense(2)}``, ``dict(c=...)``): Keras
tracks them (their weights are the model's); torch registers a module's parameters only in an ``nn.ModuleDict``
(subclass.py ``_layer_dict``). Before, the translation kept a plain dict: its layers computed the same forward but
were missing from ``model.parameters()`` (an optimizer never trained them), ``state_dict`` and ``.to(device)``, with
no finding. Keras runs the original with the translation's weights (read from its state_dict), and the outputs and
the count of trainable weights are compared."""
from __future__ import annotations

import importlib.util
import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import run_side

needs_both = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None
                                or importlib.util.find_spec("torch") is None, reason="needs TensorFlow and PyTorch")

PROGRAM = '''
import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.body = layers.Dense(4, activation="relu")
        self.heads = {"a": layers.Dense(2), "b": layers.Dense(3)}
        self.extra = dict(c=layers.Dense(2))

    def call(self, x):
        h = self.body(x)
        return self.heads["a"](h) + self.extra["c"](h) + self.heads["b"](h)[:, :2]


model = Net()
x = np.linspace(-1.0, 1.0, 15).reshape(3, 5).astype("float32")
y = model(x)
n = len(model.trainable_variables)
'''

TORCH_DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import model as m
np.savez(sys.argv[1] + "/weights.npz", **{k: v.detach().numpy() for k, v in m.model.state_dict().items()})
print("RESULT " + json.dumps({"y": m.y.detach().numpy().tolist(), "n": m.n}))
'''

KERAS_DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import model as m
w = np.load(sys.argv[3])
for layer, key in ((m.model.body, "body.0"), (m.model.heads["a"], "heads.a"), (m.model.heads["b"], "heads.b"),
                   (m.model.extra["c"], "extra.c")):
    layer.set_weights([w[key + ".weight"].T, w[key + ".bias"]])
print("RESULT " + json.dumps({"y": np.asarray(m.model(m.x)).tolist(), "n": m.n}))
'''


@needs_both
def test_layers_in_a_dict_are_registered_modules(tmp_path):
    program = textwrap.dedent(PROGRAM).lstrip()
    r = translate_source(program, "prog.py")
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert not errors, [f.message for f in errors]
    assert 'self.heads = nn.ModuleDict({"a": nn.LazyLinear(2), "b": nn.LazyLinear(3)})' in r.output
    assert "self.extra = nn.ModuleDict(dict(c=nn.LazyLinear(2)))" in r.output
    torch_result = run_side(tmp_path / "torch", "torch", r.output, TORCH_DRIVER, "torch")
    keras_result = run_side(tmp_path / "keras", "keras", program, KERAS_DRIVER, "keras",
                            str(tmp_path / "torch" / "weights.npz"))
    assert torch_result["n"] == keras_result["n"] == 8
    np.testing.assert_allclose(torch_result["y"], keras_result["y"], rtol=1e-5, atol=1e-6)


def test_a_dict_of_layers_and_other_values_is_an_error():
    r = translate_source(textwrap.dedent('''
        from tensorflow import keras
        from tensorflow.keras import layers


        class Net(keras.Model):
            def __init__(self):
                super().__init__()
                self.cfg = {"units": 4, "head": layers.Dense(2)}
                self.by_index = {0: layers.Dense(2)}

            def call(self, x):
                return self.cfg["head"](x) + self.by_index[0](x)
    ''').lstrip(), "prog.py")
    assert "= nn.ModuleDict" not in r.output  # (a value no module, a key no name: nn.ModuleDict takes neither)
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert [f.line for f in errors] == [8, 9], [(f.line, f.message) for f in r.findings]
    assert all("nn.ModuleDict" in f.message for f in errors)
