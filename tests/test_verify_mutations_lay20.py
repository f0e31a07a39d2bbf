"""tfa.layers.InstanceNormalization / GroupNormalization (task lay20), checked numerically with ``verify`` and by
planted bugs (see tests/test_verify_mutations.py for the method).

TensorFlow Addons does not install next to TensorFlow 2.16+, so the Keras side imports a stand-in
``tensorflow_addons`` written here from tfa 0.23.0's algorithm (tensorflow_addons/layers/normalizations.py):
the channels split into contiguous groups (InstanceNormalization: one per channel), moments over the group's
channels and every non-batch axis (biased variance), epsilon inside the square root, then gamma and beta per
channel, named ``gamma`` and ``beta``. The stand-in is itself checked against Keras 3's GroupNormalization
(tfa's successor) in test_stand_in_matches_keras_group_normalization."""
from __future__ import annotations

import os
import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.verify import Options, verify

TFA_STAND_IN = '''
import tensorflow as tf


class GroupNormalization(tf.keras.layers.Layer):
    def __init__(self, groups=32, axis=-1, epsilon=1e-3, center=True, scale=True, **kwargs):
        for k in ("beta_initializer", "gamma_initializer"):
            kwargs.pop(k, None)
        super().__init__(**kwargs)
        self.groups, self.axis, self.epsilon, self.center, self.scale = groups, axis, epsilon, center, scale

    def build(self, input_shape):
        c = int(input_shape[-1])
        if self.groups == -1:
            self.groups = c
        assert c % self.groups == 0
        self.gamma = self.add_weight(name="gamma", shape=(c,), initializer="ones") if self.scale else None
        self.beta = self.add_weight(name="beta", shape=(c,), initializer="zeros") if self.center else None

    def call(self, x):
        shape = tf.shape(x)
        rank = len(x.shape)
        c = x.shape[-1]
        g = tf.reshape(x, tf.concat([shape[:-1], [self.groups, c // self.groups]], 0))
        axes = [a for a in range(1, rank + 1) if a != rank - 1]  # all but the batch and the group index
        mean, var = tf.nn.moments(g, axes, keepdims=True)
        y = tf.reshape((g - mean) / tf.sqrt(var + self.epsilon), shape)
        if self.gamma is not None:
            y = y * self.gamma
        if self.beta is not None:
            y = y + self.beta
        return y


class InstanceNormalization(GroupNormalization):
    def __init__(self, **kwargs):
        kwargs["groups"] = -1
        super().__init__(**kwargs)
'''

ORIGINAL = '''
import tensorflow_addons as tfa
from tensorflow import keras
from tensorflow.keras import layers


def build_instance():
    return keras.Sequential([
        keras.Input(shape=(6, 5, 3)),
        layers.Conv2D(4, 3, padding="same", use_bias=False),  # (a bias before the norm has a zero gradient)
        tfa.layers.InstanceNormalization(gamma_initializer="ones"),
        layers.ReLU(),
        layers.Flatten(),
        layers.Dense(2),
    ])


def build_group():
    return keras.Sequential([
        keras.Input(shape=(7, 4)),
        layers.Conv1D(6, 2),
        tfa.layers.GroupNormalization(groups=3, epsilon=1e-4),
        layers.Flatten(),
        layers.Dense(2),
    ])
'''
INPUTS = {"build_instance": "float32[4,6,5,3]", "build_group": "float32[4,7,4]"}


@pytest.fixture(scope="module")
def tfa_session(tmp_path_factory):
    """A verify Session whose Keras worker imports the stand-in tensorflow_addons."""
    from fwport.verify.run import Session

    stub = tmp_path_factory.mktemp("tfa-stand-in")
    pkg = stub / "tensorflow_addons"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from . import layers\n")
    (pkg / "layers.py").write_text(TFA_STAND_IN)
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(stub) + (os.pathsep + old if old else "")
    try:
        with Session() as s:
            yield s, stub
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("mut-lay20")
    (d / "model.py").write_text(ORIGINAL)
    r = translate_source(ORIGINAL, "model.py")
    assert not [f for f in r.findings if f.severity == "error"], r.findings
    (d / "good.py").write_text(r.output)
    return d, r.output


def _run(session, files, model, text=None, checks=("forward",)):
    d, good = files
    path = d / "good.py"
    if text is not None:
        assert text != good, "the mutation did not apply"
        path = d / "mutant.py"
        path.write_text(text)
    return verify(Options(str(d / "model.py"), str(path), model, inputs=[INPUTS[model]], checks=checks,
                          device="cpu"), session)


def test_translation_text(files):
    _, good = files
    assert "nn.GroupNorm(4, 4, eps=0.001)" in good  # one group per channel, Keras's epsilon pinned
    assert "nn.GroupNorm(3, 6, eps=1e-4)" in good


def test_stand_in_matches_keras_group_normalization(tfa_session):
    """The stand-in computes what Keras 3's GroupNormalization (tfa's successor) computes, with random
    gamma/beta, for InstanceNormalization (groups = channels) and for 3 groups of 2 channels."""
    import subprocess
    import sys
    _, stub = tfa_session
    code = textwrap.dedent('''
        import numpy as np, keras, tensorflow as tf
        import tensorflow_addons as tfa
        rng = np.random.default_rng(0)
        for ours, ref, shape in [(tfa.layers.InstanceNormalization(), keras.layers.GroupNormalization(6, epsilon=1e-3), (3, 5, 4, 6)),
                                 (tfa.layers.GroupNormalization(3, epsilon=1e-4), keras.layers.GroupNormalization(3, epsilon=1e-4), (3, 7, 6))]:
            x = rng.normal(size=shape).astype("float32") * 3 + 1
            ours.build(x.shape); ref.build(x.shape)
            g = rng.normal(size=shape[-1:]).astype("float32"); b = rng.normal(size=shape[-1:]).astype("float32")
            ours.gamma.assign(g); ours.beta.assign(b); ref.gamma.assign(g); ref.beta.assign(b)
            d = float(np.abs(np.asarray(ours(x)) - np.asarray(ref(x))).max())
            assert d < 1e-5, d
        print("ok")
    ''')
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().endswith("ok"), out.stderr[-2000:]


@pytest.mark.parametrize("model", sorted(INPUTS))
def test_correct_translations_pass(tfa_session, files, model):
    session, _ = tfa_session
    cert = _run(session, files, model, checks=("forward", "grad", "step"))
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    assert cert["results"]["layers"] and all(e["ok"] for e in cert["results"]["layers"]), cert["results"]["layers"]


TEXT_MUTATIONS = {
    # name: (model, old, new, the layer that must be named)
    # torch's epsilon default kept (1e-5 for tfa's 1e-3)
    "instance-norm-epsilon-default": ("build_instance", "nn.GroupNorm(4, 4, eps=0.001)", "nn.GroupNorm(4, 4)",
                                      "layers[1]"),
    # one group for all channels (a layer norm over the map), the obvious misreading of GroupNorm(C, C)
    "instance-norm-one-group": ("build_instance", "nn.GroupNorm(4, 4, eps=0.001)", "nn.GroupNorm(1, 4, eps=0.001)",
                                "layers[1]"),
    # tfa's default of 32 groups misread as 2 (tfa's first releases)
    "group-norm-wrong-groups": ("build_group", "nn.GroupNorm(3, 6, eps=1e-4)", "nn.GroupNorm(2, 6, eps=1e-4)",
                                "layers[1]"),
}


@pytest.mark.parametrize("name", sorted(TEXT_MUTATIONS))
def test_planted_text_bug_is_caught(tfa_session, files, name):
    session, _ = tfa_session
    model, old, new, layer = TEXT_MUTATIONS[name]
    _, good = files
    assert good.count(old) == 1, f"the translation changed: {old!r}; update the mutation"
    cert = _run(session, files, model, good.replace(old, new))
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"] is not None and cert["first_diverging"]["layer"] == layer, cert["first_diverging"]


def test_instance_norm2d_hand_port_is_caught(tfa_session, files):
    """nn.InstanceNorm2d leaves affine off by default: tfa's gamma and beta have nowhere to go."""
    session, _ = tfa_session
    _, good = files
    old = "nn.GroupNorm(4, 4, eps=0.001)"
    cert = _run(session, files, "build_instance", good.replace(old, "nn.InstanceNorm2d(4, eps=0.001)"))
    assert cert["verdict"] == "mismatch"
    assert any("1.weight" in p or "1.bias" in p for p in cert["problems"]), cert["problems"]


# --- the verifier's alignment of Sequential members written on one line (align.sequential_spans) -----------

ONE_LINE = '''
from tensorflow import keras
from tensorflow.keras import layers


def build_one_line():
    return keras.Sequential([keras.Input(shape=(6,)), layers.Dense(4, activation="relu"), layers.Dense(3), layers.Dense(2)])


def build_one_each():
    return keras.Sequential([keras.Input(shape=(6,)), layers.Dense(4), layers.Dense(3), layers.Dense(2)])
'''


@pytest.fixture(scope="module")
def one_line(tmp_path_factory):
    d = tmp_path_factory.mktemp("one-line")
    (d / "model.py").write_text(ONE_LINE)
    r = translate_source(ONE_LINE, "model.py")
    assert not [f for f in r.findings if f.severity == "error"], r.findings
    (d / "good.py").write_text(r.output)
    return d, r.output


def _run_one_line(session, one_line, model, text=None):
    d, good = one_line
    path = d / "good.py"
    if text is not None:
        assert text != good
        path = d / "mutant.py"
        path.write_text(text)
    return verify(Options(str(d / "model.py"), str(path), model, inputs=["float32[4,6]"], checks=("forward",),
                          device="cpu"), session)


@pytest.mark.parametrize("model", ["build_one_line", "build_one_each"])
def test_one_line_sequential_layers_pair_correctly(tfa_session, one_line, model):
    """Before: every member on the line was compared with the line's last module (a shape mismatch reported as a
    diverging layer on a correct translation). Now: one module each where the line has one per member, else only
    the line's last member's output (and each member's pre-activation at the module holding its weights)."""
    session, _ = tfa_session
    cert = _run_one_line(session, one_line, model)
    assert cert["verdict"] == "pass"
    entries = cert["results"]["layers"]
    assert entries and all(e["ok"] for e in entries), entries
    compared = {e["layer"] for e in entries}
    assert compared == {"layers[0]", "layers[1]", "layers[2]"}, entries
    if model == "build_one_each":  # one module per member: each member's output compared at its own module
        assert {(e["layer"], e["torch"]) for e in entries if e["point"] == "output"} >= {
            ("layers[0]", "0"), ("layers[1]", "1"), ("layers[2]", "2")}, entries


@pytest.mark.parametrize("model, old, new, layer", [
    # a tanh appended to the last member: the first diverging layer is the last one, not the first on the line
    ("build_one_line", "nn.Linear(3, 2))", "nn.Linear(3, 2), nn.Tanh())", "layers[2]"),
    # the middle member's output negated (a hook: the same modules, so the records' paths still hold)
    ("build_one_each", "    return nn.Sequential(nn.Linear(6, 4), nn.Linear(4, 3), nn.Linear(3, 2))\n",
     "    m = nn.Sequential(nn.Linear(6, 4), nn.Linear(4, 3), nn.Linear(3, 2))\n"
     "    m[1].register_forward_hook(lambda mod, i, o: -o)\n    return m\n", "layers[1]"),
])
def test_one_line_sequential_names_the_diverging_member(tfa_session, one_line, model, old, new, layer):
    session, _ = tfa_session
    _, good = one_line
    start = good.index(f"def {model}")
    body = good[start:]
    assert body.count(old) >= 1
    text = good[:start] + body.replace(old, new, 1)
    cert = _run_one_line(session, one_line, model, text)
    assert cert["verdict"] == "mismatch"
    assert cert["first_diverging"] is not None and cert["first_diverging"]["layer"] == layer, cert["first_diverging"]


# --- an Input whose size the translation cannot read: the built Keras model's declared shape ----------------

NAMED = '''
from tensorflow import keras
from tensorflow.keras import layers


def build(n_hidden=4):
    return keras.Sequential([keras.Input(shape=(n_hidden * 2,)), layers.Dense(n_hidden), layers.Dense(2)])


def build_needs_args(size):
    return keras.Sequential([keras.Input(shape=(size,)), layers.Dense(3)])
'''


def test_input_size_read_from_the_built_keras_model(tfa_session, tmp_path):
    """keras.Input(shape=(n_hidden * 2,)): the translation's static shape is (None,); without --input the verifier
    asks Keras for the built model's input shape, (8,), and verifies on it (before: a usage error). A builder
    that cannot be built without --args still gets the usage error, saying why."""
    from fwport.verify.run import VerifyError
    session, _ = tfa_session
    (tmp_path / "model.py").write_text(NAMED)
    r = translate_source(NAMED, "model.py")
    (tmp_path / "good.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "model.py"), str(tmp_path / "good.py"), "build", inputs=None,
                          checks=("forward",), device="cpu"), session)
    assert cert["verdict"] == "pass", cert.get("problems")
    assert cert["inputs"] == ["float32[2,8]"] or "2,8" in str(cert["inputs"]), cert["inputs"]
    with pytest.raises(VerifyError, match="give --input.*build_needs_args builds: building it failed"):
        verify(Options(str(tmp_path / "model.py"), str(tmp_path / "good.py"), "build_needs_args", inputs=None,
                       checks=("forward",), device="cpu"), session)
