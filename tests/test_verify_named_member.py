"""Issue 8 (lay21): a layer held in a module-level name and used as a Sequential element (``d = layers.Dense(3)``,
``keras.Sequential([keras.Input(...), d, ...])``) gets a layer record (the rule pass translates d where it is
built and records it at the element the sequential pass saw), so ``fwport verify`` moves its weights: forward,
gradients and one SGD step pass; a translation whose named layer has the wrong size is caught."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from fwport.verify import Options, verify

ORIGINAL = '''
from tensorflow import keras
from tensorflow.keras import layers

d = layers.Dense(3)
e = layers.Dense(5, activation="relu")
model = keras.Sequential([keras.Input((4,)), layers.Dense(6), layers.ReLU(), d, layers.Dense(2)])


def build():
    return keras.Sequential([keras.Input((4,)), e, layers.Activation("tanh"), layers.Dense(2)])
'''


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("named-member")
    (d / "model.py").write_text(ORIGINAL)
    r = translate_source(ORIGINAL, "model.py")
    assert not [f for f in r.findings if f.severity == "error"], r.findings
    (d / "good.py").write_text(r.output)
    return d, r


def test_records(files):
    _, r = files
    got = {(x.scope, x.source, x.target, x.rule) for x in r.layers}
    assert ("model", "layers[2]", "2", "dense") in got
    assert ("build", "layers[0]", "0.0", "dense") in got  # e: nn.Sequential(Linear, ReLU)


@pytest.fixture(scope="module")
def session():
    from fwport.verify.run import Session

    with Session() as s:
        yield s


@pytest.mark.parametrize("model,inp", [("model", "float32[3,4]"), ("build", "float32[3,4]")])
def test_verify_passes(files, session, model, inp):
    d, _ = files
    cert = verify(Options(str(d / "model.py"), str(d / "good.py"), model, inputs=[inp],
                          checks=("forward", "grad", "step"), device="cpu"), session)
    assert cert["verdict"] == "pass", str(cert)[:3000]


def test_verify_catches_a_wrong_named_layer(files, session):
    d, r = files
    assert "e = nn.Sequential(nn.LazyLinear(5), nn.ReLU())" in r.output
    (d / "mutant.py").write_text(r.output.replace("e = nn.Sequential(nn.LazyLinear(5), nn.ReLU())",
                                                  "e = nn.Sequential(nn.LazyLinear(5), nn.Tanh())"))
    cert = verify(Options(str(d / "model.py"), str(d / "mutant.py"), "build", inputs=["float32[3,4]"],
                          checks=("forward",), device="cpu"), session)
    assert cert["verdict"] != "pass"
