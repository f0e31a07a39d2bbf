"""Jupyter notebooks: translated cell by cell with one import table (fwport/core/notebook.py)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
from click.testing import CliRunner
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from fwport.core.cli import main
from fwport.core.notebook import mask_ipython, translate_notebook, unmask_ipython
from fwport.core.runner import Settings

ROOT = Path(__file__).resolve().parent.parent


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def notebook(*cells, language: str | None = "python") -> nbformat.NotebookNode:
    nb = new_notebook()
    if language:
        nb.metadata["kernelspec"] = {"name": "k", "display_name": "k", "language": language}
    nb.cells = list(cells)
    for i, c in enumerate(nb.cells):
        c["id"] = f"cell-{i}"  # stable ids: the written JSON is compared byte for byte
    return nb


def write_nb(path: Path, nb) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
    return path


def sources(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(str(path), as_version=4).cells]


def translate(nb, path: str = "nb.ipynb"):
    return translate_notebook(nbformat.writes(nb) + "\n", path, Settings())


def ran(source: str, n: int):
    return new_code_cell(source, execution_count=n, outputs=[new_output("stream", name="stdout", text=f"out {n}\n")])


# --- one import table, imports in the first code cell ------------------------------------------------
def test_an_import_in_one_cell_resolves_names_in_later_cells():
    nb = notebook(new_markdown_cell("# Sums with tf.reduce_sum"),
                  ran("import tensorflow as tf", 1),
                  ran("x = load()", 2),
                  ran("y = tf.reduce_sum(x, 1)", 3))
    t = translate(nb)
    assert t.result.status.value == "converted"
    out = nbformat.reads(t.result.output, as_version=4)
    assert [c.source for c in out.cells] == ["# Sums with tf.reduce_sum", "import torch", "x = load()",
                                            "y = torch.sum(x, dim=1)"]
    # changed cells lose their outputs and execution count; the unchanged cell keeps them
    assert [(c.get("execution_count"), len(c.get("outputs", []))) for c in out.cells[1:]] == [(None, 0), (2, 1), (None, 0)]
    assert out.cells[2].outputs[0].text == "out 2\n"
    assert [c[0] for c in t.changes] == [2, 4]


def test_torch_imports_go_to_the_first_code_cell_even_when_tensorflow_is_imported_later():
    nb = notebook(new_markdown_cell("intro"),
                  new_code_cell("import numpy as np"),
                  new_code_cell("import tensorflow as tf\ny = tf.reduce_sum(np.ones(3), 0)"))
    out = nbformat.reads(translate(nb).result.output, as_version=4)
    assert [c.source for c in out.cells] == ["intro", "import torch\nimport numpy as np", "y = torch.sum(np.ones(3), dim=0)"]


def test_a_setup_cell_of_shell_lines_stays_first_and_untouched():
    nb = notebook(ran("!pip install -q tensorflow==2.15\n# setup", 1),
                  ran("import numpy as np", 2),
                  new_code_cell("import tensorflow as tf\ny = tf.reduce_sum(np.ones(3), 0)"))
    t = translate(nb)
    out = nbformat.reads(t.result.output, as_version=4)
    assert [c.source for c in out.cells] == ["!pip install -q tensorflow==2.15\n# setup", "import torch\nimport numpy as np",
                                            "y = torch.sum(np.ones(3), dim=0)"]
    assert (out.cells[0].execution_count, len(out.cells[0].outputs)) == (1, 1)
    # lines stay right in every cell though the anchor line opened cell 2 of the joined text
    nb.cells[2].source += "\nd = tf.keras.layers.Dense(3, kernel_regularizer='l2')"
    errors = [(f.cell, f.line, f.column, f.code) for f in translate(nb).result.findings if f.severity.value == "error"]
    assert errors == [(3, 3, 5, "unsupported-argument")]


def test_cell_boundaries_survive_translations_that_add_and_remove_lines():
    nb = notebook(new_code_cell("import tensorflow as tf\n\n@tf.function\ndef f(x):\n"
                                "    return tf.reduce_sum(x, axis=[1, 2], keepdims=True)\n"),
                  new_code_cell("y = tf.concat(\n    [a, b],\n    axis=1,\n)"),
                  new_code_cell("# tail\nprint(y)\n"),
                  new_code_cell(""))
    out = nbformat.reads(translate(nb).result.output, as_version=4)
    assert [c.source for c in out.cells] == [
        "import torch\n\ndef f(x):\n    return torch.sum(x, dim=(1, 2), keepdim=True)\n",
        "y = torch.cat([a, b], dim=1)",
        "# tail\nprint(y)\n",
        "",
    ]


# --- IPython syntax -------------------------------------------------------------------------------------
MAGICS = ("%matplotlib inline\n"
          "!pip install tensorflow\n"
          "files = !ls data\n"
          "tf.reduce_sum?\n"
          "%time z = tf.reduce_sum(x, 1)\n"
          "import tensorflow as tf\n"
          "s = ('%d'\n"
          "     % 3)\n"
          "for f in files:\n"
          "    !echo $f \\\n"
          "        --verbose\n"
          "y = tf.reduce_sum(x, 1)")


def test_magics_and_shell_lines_come_back_exactly_and_the_python_around_them_is_translated():
    nb = notebook(new_code_cell(MAGICS),
                  new_code_cell("%%time\ny = tf.reduce_sum(x, 1)"),
                  new_code_cell("%%bash\necho tf.reduce_sum\n"),
                  new_code_cell("%%writefile m.py\nimport tensorflow as tf\n"))
    t = translate(nb)
    out = nbformat.reads(t.result.output, as_version=4)
    assert [c.source for c in out.cells] == [
        "import torch\n" + MAGICS.replace("import tensorflow as tf\n", "").replace(
            "y = tf.reduce_sum(x, 1)", "y = torch.sum(x, dim=1)").replace(
            "%time z = torch.sum(x, dim=1)", "%time z = tf.reduce_sum(x, 1)"),
        "%%time\ny = torch.sum(x, dim=1)",
        "%%bash\necho tf.reduce_sum\n",  # another language: left alone
        "%%writefile m.py\nimport tensorflow as tf\n",
    ]
    # the line magic's argument is IPython's: kept as written, like every IPython line
    assert "%time z = tf.reduce_sum(x, 1)\n" in out.cells[0].source
    # a cell left as it is that mentions the source framework is never silent
    left = [(f.code, f.cell, f.line) for f in t.result.findings if f.severity.value == "error"]
    assert left == [("unsupported-construct", 4, 1)]
    assert any(f.message.startswith("a %%writefile cell is not Python fwport translates") for f in t.result.findings)


def test_masking_replaces_only_ipython_lines_at_logical_line_starts():
    masks: list[str] = []
    masked = mask_ipython(MAGICS, masks)
    assert masks == ["%matplotlib inline", "!pip install tensorflow", "files = !ls data", "tf.reduce_sum?",
                     "%time z = tf.reduce_sum(x, 1)", "    !echo $f \\", "        --verbose"]
    assert masked.splitlines()[6:8] == ["s = ('%d'", "     % 3)"]  # a continuation line starting with % is Python
    assert masked.splitlines()[9:11] == ["    __fwport_ipython__(5)", "    __fwport_ipython__(6)"]
    assert unmask_ipython(masked, masks) == (MAGICS, 7)
    assert mask_ipython("%%bash\nls\n", []) is None


# --- byte-identical when nothing changes --------------------------------------------------------------------
def test_a_notebook_with_nothing_to_translate_is_not_rewritten(tmp_path):
    nb = notebook(new_markdown_cell("uses tf.keras"), ran("!pip install tensorflow\nprint(1)", 1))
    # not nbformat's own layout (indent 2, keys unsorted): a rewrite would show
    text = json.dumps(nb, indent=2, ensure_ascii=True) + "\n"
    f = tmp_path / "src" / "plain.ipynb"
    f.parent.mkdir()
    f.write_text(text, encoding="utf-8")
    os.utime(f, (1_000_000, 1_000_000))
    r = invoke("tf2torch", str(tmp_path / "src"), "--in-place")
    assert r.exit_code == 0, r.output
    assert f.read_bytes() == text.encode() and f.stat().st_mtime == 1_000_000
    r = invoke("tf2torch", str(tmp_path / "src"), "-o", str(tmp_path / "out"))
    assert r.exit_code == 0
    assert (tmp_path / "out" / "plain.ipynb").read_bytes() == text.encode()
    assert "1 unchanged" in r.stderr


def test_translating_a_translated_notebook_changes_nothing():
    nb = notebook(new_code_cell("%matplotlib inline\nimport tensorflow as tf"), new_code_cell("y = tf.reduce_sum(x, 1)"))
    once = translate(nb).result.output
    again = translate_notebook(once, "nb.ipynb", Settings())
    assert again.result.status.value == "unchanged" and again.result.output == once


def test_a_notebook_in_another_language_is_left_alone():
    nb = notebook(new_code_cell("library(tensorflow)\ntf$reduce_sum(x)"), language="R")
    t = translate(nb)
    assert t.result.status.value == "unchanged" and t.result.findings == []


# --- findings ---------------------------------------------------------------------------------------------
def test_findings_name_the_cell_and_the_line_in_it(tmp_path):
    nb = notebook(new_markdown_cell("m"), new_code_cell("import tensorflow as tf"),
                  new_code_cell("x = 1\nd = tf.keras.layers.Dense(3, kernel_regularizer='l2')"))
    f = write_nb(tmp_path / "nb.ipynb", nb)
    r = invoke("tf2torch", str(f), "-o", str(tmp_path / "out.ipynb"), "--report", str(tmp_path / "r.json"))
    assert r.exit_code == 1
    assert (f"{f}:cell 3:2:5: error: unsupported-argument: kernel_regularizer='l2': torch layers have no "
            "regularizers: add the penalty to the loss (or weight_decay on the optimizer) [dense]") in r.stderr.splitlines()
    report = json.loads((tmp_path / "r.json").read_text())
    errors = [x for x in report["files"][0]["findings"] if x["severity"] == "error"]
    assert [(x["cell"], x["line"], x["column"], x["code"]) for x in errors] == [(3, 2, 5, "unsupported-argument")]
    assert "cell" not in [x for x in report["files"][0]["findings"] if x["code"] == "keras-version"][0]
    # the error's comment is in the cell, above its line
    assert sources(tmp_path / "out.ipynb")[2].splitlines()[1].startswith("# fwport: unsupported-argument:")


def test_an_unparsable_cell_is_reported_and_kept_and_the_others_are_translated():
    nb = notebook(new_code_cell("import tensorflow as tf"), new_code_cell("x = 1\ndef (:\n"),
                  new_code_cell("y = tf.reduce_sum(x, 1)"))
    t = translate(nb)
    out = nbformat.reads(t.result.output, as_version=4)
    assert [c.source for c in out.cells] == ["import torch", "x = 1\ndef (:\n", "y = torch.sum(x, dim=1)"]
    errors = [f.render() for f in t.result.findings if f.severity.value == "error"]
    assert errors == ["nb.ipynb:cell 2:2:5: error: parse-error: not valid Python 3: invalid syntax; the cell was left as it was"]


def test_an_indented_cell_runs_in_ipython_and_is_translated_with_its_indentation():
    # IPython removes the first line's indentation from every line (tensorflow/docs' data guide has
    # ` for x in windows...:` cells): such a cell was refused as a parse error
    nb = notebook(new_code_cell("import tensorflow as tf"),
                  new_code_cell("  for x in xs:\n    y = tf.reduce_sum(x, 1)\n\n  z = tf.keras.layers.Dense(3, kernel_regularizer='l2')"))
    t = translate(nb)
    out = nbformat.reads(t.result.output, as_version=4)
    assert out.cells[1].source.splitlines()[:2] == ["  for x in xs:", "    y = torch.sum(x, dim=1)"]
    errors = [f.render() for f in t.result.findings if f.severity.value == "error"]
    # located where the user sees it: line 4 of cell 2, column 7 with the cell's indentation
    assert [e.split(": error")[0] for e in errors] == ["nb.ipynb:cell 2:4:7"], errors
    assert not [f for f in t.result.findings if f.code == "parse-error"]
    # translated again: nothing changes
    again = translate_notebook(t.result.output, "nb.ipynb", Settings())
    assert again.result.output == t.result.output


# --- the command line ----------------------------------------------------------------------------------------
def test_check_and_diff_work_on_notebooks(tmp_path):
    nb = notebook(new_markdown_cell("m"), new_code_cell("import tensorflow as tf\ny = tf.reduce_sum(x, 1)"))
    f = write_nb(tmp_path / "nb.ipynb", nb)
    before = f.read_bytes()
    r = invoke("tf2torch", str(f), "--check")
    assert r.exit_code == 1 and f"would translate {f}" in r.stderr
    r = invoke("tf2torch", str(f), "--diff")
    assert r.exit_code == 0
    assert r.stdout == (f"--- {f} (cell 2)\n+++ {f} (cell 2)\n@@ -1,2 +1,2 @@\n"
                        "-import tensorflow as tf\n-y = tf.reduce_sum(x, 1)\n+import torch\n+y = torch.sum(x, dim=1)\n")
    assert f.read_bytes() == before
    r = invoke("tf2torch", str(f), "--in-place")
    assert r.exit_code == 0 and sources(f) == ["m", "import torch\ny = torch.sum(x, dim=1)"]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".fwport-tmp")]


def test_folders_are_walked_for_notebooks_without_jupyter_checkpoints(tmp_path):
    nb = notebook(new_code_cell("import tensorflow as tf\ny = tf.reduce_sum(x, 1)"))
    write_nb(tmp_path / "src" / "a.ipynb", nb)
    write_nb(tmp_path / "src" / ".ipynb_checkpoints" / "a-checkpoint.ipynb", nb)
    r = invoke("tf2torch", str(tmp_path / "src"), "-o", str(tmp_path / "out"))
    assert r.exit_code == 0
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*")) == ["a.ipynb"]
    assert sources(tmp_path / "out" / "a.ipynb") == ["import torch\ny = torch.sum(x, dim=1)"]


def test_malformed_notebooks_are_input_errors_and_the_run_goes_on(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a_bad_json.ipynb").write_text("{not json", encoding="utf-8")
    (src / "b_list.ipynb").write_text("[1, 2]", encoding="utf-8")
    (src / "c_no_cells.ipynb").write_text('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}}', encoding="utf-8")
    (src / "d.py").write_text("import tensorflow as tf\ny = tf.reduce_sum(x, 1)\n", encoding="utf-8")
    r = invoke("tf2torch", str(src), "-o", str(tmp_path / "out"))
    assert r.exit_code == 2
    errors = [line for line in r.stderr.splitlines() if ": error: " in line]
    assert [e.split(": error: ")[0] for e in errors] == [str(src / n) for n in ("a_bad_json.ipynb", "b_list.ipynb",
                                                                              "c_no_cells.ipynb")]
    assert all(": error: input-error: not a Jupyter notebook (" in e for e in errors)
    assert "Notebook does not appear to be JSON" in errors[0]
    assert (tmp_path / "out" / "d.py").read_text() == "import torch\ny = torch.sum(x, dim=1)\n"
    assert "1 translated, 0 unchanged, 0 need attention, 3 failed" in r.stderr


def test_both_pre_commit_hooks_are_given_notebooks():
    text = (ROOT / ".pre-commit-hooks.yaml").read_text()
    hooks = text.split("\n- id: ")[1:]
    assert [h.split("\n", 1)[0] for h in hooks] == ["fwport-tf2torch-check", "fwport-no-tensorflow"]
    for h in hooks:
        assert "\n  types_or: [python, jupyter]\n" in h + "\n" and "  types:" not in h


def test_residue_reports_imports_left_in_notebook_cells(tmp_path):
    nb = notebook(new_markdown_cell("import tensorflow"), new_code_cell("!pip install keras\nimport torch"),
                  new_code_cell("x = 1\nfrom tensorflow import keras"))
    write_nb(tmp_path / "src" / "a.ipynb", nb)
    write_nb(tmp_path / "src" / "b.ipynb", notebook(new_code_cell("%time import torch")))
    write_nb(tmp_path / "src" / "c.ipynb", notebook(new_code_cell("  import os\n  import tensorflow as tf")))
    r = invoke("residue", str(tmp_path / "src"))
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [
        f"{tmp_path / 'src' / 'a.ipynb'}:cell 3:2:1: error: residue: still uses the source framework: from tensorflow import ...",
        f"{tmp_path / 'src' / 'c.ipynb'}:cell 1:2:3: error: residue: still uses the source framework: import tensorflow",
        "fwport residue: 3 files checked, 2 still use TensorFlow/Keras"]


_PROBE = """
import runpy, sys
sys.argv = ["fwport"] + sys.argv[1:]
try:
    runpy.run_module("fwport", run_name="__main__")
except SystemExit as e:
    code = e.code
banned = sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "keras", "tf_keras", "torch", "jax", "numpy"))
sys.stderr.write("BANNED=" + ",".join(banned) + "\\n")
sys.exit(code)
"""


def test_translating_notebooks_imports_no_framework(tmp_path):
    import subprocess
    import sys

    write_nb(tmp_path / "src" / "a.ipynb", notebook(new_code_cell("import tensorflow as tf\ny = tf.reduce_sum(x, 1)")))
    (tmp_path / "src" / "requirements.txt").write_text("tensorflow\n")
    p = subprocess.run([sys.executable, "-c", _PROBE, "tf2torch", str(tmp_path / "src"), "-o", str(tmp_path / "out"), "-j", "1"],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr
    assert "BANNED=\n" in p.stderr
    assert sources(tmp_path / "out" / "a.ipynb") == ["import torch\ny = torch.sum(x, dim=1)"]
    assert (tmp_path / "out" / "requirements.txt").read_text() == "torch\n"


def test_max_size_applies_to_a_notebooks_code_not_to_its_outputs(tmp_path):
    big_output = new_output("display_data", data={"image/png": "iVBORw0KGgo" * 2000})  # 22 KB of image
    nb = notebook(new_code_cell("import tensorflow as tf\ny = tf.reduce_sum(x, 1)", outputs=[big_output]))
    f = write_nb(tmp_path / "small_code.ipynb", nb)
    assert f.stat().st_size > 20_000
    r = invoke("tf2torch", str(f), "--max-size", "1000", "-o", str(tmp_path / "out.ipynb"))
    assert r.exit_code == 0, r.output
    assert sources(tmp_path / "out.ipynb") == ["import torch\ny = torch.sum(x, dim=1)"]
    nb = notebook(new_code_cell("import tensorflow as tf\n" + "y = tf.reduce_sum(x, 1)\n" * 60))
    f = write_nb(tmp_path / "big_code.ipynb", nb)
    r = invoke("tf2torch", str(f), "--max-size", "1000", "--check")
    assert r.exit_code == 2
    assert (f"{f}: error: input-error: its code cells are 1464 bytes, over the 1000 bytes limit; set max_size (bytes) "
            "under [tool.fwport] in pyproject.toml to translate it") in r.stderr.splitlines()
