"""tf.data.experimental.make_csv_dataset → the make_csv_dataset helper (fwport/packs/tf2torch/recordhelpers.py).

The same CSV files go through TensorFlow and through the translation (run without TensorFlow); the batches are
compared exactly: the same column names, dtypes and values (strings: TensorFlow's bytes decoded), in the same
order when shuffle=False and as multisets of records when shuffled."""
from __future__ import annotations

import collections
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
    r = translate_source(textwrap.dedent(src).lstrip(), "csv_data.py")
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert not errors, [f.message for f in errors]
    assert "tensorflow" not in r.output, r.output
    return r.output


def _column(value):
    """A batch's column as (dtype name, list of Python values), from TensorFlow or from the translation."""
    if isinstance(value, list):
        return "string", list(value)
    if isinstance(value, torch.Tensor):
        return str(value.dtype)[6:], value.tolist()
    array = value.numpy()
    if array.dtype == object:
        return "string", [v.decode() for v in array]
    return array.dtype.name, array.tolist()


def _batches(dataset, limit=50):
    out = []
    for i, element in enumerate(dataset):
        if i == limit:
            break
        features, label = element if isinstance(element, tuple) else (element, None)
        assert isinstance(features, collections.OrderedDict)
        out.append(({k: _column(v) for k, v in features.items()}, None if label is None else _column(label)))
    return out


def _both(call: str, **env):
    """Run ``ds = <call>`` with TensorFlow and translated; the batches of each."""
    src = f"import tensorflow as tf\n\nds = {call}\n"
    ns_tf, ns_torch = dict(env), dict(env)
    exec(compile(src, "original.py", "exec"), ns_tf)
    exec(compile(_translate(src), "translated.py", "exec"), ns_torch)
    return _batches(ns_tf["ds"]), _batches(ns_torch["ds"])


def _records(batches):
    """The records of the batches, as a multiset (for shuffled datasets)."""
    out = collections.Counter()
    for features, label in batches:
        names = sorted(features)
        n = len(features[names[0]][1]) if names else len(label[1])
        for i in range(n):
            out[tuple((k, features[k][0], features[k][1][i]) for k in names)
                + (() if label is None else (label[0], label[1][i]))] += 1
    return out


MIXED = 'i,big,f,s,lab,e\n1,3000000000,1.5,hello,0,\n2,4,2,"a,b",1,\n-3,5,1e3,"x""y",0,\n,6,,?,1,\n+7,8,1e39,"p\nq",1,\n'


@pytest.fixture
def csvs(tmp_path):
    (tmp_path / "a.csv").write_text(MIXED)
    (tmp_path / "b.csv").write_bytes(b"i,big,f,s,lab,e\r\n07,9,9.5,z,1,\r\n 8 ,10,0x1p3,  w ,0,x\r\n")
    (tmp_path / "c.csv").write_text("1|2.5|u\n3|?|v\nx|4|\n5|6|w\n")
    (tmp_path / "d.csv").write_text("a|b|c\n1|2.5|u\n3||v\n7|8|9\n\n5|6|w|1\n9|1e3|t\n")
    return tmp_path


@pytest.mark.parametrize("kwargs", [
    'label_name="lab"',
    'na_value="?"',
    'label_name="f", select_columns=["s", "i", "f"]',
    'select_columns=[3, 0], column_defaults=[-1, "Q"]',
    'column_defaults=[0, tf.int64, -1.5, "NA", 0, "e"]',
    'column_defaults=[[0], [2 ** 40], [0.0], ["NA"], [0], [""]], label_name="lab"',
    'num_rows_for_inference=2',
])
def test_inference_defaults_and_columns_as_tensorflow(csvs, kwargs):
    theirs, ours = _both(f"tf.data.experimental.make_csv_dataset(path, batch_size=2, num_epochs=1, shuffle=False, "
                         f"{kwargs})", path=str(csvs / "*.csv").replace("*", "[ab]"))
    assert theirs and ours == theirs


def test_header_false_delim_na_value_as_keras_io(csvs):
    # keras-io's structured-data examples: names given, no header, "|" separated, "?" missing
    theirs, ours = _both('tf.data.experimental.make_csv_dataset(path, batch_size=3, column_names=["x", "y", "z"], '
                         'column_defaults=[["NA"], [0.0], ["NA"]], label_name="y", num_epochs=1, header=False, '
                         'field_delim="|", na_value="?", shuffle=False)', path=str(csvs / "c.csv"))
    assert len(theirs) == 2 and ours == theirs


def test_ignore_errors_skips_bad_records(csvs):
    call = ('tf.data.experimental.make_csv_dataset(path, batch_size=2, column_defaults=[0, 0.0, "-"], num_epochs=1, '
            'field_delim="|", shuffle=False, ignore_errors=True)')
    theirs, ours = _both(call, path=str(csvs / "d.csv"))
    assert [b[0]["a"][1] for b in theirs] == [[1, 3], [7, 9]] and ours == theirs


@pytest.mark.parametrize("defaults", ['[0, 0.0, "-"]', '[0, 0.0, tf.int32]'])
def test_bad_records_raise(csvs, defaults):
    call = (f'tf.data.experimental.make_csv_dataset(path, batch_size=2, column_defaults={defaults}, num_epochs=1, '
            'field_delim="|", shuffle=False)')
    src = f"import tensorflow as tf\n\nds = {call}\n"
    ns_tf, ns_torch = {"path": str(csvs / "d.csv")}, {"path": str(csvs / "d.csv")}
    exec(compile(src, "original.py", "exec"), ns_tf)
    with pytest.raises(tf.errors.InvalidArgumentError):
        list(ns_tf["ds"])
    exec(compile(_translate(src), "translated.py", "exec"), ns_torch)
    with pytest.raises(ValueError):
        list(ns_torch["ds"])


def test_shuffled_epochs_hold_the_same_records(csvs):
    call = ('tf.data.experimental.make_csv_dataset(path, batch_size=3, label_name="lab", num_epochs=3, '
            'shuffle_buffer_size=4, shuffle_seed=1)')
    theirs, ours = _both(call, path=str(csvs / "*.csv").replace("*", "[ab]"))
    assert sum(_records(theirs).values()) == 21 and _records(ours) == _records(theirs)
    assert [len(b[1][1]) for b in ours] == [3] * 7


def test_default_repeats_forever_with_full_batches(csvs):
    theirs, ours = _both('tf.data.experimental.make_csv_dataset(path, batch_size=4, shuffle=False)',
                         path=str(csvs / "a.csv"))
    assert len(theirs) == len(ours) == 50  # (stopped at 50: both endless)
    assert ours == theirs and {len(b[0]["i"][1]) for b in ours} == {4}


@pytest.mark.parametrize("reads", [2, 3])
def test_interleaved_files_of_uneven_length_as_tensorflow(tmp_path, reads):
    """num_parallel_reads: a file that ends gives its turn, and its place from its next turn, to the next file
    (the scheduler interleave_files that the TFRecord and text-line readers share; an empty file takes a turn)."""
    for name, n in [("a", 1), ("b", 3), ("c", 3), ("d", 2), ("e", 0), ("f", 2)]:
        (tmp_path / f"{name}.csv").write_text("x\n" + "".join(f"{ord(name) * 10 + i}\n" for i in range(n)))
    files = [str(tmp_path / f"{name}.csv") for name in "abcdef"]
    theirs, ours = _both("tf.data.experimental.make_csv_dataset(files, batch_size=1, num_epochs=1, shuffle=False, "
                         "num_parallel_reads=reads)", files=files, reads=reads)
    assert ours == theirs
    order = [features["x"][1][0] for features, _ in theirs]
    assert order[:4] == ([970, 980, 981, 990] if reads == 2 else [970, 980, 990, 981]) and len(order) == 11
