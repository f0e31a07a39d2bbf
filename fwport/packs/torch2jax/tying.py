"""Weight tying (``self.transformer.wte.weight = self.lm_head.weight``, nanoGPT; GPT-2's embedding and output
layer sharing one matrix) in an nn.Module's ``__init__`` → one array used in both places.

PyTorch shares the Parameter object: both modules read it and its gradient is the sum of both uses. An Equinox
module is a pytree, where the same array in two fields is two leaves that train apart. So the translation keeps
the embedding's table only: the output layer, an ``nn.Linear(n, vocab, bias=False)`` whose weight is that table,
is not built, and each call of it, ``self.lm_head(x)``, is written ``x @ self.transformer["wte"].weight.T``
(what Linear computes, with the embedding's table). The parameter count is PyTorch's (``model.parameters()``
counts a shared Parameter once); ``lm_head.weight`` is PyTorch's second name for the table in a state_dict, and
``fwport verify`` / ``fwport weights`` move it by the first (the torch side reports the tied names).

Only that shape of tying is translated: one side an ``nn.Embedding`` (an attribute, or an entry of an
``nn.ModuleDict``), the other an ``nn.Linear`` built with ``bias=False`` whose every other use is a call with one
argument. Any other assignment of a parameter to another module's is an error saying why.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.engine import code, expr
from fwport.core.finding import Severity
from fwport.core.names import dotted_text, scan
from fwport.core.rewrite import rewrite

DROP = "__fwport_drop__"  # batch.DROP: the statement goes in the modules pass's finish


def _path(node: cst.BaseExpression) -> tuple[str, str | None] | None:
    """``self.a`` → ("a", None); ``self.d["k"]`` → ("d", "k"); else None."""
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value, None
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) \
            and isinstance(node.slice[0].slice.value, cst.SimpleString):
        inner = _path(node.value)
        if inner is not None and inner[1] is None:
            return inner[0], node.slice[0].slice.value.evaluated_value
    return None


def _built(init: cst.FunctionDef, ctx) -> dict[tuple[str, str | None], tuple[str, cst.Call, cst.CSTNode]]:
    """What ``__init__``'s top-level statements build: (attribute, dict key) → (source class, call, statement)."""
    out = {}
    for st in init.body.body:
        if not (isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Assign)
                and len(st.body[0].targets) == 1):
            continue
        a = st.body[0]
        t = dotted_text(a.targets[0].target) or ""
        if not (t.startswith("self.") and t.count(".") == 1 and isinstance(a.value, cst.Call)):
            continue
        q = ctx.imports.resolve(a.value.func)
        out[(t[5:], None)] = (q or "", a.value, st)
        if q == "torch.nn.ModuleDict" and a.value.args:
            d = a.value.args[0].value
            entries = []
            if isinstance(d, cst.Call) and dotted_text(d.func) == "dict":
                entries = [(x.keyword.value, x.value) for x in d.args if x.keyword is not None]
            elif isinstance(d, cst.Dict):
                entries = [(e.key.evaluated_value, e.value) for e in d.elements
                           if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)]
            for k, v in entries:
                if isinstance(v, cst.Call):
                    out[(t[5:], k)] = (ctx.imports.resolve(v.func) or "", v, st)
    return out


def _tie(st: cst.CSTNode) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """``A.weight = B.weight`` (one target) → (A, B)."""
    if not (isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Assign)
            and len(st.body[0].targets) == 1):
        return None
    t, v = st.body[0].targets[0].target, st.body[0].value
    if isinstance(t, cst.Attribute) and isinstance(v, cst.Attribute) and t.attr.value == "weight" == v.attr.value \
            and _path(t.value) is not None and _path(v.value) is not None:
        return t.value, v.value
    return None


def _nested_ties(init: cst.FunctionDef) -> list[cst.SimpleStatementLine]:
    """``A.weight = B.weight`` statements of ``__init__`` inside a compound statement (``if tie_weights:``,
    word_language_model): the tie happens at run time only, which the translation cannot express."""
    found: list[cst.SimpleStatementLine] = []

    class _Nested(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
            if _tie(node) is not None:
                found.append(node)
            return False

    for st in init.body.body:
        if isinstance(st, cst.BaseCompoundStatement):
            scan(st, _Nested())
    return found


def untie(cls: cst.ClassDef, ctx) -> tuple[cst.ClassDef, bool]:
    """The class with its weight tying translated (see the module docstring); and whether it had one."""
    methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    init = methods.get("__init__")
    if init is None or not isinstance(init.body, cst.IndentedBlock):
        return cls, False
    ties = [(st, ab) for st in init.body.body for ab in [_tie(st)] if ab is not None]
    for st in _nested_ties(init):
        ctx.report(Severity.ERROR, "unsupported-construct", f"weight tying under a condition or in a loop "
                   f"({code(st.body[0].targets[0].target)} = {code(st.body[0].value)}): an Equinox module's fields "
                   "are fixed once __init__ returns and one array cannot be two leaves, so fwport translates a tie "
                   "written as a statement of __init__ itself; write the tie unconditionally (or build the untied "
                   "and tied models as two classes) and translate again", st)
    if not ties:
        return cls, False
    built = _built(init, ctx)
    drops: set[int] = set()
    calls: dict[str, str] = {}  # the Linear's attribute → the embedding's table (its text)
    for st, (a, b) in ties:
        pa, pb = _path(a), _path(b)
        kinds = {p: built.get(p, ("", None, None))[0] for p in (pa, pb)}
        emb = next((p for p in (pa, pb) if kinds[p] == "torch.nn.Embedding"), None)
        lin = next((p for p in (pa, pb) if kinds[p] == "torch.nn.Linear" and p[1] is None), None)
        why = None
        if emb is None or lin is None:
            why = "only an nn.Embedding's table shared with an nn.Linear attribute (an output layer) is translated"
        elif not any(x.keyword and x.keyword.value == "bias" and code(x.value) == "False" for x in built[lin][1].args):
            why = f"self.{lin[0]} has a bias: written as a product with the shared table it would lose it"
        elif not _only_called(cls, lin[0], built[lin][2], st):
            why = f"self.{lin[0]} is used otherwise than called with one argument"
        if why:
            ctx.report(Severity.ERROR, "unsupported-construct", f"weight tying ({code(st.body[0].targets[0].target)} = "
                       f"{code(st.body[0].value)}): Equinox has no shared parameters (a pytree holds each array once); "
                       f"{why}: keep one array and use it in both places (eqx.nn.Shared, or x @ table.T)", st)
            continue
        table = f"{code(a if emb == pa else b)}.weight"
        calls[lin[0]] = table
        drops |= {id(st), id(built[lin][2])}
        ctx.report(Severity.INFO, "idiom-replaced", f"weight tying: Equinox has no shared parameters, so one array, "
                   f"{table}, serves both: self.{lin[0]} (a Linear without bias) is not built, its calls are "
                   f"x @ {table}.T; {'.'.join(x for x in lin if x)}.weight is PyTorch's second name for it in a "
                   "state_dict (fwport weights and verify move it there)", st)
    if not calls:
        return cls, False
    return rewrite(cls, _Untie(drops, calls)), True


def _only_called(cls: cst.ClassDef, attr: str, built_at: cst.CSTNode, tie: cst.CSTNode) -> bool:
    """Whether every read of ``self.<attr>`` outside its construction and the tie is a call with one argument."""
    ok = True

    class Reads(cst.CSTVisitor):
        def __init__(self):
            super().__init__()
            self.calls: set[int] = set()  # the funcs of the calls seen (no other read)

        def visit_SimpleStatementLine(self, node) -> bool:
            return node is not built_at and node is not tie

        def visit_Call(self, node: cst.Call) -> None:
            if dotted_text(node.func) == f"self.{attr}":
                self.calls.add(id(node.func))
                if len(node.args) != 1 or node.args[0].keyword is not None or node.args[0].star:
                    nonlocal ok
                    ok = False

        def visit_Attribute(self, node: cst.Attribute) -> None:
            if dotted_text(node) == f"self.{attr}" and id(node) not in self.calls:
                nonlocal ok
                ok = False

    scan(cls, Reads())
    return ok


class _Untie(cst.CSTTransformer):
    """The tie and the Linear's construction → DROP (removed by the finish); ``self.<linear>(x)`` →
    ``x @ <table>.T``."""

    def __init__(self, drops: set[int], calls: dict[str, str]):
        super().__init__()
        self.drops, self.calls = drops, calls

    def leave_SimpleStatementLine(self, original, updated):
        if id(original) in self.drops:
            return updated.with_changes(body=[cst.Expr(cst.Call(cst.Name(DROP)))])
        return updated

    def leave_Call(self, original, updated):
        t = dotted_text(original.func) or ""
        if t.startswith("self.") and t[5:] in self.calls:
            from fwport.packs.torch2jax.batch import _atom_code
            return expr(f"{_atom_code(updated.args[0].value)} @ {self.calls[t[5:]]}.T")
        return updated


class Dropped(cst.CSTTransformer):
    """The finish: the DROP statements go, their leading comments kept on the statement after them."""

    def leave_IndentedBlock(self, original, updated):
        body, carry = [], []
        for st in updated.body:
            if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Expr) \
                    and isinstance(st.body[0].value, cst.Call) and dotted_text(st.body[0].value.func) == DROP:
                carry += list(st.leading_lines)
                continue
            if carry:
                st = st.with_changes(leading_lines=[*carry, *st.leading_lines])
                carry = []
            body.append(st)
        if not body:
            body = [cst.SimpleStatementLine([cst.Pass()])]
        return updated.with_changes(body=body)
