"""Keras layers of issue 8 that had no rule: each translation checked against Keras (TensorFlow in one
subprocess, torch in another), weights moved by the rules' own weight maps (fwport.verify.transfer),
and what is not exact refused with an error finding."""
from __future__ import annotations

import json
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from fwport.verify.transfer import plan, transfer

from conv_numerics import assert_close, compare_weightless
from helpers import error_summaries as errors
from runners import python

PACK = load_pack("tf2torch")


def tx(src: str):
    src = textwrap.dedent(src).lstrip("\n")
    r = translate_source(src, "model.py", PACK)
    again = translate_source(r.output, "model.py", PACK)
    assert again.output == r.output, "translating the output again must change nothing"
    return src, r


# --- a harness: given inputs (integer ids too), the weights moved by the rules' maps -----------------------

_KERAS = r'''
import json, sys, types
import numpy as np
import keras
src, build, data, out, moves = sys.argv[1:6]
mod = types.ModuleType("orig"); exec(compile(open(src).read(), src, "exec"), mod.__dict__)
xs = [v for _, v in sorted(np.load(data).items(), key=lambda kv: int(kv[0][1:]))]
model = eval(build, mod.__dict__)
keras.utils.set_random_seed(0)
model(list(xs) if len(xs) > 1 else xs[0])
for w in model.weights:  # away from the initial zeros and ones, so that every map matters
    w.assign(np.random.default_rng(len(getattr(w, "path", w.name))).uniform(-0.5, 0.5, w.shape).astype("float32"))
y = model(list(xs) if len(xs) > 1 else xs[0], training=False)
arrays = {}
for m in json.loads(moves):
    obj = eval("model." + m["layer"] + ("" if m["var"] in (".", "") else "." + m["var"]))
    arrays[m["key"]] = np.asarray(obj.numpy())
np.savez(out, y=np.asarray(y), **{"w:" + k: v for k, v in arrays.items()})
'''

_TORCH = r'''
import sys, types
import numpy as np, torch
sys.modules["tensorflow"] = None; sys.modules["keras"] = None  # the translation must not need them
src, build, data, wts, out = sys.argv[1:6]
mod = types.ModuleType("tr"); exec(compile(open(src).read(), src, "exec"), mod.__dict__)
xs = [torch.from_numpy(v) for _, v in sorted(np.load(data).items(), key=lambda kv: int(kv[0][1:]))]
model = eval(build, mod.__dict__)
model.eval()
with torch.no_grad():
    model(*xs)  # lazy modules take their sizes
    w = np.load(wts)
    sd = model.state_dict()
    missing = [k for k in sd if k not in w.files and not k.endswith(("bias_hh_l0", "bias_hh_l0_reverse", "num_batches_tracked"))]
    assert not missing, ("parameters no map writes", missing)
    model.load_state_dict({k: torch.from_numpy(w[k]) for k in w.files}, strict=False)
    y = model(*xs)
np.savez(out, y=y.numpy())
'''


def compare(original: str, translated: str, records, build: str, xs: list[np.ndarray],
            torch_xs: list[np.ndarray] | None = None):
    """(Keras output, torch output) for the same inputs (``torch_xs``: the same in the translation's layout),
    the weights moved by the rules' maps."""
    moves = plan(records, PACK)
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "orig.py").write_text(original)
        (d / "tr.py").write_text(translated)
        np.savez(d / "x.npz", **{f"x{i}": x for i, x in enumerate(xs)})
        np.savez(d / "tx.npz", **{f"x{i}": x for i, x in enumerate(torch_xs if torch_xs is not None else xs)})
        env = {"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
        spec = json.dumps([{"key": m.key, "layer": m.layer, "var": m.var} for m in moves])
        python("-c", _KERAS, d / "orig.py", build, d / "x.npz", d / "k.npz", spec, side="keras", env=env, check=True)
        k = np.load(d / "k.npz")
        moved = transfer({n[2:]: k[n] for n in k.files if n.startswith("w:")}, moves)
        np.savez(d / "w.npz", **moved)
        python("-c", _TORCH, d / "tr.py", build, d / "tx.npz", d / "w.npz", d / "t.npz", side="torch", env=env,
               check=True)
        return k["y"], np.load(d / "t.npz")["y"]


def _records(r, scope: str):
    return [rec for rec in r.layers if rec.scope == scope]


# --- masking: Embedding(mask_zero=True) / Masking before recurrent layers -------------------------------------

MASKED = '''
from tensorflow import keras
from tensorflow.keras import layers


def lstm_last():
    return keras.Sequential([keras.Input(shape=(6,), dtype="int32"), layers.Embedding(20, 4, mask_zero=True),
                             layers.LSTM(5), layers.Dense(2)])


def gru_sequences():
    return keras.Sequential([keras.Input(shape=(6,), dtype="int32"), layers.Embedding(20, 4, mask_zero=True),
                             layers.GRU(5, return_sequences=True), layers.Dense(3)])


def stacked_bidirectional():
    return keras.Sequential([keras.Input(shape=(6,), dtype="int32"), layers.Embedding(20, 4, mask_zero=True),
                             layers.Bidirectional(layers.LSTM(5, return_sequences=True), merge_mode="sum"),
                             layers.Bidirectional(layers.GRU(3))])


def bidirectional_sequences():
    return keras.Sequential([keras.Input(shape=(6,), dtype="int32"), layers.Embedding(20, 4, mask_zero=True),
                             layers.Bidirectional(layers.SimpleRNN(3, return_sequences=True))])


def masking_stacked():
    return keras.Sequential([keras.Input(shape=(6, 3)), layers.Masking(0.0), layers.LSTM(4, return_sequences=True),
                             layers.GRU(3, return_sequences=True)])
'''

IDS = np.array([[3, 5, 2, 7, 0, 0], [4, 1, 0, 0, 0, 0], [1, 2, 3, 4, 5, 6], [9, 0, 0, 0, 0, 0]], dtype="int32")


@pytest.fixture(scope="module")
def masked():
    return tx(MASKED)


def test_masked_sequentials_translate_to_packed_sequences(masked):
    _, r = masked
    assert errors(r) == [], errors(r)
    out = r.output
    assert "MaskedEmbedding(20, 4)" in out and "class MaskedEmbedding(nn.Embedding):" in out
    assert "nn.LSTM(4, 5, batch_first=True), MaskedRNNOutput(), nn.Linear(5, 2)" in out
    assert "MaskedRNNOutput(return_sequences=True, total_length=6)" in out
    assert 'MaskedBidirectionalOutput(return_sequences=True, merge_mode="sum", packed=True)' in out
    assert "Masking(0.0), nn.LSTM(3, 4, batch_first=True), MaskedRNNOutput(return_sequences=True, packed=True)" in out
    assert "nn.utils.rnn.pack_padded_sequence" in out
    said = [f.message for f in r.findings if f.code == "idiom-replaced"]
    assert len(said) == 5 and all("out of the loss" in m for m in said)


@pytest.mark.parametrize("model", ["lstm_last", "gru_sequences", "stacked_bidirectional", "bidirectional_sequences"])
def test_masked_recurrent_layers_match_keras_on_right_padded_ids(masked, model):
    src, r = masked
    k, t = compare(src, r.output, _records(r, model), f"{model}()", [IDS])
    assert_close(k, t, rtol=1e-5)
    if model == "gru_sequences":  # Keras carries the last output over the padded steps (not zeros)
        assert np.abs(k[1, 2:] - k[1, 1]).max() < 1e-6 and np.abs(k[1, 1]).max() > 1e-3


def test_masking_layer_matches_keras(masked):
    src, r = masked
    x = np.random.default_rng(0).standard_normal((3, 6, 3)).astype("float32")
    x[0, 4:] = 0.0
    x[1, 2:] = 0.0
    k, t = compare(src, r.output, _records(r, "masking_stacked"), "masking_stacked()", [x])
    assert_close(k, t, rtol=1e-5)


def test_a_mask_that_is_not_right_padding_is_an_error_at_run_time(masked):
    src, r = masked
    with pytest.raises(AssertionError, match="a mask with gaps or left padding"):
        compare(src, r.output, _records(r, "lstm_last"), "lstm_last()", [np.array([[0, 3, 4, 0, 0, 0]], "int32")])


def test_masks_fwport_cannot_follow_stay_refused():
    cases = [
        # nothing recurrent after it: refused as before
        ("layers.Embedding(20, 4, mask_zero=True), layers.Dense(3)", "(6,), dtype=\"int32\"",
         "mask_zero=True: Keras propagates the mask"),
        ("layers.Embedding(20, 4, mask_zero=True), layers.Dropout(0.1), layers.LSTM(3)", "(6,), dtype=\"int32\"",
         "mask_zero=True: Keras propagates the mask"),
        ("layers.Masking(), layers.Dense(3)", "(6, 3)", "Masking: Keras propagates its mask"),
        # the sequence length is needed to pad the packed steps back
        ("layers.Embedding(20, 4, mask_zero=True), layers.GRU(3, return_sequences=True)", "(None,), dtype=\"int32\"",
         "after a mask, on sequences of a length unknown here"),
        # a layer reading the mask after the recurrent layer (a masked average): refused (for now by the
        # channels-first layout GlobalAveragePooling1D gives the Sequential, else as a reader of the mask)
        ("layers.Masking(), layers.LSTM(4, return_sequences=True), layers.GlobalAveragePooling1D()",
         "(6, 3)", ""),
    ]
    for body, shape, said in cases:
        _, r = tx(f'''
            from tensorflow import keras
            from tensorflow.keras import layers

            model = keras.Sequential([keras.Input(shape={shape}), {body}])
        ''')
        assert any(said in e for e in errors(r)), (body, errors(r))
    # in a Sequential nested in a functional model the mask is not followed: refused where it is made (a
    # functional model's own Embedding passes its mask on: tests/test_functional_masks.py)
    _, r = tx('''
        from tensorflow import keras
        from tensorflow.keras import layers

        ids = keras.Input(shape=(6,), dtype="int32")
        x = keras.Sequential([layers.Embedding(20, 4, mask_zero=True), layers.Dense(3)])(ids)
        model = keras.Model(ids, layers.LSTM(3)(x))
    ''')
    assert any("mask_zero=True: Keras propagates the mask" in e for e in errors(r)), errors(r)


# --- layers with weights: EinsumDense (lazy, both elisions), TimeDistributed around a CNN ------------------

WEIGHTED = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


class Projections(keras.Model):  # built at the first call: the module creates its weight then
    def __init__(self):
        super().__init__()
        self.left = layers.EinsumDense("...b,bc->...c", output_shape=4, bias_axes="c")
        self.right = layers.EinsumDense("ab...,bc->ac...", output_shape=(3, None), bias_axes="c", activation="tanh")
        self.heads = layers.EinsumDense("abc,cde->abde", output_shape=(None, 2, 3), bias_axes="de")

    def call(self, x):
        return self.heads(self.right(self.left(x)))


def cnn_per_frame():
    return keras.Sequential([
        keras.Input(shape=(3, 9, 8, 2)),
        layers.TimeDistributed(layers.Conv2D(4, 3, strides=2, padding="same", activation="relu")),
        layers.TimeDistributed(layers.MaxPooling2D(2)),
        layers.TimeDistributed(layers.Flatten()),
        layers.TimeDistributed(layers.Dense(5)),
        layers.GRU(3),
    ])


def similarity():
    a = keras.Input(shape=(4, 6))
    b = keras.Input(shape=(5, 6))
    scores = layers.Dot(axes=(2, 2), normalize=True)([layers.Dense(6)(a), b])
    return keras.Model([a, b], layers.Dense(3)(scores))


def volumes():
    return keras.Sequential([keras.Input(shape=(6, 7, 5, 2)), layers.Conv3D(3, 2), layers.MaxPooling3D(2, padding="same"),
                             layers.AveragePooling3D((1, 2, 1)), layers.GlobalMaxPooling3D()])


def lambdas():
    return keras.Sequential([keras.Input(shape=(6,)), layers.Lambda(lambda x: x / 4.0), layers.Dense(3),
                             layers.Lambda(lambda t: tf.nn.relu(t) - 0.1), layers.Identity(),
                             layers.Lambda(lambda t: tf.expand_dims(t, -1))])
'''


@pytest.fixture(scope="module")
def weighted():
    return tx(WEIGHTED)


def test_weighted_layers_translate_without_errors(weighted):
    _, r = weighted
    assert errors(r) == [], errors(r)
    out = r.output
    assert 'self.left = EinsumDense("...b,bc->...c", 4, bias_axes="c")' in out
    assert 'TimeDistributed(nn.Conv2d(2, 4, 3, stride=2' in out and "channels_first=True" in out
    assert "TimeDistributed(nn.Linear(" in out
    assert "Dot((2, 2), normalize=True)" in out
    assert "nn.MaxPool3d(2, ceil_mode=True)" in out and "nn.AvgPool3d((1, 2, 1))" in out
    assert "nn.AdaptiveMaxPool3d(1)" in out
    assert "Lambda(lambda t: F.relu(t) - 0.1)" in out and "nn.Identity()" in out


@pytest.mark.parametrize("model,shapes", [
    ("Projections()", [(2, 5, 6)]),
    ("cnn_per_frame()", [(2, 3, 9, 8, 2)]),
    ("similarity()", [(2, 4, 6), (2, 5, 6)]),
    ("volumes()", [(2, 6, 7, 5, 2)]),
    ("lambdas()", [(3, 6)]),
])
def test_weighted_layers_match_keras(weighted, model, shapes):
    src, r = weighted
    scope = model.rstrip("()")
    xs = [np.random.default_rng(i).standard_normal(s).astype("float32") for i, s in enumerate(shapes)]
    info = next((m for m in r.models if m.scope == scope), None)
    nchw = info is not None and info.layout == "nchw"
    k, t = compare(src, r.output, _records(r, scope), model, xs,
                   [np.ascontiguousarray(np.moveaxis(x, -1, 1)) for x in xs] if nchw else None)
    assert_close(k, t, rtol=1e-5)


NEW_CONVS = '''
from tensorflow import keras
from tensorflow.keras import layers


def up_volumes():
    return keras.Sequential([keras.Input(shape=(3, 4, 2, 5)),
                             layers.Conv3DTranspose(4, 3, strides=2, padding="same", activation="relu"),
                             layers.Conv3DTranspose(2, (2, 3, 1), strides=(1, 2, 3)),
                             layers.Conv3DTranspose(3, (4, 2, 3), strides=(2, 2, 1), padding="same")])


def separable_1d():
    return keras.Sequential([keras.Input(shape=(11, 3)),
                             layers.SeparableConv1D(6, 3, strides=2, padding="same", depth_multiplier=2, activation="relu"),
                             layers.SeparableConv1D(4, 2)])
'''


@pytest.mark.parametrize("model,shape,texts", [
    # 'same' with k - s odd crops the voxel after (nn.ZeroPad3d of -1), k < s adds output_padding, mixed strides
    ("up_volumes", (2, 3, 4, 2, 5), [
        "nn.ConvTranspose3d(5, 4, 3, stride=2), nn.ZeroPad3d((0, -1, 0, -1, 0, -1)), nn.ReLU()",
        "output_padding=(0, 0, 2)", "padding=(1, 0, 1)"]),
    # the depthwise kernel (k, C, dm) → (C * dm, 1, k) channel-major,
    # the pointwise (1, C * dm, filters) → (filters, C * dm, 1)
    ("separable_1d", (2, 11, 3), ["nn.Conv1d(3, 6, 3, stride=2, padding=1, groups=3, bias=False), nn.Conv1d(6, 6, 1)",
                                  "nn.Sequential(nn.Conv1d(6, 6, 2, groups=6, bias=False), nn.Conv1d(6, 4, 1))"]),
])
def test_conv3d_transpose_and_separable_conv1d_match_keras(model, shape, texts):
    """Conv3DTranspose and SeparableConv1D (no rules before): translated channels-first, the weights moved by the
    rules' maps, the outputs compared with Keras's."""
    src, r = tx(NEW_CONVS)
    assert errors(r) == [], errors(r)
    for text in texts:
        assert text in r.output, (text, r.output)
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    k, t = compare(src, r.output, _records(r, model), f"{model}()", [x], [np.ascontiguousarray(np.moveaxis(x, -1, 1))])
    assert_close(k, np.moveaxis(t, 1, -1), rtol=1e-5)


# --- weightless: CenterCrop, AlphaDropout, ActivityRegularization ---------------------------------------------

def test_center_crop_alpha_dropout_and_activity_regularization_match_keras_in_inference():
    bodies = [
        ("layers.CenterCrop(5, 4)", (2, 8, 7, 3), "CenterCrop(5, 4)", "nchw"),
        ("layers.AlphaDropout(0.3)", (2, 7), "nn.AlphaDropout(0.3)", "same"),
        ("layers.ActivityRegularization(l1=0.01, l2=0.1)", (2, 7), "ActivityRegularization(l1=0.01, l2=0.1)", "same"),
    ]
    cases = []
    for body, shape, text, layout in bodies:
        src, r = tx(f'''
            from tensorflow import keras
            from tensorflow.keras import layers

            def build():
                return keras.Sequential([keras.Input(shape={shape[1:]}), {body}])
        ''')
        assert errors(r) == [], (body, errors(r))
        assert text in r.output, (body, r.output)
        cases.append(dict(original=src, translated=r.output, build="build()", shape=list(shape),
                          layout_in=layout, layout_out=layout))
    for c, (k, t) in zip(cases, compare_weightless(cases)):
        assert k.shape == t.shape and np.abs(k - t).max() <= 1e-6 * max(1.0, np.abs(k).max()), c["original"]


_PENALTY = r'''
import sys, types, numpy as np
x = np.random.default_rng(0).standard_normal((4, 7)).astype("float32")
src, side = sys.argv[1:3]
if side == "torch":
    sys.modules["tensorflow"] = None
mod = types.ModuleType("m"); exec(compile(open(src).read(), src, "exec"), mod.__dict__)
model = mod.build()
if side == "keras":
    model(x)
    print(float(sum(float(l) for l in model.losses)))
else:
    import torch
    model(torch.from_numpy(x))
    print(float(sum(m.regularization_loss() for m in model.modules() if hasattr(m, "regularization_loss"))))
'''


def test_activity_regularization_penalty_is_keras_model_losses(tmp_path):
    src, r = tx('''
        from tensorflow import keras
        from tensorflow.keras import layers

        def build():
            return keras.Sequential([keras.Input(shape=(7,)), layers.ActivityRegularization(l1=0.01, l2=0.1)])
    ''')
    assert any("regularization_loss()" in f.message for f in r.findings if f.code == "idiom-replaced")
    (tmp_path / "k.py").write_text(src)
    (tmp_path / "t.py").write_text(r.output)
    got = []
    for side, f in (("keras", "k.py"), ("torch", "t.py")):
        p = python("-c", _PENALTY, tmp_path / f, side, side=side, env={"TF_CPP_MIN_LOG_LEVEL": "3"}, check=True)
        got.append(float(p.stdout.split()[-1]))
    assert got[0] > 0 and abs(got[0] - got[1]) <= 1e-5 * got[0], got


def test_alpha_dropout_in_training_keeps_keras_statistics():
    src, r = tx('''
        from tensorflow import keras
        from tensorflow.keras import layers

        def build():
            return keras.Sequential([keras.Input(shape=(50,)), layers.AlphaDropout(0.2)])
    ''')
    from conv_numerics import compare_model
    k, t = compare_model(src, r.output, "build()", (4000, 50), training=True)
    # the masks differ; the SELU-preserving affine map gives the same distribution (mean 0, variance 1 kept)
    for y in (k, t):
        assert abs(y.mean()) < 0.02 and abs(y.std() - 1.0) < 0.02, (y.mean(), y.std())
    dropped = -1.7580993408473766 * ((0.8 * (1 + 0.2 * 1.7580993408473766 ** 2)) ** -0.5) * 0.8
    for y in (k, t):  # the value a dropped element takes, and how often
        share = float(np.isclose(y, dropped, atol=1e-5).mean())
        assert abs(share - 0.2) < 0.01, share


def test_refusals_say_why():
    cases = [
        ("layers.TimeDistributed(layers.BatchNormalization())", "(4, 6)", "Keras 3 takes per time step"),
        ("layers.Conv2D(3, 1), layers.Lambda(lambda x: x * 2.0)", "(5, 5, 2)", "in a model converted to channels-first"),
        ("layers.EinsumDense(\"abc,cd->abd\", output_shape=(None, 4), bias_axes=\"e\")", "(5, 6)",
         "Keras refuses this equation or shape"),
        ("layers.CenterCrop(8, 8)", "(6, 9, 3)", "Keras resizes an image smaller than the crop"),
        ("layers.AlphaDropout(0.1, noise_shape=(None, 1))", "(6,)", "noise_shape=(None, 1)"),
    ]
    for body, shape, said in cases:
        r = translate_source(textwrap.dedent(f'''
            from tensorflow import keras
            from tensorflow.keras import layers

            model = keras.Sequential([keras.Input(shape={shape}), {body}])
        ''').lstrip("\n"), "model.py", PACK)
        assert any(said in e for e in errors(r)), (body, errors(r))


# --- a layer class of this file called on keyword tensors in a functional model ----------------------------------

KEYWORD_CALLS = '''
import keras
from keras import layers, ops


class MaskedMean(keras.Layer):
    def call(self, values, keep, scale=1.0):
        weights = ops.cast(keep, "float32")[:, :, None]
        return scale * ops.sum(values * weights, axis=1) / ops.maximum(ops.sum(weights, axis=1), 1.0)


def pooled():
    ids = keras.Input(shape=(6,), dtype="int32")
    x = layers.Embedding(20, 4)(ids)
    mean = MaskedMean()(values=x, keep=ids != 0, scale=2.0)
    both = MaskedMean()(x, ids > 2)
    return keras.Model(ids, layers.Dense(3)(mean + both))
'''


def test_a_layer_of_the_file_called_on_keyword_tensors_matches_keras():
    src, r = tx(KEYWORD_CALLS)
    assert errors(r) == [], errors(r)
    assert "self.masked_mean1(values=x, keep=ids != 0, scale=2.0)" in r.output
    assert "self.masked_mean2(x, ids > 2)" in r.output
    k, t = compare(src, r.output, _records(r, "pooled"), "pooled()", [IDS])
    assert_close(k, t, rtol=1e-5)
    assert np.abs(k).max() > 1e-3


_AUGMENT = r'''
import sys, types, numpy as np
src, side, out = sys.argv[1:4]
rng = np.random.default_rng(0)
x = rng.standard_normal((2, 7, 6, 3)).astype("float32")
if side == "torch":
    sys.modules["tensorflow"] = None
    sys.modules["keras"] = None
mod = types.ModuleType("m"); exec(compile(open(src).read(), src, "exec"), mod.__dict__)
res = {}
for name in [n for n in dir(mod) if n.startswith("aug_")]:
    layer = getattr(mod, name)
    if side == "keras":
        res[name] = np.asarray(layer(x, training=True))
    else:
        import torch
        res[name] = layer.train()(torch.from_numpy(x)).numpy()
np.savez(out, **res)
'''


def test_fixed_rotations_and_zooms_give_keras_pixels(tmp_path):
    """RandomRotation / RandomZoom with lower == upper draw one fixed transform: the helpers' pixels then equal
    Keras's (centre, direction, bilinear/nearest sampling, reflect about the edge, constant and nearest fills),
    which pins the conventions the random draws are used with."""
    src, r = tx('''
        from tensorflow.keras import layers

        aug_quarter = layers.RandomRotation((0.25, 0.25))
        aug_rotate = layers.RandomRotation((0.1, 0.1))
        aug_rotate_fill = layers.RandomRotation((-0.05, -0.05), fill_mode="constant", fill_value=0.5)
        aug_rotate_nearest = layers.RandomRotation((0.2, 0.2), fill_mode="nearest", interpolation="nearest")
        aug_zoom_in = layers.RandomZoom((-0.5, -0.5))
        aug_zoom_out = layers.RandomZoom((0.4, 0.4), width_factor=(0.2, 0.2), fill_mode="constant")
        zoom = 0.3
        aug_zoom_named = layers.RandomZoom((-zoom, -zoom), width_factor=(zoom / 2, zoom / 2))
    ''')
    assert errors(r) == [] and "RandomRotation((0.25, 0.25))" in r.output
    assert "RandomZoom((-zoom, -zoom), width_factor=(zoom / 2, zoom / 2))" in r.output  # a pair of expressions
    (tmp_path / "k.py").write_text(src)
    (tmp_path / "t.py").write_text(r.output)
    (tmp_path / "run.py").write_text(_AUGMENT)
    for side, f in (("keras", "k.py"), ("torch", "t.py")):
        python(tmp_path / "run.py", tmp_path / f, side, tmp_path / f"{side}.npz", side=side,
               env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}, check=True)
    k, t = np.load(tmp_path / "keras.npz"), np.load(tmp_path / "torch.npz")
    assert sorted(k.files) == sorted(t.files) and len(k.files) == 7
    for name in k.files:
        assert k[name].shape == t[name].shape, name
        np.testing.assert_allclose(t[name], k[name], atol=1e-4, err_msg=name)
