"""``model.layers`` of a module-level Sequential that holds a model of the file's own (issue 9, tf2torch:
``keras.Sequential([base, layers.Dense(1)])``, keras-io's barlow_twins, the TF docs' transfer-learning notebooks):
Keras lists the nested model as one layer, the translation's nn.Sequential holds it as one entry, so
``model.layers[0]`` is ``model[0]`` and ``model.layers`` the list of entries (a Dense with its activation: a slice).

Numbers: the nested model frozen through ``model.layers[0].trainable = False``, the rest trained two epochs by Keras
and by its translation from the same weights on fixed data (subprocesses, TensorFlow unimportable on the torch side):
histories, evaluate, predictions and weights agree, the nested model's kernels stay at their start on both sides, and
``len(model.layers)`` is the same.
"""
from __future__ import annotations

from runners import compare_fit
from test_fit_callbacks import _run, tx

SOURCE = '''
from tensorflow import keras
from tensorflow.keras import layers

base = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(8, activation="tanh"), layers.Dense(4)])
model = keras.Sequential([base, layers.Dense(3, activation="relu"), layers.Dense(1)])
model.layers[0].trainable = False
count = len(model.layers)
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss="mse")


def train(x, y):
    history = model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0), model.predict(x[:5], verbose=0)
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(5)
shapes = [(6, 8), (8, 4), (4, 3), (3, 1)]
W = [[rng.normal(size=s).astype("float32") * 0.5, rng.normal(size=s[1]).astype("float32") * 0.1] for s in shapes]
x = rng.normal(size=(48, 6)).astype("float32")
y = x[:, :1] - x[:, 1:2]
if sys.argv[2] == "torch":
    import torch
    with torch.no_grad():
        model(torch.zeros(1, 6))  # (the Dense after the nested model is an nn.LazyLinear: its sizes)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for m, (k, b) in zip(linears, W):
            m.weight.copy_(torch.tensor(k).T)
            m.bias.copy_(torch.tensor(b))
    kernels = lambda: [m.weight.detach().numpy().T.tolist() for m in linears]
else:
    dense = [l for l in base.layers if l.get_weights()] + [l for l in model.layers[1:]]
    for l, w in zip(dense, W):
        l.set_weights(w)
    kernels = lambda: [l.get_weights()[0].tolist() for l in dense]
h, ev, pred = train(x, y)
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "predict": np.asarray(pred).tolist(), "kernels": kernels(),
                              "count": count, "start": [w[0].tolist() for w in W]}))
'''


def test_a_nested_model_frozen_through_layers_trains_as_keras(tmp_path):
    keras_out, torch_out = _run(tmp_path, SOURCE, DRIVER)
    compare_fit(keras_out, torch_out, ["loss"], atol=1e-5)
    assert keras_out["count"] == torch_out["count"] == 3
    for side in (keras_out, torch_out):  # the nested model's two kernels stayed, the others trained
        assert side["kernels"][:2] == side["start"][:2]
        assert side["kernels"][2] != side["start"][2] and side["kernels"][3] != side["start"][3]


def test_the_nested_model_is_one_entry():
    r = tx(SOURCE)
    assert "model[0].requires_grad_(False)" in r.output
    assert "count = len([model[0], model[1:3], model[3]])" in r.output
    assert not [f for f in r.findings if f.severity.name == "ERROR"]


def test_a_layer_call_without_a_rule_keeps_the_error():
    # an element fwport has no rule for, called in the list: not known as one entry
    r = tx(SOURCE.replace("model = keras.Sequential([base,", "model = keras.Sequential([make_base(),"))
    assert any(f.severity.name == "ERROR" and "model.layers is a Keras model attribute" in f.message
               for f in r.findings), [f.message for f in r.findings]
    assert "model[0].requires_grad_" not in r.output
