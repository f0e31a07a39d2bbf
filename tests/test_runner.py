"""The runner: which files, where their outputs go, streaming in order, and the residue scan."""
from __future__ import annotations

from pathlib import Path

from fwport.core.result import Status
from fwport.core.runner import Job, Settings, find_source_references, is_excluded, iter_files, plan_jobs, run

TF = "import tensorflow as tf\n\ny = tf.reduce_sum(x, 1)\n"
TF_ROOTS = ("tensorflow", "keras", "tf_keras")


def test_exclude_patterns(tmp_path):
    f = tmp_path / "pkg" / "gen" / "a_pb2.py"
    assert is_excluded(f, ["*_pb2.py"], [tmp_path])
    assert is_excluded(f, ["gen"], [tmp_path])  # a component
    assert is_excluded(f, ["pkg/gen"], [tmp_path])  # a folder covers what is below it
    assert is_excluded(f, ["pkg/*"], [tmp_path])
    assert not is_excluded(f, ["other/*", "*.txt", "pk"], [tmp_path])


def test_plan_mirrors_a_folder_and_maps_a_single_file(tmp_path):
    (tmp_path / "src" / "a").mkdir(parents=True)
    (tmp_path / "src" / "a" / "m.py").write_text(TF)
    (tmp_path / "src" / "n.py").write_text(TF)
    jobs = list(plan_jobs([str(tmp_path / "src")], output=str(tmp_path / "out")))
    assert [(Path(j.source).name, j.dest) for j in jobs] == [
        ("n.py", str(tmp_path / "out" / "n.py")), ("m.py", str(tmp_path / "out" / "a" / "m.py"))]
    one = list(plan_jobs([str(tmp_path / "src" / "n.py")], output=str(tmp_path / "x.py")))
    assert one[0].dest == str(tmp_path / "x.py")
    into = list(plan_jobs([str(tmp_path / "src" / "n.py")], output=str(tmp_path / "dir") + "/"))
    assert into[0].dest == str(tmp_path / "dir" / "n.py")


def test_walk_is_lazy(tmp_path):
    for i in range(5):
        (tmp_path / f"m{i}.py").write_text("x = 1\n")
    it = iter_files([str(tmp_path)])
    first = next(it)
    assert first[0].name == "m0.py"  # a generator: nothing forces the whole tree into a list


def test_run_streams_in_order_with_a_bounded_number_in_flight(tmp_path):
    n = 40
    for i in range(n):
        (tmp_path / f"m{i:02}.py").write_text(TF if i % 3 else "x = 1\n")
    pulled = []

    def jobs():
        for i in range(n):
            pulled.append(i)
            yield Job(str(tmp_path / f"m{i:02}.py"))

    out = run(jobs(), Settings(), workers=2)
    first = next(out)
    assert first.job.source.endswith("m00.py")
    assert len(pulled) < n  # results arrive while jobs are still being produced
    rest = list(out)
    assert [Path(o.job.source).name for o in [first, *rest]] == [f"m{i:02}.py" for i in range(n)]
    assert all(o.result.source == "" and o.result.output == "" for o in rest)  # no text kept per file
    assert [o.result.status for o in rest[:3]] == [Status.CONVERTED, Status.CONVERTED, Status.UNCHANGED]


def test_find_source_references():
    text = ("import os, keras\nimport torch\nfrom tf_keras.layers import Dense\nfrom . import tensorflow\n"
            "def f():\n    import tensorflow.compat.v1 as v1\n    return __import__('tensorflow')\n"
            "s = 'import tensorflow'  # a string is not an import\n")
    found = [(f.line, f.message.split(": ", 1)[1]) for f in find_source_references(text, "m.py", TF_ROOTS)]
    assert found == [(1, "import keras"), (3, "from tf_keras.layers import ..."),
                     (6, "import tensorflow.compat.v1"), (7, "__import__('tensorflow')")]
    assert find_source_references("import torch\n", "m.py", TF_ROOTS) == []


def test_several_input_folders_each_keep_their_name_under_the_output(tmp_path):
    for d in ("a", "b"):
        (tmp_path / d / "pkg").mkdir(parents=True)
        (tmp_path / d / "pkg" / "m.py").write_text(TF)
    (tmp_path / "loose.py").write_text(TF)
    paths = [str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "loose.py")]
    jobs = list(plan_jobs(paths, output=str(tmp_path / "out")))
    assert sorted(j.dest for j in jobs) == sorted([str(tmp_path / "out" / "a" / "pkg" / "m.py"),
                                                   str(tmp_path / "out" / "b" / "pkg" / "m.py"),
                                                   str(tmp_path / "out" / "loose.py")])
    one = list(plan_jobs([str(tmp_path / "a")], output=str(tmp_path / "out")))
    assert [j.dest for j in one] == [str(tmp_path / "out" / "pkg" / "m.py")]  # one folder: onto out itself


def test_inputs_that_would_write_the_same_output_are_refused(tmp_path):
    from click.testing import CliRunner

    from fwport.core.cli import main

    for d in ("x/src", "y/src"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / "m.py").write_text(TF)
    r = CliRunner().invoke(main, ["tf2torch", str(tmp_path / "x" / "src"), str(tmp_path / "y" / "src"),
                                  "-o", str(tmp_path / "out")])
    assert r.exit_code == 2 and "would both be written to" in r.output
    assert not (tmp_path / "out").exists()
