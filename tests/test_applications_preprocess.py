"""keras.applications.<model>.preprocess_input → the imagenet_preprocess helper (rules applications-preprocess-*,
imagenet-utils-preprocess-input): every application's preprocess_input run by Keras and by the translation on
the same random images, NumPy arrays (float32, float64, uint8; a float array is changed in place by both) and
tensors (tf vs torch), channels-last and channels-first, a batch and one image; values, dtypes and the
caller's array compared. The pretrained models stay refused."""
from __future__ import annotations

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

MODES = {"resnet": "caffe", "resnet50": "caffe", "vgg16": "caffe", "vgg19": "caffe",
         "resnet_v2": "tf", "mobilenet": "tf", "mobilenet_v2": "tf", "inception_v3": "tf",
         "inception_resnet_v2": "tf", "xception": "tf", "nasnet": "tf", "densenet": "torch",
         "efficientnet": "none", "efficientnet_v2": "none", "convnext": "none", "mobilenet_v3": "none"}

SRC = '''import tensorflow as tf
from tensorflow import keras
from tensorflow.keras.applications.{module} import preprocess_input


def run(x, fmt):
    return keras.applications.{module}.preprocess_input(x, data_format=fmt)


def run_default(x):
    return preprocess_input(x)
'''

UTILS = '''from keras.applications import imagenet_utils


def run(x, fmt):
    return (imagenet_utils.preprocess_input(x, data_format=fmt),
            imagenet_utils.preprocess_input(x, fmt, "tf"),
            imagenet_utils.preprocess_input(x, data_format=fmt, mode="torch"))
'''

# (shape, data_format): a channels-last batch and image, a channels-first batch and image
LAYOUTS = [((2, 5, 4, 3), "channels_last"), ((6, 5, 3), None), ((2, 3, 5, 4), "channels_first"),
           ((3, 4, 6), "channels_first")]


def _translated(src: str) -> dict:
    r = translate_source(src, "m.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "tensorflow" not in r.output and "import keras" not in r.output and "preprocess_input(" not in r.output, \
        r.output
    ns: dict = {}
    exec(compile(r.output, "translated.py", "exec"), ns)
    return ns


def _same(want, got) -> None:
    """The same dtype and values: float32 arithmetic in the same order gives the same bits."""
    want, got = np.asarray(want), np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_array_max_ulp(got, want, maxulp=0)


@pytest.mark.parametrize("module", sorted(MODES))
def test_preprocess_input_matches_keras(module):
    keras = pytest.importorskip("keras")
    tf = pytest.importorskip("tensorflow")
    torch = pytest.importorskip("torch")
    import importlib
    keras_fn = importlib.import_module(f"keras.applications.{module}").preprocess_input
    ns = _translated(SRC.format(module=module))
    rng = np.random.default_rng(0)
    for shape, fmt in LAYOUTS:
        pixels = rng.uniform(0, 255, shape)
        for dtype in ("float32", "float64", "uint8"):
            # NumPy arrays: both work in place on a float array; the caller's array is compared too
            a_keras, a_torch = pixels.astype(dtype), pixels.astype(dtype)
            want, got = keras_fn(a_keras, data_format=fmt), ns["run"](a_torch, fmt)
            assert isinstance(got, np.ndarray)
            _same(want, got)
            _same(a_keras, a_torch)
            assert (got is a_torch) == (want is a_keras), (module, dtype)
        if fmt != "channels_first":
            a_keras, a_torch = pixels.astype("float32"), pixels.astype("float32")
            _same(keras_fn(a_keras), ns["run_default"](a_torch))
            _same(a_keras, a_torch)
        for dtype in ("float32", "float64"):  # tensors: tf (TensorFlow refuses integer ones) vs torch
            want = keras_fn(tf.constant(pixels.astype(dtype)), data_format=fmt)
            got = ns["run"](torch.tensor(pixels.astype(dtype)), fmt)
            assert isinstance(got, torch.Tensor)
            _same(np.asarray(want), got.numpy())


def test_imagenet_utils_modes_match_keras():
    pytest.importorskip("keras")
    tf = pytest.importorskip("tensorflow")
    torch = pytest.importorskip("torch")
    from keras.applications import imagenet_utils
    ns = _translated(UTILS)
    rng = np.random.default_rng(1)
    for shape, fmt in LAYOUTS:
        pixels = rng.uniform(0, 255, shape).astype("float32")
        want = [imagenet_utils.preprocess_input(tf.constant(pixels), data_format=fmt, mode=mode)
                for mode in ("caffe", "tf", "torch")]
        got = ns["run"](torch.tensor(pixels), fmt)
        for w, g in zip(want, got, strict=True):
            _same(np.asarray(w), g.numpy())
        original: dict = {}  # the source itself, run by Keras: on one array, the three calls in sequence
        exec(compile(UTILS, "m.py", "exec"), original)
        a_keras, a_torch = pixels.copy(), pixels.copy()
        want, got = original["run"](a_keras, fmt), ns["run"](a_torch, fmt)
        for w, g in zip(want, got, strict=True):
            _same(w, g)
        _same(a_keras, a_torch)


def test_keras2_preprocess_input_modes_are_the_same():
    """tf_keras (Keras 2) computes the same modes: its tensor path (bias_add) and NumPy path agree with the
    translation for the modules the corpus uses."""
    tf_keras = pytest.importorskip("tf_keras")
    torch = pytest.importorskip("torch")
    import importlib
    rng = np.random.default_rng(2)
    pixels = rng.uniform(0, 255, (2, 5, 4, 3)).astype("float32")
    for module in ("resnet50", "resnet_v2", "vgg19", "xception", "densenet", "efficientnet", "mobilenet_v2"):
        ns = _translated(SRC.format(module=module))
        fn = importlib.import_module(f"tf_keras.applications.{module}").preprocess_input
        _same(fn(pixels.copy()), ns["run"](pixels.copy(), None))
        import tensorflow as tf
        _same(np.asarray(fn(tf.constant(pixels))), np.asarray(ns["run"](torch.tensor(pixels), None)))


def test_efficientnet_preprocess_is_the_argument_and_models_stay_refused():
    r = translate_source("from tensorflow import keras\n\n"
                         "y = keras.applications.efficientnet.preprocess_input(images)\n"
                         "base = keras.applications.ResNet50V2(include_top=False, weights='imagenet')\n"
                         "z = keras.applications.resnet_v2.preprocess_input(images)\n", "m.py")
    assert "y = images\n" in r.output and 'z = imagenet_preprocess(images, "tf")' in r.output, r.output
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert [f.line for f in errors] == [4] and "pretrained Keras model" in errors[0].message, errors
    assert [f.line for f in r.findings if f.code == "idiom-replaced"] == [3]
