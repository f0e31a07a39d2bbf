"""TensorFlow Addons layers fwport translates, checked numerically. tfa does not install next to TensorFlow
2.16+, so the Keras side computes what tfa's code computes with TensorFlow's own ops: tfa.layers.GELU calls
tfa.activations.gelu(x, approximate) (tf.nn.gelu in its last releases; before, the tanh formula written out);
tfa.image.rotate / translate / transform call tf.raw_ops.ImageProjectiveTransformV3 with the transform tfa builds."""
from __future__ import annotations

import math

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

GELU = '''
import tensorflow as tf
import tensorflow_addons as tfa


def build(flag):
    return tfa.layers.GELU(), tfa.layers.GELU(approximate=False), tfa.layers.GELU(approximate=flag)
'''


def test_tfa_gelu_default_is_the_tanh_form():
    tf = pytest.importorskip("tensorflow")
    torch = pytest.importorskip("torch")
    r = translate_source(GELU, "m.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "tfa" not in r.output and "nn.GELU(approximate='tanh')" in r.output, r.output
    ns: dict = {}
    exec(compile(r.output, "translated.py", "exec"), ns)
    x = np.random.default_rng(0).normal(0, 3, (4, 7)).astype("float32")
    t = tf.constant(x)
    tanh_form = 0.5 * t * (1.0 + tf.tanh(tf.sqrt(2.0 / tf.cast(math.pi, t.dtype)) * (t + 0.044715 * tf.pow(t, 3))))
    for flag in (True, False):
        default, exact, given = (m(torch.tensor(x)).numpy() for m in ns["build"](flag))
        np.testing.assert_allclose(default, tf.nn.gelu(t, approximate=True).numpy(), rtol=0, atol=2e-6)
        np.testing.assert_allclose(default, tanh_form.numpy(), rtol=0, atol=2e-6)
        np.testing.assert_allclose(exact, tf.nn.gelu(t, approximate=False).numpy(), rtol=0, atol=2e-6)
        np.testing.assert_allclose(given, tf.nn.gelu(t, approximate=flag).numpy(), rtol=0, atol=2e-6)
    # the two forms differ by more than the tolerance: the test would catch the wrong default
    assert np.abs(tf.nn.gelu(t, approximate=True).numpy() - tf.nn.gelu(t, approximate=False).numpy()).max() > 1e-4


IMAGE = '''
import tensorflow as tf
import tensorflow_addons as tfa


def run(images, angles, shifts, transforms, interpolation, fill_mode):
    return (tfa.image.rotate(images, angles, interpolation=interpolation, fill_mode=fill_mode, fill_value=FILL),
            tfa.image.translate(images, shifts, interpolation=interpolation, fill_mode=fill_mode, fill_value=FILL),
            tfa.image.transform(images, transforms, interpolation=interpolation, fill_mode=fill_mode,
                                fill_value=FILL))
'''


def _tfa(tf, images, transforms, interpolation, fill_mode, fill):
    """What tfa.image.transform computes (tfa 0.23): ImageProjectiveTransformV3 on a batch, upper-case names."""
    x = tf.convert_to_tensor(images)
    batch = x if x.shape.rank == 4 else x[None]
    out = tf.raw_ops.ImageProjectiveTransformV3(
        images=batch, transforms=tf.reshape(tf.cast(transforms, tf.float32), (-1, 8)),
        output_shape=tf.shape(batch)[1:3], fill_value=tf.cast(fill, tf.float32),
        interpolation=interpolation.upper(), fill_mode=fill_mode.upper())
    return out if x.shape.rank == 4 else out[0]


def _tfa_rotate_transforms(tf, angles, h, w):
    """tfa.image.angles_to_projective_transforms, as tfa computes it (float32)."""
    angles = tf.reshape(tf.cast(angles, tf.float32), (-1,))
    w, h = tf.cast(w, tf.float32), tf.cast(h, tf.float32)
    cos, sin = tf.cos(angles), tf.sin(angles)
    x_offset = ((w - 1) - (cos * (w - 1) - sin * (h - 1))) / 2.0
    y_offset = ((h - 1) - (sin * (w - 1) + cos * (h - 1))) / 2.0
    zeros = tf.zeros_like(cos)
    return tf.stack([cos, -sin, x_offset, sin, cos, y_offset, zeros, zeros], 1)


@pytest.mark.parametrize("interpolation,fill_mode", [("nearest", "constant"), ("bilinear", "constant"),
                                                     ("bilinear", "nearest"), ("nearest", "nearest")])
def test_tfa_image_transforms_match_tensorflows_op(interpolation, fill_mode):
    tf = pytest.importorskip("tensorflow")
    torch = pytest.importorskip("torch")
    src = IMAGE.replace("FILL", "2.5").replace("=interpolation", f'="{interpolation.upper()}"')
    r = translate_source(src.replace("=fill_mode", f'="{fill_mode}"'), "m.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "tfa.image.rotate(" not in r.output and "import tensorflow" not in r.output, r.output
    ns: dict = {}
    exec(compile(r.output, "translated.py", "exec"), ns)
    rng = np.random.default_rng(3)
    for shape, dtype in (((3, 9, 7, 2), "float32"), ((6, 5, 3), "float32"), ((3, 8, 6, 1), "uint8")):
        images = rng.uniform(0, 255, shape).astype(dtype)
        n, (h, w) = (shape[0] if len(shape) == 4 else 1), shape[-3:-1]
        angles = rng.uniform(-3, 3, n).astype("float32")
        shifts = rng.uniform(-4, 4, (n, 2)).astype("float32")
        transforms = np.concatenate([rng.normal(0, 0.5, (n, 6)) + [1, 0, 0, 0, 1, 0],
                                     rng.normal(0, 0.02, (n, 2))], 1).astype("float32")
        want = [_tfa(tf, images, _tfa_rotate_transforms(tf, angles, h, w), interpolation, fill_mode, 2.5),
                _tfa(tf, images, np.concatenate([np.ones((n, 1)), np.zeros((n, 1)), -shifts[:, :1], np.zeros((n, 1)),
                                                 np.ones((n, 1)), -shifts[:, 1:], np.zeros((n, 2))], 1),
                     interpolation, fill_mode, 2.5),
                _tfa(tf, images, transforms, interpolation, fill_mode, 2.5)]
        got = ns["run"](torch.tensor(images), torch.tensor(angles), torch.tensor(shifts), torch.tensor(transforms),
                        interpolation, fill_mode)
        for what, wv, gv in zip(("rotate", "translate", "transform"), want, got, strict=True):
            wv, gv = wv.numpy(), gv.numpy()
            assert gv.dtype == wv.dtype and gv.shape == wv.shape, (what, gv.dtype, gv.shape)
            # the same float32 arithmetic in the same order: the same values, bit for bit (uint8: truncated alike)
            np.testing.assert_array_equal(gv, wv, err_msg=what)
