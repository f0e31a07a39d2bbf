"""A notebook's cells trying layers on a symbolic input before the cell that builds the model (Deep Learning
with Python, chapter 9: `inputs = keras.Input(...)`, a few layers, no keras.Model; then the real model
rebinding `inputs` and `x`). The model depends only on the statements from its own `inputs = keras.Input`
on (a plain assignment binds a name anew), so it is translated; each trial is one error at its Input, its
lines left as written (Keras code), instead of the whole model left as written with an error per layer.
A trial whose tensors something else reads (a print, a loop) keeps the per-layer errors."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from runners import Warm

TRIALS = '''
import keras
from keras import layers

inputs = keras.Input(shape=(8, 8, 3))
x = layers.Conv2D(4, 3, activation="relu")(inputs)
residual = x
x = layers.Conv2D(8, 3, activation="relu", padding="same")(x)
residual = layers.Conv2D(8, 1)(residual)
x = layers.add([x, residual])

inputs = keras.Input(shape=(8, 8, 3))
x = layers.Conv2D(4, 3, activation="relu")(inputs)
residual = x
x = layers.MaxPooling2D(2, padding="same")(x)
residual = layers.Conv2D(4, 1, strides=2)(residual)
x = layers.add([x, residual])

inputs = keras.Input(shape=(8, 8, 3))
x = layers.Rescaling(1.0 / 255)(inputs)


def residual_block(x, filters, pooling=False):
    residual = x
    x = layers.Conv2D(filters, 3, activation="relu", padding="same")(x)
    if pooling:
        x = layers.MaxPooling2D(2, padding="same")(x)
        residual = layers.Conv2D(filters, 1, strides=2)(residual)
    elif filters != residual.shape[-1]:
        residual = layers.Conv2D(filters, 1)(residual)
    x = layers.add([x, residual])
    return x


x = residual_block(x, filters=4, pooling=True)
x = residual_block(x, filters=6, pooling=False)
x = layers.GlobalAveragePooling2D()(x)
outputs = layers.Dense(3)(x)
model = keras.Model(inputs=inputs, outputs=outputs)
'''

TRIAL = "inputs = keras.Input(...) starts a Keras graph that no keras.Model(...) takes"


def _tx(src: str):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": 3})


def _errors(r) -> list[str]:
    return [f.message for f in r.findings if f.severity.value == "error"]


def test_the_model_after_trial_cells_is_translated_and_each_trial_is_one_error():
    r = _tx(TRIALS)
    errors = _errors(r)
    assert len(errors) == 2 and all(m.startswith(TRIAL) for m in errors), errors
    assert [f.line for f in r.findings if f.severity.value == "error"] == [5, 12]
    assert "the 5 below it" in errors[0] and "the 5 below it" in errors[1]
    out = r.output
    assert "class Model(nn.Module):" in out and "def forward(self, inputs):" in out and "model = Model()" in out
    # the trials stay Keras code, as written
    assert out.count("inputs = keras.Input(shape=(8, 8, 3))") == 2
    assert 'x = layers.Conv2D(4, 3, activation="relu")(inputs)' in out and "layers.add([x, residual])" in out


def test_the_model_after_trial_cells_computes_what_keras_does(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(TRIALS)
    # the trials deleted, as their errors say: the rest is the translation as it is
    trials = TRIALS.split("\n\n")[1:3]
    out = _tx(TRIALS).output
    assert all(t in out for t in trials)
    for t in [*trials, "import keras\n", "from keras import layers\n"]:
        out = out.replace(t, "")
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "model", inputs=["float32[2,8,8,3]"],
                          checks=("forward", "grad"), device="cpu", keras=3), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    assert len(cert["results"]["gradients"]) == 10  # 4 convolutions of the blocks (weight, bias) and the Dense


def test_a_trial_whose_tensors_something_else_reads_keeps_its_layer_errors():
    src = TRIALS.replace('x = layers.add([x, residual])\n\ninputs = keras.Input(shape=(8, 8, 3))\nx = layers.Rescaling',
                         'x = layers.add([x, residual])\nprint(x.shape)\n\ninputs = keras.Input(shape=(8, 8, 3))\n'
                         'x = layers.Rescaling')
    r = _tx(src)
    errors = _errors(r)
    assert sum(m.startswith(TRIAL) for m in errors) == 1, errors  # the first trial; the second is printed
    assert any("Conv2D acts on channels-last inputs" in m for m in errors), errors
    assert "class Model(nn.Module):" in r.output


def test_an_input_a_model_takes_is_no_trial():
    first = "\n\n".join(TRIALS.split("\n\n")[:2])  # the imports and the first trial
    r = _tx(first + "\nmodel = keras.Model(inputs, x)\n")
    assert not any(m.startswith(TRIAL) for m in _errors(r)), _errors(r)
    assert "class Model(nn.Module):" in r.output


# keras-io vision/metric_learning_tf_similarity.py, reduced: the graph ends in another library's layer and model
FOREIGN = '''
import keras
import tensorflow_similarity as tfsim

inputs = keras.layers.Input((32, 32, 3))
x = keras.layers.Conv2D(8, 3, activation="relu")(inputs)
x = keras.layers.BatchNormalization()(x)
x = keras.layers.GlobalMaxPool2D()(x)
outputs = tfsim.layers.MetricEmbedding(16)(x)
model = tfsim.models.SimilarityModel(inputs, outputs)
model.summary()
'''


def _error_findings(src: str) -> list:
    return [f for f in translate_source(src, "m.py").findings if f.severity.value == "error"]


def test_a_graph_through_another_librarys_layers_and_model_is_one_error_at_its_input():
    errors = _error_findings(FOREIGN)
    lines = FOREIGN.splitlines()
    at_input = [e for e in errors if e.line == lines.index("inputs = keras.layers.Input((32, 32, 3))") + 1]
    assert len(at_input) == 1 and "goes through tfsim.layers.MetricEmbedding, tfsim.models.SimilarityModel" \
        in at_input[0].message and "the 5 below it" in at_input[0].message
    # no per-layer layout error; the other library's model keeps its own error
    assert not [e for e in errors if "Conv2D acts on channels-last inputs" in e.message]
    assert [e for e in errors if "SimilarityModel has no tf2torch rule" in e.message]
    out = translate_source(FOREIGN, "m.py").output
    assert 'x = keras.layers.Conv2D(8, 3, activation="relu")(inputs)' in out  # left as written
    # a Keras model at the end is followed as before: nothing foreign, no such error
    keras_model = FOREIGN.replace("outputs = tfsim.layers.MetricEmbedding(16)(x)", "outputs = keras.layers.Dense(16)(x)"
                                  ).replace("tfsim.models.SimilarityModel(", "keras.Model(")
    assert not [e for e in _error_findings(keras_model) if "goes through" in e.message]


# keras-io vision/barlow_twins.py, reduced: a plain class whose methods build the model
BUILDER_CLASS = '''
import tensorflow as tf


class ResNet:
    def block(self, x, filters):
        x = tf.keras.layers.Conv2D(filters, 3, padding="same")(x)
        return tf.keras.layers.BatchNormalization(axis=3)(x)

    def __call__(self, shape=(32, 32, 3)):
        x_input = tf.keras.layers.Input(shape)
        x = self.block(x_input, 8)
        x = tf.keras.layers.Flatten()(x)
        return tf.keras.models.Model(inputs=x_input, outputs=x)


resnet = ResNet()()
'''


def test_a_model_built_by_a_plain_class_is_one_error_and_its_layer_calls_stay_keras_code():
    errors = _error_findings(BUILDER_CLASS)
    assert len(errors) == 1 and "built inside a class" in errors[0].message and \
        "the layer calls of this class are left as written" in errors[0].message, [e.message for e in errors]
    out = translate_source(BUILDER_CLASS, "m.py").output
    assert 'x = tf.keras.layers.Conv2D(filters, 3, padding="same")(x)' in out
