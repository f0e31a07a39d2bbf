"""Sizes and layer arguments known only where a model is built (issue 8, keras-io's convmixer and
depth_estimation): a DepthwiseConv2D whose channels and kernel size are a builder's parameters, and a
subclass layer's ``padding`` given as its constructor's parameter. Each translation is run against
Keras (weights transferred by the rules' maps); what stays refused keeps an error on its line."""
from __future__ import annotations

import textwrap
from collections import Counter

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_counts as errors
from runners import Warm

PACK = load_pack("tf2torch")


def tx(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)


def verified(tmp_path, src: str, out: str, model: str, inputs: list[str]) -> dict:
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=inputs,
                          checks=("forward", "grad"), device="cpu"), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    return {e["name"]: e["source"] for e in cert["results"]["gradients"]}


CONVMIXER = '''
from tensorflow import keras
from tensorflow.keras import layers


def activation_block(x):
    x = layers.Activation("gelu")(x)
    return layers.BatchNormalization()(x)


def conv_stem(x, filters: int, patch_size: int):
    x = layers.Conv2D(filters, kernel_size=patch_size, strides=patch_size)(x)
    return activation_block(x)


def conv_mixer_block(x, filters: int, kernel_size: int):
    x0 = x
    x = layers.DepthwiseConv2D(kernel_size=kernel_size, padding="same"{dm})(x)
    x = layers.Add()([activation_block(x), x0])
    x = layers.Conv2D(filters, kernel_size=1)(x)
    x = activation_block(x)
    return x


def get_conv_mixer(image_size=8, filters=6, depth=2, kernel_size=3, patch_size=2, num_classes=4):
    inputs = keras.Input((image_size, image_size, 3))
    x = layers.Rescaling(scale=1.0 / 255)(inputs)
    x = conv_stem(x, filters, patch_size)
    for _ in range(depth):
        x = conv_mixer_block(x, filters, kernel_size)
    x = layers.GlobalAvgPool2D()(x)
    outputs = layers.Dense(num_classes, activation="softmax")(x)
    return keras.Model(inputs, outputs)
'''


def test_depthwise_conv_with_channels_and_kernel_size_from_the_builder_verifies(tmp_path):
    src = CONVMIXER.format(dm="").lstrip("\n")
    r = translate_source(src, "m.py", PACK)
    assert not errors(r), r.findings
    # the groups are the channels the builder's parameter gives; the kernel size its parameter
    assert "nn.Conv2d(x_size3, x_size3, kernel_size, padding=\"same\", groups=x_size3)" in r.output
    grads = verified(tmp_path, src, r.output, "get_conv_mixer()", ["float32[2,8,8,3]"])
    # every depthwise kernel was moved by the map without sizes, and its gradient compared
    assert sum(".depthwise_conv2d.weight" in name for name in grads) == 2, grads


def test_depthwise_conv_with_a_kernel_size_parameter_and_a_depth_multiplier_stays_refused():
    r = translate_source(CONVMIXER.format(dm=", depth_multiplier=2").lstrip("\n"), "m.py", PACK)
    msgs = [f for f in r.findings if f.severity.value == "error"]  # a helper's error is at its call site
    assert any(f.line == 29 and "kernel_size and depth_multiplier must be literal ints" in f.message for f in msgs), msgs


SEPARABLE = '''
from tensorflow import keras
from tensorflow.keras import layers


def block(x, filters):
    x = layers.Conv2D(filters, 1)(x)
    x = layers.SeparableConv2D(5, 3, padding="same", depth_multiplier=2)(x)
    return layers.BatchNormalization()(x)


def build(filters=4):
    inputs = keras.Input(shape=(6, 6, 3))
    return keras.Model(inputs, block(inputs, filters))
'''


def test_separable_conv_on_channels_a_builder_parameter_gives_verifies(tmp_path):
    src = SEPARABLE.lstrip("\n")
    r = translate_source(src, "m.py", PACK)
    assert not errors(r), r.findings
    assert "nn.Conv2d(filters, filters * 2, 3, padding=\"same\", groups=filters, bias=False), " \
           "nn.Conv2d(filters * 2, 5, 1)" in r.output
    grads = verified(tmp_path, src, r.output, "build()", ["float32[2,6,6,3]"])
    assert any(name.endswith("separable_conv2d.0.weight") for name in grads), grads


PADDING = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


class DownscaleBlock(layers.Layer):
    def __init__(self, filters, kernel_size=(3, 3), padding="same", strides=1, **kwargs):
        super().__init__(**kwargs)
        self.convA = layers.Conv2D(filters, kernel_size, strides, padding)
        self.convB = layers.Conv2D(filters, kernel_size, strides, padding)
        self.reluA = layers.LeakyReLU(alpha=0.2)
        self.bn2a = tf.keras.layers.BatchNormalization()
        self.pool = layers.MaxPool2D((2, 2), (2, 2))

    def call(self, input_tensor):
        d = self.convA(input_tensor)
        x = self.bn2a(d)
        x = self.reluA(x)
        x = self.convB(x)
        x += d
        p = self.pool(x)
        return x, p


class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.blocks = [DownscaleBlock(4), DownscaleBlock(6, padding={second})]{extra}
        self.head = layers.Conv2D(2, 1)

    def call(self, x):
        c1, p1 = self.blocks[0](x)
        c2, p2 = self.blocks[1](p1)
        return self.head(p2)
'''


def test_a_padding_parameter_is_translated_for_the_value_the_file_builds_the_block_with(tmp_path):
    # keras-io depth_estimation: padding="same" a parameter of the block, given positionally to Conv2D
    src = PADDING.format(second='"same"', extra="").lstrip("\n")
    r = translate_source(src, "m.py", PACK)
    assert not errors(r), r.findings
    assert r.output.count("SamePad2d(kernel_size, strides)") == 2  # the stride is a parameter: TF's pads per call
    assert 'if padding != "same":\n            raise ValueError' in r.output
    verified(tmp_path, src, r.output, "Net()", ["float32[2,8,8,3]"])
    # another value than the one translated for is refused where the block is built, never computed wrongly
    torch = pytest.importorskip("torch")
    ns: dict = {}
    exec(compile(r.output, "t.py", "exec"), ns)
    with pytest.raises(ValueError, match="translated for padding='same' only"):
        ns["DownscaleBlock"](3, padding="valid")
    assert isinstance(ns["DownscaleBlock"](3), torch.nn.Module)


def test_a_padding_parameter_built_with_different_values_stays_refused_on_each_layer():
    src = PADDING.format(second='"same"', extra='\n        self.valid = DownscaleBlock(5, kernel_size=2, padding="valid")')
    r = translate_source(src.lstrip("\n"), "m.py", PACK)
    assert errors(r) == Counter({("unsupported-argument", 9): 1, ("unsupported-argument", 10): 1}), r.findings
    assert all("padding=padding has no exact torch equivalent" in f.message for f in r.findings
               if f.severity.value == "error")


CONDITIONAL_PADDING = '''
from tensorflow import keras
from tensorflow.keras import layers


def block(x, filters, strides=1):
    x = layers.Conv2D(filters, 3, strides=strides, padding="same" if strides == 1 else "valid")(x)
    return layers.DepthwiseConv2D(3, strides=strides, padding="same" if strides == 1 else "valid")(x)


def build():
    inputs = keras.Input(shape=(9, 9, 3))
    x = block(inputs, 4)
    x = block(x, 6, strides=2)
    return keras.Model(inputs, x)
'''


def test_a_padding_chosen_by_a_helper_argument_is_the_branch_its_call_takes(tmp_path):
    # keras-io mobilevit: padding="same" if strides == 1 else "valid" in a block helper
    src = CONDITIONAL_PADDING.lstrip("\n")
    r = translate_source(src, "m.py", PACK)
    assert not errors(r), r.findings
    assert r.output.count('padding="same"') == 2 and "padding=" not in r.output.split("class Block2")[1].split(
        "def forward")[0], r.output
    verified(tmp_path, src, r.output, "build()", ["float32[2,9,9,3]"])


PATCH_EMBED = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


class PatchEmbed(keras.Model):
    def __init__(self, projection_dim, patch_size):
        super().__init__()
        self.projection = keras.Sequential(
            [
                layers.Conv2D(filters=projection_dim, kernel_size=(patch_size, patch_size),
                              strides=(patch_size, patch_size), padding="VALID"),
                layers.Reshape(target_shape=(-1, projection_dim)),
            ]
        )
        self.norm = layers.LayerNormalization(epsilon=1e-6)
        self.head = layers.Dense(3)

    def call(self, x):
        x = self.projection(x)
        x = self.norm(x)
        return self.head(tf.reduce_mean(x, axis=1))
'''


def test_a_patch_embedding_sequential_with_sizes_from_init_verifies(tmp_path):
    # keras-io cait / vit: Conv2D(d, p, strides=p) then Reshape((-1, d)) in a Sequential held by a subclass;
    # the chain is channels-first, its Reshape (sizes known only when the model is built) reshapes in
    # Keras's order, and the subclass body gets its (batch, patches, d) sequence back
    src = PATCH_EMBED.lstrip("\n")
    r = translate_source(src, "m.py", PACK)
    assert not errors(r), r.findings
    assert "ChannelsLastReshape((-1, projection_dim))" in r.output
    assert "x = self.projection(x.permute(0, 3, 1, 2)).permute(0, 2, 1)" in r.output
    verified(tmp_path, src, r.output, "PatchEmbed(8, 2)", ["float32[2,8,8,3]"])


def test_a_reshape_to_a_shape_not_written_in_a_channels_first_sequential_stays_refused():
    src = PATCH_EMBED.replace("target_shape=(-1, projection_dim)", "target_shape=self.shape").lstrip("\n")
    r = translate_source(src, "m.py", PACK)
    assert errors(r) == Counter({("unsupported-construct", 13): 1, ("shape-unknown", 20): 1}), r.findings


FLATTEN = '''
from tensorflow import keras
from tensorflow.keras import layers


def build(size=12, channels=3):
    inputs = keras.Input(shape=(size, size, channels))
    x = layers.Conv2D(4, 3, padding="same", activation="relu")(inputs)
    x = layers.MaxPooling2D(2)(x)
    x = layers.Flatten()(x)
    x = layers.Dense(5, activation="relu")(x)
    return keras.Model(inputs, layers.Dense(2)(x))


class Net(keras.Model):
    def __init__(self, filters):
        super().__init__()
        self.features = keras.Sequential([layers.Conv2D(filters, 3), layers.MaxPooling2D(2), layers.Flatten(),
                                          layers.Dense(3)])

    def call(self, x):
        return self.features(x)
'''


@pytest.mark.parametrize("model, image", [("build(13)", "float32[2,13,13,3]"), ("Net(4)", "float32[2,10,10,3]")])
def test_flatten_of_a_map_whose_sizes_are_known_only_when_built_keeps_keras_order(tmp_path, model, image):
    # keras-io speaker_recognition: Flatten of a map sized by the builder's parameters, then Dense; the
    # Dense's rows cannot be reordered without numbers, so the map is flattened in Keras's order
    src = FLATTEN.lstrip("\n")
    r = translate_source(src, "m.py", PACK)
    assert not errors(r), r.findings
    assert r.output.count("ChannelsLastReshape((-1,))") == 2
    # the Dense after it is lazy: a size written with names may not be valid where it is built (a
    # helper's own size names, keras-io speaker_recognition)
    assert "self.fc1 = nn.LazyLinear(5)" in r.output and "nn.LazyLinear(3)" in r.output
    verified(tmp_path, src, r.output, model, [image])


def test_a_size_times_a_floor_division_keeps_its_parentheses():
    from fwport.packs.tf2torch import dims as D
    for h in range(1, 12):
        text = D.prod([D.floordiv("h", 2), D.floordiv("h", 2), 4])
        assert eval(text, {"h": h}) == (h // 2) * (h // 2) * 4, text
        assert eval(D.mul("h", D.ceildiv("h", 3)), {"h": h}) == h * -(-h // 3)


def test_a_sequential_without_input_sizes_flattens_in_keras_order(tmp_path):
    # the model of test_sequential.py's test_unknown_input_size_gives_lazy_modules_or_errors, run
    src = ("from tensorflow.keras import layers, Sequential\n"
           "m = Sequential([layers.Conv2D(4, 3), layers.Conv2D(4, 3, strides=2, padding=\"same\"), layers.Flatten(), "
           "layers.Dense(3)])\n")
    r = translate_source(src, "m.py", PACK)
    assert not errors(r), r.findings
    verified(tmp_path, src, r.output, "m", ["float32[2,9,8,3]"])


def test_flatten_of_a_3d_feature_map_keeps_keras_order(tmp_path):
    src = ("from tensorflow import keras\nfrom tensorflow.keras import layers\n\n\n"
           "def build():\n"
           "    inputs = keras.Input(shape=(4, 5, 6, 2))\n"
           "    x = layers.Conv3D(3, 2)(inputs)\n"
           "    return keras.Model(inputs, layers.Dense(4)(layers.Flatten()(x)))\n")
    r = translate_source(src, "m.py", PACK)
    assert not errors(r), r.findings
    assert "ChannelsLastReshape((-1,))" in r.output
    verified(tmp_path, src, r.output, "build()", ["float32[2,4,5,6,2]"])


SPEAKER = '''
from tensorflow import keras


def residual_block(x, filters):
    s = keras.layers.Conv1D(filters, 1, padding="same")(x)
    x = keras.layers.Conv1D(filters, 3, padding="same")(x)
    x = keras.layers.Add()([x, s])
    return keras.layers.MaxPool1D(pool_size=2, strides=2)(x)


def build_model(input_shape, num_classes):
    inputs = keras.layers.Input(shape=input_shape, name="input")
    x = residual_block(inputs, 4)
    x = residual_block(x, 6)
    x = keras.layers.AveragePooling1D(pool_size=3, strides=3)(x)
    x = keras.layers.Flatten()(x)
    outputs = keras.layers.Dense(num_classes, activation="softmax", name="output")(x)
    return keras.models.Model(inputs=inputs, outputs=outputs)
'''


def test_flatten_after_helpers_whose_sizes_are_their_own_names_verifies(tmp_path):
    # keras-io speaker_recognition: the flattened size is known only in a helper's own names (x_size1 ...),
    # which do not exist where the Dense is built: the Dense is lazy, the map flattened in Keras's order
    src = SPEAKER.lstrip("\n")
    r = translate_source(src, "m.py", PACK)
    assert not errors(r), r.findings
    assert "self.output = nn.LazyLinear(num_classes)" in r.output and "x_size" not in r.output.split(
        "class Model")[1]
    verified(tmp_path, src, r.output, "build_model((26, 2), 3)", ["float32[2,26,2]"])


def test_channels_written_with_names_only_where_every_name_may_be_written():
    from fwport.core.engine import LayerContext
    from fwport.packs.tf2torch.dims import Sizes, SizedContext
    from fwport.packs.tf2torch.layer import _writable
    lctx = SizedContext(None, "keep", "m", "", sizes=Sizes({"C": 3}, {"filters", "input_shape"}))
    assert _writable("filters * 2", lctx) and _writable("input_shape[-1]", lctx) and _writable("C + filters", lctx)
    assert not _writable("x_size1 // 2", lctx)  # a helper's own size name: not defined here
    assert not _writable(4, lctx) and not _writable("filters", LayerContext(None, "keep"))
