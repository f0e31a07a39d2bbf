"""Whole-program acceptance tests: every fixtures/tf2torch/<name>/ holds a Keras program
(model.py), its expected PyTorch translation (expected.py), the expected findings
(expected_findings.json) and how to drive it (verify.json).

- translating model.py gives exactly expected.py and those findings, and is a fixpoint;
- the translated program runs with TensorFlow unimportable: it builds, takes the input in the
  layout the translation announced (ModelInfo.layout), and produces outputs of the shapes Keras
  produces, with as many trainable parameters as Keras, every one of them reached by the gradient;
  weightless functions must also give the same numbers.

The framework work is batched: one Keras 3 process, one Keras 2 (tf_keras) process and one torch
process for all fixtures together. `python scripts/regen_fixtures.py` rewrites the expectations
(read every diff before committing it).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fwport.core.finding import Severity

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "tf2torch"
RUNNER = FIXTURES / "_run.py"
sys.path.insert(0, str(ROOT / "scripts"))

import regen_fixtures  # noqa: E402

DIRS = regen_fixtures.fixture_dirs()
NAMES = [d.name for d in DIRS]
VERIFY = {d.name: json.loads((d / "verify.json").read_text()) for d in DIRS}


# What verify.json may say; "known_bugs" parts: "expected" (expected.py is the hand-written correct
# translation fwport does not produce yet), "fixpoint" (translating the output again changes it),
# "verify" (the text is right but the weight records are not: tests/test_verify.py's check fails).
# "xfail": why the translated program cannot run (an honest refusal); "refusals": why error findings
# that stay in a correct translation do not stop the model (model.fit outside the model code).
VERIFY_KEYS = {"model", "kind", "args", "inputs", "int_high", "keras", "checks", "extra", "xfail", "refusals",
               "known_bugs", "train"}
KNOWN_BUG_PARTS = {"expected", "fixpoint", "verify"}


def _params(part: str):
    """The fixtures, with a strict xfail where verify.json's "known_bugs" names a bug in this part.
    Strict: the day it passes, say so."""
    out = []
    for name in NAMES:
        reason = VERIFY[name].get("known_bugs", {}).get(part)
        out.append(pytest.param(name, id=name, marks=[pytest.mark.xfail(reason=reason, strict=True)] if reason else []))
    return out
_translations: dict[str, object] = {}


def translated(name: str):
    if name not in _translations:
        _translations[name] = regen_fixtures.translate_fixture(FIXTURES / name)
    return _translations[name]


def test_enough_fixtures():
    assert len(NAMES) >= 12, NAMES
    for d in DIRS:
        for f in ("model.py", "expected.py", "expected_findings.json", "verify.json"):
            assert (d / f).is_file(), f"{d.name}: {f} missing (run scripts/regen_fixtures.py)"


@pytest.mark.parametrize("name", NAMES)
def test_verify_json_says_why_a_fixture_is_not_verified(name):
    """Every fixture is either verified or says why not: an error finding in the expected
    translation (a refusal) comes with a reason ("xfail" or "refusals"), and every known bug is
    filed under a part a test reads (a misspelt part would silently disable nothing)."""
    v = VERIFY[name]
    assert set(v) <= VERIFY_KEYS, f"{name}: unknown verify.json keys {sorted(set(v) - VERIFY_KEYS)}"
    bugs = v.get("known_bugs", {})
    assert set(bugs) <= KNOWN_BUG_PARTS, f"{name}: unknown known_bugs parts {sorted(set(bugs) - KNOWN_BUG_PARTS)}"
    reasons = [*bugs.values(), *[e["xfail"] for e in [v, *v.get("extra", [])] if "xfail" in e]]
    for reason in reasons + ([v["refusals"]] if "refusals" in v else []):
        assert isinstance(reason, str) and len(reason) > 20, f"{name}: give a precise reason, not {reason!r}"
    found = json.loads((FIXTURES / name / "expected_findings.json").read_text())
    if any(f["severity"] == "error" for f in found):
        assert v.get("xfail") or v.get("refusals"), \
            f"{name}: expected.py keeps error findings but verify.json says neither why it cannot run (xfail) " \
            "nor why they do not stop the model (refusals)"


@pytest.mark.parametrize("name", _params("expected"))
def test_translation_is_expected(name):
    r = translated(name)
    expected = (FIXTURES / name / "expected.py").read_text()
    assert r.output == expected, f"{name}: output differs from expected.py (scripts/regen_fixtures.py --check shows the diff)"
    want = json.loads((FIXTURES / name / "expected_findings.json").read_text())
    assert regen_fixtures.findings_data(r) == want, f"{name}: findings differ from expected_findings.json"
    # an error finding always leaves its comment in the output
    for f in r.findings:
        if f.severity is Severity.ERROR:
            assert f"# fwport: {f.code}:" in r.output, f"{name}: error {f.code} at line {f.line} left no comment"


@pytest.mark.parametrize("name", _params("fixpoint"))
def test_translation_is_a_fixpoint(name):
    out = translated(name).output
    again = regen_fixtures.translate_source(out, f"fixtures/tf2torch/{name}/expected.py")
    assert again.output == out, "translating the translation again must change nothing"


# --- running the programs ---------------------------------------------------------------------

def _jobs():
    """One job per model (or function) to drive: the fixture's main entry and its `extra` ones."""
    jobs = []
    for d in DIRS:
        v = VERIFY[d.name]
        for e in [v] + v.get("extra", []):
            job_id = f"{d.name}:{e['model']}"
            n = sum(1 for j in jobs if j["id"] == job_id or j["id"].startswith(job_id + "#"))
            jobs.append({  # the same model driven with other arguments (strides=2) gets an id of its own
                "id": job_id + (f"#{n + 1}" if n else ""), "fixture": d.name, "model": e["model"],
                "kind": e.get("kind", v.get("kind", "model")), "args": e.get("args", {}), "inputs": e["inputs"],
                "int_high": e.get("int_high", v.get("int_high", 10)), "keras": v["keras"],
                "xfail": e.get("xfail", v.get("xfail")),
            })
    return jobs


JOBS = _jobs()


def _layouts(job) -> tuple[str, str]:
    for m in translated(job["fixture"]).models:
        if m.scope == job["model"]:
            return m.layout, m.output_layout
    return "same", "same"


def _input_keys(job) -> list | None:
    """The keys of a model called with a dict of inputs (ModelInfo.input_keys): both sides get one dict."""
    for m in translated(job["fixture"]).models:
        if m.scope == job["model"] and m.input_keys:
            return list(m.input_keys)
    return None


def _spawn(mode: str, jobs: list[dict], tmp: Path, env_extra: dict):
    jobs_path, results_path = tmp / f"jobs-{mode}-{len(jobs)}.json", tmp / f"results-{mode}-{len(jobs)}.json"
    jobs_path.write_text(json.dumps(jobs))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **env_extra)
    proc = subprocess.Popen([sys.executable, str(RUNNER), mode, str(jobs_path), str(results_path)],
                            cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, results_path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run every job under Keras (by generation) and under torch, all processes in parallel."""
    tmp = tmp_path_factory.mktemp("fixture-runs")
    procs = {}
    for version in (3, 2):
        kjobs = []
        for j in JOBS:
            if j["keras"] != version:
                continue
            kjobs.append(dict(j, file=str(FIXTURES / j["fixture"] / "model.py"), input_keys=_input_keys(j),
                              save=str(tmp / f"keras-{j['id'].replace(':', '-')}.npz") if j["kind"] == "function" else None))
        if kjobs:
            env = {"TF_USE_LEGACY_KERAS": "1"} if version == 2 else {}
            procs[f"keras{version}"] = _spawn("keras", kjobs, tmp, env)
    tjobs = []
    for j in JOBS:
        layout, output_layout = _layouts(j)
        tjobs.append(dict(j, file=str(FIXTURES / j["fixture"] / "expected.py"), layout=layout, input_keys=_input_keys(j),
                          output_layout=output_layout,
                          save=str(tmp / f"torch-{j['id'].replace(':', '-')}.npz") if j["kind"] == "function" else None))
    procs["torch"] = _spawn("torch", tjobs, tmp, {})
    results = {}
    for key, (proc, path) in procs.items():
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"the {key} runner crashed:\n{err[-4000:]}"
        side = "torch" if key == "torch" else "keras"
        for r in json.loads(path.read_text()):
            results[(side, r["id"])] = r
    return tmp, results


def _held_at_zero(job) -> set[str]:
    from fwport.core.rule import load_pack
    pack = load_pack("tf2torch")
    out = set()
    for rec in translated(job["fixture"]).layers:
        if rec.scope != job["model"] or rec.rule not in pack.rules:
            continue
        maps = pack.rules[rec.rule].weights_for(rec.variant)
        for w in maps:
            # a torch parameter Keras lacks (an LSTM's bias_hh: its source also feeds another map); a Keras
            # variable mapped to zeros alone (MultiHeadAttention's key bias, which changes nothing) counts in both
            if any(o.op == "zeros" for o in w.ops) and any(
                    x.source == w.source and not any(o.op == "zeros" for o in x.ops) for x in maps):
                out.add(f"{rec.target}.{w.target}" if rec.target not in ("", ".") else w.target)
    return out


@pytest.mark.parametrize("job", [
    pytest.param(j, id=j["id"], marks=[pytest.mark.xfail(reason=j["xfail"], strict=True)] if j["xfail"] else [])
    for j in JOBS
])
def test_translated_program_runs_like_keras(job, runs):
    tmp, results = runs
    keras, torch = results[("keras", job["id"])], results[("torch", job["id"])]
    assert keras["ok"], f"the Keras program itself fails (fix the fixture):\n{keras['error']}"
    assert torch["ok"], f"the translated program fails without TensorFlow:\n{torch['error']}"
    assert torch["shapes"] == keras["shapes"], "output shapes (in the source layout) differ from Keras"
    # a torch parameter the Keras layer does not have, held at zero by the weight map (an RNN's second
    # bias), is not one of Keras's
    held = _held_at_zero(job)
    extra = sum(torch.get("param_numel", {}).get(n, 0) for n in held)
    assert torch["params"] - extra == keras["params"], "number of trainable parameters differs from Keras"
    assert not torch["params_without_grad"], f"parameters the outputs do not depend on: {torch['params_without_grad']}"
    if job["kind"] == "function":
        stem = job["id"].replace(":", "-")
        with np.load(tmp / f"keras-{stem}.npz") as k, np.load(tmp / f"torch-{stem}.npz") as t:
            assert len(k.files) == len(t.files)
            for name in k.files:
                np.testing.assert_allclose(t[name].astype(np.float64), k[name].astype(np.float64),
                                           rtol=1e-5, atol=1e-6, err_msg=f"output {name}")
