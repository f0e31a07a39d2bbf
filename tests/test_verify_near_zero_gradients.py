"""Gradients that are zero in exact arithmetic: the verifier neither calls a correct translation wrong where
float64 leaves only rounding noise, nor hides a planted bug, and under float32 it says where the noise is.

A convolution's bias just before a normalization over its channel (GroupNormalization with a group per
channel) gets no gradient in exact arithmetic: the normalization removes any shift. In float32 both frameworks
return rounding noise there, which differs between them."""
from __future__ import annotations

import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.verify import Options, verify

pytest.importorskip("tensorflow")
pytest.importorskip("torch")

SOURCE = textwrap.dedent('''\
    import keras
    from keras import layers


    def make():
        return keras.Sequential([
            keras.Input((12, 12, 3)),
            layers.Conv2D(8, 3, padding="same"),
            layers.GroupNormalization(groups=8),
            layers.ReLU(),
            layers.GlobalAveragePooling2D(),
            layers.Dense(4),
        ])
    ''')

# a model whose outputs do not depend on its input at all (a linear pooling of a per-channel normalization gives
# the normalization's beta): every gradient before the normalization, the input's included, is zero
CONSTANT = SOURCE.replace("            layers.ReLU(),\n", "")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("near_zero")
    out = {}
    for name, src in (("shift", SOURCE), ("constant", CONSTANT)):
        (d / f"{name}.py").write_text(src)
        text = translate_source(src, pack="tf2torch").output
        assert "nn.GroupNorm(8, 8, eps=0.001)" in text
        (d / f"{name}_t.py").write_text(text)
        out[name] = (d / f"{name}.py", d / f"{name}_t.py", text)
    return out


def _run(session, files, name, dtype, text=None):
    src, path, _ = files[name]
    if text is not None:
        path = path.with_name(f"{name}_mutant.py")
        path.write_text(text)
    return verify(Options(str(src), str(path), "make", inputs=["float32[2,12,12,3]"], checks=("forward", "grad"),
                          dtype=dtype, device="cpu"), session)


@pytest.mark.parametrize("name", ["shift", "constant"])
def test_float64_passes_where_the_gradients_are_zero_in_exact_arithmetic(session, files, name):
    cert = _run(session, files, name, "float64")
    assert cert["verdict"] == "pass", (cert.get("problems"), cert["results"].get("input_gradients"))
    grads = {r["name"]: r for r in cert["results"]["gradients"]}
    # its Keras gradient is below the floor (1% of the largest), where only the floor scales the tolerance
    assert grads["0.bias"]["ok"] and grads["0.bias"]["scale"] <= 0.0100001 * max(r["scale"] for r in grads.values())


def test_float32_failures_there_come_with_the_float64_advice(session, files):
    cert = _run(session, files, "constant", "float32")
    failed = [r["name"] for r in cert["results"]["gradients"] + cert["results"]["input_gradients"] if not r["ok"]]
    warnings = " ".join(cert.get("warnings", []))
    if failed:  # rounding noise differs between the frameworks: every failure must be one the warning names
        assert "--dtype float64" in warnings
        assert all(n in warnings for n in failed[:4]), (failed, warnings)
    assert all(r["ok"] for r in cert["results"]["outputs"])


def test_a_planted_bug_still_fails_in_float64(session, files):
    _, _, text = files["shift"]
    mutant = text.replace("nn.GroupNorm(8, 8, eps=0.001)", "nn.GroupNorm(8, 8)")  # torch's default eps 1e-5
    assert mutant != text
    cert = _run(session, files, "shift", "float64", mutant)
    assert cert["verdict"] == "mismatch"
    assert not all(r["ok"] for r in cert["results"]["outputs"])
