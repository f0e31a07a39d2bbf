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
