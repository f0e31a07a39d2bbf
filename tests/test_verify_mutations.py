"""A verifier that cannot fail is worth nothing: plant each known bug in a correct translation and
check that ``verify`` fails *and names the right layer*. One warm pair of framework subprocesses serves
every mutation (a few seconds in all after the start-up)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fwport.core.rule import Pack, WeightMap, WeightOp, load_pack
from fwport.core.pipeline import translate_source
from fwport.verify import Options, Session, verify

ORIGINAL = '''
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers


def build_model():
    return keras.Sequential([
        keras.Input(shape=(12, 10, 3)),
        layers.Conv2D(8, (3, 2), activation="relu"),
        layers.BatchNormalization(),
        layers.Conv2D(6, 3, strides=2, padding="same"),
        layers.Flatten(),
        layers.Dense(16, activation="gelu"),
        layers.Dense(16, activation="leaky_relu"),
        layers.Dense(16),
        layers.Dense(5, activation="tanh"),
    ])
'''
# Keras layer indices (model.layers) of the members above
CONV, BN, CONV_SAME, FLATTEN, DENSE_FLAT, DENSE_GELU_AFTER, DENSE_SQUARE, DENSE_OUT = (
    "layers[0]", "layers[1]", "layers[2]", "layers[3]", "layers[4]", "layers[5]", "layers[6]", "layers[7]")
DENSE_GELU = DENSE_FLAT  # Dense(16, activation="gelu") is the Dense after the Flatten
DENSE_LEAKY = "layers[5]"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("mut")
    (d / "model.py").write_text(ORIGINAL)
    out = translate_source(ORIGINAL, "model.py").output
    (d / "good.py").write_text(out)
    return d, out


def _mutated_pack(rule_id: str, variant: str | None, ops: list[str], source: str = "kernel") -> Pack:
    base = load_pack("tf2torch")
    rule = base.rules[rule_id]
    weights = []
    for w in rule.weights:
        if w.source == source and w.when == variant:
            w = WeightMap(w.source, w.target, tuple(WeightOp(o.split("(")[0], tuple(
                p.strip() for p in o.partition("(")[2].rstrip(")").split(",") if p.strip())) for o in ops), w.when)
        weights.append(w)
    pack = Pack(base.name, dict(base.rules), dict(base.by_name))
    pack.rules[rule_id] = dataclasses.replace(rule, weights=tuple(weights))
    for n in rule.names:
        pack.by_name[n] = pack.rules[rule_id]
    return pack


def _run(session, files, text=None, pack=None, checks=("forward", "grad")):
    d, good = files
    path = d / "good.py"
    if text is not None:
        assert text != good, "the mutation did not apply"
        path = d / "mutant.py"
        path.write_text(text)
    return verify(Options(str(d / "model.py"), str(path), "build_model", checks=checks, device="cpu", pack=pack),
                  session)


def test_correct_translation_passes_every_check(session, files):
    cert = _run(session, files, checks=("forward", "grad", "step"))
    assert cert["verdict"] == "pass", cert.get("problems")
    assert cert["first_diverging"] is None


TEXT_MUTATIONS = {
    # name: (old, new, the layer that must be named, checks)
    "bn-epsilon-left-at-torch-default": ("eps=0.001", "eps=1e-05", BN, ("forward",)),
    "bn-momentum-not-inverted": ("momentum=0.01", "momentum=0.99", BN, ("forward", "grad", "step")),
    "gelu-approximation-switched": ("nn.GELU()", 'nn.GELU(approximate="tanh")', DENSE_GELU, ("forward",)),
    "leaky-relu-slope-wrong": ("negative_slope=0.2", "negative_slope=0.01", DENSE_LEAKY, ("forward",)),
    "layer-dropped": ("nn.Linear(16, 5), nn.Tanh(),", "nn.Linear(16, 5),", DENSE_OUT, ("forward",)),
    # TensorFlow pads (top 0, bottom 1) on the even height; a symmetric pad gives the same shape
    "same-padding-made-symmetric": ("nn.ZeroPad2d((1, 1, 0, 1))", "nn.ZeroPad2d((1, 1, 1, 1))", CONV_SAME, ("forward",)),
}


@pytest.mark.parametrize("name", sorted(TEXT_MUTATIONS))
def test_planted_bug_in_translation_is_caught(session, files, name):
    old, new, layer, checks = TEXT_MUTATIONS[name]
    _, good = files
    assert old in good, f"the translation changed: {old!r} not found; update the mutation"
    cert = _run(session, files, good.replace(old, new), checks=checks)
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"] is not None and cert["first_diverging"]["layer"] == layer, cert["first_diverging"]


def test_momentum_bug_is_invisible_to_inference_but_caught_by_step(session, files):
    _, good = files
    text = good.replace("momentum=0.01", "momentum=0.99")
    assert _run(session, files, text, checks=("forward", "grad"))["verdict"] == "pass"
    cert = _run(session, files, text, checks=("step",))
    bad = [e["name"] for e in cert["results"]["step"] if not e["ok"]]
    assert set(bad) == {"2.running_mean", "2.running_var"}


MAP_MUTATIONS = {
    # name: (rule, variant, ops, layer)
    "flatten-order-permutation-skipped": ("dense", "after-flatten", ["transpose(1, 0)"], DENSE_FLAT),
    "conv-kernel-spatial-axes-swapped": ("conv2d", None, ["transpose(3, 2, 1, 0)"], CONV),
}


@pytest.mark.parametrize("name", sorted(MAP_MUTATIONS))
def test_planted_bug_in_weight_map_is_caught(session, files, name):
    rule, variant, ops, layer = MAP_MUTATIONS[name]
    cert = _run(session, files, pack=_mutated_pack(rule, variant, ops), checks=("forward",))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"]["layer"] == layer, cert["first_diverging"]


SQUARE_MLP = '''
from tensorflow import keras


def build_model():
    return keras.Sequential([keras.Input(shape=(12,)), keras.layers.Dense(12, activation="relu"),
                             keras.layers.Dense(12)])
'''


def test_square_dense_kernel_not_transposed_is_caught(session, tmp_path):
    """A square Dense loads without any shape error when the transpose is forgotten: the values catch it."""
    (tmp_path / "m.py").write_text(SQUARE_MLP)
    (tmp_path / "t.py").write_text(translate_source(SQUARE_MLP, "m.py").output)
    opts = dict(checks=("forward",), device="cpu")
    good = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build_model", **opts), session)
    assert good["verdict"] == "pass"
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build_model",
                          pack=_mutated_pack("dense", None, ["copy"]), **opts), session)
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"]["layer"] == "layers[0]"
    assert not cert["problems"] or all("shape" not in p for p in cert["problems"])


def test_square_kernel_swap_needs_numbers_not_shapes(session, tmp_path):
    """With a square conv kernel the swapped map loads without a shape error: the values catch it."""
    src = ORIGINAL.replace("layers.Conv2D(8, (3, 2)", "layers.Conv2D(8, (3, 3)")
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "t.py").write_text(translate_source(src, "m.py").output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build_model", checks=("forward",),
                          device="cpu", pack=_mutated_pack("conv2d", None, ["transpose(3, 2, 1, 0)"])), session)
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"]["layer"] == CONV and cert["first_diverging"]["max_abs"] > 1e-3


RECURRENT = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_model():
    return keras.Sequential([
        keras.Input(shape=(7, 4)),
        layers.GRU(6, return_sequences=True),
        layers.LSTM(5, return_sequences=True),
        layers.SimpleRNN(3, return_sequences=True),
        layers.Bidirectional(layers.GRU(4)),
    ])
'''
RECURRENT_MAP_MUTATIONS = {
    # name: (rule, source variable, ops, the layer that must be named)
    "gru-gate-order-kept-z-r-h": ("gru", "cell.kernel", ["transpose(1, 0)"], "layers[0]"),
    "gru-recurrent-gate-order-kept": ("gru", "cell.recurrent_kernel", ["transpose(1, 0)"], "layers[0]"),
    "gru-bias-rows-swapped": ("gru", "cell.bias", ["take(0, 1)", "reorder-blocks(0, 1, 0, 2)"], "layers[0]"),
    "lstm-gates-reordered-like-a-gru": ("lstm", "cell.kernel", ["reorder-blocks(1, 1, 0, 2, 3)", "transpose(1, 0)"],
                                        "layers[1]"),
    "simple-rnn-recurrent-kernel-not-transposed": ("simple-rnn", "cell.recurrent_kernel", ["copy"], "layers[2]"),
}


def test_bidirectional_backward_last_step_taken_at_the_end_is_caught(session, recurrent_files):
    """The obvious `output[:, -1]` for both directions: the backward one has then seen one step only."""
    _, good = recurrent_files
    old = "forward, backward = forward[:, -1], backward[:, 0]"
    assert old in good
    cert = _run(session, recurrent_files, good.replace(old, "forward, backward = forward[:, -1], backward[:, -1]"),
                checks=("forward",))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"]["layer"] == "layers[3]", cert["first_diverging"]


def test_bidirectional_backward_weights_in_forward_gate_order_are_caught(session, recurrent_files):
    pack = _mutated_pack("bidirectional", "gru", ["transpose(1, 0)"], "backward_layer.cell.kernel")
    cert = _run(session, recurrent_files, pack=pack, checks=("forward",))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"]["layer"] == "layers[3]", cert["first_diverging"]


@pytest.fixture(scope="module")
def recurrent_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("mut-rnn")
    (d / "model.py").write_text(RECURRENT)
    out = translate_source(RECURRENT, "model.py").output
    (d / "good.py").write_text(out)
    return d, out


def test_recurrent_correct_translation_passes(session, recurrent_files):
    cert = _run(session, recurrent_files, checks=("forward", "grad"))
    assert cert["verdict"] == "pass", cert.get("problems")


@pytest.mark.parametrize("name", sorted(RECURRENT_MAP_MUTATIONS))
def test_gru_gate_order_and_other_recurrent_map_bugs_are_caught(session, recurrent_files, name):
    rule, source, ops, layer = RECURRENT_MAP_MUTATIONS[name]
    pack = _mutated_pack(rule, None, ops, source)
    if source == "cell.bias":  # the map of the first bias row only (two maps read cell.bias)
        base = load_pack("tf2torch").rules[rule]
        weights = [w if w.target != "bias_ih_l0" else WeightMap(w.source, w.target, tuple(WeightOp(
            o.split("(")[0], tuple(p.strip() for p in o.partition("(")[2].rstrip(")").split(",") if p.strip()))
            for o in ops), w.when) for w in base.weights]
        pack.rules[rule] = dataclasses.replace(base, weights=tuple(weights))
        for n in base.names:
            pack.by_name[n] = pack.rules[rule]
    cert = _run(session, recurrent_files, pack=pack, checks=("forward",))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"]["layer"] == layer, cert["first_diverging"]


# --- the layers of issue 8: each with a planted bug the verifier must name ------------------------------

NEW_LAYERS = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_model():
    return keras.Sequential([
        keras.Input(shape=(6, 5, 4)),
        layers.Rescaling(0.5, offset=-1.0),
        layers.DepthwiseConv2D(3, padding="same", depth_multiplier=2),
        layers.SeparableConv2D(6, 3, padding="same"),
        layers.Conv2DTranspose(5, 3, strides=2, padding="same"),
        layers.Resizing(5, 7, interpolation="nearest"),
        layers.GlobalAveragePooling2D(),
        layers.Dense(3),
    ])
'''
RESCALE, DEPTHWISE, SEPARABLE, TRANSPOSE, RESIZE = "layers[0]", "layers[1]", "layers[2]", "layers[3]", "layers[4]"

NEW_LAYER_TEXT_MUTATIONS = {
    # torch's "nearest" floors the source coordinate; TensorFlow rounds half-pixel centres
    "resizing-nearest-not-exact": ('mode="nearest-exact"', 'mode="nearest"', RESIZE),
    "rescaling-offset-lost": ("Rescaling(0.5, offset=-1.0)", "Rescaling(0.5)", RESCALE),
    # the obvious torch spelling of 'same' for k=3, s=2: the right shape, shifted by a pixel
    "conv-transpose-same-shifted-by-a-pixel": ("nn.ConvTranspose2d(6, 5, 3, stride=2), nn.ZeroPad2d((0, -1, 0, -1))",
                                               "nn.ConvTranspose2d(6, 5, 3, stride=2, padding=1, output_padding=1), nn.Identity()",
                                               TRANSPOSE),
}
NEW_LAYER_MAP_MUTATIONS = {
    # channel-major vs multiplier-major output order of the depthwise filters: same shapes
    "depthwise-multiplier-order-swapped": ("depthwise-conv2d", "kernel", ["permute(3, 2, 0, 1)", "reshape(-1, 1, KH, KW)"],
                                           DEPTHWISE),
    "separable-pointwise-not-transposed": ("separable-conv2d", "pointwise_kernel", ["permute(2, 3, 0, 1)"], SEPARABLE),
    "conv-transpose-kernel-spatial-axes-swapped": ("conv2d-transpose", "kernel", ["permute(3, 2, 1, 0)"], TRANSPOSE),
}


@pytest.fixture(scope="module")
def new_layer_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("mut-new")
    (d / "model.py").write_text(NEW_LAYERS)
    out = translate_source(NEW_LAYERS, "model.py").output
    (d / "good.py").write_text(out)
    return d, out


def test_new_layers_correct_translation_passes(session, new_layer_files):
    cert = _run(session, new_layer_files, checks=("forward", "grad", "step"))
    assert cert["verdict"] == "pass", cert.get("problems")


@pytest.mark.parametrize("name", sorted(NEW_LAYER_TEXT_MUTATIONS))
def test_planted_bug_in_a_new_layer_is_caught(session, new_layer_files, name):
    old, new, layer = NEW_LAYER_TEXT_MUTATIONS[name]
    _, good = new_layer_files
    assert old in good, f"the translation changed: {old!r} not found; update the mutation"
    cert = _run(session, new_layer_files, good.replace(old, new), checks=("forward",))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"] is not None and cert["first_diverging"]["layer"] == layer, cert["first_diverging"]


@pytest.mark.parametrize("name", sorted(NEW_LAYER_MAP_MUTATIONS))
def test_planted_bug_in_a_new_weight_map_is_caught(session, new_layer_files, name):
    rule, source, ops, layer = NEW_LAYER_MAP_MUTATIONS[name]
    cert = _run(session, new_layer_files, pack=_mutated_pack(rule, None, ops, source), checks=("forward",))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"]["layer"] == layer, cert["first_diverging"]


# --- attention: MultiHeadAttention's mask polarity and its weight maps ------------------------------------

ATTENTION = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_model():
    inputs = keras.Input(shape=(6, 8))
    x = layers.MultiHeadAttention(num_heads=4, key_dim=4)(inputs, inputs, use_causal_mask=True)
    x = layers.LayerNormalization()(x + inputs)
    return keras.Model(inputs, layers.Dense(3)(x))
'''
MHA = "layers[1]"
ATTENTION_TEXT_MUTATIONS = {
    # torch's nn.MultiheadAttention takes True where a query must NOT attend: Keras's mask passed unchanged
    "attention-mask-polarity-inverted": ("scores.masked_fill(~mask, -1e9)", "scores.masked_fill(mask, -1e9)", MHA),
    # torch's scaled_dot_product_attention scales by 1/sqrt(head size) too, but of the value size here
    "attention-scaled-by-the-model-size": ("(1.0 / self.key_dim ** 0.5)", "(1.0 / query.shape[-1] ** 0.5)", MHA),
}
ATTENTION_MAP_MUTATIONS = {
    # the heads and the head size of a (features, heads, size) kernel swapped: same shape when heads == size
    "query-kernel-heads-and-size-swapped": ("multi-head-attention", "_query_dense.kernel", ["permute(0, 2, 1)"], MHA),
    # the output kernel (heads, value size, features) read as (value size, heads, features)
    "output-kernel-heads-and-size-swapped": ("multi-head-attention", "_output_dense.kernel", ["permute(1, 0, 2)"], MHA),
}


@pytest.fixture(scope="module")
def attention_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("mut-attn")
    (d / "model.py").write_text(ATTENTION)
    out = translate_source(ATTENTION, "model.py").output
    (d / "good.py").write_text(out)
    return d, out


def test_attention_correct_translation_passes(session, attention_files):
    cert = _run(session, attention_files, checks=("forward", "grad", "step"))
    assert cert["verdict"] == "pass", cert.get("problems")


@pytest.mark.parametrize("name", sorted(ATTENTION_TEXT_MUTATIONS))
def test_planted_bug_in_attention_is_caught(session, attention_files, name):
    old, new, layer = ATTENTION_TEXT_MUTATIONS[name]
    _, good = attention_files
    assert old in good, f"the translation changed: {old!r} not found; update the mutation"
    cert = _run(session, attention_files, good.replace(old, new), checks=("forward",))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"] is not None and cert["first_diverging"]["layer"] == layer, cert["first_diverging"]


@pytest.mark.parametrize("name", sorted(ATTENTION_MAP_MUTATIONS))
def test_planted_bug_in_attention_weight_map_is_caught(session, attention_files, name):
    rule, source, ops, layer = ATTENTION_MAP_MUTATIONS[name]
    pack = _mutated_pack(rule, None, ops, source)
    cert = _run(session, attention_files, pack=pack, checks=("forward",))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"]["layer"] == layer, cert["first_diverging"]


# --- the layers added for issue 8's coverage: TimeDistributed, EinsumDense, RMSNormalization, Lambda --------

MORE_LAYERS = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_model():
    return keras.Sequential([
        keras.Input(shape=(4, 6)),
        layers.TimeDistributed(layers.Dense(6)),
        layers.EinsumDense("abc,cd->abd", output_shape=(None, 6), bias_axes="d"),
        layers.RMSNormalization(epsilon=0.1),
        layers.Lambda(lambda x: x * 0.5 + 1.0),
        layers.Dense(3),
    ])
'''
TIME_DISTRIBUTED, EINSUM, RMS, LAMBDA = "layers[0]", "layers[1]", "layers[2]", "layers[3]"

MORE_TEXT_MUTATIONS = {
    "rms-epsilon-not-pinned": ("nn.RMSNorm(6, eps=0.1)", "nn.RMSNorm(6)", RMS),
    "lambda-body-changed": ("Lambda(lambda x: x * 0.5 + 1.0)", "Lambda(lambda x: x * 0.5 - 1.0)", LAMBDA),
    # the kernel read the other way round: a square kernel keeps the shapes
    "einsum-kernel-letters-swapped": ('EinsumDense("abc,cd->abd"', 'EinsumDense("abc,dc->abd"', EINSUM),
}
MORE_MAP_MUTATIONS = {  # square kernels: a transpose keeps the shapes
    "time-distributed-dense-kernel-not-transposed": ("time-distributed", "dense", "layer.kernel", ["copy"],
                                                     TIME_DISTRIBUTED),
    "einsum-kernel-transposed": ("einsum-dense", None, "kernel", ["transpose(1, 0)"], EINSUM),
}


@pytest.fixture(scope="module")
def more_layer_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("mut-more")
    (d / "model.py").write_text(MORE_LAYERS)
    out = translate_source(MORE_LAYERS, "model.py").output
    (d / "good.py").write_text(out)
    return d, out


def test_more_layers_correct_translation_passes(session, more_layer_files):
    cert = _run(session, more_layer_files, checks=("forward", "grad", "step"))
    assert cert["verdict"] == "pass", cert.get("problems")


@pytest.mark.parametrize("name", sorted(MORE_TEXT_MUTATIONS))
def test_planted_bug_in_a_more_layer_is_caught(session, more_layer_files, name):
    old, new, layer = MORE_TEXT_MUTATIONS[name]
    _, good = more_layer_files
    assert old in good, f"the translation changed: {old!r} not found; update the mutation"
    cert = _run(session, more_layer_files, good.replace(old, new), checks=("forward",))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"] is not None and cert["first_diverging"]["layer"] == layer, cert["first_diverging"]


@pytest.mark.parametrize("name", sorted(MORE_MAP_MUTATIONS))
def test_planted_bug_in_a_more_weight_map_is_caught(session, more_layer_files, name):
    rule, variant, source, ops, layer = MORE_MAP_MUTATIONS[name]
    cert = _run(session, more_layer_files, pack=_mutated_pack(rule, variant, ops, source), checks=("forward",))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"]["layer"] == layer, cert["first_diverging"]


# --- torch2jax: the traps of PyTorch → JAX/Equinox (issue 10) -----------------------------------------------
# The other planted bugs of torch2jax live beside its fixtures (tests/test_torch2jax.py PLANTED and
# TRAINING_PLANTED: GELU exact/tanh, pooling strides, BatchNorm eps and mode, attention mask polarity, the
# bidirectional LSTM, Adam's eps, coupled weight decay; tests/test_torch2jax_training.py: RMSprop's alpha and
# eps placement). Here: the unbiased variance, CrossEntropy's ignore_index and label_smoothing, and the two
# weight layouts the verifier's transfer writes (a ConvTranspose kernel flipped, an LSTM's two biases folded).

TORCH_MODELS = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Up(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(3, 4, kernel_size=3, stride=2, padding=1, output_padding=1)
        self.head = nn.Conv2d(4, 2, 1)

    def forward(self, x):
        return self.head(torch.relu(self.up(x)))


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(5, 6, batch_first=True)
        self.out = nn.Linear(6, 3)

    def forward(self, x):
        h, _ = self.lstm(x)
        return self.out(h)


class Spread(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        h = self.fc(x)
        return torch.var(h, dim=-1, keepdim=True) + h.std(dim=1, keepdim=True)


class TokenLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 5)

    def forward(self, x, targets):
        return F.cross_entropy(self.fc(x), targets, ignore_index=0, label_smoothing=0.1, reduction="none")
'''
TORCH_INPUTS = {"Up": ["float32[2,3,5,5]"], "Tagger": ["float32[2,4,5]"], "Spread": ["float32[3,6]"],
                "TokenLoss": ["float32[6,6]", "int64[6]:3"]}  # labels 0..2: some of them ignored


@pytest.fixture(scope="module")
def torch_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("mut-t2j")
    (d / "model.py").write_text(TORCH_MODELS)
    out = translate_source(TORCH_MODELS, "model.py", "torch2jax").output
    (d / "good.py").write_text(out)
    return d, out


def _run_t2j(session, files, model: str, text=None, checks=("forward", "grad")):
    d, good = files
    path = d / "good.py"
    if text is not None:
        assert text != good, "the mutation did not apply"
        path = d / f"mutant_{model}.py"
        path.write_text(text)
    return verify(Options(str(d / "model.py"), str(path), model, inputs=TORCH_INPUTS[model], checks=checks,
                          device="cpu", direction="torch2jax"), session)


@pytest.mark.parametrize("model", sorted(TORCH_INPUTS))
def test_torch2jax_correct_translation_passes(session, torch_files, model):
    cert = _run_t2j(session, torch_files, model)
    assert cert["verdict"] == "pass", cert.get("problems") or cert


TORCH_TEXT_MUTATIONS = {
    # name: (model, old, new)
    "var-biased": ("Spread", "jnp.var(h, axis=-1, keepdims=True, ddof=1)", "jnp.var(h, axis=-1, keepdims=True)"),
    "std-biased": ("Spread", "jnp.std(h, axis=0, ddof=1, keepdims=True)", "jnp.std(h, axis=0, keepdims=True)"),
    "std-batch-axis-kept": ("Spread", "jnp.std(h, axis=0, ddof=1, keepdims=True)", "jnp.std(h, axis=1, ddof=1, keepdims=True)"),
    "label-smoothing-dropped": ("TokenLoss", "(1 - 0.1) * optax", "optax"),
    "ignore-index-not-masked": ("TokenLoss", "jnp.where(targets != 0, ((1", "jnp.where(targets != -100, ((1"),
}


@pytest.mark.parametrize("name", sorted(TORCH_TEXT_MUTATIONS))
def test_torch2jax_planted_bug_in_translation_is_caught(session, torch_files, name):
    """Numerically wrong is a mismatch; code that cannot run at those shapes an error of the JAX side."""
    from fwport.verify.run import VerifyError
    model, old, new = TORCH_TEXT_MUTATIONS[name]
    _, good = torch_files
    assert old in good, f"the translation changed: {old!r} not found; update the mutation"
    try:
        cert = _run_t2j(session, torch_files, model, good.replace(old, new), checks=("forward",))
    except VerifyError as e:
        assert e.side == "jax", e
        return
    assert cert["verdict"] == "mismatch", cert


# The weight layouts are the verifier's own (fwport/verify/eqx_layouts.py, also `fwport weights --to .eqx`): a
# bug there is planted in a fresh pair of workers whose Python imports a sitecustomize that patches the module.
LAYOUT_BUGS = '''
import os, sys
import numpy as np
sys.path.insert(0, os.environ["FWPORT_VERIFY_DIR"])
import eqx_layouts
_flip, _cell = eqx_layouts._transposed_kernel, eqx_layouts._cell
# the ConvTranspose kernel moved without flipping its window (flipped twice)
eqx_layouts._transposed_kernel = lambda w, g: np.flip(_flip(w, g), axis=tuple(range(2, np.ndim(w))))
def cell(state, kind, p, names, values, grads, exact):  # the LSTM's recurrent bias not folded in
    _cell(state, kind, p, names, values, grads, exact)
    if kind == "lstm" and "bias_hh" in names:
        values[p + "bias"] = values[p + "bias"] - state[names["bias_hh"]]
eqx_layouts._cell = cell
'''


@pytest.fixture(scope="module")
def layout_bug_session(tmp_path_factory):
    import os

    import fwport.verify
    d = tmp_path_factory.mktemp("layout-bugs")
    (d / "sitecustomize.py").write_text(LAYOUT_BUGS)
    mp = pytest.MonkeyPatch()
    mp.setenv("PYTHONPATH", os.pathsep.join([str(d), *filter(None, [os.environ.get("PYTHONPATH")])]))
    mp.setenv("FWPORT_VERIFY_DIR", str(Path(fwport.verify.__file__).parent))
    try:
        with Session() as s:
            yield s
    finally:
        mp.undo()


@pytest.mark.parametrize("model,layer", [("Up", "up"), ("Tagger", "lstm")])
def test_torch2jax_planted_bug_in_a_weight_layout_is_caught(layout_bug_session, torch_files, model, layer):
    cert = _run_t2j(layout_bug_session, torch_files, model)
    assert cert["verdict"] == "mismatch", cert
    assert not all(e["ok"] for e in cert["results"]["outputs"]), cert["results"]["outputs"]
    assert cert["first_diverging"]["layer"] == layer, cert["first_diverging"]  # by its gradients


def test_torch2jax_workers_compute_float32_at_full_precision():
    """A GPU computes float32 matmuls and convolutions in TF32 (PyTorch's cuDNN convolutions by default) or bf16
    passes (XLA's default precision) unless told not to: each side would differ from the other by 1e-3, which a
    planted bug could hide in. The workers switch both off whatever the device (here the settings are read back;
    the machines of this suite have no GPU to show the difference)."""
    import os
    import subprocess
    import sys

    import fwport.verify
    here = str(Path(fwport.verify.__file__).parent)
    torch_side = (f"import sys; sys.path.insert(0, {here!r}); import torch_source_side, torch; "
                  "print(torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision)")
    jax_side = (f"import sys; sys.path.insert(0, {here!r}); import jax_side, jax; jax_side._setup('float32', 'cuda'); "
                "print(jax.config.jax_default_matmul_precision)")
    for code, want in ((torch_side, "ieee ieee"), (jax_side, "highest")):
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "JAX_PLATFORMS": "cpu"})
        assert p.returncode == 0, p.stderr[-2000:]
        assert p.stdout.split("\n")[-2].strip() == want, p.stdout


# --- issue 8's layers8b: input dropout of recurrent layers, Keras 3's augmentation layers -----------------------

LAYERS8B = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_model():
    new_shape = (4, 6)
    return keras.Sequential([
        keras.Input(shape=(24,)),
        layers.Reshape(new_shape),
        layers.LSTM(5, dropout=0.3, return_sequences=True),
        layers.Dense(3),
    ])


def build_augment():
    return keras.Sequential([
        keras.Input(shape=(8, 8, 3)),
        layers.RandomContrast(0.3),
        layers.RandomTranslation(0.2, 0.2),
        layers.RandomCrop(6, 6),
        layers.RandomBrightness(0.2),
        layers.Conv2D(2, 3),
        layers.GlobalAveragePooling2D(),
    ])
'''
# a training-only guard lost: the layer then acts at inference, where Keras's is the identity
LAYERS8B_TEXT_MUTATIONS = {
    "sequence-dropout-active-in-eval": ("build_model", "if not self.training or not 0 < self.p < 1:",
                                        "if not 0 < self.p < 1:", "layers[1]"),
    "contrast-active-in-eval": ("build_augment", "        if not self.training:\n            return x\n"
                                "        shape = (x.shape[0], 1, 1, 1) if x.dim() == 4 else (1, 1, 1)\n"
                                "        factor", "        shape = (x.shape[0], 1, 1, 1) if x.dim() == 4 else "
                                "(1, 1, 1)\n        factor", "layers[0]"),
    "translation-active-in-eval": ("build_augment", "        if not self.training:\n            return x\n"
                                   "        inverse = ", "        inverse = ", "layers[1]"),
    "brightness-active-in-eval": ("build_augment", "        if not self.training:\n            return x\n"
                                  "        shape = (x.shape[0], 1, 1, 1) if x.dim() == 4 else (1, 1, 1)\n"
                                  "        delta", "        shape = (x.shape[0], 1, 1, 1) if x.dim() == 4 else "
                                  "(1, 1, 1)\n        delta", "layers[3]"),
}


@pytest.fixture(scope="module")
def layers8b_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("mut-8b")
    (d / "model.py").write_text(LAYERS8B)
    out = translate_source(LAYERS8B, "model.py").output
    (d / "good.py").write_text(out)
    return d, out


def _run_8b(session, files, model, text=None):
    d, good = files
    path = d / "good.py"
    if text is not None:
        assert text != good, "the mutation did not apply"
        path = d / "mutant.py"
        path.write_text(text)
    return verify(Options(str(d / "model.py"), str(path), model, checks=("forward",), device="cpu"), session)


@pytest.mark.parametrize("model", ["build_model", "build_augment"])
def test_layers8b_correct_translation_passes(session, layers8b_files, model):
    cert = _run_8b(session, layers8b_files, model)
    assert cert["verdict"] == "pass", cert.get("problems")


@pytest.mark.parametrize("name", sorted(LAYERS8B_TEXT_MUTATIONS))
def test_planted_bug_in_a_layers8b_layer_is_caught(session, layers8b_files, name):
    model, old, new, layer = LAYERS8B_TEXT_MUTATIONS[name]
    _, good = layers8b_files
    assert good.count(old) == 1, f"the translation changed: {old!r}; update the mutation"
    cert = _run_8b(session, layers8b_files, model, good.replace(old, new))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"] is not None and cert["first_diverging"]["layer"] == layer, cert["first_diverging"]


# --- the rules added for issue 8's remaining layers: Conv3DTranspose, SeparableConv1D, 1-D padding / cropping ---------

NEW_CONVS = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_volume():
    return keras.Sequential([
        keras.Input(shape=(3, 4, 2, 2)),
        layers.Conv3DTranspose(3, 3, strides=2, padding="same"),
        layers.GlobalAveragePooling3D(),
        layers.Dense(2),
    ])


def build_sequence():
    return keras.Sequential([
        keras.Input(shape=(11, 3)),
        layers.SeparableConv1D(4, 3, padding="same", depth_multiplier=2),
        layers.ZeroPadding1D((1, 2)),
        layers.Cropping1D((3, 0)),
        layers.Flatten(),
        layers.Dense(2),
    ])
'''
NEW_CONV_TEXT_MUTATIONS = {
    # name: (model, old, new, the layer that must be named)
    # the obvious torch spelling of 'same' for k=3, s=2: the right shape, shifted by a voxel
    "conv3d-transpose-same-shifted-by-a-voxel": (
        "build_volume", "nn.ConvTranspose3d(2, 3, 3, stride=2), nn.ZeroPad3d((0, -1, 0, -1, 0, -1))",
        "nn.ConvTranspose3d(2, 3, 3, stride=2, padding=1, output_padding=1), nn.Identity()", "layers[0]"),
    # Keras's (before, after) read as torch's (after, before): the same length
    "zero-padding1d-sides-swapped": ("build_sequence", "nn.ZeroPad1d((1, 2))", "nn.ZeroPad1d((2, 1))", "layers[1]"),
    "cropping1d-from-the-wrong-end": ("build_sequence", "nn.ZeroPad1d((-3, 0))", "nn.ZeroPad1d((0, -3))", "layers[2]"),
}
NEW_CONV_MAP_MUTATIONS = {
    # name: (model, rule, source variable, ops, the layer that must be named)
    # the depthwise filters in multiplier-major order: the same shape
    "separable-conv1d-multiplier-order-swapped": ("build_sequence", "separable-conv1d", "depthwise_kernel",
                                                  ["permute(2, 1, 0)", "reshape(-1, 1, KW)"], "layers[0]"),
    # a cubic kernel with its spatial axes reversed: the same shape
    "conv3d-transpose-kernel-spatial-axes-swapped": ("build_volume", "conv3d-transpose", "kernel",
                                                     ["permute(4, 3, 2, 1, 0)"], "layers[0]"),
}


@pytest.fixture(scope="module")
def new_conv_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("mut-convs")
    (d / "model.py").write_text(NEW_CONVS)
    out = translate_source(NEW_CONVS, "model.py").output
    (d / "good.py").write_text(out)
    return d, out


def _run_convs(session, files, model, text=None, pack=None):
    d, good = files
    path = d / "good.py"
    if text is not None:
        assert text != good, "the mutation did not apply"
        path = d / "mutant.py"
        path.write_text(text)
    return verify(Options(str(d / "model.py"), str(path), model, checks=("forward",), device="cpu", pack=pack), session)


@pytest.mark.parametrize("model", ["build_volume", "build_sequence"])
def test_new_conv_rules_correct_translation_passes(session, new_conv_files, model):
    cert = _run_convs(session, new_conv_files, model)
    assert cert["verdict"] == "pass", cert.get("problems")


@pytest.mark.parametrize("name", sorted(NEW_CONV_TEXT_MUTATIONS))
def test_planted_bug_in_a_new_conv_rule_is_caught(session, new_conv_files, name):
    model, old, new, layer = NEW_CONV_TEXT_MUTATIONS[name]
    _, good = new_conv_files
    assert good.count(old) == 1, f"the translation changed: {old!r}; update the mutation"
    cert = _run_convs(session, new_conv_files, model, good.replace(old, new))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"] is not None and cert["first_diverging"]["layer"] == layer, cert["first_diverging"]


@pytest.mark.parametrize("name", sorted(NEW_CONV_MAP_MUTATIONS))
def test_planted_bug_in_a_new_conv_weight_map_is_caught(session, new_conv_files, name):
    model, rule, source, ops, layer = NEW_CONV_MAP_MUTATIONS[name]
    cert = _run_convs(session, new_conv_files, model, pack=_mutated_pack(rule, None, ops, source))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"]["layer"] == layer, cert["first_diverging"]


# --- issue 8's normalisation and resampling layers: GroupNormalization, UpSampling2D, UnitNormalization, Normalization --

NORMS = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_maps():
    return keras.Sequential([
        keras.Input(shape=(6, 5, 4)),
        layers.GroupNormalization(groups=2, epsilon=0.01),
        layers.UpSampling2D((2, 1), interpolation="bilinear"),
        layers.Permute((2, 1, 3)),
        layers.UnitNormalization(),
        layers.GlobalAveragePooling2D(),
        layers.Dense(2),
    ])


def build_vectors():
    return keras.Sequential([
        keras.Input(shape=(3,)),
        layers.Normalization(mean=[0.5, -1.0, 2.0], variance=[4.0, 0.0, 0.25]),
        layers.RepeatVector(4),
        layers.Dense(2),
    ])
'''
NORM_TEXT_MUTATIONS = {
    # name: (model, old, new, the layer that must be named)
    "group-norm-epsilon-left-at-torch-default": ("build_maps", "nn.GroupNorm(2, 4, eps=0.01)", "nn.GroupNorm(2, 4)",
                                                 "layers[0]"),
    # Keras's bilinear resize samples half-pixel centres, not the corners
    "upsampling-bilinear-aligned-at-the-corners": ("build_maps", 'mode="bilinear")',
                                                   'mode="bilinear", align_corners=True)', "layers[1]"),
    # the channels-last axis kept on the channels-first map: the same shape
    "unit-normalization-over-the-last-axis": ("build_maps", "UnitNormalization(1)", "UnitNormalization(-1)",
                                              "layers[3]"),
    # Keras clamps the standard deviation (a zero variance divides by 1e-7); the usual + eps under the root does not
    "normalization-epsilon-added-to-the-variance": (
        "build_vectors", "torch.clamp(self.variance.sqrt(), min=1e-7)", "torch.sqrt(self.variance + 1e-7)",
        "layers[0]"),
}


@pytest.fixture(scope="module")
def norm_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("mut-norms")
    (d / "model.py").write_text(NORMS)
    out = translate_source(NORMS, "model.py").output
    (d / "good.py").write_text(out)
    return d, out


@pytest.mark.parametrize("model", ["build_maps", "build_vectors"])
def test_norm_layers_correct_translation_passes(session, norm_files, model):
    cert = _run_convs(session, norm_files, model)
    assert cert["verdict"] == "pass", cert.get("problems")


@pytest.mark.parametrize("name", sorted(NORM_TEXT_MUTATIONS))
def test_planted_bug_in_a_norm_layer_is_caught(session, norm_files, name):
    model, old, new, layer = NORM_TEXT_MUTATIONS[name]
    _, good = norm_files
    assert good.count(old) == 1, f"the translation changed: {old!r}; update the mutation"
    cert = _run_convs(session, norm_files, model, good.replace(old, new))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"] is not None and cert["first_diverging"]["layer"] == layer, cert["first_diverging"]


# --- issue 8's Attention / AdditiveAttention, CenterCrop and the random image layers (identity at inference) ---------

SCORED = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_attention():
    q = keras.Input(shape=(4, 6))
    v = keras.Input(shape=(5, 6))
    a = layers.Attention(use_scale=True)([q, v])
    b = layers.AdditiveAttention()([q, v])
    return keras.Model([q, v], layers.Dense(2)(layers.Concatenate()([a, b])))


def build_images():
    return keras.Sequential([
        keras.Input(shape=(8, 7, 3)),
        layers.CenterCrop(5, 4),
        layers.RandomFlip(),
        layers.RandomRotation(0.2),
        layers.RandomZoom(0.2),
        layers.Conv2D(2, 3),
        layers.GlobalAveragePooling2D(),
    ])
'''
SCORED_INPUTS = {"build_attention": ["float32[2,4,6]", "float32[2,5,6]"], "build_images": None}
SCORED_TEXT_MUTATIONS = {
    # name: (model, old, new, the layer that must be named)
    # the weights taken over the queries: the same shape when read back
    "attention-softmax-over-the-queries": ("build_attention", "weights = torch.softmax(scores, dim=-1)",
                                           "weights = torch.softmax(scores, dim=-2)", "layers[2]"),
    # the odd pixel put before the window: TensorFlow's crop leaves it after
    "center-crop-rounded-up": ("build_images", "top, left = (h - self.height) // 2, (w - self.width) // 2",
                               "top, left = (h - self.height + 1) // 2, (w - self.width + 1) // 2", "layers[0]"),
    # a training-only guard lost: the layer then acts at inference, where Keras's is the identity
    "flip-active-in-eval": ("build_images", "        if not self.training:\n            return x\n"
                            "        shape = (x.shape[0],)", "        shape = (x.shape[0],)", "layers[1]"),
    "rotation-and-zoom-active-in-eval": ("build_images", "        if not self.training:\n            return x\n"
                                         "        inverse = ", "        inverse = ", "layers[2]"),
}


@pytest.fixture(scope="module")
def scored_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("mut-scored")
    (d / "model.py").write_text(SCORED)
    out = translate_source(SCORED, "model.py").output
    (d / "good.py").write_text(out)
    return d, out


def _run_scored(session, files, model, text=None):
    d, good = files
    path = d / "good.py"
    if text is not None:
        assert text != good, "the mutation did not apply"
        path = d / "mutant.py"
        path.write_text(text)
    return verify(Options(str(d / "model.py"), str(path), model, inputs=SCORED_INPUTS[model], checks=("forward",),
                          device="cpu"), session)


@pytest.mark.parametrize("model", sorted(SCORED_INPUTS))
def test_scored_and_image_layers_correct_translation_passes(session, scored_files, model):
    cert = _run_scored(session, scored_files, model)
    assert cert["verdict"] == "pass", cert.get("problems")


@pytest.mark.parametrize("name", sorted(SCORED_TEXT_MUTATIONS))
def test_planted_bug_in_a_scored_or_image_layer_is_caught(session, scored_files, name):
    model, old, new, layer = SCORED_TEXT_MUTATIONS[name]
    _, good = scored_files
    assert good.count(old) == 1, f"the translation changed: {old!r}; update the mutation"
    cert = _run_scored(session, scored_files, model, good.replace(old, new))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"] is not None and cert["first_diverging"]["layer"] == layer, cert["first_diverging"]


# --- issue 8: a planted bug for every remaining layer: Conv3D, Conv1DTranspose, 2-D / 3-D padding and cropping,
# UpSampling1D/3D, Permute, RepeatVector, GaussianNoise / GaussianDropout, Masking and the merge layers -----------------

PLANTED = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_volume():
    return keras.Sequential([
        keras.Input(shape=(5, 4, 3, 2)),
        layers.Conv3D(3, (3, 2, 2), strides=(2, 1, 1), padding="same"),
        layers.ZeroPadding3D(((1, 0), (0, 2), (2, 1))),
        layers.Cropping3D(((0, 1), (2, 0), (1, 2))),
        layers.UpSampling3D((2, 1, 3)),
        layers.Flatten(),
        layers.Dense(2),
    ])


def build_sequence():
    return keras.Sequential([
        keras.Input(shape=(6, 3)),
        layers.Conv1DTranspose(3, 3, strides=2, padding="same"),
        layers.Conv1DTranspose(3, 2, strides=3),
        layers.UpSampling1D(3),
        layers.Flatten(),
        layers.Dense(3),
        layers.RepeatVector(2),
    ])


def build_masked():
    return keras.Sequential([
        keras.Input(shape=(6, 3)),
        layers.Masking(mask_value=0.0),
        layers.LSTM(4),
        layers.Dense(2),
    ])


def build_maps():
    return keras.Sequential([
        keras.Input(shape=(3, 3, 3)),
        layers.ZeroPadding2D(((1, 2), (0, 1))),
        layers.Cropping2D(((2, 1), (0, 1))),
        layers.Permute((2, 1, 3)),
        layers.GaussianNoise(0.3),
        layers.GaussianDropout(0.2),
        layers.Flatten(),
        layers.Dense(2),
    ])


def build_merge():
    a = keras.Input(shape=(4, 4))
    b = keras.Input(shape=(4, 4))
    c = keras.Input(shape=(4, 4))
    add = layers.Add()([a, b, c])
    sub = layers.Subtract()([a, b])
    mul = layers.Multiply()([a, b, c])
    avg = layers.Average()([a, b, c])
    mx = layers.Maximum()([a, b, c])
    mn = layers.Minimum()([a, b, c])
    cat = layers.Concatenate(axis=1)([add, sub, mul, avg, mx, mn])
    dot = layers.Dot(axes=2)([a, b])
    return keras.Model([a, b, c], layers.Concatenate()([layers.Flatten()(cat), layers.Flatten()(dot)]))
'''
PLANTED_MODELS = {"build_volume": None, "build_sequence": None, "build_masked": None, "build_maps": None,
                  "build_merge": ["float32[2,4,4]"] * 3}
# the layer None: only the output shows the bug (the merge layers are inline tensor expressions of a subclassed
# forward: no module holds them)
PLANTED_TEXT_MUTATIONS = {
    # name: (model, old, new, the layer that must be named)
    # torch's padding="same" habit of putting the odd row after, read the other way: the same shape, shifted
    "conv3d-same-odd-row-padded-before": ("build_volume", "nn.ZeroPad3d((0, 1, 0, 1, 1, 1)), nn.Conv3d",
                                          "nn.ZeroPad3d((0, 1, 1, 0, 1, 1)), nn.Conv3d", "layers[0]"),
    # Keras's (before, after) of each axis read as torch's (after, before): the same shape
    "zero-padding3d-sides-swapped": ("build_volume", "nn.ZeroPad3d((2, 1, 0, 2, 1, 0))",
                                     "nn.ZeroPad3d((1, 2, 2, 0, 0, 1))", "layers[1]"),
    "cropping3d-from-the-wrong-ends": ("build_volume", "nn.ZeroPad3d((-1, -2, -2, 0, 0, -1))",
                                       "nn.ZeroPad3d((-2, -1, 0, -2, -1, 0))", "layers[2]"),
    # the factors given in reverse (torch's last-axis-first padding order applied to the scale)
    "upsampling3d-factors-reversed": ("build_volume", "nn.Upsample(scale_factor=(2, 1, 3))",
                                      "nn.Upsample(scale_factor=(3, 1, 2))", "layers[3]"),
    # the obvious torch spelling of 'same' for k=3, s=2: the right length, shifted by a sample
    "conv1d-transpose-same-by-output-padding": (
        "build_sequence", "nn.ConvTranspose1d(3, 3, 3, stride=2), nn.ZeroPad1d((0, -1))",
        "nn.ConvTranspose1d(3, 3, 3, stride=2, padding=1, output_padding=1), nn.Identity()", "layers[0]"),
    # k < s: TensorFlow's last row holds the bias (no kernel tap reaches it); zero-padding it back is one short of
    # that row's bias (the Upsample after it keeps its index: the transfer still finds every weight)
    "conv1d-transpose-uncovered-row-zero-padded": (
        "build_sequence", "nn.ConvTranspose1d(3, 3, 2, stride=3, output_padding=1),\n        nn.Upsample(scale_factor=3),",
        "nn.ConvTranspose1d(3, 3, 2, stride=3),\n        nn.Sequential(nn.ZeroPad1d((0, 1)), nn.Upsample(scale_factor=3)),",
        "layers[1]"),
    # Keras's UpSampling1D repeats each step; an interpolating upsample does not
    "upsampling1d-interpolated": ("build_sequence", "nn.Upsample(scale_factor=3)",
                                  'nn.Upsample(scale_factor=3, mode="linear")', "layers[2]"),
    # Keras's new axis 1 kept in the channels-first model: (batch, 2, 3) where (batch, 3, 2) is meant. Per layer it
    # holds Keras's values in Keras's layout (no layer is named); as the model's output it is read channels-first
    "repeat-vector-keras-axis-in-a-channels-first-model": ("build_sequence", "RepeatVector(2, dim=2)",
                                                           "RepeatVector(2, dim=1)", None),
    # the mask taken over the steps instead of the features: every sequence cut to 3 steps
    "masking-over-the-wrong-axis": ("build_masked", "(x != self.mask_value).any(dim=-1)",
                                    "(x != self.mask_value).any(dim=1)", "layers[1]"),
    "zero-padding2d-sides-swapped": ("build_maps", "nn.ZeroPad2d((0, 1, 1, 2))", "nn.ZeroPad2d((1, 0, 2, 1))",
                                     "layers[0]"),
    "cropping2d-from-the-wrong-ends": ("build_maps", "nn.ZeroPad2d((0, -1, -2, -1))", "nn.ZeroPad2d((-1, 0, -1, -2))",
                                       "layers[1]"),
    # Keras's dims kept on the channels-first map (a 3x3x3 map: the same shape, the values catch it)
    "permute-keras-dims-kept": ("build_maps", "Permute((1, 3, 2))", "Permute((2, 1, 3))", "layers[2]"),
    # a training-only guard lost: the layer then acts at inference, where Keras's is the identity
    "gaussian-noise-active-in-eval": ("build_maps",
                                      "return x + torch.randn_like(x) * self.stddev if self.training else x",
                                      "return x + torch.randn_like(x) * self.stddev", "layers[3]"),
    "gaussian-dropout-active-in-eval": ("build_maps", "if not self.training or not 0 < self.rate < 1:",
                                        "if not 0 < self.rate < 1:", "layers[4]"),
    # a merge of three inputs translated as the usual merge of two
    "add-third-input-dropped": ("build_merge", "add = a + b + c", "add = a + b", None),
    "multiply-third-input-dropped": ("build_merge", "mul = a * b * c", "mul = a * b", None),
    "maximum-third-input-dropped": ("build_merge", "mx = torch.maximum(torch.maximum(a, b), c)",
                                    "mx = torch.maximum(a, b)", None),
    "minimum-third-input-dropped": ("build_merge", "mn = torch.minimum(torch.minimum(a, b), c)",
                                    "mn = torch.minimum(a, b)", None),
    "average-divided-by-two": ("build_merge", "avg = (a + b + c) / 3", "avg = (a + b + c) / 2", None),
    "subtract-operands-swapped": ("build_merge", "sub = a - b", "sub = b - a", None),
    # Keras's default axis (-1) where the code says axis=1: the flattened output has the same size
    "concatenate-axis-left-at-the-default": ("build_merge", "mn], dim=1)", "mn], dim=-1)", None),
    # axes counted without the batch axis (square inputs: the same shape)
    "dot-axes-counted-without-the-batch": ("build_merge", "self.dot = Dot(2)", "self.dot = Dot(1)", None),
}
PLANTED_MAP_MUTATIONS = {
    # name: (model, rule, source variable, ops, the layer that must be named)
    # the kernel's height and width swapped (2x2: the same shape)
    "conv3d-kernel-height-and-width-swapped": ("build_volume", "conv3d", "kernel", ["permute(4, 3, 0, 2, 1)"],
                                               "layers[0]"),
    # the kernel's memory read as (out, in) instead of transposed: the same shape. The Dense after a
    # ChannelsLastReshape((-1,)) (features already in Keras's order): named, not the Flatten before it
    "dense-kernel-reshaped-not-transposed": ("build_volume", "dense", "kernel", ["reshape(2, -1)"], "layers[5]"),
    # the forward conv's (out, in, k) where torch's transposed conv wants (in, out, k): 3 in, 3 out, the same shape
    "conv1d-transpose-kernel-in-forward-conv-order": ("build_sequence", "conv1d-transpose", "kernel",
                                                      ["permute(1, 2, 0)"], "layers[0]"),
}


@pytest.fixture(scope="module")
def planted_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("mut-planted")
    (d / "model.py").write_text(PLANTED)
    r = translate_source(PLANTED, "model.py")
    assert not [f for f in r.findings if f.severity == "error"], r.findings
    (d / "good.py").write_text(r.output)
    return d, r.output


def _run_planted(session, files, model, text=None, pack=None):
    d, good = files
    path = d / "good.py"
    if text is not None:
        assert text != good, "the mutation did not apply"
        path = d / "mutant.py"
        path.write_text(text)
    return verify(Options(str(d / "model.py"), str(path), model, inputs=PLANTED_MODELS[model] or [],
                          checks=("forward",), device="cpu", pack=pack), session)


@pytest.mark.parametrize("model", sorted(PLANTED_MODELS))
def test_planted_layers_correct_translation_passes(session, planted_files, model):
    cert = _run_planted(session, planted_files, model)
    assert cert["verdict"] == "pass", cert.get("problems")
    # a 3x3x3 map reads the same channels-first and channels-last: every layer is still compared in Keras's layout
    layers = cert["results"]["layers"]
    assert all(e["ok"] for e in layers) and (layers or model == "build_merge"), layers


@pytest.mark.parametrize("name", sorted(PLANTED_TEXT_MUTATIONS))
def test_planted_bug_in_a_remaining_layer_is_caught(session, planted_files, name):
    model, old, new, layer = PLANTED_TEXT_MUTATIONS[name]
    _, good = planted_files
    assert good.count(old) == 1, f"the translation changed: {old!r}; update the mutation"
    cert = _run_planted(session, planted_files, model, good.replace(old, new))
    assert cert["verdict"] == "mismatch"
    assert cert["problems"] == ["outputs: output 0"], cert["problems"]
    if layer is None:
        assert cert["first_diverging"] is None  # (see PLANTED_TEXT_MUTATIONS)
    else:
        assert cert["first_diverging"] is not None and cert["first_diverging"]["layer"] == layer, \
            cert["first_diverging"]


@pytest.mark.parametrize("name", sorted(PLANTED_MAP_MUTATIONS))
def test_planted_bug_in_a_remaining_weight_map_is_caught(session, planted_files, name):
    model, rule, source, ops, layer = PLANTED_MAP_MUTATIONS[name]
    cert = _run_planted(session, planted_files, model, pack=_mutated_pack(rule, None, ops, source))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"] is not None and cert["first_diverging"]["layer"] == layer, cert["first_diverging"]


def test_flatten_of_a_volume_says_why_it_keeps_keras_order():
    """A 3-D map's sizes are all numbers: the message gives the real reason (the Dense reorders 2-D maps only)."""
    r = translate_source(PLANTED, "model.py")
    said = [f.message for f in r.findings if f.code == "layout-kept" and "ChannelsLastReshape" in f.message]
    assert len(said) == 1 and "a channels-first volume (6, 4, 9, 3)" in said[0], said
    assert "not all numbers" not in said[0]


# --- output_padding= of Conv1D/2D/3DTranspose: TensorFlow's crop of the full transposed conv, per axis ----------------

OUTPUT_PADDING = '''from tensorflow import keras
from tensorflow.keras import layers


def build_sequence():
    return keras.Sequential([
        keras.Input(shape=(5, 2)),
        layers.Conv1DTranspose(3, 4, strides=2, padding="same", output_padding=1),
        layers.Conv1DTranspose(2, 3, strides=3, output_padding=2),
        layers.Conv1DTranspose(2, 2, strides=3, padding="same", output_padding=2),
        layers.Conv1DTranspose(2, 1, strides=2, padding="same", output_padding=1),
        layers.Conv1DTranspose(2, 5, strides=3, padding="same", output_padding=2),
    ])


def build_maps():
    return keras.Sequential([
        keras.Input(shape=(4, 3, 2)),
        layers.Conv2DTranspose(2, (3, 5), strides=(2, 2), padding="same", output_padding=(1, 0)),
        layers.Conv2DTranspose(2, 2, strides=2, output_padding=1),
    ])


def build_volume():
    return keras.Sequential([
        keras.Input(shape=(3, 2, 3, 2)),
        layers.Conv3DTranspose(2, (3, 2, 4), strides=(2, 3, 2), padding="same", output_padding=(0, 2, 1)),
    ])
'''
OUTPUT_PADDING_TEXT_MUTATIONS = {
    # name: (model, old, new, the layer that must be named)
    # Keras's padding k // 2 and output_padding copied into torch: the same size, shifted by a sample
    "output-padding-copied-from-keras": ("build_sequence", "nn.ConvTranspose1d(2, 3, 4, stride=2, padding=1), "
                                         "nn.ZeroPad1d((0, -1))", "nn.ConvTranspose1d(2, 3, 4, stride=2, padding=2, "
                                         "output_padding=1), nn.Identity()", "layers[0]"),
}


@pytest.fixture(scope="module")
def output_padding_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("mut-output-padding")
    (d / "model.py").write_text(OUTPUT_PADDING)
    r = translate_source(OUTPUT_PADDING, "model.py")
    assert not [f for f in r.findings if f.severity == "error"], r.findings
    (d / "good.py").write_text(r.output)
    return d, r.output


@pytest.mark.parametrize("model", ["build_sequence", "build_maps", "build_volume"])
def test_output_padding_translation_matches_keras(session, output_padding_files, model):
    cert = _run_convs(session, output_padding_files, model)
    assert cert["verdict"] == "pass", cert.get("problems")
    assert cert["results"]["layers"] and all(e["ok"] for e in cert["results"]["layers"])


@pytest.mark.parametrize("name", sorted(OUTPUT_PADDING_TEXT_MUTATIONS))
def test_planted_bug_in_output_padding_is_caught(session, output_padding_files, name):
    model, old, new, layer = OUTPUT_PADDING_TEXT_MUTATIONS[name]
    _, good = output_padding_files
    assert good.count(old) == 1, f"the translation changed: {old!r}; update the mutation"
    cert = _run_convs(session, output_padding_files, model, good.replace(old, new))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"] is not None and cert["first_diverging"]["layer"] == layer, cert["first_diverging"]


@pytest.mark.parametrize("arg", ["output_padding=2", "output_padding=p"])
def test_output_padding_keras_refuses_or_not_literal_is_an_error(arg):
    src = ("from tensorflow import keras\nfrom tensorflow.keras import layers\np = 1\n"
           f"up = keras.Sequential([keras.Input((9, 4)), layers.Conv1DTranspose(2, 3, strides=2, {arg})])\n")
    r = translate_source(src, "m.py")
    said = [f.message for f in r.findings if f.code == "unsupported-argument"]
    assert len(said) == 1 and said[0].startswith(arg), said
    assert "# fwport: unsupported-argument" in r.output
