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

A tie under a flag of ``__init__`` (``if tie_weights: self.decoder.weight = self.encoder.weight``,
word_language_model) is decided once, when the model is built, as an Equinox user writes it: the flag becomes a
static field, the output layer is still built (its bias, and its own weight, which the tied model leaves unused),
and each call ``self.decoder(x)`` is written ``(x @ self.encoder.weight.T + self.decoder.bias if self.tie_weights
else self.decoder(x))``. Outputs and gradients are PyTorch's (the table's gradient is the sum of both uses, the
unused weight's zero); the parameter count includes the unused weight. A tie in a loop, or under any other
condition, stays an error.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.engine import code, expr
from fwport.core.finding import Severity
from fwport.core.names import dotted_text, find_all, scan
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


class _NestedTies(cst.CSTVisitor):
    """_nested_ties: the tie statements in the code, into ``found``."""

    def __init__(self, found):
        super().__init__()
        self.found = found

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        if _tie(node) is not None:
            self.found.append(node)
        return False


def _nested_ties(init: cst.FunctionDef) -> list[cst.SimpleStatementLine]:
    """``A.weight = B.weight`` statements of ``__init__`` inside a compound statement (``if tie_weights:``,
    word_language_model): the tie happens at run time only, which the translation cannot express."""
    found: list[cst.SimpleStatementLine] = []
    for st in init.body.body:
        if isinstance(st, cst.BaseCompoundStatement):
            scan(st, _NestedTies(found))
    return found


class _Assigned(cst.CSTVisitor):
    """The names the code assigns (a target, an augmented assignment, a for loop's), into ``assigned``."""

    def __init__(self, assigned):
        super().__init__()
        self.assigned = assigned

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        for n in _names(node.target):
            self.assigned.add(n)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.assigned.update(_names(node.target))

    def visit_For(self, node: cst.For) -> None:
        self.assigned.update(_names(node.target))


def _flagged_ties(init: cst.FunctionDef) -> dict[int, tuple[cst.If, str]]:
    """The ties directly in the body of a top-level ``if FLAG:`` of ``__init__`` (FLAG a parameter of ``__init__``
    that no statement assigns): id of the tie → (the if, FLAG)."""
    params = {p.name.value for p in (*init.params.params, *init.params.kwonly_params)}
    assigned: set[str] = set()
    scan(init.body, _Assigned(assigned))
    out = {}
    for st in init.body.body:
        if isinstance(st, cst.If) and isinstance(st.test, cst.Name) and st.test.value in params \
                and st.test.value not in assigned and isinstance(st.body, cst.IndentedBlock):
            for inner in st.body.body:
                if _tie(inner) is not None:
                    out[id(inner)] = (st, st.test.value)
    return out


def _names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _names(e.value)]
    return []


def _untie_flagged(cls: cst.ClassDef, init: cst.FunctionDef, flagged: dict, ctx) -> tuple[cst.ClassDef, bool]:
    """The ties under a flag of ``__init__`` (see the module docstring): (the class, whether any was translated)."""
    built = _built(init, ctx)
    drops: set[int] = set()
    calls: dict[str, tuple[str, str, bool]] = {}  # the Linear's attribute → (the table, the flag, whether biased)
    flags: dict[int, str] = {}  # id of the `if` → its flag, whose field goes before it
    fields = {(dotted_text(a.targets[0].target) or "")[5:]: code(a.value)
              for st in init.body.body if isinstance(st, cst.SimpleStatementLine)
              for a in st.body if isinstance(a, cst.Assign) and len(a.targets) == 1}
    ties = [st for st in (s for i in init.body.body if isinstance(i, cst.If) for s in i.body.body)
            if id(st) in flagged]
    for st in ties:
        a, b = _tie(st)
        iff, flag = flagged[id(st)]
        pa, pb = _path(a), _path(b)
        kinds = {p: built.get(p, ("", None, None))[0] for p in (pa, pb)}
        emb = next((p for p in (pa, pb) if kinds[p] == "torch.nn.Embedding"), None)
        lin = next((p for p in (pa, pb) if kinds[p] == "torch.nn.Linear" and p[1] is None), None)
        bias = [x.value for x in built[lin][1].args if x.keyword and x.keyword.value == "bias"] if lin else []
        why = None
        if emb is None or lin is None:
            why = "only an nn.Embedding's table shared with an nn.Linear attribute (an output layer) is translated"
        elif bias and code(bias[0]) not in ("True", "False"):
            why = f"self.{lin[0]}'s bias is {code(bias[0])}, not a literal"
        elif not _only_called(cls, lin[0], built[lin][2], st, skip=_construction(cls, init)):
            why = f"self.{lin[0]} is used otherwise than called with one argument outside its construction"
        elif flag in fields and fields[flag] != flag:
            why = f"self.{flag}, the flag's field, is already {fields[flag]}"
        if why:
            ctx.report(Severity.ERROR, "unsupported-construct", f"weight tying under `if {flag}:` "
                       f"({code(st.body[0].targets[0].target)} = {code(st.body[0].value)}): Equinox has no shared "
                       f"parameters (a pytree holds each array once); {why}: keep one array and use it in both places "
                       "when the flag is set", st)
            continue
        table = f"{code(a if emb == pa else b)}.weight"
        calls[lin[0]] = (table, flag, not bias or code(bias[0]) == "True")
        drops.add(id(st))
        if flag not in fields:
            flags[id(iff)] = flag
        ctx.report(Severity.INFO, "idiom-replaced", f"weight tying under `if {flag}:`: Equinox has no shared "
                   f"parameters, so {flag} is kept as a static field and, when it is set, each call of self.{lin[0]} "
                   f"uses {table} (x @ {table}.T plus self.{lin[0]}'s bias): outputs and gradients are PyTorch's (the "
                   f"table's gradient sums both uses); self.{lin[0]}.weight is still built and unused then (counted "
                   f"by a parameter count, where PyTorch counts the shared table once; fwport weights and verify load "
                   f"it with the table's values)", st)
        if _writes(cls, init, lin[0]):
            ctx.report(Severity.WARNING, "approximate", f"weight tying under `if {flag}:`: PyTorch's initialisation "
                       f"of self.{lin[0]}.weight after the tie initialises the shared table; here it initialises "
                       f"self.{lin[0]}'s own weight, unused when {flag} is set, and {table} keeps its own "
                       "initialisation: the same model when both draw from one distribution, else load the weights "
                       "(fwport weights) or initialise the table as PyTorch's last write does", st)
    if not calls:
        return cls, False
    # the calls are rewritten by the modules pass's finish (TiedCalls), once the batch pass has vmapped them
    return rewrite(cls, _Untie(drops, {}, flags)), {k: list(v) for k, v in calls.items()}


def _construction(cls: cst.ClassDef, init: cst.FunctionDef) -> set[str]:
    """``__init__`` and the methods it calls (``self.init_weights()``): where a module is built."""
    called = {(dotted_text(c.func) or "")[5:] for c in _all_calls(init) if (dotted_text(c.func) or "").startswith("self.")}
    return {"__init__"} | {s.name.value for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value in called}


def _all_calls(node: cst.CSTNode) -> list[cst.Call]:
    return find_all(node, cst.Call)


def _writes(cls: cst.ClassDef, init: cst.FunctionDef, attr: str) -> bool:
    """Whether a method ``__init__`` calls (after the tie) passes ``self.<attr>.weight`` to a call (an in-place
    initialisation) or assigns it."""
    methods = [s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value in _construction(cls, init)
               and s.name.value != "__init__"]
    return any(dotted_text(a.value) == f"self.{attr}.weight" for m in methods for c in _all_calls(m) for a in c.args)


def untie(cls: cst.ClassDef, ctx) -> tuple[cst.ClassDef, bool | dict]:
    """The class with its weight tying translated (see the module docstring); and whether it had one (for ties
    under a flag: the output layer's attribute → [the table, the flag, whether the layer has a bias], for
    TiedCalls)."""
    methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    init = methods.get("__init__")
    if init is None or not isinstance(init.body, cst.IndentedBlock):
        return cls, False
    ties = [(st, ab) for st in init.body.body for ab in [_tie(st)] if ab is not None]
    flagged = _flagged_ties(init)
    if flagged and ties:
        flagged = {}  # both kinds in one class: not translated (the error below names each conditional tie)
    for st in _nested_ties(init):
        if id(st) in flagged:
            continue
        ctx.report(Severity.ERROR, "unsupported-construct", f"weight tying under a condition or in a loop "
                   f"({code(st.body[0].targets[0].target)} = {code(st.body[0].value)}): an Equinox module's fields "
                   "are fixed once __init__ returns and one array cannot be two leaves, so fwport translates a tie "
                   "written as a statement of __init__ itself; write the tie unconditionally (or build the untied "
                   "and tied models as two classes) and translate again", st)
    if flagged:
        return _untie_flagged(cls, init, flagged, ctx)
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


class _OnlyCalled(cst.CSTVisitor):
    """_only_called: ``ok`` stays True while every read of ``self.<attr>`` (outside ``built_at``, ``tie`` and the
    methods named in ``skip``) is a call with one argument."""

    def __init__(self, attr: str, built_at: cst.CSTNode, tie: cst.CSTNode, skip: set[str]):
        super().__init__()
        self.attr, self.built_at, self.tie, self.skip = f"self.{attr}", built_at, tie, skip
        self.calls: set[int] = set()  # the funcs of the calls seen (no other read)
        self.ok = True

    def visit_FunctionDef(self, node) -> bool:
        return node.name.value not in self.skip

    def visit_SimpleStatementLine(self, node) -> bool:
        return node is not self.built_at and node is not self.tie

    def visit_Call(self, node: cst.Call) -> None:
        if dotted_text(node.func) == self.attr:
            self.calls.add(id(node.func))
            if len(node.args) != 1 or node.args[0].keyword is not None or node.args[0].star:
                self.ok = False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if dotted_text(node) == self.attr and id(node) not in self.calls:
            self.ok = False


def _only_called(cls: cst.ClassDef, attr: str, built_at: cst.CSTNode, tie: cst.CSTNode,
                 skip: set[str] = frozenset()) -> bool:
    """Whether every read of ``self.<attr>`` outside its construction and the tie (and the methods named in
    ``skip``) is a call with one argument."""
    reads = _OnlyCalled(attr, built_at, tie, skip)
    scan(cls, reads)
    return reads.ok


class _Untie(cst.CSTTransformer):
    """The tie and the Linear's construction → DROP (removed by the finish); ``self.<linear>(x)`` →
    ``x @ <table>.T``."""

    def __init__(self, drops: set[int], calls: dict[str, str], flags: dict[int, str] | None = None):
        super().__init__()
        self.drops, self.calls = drops, calls
        self.flags = flags or {}  # id of an `if FLAG:` holding a tie → FLAG (its field set before it)

    def leave_SimpleStatementLine(self, original, updated):
        if id(original) in self.drops:
            return updated.with_changes(body=[cst.Expr(cst.Call(cst.Name(DROP)))])
        return updated

    def leave_If(self, original, updated):
        if id(original) in self.flags:
            flag = self.flags[id(original)]
            field = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(expr(f"self.{flag}"))], cst.Name(flag))],
                                            leading_lines=updated.leading_lines)
            return cst.FlattenSentinel([field, updated.with_changes(leading_lines=[])])
        return updated

    def leave_Call(self, original, updated):
        t = dotted_text(original.func) or ""
        if t.startswith("self.") and t[5:] in self.calls:
            from fwport.packs.torch2jax.batch import _atom_code
            return expr(f"{_atom_code(updated.args[0].value)} @ {self.calls[t[5:]]}.T")
        return updated


class TiedCalls(cst.CSTTransformer):
    """The finish of a tie under a flag: each call of the output layer, ``self.decoder(x)`` or the batch pass's
    ``jax.vmap(self.decoder)(x)``, → ``(x @ <table>.T + self.decoder.bias if self.<flag> else <the call>)`` (a
    product over the last axis, whatever the rank of the example)."""

    def __init__(self, flagged: dict[str, list]):
        super().__init__()
        self.flagged = flagged

    def leave_Call(self, original, updated):
        func = updated.func
        while isinstance(func, cst.Call) and dotted_text(func.func) == "jax.vmap" and len(func.args) == 1:
            func = func.args[0].value
        t = dotted_text(func) or ""
        if not (t.startswith("self.") and t[5:] in self.flagged and len(updated.args) == 1
                and updated.args[0].keyword is None and not updated.args[0].star):
            return updated
        from fwport.packs.torch2jax.batch import _atom_code
        table, flag, bias = self.flagged[t[5:]]
        plus = f" + {t}.bias" if bias else ""
        return expr(f"({_atom_code(updated.args[0].value)} @ {table}.T{plus} if self.{flag} else {code(updated)})")


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
