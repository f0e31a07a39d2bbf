"""tf.image.resize → the resize_images helper: values, shapes and dtypes against TensorFlow, for one
image and a batch, up and down, bilinear (with and without antialias) and nearest; the methods torch
cannot match are refused."""
from __future__ import annotations

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

SRC = '''import tensorflow as tf


def run(images, size, antialias):
    return (tf.image.resize(images, size),
            tf.image.resize(images, size, method=tf.image.ResizeMethod.NEAREST_NEIGHBOR),
            tf.image.resize(images, size, antialias=antialias))
'''


def _same(want: list, got: list) -> None:
    """Arrays of the same shapes, dtypes and values (within 1e-4)."""
    for w, g in zip(want, got, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g.astype("float64"), w.astype("float64"), rtol=0, atol=1e-4)


@pytest.mark.parametrize("shape,dtype,size", [
    ((5, 7, 3), "uint8", (3, 4)),  # one image, shrunk
    ((2, 5, 7, 3), "uint8", (10, 14)),  # a batch, doubled
    ((2, 6, 6, 1), "float64", (4, 9)),  # floats: bilinear gives float32 all the same
])
def test_resize_matches_tensorflow(shape, dtype, size):
    tf = pytest.importorskip("tensorflow")
    pytest.importorskip("torch")
    r = translate_source(SRC, "m.py")
    assert not [f for f in r.findings if f.severity == Severity.ERROR], r.findings
    assert "tensorflow" not in r.output and "resize_images(images, size, method=\"nearest\")" in r.output
    ns: dict = {}
    exec(compile(r.output, "translated.py", "exec"), ns)
    images = np.random.default_rng(0).integers(0, 255, size=shape).astype(dtype)
    for antialias in (False, True):
        want = [t.numpy() for t in (tf.image.resize(images, size),
                                    tf.image.resize(images, size, method="nearest"),
                                    tf.image.resize(images, size, antialias=antialias))]
        _same(want, [t.numpy() for t in ns["run"](images, size, antialias)])


def test_methods_torch_does_not_compute_alike_are_refused():
    r = translate_source("import tensorflow as tf\n\na = tf.image.resize(x, (8, 8), method='lanczos3')\n"
                         "b = tf.image.resize(x, (8, 8), method=tf.image.ResizeMethod.MITCHELLCUBIC)\n"
                         "c = tf.image.resize(x, (8, 8), preserve_aspect_ratio=True)\n"
                         "d = tf.image.resize(x, (8, 8), method='bicubic', antialias=True)\n"
                         "e = tf.image.resize(x, (8, 8), method=method)\n", "m.py")
    errors = [(f.line, f.code) for f in r.findings if f.severity == Severity.ERROR]
    assert errors == [(3, "unsupported-argument"), (4, "unsupported-argument"), (5, "unsupported-argument"),
                      (6, "unsupported-argument"), (7, "unsupported-argument")]
    assert r.output.count("tf.image.resize(") == 5  # left as written, with the comment saying why
    assert "scale_and_translate" in r.output and "resize_bicubic" not in r.output


KERNELS = '''import tensorflow as tf


def run(images, size):
    return (tf.image.resize(images, size, method="bicubic"),
            tf.image.resize(images, size, method=tf.image.ResizeMethod.AREA, antialias=True),
            tf.image.resize(images, size, method=tf.image.ResizeMethod.BICUBIC, antialias=False))
'''


@pytest.mark.parametrize("shape,dtype,size", [
    ((5, 7, 3), "uint8", (3, 4)),  # one image, shrunk
    ((2, 5, 7, 3), "float32", (10, 14)),  # a batch, doubled
    ((2, 6, 6, 1), "float64", (4, 9)),  # one axis shrunk, the other enlarged; float32 out all the same
    ((1, 31, 17, 2), "float32", (13, 40)),  # scales that are not whole numbers
    ((1, 40, 30, 3), "uint8", (7, 3)),  # shrunk a lot: area averages wide boxes, bicubic's taps at the edges
])
def test_bicubic_and_area_match_tensorflow(shape, dtype, size):
    """TensorFlow's bicubic (Keys a=-0.5, half-pixel centres, its 1024-step table, the taps outside the image
    dropped) and area kernels written out: the values to float32's rounding, the shapes and dtypes."""
    tf = pytest.importorskip("tensorflow")
    pytest.importorskip("torch")
    r = translate_source(KERNELS, "m.py")
    assert not [f for f in r.findings if f.severity == Severity.ERROR], r.findings
    assert "tensorflow" not in r.output and "resize_bicubic(images, size)" in r.output
    assert "resize_area(images, size)" in r.output
    ns: dict = {}
    exec(compile(r.output, "translated.py", "exec"), ns)
    images = (np.random.default_rng(2).random(shape) * 255).astype(dtype)
    want = [t.numpy() for t in (tf.image.resize(images, size, method="bicubic"),
                                tf.image.resize(images, size, method="area"),
                                tf.image.resize(images, size, method="bicubic"))]
    got = [t.numpy() for t in ns["run"](images, size)]
    for w, g in zip(want, got, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype == np.float32, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-4)
    torch_bicubic = ns["torch"].nn.functional.interpolate(
        ns["torch"].as_tensor(images.reshape(-1, *shape[-3:])).float().permute(0, 3, 1, 2), size=size,
        mode="bicubic", align_corners=False).permute(0, 2, 3, 1).numpy().reshape(want[0].shape)
    assert np.abs(torch_bicubic - want[0]).max() > 1e-2  # torch's own bicubic (a=-0.75) would not have done


RANDOM = '''import tensorflow as tf


def augment(images, image):
    return (tf.image.random_flip_left_right(images), tf.image.random_flip_up_down(image),
            tf.image.random_crop(images, size=[64, 5, 4, 3]))
'''


def test_random_flips_and_crops_draw_per_image_as_tensorflow_does():
    """No two frameworks draw alike, so the random image ops are checked for what they must do: each image
    of a batch flipped or not on its own (both happen among 64), a single image flipped as a whole, and a
    crop that is a window of the input at some offset."""
    torch = pytest.importorskip("torch")
    r = translate_source(RANDOM, "m.py")
    assert not [f for f in r.findings if f.severity == Severity.ERROR], r.findings
    assert "tensorflow" not in r.output
    ns: dict = {}
    exec(compile(r.output, "translated.py", "exec"), ns)
    torch.manual_seed(0)
    images = torch.randn(64, 6, 5, 3)
    image = torch.randn(6, 5, 3)
    flipped, up_down, crop = ns["augment"](images, image)
    as_is = (flipped == images).flatten(1).all(1)
    mirrored = (flipped == images.flip(-2)).flatten(1).all(1)
    assert bool((as_is | mirrored).all()) and 0 < int(mirrored.sum()) < 64
    assert torch.equal(up_down, image) or torch.equal(up_down, image.flip(-3))
    assert crop.shape == (64, 5, 4, 3)
    windows = [images[:, i:i + 5, j:j + 4, :] for i in range(2) for j in range(2)]
    assert any(torch.equal(crop, w) for w in windows)


def test_random_gamma_draws_with_tensorflows_shape_and_rate():
    """tf.random.gamma(shape, alpha, beta): `shape` then the broadcast shape of alpha and beta, beta a rate
    (mean alpha / beta, variance alpha / beta**2): checked on 40,000 draws of the translation."""
    torch = pytest.importorskip("torch")
    r = translate_source("import tensorflow as tf\n\n\ndef draw():\n"
                         "    return tf.random.gamma([40000], alpha=[1.0, 2.0], beta=[1.0, 4.0])\n", "m.py")
    assert not [f for f in r.findings if f.severity == Severity.ERROR], r.findings
    ns: dict = {}
    exec(compile(r.output, "translated.py", "exec"), ns)
    torch.manual_seed(0)
    g = ns["draw"]()
    assert g.shape == (40000, 2) and g.dtype == torch.float32
    np.testing.assert_allclose(g.mean(0).numpy(), [1.0, 0.5], rtol=0.03)
    np.testing.assert_allclose(g.var(0).numpy(), [1.0, 0.125], rtol=0.06)


PAD_SRC = '''import tensorflow as tf


def run(images, height, width):
    return (tf.image.resize_with_pad(images, height, width),
            tf.image.resize_with_pad(images, height, width, method="nearest"))
'''


@pytest.mark.parametrize("shape,dtype,target", [
    ((48, 64, 3), "uint8", (22, 22)),  # wider than tall: padded above and below
    ((2, 5, 7, 3), "float32", (7, 4)),  # a batch, narrowed: padded above and below, odd row after
    ((2, 9, 4, 1), "uint8", (12, 12)),  # taller than wide, enlarged: padded left and right
    ((30, 40, 3), "float64", (15, 20)),  # the same aspect ratio: no padding
    ((2, 2, 2), "uint8", (7, 7)),  # TensorFlow's float32 sizes floor to 6 (float64's to 7): a padded edge
])
def test_resize_with_pad_matches_tensorflow(shape, dtype, target):
    tf = pytest.importorskip("tensorflow")
    pytest.importorskip("torch")
    r = translate_source(PAD_SRC, "m.py")
    assert not [f for f in r.findings if f.severity == Severity.ERROR], r.findings
    assert "tensorflow" not in r.output and "resize_with_pad(images, height, width)" in r.output
    ns: dict = {}
    exec(compile(r.output, "translated.py", "exec"), ns)
    images = np.random.default_rng(1).integers(0, 255, size=shape).astype(dtype)
    want = [t.numpy() for t in (tf.image.resize_with_pad(images, *target),
                                tf.image.resize_with_pad(images, *target, method="nearest"))]
    _same(want, [t.numpy() for t in ns["run"](images, *target)])
    assert (want[0] == 0).any() or shape[-3] * target[1] == shape[-2] * target[0]  # the padding was exercised
