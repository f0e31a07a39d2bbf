"""The runner survives its workers: a result that cannot cross the process boundary, or a worker
that dies, costs only its own file; the rest of the run goes on and the reports are written."""
from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest
from click.testing import CliRunner

import fwport.core.runner as runner
from fwport.core.cli import main
from fwport.core.context import LayerRecord, ModelInfo
from fwport.packs.tf2torch.dims import Named
from fwport.core.finding import Finding, Severity
from fwport.core.result import FileResult, Status
from fwport.core.runner import Job, Outcome, Settings, run, translate_text

TF = "import tensorflow as tf\n\ny = tf.reduce_sum(x, 1)\n"

# A module constant becomes a size written by name (dims.Named) in the records and model infos.
GAN = '''\
from tensorflow import keras
from tensorflow.keras import layers

latent_dim = 128

generator = keras.Sequential(
    [
        keras.Input(shape=(latent_dim,)),
        layers.Dense(8 * 8 * 128),
        layers.Reshape((8, 8, 128)),
    ],
    name="generator",
)
'''


def roundtrip(obj):
    return pickle.loads(pickle.dumps(obj, pickle.HIGHEST_PROTOCOL))


def test_named_sizes_survive_pickle():
    n = Named(128, "latent_dim")
    back = roundtrip(n)
    assert type(back) is Named and back == 128 and back.text == "latent_dim" and repr(back) == "latent_dim"


def test_every_result_type_roundtrips_through_pickle():
    n = Named(7, "K")
    finding = Finding(Severity.ERROR, "no-rule", "m", "a.py", 3, 4, "dense")
    record = LayerRecord("m", "layers[0]", "0", "dense", "after-flatten", {"H": n, "W": 2})
    model = ModelInfo("m", "sequential", (n, 3), "nchw", "same")
    result = FileResult("a.py", Status.CONVERTED, "src", "out", [finding], [record], 3, [model])
    outcome = Outcome(result, Job("a.py", "b.py", True, True), "diff", True, {"k": n})
    for obj in (finding, record, model, result, outcome, Settings(), Job("a.py"), *Status, *Severity):
        assert roundtrip(obj) == obj
    assert type(record.symbols["H"]) is int and type(model.input_shape[0]) is int  # records hold plain ints


def test_a_real_result_with_named_sizes_roundtrips():
    result = translate_text(GAN, "gan.py", Settings())
    assert result.status is Status.CONVERTED and result.models
    assert result.models[0].input_shape == (128,)
    back = roundtrip(Outcome(result, Job("gan.py")))
    assert back.result.to_dict(True) == result.to_dict(True)


def _tree(tmp_path: Path, names: list[str]) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    for name in names:
        (src / name).write_text(TF)
    return src


_real_run_job = runner.run_job


class _Unloadable(int):
    """Pickles, but cannot be unpickled (its __new__ wants two arguments): the bug of dims.Named."""

    def __new__(cls, value, text):
        return super().__new__(cls, value)


def _dies_on_poison(job, settings):
    # runs in the forked workers: a file named poison* kills its worker outright
    if "poison" in job.source:
        os._exit(3)
    return _real_run_job(job, settings)


def _unloadable_on_poison(job, settings):
    out = _real_run_job(job, settings)
    if "poison" in job.source:
        out.extra["size"] = _Unloadable(3, "three")
    return out


def _jobs(src: Path):
    return [Job(str(p)) for p in sorted(src.iterdir())]


@pytest.mark.parametrize("fault", [_dies_on_poison, _unloadable_on_poison])
def test_one_bad_file_costs_only_itself(tmp_path, monkeypatch, fault):
    names = [f"m{i:02}.py" for i in range(12)] + ["poison.py"] + [f"z{i:02}.py" for i in range(12)]
    src = _tree(tmp_path, names)
    monkeypatch.setattr(runner, "run_job", fault)
    outs = list(run(_jobs(src), Settings(), workers=2))
    assert [Path(o.job.source).name for o in outs] == sorted(names)  # every file, in order
    bad = [o for o in outs if o.result.status is Status.FAILED]
    assert [Path(o.job.source).name for o in bad] == ["poison.py"]
    (f,) = bad[0].result.findings
    assert f.code == "internal-error" and f.path.endswith("poison.py")
    if fault is _dies_on_poison:
        assert "died" in f.message and "retried alone" in f.message
    else:
        assert "could not be read back" in f.message and "TypeError" in f.message
    assert all(o.result.status is Status.CONVERTED for o in outs if o not in bad)


def test_a_worker_death_in_the_tree_command_still_writes_the_report(tmp_path, monkeypatch):
    names = [f"m{i:02}.py" for i in range(8)] + ["poison.py"] + [f"z{i:02}.py" for i in range(8)]
    src = _tree(tmp_path, names)
    monkeypatch.setattr(runner, "run_job", _dies_on_poison)
    report = tmp_path / "report.json"
    res = CliRunner().invoke(main, ["tf2torch", str(src), "-o", str(tmp_path / "out"), "-j", "2",
                                    "--report", str(report)])
    assert res.exit_code == 2, res.output
    data = json.loads(report.read_text())
    assert report.stat().st_mode & 0o044  # readable by others as umask allows, not mkstemp's 0600
    statuses = {Path(f["path"]).name: f["status"] for f in data["files"]}
    assert statuses.pop("poison.py") == "failed"
    assert set(statuses.values()) == {"converted"} and len(statuses) == 16
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(n for n in names if n != "poison.py")
    assert "poison.py" in res.output and "internal-error" in res.output


def test_a_crash_in_the_runner_itself_still_writes_the_report(tmp_path, monkeypatch):
    src = _tree(tmp_path, ["a.py", "b.py", "c.py"])
    real_run = runner.run

    def crashing_run(jobs, settings, workers=None):
        for i, outcome in enumerate(real_run(jobs, settings, 1)):
            if i == 2:
                raise RuntimeError("boom")
            yield outcome

    monkeypatch.setattr(runner, "run", crashing_run)
    report = tmp_path / "report.json"
    res = CliRunner().invoke(main, ["tf2torch", str(src), "-o", str(tmp_path / "out"), "--report", str(report)])
    assert res.exit_code == 2
    assert "fwport crashed after 2 file(s) (RuntimeError: boom)" in res.output
    data = json.loads(report.read_text())
    assert [Path(f["path"]).name for f in data["files"]] == ["a.py", "b.py"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".fwport-report")]
