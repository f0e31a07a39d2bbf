"""Keras 2's (tf.keras) RandomCrop / RandomContrast → the Keras2RandomCrop / Keras2RandomContrast helpers written
into the file (issue 8; keras-io convmixer, cct, shiftvit, eanet), checked against tf_keras: at inference the same
pixels (Keras 2's RandomCrop centre-crops to the target's aspect ratio and resizes, its RandomContrast gives its
input back), in training the same pixels for the draw Keras made (read back from Keras's output and given to the
helper through torch's generator), and draws of Keras's distribution (one crop offset and one contrast factor per
call, within Keras's ranges)."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")

SOURCE = '''
from tensorflow import keras
from tensorflow.keras import layers

crop = layers.RandomCrop(4, 5)
crop_small = layers.RandomCrop(8, 6)
crop_wide = layers.RandomCrop(3, 6)
contrast = layers.RandomContrast((0.1, 0.4))
contrast1 = layers.RandomContrast(factor=0.3)
'''


@pytest.fixture(scope="module")
def torch_side():
    r = translate_source(SOURCE, "m.py", "tf2torch", {"keras": 2})
    assert not [f for f in r.findings if f.severity.name == "ERROR"], r.findings
    assert "import tensorflow" not in r.output and "from tensorflow" not in r.output
    assert "crop = Keras2RandomCrop(4, 5)" in r.output and "contrast1 = Keras2RandomContrast(0.3)" in r.output
    ns: dict = {}
    exec(compile(r.output, "m_torch.py", "exec"), ns)
    return ns


@pytest.fixture(scope="module")
def keras_side():
    pytest.importorskip("tensorflow")
    pytest.importorskip("tf_keras")
    ns: dict = {}
    exec(SOURCE.replace("from tensorflow import keras", "import tf_keras as keras").replace(
        "from tensorflow.keras import layers", "from tf_keras import layers"), ns)
    return ns


def _images(shape=(3, 6, 7, 2), lo=0.0, hi=255.0, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype("float32")


def test_inference_gives_keras2_pixels(torch_side, keras_side):
    x = _images()
    for name in ("crop", "crop_small", "crop_wide", "contrast", "contrast1"):
        k = np.asarray(keras_side[name](x, training=False))
        t = torch_side[name].eval()(torch.from_numpy(x)).numpy()
        assert t.shape == k.shape, name
        np.testing.assert_allclose(t, k, rtol=1e-5, atol=1e-4, err_msg=name)
    # the crops at inference are no identity: a centred window of the target's aspect ratio, resized
    assert torch_side["crop"].eval()(torch.from_numpy(x)).shape == (3, 4, 5, 2)
    # one image (rank 3), and integer pixels (Keras 2 casts them to floats)
    xi = np.arange(6 * 7 * 2).reshape(6, 7, 2).astype("int32")
    k = np.asarray(keras_side["crop_wide"](xi, training=False))
    t = torch_side["crop_wide"].eval()(torch.from_numpy(xi))
    assert t.dtype == torch.float32 and k.dtype == np.float32
    np.testing.assert_allclose(t.numpy(), k, rtol=1e-5, atol=1e-4)


def _offset(out, x):
    """The (top, left) of the window of x that out is."""
    h, w = out.shape[1:3]
    hits = [(i, j) for i in range(x.shape[1] - h + 1) for j in range(x.shape[2] - w + 1)
            if np.array_equal(x[:, i:i + h, j:j + w], out)]
    assert len(hits) == 1, hits
    return hits[0]


def test_training_crop_gives_keras2_pixels_for_keras2s_offset(torch_side, keras_side, monkeypatch):
    x = _images()
    seen = set()
    for _ in range(12):
        k = np.asarray(keras_side["crop"](x, training=True))
        top, left = _offset(k, x)  # one offset for the whole batch
        seen.add((top, left))
        it = iter([top, left])
        monkeypatch.setattr(torch, "randint", lambda high, size: torch.tensor(next(it)))
        t = torch_side["crop"].train()(torch.from_numpy(x)).numpy()
        np.testing.assert_array_equal(t, k)
        monkeypatch.undo()
    assert len(seen) > 1
    # images smaller than the target: Keras 2 resizes in training too
    k = np.asarray(keras_side["crop_small"](x, training=True))
    t = torch_side["crop_small"].train()(torch.from_numpy(x)).numpy()
    assert t.shape == k.shape == (3, 8, 6, 2)
    np.testing.assert_allclose(t, k, rtol=1e-5, atol=1e-4)


def test_training_crop_draws_every_offset_uniformly(torch_side):
    torch.manual_seed(0)
    x = torch.rand(2, 6, 7, 2)
    counts: dict = {}
    c = torch_side["crop"].train()
    for _ in range(600):
        out = c(x)
        assert out.shape == (2, 4, 5, 2)
        key = _offset(out.numpy(), x.numpy())
        counts[key] = counts.get(key, 0) + 1
    assert set(counts) == {(i, j) for i in range(3) for j in range(3)}  # Keras 2: h - height + 1 tops, all drawn
    assert min(counts.values()) > 600 / 9 / 2


def test_training_contrast_gives_keras2_pixels_for_keras2s_factor(torch_side, keras_side, monkeypatch):
    x = _images(lo=100.0, hi=150.0)  # no pixel clipped, so the factor can be read back
    mean = x.mean(axis=(1, 2), keepdims=True)
    factors = []
    for name, lower, upper in (("contrast", 0.1, 0.4), ("contrast1", 0.3, 0.3)):
        for _ in range(5):
            k = np.asarray(keras_side[name](x, training=True))
            f = ((k - mean) * (x - mean)).sum(axis=(1, 2, 3)) / ((x - mean) ** 2).sum(axis=(1, 2, 3))
            assert np.allclose(f, f[0], atol=1e-4)  # one factor for the batch
            assert 1 - lower - 1e-5 <= f[0] <= 1 + upper + 1e-5
            factors.append(f[0])
            u = (f[0] - (1 - lower)) / (lower + upper)
            monkeypatch.setattr(torch, "rand", lambda shape, **kw: torch.as_tensor(u, **kw).reshape(shape))
            t = torch_side[name].train()(torch.from_numpy(x)).numpy()
            monkeypatch.undo()
            np.testing.assert_allclose(t, k, rtol=1e-5, atol=1e-3)
    assert np.std(factors) > 0.01


def test_training_contrast_draws_within_keras2s_range_and_clips(torch_side):
    torch.manual_seed(0)
    x = torch.rand(4, 6, 7, 2) * 255
    mean = x.mean(dim=(1, 2), keepdim=True)
    seen = []
    for _ in range(200):
        y = torch_side["contrast1"].train()(x)
        assert y.min() >= 0 and y.max() <= 255
        inner = ((x - mean).abs() * 1.3 + mean < 255) & ((mean - (x - mean).abs() * 1.3) > 0) & ((x - mean).abs() > 5)
        f = ((y - mean)[inner] / (x - mean)[inner])
        assert torch.allclose(f, f[0], atol=1e-3)  # one factor for every image of the call
        seen.append(float(f[0]))
    assert 0.7 - 1e-4 <= min(seen) < 0.75 and 1.25 < max(seen) <= 1.3 + 1e-4


def test_keras2_arguments_of_keras3_are_refused():
    src = "from tensorflow.keras import layers\nimport tensorflow_addons\nc = layers.RandomContrast(0.2, value_range=(0, 1))\n"
    r = translate_source(src, "m.py", "tf2torch", {"keras": 2})
    errs = [f for f in r.findings if f.severity.name == "ERROR"]
    assert len(errs) == 1 and "value_range" in errs[0].message and errs[0].line == 3, r.findings


def test_channels_first_helpers_give_the_channels_last_pixels_moved(torch_side, monkeypatch):
    # in a channels-first model (a Conv2D after them) the helpers take (N, C, H, W): the same pixels, moved
    x = torch.from_numpy(_images((3, 6, 7, 2)))
    first = x.permute(0, 3, 1, 2)
    for cls, args in (("Keras2RandomCrop", (4, 5)), ("Keras2RandomCrop", (8, 6)), ("Keras2RandomContrast", (0.3,))):
        last_m, first_m = torch_side[cls](*args), torch_side[cls](*args, channels_last=False)
        torch.testing.assert_close(first_m.eval()(first), last_m.eval()(x).permute(0, 3, 1, 2))
        torch.manual_seed(3)
        a = last_m.train()(x)
        torch.manual_seed(3)
        b = first_m.train()(first)
        torch.testing.assert_close(b, a.permute(0, 3, 1, 2))
    r = translate_source("from tensorflow import keras\nfrom tensorflow.keras import layers\n\n\ndef build():\n"
                         "    inputs = keras.Input((8, 8, 3))\n    x = layers.RandomCrop(6, 6)(inputs)\n"
                         "    x = layers.RandomContrast(0.2)(x)\n    return keras.Model(inputs, layers.Conv2D(2, 3)(x))\n",
                         "m.py", "tf2torch", {"keras": 2})
    assert not [f for f in r.findings if f.severity.name == "ERROR"], r.findings
    assert "Keras2RandomCrop(6, 6, channels_last=False)" in r.output
    assert "Keras2RandomContrast(0.2, channels_last=False)" in r.output
