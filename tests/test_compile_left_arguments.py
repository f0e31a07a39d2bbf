"""An optimizer or loss object created in the arguments of a compile that stays as written (a compile the written
loop does not reproduce, or of a model this file does not build and translate: keras.applications, an imported
class) is refused with an error naming that compile, instead of asking to bind the loss to a name or to pass the
model's parameters, which would not make the compile translatable."""
from __future__ import annotations

import textwrap

from fwport.core.pipeline import translate_source
from helpers import error_lines as errors

REFUSED = '''
import keras
from keras import layers
from .graphs import make_graph


def build(graph):
    model = make_graph(graph)
    inputs, outputs = model
    model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model, graph
'''

APPLICATION = '''
import keras

model = keras.applications.ResNet50(weights=None, classes=5)
model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=keras.losses.SparseCategoricalCrossentropy())
'''


def _messages(src: str) -> list[str]:
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "model.py")
    assert translate_source(r.output, "model.py").output == r.output, "translating the output again changes it"
    return [m for _, m in errors(r)]


def test_the_arguments_of_a_refused_compile_name_it_and_why():
    found = _messages(REFUSED)
    args = [m for m in found if m.startswith(("Adam(...)", "SparseCategoricalCrossentropy(...)"))]
    assert len(args) == 2, found
    assert all("is given to model.compile(...), which fwport leaves as written (it is compiled inside a function "
               "that does not fit it there, and build() does not end in one `return model`" in m for m in args), args
    assert not any("bind it once to a name" in m or "fwport cannot tell which here" in m for m in found), found


def test_the_arguments_of_a_compile_of_a_model_left_keras_name_it():
    found = _messages(APPLICATION)
    args = [m for m in found if m.startswith(("Adam(...)", "SparseCategoricalCrossentropy(...)"))]
    assert len(args) == 2, found
    assert all("is given to model.compile(...), which stays Keras's (model is not a model this file builds" in m
               for m in args), args


def test_a_compile_the_loop_reproduces_takes_its_arguments():
    # (a model the file builds and translates, in a function that hands it back alone: the compile is written out,
    # its optimizer and loss translated)
    src = REFUSED.replace("return model, graph", "return model").replace(
        "    model = make_graph(graph)\n    inputs, outputs = model\n    model = keras.Model(inputs=inputs, outputs=outputs)\n",
        "    model = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(graph)])\n") + "\n\nnet = build(3)\n"
    assert "Sequential" in src
    found = _messages(src)
    assert found == [], found
