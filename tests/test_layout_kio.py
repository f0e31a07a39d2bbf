"""Channels-last layout and unknown ranks on keras-io's models (issue 8): each translated form is run
against Keras by `fwport verify` (forward and gradients, weights transferred by the rules' maps);
what stays refused keeps an error on its line."""
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
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)
    again = translate_source(r.output, "m.py", PACK)
    assert again.output == r.output, "translating the output again must change nothing"
    return r


def verified(tmp_path, src: str, out: str, model: str, inputs: list[str]) -> list[str]:
    """Runs Keras and the translation (fwport verify: forward and gradients); the names of the torch
    parameters whose gradients were compared."""
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(textwrap.dedent(src).lstrip("\n"))
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=inputs,
                          checks=("forward", "grad"), device="cpu"), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    return [e["name"] for e in cert["results"]["gradients"]]


# --- keras-io focal_modulation_network: channels-first Sequentials appended to a list attribute -------------

FOCAL = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


class Focal(layers.Layer):
    def __init__(self, dim, levels=2, **kwargs):
        super().__init__(**kwargs)
        self.dim = dim
        self.levels = levels
        self.proj_in = layers.Dense(dim)
        self.blocks = list()
        for idx in range(levels):
            k = 2 * idx + 3
            block = keras.Sequential(
                [
                    layers.ZeroPadding2D(padding=(k // 2, k // 2)),
                    layers.Conv2D(filters=dim, kernel_size=k, activation=keras.activations.gelu,
                                  groups=dim, use_bias=False),
                ]
            )
            self.blocks.append(block)
        self.gap = layers.GlobalAveragePooling2D(keepdims=True)
        self.proj = layers.Dense(3)

    def call(self, x):
        x = self.proj_in(x)
        y = self.blocks[0](x)
        for idx in range(1, self.levels):
            y = y + self.blocks[idx](y)
        for blk in self.blocks:
            x = blk(x)
        return self.proj(x + y + self.gap(y))


def build():
    return Focal(4)
'''


def test_channels_first_sequentials_appended_to_a_list_are_permuted_at_their_calls(tmp_path):
    r = tx(FOCAL)
    assert not errors(r), r.findings
    out = r.output
    assert "self.blocks = nn.ModuleList()" in out  # registered: torch sees no module in a plain list
    assert "y = self.blocks[0](x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)" in out
    assert "y = y + self.blocks[idx](y.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)" in out
    assert "x = blk(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)" in out
    grads = verified(tmp_path, FOCAL, out, "build()", ["float32[2,6,6,5]"])
    assert {"blocks.0.1.weight", "blocks.1.1.weight"} <= set(grads), grads


@pytest.mark.parametrize("use", ["self.first = self.blocks[0]", "n = len(self.blocks)",
                                 "for blk in self.blocks:\n            blk = None"])
def test_a_list_of_channels_first_sequentials_used_otherwise_stays_refused(use):
    src = FOCAL.replace("        self.gap = layers", f"        {use}\n        self.gap = layers")
    r = tx(src)
    lines = [f.line for f in r.findings if f.severity.value == "error"]
    assert 15 in lines, r.findings  # the Sequential's line
    assert "permute around its calls by hand" in r.output


# --- keras-io image_classification_with_vision_transformer: Normalization in a channels-first model ---------

NORMALIZATION = '''
import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

data = np.random.RandomState(0).rand(16, 8, 8, 3).astype("float32") * 4 + 1

augment = keras.Sequential([layers.Normalization(), layers.Resizing(6, 6)], name="augment")
augment.layers[0].adapt(data)

seq = keras.Sequential([keras.Input((8, 8, 3)), layers.Normalization(), layers.Conv2D(4, 3), layers.Flatten(),
                        layers.Dense(2)])
seq.layers[0].adapt(data)

given = keras.Sequential([keras.Input((8, 8, 3)), layers.Normalization(mean=[1.0, 2.0, 3.0], variance=[1.0, 4.0, 0.25]),
                          layers.Conv2D(4, 3), layers.GlobalAveragePooling2D()])


def build():
    inputs = keras.Input((8, 8, 3))
    x = augment(inputs)
    x = layers.Conv2D(4, 3)(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(2)(x))
'''


def test_normalization_in_a_channels_first_model_normalises_dim_1():
    r = tx(NORMALIZATION)
    assert not errors(r), r.findings
    out = r.output
    assert "augment = nn.Sequential(ChannelsFirstNormalization(), nn.Upsample(" in out
    assert "augment[0].adapt(data)" in out and "seq[0].adapt(data)" in out  # model.layers[0]: the module
    assert "ChannelsFirstNormalization(3), nn.Conv2d(3, 4, 3)" in out
    assert "ChannelsFirstNormalization(mean=[1.0, 2.0, 3.0], variance=[1.0, 4.0, 0.25])" in out
    assert out.count("class Normalization(nn.Module):") == 1  # the base, written once
    assert out.index("class Normalization(") < out.index("class ChannelsFirstNormalization(Normalization):")


@pytest.mark.parametrize("model", ["build()", "seq", "given"])
def test_normalization_in_a_channels_first_model_verifies(tmp_path, model):
    r = tx(NORMALIZATION)
    grads = verified(tmp_path, NORMALIZATION, r.output, model, ["float32[2,8,8,3]"])
    assert any(name.endswith("weight") for name in grads), grads


# --- keras-io adamatch: BatchNormalization of unknown rank in a model converted to channels-first ----------

BATCH_NORM = '''
from tensorflow import keras
from tensorflow.keras import layers


def block(x, filters, n):
    for _ in range(n):
        x = layers.Conv2D(filters, 3, padding="same")(x)
        x = layers.BatchNormalization(momentum=0.9, epsilon=1e-3)(x)
        x = layers.Activation("relu")(x)
    return x


def build(input_shape=(8, 8, 3), n=2):
    inputs = keras.Input(shape=input_shape)
    x = layers.BatchNormalization()(inputs)
    x = layers.Conv2D(4, 3)(x)
    x = block(x, 4, n)
    x = layers.BatchNormalization()(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(2)(x))
'''


def test_batch_norm_of_unknown_rank_in_a_channels_first_model_normalises_dim_1(tmp_path):
    r = tx(BATCH_NORM)
    assert not errors(r), r.findings
    out = r.output
    assert "self.bn1 = LazyChannelsFirstBatchNorm(momentum=0.01, eps=0.001)" in out
    assert "class ChannelsFirstBatchNorm(nn.BatchNorm1d):" in out and "cls_to_become = ChannelsFirstBatchNorm" in out
    grads = verified(tmp_path, BATCH_NORM, out, "build()", ["float32[3,8,8,3]"])
    assert {"bn1.weight", "bn1.bias"} <= set(grads), grads


def test_batch_norm_of_unknown_rank_on_another_axis_stays_refused():
    r = tx(BATCH_NORM.replace("x = layers.BatchNormalization()(inputs)", "x = layers.BatchNormalization(axis=1)(inputs)"))
    assert ("shape-unknown", 15) in errors(r), r.findings


# --- a layer class's channels-last output of unknown rank fed to Keras layers of a channels-first graph ---------

LAST = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


class Up(layers.Layer):
    def call(self, a, b):
        return tf.reshape(a + b, (-1, 4, 4, 4))


def build():
    a = keras.Input((64,))
    b = keras.Input((64,))
    x = Up()(a, b)
    x = layers.Activation("relu")(x)
    x = layers.Conv2D(3, 3)(x)
    return keras.Model([a, b], x)
'''


def test_a_layer_class_channels_last_output_is_moved_before_a_convolution(tmp_path):
    # was translated with no error and computed another thing: the Conv2D read Keras's (h, w, c) map as (c, h, w)
    r = tx(LAST)
    assert not errors(r)
    assert "self.conv(x.movedim(-1, 1))" in r.output  # after the elementwise Activation, which keeps it channels-last
    assert verified(tmp_path, LAST, r.output, "build", ["float32[2,64]", "float32[2,64]"])


def test_other_layers_on_a_layer_class_channels_last_output_are_refused():
    src = LAST.replace('x = layers.Activation("relu")(x)', "x = layers.GaussianNoise(0.1)(x)")
    r = translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", PACK)
    line = src.lstrip("\n").splitlines().index("    x = layers.GaussianNoise(0.1)(x)") + 1
    assert errors(r)[("shape-unknown", line)] == 1 and "keras.Model([a, b], x)" in r.output


def test_one_layer_on_a_layer_class_output_and_on_a_channels_first_map_is_refused():
    # one torch module cannot take a tensor that needs the move and one that does not (here the differing shapes
    # refuse it first: _built_for; _after_last's own refusal covers a second input of the same unknown shape)
    src = LAST.replace('''    x = layers.Activation("relu")(x)
    x = layers.Conv2D(3, 3)(x)
    return keras.Model([a, b], x)''', '''    act = layers.Activation("relu")
    x = act(x)
    y = layers.Conv2D(4, 1)(x)
    y = act(y)
    return keras.Model([a, b], y)''')
    assert src != LAST
    r = translate_source(textwrap.dedent(src).lstrip("\\n"), "m.py", PACK)
    line = src.lstrip("\\n").splitlines().index("    y = act(y)") + 1
    assert any(f.line == line for f in r.findings if f.severity.value == "error"), r.findings
    assert "# fwport:" in r.output and "keras.Model([a, b], y)" in r.output


# --- keras-io swin_transformers / gaugan: call()'s mask given explicitly, in a file that attaches no Keras mask ----

MASK = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


class WindowAttention(layers.Layer):
    def __init__(self, dim, **kwargs):
        super().__init__(**kwargs)
        self.qkv = layers.Dense(dim * 3)
        self.proj = layers.Dense(dim)

    def call(self, x, mask=None):
        q, k, v = tf.split(self.qkv(x), 3, axis=-1)
        attn = tf.matmul(q, k, transpose_b=True)
        if mask is not None:
            attn = attn + mask
        attn = tf.nn.softmax(attn, axis=-1)
        return self.proj(tf.matmul(attn, v))


class Block(keras.Model):
    def __init__(self, dim, shift, **kwargs):
        super().__init__(**kwargs)
        self.attn = WindowAttention(dim)
        if shift:
            self.attn_mask = tf.constant([[0.0, -100.0, 0.0], [0.0, 0.0, -100.0], [-100.0, 0.0, 0.0]])
        else:
            self.attn_mask = None

    def call(self, x):
        return x + self.attn(x, mask=self.attn_mask)


class Net(keras.Model):
    def __init__(self, dim, **kwargs):
        super().__init__(**kwargs)
        self.a = Block(dim, False)
        self.b = Block(dim, True)

    def call(self, x):
        return self.b(self.a(x))


def build():
    return Net(4)
'''


def test_a_mask_given_explicitly_in_a_file_without_keras_masks_is_an_ordinary_parameter(tmp_path):
    # Keras fills call()'s mask from the input's attached mask only where the caller passes none (or None),
    # and nothing in this file attaches one: the mask is what the caller passes, as in torch
    r = tx(MASK)
    assert not errors(r), r.findings
    assert "def forward(self, x, mask=None):" in r.output
    assert "return x + self.attn(x, mask=self.attn_mask)" in r.output
    line = MASK.lstrip("\n").splitlines().index("        if mask is not None:") + 1
    assert [(f.severity.value, f.line) for f in r.findings if f.code == "mask-kept"] == [("warning", line)]
    grads = verified(tmp_path, MASK, r.output, "build()", ["float32[2,3,4]"])
    assert {"b.attn.qkv.weight", "a.attn.proj.weight"} <= set(grads), grads


@pytest.mark.parametrize("source", ["layers.Embedding(10, 4, mask_zero=True)", "layers.Masking()",
                                    'keras.models.load_model("encoder.keras")'])
def test_a_mask_in_a_file_that_attaches_keras_masks_stays_refused(source):
    src = MASK.replace("def build():\n    return Net(4)", f"def build():\n    emb = {source}\n    return Net(4)")
    assert src != MASK
    r = tx(src)
    line = src.lstrip("\n").splitlines().index("            attn = attn + mask") + 1 - 1  # `if mask is not None:`
    assert errors(r)[("unsupported-construct", line)] == 1, r.findings


# --- dragen1860's BERT layers: a library of layers whose compute_mask the file never runs -----------------------

LIBRARY = '''
from tensorflow import keras
import tensorflow.keras.backend as K


class MaskedGlobalMaxPool1D(keras.layers.Layer):

    def __init__(self, **kwargs):
        super(MaskedGlobalMaxPool1D, self).__init__(**kwargs)
        self.supports_masking = True

    def compute_mask(self, inputs, mask=None):
        return None

    def call(self, inputs, mask=None):
        if mask is not None:
            mask = K.cast(mask, K.floatx())
            inputs -= K.expand_dims((1.0 - mask) * 1e6, axis=-1)
        return K.max(inputs, axis=-2)
'''

_LIBRARY_DRIVER = '''
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import model as m

x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) * np.array([1.0, -1.0, 0.5, 2.0], dtype=np.float32)
keep = np.array([[True, False, True], [False, True, True]])
layer = m.MaskedGlobalMaxPool1D()
if sys.argv[2] == "keras":
    import tensorflow as tf
    masked, plain = layer(tf.constant(x), mask=tf.constant(keep)), layer(tf.constant(x))
else:
    import torch
    masked, plain = layer(torch.tensor(x), mask=torch.tensor(keep)), layer(torch.tensor(x))
print("RESULT " + json.dumps({"masked": np.asarray(masked).tolist(), "plain": np.asarray(plain).tolist()}))
'''


def test_mask_of_a_layer_library_whose_compute_mask_the_file_never_runs_is_a_parameter(tmp_path):
    """The file's only mask source is a compute_mask of its own layer classes, none of which the file uses (a
    library that other files call): no tensor here carries a Keras mask, so call()'s mask is what the callers
    pass, kept as forward's parameter with a warning; the values are Keras's, with the mask given and without."""
    r = tx(LIBRARY)
    assert not errors(r), r.findings
    assert [f.code for f in r.findings if f.severity.value == "warning"] == ["mask-kept"]
    assert "def forward(self, inputs, mask=None):" in r.output
    import numpy as np
    from runners import keras_and_torch
    k, t = keras_and_torch(tmp_path, textwrap.dedent(LIBRARY), r.output, _LIBRARY_DRIVER)
    for key in ("masked", "plain"):
        np.testing.assert_allclose(t[key], k[key], rtol=1e-6, err_msg=key)
    assert k["masked"] != k["plain"]  # the mask did change the result


def test_mask_of_a_layer_whose_compute_mask_the_file_runs_stays_refused():
    """The same layers, one of them used in the file (its compute_mask may attach a mask to what it returns): a
    mask-using call() stays an error."""
    src = LIBRARY + "\n\ndef build():\n    return MaskedGlobalMaxPool1D()\n"
    r = tx(src)
    line = src.lstrip("\n").splitlines().index("        if mask is not None:") + 1
    assert errors(r)[("unsupported-construct", line)] == 1, r.findings


# --- keras-io simsiam: a Sequential of features whose first Dense is refused (an activity regularizer) -------------------

PREDICTOR = '''
from tensorflow import keras
from tensorflow.keras import layers, regularizers


def build():
    return keras.Sequential(
        [
            layers.Input((12,)),
            layers.Dense(6, use_bias=False, activity_regularizer=regularizers.l2(0.1)),
            layers.ReLU(),
            layers.BatchNormalization(),
            layers.Dense(12),
        ]
    )
'''


def test_layers_after_a_refused_dense_keep_its_rank(tmp_path):
    # the refused Dense keeps its input's rank: the layers after it take features, as in Keras (they were
    # refused for an unknown rank in the channels-first chain a BatchNormalization makes)
    r = translate_source(PREDICTOR.lstrip("\n"), "m.py", PACK)
    lines = PREDICTOR.lstrip("\n").splitlines()
    assert errors(r) == Counter({("unsupported-argument", lines.index("            layers.Dense(6, use_bias=False, "
                                                                      "activity_regularizer=regularizers.l2(0.1)),") + 1): 1})
    assert "nn.LazyBatchNorm1d(momentum=0.01, eps=0.001)," in r.output and "nn.LazyLinear(12)," in r.output
    # the layers after it compute what Keras's do: checked with the refused layer written by hand (no penalty)
    fixed = r.output.replace("layers.Dense(6, use_bias=False, activity_regularizer=regularizers.l2(0.1)),",
                             "nn.Linear(12, 6, bias=False),").replace("from tensorflow.keras import layers, regularizers\n", "")
    assert fixed != r.output
    src = PREDICTOR.replace(", activity_regularizer=regularizers.l2(0.1)", "")
    grads = verified(tmp_path, src, fixed, "build()", ["float32[5,12]"])
    assert {"2.weight", "3.weight"} <= set(grads), grads


# --- keras-io gan_ada / eeg_signal_classification: Flatten (and the Dense after it) of an input of unknown rank ----

FLATTEN = '''
from tensorflow import keras
from tensorflow.keras import layers


def build(input_shape=(6, 5, 3)):
    inputs = keras.Input(shape=input_shape)
    x = layers.BatchNormalization()(inputs)
    x = layers.Flatten()(x)
    x = layers.Dropout(0.3)(x)
    y = layers.Conv2D(2, 3)(inputs)
    y = layers.GlobalAveragePooling2D()(y)
    return keras.Model(inputs, layers.Concatenate()([layers.Dense(2)(x), y]))
'''


def test_flatten_of_unknown_rank_in_a_channels_first_model_flattens_in_keras_order(tmp_path):
    # was refused (Flatten, then the Dense after it: which order its kernel rows take was unknown); moved
    # channels-last first, the map flattens in Keras's (h, w, c) order and the Dense takes Keras's kernel as it is
    r = tx(FLATTEN)
    assert not errors(r), r.findings
    assert "self.flatten = ChannelsLastReshape((-1,))" in r.output and "self.fc = nn.LazyLinear(2)" in r.output
    grads = verified(tmp_path, FLATTEN, r.output, "build()", ["float32[3,6,5,3]"])
    assert {"fc.weight", "bn.weight"} <= set(grads), grads


def test_flatten_of_unknown_rank_channels_first_in_a_channels_first_model_stays_refused():
    src = FLATTEN.replace("layers.Flatten()", 'layers.Flatten(data_format="channels_first")')
    r = translate_source(src.lstrip("\n"), "m.py", PACK)
    assert ("shape-unknown", 8) in errors(r), r.findings
