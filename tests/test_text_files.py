"""tf.data's file readers over text and file names without TensorFlow (recordhelpers.py): TextLineDataset →
text_line_dataset and Dataset.list_files → list_files; and tf.data's leftovers (the Dataset type, Options /
with_options, padded_batch). Small files are written, the TensorFlow pipeline and its
translation both run, and their elements are compared exactly (in order where the order is deterministic, as
multisets where TensorFlow shuffles)."""
from __future__ import annotations

import gzip
import os
import textwrap
import zlib
from collections import Counter

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip("tensorflow")
torch = pytest.importorskip("torch")


def _translate(src: str) -> str:
    r = translate_source(textwrap.dedent(src).lstrip(), "readers.py")
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert not errors, [f.message for f in errors]
    assert "tensorflow" not in r.output, r.output
    return r.output


def _run(src: str, **env) -> tuple[dict, dict]:
    """Run the original with TensorFlow, and the translation (without it), each with ``env`` as globals."""
    ns_tf, ns_torch = dict(env), dict(env)
    exec(compile(textwrap.dedent(src), "original.py", "exec"), ns_tf)
    exec(compile(_translate(src), "translated.py", "exec"), ns_torch)
    return ns_tf, ns_torch


def _tf_strings(ds) -> list[str]:
    return [b.decode("utf-8") for b in ds.as_numpy_iterator()]


TEXTS = {  # every way a line can end, as TensorFlow's reader sees it
    "unix.txt": b"one\ntwo\n\nthree\n",
    "windows.txt": b"w1\r\nw2\r\n\r\nw3",
    "stray_cr.txt": b"a\rb\nc\r\r\n\r",
    "no_final_newline.txt": b"last line",
    "only_newline.txt": b"\n",
    "empty.txt": b"",
    "utf8.txt": "héllo\nwörld ✓\n".encode(),
}


@pytest.fixture()
def texts(tmp_path):
    for name, data in TEXTS.items():
        (tmp_path / name).write_bytes(data)
    return tmp_path


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_text_line_dataset_splits_lines_as_tensorflow(texts, name):
    src = """
    import tensorflow as tf

    ds = tf.data.TextLineDataset(path)
    """
    ns_tf, ns_torch = _run(src, path=str(texts / name))
    expected = _tf_strings(ns_tf["ds"])
    assert list(ns_torch["ds"]) == expected
    assert list(ns_torch["ds"]) == expected  # read again, each pass


def test_text_line_dataset_files_skip_map_batch(texts):
    """Several files in order, skip(1) of a header, a map on the str lines, batches of str lists."""
    src = """
    import tensorflow as tf

    ds = tf.data.TextLineDataset(files, buffer_size=1024).skip(1).batch(3)
    """
    files = [str(texts / n) for n in ("unix.txt", "windows.txt", "utf8.txt")]
    ns_tf, ns_torch = _run(src, files=files)
    expected = [[b.decode() for b in batch] for batch in ns_tf["ds"].as_numpy_iterator()]
    assert [list(batch) for batch in ns_torch["ds"]] == expected
    assert len(expected) == 3 and expected[0] == ["two", "", "three"]


@pytest.mark.parametrize("reads", [2, 3])
def test_text_line_dataset_interleaves_files(texts, reads):
    src = """
    import tensorflow as tf

    ds = tf.data.TextLineDataset(files, num_parallel_reads=reads)
    """
    files = [str(texts / n) for n in ("unix.txt", "windows.txt", "stray_cr.txt", "utf8.txt")]
    ns_tf, ns_torch = _run(src, files=files, reads=reads)
    expected = _tf_strings(ns_tf["ds"])
    assert list(ns_torch["ds"]) == expected
    assert expected[:2] == ["one", "w1"]


@pytest.mark.parametrize("reads", [2, 3])
def test_text_line_dataset_interleaves_files_of_uneven_length(tmp_path, reads):
    """A file that ends gives its turn, and its place from its next turn, to the next file; an empty one too."""
    files = []
    for name, n in [("a", 1), ("b", 3), ("c", 3), ("d", 2), ("e", 0), ("f", 2)]:
        (tmp_path / name).write_text("".join(f"{name}{i}\n" for i in range(n)))
        files.append(str(tmp_path / name))
    src = """
    import tensorflow as tf

    ds = tf.data.TextLineDataset(files, num_parallel_reads=reads)
    """
    ns_tf, ns_torch = _run(src, files=files, reads=reads)
    expected = _tf_strings(ns_tf["ds"])
    assert list(ns_torch["ds"]) == expected and len(expected) == 11
    assert expected[:4] == (["a0", "b0", "b1", "c0"] if reads == 2 else ["a0", "b0", "c0", "b1"])


@pytest.mark.parametrize("compression", ["GZIP", "ZLIB"])
def test_text_line_dataset_reads_compressed_files(tmp_path, compression):
    data = b"z1\r\nz2\n\nz3"
    path = tmp_path / "lines.z"
    path.write_bytes(gzip.compress(data) if compression == "GZIP" else zlib.compress(data))
    src = """
    import tensorflow as tf

    ds = tf.data.TextLineDataset(path, compression_type=compression)
    """
    ns_tf, ns_torch = _run(src, path=str(path), compression=compression)
    expected = _tf_strings(ns_tf["ds"])
    assert list(ns_torch["ds"]) == expected == ["z1", "z2", "", "z3"]


@pytest.fixture()
def tree(tmp_path):
    (tmp_path / "sub").mkdir()
    for name in ("b.jpg", "a.jpg", ".hidden.jpg", "10.jpg", "2.jpg", "c.png", "sub/d.jpg"):
        (tmp_path / name).write_bytes(name.encode())
    return tmp_path


@pytest.mark.parametrize("patterns", [["*.jpg"], ["*.png", "*.jpg"], ["a.jpg", "*.jpg"], ["*/*.jpg"], ["[ab].jpg"],
                                      ["?.jpg"]])
def test_list_files_unshuffled_order_as_tensorflow(tree, patterns):
    src = """
    import tensorflow as tf

    ds = tf.data.Dataset.list_files(pattern, shuffle=False)
    """
    pattern = [str(tree / p) for p in patterns]
    pattern = pattern[0] if len(pattern) == 1 else pattern
    ns_tf, ns_torch = _run(src, pattern=pattern)
    expected = _tf_strings(ns_tf["ds"])
    assert expected
    assert list(ns_torch["ds"]) == expected


def test_list_files_shuffles_by_default(tree):
    """shuffle=None is True: the same paths as TensorFlow's, as a multiset, in a new order each pass."""
    src = """
    import tensorflow as tf

    ds = tf.data.Dataset.list_files(pattern)
    seeded = tf.data.Dataset.list_files(pattern, seed=7)
    """
    ns_tf, ns_torch = _run(src, pattern=str(tree / "*"))
    expected = Counter(_tf_strings(ns_tf["ds"]))
    assert len(expected) == 7  # the dot file and the folder match "*" too
    passes = [list(ns_torch["ds"]) for _ in range(12)]
    assert all(Counter(p) == expected for p in passes)
    assert len({tuple(p) for p in passes}) > 1
    assert sorted(passes[0]) != passes[0] or sorted(passes[1]) != passes[1]
    assert Counter(ns_torch["seeded"]) == Counter(_tf_strings(ns_tf["seeded"])) == expected


def test_list_files_without_a_match_raises(tree):
    with pytest.raises(tf.errors.InvalidArgumentError, match="No files matched"):
        tf.data.Dataset.list_files(str(tree / "*.gif"))
    out = _translate("""
    import tensorflow as tf

    ds = tf.data.Dataset.list_files(pattern)
    """)
    with pytest.raises(ValueError, match="No files matched"):
        exec(compile(out, "translated.py", "exec"), {"pattern": str(tree / "*.gif")})


def test_list_files_feed_text_line_dataset(texts):
    """The usual chain: the listed paths (str) opened by the line reader, unshuffled so the order is TensorFlow's."""
    src = """
    import tensorflow as tf

    ds = tf.data.TextLineDataset(tf.data.Dataset.list_files(pattern, shuffle=False))
    """
    ns_tf, ns_torch = _run(src, pattern=str(texts / "*.txt"))
    assert list(ns_torch["ds"]) == _tf_strings(ns_tf["ds"])


def test_dataset_type_in_annotations_and_isinstance():
    """tf.data.Dataset read as a type → torch.utils.data.IterableDataset, of which every DataPipeline is one."""
    src = """
    import tensorflow as tf


    def prepare(ds: tf.data.Dataset) -> tf.data.Dataset:
        return ds.batch(2)


    ds = prepare(tf.data.Dataset.range(5))
    ok = isinstance(ds, tf.data.Dataset) and not isinstance([1], tf.data.Dataset)
    """
    ns_tf, ns_torch = _run(src)
    assert ns_tf["ok"] is True and ns_torch["ok"] is True
    assert [b.tolist() for b in ns_torch["ds"]] == [b.tolist() for b in ns_tf["ds"].as_numpy_iterator()]


def test_dataset_static_method_without_rule_stays_an_error():
    """The type's rule does not make tf.data.Dataset.<anything> an attribute of IterableDataset."""
    r = translate_source("import tensorflow as tf\n\nds = tf.data.Dataset.sample_from_datasets([a, b])\n", "x.py")
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert [(f.code, f.line) for f in errors] == [("no-rule", 3)], [f.message for f in errors]
    assert "IterableDataset" not in r.output


def test_dataset_options_keep_tensorflow_names_and_with_options_keeps_elements():
    src = """
    import tensorflow as tf

    options = tf.data.Options()
    options.experimental_deterministic = False
    options.deterministic = False
    options.threading.private_threadpool_size = 8
    options.experimental_threading.max_intra_op_parallelism = 1
    options.experimental_optimization.map_parallelization = True
    options.experimental_slack = True
    ds = tf.data.Dataset.range(10).map(lambda x: x * 2).with_options(options).batch(4)
    """
    ns_tf, ns_torch = _run(src)
    assert [b.tolist() for b in ns_torch["ds"]] == [b.tolist() for b in ns_tf["ds"].as_numpy_iterator()]

    def names(obj):
        return {n for n in dir(obj) if not n.startswith("_") and not callable(getattr(obj, n))}

    tf_options, options = ns_tf["options"], ns_torch["options"]
    assert names(options) == names(tf_options) - {"merge"}
    for group in type(options)._GROUPS:
        assert names(getattr(options, group)) == names(getattr(tf_options, group)), group
    assert options.threading.private_threadpool_size == 8 and options.experimental_deterministic is False
    for obj in (tf.data.Options(), ns_torch["DatasetOptions"]()):  # a name TensorFlow does not have raises on both
        with pytest.raises(AttributeError, match="Cannot set the property"):
            obj.shuffle_seed = 1
        with pytest.raises(AttributeError, match="Cannot set the property"):
            obj.threading.thread_count = 1


PADDED = """
import numpy as np
import tensorflow as tf


def gen():
    for n in [1, 3, 2, 0, 4]:
        yield np.arange(n, dtype=np.int64), np.ones((n, 2), np.float32) * n, np.int32(n)


ds = tf.data.Dataset.from_generator(gen, output_types=(tf.int64, tf.float32, tf.int32),
                                    output_shapes=([None], [None, 2], []))
"""


@pytest.mark.parametrize("call", [
    "ds.padded_batch(2)",
    "ds.padded_batch(2, drop_remainder=True)",
    "ds.padded_batch(3, padded_shapes=([5], [None, 3], []), padding_values=(np.int64(-1), 0.5, np.int32(0)))",
    "ds.padded_batch(2, padded_shapes=([-1], [-1, -1], []))",
    "ds.map(lambda a, b, c: a).padded_batch(2, padding_values=np.int64(7))",
])
def test_padded_batch_pads_as_tensorflow(call):
    src = PADDED + f"out = {call}\n"
    ns_tf, ns_torch = _run(src)
    expected = [tuple(np.asarray(x) for x in (b if isinstance(b, tuple) else (b,))) for b in ns_tf["out"]]
    got = [b if isinstance(b, tuple) else (b,) for b in ns_torch["out"]]
    assert len(got) == len(expected) and expected
    for g, e in zip(got, expected):
        for gx, ex in zip(g, e, strict=True):
            assert str(gx.dtype).split(".")[-1] == str(ex.dtype)
            assert gx.tolist() == ex.tolist()


def test_padded_batch_smaller_padded_shape_raises():
    src = PADDED + "out = ds.padded_batch(2, padded_shapes=([2], [None, 2], []))\n"
    ns_tf, ns_torch = _run(src)
    with pytest.raises(tf.errors.DataLossError):
        list(ns_tf["out"])
    with pytest.raises(ValueError, match="larger than the padded shape"):
        list(ns_torch["out"])


@pytest.mark.parametrize("num_shards, index", [(3, 0), (3, 2), (4, 1), (1, 0), (12, 11)])
def test_shard_and_apply_as_tensorflow(num_shards, index):
    src = f"""
    import tensorflow as tf


    def twice(ds):
        return ds.map(lambda x: x * 2)


    ds = tf.data.Dataset.range(10).shard({num_shards}, {index}).apply(twice)
    n = len(ds)
    """
    ns_tf, ns_torch = _run(src)
    assert [int(x) for x in ns_torch["ds"]] == [int(x) for x in ns_tf["ds"].as_numpy_iterator()]
    assert ns_torch["n"] == ns_tf["n"]
