"""keras.preprocessing.image.ImageDataGenerator → the ImageDataGenerator helper (fwport/packs/tf2torch/imagegen.py).

The same code runs with tf_keras's ImageDataGenerator (Keras 3 has none) and translated (without TensorFlow); the
batches are compared: seeded augmenting flows within 1e-4 (the same numpy draws, Keras's matrix, scipy's
sampling), flow_from_directory exactly (class order, files, subsets, labels)."""
from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
torch = pytest.importorskip("torch")
tf_keras = pytest.importorskip("tf_keras")


def _translate(src: str) -> str:
    r = translate_source(textwrap.dedent(src).lstrip(), "augment.py")
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert not errors, [f.message for f in errors]
    assert "tensorflow" not in r.output and "keras" not in r.output.replace("keras.preprocessing", ""), r.output
    return r.output


def _both(src: str, **env):
    """Run src with tf_keras's ImageDataGenerator, and translated (written for tf.keras)."""
    src = textwrap.dedent(src)
    original = src.replace("from tensorflow.keras.preprocessing.image import", "from tf_keras.preprocessing.image import")
    ns_keras, ns_torch = dict(env), dict(env)
    exec(compile(original, "original.py", "exec"), ns_keras)
    exec(compile(_translate(src), "translated.py", "exec"), ns_torch)
    return ns_keras, ns_torch


def _same(got, want, atol=0.0):
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert isinstance(g, torch.Tensor) and tuple(g.shape) == w.shape and str(g.dtype)[6:] == w.dtype.name
        np.testing.assert_allclose(g.numpy().astype("float64"), w.astype("float64"), atol=atol, rtol=0)


FLOW = """
from tensorflow.keras.preprocessing.image import ImageDataGenerator

datagen = ImageDataGenerator(rescale=1.0 / 255, rotation_range=25, width_shift_range=0.15, height_shift_range=2,
                             shear_range=12, zoom_range=0.2, horizontal_flip=True, vertical_flip=True,
                             fill_mode=FILL, cval=0.5, validation_split=0.25)
batches = datagen.flow(x, y, batch_size=4, seed=7, subset="training")
first = [next(batches) for _ in range(4)]
epoch = [batches[i] for i in range(len(batches))]
"""


@pytest.mark.parametrize("fill", ["nearest", "reflect", "constant"])
def test_seeded_augmenting_flow_is_keras(fill):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (14, 9, 11, 3)).astype("uint8")
    y = np.arange(14) % 3
    ns_keras, ns_torch = _both(FLOW.replace("FILL", repr(fill)), x=x, y=y)
    assert len(ns_torch["batches"]) == len(ns_keras["batches"]) == 3  # 14 - int(14 * 0.25) = 11 samples
    for got, want in zip(ns_torch["first"] + ns_torch["epoch"], ns_keras["first"] + ns_keras["epoch"]):
        _same(got, want, atol=1e-4)
    moved = ns_keras["first"][0][0]
    assert not np.allclose(moved, x[3:][:4] / 255.0)  # the augmentation did move the images


@pytest.fixture()
def folder(tmp_path):
    """Three classes of PNG images of different sizes and modes, one in a nested folder, and a text file."""
    from PIL import Image
    rng = np.random.default_rng(4)
    for c, cls in enumerate(("zebra", "ant", "moth")):
        for i in range(4 + c):
            where = tmp_path / "images" / cls / ("deep" if i == 2 else "")
            where.mkdir(parents=True, exist_ok=True)
            size, mode = [(9, 7), (12, 12), (5, 8)][i % 3], ["RGB", "L", "RGBA", "P"][(i + c) % 4]
            shape = (size[1], size[0]) + ({"RGB": (3,), "RGBA": (4,)}.get(mode, ()))
            Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8)).convert(mode).save(where / f"{i}.png")
    (tmp_path / "images" / "ant" / "notes.txt").write_text("not an image")
    return str(tmp_path / "images")


DIRECTORY = """
from tensorflow.keras.preprocessing.image import ImageDataGenerator

gen = ImageDataGenerator(rescale=1.0 / 255, validation_split=0.34)
it = gen.flow_from_directory(folder, target_size=(6, 5), batch_size=3, ARGS)
batches = [it[i] for i in range(len(it))]
"""


@pytest.mark.parametrize("args", [
    'class_mode="categorical", shuffle=False',
    'class_mode="sparse", subset="validation", shuffle=False, color_mode="grayscale"',
    'class_mode="binary", classes=["moth", "ant"], subset="training", shuffle=False, interpolation="bilinear"',
    'class_mode="input", shuffle=True, seed=5, color_mode="rgba"',
    'class_mode=None, subset="training", shuffle=True, seed=2',
])
def test_flow_from_directory_is_keras(folder, args):
    ns_keras, ns_torch = _both(DIRECTORY.replace("ARGS", args), folder=folder)
    it, want = ns_torch["it"], ns_keras["it"]
    assert it.class_indices == want.class_indices and it.filenames == want.filenames
    assert it.classes.tolist() == want.classes.tolist() and it.samples == want.samples > 0
    assert len(ns_torch["batches"]) == len(ns_keras["batches"])
    for got, ref in zip(ns_torch["batches"], ns_keras["batches"]):
        _same(got, ref)


def test_class_order_and_validation_files_as_keras(folder):
    """Classes in sorted folder order; validation: the first fraction of each class's sorted files."""
    ns_keras, ns_torch = _both(DIRECTORY.replace("ARGS", 'class_mode="sparse", subset="validation"'), folder=folder)
    assert ns_torch["it"].class_indices == {"ant": 0, "moth": 1, "zebra": 2}
    # ant: 5 files (one under deep/, walked after the folder's own), moth 6, zebra 4: int(0.34 * n) of each
    assert ns_torch["it"].filenames == ["ant/0.png", "moth/0.png", "moth/1.png", "zebra/0.png"]
    labels = sorted(v for _, ys in ns_torch["batches"] for v in ys.tolist())  # shuffled: the same samples
    assert labels == [0.0, 1.0, 1.0, 2.0]
    assert ns_torch["it"].filenames == ns_keras["it"].filenames


def test_fit_takes_one_epoch_of_a_flow():
    src = """
    import numpy as np
    from tensorflow import keras
    from tensorflow.keras.preprocessing.image import ImageDataGenerator

    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(), keras.layers.Dense(3, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    datagen = ImageDataGenerator(rescale=1.0 / 255, rotation_range=10, zoom_range=0.1)
    history = model.fit(datagen.flow(x, y, batch_size=5), epochs=2, verbose=0)
    """
    x = np.random.default_rng(0).integers(0, 256, (12, 8, 8, 1)).astype("float32")
    y = np.arange(12) % 3
    ns = {"x": x, "y": y}
    exec(compile(_translate(src), "translated.py", "exec"), ns)
    losses = ns["history"]["loss"]  # the translated fit returns the history dict
    assert len(losses) == 2 and all(np.isfinite(losses))
    batches = list(ns["datagen"].flow(x, y, batch_size=5))
    assert [len(b[0]) for b in batches] == [5, 5, 2]  # iterating gives one epoch, as fit reads it


def test_what_is_not_translated_is_an_error():
    r = translate_source(textwrap.dedent("""
        from tensorflow.keras.preprocessing.image import ImageDataGenerator
        a = ImageDataGenerator(featurewise_center=True)
        b = ImageDataGenerator(fill_mode="wrap")
        c = ImageDataGenerator(brightness_range=[0.5, 1.5], rescale=1.0 / 255)
        d = ImageDataGenerator(channel_shift_range=20.0)
    """).lstrip(), "augment.py")
    lines = sorted(f.line for f in r.findings if f.severity is Severity.ERROR)
    assert lines == [2, 3, 4, 5], [(f.line, f.message) for f in r.findings]


def test_flow_from_dataframe_is_an_error_at_its_line():
    r = translate_source(textwrap.dedent("""
        from tensorflow.keras.preprocessing.image import ImageDataGenerator
        datagen = ImageDataGenerator(rescale=1.0 / 255)
        train = datagen.flow_from_dataframe(df, directory="images", x_col="file", y_col="label")
        valid = datagen.flow_from_directory("images")
    """).lstrip(), "augment.py")
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert [f.line for f in errors] == [3] and "flow_from_dataframe" in errors[0].message
    lines = r.output.splitlines()
    at = lines.index('train = datagen.flow_from_dataframe(df, directory="images", x_col="file", y_col="label")')
    assert lines[at - 1].startswith("# fwport: unsupported-construct: ImageDataGenerator.flow_from_dataframe")
