"""Built-in layers' ``kernel_constraint=`` / ``bias_constraint=`` (Dense, Conv1D/2D/3D) in a translated class: the
class's apply_constraints() projects the torch weight as Keras projects its kernel, in Keras's layout (Dense (in, out),
ConvND (*kernel, in, out): torch holds (out, in) / (out, in, *kernel)), so a constraint's axes (MaxNorm's axis=0 by
default: per output unit for a Dense, per (kw, in, out) for a Conv2D) reduce the same numbers; the fit fwport writes
calls it after each optimizer.step(), as Keras's optimizer assigns constraint(w) after each update. Checked by training
Keras and the translation from the same weights (subprocesses) and comparing each epoch's loss and every weight."""
from __future__ import annotations

import textwrap

import numpy as np

from helpers import error_lines as errors
from runners import compare_fit, keras_and_torch
from test_fit_callbacks import tx

MODEL = '''
import tensorflow as tf
from tensorflow import keras


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.conv = keras.layers.Conv2D(4, 3, kernel_constraint=keras.constraints.max_norm(0.5))
        self.conv1 = keras.layers.Conv1D(3, 2, kernel_constraint=keras.constraints.MaxNorm(0.4, axis=[0, 1]))
        self.flat = keras.layers.Flatten()
        self.d1 = keras.layers.Dense(8, activation="tanh", kernel_constraint=keras.constraints.MaxNorm(1.0))
        self.d2 = keras.layers.Dense(1, kernel_constraint="unit_norm", bias_constraint="non_neg")

    def call(self, x):
        h = self.conv(x)
        h = self.conv1(tf.reshape(h, (-1, 9, 4)))
        return self.d2(self.d1(self.flat(h)))


model = Net()
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss="mse")


def train(x, y):
    history = model.fit(x, y, epochs=3, batch_size=8, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(1)
x = rng.normal(size=(32, 5, 5, 2)).astype("float32")
y = (np.tanh(x.reshape(32, -1) @ rng.normal(size=(50, 1)) * 0.2) - 0.5).astype("float32")
# Keras's layouts: conv (3, 3, 2, 4), conv1 (2, 4, 3), d1 (24, 8), d2 (8, 1)
W = {"conv": [rng.normal(size=(3, 3, 2, 4)) * 0.5, rng.normal(size=4) * 0.3],
     "conv1": [rng.normal(size=(2, 4, 3)) * 0.5, rng.normal(size=3) * 0.3],
     "d1": [rng.normal(size=(24, 8)) * 0.5, rng.normal(size=8) * 0.3],
     "d2": [rng.normal(size=(8, 1)) * 0.5, rng.normal(size=1) * 0.3]}
W = {k: [w.astype("float32") for w in ws] for k, ws in W.items()}
TO_TORCH = {"conv": (3, 2, 0, 1), "conv1": (2, 1, 0), "d1": (1, 0), "d2": (1, 0)}
if sys.argv[2] == "torch":
    import torch
    model(torch.tensor(x[:1]))  # the lazy modules take their sizes
    mods = {"conv": model.conv, "conv1": model.conv1, "d1": model.d1[0], "d2": model.d2}
    with torch.no_grad():
        for name, (k, b) in W.items():
            mods[name].weight.copy_(torch.tensor(k.transpose(TO_TORCH[name])))
            mods[name].bias.copy_(torch.tensor(b))
    weights = lambda: [w for n in W for w in (
        np.transpose(mods[n].weight.detach().numpy(), np.argsort(TO_TORCH[n])).tolist(),
        mods[n].bias.detach().numpy().tolist())]
else:
    model(x[:1])
    for name, ws in W.items():
        getattr(model, name).set_weights(ws)
    weights = lambda: [w.tolist() for n in W for w in getattr(model, n).get_weights()]
h, ev = train(x, y)
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "kernels": weights()}))
'''


def test_built_in_layers_constraints_train_as_keras(tmp_path):
    trans = tx(MODEL)
    assert errors(trans) == [], errors(trans)
    out = trans.output
    assert 'self.conv.weight.copy_(KerasConstraint("MaxNorm", max_value=0.5)(self.conv.weight.permute(2, 3, 1, 0))' \
        '.permute(3, 2, 0, 1))' in out
    assert 'self.d1[0].weight.copy_(KerasConstraint("MaxNorm", max_value=1.0)(self.d1[0].weight.T).T)' in out
    assert 'self.d2.bias.copy_(KerasConstraint("non_neg")(self.d2.bias))' in out
    assert "kernel_constraint" not in out.split("class Net")[1] and "m.apply_constraints()" in out
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(MODEL), out, DRIVER)
    compare_fit(keras_out, torch_out, ["loss"], atol=1e-4)  # each epoch's loss, evaluate, every weight
    conv = np.array(keras_out["kernels"][0])
    assert np.isclose(np.sqrt((conv ** 2).sum(0)).max(), 0.5, atol=1e-4)  # Keras's axis 0 of the conv kernel: active
    assert np.allclose(np.sqrt((np.array(keras_out["kernels"][6]) ** 2).sum(0)), 1, atol=1e-4)  # d2: unit_norm
    # a projection over torch's own axes (what a translation reading axis=0 as torch's dim 0 would do) differs
    wrong = out.replace(".permute(2, 3, 1, 0)).permute(3, 2, 0, 1)", ")").replace("(self.d1[0].weight.T).T",
                                                                                     "(self.d1[0].weight)")
    assert wrong != out
    (tmp_path / "wrong").mkdir()
    _, wrong_out = keras_and_torch(tmp_path / "wrong", textwrap.dedent(MODEL), wrong, DRIVER)
    assert not np.allclose(keras_out["kernels"][0], wrong_out["kernels"][0], atol=1e-3)


def test_a_constraint_fwport_cannot_read_stays_an_error():
    r = tx(MODEL.replace('bias_constraint="non_neg"', "bias_constraint=make_constraint()"))
    assert any("bias_constraint" in m for _, m in errors(r)), errors(r)
    seq = tx("import keras\nmodel = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, "
             "kernel_constraint='non_neg')])\n")
    assert any("kernel_constraint" in m for _, m in errors(seq)), errors(seq)  # a module-level model: not handled
