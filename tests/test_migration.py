"""The migration overview (files by outcome, share of source-framework call sites translated,
untranslated APIs ranked with their files) in the text, JSON and Markdown reports, and
`fwport report` re-rendering a saved JSON report."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fwport.core.cli import main
from fwport.core.finding import Finding, Severity
from fwport.core.migration import Overview, call_stats, count_source_calls
from fwport.core.result import FileResult, Status
from fwport.core.pipeline import translate_source

# 4 source calls: reduce_sum (translated), foo_bar and GradientTape (no rule), split (refused)
A = ("import tensorflow as tf\n\ny = tf.reduce_sum(x, 1)\nz = tf.foo_bar(x)\ng = tf.GradientTape()\n"
     "a, b = tf.split(x, n, axis=1)\n")
# 2 source calls: foo_bar left, the tf.abs inside it translated
B = "import tensorflow as tf\nw = tf.foo_bar(tf.abs(x))\n"
CLEAN = "import tensorflow as tf\ny = tf.abs(x)\n"
PLAIN = "x = 1\n"


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def tree(tmp_path: Path, files: dict[str, str]) -> Path:
    src = tmp_path / "src"
    for name, text in files.items():
        p = src / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return src


# --- counting ---------------------------------------------------------------------------------------
def test_calls_are_counted_through_every_import_spelling():
    text = ("import tensorflow as tf\nfrom tensorflow.keras import layers\nimport keras.ops as K\n"
            "def f(x):\n    from tensorflow import math as tm\n    return tm.abs(K.relu(layers.Dense(3)(x)))\n"
            "m = tf.keras.Sequential([layers.Dense(2)])\nm.fit(x)\nnp.sum(x)\nprint(tf.constant(1))\n")
    got = count_source_calls(text)
    assert got == {"tensorflow.math.abs": 1, "keras.ops.relu": 1, "keras.layers.Dense": 2, "keras.Sequential": 1,
                   "tensorflow.constant": 1}  # m.fit, np.sum, print and the Dense(...)(x) call are not counted


@pytest.mark.parametrize("text", ["x = tf.abs(y)\n", "import tensorflow as tf\ndef f(:\n", "import os\nos.path.join(a)\n"])
def test_nothing_is_counted_without_a_source_import_or_a_parse(text):
    assert count_source_calls(text) == {}


def test_call_stats_of_a_translation_count_what_is_left_in_the_output():
    r = translate_source(B, "b.py")
    assert call_stats(B, r.output) == {"source_calls": 2, "calls_left": {"tensorflow.foo_bar": 1}}
    r = translate_source(CLEAN, "c.py")
    assert call_stats(CLEAN, r.output) == {"source_calls": 1, "calls_left": {}}


def test_overview_share_and_ranking():
    o = Overview()
    o.add(FileResult("a.py", Status.CONVERTED), {"source_calls": 4, "calls_left": {"tf.x": 2, "tf.y": 1}})
    o.add(FileResult("b.py", Status.CONVERTED), {"source_calls": 6, "calls_left": {"tf.y": 3}})
    o.add(FileResult("c.py", Status.FAILED), {"source_calls": 99, "calls_left": {"tf.z": 99}})  # not counted
    o.add(FileResult("d.py", Status.UNCHANGED), {"source_calls": 0, "calls_left": {}})
    assert (o.translated, o.unchanged, o.failed, o.source_calls, o.calls_left) == (2, 1, 1, 10, 6)
    assert o.share == pytest.approx(0.4)
    assert o.ranked() == [("tf.y", 4, [("b.py", 3), ("a.py", 1)]), ("tf.x", 2, [("a.py", 2)])]
    assert Overview().share is None and "none in the sources" in Overview().render_text()


# --- findings name the API they leave ----------------------------------------------------------------
def test_untranslated_findings_carry_the_api():
    r = translate_source(A, "a.py")
    apis = {f.code: f.api for f in r.findings if f.severity is Severity.ERROR and f.code != "no-rule"}
    assert apis == {"unsupported-argument": "tensorflow.split"}
    assert sorted(f.api for f in r.findings if f.code == "no-rule") == ["tensorflow.GradientTape", "tensorflow.foo_bar"]
    info = next(f for f in r.findings if f.code == "keras-version")
    assert "api" not in info.to_dict()  # optional: absent where there is none
    for f in r.findings:
        assert Finding.from_dict(f.to_dict()) == f


# --- the reports -------------------------------------------------------------------------------------
def test_the_json_report_starts_with_the_overview_and_keeps_its_keys(tmp_path):
    src = tree(tmp_path, {"a.py": A, "pkg/b.py": B, "clean.py": CLEAN, "plain.py": PLAIN, "bad.py": "\0"})
    rep = tmp_path / "r.json"
    r = run("tf2torch", str(src), "-o", str(tmp_path / "out"), "--report", str(rep))
    assert r.exit_code == 2  # bad.py failed
    data = json.loads(rep.read_text())
    assert list(data) == ["tool", "version", "overview", "files", "summary"]
    ov = data["overview"]
    assert ov["files"] == {"translated": 1, "unchanged": 1, "needs_attention": 2, "failed": 1, "skipped": 0}
    assert ov["calls"] == {"in_sources": 7, "translated": 3, "left": 4, "share_translated": round(3 / 7, 4)}
    assert ov["untranslated_apis"][0] == {"api": "tensorflow.foo_bar", "count": 2, "files": [
        {"path": str(src / "a.py"), "count": 1}, {"path": str(src / "pkg" / "b.py"), "count": 1}]}
    assert {a["api"] for a in ov["untranslated_apis"]} == {"tensorflow.foo_bar", "tensorflow.GradientTape", "tensorflow.split"}
    by_name = {Path(f["path"]).name: f for f in data["files"]}
    assert by_name["a.py"]["source_calls"] == 4 and by_name["a.py"]["calls_left"]["tensorflow.split"] == 1
    assert data["summary"]["exit_code"] == 2 and data["summary"]["failed"] == 1


def test_the_text_report_of_a_tree_ends_with_the_overview_block(tmp_path):
    src = tree(tmp_path, {"a.py": A, "b.py": B})
    r = run("tf2torch", str(src), "-o", str(tmp_path / "out"))
    assert r.exit_code == 1
    lines = r.stderr.splitlines()
    start = lines.index("fwport: migration overview")
    assert lines[-1].startswith("fwport: 2 files:")  # the summary line stays last
    block = "\n".join(lines[start:-1])
    assert "call sites translated: 33.3% (2 of 6; 4 left)" in block
    assert f"2  tensorflow.foo_bar  ({src / 'a.py'}, {src / 'b.py'})" in block
    assert all(": error:" not in l for l in lines[start:])  # findings stream before it


def test_a_single_file_gets_no_overview_block_on_stderr(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(A)
    assert "migration overview" not in run("tf2torch", str(f)).stderr


def test_the_markdown_report_puts_the_overview_first(tmp_path):
    src = tree(tmp_path, {"a.py": A, "b.py": B})
    r = run("tf2torch", str(src), "--check", "--format", "markdown")
    md = r.stderr
    assert md.index("## Overview") < md.index("## Needs attention") < md.index("## Files") < md.index("### `")
    assert "| `tensorflow.foo_bar` | 2 |" in md and "**33.3% (2 of 6; 4 left)**" in md


# --- fwport report ------------------------------------------------------------------------------------
@pytest.mark.parametrize("files,code", [({"clean.py": CLEAN, "plain.py": PLAIN}, 0), ({"a.py": A, "c.py": CLEAN}, 1),
                                        ({"a.py": A, "bad.py": "def f(:\n  tensorflow"}, 2)])
def test_fwport_report_rerenders_with_the_runs_exit_code(tmp_path, files, code):
    src = tree(tmp_path, files)
    rep = tmp_path / "r.json"
    first = run("tf2torch", str(src), "-o", str(tmp_path / "out"), "--report", str(rep))
    assert first.exit_code == code
    again = run("report", str(rep))
    assert again.exit_code == code
    assert again.stdout == first.stderr  # the same text report, now on stdout
    as_json = run("report", str(rep), "--format", "json")
    assert json.loads(as_json.stdout) == json.loads(rep.read_text())  # a fixpoint
    md = run("report", str(rep), "--format", "markdown")
    assert md.exit_code == code and md.stdout.startswith("# fwport report\n\n## Overview")


def test_fwport_report_of_a_check_run_keeps_its_exit_code(tmp_path):
    src = tree(tmp_path, {"c.py": CLEAN})
    rep = tmp_path / "r.json"
    assert run("tf2torch", str(src), "--check", "--report", str(rep)).exit_code == 1
    r = run("report", str(rep))
    assert r.exit_code == 1 and "1 would change" in r.stdout


@pytest.mark.parametrize("content,words", [(None, "no such file"), ("{\"files\": [", "not JSON (line 1"),
                                           ('{"tool": "other", "files": []}', "not an fwport report"),
                                           ('{"tool": "fwport", "files": [{"path": "x"}]}', "malformed")])
def test_fwport_report_refuses_what_is_not_a_report(tmp_path, content, words):
    rep = tmp_path / "r.json"
    if content is not None:
        rep.write_text(content)
    r = run("report", str(rep))
    assert r.exit_code == 2 and "Traceback" not in r.stderr
    assert f"fwport: error: {rep}: " in r.stderr and words in r.stderr
