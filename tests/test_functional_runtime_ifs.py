"""An ``if`` of a functional builder on parameters the file calls it with different values
(``build(16)`` and ``build(16, use_norm=True)``): the class keeps the parameter and the ``if``, its layers
created under it in ``__init__`` and called under it in ``forward``; a branch that changes a size leaves the
layers after it lazy. Each variant is checked against Keras by ``fwport verify`` (weights moved by the order
Keras calls the layers, the branch a loop of no pass or one). What is not followed stays an error."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_findings as _errors
from runners import Warm

IFS = '''
import keras
from keras import layers


def build_classifier(units, use_norm=False, widen=False):
    inputs = keras.Input(shape=(6, 8))
    x = layers.Dense(units, activation="relu")(inputs)
    if use_norm:
        x = layers.LayerNormalization(epsilon=1e-5)(x)
        x = x * 2.0
    if widen and use_norm:
        x = layers.Dense(units * 2)(x)
    x = layers.GlobalAveragePooling1D()(x)
    outputs = layers.Dense(3)(x)
    return keras.Model(inputs, outputs)


small = build_classifier(16)
normed = build_classifier(16, use_norm=True)
wide = build_classifier(16, True, widen=True)
'''


KERAS2 = IFS.replace("import keras\nfrom keras import layers", "from tensorflow import keras\nfrom tensorflow.keras import layers")


def _tx(src: str, keras: int = 3):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": keras})


def test_an_if_on_parameters_called_with_several_values_is_kept_in_init_and_forward():
    r = _tx(IFS)
    assert not _errors(r), r.findings
    assert "        if use_norm:\n            self.norm = nn.LayerNorm(16" not in r.output  # (units: a parameter)
    assert "        if use_norm:\n            self.norm = nn.LayerNorm(units, eps=1e-5)\n" in r.output
    assert "        if widen and use_norm:\n            self.fc2 = nn.Linear(units, units * 2)\n" in r.output
    # after a branch that changes the size, the layer is lazy (its input size depends on the call)
    assert "self.fc3 = nn.LazyLinear(3)" in r.output
    assert "        self.use_norm = use_norm\n        self.widen = widen\n" in r.output
    assert ("        if self.use_norm:\n            x = self.norm(x)\n            x = x * 2.0\n"
            "        if self.widen and self.use_norm:\n            x = self.fc2(x)\n") in r.output
    assert "return Classifier(units, use_norm, widen)" in r.output
    kept = [f.message for f in r.findings if f.code == "if-kept"]
    assert len(kept) == 2 and all("map their weights by the order Keras calls the layers" in m for m in kept)
    calls = next(m for m in r.models if m.scope == "build_classifier").calls
    assert [s["loop"] for s in calls] == [False, True, True, False]  # (pooling and head: one segment)
    recs = {(x.source, x.target) for x in r.layers if x.scope == "build_classifier"}
    assert ("calls[1][*][0]", "norm") in recs and ("calls[2][*][0]", "fc2") in recs


@pytest.mark.parametrize("variant, model", [("ifs", "build_classifier(16)"),
                                            ("ifs", "build_classifier(16, use_norm=True)"),
                                            ("ifs", "build_classifier(16, True, widen=True)"),
                                            ("else", "build_classifier(16)"),
                                            ("else", "build_classifier(16, True, widen=True)"),
                                            ("keras2", "build_classifier(16, use_norm=True)"),
                                            ("keras2", "build_classifier(16)")])
def test_each_variant_computes_what_keras_does(tmp_path, variant, model):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    keras = 2 if variant == "keras2" else 3
    if keras == 2:
        pytest.importorskip("tf_keras")
    from fwport.verify import Options, verify
    # (tf.keras: `x * 2.0` in the branch is a layer of the model too, of no class fwport names)
    src = {"ifs": IFS, "else": ELSE, "keras2": KERAS2}[variant]
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "t.py").write_text(_tx(src, keras).output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=["float32[4,6,8]"],
                          checks=("forward", "grad"), device="cpu", keras=keras), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    grads = {e["name"]: e["source"] for e in cert["results"]["gradients"]}
    # fc1 and the head; the LayerNorm where use_norm; the widening Dense where both
    expected = 4 + (2 if "True" in model else 0) + (2 if "widen=True" in model else 0)
    assert len(grads) == expected, grads
    if "True" in model:
        assert grads["norm.weight"] == "calls[1][0][0].gamma"


def test_a_parameter_every_call_gives_one_value_is_still_decided_there():
    src = IFS.replace('normed = build_classifier(16, use_norm=True)\n', '').replace(
        'wide = build_classifier(16, True, widen=True)\n', '')
    r = _tx(src)
    assert not _errors(r), r.findings
    assert "if use_norm:" not in r.output and "if self.use_norm" not in r.output and "self.norm" not in r.output
    assert "raise ValueError" in r.output  # (pinned: _pinned_params)
    assert not [f for f in r.findings if f.code == "if-kept"]


ELSE = IFS.replace("""        x = x * 2.0
""", """    else:
        x = layers.Dropout(0.5)(x)
""")


def test_an_else_clause_is_kept_too():
    r = _tx(ELSE)
    assert not _errors(r), r.findings
    assert ("        if use_norm:\n            self.norm = nn.LayerNorm(units, eps=1e-5)\n        else:\n"
            "            self.dropout = nn.Dropout(0.5)\n") in r.output
    assert "        if self.use_norm:\n            x = self.norm(x)\n        else:\n            x = self.dropout(x)\n" \
        in r.output


@pytest.mark.parametrize("old, new, message", [
    ("""    if use_norm:
        x = layers.LayerNormalization(epsilon=1e-5)(x)
        x = x * 2.0
""", """    if use_norm:
        x = layers.LayerNormalization(epsilon=1e-5)(x)
    elif units > 4:
        x = x * 2.0
""", "not an if inside a branch or an elif on other values"),
    ("""        x = x * 2.0
""", """        y = x * 2.0
    x = x + y
""", "y: bound in one branch of `if use_norm:` only and read after it"),
    ("""        x = x * 2.0
""", """        x = layers.Flatten()(x)
""", "x has another rank after each branch of `if use_norm:`"),
    ("""        x = x * 2.0
""", """        for _ in range(2):
            x = x * 2.0
""", "`for _ in range(2):` inside `if use_norm:`"),
])
def test_what_is_not_followed_stays_an_error(old, new, message):
    r = _tx(IFS.replace(old, new))
    errs = [f.message for f in _errors(r)]
    assert any("this functional model is left as written" in m for m in errs), errs
    assert any(message in m for m in errs), errs
    assert "class Classifier" not in r.output


def test_a_kept_parameter_and_a_layer_of_the_same_name_do_not_collide():
    # `self.dropout = dropout` (the flag the forward reads) must not replace the module of a Dropout after the if
    src = IFS.replace("widen=False", "dropout=False").replace("if widen and use_norm:", "if dropout:").replace(
        "widen=True", "dropout=True").replace(
        "    x = layers.GlobalAveragePooling1D()(x)\n", "    x = layers.Dropout(0.2)(x)\n    x = layers.GlobalAveragePooling1D()(x)\n")
    r = _tx(src)
    assert not _errors(r), r.findings
    assert "self.dropout = dropout\n" in r.output and "if self.dropout:" in r.output
    attr = next(ln.split("=")[0].strip() for ln in r.output.splitlines() if "nn.Dropout(0.2)" in ln)
    assert attr.startswith("self.dropout") and attr != "self.dropout"


def test_an_if_without_layers_is_kept_and_said():
    src = IFS.replace("        x = layers.LayerNormalization(epsilon=1e-5)(x)\n", "")
    r = _tx(src)
    assert not _errors(r), r.findings
    assert "        if self.use_norm:\n            x = x * 2.0\n" in r.output
    lines = src.splitlines()
    assert [f.line for f in r.findings if f.code == "if-kept"] == [lines.index("    if use_norm:") + 1,
                                                                   lines.index("    if widen and use_norm:") + 1]


CNN = '''
import keras
from keras import layers


def build_cnn(filters, use_bn=False, extra=False):
    inputs = keras.Input(shape=(12, 12, 3))
    x = layers.Conv2D(filters, 3, padding="same", activation="relu")(inputs)
    if use_bn:
        x = layers.BatchNormalization()(x)
    else:
        x = layers.ReLU()(x)
    if extra:
        x = layers.Conv2D(filters * 2, 3, strides=2, padding="same")(x)
    x = layers.Conv2D(4, 1)(x)
    x = layers.Flatten()(x)
    outputs = layers.Dense(5)(x)
    return keras.Model(inputs, outputs)


a = build_cnn(8)
b = build_cnn(8, use_bn=True, extra=True)
'''


@pytest.mark.parametrize("model", ["build_cnn(8)", "build_cnn(8, use_bn=True, extra=True)"])
def test_a_channels_first_graph_with_kept_ifs_computes_what_keras_does(tmp_path, model):
    # the graph is channels-first; the branch that halves the map leaves the sizes after it unknown, so the
    # Flatten puts the map back in Keras's order (ChannelsLastReshape) before the lazy Dense
    r = _tx(CNN)
    assert not _errors(r), r.findings
    assert "        if use_bn:\n            self.bn = nn.BatchNorm2d(filters" in r.output
    assert "        else:\n            self.relu = nn.ReLU()\n" in r.output
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(CNN)
    (tmp_path / "t.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=["float32[2,12,12,3]"],
                          checks=("forward", "grad"), device="cpu"), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    assert len(cert["results"]["gradients"]) == (10 if "extra" in model else 6)


ELIF = '''
import keras
from keras import layers


def build(units, norm="none"):
    inputs = keras.Input(shape=(6, 8))
    x = layers.Dense(units)(inputs)
    if norm == "layer":
        x = layers.LayerNormalization()(x)
    elif norm == "batch":
        x = layers.BatchNormalization()(x)
    else:
        x = layers.Dropout(0.1)(x)
    outputs = layers.Dense(3)(x)
    return keras.Model(inputs, outputs)


a = build(16)
b = build(16, norm="layer")
c = build(16, norm="batch")
'''


def test_an_elif_chain_is_kept_as_one_and_each_variant_computes_what_keras_does(tmp_path):
    r = _tx(ELIF)
    assert not _errors(r), r.findings
    assert ('        if norm == "layer":\n            self.norm = nn.LayerNorm(units, eps=0.001)\n'
            '        elif norm == "batch":\n            self.bn = nn.BatchNorm1d(') in r.output
    assert "        else:\n            self.dropout = nn.Dropout(0.1)\n" in r.output
    # the parameter norm is kept as norm_value: self.norm is the LayerNorm
    assert ('        if self.norm_value == "layer":\n            x = self.norm(x)\n'
            '        elif self.norm_value == "batch":\n') in r.output
    assert len([f for f in r.findings if f.code == "if-kept"]) == 2
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(ELIF)
    (tmp_path / "t.py").write_text(r.output)
    for model, params in [("build(16)", 4), ("build(16, norm='layer')", 6), ("build(16, norm='batch')", 6)]:
        cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=["float32[4,6,8]"],
                              checks=("forward", "grad"), device="cpu"), Warm.session())
        assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
        assert len(cert["results"]["gradients"]) == params
