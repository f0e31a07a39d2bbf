"""PEP 263: a file is read as Python reads it (a coding line, a BOM, else UTF-8) and its
translation is written back in the same encoding: to a file, to stdout and in a --diff."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from fwport.core.cli import main
from fwport.core.runner import InputError, read_source_encoded

LATIN1 = "# -*- coding: latin-1 -*-\nimport tensorflow as tf\n\n# caf\u00e9 \u00e0 la cr\u00e8me\ny = tf.reduce_sum(x, 1)\n"
LATIN1_OUT = "# -*- coding: latin-1 -*-\nimport torch\n\n# caf\u00e9 \u00e0 la cr\u00e8me\ny = torch.sum(x, dim=1)\n"


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_a_declared_latin1_file_is_translated_and_written_in_latin1(tmp_path):
    f = tmp_path / "m.py"
    f.write_bytes(LATIN1.encode("latin-1"))
    out = tmp_path / "out.py"
    r = run("tf2torch", str(f), "-o", str(out))
    assert r.exit_code == 0, r.stderr
    assert out.read_bytes() == LATIN1_OUT.encode("latin-1")  # not UTF-8: the coding line stays true


def test_stdout_and_diff_are_in_the_files_encoding(tmp_path):
    f = tmp_path / "m.py"
    f.write_bytes(LATIN1.encode("latin-1"))
    assert run("tf2torch", str(f)).stdout_bytes == LATIN1_OUT.encode("latin-1")
    diff = run("tf2torch", str(f), "--diff").stdout_bytes
    assert b"-y = tf.reduce_sum(x, 1)\n+y = torch.sum(x, dim=1)\n" in diff
    assert "caf\u00e9".encode("latin-1") in diff and "caf\u00e9".encode("utf-8") not in diff


def test_the_coding_line_may_be_on_line_two_and_in_other_spellings(tmp_path):
    text = "#!/usr/bin/env python\n# vim: set fileencoding=cp1252 :\nimport tensorflow as tf\ns = '\u20ac'\ny = tf.abs(x)\n"
    f = tmp_path / "m.py"
    f.write_bytes(text.encode("cp1252"))
    out = tmp_path / "out.py"
    assert run("tf2torch", str(f), "-o", str(out)).exit_code == 0
    got = out.read_bytes().decode("cp1252")
    assert "s = '\u20ac'" in got and "torch.abs(x)" in got and "tensorflow" not in got


def test_a_coding_line_after_line_two_does_not_count(tmp_path):
    f = tmp_path / "m.py"
    f.write_bytes(b"import tensorflow as tf\n\n# -*- coding: latin-1 -*-\n# caf\xe9\n")
    with pytest.raises(InputError) as e:
        read_source_encoded(str(f))
    assert "not UTF-8 text (byte 0xe9 at line 4)" in e.value.finding.message


@pytest.mark.parametrize("cookie,words", [
    ("no-such-codec", "declares the encoding 'no-such-codec', which Python does not know"),
])
def test_an_unknown_codec_is_an_input_error_naming_file_and_line(tmp_path, cookie, words):
    f = tmp_path / "m.py"
    data = f"#!/usr/bin/env python\n# coding: {cookie}\nimport tensorflow as tf\n".encode()
    f.write_bytes(data)
    r = run("tf2torch", str(f))
    assert r.exit_code == 2 and r.stdout == ""
    line = next(l for l in r.stderr.splitlines() if "input-error" in l)
    assert line.startswith(f"{f}:2:1: error: input-error: line 2 ") and words in line
    assert f.read_bytes() == data


def test_bytes_invalid_in_the_declared_encoding_name_it(tmp_path):
    f = tmp_path / "m.py"
    f.write_bytes(b"# coding: ascii\nimport tensorflow as tf\n# caf\xe9\n")
    with pytest.raises(InputError) as e:
        read_source_encoded(str(f))
    assert "not ascii text (byte 0xe9 at line 3), though line 1 declares that encoding" in e.value.finding.message


def test_a_bom_with_a_contradicting_coding_line_is_an_input_error(tmp_path):
    f = tmp_path / "m.py"
    f.write_bytes(b"\xef\xbb\xbf# coding: latin-1\nimport tensorflow as tf\n")
    with pytest.raises(InputError) as e:
        read_source_encoded(str(f))
    assert "byte order mark" in e.value.finding.message and e.value.finding.line == 1


def test_a_bom_file_decodes_with_the_bom_kept_in_the_text(tmp_path):
    f = tmp_path / "m.py"
    f.write_bytes(b"\xef\xbb\xbf# coding: utf-8\nx = 1\n")
    text, _, codec = read_source_encoded(str(f))
    assert text == "\ufeff# coding: utf-8\nx = 1\n" and codec == "utf-8"


def test_a_translation_the_declared_encoding_cannot_hold_fails_and_writes_nothing(tmp_path):
    # the error comment for a non-literal tf.split explains itself with an arrow (U+2192)
    src = "# coding: ascii\nimport tensorflow as tf\na, b = tf.split(x, n, axis=1)\n"
    f = tmp_path / "m.py"
    f.write_bytes(src.encode())
    r = run("tf2torch", str(f), "--in-place")
    assert r.exit_code == 2
    assert "output-error: the translation has '\u2192' (U+2192)" in r.stderr
    assert "declared encoding ascii cannot represent" in r.stderr
    assert f.read_bytes() == src.encode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]
    r = run("tf2torch", str(f))
    assert r.exit_code == 2 and r.stdout_bytes == b""


def test_a_diff_header_path_the_encoding_cannot_hold_does_not_crash(tmp_path):
    d = tmp_path / "\u65e5\u672c"
    d.mkdir()
    f = d / "m.py"
    f.write_bytes(LATIN1.encode("latin-1"))
    r = run("tf2torch", str(f), "--diff")
    assert r.exit_code == 0 and "crashed" not in r.stderr
    assert b"\\u65e5\\u672c/m.py" in r.stdout_bytes and "caf\u00e9".encode("latin-1") in r.stdout_bytes
