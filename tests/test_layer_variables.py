"""A Keras layer's own variables, used as Keras lets you: ``self.add_weight(name=...)`` whose result is not
kept (the layer keeps it: ``self.trainable_variables`` lists it), and ``self.trainable_variables`` read in
``call``. Both translated silently wrong before (an unregistered ``nn.Parameter``; an attribute torch
modules do not have)."""
from __future__ import annotations

import textwrap

import numpy as np
import torch

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_messages as errors

PACK = load_pack("tf2torch")

MATMUL = '''
import tensorflow as tf

class MyLayer(tf.keras.layers.Layer):
    def __init__(self, units):
        super().__init__()
        for i in range(1, len(units)):
            self.add_weight(name="kernel%d" % i, shape=[units[i - 1], units[i]])
            self.add_weight(name="bias%d" % i, shape=[units[i]], initializer="zeros")

    def call(self, x):
        num = len(self.trainable_variables)
        for i in range(0, num, 2):
            x = tf.matmul(x, self.trainable_variables[i]) + self.trainable_variables[i + 1]
            x = tf.nn.relu(x)
        return x

    def n_weights(self):
        return len(self.trainable_weights)
'''


def tx(src: str):
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "layer.py", PACK)
    assert translate_source(r.output, "layer.py", PACK).output == r.output, "not a fixpoint"
    return r


def test_unkept_add_weight_is_registered_and_trainable_variables_are_the_parameters():
    r = tx(MATMUL)
    assert errors(r) == []
    assert "trainable_variables" not in r.output and "trainable_weights" not in r.output
    ns: dict = {}
    exec(compile(r.output, "layer_torch.py", "exec"), ns)
    layer = ns["MyLayer"]([4, 3, 2])
    assert [n for n, _ in layer.named_parameters()] == ["kernel1", "bias1", "kernel2", "bias2"]
    assert [tuple(p.shape) for p in layer.parameters()] == [(4, 3), (3,), (3, 2), (2,)]
    assert layer.n_weights() == 4
    # the forward pass is Keras's: relu(x @ W + b) per pair, with the registered parameters
    x = np.random.default_rng(0).normal(size=(5, 4)).astype("float32")
    w1, b1, w2, b2 = (p.detach().numpy() for p in layer.parameters())
    want = np.maximum(np.maximum(x @ w1 + b1, 0) @ w2 + b2, 0)
    got = layer(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # and the optimizer sees them: one step changes every parameter. Positive weights keep some ReLU
    # units open, so every parameter gets a gradient whatever the random initial values were.
    with torch.no_grad():
        for p in layer.parameters():
            p.abs_().add_(0.1)
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    before = [p.detach().clone() for p in layer.parameters()]
    layer(torch.tensor(x)).sum().backward()
    opt.step()
    assert all(not torch.equal(a, b) for a, b in zip(before, layer.parameters()))


def test_an_unkept_add_weight_without_a_name_is_an_error():
    r = tx(MATMUL.replace('name="kernel%d" % i, ', ""))
    errs = errors(r)
    assert len(errs) == 1 and "has no name=" in errs[0]


def test_an_add_weight_inside_another_expression_is_an_error():
    src = MATMUL.replace('self.add_weight(name="kernel%d" % i, shape=[units[i - 1], units[i]])',
                         'self.ws.append(self.add_weight(name="k%d" % i, shape=[units[i - 1], units[i]]))')
    r = tx(src)
    errs = errors(r)
    assert len(errs) == 1 and "would not be registered" in errs[0]
