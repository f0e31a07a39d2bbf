"""tf.TensorShape, tf.TensorSpec and tf.function(fn, input_signature=...): what torch has for them,
checked against TensorFlow where values are computed, and the honest errors where it has nothing exact."""
from __future__ import annotations

import textwrap

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import needs
from runners import keras_and_torch

PACK = load_pack("tf2torch")


def tr(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), PACK)


def errors(r) -> list[str]:
    return [f"{f.code}: {f.message}" for f in r.findings if f.severity == Severity.ERROR]


def code_lines(r) -> str:
    return "\n".join(line for line in r.output.splitlines() if not line.lstrip().startswith("#"))


_SHAPES = '''
import tensorflow as tf

s = tf.TensorShape([2, 3, 4])
a = s.as_list()
r = s.rank
n = s.ndims
f = s.is_fully_defined()
e = s.num_elements()
first = s[-1]
tail = s[1:]
k = len(s)
dims = [d * 2 for d in s]
lst = tf.TensorShape((4, 5)).as_list()
rk = tf.TensorShape([7]).rank
fd = tf.TensorShape([7, 8]).is_fully_defined()
ne = tf.TensorShape([7, 8]).num_elements()
one = tf.TensorShape(5).as_list()
given = [6, 2]
fd_given = tf.TensorShape(given).is_fully_defined()
rk_given = tf.TensorShape(given).ndims


def out_shape(input_shape, channels):
    shape = tf.TensorShape(input_shape).as_list()
    shape[-1] = channels
    return tf.TensorShape(shape)


out = out_shape((8, 6, 6, 3), 10)
'''

_DRIVER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import model as m


def plain(v):
    return v if isinstance(v, (bool, int, float)) else [int(d) for d in v]


names = ["a", "r", "n", "f", "e", "first", "tail", "k", "dims", "lst", "rk", "fd", "ne", "one", "fd_given",
         "rk_given", "out"]
print("RESULT " + json.dumps({k: [plain(getattr(m, k)), type(getattr(m, k)).__name__ in ("bool", "int", "list")]
                              for k in names}))
'''


@needs("tensorflow", "torch")
def test_tensor_shape_of_known_dims_is_a_torch_size_with_tensorflows_values(tmp_path):
    """A TensorShape of known dims bound to a name → torch.Size, its as_list / rank / ndims / is_fully_defined /
    num_elements → list / len / True / numel; chained on the call → the same on the dims given; handed on → torch.Size
    with a warning. Every value TensorFlow's, run without TensorFlow on the torch side."""
    r = tr(_SHAPES)
    assert not errors(r), errors(r)
    out = r.output
    assert "tensorflow" not in out
    assert "s = torch.Size([2, 3, 4])" in out and "a = list(s)" in out and "r = len(s)" in out
    assert "lst = [4, 5]" in out and "rk = 1" in out and "one = [5]" in out
    assert "shape = list(input_shape)" in out and "return torch.Size(shape)" in out
    warnings = [f for f in r.findings if f.severity == Severity.WARNING]
    assert [f.line for f in warnings] == [26]  # the torch.Size handed on: unlike a TensorShape it is a tuple
    k, t = keras_and_torch(tmp_path, textwrap.dedent(_SHAPES), out, _DRIVER)
    assert {n: v[0] for n, v in t.items()} == {n: v[0] for n, v in k.items()}
    assert t["a"][1] and t["f"][1] and t["e"][1] and t["lst"][1]  # a list, a bool, an int as in TensorFlow


def test_tensor_shape_uses_torch_size_differs_on_are_errors():
    """A TensorShape compared with a list, tested for truth or read by another attribute, and one with an unknown
    dimension or rank: errors, and the calls stay TensorShapes (no torch.Size that compares unequal silently)."""
    r = tr('''
        import tensorflow as tf

        w = tf.TensorShape([1, 2])
        same = w == [1, 2]
        v = tf.TensorShape([])
        if v:
            print("scalar")
        d = tf.TensorShape([3]).dims
        x = tf.TensorShape([3, 4])
        y = x.merge_with([3, 4])
        u = tf.TensorShape([16, None, 256])
        z = tf.TensorShape(None)
        print(bool(tf.TensorShape([])), tf.TensorShape([2]) == [2])
    ''')
    errs = errors(r)
    assert sum(e.startswith("unsupported-construct: w == [1, 2]: the TensorShape w is compared") for e in errs) == 1
    assert sum("the TensorShape v is tested for truth" in e for e in errs) == 1
    assert sum("the TensorShape x is read by a TensorShape attribute" in e for e in errs) == 1
    assert sum(e.startswith("no-rule: tensorflow.TensorShape") for e in errs) == 7  # bool(tf.TensorShape([])): True
    assert "torch.Size" not in code_lines(r) and "print(True, tf.TensorShape([2]) == [2])" in code_lines(r)


_TRUTHS = '''
import tensorflow as tf

scalar = bool(tf.TensorShape([]))
empty = bool(tf.TensorShape([0]))
unknown_dim = bool(tf.TensorShape([None]))
unknown_dims = bool(tf.TensorShape((None, None, None)))
known = bool(tf.TensorShape([1, 10, 100]))
one = bool(tf.TensorShape(4))
unknown_rank = bool(tf.TensorShape(None))
'''

_TRUTHS_DRIVER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import model as m

names = ["scalar", "empty", "unknown_dim", "unknown_dims", "known", "one", "unknown_rank"]
print("RESULT " + json.dumps({k: getattr(m, k) for k in names}))
'''


@needs("tensorflow", "torch")
def test_truth_of_a_tensor_shape_call_is_whether_its_rank_is_known(tmp_path):
    """bool(tf.TensorShape(dims)) is True wherever the rank is known, whatever the dimensions (none, 0, None),
    False for TensorShape(None): a constant where the dims are written, TensorFlow's values."""
    r = tr(_TRUTHS)
    assert not errors(r), errors(r)
    assert "tensorflow" not in r.output and "torch.Size" not in r.output
    assert "scalar = True" in r.output and "unknown_rank = False" in r.output
    k, t = keras_and_torch(tmp_path, textwrap.dedent(_TRUTHS), r.output, _TRUTHS_DRIVER)
    assert t == k and k["unknown_rank"] is False and k["scalar"] is True


_SIGNATURES = '''
import tensorflow as tf


def gen():
    for i in range(5):
        yield [i, i + 0.5], i % 3


def dgen():
    for i in range(4):
        yield {"x": [i, 2 * i], "y": i}


ds = tf.data.Dataset.from_generator(gen, output_signature=(tf.TensorSpec(shape=(2,), dtype=tf.float64),
                                                           tf.TensorSpec((), tf.int64))).batch(2)
sig = {"x": tf.TensorSpec([2]), "y": tf.TensorSpec(shape=(), dtype="int32")}
dd = tf.data.Dataset.from_generator(dgen, output_signature=sig).batch(3)


def double(x):
    return x * 2.0 + 1.0


g = tf.function(double, input_signature=[tf.TensorSpec(shape=[None, 3], dtype=tf.float32)])


@tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.float32)])
def half(x):
    return x / 2.0


y = g(tf.constant([[1.0, 2.0, 3.0]]))
z = half(tf.constant([3.0, 5.0]))


@tf.function
def power(a, b):
    return a ** b


square = power.get_concrete_function(a=tf.TensorSpec(None, tf.float32), b=2)
sq = square(tf.constant([10.0, 3.0]))
conc = half.get_concrete_function(tf.TensorSpec([None], tf.float32))
hz = conc(tf.constant([4.0]))
'''

_SIGNATURES_DRIVER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import model as m


def arr(t):
    a = np.asarray(t)
    return [a.tolist(), str(a.dtype)]


out = {"ds": [[arr(v) for v in b] for b in m.ds], "dd": [{k: arr(v) for k, v in b.items()} for b in m.dd],
       "y": arr(m.y), "z": arr(m.z), "sq": arr(m.sq), "hz": arr(m.hz)}
print("RESULT " + json.dumps(out))
'''


@needs("tensorflow", "torch")
def test_tensor_spec_signatures_give_their_dtypes_and_input_signatures_drop(tmp_path):
    """from_generator's output_signature of TensorSpecs (written in the call, or a name read only there) →
    output_types of their dtypes: the same elements and dtypes as TensorFlow's; a tf.function's input_signature,
    as a decorator or in tf.function(fn, input_signature=...), drops with it (nothing computed from it, no error
    for the TensorSpec inside); f.get_concrete_function(specs) → f (functools.partial for the values it fixes)."""
    r = tr(_SIGNATURES)
    assert not errors(r), errors(r)
    out = r.output
    assert "tensorflow" not in out and "TensorSpec" not in out
    assert 'sig = {"x": torch.float32, "y": torch.int32}' in out
    assert "output_types=sig" in out and "g = double" in out
    assert "square = functools.partial(power, b=2)" in out and "conc = half" in out
    k, t = keras_and_torch(tmp_path, textwrap.dedent(_SIGNATURES), out, _SIGNATURES_DRIVER)
    assert t == k


def test_tensor_spec_signatures_fwport_cannot_follow_are_refused():
    """A signature name read elsewhere too, or a spec with an argument TensorSpec does not take: the call keeps an
    error (no output_types made of objects DataPipeline cannot convert to)."""
    r = tr('''
        import tensorflow as tf

        sig = (tf.TensorSpec([2], tf.float32),)
        ds = tf.data.Dataset.from_generator(gen, output_signature=sig)
        print(sig)
        other = tf.data.Dataset.from_generator(gen, output_signature=tf.TensorSpec([2], tf.float32, "x", 1))
    ''')
    errs = errors(r)
    assert sum(e.startswith("unsupported-argument: output_signature=") for e in errs) == 2, errs
    assert "DataPipeline.from_generator" not in code_lines(r)


def test_shapes_and_specs_inside_dropped_signatures_are_left_to_the_drop():
    """A TensorShape inside a TensorSpec of a dropped input_signature (decorator or tf.function call) or of a spec
    made a dtype: nothing planned there (no crash from an edit the rule pass never reaches), nothing reported."""
    r = tr('''
        import tensorflow as tf


        def f(x):
            return x


        g = tf.function(f, input_signature=[tf.TensorSpec(shape=tf.TensorShape([2, 3]))])


        @tf.function(input_signature=[tf.TensorSpec(shape=tf.TensorShape([2, 3]))])
        def h(x):
            return x


        ds = tf.data.Dataset.from_generator(gen, output_signature=tf.TensorSpec(tf.TensorShape([2]), tf.int64))
    ''')
    assert r.status.name != "FAILED" and not errors(r), errors(r)
    assert not [f for f in r.findings if f.severity == Severity.WARNING]
    assert "output_types=torch.int64" in r.output and "g = f" in r.output
