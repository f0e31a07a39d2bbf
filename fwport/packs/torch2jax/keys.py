"""Draws from PyTorch's global generator where no jax.random key is in scope (read-only planner).

``torch.randn(3)`` becomes ``jax.random.normal(key, (3,))``: the key is the module's in ``__init__`` and a
module method's own (passes/modules.py threads them), the root key ``torch.manual_seed`` becomes
(passes/training.py), or a ``key`` the source already names. A draw in code none of those reach (a script's
``test()`` function, a Dataset filled with random tensors, top-level code of a file with no seed) gets a root
key of its scope, as a JAX user writes one: ``key = jax.random.key(0)`` where the function starts (at module
level: above the first statement that draws or builds a model), and each statement that draws splits it first,
``key, subkey = jax.random.split(key)`` (several draws: ``key, subkey1, subkey2 = jax.random.split(key, 3)``),
so that a loop's body splits anew at every iteration, as PyTorch's generator moves on; a comprehension takes
one key per element (passes/modules.py's _AssignKeys). One draw in a scope that nothing else keys uses the
root key itself. A warning says the numbers differ from PyTorch's and the seed is fixed at 0. A drawing function
the file calls only by name, where each call can take a split, takes ``*, key`` instead (_threaded). After
torch.manual_seed's root key (training.py), the draws of that scope split it the same way (_SeededDraws).

Where no key can be made exactly (a lambda, a while loop's test, a default argument, a class body, a
comprehension other than ``[... for _ in range(n)]``, a Dataset's ``__getitem__`` drawing anew at each access)
the draw's call transform (ops.py) refuses it with an error that says what to write.

Plans (applied by the rule pass, after the draws are translated): an edit of each block (a function body, a
loop's or an if's block, the module) holding statements that draw.
"""
from __future__ import annotations

import re

import libcst as cst

from fwport.core.direction import Trigger
from fwport.core.engine import statement
from fwport.core.finding import Severity
from fwport.core.names import dotted_text, find_all, scan

#: the text that runs this planner (passes/__init__.py): a draw's name (or a fill fills.py makes a draw)
#: (or a dropout: a model in training mode called after torch.manual_seed takes keys split per statement)
TRIGGER = Trigger(r"\brand(?:n|int|perm|n_like|_like|int_like)?\b|\bmultinomial\b|\bnormal\b|\bbernoulli\b"
                  r"|\.(?:uniform_|normal_)\s*\(|[Dd]ropout", "rand", "multinomial", "normal", "bernoulli", "uniform_",
                  "ropout")
#: ctx.analyses: id of the split a model call takes per example (``jax.vmap(model)(x, key=jax.random.split(key,
#: x.shape[0]))``, training.py's call_key) where no key was in scope → the error to report if none can be made
MODEL_DRAWS = "torch2jax.model-draws"
#: ctx.analyses: id of the split a model call takes per example in a seeded scope (its key: torch.manual_seed's,
#: training.py's call_key) → (the split, the model's text, whether the scope calls it again, the call): the
#: statement holding it splits the key first (_SeededDraws), else a warning that every such call draws alike
SEEDED_MODEL_DRAWS = "torch2jax.seeded-model-draws"
KEYLESS = "torch2jax.keyless"  # ctx.analyses: id of a draw call no key can reach → why (its refusal)
ROOTED = "torch2jax.rooted"  # ctx.analyses: ids of the draw calls keyed from a root key made here
#: the call transforms that draw from the key in scope (rules/torch2jax: emit.transform)
DRAWING_TRANSFORMS = frozenset({"random", "random-like", "keyed", "multinomial", "randint"})
#: methods a data loader calls once per item: a fixed root key would give every item the same numbers
PER_ITEM = frozenset({"__getitem__", "__iter__", "__next__"})
#: the names of the keys fwport writes (a split per statement; a comprehension's element keys)
_KEY_NAME = re.compile(r"subkey\d*|k+\d*")
#: the comment on a root key fwport makes
ROOT_COMMENT = "# fwport: PyTorch drew from its global generator here; seed fixed at 0"


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


_COMPS = (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)


class _Draws(cst.CSTVisitor):
    """The draw calls (qualified names in ``draws``) outside the module classes with no ``key`` bound in an
    enclosing function or lambda: ``found`` those a root key of their scope can key (the call, its scope, the
    statement it belongs to, that statement's block, the top-level statement around it), ``keyless`` the others
    with the reason."""

    def __init__(self, ctx, draws: set[str], module_classes: set[str], calls: frozenset[str] = frozenset()):
        super().__init__()
        self.ctx, self.draws, self.module_classes = ctx, draws, module_classes
        self.calls = calls  # functions of the file that draw: their calls are found too (``called``), with any reason
        self.called: list[tuple] = []  # (call, scope, statement, block, top-level statement, why not keyable)
        self.scopes: list[tuple[cst.CSTNode, bool]] = []  # enclosing functions, lambdas, classes: (node, keyed)
        self.stmts: list[cst.CSTNode] = []  # open statements (an elif: its if's)
        self.blocks: list[cst.CSTNode] = []  # open blocks (the module, indented blocks, one-line suites)
        self.comps: list[tuple[cst.CSTNode, frozenset[int]]] = []  # open comprehensions, the calls of their element
        self.keyless: dict[int, str] = {}
        self.found: list[tuple] = []

    # scopes
    def visit_Module(self, n) -> None:
        self.blocks.append(n)

    def visit_ClassDef(self, n: cst.ClassDef) -> bool:
        if n.name.value in self.module_classes:
            return False  # the modules pass keys what its module classes draw
        self.scopes.append((n, False))
        self.stmts.append(n)
        return True

    def leave_ClassDef(self, n) -> None:
        self.scopes.pop()
        self.stmts.pop()

    def visit_FunctionDef(self, n: cst.FunctionDef) -> None:
        self.scopes.append((n, _binds_key(n)))
        self.stmts.append(n)

    def leave_FunctionDef(self, n) -> None:
        self.scopes.pop()
        self.stmts.pop()

    def visit_Lambda(self, n: cst.Lambda) -> None:
        self.scopes.append((n, any(p.name.value == "key" for p in n.params.params)))

    def leave_Lambda(self, n) -> None:
        self.scopes.pop()

    # statements and blocks
    def _open(self, n) -> None:
        self.stmts.append(n)

    def _close(self, n) -> None:
        self.stmts.pop()

    visit_SimpleStatementLine = visit_For = visit_While = visit_With = visit_Try = visit_TryStar = visit_Match = _open
    leave_SimpleStatementLine = leave_For = leave_While = leave_With = leave_Try = leave_TryStar = leave_Match = _close

    def visit_If(self, n: cst.If) -> None:
        parent = self.stmts[-1] if self.stmts else None
        # an elif belongs to its if's statement: a split above the if keys its test too
        self.stmts.append(parent if isinstance(parent, cst.If) and _elif_of(parent, n) else n)

    leave_If = _close

    def _block(self, n) -> None:
        self.blocks.append(n)

    def _unblock(self, n) -> None:
        self.blocks.pop()

    visit_IndentedBlock = visit_SimpleStatementSuite = _block
    leave_IndentedBlock = leave_SimpleStatementSuite = _unblock

    def _comp(self, n) -> None:
        self.comps.append((n, frozenset(map(id, find_all(n.elt if not isinstance(n, cst.DictComp) else n, cst.Call)))))

    def _uncomp(self, n) -> None:
        self.comps.pop()

    visit_ListComp = visit_GeneratorExp = visit_SetComp = visit_DictComp = _comp
    leave_ListComp = leave_GeneratorExp = leave_SetComp = leave_DictComp = _uncomp

    def visit_Call(self, n: cst.Call) -> None:
        if id(n) in self.ctx.analyses.get(MODEL_DRAWS, {}):  # a model call's keys, split from the scope's key
            why = None if any(k for _, k in self.scopes) else self._why_not(n)
            if why is not None:
                _refuse_model_call(self.ctx, id(n), why)
                return
            if not any(k for _, k in self.scopes):
                scope = next((s for s, _ in reversed(self.scopes) if isinstance(s, cst.FunctionDef)), None)
                self.found.append((n, scope, self.stmts[-1], self.blocks[-1], self.stmts[0]))
            return
        if isinstance(n.func, cst.Name) and n.func.value in self.calls:
            why = "a key of its own" if any(k for _, k in self.scopes) else self._why_not(n)
            scope = next((s for s, _ in reversed(self.scopes) if isinstance(s, cst.FunctionDef)), None)
            self.called.append((n, scope, self.stmts[-1], self.blocks[-1], self.stmts[0], why))
            return
        if any(k for _, k in self.scopes) or self.ctx.imports.resolve(n.func) not in self.draws:
            return
        why = self._why_not(n)
        if why is not None:
            self.keyless[id(n)] = why
            return
        scope = next((s for s, _ in reversed(self.scopes) if isinstance(s, cst.FunctionDef)), None)
        self.found.append((n, scope, self.stmts[-1], self.blocks[-1], self.stmts[0]))

    def _why_not(self, n: cst.Call) -> str | None:
        """Why no root key can key the draw ``n`` exactly (None: one can)."""
        inner = self.scopes[-1][0] if self.scopes else None
        if isinstance(inner, cst.Lambda):
            return ("it is inside a lambda, which cannot split a key of its own at each call: write a def that takes a "
                    "`key` argument and draws from it")
        if isinstance(inner, cst.ClassDef):
            return ("it is in a class body, run once when the class is defined: draw it where it is used, from a key "
                    "split there")
        if isinstance(inner, cst.FunctionDef) and inner.name.value in PER_ITEM \
                and any(isinstance(s, cst.ClassDef) for s, _ in self.scopes):
            return (f"{inner.name.value} draws anew at each access in PyTorch, where a root key made in it would give "
                    "every item the same numbers: give the dataset a key (a `key` argument of __init__, kept as "
                    f"self.key) and draw each item from jax.random.fold_in(self.key, index), a new key per index")
        stmt = self.stmts[-1] if self.stmts else None
        if isinstance(self.blocks[-1], cst.SimpleStatementSuite):
            return ("it is on the line of its block's header (`if c: x = torch.randn(3)`): put the statement on a "
                    "line of its own and translate again")
        if isinstance(stmt, cst.While):
            return ("it is in a while loop's test, evaluated at each iteration: draw it in the loop's body (a key "
                    "split there) and test the value")
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            return ("it is evaluated where the function or class is defined (a default argument, a decorator, a base): "
                    "draw it in the body, or pass the value in")
        if stmt is not None and not isinstance(stmt, (cst.SimpleStatementLine, cst.If, cst.For, cst.With)):
            return "it is in the header of a statement fwport does not key: draw it on a line of its own above"
        for comp, elt in self.comps:
            if not _keyable_comp(comp) or id(n) not in elt:
                return ("it is in a comprehension other than `[... for _ in range(n)]` with the draws in its element "
                        "(a filter, several `for`, another iterable, a dict): write a loop, where fwport splits a key "
                        "per iteration, or split one per element by hand (jax.random.split(key, len(xs)))")
            taken = sorted({x.value for x in find_all(comp, cst.Name) if _KEY_NAME.fullmatch(x.value)})
            if taken:
                return (f"the comprehension reads {taken[0]}, a name fwport gives the keys of its elements: rename it "
                        "and translate again")
        return None


def will_key(module: cst.Module, text: str) -> bool:
    """Whether this planner makes the root keys of the scopes where a draw of the file finds no key (a file that
    draws, with no torch.manual_seed and no module-level ``key``): training.py's call_key then leaves a model's
    keys to it (MODEL_DRAWS)."""
    return bool(TRIGGER.search(text)) and not _mentions_seed(module) and not _binds_key(module)


def _refuse_model_call(ctx, split: int, why: str) -> None:
    """The error for a model call whose keys (MODEL_DRAWS: the id of its split) no root key can give."""
    done = ctx.analyses.setdefault(MODEL_DRAWS + ".done", set())
    if split in done:
        return
    done.add(split)
    node, name = ctx.analyses[MODEL_DRAWS][split]  # (the split: a node of this planner's input, which locates it)
    ctx.report(Severity.ERROR, "unsupported-construct", f"{name} draws random numbers (torch.randn_like or the like, in "
               f"inference too) and takes a key per call; no jax.random key can be made for it here: {why}; pass {name.split(' ')[0]}(..., key=...) one per example", node)


def _elif_of(parent: cst.If, n: cst.If) -> bool:
    return parent.orelse is n


def _keyable_comp(comp) -> bool:
    """``[... for x in range(n)]`` (a list, set or generator; one ``for``, no filter): passes/modules.py's
    _AssignKeys gives each element its keys."""
    if isinstance(comp, cst.DictComp):
        return False
    f, it = comp.for_in, comp.for_in.iter
    return f.inner_for_in is None and not f.ifs and isinstance(it, cst.Call) and dotted_text(it.func) == "range" \
        and len(it.args) == 1 and it.args[0].keyword is None and not it.args[0].star


class _SeededDraws(_Draws):
    """In a scope (the module, a function) whose root key is torch.manual_seed's translation, ``key =
    jax.random.key(s)`` (passes/training.py), the draws after it in the scope's own code: each statement splits
    that key too, where every draw read the same key before (the same numbers in every draw and iteration).
    Draws elsewhere read the key as before.

    A root key reaches the rest of the block it is bound in and the blocks inside it, as modules.py's _RootKey
    reads it: one bound in ``if __name__ == "__main__":`` does not reach the module's statements outside that
    block (run when the file is imported, where the guard's code is not). The module's draws that no seeded
    root key reaches are ``unrooted``: the module then takes a root key of its own (_plan)."""

    def __init__(self, ctx, draws: set[str], module_classes: set[str]):
        super().__init__(ctx, draws, module_classes)
        self.root_fn = ctx.spell_text("jax.random.key")
        self.rooted: set[int] = set()  # the blocks past a root key bound in them (ids)
        self.starts: list[int] = [0]  # per open function: where its blocks start in self.blocks
        self.unrooted: list[tuple] = []  # the module's own draws no seeded root key reaches

    def visit_FunctionDef(self, n: cst.FunctionDef) -> None:
        super().visit_FunctionDef(n)
        self.starts.append(len(self.blocks))

    def leave_FunctionDef(self, n) -> None:
        super().leave_FunctionDef(n)
        self.starts.pop()

    def _scope(self):
        inner = self.scopes[-1][0] if self.scopes else None
        return inner if inner is None or isinstance(inner, cst.FunctionDef) else False

    def _rooted(self) -> bool:
        """Whether a root key bound earlier in one of the open blocks of the innermost function (or the module)
        reaches here."""
        return any(id(b) in self.rooted for b in self.blocks[self.starts[-1]:])

    def visit_Assign(self, n: cst.Assign) -> None:
        scope = self._scope()
        if scope is not False and len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Name) \
                and n.targets[0].target.value == "key" and isinstance(n.value, cst.Call) \
                and dotted_text(n.value.func) == self.root_fn:
            self.rooted.add(id(self.blocks[-1]))

    def visit_Call(self, n: cst.Call) -> None:
        scope = self._scope()
        model = id(n) in self.ctx.analyses.get(SEEDED_MODEL_DRAWS, {})  # a model call's keys (training.py's call_key)
        unseeded_model = id(n) in self.ctx.analyses.get(MODEL_DRAWS, {})  # (one left to the module's own root key)
        if scope is False or not model and not unseeded_model and self.ctx.imports.resolve(n.func) not in self.draws \
                or self._why_not(n) is not None:
            return
        entry = (n, scope, self.stmts[-1], self.blocks[-1], self.stmts[0])
        if self._rooted():
            self.found.append(entry)
        elif not model and scope is None and not any(k for _, k in self.scopes):
            self.unrooted.append(entry)


def plan(module: cst.Module, ctx) -> cst.Module:
    try:
        return _plan(module, ctx)
    finally:
        for split in ctx.analyses.get(MODEL_DRAWS, {}):
            if split not in ctx.analyses.get(ROOTED, ()):
                _refuse_model_call(ctx, split, "a root key is made only where the file draws and nothing seeds it")
        _say_seeded_model_draws(ctx)


def _say_seeded_model_draws(ctx) -> None:
    """The finding of each model call keyed in a seeded scope (SEEDED_MODEL_DRAWS): an info where its statement splits
    the scope's key first (ROOTED), else a warning where the scope calls it again (the same key read as it is)."""
    planned = ctx.analyses.get(ROOTED, ())
    for split, (node, name, again) in ctx.analyses.get(SEEDED_MODEL_DRAWS, {}).items():
        text = dotted_text(node.func) + "(key, ...)"
        if split in planned:
            ctx.report(Severity.INFO, "key-added", f"{name} draws random numbers: called with key={text}, one key per "
                       "example, split from the scope's key (torch.manual_seed's) split first for the statement (key, "
                       "subkey = jax.random.split(key)): each call and iteration draws anew, as PyTorch's", node)
        elif again:
            ctx.report(Severity.WARNING, "key-added", f"{name} draws random numbers: called with {text} from this "
                       "scope's key as it is, the same at every call here (several calls, or one in a loop), which then "
                       "draw the same numbers where PyTorch draws new ones: split the key before each call (key, subkey "
                       "= jax.random.split(key)) and pass subkey", node)
        else:
            ctx.report(Severity.INFO, "key-added", f"{name} draws random numbers: called with key={text} from the "
                       "scope's key", node)


def _plan(module: cst.Module, ctx) -> cst.Module:
    draws = {n for n, r in ctx.pack.by_name.items() if r.emit.get("transform") in DRAWING_TRANSFORMS}
    module_classes = {s.name.value for s in module.body if isinstance(s, cst.ClassDef)
                      and any(ctx.imports.resolve(b.value) == "torch.nn.Module" for b in s.bases)}
    if _mentions_seed(module) or _binds_key(module):
        # passes/training.py makes a root key where the seed is set (or the file defines its own): the draws after
        # it in that scope split it
        s = _SeededDraws(ctx, draws, module_classes)
        scan(module, s)
        if s.unrooted and not _binds_key_outside_blocks(module):
            # module-level draws no seeded root key reaches (the seed is set in `if __name__ == "__main__":`, and
            # the file's top-level code draws outside it): the module takes a root key of its own, above its first
            # draw or model; the seed's key, where it runs, replaces it for the code after it
            ctx.analyses.setdefault(ROOTED, set()).update(id(f[0]) for f in s.unrooted)
            mod = [f for f in s.found if f[1] is None]
            _plan_roots(module, s.unrooted + mod, frozenset(), ctx)
            s.found = [f for f in s.found if f[1] is not None]
        if s.found:
            planned = _plan_roots(module, s.found, frozenset(), ctx, seeded=True)
            seeded = ctx.analyses.get(SEEDED_MODEL_DRAWS, {})
            ctx.analyses.setdefault(ROOTED, set()).update(
                id(f[0]) for f in s.found if id(f[0]) in seeded and id(f[1]) in planned)
        return module
    v = _Draws(ctx, draws, module_classes)
    scan(module, v)
    if v.keyless:
        ctx.analyses[KEYLESS] = v.keyless
    if v.found:
        ctx.analyses[ROOTED] = {id(f[0]) for f in v.found}
        threaded, called = _threaded(module, v.found, ctx, draws, module_classes)
        _plan_roots(module, v.found + called, threaded, ctx)
    return module


def _threaded(module: cst.Module, found: list[tuple], ctx, draws, module_classes) -> tuple[frozenset[str], list]:
    """The file's functions that draw (or call such a function) and that the file calls, by name, only where a key
    can be split for the call (``batch_x, batch_y = get_batch()`` in a loop): they take ``*, key`` and every
    call passes a split of the caller's key, as a JAX user writes it, where a root key of their own would give
    every call the same numbers. A function used any other way (as a value, from a module class, in a lambda)
    keeps a root key of its own. Returns them and their calls (as ``found``'s entries)."""
    fns = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef) and not s.decorators
           and not s.asynchronous and ctx.plans.get(s) is None}
    refs: dict[str, int] = {}
    for n in find_all(module, cst.Name):
        if n.value in fns:
            refs[n.value] = refs.get(n.value, 0) + 1
    threaded: frozenset[str] = frozenset()
    called: list[tuple] = []
    for _ in range(len(fns) + 1):
        needing = frozenset(e[1].name.value for e in found + called
                            if e[1] is not None and fns.get(e[1].name.value) is e[1])
        v = _Draws(ctx, draws, module_classes, needing)
        scan(module, v)
        ok = frozenset(n for n in needing if refs.get(n, 0) - 1 == sum(c[0].func.value == n for c in v.called) > 0
                       and not _collides(fns[n]) and all(c[5] is None and not _collides(c[1] or module)
                                                         for c in v.called if c[0].func.value == n))
        now = [c[:5] for c in v.called if c[0].func.value in ok]
        if ok == threaded:
            return threaded, now
        threaded, called = ok, now
    return frozenset(), []  # (never settled: every function keeps a root key of its own)


def _binds_key_outside_blocks(module: cst.Module) -> bool:
    """Whether the module's own top-level statements (not those in an indented block) bind ``key``."""
    return any(isinstance(s, cst.SimpleStatementLine) and _binds_key(s) for s in module.body)


def will_key_module(module: cst.Module, text: str) -> bool:
    """Whether the module's own top-level draws take a root key of the module's (_SeededDraws.unrooted): a file
    that draws and seeds torch only inside a block or a function (``main()``'s torch.manual_seed), with no
    top-level ``key``: training.py's call_key leaves a module-level model call's keys to it (MODEL_DRAWS)."""
    return bool(TRIGGER.search(text)) and _mentions_seed(module) and not _binds_key_outside_blocks(module) \
        and not any(isinstance(s, cst.SimpleStatementLine) and _mentions_seed(s) for s in module.body)


def _mentions_seed(module: cst.Module) -> bool:
    return any(isinstance(n, cst.Attribute) and n.attr.value == "manual_seed"
               or isinstance(n, cst.Name) and n.value == "manual_seed"
               for n in find_all(module, cst.Attribute) + find_all(module, cst.Name))


# --- the root keys: planned per scope, written by the rule pass's edits of the blocks ----------------------------

class _Scope:
    """One function (or the module) whose draws a root key made in it keys."""

    def __init__(self, node, first: cst.Call, direct: bool, made: frozenset[str], cls: str | None):
        self.node, self.first, self.direct, self.made, self.cls = node, first, direct, made, cls
        self.used = False  # a block of it split the key (its draws were translated)
        self.given = False  # a function whose callers pass the key (no root key of its own)
        self.seeded = False  # its root key is torch.manual_seed's (training.py): not made here
        self.models = False  # (seeded) model calls of it take keys split per statement (SEEDED_MODEL_DRAWS)


def _plan_roots(module: cst.Module, found: list[tuple], threaded: frozenset[str], ctx, seeded: bool = False) -> set[int]:
    """Plans the edits of the blocks of each scope of ``found``; returns the ids of the scopes planned (found's
    second items: None for the module's)."""
    from fwport.packs.torch2jax.passes.modules import OUTSIDE, _kwonly, _site, keyed_layer
    site = _site(threaded, frozenset(), frozenset())
    # what a finishing step gives a key split from the scope's root key (a model of the file built there: modules.py's
    # _RootKey; a train_step's key: training.py) follows the draws: then the root key is split for the draws too
    made = frozenset({s.name.value for s in module.body if isinstance(s, cst.ClassDef)} | threaded
                     | set(ctx.analyses.get(OUTSIDE, {}).get("builders", ())))
    keyed_steps = {f for f, _ in ctx.analyses.get("torch2jax.keyed-steps", ())}
    methods = {id(f): c.name.value for c in find_all(module, cst.ClassDef) for f in c.body.body
               if isinstance(f, cst.FunctionDef)}
    by_scope: dict[int, list[tuple]] = {}
    for f in found:
        by_scope.setdefault(id(f[1]), []).append(f)
    blocks: dict[int, tuple[cst.CSTNode, _Scope, bool]] = {}
    planned: set[int] = set()
    seeded_models = ctx.analyses.get(SEEDED_MODEL_DRAWS, {})
    for entries in by_scope.values():
        node = entries[0][1] if entries[0][1] is not None else module
        taken = _collides(node)
        if taken:  # the source's own name: the splits would overwrite it (after a seed: its key read as before)
            for e in entries if not seeded else ():
                if id(e[0]) in ctx.analyses.get(MODEL_DRAWS, {}):
                    _refuse_model_call(ctx, id(e[0]), f"this code uses the name {taken[0]}, which fwport gives the key it "
                                       "splits for each statement that draws: rename it and translate again")
                ctx.analyses.setdefault(KEYLESS, {})[id(e[0])] = (
                    f"this code uses the name {taken[0]}, which fwport gives the key it splits for each statement "
                    "that draws: rename it and translate again")
                ctx.analyses.get(ROOTED, set()).discard(id(e[0]))
            continue
        root_block = node.body if isinstance(node, cst.FunctionDef) else module
        own = {id(e[0]) for e in entries}
        builds = any(isinstance(c.func, cst.Name) and c.func.value in made or keyed_layer(ctx.imports.resolve(c.func) or "", ctx)
                     for c in _own_calls(node) if id(c) not in own)  # (a layer built here takes a key too)
        # one draw in the scope, at its own level, and nothing else taking a key from it: the root key itself
        direct = (len(entries) == 1 and entries[0][3] is root_block and not builds and not _in_comp(entries[0])
                  and (node.name.value if isinstance(node, cst.FunctionDef) else "") not in keyed_steps)
        scope = _Scope(node, entries[0][0], direct, made, methods.get(id(node)))
        scope.seeded = seeded
        scope.models = seeded and any(id(e[0]) in seeded_models for e in entries)
        planned.add(id(entries[0][1]))
        scope.given = isinstance(node, cst.FunctionDef) and node.name.value in threaded and node in module.body
        for f in entries:
            blocks.setdefault(id(f[3]), (f[3], scope, False))
        blocks[id(root_block)] = (root_block, scope, True)
        if scope.given:  # its callers pass the key
            ctx.plans.add(node, lambda o, u: u.with_changes(params=_kwonly(u.params, "key", None)), by="keyless-draws")
            ctx.report(Severity.INFO, "key-added", f"{node.name.value}() draws from PyTorch's global generator: it "
                       "takes a `key` argument, and its calls in this file pass a split of the caller's key (split "
                       "anew at each call)", node.name)
    for block, scope, root in blocks.values():
        ctx.plans.add(block, _edit_block(scope, root, site, ctx), by="keyless-draws")
    return planned


def _collides(scope) -> list[str]:
    """The names of the source's scope that the splits for its statements would overwrite (``subkey``)."""
    return sorted({x.value for x in find_all(scope, cst.Name) if re.fullmatch(r"subkey\d*", x.value)})


def _in_comp(entry) -> bool:
    call, _, stmt = entry[0], entry[1], entry[2]
    return any(id(call) in {id(c) for c in find_all(comp, cst.Call)} for t in _COMPS for comp in find_all(stmt, t))


def _own_calls(scope) -> list[cst.Call]:
    """The calls of a function's own code (or the module's top-level code), not of the functions or classes in it."""
    if isinstance(scope, cst.FunctionDef):
        inner = {id(c) for d in find_all(scope.body, cst.FunctionDef) + find_all(scope.body, cst.ClassDef)
                 for c in find_all(d, cst.Call)}
        return [c for c in find_all(scope.body, cst.Call) if id(c) not in inner]
    return [c for s in scope.body if not isinstance(s, (cst.FunctionDef, cst.ClassDef)) for c in find_all(s, cst.Call)]


def _own_units(stmt, site) -> list[cst.CSTNode]:
    """The draws (and comprehensions holding draws) a statement evaluates once, above its blocks: a simple
    statement's, an if's tests, a for's iterable, a with's items."""
    from fwport.packs.torch2jax.passes.modules import _units
    if isinstance(stmt, cst.SimpleStatementLine):
        return _units([stmt], site)
    parts: list[cst.CSTNode] = []
    if isinstance(stmt, cst.If):
        node = stmt
        while isinstance(node, cst.If):
            parts.append(node.test)
            node = node.orelse
    elif isinstance(stmt, cst.For):
        parts.append(stmt.iter)
    elif isinstance(stmt, cst.With):
        parts.extend(i.item for i in stmt.items)
    return _units(parts, site) if parts else []


def _draw_keys():
    from fwport.packs.torch2jax.passes.modules import _AssignKeys

    class _DrawKeys(_AssignKeys):
        """_AssignKeys for the draws of a statement: several draws in a comprehension's element take a key each, named
        ``k`` / ``k1``, ``k2`` (``kk`` ... inside a comprehension's element)."""
        MANY = True

        def _sub(self, i: int | None = None) -> str:
            return "k" * self.depth + ("" if i is None else str(i))

    return _DrawKeys


def _edit_block(scope: _Scope, root: bool, site, ctx):
    """The edit of one block: a split above each statement that draws (its draws take the splits); in the scope's
    root block, the root key (a function: where it starts; the module: above the first statement that draws or
    builds a model of the file)."""
    split = ctx.spell_text("jax.random.split")

    model_keys: set[int] = set()  # (the splits a model call takes per example, training.py's call_key: MODEL_DRAWS)

    def draw_site(call: cst.Call) -> bool:
        return site(call) and (dotted_text(call.func) != split or id(call) in model_keys)

    def apply(original, updated):
        model_keys.clear()
        if ctx.analyses.get(MODEL_DRAWS) and not scope.seeded:
            model_keys.update(id(a.value) for a in find_all(updated, cst.Arg) if a.keyword is not None
                              and a.keyword.value == "key" and isinstance(a.value, cst.Call)
                              and dotted_text(a.value.func) == split)
        elif scope.models:  # (a seeded scope: only a vmapped model call's keys, as call_key writes them)
            vmap = ctx.spell_text("jax.vmap")
            model_keys.update(id(a.value) for c in find_all(updated, cst.Call) if isinstance(c.func, cst.Call)
                              and dotted_text(c.func.func) == vmap for a in c.args if a.keyword is not None
                              and a.keyword.value == "key" and isinstance(a.value, cst.Call)
                              and dotted_text(a.value.func) == split)
        draw_keys = _draw_keys()
        body: list[cst.CSTNode] = []
        first = None  # where the first statement taking a key starts (its rewrite no longer looks like one)
        for s in updated.body:
            units = _own_units(s, draw_site)
            if not units:
                body.append(s)
                continue
            scope.used = True
            first = len(body) if first is None else first
            if scope.direct and root and len(units) == 1 and isinstance(units[0], cst.Call):
                body.append(rewrite_units(s, units, ["key"], draw_keys, draw_site, ctx))  # the function's one draw: `key`
                continue
            names = ["subkey"] if len(units) == 1 else [f"subkey{i}" for i in range(1, len(units) + 1)]
            line = statement(f"key, {', '.join(names)} = {split}(key{'' if len(units) == 1 else f', {len(units) + 1}'})\n")
            s = rewrite_units(s, units, names, draw_keys, draw_site, ctx)
            body.append(line.with_changes(leading_lines=s.leading_lines))
            body.append(s.with_changes(leading_lines=[]))
        if root and scope.used and not scope.given and not scope.seeded:
            at = _root_at(body, scope, site)
            if first is not None and not isinstance(scope.node, cst.FunctionDef):
                at = min(at, first)
            key = statement(f"key = {ctx.spell_text('jax.random.key')}(0)  {ROOT_COMMENT}\n")
            if at < len(body):
                key = key.with_changes(leading_lines=body[at].leading_lines)
                body[at] = body[at].with_changes(leading_lines=[])
            body.insert(at, key)
            _warn(scope, ctx)
        return updated.with_changes(body=body)
    return apply


def rewrite_units(stmt, units, names, draw_keys, site, ctx):
    from fwport.core.rewrite import rewrite
    return rewrite(stmt, draw_keys(dict(zip(map(id, units), names)), site, ctx, 1))


def _root_at(body: list, scope: _Scope, site) -> int:
    from fwport.packs.torch2jax.passes.modules import _docstring_end, _holds_site
    if isinstance(scope.node, cst.FunctionDef):
        return _docstring_end(body)
    for i, s in enumerate(body):
        if isinstance(s, (cst.FunctionDef, cst.ClassDef)):
            continue
        if _holds_site(s, site) or any(isinstance(c.func, cst.Name) and c.func.value in scope.made
                                       for c in find_all(s, cst.Call)):
            return i
    return len(body)


def _warn(scope: _Scope, ctx) -> None:
    fn = scope.node.name.value if isinstance(scope.node, cst.FunctionDef) else None
    where = f"{fn}()" if fn else "the module's top-level code"
    every = f"every run and every call of {fn}() draws" if fn else "every run draws"
    if fn == "__init__" and scope.cls:
        where, every = f"{scope.cls}.__init__()", f"every run and every {scope.cls}(...) draws"
    vary = (f"give {fn}() a `key` argument (callers pass jax.random.key(seed) or a split of theirs) in place of the "
            "root key" if fn else "seed the root key as you like (jax.random.key(seed))")
    ctx.report(Severity.WARNING, "key-added", f"{where} drew from PyTorch's global generator: its draws take keys "
               "split from a root key made " + ("where it starts" if fn else "above its first draw") +
               f", key = jax.random.key(0) (key, subkey = jax.random.split(key) before each statement that draws): the "
               f"numbers differ from PyTorch's, and the seed is fixed at 0, so {every} the same numbers; to vary them, "
               f"{vary}", scope.first, comment=False)


def keyless(m, ctx) -> bool:
    """Whether the mapped draw ``m`` is in code no key can reach: then ``m`` is failed with the reason."""
    reasons = ctx.analyses.get(KEYLESS, {})
    why = reasons.get(id(m.call), reasons.get(id(m.node)))
    if why is None:
        return False
    m.fail(ctx, "unsupported-construct", f"{m.rule.names[0]} draws from PyTorch's global generator, and no jax.random "
           f"key can be made for it here: {why}")
    return True


def rooted(m, ctx) -> bool:
    """Whether the mapped draw ``m`` takes a key split from a root key this planner makes."""
    ids = ctx.analyses.get(ROOTED, ())
    return id(m.call) in ids or id(m.node) in ids
