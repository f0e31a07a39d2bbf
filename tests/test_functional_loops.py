"""Functional models whose layers are built in loops over run-time counts (``for _ in range(depth)`` over a
builder parameter, a helper block called in it): the translation builds nn.ModuleLists and records each
layer by the order the builder calls the layers (``calls[s][*][j]``), and ``fwport verify`` matches that
order to the built Keras model, moves every pass's weights and compares the outputs."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from fwport.verify._worker_io import UserError, match_calls
from runners import Warm

LOOPS = '''
from tensorflow import keras
from tensorflow.keras import layers


def block(x, units, rate):
    h = layers.Dense(units, activation="relu")(x)
    h = layers.Dropout(rate)(h)
    h = layers.Dense(x.shape[-1])(h)
    x = layers.add([x, h])
    return layers.LayerNormalization(epsilon=1e-5)(x)


def build(depth, widths, units=16, rate=0.1):
    inputs = keras.Input(shape=(6, 8))
    x = layers.Dense(8)(inputs)
    for _ in range(depth):
        x = block(x, units, rate)
    x = layers.GlobalAveragePooling1D()(x)
    for w in widths:
        x = layers.Dense(w, activation="relu")(x)
    outputs = layers.Dense(3)(x)
    return keras.Model(inputs, outputs)
'''


def _tx(src: str, keras: int = 3):
    return translate_source(src, "m.py", load_pack("tf2torch"), {"keras": keras})


def test_layers_of_loops_are_recorded_by_the_order_of_calls():
    r = _tx(LOOPS)
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    assert "for _ in range(depth):\n            self.block.append(Block(units, rate))" in r.output
    assert "for fc2 in self.fc2:\n            x = torch.relu(fc2(x))" in r.output
    recs = {(x.source, x.target, x.rule) for x in r.layers if x.scope == "build"}
    assert recs == {("calls[0][0]", "fc1", "dense"),
                    ("calls[1][*][0]", "block.*.fc1", "dense"), ("calls[1][*][2]", "block.*.fc2", "dense"),
                    ("calls[1][*][4]", "block.*.norm", "layer-normalization"),
                    ("calls[3][*][0]", "fc2.*", "dense"), ("calls[4][0]", "fc3", "dense")}
    calls = next(m for m in r.models if m.scope == "build").calls
    assert calls == [{"loop": False, "layers": [["Dense"]]},
                     {"loop": True, "layers": [["Dense"], ["Dropout"], ["Dense"], ["Add"], ["LayerNormalization"]]},
                     {"loop": False, "layers": [["GlobalAveragePooling1D", "GlobalAvgPool1D"]]},
                     {"loop": True, "layers": [["Dense"]]}, {"loop": False, "layers": [["Dense"]]}]
    loops = [f.message for f in r.findings if "for statement over a value known only" in f.message]
    assert len(loops) == 2 and all("map their weights by the order Keras calls the layers" in m for m in loops)
    # Keras 2: the tensor arithmetic of tf.keras is a layer too (TFOpLambda), its class not named
    r2 = _tx(LOOPS.replace("layers.add([x, h])", "x + h"), keras=2)
    calls2 = next(m for m in r2.models if m.scope == "build").calls
    assert calls2[1]["layers"][3] == []


LAST_AGAIN = LOOPS.replace("""    for w in widths:
        x = layers.Dense(w, activation="relu")(x)
""", """    for w in widths:
        d = layers.Dense(8)
        x = d(x)
    x = d(x)
""")


def test_the_loops_last_layer_called_after_it_is_the_last_module_of_its_list(tmp_path):
    # after the loop, `d` is the layer of the last pass (Keras calls it once more: no new layer)
    r = _tx(LAST_AGAIN)
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    assert "        for d_ in self.d:\n            x = d_(x)\n        x = self.d[-1](x)\n" in r.output
    assert ("calls[3][*][0]", "d.*") in {(x.source, x.target) for x in r.layers}
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(LAST_AGAIN)
    (tmp_path / "t.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), "build(2, [1, 2, 3])",
                          inputs=["float32[4,6,8]"], checks=("forward", "grad"), device="cpu"), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    assert {e["name"]: e["source"] for e in cert["results"]["gradients"]}["d.2.weight"] == "calls[3][2][0].kernel"


def test_match_calls_counts_the_passes_and_refuses_what_does_not_fit_once():
    D, R, A = {"Dense", "Layer"}, {"Dropout", "Layer"}, {"Add", "Layer"}
    segments = [{"loop": False, "layers": [["Dense"]]}, {"loop": True, "layers": [["Dense"], ["Dropout"]]},
                {"loop": False, "layers": [["Add"]]}, {"loop": True, "layers": [["Dense"]]},
                {"loop": False, "layers": [["Dense"]]}]
    got = match_calls([D, D, R, D, R, A, D, D, D], segments)
    assert got == [[0], [[1, 2], [3, 4]], [5], [[6], [7]], [8]]
    assert match_calls([D, A, D], segments) == [[0], [], [1], [], [2]]  # loops of no pass
    with pytest.raises(UserError, match="fit no reading"):
        match_calls([D, D, R, R, A, D], segments)
    # two loops of the same layers back to back: the number of passes of each cannot be told
    with pytest.raises(UserError, match="fit more than one reading"):
        match_calls([D, D, D], [{"loop": True, "layers": [["Dense"]]}, {"loop": True, "layers": [[]]}])


@pytest.mark.parametrize("keras", [3, 2])
@pytest.mark.parametrize("model", ["build(3, [12, 5])", "build(0, [4])"])
def test_a_model_built_in_loops_verifies(tmp_path, keras, model):
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    if keras == 2:
        pytest.importorskip("tf_keras")
    from fwport.verify import Options, verify
    src = LOOPS if keras == 3 else LOOPS.replace("layers.add([x, h])", "x + h")
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "t.py").write_text(_tx(src, keras).output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=["float32[4,6,8]"],
                          checks=("forward", "grad"), device="cpu", keras=keras), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    grads = {e["name"]: e["source"] for e in cert["results"]["gradients"]}
    if model.startswith("build(3"):
        assert len(grads) == 2 + 3 * 6 + 2 * 2 + 2  # fc1; per block two Dense, a LayerNorm; the MLP; the head
        assert grads["block.2.norm.weight"] == "calls[1][2][4].gamma"
        assert grads["fc2.1.bias"] == "calls[3][1][0].bias"
    else:
        assert sorted(grads) == ["fc1.bias", "fc1.weight", "fc2.0.bias", "fc2.0.weight", "fc3.bias", "fc3.weight"]


# keras-io's object_detection_using_vision_transformer.py, reduced: a helper whose loop runs over its
# parameter, called in the builder's loop over another (both known only when the model is built)
NESTED = '''
from tensorflow import keras
from tensorflow.keras import layers


def mlp(x, hidden_units, dropout_rate):
    for units in hidden_units:
        x = layers.Dense(units, activation="relu")(x)
        x = layers.Dropout(dropout_rate)(x)
    return x


def build(depth, hidden_units):
    inputs = keras.Input(shape=(4,))
    x = inputs
    for _ in range(depth):
        x = mlp(x, hidden_units, 0.1)
        x = layers.Dense(4)(x)
    return keras.Model(inputs, x)
'''


def test_a_helper_with_a_run_time_loop_in_a_run_time_loop_builds_its_own_lists_and_computes_what_keras_does():
    r = _tx(NESTED)
    assert not [f for f in r.findings if f.severity.value == "error"], r.findings
    out = r.output
    # the helper's class builds its lists from its parameter; the builder's loop, a list of its instances
    assert "class Mlp(nn.Module):\n    def __init__(self, hidden_units):" in out
    assert "        for units in hidden_units:\n            self.fc.append(nn.LazyLinear(units))" in out
    assert "        for _ in range(depth):\n            self.mlp.append(Mlp(hidden_units))\n            self.fc.append(nn.LazyLinear(4))" in out
    # how many layers a pass adds is known only when the model is built: no records, said at the loops
    assert not r.layers
    assert any("a helper with such a loop is called in another one" in f.message for f in r.findings)
    tf = pytest.importorskip("tensorflow")
    torch = pytest.importorskip("torch")
    import numpy as np
    kns: dict = {}
    exec(compile(NESTED, "m.py", "exec"), kns)
    tns: dict = {}
    exec(compile(out, "t.py", "exec"), tns)
    assert "tensorflow" not in out and "keras" not in out
    kmodel, tmodel = kns["build"](2, [6, 5]), tns["build"](2, [6, 5])
    tmodel.eval()
    x = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
    order = []  # torch's Linear modules in the order forward calls them
    hooks = [m.register_forward_hook(lambda m, i, o: order.append(m)) for m in tmodel.modules()
             if isinstance(m, torch.nn.Linear) or isinstance(m, torch.nn.LazyLinear)]
    with torch.no_grad():
        tmodel(torch.from_numpy(x))
    for h in hooks:
        h.remove()
    dense = [layer for layer in kmodel.layers if layer.weights]  # a chain: model.layers is the order of calls
    assert [tuple(m.weight.shape) for m in order] == [tuple(d.weights[0].shape[::-1]) for d in dense]
    assert [tuple(d.weights[0].shape) for d in dense] == [(4, 6), (6, 5), (5, 4)] * 2
    with torch.no_grad():
        for m, d in zip(order, dense):
            m.weight.copy_(torch.from_numpy(np.ascontiguousarray(d.weights[0].numpy().T)))
            m.bias.copy_(torch.from_numpy(d.weights[1].numpy()))
        got = tmodel(torch.from_numpy(x)).numpy()
    assert abs(got - kmodel(tf.constant(x), training=False).numpy()).max() < 1e-5
