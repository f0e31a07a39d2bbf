"""Model factories that each bind the same optimizer name locally (``def build_a(): model = ...; optimizer =
keras.optimizers.SGD(...); model.compile(optimizer=optimizer, ...); return model``, and build_b alike): Python's
scoping gives each compile its own function's binding (training._local_optimizer). Before, a name bound more than
once was refused ("optimizer is bound several times, not all of them ... at the module's top level"). Since the
training pass creates every binding of the name over the parameters of the compiled model's name, this holds only
where every binding is such a function's own, each compiling a model of the same name; else the refusal stays.
Checked numerically: the Keras and torch histories of both models, and their weights after the fits."""
from __future__ import annotations


import numpy as np

from fwport.core.pipeline import translate_source
from helpers import error_messages, needs
from runners import one_dense_result

SRC = '''import numpy as np
import tensorflow as tf
from tensorflow import keras


def build_a():
    model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.SGD(learning_rate=0.1, momentum=0.5)
    model.compile(optimizer=optimizer, loss="mse")
    return model


def build_b():
    model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.Adam(learning_rate=0.05)
    model.compile(optimizer=optimizer, loss="mse")
    return model


x = np.linspace(-1, 1, 24, dtype="float32").reshape(8, 3)
y = np.linspace(0, 1, 8, dtype="float32").reshape(8, 1)
model_a = build_a()
init(model_a)
history_a = model_a.fit(x, y, epochs=3, batch_size=4, shuffle=False, verbose=0)
model_b = build_b()
init(model_b)
history_b = model_b.fit(x, y, epochs=3, batch_size=4, shuffle=False, verbose=0)
'''
PRINT = '''
import json
print("RESULT" + json.dumps({"a": hist(history_a), "b": hist(history_b), "ka": kernel(model_a), "kb": kernel(model_b)}))
'''


def test_each_factory_s_own_optimizer_is_followed():
    r = translate_source(SRC, "f.py")
    assert not error_messages(r), error_messages(r)
    assert "optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)" in r.output
    assert "optimizer = torch.optim.Adam(model.parameters(), lr=0.05, eps=1e-07)" in r.output
    assert "model_b, model_b_optimizer, model_b_loss_fn = build_b()" in r.output


@needs("tensorflow", "torch")
def test_both_fits_match_keras(tmp_path):
    r = translate_source(SRC, "f.py")
    assert not error_messages(r), error_messages(r)
    keras = one_dense_result(tmp_path / "k.py", "keras", SRC + PRINT)
    torch = one_dense_result(tmp_path / "t.py", "torch", r.output + PRINT)
    for k in ("a", "b"):
        assert len(torch[k]) == 3
        np.testing.assert_allclose(torch[k], keras[k], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(torch["k" + k], keras["k" + k], rtol=1e-4, atol=1e-6)
    assert keras["a"] != keras["b"]  # each model trained with its own optimizer


def _refusals(src: str) -> list[str]:
    return [m for m in error_messages(translate_source(src, "f.py")) if "bound several times" in m]


def test_models_of_other_names_are_refused():
    """The training pass creates every binding over one model name's parameters: net's would take model's."""
    src = SRC.replace(
        "    model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(1)])\n"
        "    optimizer = keras.optimizers.Adam(learning_rate=0.05)\n    model.compile(optimizer=optimizer, loss=\"mse\")\n"
        "    return model\n",
        "    net = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(1)])\n"
        "    optimizer = keras.optimizers.Adam(learning_rate=0.05)\n    net.compile(optimizer=optimizer, loss=\"mse\")\n"
        "    return net\n")
    assert "net.compile" in src
    assert _refusals(src)


def test_a_module_level_binding_too_is_refused():
    src = SRC + (
        "optimizer = keras.optimizers.SGD(0.01)\nmodel_b.compile(optimizer=optimizer, loss='mse')\n")
    assert _refusals(src)


def test_a_binding_under_an_if_is_refused():
    src = SRC.replace(
        "    optimizer = keras.optimizers.Adam(learning_rate=0.05)\n",
        "    if len(model.layers) > 0:\n        optimizer = keras.optimizers.Adam(learning_rate=0.05)\n")
    assert _refusals(src)
