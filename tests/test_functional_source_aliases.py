"""A builder's name bound once to a Keras / TensorFlow function and only called on the model's tensors (issue 8,
func32; keras-io's video_classification / video_transformers: ``preprocess_input =
keras.applications.inception_v3.preprocess_input``, then ``preprocessed = preprocess_input(inputs)``) is that
function's call, which its rule translates (``imagenet_preprocess(inputs, "tf")``); the statement binding the name
goes. Each followed form runs against Keras (forward and gradients, weights moved by fwport verify); a name used any
other way, or a call the model's layout refuses, keeps its error and the model is left as written."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_messages
from runners import Warm

PACK = load_pack("tf2torch")


def tx(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)


def verified(tmp_path, src: str, out: str, model: str, inputs: list[str]) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(textwrap.dedent(src).lstrip("\n"))
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=inputs,
                          checks=("forward", "grad"), device="cpu"), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


# the preprocessing of a pretrained model on pixels, then layers that keep Keras's layout (no convolution)
ALIASED = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_extractor(units=4):
    preprocess_input = keras.applications.{module}.preprocess_input
    inputs = keras.Input((5, 3))
    preprocessed = preprocess_input(inputs)
    x = layers.Dense(units, activation="relu")(preprocessed)
    x = layers.Flatten()(x)
    outputs = layers.Dense(2)(x)
    return keras.Model(inputs, outputs, name="extractor")
'''


@pytest.mark.parametrize("module, mode", [("densenet", "torch"), ("resnet50", "caffe"), ("inception_v3", "tf")])
def test_a_function_held_by_a_name_is_its_call_and_verifies(tmp_path, module, mode):
    src = ALIASED.replace("{module}", module)
    r = tx(src)
    assert not error_messages(r), error_messages(r)
    out = r.output
    assert f'preprocessed = imagenet_preprocess(inputs, "{mode}")' in out
    assert "preprocess_input =" not in out and "preprocess_input(" not in out  # the name's statement went
    assert "import keras" not in out and "from tensorflow" not in out and "keras.applications." not in out
    verified(tmp_path, src, out, "build_extractor", ["float32[2,5,3]"])


def test_a_name_used_otherwise_than_called_keeps_the_error():
    src = ALIASED.replace("{module}", "densenet").replace(
        "    return keras.Model(inputs, outputs, name=\"extractor\")",
        "    print(preprocess_input)\n    return keras.Model(inputs, outputs, name=\"extractor\")")
    messages = error_messages(tx(src))
    assert any(m.startswith("preprocess_input(...) is called on tensors, and preprocess_input is not a parameter of "
                            "the builder") for m in messages), messages
    assert any(m.startswith("this functional model is left as written") for m in messages), messages


def test_a_name_bound_twice_is_not_the_function():
    src = ALIASED.replace("{module}", "densenet").replace(
        "    inputs = keras.Input((5, 3))\n",
        "    inputs = keras.Input((5, 3))\n    preprocess_input = keras.applications.resnet50.preprocess_input\n")
    messages = error_messages(tx(src))
    assert any(m.startswith("this functional model is left as written") for m in messages), messages


def test_a_call_the_channels_first_layout_refuses_stays_refused_and_the_model_as_written():
    src = '''
from tensorflow import keras
from tensorflow.keras import layers


def build():
    preprocess_input = keras.applications.resnet50.preprocess_input
    inputs = keras.Input((8, 8, 3))
    x = preprocess_input(inputs)
    x = layers.Conv2D(4, 3)(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(2)(x))
'''
    r = tx(src)
    messages = error_messages(r)
    assert any("preprocess_input(...) on a feature map of a model converted to channels-first" in m
               for m in messages), messages
    assert any(m.startswith("this functional model is left as written") for m in messages), messages
    assert "    preprocess_input = keras.applications.resnet50.preprocess_input\n" in r.output  # as written


# a Keras activation held by a name (tf.keras makes its call a TFOpLambda layer of model.layers, Keras 3 no layer:
# the records of the Dense after it differ by Keras version, as for the function called by its own name)
ACTIVATION = '''
from tensorflow import keras
from tensorflow.keras import layers


def build():
    act = keras.activations.relu
    inputs = keras.Input(shape=(4,))
    h = layers.Dense(3)(inputs)
    x = act(h)
    return keras.Model(inputs, layers.Dense(2)(x))
'''


@pytest.mark.parametrize("keras", [2, 3])
def test_an_activation_held_by_a_name_is_its_call_and_verifies_in_both_kerases(tmp_path, keras):
    r = translate_source(textwrap.dedent(ACTIVATION).lstrip("\n"), "m.py", PACK, {"keras": keras})
    assert not error_messages(r), error_messages(r)
    assert "x = F.relu(h)" in r.output and "act" not in r.output.split("class Build", 1)[1]
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(textwrap.dedent(ACTIVATION).lstrip("\n"))
    (tmp_path / "t.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build", inputs=["float32[3,4]"],
                          checks=("forward", "grad"), device="cpu", keras=keras), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    grads = {e["name"]: e["source"] for e in cert["results"]["gradients"]}
    assert grads["fc2.weight"] == ("layers[3].kernel" if keras == 2 else "layers[2].kernel"), grads
