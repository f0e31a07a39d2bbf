"""A Model subclass that calls a sub-model in a fixed mode: transfer learning's ``x = self.base(inputs,
training=False)`` on a backbone holding BatchNormalization (frozen by ``self.base.trainable = False``, or left
trainable), Monte Carlo dropout's ``self.drop(h, training=True)``. Keras 3 runs that sub-model in that mode whatever
the model's (the explicit flag wins over fit's training=True); torch takes the mode from .train() / .eval(), so
the translation drops the flag and writes the class's ``train(mode)``: nn.Module's, then ``self.base.eval()`` /
``self.drop.train()``, which every model.train() / model.eval() (the written fit's too) goes through.

Numbers: the model trained two epochs by Keras's fit and by the translation's written fit from the same weights on
data far from the moving statistics' start (subprocesses): histories, evaluate, predictions, every weight and the
BatchNormalization's moving statistics agree, the statistics stay at their start on both sides, and the
backbone's Dense kernel moves where it is left trainable (a backbone built in the class, or built at module level
and given to its constructor). The written train() keeps its modes through the model's
train() / eval() (torch run in a subprocess)."""
from __future__ import annotations

import textwrap

import numpy as np

from runners import compare_fit, run_side
from test_fit_callbacks import _run, tx
from test_fit_frozen_batchnorm import FIT_DATA

from fwport.core.finding import Severity

SOURCE = '''
from tensorflow import keras
from tensorflow.keras import layers


class Classifier(keras.Model):
    def __init__(self):
        super().__init__()
        self.base = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(8), layers.BatchNormalization()])
        self.head = layers.Dense(1)

    def call(self, inputs, training=None):
        x = self.base(inputs, training=False)
        return self.head(x)


model = Classifier()


def train(x, y):
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.01), loss="mse")
    history = model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0), model.predict(x[:5], verbose=0)
'''

FROZEN = SOURCE.replace("        self.head = layers.Dense(1)\n",
                        "        self.base.trainable = False\n        self.head = layers.Dense(1)\n")

# keras-io's transfer learning: a module-level backbone, frozen, given to the model
GIVEN = SOURCE.replace('''class Classifier(keras.Model):
    def __init__(self):
        super().__init__()
        self.base = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(8), layers.BatchNormalization()])
''', '''base_model = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(8), layers.BatchNormalization()])
base_model.trainable = False


class Classifier(keras.Model):
    def __init__(self, base):
        super().__init__()
        self.base = base
''').replace("model = Classifier()", "model = Classifier(base_model)")

DRIVER = FIT_DATA + '''
if sys.argv[2] == "torch":
    import torch
    with torch.no_grad():  # the lazy sizes, in eval mode (no statistics moved)
        model.eval()(torch.zeros(1, 6))
    linears = [model.base[0], model.head]
    with torch.no_grad():
        for m, (k, b) in zip(linears, (W[:2], W[2:])):
            m.weight.copy_(torch.tensor(k).T)
            m.bias.copy_(torch.tensor(b))
    norm = model.base[1]
    stats = lambda: [norm.running_mean.tolist(), norm.running_var.tolist(), norm.weight.tolist(), norm.bias.tolist()]
    kernels = lambda: [m.weight.detach().numpy().T.tolist() for m in linears] + [
        m.bias.detach().numpy().tolist() for m in linears]
else:
    model(x[:1])
    model.base.layers[0].set_weights(W[:2])
    model.head.set_weights(W[2:])
    norm = model.base.layers[1]
    stats = lambda: [np.asarray(v).tolist() for v in (norm.moving_mean, norm.moving_variance, norm.gamma, norm.beta)]
    dense = [model.base.layers[0], model.head]
    kernels = lambda: [d.get_weights()[0].tolist() for d in dense] + [d.get_weights()[1].tolist() for d in dense]
h, ev, pred = train(x, y)
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "predict": np.asarray(pred).tolist(), "kernels": kernels(),
                              "stats": stats(), "start": W[0].tolist()}))
'''


def _same_step(tmp_path, source):
    keras_out, torch_out = _run(tmp_path, source, DRIVER)
    compare_fit(keras_out, torch_out, ["loss"], atol=1e-5)
    for a, b in zip(keras_out["stats"], torch_out["stats"], strict=True):
        np.testing.assert_allclose(b, a, rtol=2e-4, atol=2e-5)
    # the backbone ran in inference mode on both sides: its moving statistics never moved
    assert keras_out["stats"][:2] == torch_out["stats"][:2] == [[0.0] * 8, [1.0] * 8]
    return keras_out, torch_out


def test_a_backbone_called_with_training_false_trains_in_inference_mode(tmp_path):
    keras_out, torch_out = _same_step(tmp_path, SOURCE)
    # (trainable: its weights still learn, in inference mode)
    assert not np.allclose(keras_out["kernels"][0], keras_out["start"])
    assert not np.allclose(torch_out["stats"][2], 1.0)


def test_a_frozen_backbone_called_with_training_false(tmp_path):
    keras_out, torch_out = _same_step(tmp_path, FROZEN)
    np.testing.assert_allclose(torch_out["kernels"][0], torch_out["start"])  # frozen on both sides
    np.testing.assert_allclose(keras_out["kernels"][0], keras_out["start"])
    assert torch_out["stats"][2:] == [[1.0] * 8, [0.0] * 8]


def test_a_frozen_backbone_given_to_the_model(tmp_path):
    assert GIVEN != SOURCE
    keras_out, torch_out = _same_step(tmp_path, GIVEN)
    np.testing.assert_allclose(torch_out["kernels"][0], torch_out["start"])
    np.testing.assert_allclose(keras_out["kernels"][0], keras_out["start"])


def test_the_translation_writes_train():
    r = tx(FROZEN)
    assert "        x = self.base(inputs)\n" in r.output
    assert ("    def train(self, mode=True):\n        super().train(mode)\n"
            "        # called with training=False: inference mode whatever the model's, as Keras runs it\n"
            "        self.base.eval()\n        return self\n") in r.output
    assert "self.base.requires_grad_(False)" in r.output
    said = [f for f in r.findings if "in Classifier.train(), written" in f.message]
    assert [f.severity for f in said] == [Severity.INFO] and said[0].line == 13


MC = '''
from tensorflow import keras
from tensorflow.keras import layers


class MCDropout(keras.Model):
    def __init__(self):
        super().__init__()
        self.base = keras.Sequential([keras.Input(shape=(6,)), layers.Dense(8), layers.BatchNormalization()])
        self.drop = layers.Dropout(0.5)
        self.head = layers.Dense(1)

    def call(self, inputs, training=None):
        x = self.base(inputs, training=False)
        return self.head(self.drop(x, training=True))
'''

MODES = '''
import json, sys
import torch
sys.path.insert(0, sys.argv[1])
from model import MCDropout
model = MCDropout()
with torch.no_grad():
    model(torch.ones(2, 6))
modes = {}
for name, set_mode in (("train", model.train), ("eval", model.eval)):
    back = set_mode()
    modes[name] = [back is model, model.training, model.base.training, model.base[1].training, model.drop.training,
                   model.head.training]
x = torch.ones(64, 6)
with torch.no_grad():
    modes["draws_differ"] = not torch.equal(model(x), model(x))  # in eval mode: dropout still on
print("RESULT " + json.dumps(modes))
'''


def test_monte_carlo_dropout_stays_in_training_mode(tmp_path):
    r = tx(MC)
    assert not [f for f in r.findings if f.severity is Severity.ERROR]
    assert "        return self.head(self.drop(x))\n" in r.output
    out = run_side(tmp_path / "torch", "torch", textwrap.dedent(r.output), MODES, "torch")
    # [train() returns the model, model, base, its BatchNorm, drop, head]
    assert out["train"] == [True, True, False, False, True, True]
    assert out["eval"] == [True, False, False, False, True, False]
    assert out["draws_differ"] is True
