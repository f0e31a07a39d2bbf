"""Bad input gives a clear per-file error naming the file, never a traceback; a directory run goes
on. Good-but-unusual input (BOM, CRLF, nothing to translate) comes back exactly."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fwport.core.cli import main

TF = "import tensorflow as tf\n\ny = tf.reduce_sum(x, 1)\n"
TORCH = "import torch\n\ny = torch.sum(x, dim=1)\n"


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


# name, bytes, finding code, words the message must contain, (line, column) or None
BAD = [
    ("syntax", b"import tensorflow as tf\n\ndef f(:\n    pass\n", "parse-error", "invalid syntax", (3, 7)),
    ("python2", b"import tensorflow as tf\nprint 'hello'\n", "parse-error", "Python 2", (2, 1)),
    ("not-utf8", "import tensorflow as tf\n# caf\u00e9\n".encode("latin-1"), "input-error", "not UTF-8 text (byte 0xe9 at line 2)", None),
    ("binary", b"\x7fELF\x02\x01\x00\x00tensorflow", "input-error", "binary file", None),
]


@pytest.mark.parametrize("name,data,code,words,where", BAD, ids=[b[0] for b in BAD])
def test_bad_file_alone_exits_2_with_a_located_message(tmp_path, name, data, code, words, where):
    f = tmp_path / f"{name}.py"
    f.write_bytes(data)
    r = run("tf2torch", str(f))
    assert r.exit_code == 2
    assert r.stdout == ""  # nothing half-translated on stdout
    assert "Traceback" not in r.stderr
    line = next(l for l in r.stderr.splitlines() if f": error: {code}: " in l)
    assert line.startswith(f"{f}:{where[0]}:{where[1]}: " if where else f"{f}: ")
    assert words in line
    assert f.read_bytes() == data


def test_too_large_file_names_the_limit_and_the_setting(tmp_path):
    f = tmp_path / "huge.py"
    line = b"x = tf.reduce_sum(y)  # padding padding padding padding padding\n"
    f.write_bytes(b"import tensorflow as tf\n" + line * (10 * 1024 * 1024 // len(line)))
    r = run("tf2torch", str(f))
    assert r.exit_code == 2
    assert "input-error: the file is 10.0 MB, over the 5.0 MB limit" in r.stderr
    assert "max_size" in r.stderr
    small = tmp_path / "small.py"
    small.write_text(TF)
    assert "over the" in run("tf2torch", "--max-size", "10", str(small)).stderr


def test_a_directory_run_reports_each_bad_file_and_goes_on(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name, data, *_ in BAD:
        (src / f"{name}.py").write_bytes(data)
    (src / "good.py").write_text(TF)
    rep = tmp_path / "r.json"
    r = run("tf2torch", str(src), "-o", str(tmp_path / "out"), "--report", str(rep))
    assert r.exit_code == 2
    assert (tmp_path / "out" / "good.py").read_text() == TORCH
    files = {Path(f["path"]).stem: f for f in json.loads(rep.read_text())["files"]}
    for name, _, code, *_ in BAD:
        assert files[name]["status"] == "failed" and files[name]["findings"][0]["code"] == code
    assert files["good"]["status"] == "converted"
    assert f"5 files: 1 translated, 0 unchanged, 0 need attention, {len(BAD)} failed" in r.stderr


def test_empty_file_is_valid_python_and_unchanged(tmp_path):
    # an empty file is a valid module (every package has empty __init__.py files): not an error
    f = tmp_path / "__init__.py"
    f.write_bytes(b"")
    r = run("tf2torch", str(f))
    assert r.exit_code == 0 and r.stdout == ""
    assert "1 unchanged" in r.stderr


def test_bom_is_kept(tmp_path):
    f = tmp_path / "bom.py"
    f.write_bytes(b"\xef\xbb\xbf" + TF.encode())
    out = tmp_path / "out.py"
    assert run("tf2torch", str(f), "-o", str(out)).exit_code == 0
    assert out.read_bytes() == b"\xef\xbb\xbf" + TORCH.encode()


def test_crlf_line_endings_are_preserved_byte_for_byte(tmp_path):
    f = tmp_path / "crlf.py"
    f.write_bytes(TF.replace("\n", "\r\n").encode())
    out = tmp_path / "out.py"
    assert run("tf2torch", str(f), "-o", str(out)).exit_code == 0
    assert out.read_bytes() == TORCH.replace("\n", "\r\n").encode()
    r = run("tf2torch", str(f))
    assert r.stdout_bytes == TORCH.replace("\n", "\r\n").encode()


@pytest.mark.parametrize("text", [
    "# a tensorflow comment, no import\r\nx = 1\r\n",
    "import tensorflow as tf\n\ndef f(tf, x):\n    return tf.reduce_sum(x)  # shadowed: not TF\n",
    "\ufeffimport os\n\tx = 1 if os else 2\n".replace("\tx", "x"),
])
def test_nothing_to_translate_comes_back_byte_identical(tmp_path, text):
    f = tmp_path / "m.py"
    f.write_bytes(text.encode())
    out = tmp_path / "out.py"
    run("tf2torch", str(f), "-o", str(out))
    assert out.read_bytes() == text.encode()


def test_a_crash_becomes_an_internal_error_finding(tmp_path, monkeypatch):
    import fwport.core.pipeline

    def boom(*a, **k):
        raise KeyError("planted")

    monkeypatch.setattr(fwport.core.pipeline, "translate_source", boom)
    f = tmp_path / "m.py"
    f.write_text(TF)
    r = run("tf2torch", str(f))
    assert r.exit_code == 2
    assert "Traceback" not in r.stderr
    assert f"{f}: error: internal-error: fwport crashed: KeyError: 'planted'" in r.stderr


def test_an_interrupted_write_leaves_the_original_and_no_temp_file(tmp_path, monkeypatch):
    import fwport.core.runner

    f = tmp_path / "m.py"
    f.write_text(TF)

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(fwport.core.runner.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fwport.core.runner.write_atomic(str(f), TORCH.encode())
    assert f.read_text() == TF
    assert [p.name for p in tmp_path.iterdir()] == ["m.py"]


def test_an_unwritable_destination_is_an_output_error(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(TF)
    blocker = tmp_path / "out"
    blocker.write_text("a file where a folder must go")
    r = run("tf2torch", str(f), "-o", str(blocker / "m.py"))
    assert r.exit_code == 2
    assert "output-error: cannot write" in r.stderr
    assert f.read_text() == TF
