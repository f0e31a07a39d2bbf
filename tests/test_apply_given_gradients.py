"""``opt.apply_gradients([(grads, image)])`` / ``opt.apply_gradients(zip(g, [w, b]))`` apart from any tape step
(issue 9): a style transfer's training of one image, the gradients computed in a function of the file. The
optimizer is created over the variables (torch leaf tensors) and the statement becomes each gradient written to
its variable's ``.grad`` then ``opt.step()`` (and the schedule's scheduler step). Before, a list of pairs left the
optimizer an error, and a zip of gradients computed elsewhere stayed ``opt.apply_gradients(...)`` on a torch
optimizer with no finding (an AttributeError when run).

Numbers: each program runs under TensorFlow and translated (TensorFlow unimportable there) and the trained
variables agree."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest
from runners import keras_and_torch

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

STYLE = '''
import numpy as np
import tensorflow as tf
from tensorflow import keras

target = tf.reshape(tf.linspace(-1.0, 1.0, 12), (1, 3, 4))


def start():
    return keras.ops.convert_to_tensor(np.ones((1, 3, 4), dtype="float32"))


optimizer = keras.optimizers.SGD(
    keras.optimizers.schedules.ExponentialDecay(initial_learning_rate=0.3, decay_steps=2, decay_rate=0.5)
)
image = tf.Variable(start())


def compute_loss_and_grads(image):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(image - target)) + 0.1 * tf.reduce_sum(tf.abs(image))
    grads = tape.gradient(loss, image)
    return loss, grads


for i in range(5):
    loss, grads = compute_loss_and_grads(image)
    optimizer.apply_gradients([(grads, image)])
'''

ZIPPED = '''
import tensorflow as tf

w = tf.Variable(tf.constant([0.5, -1.0, 2.0]))
b = tf.Variable(tf.zeros([1]))
opt = tf.keras.optimizers.Adam(0.05)


def grads_of(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(tf.reduce_sum(x * w) + b - 1.0))
    return tape.gradient(loss, [w, b])


for step in range(4):
    g = grads_of(tf.constant([1.0, 2.0, 3.0]))
    opt.apply_gradients(zip(g, [w, b]))
'''

DRIVER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import model
out = {}
for name in sys.argv[3].split(","):
    v = getattr(model, name)
    out[name] = (v.detach().numpy() if hasattr(v, "detach") else v.numpy()).ravel().tolist()
print("RESULT " + json.dumps(out))
'''


@pytest.mark.parametrize("source, names, expected", [
    (STYLE, "image", "image.grad = grads\n    optimizer.step()\n    scheduler.step()"),  # (the optimizer moved below
    # image: start(), called in between, reads keras, which nothing rebinds)
    (ZIPPED, "w,b", "for param, grad in zip([w, b], g):\n        param.grad = grad\n    opt.step()"),
], ids=["pairs-and-schedule", "zip"])
def test_given_gradients_train_as_tensorflow(tmp_path, source, names, expected):
    r = translate_source(textwrap.dedent(source), "model.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], [f.message for f in r.findings]
    assert "apply_gradients" not in r.output and "tensorflow" not in r.output, r.output
    assert expected in r.output, r.output
    driver = DRIVER.replace("sys.argv[3]", repr(names))
    tf_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(source), r.output, driver)
    for name in names.split(","):
        np.testing.assert_allclose(torch_out[name], tf_out[name], rtol=1e-5, atol=1e-6)
    start = {"image": [1.0] * 12, "w": [0.5, -1.0, 2.0], "b": [0.0]}
    assert any(not np.allclose(tf_out[n], start[n]) for n in names.split(","))  # it trained


def test_gradients_of_variables_it_was_not_created_over_stay_as_written():
    """An apply_gradients on variables the optimizer is not created over (two different lists) keeps the
    optimizer's error: no step is written."""
    src = textwrap.dedent('''
        import tensorflow as tf
        w = tf.Variable(tf.ones([2]))
        v = tf.Variable(tf.ones([2]))
        opt = tf.keras.optimizers.SGD(0.1)
        def step(g):
            opt.apply_gradients([(g, w)])
            opt.apply_gradients([(g, v)])
    ''')
    r = translate_source(src, "m.py")
    assert any(f.severity is Severity.ERROR and "opt = " in f.message for f in r.findings)
    assert ".grad = " not in r.output


def test_pairs_on_a_function_parameter_stay_an_error():
    """``opt.apply_gradients([(grad, image)])`` where ``image`` is a parameter of the step function (TensorFlow's
    style-transfer tutorial): the variable is whatever the callers pass, not the module's ``image``, so the
    optimizer is not created over it (an error), and the tape step is refused."""
    src = textwrap.dedent('''
        import tensorflow as tf
        image = tf.Variable(tf.ones([2]))
        opt = tf.keras.optimizers.Adam(0.02)
        def train_step(image):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(image ** 2)
            grad = tape.gradient(loss, image)
            opt.apply_gradients([(grad, image)])
        train_step(image)
    ''')
    r = translate_source(src, "m.py")
    errors = [f.message for f in r.findings if f.severity is Severity.ERROR]
    assert any(m.startswith("opt = ") for m in errors), errors
    assert "torch.optim.Adam" not in r.output
