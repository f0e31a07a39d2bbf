"""Speed guards of issue 7 (speedE) that are also correctness checks.

- A transformer's leave hook that answers a copy whose fields are the very same objects as the node it was
  handed (``updated_node.with_changes(keyword=original_node.keyword)`` where nothing changed) makes
  ``rewrite`` rebuild, validate and hand new identities to every ancestor up to the statement: the subclass
  pass rebuilt every class it translated that way. No tf2torch transformer does it on the fixtures.
- layer_weights' ``_layers_bound`` walks with ``scan``, not libcst's ``visit`` (which rebuilds every node it
  passes): the same bindings, the same value nodes, on every module and function body of the fixtures.
"""
from __future__ import annotations

from pathlib import Path

import libcst as cst

from fwport.core import hooks
from fwport.core.names import find_all, scan
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from fwport.packs.tf2torch.passes import layerweights

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted((ROOT / "fixtures" / "tf2torch").glob("*/model.py"))


def _subclasses(cls: type):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _same_fields(new: cst.CSTNode, old: cst.CSTNode) -> bool:
    return (new is not old and type(new) is type(old)
            and all(getattr(new, f) is getattr(old, f) for f in old.__dataclass_fields__))


def test_no_leave_hook_answers_a_copy_of_what_it_was_handed(monkeypatch):
    pack = load_pack("tf2torch")  # (imports the pack's passes: their transformer classes exist now)
    copies: dict[str, int] = {}
    calls = [0]
    wrapped = 0
    for cls in set(_subclasses(cst.CSTTransformer)):
        if not cls.__module__.startswith("fwport.packs.tf2torch"):
            continue
        for name, fn in list(vars(cls).items()):
            if not name.startswith("leave_") or not callable(fn):
                continue

            def hook(self, original_node, updated_node, fn=fn, key=f"{cls.__module__}.{cls.__qualname__}.{name}"):
                out = fn(self, original_node, updated_node)
                calls[0] += 1
                if isinstance(out, cst.CSTNode) and _same_fields(out, updated_node):
                    copies[key] = copies.get(key, 0) + 1
                return out
            monkeypatch.setattr(cls, name, hook)
            wrapped += 1
        # the hook tables kept on the classes hold the unwrapped functions: built again from the wrapped ones
        for attr in ("_fwport_hooks", "_fwport_attribute_hooks", "_fwport_rewrite", "_fwport_fresh", "_fwport_scan",
                     "_fwport_scan_own"):
            if attr in vars(cls):
                monkeypatch.delattr(cls, attr)
    monkeypatch.setattr(hooks, "_TABLES", {})
    assert wrapped > 20
    for path in FIXTURES:
        translate_source(path.read_text(encoding="utf-8"), str(path), pack)
    assert calls[0] > 1000  # the hooks were called (the wrapping took)
    assert copies == {}


def test_layers_bound_walk_sees_what_libcst_visit_sees():
    bodies = 0
    for path in FIXTURES:
        module = cst.parse_module(path.read_text(encoding="utf-8"))
        walked = [(module, [])] + [(f.body, [p.name.value for p in f.params.params])
                                   for f in find_all(module, cst.FunctionDef)]
        for body, params in walked:
            ours, theirs = layerweights._Bindings(params), layerweights._Bindings(params)
            for stmt in (body.body if isinstance(body, cst.Module) else [body]):
                scan(stmt, ours)
                stmt.visit(theirs)
            assert {k: [id(v) for v in vs] for k, vs in ours.values.items()} == \
                   {k: [id(v) for v in vs] for k, vs in theirs.values.items()}, path
            bodies += 1
    assert bodies > 100
