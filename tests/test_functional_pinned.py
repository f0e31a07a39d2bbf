"""A builder whose structure depends on its parameters (a loop over ``range(num_blocks)`` computed from
``depth``, an ``if`` in the loop, a helper's ``if`` on an argument the builder passes on), refused as written,
is followed for the values every call of the builder in the file gives (keras-io's cutmix ``resnet_v20``,
eanet's ``get_model(attention_type=...)``): the class is that model, and its ``__init__`` raises ValueError for
other values. Where the calls disagree, or the builder is used other than called, the refusal stays."""
from __future__ import annotations

import re

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_messages as _errors
from runners import Warm

# keras-io's cutmix.py, reduced: the residual stacks' count comes from `depth`, a stride per pass
RESNET = '''
from tensorflow import keras


def resnet_layer(inputs, num_filters=4, kernel_size=3, strides=1, activation="relu", batch_normalization=True):
    conv = keras.layers.Conv2D(num_filters, kernel_size=kernel_size, strides=strides, padding="same")
    x = conv(inputs)
    if batch_normalization:
        x = keras.layers.BatchNormalization()(x)
    if activation is not None:
        x = keras.layers.Activation(activation)(x)
    return x


def resnet_v20(input_shape, depth, num_classes=10):
    if (depth - 2) % 6 != 0:
        raise ValueError("depth should be 6n+2")
    num_filters = 4
    num_res_blocks = int((depth - 2) / 6)
    inputs = keras.layers.Input(shape=input_shape)
    x = resnet_layer(inputs=inputs)
    for stack in range(3):
        for res_block in range(num_res_blocks):
            strides = 1
            if stack > 0 and res_block == 0:
                strides = 2
            y = resnet_layer(inputs=x, num_filters=num_filters, strides=strides)
            y = resnet_layer(inputs=y, num_filters=num_filters, activation=None)
            if stack > 0 and res_block == 0:
                x = resnet_layer(inputs=x, num_filters=num_filters, kernel_size=1, strides=strides,
                                 activation=None, batch_normalization=False)
            x = keras.layers.add([x, y])
            x = keras.layers.Activation("relu")(x)
        num_filters *= 2
    x = keras.layers.AveragePooling2D(pool_size=2)(x)
    y = keras.layers.Flatten()(x)
    outputs = keras.layers.Dense(num_classes, activation="softmax")(y)
    return keras.models.Model(inputs=inputs, outputs=outputs)


def training_model():
    return resnet_v20((8, 8, 3), 8)
'''

# keras-io's eanet.py, reduced: the builder passes its parameter to a helper that branches on it
ATTENTION = '''
from tensorflow import keras
from tensorflow.keras import layers


def encoder(x, dim, attention_type="external"):
    h = layers.LayerNormalization(epsilon=1e-5)(x)
    if attention_type == "external":
        h = layers.Dense(dim, activation="relu")(h)
    elif attention_type == "self":
        h = layers.MultiHeadAttention(num_heads=2, key_dim=dim)(h, h)
    return layers.add([x, h])


def get_model(attention_type="external"):
    inputs = layers.Input(shape=(5, 8))
    x = inputs
    for _ in range(2):
        x = encoder(x, 8, attention_type)
    x = layers.GlobalAvgPool1D()(x)
    return keras.Model(inputs, layers.Dense(3)(x))


model = get_model(attention_type="self")
'''


def _tx(src: str, keras: int = 3):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": keras})


def _line(src: str, text: str) -> int:
    return next(i for i, ln in enumerate(src.splitlines(), 1) if text in ln)


def test_a_builder_is_followed_for_the_values_the_file_gives_it():
    r = _tx(RESNET)
    assert not _errors(r), _errors(r)
    out = r.output
    # input_shape and depth decide the structure (the tensors given to the helper, the loop's count);
    # num_classes does not: it stays a parameter
    assert "class ResnetV20(nn.Module):\n    def __init__(self, input_shape, depth, num_classes=10):" in out
    assert ('        if tuple(input_shape) != (8, 8, 3):\n            raise ValueError(f"translated for '
            'input_shape=(8, 8, 3) only (the value this file builds it with), got {input_shape!r}")\n'
            '        if depth != 8:\n') in out
    assert "num_classes != " not in out
    assert "nn.Linear(16, num_classes)" in out
    info = [f for f in r.findings if f.code == "built-for-values"]
    assert len(info) == 1 and "input_shape=(8, 8, 3), depth=8" in info[0].message and info[0].line == _line(RESNET, "return keras.models.Model(")
    # the stacks written out: a projection shortcut where the stride is 2
    assert out.count("ResnetLayer") > 3 and "tensorflow" not in out and "keras" not in out


def test_the_class_raises_for_another_value_and_computes_what_keras_does(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    out = _tx(RESNET).output
    ns: dict = {}
    exec(compile(out, "t.py", "exec"), ns)
    with pytest.raises(ValueError, match="translated for depth=8 only"):
        ns["resnet_v20"]((8, 8, 3), 14)
    with pytest.raises(ValueError, match=r"input_shape=\(8, 8, 3\) only"):
        ns["resnet_v20"]((16, 16, 3), 8)
    (tmp_path / "m.py").write_text(RESNET)
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "resnet_v20((8, 8, 3), 8)",
                          inputs=["float32[2,8,8,3]"], checks=("forward", "grad"), device="cpu", keras=3), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    grads = {e["name"] for e in cert["results"]["gradients"]}
    assert len(grads) == 4 * (1 + 3 * 2) + 2 * 2 + 2  # conv and BN per resnet_layer, two 1x1 shortcuts, the head


def test_a_helpers_if_on_the_builders_parameter_is_decided_by_the_files_call(tmp_path):
    r = _tx(ATTENTION)
    assert not _errors(r), _errors(r)
    out = r.output
    # the helper's class for "self": the attention branch, no Dense; the builder's class checks the value
    assert "self.multi_head_attention = KerasMultiHeadAttention(2, 8)" in out and "nn.Linear(8, 8)" not in out
    assert "class Model(nn.Module):\n    def __init__(self, attention_type=\"external\"):\n        super().__init__()\n" \
           "        if attention_type != \"self\":\n" in out
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(ATTENTION)
    (tmp_path / "t.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), 'get_model("self")',
                          inputs=["float32[3,5,8]"], checks=("forward", "grad"), device="cpu", keras=3), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


def test_calls_that_disagree_or_a_builder_used_as_a_value_keep_the_refusal():
    undecided = "`attention_type` cannot be decided where the model is built"
    two = _tx(ATTENTION + 'other = get_model(attention_type="external")\n')
    assert any(undecided in m for m in _errors(two)), _errors(two)
    assert any("left as written" in m for m in _errors(two))
    assert not [f for f in two.findings if f.code == "built-for-values"]
    as_value = _tx(ATTENTION + "builders = [get_model]\n")
    assert any(undecided in m for m in _errors(as_value)), _errors(as_value)
    # no call at all: nothing to build it for
    none = _tx(ATTENTION.replace('model = get_model(attention_type="self")\n', ""))
    assert any(undecided in m for m in _errors(none)), _errors(none)


# cutmix's resnet_layer has kernel_regularizer=l2(1e-4); the head's factor is a parameter of the builder
REGULARIZED = RESNET.replace('strides=strides, padding="same")',
                             'strides=strides, padding="same",\n'
                             '                                kernel_regularizer=keras.regularizers.l2(1e-4))') \
    .replace("def resnet_v20(input_shape, depth, num_classes=10):",
             "def resnet_v20(input_shape, depth, num_classes=10, wd=1e-3):") \
    .replace('keras.layers.Dense(num_classes, activation="softmax")',
             'keras.layers.Dense(num_classes, activation="softmax", kernel_regularizer=keras.regularizers.l2(wd))')


def test_regularizers_of_a_functional_models_layers_are_its_classes_penalties_as_keras_computes_them():
    r = _tx(REGULARIZED)
    assert not _errors(r), _errors(r)
    out = r.output
    assert "kernel_regularizer" not in out and "keras" not in out
    # one method per class (a helper's class shared by call sites has one), the builder's factor kept on the module
    assert out.count("def regularization_loss(self):") == len(re.findall(r"^class ResnetLayer\d*\(", out, re.M)) + 1
    assert "self.wd = wd" in out and "loss = self.wd * self.fc.weight.square().sum()" in out
    said = [f for f in r.findings if f.code == "idiom-replaced" and "regularization_loss()" in f.message]
    calls = {i for i, ln in enumerate(REGULARIZED.splitlines(), 1) if "= resnet_layer(" in ln or "layers.Dense(" in ln}
    assert said and {f.line for f in said} <= calls  # at the helpers' call sites, the Dense of the builder
    tf = pytest.importorskip("tensorflow")
    torch = pytest.importorskip("torch")
    import numpy as np
    kns: dict = {}
    exec(compile(REGULARIZED, "m.py", "exec"), kns)
    tns: dict = {}
    exec(compile(out, "t.py", "exec"), tns)
    kmodel, tmodel = kns["resnet_v20"]((8, 8, 3), 8), tns["resnet_v20"]((8, 8, 3), 8)
    moved = 0
    with torch.no_grad():  # the kernels moved by the records (conv: (kh, kw, in, out) → (out, in, kh, kw))
        for rec in r.layers:
            if rec.rule not in ("conv2d", "dense"):
                continue
            kernel = kmodel.layers[int(rec.source[len("layers["):-1])].kernel.numpy()
            w = kernel.transpose(3, 2, 0, 1) if rec.rule == "conv2d" else kernel.T
            tmodel.get_submodule(rec.target).weight.copy_(torch.from_numpy(np.ascontiguousarray(w)))
            moved += 1
    assert moved == 1 + 3 * 2 + 2 + 1
    keras_penalty = float(sum(float(v) for v in kmodel.losses))
    torch_penalty = float(sum(m.regularization_loss() for m in tmodel.modules() if hasattr(m, "regularization_loss")))
    assert keras_penalty > 0 and abs(keras_penalty - torch_penalty) <= 1e-5 * keras_penalty, (keras_penalty,
                                                                                            torch_penalty)
    x = np.random.default_rng(0).standard_normal((2, 8, 8, 3)).astype("float32")
    tf.random.set_seed(0)
    assert tmodel(torch.from_numpy(x)).shape == tuple(kmodel(tf.constant(x)).shape)


MODULE_LEVEL = '''
from tensorflow import keras
from tensorflow.keras import layers


def block(x, units):
    return layers.Dense(units, activation="relu", kernel_regularizer=keras.regularizers.l2(1e-3))(x)


inputs = keras.Input(shape=(4,))
x = block(inputs, 8)
outputs = layers.Dense(2)(block(x, 6))
model = keras.Model(inputs, outputs)
'''


def test_a_helpers_regularizer_in_a_module_level_model_is_its_classs_penalty():
    # (a module-level model's helpers: their penalties had been taken off the layers and never written)
    r = _tx(MODULE_LEVEL)
    assert not _errors(r), _errors(r)
    # one class per variant (8 and 6 units), each with its own layer's penalty once
    assert r.output.count("loss = 1e-3 * self.fc.weight.square().sum()") == 2 == r.output.count("class Block")
    tf = pytest.importorskip("tensorflow")
    torch = pytest.importorskip("torch")
    import numpy as np
    kns: dict = {}
    exec(compile(MODULE_LEVEL, "m.py", "exec"), kns)
    tns: dict = {}
    exec(compile(r.output, "t.py", "exec"), tns)
    kmodel, tmodel = kns["model"], tns["model"]
    with torch.no_grad():
        for rec in r.layers:
            kernel = kmodel.layers[int(rec.source[len("layers["):-1])].kernel.numpy()
            tmodel.get_submodule(rec.target).weight.copy_(torch.from_numpy(np.ascontiguousarray(kernel.T)))
    assert len(r.layers) == 3
    keras_penalty = float(sum(float(v) for v in kmodel.losses))
    torch_penalty = float(sum(m.regularization_loss() for m in tmodel.modules() if hasattr(m, "regularization_loss")))
    assert keras_penalty > 0 and abs(keras_penalty - torch_penalty) <= 1e-5 * keras_penalty
    x = np.random.default_rng(1).standard_normal((3, 4)).astype("float32")
    assert tmodel(torch.from_numpy(x)).shape == tuple(kmodel(tf.constant(x)).shape)
