"""Freezing loops over ``model.layers`` (issue 8/9): ``for layer in model.layers: layer.trainable = flag`` on a
translated functional model, a subclass, a builder's model handed to a function → ``model.children()`` (the modules
the layers became hold the same weights); on a Sequential made channels-first the loop lists its modules too (no
layer is called, so the layout does not matter). A sliced list of a model other than a Sequential, a model set
``.trainable = False`` itself, and a parameter some call gives a model left Keras keep the error.

Numbers: a functional model frozen through the loop, its last Dense unfrozen by ``model.layers[3]``, trained two
epochs by Keras and by its translation from the same weights on fixed data (subprocesses): histories, evaluate,
predictions and kernels agree, the frozen kernels stay at their start on both sides; the counts of trainable weights
of a subclass, a builder's model and a channels-first Sequential after their loops agree with Keras's.
"""
from __future__ import annotations

import numpy as np

from runners import compare_fit
from test_fit_callbacks import _run, tx

SOURCE = '''
from tensorflow import keras
from tensorflow.keras import layers

inputs = keras.Input(shape=(6,))
h = layers.Dense(8, activation="relu")(inputs)
h = layers.Dense(4)(h)
outputs = layers.Dense(1)(h)
model = keras.Model(inputs, outputs)
for layer in model.layers:
    layer.trainable = False
model.layers[3].trainable = True
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.01), loss="mse")


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.a = layers.Dense(4)
        self.b = layers.Dense(2)

    def call(self, x):
        return self.b(self.a(x))


net = Net()
net(keras.ops.zeros((1, 3)))
for layer in net.layers:
    layer.trainable = False


def build():
    inp = keras.Input(shape=(3,))
    return keras.Model(inp, layers.Dense(2)(layers.Dense(5)(inp)))


def freeze(m, flag):
    for layer in m.layers:
        layer.trainable = flag
    return m


other = freeze(build(), False)
again = freeze(build(), True)

conv = keras.Sequential([keras.Input(shape=(8, 8, 3)), layers.Conv2D(4, 3, activation="relu"), layers.Flatten(),
                         layers.Dense(2)])
for layer in conv.layers[:-1]:
    layer.trainable = False


def counts():
    return [len(model.trainable_weights), len(net.trainable_weights), len(other.trainable_weights),
            len(again.trainable_weights), len(conv.trainable_weights)]


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
else:
    dense = [l for l in model.layers if l.get_weights()]
    for l, w in zip(dense, W):
        l.set_weights(w)
    kernels = lambda: [l.get_weights()[0].tolist() for l in dense]
c = counts()
h, ev, pred = train(x, y)
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "predict": np.asarray(pred).tolist(), "kernels": kernels(),
                              "counts": c, "start": [w[0].tolist() for w in W]}))
'''


def test_freezing_loops_train_and_count_as_keras(tmp_path):
    keras_out, torch_out = _run(tmp_path, SOURCE, DRIVER)
    compare_fit(keras_out, torch_out, ["loss"], atol=1e-5)
    # only the last Dense trains: 2 weights; the subclass and the first builder's model all frozen, the second
    # all trainable; the Sequential's last Dense alone
    assert keras_out["counts"] == torch_out["counts"] == [2, 0, 0, 4, 2]
    for side in (keras_out, torch_out):  # the two frozen kernels stayed, the last one trained
        assert side["kernels"][:2] == side["start"][:2]
        assert side["kernels"][2] != side["start"][2]


def test_the_loops_iterate_the_modules():
    r = tx(SOURCE)
    out = r.output
    assert out.count("for layer in model.children():") == 1 and "for layer in net.children():" in out
    assert "for layer in m.children():" in out
    assert "for layer in [conv[0:2], conv[2], conv[3]][:-1]:" in out
    assert ".layers" not in out


def test_a_slice_or_a_model_frozen_itself_keeps_the_error():
    for src in (SOURCE.replace("for layer in net.layers:", "for layer in net.layers[:1]:"),
                SOURCE.replace("net(keras.ops.zeros((1, 3)))", "net(keras.ops.zeros((1, 3)))\nnet.trainable = False"),
                SOURCE.replace("again = freeze(build(), True)", "hin = keras.Input(shape=(3,))\n"
                               "again = freeze(keras.Model(hin, hub.KerasLayer('h')(hin)), True)")
                .replace("from tensorflow import keras", "import tensorflow_hub as hub\nfrom tensorflow import keras"),
                SOURCE.replace("    layer.trainable = False\nmodel.layers[3]",
                               "    layer.trainable = False\n    print(layer.name)\nmodel.layers[3]")):
        r = tx(src)
        said = [f for f in r.findings if f.severity.name == "ERROR" and ".layers is a Keras model attribute" in f.message]
        assert len(said) == 1, [f.message for f in r.findings if f.severity.name == "ERROR"]
