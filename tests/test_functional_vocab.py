"""A vocabulary layer (TextVectorization, StringLookup, IntegerLookup) called on a tensor of a functional
graph: torch modules take no strings, so the model is refused with one error that says so at the layer's
construction, while the same layer used on data before the model translates (tests/test_text_vectorization.py)."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

SRC = textwrap.dedent('''\
    import keras

    texts = ["a good film", "a bad film"]
    vec = keras.layers.{layer}({args})
    vec.adapt(texts)
    dense = keras.layers.Dense(1, activation="sigmoid")
    inputs = keras.Input(shape=(), dtype="string")
    outputs = dense(vec(inputs))
    model = keras.Model(inputs, outputs)
''')


@pytest.mark.parametrize("layer,args", [
    ("TextVectorization", 'max_tokens=50, output_mode="multi_hot"'),
    ("StringLookup", 'output_mode="multi_hot"'),
])
def test_a_vocabulary_layer_inside_the_graph_is_named_as_such(layer, args):
    r = translate_source(SRC.format(layer=layer, args=args), "m.py", load_pack("tf2torch"))
    errs = [f for f in r.findings if f.severity == Severity.ERROR]
    at_layer = [f for f in errs if f.line == 4]
    assert len(at_layer) == 1, [(f.line, f.message) for f in errs]
    msg = at_layer[0].message
    assert msg.startswith(f"{layer} inside the model: a vocabulary layer maps strings to ids")
    assert "no tf2torch rule yet" not in msg
    assert f"# fwport: unsupported-construct: {layer} inside the model" in r.output  # the marker at the line
    # the model itself is left as written, and says where to look
    assert any(f.line == 9 and "left as written" in f.message for f in errs)
