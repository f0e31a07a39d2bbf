"""Layer gaps of task lay20: a Keras layer's weights read by their Keras names where the layer is held in a
local name (``dense = layers.Dense(4)``) or by an instance of a translated class bound in a function, and
``get_weights()`` / ``set_weights()`` on a translated layer (before: left as written, an AttributeError in torch
with no finding)."""
from __future__ import annotations

import numpy as np
import pytest

from fwport.core.pipeline import translate_source

SOURCE = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers


def build():
    dense = layers.Dense(4)
    conv = layers.Conv2D(5, 3)
    model = keras.Sequential([keras.Input(shape=(3,)), dense, layers.Dense(2)])
    return model, dense, conv


def kernels(dense, conv):
    d = layers.Dense(4)
    c = layers.Conv2D(5, 3)
    return d, c


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.fc = layers.Dense(4)
        self.out = layers.Dense(2)

    def call(self, x):
        return self.out(self.fc(x))


def read(x):
    net = Net()
    net(x)
    return net.fc.kernel, net.fc.bias


def local(x):
    dense = layers.Dense(4)
    z = dense(x)
    return dense.kernel, dense.bias


def activated(x):
    d = layers.Dense(4, "relu")  # becomes nn.Sequential(nn.LazyLinear(4), nn.ReLU()): its weights are in [0]
    y = d(x)
    return d.kernel


def refused(x):
    conv = layers.Conv2D(5, 3)  # outside a model fwport follows: left as a Keras layer (an error says why)
    y = conv(x)
    return conv.kernel


def weights_io():
    dense = layers.Dense(4)
    dense.set_weights([np.zeros((3, 4)), np.zeros(4)])
    return dense.get_weights()


def left_functional():
    inp = keras.Input(shape=(3,))
    dense = layers.Dense(4)
    out = dense(inp)
    model = keras.Model(inp, out)
    k = dense.kernel  # the functional model is left as written (this use of its layer): dense stays Keras's
    return model, k


def shadowed(dense):
    return dense.kernel  # a parameter: not known as a layer
'''


@pytest.fixture(scope="module")
def out():
    return translate_source(SOURCE, "model.py")


def _errors(r):
    return [f for f in r.findings if f.severity == "error"]


def test_reads_translated(out):
    text = out.output
    assert "return net.fc.weight.T, net.fc.bias" in text
    assert "return dense.weight.T, dense.bias" in text
    assert "return d[0].weight.T" in text
    assert "    return conv.kernel\n" in text  # the layer stayed Keras's: so does its kernel
    assert "return dense.kernel  # a parameter" in text
    assert "    k = dense.kernel  # the functional model is left as written" in text


def test_get_and_set_weights_refused_with_the_parameters(out):
    errs = {(f.line, f.message.split(":")[0]) for f in _errors(out)}
    assert any(m == "dense.set_weights(...)" for _, m in errs), errs
    assert any(m == "dense.get_weights(...)" for _, m in errs), errs
    msg = next(f.message for f in _errors(out) if f.message.startswith("dense.get_weights"))
    assert "kernel → dense.weight.T; bias → dense.bias" in msg


def test_reads_give_keras_values():
    """Numerically: the Keras-layout view read on the torch module (dense.weight.T) is Keras's kernel: the
    Dense computes x @ kernel + bias with it, as Keras's Dense with that kernel does."""
    torch = pytest.importorskip("torch")
    from tensorflow import keras
    r = translate_source(SOURCE, "model.py")
    ns: dict = {}
    exec(compile(r.output, "translated.py", "exec"), ns)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3)).astype("float32")
    kernel, bias = ns["local"](torch.as_tensor(x))
    assert tuple(kernel.shape) == (3, 4)
    assert tuple(ns["activated"](torch.as_tensor(x)).shape) == (3, 4)
    k = rng.normal(size=(3, 4)).astype("float32")
    b = rng.normal(size=(4,)).astype("float32")
    with torch.no_grad():  # a view of the parameter: writing Keras's kernel into it loads the module
        kernel.copy_(torch.as_tensor(k))
        bias.copy_(torch.as_tensor(b))
    d = keras.layers.Dense(4)
    d.build((None, 3))
    d.set_weights([k, b])
    dense = kernel._base if kernel._base is not None else None
    assert dense is not None  # .T is a view of the torch weight
    torch_out = torch.nn.functional.linear(torch.as_tensor(x), dense, bias)  # what nn.Linear.forward computes
    np.testing.assert_allclose(torch_out.detach().numpy(), np.asarray(d(x)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dense.detach().numpy(), k.T)  # the parameter itself holds torch's (out, in)


def test_freezing_a_lazy_module_warning_says_what_works():
    """`layer.trainable = False` before the layer's first call → `layer.requires_grad_(False)` on an nn.LazyLinear,
    which raises in torch; the warning says so and what works, and both claims are checked on torch here."""
    torch = pytest.importorskip("torch")
    src = ("from tensorflow.keras import layers\n\n\ndef build():\n    base = layers.Dense(8)\n"
           "    base.trainable = False\n    return base\n")
    r = translate_source(src, "m.py")
    # (dup21: the translation now writes what works for a name bound to a Lazy module; tests/test_lazy_freeze.py)
    assert "for param in base.parameters():\n        param.requires_grad = False" in r.output
    assert "requires_grad_" not in r.output and "nn.LazyLinear(8)" in r.output
    w = next(f for f in r.findings if f.code == "idiom-replaced" and "requires_grad_" in f.message)
    assert "raises ValueError before its first call" in w.message and "sets p.requires_grad" in w.message
    lazy = torch.nn.LazyLinear(8)
    with pytest.raises(ValueError):
        lazy.requires_grad_(False)
    for p in lazy.parameters():
        p.requires_grad = False
    lazy(torch.zeros(2, 3))
    assert [p.requires_grad for p in lazy.parameters()] == [False, False]
    assert tuple(lazy.weight.shape) == (8, 3)
