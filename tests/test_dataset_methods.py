"""tf2torch's silent gaps: a tf.data.Dataset method the DataPipeline helper lacks is an error finding (file, line)
instead of an AttributeError when the translation runs (passes/datasets.py), and a file that imports only a library
built on TensorFlow (tensorflow_datasets, tensorflow_addons, keras_cv, ...) is translated or reported like the
others instead of coming back unchanged (the direction's `mentions`)."""
from __future__ import annotations

import inspect
import os
import textwrap

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.packs.tf2torch.passes import datasets


def _errors(src: str, path: str = "pipe.py"):
    r = translate_source(textwrap.dedent(src).lstrip(), path)
    return r, [f for f in r.findings if f.severity is Severity.ERROR]


def test_dataset_method_list_is_tensorflows():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    tf = pytest.importorskip("tensorflow")
    d = tf.data.Dataset
    methods = {n for n in dir(d) if not n.startswith("_") and not isinstance(inspect.getattr_static(d, n), staticmethod)}
    assert methods == datasets.DATASET_METHODS


def test_missing_methods_on_datasets_are_errors_with_lines():
    src = """
    import tensorflow as tf

    ds = tf.data.Dataset.range(10)
    ds = ds.map(lambda x: x + 1)
    a = ds.scan(0, lambda s, x: (s + x, s))
    b = tf.data.Dataset.range(4).batch(2).unique()
    c = ds.group_by_window(lambda x: x % 2, lambda k, w: w.batch(2), window_size=2)
    """
    r, errors = _errors(src)
    found = {(f.line, f.message.split(":")[0]) for f in errors}
    assert found == {(5, ".scan"), (6, ".unique"), (7, ".group_by_window")}
    assert all(f.path == "pipe.py" and f.code == "no-rule" for f in errors)
    assert r.output.count("# fwport: no-rule: .") == 3


def test_same_names_on_other_objects_are_not_errors():
    src = """
    import tensorflow as tf

    class Scanner:
        def scan(self, x):
            return x

        def unique(self):
            return 1

    s = Scanner()
    y = s.scan(3) + s.unique()
    ds = tf.data.Dataset.range(3)
    ds = s.scan(ds)
    """
    r, errors = _errors(src)
    assert errors == [], [f.message for f in errors]


@pytest.mark.parametrize("src, line, api", [
    ("import tensorflow_datasets as tfds\n\nds = tfds.load('mnist', split='train')\n", 3, "tensorflow_datasets.load"),
    ("import numpy as np\nimport tensorflow_addons as tfa\n\nopt = tfa.optimizers.AdamW(1e-4, 1e-3)\n", 4,
     "tensorflow_addons.optimizers.AdamW"),
    ("from keras_cv import layers as cvl\n\naug = cvl.RandAugment(value_range=(0, 255))\n", 3,
     "keras_cv.layers.RandAugment"),
    ("import tensorflow_hub as hub\n\nm = hub.KerasLayer('https://tfhub.dev/x/1')\n", 3, "tensorflow_hub.KerasLayer"),
])
def test_files_importing_only_a_tensorflow_library_are_reported(src, line, api):
    r, errors = _errors(src)
    assert r.status.value != "unchanged"
    assert [(f.path, f.line) for f in errors] == [("pipe.py", line)], [f.message for f in errors]
    assert errors[0].api == api or api in errors[0].message


# --- flat_map, interleave, window: TensorFlow's pipeline and the translation's, element by element -----------
def _run(src: str) -> tuple[dict, dict]:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    pytest.importorskip("tensorflow")
    pytest.importorskip("torch")
    src = "import tensorflow as tf\n\n" + textwrap.dedent(src).lstrip()
    r, errors = _errors(src)
    assert not errors, [f.message for f in errors]
    assert "tensorflow" not in r.output and "class DataPipeline" in r.output
    ns_tf, ns_torch = {}, {}
    exec(compile(src, "original.py", "exec"), ns_tf)
    exec(compile(r.output, "translated.py", "exec"), ns_torch)
    return ns_tf, ns_torch


def _values(element):
    if isinstance(element, tuple):
        return tuple(_values(e) for e in element)
    return element.tolist() if hasattr(element, "tolist") else element


def _same(ns_tf, ns_torch, name="ds"):
    expected = [_values(e) for e in ns_tf[name].as_numpy_iterator()]
    got = [_values(e) for e in ns_torch[name]]
    assert got == expected and expected
    return got


def test_flat_map_as_tensorflow():
    ns_tf, ns_torch = _run("""
    ds = tf.data.Dataset.range(5).flat_map(lambda x: tf.data.Dataset.range(x).map(lambda y: y * 10 + x))
    pairs = tf.data.Dataset.from_tensor_slices(([1, 2, 3], [4, 5, 6])).flat_map(
        lambda a, b: tf.data.Dataset.from_tensors(a + b).repeat(tf.cast(a, tf.int64)))
    """)
    _same(ns_tf, ns_torch)
    _same(ns_tf, ns_torch, "pairs")


@pytest.mark.parametrize("args", ["cycle_length=2", "cycle_length=3, block_length=2", "cycle_length=4, block_length=3",
                                  "cycle_length=1, block_length=2", "cycle_length=2, block_length=4",
                                  "cycle_length=3, block_length=2, num_parallel_calls=2, deterministic=True",
                                  "cycle_length=3, num_parallel_calls=tf.data.AUTOTUNE", "block_length=2", ""])
def test_interleave_as_tensorflow(args):
    # datasets of different lengths (1..6, then a 0-length one): ones that end mid-block and mid-cycle
    ns_tf, ns_torch = _run(f"""
    ds = tf.data.Dataset.from_tensor_slices(tf.constant([3, 1, 6, 0, 2, 5, 4], tf.int64)).interleave(
        lambda x: tf.data.Dataset.range(x).map(lambda y: y + 100 * x), {args})
    """)
    _same(ns_tf, ns_torch)


@pytest.mark.parametrize("args", ["3", "3, shift=1", "3, shift=2", "3, shift=1, drop_remainder=True",
                                  "2, shift=3", "2, shift=5, stride=2", "3, shift=2, stride=2", "4, drop_remainder=True",
                                  "3, shift=2, stride=3, drop_remainder=True", "20", "20, drop_remainder=True"])
def test_window_batched_as_tensorflow(args):
    size = int(args.split(",")[0])
    ns_tf, ns_torch = _run(f"""
    ds = tf.data.Dataset.range(11).window({args}).flat_map(lambda w: w.batch({size}))
    n = int(tf.data.Dataset.range(11).window({args}).cardinality())
    """)
    if "20, drop" in args:  # no complete window: an empty pipeline in both
        assert list(ns_torch["ds"]) == [] and list(ns_tf["ds"]) == []
    else:
        _same(ns_tf, ns_torch)
    assert ns_torch["n"] == ns_tf["n"]


def test_window_of_tuples_zip_idiom_as_tensorflow():
    ns_tf, ns_torch = _run("""
    xs = tf.data.Dataset.from_tensor_slices((tf.reshape(tf.range(20.0), (10, 2)), tf.range(10)))
    ds = xs.window(4, shift=3, drop_remainder=True).flat_map(
        lambda x, y: tf.data.Dataset.zip((x.batch(4), y.batch(4))))
    """)
    _same(ns_tf, ns_torch)


def test_window_of_an_infinite_pipeline_is_lazy():
    ns_tf, ns_torch = _run("""
    ds = tf.data.Dataset.range(5).repeat().window(3, shift=2).flat_map(lambda w: w.batch(3)).take(6)
    """)
    _same(ns_tf, ns_torch)


def test_a_notebook_importing_only_tensorflow_datasets_is_reported():
    nbformat = pytest.importorskip("nbformat")
    from nbformat.v4 import new_code_cell, new_notebook

    from fwport.core.notebook import translate_notebook
    from fwport.core.runner import Settings

    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "k", "display_name": "k", "language": "python"}
    nb.cells = [new_code_cell("import tensorflow_datasets as tfds"), new_code_cell("x = 1\nds = tfds.load('mnist')")]
    r = translate_notebook(nbformat.writes(nb) + "\n", "nb.ipynb", Settings()).result
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert [(f.cell, f.line, f.api) for f in errors] == [(2, 2, "tensorflow_datasets.load")]
    assert "__fwport_anchor__" not in r.output and "# fwport: no-rule: tensorflow_datasets.load" in r.output


def test_reduce_and_get_single_element_as_tensorflow():
    ns_tf, ns_torch = _run("""
    import numpy as np

    ds = tf.data.Dataset.from_tensor_slices(([1, 2, 3], [4.0, 5.0, 6.5]))
    sums = ds.reduce((np.int32(0), 0.0), lambda s, e: (s[0] + e[0], s[1] + e[1]))
    count = tf.data.Dataset.range(5).reduce(0, lambda s, x: s + 1)
    total = tf.data.Dataset.range(5).reduce(np.int64(0), lambda s, x: s + x)
    one = tf.data.Dataset.range(7).skip(3).take(1).get_single_element()
    first = ds.take(1).get_single_element()
    """)
    for name in ("count", "total", "one"):
        assert ns_torch[name].tolist() == ns_tf[name].numpy().tolist()
        assert str(ns_torch[name].dtype).split(".")[-1] == ns_tf[name].dtype.name
    for name in ("sums", "first"):
        for g, e in zip(ns_torch[name], ns_tf[name], strict=True):
            assert g.tolist() == e.numpy().tolist() and str(g.dtype).split(".")[-1] == e.dtype.name
    for n in (0, 2):
        with pytest.raises(ValueError, match="exactly one"):
            ns_torch["DataPipeline"].range(n).get_single_element()
        with pytest.raises(ns_tf["tf"].errors.InvalidArgumentError):
            ns_tf["tf"].data.Dataset.range(n).get_single_element()
