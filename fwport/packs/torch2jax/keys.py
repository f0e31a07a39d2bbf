"""Draws from PyTorch's global generator where no jax.random key will be in scope (read-only planner).

``torch.randn(3)`` becomes ``jax.random.normal(key, (3,))``: the key is the module's in ``__init__`` and a
module method's own (passes/modules.py threads them), the root key ``torch.manual_seed`` becomes
(passes/training.py), or a ``key`` the source already names. A draw in code none of those reach (a script's
``test()`` function, a Dataset filled with random tensors, top-level code of a file with no seed) would read a
``key`` that nothing defines: a NameError when it runs, not a translation. Such draws are listed here by node
and their call transforms (ops.py) refuse them with an error that says what to write.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.names import find_all, scan

KEYLESS = "torch2jax.keyless"  # ctx.analyses: ids of draw calls no key reaches
#: the call transforms that draw from the key in scope (rules/torch2jax: emit.transform)
DRAWING_TRANSFORMS = frozenset({"random", "random-like", "keyed", "multinomial", "randint"})


class _KeyBindings(cst.CSTVisitor):
    """The places ``node`` (a function, a lambda or the module) binds ``key`` itself: a parameter, an assignment,
    a loop or comprehension target, a with's as-name (a nested function's are its own)."""

    def __init__(self, node: cst.CSTNode):
        super().__init__()
        self.node = node
        self.found: list[cst.CSTNode] = []

    def visit_Param(self, n: cst.Param) -> None:
        if n.name.value == "key":
            self.found.append(n)

    def _bound(self, n, target: cst.BaseExpression) -> None:
        if any(isinstance(t, cst.Name) and t.value == "key" for t in _targets(target)):
            self.found.append(n)

    def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
        self._bound(n, n.target)

    def visit_For(self, n: cst.For) -> None:
        self._bound(n, n.target)

    visit_CompFor = visit_For

    def visit_AsName(self, n: cst.AsName) -> None:
        self._bound(n, n.name)

    def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
        return n is self.node


def _binds_key(node: cst.CSTNode) -> bool:
    """Whether ``key`` is a parameter of ``node`` (a function or lambda) or assigned in its own body."""
    v = _KeyBindings(node)
    scan(node, v)
    return bool(v.found)


def _targets(t: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(t, (cst.Tuple, cst.List)):
        return [x for e in t.elements for x in _targets(e.value)]
    if isinstance(t, cst.StarredElement):
        return _targets(t.value)
    return [t]


class _Draws(cst.CSTVisitor):
    """The draw calls (qualified names in ``draws``) outside the module classes with no ``key`` bound in an
    enclosing function or lambda: ``keyless`` gets their ids."""

    def __init__(self, ctx, draws: set[str], module_classes: set[str]):
        super().__init__()
        self.ctx, self.draws, self.module_classes = ctx, draws, module_classes
        self.scopes: list[bool] = []  # per enclosing function: does a key reach it?
        self.keyless: set[int] = set()

    def visit_ClassDef(self, n: cst.ClassDef) -> bool:
        return n.name.value not in self.module_classes  # the modules pass keys what its module classes draw

    def visit_FunctionDef(self, n: cst.FunctionDef) -> None:
        self.scopes.append(_binds_key(n))

    def leave_FunctionDef(self, n: cst.FunctionDef) -> None:
        self.scopes.pop()

    def visit_Lambda(self, n: cst.Lambda) -> None:
        self.scopes.append(any(p.name.value == "key" for p in n.params.params))

    def leave_Lambda(self, n: cst.Lambda) -> None:
        self.scopes.pop()

    def visit_Call(self, n: cst.Call) -> None:
        if not any(self.scopes) and self.ctx.imports.resolve(n.func) in self.draws:
            self.keyless.add(id(n))


def plan(module: cst.Module, ctx) -> cst.Module:
    if _mentions_seed(module) or _binds_key(module):
        return module  # passes/training.py makes a root key where the seed is set; or the file defines its own
    draws = {n for n, r in ctx.pack.by_name.items() if r.emit.get("transform") in DRAWING_TRANSFORMS}
    module_classes = {s.name.value for s in module.body if isinstance(s, cst.ClassDef)
                      and any(ctx.imports.resolve(b.value) == "torch.nn.Module" for b in s.bases)}
    v = _Draws(ctx, draws, module_classes)
    scan(module, v)
    if v.keyless:
        ctx.analyses[KEYLESS] = v.keyless
    return module


def _mentions_seed(module: cst.Module) -> bool:
    return any(isinstance(n, cst.Attribute) and n.attr.value == "manual_seed"
               or isinstance(n, cst.Name) and n.value == "manual_seed"
               for n in find_all(module, cst.Attribute) + find_all(module, cst.Name))


def keyless(m, ctx) -> bool:
    """Whether the mapped draw ``m`` is in code no key reaches: then ``m`` is failed with the reason."""
    if id(m.call) not in ctx.analyses.get(KEYLESS, ()) and id(m.node) not in ctx.analyses.get(KEYLESS, ()):
        return False
    m.fail(ctx, "unsupported-construct", f"{m.rule.names[0]} draws from PyTorch's global generator, and no jax.random "
           "key reaches this code (it is outside the module classes, the file sets no torch.manual_seed, and no `key` "
           "is defined here): give the function a `key` argument (callers pass jax.random.key(seed) or a split of "
           "theirs), split it once per draw (k1, k2 = jax.random.split(key)) and draw from the splits")
    return True
