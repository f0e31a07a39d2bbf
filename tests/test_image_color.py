"""tf.image colour ops → helpers written into the file: adjust_brightness / contrast / saturation / hue against
TensorFlow (values and dtypes, float and uint8 images, one image and a batch), and their random_* /
stateless_random_* forms by what can be checked of a draw from another generator: the range of the factor,
one factor per call for the whole batch, the seeds' reproducibility, TensorFlow's argument checks."""
from __future__ import annotations

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

ADJUST = '''import tensorflow as tf


def run(x, delta, factor, hue):
    return (tf.image.adjust_brightness(x, delta), tf.image.adjust_contrast(x, factor),
            tf.image.adjust_saturation(x, factor), tf.image.adjust_hue(x, hue))
'''

RANDOM = '''import tensorflow as tf


def brightness(x):
    return tf.image.random_brightness(x, max_delta=0.25)


def contrast(x):
    return tf.image.random_contrast(x, 0.5, 1.5)


def saturation(x):
    return tf.image.random_saturation(x, lower=0.2, upper=3.0)


def hue(x):
    return tf.image.random_hue(x, 0.3)


def seeded(x):
    return tf.image.random_brightness(x, 0.25, seed=5)


def stateless(x, seed):
    return (tf.image.stateless_random_brightness(x, 0.25, seed), tf.image.stateless_random_contrast(x, 0.5, 1.5, seed),
            tf.image.stateless_random_saturation(x, 0.5, 1.5, seed=seed), tf.image.stateless_random_hue(x, 0.3, seed))


def bad_hue(x):
    return tf.image.random_hue(x, 0.6)


def bad_contrast(x):
    return tf.image.random_contrast(x, 1.5, 0.5)
'''


def _translated(src: str) -> dict:
    r = translate_source(src, "m.py")
    assert not [f for f in r.findings if f.severity == Severity.ERROR], r.findings
    assert "tensorflow" not in r.output
    ns: dict = {}
    exec(compile(r.output, "translated.py", "exec"), ns)
    return ns


def _images(shape, dtype):
    g = np.random.default_rng(1)
    if dtype == "uint8":
        x = g.integers(0, 256, size=shape).astype(np.uint8)
    else:
        x = g.random(shape).astype(dtype)
    x[..., 0, 0, :] = x[..., 0, 0, :1]  # a grey pixel (no hue), and two with equal channels
    x[..., 0, 1, 1] = x[..., 0, 1, 0]
    x[..., 1, 0, 2] = x[..., 1, 0, 0]
    return x


@pytest.mark.parametrize("shape,dtype", [((6, 7, 3), "float32"), ((2, 5, 4, 3), "float32"), ((2, 5, 4, 3), "uint8"),
                                         ((5, 4, 3), "float64")])
@pytest.mark.parametrize("delta,factor,hue", [(0.1, 1.7, 0.2), (-0.3, 0.4, -0.45), (0.0, 3.0, 0.9)])
def test_adjust_ops_match_tensorflow(shape, dtype, delta, factor, hue):
    tf = pytest.importorskip("tensorflow")
    torch = pytest.importorskip("torch")
    run = _translated(ADJUST)["run"]
    x = _images(shape, dtype)
    want = [t.numpy() for t in (tf.image.adjust_brightness(x, delta), tf.image.adjust_contrast(x, factor),
                                tf.image.adjust_saturation(x, factor), tf.image.adjust_hue(x, hue))]
    got = [t.numpy() for t in run(torch.from_numpy(x), delta, factor, hue)]
    for name, w, g in zip(("brightness", "contrast", "saturation", "hue"), want, got, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (name, g.shape, g.dtype, w.shape, w.dtype)
        if dtype == "uint8":  # a float32 rounding a hair apart may truncate to the next integer
            assert np.abs(g.astype(int) - w.astype(int)).max() <= 1, name
            assert np.mean(g != w) < 0.02, name
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=2e-6, err_msg=name)


def test_random_ops_draw_one_factor_in_range_per_call():
    torch = pytest.importorskip("torch")
    ns = _translated(RANDOM)
    x = torch.from_numpy(_images((2, 5, 4, 3), "float32"))
    deltas = [float((ns["brightness"](x) - x).flatten()[0]) for _ in range(300)]
    assert all(-0.25 - 1e-6 <= d < 0.25 + 1e-6 for d in deltas)
    assert min(deltas) < -0.2 and max(deltas) > 0.2 and abs(np.mean(deltas)) < 0.05  # uniform on the range
    y = ns["brightness"](x)
    assert torch.allclose(y - x, (y - x).flatten()[0].expand_as(x), atol=1e-6)  # one delta for the whole batch
    # contrast: the factor is the ratio of the deviations from each channel's mean, in [0.5, 1.5)
    dev = x - x.mean(dim=(1, 2), keepdim=True)
    factors = []
    for _ in range(200):
        y = ns["contrast"](x)
        ratio = (y - y.mean(dim=(1, 2), keepdim=True)) / dev
        factors.append(float(ratio.median()))
        assert torch.allclose(ratio, torch.full_like(ratio, factors[-1]), atol=1e-3)
    assert min(factors) >= 0.5 - 1e-5 and max(factors) < 1.5 + 1e-5 and min(factors) < 0.6 and max(factors) > 1.4
    # hue: the same as adjust_hue with some delta in [-0.3, 0.3]; saturation keeps each pixel's maximum (the value)
    y = ns["hue"](x)
    assert torch.allclose(y.amax(-1), x.amax(-1)) and torch.allclose(y.amin(-1), x.amin(-1))
    assert not torch.allclose(y, x)
    assert torch.allclose(ns["saturation"](x).amax(-1), x.amax(-1), atol=1e-6)


def test_seeds_stateful_and_stateless():
    torch = pytest.importorskip("torch")
    ns = _translated(RANDOM)
    x = torch.from_numpy(_images((5, 4, 3), "float32"))
    first, second = ns["seeded"](x), ns["seeded"](x)
    assert not torch.equal(first, second)  # one stream per op and seed: a second call draws anew
    a, b = ns["stateless"](x, (1, 2)), ns["stateless"](x, (1, 2))
    for u, v in zip(a, b, strict=True):
        assert torch.equal(u, v)  # the same seed, the same result, as TensorFlow's stateless ops
    c = ns["stateless"](x, (3, 4))
    assert not torch.equal(a[0], c[0])
    assert -0.25 <= float((a[0] - x).flatten()[0]) < 0.25


def test_argument_checks_as_tensorflow():
    torch = pytest.importorskip("torch")
    ns = _translated(RANDOM)
    x = torch.from_numpy(_images((5, 4, 3), "float32"))
    with pytest.raises(ValueError, match="max_delta must be <= 0.5"):
        ns["bad_hue"](x)
    with pytest.raises(ValueError, match="upper must be > lower"):
        ns["bad_contrast"](x)


FLIPS = '''import tensorflow as tf


def stateless(images, image, seed):
    return (tf.image.stateless_random_flip_left_right(images, seed), tf.image.stateless_random_flip_up_down(image, seed),
            tf.image.stateless_random_crop(images, [64, 5, 4, 3], seed=seed))


def seeded(images):
    return tf.image.random_flip_left_right(images, seed=4), tf.image.random_crop(images, [64, 5, 4, 3], seed=4)
'''


def test_stateless_and_seeded_flips_and_crops():
    """The stateless flips and crop: one seed, the same images flipped and the same window every time; each image
    of a batch still flipped on its own; an op-level seed draws anew at each call."""
    torch = pytest.importorskip("torch")
    ns = _translated(FLIPS)
    images, image = torch.randn(64, 6, 5, 3), torch.randn(6, 5, 3)
    first, again = ns["stateless"](images, image, (7, 8)), ns["stateless"](images, image, (7, 8))
    for u, v in zip(first, again, strict=True):
        assert torch.equal(u, v)
    mirrored = (first[0] == images.flip(-2)).flatten(1).all(1)
    assert bool(((first[0] == images).flatten(1).all(1) | mirrored).all()) and 0 < int(mirrored.sum()) < 64
    assert torch.equal(first[1], image) or torch.equal(first[1], image.flip(-3))
    windows = [images[:, i:i + 5, j:j + 4, :] for i in range(2) for j in range(2)]
    assert any(torch.equal(first[2], w) for w in windows)
    others = [ns["stateless"](images, image, (s, 1))[0] for s in range(4)]
    assert any(not torch.equal(o, first[0]) for o in others)  # another seed, other images flipped
    a, b = ns["seeded"](images), ns["seeded"](images)
    assert not torch.equal(a[0], b[0])  # one stream per op and seed: a second call draws anew
