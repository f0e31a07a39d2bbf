"""A Keras loss object a layer keeps (``self.loss_fn = keras.losses.X(...)`` in ``__init__``) and calls with a
sample_weight, ``self.loss_fn(targets, logits, sample_weight)`` (keras-io's "endpoint layer" pattern): the
translation keeps a lambda in Keras's order that weighs the torch loss's elements as Keras's loss does
(``weighted_loss``: the weighted sum over the number of elements), and the plain torch loss without weights.

Numbers: a functional model ending in such a layer (its loss given to add_loss, the compile without a loss) is
trained two epochs by Keras and by its translation from the same weights, with non-uniform sample weights
(subprocesses): the History's losses, evaluate and the kernel after training agree."""
from __future__ import annotations

import textwrap

import numpy as np

from fwport.core.pipeline import translate_source
from helpers import error_lines as errors
from runners import compare_fit, keras_and_torch

SRC = '''
import numpy as np
import keras
from keras import layers


class LogisticEndpoint(layers.Layer):
    def __init__(self, name=None):
        super().__init__(name=name)
        self.loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)

    def call(self, logits, targets, sample_weight=None):
        loss = self.loss_fn(targets, logits, sample_weight)
        self.add_loss(loss)
        return keras.ops.sigmoid(logits)


inputs = keras.Input((4,), name="inputs")
logits = layers.Dense(2)(inputs)
targets = keras.Input((2,), name="targets")
sample_weight = keras.Input((1,), name="sample_weight")
preds = LogisticEndpoint()(logits, targets, sample_weight)
model = keras.Model([inputs, targets, sample_weight], preds)
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5))


def train(x, t, w):
    h = model.fit([x, t, w], batch_size=4, epochs=2, shuffle=False, verbose=0)
    return h.history, model.evaluate([x, t, w], verbose=0)
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(3)
K = (rng.normal(size=(4, 2)) * 0.7).astype("float32")
b = (rng.normal(size=2) * 0.1).astype("float32")
x = rng.normal(size=(10, 4)).astype("float32")
t = (rng.random(size=(10, 2)) > 0.5).astype("float32")
w = rng.uniform(0.0, 2.0, size=(10, 1)).astype("float32")  # (non-uniform: an unweighted loss differs)
if sys.argv[2] == "torch":
    import torch
    with torch.no_grad():
        model.fc.weight.copy_(torch.tensor(K).T)
        model.fc.bias.copy_(torch.tensor(b))
    kernels = lambda: [model.fc.weight.detach().numpy().T.tolist()]
else:
    dense = next(l for l in model.layers if isinstance(l, keras.layers.Dense))
    dense.set_weights([K, b])
    kernels = lambda: [dense.get_weights()[0].tolist()]
h, ev = train(x, t, w)
unweighted = train(x, t, np.ones_like(w))[1]
print("RESULT " + json.dumps({"history": h, "evaluate": ev, "kernels": kernels(), "unweighted": unweighted}))
'''


def test_a_kept_loss_object_called_with_sample_weight_trains_as_keras(tmp_path):
    src = textwrap.dedent(SRC).lstrip("\n")
    r = translate_source(src, "model.py")
    assert errors(r) == [], errors(r)
    assert "self.loss_fn = lambda y_true, y_pred, sample_weight=None: nn.BCEWithLogitsLoss()(" in r.output
    assert "weighted_loss(nn.BCEWithLogitsLoss(), y_pred, " in r.output and "def weighted_loss(" in r.output
    keras_out, torch_out = keras_and_torch(tmp_path, src, r.output, DRIVER)
    compare_fit(keras_out, torch_out, ["loss"])
    np.testing.assert_allclose(torch_out["unweighted"], keras_out["unweighted"], rtol=2e-4)
    assert abs(keras_out["evaluate"] - keras_out["unweighted"]) > 1e-3  # the weights change the loss


def test_a_kept_loss_object_with_another_third_argument_is_refused():
    # (a third argument by another keyword is no sample_weight: the loss object stays refused)
    src = textwrap.dedent(SRC).lstrip("\n").replace("self.loss_fn(targets, logits, sample_weight)",
                                                    "self.loss_fn(targets, logits, weights=sample_weight)")
    r = translate_source(src, "model.py")
    assert any("torch losses take (input, target)" in m for _, m in errors(r)), errors(r)
