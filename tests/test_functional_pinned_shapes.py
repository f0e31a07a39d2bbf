"""A builder given its Input's shape as a parameter, called with a module constant joined to a literal
(keras-io's image_classification_from_scratch: `make_model(input_shape=image_size + (3,), num_classes=2)`),
whose last layer's activation is a name an if on another parameter binds (`activation = "sigmoid"`): the
model is followed for the values the file gives (its __init__ raises ValueError for others), and a rule
layer's argument that is a builder name bound to a literal string is given to the rule as that string."""
from __future__ import annotations

import subprocess
import sys

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from runners import Warm

XCEPTION = '''
import keras
from keras import layers

image_size = (16, 16)


def make_model(input_shape, num_classes):
    inputs = keras.Input(shape=input_shape)
    x = layers.Rescaling(1.0 / 255)(inputs)
    x = layers.Conv2D(8, 3, strides=2, padding="same")(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    previous_block_activation = x

    for size in [8, 12]:
        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(size, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)
        x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
        residual = layers.Conv2D(size, 1, strides=2, padding="same")(previous_block_activation)
        x = layers.add([x, residual])
        previous_block_activation = x

    x = layers.GlobalAveragePooling2D()(x)
    if num_classes == 2:
        activation = "sigmoid"
        units = 1
    else:
        activation = "softmax"
        units = num_classes
    x = layers.Dropout(0.5)(x)
    outputs = layers.Dense(units, activation=activation)(x)
    return keras.Model(inputs, outputs)


model = make_model(input_shape=image_size + (3,), num_classes=2)
'''


def _tx(src: str):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": 3})


def _errors(r) -> list[str]:
    return [f.message for f in r.findings if f.severity.value == "error"]


def test_a_builder_given_a_constant_input_shape_is_translated_for_it():
    r = _tx(XCEPTION)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "if tuple(input_shape) != (16, 16, 3):" in out and "if num_classes != 2:" in out
    assert "outputs = torch.sigmoid(self.fc(x))" in out and "nn.Linear(12, units)" in out
    pinned = [f.message for f in r.findings if f.code == "built-for-values"]
    assert pinned and "input_shape=(16, 16, 3), num_classes=2" in pinned[0]


def test_a_builder_given_a_constant_input_shape_computes_what_keras_does(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(XCEPTION)
    (tmp_path / "t.py").write_text(_tx(XCEPTION).output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "make_model((16, 16, 3), 2)",
                          inputs=["float32[2,16,16,3]"],
                          checks=("forward", "grad"), device="cpu", keras=3), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


def test_the_translation_refuses_another_input_shape(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "t.py").write_text(_tx(XCEPTION).output)
    run = subprocess.run([sys.executable, "-c", "import t\ntry:\n    t.make_model((32, 32, 3), 2)\n"
                          "except ValueError as e:\n    print('refused', e)\n"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "refused translated for input_shape=(16, 16, 3) only" in run.stdout, run.stderr[-2000:]


def test_an_activation_name_bound_to_a_call_stays_an_error():
    src = XCEPTION.replace('activation = "sigmoid"', 'activation = keras.activations.get("sigmoid")')
    errors = _errors(_tx(src))
    assert any(m.startswith("activation=activation") for m in errors), errors


def test_an_activation_name_bound_before_a_loop_that_may_rebind_it_stays_an_error():
    src = XCEPTION.replace('    x = layers.Dropout(0.5)(x)\n',
                           '    for k in range(units):\n        activation = "softmax"\n    x = layers.Dropout(0.5)(x)\n')
    errors = _errors(_tx(src))
    assert any("activation" in m for m in errors), errors
