"""In-place tensor methods written as statements → the rebinding a JAX user writes.

``h.relu_()`` → ``h = h.relu()``, ``y.add_(x)`` → ``y = y + x``, ``y.mul_(self.gate)`` → ``y = y * self.gate``,
``y.add_(x, alpha=2)`` → ``y = y + 2 * x``: a jax array is immutable, so the value the method gives the tensor in
place is bound to its name again, and the later passes translate the out-of-place form as they translate any
other (``h.relu()`` → ``jax.nn.relu(h)``, over one example inside a module's forward).

Rebinding is exact only where nothing else holds the tensor's memory: PyTorch's in-place method also changes
every view of it and the tensor it is a view of. So the receiver must be, at that statement, the sole holder of
its memory (sole_holders, a walk along the statements): a local name (not a parameter of the function, not a loop
variable, not ``global``) whose reaching binding is new memory: a call that is not a view (``x.view``, ``x[...]``,
``torch.flatten``, ``.detach()``, ``.contiguous()`` ... may share it), arithmetic, or a view of that same name
(``x = x.view(B, -1)``), and of which no view or alias was taken since (``first = x[:, 0]``, ``xs.append(x)``). A
module's output counts as new memory, but for the modules that return their input or a view of it (PASSING:
nn.Identity, nn.Flatten, nn.Dropout (its input itself in eval mode), an activation built inplace=True, a Sequential
of only these; F.dropout), whose output shares their input's memory. Anything else is left to the tensor-method pass, whose error says what to write. Runs before the modules pass (a planner that rewrites the statements, like module-dict).
"""
from __future__ import annotations

import re

import libcst as cst

from fwport.core.bindings import BindingWalker
from fwport.core.engine import code, expr
from fwport.core.finding import Severity
from fwport.core.names import dotted_text, find_all, scan
from fwport.core.rewrite import rewrite

#: in-place method → the operator of its out-of-place value (``y.add_(x)`` → ``y + x``)
OPERATORS = {"add_": "+", "sub_": "-", "mul_": "*", "div_": "/", "pow_": "**"}
#: in-place method → its out-of-place method, which the tensor-method passes translate (``h.relu_()`` → ``h.relu()``)
METHODS = {f"{m}_": m for m in ("relu", "sigmoid", "tanh", "exp", "log", "sqrt", "abs", "neg", "clamp", "sin",
                                "cos", "floor", "ceil", "sign", "log1p", "scatter", "rsqrt", "reciprocal", "tril",
                                "triu")}
#: methods and functions whose result may share the memory of their argument (a view, or the tensor itself)
VIEWS = frozenset({"view", "view_as", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "transpose",
                   "permute", "t", "T", "mT", "narrow", "select", "expand", "expand_as", "detach", "contiguous",
                   "chunk", "split", "unbind", "diagonal", "as_strided", "movedim", "moveaxis", "swapaxes",
                   "real", "imag", "view_as_real", "view_as_complex", "unfold", "to", "type", "type_as",
                   "float", "double", "half", "long", "int", "bool", "cpu", "cuda", "data", "requires_grad_",
                   "numpy", "from_numpy", "as_tensor", "asarray", "squeeze_", "unsqueeze_", "t_", "transpose_"})


class _Bindings(BindingWalker):
    """The names a scope's statements bind (core.bindings' walker; a nested function or class: its name only),
    comprehension targets included, as PyTorch code reads them."""

    _HOWS = frozenset({"assign", "annassign", "annotation", "for", "as", "walrus", "import", "def", "class", "global"})

    def __init__(self):
        super().__init__()
        self.names: set[str] = set()

    def bound(self, target: cst.BaseExpression, how: str, value) -> None:
        if how in self._HOWS and isinstance(target, cst.Name):
            self.names.add(target.value)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._targets(node.target, "for")


# --- flow-sensitive: which names hold memory no other name shares, statement by statement ------------------------
#
# An in-place method rebound to its name (`x.add_(y)` → `x = x + y`, `x.masked_fill_(m, v)` → `x = jnp.where(m, v,
# x)`) is exact where, at that statement, x is the only holder of its memory: the binding reaching it is new memory
# (not a view, not an input), and no view or alias of it was taken since (`first = x[:, 0]`, `xs.append(x)`, `for r
# in x`), which PyTorch's write would change too. The state (name → sole holder) follows the statements: an
# assignment binds its target (sole where its value is new memory, or a view of the very name it rebinds: `x =
# x.view(B, -1)` keeps x the sole holder) and takes sole-ness from every name the value may share memory with; an
# `if` joins its branches (sole on both), a loop its iterations (to a fixed point), `break` and `continue` included.


#: modules whose output is their input, or a view of it (Dropout in eval mode, Identity, Flatten): a call of one is
#: no new memory (an activation built with inplace=True too; a Sequential of only these)
PASSING = frozenset({"torch.nn.Identity", "torch.nn.Flatten", "torch.nn.Unflatten", "torch.nn.Dropout",
                     "torch.nn.Dropout1d", "torch.nn.Dropout2d", "torch.nn.Dropout3d", "torch.nn.AlphaDropout",
                     "torch.nn.FeatureAlphaDropout"})
#: functions that return their input itself (dropout with training=False; written inplace=True: an activation)
_PASSING_FUNCTIONS = frozenset({"dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
                                "feature_alpha_dropout"})
#: ctx.analyses: the dotted names the file binds to a PASSING module (`self.skip`, `ident`)
PASSING_NAMES = "torch2jax.passing-modules"


def _passing_call(call: cst.Call, resolve) -> bool:
    """``nn.Identity()``, ``nn.ReLU(inplace=True)``, ``nn.Sequential(nn.Flatten(), nn.Dropout(0.1))``: the module
    built returns its input or a view of it."""
    q = resolve(call.func) or ""
    if q in PASSING:
        return True
    if any(a.keyword is not None and a.keyword.value == "inplace" and code(a.value) == "True" for a in call.args):
        return q.startswith("torch.nn.") and q[9:10].isupper()
    if q == "torch.nn.Sequential":
        return all(isinstance(a.value, cst.Call) and a.keyword is None and not a.star
                   and _passing_call(a.value, resolve) for a in call.args)
    return False


def passing_names(ctx) -> frozenset[str]:
    """The dotted names (``self.skip``, ``ident``) the source binds, anywhere, to a module whose output is its input
    or a view of it (_passing_call); computed once per file from the source."""
    found = ctx.analyses.get(PASSING_NAMES)
    if found is None:
        module = ctx.analyses["parsed"][0] if "parsed" in ctx.analyses else None
        names = set()
        for a in find_all(module, cst.Assign) if module is not None else ():
            if isinstance(a.value, cst.Call) and _passing_call(a.value, ctx.imports.resolve):
                names |= {t for t in (dotted_text(x.target) for x in a.targets) if t}
        found = ctx.analyses[PASSING_NAMES] = frozenset(names)
    return found


def _aliases(e: cst.CSTNode, local: set[str], passing: frozenset = frozenset()) -> tuple[set[str], bool]:
    """(the local names whose memory the value of ``e`` may share, whether it may share memory from outside the
    function: an attribute (`self.weight`), a global). A call that is not a view is new memory (a module's output
    included, as above), but for a module in ``passing`` (dotted names: `self.skip` holding an nn.Identity), an
    inline one (`nn.Identity()(x)`) and F.dropout, which return their input: its first argument's."""
    if isinstance(e, cst.Name):
        return ({e.value}, False) if e.value in local else (set(), e.value not in ("None", "True", "False"))
    if isinstance(e, (cst.BinaryOperation, cst.UnaryOperation, cst.Comparison, cst.BaseNumber, cst.BaseString)):
        return set(), False
    if isinstance(e, cst.Call):
        f = e.func
        name = f.attr.value if isinstance(f, cst.Attribute) else f.value if isinstance(f, cst.Name) else None
        if passing and dotted_text(f) in passing or isinstance(f, cst.Call) and _passing_call(f, _torch_text) \
                or name in _PASSING_FUNCTIONS and not (isinstance(f, cst.Attribute) and code(f.value) == "self") \
                or any(a.keyword is not None and a.keyword.value == "inplace" and code(a.value) == "True"
                       for a in e.args):
            return _union(e.args[:1], local, passing)
        if name is not None and (name in VIEWS or name.endswith("_") or name == "getattr"):
            if isinstance(f, cst.Attribute) and not (isinstance(f.value, cst.Name) and f.value.value not in local):
                return _aliases(f.value, local, passing)  # x.view(h, w): the receiver's memory
            return _union(e.args[:1], local, passing)  # torch.flatten(x, 1), getattr(x, "T"): the first argument's
        return set(), False
    if isinstance(e, cst.Attribute):
        return _aliases(e.value, local, passing) if e.attr.value in VIEWS else (set(), True)
    if isinstance(e, cst.Subscript):
        return _aliases(e.value, local, passing)
    if isinstance(e, cst.IfExp):
        return _union([e.body, e.orelse], local, passing)
    if isinstance(e, cst.BooleanOperation):
        return _union([e.left, e.right], local, passing)
    if isinstance(e, (cst.Tuple, cst.List, cst.Set)):
        return _union([x.value for x in e.elements], local, passing)
    if isinstance(e, cst.Dict):
        return _union([x.value for x in e.elements if isinstance(x, cst.DictElement)], local, passing)
    if isinstance(e, (cst.StarredElement, cst.Element, cst.Arg)):
        return _aliases(e.value, local, passing)
    # comprehensions, lambdas, await, ...: every local name they mention
    return {n.value for n in find_all(e, cst.Name) if n.value in local}, True


def _torch_text(func: cst.BaseExpression) -> str | None:
    """The source class an inline module call names (``nn.Identity``, ``torch.nn.Identity``), from its spelling: the
    flow walk has no import table (a module bound to a name is passing_names', which has)."""
    t = dotted_text(func) or ""
    head, _, last = t.rpartition(".")
    return f"torch.nn.{last}" if head in ("nn", "torch.nn") else None


def _union(parts, local: set[str], passing: frozenset = frozenset()) -> tuple[set[str], bool]:
    roots, ext = set(), False
    for p in parts:
        r, x = _aliases(p, local, passing)
        roots |= r
        ext = ext or x
    return roots, ext


def _join(a: dict[str, bool] | None, b: dict[str, bool] | None) -> dict[str, bool] | None:
    """The state after two paths meet (None: a path that does not get there)."""
    if a is None:
        return None if b is None else dict(b)
    if b is None:
        return dict(a)
    return {n: True for n in a if a[n] and b.get(n)}


def _free(d: cst.CSTNode) -> set[str]:
    """The names a nested function or lambda mentions but does not bind (a class: every name it mentions)."""
    names = {n.value for n in find_all(d, cst.Name)}
    if isinstance(d, cst.FunctionDef):
        b = _Bindings()
        scan(d.body, b)
        ps = d.params
        b.names |= {p.name.value for p in (*ps.posonly_params, *ps.params, *ps.kwonly_params,
                                            *(a for a in (ps.star_arg, ps.star_kwarg) if isinstance(a, cst.Param)))}
        names -= b.names - {d.name.value}
    elif isinstance(d, cst.Lambda):
        names -= {p.name.value for p in (*d.params.posonly_params, *d.params.params, *d.params.kwonly_params)}
    return names


class _Flow:
    """One scope's walk (a function's body, a class's, the module's); nested scopes are walked on their own."""

    def __init__(self, out: dict[int, frozenset[str]], body, params=(), passing: frozenset = frozenset()):
        self.out = out
        self.passing = passing
        b = _Bindings()
        for st in body:
            scan(st, b)
        self.local = b.names | set(params)
        # names a nested function, class or lambda reads from this scope (it may alias them when called), or that
        # are declared global
        self.pinned = {n for st in body for d in find_all(st, cst.FunctionDef) + find_all(st, cst.ClassDef)
                       + find_all(st, cst.Lambda) for n in _free(d)}
        self.pinned |= {n.name.value for st in body for g in find_all(st, cst.Global) + find_all(st, cst.Nonlocal)
                        for n in g.names}
        self.loops: list[tuple[list, list]] = []  # per enclosing loop: (break states, continue states)

    def block(self, body, state):
        for st in body:
            if state is None:
                break
            state = self.statement(st, state)
        return state

    def escape(self, e, state) -> None:
        for n in _aliases(e, self.local, self.passing)[0]:
            state.pop(n, None)

    def bind(self, target, value, state) -> None:
        """``target = value``: the target's sole-ness, and the names the value may share lose theirs."""
        roots, ext = _aliases(value, self.local, self.passing) if value is not None else (set(), True)
        names = [target.value] if isinstance(target, cst.Name) else []
        sole = value is not None and not ext and (not roots or len(names) == 1 and roots == {names[0]}
                                                  and state.get(names[0], False))
        if isinstance(target, cst.Subscript) and roots == {dotted_text(target.value)}:
            roots = set()  # h[:, -1] = h[:, 1]: values copied within h, which holds nothing new
        for n in roots:
            state.pop(n, None)
        if not isinstance(target, (cst.Name, cst.Tuple, cst.List, cst.StarredElement)):
            return  # self.h = x, d[k] = x: x escapes (done above); the written tensor keeps its state
        for n in names or [n.value for n in find_all(target, cst.Name)]:
            state.pop(n, None)
        if names and sole and names[0] not in self.pinned:
            state[names[0]] = True
        elif isinstance(target, (cst.Tuple, cst.List)) and value is not None and not roots and not ext:
            # out, h = self.rnn(x): the parts of a new value are new memory (a literal tuple: each its element's)
            parts = value.elements if isinstance(value, (cst.Tuple, cst.List)) \
                and len(value.elements) == len(target.elements) else [None] * len(target.elements)
            for t, v in zip(target.elements, parts):
                if isinstance(t.value, cst.Name) and t.value.value not in self.pinned and (
                        v is None and isinstance(value, cst.Call) or v is not None and not _aliases(v.value, self.local, self.passing)[1]
                        and not _aliases(v.value, self.local, self.passing)[0]):
                    state[t.value.value] = True

    def headers(self, e, state) -> None:
        """An expression a compound statement evaluates: a walrus binds its target."""
        for w in find_all(e, cst.NamedExpr):
            self.bind(w.target, w.value, state)

    def statement(self, st, state):
        if isinstance(st, cst.SimpleStatementLine):
            for small in st.body:
                self.out[id(small)] = frozenset(n for n, v in state.items() if v)
                if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    self.out[id(small.value)] = self.out[id(small)]
                state = self.small(small, state)
                if state is None:
                    return None
            return state
        if isinstance(st, (cst.FunctionDef, cst.ClassDef)):
            _scope(st, self.out, self.passing)
            state.pop(st.name.value, None)
            return state
        if isinstance(st, cst.If):
            self.headers(st.test, state)
            a = self.block(st.body.body, dict(state))
            b = self.block([st.orelse] if isinstance(st.orelse, cst.If) else st.orelse.body.body, dict(state)) \
                if st.orelse is not None else dict(state)
            return _join(a, b)
        if isinstance(st, (cst.For, cst.While)):
            if isinstance(st, cst.For):
                for n in find_all(st.iter, cst.Name):  # `for row in x`: every row a view of x
                    state.pop(n.value, None)
                self.headers(st.iter, state)
            entry = dict(state)
            while True:
                s = dict(entry)
                if isinstance(st, cst.For):
                    self.bind(st.target, None, s)
                else:
                    self.headers(st.test, s)
                self.loops.append(([], []))
                end = self.block(st.body.body, s)
                breaks, conts = self.loops.pop()
                new = entry
                for x in [end, *conts]:
                    new = _join(new, x)
                if new == entry:
                    break
                entry = new
            exit_ = self.block(st.orelse.body.body, dict(entry)) if st.orelse is not None else dict(entry)
            for x in breaks:
                exit_ = _join(exit_, x)
            return exit_
        if isinstance(st, cst.Try) or type(st).__name__ == "TryStar":
            end = self.block(st.body.body, dict(state))
            mentioned = {n.value for n in find_all(st.body, cst.Name)}
            entry = {n: v for n, v in state.items() if v and n not in mentioned}
            outs = [self.block(st.orelse.body.body, end) if st.orelse is not None and end is not None else end]
            for h in st.handlers:
                s = dict(entry)
                if h.name is not None:
                    self.bind(h.name.name, None, s)
                outs.append(self.block(h.body.body, s))
            res = None
            for x in outs:
                res = _join(res, x)
            if st.finalbody is not None:
                res = self.block(st.finalbody.body.body, dict(entry) if res is None else _join(res, entry))
            return res
        if isinstance(st, cst.With):
            for item in st.items:
                self.headers(item.item, state)
                self.escape(item.item, state)
                if item.asname is not None:
                    self.bind(item.asname.name, None, state)
            return self.block(st.body.body, state)
        # match and anything else: every name it mentions loses its sole-ness
        return {n: v for n, v in state.items() if n not in {x.value for x in find_all(st, cst.Name)}}

    def small(self, small, state):
        if isinstance(small, (cst.Return, cst.Raise)):
            return None
        if isinstance(small, (cst.Break, cst.Continue)):
            if self.loops:
                self.loops[-1][0 if isinstance(small, cst.Break) else 1].append(dict(state))
            return None
        self.headers(small, state)
        if isinstance(small, cst.Assign):
            for t in small.targets:
                self.bind(t.target, small.value, state)
        elif isinstance(small, cst.AnnAssign):
            self.bind(small.target, small.value, state)
        elif isinstance(small, cst.AugAssign):
            if not isinstance(small.target, cst.Name):
                self.bind(small.target, small.value, state)  # x[idx] += v: as x[idx] = v
        elif isinstance(small, cst.Expr):
            v = small.value
            f = v.func if isinstance(v, cst.Call) else None
            if not (isinstance(f, cst.Attribute) and f.attr.value.endswith("_")):
                for a in v.args if isinstance(v, cst.Call) else []:  # xs.append(x): x is held by xs
                    self.escape(a.value, state)
        elif isinstance(small, cst.Del):
            for n in find_all(small, cst.Name):
                state.pop(n.value, None)
        elif isinstance(small, (cst.Import, cst.ImportFrom, cst.Global, cst.Nonlocal)):
            for n in find_all(small, cst.Name):
                state.pop(n.value, None)
        return state


def _scope(node: cst.CSTNode, out: dict[int, frozenset[str]], passing: frozenset = frozenset()) -> None:
    if isinstance(node, cst.Module):
        _Flow(out, node.body, (), passing).block(node.body, {})
    elif isinstance(node, cst.ClassDef):
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else [node.body]
        _Flow(out, body, (), passing).block(body, {})
    elif isinstance(node, cst.FunctionDef):
        ps = node.params
        params = [p.name.value for p in (*ps.posonly_params, *ps.params, *ps.kwonly_params)] + \
                 [p.name.value for p in (ps.star_arg, ps.star_kwarg) if isinstance(p, cst.Param)]
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else [node.body]
        _Flow(out, body, params, passing).block(body, {})


def sole_holders_in(body, params, passing: frozenset = frozenset()) -> dict[int, frozenset[str]]:
    """sole_holders of a function's body (its statements), given its parameters' names."""
    out: dict[int, frozenset[str]] = {}
    _Flow(out, body, params, passing).block(body, {})
    return out


def sole_holders(node: cst.CSTNode, passing: frozenset = frozenset()) -> dict[int, frozenset[str]]:
    """id(small statement), and id(call) of a call that is a whole statement → the names that, just before it, are
    the only holders of their memory (see above), in ``node`` (a module, a class, a function) and the scopes in it;
    ``passing``: the dotted names of modules that return their input (passing_names)."""
    out: dict[int, frozenset[str]] = {}
    _scope(node, out, passing)
    return out


def _rebinding(call: cst.Call, fresh: dict[str, bool]) -> cst.Assign | None:
    """``name.op_(args)`` (a whole statement) → ``name = <its value>``, where that is exact."""
    f = call.func
    if not (isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and fresh.get(f.value.value)):
        return None
    name, op = f.value.value, f.attr.value
    if op in OPERATORS:
        pos = [a for a in call.args if a.keyword is None and not a.star]
        kw = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        if len(pos) != 1 or len(call.args) != len(pos) + len(kw) or set(kw) - ({"alpha"} if op in ("add_", "sub_") else set()):
            return None
        from fwport.packs.torch2jax.tensor_methods import _operand
        other = _operand(pos[0].value)
        if "alpha" in kw:  # torch.add(y, x, alpha=a): y + a * x
            other = f"{_operand(kw['alpha'])} * {other}"
        value = expr(f"{name} {OPERATORS[op]} {other}")
    elif op in METHODS:
        value = call.with_changes(func=f.with_changes(attr=cst.Name(METHODS[op])))
    else:
        return None
    return cst.Assign([cst.AssignTarget(cst.Name(name))], value)


#: nodes an in-place call inside a statement may not sit in to be hoisted before it: evaluated conditionally, several
#: times, or in a scope of their own
_NOT_ONCE = (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.IfExp, cst.BooleanOperation)


class _InPlaceCalls(cst.CSTVisitor):
    """The in-place method calls ``name.op_(...)`` (OPERATORS, METHODS) in an expression, None for each inside a
    _NOT_ONCE node."""

    def __init__(self):
        super().__init__()
        self.found: list[cst.Call | None] = []
        self.depth = 0

    def visit_Call(self, node: cst.Call) -> None:
        f = node.func
        if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) \
                and (f.attr.value in OPERATORS or f.attr.value in METHODS):
            self.found.append(node if not self.depth else None)

    def on_visit(self, node) -> bool:
        if isinstance(node, _NOT_ONCE):
            self.depth += 1
        return super().on_visit(node)

    def on_leave(self, node) -> None:
        if isinstance(node, _NOT_ONCE):
            self.depth -= 1
        super().on_leave(node)


class _Put(cst.CSTTransformer):
    """The node ``call`` → the name ``name``."""

    def __init__(self, call: cst.Call, name: str):
        super().__init__()
        self.call, self.name = call, name

    def leave_Call(self, original, updated):
        return cst.Name(self.name) if original is self.call else updated


def _inner_in_place(small: cst.BaseSmallStatement) -> cst.Call | None:
    """The one in-place method call ``name.op_(args)`` (OPERATORS, METHODS) inside a statement's value, where the
    statement may be split exactly into ``name = <its value>`` and the statement reading ``name`` (_InPlace.
    leave_SimpleStatementLine): the statement is an assignment, an expression or a return; the call is evaluated
    once, unconditionally (not in a lambda, a comprehension, a conditional expression or an `and`/`or`), its
    arguments call nothing (so nothing evaluated before it in the statement can change them), and ``name`` appears
    nowhere else in the statement (so nothing else reads it before or after the write)."""
    if isinstance(small, cst.Assign):
        value = small.value
    elif isinstance(small, (cst.Expr, cst.Return)):
        value = small.value
    else:
        return None
    if value is None:
        return None
    v = _InPlaceCalls()
    scan(value, v)
    found = v.found
    if len(found) != 1 or found[0] is None or found[0] is value and isinstance(small, cst.Expr):
        return None
    call = found[0]
    name = call.func.value.value
    if any(find_all(a.value, cst.Call) or find_all(a.value, cst.NamedExpr) for a in call.args):
        return None
    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else []
    mentions = sum(1 for n in find_all(small, cst.Name) if n.value == name)
    if mentions != 1 or any(isinstance(n, (cst.Yield, cst.Await)) for n in find_all(value, cst.Yield) + find_all(
            value, cst.Await)) or any(n.value == name for t in targets for n in find_all(t, cst.Name)):
        return None
    return call


class _InPlace(cst.CSTTransformer):
    def __init__(self, sole: dict[int, frozenset[str]]):
        super().__init__()
        self.sole = sole
        self.changed = 0

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        """``res.append(correct_k.mul_(100.0 / batch_size))`` (an in-place method inside a statement, its receiver the
        sole holder of its memory: _inner_in_place) → ``correct_k = correct_k * (100.0 / batch_size)`` then
        ``res.append(correct_k)``: the tensor's new value bound to its name, the statement reading it as PyTorch's
        reads the method's result (the tensor itself)."""
        if len(original.body) != 1 or len(updated.body) != 1:
            return updated
        call = _inner_in_place(original.body[0])
        if call is None:
            return updated
        new = _rebinding(call, dict.fromkeys(self.sole.get(id(original.body[0]), ()), True))
        if new is None:
            return updated
        self.changed += 1
        rest = original.body[0].visit(_Put(call, call.func.value.value))
        return cst.FlattenSentinel([updated.with_changes(body=[new]),
                                    updated.with_changes(body=[rest], leading_lines=())])

    def leave_Expr(self, original: cst.Expr, updated: cst.Expr):
        if isinstance(updated.value, cst.Call):
            new = _rebinding(updated.value, dict.fromkeys(self.sole.get(id(original), ()), True))
            if new is not None:
                self.changed += 1
                return new
        return updated


# --- writes into a slice: `pe[:, 0::2] = v` → `pe = pe.at[:, 0::2].set(v)` ------------------------------------
#
# A jax array has no item assignment; its functional form is `x.at[idx].set(v)` (`+=` → `.add`, ...). Rebinding the
# name is exact where nothing else holds the array's memory while it is written. That is proven for the plain shape
# a table is built in (a positional encoding): in one block (a function's body, or the module's), the name is bound
# to a new tensor (a torch function's: numpy arrays, lists and dicts keep their item assignment), then written by
# index in statements of that same block, or in a loop or a branch there that reads it only in such writes, with no
# statement in between reading it otherwise; what comes after (a view, `self.pe = pe`) sees the last value, as in
# PyTorch. Other writes into such a tensor are errors. Not in the methods of a class other than __init__: a forward
# sees one example, where batch.py decides (the indices hold the batch axis).

#: augmented assignment operator → the `.at[...]` method
_AT = {"+=": "add", "-=": "subtract", "*=": "multiply", "/=": "divide", "**=": "power"}


def _slice_write(st: cst.BaseStatement) -> tuple[str, cst.Subscript, str, cst.BaseExpression] | None:
    """(name, its subscript, the .at method, the value) where ``st`` is one line `name[idx] = v` / `name[idx] += v`."""
    if not isinstance(st, cst.SimpleStatementLine) or len(st.body) != 1:
        return None
    small = st.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        t, method = small.targets[0].target, "set"
    elif isinstance(small, cst.AugAssign) and small.operator.__class__.__name__ in (
            "AddAssign", "SubtractAssign", "MultiplyAssign", "DivideAssign", "PowerAssign"):
        t, method = small.target, _AT[small.operator._get_token()]
    else:
        return None
    if isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name):
        return t.value.value, t, method, small.value
    return None


def _mentions(node: cst.CSTNode, name: str) -> bool:
    return any(n.value == name for n in find_all(node, cst.Name))


def _new_tensor(value: cst.BaseExpression, ctx) -> bool:
    """A call of a torch function that makes a new tensor (torch.zeros, torch.arange, ...; not a view): a numpy
    array, a list or a dict keeps its item assignment."""
    if not isinstance(value, cst.Call):
        return False
    q = ctx.imports.resolve(value.func) or ""
    return q.startswith("torch.") and q.count(".") == 1 and q[6:] not in VIEWS and not q.endswith("_")


def _block_writes(body, ctx, reported: set[int] | None = None) -> dict[int, cst.SimpleStatementLine]:
    """id(statement) → its rewrite, for the slice writes of one block that can be rebound (see above); the lines it
    reports an error for go into ``reported``."""
    out: dict[int, cst.SimpleStatementLine] = {}
    fresh: dict[str, bool] = {}  # name → bound to new memory, and not read since but by slice writes
    tensors: set[str] = set()  # names this block binds to a new tensor
    for st in body:
        w = _slice_write(st)
        if w is not None and fresh.get(w[0]):
            out[id(st)] = _at_line(st, w)
            continue
        # a statement binding a name to new memory makes it writable; any other mention ends that
        small = st.body[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None
        bound = small.targets[0].target.value if isinstance(small, cst.Assign) and len(small.targets) == 1 \
            and isinstance(small.targets[0].target, cst.Name) else None
        for name in list(fresh):
            if fresh[name] and _mentions(st, name):
                writes = _inner_writes(st, name) if not isinstance(st, cst.SimpleStatementLine) else []
                if writes and _count(st, name) == sum(_count(line, name) for line in writes):
                    for line in writes:  # a loop or a branch that only writes into it (and reads it there)
                        out[id(line)] = _at_line(line, _slice_write(line))
                else:
                    fresh[name] = False
        if bound is not None:
            v = small.value  # a torch function's new tensor, or arithmetic on a tensor of this block (`1 / s`)
            fresh[bound] = _new_tensor(v, ctx) or isinstance(v, (cst.BinaryOperation, cst.UnaryOperation)) \
                and any(n.value in tensors for n in find_all(v, cst.Name))
            if fresh[bound]:
                tensors.add(bound)
    # the other writes into a tensor this block made (after it was shared, or in a loop or an if): an error, since
    # a jax array has no item assignment and the rebinding would not reach what shares it
    for st in body:
        for line in [st] if isinstance(st, cst.SimpleStatementLine) else find_all(st, cst.SimpleStatementLine):
            w = _slice_write(line)
            if w is not None and w[0] in tensors and id(line) not in out and not _nested_def(st, line):
                if reported is not None:
                    reported.add(id(line))
                ctx.report(Severity.ERROR, "unsupported-construct", f"{code(line.body[0]).strip()}: a jax array has "
                           f"no item assignment, and {w[0]} may be held by another name here (it is read otherwise "
                           f"before this write), which rebinding it (`{w[0]} = {w[0]}.at[...].{w[2]}(...)`) would "
                           "not reach: write that by hand, rebinding each name that holds it", line)
    return out


def _at_line(st: cst.SimpleStatementLine, w) -> cst.SimpleStatementLine:
    """`name[idx] = v` → `name = name.at[idx].set(v)` (the method of the write's operator)."""
    name, sub, method, value = w
    at = cst.Subscript(cst.Attribute(cst.Name(name), cst.Name("at")), sub.slice)
    return st.with_changes(body=[cst.Assign([cst.AssignTarget(cst.Name(name))],
                                            cst.Call(cst.Attribute(at, cst.Name(method)), [cst.Arg(value)]))])


def _count(node: cst.CSTNode, name: str) -> int:
    return sum(1 for n in find_all(node, cst.Name) if n.value == name)


def _inner_writes(st: cst.BaseStatement, name: str) -> list[cst.SimpleStatementLine]:
    """The slice writes into ``name`` inside a compound statement (not in a function or class defined there)."""
    return [line for line in find_all(st, cst.SimpleStatementLine)
            if (w := _slice_write(line)) is not None and w[0] == name and not _nested_def(st, line)]


def _nested_def(st: cst.BaseStatement, line: cst.SimpleStatementLine) -> bool:
    """``line`` lies in a function or class defined inside ``st`` (its own scope, its own block)."""
    return any(any(n is line for n in find_all(d, cst.SimpleStatementLine))
               for d in find_all(st, cst.FunctionDef) + find_all(st, cst.ClassDef))


def _array_index(sub: cst.Subscript) -> bool:
    """An index only an array takes: several axes (``x[:, 0]``, ``x[i, j]``), a slice or an ellipsis (a list or a dict
    is indexed by one key)."""
    return len(sub.slice) > 1 or any(isinstance(e.slice, cst.Slice) or isinstance(e.slice, cst.Index)
                                     and isinstance(e.slice.value, cst.Ellipsis) for e in sub.slice)


def _parameter_writes(fn: cst.FunctionDef, ctx) -> dict[int, cst.SimpleStatementLine]:
    """Writes into a slice of the function's own parameter (``def f(x): x[:, 0] = 0``), which PyTorch makes in the
    caller's tensor. A parameter annotated ``torch.Tensor`` is rebound (``x = x.at[:, 0].set(0)``: this function's
    array; a warning where the function does not return it, since the caller's array no longer changes); another
    written with an array's index (several axes, a slice) gets a warning saying what to write if it is a tensor (a
    numpy array keeps its item assignment); a one-key index (a list, a dict) is left as written."""
    params = {p.name.value: p for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)}
    rebound = {n for n, p in params.items() if p.annotation is not None
               and ctx.imports.resolve(p.annotation.annotation) == "torch.Tensor"}
    bound = set()  # parameters the function binds again: then the name no longer holds the caller's value
    for t in find_all(fn.body, cst.AssignTarget):
        if isinstance(t.target, cst.Name):
            bound.add(t.target.value)
    returned = {r.value.value for r in find_all(fn.body, cst.Return) if isinstance(r.value, cst.Name)}
    out: dict[int, cst.SimpleStatementLine] = {}
    for line in find_all(fn.body, cst.SimpleStatementLine):
        w = _slice_write(line)
        if w is None or w[0] not in params or w[0] in bound or _nested_def(fn.body, line):
            continue
        name, sub, method = w[0], w[1], w[2]
        at = f"{name} = {name}.at[{code(sub)[len(name) + 1:-1]}].{method}({code(w[3])})"
        if name in rebound:
            out[id(line)] = _at_line(line, w)
            if name not in returned:
                ctx.report(Severity.WARNING, "approximate", f"{code(line.body[0]).strip()} writes into the tensor the "
                           f"caller passed as {name}; a jax array is immutable, so this is `{at}`, this function's own "
                           f"array, and the caller's is unchanged: return {name} and rebind it where the caller reads "
                           "it", line)
        elif _array_index(sub):
            ctx.report(Severity.WARNING, "unsupported-construct", f"{code(line.body[0]).strip()} writes into the "
                       f"parameter {name} in place: if {name} is a tensor (a jax array has no item assignment), write "
                       f"`{at}` (and return {name}: the caller's array does not change in place); annotate it "
                       f"`{name}: torch.Tensor` and fwport writes that; a numpy array keeps the write as it is", line)
    return out


# --- writes into a tensor outside forward: `x += v`, `x[i] += v`, `x[i] = v` -----------------------------------------
#
# Outside a module's forward (functions, training loops, module level, __init__), as batch.py does inside it: a write
# into a name the scope binds only to tensors (_tensor_names: torch functions' results, and views, slices, methods and
# arithmetic of such names) is exact where that name is, at the statement, the sole holder of its memory (sole_holders):
# `x += v` as written (a jax array's += rebinds the name), `x[i] += v` → `x = x.at[i].add(v)`. Where another name may
# share the memory (`b = a` then `a += 1`; `row = a[0]` then `row += 1`), PyTorch's write changes that one too, which
# rebinding cannot: an error, the statement left as written. A name also bound to anything else (a number, a list,
# a numpy array, a parameter, a loop's batches) is left alone; the function's parameters are _parameter_writes' (one
# annotated torch.Tensor is a tensor the others may be made from).

#: torch functions whose result is not one new tensor (a tuple or list, a number, a context, state)
_NOT_A_TENSOR = frozenset({"load", "save", "manual_seed", "seed", "no_grad", "enable_grad", "inference_mode",
                           "set_grad_enabled", "device", "is_tensor", "is_floating_point", "is_complex", "numel",
                           "get_default_dtype", "set_default_dtype", "set_printoptions", "compile", "split", "chunk",
                           "unbind", "tensor_split", "max", "min", "sort", "topk", "kthvalue", "median", "mode",
                           "meshgrid", "unique", "broadcast_tensors", "histogram", "aminmax", "var_mean", "std_mean",
                           "frexp", "svd", "eig", "eigh", "qr", "slogdet", "lstsq", "nonzero", "where", "dtype",
                           "finfo", "iinfo", "get_rng_state", "set_rng_state", "initial_seed", "use_deterministic_algorithms",
                           "autocast", "from_numpy", "as_tensor", "asarray"})
#: tensor methods whose result is not one tensor
_NOT_A_TENSOR_METHOD = frozenset({"item", "tolist", "numpy", "size", "dim", "ndimension", "numel", "nelement",
                                  "split", "chunk", "unbind", "tensor_split", "max", "min", "sort", "topk", "kthvalue",
                                  "median", "mode", "unique", "nonzero", "data_ptr", "is_contiguous", "element_size",
                                  "stride", "storage", "untyped_storage", "type", "backward", "register_hook",
                                  "get_device", "is_floating_point", "equal", "all", "any", "__len__", "aminmax"})


def _is_tensor(e: cst.BaseExpression, known: set[str], ctx) -> bool:
    """Whether ``e`` is a tensor made from the scope's own tensors (``known``) or by a torch function."""
    if isinstance(e, cst.Name):
        return e.value in known
    if isinstance(e, cst.Call):
        f = e.func
        if isinstance(f, cst.Attribute) and _is_tensor(f.value, known, ctx):
            return f.attr.value not in _NOT_A_TENSOR_METHOD
        if dotted_text(f) in passing_names(ctx):  # ident(a), an nn.Identity: a itself
            return bool(e.args) and _is_tensor(e.args[0].value, known, ctx)
        q = ctx.imports.resolve(f) or ""
        return q.startswith("torch.") and q.count(".") == 1 and q[6:7].islower() and q[6:] not in _NOT_A_TENSOR
    if isinstance(e, cst.Subscript):
        return _is_tensor(e.value, known, ctx)
    if isinstance(e, cst.Attribute):
        return e.attr.value in ("T", "mT", "H", "data") and _is_tensor(e.value, known, ctx)
    if isinstance(e, cst.BinaryOperation):
        return _is_tensor(e.left, known, ctx) or _is_tensor(e.right, known, ctx)
    if isinstance(e, cst.UnaryOperation):
        return not isinstance(e.operator, cst.Not) and _is_tensor(e.expression, known, ctx)
    if isinstance(e, cst.IfExp):
        return _is_tensor(e.body, known, ctx) and _is_tensor(e.orelse, known, ctx)
    return False


class _ScopeBindings(BindingWalker):
    """Every binding of a scope's names (a nested function or class: its name only), with the value a plain
    assignment gives (None: anything else) and the iterable a for loop's target walks."""

    def __init__(self):
        super().__init__(lambdas=False, imports=True)
        self.values: dict[str, list] = {}
        self.iters: list = []  # the enclosing for loops' iterables

    def bound(self, target, how, value) -> None:
        if not isinstance(target, cst.Name) or how in ("augassign", "del"):
            return  # (x += v keeps what x holds)
        if how == "for" and self.iters:
            value = ("for", self.iters[-1])
        self.values.setdefault(target.value, []).append(value if how in ("assign", "annassign", "for") else None)

    def visit_For(self, node: cst.For) -> None:
        self.iters.append(node.iter)
        super().visit_For(node)

    def leave_For(self, original_node: cst.For) -> None:
        self.iters.pop()
        super().leave_For(original_node)


def _tensor_names(body, params, ctx) -> set[str]:
    """The names ``body`` binds only to tensors (see above), none of them a parameter."""
    b = _ScopeBindings()
    for st in body:
        scan(st, b)
    names = set(b.values) - {p.name.value for p in params}
    # (a parameter annotated torch.Tensor is a tensor to make others from: `y = x.clone()`)
    seeds = {p.name.value for p in params if p.annotation is not None
             and ctx.imports.resolve(p.annotation.annotation) == "torch.Tensor" and p.name.value not in b.values}
    while True:  # the largest set whose every binding is a tensor made from the set (x = x.view(-1) included)
        have = names | seeds
        keep = {n for n in names if all(
            v is not None and (_is_tensor(v[1], have, ctx) if isinstance(v, tuple) else _is_tensor(v, have, ctx))
            for v in b.values[n])}
        if keep == names:
            return names
        names = keep


def _tensor_writes(body, params, walk, scope) -> dict[int, cst.SimpleStatementLine]:
    """id(line) → its rewrite, for the writes into a tensor of ``body`` that another pass has not taken (see above)."""
    lines = [line for line in ([st] if isinstance(st, cst.SimpleStatementLine) else find_all(st, cst.SimpleStatementLine)
                               for st in body) for line in line]
    lines = [ln for ln in lines if id(ln) not in walk.todo and id(ln) not in walk.reported
             and any(isinstance(s, (cst.AugAssign, cst.Assign)) for s in ln.body)]
    if not lines:
        return {}
    nested = {id(ln) for st in body if not isinstance(st, cst.SimpleStatementLine)
              for d in find_all(st, cst.FunctionDef) + find_all(st, cst.ClassDef)
              for ln in find_all(d, cst.SimpleStatementLine)}
    known: set[str] | None = None
    out: dict[int, cst.SimpleStatementLine] = {}
    ctx = walk.ctx
    for line in lines:
        if id(line) in nested:
            continue
        for small in line.body:
            if isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
                name, sub = small.target.value, None
            elif isinstance(small, (cst.AugAssign, cst.Assign)):
                w = _slice_write(line) if len(line.body) == 1 else None
                if w is None:
                    continue
                name, sub = w[0], w
            else:
                continue
            if known is None:
                known = _tensor_names(body, params, ctx)
            if name not in known:
                continue
            sole = name in walk.sole().get(id(small), ())
            if sole and sub is not None:
                out[id(line)] = _at_line(line, sub)
                continue
            if sole:
                continue  # `x += v`: a jax array's += rebinds x, which nothing else holds
            what = code(small).strip()
            ctx.report(Severity.ERROR, "unsupported-construct", f"{what}: PyTorch writes into {name} in place, and "
                       f"{name} may share its memory with another tensor here (a view or slice of one, or one viewed "
                       f"or aliased since it was made), which changes too; a jax array is immutable and rebinding "
                       f"{name} cannot reach that one: write the new value out of place ({name} = {name} + v, {name} "
                       f"= {name}.at[idx].set(v)) after copying ({name} = {name}.clone()) if only {name} should "
                       "change, or rebind each tensor sharing it", line)
    return out


class _SliceWrites(cst.CSTTransformer):
    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx
        self.kinds: list[str] = []  # per scope: "class", "method" (not __init__), "function"
        self.todo: dict[int, cst.SimpleStatementLine] = {}
        self.changed = 0
        self.reported: set[int] = set()  # the slice writes _block_writes refused
        self.root: cst.Module | None = None
        self._sole: dict[int, frozenset[str]] | None = None

    def sole(self) -> dict[int, frozenset[str]]:
        """sole_holders of the module this pass walks (computed once, where a write into a tensor asks)."""
        if self._sole is None:
            self._sole = sole_holders(self.root, passing_names(self.ctx))
        return self._sole

    def visit_Module(self, node: cst.Module) -> None:
        self.root = node
        self.todo.update(_block_writes(node.body, self.ctx, self.reported))
        self.todo.update(_tensor_writes(node.body, (), self, node))

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.kinds.append("class")

    def leave_ClassDef(self, original, updated):
        self.kinds.pop()
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        method = bool(self.kinds) and self.kinds[-1] == "class" and node.name.value != "__init__"
        self.kinds.append("method" if method or "method" in self.kinds else "function")
        if self.kinds[-1] != "method" and isinstance(node.body, cst.IndentedBlock):
            self.todo.update(_block_writes(node.body.body, self.ctx, self.reported))
            self.todo.update(_parameter_writes(node, self.ctx))
            ps = node.params
            params = [p for p in (*ps.posonly_params, *ps.params, *ps.kwonly_params)]
            self.todo.update(_tensor_writes(node.body.body, params, self, node))

    def leave_FunctionDef(self, original, updated):
        self.kinds.pop()
        return updated

    def leave_SimpleStatementLine(self, original, updated):
        new = self.todo.get(id(original))
        if new is None:
            return updated
        self.changed += 1
        return updated.with_changes(body=new.body)


#: an in-place method the planner rebinds, called
_METHOD_CALL = r"\.(?:" + "|".join(sorted(OPERATORS | METHODS)) + r")\s*\("
#: the planner's trigger: such a call, a write into a slice, or an augmented assignment (_tensor_writes), each
#: alternative spelled to start with a literal character, so that ``re`` scans for those in C (an alternative that
#: starts with ``\w`` or a class is tried at every position: a millisecond on a large file); an augmented assignment
#: is any ``-=`` ``+=`` ``*=`` ``/=`` (``**=`` too), not only one after a name (a wider trigger runs the pass more often
#: and never skips one with work to do)
TRIGGER = _METHOD_CALL + r"|\[(?<=\w\[)[^\]\n]*\]\s*(?:[-+*/]|\*\*)?=(?!=)|-=(?!=)|\+=(?!=)|\*=(?!=)|/=(?!=)"


def rebind(module: cst.Module, ctx) -> cst.Module:
    """The planner: every in-place method statement, and every write into a slice, that can be rebound exactly,
    rebound."""
    source = ctx.analyses["parsed"][1] if "parsed" in ctx.analyses else None
    # (no in-place method call in the source: nothing for _InPlace, whose flow walk and rewrite are skipped)
    t = _InPlace(sole_holders(module, passing_names(ctx))) \
        if source is None or re.search(_METHOD_CALL, source) else None
    out = rewrite(module, t) if t is not None else module
    w = _SliceWrites(ctx)
    out = rewrite(out, w)
    return out if t is not None and t.changed or w.changed else module
