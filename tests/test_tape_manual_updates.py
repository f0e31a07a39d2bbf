"""Training without an optimizer object: a GradientTape whose gradients update the variables by hand
(``v.assign_sub(lr * g)``) over a tf.Module's ``variables``, a Keras model's ``trainable_variables``, variables
bound together (``w, b = tf.Variable(...), tf.Variable(...)``) or a list of them (``params = [w, b]``)
(passes/training.py `_plain_tape`, passes/variables.py): the same training run by TensorFlow and by its
translation, and the forms that stay errors."""
from __future__ import annotations

import importlib.util
import json
import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import python


def _translate(src: str):
    r = translate_source(textwrap.dedent(src).lstrip(), "t.py")
    return r.output, [f for f in r.findings if f.severity is Severity.ERROR]


PROGRAM = '''
import json

import numpy as np
import tensorflow as tf
from tensorflow import keras

rng = np.random.default_rng(3)
xs = tf.constant(rng.normal(size=(32, 3)).astype("float32"))
ys = tf.constant(rng.normal(size=32).astype("float32"))
w0 = rng.normal(size=(3, 1)).astype("float32")


class Linear(tf.Module):
    def __init__(self):
        self.w = tf.Variable(w0)
        self.b = tf.Variable(0.5)

    def __call__(self, x):
        return tf.squeeze(tf.matmul(x, self.w), axis=1) + self.b


def mse(pred, y):
    return tf.reduce_mean(tf.square(pred - y))


model = Linear()
lr = 0.1
module_losses = []
for step in range(6):
    with tf.GradientTape() as tape:
        loss = mse(model(xs), ys)
    grads = tape.gradient(loss, model.variables)
    for g, v in zip(grads, model.variables):
        v.assign_sub(lr * g)
    module_losses.append(float(loss))


def mlp_training(steps, lr):
    w1, b1 = tf.Variable(rng.normal(size=(3, 4)).astype("float32")), tf.Variable(tf.zeros([4]))
    w2, b2 = tf.Variable(rng.normal(size=(4, 1)).astype("float32")), tf.Variable(tf.zeros([1]))
    losses = []
    for step in range(steps):
        with tf.GradientTape() as tape:
            h = tf.nn.relu(xs @ w1 + b1)
            loss = tf.reduce_mean(tf.square(tf.squeeze(h @ w2 + b2, axis=1) - ys))
        grads = tape.gradient(loss, [w1, b1, w2, b2])
        for p, g in zip([w1, b1, w2, b2], grads):
            p.assign_sub(lr * g)
        losses.append(float(loss))
    return losses, [v.numpy().tolist() for v in (w1, b1, w2, b2)]


mlp_losses, mlp_variables = mlp_training(6, 0.05)

W = tf.Variable(w0)
c = tf.Variable(0.0)
params = [W, c]


def train_step(lr):
    with tf.GradientTape() as tape:
        loss = mse(tf.squeeze(xs @ W, axis=1) + c, ys)
    dW, dc = tape.gradient(loss, params)
    W.assign_sub(lr * dW)
    c.assign_sub(lr * dc)
    return loss


list_losses = [float(train_step(0.1)) for _ in range(6)]

net = keras.Sequential([
    keras.layers.Dense(4, activation="tanh", kernel_initializer=keras.initializers.Constant(0.3),
                       bias_initializer=keras.initializers.Constant(-0.1)),
    keras.layers.Dense(1, kernel_initializer=keras.initializers.Constant(0.2)),
])
net.build((None, 3))
keras_losses = []
for step in range(6):
    with tf.GradientTape() as tape:
        loss = mse(tf.squeeze(net(xs), axis=1), ys)
    grads = tape.gradient(loss, net.trainable_variables)
    for w, g in zip(net.trainable_variables, grads):
        w.assign_sub(0.1 * g)
    keras_losses.append(float(loss))

print(json.dumps({
    "module_losses": module_losses, "w": model.w.numpy().ravel().tolist(), "b": float(model.b.numpy()),
    "mlp_losses": mlp_losses, "mlp_variables": mlp_variables,
    "list_losses": list_losses, "W": W.numpy().ravel().tolist(), "c": float(c.numpy()),
    "keras_losses": keras_losses, "net": [sorted(v.numpy().ravel().tolist()) for v in net.trainable_variables],
}))
'''

_BLOCK = '''
import runpy, sys
for name in ("tensorflow", "keras", "tf_keras"):
    sys.modules[name] = None  # the translation must run without them
runpy.run_path(sys.argv[1], run_name="__main__")
'''

# Keras's Constant initializers are dropped by the translation (an info: initial values come with transferred
# weights); the torch run starts from the same constants, which fill a Dense kernel and its transpose alike
_SAME_START = ("with torch.no_grad():\n"
               "    net[0].weight.fill_(0.3); net[0].bias.fill_(-0.1); net[2].weight.fill_(0.2); net[2].bias.zero_()\n")


def _run(path, block: bool) -> dict:
    args = ("-c", _BLOCK, path) if block else (path,)  # the translation: in the torch worker, TensorFlow unimportable
    proc = python(*args, side="torch" if block else "keras", env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_manual_updates_translate_to_autograd_grad_without_errors():
    r = translate_source(PROGRAM.lstrip(), "manual.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], [f.message for f in r.findings]
    out = r.output
    assert "GradientTape" not in out and "tape.gradient" not in out and "tensorflow" not in out
    assert "grads = torch.autograd.grad(loss.sum(), [*model.parameters(), *model.buffers()])" in out
    assert "for g, v in zip(grads, [*model.parameters(), *model.buffers()]):" in out
    assert "grads = torch.autograd.grad(loss.sum(), [w1, b1, w2, b2])" in out
    assert "dW, dc = torch.autograd.grad(loss.sum(), params)" in out
    assert "torch.autograd.grad(loss.sum(), [p for p in net.parameters() if p.requires_grad])" in out
    # the tf.Module's __init__ gets nn.Module's, on the blank line after it
    assert "    def __init__(self):\n        super().__init__()\n        self.w = " in out
    assert "        self.b = nn.Parameter(torch.tensor(0.5))\n    def __call__(self, x):" in out


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("torch") is None,
                    reason="needs TensorFlow and PyTorch")
def test_manual_updates_train_like_tensorflow(tmp_path):
    r = translate_source(PROGRAM.lstrip(), "manual.py")
    start = "build_on_zeros(net, (None, 3))\n"
    assert start in r.output
    src, out = tmp_path / "tf_program.py", tmp_path / "torch_program.py"
    src.write_text(PROGRAM)
    out.write_text(r.output.replace(start, start + _SAME_START))
    tf_result, torch_result = _run(src, block=False), _run(out, block=True)
    for key in ("module_losses", "w", "b", "mlp_losses", "list_losses", "W", "c", "keras_losses"):
        assert torch_result[key] == pytest.approx(tf_result[key], rel=1e-5, abs=1e-6), key
    for a, b in zip(torch_result["mlp_variables"] + torch_result["net"], tf_result["mlp_variables"] + tf_result["net"]):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-5, atol=1e-6)
    for key in ("module_losses", "mlp_losses", "list_losses", "keras_losses"):
        assert tf_result[key][-1] < tf_result[key][0], key  # each loop did train


def test_gradients_of_a_tf_module_by_position_are_an_error():
    # TensorFlow lists a tf.Module's variables sorted by attribute name (b before w), the translated module's
    # parameters() come in the order they were assigned: an index into the gradients would pick another one
    out, errors = _translate("""
        import tensorflow as tf


        class Linear(tf.Module):
            def __init__(self):
                self.w = tf.Variable([[1.0], [2.0]])
                self.b = tf.Variable(0.0)

            def __call__(self, x):
                return tf.matmul(x, self.w) + self.b


        model = Linear()
        x = tf.ones([4, 2])
        for step in range(3):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(model(x) ** 2)
            grads = tape.gradient(loss, model.variables)
            model.b.assign_sub(0.1 * grads[0])
            model.w.assign_sub(0.1 * grads[1])
        """)
    assert len(errors) == 1, [f.message for f in errors]
    assert "sorted by attribute name" in errors[0].message and errors[0].line == 16
    assert "with tf.GradientTape() as tape:" in out  # left as written, under its comment
    lines = out.splitlines()
    at = next(i for i, t in enumerate(lines) if "with tf.GradientTape() as tape:" in t)
    assert lines[at - 1].lstrip().startswith("# fwport: unsupported-construct: tf.GradientTape: the gradients over")


def test_tf_module_init_without_super_gets_nn_module_s_and_later_comments_keep_their_lines():
    out, errors = _translate("""
        import tensorflow as tf
        class Scale(tf.Module):
            def __init__(self):
                self.s = tf.Variable(2.0)
            def __call__(self, x):
                return x * self.s
        class Shift(tf.Module):
            def __init__(self):
                '''Adds t.'''
                self.t = tf.Variable(1.0)
        class Kept(tf.Module):
            def __init__(self):
                super().__init__(name="kept")
                self.u = tf.Variable(1.0)
        m = Scale()
        print(m(3.0), tf.not_an_op(1))
        """)
    assert "    def __init__(self):\n        super().__init__()\n        self.s = nn.Parameter(" in out
    assert "        '''Adds t.'''\n        super().__init__()\n        self.t = nn.Parameter(" in out
    assert out.count("super().__init__()") == 3 and "__fwport_line__" not in out
    assert [f.line for f in errors] == [16]
    lines = out.splitlines()
    at = next(i for i, t in enumerate(lines) if t.startswith("print(m(3.0)"))
    assert lines[at - 1].startswith("# fwport: no-rule: tensorflow.not_an_op")


def test_a_tf_module_given_a_list_of_modules_is_an_error():
    # tf.Module tracks the variables of the modules in a list attribute; nn.Module registers none of them (only an
    # nn.ModuleList's), so the translated parameters() would miss them and the update would skip those layers
    src = textwrap.dedent("""
        import tensorflow as tf


        class Dense(tf.Module):
            def __init__(self, n_in, n_out):
                self.w = tf.Variable(tf.random.normal([n_in, n_out]))

            def __call__(self, x):
                return tf.nn.relu(x @ self.w)


        class MLP(tf.Module):
            def __init__(self, layers):
                self.layers = layers

            def __call__(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x


        model = MLP([Dense(3, 4), Dense(4, 1)])
        x = tf.random.normal([8, 3])
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(x) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        for g, v in zip(grads, model.trainable_variables):
            v.assign_sub(0.1 * g)
        """)
    out, errors = _translate(src)
    assert [f.line for f in errors] == [24], [f.message for f in errors]
    assert "nn.ModuleList" in errors[0].message and "model = MLP(...)" in errors[0].message
    assert "tape.gradient(loss," in out and "torch.autograd.grad" not in out
    # the same loop over a module that holds its layers itself is translated
    out, errors = _translate(src.replace("self.layers = layers", "self.layers = [Dense(3, 4), Dense(4, 1)]")
                             .replace("MLP([Dense(3, 4), Dense(4, 1)])", "MLP(None)"))
    assert not errors, [f.message for f in errors]
    assert "self.layers = nn.ModuleList([Dense(3, 4), Dense(4, 1)])" in out
    assert "grads = torch.autograd.grad(loss.sum(), [p for p in model.parameters() if p.requires_grad])" in out


def test_gradients_returned_to_an_optimizer_elsewhere_stay_an_error():
    # (the tf guide's custom training walkthrough) a function returns the gradients, its caller applies them
    # with apply_gradients: a torch optimizer has none, so the tape is not taken for a manual update
    out, errors = _translate("""
        import tensorflow as tf
        from tensorflow import keras

        model = keras.Sequential([keras.layers.Dense(3)])
        optimizer = keras.optimizers.SGD(0.01)


        def grad(model, x, y):
            with tf.GradientTape() as tape:
                loss_value = tf.reduce_mean((model(x) - y) ** 2)
            return loss_value, tape.gradient(loss_value, model.trainable_variables)


        loss_value, grads = grad(model, tf.ones([2, 4]), tf.zeros([2, 3]))
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        """)
    assert any("tf.GradientTape" in f.message and f.line == 9 for f in errors), [f.message for f in errors]
    assert "torch.autograd.grad" not in out
