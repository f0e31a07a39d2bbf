"""More bad input (issue 6's list, beyond tests/test_bad_input.py): each gets a clear per-file
finding and the batch goes on; writes stay atomic when the disk fills up mid-run."""
from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import fwport.core.runner
from fwport.core.cli import main

TF = "import tensorflow as tf\n\ny = tf.reduce_sum(x, 1)\n"
TORCH = "import torch\n\ny = torch.sum(x, dim=1)\n"
DEEP = "import tensorflow as tf\ny = " + "(" * 5000 + "tf.abs(x)" + ")" * 5000 + "\n"


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def report(path: Path) -> dict[str, dict]:
    return {Path(f["path"]).name: f for f in json.loads(path.read_text())["files"]}


def temp_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.endswith(fwport.core.runner.TMP_SUFFIX)]


# name -> bytes (None: made by a function), expected status, finding code, words in its message
CASES = {
    "syntax.py": (b"import tensorflow as tf\ndef f(:\n", "failed", "parse-error", "invalid syntax"),
    "nul.py": (b"import tensorflow as tf\n\0\n", "failed", "input-error", "NUL bytes"),
    "latin1_undeclared.py": ("import tensorflow as tf\n# \u00e9\n".encode("latin-1"), "failed", "input-error",
                             "not UTF-8 text (byte 0xe9 at line 2)"),
    "latin1_declared.py": ("# coding: latin-1\n" + TF.replace("\n\n", "\n# \u00e9\n")).encode("latin-1"),
    "crlf.py": TF.replace("\n", "\r\n").encode(),
    "bom.py": b"\xef\xbb\xbf" + TF.encode(),
    "tabs.py": b"import tensorflow as tf\n\ndef f(x):\n\tif x:\n\t\treturn tf.reduce_sum(x, 1)\n",
    "mixed_tabs.py": (b"import tensorflow as tf\ndef f(x):\n\tif x:\n        \treturn tf.abs(x)\n", "failed", "parse-error", ""),
    "deep.py": (DEEP.encode(), "failed", "parse-error", "too many nested parentheses"),
    "huge.py": (None, "failed", "input-error", "over the 5.0 MB limit"),
    "dangling.py": (None, "failed", "input-error", "no such file or directory"),
    "loop_a.py": (None, "failed", "input-error", "Too many levels of symbolic links"),
    "loop_b.py": (None, "failed", "input-error", "Too many levels of symbolic links"),
    "good.py": TF.encode(),
}
GOOD_OUT = {
    "latin1_declared.py": ("# coding: latin-1\n" + TORCH.replace("\n\n", "\n# \u00e9\n")).encode("latin-1"),
    "crlf.py": TORCH.replace("\n", "\r\n").encode(),
    "bom.py": b"\xef\xbb\xbf" + TORCH.encode(),
    "tabs.py": b"import torch\n\ndef f(x):\n\tif x:\n\t\treturn torch.sum(x, dim=1)\n",
    "good.py": TORCH.encode(),
}


def make_tree(src: Path) -> None:
    src.mkdir()
    for name, case in CASES.items():
        data = case if isinstance(case, bytes) else case[0]
        if data is not None:
            (src / name).write_bytes(data)
    line = b"x = tf.reduce_sum(y)  # padding padding padding padding padding\n"
    (src / "huge.py").write_bytes(b"import tensorflow as tf\n" + line * (10 * 2**20 // len(line)))
    (src / "dangling.py").symlink_to(src / "nowhere.py")
    (src / "loop_a.py").symlink_to(src / "loop_b.py")
    (src / "loop_b.py").symlink_to(src / "loop_a.py")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_every_bad_input_is_one_clear_finding_and_the_batch_goes_on(tmp_path, jobs):
    src, out, rep = tmp_path / "src", tmp_path / "out", tmp_path / "r.json"
    make_tree(src)
    r = run("tf2torch", str(src), "-o", str(out), "--report", str(rep), "-j", jobs, "--exclude", "never/here")
    assert r.exit_code == 2 and "Traceback" not in r.stderr and "crashed" not in r.stderr
    files = report(rep)
    assert sorted(files) == sorted(CASES)
    for name, case in CASES.items():
        if isinstance(case, bytes):
            assert files[name]["status"] == "converted", (name, files[name]["findings"])
            assert (out / name).read_bytes() == GOOD_OUT[name], name
            continue
        _, status, code, words = case
        assert files[name]["status"] == status, name
        errors = [f for f in files[name]["findings"] if f["severity"] == "error"]
        assert [f["code"] for f in errors] == [code], (name, errors)
        assert words in errors[0]["message"], (name, errors[0]["message"])
        assert f"{src / name}" in r.stderr
    bad = len(CASES) - len(GOOD_OUT)
    assert f"{len(CASES)} files: {len(GOOD_OUT)} translated, 0 unchanged, 0 need attention, {bad} failed" in r.stderr
    assert not temp_files(tmp_path)


def test_deep_nesting_in_one_file_is_a_parse_error_not_a_crash(tmp_path):
    # libcst's native parser overflowed its stack (a segfault that ended the run) on this file
    f = tmp_path / "deep.py"
    f.write_text(DEEP)
    r = run("tf2torch", str(f))
    assert r.exit_code == 2 and r.stdout == ""
    assert f"{f}:2:" in r.stderr and "parse-error: not valid Python 3: too many nested parentheses" in r.stderr


def test_brackets_in_strings_do_not_count_as_nesting(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(TF + "s = '" + "(" * 500 + "'\n")
    r = run("tf2torch", str(f))
    assert r.exit_code == 0 and r.stdout_bytes == (TORCH + "s = '" + "(" * 500 + "'\n").encode()


def test_code_nested_past_the_recursion_limit_is_a_clear_error(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import tensorflow as tf\ny = " + "not " * 3000 + "tf.abs(x)\n")
    r = run("tf2torch", str(f))
    assert r.exit_code == 2 and "Traceback" not in r.stderr
    assert f"{f}: error: internal-error: the code is nested too deeply" in r.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 file: nothing to refuse")
def test_an_unreadable_file_is_an_input_error(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text(TF)
    secret = src / "b.py"
    secret.write_text(TF)
    secret.chmod(0)
    try:
        r = run("tf2torch", str(src), "-o", str(tmp_path / "out"))
    finally:
        secret.chmod(0o644)
    assert r.exit_code == 2
    assert f"{secret}: error: input-error: permission denied" in r.stderr
    assert (tmp_path / "out" / "a.py").read_text() == TORCH


def test_a_read_only_output_file_is_not_replaced(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    out.mkdir()
    for name in ("a.py", "b.py"):
        (src / name).write_text(TF)
    kept = out / "a.py"
    kept.write_text("mine\n")
    kept.chmod(0o444)
    r = run("tf2torch", str(src), "-o", str(out), "-j", "1")
    assert r.exit_code == 2
    assert f"output-error: cannot write {kept}: the file is read-only; not overwritten" in r.stderr
    assert kept.read_text() == "mine\n" and (kept.stat().st_mode & 0o777) == 0o444
    assert (out / "b.py").read_text() == TORCH  # the batch went on
    assert not temp_files(out)


def test_in_place_leaves_a_read_only_file_alone(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(TF)
    f.chmod(0o444)
    r = run("tf2torch", str(f), "--in-place")
    assert r.exit_code == 2 and "read-only" in r.stderr and f.read_text() == TF


def test_an_output_folder_inside_the_input_tree_is_not_translated_again(tmp_path):
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "a.py").write_text(TF)
    (src / "pkg" / "b.py").write_text(TF)
    out = src / "converted"
    first = run("tf2torch", str(src), "-o", str(out))
    second = run("tf2torch", str(src), "-o", str(out), "-j", "1")
    for r in (first, second):
        assert r.exit_code == 0 and "2 files: 2 translated" in r.stderr
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert written == ["a.py", "pkg/b.py"]  # no converted/converted/... on the second run
    assert (out / "pkg" / "b.py").read_text() == TORCH


class _FullDisk:
    """A file object for write_atomic's temporary file that accepts ``budget`` more bytes in all,
    then fails like a full disk: part of the data may already be on disk."""

    budget = 0

    def __init__(self, fh):
        self.fh = fh

    def write(self, data):
        room = max(0, _FullDisk.budget)
        self.fh.write(data[:room])
        _FullDisk.budget -= len(data)
        if len(data) > room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return len(data)

    def __getattr__(self, name):
        return getattr(self.fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()


def test_a_disk_that_fills_up_mid_run_leaves_no_partial_file(tmp_path, monkeypatch):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    out.mkdir()
    for i in range(4):
        (src / f"m{i}.py").write_text(TF)
        (out / f"m{i}.py").write_text(f"previous output {i}\n")
    real_fdopen = os.fdopen

    def fdopen(fd, *a, **k):  # only the atomic writes' temporary files live on the full disk
        fh = real_fdopen(fd, *a, **k)
        return _FullDisk(fh) if sys._getframe(1).f_code.co_name == "replaced_atomically" else fh

    monkeypatch.setattr(fwport.core.runner.os, "fdopen", fdopen)
    _FullDisk.budget = len(TORCH) + 10  # room for the first file and 10 bytes of the second
    rep = tmp_path / "r.json"
    r = run("tf2torch", str(src), "-o", str(out), "-j", "1", "--report", str(rep))
    assert r.exit_code == 2
    assert (out / "m0.py").read_text() == TORCH
    for i in (1, 2, 3):  # each later file says why, and its previous output is untouched
        assert f"{src / f'm{i}.py'}: error: output-error: cannot write {out / f'm{i}.py'}: No space left on device" in r.stderr
        assert (out / f"m{i}.py").read_text() == f"previous output {i}\n"
    assert sorted(p.name for p in out.iterdir()) == ["m0.py", "m1.py", "m2.py", "m3.py"]  # no temp file left
    assert [f["status"] for f in report(rep).values()] == ["converted", "failed", "failed", "failed"]
    assert all((src / f"m{i}.py").read_text() == TF for i in range(4))


def test_a_report_that_cannot_be_written_is_a_clear_error_and_leaves_no_temp_file(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text(TF)
    real_fdopen = os.fdopen
    monkeypatch.setattr(fwport.core.runner.os, "fdopen", lambda fd, *a, **k: _FullDisk(real_fdopen(fd, *a, **k)))
    _FullDisk.budget = 0  # the disk is full when the report is written at the end
    rep = tmp_path / "r.json"
    r = run("tf2torch", str(src), "--check", "--report", str(rep))
    assert r.exit_code == 2 and "Traceback" not in r.stderr
    assert f"fwport: error: cannot write the report {rep}: No space left on device" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_a_permission_error_on_read_is_an_input_error_even_as_root(tmp_path, monkeypatch):
    # the chmod 000 test above is skipped as root: the same refusal, simulated at the open call
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text(TF)
    (src / "b.py").write_text(TF)
    real_open = open

    def guarded(path, *a, **k):
        if str(path).endswith("b.py"):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, *a, **k)

    monkeypatch.setattr(fwport.core.runner, "open", guarded, raising=False)
    r = run("tf2torch", str(src), "-o", str(tmp_path / "out"), "-j", "1")
    assert r.exit_code == 2
    assert f"{src / 'b.py'}: error: input-error: permission denied: cannot read the file" in r.stderr
    assert (tmp_path / "out" / "a.py").read_text() == TORCH
