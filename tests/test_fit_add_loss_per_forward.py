"""add_loss terms per forward (issue 9): Keras's ``model.losses`` after a forward hold the terms of that forward
alone, every call's (measured with Keras 3.15 and tf_keras 2.21: a layer called twice in one forward gives two
terms, a layer a forward skips gives none, even if an earlier forward called it; a layer nested in another gives its
own), and fit / evaluate add them to the loss. The translation lists each call's term on the module
(``self.added_losses = getattr(self, "added_losses", []) + [term]``); the written loops empty the lists before a
forward and add the sum of every module's after it.

Numbers: a subclassed model with a layer called twice, a layer called in training only (the stale term of the
last training batch must not reach val_loss / evaluate), an add_loss under ``if training:`` in a nested layer and
add_loss in a loop of the model's own call is trained two epochs by Keras 3 and by tf_keras and by its translations
from the same weights (subprocesses): the histories (loss, val_loss), evaluate and the kernels agree; with the
translation of main (the last call's term kept, the stale term read) they would not (checked below: the shared
layer's second call and the training-only layer both change Keras's numbers)."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from helpers import error_lines as errors
from runners import compare_fit, keras_and_torch, run_side

SRC = '''
import numpy as np
import keras
from keras import layers


class ActivityPenalty(layers.Layer):
    def __init__(self, rate):
        super().__init__()
        self.rate = rate

    def call(self, inputs):
        self.add_loss(self.rate * keras.ops.mean(keras.ops.square(inputs)))
        return inputs


class Gate(layers.Layer):
    def __init__(self, rate):
        super().__init__()
        self.rate = rate
        self.inner = ActivityPenalty(0.2)

    def call(self, inputs, training=None):
        if training:
            self.add_loss(self.rate * keras.ops.mean(keras.ops.abs(inputs)))
        return self.inner(inputs)


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.d1 = layers.Dense(5, activation="tanh")
        self.shared = ActivityPenalty(SHARED)
        self.d2 = layers.Dense(5, activation="tanh")
        self.train_only = ActivityPenalty(TRAIN_ONLY)
        self.gate = Gate(0.3)
        self.d3 = layers.Dense(3)

    def call(self, x, training=None):
        h = self.shared(self.d1(x))
        h = self.shared(self.d2(h))
        if training:
            h = self.train_only(h)
        h = self.gate(h, training=training)
        for scale in (0.01, 0.02):
            self.add_loss(scale * keras.ops.mean(keras.ops.abs(h)))
        return self.d3(h)


net = Net()
net.compile(optimizer=keras.optimizers.SGD(learning_rate=0.2),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def train(x, y):
    h = net.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0, validation_split=0.25)
    return h.history, net.evaluate(x, y, verbose=0)
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(3)
W = [(rng.normal(size=(4, 5)) * 0.5).astype("float32"), (rng.normal(size=5) * 0.1).astype("float32"),
     (rng.normal(size=(5, 5)) * 0.5).astype("float32"), (rng.normal(size=5) * 0.1).astype("float32"),
     (rng.normal(size=(5, 3)) * 0.5).astype("float32"), (rng.normal(size=3) * 0.1).astype("float32")]
x = rng.normal(size=(16, 4)).astype("float32")
y = rng.integers(0, 3, size=16)
if sys.argv[2] == "torch":
    import torch
    net(torch.zeros(1, 4))  # (lazy linears take their input sizes; this forward's terms must not reach fit's loss)
    linears = [m for m in net.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for m, (k, b) in zip(linears, (W[:2], W[2:4], W[4:]), strict=True):
            m.weight.copy_(torch.tensor(k).T)
            m.bias.copy_(torch.tensor(b))
    kernels = lambda: [m.weight.detach().numpy().T.tolist() for m in linears]
else:
    net(x[:1])
    net.set_weights(W)
    kernels = lambda: [w.numpy().tolist() for w in net.weights if len(w.shape) == 2]
h, ev = train(x, y)
print("RESULT " + json.dumps({"history": h, "evaluate": [ev] if np.ndim(ev) == 0 else ev, "kernels": kernels()}))
'''


def _src(shared: float = 0.4, train_only: float = 0.7, keras2: bool = False) -> str:
    src = textwrap.dedent(SRC).lstrip("\n").replace("SHARED", repr(shared)).replace("TRAIN_ONLY", repr(train_only))
    if keras2:  # tf_keras: keras.ops is Keras 3's; the same terms with tf's ops
        src = (src.replace("import keras\nfrom keras import layers", "import tensorflow as tf\nimport tf_keras as keras\n"
                           "from tf_keras import layers")
               .replace("keras.ops.mean", "tf.reduce_mean").replace("keras.ops.square", "tf.square")
               .replace("keras.ops.abs", "tf.abs"))
    return src


def _translated(src: str) -> str:
    r = translate_source(src, "model.py")
    assert errors(r) == [], errors(r)
    assert not [f for f in r.findings if f.severity.name == "WARNING" and "add_loss" in f.message], r.findings
    return r.output


def test_the_translation_lists_every_calls_term():
    out = _translated(_src())
    assert ('self.added_losses = getattr(self, "added_losses", []) + [self.rate * torch.mean(torch.square(inputs))]'
            in out)
    # under the if and in the loop: listed as they are made
    assert ("        if self.training:\n            self.added_losses = getattr(self, \"added_losses\", []) + "
            "[self.rate * torch.mean(torch.abs(inputs))]") in out
    assert "            self.added_losses = getattr(self, \"added_losses\", []) + [scale * torch.mean(torch.abs(h))]" in out
    # the written fit, evaluate and predict empty the lists before each forward; fit and evaluate read them after it
    assert out.count('vars(m).pop("added_losses", None)') == 3
    assert out.count('vars(m).pop("added_losses", ())') == 2


@pytest.mark.parametrize("keras2", [False, True], ids=["keras3", "tf_keras"])
def test_terms_of_each_forward_train_as_keras(tmp_path, keras2):
    if keras2:
        pytest.importorskip("tf_keras")
    src = _src(keras2=keras2)
    env = {"TF_USE_LEGACY_KERAS": "1"} if keras2 else {}
    keras_out, torch_out = keras_and_torch(tmp_path, src, _translated(src), DRIVER, **env)
    compare_fit(keras_out, torch_out, ["loss", "val_loss"])
    if keras2:
        return
    # the cases count in Keras's numbers: the shared layer's second term (main kept one call's) and the
    # training-only layer's term
    no_shared = run_side(tmp_path / "no_shared", "keras", _src(shared=0.0), DRIVER, "keras")
    assert keras_out["history"]["loss"][0] > no_shared["history"]["loss"][0] + 0.01
    no_train_only = run_side(tmp_path / "no_train_only", "keras", _src(train_only=0.0), DRIVER, "keras")
    assert keras_out["history"]["loss"][0] > no_train_only["history"]["loss"][0] + 0.01


def test_an_add_loss_in_a_nested_function_stays_an_error():
    src = _src().replace("        if training:\n            self.add_loss(self.rate * keras.ops.mean(keras.ops.abs(inputs)))",
                         "        def penalize(t):\n            self.add_loss(self.rate * keras.ops.mean(keras.ops.abs(t)))\n"
                         "        penalize(inputs)")
    assert "def penalize" in src
    errs = errors(translate_source(src, "model.py"))
    assert any("torch modules have no add_loss" in m for _, m in errs), errs


# a functional model of two outputs (the several-outputs fit / evaluate, which empty and read the lists likewise)
SEVERAL = '''
import numpy as np
import keras
from keras import layers


class ActivityPenalty(layers.Layer):
    def __init__(self, rate):
        super().__init__()
        self.rate = rate

    def call(self, inputs):
        self.add_loss(self.rate * keras.ops.mean(keras.ops.square(inputs)))
        return inputs



inputs = keras.Input(shape=(4,))
h = ActivityPenalty(0.5)(layers.Dense(5, activation="tanh")(inputs))
h = ActivityPenalty(0.3)(layers.Dense(5, activation="tanh")(h))
a = layers.Dense(2, name="a")(h)
b = layers.Dense(1, name="b")(h)
model = keras.Model(inputs, [a, b])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.2), loss=["mse", "mse"])


def train(x, y1, y2):
    h = model.fit(x, [y1, y2], batch_size=4, epochs=2, shuffle=False, verbose=0)
    return h.history, model.evaluate(x, [y1, y2], verbose=0)
'''

SEVERAL_DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(3)
shapes = [(4, 5), (5, 5), (5, 2), (5, 1)]
W = []
for s in shapes:
    W += [(rng.normal(size=s) * 0.5).astype("float32"), (rng.normal(size=s[1]) * 0.1).astype("float32")]
x = rng.normal(size=(16, 4)).astype("float32")
y1 = rng.normal(size=(16, 2)).astype("float32"); y2 = rng.normal(size=(16, 1)).astype("float32")
if sys.argv[2] == "torch":
    import torch
    model(torch.zeros(1, 4))
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for i, m in enumerate(linears):
            m.weight.copy_(torch.tensor(W[2 * i]).T); m.bias.copy_(torch.tensor(W[2 * i + 1]))
else:
    model.set_weights(W)
kernels = lambda: [m.weight.detach().numpy().T.tolist() for m in linears] if sys.argv[2] == "torch" else [
    w.numpy().tolist() for w in model.weights if len(w.shape) == 2]
h, ev = train(x, y1, y2)
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "kernels": kernels()}))
'''


def test_a_model_of_two_outputs_adds_the_terms_of_each_forward_as_keras(tmp_path):
    out = _translated(SEVERAL)
    assert out.count('vars(m).pop("added_losses", None)') == 3  # fit's, evaluate's and predict's forwards
    keras_out, torch_out = keras_and_torch(tmp_path, SEVERAL.lstrip("\n"), out, SEVERAL_DRIVER)
    compare_fit(keras_out, torch_out, ["a_loss", "b_loss", "loss"])
    assert keras_out["history"]["loss"][0] > sum(keras_out["history"][k][0] for k in ("a_loss", "b_loss")) + 0.1


def _terms(model) -> list:
    return [t for m in model.modules() for t in vars(m).get("added_losses", ())]


@pytest.mark.parametrize("case", ["subclassed", "two_outputs"])
def test_the_written_predict_leaves_the_last_forwards_terms(case):
    """Keras's model.losses after model.predict hold the terms of its last batch's forward (measured with Keras
    3.15: 5 for Net, 2 for the model of two outputs, after two predicts of two batches each); the written predict
    empties the lists before each forward as fit and evaluate do, so repeated predicts do not grow them."""
    import numpy as np
    import torch

    out = _translated(_src() if case == "subclassed" else SEVERAL)
    assert "def forward(*inputs):  # Keras's add_loss terms: this forward's alone" in out
    ns: dict = {}
    exec(compile(out, "model.py", "exec"), ns)
    model = ns["net"] if case == "subclassed" else ns["model"]
    x = np.random.default_rng(0).normal(size=(8, 4)).astype("float32")
    model(torch.zeros(1, 4))  # (lazy linears take their input sizes: a direct forward lists its terms)
    ns["predict"](model, x, batch_size=4, verbose=0)
    ns["predict"](model, x, batch_size=4, verbose=0)
    terms = _terms(model)
    assert len(terms) == (5 if case == "subclassed" else 2), len(terms)
    if case == "two_outputs":  # the last batch's: the first penalty's term is 0.5 * mean(square(its input))
        first = [m for m in model.modules() if type(m).__name__ == "ActivityPenalty"][0]
        with torch.no_grad():
            h = torch.tanh([m for m in model.modules() if isinstance(m, torch.nn.Linear)][0](torch.tensor(x[4:])))
        torch.testing.assert_close(first.added_losses[0], 0.5 * torch.mean(torch.square(h)))
