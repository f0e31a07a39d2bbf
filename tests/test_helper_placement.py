"""Where the definitions a translation writes into the file (helper modules, the generated fit loop) go:
after the imports, so that what they use is bound when they are defined."""
from __future__ import annotations

import textwrap

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

PACK = load_pack("tf2torch")

NOTEBOOK = '''
"""Title: a notebook exported to a script."""

"""
## Setup
"""

import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

"""
## The model
"""

inputs = keras.Input(shape=(None,), dtype="int32")
x = layers.Embedding(100, 8)(inputs)
x = layers.Bidirectional(layers.LSTM(4))(x)
outputs = layers.Dense(1, activation="sigmoid")(x)
model = keras.Model(inputs, outputs)
'''


def run_module(code: str) -> dict:
    g: dict = {"__name__": "translated"}
    exec(compile(code, "translated.py", "exec"), g)
    return g


def test_helpers_follow_imports_that_come_after_string_statements():
    r = translate_source(textwrap.dedent(NOTEBOOK).lstrip("\n"), "nb.py", PACK)
    assert [f for f in r.findings if f.severity is Severity.ERROR] == []
    out = r.output
    helper = out.index("class BidirectionalOutput(")
    assert out.index("import torch") < helper, out
    assert helper < out.index('## The model'), "the helper stays above the code that uses it"
    again = translate_source(out, "nb.py", PACK)
    assert again.output == out
    g = run_module(out)  # defining the helper needs torch bound: it raised NameError when written above
    import torch
    y = g["model"](torch.randint(0, 100, (2, 5)))
    assert tuple(y.shape) == (2, 1)


def test_helpers_go_below_a_torch_import_that_comes_after_code():
    src = NOTEBOOK.replace("import numpy as np\n", "import numpy as np\nSEED = 1\n")
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "nb.py", PACK)
    out = r.output
    assert out.index("import torch") < out.index("class BidirectionalOutput("), out
    run_module(out)
