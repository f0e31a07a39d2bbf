"""TFRecord files and tf.train.Example records without TensorFlow (fwport/packs/tf2torch/recordhelpers.py).

The translated writer's files are read by TensorFlow (and are the bytes TensorFlow writes), the translated
reader reads TensorFlow's files into the values TensorFlow parses, and what is not translated stays an
error finding."""
from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip("tensorflow")
torch = pytest.importorskip("torch")


def _translate(src: str) -> str:
    r = translate_source(textwrap.dedent(src).lstrip(), "records.py")
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert not errors, [f.message for f in errors]
    assert "tensorflow" not in r.output, r.output
    return r.output


def _run(src: str, **env) -> dict:
    """Run the original with TensorFlow, and the translation (without it), each with ``env`` as globals."""
    ns_tf, ns_torch = dict(env), dict(env)
    exec(compile(textwrap.dedent(src), "original.py", "exec"), ns_tf)
    exec(compile(_translate(src), "translated.py", "exec"), ns_torch)
    return ns_tf, ns_torch


WRITE = """
import numpy as np
import tensorflow as tf


def _bytes_feature(value):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def _float_feature(value):
    return tf.train.Feature(float_list=tf.train.FloatList(value=value))


def _int64_feature(value):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=value))


with tf.io.TFRecordWriter(path, options=options) as writer:
    for i in range(5):
        feature = {
            "image": _bytes_feature(("record %d " % i).encode() * (40 * i)),
            "bbox": _float_feature([0.1 * i, -2.5, 1e30, 3.0000001]),
            "ids": _int64_feature(np.array([i, -1, 2 ** 62, -(2 ** 63)], dtype=np.int64)),
            "label": _int64_feature([i]),
            "empty": _float_feature([]),
        }
        example = tf.train.Example(features=tf.train.Features(feature=feature))
        writer.write(example.SerializeToString())
"""


@pytest.mark.parametrize("options", [None, "GZIP", "ZLIB"])
def test_written_records_are_read_by_tensorflow(tmp_path, options):
    """The translation writes the same bytes as TensorFlow (uncompressed), and TensorFlow parses them."""
    _run(WRITE, path=str(tmp_path / "tf.tfrec"), options=options)
    _translated = _translate(WRITE)
    exec(compile(_translated, "translated.py", "exec"), {"path": str(tmp_path / "pt.tfrec"), "options": options})
    if options is None:
        assert (tmp_path / "pt.tfrec").read_bytes() == (tmp_path / "tf.tfrec").read_bytes()
    spec = {"image": tf.io.FixedLenFeature([], tf.string), "bbox": tf.io.FixedLenFeature([4], tf.float32),
            "ids": tf.io.FixedLenFeature([4], tf.int64), "label": tf.io.FixedLenFeature([], tf.int64),
            "empty": tf.io.VarLenFeature(tf.float32)}
    ours = tf.data.TFRecordDataset(str(tmp_path / "pt.tfrec"), compression_type=options or "")
    theirs = tf.data.TFRecordDataset(str(tmp_path / "tf.tfrec"), compression_type=options or "")
    n = 0
    for a, b in zip(ours, theirs, strict=True):
        pa, pb = tf.io.parse_single_example(a, spec), tf.io.parse_single_example(b, spec)
        for k in ("image", "bbox", "ids", "label"):
            np.testing.assert_array_equal(pa[k].numpy(), pb[k].numpy())
        assert pa["empty"].values.shape == (0,)
        n += 1
    assert n == 5


def test_masked_crc32c_is_tensorflows(tmp_path):
    """The record framing (length, masked CRC-32C of it, data, masked CRC-32C of it) is TensorFlow's."""
    path = str(tmp_path / "raw.tfrec")
    payloads = [b"", b"a", bytes(range(256)) * 3, b"123456789"]
    with tf.io.TFRecordWriter(path) as w:
        for p in payloads:
            w.write(p)
    ns = {"path": str(tmp_path / "ours.tfrec"), "payloads": payloads}
    exec(compile(_translate("""
        import tensorflow as tf
        with tf.io.TFRecordWriter(path) as w:
            for p in payloads:
                w.write(p)
        """), "translated.py", "exec"), ns)
    assert (tmp_path / "ours.tfrec").read_bytes() == (tmp_path / "raw.tfrec").read_bytes()
    # the CRC-32C check value of "123456789" is 0xE3069283; masked as TFRecord files store it
    crc = 0xE3069283
    assert ns["masked_crc32c"](b"123456789") == (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


READ = """
import tensorflow as tf

spec = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "bbox": tf.io.FixedLenFeature([2, 2], tf.float32),
    "label": tf.io.FixedLenFeature([], tf.int64),
    "weight": tf.io.FixedLenFeature([], tf.float32, default_value=0.5),
    "tags": tf.io.VarLenFeature(tf.int64),
}


def parse(record):
    example = tf.io.parse_single_example(record, spec)
    return example["bbox"], example["label"], example["weight"], tf.sparse.to_dense(example["tags"]), example["image"]


ds = tf.data.TFRecordDataset(files, num_parallel_reads=reads)
ds = ds.map(parse)
elements = list(ds)
batches = list(ds.map(lambda b, l, w, t, i: (b, l, w)).batch(2))
"""


def _tf_files(tmp_path):
    files = []
    for f in range(3):  # of 3, 4 and 5 records: interleaving replaces a file that ends
        path = str(tmp_path / f"part{f}.tfrec")
        with tf.io.TFRecordWriter(path) as w:
            for i in range(3 + f):
                feature = {
                    "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"img%d-%d" % (f, i)])),
                    "bbox": tf.train.Feature(float_list=tf.train.FloatList(value=[0.1 * i, 0.2, -3.0, f])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[10 * f + i - 2 ** 40])),
                    "tags": tf.train.Feature(int64_list=tf.train.Int64List(value=list(range(i)))),
                }
                if i % 2:
                    feature["weight"] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(i)]))
                w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
        files.append(path)
    return files


@pytest.mark.parametrize("reads", [None, 2, 3])
def test_tensorflow_records_are_read_as_tensorflow_parses_them(tmp_path, reads):
    files = _tf_files(tmp_path)
    ns_tf, ns_torch = _run(READ, files=files, reads=reads)
    assert len(ns_tf["elements"]) == len(ns_torch["elements"]) == 12
    for a, b in zip(ns_tf["elements"], ns_torch["elements"], strict=True):
        for x, y in zip(a[:4], b[:4], strict=True):
            assert y.dtype == {tf.int64: torch.int64, tf.float32: torch.float32}[x.dtype]
            np.testing.assert_array_equal(x.numpy(), y.numpy())
        assert a[4].numpy() == b[4]  # a string feature is Python bytes
    for a, b in zip(ns_tf["batches"], ns_torch["batches"], strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_reading_checks_what_tensorflow_checks(tmp_path):
    """A missing feature without a default, a wrong number of values, a wrong kind and a corrupted file
    raise in both."""
    files = _tf_files(tmp_path)
    src = """
        import tensorflow as tf
        unused = tf.io.FixedLenFeature([], tf.int64)
        def first(spec, files):
            return next(iter(tf.data.TFRecordDataset(files).map(lambda r: tf.io.parse_single_example(r, spec))))
        """
    ns_tf, ns_torch = _run(src)
    bad_specs = [{"missing": tf.io.FixedLenFeature([], tf.int64)},
                 {"bbox": tf.io.FixedLenFeature([3], tf.float32)},
                 {"label": tf.io.FixedLenFeature([], tf.float32)}]
    ours = [{"missing": ns_torch["FixedLenFeature"]([], torch.int64)},
            {"bbox": ns_torch["FixedLenFeature"]([3], torch.float32)},
            {"label": ns_torch["FixedLenFeature"]([], torch.float32)}]
    for spec_tf, spec_torch in zip(bad_specs, ours, strict=True):
        with pytest.raises(tf.errors.InvalidArgumentError):
            ns_tf["first"](spec_tf, files)
        with pytest.raises(ValueError):
            ns_torch["first"](spec_torch, files)
    data = bytearray(open(files[0], "rb").read())
    data[20] ^= 1
    corrupted = str(tmp_path / "bad.tfrec")
    open(corrupted, "wb").write(bytes(data))
    good = {"label": tf.io.FixedLenFeature([], tf.int64)}
    with pytest.raises(tf.errors.DataLossError):
        ns_tf["first"](good, [corrupted])
    with pytest.raises(ValueError, match="corrupted"):
        ns_torch["first"]({"label": ns_torch["FixedLenFeature"]([], torch.int64)}, [corrupted])


def test_example_reads_back_its_fields():
    """Example.FromString (ParseFromString) reads what TensorFlow serializes, field by field."""
    ex = tf.train.Example(features=tf.train.Features(feature={
        "a": tf.train.Feature(int64_list=tf.train.Int64List(value=[1, -7])),
        "b": tf.train.Feature(float_list=tf.train.FloatList(value=[0.3])),
        "c": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"x", b""]))}))
    ns = {}
    exec(compile(_translate("import tensorflow as tf\nexample = tf.train.Example()\n"), "t.py", "exec"), ns)
    ours = ns["Example"].FromString(ex.SerializeToString())
    feature = ours.features.feature
    assert feature["a"].int64_list.value == [1, -7]
    assert feature["b"].float_list.value == [np.float32(0.3)]
    assert feature["c"].bytes_list.value == [b"x", b""]
    assert {k: f.WhichOneof("kind") for k, f in feature.items()} == {
        "a": "int64_list", "b": "float_list", "c": "bytes_list"}
    assert ours.SerializeToString() == ex.SerializeToString()


def test_what_is_not_translated_stays_an_error():
    src = textwrap.dedent("""
        import tensorflow as tf
        spec = {"x": tf.io.FixedLenSequenceFeature([], tf.int64, allow_missing=True)}
        writer = tf.io.TFRecordWriter(path, options=tf.io.TFRecordOptions(compression_type="GZIP"))
        """).lstrip()
    r = translate_source(src, "records.py")
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert {f.line for f in errors} == {2, 3}, [f.message for f in errors]
    assert any("VarLenFeature" in f.message for f in errors)
    assert r.output.count("# fwport:") >= 2


BATCH = """
import tensorflow as tf

spec = {"bbox": tf.io.FixedLenFeature([2, 2], tf.float32), "label": tf.io.FixedLenFeature([], tf.int64),
        "image": tf.io.FixedLenFeature([], tf.string), "tags": tf.io.VarLenFeature(tf.int64)}


def parse(records):
    example = tf.io.parse_example(records, spec)
    return example["bbox"], example["label"], tf.sparse.to_dense(example["tags"]), example["image"]


batches = list(tf.data.TFRecordDataset(files).batch(3).map(parse))
"""


def test_parse_example_parses_batches_as_tensorflow(tmp_path):
    files = _tf_files(tmp_path)
    ns_tf, ns_torch = _run(BATCH, files=files)
    assert len(ns_tf["batches"]) == len(ns_torch["batches"]) == 4
    for a, b in zip(ns_tf["batches"], ns_torch["batches"], strict=True):
        for x, y in zip(a[:3], b[:3], strict=True):
            assert y.dtype == {tf.int64: torch.int64, tf.float32: torch.float32}[x.dtype]
            np.testing.assert_array_equal(x.numpy(), y.numpy())
        assert list(a[3].numpy()) == b[3]


@pytest.mark.parametrize("value", ["é-ok", b"\xc3\xa9", bytearray(b"ab"), 3, None])
@pytest.mark.parametrize("fn", ["as_bytes", "as_text", "as_str"])
def test_compat_as_bytes_and_as_text_are_tensorflows(fn, value):
    ns = {}
    exec(compile(_translate(f"import tensorflow as tf\nf = tf.compat.{fn}\nr = tf.compat.{fn}(b'x')\n"), "t.py", "exec"),
         ns)
    ours = ns["as_bytes" if fn == "as_bytes" else "as_text"]
    try:
        expected = getattr(tf.compat, fn)(value)
    except Exception as e:  # noqa: BLE001 - the same kind of error in both
        with pytest.raises(type(e)):
            ours(value)
        return
    got = ours(value)
    assert got == expected and type(got) is type(expected)
    if isinstance(value, str) and fn == "as_bytes":
        assert ours(value, "latin-1") == tf.compat.as_bytes(value, "latin-1")
