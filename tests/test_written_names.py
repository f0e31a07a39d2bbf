"""The helpers a translation writes into its output against the file's own names (fwport/core/written.py): a file
that defines, imports or assigns a helper's name keeps its name, and the helper is written under another one
(``PReLU_``), so that each call computes what it computed in the source. Both directions, run numerically."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import libcst as cst
import numpy as np

from fwport.core import written
from fwport.core.names import SourceNames
from fwport.core.pipeline import translate_source
from helpers import error_findings, needs, t2j
from runners import keras_and_torch, torch_and_jax

# --- torch2jax ---------------------------------------------------------------------------------------------

TORCH = '''
import torch
from torch import nn
from mylib import Upsample


class PReLU(nn.Module):
    """The file's own PReLU: slope 0, then + 1 (not nn.PReLU's 0.25)."""

    def forward(self, x):
        return torch.where(x > 0, x, 0.0 * x) + 1.0


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.PReLU(), PReLU())
        self.up = nn.Upsample(scale_factor=2)
        self.mine = Upsample(3.0)

    def forward(self, x):
        return self.mine(self.up(self.body(x)))
'''

#: mylib's Upsample: the file's import, not torch's (a plain callable both sides can run)
MYLIB = '''
class Upsample:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return x * self.k
'''

BODY = '''
x = np.linspace(-2.0, 2.0, 6).reshape(2, 1, 3)
if side == "torch":
    y = ns["Net"]()(torch.tensor(x)).detach().numpy()
else:
    y = np.asarray(jax.vmap(ns["Net"]())(jnp.asarray(x)))
np.save(OUT, y)
'''


def _expected(x):
    z = np.where(x >= 0, x, 0.25 * x)  # nn.PReLU (init 0.25)
    z = np.where(z > 0, z, 0.0) + 1.0  # the file's PReLU
    return np.repeat(z, 2, axis=-1) * 3.0  # nn.Upsample(scale_factor=2), then mylib's Upsample(3.0)


def test_torch2jax_helpers_keep_clear_of_the_files_names():
    r = t2j(TORCH)
    assert not error_findings(r), r.findings
    out = r.output
    assert "class PReLU_(eqx.Module):" in out and "class Upsample_(eqx.Module):" in out
    assert "class PReLU(eqx.Module):" in out and "from mylib import Upsample" in out  # the file's names kept
    assert "eqx.nn.Sequential([PReLU_(), PReLU()])" in out
    assert "self.up = Upsample_(scale_factor=2)" in out and "self.mine = Upsample(3.0)" in out
    assert t2j(TORCH).output == out  # the same names on every run


@needs("torch", "jax", "equinox")
def test_torch2jax_both_classes_compute_what_they_did(tmp_path):
    (tmp_path / "mylib.py").write_text(MYLIB)
    source = textwrap.dedent(TORCH).lstrip("\n")
    ours, theirs = torch_and_jax(tmp_path, source, t2j(TORCH).output, BODY)
    x = np.linspace(-2.0, 2.0, 6).reshape(2, 1, 3)
    np.testing.assert_allclose(ours, _expected(x), rtol=1e-12)
    np.testing.assert_allclose(theirs, ours, rtol=1e-12)


LATER = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.PReLU()

    def forward(self, x):
        return PReLU(self.act(x))


def double(x):
    return 2.0 * x


PReLU = double
'''


@needs("torch", "jax", "equinox")
def test_torch2jax_a_later_assignment_of_the_name(tmp_path):
    r = t2j(LATER)
    assert not error_findings(r), r.findings
    assert "self.act = PReLU_()" in r.output and "return PReLU(self.act(x))" in r.output
    assert r.output.rstrip().endswith("PReLU = double")
    ours, theirs = torch_and_jax(tmp_path, textwrap.dedent(LATER).lstrip("\n"), r.output, BODY.replace(
        ".reshape(2, 1, 3)", ".reshape(2, 3)"))
    x = np.linspace(-2.0, 2.0, 6).reshape(2, 3)
    np.testing.assert_allclose(ours, 2.0 * np.where(x >= 0, x, 0.25 * x), rtol=1e-12)
    np.testing.assert_allclose(theirs, ours, rtol=1e-12)


def test_torch2jax_a_file_without_the_name_keeps_the_helpers_own():
    r = t2j('''
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.act = nn.PReLU()

            def forward(self, x):
                return self.act(x)
        ''')
    assert "class PReLU(eqx.Module):" in r.output and "self.act = PReLU()" in r.output and "PReLU_" not in r.output


def test_torch2jax_a_data_helper_and_its_dependency():
    """NumpyLoader tests isinstance(dataset, ArrayDataset): a file's own ArrayDataset leaves the helper's renamed
    in NumpyLoader's text too."""
    r = t2j('''
        import torch
        from torch.utils.data import DataLoader, TensorDataset


        class ArrayDataset:
            pass


        def loader(x, y):
            return DataLoader(TensorDataset(x, y), batch_size=4)
        ''')
    out = r.output
    assert "class ArrayDataset_:" in out and "class ArrayDataset:" in out
    assert "isinstance(self.dataset, ArrayDataset_)" in out
    assert "return NumpyLoader(ArrayDataset_(x, y), batch_size=4)" in out


# --- tf2torch ------------------------------------------------------------------------------------------------

KERAS = '''
import keras
from keras import layers


class Rescaling(layers.Layer):
    """The file's own Rescaling: x * 2 + 1."""

    def call(self, x):
        return x * 2.0 + 1.0


def build():
    inputs = keras.Input(shape=(4,))
    x = layers.Rescaling(0.5, offset=0.25)(inputs)
    x = Rescaling()(x)
    return keras.Model(inputs, x)
'''

DRIVER = '''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
side = sys.argv[2]
import model
x = np.linspace(-1.0, 1.0, 8).reshape(2, 4).astype("float32")
m = model.build()
if side == "keras":
    y = np.asarray(m(x))
else:
    import torch
    y = m(torch.tensor(x)).detach().numpy()
print("RESULT", json.dumps(y.tolist()))
'''


def _t2t(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", "tf2torch")


def test_tf2torch_helpers_keep_clear_of_the_files_names():
    r = _t2t(KERAS)
    assert not error_findings(r), r.findings
    out = r.output
    assert "class Rescaling_(nn.Module):" in out and "class Rescaling(nn.Module):" in out
    assert "Rescaling_(0.5, offset=0.25)" in out and "Rescaling()" in out
    assert _t2t(KERAS).output == out


@needs("torch", "tensorflow", "keras")
def test_tf2torch_both_classes_compute_what_they_did(tmp_path):
    r = _t2t(KERAS)
    keras_out, torch_out = keras_and_torch(tmp_path, textwrap.dedent(KERAS).lstrip("\n"), r.output, DRIVER)
    x = np.linspace(-1.0, 1.0, 8).reshape(2, 4)
    expected = (x * 0.5 + 0.25) * 2.0 + 1.0  # keras.layers.Rescaling, then the file's
    np.testing.assert_allclose(np.array(keras_out), expected, rtol=1e-6)
    np.testing.assert_allclose(np.array(torch_out), np.array(keras_out), rtol=1e-6)


# --- the names chosen ------------------------------------------------------------------------------------------

def _ctx(source: str) -> SimpleNamespace:
    tree = cst.parse_module(textwrap.dedent(source).lstrip("\n"))
    names = SourceNames(("torch",))
    return SimpleNamespace(analyses={"parsed": (tree, tree.code)}, imports=SimpleNamespace(is_source=names.is_source),
                           path="m.py", findings=[])


def test_the_name_chosen():
    ctx = _ctx('''
        from torch.nn import Upsample
        from mylib import Pad
        PReLU = 1
        PReLU_ = 2
        def f(torch_pad):
            Lambda = 3
        ''')
    assert written.name(ctx, "Upsample") == "Upsample"  # the source framework's own: the object the helper stands for
    assert written.name(ctx, "Pad") == "Pad_"  # another package's
    assert written.name(ctx, "PReLU") == "PReLU_2"  # PReLU_ is the file's too
    assert written.name(ctx, "torch_pad") == "torch_pad_"  # a parameter
    assert written.name(ctx, "Lambda") == "Lambda_"  # a local
    assert written.name(ctx, "Flatten") == "Flatten"
    assert written.renamed(ctx) == {"Pad": "Pad_", "PReLU": "PReLU_2", "torch_pad": "torch_pad_", "Lambda": "Lambda_"}


def test_clash_prefilter_answers_as_the_written_patterns():
    """written.clash's text prefilter, spelled with its literal word first (re scans for it in C), finds what the
    patterns as first written found (`(?<![\\w.])name\\b`, `\\bimport\\s*\\*`): the same first match, on made texts
    where the name stands after a dot, inside a longer word, at the start, after a non-ASCII letter."""
    import random
    import re

    rng = random.Random(0)
    parts = ["foo", "f", "o", ".", "_", " ", "\n", "import", "*", "a", "1", "\u00e9", "(", "\t"]
    texts = ["foo = 1\n", "x.foo\n", "afoo\n", "foo_\n", "(foo)", "foo", ".foo", "import *", "ximport *", "import\n*"]
    texts += ["".join(rng.choice(parts) for _ in range(12)) for _ in range(5000)]
    hits = 0
    for name in ("foo", "f", "foo_", "_f", "\u00e9"):
        w = re.escape(name)
        for s in texts:
            a, b = re.search(rf"(?<![\w.]){w}\b", s), re.search(rf"{w}(?<![\w.]{w})\b", s)
            assert (a and a.span()) == (b and b.span()), (name, s)
            hits += a is not None
    for s in texts:
        a, b = re.search(r"\bimport\s*\*", s), re.search(r"import(?<=\bimport)\s*\*", s)
        assert (a and a.span()) == (b and b.span()), s
        hits += a is not None
    assert hits > 1000  # (texts that match: the comparison is not all misses)
    # the prefilter as clash runs it: a file that never writes the name answers no clash without a walk
    assert written.clash(SimpleNamespace(analyses={"parsed": (None, "x.foo = afoo\n")}), "foo") is False


def test_a_star_import_of_another_package_takes_every_name_read():
    ctx = _ctx('''
        from mylib import *
        y = PReLU(x)
        ''')
    assert written.name(ctx, "PReLU") == "PReLU_"
    assert written.name(ctx, "Upsample") == "Upsample"
    ctx = _ctx('''
        from torch.nn import *
        y = PReLU(x)
        ''')
    assert written.name(ctx, "PReLU") == "PReLU"


def test_a_definition_written_without_asking_is_an_error_at_the_files_binding():
    ctx = _ctx('''
        import torch

        def fit(model):
            return model
        ''')
    new = written.check(ctx, cst.parse_module("def fit(x):\n    return x\n\n\ndef other():\n    pass\n").body)
    assert [(f.severity.value, f.code, f.line) for f in ctx.findings] == [("error", "unsupported-construct", 3)]
    assert "`fit`" in ctx.findings[0].message
    assert new[0].leading_lines[-1].comment.value.startswith("# fwport: unsupported-construct:")
    assert all(ln.comment is None for ln in new[1].leading_lines)


def test_a_parameter_of_the_files_is_no_error_for_a_module_level_definition():
    """vivit.py's make_box_for_grid(image_widget, fit) beside the fit function a compile writes: fit is the
    parameter only inside that function; conlleval's `from conlleval import evaluate` beside a written evaluate is."""
    ctx = _ctx('''
        from conlleval import evaluate

        def make_box_for_grid(image_widget, fit):
            return fit
        ''')
    written.check(ctx, cst.parse_module("def fit(x):\n    return x\n\n\ndef evaluate(x):\n    return x\n").body)
    assert [(f.line, "`evaluate`" in f.message) for f in ctx.findings] == [(1, True)]


def test_a_compiles_fit_functions_keep_clear_of_an_imported_name():
    """ner_transformers.py: `from conlleval import evaluate` beside a compiled model: the written evaluate function is
    named after the model, the file's evaluate stays conlleval's."""
    r = _t2t('''
        import numpy as np
        import keras
        from keras import layers
        from conlleval import evaluate

        model = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(2)])
        model.compile(optimizer="sgd", loss="mse")
        model.fit(np.zeros((8, 4)), np.zeros((8, 2)), epochs=1)
        print(model.evaluate(np.zeros((8, 4)), np.zeros((8, 2))))
        evaluate([1], [1])
        ''')
    assert not error_findings(r), r.findings
    assert "from conlleval import evaluate" in r.output and "\ndef evaluate(" not in r.output
    assert "\ndef model_evaluate(" in r.output and "evaluate([1], [1])" in r.output
