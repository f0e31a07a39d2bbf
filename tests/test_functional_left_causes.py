"""Causes that left keras-io's functional models as written (issue 8), each now translated exactly and checked
against Keras: BatchNormalization(scale=False) (gan_ada's generator and discriminator: beta without gamma)."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_messages as _errors
from runners import Warm

GAN_ADA = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

width = 6


def get_generator():
    noise_input = keras.Input(shape=(8,))
    x = layers.Dense(4 * 4 * width, use_bias=False)(noise_input)
    x = layers.BatchNormalization(scale=False)(x)
    x = layers.ReLU()(x)
    x = layers.Reshape(target_shape=(4, 4, width))(x)
    for _ in range(2):
        x = layers.Conv2DTranspose(width, kernel_size=4, strides=2, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization(scale=False)(x)
        x = layers.ReLU()(x)
    image_output = layers.Conv2DTranspose(3, kernel_size=4, strides=2, padding="same", activation="sigmoid")(x)
    return keras.Model(noise_input, image_output, name="generator")


shifted = keras.Sequential([keras.Input(shape=(6, 6, 3)), layers.Conv2D(4, 3),
                            layers.BatchNormalization(scale=False, momentum=0.9)])
'''


def _tx(src: str, keras: int = 3):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": keras})


def test_batch_norm_without_scale_keeps_a_shift_and_no_trained_weight():
    r = _tx(GAN_ADA)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "self.bn1 = without_scale(nn.BatchNorm1d(4 * 4 * width, momentum=0.01, eps=0.001))" in out
    assert out.count("without_scale(nn.BatchNorm2d(width, momentum=0.01, eps=0.001))") == 2
    assert "without_scale(nn.BatchNorm2d(4, momentum=0.1, eps=0.001))" in out
    ns: dict = {}
    exec(compile(out, "t.py", "exec"), ns)
    bn = ns["get_generator"]().bn1
    # the shift is learned; the scale is a constant 1, neither a parameter nor saved
    assert sorted(n for n, _ in bn.named_parameters()) == ["bias"] and "weight" not in bn.state_dict()
    assert bool((bn.weight == 1).all())


def test_batch_norm_without_scale_computes_what_keras_does(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(GAN_ADA)
    (tmp_path / "t.py").write_text(_tx(GAN_ADA).output)
    for model, spec in (("get_generator", "float32[4,8]"), ("shifted", "float32[4,6,6,3]")):
        cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=[spec],
                              checks=("forward", "grad", "step"), device="cpu", keras=3), Warm.session())
        # (a Keras variable no map moves, or a torch parameter none writes, is a problem: gamma must be absent)
        assert cert["verdict"] == "pass", (model, cert.get("problems") or cert.get("first_diverging"))
        assert cert["results"]["step"], model


CTC = '''
from tensorflow import keras
from tensorflow.keras import layers

rnn_layers = 2


def build_model(input_dim=6, rnn_units=5):
    inputs = layers.Input((7, input_dim))
    x = inputs
    for i in range(1, rnn_layers + 1):
        recurrent = layers.GRU(units=rnn_units, return_sequences=True, reset_after=True, name=f"gru_{i}")
        x = layers.Bidirectional(recurrent, name=f"bidirectional_{i}", merge_mode="concat")(x)
        if i < rnn_layers:
            x = layers.Dropout(rate=0.5)(x)
    return keras.Model(inputs, layers.Dense(3)(x))


def build_also_called():
    # the wrapper copies the layer; the layer called itself later is a layer of its own (weights of its own)
    inputs = layers.Input((7, 6))
    rnn = layers.LSTM(4, return_sequences=True)
    both = layers.Bidirectional(rnn)(inputs)
    one = rnn(inputs)
    return keras.Model(inputs, layers.concatenate([both, one]))
'''

NEVER_CALLED = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_never_called():
    inputs = layers.Input((7, 6))
    rnn = layers.LSTM(4)
    unused = layers.GRU(4)
    return keras.Model(inputs, layers.Bidirectional(rnn)(inputs))
'''


def test_a_bidirectional_given_a_name_bound_to_a_recurrent_layer_wraps_a_copy_of_it():
    r = _tx(CTC)
    assert not _errors(r), _errors(r)
    out = r.output
    assert out.count("nn.GRU(") == 2 and "bidirectional=True" in out
    assert "class AlsoCalled(nn.Module)" in out and out.count("nn.LSTM(6, 4") == 2


def test_a_named_recurrent_layer_under_a_mask_is_the_inline_form():
    src = '''
from tensorflow import keras
from tensorflow.keras import layers

ids = keras.Input(shape=(6,), dtype="int32")
x = layers.Embedding(20, 4, mask_zero=True)(ids)
%s
model = keras.Model(ids, x)
'''
    named = _tx(src % "rnn = layers.GRU(3)\nx = layers.Bidirectional(rnn)(x)")
    inline = _tx(src % "x = layers.Bidirectional(layers.GRU(3))(x)")
    assert not _errors(named) and named.output == inline.output
    assert "x = self.bidirectional(x, mask=ids != 0)" in named.output


def test_a_layer_neither_called_nor_wrapped_stays_refused():
    errors = _errors(_tx(NEVER_CALLED))
    assert len(errors) == 2 and "unused: a layer created but never called" in errors[0], errors


def test_a_bidirectional_given_a_name_bound_to_a_recurrent_layer_computes_what_keras_does(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(CTC)
    (tmp_path / "t.py").write_text(_tx(CTC).output)
    for model in ("build_model", "build_also_called"):
        cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=["float32[2,7,6]"],
                              checks=("forward", "grad"), device="cpu", keras=3), Warm.session())
        assert cert["verdict"] == "pass", (model, cert.get("problems") or cert.get("first_diverging"))


DEFAULT_FACTOR = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers, regularizers


def build():
    inputs = keras.Input(shape=(10,))
    x = layers.Dense(16, activation="tanh", kernel_regularizer=keras.regularizers.L2())(inputs)
    outputs = layers.Dense(3, kernel_regularizer=regularizers.l2(), bias_regularizer=regularizers.L1())(x)
    return keras.Model(inputs, outputs)


model = build()
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])


def train(x, y):
    history = model.fit(x, y, validation_split=0.25, epochs=2, batch_size=16, shuffle=False, verbose=0)
    return history.history, model.evaluate(x, y, verbose=0)
'''


def test_a_regularizer_without_its_factor_is_keras_default(tmp_path):
    r = _tx(DEFAULT_FACTOR)
    assert not _errors(r), _errors(r)
    assert ("        loss = 0.01 * self.fc1.weight.square().sum()\n"
            "        loss = loss + 0.01 * self.fc2.weight.square().sum()\n"
            "        loss = loss + 0.01 * self.fc2.bias.abs().sum()\n") in r.output
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from test_fit_activation_logits import _compare
    from test_fit_regularizers import MODULES_DRIVER
    from test_fit_callbacks import _run
    # trained two epochs by Keras and by the translation from the same weights: histories (the penalty in the
    # loss), evaluate and the kernels agree
    keras_out, torch_out = _run(tmp_path, DEFAULT_FACTOR, MODULES_DRIVER)
    _compare(keras_out, torch_out)


GUIDE = '''
from tensorflow import keras
from tensorflow.keras import layers

inputs = keras.Input(shape=(12,))
"""
Here's the shape:
"""
inputs.shape
inputs.dtype
x = layers.Dense(8, activation="relu")(inputs)
outputs = layers.Dense(3)(x)
model = keras.Model(inputs=inputs, outputs=outputs, name="mnist_model")
'''


def test_a_tensors_shape_shown_alone_is_dropped_with_the_graph(tmp_path):
    r = _tx(GUIDE)
    assert not _errors(r), _errors(r)
    shown = [(f.line, f.message.split(":")[0]) for f in r.findings if f.code == "display-dropped"]
    assert shown == [(9, "inputs.shape"), (10, "inputs.dtype")]
    assert "inputs.shape" not in r.output and "inputs.dtype" not in r.output and "Here's the shape" in r.output
    # read otherwise (a call, an assignment), the tensor is still an error: it does not exist in the translation
    for line in ("print(inputs.shape)", "n = inputs.shape[-1]"):
        errors = _errors(_tx(GUIDE.replace("inputs.dtype", line)))
        assert any("inputs: a tensor or layer of the functional model used by a statement" in e for e in errors), errors
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(GUIDE)
    (tmp_path / "t.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "model", inputs=["float32[4,12]"],
                          checks=("forward", "grad"), device="cpu", keras=3), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
