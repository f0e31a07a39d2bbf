"""TensorFlow Addons' AdamW (rules/tf2torch/tfa-adam-w.toml): tfa decays each variable by weight_decay * p,
torch's AdamW by lr * weight_decay * p, so the translation writes weight_decay=wd / lr. tensorflow-addons
does not install beside Keras 3, so the reference is its update as its source writes it (0.23.0,
weight_decay_optimizers.py: the decay, then Keras 2's Adam with epsilon hat), stepped in NumPy on the
gradients the translated model computes."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

torch = pytest.importorskip("torch")

SOURCE = '''
import tensorflow as tf
import tensorflow_addons as tfa
from tensorflow import keras

model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(2)])
optimizer = tfa.optimizers.AdamW(weight_decay=0.05, learning_rate=0.01)


def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss
'''


def _tfa_adamw(params, grads, state, t, lr=0.01, wd=0.05, b1=0.9, b2=0.999, eps=1e-7):
    """One step of tfa.optimizers.AdamW as its source computes it."""
    out = []
    lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    for i, (p, g) in enumerate(zip(params, grads)):
        m, v = state.get(i, (np.zeros_like(p), np.zeros_like(p)))
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        state[i] = (m, v)
        out.append(p - wd * p - lr_t * m / (np.sqrt(v) + eps))
    return out


def test_tfa_adamw_steps_as_tfa_does():
    r = translate_source(textwrap.dedent(SOURCE).lstrip("\n"), "train.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "tfa" not in r.output and "tensorflow" not in r.output
    assert "weight_decay=0.05 / 0.01" in r.output
    ns: dict = {}
    exec(compile(r.output, "train.py", "exec"), ns)
    model, train_step = ns["model"], ns["train_step"]
    rng = np.random.default_rng(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.as_tensor(rng.normal(size=tuple(p.shape)), dtype=torch.float32))
    expected = [p.detach().numpy().astype(np.float64) for p in model.parameters()]
    undecayed = [e.copy() for e in expected]
    state, state_undecayed = {}, {}
    for t in range(1, 4):
        x = torch.as_tensor(rng.normal(size=(4, 3)), dtype=torch.float32)
        y = torch.as_tensor(rng.normal(size=(4, 2)), dtype=torch.float32)
        model.zero_grad()
        torch.mean(torch.square(model(x) - y)).backward()
        grads = [p.grad.detach().numpy().astype(np.float64) for p in model.parameters()]
        expected = _tfa_adamw(expected, grads, state, t)
        undecayed = _tfa_adamw(undecayed, grads, state_undecayed, t, wd=0.0)
        train_step(x, y)
        for p, e in zip(model.parameters(), expected):
            np.testing.assert_allclose(p.detach().numpy(), e, rtol=1e-5, atol=1e-6)
    # the decay is large enough that torch's own reading of weight_decay=0.05 would fail the comparison
    assert max(np.abs(a - b).max() for a, b in zip(expected, undecayed)) > 1e-2


def test_a_scheduled_rate_with_tfa_decay_is_an_error():
    src = textwrap.dedent(SOURCE).replace(
        "learning_rate=0.01)", "learning_rate=keras.optimizers.schedules.ExponentialDecay(0.01, 100, 0.9))")
    r = translate_source(src.lstrip("\n"), "train.py")
    errs = [f for f in r.findings if f.severity is Severity.ERROR]
    assert errs and any("not multiplied by the learning rate" in f.message and f.line == 6 for f in errs), errs


@pytest.mark.parametrize("line, package", [
    ("tfa.layers.Maxout(2)", "tensorflow_addons"),  # tfa.layers.GELU translates since tfmisc24
    ("hub.KerasLayer('https://tfhub.dev/x/1')", "tensorflow_hub"),
    ("keras_cv.layers.RandAugment(value_range=(0, 255))", "keras_cv"),
])
def test_a_library_built_on_tensorflow_is_never_passed_through(line, package):
    """A layer of tfa / TF Hub / KerasCV inside a translated Sequential would need TensorFlow at run time: an
    error that names the library and says what to use, and no import of it left unused."""
    alias = line.split(".")[0]
    src = (f"import {package} as {alias}\nfrom tensorflow import keras\n\n"
           f"model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(3), {line}])\n")
    r = translate_source(src, "m.py")
    errs = [f for f in r.findings if f.severity is Severity.ERROR]
    assert [f.line for f in errs] == [4], errs
    assert package in errs[0].message and "torch" in errs[0].message.lower(), errs[0].message
