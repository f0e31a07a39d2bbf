"""Planted bugs for the layer behaviour task lay19 added (see tests/test_verify_mutations.py for the method):
BatchNormalization(scale=False) through without_scale, Dense on a channels-first map as a pointwise conv, and
Bidirectional with a backward_layer=. Each mutant is a plausible hand port or a wrong weight map; ``verify``
must fail on it and, where a module holds the bug, name that Keras layer."""
from __future__ import annotations

import dataclasses

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import Pack, WeightMap, load_pack
from fwport.verify import Options, verify

ORIGINAL = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_norm():
    return keras.Sequential([
        keras.Input(shape=(6, 6, 3)),
        layers.Conv2D(4, 3, use_bias=False),
        layers.BatchNormalization(scale=False),
        layers.Flatten(),
        layers.Dense(3),
    ])


def build_pointwise():
    return keras.Sequential([
        keras.Input(shape=(5,)),
        layers.RepeatVector(3),
        layers.Conv1D(4, 2, padding="same"),
        layers.Dense(4, activation="softmax"),
        layers.GlobalMaxPooling1D(),
        layers.Dense(2),
    ])


def build_backward():
    return keras.Sequential([
        keras.Input(shape=(6, 3)),
        layers.Bidirectional(layers.GRU(3, return_sequences=True), backward_layer=BACK),
        layers.Flatten(),
        layers.Dense(2),
    ])
'''.replace("BACK", "layers.GRU(3, return_sequences=True, go_backwards=True)")  # (one line per layer)
INPUTS = {"build_norm": "float32[4,6,6,3]", "build_pointwise": "float32[4,5]", "build_backward": "float32[4,6,3]"}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("mut-lay19")
    (d / "model.py").write_text(ORIGINAL)
    r = translate_source(ORIGINAL, "model.py")
    assert not [f for f in r.findings if f.severity == "error"], r.findings
    (d / "good.py").write_text(r.output)
    return d, r.output


def _run(session, files, model, text=None, pack=None, checks=("forward",)):
    d, good = files
    path = d / "good.py"
    if text is not None:
        assert text != good, "the mutation did not apply"
        path = d / "mutant.py"
        path.write_text(text)
    return verify(Options(str(d / "model.py"), str(path), model, inputs=[INPUTS[model]], checks=checks, device="cpu",
                          pack=pack), session)


@pytest.mark.parametrize("model", sorted(INPUTS))
def test_correct_translations_pass(session, files, model):
    cert = _run(session, files, model, checks=("forward", "grad", "step"))
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    assert cert["results"]["layers"] and all(e["ok"] for e in cert["results"]["layers"]), cert["results"]["layers"]


TEXT_MUTATIONS = {
    # name: (model, old, new, the layer that must be named)
    # the Dense's softmax left on the last axis, which is the steps of the channels-first map (the same shape)
    "pointwise-dense-softmax-over-the-steps": ("build_pointwise", "nn.Conv1d(4, 4, 1), nn.Softmax(dim=1)",
                                               "nn.Conv1d(4, 4, 1), nn.Softmax(dim=-1)", "layers[2]"),
}


@pytest.mark.parametrize("name", sorted(TEXT_MUTATIONS))
def test_planted_text_bug_is_caught(session, files, name):
    model, old, new, layer = TEXT_MUTATIONS[name]
    _, good = files
    assert good.count(old) == 1, f"the translation changed: {old!r}; update the mutation"
    cert = _run(session, files, model, good.replace(old, new))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"] is not None and cert["first_diverging"]["layer"] == layer, cert["first_diverging"]


@pytest.mark.parametrize("new, problem", [
    # the obvious port: a plain BatchNorm2d, whose weight (learnt, initialised at 1) Keras does not have
    ("nn.BatchNorm2d(4, momentum=0.01, eps=0.001)", "torch parameters/buffers no weight map writes: 1.weight"),
    # affine=False: Keras's beta (center=True) dropped
    ("nn.BatchNorm2d(4, momentum=0.01, eps=0.001, affine=False)", "writes 1.bias, which the translated model does "
                                                                  "not have"),
])
def test_batch_norm_without_scale_hand_ports_are_caught(session, files, new, problem):
    _, good = files
    old = "without_scale(nn.BatchNorm2d(4, momentum=0.01, eps=0.001))"
    assert good.count(old) == 1, "the translation changed; update the mutation"
    cert = _run(session, files, "build_norm", good.replace(old, new))
    assert cert["verdict"] == "mismatch"
    assert any(problem in p for p in cert["problems"]), cert["problems"]


def test_batch_norm_without_scale_weight_not_one_is_caught(session, files):
    """The constant weight made of the module's initial values scaled (any constant but 1): the outputs differ."""
    _, good = files
    old = 'norm.register_buffer("weight", ones, persistent=False)'
    assert good.count(old) == 1
    cert = _run(session, files, "build_norm", good.replace(old, old.replace("ones,", "ones * 2,")))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"] is not None and cert["first_diverging"]["layer"] == "layers[1]", \
        cert["first_diverging"]


def _pack_with(rule_id: str, change) -> Pack:
    base = load_pack("tf2torch")
    rule = base.rules[rule_id]
    pack = Pack(base.name, dict(base.rules), dict(base.by_name))
    pack.rules[rule_id] = dataclasses.replace(rule, weights=tuple(change(w) for w in rule.weights))
    for n in rule.names:
        pack.by_name[n] = pack.rules[rule_id]
    return pack


def test_pointwise_dense_kernel_not_transposed_is_caught(session, files):
    """The (in, out) kernel reshaped as if it were (out, in) (4 by 4: the same shape)."""
    from fwport.core.rule import WeightOp
    pack = _pack_with("dense", lambda w: WeightMap(w.source, w.target, (WeightOp("reshape", ("-1", "I", "1")),), w.when)
                      if w.when == "channels-first-1d" else w)
    cert = _run(session, files, "build_pointwise", pack=pack)
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"] is not None and cert["first_diverging"]["layer"] == "layers[2]", \
        cert["first_diverging"]


def test_backward_layer_weights_loaded_into_the_forward_direction_are_caught(session, files):
    """The explicit backward_layer's weights moved to torch's forward direction and the forward layer's to the
    reverse one (a hand port that pairs the two layers with the directions the wrong way round)."""
    def swap(w):
        if w.when != "gru":
            return w
        target = w.target[:-len("_reverse")] if w.target.endswith("_reverse") else w.target + "_reverse"
        return WeightMap(w.source, target, w.ops, w.when)
    cert = _run(session, files, "build_backward", pack=_pack_with("bidirectional", swap))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"] is not None and cert["first_diverging"]["layer"] == "layers[0]", \
        cert["first_diverging"]
