"""``optimizer = keras.optimizers.X(...)`` written again before each training loop of a guide (keras-io's
intro_to_keras_for_researchers: one model after another, the same name each time): each binding becomes a torch
optimizer over the parameters of the apply_gradients calls it reaches, those up to the next binding, at the module's
top level or in a top-level function the module calls there (training._Training._reached_variables). Before, every
binding was the error "... cannot tell which (it updates first.trainable_variables and second.trainable_variables)".
Where which binding a call reads is not plain (a function called after the next binding too, a compile given the
name), it stays that error. Checked numerically: both models' losses and weights after their steps."""
from __future__ import annotations

import json

import numpy as np

from fwport.core.pipeline import translate_source
from helpers import error_messages, needs
from runners import python

SRC = '''import numpy as np
import tensorflow as tf
from tensorflow import keras

x = tf.constant(np.linspace(-1, 1, 24, dtype="float32").reshape(8, 3))
y = tf.constant(np.linspace(0, 1, 8, dtype="float32").reshape(8, 1))

first = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(1)])
init(first, 0)
optimizer = keras.optimizers.SGD(learning_rate=0.1, momentum=0.5)
first_losses = []
for step in range(3):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(first(x) - y))
    grads = tape.gradient(loss, first.trainable_variables)
    optimizer.apply_gradients(zip(grads, first.trainable_variables))
    first_losses.append(float(loss))

second = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(1)])
init(second, 1)
optimizer = keras.optimizers.Adam(learning_rate=0.05)


def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(second(x) - y))
    grads = tape.gradient(loss, second.trainable_variables)
    optimizer.apply_gradients(zip(grads, second.trainable_variables))
    return loss


second_losses = [float(train_step(x, y)) for _ in range(3)]
'''
KERNELS = [[[0.2], [-0.1], [0.3]], [[-0.4], [0.5], [0.1]]]
INIT = {"keras": f"""KERNELS = {KERNELS}
def init(m, i):
    import numpy as np
    m.set_weights([np.array(KERNELS[i], 'float32'), np.zeros(1, 'float32')])
def kernel(m):
    return m.get_weights()[0].reshape(-1).tolist() + m.get_weights()[1].tolist()
""", "torch": f"""import sys
sys.modules['tensorflow'] = None
import torch
KERNELS = {KERNELS}
def init(m, i):
    with torch.no_grad():
        m[0].weight.copy_(torch.tensor(KERNELS[i]).T), m[0].bias.zero_()
def kernel(m):
    return m[0].weight.detach().numpy().T.reshape(-1).tolist() + m[0].bias.detach().numpy().tolist()
"""}
PRINT = '''
import json
print("RESULT" + json.dumps({"losses": [first_losses, second_losses], "kernels": [kernel(first), kernel(second)]}))
'''


def _run(src: str, tmp_path, name: str, side: str) -> dict:
    path = tmp_path / name
    path.write_text(INIT[side] + src + PRINT)
    p = python(path, side=side, timeout=300, env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""})
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert line is not None, p.stdout + p.stderr
    return json.loads(line[len("RESULT"):])


def test_each_binding_takes_the_parameters_of_its_own_loop():
    r = translate_source(SRC, "f.py")
    assert not error_messages(r), error_messages(r)
    assert "optimizer = torch.optim.SGD(first.parameters(), lr=0.1, momentum=0.5)" in r.output
    assert "optimizer = torch.optim.Adam(second.parameters(), lr=0.05, eps=1e-07)" in r.output


#: the guide's shape: the training function defined beside a keras.Model subclass's own train_step method
BESIDE_METHOD = SRC.replace("first = keras.Sequential", '''class Net(keras.Model):
    def train_step(self, data):
        return super().train_step(data)


first = keras.Sequential''')


def test_a_method_of_the_same_name_does_not_hide_the_function():
    r = translate_source(BESIDE_METHOD, "f.py")
    assert "optimizer = torch.optim.Adam(second.parameters(), lr=0.05, eps=1e-07)" in r.output, error_messages(r)


@needs("tensorflow", "torch")
def test_each_rebound_optimizer_trains_as_keras(tmp_path):
    r = translate_source(SRC, "f.py")
    assert not error_messages(r), error_messages(r)
    keras = _run(SRC, tmp_path, "k.py", "keras")
    torch = _run(r.output, tmp_path, "t.py", "torch")
    for k, t in zip(keras["losses"], torch["losses"]):
        assert len(t) == 3 and k[0] != k[-1]
        np.testing.assert_allclose(t, k, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(torch["kernels"], keras["kernels"], rtol=1e-5, atol=1e-6)


#: keras-io's making_new_layers_and_models_via_subclassing: a tape loop with one binding, then the name bound again
#: and given to compile / fit
COMPILED = SRC[:SRC.index("optimizer = keras.optimizers.Adam")] + '''optimizer = keras.optimizers.Adam(learning_rate=0.05)
second.compile(optimizer, loss="mse")
history = second.fit(x, y, epochs=2, batch_size=4, shuffle=False, verbose=0)
second_losses = history.history["loss"]
'''


def test_a_later_binding_given_to_compile_is_its_models():
    r = translate_source(COMPILED, "f.py")
    assert not error_messages(r), error_messages(r)
    assert "optimizer = torch.optim.SGD(first.parameters(), lr=0.1, momentum=0.5)" in r.output
    assert "optimizer = torch.optim.Adam(second.parameters(), lr=0.05, eps=1e-07)" in r.output
    assert "fit(second, optimizer, loss_fn, x, y, batch_size=4, epochs=2" in r.output


@needs("tensorflow", "torch")
def test_the_loop_then_the_compiled_fit_train_as_keras(tmp_path):
    r = translate_source(COMPILED, "f.py")
    keras = _run(COMPILED, tmp_path, "k.py", "keras")
    torch = _run(r.output, tmp_path, "t.py", "torch")
    for k, t in zip(keras["losses"], torch["losses"]):
        assert len(t) in (2, 3) and k[0] != k[-1]
        np.testing.assert_allclose(t, k, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(torch["kernels"], keras["kernels"], rtol=1e-5, atol=1e-6)


def test_a_binding_given_to_a_compile_left_as_written_stays_keras():
    src = COMPILED.replace('second.compile(optimizer, loss="mse")', 'second.compile(optimizer, loss=object())')
    messages = error_messages(translate_source(src, "f.py"))
    assert any("optimizer = keras.optimizers.Adam(learning_rate=0.05)" in m and "which stays Keras's" in m
               for m in messages), messages


def _refusals(src: str) -> list[str]:
    return [m for m in error_messages(translate_source(src, "f.py")) if "cannot tell which" in m]


def test_a_function_called_after_the_next_binding_too_stays_an_error():
    src = SRC + "optimizer = keras.optimizers.SGD(learning_rate=0.1)\nlast = float(train_step(x, y))\n"
    refused = _refusals(src)
    assert len(refused) == 3 and all("first.trainable_variables and second.trainable_variables" in m
                                      for m in refused), refused


def test_a_function_passed_as_a_value_stays_an_error():
    src = SRC + "steps = [train_step]\n"
    assert len(_refusals(src)) == 2


def test_a_binding_given_to_compile_too_stays_an_error():
    src = SRC + "second.compile(optimizer, loss='mse')\n"
    assert _refusals(src)
