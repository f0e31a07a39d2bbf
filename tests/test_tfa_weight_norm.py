"""tfa.layers.WeightNormalization(layer, data_init=False) → torch.nn.utils.parametrizations.weight_norm(module, dim=0)
(issue 8; keras-io melgan). tfa does not install next to TensorFlow 2.16+, so the Keras side is the formula tfa's
code computes: the wrapped layer with kernel g * v / ||v||, the norm over every axis of v but the last. The torch
side is the translation with g and v given to weight_norm's parametrization (original0, original1)."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from helpers import error_findings as _errors

np = pytest.importorskip("numpy")

SOURCE = '''
from tensorflow import keras
from tensorflow.keras import layers
import tensorflow_addons as tfa


def build_dense():
    return keras.Sequential([keras.Input((6,)), tfa.layers.WeightNormalization(layers.Dense(5), data_init=False)])


def build_conv():
    return keras.Sequential([keras.Input((11, 3)),
                             tfa.layers.WeightNormalization(layers.Conv1D(4, 3, padding="same"), data_init=False)])


def build_transpose():
    return keras.Sequential([keras.Input((9, 3)),
                             tfa.layers.WeightNormalization(layers.Conv1DTranspose(4, 4, strides=2), data_init=False)])
'''


def _keras_side(kind, x, g, v, b):
    """What tfa computes: the wrapped layer with its kernel g * v / ||v|| (norm over every axis but the last)."""
    keras = pytest.importorskip("keras")
    layer = {"dense": lambda: keras.layers.Dense(5), "conv": lambda: keras.layers.Conv1D(4, 3, padding="same"),
             "transpose": lambda: keras.layers.Conv1DTranspose(4, 4, strides=2)}[kind]()
    layer(x)
    norm = np.sqrt((v ** 2).sum(axis=tuple(range(v.ndim - 1)), keepdims=True))
    layer.set_weights([g * v / norm, b])
    return np.asarray(layer(x))


@pytest.mark.parametrize("kind,x_shape,v_shape,g_size,b_size", [
    ("dense", (4, 6), (6, 5), 5, 5), ("conv", (2, 11, 3), (3, 3, 4), 4, 4), ("transpose", (2, 9, 3), (4, 4, 3), 3, 4)])
def test_weight_norm_matches_tfas_formula(kind, x_shape, v_shape, g_size, b_size):
    torch = pytest.importorskip("torch")
    r = translate_source(SOURCE, "m.py")
    assert not _errors(r), r.findings
    assert r.output.count("nn.utils.parametrizations.weight_norm(") == 3 and "dim=0" in r.output
    ns: dict = {}
    exec(compile(r.output, "m_torch.py", "exec"), ns)
    rng = np.random.default_rng(0)
    x = rng.normal(size=x_shape).astype("float32")
    v = rng.normal(size=v_shape).astype("float32")
    g = rng.uniform(0.5, 2.0, g_size).astype("float32")
    b = rng.normal(size=b_size).astype("float32")
    expected = _keras_side(kind, x, g, v, b)
    model = ns[f"build_{kind}"]().eval()
    (module,) = [m for m in model.modules() if hasattr(m, "parametrizations")]
    # Keras's kernel → torch's v: Dense (in, out) → (out, in); Conv1D (k, in, out) → (out, in, k);
    # Conv1DTranspose (k, out, in) → (in, out, k)
    v_torch = v.T if kind == "dense" else v.transpose(2, 1, 0)
    with torch.no_grad():
        p = module.parametrizations.weight
        p.original0.copy_(torch.tensor(g).reshape(p.original0.shape))
        p.original1.copy_(torch.tensor(np.ascontiguousarray(v_torch)))
        module.bias.copy_(torch.tensor(b))
        if kind == "dense":
            got = model(torch.tensor(x)).numpy()
        else:  # a Sequential of convolutions is translated channels-first: its input permuted once at entry
            got = model(torch.tensor(x).permute(0, 2, 1)).permute(0, 2, 1).numpy()
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    # weight_norm over another dim would normalise other slices: not tfa's kernel
    w = torch.tensor(np.ascontiguousarray(v_torch))
    other = w / w.norm(dim=tuple(range(w.dim() - 1)), keepdim=True)
    assert not torch.allclose(other, module.weight / torch.tensor(g).reshape(p.original0.shape), atol=1e-4)


def test_data_init_is_refused_and_other_layers_too():
    for call, said in (("tfa.layers.WeightNormalization(layers.Dense(5))", "data-dependent init"),
                       ("tfa.layers.WeightNormalization(layers.Dense(5), data_init=True)", "data-dependent init"),
                       ("tfa.layers.WeightNormalization(layers.SimpleRNN(5), data_init=False)", "only a Dense or a convolution")):
        src = f'''
from tensorflow import keras
from tensorflow.keras import layers
import tensorflow_addons as tfa

model = keras.Sequential([keras.Input((7, 6)), {call}])
'''
        r = translate_source(src, "m.py")
        errs = _errors(r)
        assert errs and said in errs[0].message and errs[0].line == 6, (call, r.findings)
