"""A Keras model with its own train_step whose layers have weight constraints (issue 8): Keras's
``optimizer.apply_gradients`` projects each updated variable with its constraint, so the translated tape step
calls the updated models' ``apply_constraints()`` after ``optimizer.step()``; checked against Keras numerically
(subprocesses, the same initial weights), and absent where no layer of the file has a constraint."""
from __future__ import annotations

import textwrap

import numpy as np

from helpers import error_lines as errors
from runners import keras_and_torch
from test_train_step import tx

MODEL = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


class AE(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.enc = layers.Dense(3, activation="tanh", kernel_constraint=keras.constraints.MaxNorm(1.0))
        self.dec = layers.Dense(6, activation="sigmoid")

    def call(self, x):
        return self.dec(self.enc(x))

    def train_step(self, data):
        with tf.GradientTape() as tape:
            reconstruction = self(data, training=True)
            total_loss = tf.reduce_mean(tf.reduce_sum(tf.square(data - reconstruction), axis=1))
        grads = tape.gradient(total_loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
        return {"rec": total_loss}


ae = AE()
ae.compile(optimizer=keras.optimizers.SGD(learning_rate=0.2))
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from model import *
rng = np.random.default_rng(0)
k0, b0 = (rng.normal(size=(6, 3)) * 1.5).astype("float32"), (rng.normal(size=3) * 0.1).astype("float32")
k1, b1 = (rng.normal(size=(3, 6)) * 0.5).astype("float32"), (rng.normal(size=6) * 0.1).astype("float32")
x = 1 / (1 + np.exp(-rng.normal(size=(12, 6)).astype("float32")))
if "torch" in sys.argv[2]:
    import torch
    ae(torch.tensor(x[:2]))  # (its Lazy layer built)
    with torch.no_grad():
        for lin, k, b in ((ae.enc[0], k0, b0), (ae.dec[0], k1, b1)):
            lin.weight.copy_(torch.tensor(k).T)
            lin.bias.copy_(torch.tensor(b))
    kernels = lambda: [ae.enc[0].weight.detach().numpy().T.tolist(), ae.dec[0].weight.detach().numpy().T.tolist()]
else:
    ae(x[:2])
    ae.enc.set_weights([k0, b0])
    ae.dec.set_weights([k1, b1])
    kernels = lambda: [ae.enc.get_weights()[0].tolist(), ae.dec.get_weights()[0].tolist()]
h = ae.fit(x, batch_size=4, epochs=2, shuffle=False, verbose=0)
print("RESULT " + json.dumps({"history": h.history, "kernels": kernels(), "k0": k0.tolist()}))
'''


def test_a_train_step_applies_the_constraints_as_keras(tmp_path):
    trans = tx(MODEL)
    assert errors(trans) == [], errors(trans)
    step = trans.output[trans.output.index("self.optimizer.step()"):]
    assert step.index("m.apply_constraints()") < step.index("return")  # after the step, in train_step
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(MODEL), trans.output, DRIVER)
    np.testing.assert_allclose(torch_out["history"]["rec"], keras_out["history"]["rec"], rtol=1e-5)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"], strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    # the constraint did something: the initial columns are longer than 1, the trained ones are not
    assert np.linalg.norm(np.array(keras_out["k0"]), axis=0).min() > 1.2
    assert np.linalg.norm(np.array(torch_out["kernels"][0]), axis=0).max() <= 1 + 1e-5


def test_no_constraint_loop_where_no_layer_has_one():
    out = tx(MODEL.replace(', kernel_constraint=keras.constraints.MaxNorm(1.0)', '')).output
    assert "self.optimizer.step()" in out and "apply_constraints" not in out


def test_a_tape_loop_of_the_file_applies_the_models_constraints():
    src = '''
    import tensorflow as tf
    from tensorflow import keras


    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.d = keras.layers.Dense(2, kernel_constraint=keras.constraints.NonNeg())

        def call(self, x):
            return self.d(x)


    model = Net()
    opt = keras.optimizers.SGD(0.1)
    for x in [tf.ones((2, 3))]:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
    '''
    out = tx(src).output
    loop = out[out.index("opt.step()"):]
    assert loop.startswith("opt.step()\n    for m in model.modules():") and "m.apply_constraints()" in loop


def test_an_add_weight_constraint_under_a_train_step_is_applied_there():
    src = MODEL.replace('''        self.enc = layers.Dense(3, activation="tanh", kernel_constraint=keras.constraints.MaxNorm(1.0))''',
                        '''        self.enc = layers.Dense(3, activation="tanh")
        self.scale = self.add_weight(name="scale", shape=(6,), initializer="ones", constraint="non_neg")''').replace(
        "return self.dec(self.enc(x))", "return self.dec(self.enc(x * self.scale))")
    trans = tx(src)
    assert errors(trans) == [], errors(trans)
    assert any("GradientTape steps fwport translates call" in f.message for f in trans.findings)
    step = trans.output[trans.output.index("self.optimizer.step()"):]
    assert step.index("m.apply_constraints()") < step.index("return")
