"""Regularizers of custom layers (issue 8): ``self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)``
in __init__ and ``self.add_weight(..., regularizer=self.kernel_regularizer)`` in build → the KerasRegularizer
helper and a regularization_loss() on the class holding the penalty of each weight, which the written fit adds
to the loss as Keras adds model.losses; ``keras.regularizers.serialize`` in get_config → KerasRegularizer.serialize.
Trained by Keras and by the translation from the same weights (subprocesses): histories, evaluate and every
weight compared."""
from __future__ import annotations

import textwrap

import numpy as np

from helpers import error_lines as errors
from runners import compare_fit, keras_and_torch
from test_fit_callbacks import tx

CUSTOM = '''
import tensorflow as tf
from tensorflow import keras


class MyDense(keras.layers.Layer):
    def __init__(self, units, use_bias=True, kernel_regularizer=None, bias_regularizer=None, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.use_bias = use_bias
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), initializer="glorot_uniform",
                                      regularizer=self.kernel_regularizer, name="kernel", dtype=tf.float32)
        if self.use_bias:
            self.bias = self.add_weight(shape=(self.units,), initializer="zeros",
                                        regularizer=self.bias_regularizer, name="bias")
        self.built = True

    def call(self, x):
        y = tf.matmul(x, self.kernel)
        if self.use_bias:
            y = y + self.bias
        return y

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units,
                       "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
                       "bias_regularizer": keras.regularizers.serialize(self.bias_regularizer)})
        return config


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.d1 = MyDense(16, kernel_regularizer="l2", bias_regularizer=keras.regularizers.l1(0.05))
        self.d2 = MyDense(3, use_bias=False, bias_regularizer="l2",
                          kernel_regularizer=keras.regularizers.L1L2(l1=0.01, l2=0.02))
        self.d3 = MyDense(3)

    def call(self, x):
        return self.d2(tf.tanh(self.d1(x))) + self.d3(x)


model = Net()
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def train(x, y):
    history = model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''

# the same weights on both sides: (layer, kernel, bias or None); Keras's kernels are (in, out) in both
DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(1)
x = rng.normal(size=(64, 10)).astype("float32")
y = ((x[:, 0] > 0).astype("int64") + (x[:, 1] > 0.5)).astype("int64")
W = {"d1": [(rng.normal(size=(10, 16)) * 0.5).astype("float32"), (rng.normal(size=16) * 0.5).astype("float32")],
     "d2": [(rng.normal(size=(16, 3)) * 0.5).astype("float32")],
     "d3": [(rng.normal(size=(10, 3)) * 0.5).astype("float32"), (rng.normal(size=3) * 0.5).astype("float32")]}
if sys.argv[2] == "torch":
    import torch
    model(torch.tensor(x[:1]))  # LazyBuild: build() runs on the first call, as Keras's
    before = float(sum(m.regularization_loss() for m in model.modules() if hasattr(m, "regularization_loss")))
    with torch.no_grad():
        for name, ws in W.items():
            layer = getattr(model, name)
            for p, w in zip([layer.kernel] + ([layer.bias] if layer.use_bias else []), ws):
                p.copy_(torch.tensor(w))
    penalty = float(sum(m.regularization_loss() for m in model.modules() if hasattr(m, "regularization_loss")))
    weights = lambda: {n: [p.detach().numpy().tolist() for p in
                           [getattr(model, n).kernel] + ([getattr(model, n).bias] if getattr(model, n).use_bias else [])]
                       for n in W}
else:
    model(x[:1])
    for name, ws in W.items():
        getattr(model, name).set_weights(ws)
    penalty = float(sum(model.losses))
    weights = lambda: {n: [w.tolist() for w in getattr(model, n).get_weights()] for n in W}
h, ev = train(x, y)
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "penalty": penalty,
                              "kernels": [w for n in W for w in weights()[n]]}))
'''


def _expected_penalty():
    rng = np.random.default_rng(1)
    rng.normal(size=(64, 10))
    k1, b1, k2 = rng.normal(size=(10, 16)) * 0.5, rng.normal(size=16) * 0.5, rng.normal(size=(16, 3)) * 0.5
    k1, b1, k2 = (a.astype("float32").astype("float64") for a in (k1, b1, k2))
    return 0.01 * (k1 ** 2).sum() + 0.05 * abs(b1).sum() + 0.01 * abs(k2).sum() + 0.02 * (k2 ** 2).sum()


def test_custom_layer_regularizers_train_as_keras(tmp_path):
    trans = tx(CUSTOM)
    assert errors(trans) == [], errors(trans)
    out = trans.output
    assert "self.kernel_regularizer = KerasRegularizer(kernel_regularizer)" in out
    assert ("        if hasattr(self, \"bias\") and not nn.parameter.is_lazy(self.bias) and self.bias_regularizer is not None:\n"
            "            loss = loss + KerasRegularizer(self.bias_regularizer)(self.bias)") in out
    assert '"kernel_regularizer": KerasRegularizer.serialize(self.kernel_regularizer)' in out
    assert 'MyDense(3, use_bias=False, bias_regularizer="l2",' in out and 'KerasRegularizer("L1L2", l1=0.01, l2=0.02)' in out
    assert "loss = loss + sum(m.regularization_loss() for m in model.modules()" in out
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(CUSTOM), out, DRIVER)
    # model.losses before training: Keras's penalty, l2 with no 1/2; the bias given "l2" but never made adds nothing
    np.testing.assert_allclose(keras_out["penalty"], _expected_penalty(), rtol=1e-5)
    np.testing.assert_allclose(torch_out["penalty"], keras_out["penalty"], rtol=1e-5)
    compare_fit(keras_out, torch_out, ["loss"], atol=1e-5)  # the losses of each epoch, evaluate, every weight
    assert len(keras_out["kernels"]) == 5


def _helper():
    """The KerasRegularizer class the translation writes, run here (it is plain Python)."""
    out = tx("from tensorflow import keras\nr = keras.regularizers.get('l2')\n").output
    ns: dict = {}
    exec(out[out.index("class KerasRegularizer"):out.index("\nr = ")], ns)
    return ns["KerasRegularizer"]


def test_the_helper_resolves_identifiers_as_keras_get():
    """Keras 3.15: get(None) is None, get('l2') L2(0.01), get('L1L2') L1L2(0, 0), get('l1_l2') an error (tf_keras:
    L1L2(0.01, 0.01)); a config dict round-trips; an object is returned as it is."""
    import pytest

    R = _helper()
    assert R(None) is None
    assert R("l2").get_config() == {"class_name": "L2", "config": {"l2": 0.01}}
    assert R("L1").get_config() == {"class_name": "L1", "config": {"l1": 0.01}}
    assert R("L1L2").get_config() == {"class_name": "L1L2", "config": {"l1": 0.0, "l2": 0.0}}
    with pytest.raises(ValueError):
        R("l1_l2")
    assert R("l1_l2", keras2=True).get_config()["config"] == {"l1": 0.01, "l2": 0.01}
    r = R("L1L2", l1=0.1, l2=0.2)
    assert R(r) is r and R(R.serialize(r)).get_config() == r.get_config()
    assert R.serialize(None) is None
    with pytest.raises(ValueError):
        R("orthogonal_regularizer")
    import torch

    w = torch.tensor([[1.0, -2.0], [3.0, 0.5]], dtype=torch.float64)
    assert abs(float(r(w)) - (0.1 * 6.5 + 0.2 * 14.25)) < 1e-12
    assert float(R("l2")(w)) == 0.01 * 14.25  # no 1/2


def test_a_regularizer_add_weight_cannot_read_stays_an_error():
    """A regularizer built from a local of build (not readable in regularization_loss()) is an error naming it."""
    src = CUSTOM.replace("regularizer=self.kernel_regularizer, name=", "regularizer=make(self.units), name=")
    r = tx(src)
    assert [line for line, m in errors(r) if "regularizer=make(self.units)" in m] == [14], errors(r)
    assert "# fwport: unsupported-argument: regularizer=make(self.units)" in r.output


ADDED = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers, models, regularizers

SCALE = 0.5


class Net(keras.Model):
    def __init__(self, wd=0.02):
        super().__init__()
        weight_decay = 0.01
        model = models.Sequential()
        model.add(layers.Dense(16, input_shape=(10,), kernel_regularizer=regularizers.l2(weight_decay)))
        model.add(layers.Activation("tanh"))
        model.add(layers.Dropout(0.0))
        model.add(layers.Dense(3, kernel_regularizer=regularizers.l2(wd * SCALE),
                               bias_regularizer=regularizers.l1(wd)))
        self.net = model

    def call(self, x):
        return self.net(x)


model = Net(wd=0.08)
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def train(x, y):
    history = model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''

ADDED_DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(1)
x = rng.normal(size=(64, 10)).astype("float32")
y = ((x[:, 0] > 0).astype("int64") + (x[:, 1] > 0.5)).astype("int64")
W = [(rng.normal(size=(10, 16)) * 0.5).astype("float32"), (rng.normal(size=16) * 0.5).astype("float32"),
     (rng.normal(size=(16, 3)) * 0.5).astype("float32"), (rng.normal(size=3) * 0.5).astype("float32")]
if sys.argv[2] == "torch":
    import torch
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for m, (k, b) in zip(linears, (W[:2], W[2:])):
            m.weight.copy_(torch.tensor(k).T)
            m.bias.copy_(torch.tensor(b))
    penalty = float(sum(m.regularization_loss() for m in model.modules() if hasattr(m, "regularization_loss")))
    kernels = lambda: [p.detach().numpy().T.tolist() for m in linears for p in (m.weight, m.bias)]
else:
    model(x[:1])
    model.set_weights(W)
    penalty = float(sum(model.losses))
    kernels = lambda: [w.tolist() for w in model.get_weights()]
h, ev = train(x, y)
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "penalty": penalty, "kernels": kernels()}))
'''


def test_regularizers_of_layers_added_to_a_sequential_in_init_train_as_keras(tmp_path):
    """``model = Sequential(); model.add(Dense(..., kernel_regularizer=l2(weight_decay)))`` in a class's __init__,
    kept as self.net: the factors (a literal local, a parameter of __init__ times a module constant) go into the
    class's regularization_loss() at the layers' indices in the nn.Sequential."""
    trans = tx(ADDED)
    assert errors(trans) == [], errors(trans)
    out = trans.output
    assert "loss = 0.01 * self.net[0].weight.square().sum()" in out
    assert "loss = loss + self.wd * SCALE * self.net[3].weight.square().sum()" in out
    assert "loss = loss + self.wd * self.net[3].bias.abs().sum()" in out
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(ADDED), out, ADDED_DRIVER)
    assert keras_out["penalty"] > 0.1
    np.testing.assert_allclose(torch_out["penalty"], keras_out["penalty"], rtol=1e-5)
    compare_fit(keras_out, torch_out, ["loss"], atol=1e-5)


FROZEN_WEIGHT = '''
import keras
import numpy as np


class Scale(keras.layers.Layer):
    def __init__(self):
        super().__init__()

    def build(self, input_shape):
        self.a = self.add_weight(shape=(3,), initializer="ones", regularizer="l2")
        self.b = self.add_weight(shape=(3,), initializer="ones", regularizer=keras.regularizers.l1(0.5),
                                 trainable=False)

    def call(self, x):
        return x * self.a + self.b


layer = Scale()
'''

PENALTY_DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
x = np.ones((1, 3), "float32")
if sys.argv[2] == "torch":
    import torch
    layer(torch.tensor(x))
    penalty = float(layer.regularization_loss())
else:
    layer(x)
    penalty = float(sum(layer.losses))
print("RESULT " + json.dumps({"penalty": penalty}))
'''


def test_a_non_trainable_weights_penalty_counts_in_keras2_only(tmp_path):
    """Keras 3 sums the penalties of trainable weights only (0.01 * 3 here); Keras 2 counts the non-trainable
    weight's too (+ 0.5 * 3): each translation computes its Keras's value."""
    keras2 = FROZEN_WEIGHT.replace("import keras\n", "import tf_keras as keras\n")
    for src, env, want in ((FROZEN_WEIGHT, {}, 0.03), (keras2, {"TF_USE_LEGACY_KERAS": "1"}, 1.53)):
        trans = tx(src)
        assert errors(trans) == [], errors(trans)
        (tmp_path / str(want)).mkdir()
        keras_out, torch_out = keras_and_torch(tmp_path / str(want), textwrap.dedent(src), trans.output,
                                               PENALTY_DRIVER, **env)
        np.testing.assert_allclose(keras_out["penalty"], want, rtol=1e-6)
        np.testing.assert_allclose(torch_out["penalty"], keras_out["penalty"], rtol=1e-6)
