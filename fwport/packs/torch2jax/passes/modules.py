"""``nn.Module`` subclasses → ``eqx.Module``.

The pass (before the rule pass, keeping line structure): the base becomes ``eqx.Module``,
``__init__`` takes ``*, key``, ``forward`` becomes ``__call__`` rewritten for one example
(batch.Forward), taking ``key`` where a dropout submodule needs one. The layer constructors in
``__init__`` are left to the rules (``nn.Linear`` → ``eqx.nn.Linear``).

The finishing step (after every finding is placed, so it may add and remove lines): the fields an
Equinox module declares, one per attribute ``__init__`` assigns; ``super().__init__()`` removed;
the key split per submodule that needs one (``key1, key2 = jax.random.split(key)``) and, where a
``__call__`` feeds several dropouts, the same split of its call-time key.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.engine import code
from fwport.core.finding import Severity
from fwport.core.names import dotted_text, scan
from fwport.core.rewrite import rewrite
from fwport.packs.torch2jax import layers
from fwport.packs.torch2jax.batch import Forward

PLANS = "torch2jax.modules"

#: source module classes whose call draws random numbers (takes a key in Equinox)
RANDOM = frozenset({"torch.nn.Dropout", "torch.nn.Dropout1d", "torch.nn.Dropout2d", "torch.nn.AlphaDropout"})
#: Equinox constructors that draw their initial parameters (take ``key=``)
KEYED = frozenset({"eqx.nn.Linear", "eqx.nn.Conv1d", "eqx.nn.Conv2d", "eqx.nn.Conv3d", "eqx.nn.ConvTranspose1d",
                   "eqx.nn.ConvTranspose2d", "eqx.nn.ConvTranspose3d", "eqx.nn.Embedding", "eqx.nn.MLP",
                   "eqx.nn.MultiheadAttention", "eqx.nn.LSTMCell", "eqx.nn.GRUCell"}) | layers.KEYED


def is_module_class(cls: cst.ClassDef, ctx) -> bool:
    return any(ctx.imports.resolve(b.value) == "torch.nn.Module" for b in cls.bases)


def run(module: cst.Module, ctx) -> cst.Module:
    plans = ctx.analyses.setdefault(PLANS, {})
    body = []
    for stmt in module.body:
        if isinstance(stmt, cst.ClassDef) and is_module_class(stmt, ctx):
            stmt = _class(stmt, ctx, plans)
        body.append(stmt)
    drawing = {name for name, plan in plans.items() if plan["draws"]}
    if drawing:  # instances made outside the classes: the finishing step gives them a key
        for stmt in module.body:
            if not isinstance(stmt, cst.ClassDef):
                stmt.visit(_Instances(ctx, drawing))
    return module.with_changes(body=body)


class _DrawsOutsideInit(cst.CSTVisitor):
    """A module that draws its initial values, built in another method of the class (``self._make_layer``):
    keys are split and handed out in ``__init__`` only, so this one would get none."""

    def __init__(self, ctx, classes: set[str], method: str):
        super().__init__()
        self.ctx, self.classes, self.method = ctx, classes, method

    def visit_Call(self, node: cst.Call) -> None:
        q = self.ctx.imports.resolve(node.func)
        own = isinstance(node.func, cst.Name) and node.func.value in self.classes
        if (q in DRAWING or own) and not any(a.keyword and a.keyword.value == "key" for a in node.args):
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"{code(node.func)}(...) built in "
                            f"{self.method}(), not in __init__: Equinox modules take their initial values from a "
                            "key, which fwport splits and hands out in __init__ only; build it in __init__, or give "
                            f"{self.method} a `key` argument and pass a split of __init__'s key", node)
            self.ctx.settled.add(id(node))


class _Instances(cst.CSTVisitor):
    def __init__(self, ctx, classes: set[str]):
        super().__init__()
        self.ctx, self.classes = ctx, classes

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value in self.classes \
                and not any(a.keyword and a.keyword.value == "key" for a in node.args):
            self.ctx.report(Severity.INFO, "key-added", f"{node.func.value}(...) draws its initial parameters from "
                            "a key: given key=jax.random.key(0); pass your own to vary the initialisation", node)


def _submodules(init: cst.FunctionDef | None, ctx) -> dict[str, str]:
    """``self.NAME = <call>`` in ``__init__`` → the qualified source class called."""
    out: dict[str, str] = {}
    if init is None:
        return out
    for stmt in init.body.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for s in stmt.body:
            if isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.value, cst.Call):
                t = dotted_text(s.targets[0].target)
                q = ctx.imports.resolve(s.value.func)
                if t and t.startswith("self.") and t.count(".") == 1 and q:
                    out[t[5:]] = q
                    if q == "torch.nn.Sequential" and any(
                            isinstance(a.value, cst.Call) and ctx.imports.resolve(a.value.func) in RANDOM
                            for a in s.value.args):
                        out[t[5:]] = "torch.nn.Sequential+random"
    return out


class _Buffers(cst.CSTTransformer):
    """``self.register_buffer("mask", value)`` → ``self.mask = value``: an array field like the parameters,
    kept out of the gradient where ``__call__`` reads it (batch.Forward)."""

    def __init__(self, ctx, names: set[str]):
        super().__init__()
        self.ctx, self.names = ctx, names

    def leave_Expr(self, original, updated):
        call = updated.value
        if not (isinstance(call, cst.Call) and dotted_text(call.func) == "self.register_buffer" and len(call.args) >= 2
                and isinstance(call.args[0].value, cst.SimpleString) and call.args[0].keyword is None
                and all(a.keyword is None or a.keyword.value == "persistent" for a in call.args[2:])):
            return updated
        name = call.args[0].value.evaluated_value
        if not name.isidentifier():
            return updated
        self.names.add(name)
        value = call.args[1].value
        if "\n" in code(value) and not value.lpar:  # it spanned lines inside the call's parentheses
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return cst.Assign([cst.AssignTarget(cst.Attribute(cst.Name("self"), cst.Name(name)))], value)


def _kwonly(params: cst.Parameters, name: str, default: cst.BaseExpression | None) -> cst.Parameters:
    if any(p.name.value == name for p in (*params.params, *params.kwonly_params)):
        return params
    p = cst.Param(cst.Name(name), default=default,
                  equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")) if default else cst.MaybeSentinel.DEFAULT)
    star = params.star_arg
    if not isinstance(star, (cst.Param, cst.ParamStar)):
        star = cst.ParamStar()
    kw = [q.with_changes(comma=cst.MaybeSentinel.DEFAULT) for q in params.kwonly_params]
    return params.with_changes(star_arg=star, kwonly_params=[*kw, p])


#: source classes whose construction draws random initial values (their Equinox counterpart takes a key)
DRAWING = frozenset({"torch.nn.Linear", "torch.nn.Conv1d", "torch.nn.Conv2d", "torch.nn.Conv3d",
                     "torch.nn.ConvTranspose1d", "torch.nn.ConvTranspose2d", "torch.nn.ConvTranspose3d",
                     "torch.nn.Embedding", "torch.nn.Sequential", "torch.nn.Sequential+random", "torch.nn.ModuleList",
                     "torch.nn.MultiheadAttention", "torch.nn.LSTM", "torch.nn.GRU", "torch.nn.Parameter",
                     "torch.nn.RNN", "torch.nn.LSTMCell", "torch.nn.GRUCell", "torch.nn.RNNCell", "torch.nn.ModuleDict"})

#: source layers that keep a state beside their parameters (eqx.nn.State)
STATEFUL = frozenset({"torch.nn.BatchNorm1d", "torch.nn.BatchNorm2d"})


def _stateful_containers(init: cst.FunctionDef | None, ctx) -> tuple[set[str], list[cst.Call]]:
    """The ``self.NAME = nn.Sequential(...)`` attributes of ``__init__`` (any branch) holding a stateful
    layer: ``eqx.nn.Sequential`` threads the state through its members, so a call of one takes and
    returns it like a BatchNorm's. And the other containers holding one (a ModuleList, a Sequential
    not kept in an attribute): not threaded yet."""
    if init is None:
        return set(), []
    names: set[str] = set()
    refused: list[cst.Call] = []

    def holds_stateful(call: cst.Call) -> bool:
        return any(isinstance(n, cst.Call) and ctx.imports.resolve(n.func) in STATEFUL
                   for a in call.args
                   for n in ([e.value for e in a.value.elements] if isinstance(a.value, (cst.List, cst.Tuple))
                             else [a.value]))

    class V(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            t = dotted_text(node.targets[0].target) if len(node.targets) == 1 else None
            v = node.value
            if t and t.startswith("self.") and t.count(".") == 1 and isinstance(v, cst.Call) \
                    and ctx.imports.resolve(v.func) == "torch.nn.Sequential" and holds_stateful(v):
                names.add(t[5:])
                kept.add(id(v))

        def visit_Call(self, node: cst.Call) -> None:
            if id(node) not in kept and ctx.imports.resolve(node.func) in ("torch.nn.Sequential", "torch.nn.ModuleList") \
                    and holds_stateful(node):
                refused.append(node)

    kept: set[int] = set()
    scan(init, V())
    return names, refused


def _class(cls: cst.ClassDef, ctx, plans: dict) -> cst.ClassDef:
    methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    subs = _submodules(methods.get("__init__"), ctx)
    for name, q in list(subs.items()):  # instances of this file's translated classes
        if q not in STATEFUL and isinstance(q, str) and q.split(".")[-1] in plans and plans[q.split(".")[-1]].get("stateful"):
            subs[name] = "stateful-class"
    stateful = {n for n, q in subs.items() if q in STATEFUL or q == "stateful-class"}
    threaded, refused = _stateful_containers(methods.get("__init__"), ctx)
    stateful |= threaded
    if refused:
        ctx.report(Severity.ERROR, "unsupported-construct", f"{cls.name.value}: a ModuleList holding BatchNorm (or a "
                   "Sequential holding one that is not an attribute) is not translated yet: its state must be "
                   "threaded through each member; keep it in a `self.name = nn.Sequential(...)` or call the members "
                   "one by one in forward", cls)
    keyed = {n for n, q in subs.items() if q in RANDOM or q == "torch.nn.Sequential+random"}
    bases = [b.with_changes(value=ctx.spell("equinox.Module")) if ctx.imports.resolve(b.value) == "torch.nn.Module" else b
             for b in cls.bases]
    draws = any(q in DRAWING or q.rsplit(".", 1)[-1] in plans and plans[q.rsplit(".", 1)[-1]]["draws"]
                for q in subs.values())
    plan = {"key_sites": 0, "draws": draws, "stateful": []}
    body = []
    buffers: set[str] = set()
    drawing = {n for n, p in plans.items() if p["draws"]}
    for s in cls.body.body:
        if isinstance(s, cst.FunctionDef) and s.name.value not in ("__init__", "forward"):
            scan(s, _DrawsOutsideInit(ctx, drawing, s.name.value))
    for s in cls.body.body:
        if isinstance(s, cst.FunctionDef) and s.name.value == "__init__":
            s = s.with_changes(params=_kwonly(s.params, "key", None))
            s = rewrite(s, _Buffers(ctx, buffers))
        elif isinstance(s, cst.FunctionDef) and s.name.value == "forward":
            params = [p.name.value for p in s.params.params[1:]]
            fwd = Forward(ctx, set(params), keyed, subs, stateful, buffers)
            new_body = rewrite(s.body, fwd)
            s = s.with_changes(name=cst.Name("__call__"), body=new_body)
            if fwd.state_sites:  # the layers' state goes in and comes out
                ps = [p.with_changes(comma=cst.MaybeSentinel.DEFAULT) for p in s.params.params]
                s = s.with_changes(params=s.params.with_changes(params=[*ps, cst.Param(cst.Name("state"))]))
                plan["stateful"] = sorted(stateful)
            if fwd.key_sites:
                s = s.with_changes(params=_kwonly(s.params, "key", cst.Name("None")))
                plan["key_sites"] = len(fwd.key_sites)
        body.append(s)
    plans[cls.name.value] = plan
    return cls.with_changes(bases=bases, body=cls.body.with_changes(body=body))


# --- finish: the lines an Equinox module adds ---------------------------------------------------------

def finish(module: cst.Module, ctx) -> cst.Module:
    plans = ctx.analyses.get(PLANS)
    if not plans:
        return module
    body = []
    keyed: set[str] = set()  # classes (in file order) whose __init__ takes a key: their instances get one
    for stmt in module.body:
        if isinstance(stmt, cst.ClassDef) and stmt.name.value in plans:
            stmt = _finish_class(stmt, ctx, plans[stmt.name.value], keyed)
        body.append(stmt)
    stateful = frozenset(n for n, p in plans.items() if p["stateful"])
    if keyed or stateful:  # instances made outside the classes (a script's `model = Net()`)
        root = f"{ctx.spell_text('jax.random.key')}(0)"
        adder = _RootKey(frozenset(keyed), root, stateful, ctx.spell_text("equinox.nn.make_with_state"))
        body = [s if isinstance(s, cst.ClassDef) else rewrite(s, adder) for s in body]
    return module.with_changes(body=body)


class _RootKey(cst.CSTTransformer):
    """``model = Net()`` → ``model = Net(key=jax.random.key(0))``; for a module with state
    ``model, state = eqx.nn.make_with_state(Net)(key=...)``."""

    def __init__(self, classes: frozenset[str], root: str, stateful: frozenset[str] = frozenset(), make: str = ""):
        super().__init__()
        self.classes, self.root, self.stateful, self.make = classes, root, stateful, make

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        v = updated.value
        if len(updated.targets) == 1 and isinstance(updated.targets[0].target, cst.Name) and isinstance(v, cst.Call) \
                and isinstance(v.func, cst.Name) and v.func.value in self.stateful:
            target = cst.Tuple([cst.Element(updated.targets[0].target), cst.Element(cst.Name("state"))], lpar=[], rpar=[])
            call = v.with_changes(func=cst.Call(cst.parse_expression(self.make), [cst.Arg(v.func)]))
            return updated.with_changes(targets=[updated.targets[0].with_changes(target=target)], value=call)
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if isinstance(original.func, cst.Name) and original.func.value in self.classes \
                and not any(a.keyword and a.keyword.value == "key" for a in original.args):
            args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in updated.args]
            return updated.with_changes(args=[*args, cst.Arg(cst.parse_expression(self.root), keyword=cst.Name("key"),
                                                             equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))])
        return updated


def _is_super_init(stmt: cst.CSTNode) -> bool:
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)):
        return False
    call = stmt.body[0].value
    return isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "__init__" \
        and isinstance(call.func.value, cst.Call) and dotted_text(call.func.value.func) == "super"


class _Keys(cst.CSTTransformer):
    """Numbers the constructors that need a key: ``eqx.nn.Linear(...)`` → ``eqx.nn.Linear(..., key=keyN)``."""

    def __init__(self, names: list[str] | None, classes: frozenset[str] = frozenset()):
        super().__init__()
        self.names = names  # None: count only
        self.classes = classes  # translated module classes of this file whose __init__ takes a key
        self.count = 0

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        func = dotted_text(original.func) or ""
        if func.startswith("jax.random.") and original.args and isinstance(original.args[0].value, cst.Name) \
                and original.args[0].value.value == "key" and original.args[0].keyword is None:
            self.count += 1  # a draw the rules wrote from `key` (torch.randn → jax.random.normal(key, ...))
            if self.names is None:
                return updated
            first = updated.args[0].with_changes(value=cst.Name(self.names[self.count - 1]))
            return updated.with_changes(args=[first, *updated.args[1:]])
        if func not in KEYED and func not in self.classes or any(a.keyword and a.keyword.value == "key" for a in original.args):
            return updated
        self.count += 1
        if self.names is None:
            return updated
        arg = cst.Arg(cst.Name(self.names[self.count - 1]), keyword=cst.Name("key"),
                      equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
        args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in updated.args]
        return updated.with_changes(args=[*args, arg])


class _HoistState(cst.CSTTransformer):
    """A stateful layer returns (output, state): ``y = f(self.bn(x, state))`` →
    ``bn, state = self.bn(x, state)`` then ``y = f(bn)``; ``y = self.bn(x, state)`` → ``y, state = ...``."""

    def __init__(self, attrs: frozenset[str]):
        super().__init__()
        self.attrs = attrs
        self.direct: set[int] = set()
        self.hoisted: list[cst.BaseStatement] = []
        self.used: set[str] = set()

    def is_stateful(self, node) -> bool:
        return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
            and dotted_text(node.func.value) == "self" and node.func.attr.value in self.attrs \
            and bool(node.args) and isinstance(node.args[-1].value, cst.Name) and node.args[-1].value.value == "state"

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        class Names(cst.CSTVisitor):
            def __init__(s):
                s.names = set()

            def visit_Name(s, n):
                s.names.add(n.value)

            def visit_Attribute(s, n):
                n.value.visit(s)  # `self.bn0`: bn0 is no variable
                return False

        v = Names()
        node.visit(v)
        self.used |= v.names

    def _temp(self, attr: str) -> str:
        name, i = attr, 2
        while name in self.used:
            name, i = f"{attr}{i}", i + 1
        self.used.add(name)
        return name

    def visit_Return(self, node: cst.Return) -> None:
        v = node.value
        if isinstance(v, cst.Tuple) and len(v.elements) == 2 and self.is_stateful(v.elements[0].value) \
                and isinstance(v.elements[1].value, cst.Name) and v.elements[1].value.value == "state":
            self.direct.add(id(v.elements[0].value))  # `return self.bn(x, state)`: already (output, state)

    def leave_Return(self, original: cst.Return, updated: cst.Return) -> cst.Return:
        v = original.value
        if isinstance(v, cst.Tuple) and v.elements and id(v.elements[0].value) in self.direct:
            return updated.with_changes(value=updated.value.elements[0].value)
        return updated

    def leave_Call(self, original, updated):
        if not self.is_stateful(updated) or id(original) in self.direct:
            return updated
        temp = self._temp(updated.func.attr.value)
        self.hoisted.append(cst.parse_statement(f"{temp}, state = {code(updated)}\n"))
        return cst.Name(temp)

    def leave_SimpleStatementLine(self, original, updated):
        hoisted, self.hoisted = self.hoisted, []
        if not hoisted:
            return updated
        small = updated.body[0] if len(updated.body) == 1 else None
        last = hoisted[-1].body[0]
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) \
                and isinstance(small.value, cst.Name) and small.value.value == code(last.targets[0].target.elements[0].value):
            # `y = self.bn(x, state)`: unpack into y itself
            hoisted[-1] = cst.parse_statement(f"{small.targets[0].target.value}, state = {code(last.value)}\n")
            hoisted[0] = hoisted[0].with_changes(leading_lines=updated.leading_lines)
            return cst.FlattenSentinel(hoisted)
        hoisted[0] = hoisted[0].with_changes(leading_lines=updated.leading_lines)
        return cst.FlattenSentinel([*hoisted, updated.with_changes(leading_lines=[])])


class _CallKeys(cst.CSTTransformer):
    """``key=key`` at the n dropout call sites of ``__call__`` → ``key=key1`` ... ``key=keyN``."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        if original.keyword and original.keyword.value == "key" and isinstance(original.value, cst.Name) \
                and original.value.value == "key":
            self.n += 1
            return updated.with_changes(value=cst.Name(f"key{self.n}"))
        return updated


def _key_names(n: int) -> list[str]:
    return ["key"] if n == 1 else [f"key{i}" for i in range(1, n + 1)]


def _split_line(n: int, ctx, optional: bool) -> cst.SimpleStatementLine:
    split = ctx.spell_text("jax.random.split")
    targets = ", ".join(_key_names(n))
    value = f"{split}(key)" if n == 2 else f"{split}(key, {n})"
    if optional:
        value += f" if key is not None else ({', '.join(['None'] * n)})"
    return cst.parse_statement(f"{targets} = {value}\n")


def _docstring_end(body) -> int:
    if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) \
            and isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        return 1
    return 0


def _finish_class(cls: cst.ClassDef, ctx, plan: dict, keyed: set[str]) -> cst.ClassDef:
    fields: dict[str, str] = {}
    body = []
    for s in cls.body.body:
        if isinstance(s, cst.FunctionDef) and s.name.value == "__init__":
            s = _finish_init(s, ctx, fields, frozenset(keyed))
            if any(p.name.value == "key" for p in s.params.kwonly_params):
                keyed.add(cls.name.value)
        elif isinstance(s, cst.FunctionDef) and s.name.value == "__call__" and plan["stateful"]:
            s = rewrite(s, _HoistState(frozenset(plan["stateful"])))
        if isinstance(s, cst.FunctionDef) and s.name.value == "__call__" and plan["key_sites"] > 1:
            t = _CallKeys()
            fb = rewrite(s.body, t)
            stmts = list(fb.body)
            at = _docstring_end(stmts)
            stmts.insert(at, _split_line(t.n, ctx, optional=True))
            s = s.with_changes(body=fb.with_changes(body=stmts))
        body.append(s)
    lines = [cst.parse_statement(f"{name}: {ann}\n") for name, ann in fields.items()]
    if lines:
        at = _docstring_end(body)
        rest = body[at:]
        if rest:  # one blank line between the fields and what follows
            rest[0] = rest[0].with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        body = [*body[:at], *lines, *rest]
    return cls.with_changes(body=cls.body.with_changes(body=body))


def _annotation(value: cst.BaseExpression, params: dict[str, cst.Param], ctx) -> str:
    """The field declaration of an attribute from the value ``__init__`` gives it: static only where
    the value is proven not to be an array or a module (a static field is neither trained nor traced)."""
    static = f" = {ctx.spell_text('equinox.field')}(static=True)"
    if isinstance(value, cst.IfExp):  # `jnp.zeros(n) if bias else None`
        branches = [_annotation(v, params, ctx) for v in (value.body, value.orelse)]
        kinds = [b for b in branches if b != "None"]
        if len(set(kinds)) == 1 and "None" in branches and not kinds[0].endswith(static):
            return f"{kinds[0]} | None"
        return "object"
    if isinstance(value, cst.Name) and value.value == "None":
        return "None"
    if isinstance(value, cst.Dict) or isinstance(value, cst.Call) and dotted_text(value.func) == "dict":
        return "dict"  # an nn.ModuleDict
    if isinstance(value, cst.Call):
        f = dotted_text(value.func) or ""
        if f.startswith("eqx."):
            return f
        if f.startswith(("jnp.", "jax.")):
            return ctx.spell_text("jax.Array")
        if isinstance(value.func, cst.Name) and (value.func.value in ctx.analyses.get(PLANS, {})
                                                 or value.func.value in layers.HELPERS):
            return value.func.value  # a translated module of this file, or a helper layer written into it
        return "object"
    if isinstance(value, (cst.List, cst.Tuple)):
        kind = "list" if isinstance(value, cst.List) else "tuple"
        literal = all(isinstance(e.value, (cst.Integer, cst.Float, cst.SimpleString)) for e in value.elements)
        return kind + (static if literal and value.elements else "")
    if isinstance(value, cst.Integer):
        return "int" + static
    if isinstance(value, cst.Float):
        return "float" + static
    if isinstance(value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return "str" + static
    if isinstance(value, cst.Name) and value.value in ("True", "False"):
        return "bool" + static
    if isinstance(value, cst.Name) and value.value in params:
        p = params[value.value]
        if p.annotation is not None:
            ann = code(p.annotation.annotation)
            return ann + (static if ann in ("int", "float", "bool", "str", "tuple", "tuple[int, ...]") else "")
        if p.default is not None:
            return _annotation(p.default, {}, ctx)
    if isinstance(value, cst.BinaryOperation) and all(isinstance(n, cst.Integer) for n in (value.left, value.right)):
        return "int" + static
    return "object"


def _finish_init(fn: cst.FunctionDef, ctx, fields: dict[str, str], classes: frozenset[str]) -> cst.FunctionDef:
    params = {p.name.value: p for p in (*fn.params.params, *fn.params.kwonly_params)}
    stmts = [s for s in fn.body.body if not _is_super_init(s)]
    for s in stmts:
        if not isinstance(s, cst.SimpleStatementLine):
            continue
        for small in s.body:
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                t = dotted_text(small.targets[0].target)
                if t and t.startswith("self.") and t.count(".") == 1 and t[5:] not in fields:
                    fields[t[5:]] = _annotation(small.value, params, ctx)
    block = fn.body.with_changes(body=stmts)
    counter = _Keys(None, classes)
    block.visit(counter)
    n = counter.count
    if n == 0:  # nothing draws initial values: no key parameter
        kw = [p for p in fn.params.kwonly_params if p.name.value != "key"]
        star = fn.params.star_arg if kw or isinstance(fn.params.star_arg, cst.Param) else cst.MaybeSentinel.DEFAULT
        return fn.with_changes(params=fn.params.with_changes(kwonly_params=kw, star_arg=star), body=block)
    block = block.visit(_Keys(_key_names(n), classes))
    if n > 1:
        stmts = list(block.body)
        stmts.insert(_docstring_end(stmts), _split_line(n, ctx, optional=False))
        block = block.with_changes(body=stmts)
    return fn.with_changes(body=block)


