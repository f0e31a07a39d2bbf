"""keras.backend.get_uid(prefix) → the get_uid helper written into the file: Keras's counter per prefix (1, 2, 3 ...),
checked against Keras in a subprocess; prefixes Keras's own naming may share are errors."""
from __future__ import annotations

import json
from importlib.util import find_spec

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import python

_PROGRAM = """{imports}
import json

names = []
for i in range(3):
    names.append("prestem" + str({uid}("prestem")))
    names.append({uid}("block0"))
names.append({uid}())
names.append({uid}(prefix="block0"))
names.append({uid}())
print(json.dumps(names))
"""

SPELLINGS = [
    ("import tensorflow as tf", "tf.keras.backend.get_uid"),
    ("from tensorflow.keras import backend", "backend.get_uid"),
    ("import keras", "keras.backend.get_uid"),
]


def _errors(res):
    return [f for f in res.findings if f.severity is Severity.ERROR]


def _run(src: str) -> list:
    proc = python("-c", src, env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("imports,uid", SPELLINGS, ids=["tf.keras", "tensorflow.keras", "keras"])
def test_get_uid_counts_as_keras_does(imports, uid):
    src = _PROGRAM.format(imports=imports, uid=uid)
    res = translate_source(src, "uid.py")
    assert not _errors(res), res.findings
    assert "keras" not in res.output and "tensorflow" not in res.output and "get_uid(" in res.output, res.output
    if find_spec("tensorflow") is None or find_spec("keras") is None:
        pytest.skip("tensorflow / keras are not installed")
    want = _run(src)
    assert want == ["prestem1", 1, "prestem2", 2, "prestem3", 3, 1, 4, 2]  # what Keras gives (its docstring's count)
    assert _run(res.output) == want, res.output


def test_prefixes_keras_may_count_too_are_refused():
    """Keras advances the same counter when it names an object built without a name (to_snake_case of its class:
    a Dense is "dense", a file's ConvBlock "conv_block"), and clear_session resets it: such prefixes, a prefix that
    is not a literal, and a file that resets the counters are errors, the call left as written."""
    base = "from tensorflow.keras import backend, layers\n\n\nclass ConvBlock(layers.Layer):\n    pass\n\n\n"
    for call in ('backend.get_uid("conv_block")', 'backend.get_uid("dense")', 'backend.get_uid("functional")',
                 "backend.get_uid(name)"):
        res = translate_source(base + "d = layers.Dense(3)\nn = " + call + "\n", "r.py")
        assert [f.code for f in _errors(res)] == ["unsupported-argument"], (call, res.findings)
        assert "n = " + call in res.output, res.output
    res = translate_source(base + 'n = backend.get_uid("prestem")\nbackend.clear_session()\n', "c.py")
    assert [f.code for f in _errors(res)] == ["unsupported-argument"], res.findings
    assert "clear_session" in _errors(res)[0].message
    if find_spec("keras") is None:
        return
    check = ("import keras\nkeras.layers.Dense(3)\nassert keras.backend.get_uid('dense') == 2\n"
             "keras.backend.clear_session()\nassert keras.backend.get_uid('prestem') == 1\nprint(json.dumps([]))\n")
    assert _run("import json\n" + check) == []  # the reasons hold in Keras
