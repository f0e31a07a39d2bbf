"""A model's name bound also by a ``for`` target, an unpacking (``model, other = ...``) or an import: model_api
follows the binding that reaches a use only for ``model.build((None, n))`` of a Sequential (the nearest top-level
binding above it); every other Keras model method or attribute on such a name is an error naming its line, never
left as written without a finding (it was: the name was no model, and no error said so).

Numbers: the Sequential built before a ``for model in ...`` loop has Keras's weight sizes and outputs (subprocesses).
"""
from __future__ import annotations

import numpy as np

from test_fit_callbacks import _run, tx


def errors(r) -> dict[int, str]:
    return {f.line: f.message for f in r.findings if f.severity.name == "ERROR"}


BOUND = "is bound here both to a model fwport translates"

FOR_TARGET = '''
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([layers.Dense(4), layers.Dense(2)])
model.build((None, 3))
print(model.weights)
model.summary()
for model in [model]:
    print(model.weights)
'''


def test_a_for_target_makes_each_use_an_error_but_the_reached_build():
    r = tx(FOR_TARGET)
    said = errors(r)
    assert sorted(said) == [6, 7, 9], said
    assert all(BOUND in m for m in said.values())
    assert "model.weights is a Keras model attribute" in said[6] and "model.summary(...)" in said[7]
    assert "build_on_zeros(model, (None, 3))" in r.output and "model.build(" not in r.output


UNPACKED = '''
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([layers.Dense(4)])
model, other = keras.Sequential([layers.Dense(4)]), 3
model.build((None, 3))
print(model.trainable_weights)
model.summary()
'''


def test_an_unpacking_makes_each_use_an_error():
    r = tx(UNPACKED)
    said = errors(r)
    assert sorted(said) == [6, 7, 8], said
    assert all(BOUND in m for m in said.values())
    assert "build_on_zeros" not in r.output and "model.build((None, 3))" in r.output


IMPORTED = '''
from tensorflow import keras
from tensorflow.keras import layers


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.d = layers.Dense(4)

    def call(self, x):
        return self.d(x)


model = Net()
if False:
    from os import path as model
model.build((None, 3))
print(model.weights)
'''


def test_an_import_of_the_name_stops_build_on_zeros():
    r = tx(IMPORTED)
    said = errors(r)
    assert sorted(said) == [17, 18], said
    assert "model.build(...)" in said[17] and BOUND in said[17]
    assert "build_on_zeros" not in r.output


def test_a_bound_once_subclass_still_builds_on_zeros():
    r = tx(IMPORTED.replace("if False:\n    from os import path as model\n", ""))
    assert errors(r) == {}
    assert "build_on_zeros(model, (None, 3))" in r.output


def test_a_local_import_of_the_name_is_not_the_model():
    src = '''
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([layers.Dense(4)])


def where():
    from os import path as model
    return model.summary()
'''
    r = tx(src)
    assert errors(r) == {}, errors(r)
    assert "return model.summary()" in r.output


BUILT = '''
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([layers.Dense(6, activation="relu"), layers.Dense(2)])
model.build((None, 3))
first = model
for model in [first]:
    pass
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(3)
shapes = [(3, 6), (6, 2)]
W = [[rng.normal(size=s).astype("float32"), rng.normal(size=s[1]).astype("float32")] for s in shapes]
x = rng.normal(size=(5, 3)).astype("float32")
out = {}
if sys.argv[2] == "torch":
    import torch
    linears = [l for l in first.modules() if isinstance(l, torch.nn.Linear)]
    out["sizes"] = [list(l.weight.shape[::-1]) for l in linears]
    with torch.no_grad():
        for l, (k, b) in zip(linears, W):
            l.weight.copy_(torch.tensor(k).T)
            l.bias.copy_(torch.tensor(b))
        out["y"] = first(torch.tensor(x)).numpy().tolist()
else:
    out["sizes"] = [list(l.get_weights()[0].shape) for l in first.layers]
    for l, w in zip(first.layers, W):
        l.set_weights(w)
    out["y"] = np.asarray(first(x)).tolist()
print("RESULT " + json.dumps(out))
'''


def test_the_build_a_sequential_reaches_before_a_loop_rebinding_it_matches_keras(tmp_path):
    keras_out, torch_out = _run(tmp_path, BUILT, DRIVER)
    assert keras_out["sizes"] == torch_out["sizes"] == [[3, 6], [6, 2]]
    np.testing.assert_allclose(torch_out["y"], keras_out["y"], rtol=1e-5, atol=1e-6)


SELF_REBOUND = '''
from tensorflow import keras
from tensorflow.keras import layers

inputs = keras.Input(shape=(8,))
model = keras.Model(inputs, layers.Dense(1, activation="sigmoid")(inputs))
model = (model)
model.compile(optimizer="adam", loss="binary_crossentropy")
model.fit(x_train, y_train, epochs=1)
'''


def test_a_name_rebound_to_itself_stays_the_model():
    """``model = (model)`` leaves what model is: its compile and fit are translated (they were left as written,
    without a finding: the rebinding made it no model)."""
    r = tx(SELF_REBOUND)
    assert not errors(r), r.findings
    assert "model.compile(" not in r.output and "model.fit(" not in r.output, r.output
    assert "fit(model, optimizer, loss_fn, x_train, y_train, epochs=1)" in r.output, r.output
