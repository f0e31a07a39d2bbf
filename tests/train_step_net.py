"""The two-Dense ``Net`` with its own ``train_step`` that the custom-train-step tests share
(test_train_step_compiled: Keras 2's compiled_loss/compiled_metrics; test_train_step_compute_loss: Keras 3's
compute_loss), the driver settings that train it (for test_train_step.DRIVER), and the comparison of the two
sides' results.
"""
from __future__ import annotations

import numpy as np

_NET = '''
import tensorflow as tf
{imports}


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.d1 = layers.Dense(5, activation="tanh", kernel_regularizer=keras.regularizers.l2(0.05))
        self.d2 = layers.Dense(3)

    def call(self, x):
        return self.d2(self.d1(x))

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = {loss}
        grads = tape.gradient(loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
{result}


net = Net()
{compile}
'''


def net_source(*, imports: str, loss: str, result: str, compile: str) -> str:
    """Net's module: ``imports`` (keras and layers), ``loss`` the train step's loss expression, ``result`` the
    step's last lines (indented), ``compile`` the lines after ``net = Net()``."""
    return _NET.format(imports=imports, loss=loss, result=result, compile=compile)


#: the labels of the driver's x: one of 3 classes
LABELS = "\ny = np.argmax(x[:, :3] + 0.3 * x[:, 1:4], axis=1)"

#: the weights of a Dense(5) on 4 features and a Dense(3)
SHAPES = [("k0", (4, 5)), ("b0", (5,)), ("k1", (5, 3)), ("b1", (3,))]


def net_driver(n: int, epochs: int) -> dict:
    """test_train_step.DRIVER's settings that build ``net`` (called once to create its weights), set SHAPES' weights
    and fit it on ``n`` samples of 4 features with LABELS, 4 a batch, for ``epochs`` epochs."""
    return {
        "shapes": SHAPES, "n": n, "width": 4,
        "x_map": LABELS + "\n_ = net(x[:1] if 'torch' not in sys.argv[2] else __import__('torch').tensor(x[:1]))",
        "models": "([*net.modules()] if 'torch' in sys.argv[2] else net,)",
        "fit": f"h = net.fit(x, y, batch_size=4, epochs={epochs}, shuffle=False, verbose=0)\nextra = None"}


def same_fit(keras_out: dict, torch_out: dict, keys: list[str]) -> None:
    """The histories hold exactly ``keys`` on both sides and agree within 1e-5 relative, as do the weights after the
    fit (as many on each side)."""
    assert sorted(keras_out["history"]) == sorted(torch_out["history"]) == sorted(keys)
    for k, v in keras_out["history"].items():
        np.testing.assert_allclose(torch_out["history"][k], v, rtol=1e-5, atol=1e-6, err_msg=k)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"], strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
