"""fwport verify on models as real scripts hold them (the dev set's patterns, issue 10):

- a script whose top level cannot run (a module not installed, a download, argparse): verify loads its
  definitions only, stubs the failed imports the model does not reach, and says so; an import the model
  needs is an error naming the file and line;
- ``--model`` as a call expression with positional, non-JSON arguments (``Net(Block, [2, 2])``);
- a builder function returning a model with BatchNorm (``def ResNet18(): return ResNet(...)``): the
  translation takes ``*, key`` and the verifier gives the model its eqx.nn.State.

The loader tests are pure Python; the verify tests run PyTorch and JAX in subprocesses.
"""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.verify._worker_io import UserError, load_definitions, load_source, model_call
from helpers import needs

needs_frameworks = needs("torch", "jax", "equinox")

# a script: a dataset library that is not installed, used only by main() and the top-level code
SCRIPT = '''\
import torch
import torch.nn as nn
import not_installed_datasets_xyz as datasets

hidden = 6
shape = (3, hidden)


class Net(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc1 = nn.Linear(n_in, hidden)
        self.fc2 = nn.Linear(hidden, n_out)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def main():
    data = datasets.MNIST("../data", download=True)
    return data


loader = datasets.loader(batch_size=64)
model = Net(4, 2)
for epoch in range(3):
    print(epoch)
'''

# a builder returning a model with BatchNorm, and a block class given as a positional argument
BUILDER = '''\
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x))) + x


class Net(nn.Module):
    def __init__(self, block, sizes):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        layers = []
        for _ in sizes:
            layers.append(block(4))
        self.blocks = nn.Sequential(*layers)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        out = self.blocks(self.stem(x))
        return self.fc(out.view(out.size(0), -1))


def Net2():
    return Net(Block, [2, 2])


def test():
    net = Net2()
    print(net)
'''


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


# --- loading definitions only (no framework) ------------------------------------------------------------

def test_definitions_only_skips_the_script_and_stubs_an_import_only_the_script_uses(tmp_path):
    src = _write(tmp_path, "s.py", textwrap.dedent('''\
        import math
        import not_installed_xyz as nx
        k = 3
        shape = (k, 2 * k)
        data = nx.load()
        def f(x):
            return math.sqrt(x) * k
        def main():
            return nx.train()
        print("training")
        '''))
    ns, notes = load_definitions(str(src), "m", {"f"})
    assert ns["f"](4.0) == 6.0 and ns["shape"] == (3, 6)
    assert "data" not in ns, "a call at the top level is not run"
    assert any("line 2" in n and "nx stubbed" in n for n in notes), notes
    assert any("not run (lines 5, 10)" in n for n in notes), notes
    with pytest.raises(ImportError, match="stand-in"):
        ns["nx"].load()


def test_definitions_only_keeps_the_argparse_setup_with_an_empty_command_line(tmp_path, monkeypatch):
    # a GAN script's classes read the module-level namespace `opt`; the data download is not run
    src = _write(tmp_path, "s.py", textwrap.dedent('''\
        import argparse
        import not_installed_xyz as nx
        parser = argparse.ArgumentParser()
        group = parser.add_argument_group("model")
        parser.add_argument("--latent_dim", type=int, default=100)
        group.add_argument("--channels", type=int, default=1)
        opt = parser.parse_args()
        print(opt)
        shape = (opt.channels, opt.latent_dim)
        data = nx.download()
        class G:
            def __init__(self):
                self.n = opt.latent_dim
        '''))
    monkeypatch.setattr(sys, "argv", ["pytest", "--unrelated-flag"])  # not the script's command line
    ns, notes = load_definitions(str(src), "m", {"G"})
    assert ns["G"]().n == 100 and ns["shape"] == (1, 100)
    assert sys.argv == ["pytest", "--unrelated-flag"]
    assert any("argparse setup run with an empty command line (lines 3-7)" in n for n in notes), notes
    assert any("not run (lines 8, 10)" in n for n in notes), notes
    # a required argument cannot be parsed from an empty command line: said, and the namespace is missing
    req = _write(tmp_path, "r.py", "import argparse\np = argparse.ArgumentParser()\np.add_argument('--data', "
                                   "required=True)\nargs = p.parse_args()\n")
    ns, notes = load_definitions(str(req), "m", None)
    assert "args" not in ns and any("line 4: argparse setup failed" in n and "SystemExit" in n for n in notes), notes


def test_an_import_the_model_needs_is_an_error_naming_file_line_and_definition(tmp_path):
    src = _write(tmp_path, "s.py", "import os\nimport not_installed_xyz as nx\n\n\nclass M:\n"
                                   "    def __init__(self):\n        self.w = nx.zeros(3)\n")
    with pytest.raises(UserError) as e:
        load_definitions(str(src), "m", {"M"})
    assert f"{src}:2:" in str(e.value) and "nx (M, line 5)" in str(e.value)
    with pytest.raises(UserError, match=r"s\.py:2: ModuleNotFoundError"):
        load_source(str(src), "m", "defs", "M()")


def test_a_definition_the_model_does_not_reach_may_fail(tmp_path):
    src = _write(tmp_path, "s.py", "def magic(f):\n    raise NameError('no get_ipython')\n\n\n@magic\ndef cell():\n"
                                   "    pass\n\n\nclass M:\n    pass\n")
    ns, notes = load_definitions(str(src), "m", {"M"})
    assert "M" in ns and "cell" not in ns
    assert any(n.startswith("line 6: NameError") and "cell left undefined" in n for n in notes), notes
    with pytest.raises(UserError, match=r"s\.py:2: NameError: no get_ipython \(defining cell\)"):
        load_definitions(str(src), "m", {"cell"})


def test_a_model_built_by_top_level_statements_runs_them_and_only_them(tmp_path):
    """`inputs = ...; x = f(x); model = Seq(); model.add(...)` among data code: the backward slice of the
    model's name runs (model.add counts as building it), the data loading and model.fit do not."""
    src = _write(tmp_path, "s.py", textwrap.dedent('''\
        import json
        class Seq:
            def __init__(self, *layers):
                self.layers = list(layers)
            def add(self, layer):
                self.layers.append(layer)
            def fit(self, data):
                raise RuntimeError("training")
        data = json.load(open("/nonexistent/data.json"))
        width = len(data)
        x = 3
        x = x * 2
        model = Seq(x)
        model.add("relu")
        model.fit(data)
        other = Seq(width)
        '''))
    ns, notes = load_definitions(str(src), "m", {"model"})
    assert ns["model"].layers == [6, "relu"]
    assert "data" not in ns and "other" not in ns
    assert any("2 top-level statements that build model run (lines 13, 14)" in n for n in notes), notes
    bad = _write(tmp_path, "bad.py", src.read_text().replace("model = Seq(x)", "model = Seq(x, width)"))
    with pytest.raises(UserError, match=r"bad\.py:9: FileNotFoundError.*a top-level statement that builds model"):
        load_definitions(str(bad), "m", {"model"})


def test_define_sets_a_global_the_script_computes_from_its_data(tmp_path):
    """--define n_classes=2: a builder reading a global the script computes from data it cannot load here."""
    from click.testing import CliRunner
    from fwport.verify.cli import _defines
    src = _write(tmp_path, "s.py", "import json\ny = json.load(open('/nonexistent.json'))\nn_classes = len(set(y))\n\n\n"
                                   "def build(width):\n    return [width] * n_classes\n")
    ns, _ = load_definitions(str(src), "m", {"build"}, {"n_classes": 3})
    assert ns["build"](4) == [4, 4, 4]
    ns, _ = load_source(str(src), "m", "auto", "build", {"n_classes": 2})
    assert ns["build"](1) == [1, 1]
    assert _defines(["n_classes=2", "name=relu", "sizes=[1, 2]"]) == {"n_classes": 2, "name": "relu", "sizes": [1, 2]}
    import click
    with pytest.raises(click.BadParameter, match="NAME=VALUE"):
        _defines(["2=n"])


def test_auto_loads_the_whole_file_when_it_runs_and_its_definitions_when_it_fails(tmp_path):
    ok = _write(tmp_path, "ok.py", "x = [1]\nx.append(2)\n")
    ns, note = load_source(str(ok), "m", "auto")
    assert ns["x"] == [1, 2] and note == ""
    bad = _write(tmp_path, "bad.py", "import sys\ny = 5\ndef f():\n    return y\nsys.exit('argparse says no')\n")
    ns, note = load_source(str(bad), "m", "auto", "f")
    assert ns["f"]() == 5
    assert note.startswith(f"definitions only (the whole file stops at {bad}:5: SystemExit")
    with pytest.raises(UserError, match=r"bad\.py:5: SystemExit"):
        load_source(str(bad), "m", "whole")


def test_model_call_resolves_names_in_the_file():
    class Block:
        pass
    callee, pos, kw = model_call({"Net": dict, "Block": Block, "n": 2}, "Net(Block, [n, 2], depth=n + 1)")
    assert callee is dict and pos == [Block, [2, 2]] and kw == {"depth": 3}
    assert model_call({}, "Net") is None
    with pytest.raises(UserError, match="Blok"):
        model_call({"Net": dict}, "Net(Blok)")


# --- the translation of a builder function ---------------------------------------------------------------

def test_a_builder_returning_a_model_of_the_file_takes_a_key_and_hands_it_on(tmp_path):
    r = translate_source(BUILDER, "b.py", "torch2jax")
    assert not [f for f in r.findings if f.severity == Severity.ERROR], r.findings
    assert "def Net2(*, key):\n    return Net(Block, [2, 2], key=key)" in r.output
    assert "net, state = eqx.nn.make_with_state(Net2)(key=jax.random.key(0))" in r.output
    assert not [f for f in r.findings if f.code == "key-added" and f.line == 31], "the builder's own call has its key"


# --- fwport verify on these patterns ---------------------------------------------------------------------

def _verify(session, tmp_path: Path, text: str, model: str, inputs: list[str], **kw) -> dict:
    from fwport.verify.run import Options, verify
    orig = _write(tmp_path, "model.py", text)
    out = translate_source(text, str(orig), "torch2jax").output
    trans = _write(tmp_path, "translated.py", out)
    opts = Options(str(orig), str(trans), model, inputs=inputs, device="cpu", direction="torch2jax", **kw)
    return verify(opts, session)


@needs_frameworks
def test_a_script_that_cannot_run_is_verified_from_its_definitions(tmp_path, session):
    cert = _verify(session, tmp_path, SCRIPT, "Net(4, 2)", ["float32[3,4]"])
    assert cert["verdict"] == "pass", cert
    loaded = cert["loaded"]
    assert set(loaded) == {"original", "translated"}
    assert "definitions only (the whole file stops at" in loaded["original"] and ":3: ModuleNotFoundError" in loaded["original"]
    assert "datasets stubbed" in loaded["original"]


@needs_frameworks
def test_a_builder_with_batchnorm_and_a_call_expression_verify(tmp_path, session):
    cert = _verify(session, tmp_path, BUILDER, "Net2", ["float32[2,3,6,6]"])
    assert cert["verdict"] == "pass", cert.get("problems") or cert
    assert any(e["name"].endswith("bn.weight") for e in cert["results"]["gradients"])
    cert = _verify(session, tmp_path, BUILDER, "Net(Block, [1, 2, 3])", ["float32[2,3,6,6]"])
    assert cert["verdict"] == "pass", cert.get("problems") or cert
    assert any(e["name"].startswith("blocks.2.") for e in cert["results"]["gradients"])


@needs_frameworks
def test_a_needed_import_that_fails_is_a_usage_error_with_the_line(tmp_path, session):
    from fwport.verify.run import VerifyError
    text = SCRIPT.replace("self.fc1 = nn.Linear(n_in, hidden)", "self.fc1 = datasets.Linear(n_in, hidden)")
    with pytest.raises(VerifyError) as e:
        _verify(session, tmp_path, text, "Net(4, 2)", ["float32[3,4]"])
    assert e.value.kind == "user" and "model.py:3: ModuleNotFoundError" in str(e.value)
    assert "the model's definitions need datasets (Net, line 9)" in str(e.value)


@needs_frameworks
def test_an_exception_in_the_model_names_the_line_of_the_file(tmp_path, session):
    from fwport.verify.run import VerifyError
    text = SCRIPT.replace("return self.fc2(torch.relu(self.fc1(x)))", "return self.fc2(torch.relu(self.fc1(x))) + undefined_name")
    with pytest.raises(VerifyError) as e:
        _verify(session, tmp_path, text, "Net(4, 2)", ["float32[3,4]"])
    assert "NameError" in str(e.value) and f"(at {tmp_path / 'model.py'}:16)" in str(e.value)


def test_a_translation_that_cannot_be_imported_where_its_original_can_fails_the_verdict():
    """The verifier falls back to a file's definitions when the whole file stops (a script's data download): that
    is fine for both sides alike, but a translated file that stops where its original runs is a defect of the
    translation, and the certificate fails on it."""
    from fwport.verify.certificate import loading_results, render
    stops = "definitions only (the whole file stops at /t/m.py:87: NameError: name 'Enc' is not defined); 1 top-level"
    failed = loading_results({"translated": stops})
    assert len(failed) == 1 and not failed[0]["ok"]
    assert failed[0]["detail"] == ("importing it stops at /t/m.py:87: NameError: name 'Enc' is not defined, "
                                   "where the original file runs as a whole")
    # both sides stop (the same script), or only the original does: no failure
    assert loading_results({"original": "definitions only (the whole file stops at /s/m.py:3: ...)",
                            "translated": stops}) == []
    assert loading_results({"original": "definitions only (--load defs)"}) == []
    assert loading_results({}) == [] and loading_results(None) == []
    text = render({"direction": "torch2jax", "results": {"loading": failed, "outputs": []}, "verdict": "mismatch"})
    assert "FAIL translated file: importing it stops at /t/m.py:87" in text
