"""Convolutional models of issue 8 that fwport used to refuse: a Sequential of blocks collected in
a list, and the layers and patterns around them. Each translation is checked numerically against
Keras (tests/conv_numerics.py: one TensorFlow and one torch subprocess per model)."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

from conv_numerics import assert_close, compare_model, compare_weightless
from helpers import error_summaries as errors

PACK = load_pack("tf2torch")


def tx(src: str):
    src = textwrap.dedent(src).lstrip("\n")
    r = translate_source(src, "model.py", PACK)
    again = translate_source(r.output, "model.py", PACK)
    assert again.output == r.output, "translating the output again must change nothing"
    return src, r


STAGES = '''
import tensorflow as tf

class Block(tf.keras.Model):
    def __init__(self, c, strides=1):
        super().__init__()
        self.conv = tf.keras.layers.Conv2D(c, 3, strides=strides, padding="same")
        self.bn = tf.keras.layers.BatchNormalization()

    def call(self, x, training=False):
        return tf.nn.relu(self.bn(self.conv(x), training=training))


class Net(tf.keras.Model):
    def __init__(self, block, n):
        super().__init__()
        self.stage = self._make(block, 8, n)
        self.head = tf.keras.layers.Dense(3)

    def _make(self, block, c, n):
        layers = []
        for s in [2] + [1] * (n - 1):
            layers.append(block(c, s))
        return tf.keras.Sequential(layers)

    def call(self, x, training=False):
        out = self.stage(x, training=training)
        out = tf.reduce_mean(out, axis=[1, 2])
        return self.head(out)


def build():
    return Net(Block, 3)
'''


def test_sequential_of_blocks_collected_in_a_loop():
    src, r = tx(STAGES)
    assert errors(r) == []
    assert "return nn.Sequential(*layers)" in r.output
    # a method that returns a Sequential holds a torch module: its calls lose training=
    assert "out = self.stage(x)" in r.output
    info = [f.message for f in r.findings if "nn.Sequential(*layers)" in f.message]
    assert info and "block is passed in" in info[0]
    k, t = compare_model(src, r.output, "build()", (2, 9, 10, 3))
    assert_close(k, t)


@pytest.mark.parametrize("body, why", [
    ("layers = []\n        layers.append(tf.keras.layers.Conv2D(4, 3))\n        return tf.keras.Sequential(layers)",
     "is a Keras layer built by a rule"),
    ("return tf.keras.Sequential(layers)", "is passed in"),
    ("layers = []\n        layers.append(Block(4))\n        self.keep = layers\n        return tf.keras.Sequential(layers)",
     "used otherwise than"),
])
def test_lists_that_cannot_be_followed_are_refused_precisely(body, why):
    src = STAGES.replace('''layers = []
        for s in [2] + [1] * (n - 1):
            layers.append(block(c, s))
        return tf.keras.Sequential(layers)''', body)
    if "is passed in" in why:
        src = src.replace("def _make(self, block, c, n):", "def _make(self, layers, c, n):")
    _, r = tx(src)
    errs = errors(r)
    assert any("keras.Sequential(layers)" in e and why in e for e in errs), errs
    assert "tf.keras.Sequential(layers)" in r.output  # left as written


UNET_INPUT = '''
from tensorflow import keras
from tensorflow.keras import layers

img_size = (12, 10)


def get_model(img_size, num_classes):
    inputs = keras.Input(shape=img_size + (3,))
    x = layers.Conv2D(8, 3, strides=2, padding="same")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
    x = layers.Conv2DTranspose(8, 3, padding="same")(x)
    x = layers.UpSampling2D(2)(x)
    outputs = layers.Conv2D(num_classes, 3, activation="softmax", padding="same")(x)
    return keras.Model(inputs, outputs)
'''


def test_input_shape_joined_from_a_parameter_and_literal_sizes():
    # the rank comes from the first Conv2D, the channel count from the literal part; the max pooling's
    # 'same' padding depends on the parity of sizes known only at run time: computed at each call
    src, r = tx(UNET_INPUT)
    assert errors(r) == []
    assert "class Model(nn.Module):" in r.output and "nn.Conv2d(3, 8, 3, stride=2)" in r.output
    assert "# inputs: (batch, img_size[0], img_size[-1], 3) channels-last as in Keras, made channels-first once " \
        "here" in r.output
    assert "inputs = inputs.permute(0, 3, 1, 2)" in r.output and "return outputs.permute(0, 2, 3, 1)" in r.output
    assert "nn.Sequential(MaxPoolSamePad2d(3, 2), nn.MaxPool2d(3, stride=2))" in r.output
    assert 'return F.pad(x, pads, value=float("-inf"))' in r.output
    # the parameter first: its last size is the channel count
    _, r2 = tx(UNET_INPUT.replace("img_size + (3,)", "(3,) + img_size"))
    assert errors(r2) == [] and "nn.LazyConv2d(8, 3, stride=2)" not in r2.output
    assert "nn.Conv2d(img_size[-1], 8, 3, stride=2)" in r2.output
    # the translated model takes and returns Keras's channels-last tensors
    k, t = compare_model(src, r.output, "get_model(img_size, 4)", (2, 12, 10, 3))
    assert_close(k, t)


# --- padding and cropping layers: each against Keras, channels-first in the translation ------------------

PAD_CROP = [
    ("layers.ZeroPadding1D((1, 2))", (2, 5, 3), "nn.ZeroPad1d((1, 2))"),
    ("layers.ZeroPadding1D(2)", (2, 5, 3), "nn.ZeroPad1d(2)"),
    ("layers.ZeroPadding3D((1, 2, 3))", (2, 4, 5, 6, 2), "nn.ZeroPad3d((3, 3, 2, 2, 1, 1))"),
    ("layers.ZeroPadding3D(((1, 0), (0, 2), (3, 1)))", (2, 4, 5, 6, 2), "nn.ZeroPad3d((3, 1, 0, 2, 1, 0))"),
    ("layers.Cropping1D((2, 1))", (2, 7, 3), "nn.ZeroPad1d((-2, -1))"),
    ("layers.Cropping2D(((1, 0), (2, 3)))", (2, 8, 9, 4), "nn.ZeroPad2d((-2, -3, -1, 0))"),
    ("layers.Cropping2D(2)", (2, 8, 9, 4), "nn.ZeroPad2d(-2)"),
    ("layers.Cropping3D(((1, 1), (0, 2), (2, 0)))", (2, 5, 6, 7, 2), "nn.ZeroPad3d((-2, 0, 0, -2, -1, -1))"),
]


def test_padding_and_cropping_layers_match_keras():
    cases, expected = [], []
    for layer, shape, module in PAD_CROP:
        src, r = tx(f'''
            from tensorflow import keras
            from tensorflow.keras import layers

            def build():
                return keras.Sequential([keras.Input(shape={shape[1:]}), {layer}])
        ''')
        assert errors(r) == [], (layer, errors(r))
        assert module in r.output, (layer, r.output)
        cases.append(dict(original=src, translated=r.output, build="build()", shape=list(shape),
                          layout_in="nchw", layout_out="nchw"))
    for (layer, _, _), (k, t) in zip(PAD_CROP, compare_weightless(cases)):
        assert k.shape == t.shape and abs(k - t).max() == 0, layer


def test_zero_padding_written_as_size_expressions_matches_keras():
    # padding=(k // 2, k // 2) with k a parameter: the same pads as text, in torch's (left, right, top, bottom)
    src, r = tx('''
        from tensorflow import keras
        from tensorflow.keras import layers

        def build(k, w):
            return keras.Sequential([keras.Input(shape=(5, 6, 3)), layers.ZeroPadding2D(padding=(k // 2, w))])
    ''')
    assert errors(r) == [], errors(r)
    assert "nn.ZeroPad2d((w, w, (k // 2), (k // 2)))" in r.output, r.output
    [(k, t)] = compare_weightless([dict(original=src, translated=r.output, build="build(5, 1)", shape=[2, 5, 6, 3],
                                        layout_in="nchw", layout_out="nchw")])
    assert k.shape == t.shape == (2, 9, 8, 3) and abs(k - t).max() == 0


def test_channels_first_sequential_not_held_as_an_attribute_is_an_error():
    # appended to a list (or bound to a local name) in a subclass: no call of it can be found to permute around,
    # and the channels-last body would feed the NCHW modules NHWC maps
    _, r = tx('''
        from tensorflow import keras
        from tensorflow.keras import layers

        class L(layers.Layer):
            def __init__(self, dim):
                super().__init__()
                self.blocks = []
                for i in range(2):
                    self.blocks.append(keras.Sequential([layers.ZeroPadding2D(1), layers.Conv2D(dim, 3)]))
                self.held = keras.Sequential([layers.Conv2D(dim, 3)])

            def call(self, x):
                return self.blocks[0](x) + self.held(x)
    ''')
    assert len([e for e in errors(r) if "not held as self.<attribute>" in e]) == 1, errors(r)
    assert "self.held(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)" in r.output


def test_cropping_everything_is_refused():
    _, r = tx('''
        from tensorflow import keras
        from tensorflow.keras import layers

        m = keras.Sequential([keras.Input(shape=(4, 4, 1)), layers.Cropping2D(2)])
    ''')
    assert any("leaves nothing" in e for e in errors(r)), errors(r)


def test_reshape_between_feature_maps_in_a_channels_first_functional_model():
    # Keras reshapes in (h, w, c) order: the helper puts the map back channels-last around its reshape
    src, r = tx('''
        from tensorflow import keras
        from tensorflow.keras import layers

        def build():
            inputs = keras.Input(shape=(8, 6, 4))
            x = layers.MaxPooling2D(2)(inputs)
            x = layers.Reshape((6, 2, 4))(x)
            x = layers.ZeroPadding2D(1)(x)
            y = layers.Reshape((-1, 8))(x)
            return keras.Model(inputs, y)
    ''')
    assert errors(r) == []
    assert "ChannelsLastReshape((6, 2, 4))" in r.output and "ChannelsLastReshape((-1, 8))" in r.output
    assert "class ChannelsLastReshape(nn.Module):" in r.output
    [(k, t)] = compare_weightless([dict(original=src, translated=r.output, build="build()", shape=[2, 8, 6, 4],
                                        layout_in="same", layout_out="same")])
    assert k.shape == t.shape == (2, 16, 8) and abs(k - t).max() == 0


# --- regularizers: Keras's penalties as a method of the module ----------------------------------------------

REGULARIZED = '''
import tensorflow as tf

l2 = tf.keras.regularizers.l2
WD = 1e-3


class Block(tf.keras.Model):
    def __init__(self, filters, weight_decay=1e-2, bottleneck=False):
        super().__init__()
        self.conv = tf.keras.layers.Conv2D(filters, 3, strides=2, padding="same",
                                           kernel_regularizer=l2(weight_decay), bias_regularizer="l1")
        if bottleneck:
            self.proj = tf.keras.layers.Conv2D(filters, 1, kernel_regularizer=tf.keras.regularizers.l2(WD))
        self.fc = tf.keras.layers.Dense(3, kernel_regularizer=tf.keras.regularizers.L1(l1=0.5))
        self.bottleneck = bottleneck

    def call(self, x):
        x = self.conv(x)
        if self.bottleneck:
            x = self.proj(x)
        x = tf.reduce_mean(x, axis=[1, 2])
        return self.fc(x)


class Net(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.a = Block(4, bottleneck=True)
        self.b = tf.keras.layers.Dense(2, kernel_regularizer=l2(0.1), bias_regularizer=None)

    def call(self, x):
        return self.b(self.a(x))
'''


def test_regularizers_become_a_penalty_method_equal_to_keras_losses():
    src, r = tx(REGULARIZED)
    assert errors(r) == []
    out = r.output
    assert "tensorflow" not in out and "# l2 = tf.keras.regularizers.l2" in out
    assert "kernel_regularizer" not in out and "self.weight_decay = weight_decay" in out
    assert "loss = self.weight_decay * self.conv[1].weight.square().sum()" in out
    assert '"""Keras\'s weight regularizer penalties (kernel, bias, embeddings) of this module\'s own layers (add to the loss)."""' in out
    assert "loss = loss + 0.01 * self.conv[1].bias.abs().sum()" in out  # "l1": Keras's default factor
    assert 'if hasattr(self, "proj"):' in out and "loss = loss + WD * self.proj.weight.square().sum()" in out
    said = [f.message for f in r.findings if f.code == "idiom-replaced"]
    assert len(said) == 4 and all("model.modules()" in m for m in said)
    k, t, k_pen, t_pen = compare_model(
        src, out, "Net()", (2, 7, 6, 3), keras_value="sum(float(l) for l in model.losses)",
        torch_value="sum(m.regularization_loss() for m in model.modules() if hasattr(m, 'regularization_loss'))")
    assert_close(k, t)
    assert k_pen > 0 and abs(k_pen - t_pen) <= 1e-5 * k_pen, (k_pen, t_pen)


def test_an_embeddings_regularizer_is_a_penalty_on_the_embedding_weight():
    """Embedding(embeddings_regularizer=l2(1e-6)) (keras-io's collaborative filtering) had been refused: it is a
    term of regularization_loss(), Keras's l2 (the factor times the sum of squares, no 1/2)."""
    src, r = tx('''
import tensorflow as tf
from tensorflow import keras


class Recommender(keras.Model):
    def __init__(self, n_users, size):
        super().__init__()
        self.users = keras.layers.Embedding(n_users, size, embeddings_regularizer=keras.regularizers.l2(1e-2))
        self.score = keras.layers.Dense(1)

    def call(self, ids):
        return self.score(self.users(ids))
''')
    assert errors(r) == []
    assert "loss = 1e-2 * self.users.weight.square().sum()" in r.output
    assert any("embeddings: l2(1e-2)" in f.message for f in r.findings if f.code == "idiom-replaced")
    torch = pytest.importorskip("torch")
    ns: dict = {}
    exec(compile(r.output, "t.py", "exec"), ns)
    model = ns["Recommender"](5, 3)
    want = 1e-2 * float((model.users.weight.detach().double() ** 2).sum())
    assert abs(float(model.regularization_loss()) - want) <= 1e-6 * want
    assert model(torch.tensor([[1, 4]])).shape == (1, 2, 1)


def test_regularizers_fwport_cannot_translate_stay_errors():
    # (not translated twice: a refused layer's nested keras.regularizers.l2(...) gains a no-rule comment
    # on a second translation, as on main)
    r = translate_source(textwrap.dedent('''
        import tensorflow as tf

        class Block(tf.keras.Model):
            def __init__(self, reg, wd):
                super().__init__()
                wd = wd * 2
                self.a = tf.keras.layers.Dense(3, kernel_regularizer=reg)
                self.b = tf.keras.layers.Dense(3, kernel_regularizer=tf.keras.regularizers.l2(wd))
                self.c = tf.keras.layers.Dense(3, activity_regularizer="l2")
                self.d = [tf.keras.layers.Dense(3, kernel_regularizer="l2")]  # a list element: not followed

            def call(self, x):
                return self.c(self.b(self.a(x)))
    '''), "model.py", PACK)
    errs = errors(r)
    assert len([e for e in errs if "regularizer" in e]) == 4, errs
    assert "regularization_loss" not in r.output


# --- data_format given as a constructor parameter ----------------------------------------------------------

DATA_FORMAT = '''
import tensorflow as tf


class Unit(tf.keras.Model):
    def __init__(self, filters, data_format):
        super().__init__()
        axis = -1 if data_format == "channels_last" else 1
        self.bn = tf.keras.layers.BatchNormalization(axis=axis)
        self.conv = tf.keras.layers.Conv2D(filters, 3, padding="same", data_format=data_format)
        self.pool = tf.keras.layers.AveragePooling2D(2, data_format=data_format)

    def call(self, x, training=False):
        return self.pool(self.conv(tf.nn.relu(self.bn(x, training=training))))


class Net(tf.keras.Model):
    def __init__(self, classes=3, data_format="channels_last"):
        super().__init__()
        self.data_format = data_format
        self.units = [Unit(4, data_format), Unit(6, self.data_format)]
        self.gap = tf.keras.layers.GlobalAveragePooling2D(data_format=self.data_format)
        self.fc = tf.keras.layers.Dense(classes)

    def call(self, x, training=False):
        for u in self.units:
            x = u(x, training=training)
        return self.fc(self.gap(x))
'''


def test_data_format_parameter_resolved_where_the_classes_are_built():
    src, r = tx(DATA_FORMAT)
    assert errors(r) == []
    out = r.output
    # translated for the default the top class has and hands on; any other value raises
    assert out.count('if data_format != "channels_last":') == 2
    assert "raise ValueError(f\"translated for data_format='channels_last' only, got {data_format!r}\")" in out
    assert "self.bn = nn.LazyBatchNorm1d(momentum=0.01, eps=0.001)" in out  # axis -1 of any rank: on the rows
    assert "self.bn(x.reshape(-1, x.shape[-1])).reshape(x.shape)" in out
    k, t = compare_model(src, out, "Net()", (2, 8, 8, 3))
    assert_close(k, t)


def test_data_format_that_cannot_be_resolved_stays_refused():
    # no default, and not built in the file: the value is not known
    _, r = tx(DATA_FORMAT.replace('classes=3, data_format="channels_last"', "data_format, classes=3"))
    assert any("data_format=data_format is not a literal" in e for e in errors(r)), errors(r)
    assert "raise ValueError" not in r.output


# --- the other layers of the list: each against Keras ------------------------------------------------

LAYERS = [
    # (model body after keras.Input, input shape, expected text, layout of input / output)
    ("layers.UpSampling1D(3)", (2, 5, 3), "nn.Upsample(scale_factor=3)", "nchw"),
    ("layers.UpSampling3D((1, 2, 3))", (2, 2, 3, 4, 2), "nn.Upsample(scale_factor=(1, 2, 3))", "nchw"),
    ("layers.SpatialDropout1D(0.5)", (2, 6, 4), "nn.Dropout1d(0.5)", "nchw"),
    ("layers.SpatialDropout2D(0.5)", (2, 5, 6, 4), "nn.Dropout2d(0.5)", "nchw"),
    ("layers.GaussianNoise(0.3)", (2, 7), "GaussianNoise(0.3)", "same"),
    ("layers.GaussianDropout(0.4)", (2, 7), "GaussianDropout(0.4)", "same"),
    ("layers.UnitNormalization()", (2, 3, 7), "UnitNormalization()", "same"),
    ("layers.UnitNormalization(axis=1)", (2, 3, 7), "UnitNormalization(1)", "same"),
    ("layers.Conv2D(4, 3), layers.UnitNormalization()", (2, 6, 6, 2), "UnitNormalization(1)", "nchw"),
]


def _layer_model(body: str, shape: tuple) -> str:
    return textwrap.dedent(f'''
        from tensorflow import keras
        from tensorflow.keras import layers

        def build():
            return keras.Sequential([keras.Input(shape={shape[1:]}), {body}])
    ''')


def test_more_layers_match_keras_in_inference():
    cases = []
    for body, shape, text, layout in LAYERS:
        src, r = tx(_layer_model(body, shape))
        assert errors(r) == [], (body, errors(r))
        assert text in r.output, (body, r.output)
        cases.append(dict(original=src, translated=r.output, build="build()", shape=list(shape),
                          layout_in=layout, layout_out=layout))
    weightless = [c for c, (body, *_) in zip(cases, LAYERS) if "Conv2D" not in body]
    for c, (k, t) in zip(weightless, compare_weightless(weightless)):
        assert k.shape == t.shape and abs(k - t).max() <= 1e-6 * max(1.0, abs(k).max()), c["original"]
    conv = next(c for c, (body, *_) in zip(cases, LAYERS) if "Conv2D" in body)
    k, t = compare_model(conv["original"], conv["translated"], "build()", tuple(conv["shape"]),
                         layout_in="nchw", layout_out="nchw")
    assert_close(k, t)


def test_noise_layers_in_training_have_keras_statistics():
    # the noise itself is drawn by each framework: its distribution is what must agree
    src, r = tx(_layer_model("layers.GaussianNoise(0.3), layers.GaussianDropout(0.2)", (4000, 50)))
    assert errors(r) == []
    k, t = compare_model(src, r.output, "build()", (4000, 50), training=True)
    for y in (k, t):
        assert y.shape == (4000, 50)
    # same input in both: the added noise has the same spread (GaussianNoise then a multiplicative
    # N(1, 0.2 / 0.8) noise)
    assert abs(k.std() - t.std()) < 0.02 * k.std(), (k.std(), t.std())


def test_spatial_dropout_drops_whole_channels_in_training():
    src, r = tx(_layer_model("layers.SpatialDropout2D(0.5)", (8, 4, 4, 16)))
    k, t = compare_model(src, r.output, "build()", (8, 4, 4, 16), training=True, layout_in="nchw",
                         layout_out="nchw")
    for y in (k, t):
        zero = (y == 0).all(axis=(1, 2))  # (batch, channels): a channel is all zero or kept
        kept = (y != 0).all(axis=(1, 2))
        assert (zero | kept).all() and zero.any() and kept.any()


def test_spatial_dropout_3d_drops_whole_channels_of_a_volume_in_training_only():
    """SpatialDropout3D (no rule before) → nn.Dropout3d on the channels-first volume: in training a channel of an
    example is all zero or all kept (scaled), in both frameworks; in inference the identity, as Keras's."""
    src, r = tx(_layer_model("layers.SpatialDropout3D(0.5)", (8, 3, 4, 2, 16)))
    assert errors(r) == [] and "nn.Dropout3d(0.5)" in r.output, r.output
    k, t = compare_model(src, r.output, "build()", (8, 3, 4, 2, 16), training=True, layout_in="nchw",
                         layout_out="nchw")
    for y in (k, t):
        zero = (y == 0).all(axis=(1, 2, 3))  # (batch, channels): a channel is all zero or kept
        kept = (y != 0).all(axis=(1, 2, 3))
        assert (zero | kept).all() and zero.any() and kept.any()
    k, t = compare_model(src, r.output, "build()", (2, 3, 4, 2, 5), layout_in="nchw", layout_out="nchw")
    assert_close(k, t)


def test_group_normalization_matches_keras_with_its_weights():
    src, r = tx(_layer_model("layers.Conv2D(8, 3), layers.GroupNormalization(4, epsilon=0.01)", (2, 7, 6, 3)))
    assert errors(r) == []
    assert "nn.GroupNorm(4, 8, eps=0.01)" in r.output
    k, t = compare_model(src, r.output, "build()", (2, 7, 6, 3), layout_in="nchw", layout_out="nchw")
    assert_close(k, t)
    _, bad = tx(_layer_model("layers.GroupNormalization(3)", (2, 5, 8)))
    assert any("8 channels cannot be split into 3 groups" in e for e in errors(bad)), errors(bad)


def test_permute_and_repeat_vector_match_keras_in_both_layouts():
    bodies = [
        ("layers.Permute((2, 1))", (2, 3, 5), "Permute((2, 1))", "same"),
        ("layers.Permute((3, 1, 2))", (2, 3, 4, 5), "Permute((3, 1, 2))", "same"),
        # after a convolution the model is channels-first: the permutation is composed with the layouts
        ("layers.Conv2D(3, 1), layers.Permute((2, 3, 1)), layers.MaxPooling2D(1)", (2, 4, 5, 2), "Permute(", "nchw"),
        ("layers.Conv2D(3, 1), layers.Permute((3, 1, 2)), layers.MaxPooling2D(1)", (2, 4, 5, 2), "Permute(", "nchw"),
        ("layers.RepeatVector(4)", (2, 3), "RepeatVector(4)", "same"),
        # a Conv1D after it makes the model channels-first: the copies go to dim 2
        ("layers.Dense(3), layers.RepeatVector(4), layers.Conv1D(2, 1)", (2, 5), "RepeatVector(4, dim=2)", "nchw"),
    ]
    for body, shape, text, layout in bodies:
        src, r = tx(_layer_model(body, shape))
        assert errors(r) == [], (body, errors(r))
        assert text in r.output, r.output
        if "Conv" in body:
            k, t = compare_model(src, r.output, "build()", shape, layout_in=layout if len(shape) > 2 else "same",
                                 layout_out=layout)
            assert_close(k, t)
        else:
            [(k, t)] = compare_weightless([dict(original=src, translated=r.output, build="build()",
                                                shape=list(shape), layout_in=layout, layout_out=layout)])
            assert k.shape == t.shape and abs(k - t).max() == 0, body


def test_sequential_reshapes_no_weight_order_can_absorb():
    # to a map after a BatchNormalization (not a Dense), and from one map to another
    src, r = tx(_layer_model("layers.BatchNormalization(), layers.Reshape((3, 4, 2)), layers.Conv2D(2, 1), "
                             "layers.Reshape((4, 3, 2)), layers.MaxPooling2D(1)", (2, 24)))
    assert errors(r) == []
    assert "ChannelsLastReshape((3, 4, 2))" in r.output and "ChannelsLastReshape((4, 3, 2))" in r.output
    k, t = compare_model(src, r.output, "build()", (2, 24), layout_out="nchw")
    assert_close(k, t)


def test_sequential_input_joined_from_a_parameter():
    _, r = tx('''
        from tensorflow import keras
        from tensorflow.keras import layers

        def build(img_size):
            return keras.Sequential([keras.Input(shape=img_size + (3,)), layers.Conv2D(4, 3), layers.BatchNormalization()])
    ''')
    assert errors(r) == []
    assert "nn.Conv2d(3, 4, 3)" in r.output and "nn.BatchNorm2d(4," in r.output
