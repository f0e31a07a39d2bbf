"""speedJ: torch2jax walks made once where they were made several times, or not at all where nothing can come of
them. ``batch.names_in`` walks an expression by itself (it was a visitor's scan); ``Forward``'s facts about a
forward's body (``_device_only``, ``sole_holders_in``, ``_tensor_reads``) are kept per body, so that the probes of
ranks.py and _batched_classes and the rewrite itself compute them once; ``_type_aliases`` looks for
``torch.set_default_dtype`` only for a ``torch.Tensor`` branch; ``_loaded_models`` skips a source that never spells
``load``; ``given_classes`` skips classes whose ``__init__`` takes nothing. The outputs and findings must not
change: each test compares with the walk as it was."""
from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

import fwport.core.hooks as hooks
import fwport.packs.torch2jax.batch as batch
from fwport.core.names import find_all, scan
from fwport.core.parse import parse_module
from fwport.core.pipeline import translate_source

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted((ROOT / "fixtures" / "torch2jax").glob("*/model.py"))


def _result(r):
    return r.output, r.status, [(f.line, f.column, f.severity, f.code, f.message) for f in r.findings]


def _visitor_names(node) -> set[str]:
    v = batch._NamesIn()
    scan(node, v)
    return v.out


SNIPPETS = ["f(a, k=b).c[d:e, ::g](*h, **i)", "lambda x, y=z: x + y.w", "[u for u in v if u.t]",
            "{k: v for k, v in d.items()}", "a if b.c else (d).e", "x.y.z(w).v", "not a and b or c", "f'{a}{b.c!r}'",
            "(yield)", "await q"]


@pytest.mark.parametrize("path", FIXTURES, ids=[p.parent.name for p in FIXTURES])
def test_names_in_gives_what_the_visitor_gave(path):
    module = parse_module(path.read_text(encoding="utf-8"))
    nodes = [module, *find_all(module, cst.Call), *find_all(module, cst.Assign), *find_all(module, cst.FunctionDef),
             *find_all(module, cst.Attribute), *find_all(module, cst.Arg)]
    assert len(nodes) > 20
    for node in nodes:
        assert batch.names_in(node) == _visitor_names(node)


def test_names_in_on_expressions_of_every_shape():
    for text in SNIPPETS:
        tree = cst.parse_module(f"async def _():\n    {text}\n")
        expr = tree.body[0].body.body[0].body[0].value
        assert batch.names_in(expr) == _visitor_names(expr), text
    # an attribute's name and not its value's is left out; a keyword argument's name is counted, as before
    assert batch.names_in(cst.parse_expression("f(a, k=b).c")) == {"f", "a", "k", "b"}


def _old_visit_indented_block(self, node):  # Forward.visit_IndentedBlock as it was: every fact computed every run
    if self.device_names is None:
        self.device_names = batch._device_only(node)
        self.tensor_reads = batch._tensor_reads(node, self.ctx.imports.resolve, self.modules)
        from fwport.packs.torch2jax.inplace import passing_names, sole_holders_in
        self.sole = sole_holders_in(node.body, self.inputs, passing_names(self.ctx))


#: a class holding another (ranks.py probes both forwards until their ranks settle), a device name, an in-place op
HELD = '''
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.seq = nn.LSTM(d, d)

    def forward(self, x):
        device = x.device
        h = self.fc(x)
        h += x
        y = torch.zeros(3, device=device)
        return h.relu() + y.sum()


class Net(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.block = Block(d)
        self.out = nn.Linear(d, 2)

    def forward(self, x):
        z = self.block(x)
        z.add_(1.0)
        return self.out(z).view(x.size(0), -1)


model = Net(4)
'''


def _hooks_of_forward_changed(monkeypatch, visit) -> None:
    """Forward.visit_IndentedBlock replaced by ``visit``: the hook tables the walks keep on the class dropped too
    (put back after the test), so that they look the hooks up again."""
    monkeypatch.setattr(batch.Forward, "visit_IndentedBlock", visit)
    for cached in [k for k in vars(batch.Forward) if k.startswith("_fwport_")]:
        monkeypatch.delattr(batch.Forward, cached)
    monkeypatch.setattr(hooks, "_TABLES", {})


def _counting(monkeypatch) -> dict[str, int]:
    """Counts of Forward runs (instances) and of _device_only's walks."""
    counts = {"runs": 0, "device_only": 0}
    device_only, init = batch._device_only, batch.Forward.__init__

    def counted_device_only(body):
        counts["device_only"] += 1
        return device_only(body)

    def counted_init(self, *args, **kwargs):
        counts["runs"] += 1
        init(self, *args, **kwargs)

    monkeypatch.setattr(batch, "_device_only", counted_device_only)
    monkeypatch.setattr(batch.Forward, "__init__", counted_init)
    return counts


@pytest.mark.parametrize("text", [textwrap.dedent(HELD).lstrip("\n")] + [p.read_text(encoding="utf-8") for p in FIXTURES],
                         ids=["held"] + [p.parent.name for p in FIXTURES])
def test_body_facts_kept_give_what_each_run_computed(text, monkeypatch):
    counts = _counting(monkeypatch)
    ours = _result(translate_source(text, "f.py", "torch2jax"))
    kept = dict(counts)
    _hooks_of_forward_changed(monkeypatch, _old_visit_indented_block)
    theirs = _result(translate_source(text, "f.py", "torch2jax"))
    assert ours == theirs
    assert kept["device_only"] <= kept["runs"]
    if text.startswith("import torch\nimport torch.nn as nn\n\n\nclass Block"):
        # Block's and Net's forwards, probed by ranks.py (twice at least: the second run confirms) and rewritten:
        # each body's facts computed once (the old hook: at every run)
        assert kept["runs"] >= 6 and kept["device_only"] == 2, kept
        assert counts["device_only"] - kept["device_only"] == kept["runs"]


def test_body_facts_are_reused_somewhere_in_the_fixtures(monkeypatch):
    counts = _counting(monkeypatch)
    for p in FIXTURES:
        translate_source(p.read_text(encoding="utf-8"), "f.py", "torch2jax")
    assert 0 < counts["device_only"] < counts["runs"]


LEGACY = '''
import torch
{extra}
cuda = torch.cuda.is_available()
Tensor = torch.cuda.FloatTensor if cuda else torch.Tensor
x = Tensor(3)
'''


def test_type_aliases_still_see_a_changed_default_dtype():
    plain = translate_source(textwrap.dedent(LEGACY.format(extra="")).lstrip("\n"), "f.py", "torch2jax")
    changed = translate_source(textwrap.dedent(LEGACY.format(extra="torch.set_default_dtype(torch.float64)")).lstrip("\n"),
                               "f.py", "torch2jax")
    assert "float32" in plain.output  # torch.Tensor's CPU branch is torch.FloatTensor: float32
    assert _result(plain) != _result(changed)
    assert "float32" not in changed.output.split("Tensor =", 1)[1]


SAVED = '''
import torch
import torch.nn as nn
from torch import {load}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x)


model = Net()
torch.save(model, "m.pt")
copy = {call}("m.pt")
y = copy(torch.zeros(3))
'''


def test_loaded_models_found_by_any_spelling_of_torch_load():
    by_name = translate_source(textwrap.dedent(SAVED.format(load="load", call="load")).lstrip("\n"), "f.py", "torch2jax")
    by_alias = translate_source(textwrap.dedent(SAVED.format(load="load as L", call="L")).lstrip("\n"), "f.py",
                                "torch2jax")
    qualified = translate_source(textwrap.dedent(SAVED.format(load="save", call="torch.load")).lstrip("\n"), "f.py",
                                 "torch2jax")
    for r in (by_name, by_alias, qualified):  # the loaded copy is a model: called per example (without it, as written)
        assert "y = jax.vmap(copy)(jnp.zeros(3))" in r.output, r.output
    unsaved = translate_source(textwrap.dedent(SAVED.format(load="save", call="torch.load")).lstrip("\n").replace(
        'torch.save(model, "m.pt")\n', ""), "f.py", "torch2jax")
    assert "y = copy(" in unsaved.output  # (nothing saved there: no model to read back)
