"""``model.build((None, n))`` of a Sequential whose name the file binds several times (a notebook rebinding
``model`` cell after cell, deep-learning-with-python's chapter 7): the binding that reaches the build, the nearest
top-level statement above binding the name, is a ``keras.Sequential(...)`` → ``build_on_zeros(model, shape)`` as
for a Sequential bound once (its lazy modules get their sizes). A binding between that is not a Sequential (a
functional model) keeps the error.

Numbers: Keras's weights after each build (their count) and the outputs of the built models given the same weights
agree with the translation's (subprocesses).
"""
from __future__ import annotations

import numpy as np

from test_fit_callbacks import _run, tx

SOURCE = '''
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([layers.Dense(4)])
model = keras.Sequential()
model.add(layers.Dense(6, activation="relu"))
model.add(layers.Dense(2, activation="softmax"))
model.build(input_shape=(None, 3))
first = model
count = len(model.weights)

model = keras.Sequential(name="my_example_model")
model.add(layers.Dense(5, activation="tanh", name="my_first_layer"))
model.add(layers.Dense(3, name="my_last_layer"))
model.build((None, 4))
model.summary()
second = model
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(5)
out = {"count": count}
for key, m, shapes, n in (("first", first, [(3, 6), (6, 2)], 3), ("second", second, [(4, 5), (5, 3)], 4)):
    W = [[rng.normal(size=s).astype("float32"), rng.normal(size=s[1]).astype("float32")] for s in shapes]
    x = rng.normal(size=(7, n)).astype("float32")
    if sys.argv[2] == "torch":
        import torch
        linears = [l for l in m.modules() if isinstance(l, torch.nn.Linear)]
        out[key + "_sizes"] = [list(l.weight.shape[::-1]) for l in linears]
        with torch.no_grad():
            for l, (k, b) in zip(linears, W):
                l.weight.copy_(torch.tensor(k).T)
                l.bias.copy_(torch.tensor(b))
            out[key] = m(torch.tensor(x)).numpy().tolist()
    else:
        out[key + "_sizes"] = [list(l.get_weights()[0].shape) for l in m.layers]
        for l, w in zip(m.layers, W):
            l.set_weights(w)
        out[key] = np.asarray(m(x)).tolist()
print("RESULT " + json.dumps(out))
'''


def test_builds_of_a_rebound_sequential_as_keras(tmp_path):
    keras_out, torch_out = _run(tmp_path, SOURCE, DRIVER)
    assert keras_out["count"] == torch_out["count"] == 4
    assert keras_out["first_sizes"] == torch_out["first_sizes"] == [[3, 6], [6, 2]]
    assert keras_out["second_sizes"] == torch_out["second_sizes"] == [[4, 5], [5, 3]]
    for key in ("first", "second"):
        np.testing.assert_allclose(torch_out[key], keras_out[key], rtol=1e-5, atol=1e-6)


def test_the_translation_builds_on_zeros():
    out = tx(SOURCE).output
    assert out_count(out) == 2 and "model.build(" not in out


def test_a_functional_model_bound_between_keeps_the_error():
    between = "inputs = keras.Input(shape=(3,))\nmodel = keras.Model(inputs, layers.Dense(2)(inputs))\n"
    r = tx(SOURCE.replace("model.build((None, 4))", between + "model.build((None, 4))"))
    assert out_count(r.output) == 1  # the first build only
    said = [f for f in r.findings if f.severity.name == "ERROR" and "model.build(...) is a Keras model" in f.message]
    assert len(said) == 1 and said[0].line == 17, [f.message for f in r.findings]


def out_count(text: str) -> int:
    return text.count("build_on_zeros(model, (None")
