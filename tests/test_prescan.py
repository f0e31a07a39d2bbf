"""bench/prescan_ceiling.py (issue 7's `ast` pre-scan, measured and not adopted; docs/architecture.md, speedD):
which top-level statements it calls inert, and that its prototype (inert statements as marker strings of the
same lines, translated, spliced back) gives the plain translation's output, status and findings."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from fwport.core.direction import get_direction
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_prescan_ceiling", ROOT / "bench" / "prescan_ceiling.py")
prescan = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(prescan)

TRIGGERS = [p.trigger for p in get_direction("tf2torch").planners]
METHODS = prescan.pack_identifiers()

SOURCE = '''"""A prose cell."""
import tensorflow as tf

UNITS = 8
DEBUG = False
"""Another cell,
over two lines."""
layer = tf.keras.layers.Dense(UNITS)


def helper(v):
    return v + 1


y = helper(layer(tf.zeros((2, 4))))
z = y.numpy()
print("done")
'''


def test_classify_levels():
    statements, lines, inert_n, inert_l, has_src = prescan.classify(SOURCE, TRIGGERS, METHODS)
    assert has_src and statements == 10
    # names: the two strings, DEBUG and print("done") share no name with the tf code (UNITS, helper, z do)
    assert inert_n[0] == 4 and inert_l[0] == 1 + 1 + 2 + 1
    # the widenings only ever make fewer statements inert
    assert inert_n[0] >= inert_n[1] >= inert_n[2]
    assert "numpy" in METHODS and "fit" in METHODS  # method names of untyped values the planners act on


def test_markers_keep_lines_and_splice_back():
    keep: list = []
    prescan.classify(SOURCE, TRIGGERS, METHODS, keep)
    reduced, pieces = keep[0]
    assert reduced.count("\n") == SOURCE.count("\n") and len(pieces) == 4
    assert "UNITS = 8" in reduced and "print(" not in reduced
    assert prescan.splice(reduced, pieces) == SOURCE
    assert prescan.splice(reduced.replace(next(iter(pieces)), ""), pieces) is None  # a lost marker: no splice


# the only `keras` of the file is in prose that becomes a marker: the file-level gate must read the text as written
GATED = '''"""Presets of keras models."""
import keras_nlp


def presets():
    return list(keras_nlp.models.__dict__.items())
'''


@pytest.mark.parametrize("source", [SOURCE, GATED] + [p.read_text(encoding="utf-8") for p in
                                               sorted((ROOT / "fixtures" / "tf2torch").glob("*/model.py"))[:12]])
def test_prototype_is_identical(source):
    pack = load_pack("tf2torch")
    a = translate_source(source, "m.py", pack)
    b = prescan.prescanned(source, "m.py", pack, TRIGGERS, METHODS)
    assert (b.output, b.status, b.findings, b.source) == (a.output, a.status, a.findings, a.source)
