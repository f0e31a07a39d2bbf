"""An optimizer updating the tf.Variables of module-level dicts (YunYang1994's and aymericdamien's Multilayer_Perceptron:
``trainable_variables = list(weights.values()) + list(biases.values())`` in the step function, then
``optimizer.apply_gradients(zip(gradients, trainable_variables))``): the torch optimizer is created over
``[*weights.values(), *biases.values()]`` (training._dict_values, _Training._fixed_variables), where each dict is bound
once, before the optimizer, to a dict literal of tf.Variables, and the file only reads its entries. Before, it was the
error "fwport cannot tell which (it updates trainable_variables)"; a dict changed or bound to other values stays an
error saying why. Checked numerically: the losses and the variables after three steps against TensorFlow."""
from __future__ import annotations

import json

import numpy as np

from fwport.core.pipeline import translate_source
from helpers import error_messages, needs
from runners import python

SRC = '''import numpy as np
import tensorflow as tf

rng = np.random.RandomState(0)
weights = {
    "h1": tf.Variable(rng.normal(size=(3, 4)).astype("float32")),
    "out": tf.Variable(rng.normal(size=(4, 1)).astype("float32")),
}
biases = {
    "b1": tf.Variable(np.zeros(4, "float32")),
    "out": tf.Variable(np.zeros(1, "float32")),
}

optimizer = tf.optimizers.SGD(0.05, momentum=0.5)


def mlp(x):
    h = tf.nn.relu(tf.matmul(x, weights["h1"]) + biases["b1"])
    return tf.matmul(h, weights["out"]) + biases["out"]


def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(mlp(x) - y))
    trainable_variables = list(weights.values()) + list(biases.values())
    gradients = tape.gradient(loss, trainable_variables)
    optimizer.apply_gradients(zip(gradients, trainable_variables))
    return loss


x = tf.constant(np.linspace(-1, 1, 24, dtype="float32").reshape(8, 3))
y = tf.constant(np.linspace(0, 1, 8, dtype="float32").reshape(8, 1))
losses = [float(train_step(x, y)) for _ in range(3)]
'''
PRINT = {"keras": '''
import json
print("RESULT" + json.dumps({"losses": losses, "w": [v.numpy().reshape(-1).tolist() for v in
                                                     list(weights.values()) + list(biases.values())]}))
''', "torch": '''
import json
print("RESULT" + json.dumps({"losses": losses, "w": [v.detach().numpy().reshape(-1).tolist() for v in
                                                     list(weights.values()) + list(biases.values())]}))
'''}
BLOCK = {"keras": "", "torch": "import sys\nsys.modules['tensorflow'] = None\n"}


def _run(src: str, tmp_path, name: str, side: str) -> dict:
    path = tmp_path / name
    path.write_text(BLOCK[side] + src + PRINT[side])
    p = python(path, side=side, timeout=300, env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""})
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert line is not None, p.stdout + p.stderr
    return json.loads(line[len("RESULT"):])


def test_the_optimizer_takes_the_dicts_values():
    r = translate_source(SRC, "f.py")
    assert not error_messages(r), error_messages(r)
    assert "optimizer = torch.optim.SGD([*weights.values(), *biases.values()], lr=0.05, momentum=0.5)" in r.output


@needs("tensorflow", "torch")
def test_it_trains_as_tensorflow(tmp_path):
    r = translate_source(SRC, "f.py")
    assert not error_messages(r), error_messages(r)
    tf_out = _run(SRC, tmp_path, "k.py", "keras")
    torch_out = _run(r.output, tmp_path, "t.py", "torch")
    assert len(torch_out["losses"]) == 3 and tf_out["losses"][0] != tf_out["losses"][-1]
    np.testing.assert_allclose(torch_out["losses"], tf_out["losses"], rtol=1e-5, atol=1e-6)
    for a, b in zip(torch_out["w"], tf_out["w"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _refusals(src: str) -> list[str]:
    return [m for m in error_messages(translate_source(src, "f.py")) if "updates the values of" in m]


def test_a_dict_given_an_entry_later_stays_an_error():
    src = SRC + 'weights["h2"] = tf.Variable(np.zeros(2, "float32"))\n'
    assert any("weights" in m and "otherwise than by reading" in m for m in _refusals(src))


def test_a_dict_passed_elsewhere_stays_an_error():
    src = SRC + "print(weights)\n"
    assert any("otherwise than by reading" in m for m in _refusals(src))


def test_a_dict_of_other_values_stays_an_error():
    src = SRC.replace('"b1": tf.Variable(np.zeros(4, "float32")),', '"b1": make_bias(),')
    assert any("not a dict literal of tf.Variables" in m for m in _refusals(src))


def test_a_dict_bound_after_the_optimizer_stays_an_error():
    src = SRC.replace("optimizer = tf.optimizers.SGD(0.05, momentum=0.5)\n", "").replace(
        "biases = {", "optimizer = tf.optimizers.SGD(0.05, momentum=0.5)\nbiases = {")
    assert any("biases is not bound once" in m for m in _refusals(src))
