"""NumPy arrays passed into a function or method of the file that does tensor work (passes/valuekinds.py's
_given_params): a parameter every call of the function gives a NumPy value is one in its body, so its model calls
and losses get tensors (``torch.as_tensor``) as Keras converts them. The repro: a plain ``Trainer`` class holding a
model and ``self.loss_fn``, its GradientTape ``train_step(self, x, y)`` called with slices of NumPy arrays; before,
the labels reached the translated loss's ``y_true.long()`` as a NumPy array and the translation crashed with no
finding. The translation runs with TensorFlow blocked; Keras runs the original with the torch side's weights, and the
losses of two SGD steps (and the outputs after them) are compared."""
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
import keras
from keras import layers


def build_model():
    return keras.Sequential([
        keras.Input(shape=(6, 6, 3)),
        layers.Conv2D(4, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(2),
        layers.Flatten(),
        layers.Dense(5),
    ])


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = keras.optimizers.SGD(0.1)
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            logits = self.model(x, training=True)
            loss = self.loss_fn(y, logits)
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        return loss

    def evaluate(self, x):
        return self.model(x)


mlp = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(5)])
mlp_optimizer = keras.optimizers.SGD(0.1)
mse = keras.losses.MeanSquaredError()


def fit_step(x, y):
    with tf.GradientTape() as tape:
        pred = mlp(x, training=True)
        loss = mse(y, pred)
    grads = tape.gradient(loss, mlp.trainable_variables)
    mlp_optimizer.apply_gradients(zip(grads, mlp.trainable_variables))
    return loss


rng = np.random.RandomState(0)
x_train = rng.rand(8, 6, 6, 3).astype("float32")
y_train = rng.randint(0, 5, size=(8,))
features = rng.rand(8, 6)
targets = rng.rand(8, 5)
trainer = Trainer(build_model())


def run_all():
    out = {"losses": [], "fit": []}
    for i in range(0, 8, 4):
        out["losses"].append(float(trainer.train_step(x_train[i:i + 4], y_train[i:i + 4])))
        out["fit"].append(float(fit_step(features[i:i + 4], targets[i:i + 4])))
    # (a call given tensors: the conversions written for the NumPy calls take them as they are)
    out["fit"].append(float(fit_step(tf.constant(features[:4], dtype=tf.float32), tf.constant(targets[:4]))))
    out["after"] = trainer.evaluate(x_train[:2])
    return out
'''

#: the translation's side: the models' weights (torch's layout), then the program's steps
TORCH_DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import model as m
named = {"model": m.trainer.model, "mlp": m.mlp}
np.savez(sys.argv[1] + "/weights.npz", **{f"{k}.{n}": v.detach().numpy() for k, net in named.items()
                                         for n, v in net.state_dict().items()})
out = m.run_all()
out["after"] = out["after"].detach().numpy().tolist()
print("RESULT " + json.dumps(out))
'''

#: Keras's side: the same program's models given the translation's weights
KERAS_DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import model as m
w = np.load(sys.argv[3])
net = m.trainer.model
net.layers[0].set_weights([w["model.0.weight"].transpose(2, 3, 1, 0), w["model.0.bias"]])
# torch flattens (C, H, W), Keras (H, W, C): the Dense rows in Keras's order
k = w["model.4.weight"].reshape(5, 4, 3, 3).transpose(2, 3, 1, 0).reshape(36, 5)
net.layers[-1].set_weights([k, w["model.4.bias"]])
m.mlp.layers[0].set_weights([w["mlp.0.weight"].T, w["mlp.0.bias"]])
out = m.run_all()
out["after"] = np.asarray(out["after"]).tolist()
print("RESULT " + json.dumps(out))
'''


def _translate(program: str):
    r = translate_source(textwrap.dedent(program).lstrip(), "prog.py")
    return r, [f for f in r.findings if f.severity is Severity.ERROR]


@needs_both
def test_numpy_labels_given_a_trainer_method_and_a_function_match_keras(tmp_path):
    r, errors = _translate(PROGRAM)
    assert not errors, [f.message for f in errors]
    out = r.output
    assert "loss = self.loss_fn(torch.as_tensor(y), logits)" in out
    assert "pred = mlp(as_float32(x))" in out  # float64 features cast to Keras's float32, a tensor as it is
    assert "torch.as_tensor(y, dtype=torch.float32).view_as(pred)" in out
    torch_result = run_side(tmp_path / "torch", "torch", out, TORCH_DRIVER, "torch")
    keras_result = run_side(tmp_path / "keras", "keras", textwrap.dedent(PROGRAM).lstrip(), KERAS_DRIVER, "keras",
                            str(tmp_path / "torch" / "weights.npz"))
    for key in ("losses", "fit", "after"):
        assert np.shape(torch_result[key]) == np.shape(keras_result[key]), key
        np.testing.assert_allclose(torch_result[key], keras_result[key], rtol=1e-5, atol=1e-5, err_msg=key)
    # the second step's loss depends on the first step's update: both steps trained
    assert torch_result["losses"][0] != torch_result["losses"][1]


HEADER = '''
import numpy as np
import tensorflow as tf
import keras
from keras import layers

model = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(5)])
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def step(x, y):
    logits = model(x)
    return loss_fn(y, logits)


'''


@pytest.mark.parametrize("calls", [
    "step(np.ones((2, 6), 'float32'), np.array([1, 3]))\nrun = step",
    "step(np.ones((2, 6), 'float32'), y=None)",
    "step(tf.ones((2, 6)), tf.constant([1, 3]))",
], ids=["name-read-otherwise", "labels-not-numpy", "tensors-only"])
def test_parameters_no_call_gives_numpy_are_left_as_written(calls):
    """A parameter no call gives a NumPy value, or a function whose name is read otherwise than called (passed on:
    its other callers are not known): no conversion written for it."""
    r, _ = _translate(HEADER + calls + "\n")
    assert "torch.as_tensor(y)" not in r.output
    assert "y.long()" in r.output


def test_numpy_given_through_two_functions_is_followed():
    """``outer(x_np, y_np)`` calling ``step(x, y)``: the arrays followed through both calls."""
    r, errors = _translate(HEADER + textwrap.dedent('''
        def outer(a, b):
            return step(a, b)


        outer(np.ones((2, 6), 'float32'), np.array([1, 3]))
    '''))
    assert not errors
    assert "torch.as_tensor(y).long()" in r.output
    assert "logits = model(torch.as_tensor(x, dtype=torch.float32))" in r.output


def test_a_parameter_one_call_gives_numpy_and_another_a_tensor_is_converted():
    """``step(np_x, np_y)`` and ``step(tf_x, tf_y)``: the NumPy call needs the conversion, which takes a tensor as it
    is (``torch.as_tensor``; the helper that casts floats only where not every call gives floats)."""
    r, errors = _translate(HEADER + "step(np.ones((2, 6), 'float32'), np.array([1, 3]))\n"
                                    "step(tf.ones((2, 6)), tf.constant([1, 3]))\n")
    assert not errors
    assert "torch.as_tensor(y).long()" in r.output
    assert "logits = model(as_float32(x))" in r.output
