"""``**name`` spelled out: a call's keyword arguments taken from a dict literal written just above it.

Real code often shares the arguments of several layers through a dict::

    config = {"kernel_size": 3, "padding": "same", "activation": "relu"}
    x = layers.Conv2D(64, **config)(x)
    x = layers.Conv2D(32, **config)(x)

A rule binds a call's arguments to the source signature; ``**config`` cannot be bound, so every such
call was refused. Before the direction's passes run, :func:`expand` writes each ``**name`` out as the
keyword arguments the dict holds (``layers.Conv2D(64, kernel_size=3, padding="same",
activation="relu")``), so that every pass and rule sees the arguments as if the user had written them.
It does so only where that is exactly what Python does:

- ``name`` is bound once in its scope, by ``name = {"key": value, ...}`` with string keys that are
  identifiers, and every other mention of it in that scope is a ``**name`` in a call of a source-framework
  API (a module-level dict may also be spread in the functions of the module, which must not bind the
  name);
- each value reads nothing that can change between the dict and the call: literals, names of the
  source framework (``tf.nn.gelu``) and calls of them with such arguments, and, for a dict in a
  function, parameters and ``self.`` attributes that the function does not assign;
- no key is also written as a keyword of the call.

The dict is then dead: :func:`finish` removes its statement once every finding is located, unless it
carries a comment or a finding of its own. Anything else stays as written (the rule then says that
``**`` cannot be bound).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import libcst as cst

from fwport.core.bind import NOT_LITERAL, literal_value
from fwport.core.context import FileContext
from fwport.core.names import scan
from fwport.core.position import Layout, node_positions, render
from fwport.core.rewrite import fresh_copy, rewrite

KEY = "core-spread"  # ctx.analyses: the dict statements to remove at finish
_DICTS = re.compile(r"^[ \t]*([A-Za-z_]\w*)[ \t]*=[ \t]*\{", re.M)
_SPREADS = re.compile(r"\*\*[ \t]*([A-Za-z_]\w*)")
_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)


@dataclass
class _Name:
    """What one scope does with one candidate name."""
    binding: cst.Assign | None = None
    bindings: int = 0          # every binding of the name in this scope (assignments, params, for targets...)
    mentions: int = 0          # every Name node spelling it, the binding and the spreads included
    spreads: list[tuple[cst.Call, cst.Arg]] = field(default_factory=list)
    owner: cst.CSTNode | None = None  # the scope: Module, FunctionDef, Lambda or ClassDef


def candidates(source: str) -> set[str]:
    """The names the text both binds to a dict literal and spreads (a cheap look before any walk)."""
    spread = set(_SPREADS.findall(source))
    return {n for n in _DICTS.findall(source) if n in spread} if spread else set()


class _Collect(cst.CSTVisitor):
    def __init__(self, names: set[str]) -> None:
        super().__init__()
        self.names = names
        self.stack: list[cst.CSTNode] = []
        self.info: dict[tuple[int, str], _Name] = {}
        self.scopes: dict[int, cst.CSTNode] = {}
        self.parents: dict[int, int | None] = {}  # scope → the scope it is in
        self.assigned: dict[int, set[str]] = {}   # scope → names and self.attrs assigned in it

    def _scope(self) -> cst.CSTNode:
        return self.stack[-1]

    def _entry(self, name: str) -> _Name:
        scope = self._scope()
        return self.info.setdefault((id(scope), name), _Name(owner=scope))

    def _push(self, node: cst.CSTNode) -> None:
        self.parents[id(node)] = id(self.stack[-1]) if self.stack else None
        self.scopes[id(node)] = node
        self.stack.append(node)

    def visit_Module(self, node: cst.Module) -> None:
        self._push(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        # the name and decorators belong to the enclosing scope; counting them there is conservative
        self._bind_target(node.name)
        self._push(node)
        for p in (*node.params.params, *node.params.kwonly_params, *node.params.posonly_params):
            self._bind_target(p.name, param=True)
        for p in (node.params.star_arg, node.params.star_kwarg):
            if isinstance(p, cst.Param):
                self._bind_target(p.name)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.stack.pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._push(node)

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self.stack.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._bind_target(node.name)
        self._push(node)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.stack.pop()

    def _bind_target(self, target: cst.BaseExpression, param: bool = False) -> None:
        assigned = self.assigned.setdefault(id(self._scope()), set())
        if isinstance(target, cst.Name):
            if not param:
                assigned.add(target.value)
            if target.value in self.names:
                self._entry(target.value).bindings += 1
        elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
            assigned.add(f"{target.value.value}.{target.attr.value}")
        elif isinstance(target, (cst.Tuple, cst.List)):
            for e in target.elements:
                self._bind_target(e.value)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._bind_target(t.target)
        if (len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
                and node.targets[0].target.value in self.names and isinstance(node.value, cst.Dict)):
            self._entry(node.targets[0].target.value).binding = node

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind_target(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind_target(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._bind_target(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bind_target(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._bind_target(node.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind_target(node.target)

    def visit_Global(self, node: cst.Global) -> None:
        for n in node.names:
            self._bind_target(n.name)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        for n in node.names:
            self._bind_target(n.name)

    def visit_Del(self, node: cst.Del) -> None:
        self._bind_target(node.target)

    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        if node.asname is None and isinstance(node.name, cst.Name):
            self._bind_target(node.name)

    def visit_Call(self, node: cst.Call) -> None:
        for a in node.args:
            if a.star == "**" and isinstance(a.value, cst.Name) and a.value.value in self.names:
                self._entry(a.value.value).spreads.append((node, a))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.names:
            self._entry(node.value).mentions += 1


def expand(module: cst.Module, ctx: FileContext, source: str, layout: Layout | None = None) -> cst.Module:
    """``module`` with every ``**name`` this module's docstring allows spelled out (a new tree), or
    ``module`` itself when there is none (``layout``: the translation's, whose renders of the statements
    the lines of the dicts removed are read from serve the passes after this one too)."""
    names = candidates(source)
    if not names:
        return module
    walk = _Collect(names)
    scan(module, walk)
    edits: dict[int, list[cst.Arg]] = {}   # id(call) → its new arguments
    removable: list[tuple[cst.Assign, str, int]] = []
    by_name: dict[str, list[_Name]] = {}
    for (_, name), entry in walk.info.items():
        by_name.setdefault(name, []).append(entry)
    for name, entries in by_name.items():
        for entry in entries:
            if entry.binding is None or entry.bindings != 1:
                continue
            uses = _uses(entry, name, entries, walk)
            if uses is None or entry.mentions != 1 + len(entry.spreads):
                continue
            items = _items(entry.binding.value)
            if items is None or not all(_call_of_source(call, ctx) for call, _ in uses):
                continue
            scope = entry.owner
            if not all(_static(v, ctx, scope, walk) for _, v in items):
                continue
            if any(_clashes(call, arg, items) for call, arg in uses):
                continue
            for call, arg in uses:
                args = edits.get(id(call), list(call.args))
                i = next(k for k, a in enumerate(args) if a is arg)
                args[i:i + 1] = [cst.Arg(fresh_copy(v), keyword=cst.Name(k),
                                         equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
                                         comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                                 for k, v in items]
                args[i + len(items) - 1] = args[i + len(items) - 1].with_changes(comma=arg.comma)
                edits[id(call)] = args
            removable.append((entry.binding, name, len(uses)))
    if not edits:
        return module
    # a dict to remove is emptied of what the rules would translate (its values: an import the output
    # would then not use, a finding on a line that goes) until finish removes it; its lines stay as
    # they are, so that every finding below keeps its line
    gone = [b for b, _, _ in removable if not _has_comment(b) and all("\n" not in render(v) for _, v in _items(b.value))]
    lines = node_positions(module, gone, layout)
    ctx.analyses[KEY] = [(name, _keys(b), lines.get(id(b), (0, 0))[0], render(b).count("\n"))
                         for b, name, _ in removable if b in gone]
    return rewrite(module, _Apply(edits, {id(b) for b in gone}))


def _uses(entry: _Name, name: str, entries: list[_Name], walk: _Collect):
    """The spreads of the dict ``entry`` binds: its own scope's, and for a module-level dict those of
    functions that mention the name only in spreads. None: some mention is something else."""
    uses = list(entry.spreads)
    for other in entries:
        if other is entry or not _inside(other.owner, entry.owner, walk):
            continue  # another scope's variable of the same name
        if not isinstance(entry.owner, cst.Module):
            return None  # a nested function or class mentions it too: conservatively left alone
        if other.bindings or other.mentions != len(other.spreads):
            return None
        uses += other.spreads
    return uses


def _inside(scope: cst.CSTNode, outer: cst.CSTNode, walk: _Collect) -> bool:
    at = walk.parents.get(id(scope))
    while at is not None:
        if at == id(outer):
            return True
        at = walk.parents.get(at)
    return False


def _items(d: cst.Dict) -> list[tuple[str, cst.BaseExpression]] | None:
    out: list[tuple[str, cst.BaseExpression]] = []
    for e in d.elements:
        if not isinstance(e, cst.DictElement) or not isinstance(e.key, cst.SimpleString):
            return None
        key = literal_value(e.key, NOT_LITERAL)
        if not isinstance(key, str) or not key.isidentifier() or key in {k for k, _ in out}:
            return None
        out.append((key, e.value))
    return out or None


def _keys(b: cst.Assign) -> tuple[str, ...]:
    return tuple(k for k, _ in _items(b.value) or ())


def _call_of_source(call: cst.Call, ctx: FileContext) -> bool:
    q = ctx.imports.resolve(call.func)
    return q is not None and ctx.imports.is_source(q)


def _clashes(call: cst.Call, arg: cst.Arg, items) -> bool:
    written = {a.keyword.value for a in call.args if a.keyword is not None}
    return bool(written & {k for k, _ in items}) or any(a.star == "**" for a in call.args if a is not arg)


def _static(v: cst.BaseExpression, ctx: FileContext, scope: cst.CSTNode, walk: _Collect) -> bool:
    """Whether ``v`` reads the same value wherever in ``scope`` it is evaluated (see the docstring)."""
    if literal_value(v, NOT_LITERAL) is not NOT_LITERAL:
        return True
    assigned = walk.assigned.get(id(scope), set())
    if isinstance(v, (cst.Name, cst.Attribute)):
        q = ctx.imports.resolve(v)
        if q is not None and ctx.imports.is_source(q):
            return True
        if isinstance(scope, cst.FunctionDef):
            if isinstance(v, cst.Name):
                params = {p.name.value for p in (*scope.params.params, *scope.params.kwonly_params,
                                                 *scope.params.posonly_params)}
                return v.value in params and v.value not in assigned
            if isinstance(v.value, cst.Name) and v.value.value == "self":
                return f"self.{v.attr.value}" not in assigned
        return False
    if isinstance(v, cst.Call):
        return (_static(v.func, ctx, scope, walk) and not isinstance(v.func, cst.Call)
                and all(not a.star and _static(a.value, ctx, scope, walk) for a in v.args))
    if isinstance(v, (cst.Tuple, cst.List)):
        return all(isinstance(e, cst.Element) and _static(e.value, ctx, scope, walk) for e in v.elements)
    if isinstance(v, cst.BinaryOperation):
        return _static(v.left, ctx, scope, walk) and _static(v.right, ctx, scope, walk)
    if isinstance(v, cst.UnaryOperation):
        return _static(v.expression, ctx, scope, walk)
    return False


def _has_comment(b: cst.Assign) -> bool:
    return "#" in render(b)


class _Apply(cst.CSTTransformer):
    def __init__(self, edits: dict[int, list[cst.Arg]], emptied: set[int]) -> None:
        super().__init__()
        self.edits, self.emptied = edits, emptied

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        if id(original) not in self.emptied:
            return updated
        d = updated.value
        return updated.with_changes(value=d.with_changes(
            elements=[e.with_changes(value=cst.Name("None")) for e in d.elements]))

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        args = self.edits.get(id(original))
        if args is None:
            return updated
        # the call's other arguments may hold calls rewritten below: take them from ``updated``
        old = list(original.args)
        out = []
        for a in args:
            k = next((i for i, o in enumerate(old) if o is a), None)
            out.append(updated.args[k] if k is not None else a)
        return updated.with_changes(args=out)


def finish(module: cst.Module, ctx: FileContext) -> cst.Module:
    """Remove the dicts :func:`expand` spelled out everywhere, unless a finding sits on their lines."""
    planned = ctx.analyses.pop(KEY, None)
    if not planned:
        return module
    taken: Counter = Counter()
    for name, keys, line, extra in planned:
        if line and any(f.line and line <= f.line <= line + extra for f in ctx.findings):
            continue
        taken[(name, keys)] += 1
    if not taken:
        return module
    return rewrite(module, _Remove(taken))


class _Remove(cst.CSTTransformer):
    def __init__(self, taken: Counter) -> None:
        super().__init__()
        self.taken = taken

    def leave_SimpleStatementLine(self, original, updated):
        if len(updated.body) == 1 and isinstance(updated.body[0], cst.Assign):
            b = updated.body[0]
            t = b.targets[0].target if len(b.targets) == 1 else None
            if isinstance(t, cst.Name) and isinstance(b.value, cst.Dict) and self.taken[(t.value, _keys(b))] > 0:
                self.taken[(t.value, _keys(b))] -= 1
                if not any(line.comment for line in updated.leading_lines):
                    return cst.RemovalSentinel.REMOVE
        return updated
