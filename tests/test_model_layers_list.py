"""``model.layers`` of a translated module-level Sequential (issue 8): Keras's list of the model's layers (no input)
becomes the nn.Sequential's entries, ``list(model)`` where each layer became one module, else each layer's module or
the slice of the modules it became (a Dense with its activation: ``model[0:2]``, an nn.Sequential of the same
modules). The common use, freezing (``for layer in model.layers[:-1]: layer.trainable = False``), then trains the
same weights as Keras's.

Numbers: a Sequential whose layers but the last are frozen through ``model.layers``, trained two epochs by Keras and by
its translation from the same weights on fixed data (subprocesses): histories, evaluate, predictions and weights agree,
and the frozen kernels stay at their start on both sides.
"""
from __future__ import annotations

import numpy as np

from runners import compare_fit
from test_fit_callbacks import _run, tx

SOURCE = '''
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([
    keras.Input(shape=(6,)),
    layers.Dense(8, activation="relu"),
    layers.Dropout(0.0),
    layers.Dense(4),
    layers.Dense(1),
])
for layer in model.layers[:-1]:
    layer.trainable = False
count = len(model.layers)
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.01), loss="mse")


def hidden(x):  # the first two layers, called: the Dense's relu applies
    return model.layers[1](model.layers[0](x))


def last_units():
    return model.layers[-1].units if hasattr(model.layers[-1], "units") else model.layers[-1].out_features


def train(x, y):
    history = model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0), model.predict(x[:5], verbose=0)
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(3)
shapes = [(6, 8), (8, 4), (4, 1)]
W = [[rng.normal(size=s).astype("float32"), rng.normal(size=s[1]).astype("float32")] for s in shapes]
x = rng.normal(size=(48, 6)).astype("float32")
y = x[:, :1] - x[:, 1:2]
if sys.argv[2] == "torch":
    import torch
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for m, (k, b) in zip(linears, W):
            m.weight.copy_(torch.tensor(k).T)
            m.bias.copy_(torch.tensor(b))
    kernels = lambda: [m.weight.detach().numpy().T.tolist() for m in linears]
    hid = lambda: hidden(torch.tensor(x[:5])).detach().numpy().tolist()
else:
    dense = [l for l in model.layers if l.get_weights()]
    for l, w in zip(dense, W):
        l.set_weights(w)
    kernels = lambda: [l.get_weights()[0].tolist() for l in dense]
    hid = lambda: np.asarray(hidden(x[:5])).tolist()
h, ev, pred = train(x, y)
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "predict": np.asarray(pred).tolist(), "kernels": kernels(),
                              "count": count, "hidden": hid(), "last": last_units(), "start": [w[0].tolist() for w in W]}))
'''


def test_layers_of_a_sequential_freeze_as_keras(tmp_path):
    keras_out, torch_out = _run(tmp_path, SOURCE, DRIVER)
    compare_fit(keras_out, torch_out, ["loss"], atol=1e-5)
    assert keras_out["count"] == torch_out["count"] == 4
    assert keras_out["last"] == torch_out["last"] == 1
    np.testing.assert_allclose(torch_out["hidden"], keras_out["hidden"], rtol=1e-5, atol=1e-6)
    assert min(min(r) for r in keras_out["hidden"]) == 0.0  # (the relu acted)
    for side in (keras_out, torch_out):  # the two frozen kernels stayed, the last one trained
        assert side["kernels"][:2] == side["start"][:2]
        assert side["kernels"][2] != side["start"][2]


def test_the_translation_lists_each_layers_modules():
    out = tx(SOURCE).output
    assert "for layer in [model[0:2], model[2], model[3], model[4]][:-1]:" in out
    assert "count = len([model[0:2], model[2], model[3], model[4]])" in out
    assert "return model[2](model[0:2](x))" in out and "model[4].units" in out
    plain = tx(SOURCE.replace('layers.Dense(8, activation="relu")', "layers.Dense(8)"))
    assert "for layer in list(model)[:-1]:" in plain.output


def test_a_sequential_not_known_by_its_name_keeps_the_error():
    for src in (SOURCE.replace("count = len", "model = keras.Sequential([layers.Dense(2)])\ncount = len"),
                SOURCE.replace("layers.Dense(4),", "layers.Dense(4),\n    *extra,")):
        r = tx(src)
        assert any(f.severity.name == "ERROR" and "model.layers is a Keras model attribute" in f.message
                   for f in r.findings), [f.message for f in r.findings]
        assert "list(model)" not in r.output and "model[0:2]" not in r.output


def test_a_channels_first_sequential_keeps_the_error_where_a_layer_is_called():
    # its layers taken out and called would see NCHW tensors where Keras's see NHWC ones
    src = '''
from tensorflow import keras
from tensorflow.keras import layers

net = keras.Sequential([keras.Input(shape=(8, 8, 3)), layers.Conv2D(4, 3, activation="relu"), layers.Flatten(),
                        layers.Dense(2)])


def first(x):
    return net.layers[0](x)


for layer in net.layers[:1]:
    layer.trainable = False
'''
    r = tx(src)
    said = [f for f in r.findings if f.severity.name == "ERROR" and "is translated channels-first" in f.message]
    assert len(said) == 1 and "net.layers[0](x)" in r.output
    # a loop that only freezes calls no layer: the modules are listed whatever their layout (test_model_layers_freeze)
    assert "for layer in [net[0:2], net[2], net[3]][:1]:" in r.output
