"""Which target modules hold a Sequential member's output, from the line structure of the two files.

Passes keep line structure: a Keras layer written on one line of a ``keras.Sequential([...])`` list
becomes the modules on the same line (relative to the call) of the ``nn.Sequential(...)``; fwport's
own ``# fwport:`` comment lines are the only lines a translation adds inside a call. So the modules on
a member's line are its span, and the last of them holds its output. Used only to name the first
diverging layer; weights never move by this (they move by ``LayerRecord``).
"""
from __future__ import annotations

import ast


def _calls(tree: ast.AST, suffix: str) -> list[ast.Call]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name == suffix:
                out.append(node)
    return sorted(out, key=lambda c: (c.lineno, c.col_offset))


def _outermost(calls: list[ast.Call]) -> list[ast.Call]:
    """The calls not nested in another of them (a SeparableConv2D is an nn.Sequential inside the model's)."""
    inner = {id(n) for c in calls for a in c.args for n in ast.walk(a) if isinstance(n, ast.Call)}
    return [c for c in calls if id(c) not in inner]


def _scope_node(tree: ast.Module, scope: str) -> ast.AST | None:
    head = scope.split(".")[0]
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == head:
            return node
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == head for t in node.targets):
            return node
    return None


def _elements(call: ast.Call) -> list[ast.expr] | None:
    lst = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "layers"), None)
    if isinstance(lst, (ast.List, ast.Tuple)):
        return list(lst.elts)
    return None


def _func_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        f = node.func
        return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return ""


def sequential_spans(original: str, translated: str, scope: str, attr: str = "",
                     holders: dict[int, str] | None = None) -> list[tuple[int, list[int] | None]] | None:
    """For the ``n``-th Sequential of ``scope`` (the one assigned to ``self.<attr>`` when given):
    [(keras layer index, [target module indices])] in Keras order, or None when they cannot be aligned.

    Several members written on one line (``Sequential([Input(...), Dense(4), Dense(2)])``) share that line's
    modules: each gets one module when the line has as many modules as members and every member whose weights a
    record places (``holders``: keras index → the module path holding its weights) is at its own module; else
    only the line's last member is aligned (its output is the line's last module) and the others get None: their
    outputs are not compared (the modules a member became cannot be told apart on the line)."""
    try:
        otree, ttree = ast.parse(original), ast.parse(translated)
    except SyntaxError:
        return None
    onode, tnode = _scope_node(otree, scope), _scope_node(ttree, scope)
    if onode is None or tnode is None:
        return None
    ocalls, tcalls = _outermost(_calls(onode, "Sequential")), _outermost(_calls(tnode, "Sequential"))
    if attr:
        def pick(calls, node):
            for a in ast.walk(node):
                if isinstance(a, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == attr for t in a.targets):
                    if isinstance(a.value, ast.Call) and a.value in calls:
                        return [a.value]
            return []
        ocalls, tcalls = pick(ocalls, onode), pick(tcalls, tnode)
    if len(ocalls) != 1 or len(tcalls) != 1:
        return None
    ocall, tcall = ocalls[0], tcalls[0]
    oel = _elements(ocall)
    if oel is None:
        return None
    tel = list(tcall.args)
    tlines = translated.splitlines()

    def rel_t(line: int) -> int:  # relative line in the translation, fwport comment lines removed
        added = sum(1 for ln in range(tcall.lineno, line) if tlines[ln - 1].strip().startswith("# fwport:"))
        return line - tcall.lineno - added

    by_line: dict[int, list[int]] = {}
    for i, e in enumerate(tel):
        by_line.setdefault(rel_t(e.lineno), []).append(i)
    members: list[tuple[int, int]] = []  # (keras index, relative line)
    for e in oel:
        if _func_name(e) in ("Input", "InputLayer"):
            continue
        members.append((len(members), e.lineno - ocall.lineno))
    on_line: dict[int, list[int]] = {}
    for k, line in members:
        on_line.setdefault(line, []).append(k)
    spans: list[tuple[int, list[int] | None]] = []
    for k, line in members:
        mods, shared = by_line.get(line, []), on_line[line]
        if len(shared) == 1:
            spans.append((k, mods))
            continue
        one_each = len(mods) == len(shared) and all(
            holders is None or k2 not in holders or holders[k2].split(".")[0] == str(m)
            for k2, m in zip(shared, mods))
        if one_each:
            spans.append((k, [mods[shared.index(k)]]))
        else:
            spans.append((k, mods if k == shared[-1] else None))
    return spans
