"""``-o DIR`` writes the whole repository: other files copied, links recreated, dependency files
updated (fwport/core/tree.py, fwport/core/deps.py)."""
from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from fwport.core import deps
from fwport.core.direction import get_direction
from fwport.core.cli import main
from fwport.core.finding import Severity
from fwport.core.result import FileResult, Status
from fwport.core.runner import Job, Outcome
from fwport.core.tree import Mirror

TF = "import tensorflow as tf\ny = tf.reduce_sum(x, 1)\n"
TORCH = "import torch\ny = torch.sum(x, dim=1)\n"

TF2TORCH = get_direction("tf2torch").requirements
TORCH_TARGETS = deps.Targets(["torch"], TF2TORCH)


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def write(path: Path, data: str | bytes, mode: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    if mode is not None:
        os.chmod(path, mode)
    return path


def listing(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() + ("@" if p.is_symlink() else "") for p in root.rglob("*")
                  if p.is_symlink() or p.is_file())


def findings(stderr: str, code: str) -> list[str]:
    return [line for line in stderr.splitlines() if f": {code}: " in line]


# --- every file ------------------------------------------------------------------------------------
def test_every_other_file_is_copied_byte_for_byte_with_its_mode_and_times(tmp_path):
    src = tmp_path / "repo"
    write(src / "model.py", TF)
    blob = bytes(range(256)) * 3
    write(src / "data" / "weights.bin", blob, 0o640)
    write(src / "README.md", "# Model\n\nuses tensorflow\n")
    write(src / "scripts" / "train.sh", "#!/bin/sh\npython model.py\n", 0o755)
    write(src / "conf" / "settings.yaml", "lr: 0.1\r\n")
    os.utime(src / "data" / "weights.bin", (1_000_000, 1_000_000))
    # never copied: version control, virtual environments, caches, build outputs, checkpoints
    write(src / ".git" / "config", "[core]\n")
    write(src / "env" / "pyvenv.cfg", "home = /usr\n")
    write(src / "env" / "lib" / "x.txt", "x")
    write(src / "__pycache__" / "model.cpython-311.pyc", b"\0\1")
    write(src / "node_modules" / "a.js", "")
    write(src / "build" / "lib" / "model.py", TF)
    write(src / ".ipynb_checkpoints" / "a.txt", "")

    out = tmp_path / "out"
    r = invoke("tf2torch", str(src), "-o", str(out))
    assert r.exit_code == 0, r.output
    assert listing(out) == ["README.md", "conf/settings.yaml", "data/weights.bin", "model.py", "scripts/train.sh"]
    assert (out / "model.py").read_text() == TORCH
    assert (out / "data" / "weights.bin").read_bytes() == blob
    assert (out / "conf" / "settings.yaml").read_bytes() == b"lr: 0.1\r\n"
    assert (out / "README.md").read_bytes() == (src / "README.md").read_bytes()
    assert (out / "data" / "weights.bin").stat().st_mode & 0o777 == 0o640
    assert (out / "scripts" / "train.sh").stat().st_mode & 0o777 == 0o755
    assert (out / "data" / "weights.bin").stat().st_mtime == 1_000_000
    assert r.stderr.splitlines()[-1] == ("fwport: 1 file: 1 translated, 0 unchanged, 0 need attention, 0 failed; "
                                         "4 other files copied; findings: 0 errors, 0 warnings, 1 info")
    assert not [p for p in out.rglob("*") if p.name.endswith(".fwport-tmp")]


def test_symlinks_are_recreated_as_links_with_the_same_target(tmp_path):
    src = tmp_path / "repo"
    write(src / "data" / "v2.csv", "a,b\n1,2\n")
    os.symlink("data/v2.csv", src / "latest.csv")  # a file link inside the tree
    os.symlink("data", src / "current")  # a folder link: not followed, recreated
    os.symlink("missing.txt", src / "dangling.txt")
    os.symlink(str(tmp_path / "elsewhere"), src / "abs")
    out = tmp_path / "out"
    r = invoke("tf2torch", str(src), "-o", str(out))
    assert r.exit_code == 0, r.output
    assert listing(out) == ["abs@", "current@", "dangling.txt@", "data/v2.csv", "latest.csv@"]
    assert {n: os.readlink(out / n) for n in ("latest.csv", "current", "dangling.txt", "abs")} == {
        "latest.csv": "data/v2.csv", "current": "data", "dangling.txt": "missing.txt", "abs": str(tmp_path / "elsewhere")}
    assert (out / "latest.csv").read_text() == "a,b\n1,2\n"  # the mirrored file, through the relative link
    assert os.path.realpath(out / "latest.csv") == str((out / "data" / "v2.csv").resolve())
    assert "5 other files copied" in r.stderr
    # a second run over the same output replaces the links (no error, no temporary files)
    r = invoke("tf2torch", str(src), "-o", str(out))
    assert r.exit_code == 0 and listing(out) == ["abs@", "current@", "dangling.txt@", "data/v2.csv", "latest.csv@"]


def test_an_output_folder_inside_the_input_tree_is_never_walked_into(tmp_path):
    src = tmp_path / "repo"
    write(src / "m.py", TF)
    write(src / "notes.txt", "n\n")
    write(src / "pkg" / "k.py", TF)
    for _ in range(3):  # before the fix, each run translated the last run's output into out/out/...
        r = invoke("tf2torch", str(src), "-o", str(src / "pkg" / "out"))
        assert r.exit_code == 0, r.output
        assert r.stderr.splitlines()[-1].startswith("fwport: 2 files: 2 translated, 0 unchanged, 0 need attention, "
                                                    "0 failed; 1 other file copied;")
    assert listing(src / "pkg" / "out") == ["m.py", "notes.txt", "pkg/k.py"]


def test_excluded_paths_are_not_copied(tmp_path):
    src = tmp_path / "repo"
    write(src / "m.py", TF)
    write(src / "datasets" / "big.csv", "x\n")
    write(src / "a.log", "x\n")
    r = invoke("tf2torch", str(src), "-o", str(tmp_path / "out"), "--exclude", "datasets", "--exclude", "*.log")
    assert r.exit_code == 0
    assert listing(tmp_path / "out") == ["m.py"]


def test_a_file_that_cannot_be_copied_is_an_output_error_and_the_rest_is_copied(tmp_path):
    src = tmp_path / "repo"
    write(src / "data" / "x.bin", b"\1\2")
    write(src / "z.txt", "z\n")
    out = tmp_path / "out"
    write(out / "data", "a file where a folder must go\n")
    r = invoke("tf2torch", str(src), "-o", str(out))
    assert r.exit_code == 2
    errs = findings(r.stderr, "output-error")
    assert len(errs) == 1 and errs[0].startswith(f"{src / 'data' / 'x.bin'}: error: output-error: cannot copy to {out / 'data' / 'x.bin'}: ")
    assert (out / "z.txt").read_text() == "z\n"
    assert "0 failed" not in r.stderr and "1 failed; 1 other file copied" in r.stderr


def test_check_diff_and_in_place_copy_nothing_and_leave_dependency_files_alone(tmp_path):
    src = tmp_path / "repo"
    write(src / "m.py", TF)
    req = write(src / "requirements.txt", "tensorflow\n")
    os.utime(req, (1_000_000, 1_000_000))
    before = sorted(p.name for p in tmp_path.iterdir())
    for args in (["--check"], ["--diff"]):
        r = invoke("tf2torch", str(src), *args)
        assert r.exit_code in (0, 1)
        assert "requirements.txt" not in r.stdout + r.stderr and "copied" not in r.stderr
    r = invoke("tf2torch", str(src), "--in-place")
    assert r.exit_code == 0 and (src / "m.py").read_text() == TORCH
    assert req.read_text() == "tensorflow\n" and req.stat().st_mtime == 1_000_000
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert listing(src) == ["m.py", "requirements.txt"]


# --- dependency files --------------------------------------------------------------------------------
REQUIREMENTS = """\
# training
numpy>=1.26
tensorflow[and-cuda]>=2.15  # the GPU build
tf-keras==2.15.0 ; python_version < "3.12"
-r requirements-base.txt
keras>=3 \\
    --hash=sha256:0123
pandas
"""
REQUIREMENTS_OUT = """\
# training
numpy>=1.26
torch  # the GPU build
-r requirements-base.txt
pandas
"""


def test_requirements_get_torch_instead_of_tensorflow_and_keep_everything_else(tmp_path):
    src = tmp_path / "repo"
    write(src / "m.py", TF)
    write(src / "requirements.txt", REQUIREMENTS)
    write(src / "requirements-dev.txt", "pytest\ntorch==2.3  # already here\ntensorflow-cpu\n")
    write(src / "requirements" / "docs.txt", "sphinx\n")
    out = tmp_path / "out"
    r = invoke("tf2torch", str(src), "-o", str(out), "--report", str(tmp_path / "r.json"))
    assert r.exit_code == 0, r.output
    assert (out / "requirements.txt").read_text() == REQUIREMENTS_OUT
    assert (out / "requirements-dev.txt").read_text() == "pytest\ntorch==2.3  # already here\n"
    assert (out / "requirements" / "docs.txt").read_text() == "sphinx\n"
    req, dev = src / "requirements.txt", src / "requirements-dev.txt"
    assert findings(r.stderr, "dependency-updated") == [  # in the walk's order: "-" sorts before "."
        f"{dev}:3:1: info: dependency-updated: tensorflow-cpu removed (torch is already required)",
        f"{req}:3:1: info: dependency-updated: tensorflow[and-cuda]>=2.15 → torch",
        f'{req}:4:1: info: dependency-updated: tf-keras==2.15.0 ; python_version < "3.12" removed (torch is already required)',
        f"{req}:6:1: info: dependency-updated: keras>=3 removed (torch is already required)",
    ]
    assert r.stderr.splitlines()[-1] == ("fwport: 3 files: 3 translated, 0 unchanged, 0 need attention, 0 failed; "
                                         "1 other file copied; findings: 0 errors, 0 warnings, 5 info")
    report = json.loads((tmp_path / "r.json").read_text())
    entry = [f for f in report["files"] if f["path"] == str(req)][0]
    assert entry["status"] == "converted" and entry["output_path"] == str(out / "requirements.txt")
    assert [f["line"] for f in entry["findings"]] == [3, 4, 6]
    assert report["summary"]["copied"] == 1 and report["summary"]["translated"] == 3


def test_pyproject_setup_py_setup_cfg_and_environment_yml(tmp_path):
    src = tmp_path / "repo"
    write(src / "pyproject.toml", """\
[project]
name = "demo"
dependencies = [
    "numpy",
    "tensorflow>=2.15",  # core
    "keras>=3",
]

[project.optional-dependencies]
mac = ["tensorflow-macos; sys_platform == 'darwin'", "rich"]

[tool.other]
dependencies = ["tensorflow"]
""")
    write(src / "setup.py", """\
from setuptools import setup

REQUIRED = ["numpy", 'tensorflow>=2.0']

setup(name="demo", keywords=["keras"], install_requires=REQUIRED,
      extras_require={"tf": ["tf-keras"]})
""")
    write(src / "setup.cfg", """\
[metadata]
name = demo

[options]
install_requires =
    numpy
    tensorflow-gpu>=2  # cuda
python_requires = >=3.9

[options.extras_require]
legacy = tf-keras
""")
    write(src / "environment.yml", """\
name: demo
channels:
  - conda-forge
dependencies:
  - python=3.11
  - conda-forge::tensorflow=2.15  # conda build
  - pip
  - pip:
    - keras>=3
    - rich
""")
    out = tmp_path / "out"
    r = invoke("tf2torch", str(src), "-o", str(out))
    assert r.exit_code == 0, r.output  # the keywords entry of setup.py is left, with a warning (not an error)
    assert (out / "pyproject.toml").read_text() == """\
[project]
name = "demo"
dependencies = [
    "numpy",
    "torch",  # core
]

[project.optional-dependencies]
mac = ["rich"]

[tool.other]
dependencies = ["tensorflow"]
"""
    assert (out / "setup.py").read_text() == """\
from setuptools import setup

REQUIRED = ["numpy", 'torch']

setup(name="demo", keywords=["keras"], install_requires=REQUIRED,
      extras_require={"tf": []})
"""
    assert (out / "setup.cfg").read_text() == """\
[metadata]
name = demo

[options]
install_requires =
    numpy
    torch  # cuda
python_requires = >=3.9

[options.extras_require]
legacy =
"""
    assert (out / "environment.yml").read_text() == """\
name: demo
channels:
  - conda-forge
dependencies:
  - python=3.11
  - conda-forge::pytorch  # conda build
  - pip
  - pip:
    - rich
"""
    setup_py = src / "setup.py"
    assert findings(r.stderr, "dependency-kept") == [
        f"{setup_py}:5:1: warning: dependency-kept: 'keras' is still named here, in a form fwport does not rewrite; "
        "replace it with torch by hand if it is a requirement"]
    assert len(findings(r.stderr, "dependency-updated")) == 9
    assert [line.split(": ", 1)[1] for line in r.stderr.splitlines() if line.startswith(f"{setup_py}:")] == [
        "info: dependency-updated: tensorflow>=2.0 → torch", "warning: dependency-kept: 'keras' is still named here, "
        "in a form fwport does not rewrite; replace it with torch by hand if it is a requirement",
        "info: dependency-updated: tf-keras removed (torch is already required)"]
    assert r.stderr.splitlines()[-1] == ("fwport: 4 files: 4 translated, 0 unchanged, 0 need attention, 0 failed; "
                                         "findings: 0 errors, 1 warning, 9 info")


def test_what_the_translated_code_imports_beyond_torch_is_required_too(tmp_path):
    src = tmp_path / "repo"
    write(src / "requirements.txt", "tensorflow>=2\nnumpy\n")
    mirror = Mirror([str(src)], str(tmp_path / "out"))
    translated = Outcome(FileResult(str(src / "m.py"), Status.CONVERTED), Job(str(src / "m.py"), str(tmp_path / "out" / "m.py")),
                         extra={"imports": ["torch", "torchvision"]})
    results = list(mirror.wrap([translated]))
    assert [o.result.path for o in results] == [str(src / "m.py"), str(src / "requirements.txt")]
    assert (tmp_path / "out" / "requirements.txt").read_text() == "torch\ntorchvision\nnumpy\n"
    assert [(f.severity, f.message) for f in results[1].result.findings] == [
        (Severity.INFO, "tensorflow>=2 → torch, torchvision")]


def test_added_imports_are_read_from_the_translation_not_the_source():
    before = "import numpy as np\nimport tensorflow as tf\n"
    after = "import numpy as np\nimport math\nimport torch\nfrom torch import nn\nimport torchvision.models as tvm, PIL.Image\n"
    assert deps.added_imports(before, after, ("tensorflow", "keras", "tf_keras")) == ["PIL", "torch", "torchvision"]
    assert deps.target_requirements(["PIL", "torch", "torchvision"], TF2TORCH) == ["torch", "pillow", "torchvision"]


def test_markers_are_kept_and_no_target_is_required_twice():
    text = ('tensorflow; sys_platform != "darwin"\n'
            'tensorflow-macos; sys_platform == "darwin"\n'
            'tensorflow-metal; sys_platform == "darwin"\n')
    up = deps.update_requirements_txt(text, TORCH_TARGETS)
    assert up.text == 'torch; sys_platform != "darwin"\ntorch; sys_platform == "darwin"\n'
    assert [(c.line, c.new) for c in up.changes] == [(1, ['torch; sys_platform != "darwin"']),
                                                     (2, ['torch; sys_platform == "darwin"']), (3, [])]


def test_poetry_tables_are_not_rewritten_but_reported():
    text = '[tool.poetry.dependencies]\npython = "^3.10"\ntensorflow = "^2.15"\n'
    up = deps.update_pyproject(text, TORCH_TARGETS)
    assert up.text == text and up.changes == []
    assert up.notes == [(3, "[tool.poetry.dependencies] tensorflow: Poetry tables are not rewritten; "
                            "replace it with torch by hand")]


def test_a_whole_list_of_source_requirements_can_empty():
    up = deps.update_pyproject('[project]\ndependencies = ["torch"]\n[project.optional-dependencies]\n'
                               'tf = ["tensorflow", "keras"]\n', TORCH_TARGETS)
    assert up.text == '[project]\ndependencies = ["torch"]\n[project.optional-dependencies]\ntf = []\n'


def test_which_files_are_dependency_files():
    assert [deps.kind_of(p) for p in ("requirements.txt", "requirements-gpu.txt", "requirements/base.txt", "docs/requirements.txt",
                                      "pyproject.toml", "sub/setup.py", "setup.cfg", "environment.yml", "environment.yaml",
                                      "notes.txt", "requirements.in", "setup.pyc")] == [
        "requirements", "requirements", "requirements", "requirements", "pyproject", "setup.py", "setup.cfg",
        "environment", "environment", None, None, None]
