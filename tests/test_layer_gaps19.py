"""Issue 8's layer gaps (task lay19): each construct translated exactly and checked against Keras with
``fwport verify`` (weights transferred; forward, gradients and a training step compared), or an explicit
error finding.

- ``BatchNormalization(scale=False)`` / ``LayerNormalization(scale=False)`` (center kept): the without_scale
  helper, whose weight is a constant of ones;
- ``Dense`` on a feature map of a model converted to channels-first (a RepeatVector's steps, a conv's map):
  a Conv with kernel size 1 over the channels;
- ``Bidirectional(layer, backward_layer=<the same layer with go_backwards=True>)``: torch's reverse direction.

The planted bugs for these are in tests/test_verify_mutations_lay19.py.
"""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from runners import Warm

PACK = load_pack("tf2torch")


def tr(src: str, **opts):
    return translate_source(textwrap.dedent(src).lstrip("\n"), PACK, **opts)


def errors(result):
    return [f.message for f in result.findings if f.severity == Severity.ERROR]


def _verify(tmp_path, src: str, out: str, cases: dict[str, str], checks=("forward", "grad", "step")) -> None:
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "m_torch.py").write_text(out)
    session = Warm.session()
    for model, spec in cases.items():
        cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "m_torch.py"), model, inputs=[spec],
                              checks=checks, device="cpu"), session)
        assert cert["verdict"] == "pass", (model, cert.get("problems") or cert.get("first_diverging"))
        assert all(e["ok"] for e in cert["results"].get("layers", [])), (model, cert["results"]["layers"])


# --- normalization with scale=False ------------------------------------------------------------------------

NO_SCALE = '''
import keras
from keras import layers


def build_model():
    return keras.Sequential([
        keras.Input(shape=(8, 8, 3)),
        layers.Conv2D(4, 3, use_bias=False),
        layers.BatchNormalization(scale=False),
        layers.ReLU(),
        layers.Flatten(),
        layers.Dense(5),
        layers.BatchNormalization(scale=False, momentum=0.9),
        layers.LayerNormalization(scale=False),
    ])


def build_functional():
    inp = keras.Input(shape=(8, 8, 3))
    x = layers.Conv2D(4, 3, use_bias=False)(inp)
    x = layers.BatchNormalization(scale=False)(x)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inp, x)
'''


def test_norms_without_scale_match_keras_and_hold_no_weight(tmp_path):
    """scale=False with center=True had been an error (torch has a bias-only switch, no weight-only one): the
    module is wrapped in without_scale, whose weight is a non-persistent buffer of ones. Keras's outputs,
    gradients and SGD step (training mode: batch statistics and moving averages) are the translation's; the
    weight is no parameter, not in the state_dict, and stays 1 after a training step."""
    src = textwrap.dedent(NO_SCALE).lstrip("\n")
    r = tr(src)
    assert not errors(r), errors(r)
    assert r.output.count("without_scale(nn.") == 4, r.output
    assert "without_scale(nn.BatchNorm2d(4, momentum=0.01, eps=0.001))" in r.output
    assert "without_scale(nn.LayerNorm(5, eps=0.001))" in r.output
    _verify(tmp_path, src, r.output, {"build_model": "float32[4,8,8,3]", "build_functional": "float32[4,8,8,3]"})

    import torch
    ns: dict = {}
    exec(compile(r.output, "m_torch.py", "exec"), ns)
    model = ns["build_model"]()
    names = [n for n, _ in model.named_parameters()]
    assert "1.weight" not in names and "1.bias" in names and "6.weight" not in names, names
    assert "1.weight" not in model.state_dict() and "1.bias" in model.state_dict()
    opt = torch.optim.SGD(model.parameters(), lr=0.5, weight_decay=0.1)
    model(torch.randn(4, 3, 8, 8)).square().sum().backward()
    opt.step()
    assert torch.equal(model[1].weight, torch.ones(4)) and torch.equal(model[6].weight, torch.ones(5))
    assert not torch.equal(model[1].bias, torch.zeros(4))  # the bias (Keras's beta) is trained


def test_norm_without_scale_where_the_size_is_unknown_is_an_error():
    r = tr('''
        from keras import layers

        bn = layers.BatchNormalization(scale=False)
        ln = layers.LayerNormalization(scale=False)
    ''')
    assert len(errors(r)) == 2 and all("scale=False with center=True on an input whose size is unknown" in m
                                       for m in errors(r)), errors(r)
    assert "without_scale" not in r.output


# --- Dense on a channels-first map ---------------------------------------------------------------------------

DENSE_ON_MAPS = '''
import keras
from keras import layers


def build_functional():
    inp = keras.Input(shape=(5,))
    x = layers.Dense(3)(inp)
    x = layers.RepeatVector(4)(x)
    x = layers.Conv1D(2, 1)(x)
    x = layers.Dense(6)(x)
    return keras.Model(inp, x)


def build_decoder():
    return keras.Sequential([
        keras.Input(shape=(5,)),
        layers.Dense(3),
        layers.RepeatVector(4),
        layers.Conv1D(2, 3, padding="same"),
        layers.Dense(6, activation="softmax"),
    ])


def build_pooled():
    return keras.Sequential([
        keras.Input(shape=(8, 8, 3)),
        layers.Conv2D(4, 3),
        layers.GlobalAveragePooling2D(),
        layers.RepeatVector(4),
        layers.Dense(6),
    ])


def build_maps():
    return keras.Sequential([
        keras.Input(shape=(6, 5, 3)),
        layers.Conv2D(4, 3, padding="same"),
        layers.Dense(3, activation="softmax"),
        layers.Dense(2, use_bias=False),
        layers.Flatten(),
        layers.Dense(4),
    ])


def build_volume():
    return keras.Sequential([
        keras.Input(shape=(3, 4, 2, 3)),
        layers.Conv3D(2, 1),
        layers.Dense(3),
    ])
'''


def test_dense_on_a_channels_first_map_is_a_pointwise_conv_matching_keras(tmp_path):
    """Dense after a RepeatVector and a Conv1D (a seq2seq decoder), on a conv's 2-D map (softmax over the
    channels), on a volume: Keras's Dense acts on the last axis, the channels (dim 1) of the channels-first
    translation; Conv1d/2d/3d(in, units, 1) is that map, its kernel transposed and reshaped by the rule's
    channels-first-{1,2,3}d variants. It had been an unsupported-construct error."""
    src = textwrap.dedent(DENSE_ON_MAPS).lstrip("\n")
    r = tr(src)
    assert not errors(r), errors(r)
    out = r.output
    assert "nn.Conv1d(2, 6, 1)" in out and "nn.Conv1d(2, 6, 1), nn.Softmax(dim=1)" in out
    assert "nn.Conv1d(4, 6, 1)" in out
    assert "nn.Conv2d(4, 3, 1), nn.Softmax(dim=1)," in out and "nn.Conv2d(3, 2, 1, bias=False)" in out
    assert "nn.Conv3d(2, 3, 1)" in out
    infos = [f.message for f in r.findings if f.code == "layout-changed" and "kernel size 1" in f.message]
    assert len(infos) == 6, infos
    _verify(tmp_path, src, out, {"build_functional": "float32[3,5]", "build_decoder": "float32[3,5]",
                                 "build_pooled": "float32[3,8,8,3]", "build_maps": "float32[3,6,5,3]",
                                 "build_volume": "float32[3,3,4,2,3]"})


def test_dense_on_a_channels_first_map_of_unknown_channels_is_an_error():
    r = tr('''
        import keras
        from keras import layers


        def build(n):
            return keras.Sequential([keras.Input(shape=(8, 8, 3)), layers.Conv2D(n, 3), layers.Dense(2)])
    ''')
    assert any("acts on its channels (dim 1), which needs their number" in m for m in errors(r)), errors(r)


# --- Bidirectional with backward_layer= ----------------------------------------------------------------------

BACKWARD_LAYER = '''
import keras
from keras import layers


def build_functional():
    inp = keras.Input(shape=(7, 5))
    x = layers.Bidirectional(layers.LSTM(4, return_sequences=True),
                             backward_layer=layers.LSTM(4, return_sequences=True, go_backwards=True, name="back"))(inp)
    x = layers.Bidirectional(layers.GRU(3), merge_mode="sum", backward_layer=layers.GRU(3, go_backwards=True))(x)
    return keras.Model(inp, x)


def build_sequence():
    return keras.Sequential([
        keras.Input(shape=(7, 5)),
        layers.Bidirectional(layers.SimpleRNN(3, return_sequences=True), merge_mode="ave", backward_layer=BACK),
        layers.Bidirectional(layers.LSTM(2), merge_mode="mul", backward_layer=layers.LSTM(2, go_backwards=True)),
    ])
'''.replace("BACK", "layers.SimpleRNN(3, go_backwards=True, return_sequences=True)")  # one line per layer:
# the verifier pairs a Sequential's Keras layers with its torch modules by line


def test_bidirectional_backward_layer_that_mirrors_the_forward_one_matches_keras(tmp_path):
    """backward_layer= the same layer with go_backwards=True (what Keras builds itself): torch's
    bidirectional RNN, the backward layer's weights in the reverse direction; every merge mode, with and
    without return_sequences, checked against Keras (random weights, distinct per direction)."""
    src = textwrap.dedent(BACKWARD_LAYER).lstrip("\n")
    r = tr(src)
    assert not errors(r), errors(r)
    assert r.output.count("bidirectional=True") == 4 and "ReverseSteps" not in r.output
    _verify(tmp_path, src, r.output, {"build_functional": "float32[3,7,5]", "build_sequence": "float32[3,7,5]"})


@pytest.mark.parametrize("backward, why", [
    ("layers.LSTM(5, go_backwards=True)", "it differs from the forward layer in units"),
    ("layers.GRU(3, go_backwards=True)", "is not a LSTM written in the call"),
    ("layers.LSTM(3, go_backwards=True, activation='relu')", "it differs from the forward layer in activation"),
    ("layers.LSTM(3)", "only a backward layer with go_backwards=True"),
    ("back", "is not a LSTM written in the call"),
])
def test_bidirectional_other_backward_layers_are_errors(backward, why):
    r = tr(f'''
        import keras
        from keras import layers

        back = layers.LSTM(3, go_backwards=True)


        def build():
            return keras.Sequential([keras.Input(shape=(7, 5)),
                                     layers.Bidirectional(layers.LSTM(3), backward_layer={backward})])
    ''')
    assert any(m.startswith("backward_layer=: ") and why in m for m in errors(r)), errors(r)
    assert f"layers.Bidirectional(layers.LSTM(3), backward_layer={backward})" in r.output  # left as written


# --- model.get_layer("name").kernel / .bias read as values ----------------------------------------------------

GET_LAYER_VARIABLES = '''
import keras
from keras import layers


def build():
    inp = keras.Input(shape=(6, 6, 3))
    x = layers.Conv2D(4, (3, 2), name="conv")(inp)
    x = layers.GlobalAveragePooling2D()(x)
    out = layers.Dense(2, name="head")(x)
    return keras.Model(inp, out)


def seq():
    return keras.Sequential([keras.Input(shape=(5,)), layers.Dense(3, name="out")])


model = build()
s = seq()


def read():
    return [model.get_layer("conv").kernel, model.get_layer("conv").bias, model.get_layer("head").kernel,
            s.get_layer("out").kernel, s.get_layer("out").bias]
'''


def test_get_layer_kernel_and_bias_read_in_keras_layout_match_keras():
    """get_layer("name").kernel / .bias on a functional model and a Sequential → the torch parameter in Keras's
    layout (the inverse of the rule's weight map: a Dense's weight.T, a Conv2D's weight permuted back to
    (kh, kw, in, out)). Checked against Keras: distinct arrays set in Keras, moved into torch by the rules' weight
    maps (the verifier's interpreter), read back by each side equal."""
    from test_layer_gaps import _run
    r = tr(GET_LAYER_VARIABLES)
    assert not errors(r), errors(r)
    assert "model.conv.weight.permute(2, 3, 1, 0), model.conv.bias, model.head.weight.T" in r.output
    assert "s[0].weight.T, s[0].bias" in r.output and "get_layer" not in r.output
    arrays = '''
import json
import numpy as np
rng = np.random.default_rng(0)
values = {"conv": [rng.standard_normal((3, 2, 3, 4)), rng.standard_normal(4)],
          "head": [rng.standard_normal((4, 2)), rng.standard_normal(2)],
          "out": [rng.standard_normal((5, 3)), rng.standard_normal(3)]}
'''
    keras_tail = arrays + '''
for name, vs in values.items():
    (s if name == "out" else model).get_layer(name).set_weights([v.astype("float32") for v in vs])
print(json.dumps([np.asarray(v).tolist() for v in read()]))
'''
    torch_tail = arrays + '''
import torch
from fwport.core.rule import load_pack
from fwport.verify.transfer import apply_ops
pack = load_pack("tf2torch")
modules = {"conv": ("conv2d", model.conv), "head": ("dense", model.head), "out": ("dense", s[0])}
with torch.no_grad():
    for name, (rule, module) in modules.items():
        for w in pack.rules[rule].weights_for(None):
            v = values[name][0 if w.source == "kernel" else 1]
            getattr(module, w.target).copy_(torch.from_numpy(apply_ops(v.astype("float32"), w.ops, {})))
print(json.dumps([v.detach().numpy().tolist() for v in read()]))
'''
    import numpy as np
    k = _run("keras", textwrap.dedent(GET_LAYER_VARIABLES), keras_tail)
    t = _run("torch", r.output, torch_tail, PYTHONPATH=str(__import__("pathlib").Path(__file__).parents[1]))
    assert len(k) == len(t) == 5
    for a, b in zip(k, t):
        np.testing.assert_array_equal(np.array(b), np.array(a))


def test_get_layer_variables_fwport_cannot_give_are_errors():
    """Written by =, a kernel whose map is no single permutation (a Dense after a channels-first Flatten: its rows
    reordered) read or assigned, an LSTM's kernel (two parameters): each an error, never a silently wrong layout."""
    r = tr('''
        import keras
        import numpy as np
        from keras import layers


        def build():
            inp = keras.Input(shape=(6, 6, 3))
            x = layers.Conv2D(4, 3, name="conv")(inp)
            x = layers.Flatten()(x)
            out = layers.Dense(2, name="head")(x)
            return keras.Model(inp, out)


        def seq():
            return keras.Sequential([keras.Input(shape=(7, 5)), layers.LSTM(3, name="rnn")])


        model = build()
        s = seq()
        fk = model.get_layer("head").kernel
        rk = s.get_layer("rnn").kernel
        model.get_layer("head").kernel.assign(np.zeros((64, 2)))
        model.get_layer("conv").bias = None
    ''')
    errs = errors(r)
    assert sum("kernel is read here, which fwport gives only" in m for m in errs) == 2, errs
    assert sum("kernel is written here, which fwport gives only" in m for m in errs) == 1, errs
    assert sum("written: the translated layer's weights are torch parameters (model.conv)" in m for m in errs) == 1, errs
    assert 'fk = model.get_layer("head").kernel' in r.output and 'rk = s.get_layer("rnn").kernel' in r.output


# --- Random* augmentation layers: the identity at inference, exactly ----------------------------------------

AUGMENT = '''
from tensorflow import keras
from tensorflow.keras import layers

flip = layers.RandomFlip()
rotation = layers.RandomRotation(0.2)
zoom = layers.RandomZoom(0.3, 0.2)
translation = layers.RandomTranslation(0.1, 0.2, fill_mode="constant")
contrast = layers.RandomContrast(0.4)
'''


def test_random_augmentation_layers_are_the_identity_at_inference_and_draw_in_training():
    """RandomFlip / RandomRotation / RandomZoom / RandomTranslation / RandomContrast (helpers written with torch ops,
    an info or warning that torch's draws are not Keras's): in eval() each gives its input back bit for bit, as
    Keras's layer at inference (checked against Keras); in train() each changes the images."""
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    r = tr(AUGMENT)
    assert not errors(r), errors(r)
    assert "tensorflow" not in r.output and "torchvision" not in r.output
    ns: dict = {}
    exec(compile(r.output, "m_torch.py", "exec"), ns)
    keras_ns: dict = {}
    exec(textwrap.dedent(AUGMENT), keras_ns)
    x = np.random.default_rng(0).uniform(0, 255, (3, 8, 9, 3)).astype("float32")
    torch.manual_seed(0)
    for name in ("flip", "rotation", "zoom", "translation", "contrast"):
        k = np.asarray(keras_ns[name](x, training=False))
        np.testing.assert_array_equal(k, x)
        t = ns[name].eval()(torch.from_numpy(x)).numpy()
        np.testing.assert_array_equal(t, k)
        moved = ns[name].train()(torch.from_numpy(x)).numpy()
        assert moved.shape == x.shape and not np.array_equal(moved, x), name
