"""Data input code: keras.datasets, pad_sequences, to_categorical, get_file, image loading,
keras.utils.Sequence and tf.data become helpers written into the output (fwport/packs/tf2torch/
datahelpers.py). Each helper is checked numerically against the Keras / TensorFlow function it
replaces, on the same small data, with no network (downloads are faked)."""
from __future__ import annotations

import os
import sys
import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _translate(src: str, keras: int | None = None):
    text = textwrap.dedent(src).lstrip()
    if keras:
        text = f"# fwport: keras={keras}\n" + text
    r = translate_source(text, "data.py")
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert not errors, [f.message for f in errors]
    imports = [ln for ln in r.output.splitlines() if ln.startswith(("import ", "from "))]
    assert not [ln for ln in imports if "tensorflow" in ln or "keras" in ln], r.output
    return r.output


def _run(src: str, keras: int | None = None, **env) -> dict:
    """Translate ``src`` and execute the translation with ``env`` as its globals (TensorFlow unused)."""
    ns = dict(env)
    exec(compile(_translate(src, keras), "translated.py", "exec"), ns)
    return ns


# --- pad_sequences ----------------------------------------------------------------------------

SEQS = [[1, 2, 3, 4, 5], [6], [], [7, 8, 9], [10, 11, 12, 13, 14, 15, 16]]


@pytest.mark.parametrize("kwargs", [
    {}, {"maxlen": 3}, {"maxlen": 4, "padding": "post"}, {"maxlen": 4, "truncating": "post"},
    {"maxlen": 6, "padding": "post", "truncating": "post", "value": -1}, {"dtype": "float32", "value": 0.5},
])
def test_pad_sequences_is_keras(kwargs):
    keras = pytest.importorskip("keras")
    args = "".join(f", {k}={v!r}" for k, v in kwargs.items())
    ns = _run(f"""
        from tensorflow import keras
        out = keras.preprocessing.sequence.pad_sequences(seqs{args})
        out2 = keras.utils.pad_sequences(seqs{args})
    """, seqs=SEQS)
    want = keras.utils.pad_sequences(SEQS, **kwargs)
    for got in (ns["out"], ns["out2"]):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_pad_sequences_keeps_item_shape():
    keras = pytest.importorskip("keras")
    seqs = [np.ones((3, 2)), np.arange(10).reshape(5, 2)]
    ns = _run("""
        import keras
        out = keras.utils.pad_sequences(seqs, maxlen=4, dtype="float32")
    """, seqs=seqs)
    np.testing.assert_array_equal(ns["out"], keras.utils.pad_sequences(seqs, maxlen=4, dtype="float32"))


# --- to_categorical ---------------------------------------------------------------------------

@pytest.mark.parametrize("labels", [[0, 2, 1, 3], [[1], [0], [2]], [[0, 1], [2, 2]]])
def test_to_categorical_is_keras3(labels):
    keras = pytest.importorskip("keras")
    ns = _run("""
        import keras
        a = keras.utils.to_categorical(labels)
        b = keras.utils.to_categorical(labels, num_classes=5)
    """, labels=labels)
    for got, want in ((ns["a"], keras.utils.to_categorical(labels)),
                      (ns["b"], keras.utils.to_categorical(labels, num_classes=5))):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_to_categorical_keras2_is_float32():
    """tf_keras passes dtype='float32' (Keras 3 gives float64 for arrays): written out for Keras 2 code."""
    out = _translate("""
        from tensorflow import keras
        y = keras.utils.to_categorical(labels, 10)
    """, keras=2)
    assert 'to_categorical(labels, num_classes=10, dtype="float32")' in out
    ns = {"labels": np.array([1, 9])}
    exec(out, ns)
    assert ns["y"].dtype == np.float32 and ns["y"].shape == (2, 10) and ns["y"][1, 9] == 1


def test_to_categorical_of_a_tensor_is_float32_tensor():
    torch = pytest.importorskip("torch")
    ns = _run("""
        import keras
        y = keras.utils.to_categorical(labels, 4)
    """, labels=torch.tensor([[3], [0]]))
    assert ns["y"].dtype == torch.float32 and ns["y"].tolist() == [[0, 0, 0, 1], [1, 0, 0, 0]]


# --- keras.datasets -------------------------------------------------------------------------------

def _fake_imdb(path):
    rng = np.random.default_rng(0)
    def seqs(n):
        return np.array([[int(v) for v in rng.integers(1, 40, size=rng.integers(2, 12))] for _ in range(n)] + [[1, 2]],
                        dtype=object)
    np.savez(path, x_train=seqs(30), y_train=rng.integers(0, 2, 31), x_test=seqs(20), y_test=rng.integers(0, 2, 21))


@pytest.mark.parametrize("kwargs", [
    {}, {"num_words": 20}, {"num_words": 25, "skip_top": 4, "maxlen": 9}, {"oov_char": None, "num_words": 15},
    {"start_char": None, "index_from": 0, "seed": 7}, {"maxlen": 6, "index_from": 5, "oov_char": 0},
])
def test_imdb_is_keras(kwargs, tmp_path, monkeypatch):
    """The helper reads Keras's own imdb.npz from ~/.keras/datasets (no download when it is there) and
    applies Keras's arguments: compared with keras.datasets.imdb.load_data on the same file."""
    keras = pytest.importorskip("keras")
    import keras.src.datasets.imdb as kimdb

    cache = tmp_path / ".keras" / "datasets"
    cache.mkdir(parents=True)
    _fake_imdb(cache / "imdb.npz")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(kimdb, "get_file", lambda *a, **k: str(cache / "imdb.npz"))
    args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    ns = _run(f"""
        from tensorflow import keras
        (x_train, y_train), (x_test, y_test) = keras.datasets.imdb.load_data({args})
    """)
    (wx, wy), (vx, vy) = keras.datasets.imdb.load_data(**kwargs)
    for got, want in ((ns["x_train"], wx), (ns["x_test"], vx)):
        assert got.dtype == want.dtype == object and got.shape == want.shape
        assert [list(s) for s in got] == [list(s) for s in want]
    for got, want in ((ns["y_train"], wy), (ns["y_test"], vy)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_boston_housing_is_keras(tmp_path, monkeypatch):
    keras = pytest.importorskip("keras")
    import keras.src.datasets.boston_housing as kb

    cache = tmp_path / ".keras" / "datasets"
    cache.mkdir(parents=True)
    rng = np.random.default_rng(1)
    np.savez(cache / "boston_housing.npz", x=rng.standard_normal((23, 13)), y=rng.standard_normal(23))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(kb, "get_file", lambda *a, **k: str(cache / "boston_housing.npz"))
    ns = _run("""
        import keras
        (x_train, y_train), (x_test, y_test) = keras.datasets.boston_housing.load_data(test_split=0.3, seed=5)
    """)
    want = keras.datasets.boston_housing.load_data(test_split=0.3, seed=5)
    got = ((ns["x_train"], ns["y_train"]), (ns["x_test"], ns["y_test"]))
    for g, w in zip(np.concatenate([np.ravel(a) for pair in got for a in pair]),
                    np.concatenate([np.ravel(a) for pair in want for a in pair])):
        assert g == w
    assert [a.shape for pair in got for a in pair] == [a.shape for pair in want for a in pair]


def _torchvision():
    try:
        import torchvision  # noqa: F401
    except Exception as e:  # absent, or a build that does not match torch
        pytest.skip(f"torchvision unusable: {e}")


def _write_idx(path, array):
    import struct
    code = {1: 0x08}[array.dtype.itemsize]
    with open(path, "wb") as f:
        f.write(struct.pack(">HBB", 0, code, array.ndim) + struct.pack(">" + "I" * array.ndim, *array.shape))
        f.write(array.tobytes())


@pytest.mark.parametrize("name,cls", [("mnist", "MNIST"), ("fashion_mnist", "FashionMNIST")])
def test_mnist_like_from_torchvision_is_keras(name, cls, tmp_path, monkeypatch):
    """torchvision reads the same idx files Keras's npz was made from: the helper's arrays against
    Keras's load_data on an npz of the same (small) data."""
    keras = pytest.importorskip("keras")
    _torchvision()
    rng = np.random.default_rng(2)
    arrays = {"x_train": rng.integers(0, 256, (7, 28, 28), dtype=np.uint8), "y_train": rng.integers(0, 10, 7, dtype=np.uint8),
              "x_test": rng.integers(0, 256, (3, 28, 28), dtype=np.uint8), "y_test": rng.integers(0, 10, 3, dtype=np.uint8)}
    raw = tmp_path / "tv" / cls / "raw"
    raw.mkdir(parents=True)
    for split, prefix in (("train", "train"), ("test", "t10k")):
        _write_idx(raw / f"{prefix}-images-idx3-ubyte", arrays[f"x_{split}"])
        _write_idx(raw / f"{prefix}-labels-idx1-ubyte", arrays[f"y_{split}"])
    ns = _run(f"""
        from tensorflow import keras
        (x_train, y_train), (x_test, y_test) = keras.datasets.{name}.load_data()
    """)
    (x_train, y_train), (x_test, y_test) = ns[f"load_{name}"](root=str(tmp_path / "tv"))
    if name == "mnist":
        import keras.src.datasets.mnist as km
        np.savez(tmp_path / "mnist.npz", **arrays)
        monkeypatch.setattr(km, "get_file", lambda *a, **k: str(tmp_path / "mnist.npz"))
        want = keras.datasets.mnist.load_data()
    else:
        want = ((arrays["x_train"], arrays["y_train"]), (arrays["x_test"], arrays["y_test"]))
    for got, w in zip((x_train, y_train, x_test, y_test), (*want[0], *want[1])):
        assert got.dtype == w.dtype == np.uint8 and got.shape == w.shape
        np.testing.assert_array_equal(got, w)


def test_cifar100_coarse_labels_are_refused():
    r = translate_source("import keras\n(a, b), _ = keras.datasets.cifar100.load_data(label_mode='coarse')\n", "c.py")
    assert [f.code for f in r.findings if f.severity is Severity.ERROR] == ["unsupported-argument"]
    assert "fine labels only" in r.output


# --- get_file -----------------------------------------------------------------------------------

def _fake_downloads(monkeypatch, archive):
    """torch.hub's downloader and Keras's urlretrieve both copy ``archive`` instead of downloading."""
    import shutil

    import torch
    import keras.src.utils.file_utils as kf

    monkeypatch.setattr(torch.hub, "download_url_to_file", lambda url, dst, *a, **k: shutil.copy(archive, dst))
    monkeypatch.setattr(kf, "urlretrieve", lambda url, dst, *a, **k: shutil.copy(archive, dst))


@pytest.mark.parametrize("kwargs", [
    {"fname": "spa-eng", "extract": True}, {"fname": "data.zip", "extract": True}, {"extract": True},
    {"fname": "plain.txt"}, {},
])
def test_get_file_is_keras3(kwargs, tmp_path, monkeypatch):
    """Same path returned and same files extracted as Keras 3's get_file, under a cache_dir of each."""
    import zipfile

    keras = pytest.importorskip("keras")
    pytest.importorskip("torch")
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("spa-eng/spa.txt", "hola\thello\n")
    _fake_downloads(monkeypatch, archive)
    origin = "https://example.org/files/pack.zip"
    (tmp_path / "mine").mkdir()
    (tmp_path / "keras").mkdir()
    args = "".join(f", {k}={v!r}" for k, v in kwargs.items())
    ns = _run(f"""
        import keras
        path = keras.utils.get_file(origin=origin, cache_dir=mine{args})
    """, origin=origin, mine=str(tmp_path / "mine"))
    want = keras.utils.get_file(origin=origin, cache_dir=str(tmp_path / "keras"), **kwargs)
    assert os.path.relpath(ns["path"], tmp_path / "mine") == os.path.relpath(want, tmp_path / "keras")

    def listing(root):
        return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)
    assert listing(tmp_path / "mine") == listing(tmp_path / "keras")


@pytest.mark.parametrize("kwargs", [
    {"fname": "flowers.tgz", "extract": True}, {"fname": "flowers", "untar": True},
    {"fname": "flowers.tar.gz", "untar": True}, {"fname": "notes.txt"},
])
def test_get_file_is_keras2(kwargs, tmp_path, monkeypatch):
    """Keras 2 (tf_keras) extracts into the cache folder and returns the archive's path (untar: the
    extracted folder's): the same as the translation of Keras 2 code."""
    import shutil
    import tarfile

    pytest.importorskip("torch")
    tf_keras = pytest.importorskip("tf_keras")
    import tf_keras.src.utils.data_utils as kd
    import torch

    src = tmp_path / "src" / "flowers"
    src.mkdir(parents=True)
    (src / "a.txt").write_text("petal")
    archive = tmp_path / "a.tar.gz"
    with tarfile.open(archive, "w:gz") as t:
        t.add(src, arcname="flowers")
    monkeypatch.setattr(torch.hub, "download_url_to_file", lambda url, dst, *a, **k: shutil.copy(archive, dst))
    monkeypatch.setattr(kd, "urlretrieve", lambda url, dst, *a, **k: shutil.copy(archive, dst))
    (tmp_path / "mine").mkdir()
    (tmp_path / "keras").mkdir()
    args = "".join(f", {k}={v!r}" for k, v in kwargs.items())
    ns = _run(f"""
        import tensorflow as tf
        path = tf.keras.utils.get_file(origin="https://example.org/f.tar.gz", cache_dir=mine{args})
    """, keras=2, mine=str(tmp_path / "mine"))
    want = tf_keras.utils.get_file(origin="https://example.org/f.tar.gz", cache_dir=str(tmp_path / "keras"), **kwargs)
    assert os.path.relpath(ns["path"], tmp_path / "mine") == os.path.relpath(want, tmp_path / "keras")

    def listing(root):
        return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)
    assert listing(tmp_path / "mine") == listing(tmp_path / "keras")


def test_get_file_keras2_extracts_next_to_the_archive():
    out = _translate("""
        import tensorflow as tf
        path = tf.keras.utils.get_file("flowers.tgz", origin=url, untar=True, file_hash="abc")
    """, keras=2)
    assert 'get_file("flowers.tgz", origin=url, untar=True, keras2=True)' in out
    assert "torch.hub.download_url_to_file(origin, target)" in out


# --- images -----------------------------------------------------------------------------------

@pytest.fixture
def image_files(tmp_path):
    from PIL import Image
    rng = np.random.default_rng(3)
    rgb = tmp_path / "rgb.png"
    Image.fromarray(rng.integers(0, 256, (37, 50, 3), dtype=np.uint8)).save(rgb)
    gray = tmp_path / "gray.png"
    Image.fromarray(rng.integers(0, 256, (20, 16), dtype=np.uint8)).save(gray)
    return rgb, gray


@pytest.mark.parametrize("kwargs", [
    {}, {"target_size": (16, 24)}, {"color_mode": "grayscale", "target_size": (10, 10)},
    {"color_mode": "rgba"}, {"target_size": (30, 12), "interpolation": "bilinear"},
    {"target_size": (12, 30), "keep_aspect_ratio": True, "interpolation": "bicubic"},
])
def test_load_img_and_img_to_array_are_keras(kwargs, image_files):
    keras = pytest.importorskip("keras")
    args = "".join(f", {k}={v!r}" for k, v in kwargs.items())
    for path in image_files:
        ns = _run(f"""
            from tensorflow.keras.preprocessing.image import load_img, img_to_array
            img = load_img(path{args})
            x = img_to_array(img)
            x_first = img_to_array(img, data_format="channels_first", dtype="uint8")
        """, path=str(path))
        want = keras.utils.load_img(str(path), **kwargs)
        assert ns["img"].mode == want.mode and ns["img"].size == want.size
        for got, w in ((ns["x"], keras.utils.img_to_array(want)),
                       (ns["x_first"], keras.utils.img_to_array(want, data_format="channels_first", dtype="uint8"))):
            assert got.dtype == w.dtype and got.shape == w.shape
            np.testing.assert_array_equal(got, w)


@pytest.mark.parametrize("shape,scale", [((6, 5, 3), True), ((6, 5, 1), True), ((6, 5, 4), False), ((4, 3, 1), False)])
def test_array_to_img_is_keras(shape, scale):
    keras = pytest.importorskip("keras")
    rng = np.random.default_rng(4)
    x = rng.uniform(0, 255 if not scale else 3, shape).astype("float32")
    ns = _run(f"""
        from tensorflow import keras
        img = keras.preprocessing.image.array_to_img(x, scale={scale})
    """, x=x)
    want = keras.utils.array_to_img(x, scale=scale)
    assert ns["img"].mode == want.mode and ns["img"].size == want.size
    np.testing.assert_array_equal(np.asarray(ns["img"]), np.asarray(want))


@pytest.mark.parametrize("shape,name,file_format", [((6, 5, 3), "a.png", None), ((6, 5, 4), "b.JPG", None),
                                                     ((6, 5, 1), "c.bin", "png"), ((6, 5, 4), "d.png", "jpg")])
def test_save_img_writes_the_file_keras_writes(tmp_path, shape, name, file_format):
    # the format from the extension ("JPG" → JPEG), RGBA converted to RGB for JPEG, file_format overriding
    keras = pytest.importorskip("keras")
    from PIL import Image
    x = np.random.default_rng(5).uniform(0, 3, shape).astype("float32")
    fmt = "" if file_format is None else f", file_format={file_format!r}"
    _run(f"""
        from tensorflow import keras
        keras.preprocessing.image.save_img(path, x{fmt})
    """, x=x, path=str(tmp_path / ("t_" + name)))
    keras.utils.save_img(str(tmp_path / ("k_" + name)), x, **({} if file_format is None else {"file_format": file_format}))
    got, want = Image.open(tmp_path / ("t_" + name)), Image.open(tmp_path / ("k_" + name))
    assert got.format == want.format and got.mode == want.mode and got.size == want.size
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.fixture
def image_folder(tmp_path):
    """Two classes of PNG images of different sizes and modes (RGB, grayscale, RGBA, palette)."""
    from PIL import Image
    rng = np.random.default_rng(6)
    for c, cls in enumerate(("cats", "dogs")):
        (tmp_path / "images" / cls).mkdir(parents=True)
        for i in range(5):
            size, mode = [(9, 7), (12, 12), (5, 8)][i % 3], ["RGB", "L", "RGBA", "P", "RGB"][(i + c) % 5]
            shape = (size[1], size[0]) + ({"RGB": (3,), "RGBA": (4,)}.get(mode, ()))
            img = Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8)).convert(mode)
            img.save(tmp_path / "images" / cls / f"{i}.png")
    (tmp_path / "images" / "dogs" / "notes.txt").write_text("not an image")
    return tmp_path / "images"


@pytest.mark.parametrize("kwargs", [
    {"shuffle": False, "image_size": (6, 10)},
    {"shuffle": False, "image_size": (16, 14), "color_mode": "grayscale", "label_mode": "categorical", "batch_size": 3},
    {"shuffle": False, "image_size": (8, 8), "interpolation": "nearest", "label_mode": "binary", "batch_size": None},
    {"shuffle": False, "image_size": (7, 9), "validation_split": 0.3, "subset": "validation", "seed": 3, "color_mode": "rgba"},
    {"shuffle": False, "image_size": (7, 9), "label_mode": None, "data_format": "channels_first"},
])
def test_image_dataset_from_directory_is_keras(kwargs, image_folder):
    """Same images (pixels within 5e-4 of tf.image.resize), labels, dtypes and batches as Keras 3."""
    keras = pytest.importorskip("keras")
    pytest.importorskip("torch")
    args = "".join(f", {k}={v!r}" for k, v in kwargs.items())
    ns = _run(f"""
        import keras
        ds = keras.utils.image_dataset_from_directory(folder{args}, verbose=False)
    """, folder=str(image_folder))
    want = keras.utils.image_dataset_from_directory(str(image_folder), verbose=False, **kwargs)
    got_batches, want_batches = list(ns["ds"]), list(want)
    assert len(got_batches) == len(want_batches) > 0
    assert ns["ds"].class_names == want.class_names
    for g, w in zip(got_batches, want_batches):
        gs, ws = (g, w) if isinstance(w, tuple) else ((g,), (w,))
        for gt, wt in zip(gs, ws):
            assert tuple(gt.shape) == tuple(wt.shape) and str(gt.dtype).split(".")[-1] == wt.dtype.name
            # color images read as grayscale: PIL's luma rounds differently from libpng's (1 level)
            atol = 1.0 + 1e-3 if kwargs.get("color_mode") == "grayscale" else 5e-4
            np.testing.assert_allclose(gt.numpy().astype("float64"), wt.numpy().astype("float64"), atol=atol, rtol=0)


def test_image_dataset_shuffles_files_as_keras(image_folder):
    """With shuffle and a seed, the file order is Keras's (RandomState(seed)); the batches are then
    shuffled in a buffer each pass: the same samples per epoch."""
    keras = pytest.importorskip("keras")
    pytest.importorskip("torch")
    ns = _run("""
        import keras
        ds = keras.utils.image_dataset_from_directory(folder, seed=11, image_size=(5, 5), batch_size=4, verbose=False)
    """, folder=str(image_folder))
    want = keras.utils.image_dataset_from_directory(str(image_folder), seed=11, image_size=(5, 5), batch_size=4,
                                                    verbose=False)
    def samples(batches):
        return sorted((float(x.numpy().sum()), int(y)) for xs, ys in batches for x, y in zip(xs, ys))
    got, ref = samples(ns["ds"]), samples(want)
    assert [y for _, y in got] == [y for _, y in ref]
    np.testing.assert_allclose([x for x, _ in got], [x for x, _ in ref], rtol=1e-5)


def test_image_dataset_from_directory_refuses_what_it_cannot_do():
    r = translate_source("import keras\nds = keras.utils.image_dataset_from_directory('d', interpolation='bicubic')\n"
                         "ds2 = keras.utils.image_dataset_from_directory('d', crop_to_aspect_ratio=True)\n", "i.py")
    assert [f.code for f in r.findings if f.severity is Severity.ERROR] == ["unsupported-argument"] * 2


@pytest.mark.parametrize("kwargs", [
    {"shuffle": False}, {"shuffle": False, "max_length": 4, "label_mode": "categorical", "batch_size": 2},
    {"shuffle": False, "validation_split": 0.5, "subset": "training", "seed": 1, "label_mode": "binary"},
    {"shuffle": False, "label_mode": None, "batch_size": None},
])
def test_text_dataset_from_directory_is_keras(kwargs, tmp_path):
    keras = pytest.importorskip("keras")
    pytest.importorskip("torch")
    for cls, texts in (("neg", ["bad film", "dull", "meh ü"]), ("pos", ["great", "loved it", "fine"])):
        (tmp_path / "reviews" / cls).mkdir(parents=True)
        for i, t in enumerate(texts):
            (tmp_path / "reviews" / cls / f"{i}.txt").write_text(t, encoding="utf-8")
    args = "".join(f", {k}={v!r}" for k, v in kwargs.items())
    ns = _run(f"""
        from keras.utils import text_dataset_from_directory
        ds = text_dataset_from_directory(folder{args}, verbose=False)
    """, folder=str(tmp_path / "reviews"))
    want = keras.utils.text_dataset_from_directory(str(tmp_path / "reviews"), verbose=False, **kwargs)
    def plain(value):
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return [plain(v) for v in value]
        a = np.asarray(value)
        if a.dtype == object:
            out = [v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v for v in a.ravel()]
            return out if a.ndim else out[0]
        return a.tolist()
    got, ref = list(ns["ds"]), list(want)
    assert len(got) == len(ref) > 0 and ns["ds"].class_names == want.class_names
    for g, w in zip(got, ref):
        gs, ws = (g, w) if isinstance(w, tuple) else ((g,), (w,))
        assert [plain(x) for x in gs] == [plain(x) for x in ws]
        for gt, wt in zip(gs[1:], ws[1:]):
            assert str(gt.dtype).split(".")[-1] == wt.dtype.name


# --- keras.utils.Sequence -------------------------------------------------------------------------

def test_sequence_becomes_a_dataset_of_batches():
    """__len__ / __getitem__ keep their meaning (one batch each): a DataLoader with batch_size=None
    yields the same batches, as tensors."""
    torch = pytest.importorskip("torch")
    ns = _run("""
        import numpy as np
        from tensorflow import keras

        class Batches(keras.utils.Sequence):
            def __init__(self, x, y, batch_size):
                self.x, self.y, self.batch_size = x, y, batch_size

            def __len__(self):
                return len(self.x) // self.batch_size

            def __getitem__(self, idx):
                i = idx * self.batch_size
                return self.x[i : i + self.batch_size], self.y[i : i + self.batch_size]
    """)
    x, y = np.arange(20.0).reshape(10, 2), np.arange(10)
    seq = ns["Batches"](x, y, 3)
    assert isinstance(seq, torch.utils.data.Dataset) and len(seq) == 3
    batches = list(torch.utils.data.DataLoader(seq, batch_size=None))
    assert len(batches) == 3
    np.testing.assert_array_equal(batches[2][0].numpy(), x[6:9])
    np.testing.assert_array_equal(batches[1][1].numpy(), y[3:6])


def test_sequence_on_epoch_end_is_a_warning():
    r = translate_source("from tensorflow import keras\n\nclass S(keras.utils.Sequence):\n"
                         "    def on_epoch_end(self):\n        pass\n", "s.py")
    [w] = [f for f in r.findings if f.severity is Severity.WARNING]
    assert w.line == 4 and "on_epoch_end" in w.message and "torch.utils.data.Dataset" in r.output


# --- tf.data ----------------------------------------------------------------------------------

def _as_lists(value):
    if isinstance(value, (tuple, list)):
        return [_as_lists(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_lists(v) for k, v in sorted(value.items())}
    return np.asarray(value).tolist()


PIPELINES = {
    "map-batch": "ds = tf.data.Dataset.from_tensor_slices((x, y)).map(lambda a, b: (a * 2.0 + 1.0, b)).batch(4)",
    "drop-remainder": "ds = tf.data.Dataset.from_tensor_slices(x).batch(3, drop_remainder=True)",
    "dict": "ds = tf.data.Dataset.from_tensor_slices({'a': x, 'b': y}).map(lambda d: d['a'] * 3.0).batch(5)",
    "take-skip-repeat": "ds = tf.data.Dataset.from_tensor_slices(y).repeat(2).skip(3).take(12).batch(4)",
    "unbatch": "ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(3).unbatch().batch(4)",
    "batch-then-map": "ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(4).map(lambda a, b: (a - 1.0, b + 1))",
    "zip-range": "ds = tf.data.Dataset.zip((tf.data.Dataset.range(5), tf.data.Dataset.from_tensor_slices(y))).batch(2)",
    "cache-prefetch-filter": "ds = tf.data.Dataset.from_tensor_slices(y).filter(lambda v: v > 3).cache().batch(2).prefetch(tf.data.AUTOTUNE)",
    "python-lists": "ds = tf.data.Dataset.from_tensor_slices(([1, 2, 3], [0.5, 1.5, 2.5])).batch(2)",
    "list-of-arrays": "ds = tf.data.Dataset.from_tensor_slices([y[:2], y[2:4]]).batch(2)",
    "numpy-scalar": "ds = tf.data.Dataset.from_tensors(x[0, 0]).repeat(2)",
    "float64-scalars": "ds = tf.data.Dataset.from_tensor_slices([np.float64(1.5), np.float64(2.5)])",
    "from-tensors-enumerate": "ds = tf.data.Dataset.from_tensors(x[:2]).repeat(3).enumerate()",
    "concatenate": "ds = tf.data.Dataset.from_tensor_slices(y[:3]).concatenate(tf.data.Dataset.from_tensor_slices(y[5:]))",
}


@pytest.mark.parametrize("name", list(PIPELINES))
def test_tf_data_pipeline_is_tf(name):
    """The same pipeline under TensorFlow and translated under torch: the same elements, in order,
    with the same dtypes and shapes."""
    tf = pytest.importorskip("tensorflow")
    pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((10, 3)).astype("float32"), rng.integers(0, 9, 10).astype("int64")
    src = "import numpy as np\nimport tensorflow as tf\n" + PIPELINES[name] + "\nout = list(ds)\nn = len(ds) if name not in ('cache-prefetch-filter', 'unbatch') else None\n"
    ns_tf = {"x": x, "y": y, "name": name}
    exec(src, ns_tf)
    ns = _run(src, x=x, y=y, name=name)
    got, want = ns["out"], ns_tf["out"]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert _as_lists(g) == _as_lists(w)
        gs = g if isinstance(g, (tuple, list)) else [g]
        ws = w if isinstance(w, (tuple, list)) else [w]
        for gt, wt in zip(gs, ws):
            if hasattr(wt, "dtype") and not isinstance(wt, dict):
                assert str(gt.dtype).split(".")[-1] == wt.dtype.name, (gt.dtype, wt.dtype)
    assert ns["n"] == ns_tf["n"]


def test_tf_data_from_generator_is_tf():
    """The generator is called on each pass and its elements cast to output_types, as in TensorFlow."""
    pytest.importorskip("tensorflow")
    pytest.importorskip("torch")

    def samples(n):
        for i in range(int(n)):
            yield [i, i + 0.5], i % 3

    src = """
        import tensorflow as tf
        ds = tf.data.Dataset.from_generator(samples, output_types=(tf.float32, tf.int64), args=(5,)).batch(2)
        out = list(ds) + list(ds)
    """
    ns_tf = {"samples": samples}
    exec(textwrap.dedent(src), ns_tf)
    ns = _run(src, samples=samples)
    assert len(ns["out"]) == len(ns_tf["out"]) == 6
    for g, w in zip(ns["out"], ns_tf["out"]):
        assert _as_lists(g) == _as_lists(w)
        assert [str(t.dtype).split(".")[-1] for t in g] == [t.dtype.name for t in w]


def test_tf_data_from_generator_with_output_signature_is_refused():
    """A signature that is no TensorSpec structure fwport sees (a spec made elsewhere) is refused; TensorSpec objects
    written in the call become output_types (tests/test_tensor_specs.py)."""
    r = translate_source("import tensorflow as tf\nspec = other.element_spec\n"
                         "ds = tf.data.Dataset.from_generator(g, output_signature=spec)\n", "g.py")
    assert "unsupported-argument" in [f.code for f in r.findings if f.severity is Severity.ERROR]
    assert "output_types=" in r.output and "DataPipeline.from_generator" not in r.output


def test_tf_data_shuffle():
    """shuffle keeps every element once per pass, reshuffles each pass; a buffer of 1 keeps the order;
    a seed without reshuffling gives the same order every pass."""
    pytest.importorskip("torch")
    ns = _run("""
        import tensorflow as tf
        full = tf.data.Dataset.from_tensor_slices(y).shuffle(100)
        window = tf.data.Dataset.from_tensor_slices(y).shuffle(1)
        fixed = tf.data.Dataset.from_tensor_slices(y).shuffle(4, seed=3, reshuffle_each_iteration=False).batch(5)
    """, y=np.arange(50))
    a, b = [int(v) for v in ns["full"]], [int(v) for v in ns["full"]]
    assert sorted(a) == sorted(b) == list(range(50)) and a != b and a != list(range(50))
    assert [int(v) for v in ns["window"]] == list(range(50))
    first = [t.tolist() for t in ns["fixed"]]
    assert first == [t.tolist() for t in ns["fixed"]] and sorted(sum(first, [])) == list(range(50))


def test_tf_data_shuffle_buffer_is_a_window():
    """TensorFlow's buffer: the first element out is one of the first buffer_size ones."""
    pytest.importorskip("torch")
    ns = _run("""
        import tensorflow as tf
        ds = tf.data.Dataset.from_tensor_slices(y).shuffle(5)
    """, y=np.arange(1000))
    firsts = {int(next(iter(ns["ds"]))) for _ in range(60)}
    assert firsts <= set(range(5)) and len(firsts) > 1


def test_tf_data_repeat_forever_feeds_a_loop():
    """.repeat() with no count is endless; a batched pipeline is an iterable of (x, y) tensor tuples,
    which a DataLoader(batch_size=None) also takes."""
    torch = pytest.importorskip("torch")
    ns = _run("""
        import tensorflow as tf
        ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(8).batch(4).repeat()
    """, x=np.zeros((8, 2), "float32"), y=np.arange(8))
    it = iter(ns["ds"])
    batches = [next(it) for _ in range(7)]
    assert all(isinstance(b, tuple) and b[0].shape == (4, 2) and b[0].dtype == torch.float32 for b in batches)
    with pytest.raises(TypeError):
        len(ns["ds"])
    loader = torch.utils.data.DataLoader(ns["ds"].take(3), batch_size=None)
    assert [tuple(b[0].shape) for b in loader] == [(4, 2)] * 3


# --- translation-level behaviour ----------------------------------------------------------------

def test_module_alias_of_a_dataset_module_is_removed():
    out = _translate("""
        import tensorflow as tf
        mnist = tf.keras.datasets.mnist
        (x_train, y_train), (x_test, y_test) = mnist.load_data()
    """)
    assert "mnist = " not in out and "load_mnist()" in out and "torchvision.datasets.MNIST" in out


def test_module_alias_named_only_as_a_keyword_or_an_attribute_is_removed():
    # dict(mnist=...) and stats.mnist name the alias without reading it (names.ValueVisitor)
    out = _translate("""
        import tensorflow as tf
        mnist = tf.keras.datasets.mnist
        (x_train, y_train), (x_test, y_test) = mnist.load_data()
        sizes = dict(mnist=len(x_train))
        print(sizes, sizes.mnist if hasattr(sizes, "mnist") else None)
    """)
    assert "mnist = " not in out and "import tensorflow" not in out and "dict(mnist=len(x_train))" in out


def test_module_alias_still_used_stays():
    r = translate_source("import tensorflow as tf\nL = tf.keras.layers\nmake = L.Conv3DTranspose\n", "a.py")
    assert "L = tf.keras.layers" in r.output
    assert any(f.severity is Severity.ERROR for f in r.findings)  # the use that stays is reported


def test_clear_session_and_version():
    out = _translate("""
        import tensorflow as tf
        from tensorflow import keras
        print(tf.__version__)
        keras.backend.clear_session()
    """)
    assert "print(torch.__version__)" in out and "gc.collect()" in out and "import gc" in out


def test_helpers_are_written_once_and_translation_is_a_fixpoint():
    src = """
        import tensorflow as tf
        from tensorflow import keras
        (x, y), _ = keras.datasets.imdb.load_data(num_words=100)
        x = keras.utils.pad_sequences(x, maxlen=20)
        ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1000).batch(32)
        path = keras.utils.get_file("a.txt", origin="https://example.org/a.txt")
    """
    out = _translate(src)
    assert out.count("def get_file(") == 1 and out.count("class DataPipeline(") == 1
    again = translate_source(out, "again.py")
    assert again.output == out


def test_a_written_data_pipeline_is_a_fixpoint():
    # the file keeps TensorFlow (a call with no rule), so translating the output again runs the passes over
    # the DataPipeline class written into it: its own .numpy() must already be what they would write
    src = textwrap.dedent('''
        import numpy as np
        import tensorflow as tf

        x = np.random.rand(10, 4).astype("float32")
        ds = tf.data.Dataset.from_tensor_slices(x).batch(4)
        first = next(ds.as_numpy_iterator())
        y = tf.raw_ops.Foo(x=first)
    ''')
    once = translate_source(src, "data.py").output
    assert "class DataPipeline" in once and "import tensorflow" in once, once
    assert translate_source(once, "data.py").output == once


# --- the data_pipeline fixture's deterministic batches, against tf.data ----------------------------------

@pytest.mark.parametrize("old, new, function, why", [
    ("            if items and not drop_remainder:\n", "            if items:\n", "parallel_map_batches",
     "drop_remainder ignored: a fourth, partial batch"),
    ("            if items and not drop_remainder:\n", "            if False:\n", "every_eval_batch",
     "the partial last batch dropped"),
    ("        def run():\n            for element in self:\n                yield map_func(",
     "        def run():\n            for element in reversed(list(self)):\n                yield map_func(",
     "every_eval_batch", "map yields its elements in another order"),
], ids=["drop-remainder-ignored", "partial-batch-dropped", "map-reorders"])
def test_data_pipeline_fixture_batches_are_compared_with_tf_data(session, tmp_path, old, new, function, why):
    """The data_pipeline fixture's evaluation pipeline (map + batch, no shuffle: tf.data's order is deterministic)
    yields tf.data's batches, each compared numerically (fwport verify, forward of the function); a planted bug in
    the written DataPipeline changes them and is caught. The shuffled training pipeline is compared only by what
    does not depend on the order (train_epoch_totals): TensorFlow's and torch's random streams differ, seeded or not."""
    from pathlib import Path

    from fwport.verify import Options, verify

    case = Path(__file__).resolve().parent.parent / "fixtures" / "tf2torch" / "data_pipeline"
    good = (case / "expected.py").read_text()
    assert old in good, f"the written DataPipeline changed: {old!r} not found; update the planted bug"
    planted = tmp_path / "planted.py"
    planted.write_text(good.replace(old, new))

    def run(translated):
        return verify(Options(str(case / "model.py"), str(translated), function, inputs=["float32[10,3,2]", "int32[10]:5"],
                              checks=("forward",), device="cpu", kind="function"), session)

    ok = run(case / "expected.py")
    assert ok["verdict"] == "pass", ok["problems"]
    assert len(ok["results"]["outputs"]) == (6 if function == "every_eval_batch" else 3)  # 3 batches (x, y) / 3 x's
    assert run(planted)["verdict"] == "mismatch", why
