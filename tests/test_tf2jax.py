"""fwport tf2jax: tf2torch, then torch2jax on its output, in one command (fwport/core/chain.py), and
fwport verify end to end TF → JAX (fwport/verify/tf2jax.py).

- the chain's output is exactly torch2jax(tf2torch(source)); every stage's findings are located in
  the original file and name their stage; trees, --check and --report work as for one direction;
- verify: Keras against the tf2torch translation, that state in PyTorch against the JAX translation,
  and Keras's outputs against JAX's, on tf2torch fixtures that translate cleanly through both.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fwport.core.chain import LineMap
from fwport.core.cli import main
from fwport.core.pipeline import translate_source
from helpers import needs

ROOT = Path(__file__).resolve().parent.parent
TF_FIXTURES = ROOT / "fixtures" / "tf2torch"
needs_frameworks = needs("tensorflow", "keras", "torch", "jax", "equinox")


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_the_output_is_torch2jax_of_tf2torch(tmp_path):
    src = TF_FIXTURES / "recurrent_text" / "model.py"
    r = _run("tf2jax", str(src), "-o", str(tmp_path / "out.py"))
    assert r.exit_code == 0, r.output
    torch_text = translate_source(src.read_text(), str(src), "tf2torch").output
    assert (tmp_path / "out.py").read_text() == translate_source(torch_text, str(src), "torch2jax").output
    assert translate_source(src.read_text(), str(src), "tf2jax").output == (tmp_path / "out.py").read_text()
    assert "import equinox as eqx" in (tmp_path / "out.py").read_text()


def test_findings_of_both_stages_are_located_in_the_original(tmp_path):
    src = TF_FIXTURES / "recurrent_text" / "model.py"
    lines = src.read_text().splitlines()
    r = _run("tf2jax", str(src), "-o", str(tmp_path / "out.py"), "--report", str(tmp_path / "r.json"))
    assert r.exit_code == 0, r.output
    found = json.loads((tmp_path / "r.json").read_text())["files"][0]["findings"]
    stages = {f["rule"].split("/")[0] for f in found}
    assert stages == {"tf2torch", "torch2jax"}, found
    # torch2jax warns about the summed recurrent biases on each recurrent layer: Keras's own lines
    approx = {f["line"]: f["rule"] for f in found if f["code"] == "approximate"}
    assert approx, found
    keras_layer = {"torch2jax/lstm": "LSTM(", "torch2jax/gru": "GRU(", "torch2jax/rnn": "SimpleRNN("}
    for line, rule in approx.items():
        assert keras_layer[rule] in lines[line - 1], (line, rule, lines[line - 1])
    assert all(f["path"] == str(src) for f in found)


def test_errors_of_the_second_stage_are_comments_and_findings(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("from tensorflow import keras\nfrom tensorflow.keras import layers\n\n\ndef build():\n"
                   "    return keras.Sequential([\n        keras.Input(shape=(8, 8, 3)),\n"
                   "        layers.Conv2D(4, 3, padding=\"same\"),\n        layers.Flatten(),\n        layers.Dense(2),\n    ])\n")
    r = _run("tf2jax", str(src), "-o", str(tmp_path / "out.py"), "--report", str(tmp_path / "r.json"))
    assert r.exit_code == 1, r.output  # a construct left for a human
    found = json.loads((tmp_path / "r.json").read_text())["files"][0]["findings"]
    errors = [f for f in found if f["severity"] == "error"]
    assert errors and all(f["rule"].startswith("torch2jax/") for f in errors), found
    assert all("Conv2D" in src.read_text().splitlines()[f["line"] - 1] for f in errors), errors
    assert "# fwport: unsupported-argument:" in (tmp_path / "out.py").read_text()


def test_a_tree_is_translated_and_check_exits_1(tmp_path):
    tree = tmp_path / "src"
    tree.mkdir()
    for name in ("sequential_mlp", "mnist_convnet"):
        (tree / f"{name}.py").write_text((TF_FIXTURES / name / "model.py").read_text())
    (tree / "requirements.txt").write_text("tensorflow==2.21\nnumpy\n")
    r = _run("tf2jax", str(tree), "-o", str(tmp_path / "out"), "-q")
    assert r.exit_code == 0, r.output
    out = (tmp_path / "out" / "sequential_mlp.py").read_text()
    assert "eqx.nn.Linear(NUM_FEATURES, hidden_units, key=key1)" in out and "torch" not in out
    reqs = (tmp_path / "out" / "requirements.txt").read_text()
    assert "tensorflow" not in reqs and "jax" in reqs
    assert _run("tf2jax", str(tree), "--check").exit_code == 1
    assert _run("tf2jax", str(tmp_path / "out"), "--check").exit_code == 0  # a JAX tree has nothing to translate


def test_options_of_the_stages_are_accepted(tmp_path):
    src = TF_FIXTURES / "sequential_mlp" / "model.py"
    assert _run("tf2jax", str(src), "--keras", "3", "--disable", "lstm", "-o", str(tmp_path / "a.py")).exit_code == 0
    r = _run("tf2jax", str(src), "--disable", "no-such-rule", "-o", str(tmp_path / "b.py"))
    assert r.exit_code == 2 and "no-such-rule" in r.output


def test_a_comment_of_the_first_stage_survives_the_second(tmp_path):
    """tf2torch's `# fwport:` comment inside a multi-line Sequential stays above its layer's line
    through torch2jax (which keeps the layers one per line; where a stage drops a comment, the chain
    puts it back above the line its code became)."""
    src = tmp_path / "m.py"
    src.write_text("from tensorflow import keras\nfrom tensorflow.keras import layers\n\n\ndef build():\n"
                   "    model = keras.Sequential([\n        keras.Input(shape=(4,)),\n        layers.Dense(3),\n"
                   "        layers.LSTM(2),\n    ])\n    return model\n")
    r = _run("tf2jax", str(src), "-o", str(tmp_path / "out.py"))
    assert r.exit_code == 1, r.output
    out = (tmp_path / "out.py").read_text().splitlines()
    i = next(k for k, line in enumerate(out) if "layers.LSTM(2)" in line)
    assert out[i - 1].strip().startswith("# fwport: unsupported-construct: LSTM expects a 3-D input"), out
    assert out[i - 1].startswith(" " * 8) and out[i].strip() == "layers.LSTM(2),"
    assert any(line.strip() == "model = eqx.nn.Sequential([" for line in out[:i])
    assert sum("# fwport:" in line for line in out) == 1


def test_help_lists_the_chain():
    r = _run("--help")
    assert "tf2jax" in r.output
    assert "tf2torch, then torch2jax" in _run("tf2jax", "--help").output


def test_line_map_keeps_rewrites_and_insertions_near_their_source():
    before = "a\nb\nc\nd\n"
    after = "a\nB\nhelper1\nhelper2\nc\nd\n"
    m = LineMap(before, after)
    assert m.back(1) == (1, True) and m.back(5) == (3, True) and m.back(6) == (4, True)
    assert m.back(2)[0] == 2 and not m.back(2)[1]  # rewritten line: the line it replaced
    assert m.back(3)[0] in (2, 3) and not m.back(3)[1]


# --- fwport verify end to end -------------------------------------------------------------------------

VERIFIED = ["sequential_mlp", "mnist_convnet", "functional_mlp"]


@needs_frameworks
@pytest.mark.parametrize("name", VERIFIED)
def test_keras_and_jax_compute_the_same_model(name, session, tmp_path):
    from fwport.verify.run import Options, verify
    d = TF_FIXTURES / name
    spec = json.loads((d / "verify.json").read_text())
    r = _run("tf2jax", str(d / "model.py"), "-o", str(tmp_path / "jax.py"))
    assert r.exit_code == 0, r.output
    cert = verify(Options(str(d / "model.py"), str(tmp_path / "jax.py"), spec["model"], args=spec.get("args") or {},
                          inputs=spec.get("inputs") or [], keras=spec.get("keras"), device="cpu"), session)
    assert cert["direction"] == "tf2jax"
    assert cert["verdict"] == "pass", json.dumps(cert, indent=1, default=str)[:4000]
    for stage in ("tf2torch", "torch2jax"):
        res = cert["stages"][stage]["results"]
        assert res["outputs"] and res["gradients"]
        assert all(e["ok"] for g in ("outputs", "gradients", "input_gradients") for e in res.get(g, []))
    assert cert["results"]["outputs"] and all(e["ok"] for e in cert["results"]["outputs"])


@needs_frameworks
def test_a_wrong_jax_translation_fails_end_to_end(session, tmp_path):
    from fwport.verify.run import Options, verify
    d = TF_FIXTURES / "sequential_mlp"
    r = _run("tf2jax", str(d / "model.py"), "-o", str(tmp_path / "jax.py"))
    assert r.exit_code == 0
    text = (tmp_path / "jax.py").read_text()
    assert "eqx.nn.Lambda(jnp.tanh)" in text
    (tmp_path / "jax.py").write_text(text.replace("eqx.nn.Lambda(jnp.tanh)", "eqx.nn.Lambda(jax.nn.sigmoid)"))
    cert = verify(Options(str(d / "model.py"), str(tmp_path / "jax.py"), "build_model", args={"hidden_units": 48},
                          inputs=["float32[4,20]"], keras=3, device="cpu"), session)
    assert cert["verdict"] == "mismatch"
    assert cert["stages"]["tf2torch"]["verdict"] == "pass" and cert["stages"]["torch2jax"]["verdict"] == "mismatch"
    assert not all(e["ok"] for e in cert["results"]["outputs"])
