"""An optimizer passed to a step function the file defines is created over the parameters of the model
the CALLER passes, followed up the chain of callers (training._through_calls). Keyed by the parameter's
name alone, `optimizer = SGD()` beside `def step(model, optimizer)` was created over `model.parameters()`
even where the caller trains another model with it: a translation that ran and trained the wrong model."""
from __future__ import annotations

import json

import pytest

from fwport.core.pipeline import translate_source
from helpers import error_messages, needs
from runners import python

STEP = '''import numpy as np
import tensorflow as tf


def train_one_step(model, optimizer, x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss

'''
TWO_MODELS = STEP + '''
model = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(1)])
critic = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(1)])
optimizer = tf.keras.optimizers.SGD(0.1)
x = tf.constant(np.arange(6, dtype="float32").reshape(2, 3) / 6)
y = tf.ones((2, 1))


def run():
    train_one_step(critic, optimizer, x, y)
'''
#: the same starting weights on both sides (model's kernel 0, critic's 1, biases 0), one step, the kernels
SET = {"keras": '''
model.set_weights([np.zeros((3, 1), "float32"), np.zeros(1, "float32")])
critic.set_weights([np.ones((3, 1), "float32"), np.zeros(1, "float32")])
''', "torch": '''
with torch.no_grad():
    model[0].weight.zero_(), model[0].bias.zero_(), critic[0].weight.fill_(1.0), critic[0].bias.zero_()
'''}
REPORT = '''
run()
import json
def _kernel(m):
    w = [p for p in (m.trainable_variables if hasattr(m, "trainable_variables") else m.parameters())][0]
    w = w.numpy() if hasattr(w, "numpy") and not hasattr(w, "detach") else w.detach().numpy()
    return w.reshape(-1).tolist()
print("KERNELS" + json.dumps([_kernel(model), _kernel(critic)]))
'''


def _run(src: str, tmp_path, name: str, block_tf: bool) -> list:
    path = tmp_path / name
    path.write_text(("import sys\nsys.modules['tensorflow'] = None\n" if block_tf else "") + src
                    + SET["torch" if block_tf else "keras"] + REPORT)
    p = python(path, side="torch" if block_tf else "keras", timeout=300, env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""})
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("KERNELS")), None)
    assert line is not None, p.stdout + p.stderr
    return json.loads(line[len("KERNELS"):])


def test_the_optimizer_is_over_the_model_the_caller_passes():
    r = translate_source(TWO_MODELS, "t.py")
    assert not error_messages(r), r.findings
    assert "optimizer = torch.optim.SGD(critic.parameters(), lr=0.1)" in r.output
    assert "model.parameters()" not in r.output


@needs("tensorflow", "torch")
def test_the_caller_s_model_is_the_one_trained_as_in_keras(tmp_path):
    """Numerically: the translation moves critic's kernel as Keras does, and leaves model's alone."""
    keras_model, keras_critic = _run(TWO_MODELS, tmp_path, "k.py", block_tf=False)
    out = translate_source(TWO_MODELS, "t.py").output
    torch_model, torch_critic = _run(out, tmp_path, "t.py", block_tf=True)
    assert keras_model == [0.0, 0.0, 0.0] and keras_critic != [1.0, 1.0, 1.0]
    assert torch_model == pytest.approx(keras_model, abs=1e-7)
    assert torch_critic == pytest.approx(keras_critic, rel=1e-6)


def test_followed_up_a_chain_of_callers_with_other_names():
    src = STEP + '''
def train(net, opt, data):
    for x, y in data:
        train_one_step(net, opt, x, y)


def main(data):
    generator = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(1)])
    adam = tf.keras.optimizers.Adam()
    train(generator, adam, data)
'''
    r = translate_source(src, "t.py")
    assert "adam = torch.optim.Adam(generator.parameters(), eps=1e-07)" in r.output, r.output
    assert not error_messages(r), r.findings


def test_one_optimizer_given_two_models_is_an_error():
    src = TWO_MODELS + "    train_one_step(model, optimizer, x, y)\n"
    r = translate_source(src, "t.py")
    msgs = error_messages(r)
    assert any("it updates critic.trainable_variables and model.trainable_variables" in m for m in msgs), msgs


def test_a_model_the_call_does_not_pass_is_an_error():
    src = STEP.replace("def train_one_step(model, optimizer, x, y)", "def train_one_step(optimizer, x, y, model=None)") + '''
model = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(1)])
optimizer = tf.keras.optimizers.SGD(0.1)
train_one_step(optimizer, tf.ones((2, 3)), tf.ones((2, 1)))
'''
    r = translate_source(src, "t.py")
    assert any("optimizer = tf.keras.optimizers.SGD(0.1): a torch optimizer takes the parameters" in m
               for m in error_messages(r)), r.findings
