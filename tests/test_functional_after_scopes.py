"""A comprehension after keras.Model(...) whose for-target has a graph name's spelling (issue 8, session 25): the
target is the comprehension's own name (Python 3 scopes it there), so the comprehension does not read the graph's
tensor, and the model is translated (deep-learning-with-python-notebooks chapter17: `display([task.generate(prompt,
num_steps=x) for x in [5, 10, 15]])` after the decoder, whose graph binds x). A comprehension that does read a graph
name (its first iterable, or a name it does not bind) still refuses the model."""
from __future__ import annotations

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_messages as _errors
from runners import keras3_forward_verified

LEFT = "this functional model is left as written"


def _tx(src: str):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": 3})


OWN_TARGETS = '''
import keras
from keras import layers

inputs = keras.Input(shape=(6,))
x = layers.Dense(5, activation="relu")(inputs)
x = layers.Dense(4, activation="tanh")(x)
outputs = layers.Dense(3)(x)
model = keras.Model(inputs, outputs)

steps = [x * 2 for x in [5, 10, 15]]
squares = {x: x * x for x in range(3)}
total = sum(x for x in steps if x > 12)
pairs = {(x, y) for x in range(2) for y in range(x + 1)}
print(steps, squares, total, sorted(pairs))
'''


def test_a_comprehension_target_named_like_a_graph_tensor_is_its_own(tmp_path):
    r = _tx(OWN_TARGETS)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "class Model(nn.Module)" in out and "model = Model()" in out
    assert "steps = [x * 2 for x in [5, 10, 15]]" in out
    assert "keras" not in out.replace("# fwport", "")
    keras3_forward_verified(tmp_path, OWN_TARGETS, out, "model", "float32[4,6]")


READS = '''
import keras
from keras import layers

inputs = keras.Input(shape=(6,))
x = layers.Dense(5, activation="relu")(inputs)
outputs = layers.Dense(3)(x)
model = keras.Model(inputs, outputs)

{WHERE}
'''


def test_a_comprehension_that_reads_a_graph_tensor_still_refuses_the_model():
    for where in ("shapes = [x.shape for n in range(2)]",  # x is not a target: the graph's
                  "firsts = [x for x in x]",  # the first iterable is read outside the comprehension
                  "rows = [y for y in range(2) if x is not None]"):
        msgs = _errors(_tx(READS.replace("{WHERE}", where)))
        assert any("x: a tensor or layer of the functional model used after keras.Model" in m for m in msgs), \
            (where, msgs)
        assert any(m.startswith(LEFT) for m in msgs), (where, msgs)


# tensorflow docs' load_data/csv: a model above binds `input`; the model below filters its dict of inputs with
# `{name: input for name, input in inputs.items() ...}`, whose `input` is the comprehension's own. The model below
# does not depend on the model above's Input (its backward slice stops at its own names), and the comprehension
# (an operation on its Keras tensors) is refused as it is with any other target name.
TWO_MODELS = '''
import keras
from keras import layers

input = keras.Input(shape=(3,))
result = layers.Dense(2)(input)
calc = keras.Model(inputs=input, outputs=result)

inputs = {"a": keras.Input(shape=(1,), name="a"), "b": keras.Input(shape=(1,), name="b")}
numeric = {name: {T} for name, {T} in inputs.items() if {T}.dtype == "float32"}
x = layers.Concatenate()(list(numeric.values()))
out = layers.Dense(2)(x)
model = keras.Model(inputs, out)
'''


def test_a_comprehension_target_is_not_an_input_of_another_model():
    same = _errors(_tx(TWO_MODELS.replace("{T}", "input")))
    other = _errors(_tx(TWO_MODELS.replace("{T}", "inp")))
    assert not any("keras.Input tensors that are not inputs of the model" in m for m in same), same
    assert any("this operation on tensors of the functional model is not followed" in m for m in same), same
    assert [m.replace("input", "inp") for m in same] == [m.replace("input", "inp") for m in other]


# tensorflow docs' load_data/csv: a notebook cell showing a symbolic tensor by its name alone (`result`), as the
# functional API guide shows `inputs.shape`: Python evaluates the name and discards it, so it goes with the graph
# (display-dropped) and the model is translated. Read any other way, the tensor is still an error.
SHOWN_NAME = '''
import tensorflow as tf
from tensorflow.keras import layers

input = tf.keras.Input(shape=(4,), dtype=tf.float32)
hidden = layers.Dense(3, activation="tanh")(input)
hidden
result = 2 * hidden + 1

# the result doesn't have a value
result
calc = tf.keras.Model(inputs=input, outputs=result)
'''


def test_a_graph_tensor_shown_by_its_name_alone_is_dropped_with_the_graph(tmp_path):
    r = _tx(SHOWN_NAME)
    assert not _errors(r), _errors(r)
    shown = [(f.line, f.message.split(":")[0]) for f in r.findings if f.code == "display-dropped"]
    assert shown == [(7, "hidden"), (11, "result")]
    assert "class Calc(nn.Module)" in r.output and "calc = Calc()" in r.output
    assert "tensorflow" not in r.output.replace("# fwport", "")
    for line in ("print(result)", "r = result"):
        errors = _errors(_tx(SHOWN_NAME.replace("\nresult\n", f"\n{line}\n")))
        assert any("result: a tensor or layer of the functional model used by a statement" in e for e in errors), \
            (line, errors)
    keras3_forward_verified(tmp_path, SHOWN_NAME, r.output, "calc", "float32[5,4]")
