"""tf.compat.v1.image.resize_bilinear / resize_bicubic / resize_nearest_neighbor → the resize_*_v1 helpers: values,
shapes and dtypes against TensorFlow for the three samplings (TensorFlow 1's default at i * scale, align_corners,
half_pixel_centers), up and down, a list of images stacked as TensorFlow stacks it."""
from __future__ import annotations

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

SRC = '''import tensorflow as tf


def run(images, size, align_corners, half_pixel_centers):
    return (tf.compat.v1.image.resize_bilinear(images, size, align_corners=align_corners,
                                               half_pixel_centers=half_pixel_centers),
            tf.compat.v1.image.resize_bicubic(images, size, align_corners, half_pixel_centers=half_pixel_centers),
            tf.compat.v1.image.resize_nearest_neighbor(images, size, align_corners=align_corners,
                                                       half_pixel_centers=half_pixel_centers))


def defaults(image, size):
    return (tf.compat.v1.image.resize_bilinear([image], size)[0],
            tf.compat.v1.image.resize_bicubic([image], size)[0],
            tf.compat.v1.image.resize_nearest_neighbor([image], size)[0])
'''


def _translated() -> dict:
    r = translate_source(SRC, "m.py")
    assert not [f for f in r.findings if f.severity == Severity.ERROR], r.findings
    assert "import tensorflow" not in r.output and "interpolate(" not in r.output
    ns: dict = {}
    exec(compile(r.output, "translated.py", "exec"), ns)
    return ns


def _same(want, got) -> None:
    """Arrays of the same shapes, dtypes and values (within 1e-4 of the 0..255 range)."""
    for w, g in zip(want, got, strict=True):
        w, g = w.numpy(), g.numpy()
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g.astype("float64"), w.astype("float64"), rtol=0, atol=1e-4 * 255)


@pytest.mark.parametrize("shape,dtype,size", [
    ((2, 5, 7, 3), "uint8", (10, 14)),  # doubled
    ((1, 31, 17, 2), "float32", (13, 40)),  # one axis shrunk, the other enlarged, scales not whole numbers
    ((2, 9, 6, 1), "float64", (4, 2)),  # shrunk: the taps clamped at the edges
    ((1, 4, 4, 3), "uint8", (1, 1)),  # one pixel out: align_corners keeps the in / out scale
])
@pytest.mark.parametrize("align_corners,half_pixel_centers", [(False, False), (True, False), (False, True)])
def test_v1_resizes_match_tensorflow(shape, dtype, size, align_corners, half_pixel_centers):
    tf = pytest.importorskip("tensorflow")
    pytest.importorskip("torch")
    ns = _translated()
    images = (np.random.default_rng(0).random(shape) * 255).astype(dtype)
    want = (tf.compat.v1.image.resize_bilinear(images, size, align_corners, half_pixel_centers=half_pixel_centers),
            tf.compat.v1.image.resize_bicubic(images, size, align_corners, half_pixel_centers=half_pixel_centers),
            tf.compat.v1.image.resize_nearest_neighbor(images, size, align_corners,
                                                       half_pixel_centers=half_pixel_centers))
    _same(want, ns["run"](images, size, align_corners, half_pixel_centers))


def test_v1_default_differs_from_torch_interpolate_and_matches_tensorflow():
    """The default (samples at i * scale) is neither of torch's bilinear samplings: the helper's values are
    TensorFlow's, torch's F.interpolate (align_corners False or True) is off by more than rounding."""
    tf = pytest.importorskip("tensorflow")
    torch = pytest.importorskip("torch")
    ns = _translated()
    image = (np.random.default_rng(1).random((6, 8, 3)) * 255).astype("float32")
    want = [tf.compat.v1.image.resize_bilinear([image], (9, 11))[0],
            tf.compat.v1.image.resize_bicubic([image], (9, 11))[0],
            tf.compat.v1.image.resize_nearest_neighbor([image], (9, 11))[0]]
    got = ns["defaults"](torch.as_tensor(image), (9, 11))
    _same(want, got)
    x = torch.as_tensor(image).permute(2, 0, 1)[None]
    for corners in (False, True):
        plain = torch.nn.functional.interpolate(x, size=(9, 11), mode="bilinear", align_corners=corners)
        assert np.abs(plain[0].permute(1, 2, 0).numpy() - want[0].numpy()).max() > 1.0


RESIZE_IMAGES = '''import tensorflow as tf


def run(images, size):
    return (tf.compat.v1.image.resize(images, size),
            tf.compat.v1.image.resize(images, size, tf.compat.v1.image.ResizeMethod.BICUBIC, align_corners=True),
            tf.compat.v1.image.resize(images, size, method=1),
            tf.compat.v1.image.resize_images(images, size, method=tf.compat.v1.image.ResizeMethod.NEAREST_NEIGHBOR,
                                             align_corners=True))
'''


@pytest.mark.parametrize("shape,dtype,size", [
    ((5, 7, 3), "uint8", (3, 4)),  # one image, shrunk: float32 out, nearest keeps uint8
    ((2, 5, 7, 3), "float32", (10, 14)),  # a batch, doubled
    ((2, 6, 6, 1), "uint8", (6, 6)),  # already that size: returned as it is, uint8 kept by every method
])
def test_v1_resize_images_matches_tensorflow(shape, dtype, size):
    tf = pytest.importorskip("tensorflow")
    pytest.importorskip("torch")
    r = translate_source(RESIZE_IMAGES, "m.py")
    assert not [f for f in r.findings if f.severity == Severity.ERROR], r.findings
    assert "import tensorflow" not in r.output and r.output.count("resize_images_v1(images, size") == 5, r.output  # 4 calls and the def
    ns: dict = {}
    exec(compile(r.output, "translated.py", "exec"), ns)
    images = (np.random.default_rng(2).random(shape) * 255).astype(dtype)
    want = (tf.compat.v1.image.resize(images, size),
            tf.compat.v1.image.resize(images, size, tf.compat.v1.image.ResizeMethod.BICUBIC, align_corners=True),
            tf.compat.v1.image.resize(images, size, method=1),
            tf.compat.v1.image.resize_images(images, size, method=1, align_corners=True))
    _same(want, ns["run"](images, size))


def test_v1_resize_area_and_unknown_methods_are_refused():
    r = translate_source("import tensorflow as tf\n\na = tf.compat.v1.image.resize(x, (8, 8), method=3)\n"
                         "b = tf.compat.v1.image.resize(x, (8, 8), method)\n"
                         "c = tf.compat.v1.image.resize(x, (8, 8), preserve_aspect_ratio=True)\n", "m.py")
    errors = [(f.line, f.code) for f in r.findings if f.severity == Severity.ERROR]
    assert errors == [(3, "unsupported-argument"), (4, "unsupported-argument"), (5, "unsupported-argument")]
    assert r.output.count("tf.compat.v1.image.resize(") == 3 and "resize_images_v1" not in r.output
