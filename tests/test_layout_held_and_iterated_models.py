"""A Sequential the passes made channels-first (NCHW) reached other than by its own name (passes/valuekinds.py):
held by a plain class (``self.model = model`` in ``__init__``, the class made as ``Trainer(build_model())``; its
``self.model(x)`` calls, in a GradientTape ``train_step`` too: ``_held_call``), and iterated out of a dict or list
the file writes out (``for name, m in models.items()``, ``for m in models.values()``, ``enumerate(nets)``, a
comprehension: ``_iterated``, ``_comp_infos``). Before, these calls fed Keras's channels-last data to the NCHW
module with no finding. The translation runs with TensorFlow blocked; Keras runs the original with the torch side's
weights, and the outputs (and the loss and weights of one SGD step) are compared."""
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


def build_features():
    return keras.Sequential([keras.Input(shape=(6, 6, 3)), layers.Conv2D(2, 3, padding="same")])


class Trainer:
    def __init__(self, model, features):
        self.model = model
        self.features = features
        self.optimizer = keras.optimizers.SGD(0.1)
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            logits = self.model(x, training=True)
            loss = self.loss_fn(y, logits)
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        return loss

    def logits(self, x):
        return self.model(x)

    def maps(self, x):
        return self.features(x)


x = np.random.RandomState(0).rand(2, 6, 6, 3).astype("float32")
y = tf.constant([1, 3])
trainer = Trainer(build_model(), build_features())
models = {"a": build_model(), "b": build_model()}
nets = [build_features(), build_features()]


def run_all():
    out = {"logits": trainer.logits(x), "maps": trainer.maps(x)}
    for name, m in models.items():
        out[name] = m(x)
    for i, net in enumerate(nets):
        out[f"n{i}"] = net(x)
    out["values"] = [m(x) for m in models.values()][1]
    out["items"] = {k: net(x) for k, net in models.items()}["a"]
    out["loss"] = trainer.train_step(x, y)
    out["after"] = trainer.logits(x)
    return out
'''

#: the translation's side: the weights of every model (torch's layout), then the program's calls
TORCH_DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import model as m
named = {"model": m.trainer.model, "features": m.trainer.features, "a": m.models["a"], "b": m.models["b"],
         "n0": m.nets[0], "n1": m.nets[1]}
np.savez(sys.argv[1] + "/weights.npz", **{f"{k}.{n}": v.detach().numpy() for k, net in named.items()
                                         for n, v in net.state_dict().items()})
print("RESULT " + json.dumps({k: v.detach().numpy().tolist() for k, v in m.run_all().items()}))
'''

#: Keras's side: the same program's models given the translation's weights
KERAS_DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import model as m
w = np.load(sys.argv[3])


def conv(layer, key):
    layer.set_weights([w[key + ".weight"].transpose(2, 3, 1, 0), w[key + ".bias"]])


def classifier(net, key):
    conv(net.layers[0], key + ".0")
    # torch flattens (C, H, W), Keras (H, W, C): the Dense rows in Keras's order
    k = w[key + ".4.weight"].reshape(5, 4, 3, 3).transpose(2, 3, 1, 0).reshape(36, 5)
    net.layers[-1].set_weights([k, w[key + ".4.bias"]])


for key, net in (("model", m.trainer.model), ("a", m.models["a"]), ("b", m.models["b"])):
    classifier(net, key)
for key, net in (("features", m.trainer.features), ("n0", m.nets[0]), ("n1", m.nets[1])):
    conv(net.layers[0], key + ".0")
print("RESULT " + json.dumps({k: np.asarray(v).tolist() for k, v in m.run_all().items()}))
'''


def _translate(program: str):
    r = translate_source(textwrap.dedent(program).lstrip(), "prog.py")
    return r, [f for f in r.findings if f.severity is Severity.ERROR]


@needs_both
def test_held_and_iterated_channels_first_models_match_keras(tmp_path):
    r, errors = _translate(PROGRAM)
    assert not errors, [f.message for f in errors]
    out = r.output
    assert "return self.model(as_float32(x).movedim(-1, 1))" in out
    assert "return self.features(as_float32(x).movedim(-1, 1)).movedim(1, -1)" in out
    assert "logits = self.model(as_float32(x).movedim(-1, 1))" in out  # (in train_step)
    assert 'out[f"n{i}"] = net(as_float32(x).movedim(-1, 1)).movedim(1, -1)' in out
    assert 'out["values"] = [m(as_float32(x).movedim(-1, 1)) for m in models.values()][1]' in out
    torch_result = run_side(tmp_path / "torch", "torch", out, TORCH_DRIVER, "torch")
    keras_result = run_side(tmp_path / "keras", "keras", textwrap.dedent(PROGRAM).lstrip(), KERAS_DRIVER, "keras",
                            str(tmp_path / "torch" / "weights.npz"))
    for key in ("logits", "maps", "a", "b", "n0", "n1", "values", "items", "loss", "after"):
        assert np.shape(torch_result[key]) == np.shape(keras_result[key]), key
        np.testing.assert_allclose(torch_result[key], keras_result[key], rtol=1e-5, atol=1e-5, err_msg=key)


HEADER = '''
import numpy as np
import keras
from keras import layers


def build_model():
    return keras.Sequential([keras.Input(shape=(6, 6, 3)), layers.Conv2D(4, 3, padding="same"), layers.Flatten(),
                             layers.Dense(5)])


def build_features():
    return keras.Sequential([keras.Input(shape=(6, 6, 3)), layers.Conv2D(2, 3, padding="same")])


'''


def _errors_by_line(program: str) -> dict[int, str]:
    """The error findings of HEADER + ``program``, by their line in ``program`` (its first, empty line 1)."""
    _, errors = _translate(HEADER + textwrap.dedent(program))
    return {f.line - HEADER.count("\n") + 1: f.message for f in errors}


def test_keras_model_methods_on_a_model_a_plain_class_holds_are_errors():
    """``self.model.fit(...)`` where ``self.model`` holds a model the translation makes a torch module (which has no
    fit): an error at each line, where before the call was left as written with no finding."""
    errors = _errors_by_line('''
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.model.compile(optimizer="adam", loss="mse")

            def train(self, x, y):
                self.model.fit(x, y, epochs=1, verbose=0)

            def infer(self, x):
                return self.model.predict(x, verbose=0)


        trainer = Trainer(build_model())
    ''')
    assert sorted(errors) == [5, 8, 11], errors
    assert ".fit()" in errors[8] and "torch module" in errors[8]


def test_a_plain_class_given_a_channels_first_model_and_an_unknown_value_is_an_error():
    errors = _errors_by_line('''
        class Runner:
            def __init__(self, model):
                self.model = model

            def run(self, x):
                return self.model(x)


        a = Runner(build_features())
        b = Runner(lambda t: t * 2.0)
    ''')
    assert list(errors) == [7], errors
    assert "self.model" in errors[7] and "Runner" in errors[7]


def test_a_class_with_a_base_or_an_attribute_of_no_model_is_left_alone():
    """A Keras callback's ``self.model`` (Keras sets it) and a plain class's attribute given no model of the file are
    not followed: no edit, no finding."""
    program = HEADER + textwrap.dedent('''
        class Logger(keras.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):
                self.model.save_weights("w.weights.h5")


        class Holder:
            def __init__(self, fn):
                self.fn = fn

            def run(self, x):
                return self.fn(x)


        h = Holder(np.tanh)
        y = h.run(np.ones((2, 6, 6, 3)))
    ''')
    r, _ = _translate(program)
    assert "return self.fn(x)" in r.output
    assert not [f for f in r.findings if "self.fn" in f.message or "Holder" in f.message]


def test_a_loop_over_models_of_different_layouts_is_an_error():
    """``for m in models.values(): m(x)`` over a classifier and a feature extractor (NCHW maps out): its input can
    be moved for both, its output not: an error at the call."""
    errors = _errors_by_line('''
        x = np.random.rand(2, 6, 6, 3).astype("float32")
        models = {"cls": build_model(), "maps": build_features()}
        for m in models.values():
            y = m(x)
    ''')
    assert list(errors) == [5], errors
    assert "different layouts" in errors[5]
