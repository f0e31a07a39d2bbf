"""tf.strings.reduce_join → the reduce_join helper (texthelpers.py) and its eager chain (strings.py).

The same strings go through TensorFlow and through the translation (run without TensorFlow) and the results are
compared exactly: TensorFlow's bytes decoded as UTF-8 against the translation's Python str."""
from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip("tensorflow")


def _translate(src: str):
    r = translate_source(textwrap.dedent(src).lstrip(), "strings.py")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], [f.message for f in r.findings]
    assert "tensorflow" not in r.output, r.output
    return r


def _run(src: str, **env):
    """Run ``src`` with TensorFlow and translated; the two namespaces and the translation's findings."""
    ns_tf, ns_torch = dict(env), dict(env)
    exec(compile(textwrap.dedent(src), "original.py", "exec"), ns_tf)
    r = _translate(src)
    exec(compile(r.output, "translated.py", "exec"), ns_torch)
    return ns_tf, ns_torch, r


def _text(value):
    value = value.numpy() if hasattr(value, "numpy") else value
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.ndarray):
        return [_text(v) for v in value.tolist()] if value.dtype == object or value.ndim else _text(value.item())
    if isinstance(value, list):
        return [_text(v) for v in value]
    return value


STRINGS = [[["a", "b"], ["c", "d"]], [["é", "f"], ["", "h h"]]]


@pytest.mark.parametrize("kwargs", ["", "axis=0", "axis=-1", "axis=[0, 2]", "axis=[2, 0]", "axis=(1,)",
                                    'axis=1, keepdims=True, separator="-"', "keepdims=True", "axis=[]",
                                    'separator=", "'])
def test_reduce_join_as_tensorflow(kwargs):
    ns_tf, ns_torch, r = _run(f"import tensorflow as tf\n\nout = tf.strings.reduce_join(x, {kwargs})\n", x=STRINGS)
    theirs, ours = ns_tf["out"], ns_torch["out"]
    assert _text(ours) == _text(theirs)
    assert np.shape(ours) == tuple(theirs.shape)
    assert [f.code for f in r.findings if f.severity is Severity.WARNING] == ["approximate"]


def test_decoded_chain_is_the_str_itself():
    # keras-io's OCR examples: the inverted StringLookup's characters joined and decoded
    src = """
    import numpy as np
    import tensorflow as tf
    from tensorflow import keras

    num_to_char = keras.layers.StringLookup(vocabulary=list("abcdé"), mask_token=None, invert=True)
    texts = []
    for row in np.array([[1, 2, 5, 0], [3, 3, 4, 9]]):
        texts.append(tf.strings.reduce_join(num_to_char(row)).numpy().decode("utf-8"))
    whole = tf.strings.reduce_join([b"x", "y"], separator="+").numpy().decode()
    """
    ns_tf, ns_torch, r = _run(src)
    assert ns_tf["texts"] == ["abé[UNK]", "ccd[UNK]"] and ns_torch["texts"] == ns_tf["texts"]
    assert ns_torch["whole"] == ns_tf["whole"] == "x+y"
    assert "texts.append(reduce_join(num_to_char(row)))" in r.output and not [f for f in r.findings if f.severity is Severity.WARNING]


def test_other_decodings_keep_the_warning():
    r = _translate("import tensorflow as tf\n\ns = tf.strings.reduce_join(x).numpy().decode('latin-1')\n")
    assert [f.code for f in r.findings if f.severity is Severity.WARNING] == ["approximate"]


@pytest.mark.parametrize("value,kwargs", [
    ("héllo wörld", ""), ("", ""), (b"a\xffb\xe2\x82", ""), (b"a\xffb\xe2\x82", ', errors="ignore"'),
    (b"a\xffb\xe2\x82", ", replacement_char=63"), (["ab", "ç", ""], ""),
    ("h\u00e9\u0301", ""),  # a combining accent is a code point of its own
])
def test_unicode_split_as_tensorflow(value, kwargs):
    ns_tf, ns_torch, _ = _run(f'import tensorflow as tf\n\nout = tf.strings.unicode_split(x, "UTF-8"{kwargs})\n',
                              x=value)
    theirs = ns_tf["out"]
    theirs = theirs.to_list() if hasattr(theirs, "to_list") else theirs.numpy().tolist()
    assert ns_torch["out"] == _text(theirs)


def test_unicode_split_feeds_string_lookup():
    # keras-io's OCR examples: a label's characters → ids, then back with reduce_join
    src = """
    import tensorflow as tf
    from tensorflow import keras

    char_to_num = keras.layers.StringLookup(vocabulary=list("abcé"), mask_token=None)
    num_to_char = keras.layers.StringLookup(vocabulary=char_to_num.get_vocabulary(), mask_token=None, invert=True)
    ids = char_to_num(tf.strings.unicode_split("cabé", input_encoding="UTF-8"))
    back = tf.strings.reduce_join(num_to_char(ids)).numpy().decode("utf-8")
    """
    ns_tf, ns_torch, _ = _run(src)
    assert ns_torch["ids"].tolist() == ns_tf["ids"].numpy().tolist() == [3, 1, 2, 4]
    assert ns_torch["back"] == ns_tf["back"] == "cabé"


@pytest.mark.parametrize("args", ['x, "/"', "x", 'x, ",", 2', "x, None, 0", "x, None, 1", "x, None, 2", 'x, ""',
                                  'x, sep="ab"', 'x, "/", 0'])
@pytest.mark.parametrize("value", ["a/b//c/", "  a b\t c\n ", "a\u00a0b c\u2003d\x1ce", "a,b,c,d", "a  b  c  ", "",
                                   "   ", "a ", "a b", "xabyabab", b"p q/r"])
def test_strings_split_as_tensorflow(args, value):
    ns_tf, ns_torch, _ = _run(f"import tensorflow as tf\n\nout = tf.strings.split({args})\n", x=value)
    assert ns_torch["out"] == _text(ns_tf["out"].numpy().tolist())


def test_strings_split_rows():
    ns_tf, ns_torch, _ = _run('import tensorflow as tf\n\nout = tf.strings.split(x, ",")\n', x=["1,2", "", "3"])
    assert ns_torch["out"] == _text(ns_tf["out"].to_list()) == [["1", "2"], [""], ["3"]]


@pytest.mark.parametrize("dtype", ["tf.float32", "tf.float64", "tf.int32", "tf.int64"])
@pytest.mark.parametrize("value", [" 1.5", "1.5 ", " 7 ", "0x10", "1_0", "+3", "-0", "1e3", "3.0", "inf", "-Infinity",
                                   "nan", "", "1e39", "2147483648", "-9223372036854775809", "0x1p3", "1.", ".5",
                                   "\uff11", b"42", "1\u00a0"])
def test_to_number_as_tensorflow(dtype, value):
    src = f"import tensorflow as tf\n\nout = tf.strings.to_number(x, out_type={dtype})\n"
    try:
        ns_tf, ns_torch, _ = _run(src, x=value)
    except (tf.errors.InvalidArgumentError, ValueError) as error:  # TensorFlow refuses it: so must the translation
        assert isinstance(error, tf.errors.InvalidArgumentError), error
        ns = {"x": value}
        with pytest.raises(ValueError):
            exec(compile(_translate(src).output, "translated.py", "exec"), ns)
        return
    theirs, ours = ns_tf["out"].numpy(), ns_torch["out"]
    assert str(ours.dtype)[6:] == theirs.dtype.name
    np.testing.assert_array_equal(ours.numpy(), theirs)


def test_to_number_lists():
    ns_tf, ns_torch, _ = _run("import tensorflow as tf\n\nout = tf.strings.to_number(x)\n", x=[["1", "2.5"], ["-3", "4e1"]])
    np.testing.assert_array_equal(ns_torch["out"].numpy(), ns_tf["out"].numpy())
    assert ns_torch["out"].dtype.is_floating_point and ns_torch["out"].shape == (2, 2)


@pytest.mark.parametrize("unit", ["BYTE", "UTF8_CHAR"])
@pytest.mark.parametrize("value", ["héllo", "", b"a\xffb\xe2\x82", [["a", "bé"], ["", "x\u2003"]], ["日本語", b"\x80\x80"]])
def test_strings_length_as_tensorflow(unit, value):
    ns_tf, ns_torch, _ = _run(f'import tensorflow as tf\n\nout = tf.strings.length(x, unit="{unit}")\n', x=value)
    theirs, ours = ns_tf["out"].numpy(), ns_torch["out"]
    assert ours.dtype == __import__("torch").int32 and ours.numpy().tolist() == theirs.tolist()


def test_ragged_methods_on_string_rows_are_errors():
    src = """
    import tensorflow as tf

    ids = tf.strings.split(x, ",").to_tensor()
    ratings = tf.strings.to_number(tf.strings.split(y, ","), tf.float32).to_tensor()
    parts = tf.strings.split(z, "/")[-2]
    """
    r = translate_source(textwrap.dedent(src).lstrip(), "ragged.py")
    errors = [(f.code, f.line) for f in r.findings if f.severity is Severity.ERROR]
    assert errors == [("unsupported-construct", 3), ("unsupported-construct", 4)]
    assert r.output.count("# fwport: unsupported-construct: .to_tensor()") == 2
