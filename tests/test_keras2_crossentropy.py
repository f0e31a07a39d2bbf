"""Cross-entropies of probabilities as each Keras generation computes them (issue 9).

Keras 3 clips the probabilities to [1e-7, 1 - 1e-7] and takes -(y log p + (1 - y) log(1 - p)): nn.BCELoss /
F.binary_cross_entropy of the clipped probabilities. Keras 2 (tf_keras, backend.binary_crossentropy) clips them
too and then adds 1e-7 inside each log, -(y log(p + 1e-7) + (1 - y) log(1 - p + 1e-7)): a clipped probability's
loss differs by up to log 2, so Keras 2 code gets a written keras2_binary_crossentropy (and the Keras2BCELoss module
over it). Both generations compute the categorical cross-entropy alike (divide by the sum, clip, -sum(y log p)).

Numbers: the loss object, the per-sample function and a compiled model's evaluate (compile's string, on a Dense
that passes the probabilities through) computed by real Keras (Keras 3, and tf_keras for the Keras 2 program) and
by the translation (TensorFlow unimportable there) on probabilities at, near and away from 0 and 1, compared.
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from helpers import error_findings
from runners import keras_and_torch

from fwport.core.pipeline import translate_source

SRC = '''
import numpy as np
import keras
from keras import layers

bce = keras.losses.BinaryCrossentropy()
cce = keras.losses.CategoricalCrossentropy()
model = keras.Sequential([keras.Input(shape=(1,)), layers.Dense(1)])
model.compile(optimizer="sgd", loss="binary_crossentropy")
classes = keras.Sequential([keras.Input(shape=(3,)), layers.Dense(3)])
classes.compile(optimizer="sgd", loss="categorical_crossentropy")


def losses(y, p, one_hot, q):
    return [bce(y, p), keras.losses.binary_crossentropy(y, p), cce(one_hot, q),
            keras.losses.categorical_crossentropy(one_hot, q)]


def evaluated(y, p, one_hot, q):
    return [model.evaluate(p, y, batch_size=len(p), verbose=0), classes.evaluate(q, one_hot, batch_size=len(q), verbose=0)]
'''

KERAS2 = SRC.replace("import keras\nfrom keras import layers", "import tf_keras as keras\nfrom tf_keras import layers")

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
p = np.array([0.0, 1e-9, 1e-7, 3e-7, 0.01, 0.5, 0.99, 1 - 3e-7, 1 - 1e-7, 1.0] * 2, "float32")[:, None]
y = np.array([0.0] * 10 + [1.0] * 10, "float32")[:, None]
q = np.array([[1.0, 0.0, 0.0], [1e-9, 1 - 1e-9, 0.0], [0.2, 0.2, 0.2], [0.5, 0.3, 0.2], [1e-8, 0.4, 0.6]] * 3,
             "float32")
one_hot = np.eye(3, dtype="float32")[np.arange(15) % 3]
if sys.argv[2] == "torch":
    import torch
    with torch.no_grad():
        for m in (model, classes):
            m[0].weight.copy_(torch.eye(m[0].weight.shape[0]))
            m[0].bias.zero_()
    args = [torch.tensor(a) for a in (y, p, one_hot, q)]
    values = [v.detach().numpy().tolist() for v in losses(*args)]
else:
    model.set_weights([np.eye(1, dtype="float32"), np.zeros(1, "float32")])
    classes.set_weights([np.eye(3, dtype="float32"), np.zeros(3, "float32")])
    values = [np.asarray(v).tolist() for v in losses(y, p, one_hot, q)]
print("RESULT " + json.dumps({"losses": values, "evaluate": evaluated(y, p, one_hot, q)}))
'''


def _tx(src: str):
    r = translate_source(textwrap.dedent(src).lstrip("\\n"), "model.py")
    assert translate_source(r.output, "model.py").output == r.output
    assert error_findings(r) == [], error_findings(r)
    return r


def _compare(keras_out, torch_out):
    # atol: a loss near 0 is -log(1 - 1e-7), whose float32 value depends on the order of the operations by an ulp of
    # 1 (torch's BCE takes log1p; nn.CrossEntropyLoss renormalises the clipped probabilities): about 1.2e-7
    for k, t in zip(keras_out["losses"], torch_out["losses"], strict=True):
        np.testing.assert_allclose(t, k, rtol=1e-6, atol=2.5e-7)
    np.testing.assert_allclose(torch_out["evaluate"], keras_out["evaluate"], rtol=1e-6)


def test_keras3_crossentropies_of_probabilities_match_keras(tmp_path):
    keras_out, torch_out = keras_and_torch(tmp_path, SRC, _tx(SRC).output, DRIVER)
    _compare(keras_out, torch_out)


def test_keras2_crossentropies_of_probabilities_match_tf_keras(tmp_path):
    pytest.importorskip("tf_keras")
    keras_out, torch_out = keras_and_torch(tmp_path, KERAS2, _tx(KERAS2).output, DRIVER)
    _compare(keras_out, torch_out)
    # the two generations differ where a probability is clipped (Keras 2's epsilon inside the log)
    (tmp_path / "3").mkdir()
    keras3, _ = keras_and_torch(tmp_path / "3", SRC, _tx(SRC).output, DRIVER)
    per_sample = np.abs(np.subtract(keras_out["losses"][1], keras3["losses"][1]))
    assert per_sample.max() > 0.5 and abs(keras_out["evaluate"][0] - keras3["evaluate"][0]) > 0.05


def test_keras2_code_gets_the_written_formula():
    out = _tx(KERAS2).output
    assert "bce = Keras2BCELoss()" in out and "def keras2_binary_crossentropy(input, target, graph=False):" in out
    assert "keras2_binary_crossentropy(p, y.float()).mean(-1)" in out
    assert "loss_fn = Keras2BCELoss(graph=True)" in out  # compile: as its tf.function computes it
    out3 = _tx(SRC).output
    assert "Keras2BCELoss" not in out3 and "keras2_binary_crossentropy" not in out3


STEP = '''
import tensorflow as tf
import tf_keras as keras
from tf_keras import layers

model = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(1)])
loss_fn = keras.losses.BinaryCrossentropy()
metric = keras.metrics.BinaryCrossentropy()
optimizer = keras.optimizers.SGD(0.1)


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        p = model(x, training=True)
        loss = loss_fn(y, p)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    metric.update_state(y, p)
    return loss
'''


def test_keras2_differences_left_are_warned():
    """A Keras 2 loss object called in a tf.function (the graph computes 1 - p + 1e-7 as (1 + 1e-7) - p) and Keras 2's
    BinaryCrossentropy metric (the written class follows Keras 3): warnings that give the size of the difference."""
    r = _tx(STEP)
    warned = [f.message for f in r.findings if f.code == "approximate"]
    assert any(m.startswith("loss_fn(y, p) in a tf.function") and "0.09" in m for m in warned), warned
    assert any(m.startswith("BinaryCrossentropy metric in Keras 2 code") and "log 2" in m for m in warned), warned
    assert not [f for f in _tx(STEP.replace("import tf_keras as keras\nfrom tf_keras import layers",
                                            "import keras\nfrom keras import layers")).findings
                if f.code == "approximate" and ("tf.function" in f.message or "Keras 2 code" in f.message)]
