"""tf.nest.flatten / map_structure → the written helpers: the same leaves, order and structures as
TensorFlow's, and the same kind of error for structures that do not nest alike."""
from __future__ import annotations

import collections

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

SRC = '''import tensorflow as tf


def flat(s):
    return tf.nest.flatten(s)


def mapped(f, s):
    return tf.nest.map_structure(f, s)


def mapped2(f, a, b):
    return tf.nest.map_structure(f, a, b)
'''

Pair = collections.namedtuple("Pair", "b a")


def _structures():
    return [
        {"z": 1, "a": [2, (3, None)], "m": Pair(4, {"y": 5, "x": 6}), "s": "text"},
        [np.ones(2), (7.0, [8, 9])],
        (), [], 5,
    ]


def test_nest_helpers_match_tensorflow():
    tf = pytest.importorskip("tensorflow")
    r = translate_source(SRC, "m.py")
    assert not [f for f in r.findings if f.severity == Severity.ERROR], r.findings
    assert "tensorflow" not in r.output and "nest_map_structure(f, a, b)" in r.output
    ns: dict = {}
    exec(compile(r.output, "translated.py", "exec"), ns)

    def ten(v):
        return v if v is None or isinstance(v, str) else v * 10

    for s in _structures():
        want, got = tf.nest.flatten(s), ns["flat"](s)
        assert len(got) == len(want) and all(np.array_equal(g, w) if isinstance(w, np.ndarray) else g == w
                                              for g, w in zip(got, want)), (got, want)
        w, g = tf.nest.map_structure(ten, s), ns["mapped"](ten, s)
        assert type(g) is type(w) and repr(g) == repr(w)
    assert ns["flat"]({"b": 1, "a": 2}) == [2, 1]  # sorted keys, not insertion order
    both = ([1, (2, 3)], [4, (5, 6)])
    assert ns["mapped2"](lambda a, b: (a, b), *both) == tf.nest.map_structure(lambda a, b: (a, b), *both)
    for a, b in (([1, 2], [1, (2, 3)]), ([1, 2], (1, 2)), ({"a": 1}, {"b": 1}), ([1], [1, 2])):
        with pytest.raises((ValueError, TypeError)) as tf_error:
            tf.nest.map_structure(lambda x, y: x, a, b)
        with pytest.raises((ValueError, TypeError)) as ours:
            ns["mapped2"](lambda x, y: x, a, b)
        assert type(ours.value) is type(tf_error.value), (a, b, tf_error.value)
