"""``nn.Module`` subclasses → ``eqx.Module``.

The pass (before the rule pass, keeping line structure): the base becomes ``eqx.Module``,
``__init__`` takes ``*, key``, ``forward`` becomes ``__call__`` rewritten for one example
(batch.Forward), taking ``key`` where a dropout submodule needs one. The layer constructors in
``__init__`` are left to the rules (``nn.Linear`` → ``eqx.nn.Linear``).

Modules built outside ``__init__`` get keys too: a method ``__init__`` calls (``self._make_layer(...)``)
and a module-level builder function (``def conv3x3(...): return nn.Conv2d(...)``) take ``*, key``; a class
given as a parameter (``block(...)``) gets ``key=`` where every caller's argument is followed to a class of
the file, else the call is an error. ``nn.Sequential(*layers)`` → ``eqx.nn.Sequential(layers)``; a block
with BatchNorm inside a Sequential derives from ``eqx.nn.StatefulLayer`` so the Sequential threads the
state. ``nn.init.X_(self.fc.weight, ...)`` in ``__init__`` or a method it calls becomes
``self.fc = eqx.tree_at(lambda m: m.weight, self.fc, <value drawn from a key>)`` (init.py).

The finishing step (after every finding is placed, so it may add and remove lines): the fields an
Equinox module declares, one per attribute ``__init__`` assigns; ``super().__init__()`` removed;
the key split per submodule that needs one (``key1, key2 = jax.random.split(key)``; in a loop, one
split per iteration; in ``[M(...) for _ in range(n)]``, one key per element) and, where a ``__call__`` feeds
several dropouts, the same split of its call-time key.
"""
from __future__ import annotations

import re
from collections import Counter

import libcst as cst

from fwport.core import written
from fwport.core.engine import code, literal_value, statement
from fwport.core.engine import expr as parsed_expression, statement as parsed_statement  # (parsed once per process, a fresh copy per call)
from fwport.core.finding import Severity
from fwport.core.names import children, dotted_text, find_all, method_of, scan
from fwport.core.rewrite import rewrite
from fwport.packs.torch2jax import init as inits
from fwport.packs.torch2jax import layers, modes, ranks
from fwport.packs.torch2jax import configs, surgery, tying
from fwport.packs.torch2jax.batch import DROP, FUNCTION_DIMS, NEGATIVE_FIELDS, SEQ_PROVEN, Forward, names_in

PLANS = "torch2jax.modules"

#: source module classes whose call draws random numbers (takes a key in Equinox)
RANDOM = frozenset({"torch.nn.Dropout", "torch.nn.Dropout1d", "torch.nn.Dropout2d", "torch.nn.AlphaDropout"})
#: functions drawing from PyTorch's global generator: in a module's method (not ``__init__``) the draw takes the
#: key of the call (the method gets ``*, key``, its callers pass theirs: _drawing_methods)
DRAWS = frozenset({"torch.randn", "torch.rand", "torch.randint", "torch.randn_like", "torch.rand_like",
                   "torch.randint_like", "torch.randperm", "torch.multinomial", "torch.bernoulli", "torch.normal",
                   "torch.poisson"})
#: tensor methods filling a tensor in place with random numbers (refused in a method drawing at call time)
RANDOM_FILLS = frozenset({"normal_", "uniform_", "bernoulli_", "random_", "exponential_", "geometric_", "cauchy_",
                          "log_normal_"})
#: the keywords a call's key is given by: most take ``key=``, MultiheadAttentionWithWeights its weights' ``dropout_key=``
KEY_KEYWORDS = frozenset({"key", "dropout_key"})
#: a sequence layer's dropout argument: its keyword, and its position in PyTorch's signature
SEQUENCE_DROPOUT = {"torch.nn.MultiheadAttention": 2, "torch.nn.LSTM": 5, "torch.nn.GRU": 5, "torch.nn.RNN": 6,
                    "torch.nn.TransformerEncoderLayer": 3, "torch.nn.TransformerDecoderLayer": 3,
                    "torch.nn.Transformer": 5, "torch.nn.TransformerEncoder": None, "torch.nn.TransformerDecoder": None}
#: PyTorch's transformer layers drop with 0.1 when not told (a stack, with its layer's dropout): a key unless a literal 0
_DROPPING_BY_DEFAULT = frozenset({"torch.nn.TransformerEncoderLayer", "torch.nn.TransformerDecoderLayer",
                                  "torch.nn.Transformer", "torch.nn.TransformerEncoder", "torch.nn.TransformerDecoder"})


def _dropout_sequences(init: cst.FunctionDef | None, ctx) -> dict[str, str]:
    """``self.attn = nn.MultiheadAttention(d, h, dropout=p)`` (an LSTM / GRU / RNN with ``dropout=``) in ``__init__``,
    p not a literal 0: attribute → the keyword its call takes the key by (the weights' dropout in training, DETR's
    layers; the dropout between recurrent layers)."""
    out = {}
    v = _Assigns()  # (in a branch too: `if rnn_type == ...: self.rnn = nn.RNN(..., dropout=dropout)`)
    if init is not None:
        scan(init, v)
    for a in v.assigns:
        if True:
            if not (len(a.targets) == 1 and isinstance(a.value, cst.Call)):
                continue
            t = dotted_text(a.targets[0].target) or ""
            q = ctx.imports.resolve(a.value.func)
            if not t.startswith("self.") or t.count(".") != 1 or q not in SEQUENCE_DROPOUT:
                continue
            pos = [x.value for x in a.value.args if x.keyword is None and not x.star]
            i = SEQUENCE_DROPOUT[q]
            p = next((x.value for x in a.value.args if x.keyword is not None and x.keyword.value == "dropout"),
                     pos[i] if i is not None and len(pos) > i else None)
            if p is None and q in _DROPPING_BY_DEFAULT or p is not None and literal_value(p, 1) not in (0, 0.0):
                out[t[5:]] = "dropout_key" if q == "torch.nn.MultiheadAttention" else "key"
    return out


class _Assigns(cst.CSTVisitor):
    def __init__(self) -> None:
        self.assigns: list[cst.Assign] = []

    def visit_Assign(self, node: cst.Assign) -> None:
        self.assigns.append(node)


#: Equinox constructors that draw their initial parameters (take ``key=``)
KEYED = frozenset({"eqx.nn.Linear", "eqx.nn.Conv1d", "eqx.nn.Conv2d", "eqx.nn.Conv3d", "eqx.nn.ConvTranspose1d",
                   "eqx.nn.ConvTranspose2d", "eqx.nn.ConvTranspose3d", "eqx.nn.Embedding", "eqx.nn.MLP",
                   "eqx.nn.MultiheadAttention", "eqx.nn.LSTMCell", "eqx.nn.GRUCell"}) | layers.KEYED


def is_module_class(cls: cst.ClassDef, ctx) -> bool:
    return any(ctx.imports.resolve(b.value) == "torch.nn.Module" for b in cls.bases)


def _predicates(module: cst.Module) -> set[str]:
    """Module-level functions of one parameter that only test it, calling nothing (vit-pytorch's ``def exists(val):
    return val is not None``): a re-initialising method may call them (_applier_kinds), as their translation is
    the same test."""
    out = set()
    for s in module.body:
        if isinstance(s, cst.FunctionDef) and not s.decorators and len(s.params.params) == 1 \
                and not s.params.kwonly_params and s.params.star_arg in (None, cst.MaybeSentinel.DEFAULT) \
                and s.params.star_kwarg is None and isinstance(s.body, cst.IndentedBlock) and len(s.body.body) == 1:
            st = s.body.body[0]
            if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Return) \
                    and st.body[0].value is not None and not _calls(st.body[0].value):
                out.add(s.name.value)
    return out


def run(module: cst.Module, ctx) -> cst.Module:
    plans = ctx.analyses.setdefault(PLANS, {})
    outside = ctx.analyses.setdefault(OUTSIDE, {"builders": set(), "members": set()})
    ctx.analyses[UNSIZED] = _unsized_names(module)
    outside["predicates"] = _predicates(module)
    classes = {s.name.value for s in module.body if isinstance(s, cst.ClassDef) and is_module_class(s, ctx)}
    configs.plan(module, ctx, classes)  # configuration objects held → static fields (configs.py)
    for s in module.body:
        if isinstance(s, cst.ClassDef) and s.name.value not in classes:
            _layer_subclass(s, ctx)
    if classes and ".modules()" in module.code if "parsed" not in ctx.analyses else ".modules()" in ctx.analyses["parsed"][1]:
        module = _inline_module_loops(module, ctx, classes)
    # per-example ranks across the classes (ranks.py); per-vector layers a Sequential gives more than one axis wrapped
    whole = {s.name.value for s in module.body if isinstance(s, cst.ClassDef) and s.name.value in classes
             and any(ctx.imports.resolve(c.func) in ROW_MIXING for c in _calls(s))}
    ctx.analyses[FUNCTION_DIMS] = _function_dims(module, ctx, classes)
    if ctx.analyses[FUNCTION_DIMS]:
        every = _calls(module)
        ctx.analyses[NEGATIVE_FIELDS] = {s.name.value: negative_fields(s, every) for s in module.body
                                         if isinstance(s, cst.ClassDef) and s.name.value in classes}
    table = ranks.analyse(module, ctx, classes, whole)
    outside["ranks"] = table
    outside["batched"] = _batched_classes(module, ctx, classes, whole, table)
    wraps = ctx.analyses[ranks.WRAPPED] = {id(c): blind for t in table.values() for c, blind in t.wraps()}
    wraps.update({id(c): False for c in _batched_sequence_layers(module, ctx, outside["batched"])})
    if wraps:
        module = rewrite(module, _PerVector(ctx, wraps))
    builders = _builders(module, ctx)
    outside["builders"] = builders
    ctx.analyses[OPTIONAL] = _optional_fields(module, classes)
    calls = [_calls(s) for s in module.body]  # every call, by top-level statement
    qualified = [[ctx.imports.resolve(c.func) for c in cs] for cs in calls]
    outside["state"] = any(q in STATEFUL for qs in qualified for q in qs)
    outside["attention"] = any(q == "torch.nn.MultiheadAttention" for qs in qualified for q in qs)
    of_class: dict[str, list[tuple[int, cst.Call]]] = {}  # the calls of each module class, by statement
    for i, cs in enumerate(calls):
        for c in cs:
            if isinstance(c.func, cst.Name) and c.func.value in classes:
                of_class.setdefault(c.func.value, []).append((i, c))
    callers = {stmt.name.value: _Callers([c for j, c in of_class.get(stmt.name.value, []) if j != i], ctx, classes, stmt)
               for i, stmt in enumerate(module.body) if isinstance(stmt, cst.ClassDef) and stmt.name.value in classes}
    if outside["state"]:  # `block(...)` of a parameter that holds a class: a call of that class's __init__ too
        indirect: dict[str, list] = outside.setdefault("indirect", {})
        for cl in callers.values():
            for m, fn in cl.methods.items():
                own = cl.params(m)
                for c in _calls(fn):
                    if isinstance(c.func, cst.Name) and c.func.value in own:
                        for k in cl.classes_of(c.func, m) & classes:
                            indirect.setdefault(k, []).append((cl, m, c))
    # methods any class's __init__ calls (self._make_layer, perhaps a base class's): construction, not surgery
    outside["construction"] = {m for stmt in module.body if isinstance(stmt, cst.ClassDef)
                               for m in _reached({f.name.value: f for f in stmt.body.body
                                                  if isinstance(f, cst.FunctionDef)}, "__init__", names=True)}
    body = []
    # classes a class holds come first (DETR's Transformer is written above its encoder and layers): whether a held
    # module's call takes a key is known when the holder is written
    outside["held"] = held = _held(module, classes, table)
    done: dict[int, cst.ClassDef] = {}
    at = {s.name.value: i for i, s in enumerate(module.body) if isinstance(s, cst.ClassDef) and s.name.value in classes}
    written: set[str] = set()
    for i, stmt in enumerate(module.body):
        if i in at.values():
            _held_first(stmt.name.value, held, lambda n: done.__setitem__(at[n], _class(
                module.body[at[n]], ctx, plans, callers[n], outside)), done=written)
            stmt = done[i]
        elif isinstance(stmt, cst.FunctionDef) and stmt.name.value in builders:
            scan(stmt, _Comprehensions(ctx, _source_site(ctx, plans, builders, set(), set()), stmt.name.value))
        elif isinstance(stmt, cst.FunctionDef) and ranks.function_key(stmt.name.value) in table:
            stmt = per_example_function(stmt, ctx, table)
        body.append(stmt)
    operated = {m for plan in plans.values() for m in plan.get("surgery", {})}
    if operated:  # a surgery method's call that the finish cannot rebind (surgery.Rebind): an error here
        scan(module, surgery.Unbound(frozenset(operated), ctx))
    drawing = {name for name, plan in plans.items() if plan["draws"]}
    outside["models"] = _returning(module, drawing, builders)  # `def ResNet18(): return ResNet(...)`
    if drawing:  # instances made outside the classes: the finishing step gives them a key
        for stmt in module.body:
            if not isinstance(stmt, cst.ClassDef) and not (isinstance(stmt, cst.FunctionDef)
                                                           and stmt.name.value in builders | outside["models"]):
                scan(stmt, _Instances(ctx, drawing))
    outside["classes"] = {s.name.value for s in module.body if isinstance(s, cst.ClassDef)}
    built = {q[9:] for qs in qualified for q in qs if q and q.startswith("torch.nn.") and q.count(".") == 2}
    applied = Counter(c.args[0].value.value for cs in calls for c in cs if isinstance(c.func, cst.Attribute)
                      and c.func.attr.value == "apply" and len(c.args) == 1 and isinstance(c.args[0].value, cst.Name))
    used = None  # (the module's name reads, counted once a function could be one: a walk of the whole module)
    fns: set[str] = set()
    for i, s in enumerate(body):
        if isinstance(s, cst.FunctionDef) and s.name.value not in builders and s.name.value not in classes:
            if used is None:
                used = _name_reads(module)
            # read only as model.apply(fn) in this file (or not at all: the apply is in the script importing it)
            if used[s.name.value] == 1 + applied[s.name.value]:
                new = _init_function(s, ctx, built)
                if new is not None:
                    body[i] = new
                    fns.add(s.name.value)
    if fns:
        body = [s if isinstance(s, cst.ClassDef) else rewrite(s, _ApplyInit(ctx, fns)) for s in body]
        outside["init_fns"] = fns
    for stmt in body:
        if isinstance(stmt, cst.ClassDef) and stmt.name.value in classes:
            _nested_draws(stmt, ctx, drawing)
    return module.with_changes(body=body)


def _nested_draws(cls: cst.ClassDef, ctx, drawing: set[str]) -> None:
    """A module that draws its initial values, built in a function defined inside ``__init__`` that ``__init__``
    still calls (one unroll.py did not write out): keys are handed to the calls ``__init__`` makes itself, so it
    would get none. An error on each such construction."""
    init = method_of(cls, "__init__")
    if init is None:
        return
    nested = find_all(init.body, cst.FunctionDef)
    if not nested:
        return
    called = {c.func.value for c in _calls(init.body) if isinstance(c.func, cst.Name)}
    keyable = _local_builders(init)
    for fn in nested:
        if fn.name.value not in called or fn.name.value in keyable:
            continue
        for c in _calls(fn.body):
            q = ctx.imports.resolve(c.func)
            own = isinstance(c.func, cst.Name) and c.func.value in drawing
            if (q in DRAWING or own) and not any(a.keyword and a.keyword.value == "key" for a in c.args) \
                    and not ctx.is_settled(c):
                ctx.report(Severity.ERROR, "unsupported-construct", f"{code(c.func)}(...) built in {fn.name.value}(), a "
                           "function defined inside __init__: Equinox modules take their initial values from a key, "
                           "which fwport splits and hands out to the constructions __init__ makes itself; give "
                           f"{fn.name.value} a `key` argument and pass each call its own split (jax.random.split), or "
                           "build the layers in __init__", c)
                ctx.settle(c)


def _local_builders(init: cst.FunctionDef) -> set[str]:
    """The functions defined in ``__init__``'s own body (PyTorch-GAN's ``def discriminator_block(in_f, out_f): ...``)
    that ``__init__`` only calls, by name: each can take ``*, key`` as a helper method does, and each call of it is
    given its own split (:func:`_finish_init`). One defined under an ``if`` or a loop, decorated, or read otherwise
    than as the callee of a call (handed over, stored) is not: a call of it elsewhere would get no key."""
    if not isinstance(init.body, cst.IndentedBlock):
        return set()
    defs = [s for s in init.body.body if isinstance(s, cst.FunctionDef) and not s.decorators and not s.asynchronous]
    if not defs:
        return set()
    reads = Counter(n.value for n in find_all(init.body, cst.Name))
    calls = Counter(c.func.value for c in _calls(init.body) if isinstance(c.func, cst.Name))
    names = [d.name.value for d in defs]
    return {n for n in names if names.count(n) == 1 and reads[n] == calls[n] + 1}  # (+1: its own def's name)


class _PerVector(cst.CSTTransformer):
    """``nn.Linear(...)`` inside a Sequential that gives it more than one axis → ``PerVector(nn.Linear(...))``
    (ranks.py chose the calls; layers.py writes the helper)."""

    def __init__(self, ctx, calls: dict[int, bool]):
        super().__init__()
        self.ctx, self.calls = ctx, calls

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if id(original) not in self.calls:
            return updated
        gets = ("a value whose per-example rank fwport cannot infer (another module of the file feeds this one)"
                if self.calls[id(original)] else "more axes (tokens)")
        self.ctx.report(Severity.INFO, "idiom-replaced", f"{dotted_text(original.func)}: Equinox's layer takes one "
                        f"vector and this one gets {gets}: wrapped as PerVector(layer), which maps it over the leading "
                        "axes as PyTorch's does (none for a vector)", original)
        return cst.Call(cst.Name(layers.use(self.ctx, ranks.HELPER)), [cst.Arg(updated)])


# --- modules built outside __init__: helper methods, builder functions, classes given as parameters -----

#: analyses key: {"builders": module-level functions returning a module that draws, "members": classes of
#: the file that are members of an eqx.nn.Sequential (their __call__ takes the Sequential's `key=`)}
OUTSIDE = "torch2jax.modules.outside"
#: analyses key: the names bound to a PyTorch layer built outside the classes (`model = nn.Linear(1, 1)`), set by the
#: training pass, which calls them per example; finish gives each construction a key (_RootKey's layers)
BARE_LAYERS = "torch2jax.bare-layers"
UNKNOWN = "?"


def _calls(node: cst.CSTNode) -> list[cst.Call]:
    return find_all(node, cst.Call)


def _returns(fn: cst.FunctionDef) -> list[cst.BaseExpression]:
    v = _Returns(fn)
    scan(fn, v)
    return v.out


class _Returns(cst.CSTVisitor):
    # (the visitors here are classes of the module, not of each call: creating a class costs several times its walk)
    def __init__(self, fn: cst.FunctionDef) -> None:
        self.fn = fn
        self.out: list[cst.BaseExpression] = []

    def visit_Return(self, n):
        if n.value is not None:
            self.out.append(n.value)

    def visit_FunctionDef(self, n):
        return n is self.fn


def _bound_value(fn: cst.FunctionDef, value: cst.BaseExpression) -> cst.BaseExpression:
    """A returned name bound once in the function's own body (``model = nn.Sequential(...)`` then
    ``return model``, the usual builder) stands for the value it was bound to."""
    if not isinstance(value, cst.Name) or not isinstance(fn.body, cst.IndentedBlock):
        return value
    bound = [s.body[0].value for s in fn.body.body if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
             and isinstance(s.body[0], cst.Assign) and len(s.body[0].targets) == 1
             and isinstance(s.body[0].targets[0].target, cst.Name) and s.body[0].targets[0].target.value == value.value]
    return bound[0] if len(bound) == 1 else value


def _builders(module: cst.Module, ctx) -> set[str]:
    """Module-level functions that return a layer which draws its initial values (``def conv3x3(...): return
    nn.Conv2d(...)``): they take a key like a module's ``__init__``, and each call of one is given a split."""
    funcs = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
    returned = {n: [c for r in _returns(f) for c in _calls(_bound_value(f, r))] for n, f in funcs.items()}
    out: set[str] = set()
    changed = True
    while changed:
        changed = False
        for n, cs in returned.items():
            if n not in out and any(ctx.imports.resolve(c.func) in LAYERS
                                    or isinstance(c.func, cst.Name) and c.func.value in out for c in cs):
                out.add(n)
                changed = True
    return out


def _bind(call: cst.Call, fn: cst.FunctionDef, method: bool) -> dict[str, cst.BaseExpression] | None:
    """The argument each parameter of ``fn`` gets at ``call`` (defaults included); None where a starred
    argument hides it."""
    if any(a.star for a in call.args):
        return None
    ps = list(fn.params.params)[1 if method else 0:]
    out = {p.name.value: a.value for p, a in zip(ps, [a for a in call.args if a.keyword is None])}
    out.update({a.keyword.value: a.value for a in call.args if a.keyword is not None})
    for p in (*ps, *fn.params.kwonly_params):
        if p.name.value not in out and p.default is not None:
            out[p.name.value] = p.default
    return out


class _Callers:
    """Who calls the methods of one class, so that a parameter's possible values can be followed: the
    class's own calls anywhere in the file (for ``__init__``), ``self.m(...)`` inside the class (for m)."""

    def __init__(self, others: list[cst.Call], ctx, classes: set[str], cls: cst.ClassDef):
        """``others``: the calls of the class outside it."""
        self.ctx, self.classes = ctx, classes
        self.methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
        name = cls.name.value
        self.calls: dict[str, list[tuple[str | None, cst.Call]]] = {m: [] for m in self.methods}
        self.calls["__init__"] = [(None, c) for c in others if isinstance(c.func, cst.Name) and c.func.value == name]
        for m, fn in self.methods.items():
            for c in _calls(fn):
                t = dotted_text(c.func) or ""
                if t.startswith("self.") and t[5:] in self.methods and t[5:] != "__init__":
                    self.calls[t[5:]].append((m, c))

    def _bound(self, call: cst.Call, param: str) -> cst.BaseExpression | None:
        """The argument ``param`` of ``__init__`` gets at ``call`` (a call of the class)."""
        b = _bind(call, self.methods["__init__"], method=True)
        return None if b is None else b.get(param)

    def params(self, method: str | None) -> set[str]:
        fn = self.methods.get(method) if method else None
        if fn is None:
            return set()
        return {p.name.value for p in (*fn.params.params[1:], *fn.params.kwonly_params)}

    def classes_of(self, value: cst.BaseExpression, method: str | None, seen=None) -> set[str]:
        """The classes ``value`` may be, as names of this file's module classes or qualified torch names;
        UNKNOWN among them where one cannot be followed."""
        seen = set() if seen is None else seen
        if isinstance(value, cst.Name):
            if value.value in self.params(method):
                if (method, value.value) in seen:
                    return set()
                seen.add((method, value.value))
                out: set[str] = set()
                for caller, call in self.calls.get(method, []):
                    bound = _bind(call, self.methods[method], method=True)
                    if bound is None or value.value not in bound:
                        out.add(UNKNOWN)
                    else:
                        out |= self.classes_of(bound[value.value], caller, seen)
                fn = self.methods[method]
                default = next((p.default for p in (*fn.params.params, *fn.params.kwonly_params)
                                if p.name.value == value.value), None)
                if not self.calls.get(method):
                    out |= self.classes_of(default, None, seen) if default is not None else {UNKNOWN}
                return out
            if value.value in self.classes:
                return {value.value}
            if value.value == "None":
                return set()
        q = self.ctx.imports.resolve(value)
        return {q} if q and q.startswith("torch.") else {UNKNOWN}


#: PyTorch's containers: a subclass of one is left to the structural passes as it is today
_CONTAINERS = frozenset({"torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"})


def _layer_subclass(cls: cst.ClassDef, ctx) -> None:
    """``class TransformerModel(nn.Transformer)``: a subclass of a PyTorch layer other than nn.Module inherits
    the layer's parameters and forward, which no Equinox class provides to derive from. One error naming the
    class; it is left as written (its base and its in-place initialisers settled: the error covers them)."""
    for b in cls.bases:
        q = ctx.imports.resolve(b.value) or ""
        if q.startswith("torch.nn.") and q.count(".") == 2 and q[9:][:1].isupper() and q != "torch.nn.Module" \
                and q not in _CONTAINERS:
            ctx.report(Severity.ERROR, "unsupported-construct", f"class {cls.name.value}({code(b.value)}): it derives "
                       f"from the PyTorch layer {q}, whose parameters and forward it inherits; Equinox has no such "
                       f"class to derive from, so {cls.name.value} is left as PyTorch: derive from nn.Module and hold "
                       f"the layer as a field built in __init__ (or write its computation out)", cls)
            ctx.settle(b.value, *[c for c in _calls(cls) if (ctx.imports.resolve(c.func) or "").startswith("torch.nn.init.")])
            return


def _source_site(ctx, plans: dict, builders: set[str], helpers: set[str], params: set[str]):
    """Whether a source call builds something that takes a key: a layer that draws, a drawing module class
    of the file, a builder function, a helper method that builds such, a parameter holding a drawing class."""
    def site(call: cst.Call) -> bool:
        q = ctx.imports.resolve(call.func) or ""
        if q in LAYERS or q.startswith("torch.nn.init.") and q[14:] in inits.DRAWS:
            return True
        t = dotted_text(call.func) or ""
        if isinstance(call.func, cst.Name):
            return t in builders or t in params or t in plans and plans[t]["draws"]
        return t.startswith("self.") and t[5:] in helpers
    return site


class _Comprehensions(cst.CSTVisitor):
    """A comprehension building modules that take a key: one split per element is written for
    ``[Block(...) for _ in range(n)]`` only; any other shape is an error."""

    def __init__(self, ctx, site, where: str):
        super().__init__()
        self.ctx, self.site, self.where = ctx, site, where

    def _comp(self, node) -> bool:
        sites = [c for c in _calls(node) if self.site(c)]
        if not sites:
            return True
        f = node.for_in
        simple = f.inner_for_in is None and not f.ifs \
            and _comp_count(f.iter, self.ctx.analyses.get(UNSIZED, frozenset())) is not None \
            and not isinstance(node, cst.DictComp) and len(sites) == 1
        if not simple:
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"a comprehension in {self.where}() builds "
                            "modules that draw their initial values: fwport splits a key per element only for "
                            "`[Module(...) for _ in range(n)]` or over a sequence (`for size in sizes`, "
                            "`zip(a, a[1:])`, `enumerate(a)` of names), one module per element; write a loop that "
                            "splits the key for each module", node)
        return False

    visit_ListComp = visit_GeneratorExp = visit_SetComp = visit_DictComp = _comp


#: analyses key: names the file binds to something that may have no len (``pairs = zip(a, b)``, a call, a generator)
UNSIZED = "torch2jax.modules.unsized"
#: calls whose result has a len
_SIZED_CALLS = frozenset({"list", "tuple", "sorted", "range", "dict"})


def _unsized_names(module: cst.Module) -> frozenset[str]:
    """The names bound anywhere in the file to a value that may have no len: a call other than list/tuple/sorted/
    range (``n_filter_list_pairs = zip(...)``), a generator; a comprehension over one would miscount its keys."""
    out: set[str] = set()
    for node in find_all(module, cst.Assign):
        v = node.value
        if isinstance(v, cst.GeneratorExp) or isinstance(v, cst.Call) and dotted_text(v.func) not in _SIZED_CALLS:
            out |= {t.target.value for t in node.targets if isinstance(t.target, cst.Name)}
    return frozenset(out)


def _comp_count(it: cst.BaseExpression, unsized: frozenset[str] = frozenset()) -> str | None:
    """The number of elements of a comprehension's iterable, as code: ``range(n)`` → n; a sequence named or written
    out (``sizes``, ``self.sizes``, ``[a] + h``, ``dims[1:]``) → its len; ``enumerate(s)`` → len(s); ``zip(a, b)``
    → the least len. None for any other iterable (a generator has no len: one would fail loudly, never miscount)."""
    def sized(x: cst.BaseExpression) -> bool:
        if isinstance(x, cst.BinaryOperation) and isinstance(x.operator, cst.Add):
            return sized(x.left) and sized(x.right)
        if isinstance(x, cst.Subscript) and len(x.slice) == 1 and isinstance(x.slice[0].slice, cst.Slice):
            return sized(x.value)  # dims[1:]: a slice of a sequence is one
        if isinstance(x, cst.Name):
            return x.value not in unsized
        return isinstance(x, (cst.List, cst.Tuple)) or isinstance(x, cst.Attribute) and dotted_text(x) is not None
    if isinstance(it, cst.Call) and not any(a.keyword or a.star for a in it.args):
        f = dotted_text(it.func)
        if f == "range" and len(it.args) == 1:
            return code(it.args[0].value)
        if f == "enumerate" and len(it.args) == 1 and sized(it.args[0].value):
            return f"len({code(it.args[0].value)})"
        if f == "zip" and it.args and all(sized(a.value) for a in it.args):
            lens = [f"len({code(a.value)})" for a in it.args]
            return lens[0] if len(lens) == 1 else f"min({', '.join(lens)})"
        return None
    return f"len({code(it)})" if sized(it) else None


def _given_modules(init: cst.FunctionDef, forward: cst.FunctionDef, ctx, callers: _Callers, plans: dict,
                   stateful: set[str], indirect: list[tuple[_Callers, str, cst.Call]]) -> None:
    """``self.downsample = downsample`` (a module given to ``__init__``), called in ``forward``, in a file with
    BatchNorm: Equinox threads the state through each layer that has one, so what every caller passes is
    followed (the class's own calls, and ``block(...)`` calls of a parameter that holds the class): None or
    modules without state: called as written; None or a Sequential holding BatchNorm: the state is threaded
    through it (the attribute joins ``stateful``); anything else is an error."""
    given: dict[str, str] = {}
    own = callers.params("__init__")
    for stmt in init.body.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else []:
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Name) \
                    and small.value.value in own:
                t = dotted_text(small.targets[0].target) or ""
                if t.startswith("self.") and t.count(".") == 1 and t[5:] not in stateful:
                    given[t[5:]] = small.value.value
    if not given:
        return
    sites = [(callers, None, call) for _, call in callers.calls.get("__init__", [])] + list(indirect)
    for attr, p in given.items():
        calls = [c for c in _calls(forward) if dotted_text(c.func) == f"self.{attr}"]
        if not calls:
            continue
        kinds: set[str] = set() if sites else {UNKNOWN}
        for owner, method, call in sites:
            bound = _bind(call, init, method=True)
            kinds |= _module_kinds(bound.get(p) if bound is not None else None, owner, method, ctx, plans)
        if kinds <= {"none", "stateless"}:
            continue
        if kinds <= {"none", "stateful"}:
            stateful.add(attr)
            continue
        for c in calls:
            ctx.report(Severity.ERROR, "unsupported-construct", f"self.{attr}(...): `{attr}` is the module given to "
                       f"__init__ as `{p}`, and fwport cannot prove whether it holds BatchNorm: Equinox threads a "
                       "state through each layer that has one, so a call of it without the state fails when it "
                       "does; pass the state through it yourself (`y, state = ...(x, state)`) or build it inside "
                       "__init__", c)


def _module_kinds(value: cst.BaseExpression | None, owner: _Callers, method: str | None, ctx, plans: dict,
                  depth: int = 0) -> set[str]:
    """What a module argument may be: "none", "stateful" (a BatchNorm, a Sequential holding one), "stateless"
    (another torch layer, a class of the file without state), UNKNOWN; a local variable of the calling
    method by every value assigned to it there."""
    if value is None or depth > 3:
        return {UNKNOWN}
    if isinstance(value, cst.Name) and value.value == "None":
        return {"none"}
    if isinstance(value, cst.Call):
        q = ctx.imports.resolve(value.func) or ""
        if q in STATEFUL:
            return {"stateful"}
        if q in ("torch.nn.Sequential", "torch.nn.ModuleList"):
            inner = set().union(set(), *(_module_kinds(a.value, owner, method, ctx, plans, depth + 1)
                                         for a in value.args if not a.star))
            if any(a.star for a in value.args) or UNKNOWN in inner:
                return {UNKNOWN}
            return {"stateful"} if "stateful" in inner else {"stateless"}
        if q.startswith("torch.nn.") and q not in ("torch.nn.Parameter",):
            return {"stateless"}
        if isinstance(value.func, cst.Name) and value.func.value in plans:
            return {"stateful"} if plans[value.func.value].get("stateful") else {"stateless"}
        if isinstance(value.func, cst.Name) and value.func.value in ctx.analyses.get(OUTSIDE, {}).get("builders", ()):
            return {"stateless"}  # a builder function returns one layer that draws (a convolution, a linear map)
        return {UNKNOWN}
    if isinstance(value, cst.Name) and method is not None and method in owner.methods \
            and value.value not in owner.params(method):
        values: list[cst.BaseExpression] = []

        class V(cst.CSTVisitor):
            def visit_Assign(self, node):
                if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) \
                        and node.targets[0].target.value == value.value:
                    values.append(node.value)

        scan(owner.methods[method], V())
        if not values:
            return {UNKNOWN}
        return set().union(*(_module_kinds(v, owner, method, ctx, plans, depth + 1) for v in values))
    return {UNKNOWN}


def _outside_init(cls: cst.ClassDef, ctx, plans: dict, callers: _Callers, builders: set[str], stateful_attrs: set[str]):
    """The methods called from ``__init__`` (``self._make_layer(...)``) that build modules drawing initial
    values (they get a key like ``__init__``), each method's parameters that hold a drawing class
    (``block(...)``: given ``key=``), the classes they put in an ``eqx.nn.Sequential``, and whether what
    each returns holds a layer with state. A parameter called to build a module whose class cannot be
    followed is an error."""
    methods = callers.methods
    called: set[str] = set()
    todo = ["__init__"]
    while todo:
        m = todo.pop()
        for c in _calls(methods[m]) if m in methods else []:
            t = dotted_text(c.func) or ""
            if t.startswith("self.") and t[5:] in methods and t[5:] not in ("__init__", "forward") and t[5:] not in called:
                called.add(t[5:])
                todo.append(t[5:])
    # the parameters called in __init__ and those methods: which classes may they hold?
    params: dict[str, set[str]] = {}
    members: set[str] = set()
    classes_in: dict[str, set[str]] = {}  # the file's classes each method builds
    starred: set[str] = set()  # methods that build an nn.Sequential(*list)
    holds_state: dict[str, bool] = {}
    for m in ["__init__", *sorted(called)]:
        if m not in methods:
            continue
        own = callers.params(m)
        keyed: set[str] = set()
        state = False
        classes_in[m] = set()
        for c in _calls(methods[m]):
            if ctx.imports.resolve(c.func) == "torch.nn.Sequential":
                if any(a.star for a in c.args):
                    starred.add(m)
                members |= {k for a in c.args if isinstance(a.value, cst.Call)
                            for k in callers.classes_of(a.value.func, m) if k in plans}
            if ctx.imports.resolve(c.func) in STATEFUL:
                state = True
            if not isinstance(c.func, cst.Name):
                continue
            n = c.func.value
            cands = callers.classes_of(c.func, m) if n in own else ({n} if n in callers.classes else set())
            if not cands:
                continue
            mine = {k for k in cands if k in plans}
            unknown = UNKNOWN in cands or any(k not in plans and not k.startswith("torch.") for k in cands)
            draws = {k for k in cands if k in plans and plans[k]["draws"] or k in LAYERS}
            if any(plans[k].get("stateful") for k in mine) or cands & STATEFUL:
                state = True
            classes_in[m] |= mine
            if n not in own:
                continue
            if unknown or draws and draws != cands:
                ctx.report(Severity.ERROR, "unsupported-construct", f"{n}(...) in {m}(): `{n}` is a parameter, and "
                           "fwport cannot prove which module class it holds at every call (a class of this file "
                           "whose initial values are drawn takes `key=`, other callables do not); call the class "
                           f"by its name, or pass `key=` yourself", c)
                ctx.settle(c)
            elif draws:
                keyed.add(n)
        params[m] = keyed
        holds_state[m] = state
    site = _source_site(ctx, plans, builders, set(), params.get("__init__", set()))
    helpers: set[str] = set()
    changed = True
    while changed:
        changed = False
        for m in sorted(called - helpers):
            site = _source_site(ctx, plans, builders, helpers, params.get(m, set()))
            if any(site(c) for c in _calls(methods[m])):
                helpers.add(m)
                changed = True
    for m, fn in methods.items():  # the helpers take a key now: a call from elsewhere would give none
        if m in called or m == "__init__":
            continue
        for c in _calls(fn):
            t = dotted_text(c.func) or ""
            if t.startswith("self.") and t[5:] in helpers:
                ctx.report(Severity.ERROR, "unsupported-construct", f"{t}(...) in {m}(): {t[5:]}() builds modules "
                           "that draw their initial values, so it takes a key in Equinox (__init__ gives it a split "
                           "of its own); pass one here, and keep what it returns (the module is immutable)", c)
    sequences: set[str] = set()  # helpers that return an nn.Sequential
    for m in helpers:
        rets = _returns(methods[m])
        if rets and all(isinstance(r, cst.Call) and ctx.imports.resolve(r.func) == "torch.nn.Sequential" for r in rets):
            sequences.add(m)
    for m in sequences | starred:
        members |= classes_in.get(m, set())
    for m in ["__init__", *sorted(helpers)]:
        if m in methods:
            scan(methods[m], _Comprehensions(ctx, _source_site(ctx, plans, builders, helpers, params.get(m, set())), m))
    # attributes assigned what a helper returns: a Sequential holding state threads it like a BatchNorm
    init = methods.get("__init__")
    for c in _calls(init) if init else []:
        t = dotted_text(c.func) or ""
        if t.startswith("self.") and t[5:] in helpers and holds_state.get(t[5:]):
            if t[5:] not in sequences:
                ctx.report(Severity.ERROR, "unsupported-construct", f"{t}(...) returns modules holding BatchNorm in "
                           "something other than an nn.Sequential: their state must be threaded through each member; "
                           "return an nn.Sequential", c)
    for stmt in init.body.body if init else []:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else []:
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Call):
                t, f = dotted_text(small.targets[0].target) or "", dotted_text(small.value.func) or ""
                if t.startswith("self.") and t.count(".") == 1 and f.startswith("self.") and f[5:] in sequences \
                        and holds_state.get(f[5:]):
                    stateful_attrs.add(t[5:])
                if t.startswith("self.") and t.count(".") == 1 and holds_state.get("__init__") \
                        and ctx.imports.resolve(small.value.func) == "torch.nn.Sequential" \
                        and any(a.star for a in small.value.args):  # nn.Sequential(*blocks) of blocks with state
                    stateful_attrs.add(t[5:])
    return helpers, {m: ps for m, ps in params.items() if ps}, members, sequences, called


def _held(module: cst.Module, classes: set[str], table: dict) -> dict[str, list[str]]:
    """Each module class → the classes of this file it holds (ranks.py's instances and containers: DETR's
    ``_get_clones(layer, N)``), in file order."""
    at = {s.name.value: i for i, s in enumerate(module.body) if isinstance(s, cst.ClassDef) and s.name.value in classes}
    out = {}
    for name in at:
        info = table.get(name)
        held = set(info.instances.values()) | {c for k in info.containers.values() for c in k} if info else set()
        out[name] = sorted((held & set(at)) - {name}, key=at.get)
    return out


def _held_first(name: str, held: dict, write, path: frozenset = frozenset(), done=None) -> None:
    """``write(name)`` after ``write`` of each class ``name`` holds (at any depth; a cycle: as found), each once: a
    class written below those it holds (DETR's Transformer above its encoder and layers) is written after them, so
    that whether their calls take a key is known; a file written callees first keeps its order."""
    done = set() if done is None else done
    if name in done or name in path:
        return
    for h in held.get(name, ()):
        _held_first(h, held, write, path | {name}, done)
    done.add(name)
    write(name)


def _callees_first(methods: dict[str, cst.FunctionDef], names: list[str]) -> list[str]:
    """``names`` (methods of one class) ordered so that a method comes after those it calls (a cycle: as found)."""
    out: list[str] = []

    def visit(m: str, path: set) -> None:
        if m in out or m in path or m not in names:
            return
        for c in _calls(methods[m]):
            t = dotted_text(c.func) or ""
            if t.startswith("self.") and t.count(".") == 1:
                visit(t[5:], path | {m})
        out.append(m)
    for m in names:
        visit(m, set())
    return out


def _reached(methods: dict[str, cst.FunctionDef], start: str, names: bool = False) -> set[str]:
    """``start`` and the methods it calls as ``self.m(...)``, at any depth (``names``: also the names called
    that the class does not define, a base class's methods)."""
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        if m in seen or m not in methods and not (names and m != start):
            continue
        seen.add(m)
        if m not in methods:
            continue
        todo += [t[5:] for c in _calls(methods[m]) for t in [dotted_text(c.func) or ""]
                 if t.startswith("self.") and t.count(".") == 1]
    return seen


class _DrawsOutsideInit(cst.CSTVisitor):
    """A module that draws its initial values, built in a method ``__init__`` does not call: keys are split and
    handed out in ``__init__`` and the methods it calls (``self._make_layer``) only, so this one would get none."""

    def __init__(self, ctx, classes: set[str], method: str, modules: frozenset[str] | None = frozenset()):
        super().__init__()
        self.ctx, self.classes, self.method = ctx, classes, method
        self.modules = modules  # the submodule attributes: assigning into one of them is model surgery
        self.members: set[str] = set()  # loop names over a submodule (`for block in self.h:`)
        self.surgery: list[tuple[cst.Assign, str]] = []  # assignments into the module's submodules
        self.functional: list[str] = []  # the methods whose surgery surgery.py writes as a new model returned

    def visit_For(self, node: cst.For) -> None:
        if isinstance(node.target, cst.Name) and self.modules is not None and self._field(node.iter) in self.modules:
            self.members.add(node.target.value)

    def _field(self, node: cst.BaseExpression) -> str | None:
        """The first attribute of ``self.<a>...`` (through attributes and subscripts), else None."""
        while isinstance(node, (cst.Attribute, cst.Subscript)):
            if isinstance(node.value, cst.Name) and node.value.value == "self" and isinstance(node, cst.Attribute):
                return node.attr.value
            node = node.value
        return None

    def _surgery(self, target: cst.BaseExpression) -> bool:
        if not isinstance(target, (cst.Attribute, cst.Subscript)):
            return False
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
            return target.value.value == "self" or target.value.value in self.members
        root = target
        while isinstance(root, (cst.Attribute, cst.Subscript)):
            root = root.value
        return isinstance(root, cst.Name) and (root.value in self.members
                                               or root.value == "self" and self._field(target) in self.modules)

    def visit_Assign(self, node: cst.Assign) -> bool:
        if self.modules is None:  # a method of construction: it may set what it likes
            return True
        hit = [t.target for t in node.targets if self._surgery(t.target)]
        if not hit:
            return True
        self.surgery.append((node, code(hit[0])))
        return False  # no other error inside (an nn.Parameter there wraps an existing array)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value == self.method and self.surgery:  # one finding for the method, at its first assignment
            why = surgery.refused(node, self.modules)
            assigned = ", ".join(t for _, t in self.surgery)
            if why is None:
                self.functional.append(self.method)
                self.ctx.report(Severity.WARNING, "idiom-replaced", f"{self.method}() assigns {assigned} (model "
                                "surgery): an Equinox module is an immutable pytree once __init__ returns, so the "
                                "method returns a new model (eqx.tree_at for each array it replaces) and leaves this "
                                f"one as it was: callers must rebind, `model = model.{self.method}(...)` (calls in "
                                "this file are rebound)" + self._configs(), self.surgery[0][0])
            else:
                self.ctx.report(Severity.ERROR, "unsupported-construct", f"{self.method}() assigns {assigned}: an "
                                "Equinox module is an immutable pytree once __init__ returns (model surgery), and "
                                f"fwport writes it as a method returning a new model only when it can follow it: {why}; "
                                "write it as a function returning a new module, e.g. `model = eqx.tree_at(lambda m: "
                                "m.<path>, model, <new value>)` for each array it replaces, and rebind the model where "
                                "it is called", self.surgery[0][0])
            self.surgery = []

    def _configs(self) -> str:
        replaced = set().union(*self.ctx.analyses.get(configs.REPLACED, {}).values())
        held = sorted({t for _, t in self.surgery if t.count(".") == 2 and t.split(".")[1] in replaced})
        if not held:
            return ""
        return (f"; {', '.join(held)}: a field of a frozen configuration, so the new model holds a copy made by "
                "dataclasses.replace, and the configuration object the caller passed, which PyTorch changes too, "
                "stays as it was")

    def visit_Call(self, node: cst.Call) -> None:
        q = self.ctx.imports.resolve(node.func)
        own = isinstance(node.func, cst.Name) and node.func.value in self.classes
        if (q in DRAWING or own) and not any(a.keyword and a.keyword.value == "key" for a in node.args):
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"{code(node.func)}(...) built in "
                            f"{self.method}(), not in __init__: Equinox modules take their initial values from a "
                            "key, which fwport splits and hands out in __init__ and the methods __init__ calls only; "
                            f"build it there, or give {self.method} a `key` argument and pass it a key", node)
            self.ctx.settle(node)


class _Instances(cst.CSTVisitor):
    def __init__(self, ctx, classes: set[str]):
        super().__init__()
        self.ctx, self.classes = ctx, classes
        self.repeated = 0  # inside a loop or a comprehension: the same key for every instance made there

    def _enter(self, node) -> None:
        self.repeated += 1

    def _leave(self, node) -> None:
        self.repeated -= 1

    visit_For = visit_While = visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _enter
    leave_For = leave_While = leave_ListComp = leave_SetComp = leave_DictComp = leave_GeneratorExp = _leave

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value in self.classes \
                and not any(a.keyword and a.keyword.value == "key" for a in node.args):
            if self.repeated:  # PyTorch draws each instance anew: here every one would be the same
                self.ctx.report(Severity.WARNING, "key-added", f"{node.func.value}(...) is made in a loop or a "
                                "comprehension, each given key=jax.random.key(0): every instance starts from the same "
                                "parameters, where PyTorch draws each anew; give each its own key (e.g. "
                                f"[{node.func.value}(key=k) for k in jax.random.split(key, n)])", node)
                return
            self.ctx.report(Severity.INFO, "key-added", f"{node.func.value}(...) draws its initial parameters from "
                            "a key: given one split from the scope's root key where torch.manual_seed made one above it, "
                            "else key=jax.random.key(0); pass your own to vary the initialisation", node)


def _drawing_methods(methods: dict[str, cst.FunctionDef], ctx, skip: set[str]) -> tuple[set[str], dict[str, int]]:
    """The methods (``skip``: ``__init__`` and the methods building modules, which draw from the module's own
    key) that draw random numbers at call time (``eps = torch.randn_like(std)``) or call such a method of the
    class (``self.reparameterize(mu, logvar)``): each takes a ``key`` of its call, never a name of the script
    around. Returns them and, per method, its direct draws."""
    direct = {m: sum(ctx.imports.resolve(c.func) in DRAWS for c in _calls(fn)) for m, fn in methods.items()
              if m not in skip}
    keyed = {m for m, n in direct.items() if n}
    changed = True
    while changed:  # a method calling a keyed method of the class is keyed too
        changed = False
        for m in direct:
            called = {t[5:] for c in _calls(methods[m]) for t in [dotted_text(c.func) or ""] if t.startswith("self.")}
            if m not in keyed and called & keyed:
                keyed.add(m)
                changed = True
    return keyed, direct


#: tensor methods whose arguments are dimensions (or sizes with the batch's first), as batch.py reads them in forward
_DIM_METHODS = frozenset({"view", "reshape", "size", "permute", "transpose", "flatten", "unsqueeze", "squeeze", "split",
                          "chunk", "sum", "mean", "max", "min", "argmax", "argmin", "softmax", "log_softmax", "var",
                          "std", "expand", "repeat", "cumsum", "norm", "unbind", "gather", "topk", "narrow"})
_DIM_KEYWORDS = frozenset({"dim", "dim0", "dim1", "start_dim", "end_dim", "dims"})
#: torch functions taking a dimension positionally after the tensor(s)
_DIM_FUNCTIONS = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.stack", "torch.sum", "torch.mean",
                            "torch.max", "torch.min", "torch.argmax", "torch.softmax", "torch.log_softmax",
                            "torch.nn.functional.softmax", "torch.nn.functional.log_softmax", "torch.flatten",
                            "torch.split", "torch.chunk", "torch.var", "torch.std", "torch.transpose", "torch.squeeze",
                            "torch.unsqueeze", "torch.cumsum", "torch.topk", "torch.nn.functional.normalize",
                            "torch.unbind", "torch.norm", "torch.amax", "torch.amin"})


class _HelperDims(cst.CSTVisitor):
    """A method that forward calls (``self.encode(x)``) sees one example, but batch.py writes the dimensions of
    forward alone for one example: a dimension or a view with the batch's sizes in such a method would be
    translated as written, counting the batch axis that is not there (``torch.cat([a, b], dim=1)`` would join the
    wrong axis). Each is a ``batch-axis`` error; negative dimensions count from the end and are the same."""

    def __init__(self, ctx, where: str, found: list | None = None):
        super().__init__()
        self.ctx, self.where = ctx, where
        self.found = found  # (a module-level function: _function_dims) collected with the tensor used, not reported

    def visit_Subscript(self, node: cst.Subscript) -> None:
        """``x.shape[0]`` (a literal non-negative index) or ``x.shape[1:]`` (a slice not starting from the end) of the
        input: the batch's sizes in PyTorch, the example's in one (collected for module-level functions; a method's
        keep what they had)."""
        if self.found is not None and isinstance(node.value, cst.Attribute) and node.value.attr.value == "shape" \
                and len(node.slice) == 1:
            part = node.slice[0].slice
            if isinstance(part, cst.Index) and isinstance(part.value, cst.Integer) \
                    or isinstance(part, cst.Slice) and not (part.lower is not None and _negative(part.lower)):
                self.found.append((node, [None], node.value.value))

    def visit_Assign(self, node: cst.Assign) -> None:
        """``b, h, w = x.shape`` / ``_, h, w = *x.shape, x.device``: the whole shape unpacked by position, the batch
        size first (collected for module-level functions; ``x.size()`` is visit_Call's)."""
        if self.found is None:
            return
        whole = lambda e: isinstance(e, cst.Attribute) and e.attr.value == "shape"
        v = node.value
        if whole(v) and any(isinstance(t.target, (cst.Tuple, cst.List)) for t in node.targets):
            self.found.append((v, [None], v.value))
        elif isinstance(v, (cst.Tuple, cst.List)):
            for e in v.elements:
                if isinstance(e, cst.StarredElement) and whole(e.value):
                    self.found.append((e.with_changes(comma=cst.MaybeSentinel.DEFAULT), [None], e.value.value))

    def visit_Call(self, node: cst.Call) -> None:
        f = node.func
        q = self.ctx.imports.resolve(f)
        method = isinstance(f, cst.Attribute) and q is None and f.attr.value in _DIM_METHODS \
            and not (isinstance(f.value, cst.Name) and f.value.value == "self")
        dims = [a.value for a in node.args if a.keyword is not None and a.keyword.value in _DIM_KEYWORDS]
        if method or q in _DIM_FUNCTIONS:
            skip = 0 if method else 2 if q == "torch.norm" else 1  # (torch.norm(x, p, dim): p before the dim)
            dims += [a.value for a in node.args[skip:] if a.keyword is None]
            if method and not node.args and f.attr.value in ("size", "flatten", "squeeze", "sum", "mean", "max", "min",
                                                             "argmax", "argmin", "var", "std", "norm"):
                dims.append(None)  # over every axis, the batch's included
        elif not dims:
            return
        if dims and all(d is not None and _negative(d) for d in dims):
            return
        name = f"{dotted_text(f) or ''}" if not method else f".{f.attr.value}"
        if self.found is not None:
            self.found.append((node, dims, f.value if method else node))
            return
        self.ctx.report(Severity.ERROR, "batch-axis", f"{name}(...) in {self.where}, which forward calls with one "
                        "example: its dimensions and sizes are written for the batch and are translated as written "
                        "(fwport writes them for one example in forward only); compute this in forward, or write "
                        "the method for one example (negative dimensions are the same for both)", node)


def _function_dims(module: cst.Module, ctx, classes: set[str]) -> dict[str, tuple]:
    """The module-level functions (not classes) whose dimensions or sizes are written for the batch (_HelperDims's:
    ``x.sum(0)``, ``torch.cat(..., dim=1)``, ``x.size(0)``, and ``x.shape[0]``), or that call such a function of the
    file: name → (its parameters, [(expression, the parameters giving its dimensions, or None: written there)]); a
    dimension that is a parameter counts where a call leaves it a non-negative one (function_dims_used).
    batch.Forward refuses a call of one given a batched tensor in a per-example forward: one example reaches it, its
    dimensions would be translated as written (timm's ``drop_path(x, p)``, ``shape = (x.shape[0],) + (1,) *
    (x.ndim - 1)``, would drop features of one example, not whole examples)."""
    defs = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value not in classes}
    out: dict[str, tuple] = {}
    for name, fn in defs.items():
        params = {p.name.value: p.default for p in (*fn.params.posonly_params, *fn.params.params,
                                                    *fn.params.kwonly_params)}
        found: list = []
        scan(fn.body, _HelperDims(ctx, f"{name}()", found))
        entries = []
        reach = _Derived.reach(fn)
        for node, dims, subject in found:
            given = {d.value for d in dims if isinstance(d, cst.Name) and d.value in params}
            written = any(not (isinstance(d, cst.Name) and d.value in params) for d in dims)
            entries.append((node, None if written or not given else frozenset(given), reach(subject)))
        if entries:
            out[name] = (fn.params, entries)
    changed = True
    while changed:  # (a function calling one of them by name hands it the batch too)
        changed = False
        for name, fn in defs.items():
            if name not in out:
                reach = _Derived.reach(fn)
                calls = [(c, None, reach(c)) for c in _calls(fn)
                         if isinstance(c.func, cst.Name) and c.func.value in out]
                if calls:
                    out[name], changed = (fn.params, calls), True
    return out


def per_example_function(fn: cst.FunctionDef, ctx, table: dict) -> cst.FunctionDef:
    """A function of the file that only the forwards call, with batched tensors (ranks.per_example_functions),
    written for one example as a forward is: ``seq_k.eq(0).unsqueeze(1).expand(batch_size, len_q, len_k)`` →
    ``jnp.broadcast_to(jnp.expand_dims(seq_k == 0, 0), (len_q, len_k))``. What cannot be is refused there, in its
    body (batch.Forward's findings)."""
    f = Forward(ctx, set(ranks.function_params(fn)), set(), {}, ranks=table[ranks.function_key(fn.name.value)])
    new = fn.with_changes(body=rewrite(fn.body, f))
    if f.dropped:  # (`b = t.shape[0]`: the batch size, which one example has not)
        new = rewrite(new, _Dropped())
    if f.key_sites or f.state_sites:  # (no module of its own: never; a draw is refused where it is)
        ctx.report(Severity.ERROR, "unsupported-construct", f"{fn.name.value}(), called by forward with batched "
                   "tensors, calls a layer needing a key or state: call the layer in forward", fn)
    return new


def function_dims_used(entry: tuple, call: cst.Call, negative_fields: frozenset[str] = frozenset(),
                       batched=lambda arg: True) -> list[cst.CSTNode]:
    """The expressions of a _function_dims entry that count the batch axis for this call: those written there, and
    those whose dimension is a parameter the call gives (or leaves at its default) as other than a negative literal
    (``l2norm(t, dim=-1)`` called as ``l2norm(x)`` counts from the end: the same per example), or than ``self.f``
    with f one of ``negative_fields`` (negative_fields: the calling class's __init__ sets f to negative literals
    only); each applied to a value of a parameter the call gives an argument ``batched`` says is batched."""
    params, entries = entry
    names = [p.name.value for p in (*params.posonly_params, *params.params)]
    given = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    given.update({names[i]: a.value for i, a in enumerate(a for a in call.args if a.keyword is None and not a.star)
                  if i < len(names)})
    defaults = {p.name.value: p.default for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    starred = any(a.star for a in call.args)

    def counts(p: str) -> bool:
        v = given.get(p, defaults.get(p))
        field = isinstance(v, cst.Attribute) and isinstance(v.value, cst.Name) and v.value.value == "self" \
            and v.attr.value in negative_fields
        return starred or v is None or not (_negative(v) or field)
    inputs = {p for p, v in given.items() if batched(v)}  # (*args, **kwargs: whatever they get)
    inputs |= {p.name.value for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)}
    used = [node for node, ps, reach in entries if (ps is None or any(counts(p) for p in ps))
            and (starred or reach is None or reach & inputs)]
    # (the sizes read first: x.shape[1:], *x.shape; what is computed from them after)
    return sorted(used, key=lambda n: not isinstance(n, (cst.Subscript, cst.StarredElement, cst.Attribute)))


class _Derived:
    """The names of a module-level function that hold its input or values computed from it (its parameters, and
    what is bound from them), so that a dimension written for the batch is one only where it is applied to the
    input: ``posemb_sincos_2d(t)``'s ``y.flatten()``, y a grid built from ``t.shape[1:]``, is the same for one
    example. A size read from the input (``x.shape[1]``, ``x.size(-1)``, ``x.device``) does not carry it on:
    those that count the batch axis are themselves found (_HelperDims); the whole ``x.shape`` / ``x.size()``
    does."""

    #: attributes of a tensor that are not values of it (the sizes read whole, ``x.shape``, do carry the input)
    SIZES = frozenset({"device", "dtype", "ndim", "is_cuda", "requires_grad"})
    SIZE_CALLS = frozenset({"dim", "ndimension", "numel", "get_device"})

    @staticmethod
    def reach(fn: cst.FunctionDef):
        """expression → the parameters of ``fn`` whose values it reads (None: any, a nested function or lambda
        hiding the flow)."""
        if find_all(fn.body, cst.FunctionDef) or find_all(fn.body, cst.Lambda) or find_all(fn.body, cst.ClassDef):
            return lambda node: None
        p = fn.params
        params = [q.name.value for q in (*p.posonly_params, *p.params, *p.kwonly_params)]
        params += [q.name.value for q in (p.star_arg, p.star_kwarg) if isinstance(q, cst.Param)]
        binds = _Derived.binds(fn)
        derived = {q: _Derived.names(fn, {q}, binds) for q in params}
        return lambda node: frozenset(q for r in [_Derived.reads(node)] for q in params if not r.isdisjoint(derived[q]))

    @staticmethod
    def names(fn: cst.FunctionDef, roots: set[str], binds: list | None = None) -> set[str]:
        """The names of ``fn`` holding ``roots`` (parameters) or values computed from them (``binds``: _Derived.binds
        of ``fn``, shared by the questions about each of its parameters)."""
        names = set(roots)
        binds = _Derived.binds(fn) if binds is None else binds
        changed = True
        while changed:
            changed = False
            for targets, reads in binds:
                if not reads.isdisjoint(names):
                    new = targets - names
                    if new:
                        names |= new
                        changed = True
        return names

    @staticmethod
    def binds(fn: cst.FunctionDef) -> list[tuple[set[str], set[str]]]:
        """``fn``'s bindings, in the order ``names`` tries them: (the names bound, the names the value reads as
        ``reads`` says)."""
        binds: list[tuple[list[cst.CSTNode], cst.CSTNode]] = []
        for a in find_all(fn.body, cst.Assign):
            binds.append(([t.target for t in a.targets], a.value))
        for a in (*find_all(fn.body, cst.AugAssign), *find_all(fn.body, cst.AnnAssign)):
            if a.value is not None:
                binds.append(([a.target], a.value))
        for a in (*find_all(fn.body, cst.For), *find_all(fn.body, cst.CompFor)):
            binds.append(([a.target], a.iter))
        for a in find_all(fn.body, cst.NamedExpr):
            binds.append(([a.target], a.value))
        for a in find_all(fn.body, cst.WithItem):
            if a.asname is not None:
                binds.append(([a.asname.name], a.item))
        return [({n.value for t in targets for n in find_all(t, cst.Name)}, _Derived.reads(value))
                for targets, value in binds]

    @staticmethod
    def reads(node: cst.CSTNode) -> set[str]:
        """The names ``node``'s value reads: every name under it, but not through a size of a tensor (an attribute
        in SIZES, ``x.shape[i]``'s ``x``, the subject of a SIZE_CALLS call or of ``x.size(i)``; the whole
        ``x.shape`` / ``x.size()`` does read ``x``); an attribute's own name is not a read."""
        out: set[str] = set()
        todo = [node]
        pop, push, sizes, calls = todo.pop, todo.extend, _Derived.SIZES, _Derived.SIZE_CALLS
        while todo:
            node = pop()
            t = node.__class__
            if t is cst.Name:
                out.add(node.value)
            elif t is cst.Attribute:
                if node.attr.value not in sizes:
                    todo.append(node.value)
            elif t is cst.Subscript and node.value.__class__ is cst.Attribute and node.value.attr.value == "shape":
                push(node.slice)  # (x.shape[i]: a size, found by itself where it counts the batch)
            elif t is cst.Call and node.func.__class__ is cst.Attribute \
                    and (node.func.attr.value in calls or node.func.attr.value == "size" and node.args):
                push(node.args)
            else:
                push(children(node))
        return out


def negative_fields(cls: cst.ClassDef, others: list[cst.Call]) -> frozenset[str]:
    """The fields ``cls``'s __init__ sets (``self.dim = dim``, once, and no other method does) to a negative literal
    (or a conditional between two), or to a parameter every call of the class in ``others`` (the file's) gives such
    a value or leaves at its negative default: ``L2Norm(dim=-1)``'s ``l2norm(t, dim=self.dim)`` counts from the end
    (function_dims_used). Any other value (a name, arithmetic) is not followed."""
    methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    init = methods.get("__init__")
    if init is None:
        return frozenset()
    sets: dict[str, list] = {}
    for m, fn in methods.items():
        for a in (*find_all(fn, cst.Assign), *find_all(fn, cst.AugAssign), *find_all(fn, cst.AnnAssign)):
            for t in ([t.target for t in a.targets] if isinstance(a, cst.Assign) else [a.target]):
                for n in find_all(t, cst.Attribute):
                    if isinstance(n.value, cst.Name) and n.value.value == "self":
                        ok = m == "__init__" and isinstance(a, cst.Assign) and t is n
                        sets.setdefault(n.attr.value, []).append(a.value if ok else None)
    params = {p.name.value: p for p in init.params.params[1:]} | {p.name.value: p for p in init.params.kwonly_params}
    calls = [c for c in others if isinstance(c.func, cst.Name) and c.func.value == cls.name.value]
    out = set()
    for field, values in sets.items():
        if len(values) != 1 or values[0] is None:
            continue
        v = values[0]
        if _negative_value(v):
            out.add(field)
        elif isinstance(v, cst.Name) and v.value in params:
            bound = [_bind(c, init, method=True) for c in calls]
            p = params[v.value]
            if all(b is not None and (b.get(v.value) is not None and _negative_value(b[v.value])) for b in bound) \
                    and (bound or p.default is not None and _negative(p.default)):
                out.add(field)
    return frozenset(out)


def _negative_value(node: cst.BaseExpression) -> bool:
    """A negative literal, or a conditional between two (``-1 if flag else -2``)."""
    return _negative(node) or isinstance(node, cst.IfExp) and _negative_value(node.body) \
        and _negative_value(node.orelse)


def _negative(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) \
        and isinstance(node.expression, cst.Integer)


class _MethodKeys(cst.CSTTransformer):
    """In a keyed method other than forward: ``self.m(...)`` of a keyed method ``m`` → ``self.m(..., key=key)``."""

    def __init__(self, keyed: set[str]):
        super().__init__()
        self.keyed = keyed

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        t = dotted_text(original.func) or ""
        if t.startswith("self.") and t[5:] in self.keyed and not any(a.keyword and a.keyword.value == "key"
                                                                       for a in original.args):
            args = [*updated.args]
            if args:
                args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            return updated.with_changes(args=[*args, cst.Arg(cst.Name("key"), keyword=cst.Name("key"), equal=_EQ)])
        return updated


_EQ = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))


def _submodules(init: cst.FunctionDef | None, ctx) -> dict[str, str]:
    """``self.NAME = <call>`` in ``__init__`` → the qualified source class called. ``nn.Linear(...) if c else
    nn.Identity()`` (either order; a LayerNorm over the last axis alike) counts as the Linear: both keep the rank
    and take any number of leading axes in PyTorch, and the Identity, vmapped or vectorized as the Linear is, is
    still the identity (cross_vit's ProjectInOut), so the rank analysis maps a sequence over it."""
    out: dict[str, str] = {}
    if init is None:
        return out
    for stmt in init.body.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for s in stmt.body:
            if isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.value, cst.IfExp):
                t = dotted_text(s.targets[0].target)
                q = _per_vector_or_identity(s.value, ctx)
                if t and t.startswith("self.") and t.count(".") == 1 and q:
                    out[t[5:]] = q
            elif isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.value, cst.Call):
                t = dotted_text(s.targets[0].target)
                q = ctx.imports.resolve(s.value.func)
                if t and t.startswith("self.") and t.count(".") == 1 and q:
                    out[t[5:]] = q
                    if q == "torch.nn.Sequential" and any(
                            isinstance(a.value, cst.Call) and ctx.imports.resolve(a.value.func) in RANDOM
                            for a in s.value.args):
                        out[t[5:]] = "torch.nn.Sequential+random"
    return out


def _per_vector_or_identity(value: cst.IfExp, ctx) -> str | None:
    """``nn.Linear(...) if c else nn.Identity()`` (or the other way round; a LayerNorm over the last axis alone
    alike) → the per-vector layer's qualified class; anything else → None."""
    from fwport.packs.torch2jax.ranks import per_vector
    calls = [v for v in (value.body, value.orelse) if isinstance(v, cst.Call)]
    if len(calls) != 2:
        return None
    qs = [ctx.imports.resolve(c.func) for c in calls]
    for (q, c), other in ((((qs[0], calls[0]), qs[1])), ((qs[1], calls[1]), qs[0])):
        if other == "torch.nn.Identity" and per_vector(q, c):
            return q
    return None


def _dict_entries(init: cst.FunctionDef | None, ctx) -> dict[str, str]:
    """``self.d = nn.ModuleDict(dict(k=<call>, ...))`` (or ``{"k": <call>}``) in ``__init__`` → ``d["k"]`` (as the
    forward reads it, layers.module_dict_reads) → the qualified source class called."""
    out: dict[str, str] = {}
    for stmt in init.body.body if init is not None else ():
        for s in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if not (isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.value, cst.Call) and s.value.args
                    and ctx.imports.resolve(s.value.func) == "torch.nn.ModuleDict"):
                continue
            t, d = dotted_text(s.targets[0].target) or "", s.value.args[0].value
            entries = []
            if isinstance(d, cst.Call) and dotted_text(d.func) == "dict":
                entries = [(a.keyword.value, a.value) for a in d.args if a.keyword is not None]
            elif isinstance(d, cst.Dict):
                entries = [(e.key.evaluated_value, e.value) for e in d.elements
                           if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)]
            for k, v in entries:
                q = ctx.imports.resolve(v.func) if isinstance(v, cst.Call) else None
                if t.startswith("self.") and t.count(".") == 1 and q:
                    out[f'{t[5:]}["{k}"]'] = q
    return out


#: tensor methods filling a tensor in place → the torch.nn.init function doing the same (copy_: none); in __init__
#: (or a method it calls, or one self.apply is given), on an array a field holds (``self.emb.weight.data.copy_(v)``,
#: ``module.weight.data.normal_(mean=0.0, std=0.02)``, ``self.table.fill_(0.5)``), the field is rebuilt (_Inits)
_IN_PLACE_FILLS = {"copy_": None, "fill_": "constant_", "zero_": "zeros_", "normal_": "normal_", "uniform_": "uniform_"}


class _Inits(cst.CSTTransformer):
    """``init.X_(self.conv1.weight, ...)`` in ``__init__`` (or a method it calls) → ``self.conv1 =
    eqx.tree_at(lambda m: m.weight, self.conv1, <value>)``; ``init.X_(self.kernel)`` → ``self.kernel = <value>``
    (the values: init.py). Across the fields built so far (``fields``: the statement → their names):
    ``for p in self.parameters(): if <test of p>: init.X_(p, ...)`` (or ``for name, p in
    self.named_parameters()``) → ``self.a, self.b = reinit_arrays({...}, lambda name, p: <test>, lambda key, p:
    <value>)``; ``self.apply(self.M)``, M a method testing ``isinstance(module, nn.Linear)`` and re-initialising
    ``module.weight`` (``appliers``: M's name → the classes it tests) → ``self.a, self.b =
    reinit_layers({...}, lambda m: isinstance(m, (nn.Linear, ...)), self.M)``; other ``self.apply(fn)`` is an
    error: an Equinox module is not changed in place."""

    def __init__(self, ctx, fields=None, appliers=None, root: str = "self", local: dict[str, set[int]] | None = None,
                 wrapped: set[str] | None = None):
        super().__init__()
        self.ctx, self.fields, self.appliers, self.root = ctx, fields or (lambda node: []), appliers or {}, root
        self.local = local or {}  # names bound to a layer (`proj = nn.Linear(...)`) → the statements re-initialising it
        self.wrapped = wrapped or set()  # ... those bound to it wrapped, `PerVector(nn.Linear(...))`: its arrays

    def _gain_call(self, call: cst.Call) -> bool:
        return self.ctx.imports.resolve(call.func) == "torch.nn.init.calculate_gain"

    def visit_Call(self, node: cst.Call) -> None:
        if dotted_text(node.func) == "self.apply" and not self._applier(node):
            self.ctx.report(Severity.ERROR, "unsupported-construct", "self.apply(fn) runs fn on every submodule to "
                            "re-initialise it in place; an Equinox module is immutable: re-initialise each layer "
                            "where __init__ builds it (`init.normal_(self.fc.weight, std=0.02)` is translated to "
                            "`self.fc = eqx.tree_at(lambda m: m.weight, self.fc, ...)`), or map over the built "
                            "model with jax.tree_util and eqx.tree_at (fwport translates `self.apply(self.method)` "
                            "where the method tests isinstance(module, <layer>) and re-initialises module.<array>)",
                            node)

    def _applier(self, call: cst.Call) -> str | None:
        if len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star:
            t = dotted_text(call.args[0].value) or ""
            if t.startswith("self.") and t[5:] in self.appliers:
                return t[5:]
        return None

    def _init_call(self, stmt) -> tuple[cst.Call, str] | None:
        """``init.X_(...)`` as a whole statement (X translated) → (the call, X)."""
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Expr) \
                or not isinstance(stmt.body[0].value, cst.Call):
            return None
        call = stmt.body[0].value
        q = self.ctx.imports.resolve(call.func) or ""
        if not q and isinstance(call.func, cst.Attribute) and call.func.attr.value in _IN_PLACE_FILLS \
                and (dotted_text(call.func.value) or "").count(".") >= 1:  # self.fc.weight.data.copy_(w)
            return call, "." + call.func.attr.value  # (a method: its name with the dot)
        if not q.startswith("torch.nn.init.") or q[14:] not in inits.TRANSLATED or not call.args:
            return None
        return call, q[14:]

    def _value(self, call: cst.Call, name: str, shape: str) -> str | None:
        given = call
        if name == ".copy_":  # t.copy_(v): t's new value, v broadcast to t's shape and cast to its dtype
            target = shape[:-len(".shape")]
            if len(call.args) != 1 or call.args[0].star or call.args[0].keyword:
                self.ctx.report(Severity.ERROR, "unsupported-construct", ".copy_(...) with these arguments is not "
                                f"translated: write {target}'s new value (eqx.tree_at for a layer's array)", call)
                self.ctx.settle(call)
                return None
            spell = self.ctx.spell_text
            return (f"{spell('jax.numpy.broadcast_to')}({spell('jax.numpy.asarray')}({code(call.args[0].value)}, "
                    f"dtype={target}.dtype), {shape})")
        if name.startswith("."):  # t.normal_(0, 0.02) is init.normal_(t, 0, 0.02)
            call = call.with_changes(args=[cst.Arg(call.func.value), *_commas_after(call.args)])
            name = _IN_PLACE_FILLS[name[1:]]
        try:
            return inits.value(name, call, shape, self.ctx, self._gain_call)
        except inits.Unsupported as e:
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"{code(given.func)}(...) is not translated: {e}",
                            given)
            self.ctx.settle(given)
            return None

    def _fields(self, original, what: str, node) -> str | None:
        names = self.fields(original)
        if not names:
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"{what}: fwport found no submodule built before "
                            "it in __init__ (`self.name = <layer or module>(...)`) to re-initialise", node)
            return None
        return "{" + ", ".join(f'"{n}": self.{n}' for n in names) + "}"

    @staticmethod
    def _targets(fields: str) -> str:
        names = [f.split(":")[0].strip().strip('"') for f in fields[1:-1].split(", ")]
        return ", ".join(f"self.{n}" for n in names) + ("," if len(names) == 1 else "")

    def leave_For(self, original, updated):
        """``for [name, ]p in self[.named]_parameters(): [if <test>:] init.X_(p, ...)``; ``for m in self.modules():``
        (_modules_loop)."""
        it = original.iter
        if isinstance(it, cst.Call) and not it.args and dotted_text(it.func) == "self.modules":
            return self._modules_loop(original, updated)
        if not (isinstance(it, cst.Call) and not it.args and dotted_text(it.func) in ("self.parameters",
                                                                                      "self.named_parameters")):
            return updated
        named = dotted_text(it.func) == "self.named_parameters"
        t = original.target
        if named and isinstance(t, cst.Tuple) and len(t.elements) == 2 \
                and all(isinstance(e.value, cst.Name) for e in t.elements):
            pname, p = t.elements[0].value.value, t.elements[1].value.value
        elif not named and isinstance(t, cst.Name):
            pname, p = "_", t.value
        else:
            return updated
        body = list(original.body.body) if isinstance(original.body, cst.IndentedBlock) else None
        test = None
        if body and len(body) == 1 and isinstance(body[0], cst.If) and body[0].orelse is None \
                and isinstance(body[0].body, cst.IndentedBlock):
            test, body = body[0].test, list(body[0].body.body)
        found = self._init_call(body[0]) if body and len(body) == 1 and original.orelse is None else None
        if found is None:
            if any(self._init_call(s) for s in _statements(original.body)):
                self.ctx.report(Severity.ERROR, "unsupported-construct", "a loop over the parameters re-initialising "
                                "them is translated when its body is one `init.X_(p, ...)`, under at most one `if` "
                                "testing the parameter (and its name)", original)
                self.ctx.settle(*[c for c in _calls(original)])
            return updated
        call, name = found
        if name.startswith("."):  # p.data.normal_(mean=0.0, std=0.02)
            if (dotted_text(call.func.value) or "").removesuffix(".data") != p:
                return updated
        elif dotted_text(call.args[0].value) != p or call.args[0].keyword is not None:
            return updated
        cond = "True"
        if test is not None:
            cond = _parameter_test(test, p, pname)
            if cond is None:
                self.ctx.report(Severity.ERROR, "unsupported-construct", f"the test `{code(test)}` of the parameters "
                                "to re-initialise is not one fwport translates (comparisons of p.dim(), p.ndim, "
                                "p.shape, p.numel() and string tests of the name, with literals)", test)
                self.ctx.settle(*_calls(original))
                return updated
        value = self._value(call, name, f"{p}.shape")
        if value is None:
            return updated
        fields = self._fields(original, f"{code(it)} re-initialised", original)
        if fields is None:
            self.ctx.settle(*_calls(original))
            return updated
        helper = layers.use(self.ctx, "reinit_arrays")
        # as many lines as the loop (the passes keep line structure: later findings keep their lines)
        n = max(2, code(original.with_changes(leading_lines=[])).strip("\n").count("\n") + 1)
        # (the breaks inside the call's and the last lambda's parentheses: the key added later resets the commas)
        ind = " " * 4  # (under the statement's own indentation)
        head, select, draw = (f"{self._targets(fields)} = {helper}(", f"lambda {pname if named else '_'}, {p}: {cond}",
                              f"lambda key, {p}: {value}))")
        if n == 2:
            line = f"{head}{fields}, {select}, (\n{ind}{draw}\n"
        else:
            line = f"{head}\n{ind}{fields}, {select}, (\n" + "\n" * (n - 3) + f"{ind}{draw}\n"
        stmt = parsed_statement(line)
        self.ctx.report(Severity.INFO, "idiom-replaced", f"{code(it)} re-initialised in place → {helper}: the fields "
                        "built so far rebuilt with each selected array drawn anew (a key per array)" +
                        ("; the names are PyTorch's where the Equinox tree mirrors the module" if named else ""), original)
        if self.ctx.analyses.get(OUTSIDE, {}).get("attention"):
            self.ctx.report(Severity.WARNING, "approximate", f"{code(it)}: MultiheadAttention's packed in_proj_weight "
                            "(3E, E) is three (E, E) projections in Equinox, named differently: a draw that depends on "
                            "the shape (xavier, kaiming: the fans) or on the name differs for them", original)
        return stmt.with_changes(leading_lines=updated.leading_lines)

    def _modules_loop(self, original, updated):
        """``for m in self.modules(): if isinstance(m, nn.Conv2d): init.X_(m.weight, ...)`` (DETR's mask head): what
        ``self.apply`` of a function with that body does (the order of the layers aside, which only decides their
        keys) → the body as a local function re-initialising ``m`` and ``self.a, self.b = reinit_layers({...}, lambda
        m: isinstance(m, ...), init_layer)``; a body that does more is an error."""
        t = original.target
        fn = None
        if isinstance(t, cst.Name) and original.orelse is None and isinstance(original.body, cst.IndentedBlock):
            fn = cst.FunctionDef(cst.Name("init_layer"), cst.Parameters([cst.Param(cst.Name(t.value))]), original.body)
        kinds = _applier_kinds(fn, self.ctx, static=True) if fn is not None else None
        if not kinds:
            if any(self._init_call(s) for s in _statements(original.body)):
                self.ctx.report(Severity.ERROR, "unsupported-construct", "a loop over self.modules() re-initialising "
                                "layers is translated when its body only tests the layer's class (isinstance(m, "
                                "nn.Conv2d)) and re-initialises its arrays (init.X_(m.weight, ...))", original)
                self.ctx.settle(*_calls(original))
            return updated
        fields = self._fields(original, "for m in self.modules()", original)
        if fields is None:
            self.ctx.settle(*_calls(original))
            return updated
        fn = _applied_method(fn, self.ctx)
        kind = kinds[0] if len(kinds) == 1 else f"({', '.join(kinds)})"
        line = (f"{self._targets(fields)} = {layers.use(self.ctx, 'reinit_layers')}({fields}, "
                f"lambda m: isinstance(m, {kind}), init_layer)\n")
        self.ctx.report(Severity.INFO, "idiom-replaced", "for m in self.modules() re-initialising layers → reinit_layers: "
                        "the loop's body as init_layer, each layer it re-initialises replaced by what it returns (a key "
                        "per layer)", original)
        return cst.FlattenSentinel([fn.with_changes(leading_lines=updated.leading_lines), parsed_statement(line)])

    def leave_SimpleStatementLine(self, original, updated):
        if len(updated.body) != 1 or not isinstance(updated.body[0], cst.Expr) \
                or not isinstance(updated.body[0].value, cst.Call):
            return updated
        call = updated.body[0].value
        applier = self._applier(call) if dotted_text(call.func) == "self.apply" else None
        if applier is not None:
            fields = self._fields(original, "self.apply(...)", call)
            if fields is None:
                return updated
            kinds = ", ".join(self.appliers[applier])
            if len(self.appliers[applier]) > 1:
                kinds = f"({kinds})"
            line = (f"{self._targets(fields)} = {layers.use(self.ctx, 'reinit_layers')}({fields}, "
                    f"lambda m: isinstance(m, {kinds}), self.{applier})\n")
            self.ctx.report(Severity.INFO, "idiom-replaced", f"self.apply(self.{applier}) → reinit_layers: each layer "
                            f"{applier} re-initialises is replaced by what it returns (a key per layer)", call)
            if self.ctx.analyses.get(OUTSIDE, {}).get("attention") and "Linear" in kinds:
                self.ctx.report(Severity.WARNING, "approximate", f"self.apply(self.{applier}): Equinox's "
                                "MultiheadAttention holds its query, key and value projections as eqx.nn.Linear "
                                "layers, which this re-initialises too; PyTorch's holds them as one packed "
                                "in_proj_weight, which isinstance(m, nn.Linear) does not select", call)
            return updated.with_changes(body=parsed_statement(line).body)
        found = self._init_call(updated)
        if found is None:
            return updated
        call, name = found
        target = dotted_text(call.func.value if name.startswith(".") else call.args[0].value) or ""
        if target.endswith(".data") and target.count(".") > 1:  # `m.weight.data`: the array itself in JAX
            target = target[:-5]
        parts = target.split(".")
        local = len(parts) > 1 and parts[0] in self.local
        if local and id(original) not in self.local[parts[0]]:
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"{code(call.func)}({target}, ...) re-initialises "
                            f"the layer `{parts[0]}` after it is used: PyTorch changes it wherever it is held, Equinox "
                            f"rebuilds it (`{parts[0]} = eqx.tree_at(...)`) and what holds it already keeps the old one; "
                            "move the re-initialisation right after the layer is built", call)
            self.ctx.settle(call)
            return updated
        if not name.startswith(".") and call.args[0].keyword is not None or len(parts) < 2 \
                or parts[0] != self.root and not local:
            return updated  # a tensor not held by a field: its no-rule finding stays
        if local and parts[0] in self.wrapped:  # PerVector(layer): the layer's arrays
            parts = [parts[0], "layer", *parts[1:]]
            target = ".".join(parts)
        value = self._value(call, name, f"{target}.shape")
        if value is None:
            return updated
        field = f"{self.root}.{parts[1]}" if self.root == "self" and not local else parts[0]
        rest = parts[2:] if self.root == "self" and not local else parts[1:]
        if rest:
            value = (f"{self.ctx.spell_text('equinox.tree_at')}(lambda m: m.{'.'.join(rest)}, {field}, {value})")
        return updated.with_changes(body=[statement(f"{field} = {value}\n").body[0]])


def _commas_after(args) -> list[cst.Arg]:
    return [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args]


def _bound_once(fn: cst.FunctionDef) -> Counter:
    bound: Counter = Counter()
    for node in find_all(fn, cst.Assign):
        for t in node.targets:
            for n in find_all(t.target, cst.Name) if not isinstance(t.target, cst.Attribute) else []:
                bound[n.value] += 1
    return bound


def _layer_binding(st, ctx, bound: Counter) -> tuple[str, bool] | None:
    """``proj = nn.Linear(...)`` (a top-level statement binding a name, once in the method, to a PyTorch layer; or
    ``proj = PerVector(nn.Linear(...))``, the layer wrapped by ranks.py) → (the name, whether it is wrapped)."""
    small = st.body[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
            and isinstance(small.value, cst.Call)):
        return None
    call, wrapped = small.value, False
    if isinstance(call.func, cst.Name) and call.func.value == written.name(ctx, ranks.HELPER) and len(call.args) == 1 \
            and isinstance(call.args[0].value, cst.Call):
        call, wrapped = call.args[0].value, True
    q = ctx.imports.resolve(call.func) or ""
    name = small.targets[0].target.value
    if q.startswith("torch.nn.") and q.count(".") == 2 and q[9:10].isupper() and bound[name] == 1:
        return name, wrapped
    return None


def _init_of(st, ctx) -> str | None:
    """``nn.init.X_(name.attr, ...)`` as a whole statement (X translated) → name."""
    small = st.body[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and small.value.args \
            and (ctx.imports.resolve(small.value.func) or "").startswith("torch.nn.init."):
        return (dotted_text(small.value.args[0].value) or "").split(".")[0]
    return None


def _local_layers(fn: cst.FunctionDef, ctx) -> tuple[dict[str, set[int]], set[str]]:
    """The names a method binds, once, to a PyTorch layer in its own body (``proj = nn.Linear(dim, 2 * dim)``) →
    the ids of the statements re-initialising it (``nn.init.zeros_(proj.weight)``) before anything else reads it;
    and those of the names bound to it wrapped (``PerVector(...)``), whose arrays are the wrapped layer's.
    One after a read is not among them: PyTorch changes the layer wherever it is held
    (``nn.Sequential(proj, ...)``), rebinding the name in JAX would change only the name (but see
    _hoisted_inits, which moves such a re-initialisation up where nothing in between reads the layer's values)."""
    bound = _bound_once(fn)
    out: dict[str, set[int]] = {}
    wrapped: set[str] = set()
    read: set[str] = set()
    for st in fn.body.body:
        found = _layer_binding(st, ctx, bound)
        if found is not None:
            out[found[0]] = set()
            if found[1]:
                wrapped.add(found[0])
            read |= {n.value for n in find_all(st.body[0].value, cst.Name)}
            continue
        t = _init_of(st, ctx)
        if t is not None and t in out and t not in read:
            out[t].add(id(st))
            continue
        read |= {n.value for n in find_all(st, cst.Name)}
    return out, wrapped


#: containers that hold the layers given to them by reference (PyTorch's re-initialisation reaches them there)
_HOLDERS = frozenset({"torch.nn.Sequential", "torch.nn.ModuleList"})


def _holding(st, name: str, ctx) -> str | None:
    """``self.f = nn.Sequential(proj, Rearrange(...))`` / ``self.f = proj`` (vit-pytorch's FiLM), a statement reading
    ``name`` only as a layer a container or a field holds (by reference: PyTorch's in-place re-initialisation after it
    reaches the layer there) → the dotted name of what holds it now; None for any other read."""
    small = st.body[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
        return None
    target = dotted_text(small.targets[0].target)
    if not target or any(n.value == name for n in find_all(small.targets[0].target, cst.Name)):
        return None
    held = 0
    if isinstance(small.value, cst.Name) and small.value.value == name:
        held = 1
    elif isinstance(small.value, cst.Call) and ctx.imports.resolve(small.value.func) in _HOLDERS:
        for a in small.value.args:
            items = [e.value for e in a.value.elements] if isinstance(a.value, (cst.List, cst.Tuple)) else [a.value]
            if a.keyword is None and not a.star:
                held += sum(1 for v in items if isinstance(v, cst.Name) and v.value == name
                            and not isinstance(v, cst.StarredElement))
    mentions = sum(1 for n in find_all(small.value, cst.Name) if n.value == name)
    return target if held and held == mentions else None


def _hoisted_inits(fn: cst.FunctionDef, ctx) -> cst.FunctionDef:
    """``proj = nn.Linear(dim, dim * 2)``, ``self.f = nn.Sequential(proj, ...)``, then ``nn.init.zeros_(proj.weight)``
    (vit-pytorch's vat, vaat, vat_siglip FiLM): PyTorch's re-initialisation reaches the layer where the Sequential
    holds it; an Equinox Sequential holds the value it was given, so the re-initialisation moves up, right after the
    layer is built, where it gives the same arrays: exact where every statement in between reads the layer only as a
    layer a container or a field holds (_holding), mentions none of those holders, and the re-initialisation's other
    arguments read neither the layer nor a name any statement in between mentions. Anything else leaves it where it is (_Inits' error)."""
    if not isinstance(fn.body, cst.IndentedBlock):
        return fn
    body = list(fn.body.body)
    bound = _bound_once(fn)
    moved = False
    i = 0
    while i < len(body):
        found = _layer_binding(body[i], ctx, bound)
        if found is None:
            i += 1
            continue
        name, at, holders, between = found[0], i + 1, set(), set()
        j = i + 1
        while j < len(body):
            st = body[j]
            if _init_of(st, ctx) == name:
                call = st.body[0].value
                others = {n.value for a in call.args[1:] for n in find_all(a, cst.Name)}
                if name in others or others & between \
                        or any(n.value == name for n in find_all(call.args[0].value, cst.Name)) \
                        and (dotted_text(call.args[0].value) or "").split(".")[0] != name:
                    break
                if j != at:
                    body.insert(at, body.pop(j))
                    moved = True
                    ctx.report(Severity.INFO, "idiom-replaced", f"{code(call.func)}({code(call.args[0].value)}, ...) "
                               f"re-initialises `{name}` after a container took it ({', '.join(sorted(holders))}): "
                               "PyTorch's change reaches it there, an Equinox container holds the value it was given, "
                               "so the re-initialisation moves up, right after the layer is built (nothing in between "
                               "reads its arrays)", call)
                at += 1
                j += 1
                continue
            names = {n.value for n in find_all(st, cst.Name)}
            dotted = {dotted_text(a) for a in find_all(st, cst.Attribute)} | names
            if dotted & holders:
                break
            if name in names:
                holder = _holding(st, name, ctx)
                if holder is None:
                    break
                holders.add(holder)
            between |= names  # (every name it mentions: a binding of any kind, a loop's target, included)
            j += 1
        i += 1
    return fn.with_changes(body=fn.body.with_changes(body=body)) if moved else fn


def _statements(block) -> list:
    out = []

    class V(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, n):
            out.append(n)

    scan(block, V())
    return out


def _parameter_test(test: cst.BaseExpression, p: str, pname: str) -> str | None:
    """The test of a parameter (and its name) for a JAX array: ``p.dim()`` → ``p.ndim``, ``p.numel()`` →
    ``p.size``; None when it reads anything but the two, literals and their attributes."""
    allowed = {p, pname, "True", "False", "None", "len", "any", "all", "isinstance", "str"}

    class V(cst.CSTTransformer):
        ok = True

        def leave_Call(self, original, updated):
            f = updated.func
            if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == p and not updated.args:
                if f.attr.value == "dim":
                    return cst.Attribute(f.value, cst.Name("ndim"))
                if f.attr.value == "numel":
                    return cst.Attribute(f.value, cst.Name("size"))
                if f.attr.value == "size":
                    return cst.Attribute(f.value, cst.Name("shape"))
            if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == p:
                V.ok = False  # p.size(0), p.norm(): not read the same from a JAX array
            return updated

        def visit_Attribute(self, node):
            if isinstance(node.value, cst.Name) and node.value.value == p \
                    and node.attr.value not in ("ndim", "shape", "dtype", "dim", "numel", "size"):
                V.ok = False  # p.requires_grad, p.data: no JAX array reads
            node.value.visit(self)
            return False

        def visit_Name(self, node):
            if node.value not in allowed:
                V.ok = False

        def visit_Lambda(self, node):
            V.ok = False

    v = V()
    out = rewrite(test, v, fresh=True)
    return code(out) if V.ok else None


def _applier_kinds(fn: cst.FunctionDef, ctx, static: bool | None = None) -> list[str] | None:
    """The layer classes a method given to ``self.apply`` tests (``isinstance(module, nn.Linear)``), when it is
    ``def M(self, module)`` (or a ``@staticmethod`` ``def M(module)``) re-initialising ``module``'s arrays only under
    such tests; else None."""
    ps = fn.params.params
    if len(ps) != 1 + (not (_is_static(fn) if static is None else static)) or fn.params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) \
            or fn.params.kwonly_params:
        return None
    arg = ps[-1].name.value
    kinds: list[str] = []
    for c in _calls(fn):
        if dotted_text(c.func) == "isinstance" and len(c.args) == 2 and dotted_text(c.args[0].value) == arg:
            k = c.args[1].value
            for e in (k.elements if isinstance(k, cst.Tuple) else [cst.Element(k)]):
                q = ctx.imports.resolve(e.value) or ""
                if not q.startswith("torch.nn."):
                    return None
                # (the Equinox class where PyTorch's has one: nn.BatchNorm2d has no rule spelling it as a value)
                kinds.append(ctx.spell_text(f"equinox.nn.{inits.EQX_LAYERS[q[9:]]}") if q[9:] in inits.EQX_LAYERS
                             else code(e.value))
    if not kinds:
        return None
    for c in _calls(fn):  # only the tests and torch.nn.init calls on the module's arrays (or their in-place methods)
        q = ctx.imports.resolve(c.func) or ""
        if q.startswith("torch.nn.init.") and q[14:] in inits.TRANSLATED:
            t = dotted_text(c.args[0].value) if c.args else None
            if not t or not t.startswith(arg + "."):
                return None
        elif not q and isinstance(c.func, cst.Attribute) and c.func.attr.value in _IN_PLACE_FILLS:
            if not (dotted_text(c.func.value) or "").startswith(arg + "."):  # module.weight.data.normal_(...)
                return None
        elif not (dotted_text(c.func) in ("isinstance", "len", "float", "int") or q.startswith("math.")
                  or q == "torch.nn.init.calculate_gain"
                  or isinstance(c.func, cst.Name) and c.func.value in ctx.analyses.get(OUTSIDE, {}).get("predicates", ())):
            return None

    class Writes(cst.CSTVisitor):  # `module.weight = ...`: an assignment fwport does not rebuild
        found = False

        def visit_AssignTarget(self, node):
            if not isinstance(node.target, cst.Name):
                Writes.found = True

        def visit_AugAssign(self, node):
            Writes.found = True

    scan(fn, Writes())
    return None if Writes.found else list(dict.fromkeys(kinds))


def _is_static(fn: cst.FunctionDef) -> bool:
    return any(dotted_text(d.decorator) == "staticmethod" for d in fn.decorators)


def _applied_method(fn: cst.FunctionDef, ctx) -> cst.FunctionDef:
    """``def M(self, module)`` → ``def M(self, module, *, key)`` (a staticmethod's ``def M(module)`` → ``def M(module, *,
    key)``), its inits rebuilding ``module``, returned."""
    arg = fn.params.params[-1].name.value
    lt = _LayerTests(ctx, arg, set())
    tested = rewrite(fn, lt)
    if lt.bad is None and not lt.missing:  # isinstance(module, nn.BatchNorm2d) → eqx.nn.BatchNorm
        if lt.wider:
            ctx.report(Severity.WARNING, "approximate", f"{fn.name.value}(): " + "; ".join(sorted({
                f"`{t}` tests eqx.nn.{inits.EQX_LAYERS[c]}, which {c} layers are too" for t, c in lt.wider})) +
                ": those layers are re-initialised too, where PyTorch leaves them", fn)
        fn = tested
    fn = rewrite(fn, _Inits(ctx, root=arg))
    body = list(fn.body.body)
    body.append(parsed_statement(f"return {arg}\n"))
    return fn.with_changes(params=_kwonly(fn.params, "key", None), body=fn.body.with_changes(body=body))


class _LayerTests(cst.CSTTransformer):
    """In a function re-initialising the layer ``arg`` given to it: ``classname.find("Conv") != -1`` (``classname``
    bound to ``arg.__class__.__name__``), ``"Conv" in classname`` and ``isinstance(arg, nn.BatchNorm2d)`` →
    ``isinstance(arg, <the Equinox classes of the layers selected>)`` (init.selected_layers). ``wider``,
    ``missing``: what the tests select beyond PyTorch's selection, and PyTorch layers they select that no Equinox
    class stands for; ``bad``: a test that reads the class otherwise."""

    def __init__(self, ctx, arg: str, names: set[str]):
        super().__init__()
        self.ctx, self.arg, self.names = ctx, arg, names
        self.wider: list[tuple[str, str]] = []
        self.missing: list[tuple[str, str]] = []
        self.bad: str | None = None

    def _classname(self, node) -> bool:
        t = dotted_text(node) or ""
        return t in self.names or t == f"{self.arg}.__class__.__name__" or (
            isinstance(node, cst.Attribute) and node.attr.value == "__name__" and isinstance(node.value, cst.Call)
            and dotted_text(node.value.func) == "type" and len(node.value.args) == 1
            and dotted_text(node.value.args[0].value) == self.arg)

    def _test(self, torch_names: list[str], text: str) -> cst.BaseExpression:
        eqx_names, wider, missing = inits.selected_layers(torch_names)
        self.wider += [(text, w) for w in wider]
        self.missing += [(text, m) for m in missing]
        if not eqx_names:
            self.bad = f"`{text}` selects no layer Equinox has"
            return cst.Name("False")
        kinds = [self.ctx.spell_text(f"equinox.nn.{n}") for n in eqx_names]
        kind = kinds[0] if len(kinds) == 1 else "(" + ", ".join(kinds) + ")"
        return parsed_expression(f"isinstance({self.arg}, {kind})")

    def leave_Comparison(self, original, updated):
        if len(original.comparisons) != 1:
            return updated
        op, right = original.comparisons[0].operator, original.comparisons[0].comparator
        left = original.left
        sub = None
        if isinstance(op, cst.In) and isinstance(left, cst.SimpleString) and self._classname(right):
            sub = left.evaluated_value
        elif isinstance(left, cst.Call) and isinstance(left.func, cst.Attribute) and left.func.attr.value == "find" \
                and self._classname(left.func.value) and len(left.args) == 1 \
                and isinstance(left.args[0].value, cst.SimpleString):
            bound = code(right)
            if (isinstance(op, cst.NotEqual) and bound == "-1") or (isinstance(op, cst.GreaterThanEqual) and bound == "0") \
                    or (isinstance(op, cst.GreaterThan) and bound == "-1"):
                sub = left.args[0].value.evaluated_value
        if sub is None:
            return updated
        for c in self.ctx.analyses.get(OUTSIDE, {}).get("classes", ()):
            if sub in c:
                self.bad = f"`{code(original)}` also selects the module class {c} of this file"
        return self._test(inits.named_layers(sub), code(original))

    def leave_Call(self, original, updated):
        if dotted_text(original.func) != "isinstance" or len(original.args) != 2 \
                or dotted_text(original.args[0].value) != self.arg:
            return updated
        k = original.args[1].value
        names = []
        for e in (k.elements if isinstance(k, cst.Tuple) else [cst.Element(k)]):
            q = self.ctx.imports.resolve(e.value) or ""
            if not q.startswith("torch.nn.") or q.count(".") != 2:
                self.bad = f"`{code(original)}` tests a class that is not a PyTorch layer"
                return updated
            names.append(q[9:])
        return self._test(names, code(original))


def _init_function(fn: cst.FunctionDef, ctx, built: set[str]) -> cst.FunctionDef | None:
    """A module-level ``def weights_init(m)`` given to ``model.apply`` (DCGAN, PyTorch-GAN): branches selecting
    layers by class name or isinstance, re-initialising ``m``'s arrays with ``torch.nn.init`` → ``def
    weights_init(m, *, key)`` returning the new layer (``m = eqx.tree_at(lambda m: m.weight, m, <value>)``),
    its tests of Equinox classes. None where the function is not of that shape; an error where it is but
    cannot be translated exactly (``built``: the torch.nn layers this file builds)."""
    ps = fn.params
    if len(ps.params) != 1 or ps.params[0].default is not None or ps.kwonly_params \
            or isinstance(ps.star_arg, (cst.Param, cst.ParamStar)) or ps.star_kwarg is not None or fn.decorators:
        return None
    arg = ps.params[0].name.value

    def fill(c: cst.Call) -> str | None:  # m.weight.data.normal_(0.0, 0.02), m.bias.data.fill_(0) / .zero_()
        if isinstance(c.func, cst.Attribute) and c.func.attr.value in _IN_PLACE_FILLS and c.func.attr.value != "copy_" \
                and not ctx.imports.resolve(c.func):
            t = dotted_text(c.func.value) or ""
            if t.startswith(arg + ".") and t.count(".") == 2 and t.endswith(".data"):  # (without .data: PyTorch raises)
                return _IN_PLACE_FILLS[c.func.attr.value]
        return None

    inits_ = [c for c in _calls(fn) if (ctx.imports.resolve(c.func) or "").startswith("torch.nn.init.") or fill(c)]
    if not inits_ or not isinstance(fn.body, cst.IndentedBlock):
        return None
    names: set[str] = set()
    tests: list[cst.BaseExpression] = []

    def block_ok(stmts) -> bool:
        draws = 0
        for st in stmts:
            if isinstance(st, cst.If):
                tests.append(st.test)
                if not block_ok(st.body.body):
                    return False
                o = st.orelse
                if isinstance(o, cst.If):
                    if not block_ok([o]):
                        return False
                elif o is not None and not block_ok(o.body.body):
                    return False
                continue
            if not isinstance(st, cst.SimpleStatementLine) or len(st.body) != 1:
                return False
            small = st.body[0]
            if isinstance(small, cst.Pass) or isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString):
                continue
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) \
                    and dotted_text(small.value) in (f"{arg}.__class__.__name__",):
                names.add(small.targets[0].target.value)
                continue
            if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
                return False
            c = small.value
            if fill(c):  # the tensor method: init.X_ of its receiver (_Inits)
                draws += fill(c) in inits.DRAWS
                continue
            q = ctx.imports.resolve(c.func) or ""
            t = (dotted_text(c.args[0].value) or "") if c.args else ""
            if not q.startswith("torch.nn.init.") or q[14:] not in inits.TRANSLATED or c.args[0].keyword is not None \
                    or not t.startswith(arg + ".") or t.count(".") > 2 or t.count(".") == 2 and not t.endswith(".data"):
                return False
            draws += q[14:] in inits.DRAWS
        return draws <= 1  # one key per layer: a branch drawing twice would draw both from it

    if not block_ok(fn.body.body) or not tests:  # (without a test of the layer's class: not model.apply's idiom)
        return None
    lt = _LayerTests(ctx, arg, names)
    for t in tests:
        left = {n.value for n in find_all(rewrite(t, lt), cst.Name)} & names
        if left:  # classname read beyond the tests above
            lt.bad = lt.bad or f"`{code(t)}` reads the class name otherwise than `{sorted(left)[0]}.find(...)`"
    where = f"{fn.name.value}(): "
    problem = lt.bad
    if problem is None:
        for text, cls in lt.missing:
            if cls in built:
                problem = f"`{text}` selects {cls}, which this file builds and which is no Equinox layer class fwport tests"
        for text, cls in lt.wider:
            if cls in built:
                problem = (f"`{text}` tests eqx.nn.{inits.EQX_LAYERS[cls]} in Equinox, which the {cls} layers this "
                           "file builds are too: PyTorch's test leaves them out, the translation could not")
    if problem is not None:
        ctx.report(Severity.ERROR, "unsupported-construct", where + problem + ": the function re-initialising layers "
                   "for model.apply is not translated; write it for the Equinox layers (`def init(m, *, key): if "
                   "isinstance(m, eqx.nn.Conv2d): m = eqx.tree_at(lambda m: m.weight, m, ...); return m`) and call "
                   "it over the model's layers", fn)
        ctx.settle(*inits_)
        return None
    source = fn
    fn = rewrite(fn, _LayerTests(ctx, arg, names))
    fn = rewrite(fn, _Inits(ctx, root=arg))
    body = list(fn.body.body)
    body.append(parsed_statement(f"return {arg}\n"))
    ctx.report(Severity.INFO, "idiom-replaced", where + "re-initialises the layer it is given in place → returns it "
               "rebuilt (eqx.tree_at), its draws from a key of its own; its tests of the class name → isinstance of "
               "the Equinox layers; model.apply(fn) → init_layers(model, fn, key=...)", source)
    wider: dict[str, list[str]] = {}
    for t, c in lt.wider:
        if c not in wider.setdefault(t, []):
            wider[t].append(c)
    if wider:
        ctx.report(Severity.WARNING, "approximate", where + "; ".join(
            f"`{t}` tests eqx.nn.{inits.EQX_LAYERS[cs[0]]}, which {' and '.join(cs)} layers are too"
            for t, cs in wider.items()) +
            ": a model built elsewhere with those layers has them re-initialised too, where PyTorch leaves them", source)
    return fn.with_changes(params=_kwonly(fn.params, "key", None), body=fn.body.with_changes(body=body))


def _module_loop_functions(module: cst.Module) -> dict[str, tuple[str, cst.For]]:
    """Module-level ``def initialize_weights(net): for m in net.modules(): ...`` (PyTorch-GAN's clustergan): one
    plain parameter, a body that is one loop over its modules (a docstring allowed) reading the parameter nowhere
    else → name → (the parameter, the loop)."""
    out = {}
    for f in module.body:
        if not isinstance(f, cst.FunctionDef) or f.decorators or f.asynchronous or len(f.params.params) != 1 \
                or f.params.params[0].default is not None or f.params.kwonly_params or f.params.posonly_params \
                or isinstance(f.params.star_arg, cst.Param) or f.params.star_kwarg \
                or not isinstance(f.body, cst.IndentedBlock):
            continue
        stmts = list(f.body.body)
        if stmts and isinstance(stmts[0], cst.SimpleStatementLine) and len(stmts[0].body) == 1 \
                and isinstance(stmts[0].body[0], cst.Expr) and isinstance(stmts[0].body[0].value, cst.SimpleString):
            stmts = stmts[1:]
        p = f.params.params[0].name.value
        loop = stmts[0] if len(stmts) == 1 else None
        if isinstance(loop, cst.For) and isinstance(loop.iter, cst.Call) and not loop.iter.args \
                and dotted_text(loop.iter.func) == f"{p}.modules" and isinstance(loop.target, cst.Name) \
                and loop.orelse is None and not any(n.value == p for n in find_all(loop.body, cst.Name)):
            out[f.name.value] = (p, loop)
    return out


def _inline_module_loops(module: cst.Module, ctx, classes: set[str]) -> cst.Module:
    """``initialize_weights(self)`` as a statement of a module class's ``__init__``, the function a loop over its
    parameter's modules (_module_loop_functions) → that loop over ``self.modules()`` written there, which _Inits
    translates (reinit_layers over the fields built before it); the function goes once nothing else calls it."""
    fns = _module_loop_functions(module)
    if not fns:
        return module
    done: set[str] = set()
    body = []
    for s in module.body:
        if isinstance(s, cst.ClassDef) and s.name.value in classes and isinstance(s.body, cst.IndentedBlock):
            members = []
            for m in s.body.body:
                if isinstance(m, cst.FunctionDef) and m.name.value == "__init__" and isinstance(m.body, cst.IndentedBlock):
                    stmts = []
                    for st in m.body.body:
                        c = st.body[0].value if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 \
                            and isinstance(st.body[0], cst.Expr) else None
                        if isinstance(c, cst.Call) and isinstance(c.func, cst.Name) and c.func.value in fns \
                                and len(c.args) == 1 and c.args[0].keyword is None and not c.args[0].star \
                                and isinstance(c.args[0].value, cst.Name) and c.args[0].value.value == "self":
                            p, loop = fns[c.func.value]
                            st = loop.with_changes(iter=parsed_expression("self.modules()"),
                                                   leading_lines=st.leading_lines)
                            done.add(c.func.value)
                        stmts.append(st)
                    m = m.with_changes(body=m.body.with_changes(body=stmts))
                members.append(m)
            s = s.with_changes(body=s.body.with_changes(body=members))
        body.append(s)
    if not done:
        return module
    module = module.with_changes(body=body)
    reads = _name_reads(module)
    gone = {n for n in done if reads[n] == 1}  # the def alone
    for n in sorted(done):
        ctx.report(Severity.INFO, "idiom-replaced", f"{n}(self) in __init__ → its loop over self.modules() written "
                   "there (re-initialising the layers built before it)" + (f"; {n} goes, nothing else calls it"
                                                                           if n in gone else ""),
                   next(f for f in module.body if isinstance(f, cst.FunctionDef) and f.name.value == n))
    if gone:  # removed by the finishing step (removed here, the findings after it would be located lines off)
        ctx.analyses[INLINED_LOOPS] = gone
        for f in module.body:
            if isinstance(f, cst.FunctionDef) and f.name.value in gone:
                ctx.settle(*_calls(f))
    return module


#: ctx.analyses: module-level functions whose loop over the modules _inline_module_loops wrote into __init__ and that
#: nothing else calls: finish removes them
INLINED_LOOPS = "torch2jax.inlined-module-loops"


def _name_reads(module: cst.Module) -> Counter:
    """How often each name is written in the module (a def's own name included), not as an attribute."""
    v = _NameReads()
    scan(module, v)
    return v.out


class _NameReads(cst.CSTVisitor):
    def __init__(self) -> None:
        self.out: Counter = Counter()

    def visit_Name(self, n):
        self.out[n.value] += 1

    def visit_Attribute(self, n):
        scan(n.value, self)
        return False


class _ApplyInit(cst.CSTTransformer):
    """``model.apply(weights_init)`` as a statement, weights_init translated by _init_function → ``model =
    init_layers(model, weights_init)`` (the finishing step gives it its key, like a module's construction)."""

    def __init__(self, ctx, fns: set[str]):
        super().__init__()
        self.ctx, self.fns = ctx, fns

    def leave_SimpleStatementLine(self, original, updated):
        if len(updated.body) != 1 or not isinstance(updated.body[0], cst.Expr):
            return updated
        c = updated.body[0].value
        if not (isinstance(c, cst.Call) and isinstance(c.func, cst.Attribute) and c.func.attr.value == "apply"
                and len(c.args) == 1 and c.args[0].keyword is None and isinstance(c.args[0].value, cst.Name)
                and c.args[0].value.value in self.fns and isinstance(c.func.value, cst.Name)):
            return updated
        model, fn = c.func.value.value, c.args[0].value.value
        helper = layers.use(self.ctx, "init_layers")
        return updated.with_changes(body=[parsed_statement(f"{model} = {helper}({model}, {fn})\n").body[0]])


class _Smalls(cst.CSTVisitor):
    """The assignments of a statement, in its blocks too, not in nested scopes (_module_fields)."""

    def __init__(self):
        super().__init__()
        self.found = []

    def visit_Assign(self, node):
        self.found.append(node)

    def visit_FunctionDef(self, node):
        return False

    def visit_ClassDef(self, node):
        return False

    def visit_Lambda(self, node):
        return False


def _module_fields(init: cst.FunctionDef, ctx, classes: set[str]) -> list[tuple[cst.CSTNode, list[str]]]:
    """Each top-level statement of ``__init__`` with the submodule fields assigned before it
    (``self.name = <torch.nn layer or container, or a module class of the file>(...)``), those assigned under an
    ``if`` too (cct's ``else: self.attention_pool = nn.Linear(...)``: a field the other branch leaves at its
    default, None, which a re-initialisation passes through)."""
    out, names = [], []
    for stmt in init.body.body:
        out.append((stmt, list(names)))
        v = _Smalls()
        scan(stmt, v)
        for small in v.found:
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Call):
                t = dotted_text(small.targets[0].target) or ""
                q = ctx.imports.resolve(small.value.func) or ""
                f = dotted_text(small.value.func) or ""
                # layers, containers, parameters, modules of the file, what helpers build; not torch tensors
                # (buffers, no parameters) nor builtins' values
                module = q.startswith("torch.nn.") and not q.startswith(("torch.nn.init.", "torch.nn.functional.")) \
                    or f in classes or not q.startswith("torch") and f not in _NOT_MODULES
                if t.startswith("self.") and t.count(".") == 1 and module and t[5:] not in names:
                    names.append(t[5:])
    return out


#: calls whose value holds no parameter (a field assigned one is not re-initialised)
_NOT_MODULES = frozenset({"int", "float", "str", "bool", "len", "tuple", "dict", "set", "getattr", "range", "max",
                          "min", "sum", "abs", "round", "math.sqrt", "math.log", "math.ceil", "math.floor"})


class _Buffers(cst.CSTTransformer):
    """``self.register_buffer("mask", value)`` → ``self.mask = value``: an array field like the parameters,
    kept out of the gradient where ``__call__`` reads it (batch.Forward)."""

    def __init__(self, ctx, names: set[str], leading: dict[str, tuple[int, int]] | None = None):
        super().__init__()
        self.ctx, self.names = ctx, names
        self.leading = {} if leading is None else leading  # name → (its leading axes of size 1, its rank)

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
        ones = _leading_ones(value)
        if ones is not None:
            self.leading[name] = ones
            if value.func.attr.value == "view":  # a shape view (sizes, no dtype): a jax array's view takes a dtype
                value = value.with_changes(func=value.func.with_changes(attr=cst.Name("reshape")))
        if "\n" in code(value) and not value.lpar:  # it spanned lines inside the call's parentheses
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return cst.Assign([cst.AssignTarget(cst.Attribute(cst.Name("self"), cst.Name(name)))], value)


def _leading_ones(value: cst.BaseExpression) -> tuple[int, int] | None:
    """(the number of leading axes of size 1, the rank) of a buffer built ``....view(1, 1, n, n)`` /
    ``.reshape(...)`` with literal sizes of 1 first (nanoGPT's causal mask), else None."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in ("view", "reshape") and value.args and all(a.keyword is None and not a.star
                                                                                  for a in value.args)):
        return None
    sizes = [a.value for a in value.args]
    if len(sizes) == 1 and isinstance(sizes[0], cst.Tuple):
        sizes = [e.value for e in sizes[0].elements]
    ones = 0
    while ones < len(sizes) and isinstance(sizes[ones], cst.Integer) and sizes[ones].evaluated_value == 1:
        ones += 1
    return (ones, len(sizes)) if ones else None


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

#: source layers whose construction itself takes a key (DRAWING less the containers and parameters)
LAYERS = DRAWING - {"torch.nn.Sequential", "torch.nn.Sequential+random", "torch.nn.ModuleList", "torch.nn.Parameter"}

#: source layers that keep a state beside their parameters (eqx.nn.State)
STATEFUL = frozenset({"torch.nn.BatchNorm1d", "torch.nn.BatchNorm2d", "torch.nn.BatchNorm3d"})


def _stateful_containers(init: cst.FunctionDef | None, ctx, classes: frozenset[str] = frozenset()) \
        -> tuple[set[str], list[cst.Call]]:
    """The ``self.NAME = nn.Sequential(...)`` attributes of ``__init__`` (any branch) holding a stateful
    layer: ``eqx.nn.Sequential`` threads the state through its members, so a call of one takes and
    returns it like a BatchNorm's. And the other containers holding one (a ModuleList, a Sequential
    not kept in an attribute): not threaded yet."""
    if init is None:
        return set(), []
    v = _StatefulContainers(ctx, classes)
    scan(init, v)
    return v.names, v.refused


class _StatefulContainers(cst.CSTVisitor):
    """Also refused: a stateful layer made anywhere inside a ModuleList / ModuleDict / unkept Sequential's
    arguments (``nn.ModuleList([nn.BatchNorm1d(n) for _ in range(k)])``), appended into an attribute
    (``self.bns.append(nn.BatchNorm1d(n))``), or into a local list a ModuleList then holds (``bns.append(...)``,
    ``self.bns = nn.ModuleList(bns)``): each member's call would need the state, which nothing threads."""

    def __init__(self, ctx, classes: frozenset[str]) -> None:
        self.ctx, self.classes = ctx, classes
        self.names: set[str] = set()
        self.refused: list[cst.Call] = []
        self.kept: set[int] = set()
        self.lists: set[str] = set()  # local names a stateful layer was put into (appended, or a list of them)

    def makes_stateful(self, node: cst.CSTNode) -> bool:
        """A stateful layer (or a class of this file keeping one) is made anywhere in ``node``."""
        return any(self.ctx.imports.resolve(n.func) in STATEFUL
                   or isinstance(n.func, cst.Name) and n.func.value in self.classes
                   for n in ([node] if isinstance(node, cst.Call) else []) + find_all(node, cst.Call))

    def holds_stateful(self, call: cst.Call) -> bool:
        return any(isinstance(n, cst.Call) and (self.ctx.imports.resolve(n.func) in STATEFUL
                                                 or isinstance(n.func, cst.Name) and n.func.value in self.classes)
                   for a in call.args
                   for n in ([e.value for e in a.value.elements] if isinstance(a.value, (cst.List, cst.Tuple))
                             else [a.value]))

    def holds_any(self, call: cst.Call) -> bool:
        """``holds_stateful``, or a stateful layer made deeper in the arguments (a comprehension, a nested
        container), or a local list one was put into."""
        return any(self.makes_stateful(a.value) or any(n.value in self.lists for n in find_all(a.value, cst.Name))
                   or isinstance(a.value, cst.Name) and a.value.value in self.lists for a in call.args)

    def visit_Assign(self, node: cst.Assign) -> None:
        t = dotted_text(node.targets[0].target) if len(node.targets) == 1 else None
        v = node.value
        if t and t.startswith("self.") and t.count(".") == 1 and isinstance(v, cst.Call) \
                and self.ctx.imports.resolve(v.func) == "torch.nn.Sequential" and self.holds_stateful(v):
            self.names.add(t[5:])
            self.kept.add(id(v))
        elif t and "." not in t and not isinstance(v, cst.Call) and self.makes_stateful(v):
            self.lists.add(t)  # bns = [nn.BatchNorm1d(n) for ...]

    def visit_Call(self, node: cst.Call) -> None:
        f = node.func
        if isinstance(f, cst.Attribute) and f.attr.value in ("append", "extend", "insert", "add_module") \
                and self.makes_stateful(cst.Tuple([cst.Element(a.value) for a in node.args])):
            t = dotted_text(f.value) or ""
            if t.startswith("self."):  # self.bns.append(nn.BatchNorm1d(n)): a container attribute's member
                self.refused.append(node)
            elif t and "." not in t:
                self.lists.add(t)
            return
        if id(node) in self.kept:
            return
        q = self.ctx.imports.resolve(f)
        if q in ("torch.nn.ModuleList", "torch.nn.ModuleDict") and self.holds_any(node) \
                or q == "torch.nn.Sequential" and self.holds_stateful(node):
            self.refused.append(node)


def _class(cls: cst.ClassDef, ctx, plans: dict, callers: _Callers, outside: dict) -> cst.ClassDef:
    cls, tied = tying.untie(cls, ctx)  # weight tying: one array (the embedding's table) used in both places
    methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    subs = _submodules(methods.get("__init__"), ctx)
    own = {t[5:]: a.value.func.value for st in (methods["__init__"].body.body if "__init__" in methods else [])
           if isinstance(st, cst.SimpleStatementLine) for a in st.body
           if isinstance(a, cst.Assign) and len(a.targets) == 1 and isinstance(a.value, cst.Call)
           and isinstance(a.value.func, cst.Name) and a.value.func.value in plans
           for t in [dotted_text(a.targets[0].target) or ""] if t.startswith("self.") and t.count(".") == 1}
    for name, q in list(subs.items()):  # instances of this file's translated classes
        if q not in STATEFUL and isinstance(q, str) and q.split(".")[-1] in plans and plans[q.split(".")[-1]].get("stateful"):
            subs[name] = "stateful-class"
    for name, c in own.items():  # `self.to_q = DepthWiseConv2d(...)`: a class of this file (no import names it)
        if plans[c].get("stateful"):
            subs[name] = "stateful-class"
    stateful = {n for n, q in subs.items() if q in STATEFUL or q == "stateful-class"}
    threaded, refused = _stateful_containers(methods.get("__init__"), ctx,
                                             frozenset(n for n, p in plans.items() if p.get("stateful")))
    stateful |= threaded
    helpers, keyed_params, members, sequences, called = _outside_init(cls, ctx, plans, callers, outside["builders"],
                                                                      stateful)
    outside["members"] |= members
    if refused:
        ctx.report(Severity.ERROR, "unsupported-construct", f"{cls.name.value}: a ModuleList holding BatchNorm (or a "
                   "Sequential holding one that is not an attribute) is not translated yet: its state must be "
                   "threaded through each member; keep it in a `self.name = nn.Sequential(...)` or call the members "
                   "one by one in forward", cls)
    keyed = {n for n, q in subs.items() if q in RANDOM or q == "torch.nn.Sequential+random"}
    keyed |= {n for n, c in own.items() if plans[c].get("key_sites")}  # a module of the file taking a key
    if cls.name.value in outside.get("batched", ()):  # `nn.Sequential(..., nn.Dropout(p)) if c else nn.Identity()`
        keyed |= {n for n, q in _sequence_or_identity(methods.get("__init__"), ctx).items() if q in RANDOM | SEQUENTIALS
                  and q.endswith("+random")}
    if outside.get("state") and "forward" in methods and "__init__" in methods:
        _given_modules(methods["__init__"], methods["forward"], ctx, callers, plans, stateful,
                       outside.get("indirect", {}).get(cls.name.value, []))
    bases = [b.with_changes(value=ctx.spell("equinox.Module")) if ctx.imports.resolve(b.value) == "torch.nn.Module" else b
             for b in cls.bases]
    draws = any(q in DRAWING or q.rsplit(".", 1)[-1] in plans and plans[q.rsplit(".", 1)[-1]]["draws"]
                for q in subs.values()) or bool(helpers) or bool(keyed_params.get("__init__")) \
        or any(isinstance(c.func, cst.Name) and c.func.value in outside["builders"]
               for c in (_calls(methods["__init__"]) if "__init__" in methods else []))
    plan = {"key_sites": 0, "draws": draws, "stateful": [], "helpers": sorted(helpers),
            "keyed_params": {m: sorted(ps) for m, ps in keyed_params.items()}, "sequences": sorted(sequences),
            "called": sorted(called)}
    plan["tied"] = tied
    plan["batched"] = cls.name.value in outside.get("batched", ())
    plan["whole"] = _whole_graph(cls, methods.get("forward"), subs, plans, ctx, plan["batched"])
    given = {(dotted_text(c.args[0].value) or "")[5:] for fn in methods.values() for c in _calls(fn)
             if dotted_text(c.func) == "self.apply" and c.args}  # self.apply(self._init_weights): initialisation
    at_call, draws_in = _drawing_methods(methods, ctx, {"__init__", *helpers, *called, *given})
    for m in draws_in:  # in-place random fills at call time: no JAX counterpart to fill in place
        for c in _calls(methods[m]):
            if isinstance(c.func, cst.Attribute) and c.func.attr.value in RANDOM_FILLS \
                    and ctx.imports.resolve(c.func) is None:  # a tensor's method, not torch.nn.init.normal_
                ctx.report(Severity.ERROR, "unsupported-construct", f".{c.func.attr.value}() fills a tensor in place "
                           f"with random numbers at call time ({cls.name.value}.{m}): a JAX array cannot be filled; "
                           "draw a new one from the call's key (jax.random.normal(key, shape) * std + mean)", c)
                ctx.settle(c)
    plan["keyed_methods"] = sorted(at_call - {"forward"})
    # the methods forward calls see one example (batch.py's rank): a call from outside the class hands them a batch
    plan["per_example"] = sorted(_reached(methods, "forward") - {"forward"}) if "forward" in methods else []
    # its layers (`self.fc = nn.Linear(...)`): one example each; a call from outside the class hands them a batch
    plan["layers"] = sorted(n for n, q in subs.items() if "." not in n and "[" not in n and n not in stateful
                            and q not in RANDOM and q not in ("torch.nn.Sequential+random", "stateful-class")
                            and not (n in own and (plans[own[n]].get("whole") or plans[own[n]].get("key_required"))))
    table = outside.get("ranks", {})
    # the methods forward calls that ranks.py probed (DETR's forward_post, with_pos_embed) are written for one example
    # by batch.Forward as forward is, callees first; a method drawing at call time keeps its own path (_MethodKeys)
    traced = [] if plan["whole"] else [m for m in _callees_first(methods, plan["per_example"])
                                       if ranks.method_key(cls.name.value, m) in table and m not in at_call]
    plan["traced"] = traced
    if not plan["whole"]:
        for m in plan["per_example"]:
            if m not in traced:
                scan(methods[m], _HelperDims(ctx, f"{cls.name.value}.{m}"))
    plan["key_required"] = "forward" in at_call or any(  # it calls a submodule of the file drawing at call time
        plans[c].get("key_required") and f"self.{n}" in {dotted_text(x.func) for x in _calls(methods["forward"])}
        for n, c in own.items()) if "forward" in methods else False
    body = []
    proven: set[str] = set()
    buffers: set[str] = set()
    leading: dict[str, tuple[int, int]] = {}  # buffers with leading axes of size 1: (how many, rank)
    drawing = {n for n, p in plans.items() if p["draws"]}
    building = _reached(methods, "__init__") | outside.get("construction", set())  # __init__ and what it calls
    plan["surgery"] = {}  # a method of model surgery → the submodule attributes (surgery.py)
    # (and the configurations a method assigns to: replaced in the new model, configs.py)
    operated = set(subs) | ctx.analyses.get(configs.REPLACED, {}).get(cls.name.value, set())
    for s in cls.body.body:
        if isinstance(s, cst.FunctionDef) and s.name.value not in ("__init__", "forward", *helpers):
            v = _DrawsOutsideInit(ctx, drawing | outside["builders"], s.name.value,
                                  frozenset(operated) if s.name.value not in building else None)
            scan(s, v)
            if v.functional:
                plan["surgery"][s.name.value] = sorted(operated)
    # self.apply(self.M) with M re-initialising layers it tests by class; the fields each statement sees
    applied = {c.args[0].value.attr.value for m in ("__init__", *called) if m in methods for c in _calls(methods[m])
               if dotted_text(c.func) == "self.apply" and len(c.args) == 1
               and (dotted_text(c.args[0].value) or "").startswith("self.") and (dotted_text(c.args[0].value) or "").count(".") == 1}
    appliers = {m: k for m in applied if m in methods and m not in ("__init__", "forward", *called)
                for k in [_applier_kinds(methods[m], ctx)] if k}
    plan["appliers"] = sorted(appliers)
    before = {id(st): names for st, names in (_module_fields(methods["__init__"], ctx, set(plans) | set(callers.classes) | outside["builders"])
                                              if "__init__" in methods else [])}
    calls_at = {}  # a method __init__ calls → the fields built before the call
    for st in methods["__init__"].body.body if "__init__" in methods else []:
        for c in _calls(st):
            t = dotted_text(c.func) or ""
            if t.startswith("self.") and t[5:] in called:
                calls_at.setdefault(t[5:], before[id(st)])
    for s in cls.body.body:
        if isinstance(s, cst.FunctionDef) and s.name.value in ("__init__", *called):
            if s.name.value == "__init__":
                tops = {id(st): before[id(st)] for st in s.body.body}
                fields = lambda node, tops=tops: tops.get(id(node), [])
            else:
                fields = lambda node, n=calls_at.get(s.name.value, []): n
            s = _hoisted_inits(s, ctx)
            local, wrapped = _local_layers(s, ctx)
            s = rewrite(s, _Inits(ctx, fields, appliers, local=local, wrapped=wrapped))
        elif isinstance(s, cst.FunctionDef) and s.name.value in appliers:
            s = _applied_method(s, ctx)
        if isinstance(s, cst.FunctionDef) and s.name.value == "__init__":
            s = s.with_changes(params=_kwonly(s.params, "key", None))
            s = rewrite(s, _Buffers(ctx, buffers, leading))
        elif isinstance(s, cst.FunctionDef) and (s.name.value == "forward" or s.name.value in traced):
            s = None  # written below, once __init__ has said which fields are buffers
        elif isinstance(s, cst.FunctionDef) and s.name.value in at_call:  # a method drawing at call time
            s = rewrite(s, _MethodKeys(at_call - {"forward"}))
            s = s.with_changes(params=_kwonly(s.params, "key", None))
        body.append(s)
    entries = _dict_entries(methods.get("__init__"), ctx)  # layers in an nn.ModuleDict: d["k"](x)
    given = ranks.given_submodules(methods.get("__init__"), cls.name.value, ctx.analyses.get(ranks.GIVEN, {}))
    keyed_classes = {c for c, p in plans.items() if p.get("key_sites")}
    dropout_sequences = _dropout_sequences(methods.get("__init__"), ctx)
    written: dict[str, cst.FunctionDef] = {}
    refused: set[str] = set()
    for m in traced:
        fn = methods[m]
        mf = Forward(ctx, set(ranks.forward_params(fn)),
                     keyed | {n for n, q in entries.items() if q in RANDOM}, {**given, **subs, **entries}, stateful,
                     buffers, table[ranks.method_key(cls.name.value, m)], leading)
        mf.keyed_classes = keyed_classes
        mf.negative_fields = ctx.analyses.get(NEGATIVE_FIELDS, {}).get(cls.name.value, frozenset())
        mf.keyed_sequences = dropout_sequences
        fn = fn.with_changes(body=rewrite(fn.body, mf))
        if mf.state_sites:
            ctx.report(Severity.ERROR, "unsupported-construct", f"{cls.name.value}.{m}, which forward calls, calls a layer "
                       "with state (BatchNorm): the state is threaded through __call__ only; call the layer in forward",
                       methods[m])
        if mf.key_sites:  # dropout inside: the method takes a key, forward passes it
            fn = fn.with_changes(params=_kwonly(fn.params, "key", cst.Name("None")))
            plan.setdefault("keyed_per_example", []).append(m)
            keyed_classes = keyed_classes | {ranks.method_key(cls.name.value, m)}
        if mf.dropped:
            plan.setdefault("dropped_methods", []).append(m)
        proven |= mf.seq_proven
        refused |= mf.seq_refused
        written[m] = fn
    for i, s in enumerate(body):
        if s is None and cls.body.body[i].name.value in written:
            body[i] = written[cls.body.body[i].name.value]
        elif s is None:
            s = cls.body.body[i]
            params = [p.name.value for p in s.params.params[1:]]  # (positional: jax.vmap's in_axes)
            fwd = Forward(ctx, set() if plan["whole"] else set(ranks.forward_params(s)),
                          keyed | (at_call - {"forward"}) | {n for n, q in entries.items() if q in RANDOM},
                          {**given, **subs, **entries}, stateful, buffers,
                          None if plan["whole"] else outside.get("ranks", {}).get(cls.name.value), leading)
            fwd.keyed_classes = keyed_classes
            fwd.negative_fields = ctx.analyses.get(NEGATIVE_FIELDS, {}).get(cls.name.value, frozenset())
            fwd.keyed_sequences = dropout_sequences
            if plan["batched"]:
                fwd.batch_whole = True
                info = outside.get("ranks", {}).get(cls.name.value)
                fwd.loop_lists = {a: info.containers[a] for a in _looped_lists(cls.name.value, methods,
                                                                                subs, outside.get("ranks", {}))}
                fwd.whole_classes = {n for n, p in plans.items() if p.get("whole")}
                fwd.examples = {n for n, c in own.items() if not plans[c].get("whole")} \
                    | {n for n, q in {**subs, **_sequence_or_identity(methods.get("__init__"), ctx)}.items()
                       if q in SEQUENTIALS}
                # Sequentials holding a Linear / LayerNorm that takes one vector (not ranks.py's PerVector)
                fwd.vector_sequences = {(dotted_text(a.targets[0].target) or "")[5:] for a in find_all(
                    methods["__init__"], cst.Assign) if len(a.targets) == 1 and isinstance(a.value, cst.Call)
                    and ctx.imports.resolve(a.value.func) == "torch.nn.Sequential"
                    and any(isinstance(x.value, cst.Call) and ctx.imports.resolve(x.value.func) in ranks.PER_VECTOR
                            for x in a.value.args)} if "__init__" in methods else set()
            new_body = rewrite(rewrite(s.body, _SparseProducts(ctx)) if plan["whole"] else s.body, fwd)
            s = s.with_changes(name=cst.Name("__call__"), body=new_body)
            if fwd.state_sites:  # the layers' state goes in and comes out
                ps = [p.with_changes(comma=cst.MaybeSentinel.DEFAULT) for p in s.params.params]
                s = s.with_changes(params=s.params.with_changes(params=[*ps, cst.Param(cst.Name("state"))]))
                plan["stateful"] = sorted(stateful)
            if fwd.dropped:
                plan["dropped"] = True
            proven = (proven | fwd.seq_proven) - fwd.seq_refused - refused
            s, axes = _batch_axes(s, fwd, ctx, params, methods["forward"])
            header = s.body.header if isinstance(s.body, cst.IndentedBlock) else None
            if plan["batched"] and header is not None and header.comment is None:  # (verify reads it: no jax.vmap)
                s = s.with_changes(body=s.body.with_changes(header=header.with_changes(
                    whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(BATCHED_MARK))))
            if axes:
                plan["vmap_axes"] = axes  # training.py's jax.vmap(model, <axes>) at the call sites it writes
                merged = _merged_outputs(fwd)
                if merged is not None:
                    plan["merged_out"] = merged  # ... and the axes those call sites merge (layers' batch_merged)
            if fwd.key_sites or draws_in.get("forward"):  # a draw needs a key even in inference, dropout does not
                s = s.with_changes(params=_kwonly(s.params, "key", None if plan["key_required"] else cst.Name("None")))
                plan["key_sites"] = len(fwd.key_sites) + draws_in.get("forward", 0)
            body[i] = s
    plans[cls.name.value] = plan
    init = next((f for f in body if isinstance(f, cst.FunctionDef) and f.name.value == "__init__"), None)
    if "forward" in methods and init is not None and proven:
        ctx.analyses.setdefault(SEQ_PROVEN, set()).update(id(c) for c in _constructions(init, proven))
    return cls.with_changes(bases=bases, body=cls.body.with_changes(body=body))


def _constructions(init: cst.FunctionDef, attrs: set[str]) -> list[cst.Call]:
    """The calls ``self.NAME = <call>`` anywhere in ``__init__`` builds for the attributes ``attrs`` (and the layer a
    transformer stack among them is given: ``nn.TransformerEncoder(layer, n)``, ``layer`` built before)."""
    v = _Constructions(attrs)
    scan(init, v)
    return v.found


class _Constructions(cst.CSTVisitor):
    # (a class of the module, not of each call: creating a visitor class costs several times its walk)
    def __init__(self, attrs: set[str]) -> None:
        super().__init__()
        self.attrs = attrs
        self.found: list[cst.Call] = []
        self.names: dict[str, cst.BaseExpression] = {}

    def visit_Assign(self, node: cst.Assign) -> None:
        attrs, found, names = self.attrs, self.found, self.names
        t = dotted_text(node.targets[0].target) if len(node.targets) == 1 else None
        value = node.value
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            names[node.targets[0].target.value] = value
        if t and t.startswith("self.") and t[5:] in attrs and isinstance(value, cst.Call) and value.args \
                and (dotted_text(value.func) or "").endswith(("TransformerEncoder", "TransformerDecoder")):
            layer = value.args[0].value
            layer = names.get(layer.value) if isinstance(layer, cst.Name) else layer
            if isinstance(layer, cst.Call):
                found.append(layer)
        while t and t.startswith("self.") and t[5:] in attrs and isinstance(value, cst.IfExp):
            if isinstance(value.body, cst.Call):
                found.append(value.body)
            value = value.orelse
        if t and t.startswith("self.") and t[5:] in attrs and isinstance(value, cst.Call):
            found.append(value)


def _merged_outputs(fwd) -> str | None:
    """Where a forward's outputs hold the batch axis merged into an axis (PyTorch's ``(L, N, V).view(-1, V)``: the
    examples the inner factor of axis 0; an einops group: the outer factor), the axes the call site merges after
    jax.vmap, as the text of batch_merged's ``axes`` (``(0, None)``: the first output's axes 0 and 1 reshaped into
    one, the second kept); None where no output is merged or the outputs disagree."""
    from fwport.packs.torch2jax.batch import Merged
    outs = fwd.return_axes[0] if fwd.return_axes and all(a == fwd.return_axes[0] for a in fwd.return_axes) else None

    def text(a) -> str:
        if isinstance(a, tuple):
            return "(" + ", ".join(text(x) for x in a) + ("," if len(a) == 1 else "") + ")"
        return str(int(a)) if isinstance(a, Merged) else "None"
    merged = text(outs) if outs is not None else "None"
    return None if not any(ch.isdigit() for ch in merged) else merged


def _batch_axes(fn: cst.FunctionDef, fwd, ctx, params: list[str], source: cst.FunctionDef) -> cst.FunctionDef:
    """A forward whose inputs or outputs hold the batch axis elsewhere than first (PyTorch's sequence layers take it
    second) says where, in a comment on the ``def`` line and an info finding: the call site vmaps with those axes."""
    from fwport.packs.torch2jax.batch import Grouped, Merged, NOT_BATCHED, UNKNOWN, axis_text
    ins = {p: fwd.file.axes.get(p, 0) if fwd.file is not None else 0 for p in params}
    outs = fwd.return_axes[0] if fwd.return_axes and all(a == fwd.return_axes[0] for a in fwd.return_axes) else None
    moved = any(a != 0 for a in ins.values()) or outs is not None and (
        (isinstance(outs, tuple) and any(o != 0 for o in outs)) or not isinstance(outs, tuple) and outs != 0)
    if not moved:
        return fn, None

    def one(a) -> str:
        return "none" if a in (NOT_BATCHED, None) else axis_text(a)

    def vm(a) -> str:
        if isinstance(a, tuple):
            return "(" + ", ".join(vm(x) for x in a) + ("," if len(a) == 1 else "") + ")"
        if a == UNKNOWN and not isinstance(a, Merged):
            return "?"
        return "None" if a in (NOT_BATCHED, None) else str(int(a)) if isinstance(a, Grouped) \
            else str(int(a) + 1) if isinstance(a, Merged) else str(a)
    text = (f"batch axes (PyTorch's layout): inputs {', '.join(f'{p} {one(a)}' for p, a in ins.items())}; "
            f"returns {one(outs) if not isinstance(outs, tuple) else axis_text(outs)}")
    call = f"jax.vmap(model, in_axes={vm(tuple(ins.values()))}, out_axes={vm(outs)})"
    ctx.report(Severity.INFO, "batch-axis", f"{text}: a batch goes through {call}"
               + (" (an axis merged outermost: the output's batch axis and the one after it reshaped into one, as "
                  "PyTorch's einops group made it)" if "merged outermost" in text else
                  " (a merged axis: the output's axes up to it reshaped into one, as PyTorch's view made it)"
                  if "merged" in text else ""), source)
    axes = f"in_axes={vm(tuple(ins.values()))}, out_axes={vm(outs)}" if "?" not in call else None
    header = fn.body.header if isinstance(fn.body, cst.IndentedBlock) else None
    if header is None or header.comment is not None:
        return fn, axes
    return fn.with_changes(body=fn.body.with_changes(header=header.with_changes(
        whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(f"# {text}; {call}")))), axes


#: products that mix the rows of their dense operand (a graph's nodes): a module using one is not per example
ROW_MIXING = frozenset({"torch.spmm", "torch.sparse.mm"})


def _whole_graph(cls: cst.ClassDef, forward: cst.FunctionDef | None, subs: dict, plans: dict, ctx,
                 batched: bool = False) -> bool:
    """Whether the module takes a whole graph rather than one example: its forward multiplies by a sparse
    (adjacency) matrix (``torch.spmm(adj, h)`` mixes the rows of ``h``, the graph's nodes, which are no
    batch), or it holds a module of this file that does. Its ``__call__`` then keeps every axis (no dim is
    shifted) and its callers call it without ``jax.vmap``. A batched module (_batched_classes) is one too."""
    if batched:
        listed = _listed(cls.name.value, ctx.analyses.get(OUTSIDE, {}).get("ranks", {}))
        inner = sorted({n for n in [*_class_attributes(forward and cls, plans), *listed] if plans.get(n, {}).get("batched")})
        ctx.report(Severity.INFO, "batch-axis", f"{cls.name.value} is translated as a batched module: its forward "
                   + (f"holds batched modules ({', '.join(inner)})" if inner else "needs the batch axis itself (a "
                      "dimension, size or statistic of the batch)")
                   + ", so its __call__ takes the whole batch and keeps every axis as PyTorch writes them, calls its "
                   "per-example layers and modules through jax.vmap (or jnp.vectorize), and is called without "
                   "jax.vmap", cls)
        return True
    own = forward is not None and any(ctx.imports.resolve(c.func) in ROW_MIXING for c in _calls(forward))
    held = [n for n in _class_attributes(forward and cls, plans) if plans[n].get("whole")]
    if own or held:
        ctx.report(Severity.INFO, "idiom-replaced", f"{cls.name.value} takes a whole graph (its nodes mix through a "
                   "sparse product, so they are no batch): its __call__ keeps every axis and is called without "
                   "jax.vmap", cls)
    return bool(own or held)


#: the comment on a batched module's ``def __call__`` line (fwport/verify/torch2jax.py calls it without jax.vmap)
BATCHED_MARK = "# batched module: takes the whole batch in PyTorch's layout; call it without jax.vmap"
#: the submodules a batched module may hold (_batched_classes): per-example layers it calls through jax.vmap (or
#: jnp.vectorize), elementwise ones it calls as they are, parameters; another (a sequence layer, BatchNorm, a
#: container other than a ModuleList a loop unpacks: _looped_lists) keeps the per-example translation and its
#: batch-axis errors
BATCHED_HOLDS = frozenset({"torch.nn.Linear", "torch.nn.LayerNorm", "torch.nn.Embedding", "torch.nn.Conv1d",
                           "torch.nn.Conv2d", "torch.nn.Conv3d", "torch.nn.ReLU", "torch.nn.GELU", "torch.nn.Tanh",
                           "torch.nn.Sigmoid", "torch.nn.SiLU", "torch.nn.LeakyReLU", "torch.nn.Identity",
                           "torch.nn.Dropout", "torch.nn.Parameter"})

#: an ``nn.Sequential`` attribute (of BATCHED_HOLDS layers, or this file's modules): per example, mapped as one
SEQUENTIALS = frozenset({"torch.nn.Sequential", "torch.nn.Sequential+random"})


def _listed(name: str, table: dict) -> set[str]:
    """The classes of this file held in the ModuleLists of class ``name`` (ranks.py's containers)."""
    t = table.get(name)
    return {c for kinds in (t.containers.values() if t is not None else ()) for c in kinds}


def _looped_lists(name: str, methods: dict, subs: dict, table: dict) -> set[str]:
    """The ModuleList attributes of class ``name`` holding this file's modules (ranks.py's containers: ``self.layers
    = nn.ModuleList([])`` appended ``nn.ModuleList([Attention(...), FeedForward(...)])``) that forward reads only as
    the iterable of a loop unpacking one name per module (``for attn, ff in self.layers:``), where a batched module
    calls each loop name whole (a batched one) or mapped over the batch (batch.Forward.batch_loop). None where another
    ModuleList attribute is read otherwise (indexed, its length): empty."""
    t = table.get(name)
    lists = {a for a, q in subs.items() if q == "torch.nn.ModuleList"}
    if t is None or not lists or any(a not in t.containers for a in lists):
        return set()
    fwd = methods["forward"]
    loops = [f for f in find_all(fwd, cst.For) if (dotted_text(f.iter) or "")[5:] in lists]
    for f in loops:
        kinds = t.containers[(dotted_text(f.iter) or "")[5:]]
        names = [f.target] if isinstance(f.target, cst.Name) else [e.value for e in f.target.elements] \
            if isinstance(f.target, (cst.Tuple, cst.List)) else []
        if len(names) != len(kinds) or not all(isinstance(n, cst.Name) for n in names):
            return set()
    reads = [a for a in find_all(fwd, cst.Attribute) if dotted_text(a) in {f"self.{x}" for x in lists}]
    return lists if len(reads) == len(loops) else set()


def _last_axes(call: cst.Call, ctx) -> bool:
    """``nn.Softmax(dim=-1)``: a layer over axes counted from the end (a literal negative dim), which its
    translation (softmax-module.toml) keeps as written, so it acts on the same axis of the whole batch as of one
    example; a batched module may hold it. Another dim (positive: shifted for one example; none) may not."""
    if ctx.imports.resolve(call.func) != "torch.nn.Softmax" or len(call.args) != 1:
        return False
    a = call.args[0]
    if a.star or a.keyword is not None and a.keyword.value != "dim":
        return False
    v = a.value
    return isinstance(v, cst.UnaryOperation) and isinstance(v.operator, cst.Minus) and isinstance(v.expression, cst.Integer)


def _sequence_or_identity(init: cst.FunctionDef | None, ctx) -> dict[str, str]:
    """``self.to_out = nn.Sequential(...) if project_out else nn.Identity()`` (either order) in ``__init__``: the
    attribute → the Sequential's kind (SEQUENTIALS). A batched module calls it through jax.vmap as it does a
    Sequential attribute; the Identity, mapped over the batch, is still the identity."""
    out: dict[str, str] = {}
    for stmt in init.body.body if init is not None else ():
        for s in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if not (isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.value, cst.IfExp)):
                continue
            t = dotted_text(s.targets[0].target) or ""
            calls = [v for v in (s.value.body, s.value.orelse) if isinstance(v, cst.Call)]
            qs = sorted(ctx.imports.resolve(c.func) or "" for c in calls)
            if t.startswith("self.") and t.count(".") == 1 and qs == ["torch.nn.Identity", "torch.nn.Sequential"]:
                seq = next(c for c in calls if ctx.imports.resolve(c.func) == "torch.nn.Sequential")
                random = any(isinstance(a.value, cst.Call) and ctx.imports.resolve(a.value.func) in RANDOM
                             for a in seq.args)
                out[t[5:]] = "torch.nn.Sequential+random" if random else "torch.nn.Sequential"
    return out


def _batched_sequence_layers(module: cst.Module, ctx, batched: set[str]) -> list[cst.Call]:
    """In the batched classes, the per-vector layers (Linear, a LayerNorm over the last axis) of a Sequential chosen
    by a condition (_sequence_or_identity): the batched module maps the Sequential over the batch axis, and what one
    example holds there (a vector, tokens) is not followed, so each is wrapped PerVector (exact at any rank)."""
    out = []
    for cls in module.body:
        if not (isinstance(cls, cst.ClassDef) and cls.name.value in batched):
            continue
        init = method_of(cls, "__init__")
        names = _sequence_or_identity(init, ctx)
        for a in find_all(init, cst.Assign) if init is not None and names else ():
            if len(a.targets) == 1 and (dotted_text(a.targets[0].target) or "")[5:] in names \
                    and isinstance(a.value, cst.IfExp):
                seq = next(v for v in (a.value.body, a.value.orelse) if isinstance(v, cst.Call)
                           and ctx.imports.resolve(v.func) == "torch.nn.Sequential")
                out += [x.value for x in seq.args if isinstance(x.value, cst.Call)
                        and ranks.per_vector(ctx.imports.resolve(x.value.func), x.value)]
    return out


class _Refusals(ranks._Probe):
    """A probe's context (ranks._Probe: no findings, no imports) that counts the batch-axis errors batch.Forward
    would report."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self.refused = 0

    def report(self, severity, code_, *args, **kwargs) -> None:
        if Severity(severity) is Severity.ERROR and code_ == "batch-axis":
            self.refused += 1


def _batched_classes(module: cst.Module, ctx, classes: set[str], whole: set[str], table: dict) -> set[str]:
    """The module classes translated as *batched* modules: a forward that needs the batch axis itself (batch.Forward,
    probed per example, reports a ``batch-axis`` error: ``torch.cat`` on dimension 0, a batch statistic, the batch
    size used as a value) keeps every axis as PyTorch writes them, calls its per-example layers through jax.vmap,
    and is called without jax.vmap (the whole-graph mode, plan["whole"]). Each holds only layers of BATCHED_HOLDS (a
    Softmax too where its dim is a literal negative one: _last_axes; a Sequential chosen by a condition:
    _sequence_or_identity) and this file's modules (attributes, or in ModuleLists read by a loop: _looped_lists); a
    class holding one is batched too (its call of it takes the batch), so each class building
    a batched one must hold it as an attribute (``self.enc = Encoder(...)``) or in such a ModuleList and qualify itself,
    else the per-example translation and its errors stay."""
    defs = {s.name.value: s for s in module.body if isinstance(s, cst.ClassDef) and s.name.value in classes}
    needing, eligible = set(), set()
    bases = {b.value.value for cls in defs.values() for b in cls.bases if isinstance(b.value, cst.Name)}  # mixins
    for name, cls in defs.items():
        methods = {m.name.value: m for m in cls.body.body if isinstance(m, cst.FunctionDef)}
        if "forward" not in methods or name in whole:
            continue
        init = methods.get("__init__")
        subs = _submodules(init, ctx)
        built = [c for c in (_calls(init) if init is not None else [])
                 if ctx.imports.resolve(c.func) is not None and (ctx.imports.resolve(c.func) or "").startswith("torch.nn.")
                 and (ctx.imports.resolve(c.func) or "")[9:10].isupper()]
        subs = {**subs, **_sequence_or_identity(init, ctx)}
        held = {(dotted_text(a.targets[0].target) or "")[5:] for st in (init.body.body if init is not None else [])
                if isinstance(st, cst.SimpleStatementLine) for a in st.body
                if isinstance(a, cst.Assign) and len(a.targets) == 1 and isinstance(a.value, cst.Call)
                and isinstance(a.value.func, cst.Name) and a.value.func.value in classes}
        # what forward calls on self: a layer it holds, a module of this file (a module given to __init__, a
        # method: not followed, so not batched)
        called = {(dotted_text(c.func) or "").split(".")[1] for c in _calls(methods["forward"])
                  if (dotted_text(c.func) or "").startswith("self.")}
        lists = _looped_lists(name, methods, subs, table)
        if any(q not in BATCHED_HOLDS | SEQUENTIALS | {"torch.nn.Softmax"} and a not in lists
               for a, q in subs.items()) \
                or any(ctx.imports.resolve(c.func) not in BATCHED_HOLDS | SEQUENTIALS and not _last_axes(c, ctx)
                       and not (ctx.imports.resolve(c.func) == "torch.nn.ModuleList" and lists) for c in built) \
                or len(_reached(methods, "forward") - {"forward"}) > 0 or called - set(subs) - held \
                or name in bases or any(isinstance(c.func, cst.Name) and c.func.value == "super"
                                        for c in _calls(methods["forward"])):
            continue
        eligible.add(name)
        probe = _Refusals(ctx)
        fwd = methods["forward"]
        buffers: set[str] = set()
        leading: dict[str, tuple[int, int]] = {}  # (as the real rewrite sees them: a causal mask's leading ones)
        if init is not None:
            rewrite(init, _Buffers(probe, buffers, leading))
        f = Forward(probe, set(ranks.forward_params(fwd)), set(), subs, buffers=buffers,
                    ranks=table.get(name), leading_ones=leading)
        f.negative_fields = ctx.analyses.get(NEGATIVE_FIELDS, {}).get(name, frozenset())
        rewrite(fwd.body, f)
        if probe.refused:
            needing.add(name)
    for name in list(eligible):  # its modules of the file get the batch axis first (jax.vmap over axis 0)
        held = _class_attributes(defs[name], {n: {} for n in defs}) + list(_listed(name, table))
        if any(table.get(c) is not None and (any(a != 0 for a in table[c].axes.values())
                                             or table[c].out_axes not in (None, 0)) for c in held):
            eligible.discard(name)
    builders = {n: {b for b, cls in defs.items() if b != n and any(
        isinstance(c.func, cst.Name) and c.func.value == n for c in find_all(cls, cst.Call))} for n in defs}

    def closure(start: set[str]) -> set[str]:
        out, todo = set(), list(start)
        while todo:
            n = todo.pop()
            if n not in out:
                out.add(n)
                todo += builders[n]
        return out
    while True:
        grown = closure(needing)
        bad = {n for n in grown if n not in eligible and n not in whole
               or any(n not in _class_attributes(defs[b], {n: {}}) and n not in _listed(b, table)
                      for b in builders[n])}
        if not bad:
            return grown - whole
        needing = {n for n in needing if not closure({n}) & bad}


class _SparseProducts(cst.CSTTransformer):
    """In a whole-graph module, ``y = torch.mm(a, b)`` (a statement's whole value) → ``y = a @ b``: PyTorch's
    torch.mm takes a sparse first operand (node features kept sparse), and so does ``@`` with a BCOO matrix,
    not jnp.matmul."""

    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx

    def _product(self, value):
        if isinstance(value, cst.Call) and self.ctx.imports.resolve(value.func) == "torch.mm" and len(value.args) == 2 \
                and all(a.keyword is None and not a.star for a in value.args):
            return cst.BinaryOperation(value.args[0].value, cst.MatrixMultiply(), value.args[1].value)
        return None

    def leave_Assign(self, original, updated):
        product = self._product(updated.value)
        return updated.with_changes(value=product) if product is not None else updated

    def leave_Return(self, original, updated):
        product = self._product(updated.value)
        return updated.with_changes(value=product) if product is not None else updated


def _class_attributes(cls: cst.ClassDef | None, plans: dict) -> list[str]:
    """The classes of this file already translated that ``cls.__init__`` assigns to ``self.NAME``."""
    init = method_of(cls, "__init__") if cls is not None else None
    found = []
    for stmt in init.body.body if init is not None else ():
        for s in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(s, cst.Assign) and isinstance(s.value, cst.Call) and isinstance(s.value.func, cst.Name) \
                    and s.value.func.value in plans:
                found.append(s.value.func.value)
    return found


# --- finish: the lines an Equinox module adds ---------------------------------------------------------

def finish(module: cst.Module, ctx) -> cst.Module:
    if ctx.analyses.get(INLINED_LOOPS):
        gone = ctx.analyses[INLINED_LOOPS]
        module = module.with_changes(body=[f for f in module.body if not (isinstance(f, cst.FunctionDef)
                                                                          and f.name.value in gone)])
    plans = ctx.analyses.get(PLANS)
    outside = ctx.analyses.get(OUTSIDE, {"builders": set(), "members": set()})
    bare = ctx.analyses.get(BARE_LAYERS)
    if not plans and not outside["builders"]:  # (builders alone: a file of functions returning layers)
        if not bare:
            return module
        # `model = nn.Linear(1, 1)` in a script with no module class: its key, as an instance's
        adder = _RootKey(frozenset(), f"{ctx.spell_text('jax.random.key')}(0)", key_fn=ctx.spell_text("jax.random.key"),
                         split=ctx.spell_text("jax.random.split"), layers=KEYED)
        body = [s if isinstance(s, cst.ClassDef) else rewrite(s, adder) for s in module.body]
        return module.with_changes(body=[n for s in body for n in (s.nodes if isinstance(s, cst.FlattenSentinel) else (s,))])
    body = []
    # classes (in file order) whose __init__ takes a key, and builder functions: their calls get one
    keyed: set[str] = set(outside["builders"])
    if outside.get("init_fns"):  # model = init_layers(model, weights_init): a key like a module's construction
        keyed.add("init_layers")
    returns = ctx.analyses.setdefault(OUTSIDE + ".returns", {})  # builder function → the Equinox class it returns
    at = {s.name.value: i for i, s in enumerate(module.body) if isinstance(s, cst.ClassDef) and s.name.value in plans}
    done: dict[int, cst.ClassDef] = {}
    written: set[str] = set()
    for i, stmt in enumerate(module.body):
        if i in at.values():
            _held_first(stmt.name.value, {n: [h for h in hs if h in at] for n, hs in outside.get("held", {}).items()},
                        lambda n: done.__setitem__(at[n], _finish_class(module.body[at[n]], ctx, plans[n], keyed,
                                                                        n in outside["members"])), done=written)
            stmt = done[i]
        elif isinstance(stmt, cst.FunctionDef) and stmt.name.value in outside["builders"]:
            stmt = _keyed_function(stmt, ctx, _site(frozenset(keyed), frozenset(), frozenset()))
            kinds = {dotted_text(r.func) if isinstance(r, cst.Call) else None for r in _returns(stmt)}
            if len(kinds) == 1 and (next(iter(kinds)) or "").startswith(ctx.spell_text("equinox.nn.")):
                returns[stmt.name.value] = next(iter(kinds))  # `def conv3x3(...): return eqx.nn.Conv2d(...)`
        body.append(stmt)
    body = _quote_forward_fields(configs.freeze(body, ctx))
    operated = {m for p in plans.values() for m in p.get("surgery", {})}
    if operated:  # `model.crop_block_size(n)` as a statement → `model = model.crop_block_size(n)` (surgery.py)
        body = [rewrite(s, surgery.Rebind(frozenset(operated))) for s in body]
    stateful = set(n for n, p in plans.items() if p["stateful"])
    body, made = _model_builders(body, ctx, keyed, stateful, set(outside["builders"]))
    if keyed or stateful or bare:  # instances made outside the classes (a script's `model = Net()`)
        root = f"{ctx.spell_text('jax.random.key')}(0)"
        adder = _RootKey(frozenset(keyed), root, frozenset(stateful), ctx.spell_text("equinox.nn.make_with_state"),
                         ctx.spell_text("jax.random.key"), ctx.spell_text("jax.random.split"),
                         layers=KEYED if bare else frozenset())
        from fwport.packs.torch2jax.passes.state import STATE_NAMES
        adder.state_names = ctx.analyses.get(STATE_NAMES, {})  # the training pass's: `generator_state`, ...
        body = [s if isinstance(s, cst.ClassDef) or isinstance(s, cst.FunctionDef) and s.name.value in made
                else rewrite(s, adder) for s in body]
        # a top-level `model = Net()` under a module-level root key comes back as two statements (the split, the call)
        body = [n for s in body for n in (s.nodes if isinstance(s, cst.FlattenSentinel) else (s,))]
    return module.with_changes(body=body)


def _quote_forward_fields(body: list) -> list:
    """A field annotation naming a class the file defines later (or the class itself) as a string: Python
    evaluates a class body's annotations when it runs, where PyTorch's ``self.encoder = TransformerEncoder(...)``
    is looked up only when ``__init__`` runs (DETR's Transformer is defined above its TransformerEncoder)."""
    where = {s.name.value: i for i, s in enumerate(body) if isinstance(s, cst.ClassDef)}
    out = list(body)
    for i, cls in enumerate(body):
        if not isinstance(cls, cst.ClassDef):
            continue
        stmts = list(cls.body.body)
        for j, st in enumerate(stmts):
            small = st.body[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None
            if not isinstance(small, cst.AnnAssign) or isinstance(small.annotation.annotation, cst.SimpleString):
                continue
            ann = small.annotation.annotation
            if any(where.get(n.value, -1) >= i for n in find_all(ann, cst.Name)):
                text = code(ann)
                quoted = cst.SimpleString(f'"{text}"' if '"' not in text else repr(text))
                stmts[j] = st.with_changes(body=[small.with_changes(annotation=cst.Annotation(quoted))])
        if stmts != list(cls.body.body):
            out[i] = cls.with_changes(body=cls.body.with_changes(body=stmts))
    return out


def _made(fn: cst.FunctionDef, classes: set[str]) -> set[str]:
    """The classes (or builders) among ``classes`` whose instance ``fn`` returns; none for a function that
    loops or seeds (``def fit(...): model = GCN(...); for epoch in ...: ...; return model`` trains the
    model it returns: it is no builder, and its own key stays its own)."""
    if _trains(fn):
        return set()
    return {c.func.value for r in _returns(fn) for c in [_bound_value(fn, r)]
            if isinstance(c, cst.Call) and isinstance(c.func, cst.Name) and c.func.value in classes}


def _trains(fn: cst.FunctionDef) -> bool:
    """Whether ``fn`` holds a loop or a seed (torch.manual_seed / a key of its own)."""
    v = _Trains()
    scan(fn.body, v)
    return v.found


class _Trains(cst.CSTVisitor):
    found = False

    def visit_For(self, node) -> bool:
        self.found = True
        return False

    def visit_While(self, node) -> bool:
        self.found = True
        return False

    def visit_Call(self, node: cst.Call) -> None:
        f = node.func
        name = f.attr.value if isinstance(f, cst.Attribute) else f.value if isinstance(f, cst.Name) else ""
        if name in ("manual_seed", "key", "PRNGKey"):
            self.found = True


def _returning(module: cst.Module, classes: set[str], builders: set[str]) -> set[str]:
    """Module-level functions returning an instance of one of ``classes`` (or of such a function)."""
    out: set[str] = set()
    funcs = [s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value not in builders]
    changed = True
    while changed:
        changed = False
        for fn in funcs:
            if fn.name.value not in out and _made(fn, classes | out):
                out.add(fn.name.value)
                changed = True
    return out


def _model_builders(body: list, ctx, keyed: set[str], stateful: set[str], builders: set[str]):
    """Module-level functions that return a model of the file (``def ResNet18(): return ResNet(BasicBlock,
    [2, 2, 2, 2])``, or a builder's result) take ``*, key`` and hand it on, like the layer builders: the
    caller chooses the initialisation, as a JAX user writes it. Such a function stays a plain function
    returning the model; where that model keeps a layer state (BatchNorm) it joins ``stateful``, so that
    ``net = ResNet18()`` becomes ``net, state = eqx.nn.make_with_state(ResNet18)(key=...)`` (make_with_state
    takes any callable; fwport verify builds it the same way). Returns the body and every builder's name."""
    funcs = {i: s for i, s in enumerate(body) if isinstance(s, cst.FunctionDef) and s.name.value not in builders}
    found: dict[int, str] = {}
    changed = True
    while changed:  # builders of builders
        changed = False
        for i, fn in funcs.items():
            made = _made(fn, keyed)
            if i not in found and made:
                found[i] = fn.name.value
                keyed.add(fn.name.value)
                changed = True
            if i in found and made & stateful and fn.name.value not in stateful:
                stateful.add(fn.name.value)
                changed = True
    body = list(body)
    for i in found:
        body[i] = _keyed_function(body[i], ctx, _site(frozenset(keyed), frozenset(), frozenset()))
    return body, builders | set(found.values())


class _RootKey(cst.CSTTransformer):
    """``model = Net()`` → ``model = Net(key=jax.random.key(0))``; for a module with state
    ``model, state = eqx.nn.make_with_state(Net)(key=...)``. Where the scope already holds the root key
    (``key = jax.random.key(seed)``, torch.manual_seed's translation, earlier in the function or module, in
    this block or one around it), the instance's key is split from it as an Equinox user writes it:
    ``key, model_key = jax.random.split(key)`` above ``model = Net(key=model_key)``."""

    def __init__(self, classes: frozenset[str], root: str, stateful: frozenset[str] = frozenset(), make: str = "",
                 key_fn: str = "", split: str = "", layers: frozenset[str] = frozenset()):
        super().__init__()
        self.classes, self.root, self.stateful, self.make = classes, root, stateful, make
        self.layers = layers  # Equinox constructors that draw (eqx.nn.Linear): keyed where a statement's whole value
        self.values: list[int | None] = []  # per open statement: the id of a plain `name = ...`'s value
        self.key_fn, self.split = key_fn, split
        self.marks: list[bool] = [False]  # per open block: a root key was bound in it (above the statement)
        self.scopes: list[int] = [0]  # index in marks where each open function's blocks start
        self.target: list[str | None] = []  # per open statement: the name a plain `name = ...` binds
        self.pending: list[str] = []  # sub-key names the statement being left must split first
        self.pending_line = ""  # the split of a Sequential's member keys the statement being left needs first
        self.state_names: dict[str, str] = {}  # model name → its layer state's name (state.STATE_NAMES)

    def visit_IndentedBlock(self, node) -> None:
        self.marks.append(False)

    def leave_IndentedBlock(self, original, updated):
        self.marks.pop()
        return updated

    def visit_FunctionDef(self, node) -> None:
        self.scopes.append(len(self.marks))

    def leave_FunctionDef(self, original, updated):
        self.scopes.pop()
        return updated

    visit_Lambda = visit_FunctionDef
    leave_Lambda = leave_FunctionDef

    def visit_SimpleStatementLine(self, node) -> None:
        st = node.body[0] if len(node.body) == 1 else None
        plain = isinstance(st, cst.Assign) and len(st.targets) == 1 and isinstance(st.targets[0].target, cst.Name)
        self.target.append(st.targets[0].target.value if plain else None)
        self.values.append(id(st.value) if plain else None)

    def leave_SimpleStatementLine(self, original, updated):
        self.target.pop()
        self.values.pop()
        st = original.body[0] if len(original.body) == 1 else None
        if self.key_fn and isinstance(st, cst.Assign) and len(st.targets) == 1 \
                and isinstance(st.targets[0].target, cst.Name) and st.targets[0].target.value == "key" \
                and isinstance(st.value, cst.Call) and code(st.value.func) == self.key_fn:
            self.marks[-1] = True
        if self.pending_line:
            line, self.pending_line = parsed_statement(self.pending_line), ""
            return cst.FlattenSentinel([line.with_changes(leading_lines=updated.leading_lines),
                                        updated.with_changes(leading_lines=())])
        if not self.pending:
            return updated
        names, self.pending = self.pending, []
        splits = [parsed_statement(f"key, {n} = {self.split}(key)\n") for n in names]
        splits[0] = splits[0].with_changes(leading_lines=updated.leading_lines)  # the blank lines above stay above
        return cst.FlattenSentinel([*splits, updated.with_changes(leading_lines=())])

    def _seeded(self) -> bool:
        return bool(self.key_fn) and any(self.marks[self.scopes[-1]:]) and bool(self.target) \
            and self.target[-1] is not None and not self.pending

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        v = updated.value
        if len(updated.targets) == 1 and isinstance(updated.targets[0].target, cst.Name) and isinstance(v, cst.Call) \
                and isinstance(v.func, cst.Name) and v.func.value in self.stateful:
            name = self.state_names.get(updated.targets[0].target.value, "state")
            target = cst.Tuple([cst.Element(updated.targets[0].target), cst.Element(cst.Name(name))], lpar=[], rpar=[])
            call = v.with_changes(func=cst.Call(parsed_expression(self.make), [cst.Arg(v.func)]))
            return updated.with_changes(targets=[updated.targets[0].with_changes(target=target)], value=call)
        return updated

    def _sequence(self, original: cst.Call, updated: cst.Call) -> cst.Call | None:
        """``D = eqx.nn.Sequential([eqx.nn.Linear(...), ...])`` of a script (the training pass's bare layers): each
        member that draws gets a key of its own, all split at once from the root key (``key, D_key1, D_key2 =
        jax.random.split(key, 3)`` where the scope holds one, else from ``jax.random.key(0)``) above the statement."""
        if not (self.layers and self.values and self.values[-1] == id(original)
                and dotted_text(original.func) in ("eqx.nn.Sequential", "equinox.nn.Sequential")
                and len(updated.args) == 1 and isinstance(updated.args[0].value, cst.List) and self.target[-1]):
            return None
        elements = list(updated.args[0].value.elements)
        at = [i for i, e in enumerate(elements) if isinstance(e.value, cst.Call) and dotted_text(e.value.func) in self.layers
              and not any(a.keyword and a.keyword.value == "key" for a in e.value.args)]
        if not at:
            return None
        names = [f"{self.target[-1]}_key{k + 1}" for k in range(len(at))]
        for k, i in zip(names, at):
            call = elements[i].value
            args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in call.args]
            elements[i] = elements[i].with_changes(value=call.with_changes(args=[*args, cst.Arg(
                cst.Name(k), keyword=cst.Name("key"),
                equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))]))
        seeded = self._seeded()
        split = f"{self.split}(key, {len(at) + 1})" if seeded else f"{self.split}({self.root}, {len(at)})"
        self.pending_line = f"{'key, ' if seeded else ''}{', '.join(names)} = {split}\n"
        return updated.with_changes(args=[updated.args[0].with_changes(
            value=updated.args[0].value.with_changes(elements=elements))])

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        seq = self._sequence(original, updated)
        if seq is not None:
            return seq
        bare = bool(self.values) and self.values[-1] == id(original) and dotted_text(original.func) in self.layers
        if (isinstance(original.func, cst.Name) and original.func.value in self.classes or bare) \
                and not any(a.keyword and a.keyword.value == "key" for a in original.args):
            key = parsed_expression(self.root)
            if self._seeded():  # one instance per statement takes a key split from the root key
                name = f"{self.target[-1]}_key"
                self.pending.append(name)
                key = cst.Name(name)
            args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in updated.args]
            return updated.with_changes(args=[*args, cst.Arg(key, keyword=cst.Name("key"),
                                                             equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))])
        return updated


def keyed_layer(q: str, ctx) -> bool:
    """A PyTorch layer (its resolved name) whose Equinox translation draws its initial values, so takes a key:
    nn.Linear, nn.Conv2d, nn.LSTM (StackedLSTM), ..."""
    rule = ctx.pack.by_name.get(q)
    t = (rule.emit.get("target") or "") if rule is not None else ""
    return ("eqx." + t[len("equinox."):] if t.startswith("equinox.") else t) in KEYED


def _is_super_init(stmt: cst.CSTNode) -> bool:
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)):
        return False
    call = stmt.body[0].value
    return isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "__init__" \
        and isinstance(call.func.value, cst.Call) and dotted_text(call.func.value.func) == "super"


def _site(classes: frozenset[str], helpers: frozenset[str], params: frozenset[str]):
    """Whether a translated call takes a key: an Equinox constructor that draws (``eqx.nn.Linear``), a
    class of the file whose ``__init__`` takes one, a builder function, a helper method building modules
    (``self._make_layer``), a parameter holding a drawing class (``block``), or a draw the rules wrote from
    ``key`` (``torch.randn`` → ``jax.random.normal(key, ...)``)."""
    def site(call: cst.Call) -> bool:
        if any(a.keyword and a.keyword.value == "key" for a in call.args):
            return False
        func = dotted_text(call.func) or ""
        if _draw(call):
            return bool(call.args) and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == "key" \
                and call.args[0].keyword is None
        return func in KEYED or func in classes or func in params or func.startswith("self.") and func[5:] in helpers
    return site


def _draw(call: cst.Call) -> bool:
    """A draw whose key is its first argument: ``jax.random.normal(key, ...)``,
    ``jax.nn.initializers.orthogonal(...)(key, shape)``."""
    if isinstance(call.func, cst.Call):
        return (dotted_text(call.func.func) or "").startswith("jax.nn.initializers.")
    return (dotted_text(call.func) or "").startswith("jax.random.")


def _holds_site(node: cst.CSTNode, site) -> bool:
    return any(site(c) for c in _calls(node))


COMPREHENSIONS = (cst.ListComp, cst.GeneratorExp, cst.SetComp)


class _Units(cst.CSTVisitor):
    """The places of one block that take a key, in order: a call that takes one, and each loop or
    comprehension holding such calls (they split their own key per iteration)."""

    def __init__(self, site):
        super().__init__()
        self.site = site
        self.units: list[cst.CSTNode] = []

    def visit_For(self, node) -> bool:
        if _holds_site(node.body, self.site):
            self.units.append(node)
        return False

    visit_While = visit_For

    def visit_ListComp(self, node) -> bool:
        if _holds_site(node, self.site):
            self.units.append(node)
        return False

    visit_GeneratorExp = visit_SetComp = visit_DictComp = visit_ListComp

    def visit_Call(self, node) -> None:
        if self.site(node):
            self.units.append(node)

    def visit_FunctionDef(self, node) -> bool:
        return False

    visit_Lambda = visit_ClassDef = visit_FunctionDef


def _units(stmts, site) -> list[cst.CSTNode]:
    u = _Units(site)
    for s in stmts:
        scan(s, u)
    return u.units


def _with_key(call: cst.Call, name: str) -> cst.Call:
    if _draw(call):  # the draw's own key argument
        return call.with_changes(args=[call.args[0].with_changes(value=cst.Name(name)), *call.args[1:]])
    arg = cst.Arg(cst.Name(name), keyword=cst.Name("key"),
                  equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
    args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in call.args]
    return call.with_changes(args=[*args, arg])


class _AssignKeys(cst.CSTTransformer):
    """Gives each unit of a block its key (``names``: unit → name): a call gets ``key=name``; a loop
    splits its key at the top of each iteration (``key, subkey = jax.random.split(key)``) and hands the
    splits to the units of its body; ``[Block(...) for _ in range(n)]`` takes one key per element
    (``for subkey in jax.random.split(key, n)``; with ``MANY``, several draws in the element take a key each:
    ``for k1, k2 in jax.random.split(key, (n, 2))``)."""

    MANY = False  # several units in a comprehension's element (keys.py's draws; modules: an error of the pass)

    def __init__(self, names: dict[int, str], site, ctx, depth: int):
        super().__init__()
        self.names, self.site, self.ctx, self.depth = names, site, ctx, depth

    def _mine(self, node) -> bool:
        return id(node) not in self.names

    visit_For = visit_While = visit_ListComp = visit_GeneratorExp = visit_SetComp = visit_DictComp = _mine

    def leave_Call(self, original, updated):
        return _with_key(updated, self.names[id(original)]) if id(original) in self.names else updated

    def _sub(self, i: int | None = None) -> str:
        return "sub" * self.depth + "key" + ("" if i is None else str(i))

    def _loop(self, original, updated):
        if id(original) not in self.names:
            return updated
        k = self.names[id(original)]
        body = original.body
        if isinstance(body, cst.SimpleStatementSuite):
            body = cst.IndentedBlock([cst.SimpleStatementLine(list(body.body))])
        units = _units(body.body, self.site)
        split = self.ctx.spell_text("jax.random.split")
        if len(units) == 1 and isinstance(units[0], (cst.For, cst.While)):
            names, line = {id(units[0]): k}, None  # the inner loop splits the same key on
        elif len(units) == 1:
            names, line = {id(units[0]): self._sub()}, f"{k}, {self._sub()} = {split}({k})\n"
        else:
            subs = [self._sub(i) for i in range(1, len(units) + 1)]
            names, line = dict(zip(map(id, units), subs)), f"{k}, {', '.join(subs)} = {split}({k}, {len(units) + 1})\n"
        new = rewrite(body, type(self)(names, self.site, self.ctx, self.depth + (line is not None)))
        if line:
            new = new.with_changes(body=[parsed_statement(line), *new.body])
        return updated.with_changes(body=new)

    leave_For = leave_While = _loop

    def _comp(self, original, updated):
        if id(original) not in self.names:
            return updated
        f, it = original.for_in, original.for_in.iter
        units = _units([original.elt], self.site)
        count = _comp_count(it, self.ctx.analyses.get(UNSIZED, frozenset()))
        ranged = isinstance(it, cst.Call) and dotted_text(it.func) == "range"
        if f.inner_for_in is not None or f.ifs or count is None or not units \
                or len(units) > 1 and not self.MANY:
            return updated  # an error of the pass (_Comprehensions; keys.py refuses what it cannot key)
        subs = [self._sub()] if len(units) == 1 else [self._sub(i) for i in range(1, len(units) + 1)]
        elt = rewrite(original.elt, type(self)(dict(zip(map(id, units), subs)), self.site, self.ctx, self.depth + 1))
        n = count if len(units) == 1 else f"({count}, {len(units)})"
        keys = parsed_expression(f"{self.ctx.spell_text('jax.random.split')}({self.names[id(original)]}, {n})")
        t = f.target
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        key_target = cst.Name(subs[0]) if len(subs) == 1 else cst.Tuple(
            [cst.Element(cst.Name(k), comma=comma if i < len(subs) - 1 else cst.MaybeSentinel.DEFAULT)
             for i, k in enumerate(subs)], lpar=[], rpar=[])
        used = isinstance(t, cst.Name) and t.value != "_" and t.value in {n.value for n in _names(original.elt)}
        if not ranged:  # over a sequence: its elements beside their keys
            inner = key_target if len(subs) == 1 else key_target.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            outer = t.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]) if isinstance(t, cst.Tuple) \
                and not t.lpar else t
            for_in = f.with_changes(target=cst.Tuple([cst.Element(outer, comma=comma), cst.Element(inner)], lpar=[],
                                                     rpar=[]),
                                    iter=cst.Call(cst.Name("zip"), [cst.Arg(updated.for_in.iter, comma=comma),
                                                                    cst.Arg(keys)]))
        elif used or not isinstance(t, cst.Name):
            inner = key_target if len(subs) == 1 else key_target.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            for_in = f.with_changes(target=cst.Tuple([cst.Element(t, comma=comma), cst.Element(inner)], lpar=[], rpar=[]),
                                    iter=cst.Call(cst.Name("enumerate"), [cst.Arg(keys)]))
        else:
            for_in = f.with_changes(target=key_target, iter=keys)
        if isinstance(updated, cst.GeneratorExp):  # nn.ModuleList(M(...) for ...): a list (its rule drops the call)
            return cst.ListComp(elt=elt, for_in=for_in)
        return updated.with_changes(elt=elt, for_in=for_in)

    leave_ListComp = leave_GeneratorExp = leave_SetComp = _comp


def _names(node) -> list[cst.Name]:
    out: list[cst.Name] = []

    class V(cst.CSTVisitor):
        def visit_Name(self, n):
            out.append(n)

    scan(node, V())
    return out


def _thread_keys(fn: cst.FunctionDef, block: cst.IndentedBlock, ctx, site) -> tuple[cst.IndentedBlock, int]:
    """Hands out ``key`` to the units of a function's body (one: ``key`` itself; several: a split at the
    top, ``key1, key2 = jax.random.split(key)``); the number of units."""
    units = _units(block.body, site)
    n = len(units)
    if n == 0:
        return block, 0
    block = rewrite(block, _AssignKeys(dict(zip(map(id, units), _key_names(n))), site, ctx, 1))
    if n > 1:
        stmts = list(block.body)
        stmts.insert(_docstring_end(stmts), _split_line(n, ctx, optional=False))
        block = block.with_changes(body=stmts)
    return block, n


def _local_site(site, local: set[str], stmts: list, ctx):
    """``site`` extended by the functions of ``local`` (defined in ``__init__``'s body) that build something taking
    a key, perhaps through one another: a call of one takes ``key=`` too. The result's ``keyed`` names them."""
    defs = {s.name.value: s for s in stmts if isinstance(s, cst.FunctionDef) and s.name.value in local}
    keyed: frozenset[str] = frozenset()

    def extended(call: cst.Call) -> bool:
        if isinstance(call.func, cst.Name) and call.func.value in extended.keyed:
            return not any(a.keyword and a.keyword.value == "key" for a in call.args)
        return site(call)

    for _ in range(len(defs)):
        extended.keyed = keyed
        now = frozenset(n for n, d in defs.items() if _units(d.body.body, extended)
                        if isinstance(d.body, cst.IndentedBlock))
        if now == keyed:
            break
        keyed = now
    extended.keyed = keyed
    return extended


def _keyed_function(fn: cst.FunctionDef, ctx, site) -> cst.FunctionDef:
    """A helper method or builder function that builds modules drawing initial values: it takes ``*, key``."""
    block, n = _thread_keys(fn, fn.body, ctx, site)
    if n == 0:
        return fn
    return fn.with_changes(params=_kwonly(fn.params, "key", None), body=block)


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
        self.used |= names_in(node)  # (`self.bn0`: bn0 is no variable)

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
        self.hoisted.append(parsed_statement(f"{temp}, state = {code(updated)}\n"))
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
            hoisted[-1] = parsed_statement(f"{small.targets[0].target.value}, state = {code(last.value)}\n")
            hoisted[0] = hoisted[0].with_changes(leading_lines=updated.leading_lines)
            return cst.FlattenSentinel(hoisted)
        hoisted[0] = hoisted[0].with_changes(leading_lines=updated.leading_lines)
        return cst.FlattenSentinel([*hoisted, updated.with_changes(leading_lines=[])])


class _CallKeys(cst.CSTTransformer):
    """``key=key`` at the n dropout call sites of ``__call__`` (or a drawing method) and the key of each draw
    (``jax.random.normal(key, ...)``, ``random``: how jax.random is spelled) → ``key1`` ... ``keyN``."""

    def __init__(self, random: str = "jax.random."):
        super().__init__()
        self.n = 0
        self.random = random

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        first = updated.args[0] if updated.args else None
        if first is not None and first.keyword is None and isinstance(first.value, cst.Name) and first.value.value == "key" \
                and (dotted_text(updated.func) or "").startswith(self.random):
            self.n += 1
            return updated.with_changes(args=[first.with_changes(value=cst.Name(f"key{self.n}")), *updated.args[1:]])
        return updated

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        if original.keyword and original.keyword.value in KEY_KEYWORDS and isinstance(original.value, cst.Name) \
                and original.value.value == "key":
            self.n += 1
            return updated.with_changes(value=cst.Name(f"key{self.n}"))
        return updated


class _LoopKeys(cst.CSTTransformer):
    """A key consumed inside a loop (``self.drop(x, key=key)`` for each layer, nanoGPT generate's
    ``torch.multinomial`` per new token) would give every iteration the same draws, where PyTorch's generator
    moves on: the innermost loop around the consumer splits it first, ``key, draw_key = jax.random.split(key)``,
    and the consumer takes ``draw_key`` (``optional``: a key that may be None stays None)."""

    def __init__(self, ctx, optional: bool):
        super().__init__()
        self.random = ctx.spell_text("jax.random") + "."
        self.split = ctx.spell_text("jax.random.split")
        self.optional = optional
        self.found: list[list] = []  # per open loop: [id of its body, inside the body now, the key names it consumes]

    def _key(self, node) -> str | None:
        return node.value if isinstance(node, cst.Name) and re.fullmatch(r"key\d*", node.value) else None

    def visit_FunctionDef(self, node) -> bool:
        return not self.found  # a nested function has keys of its own

    def visit_Lambda(self, node) -> bool:
        return False

    def _open(self, node) -> None:
        self.found.append([id(node.body), False, set()])

    visit_For = visit_While = _open

    def visit_IndentedBlock(self, node) -> None:
        if self.found and self.found[-1][0] == id(node):
            self.found[-1][1] = True

    def leave_IndentedBlock(self, original, updated):
        if self.found and self.found[-1][0] == id(original):
            self.found[-1][1] = False  # (a loop's else block and its iterable run once)
        return updated

    visit_SimpleStatementSuite = visit_IndentedBlock
    leave_SimpleStatementSuite = leave_IndentedBlock

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        loop = next((f for f in reversed(self.found) if f[1]), None)
        if loop is None:
            return updated
        func = dotted_text(updated.func) or ""
        first = updated.args[0] if updated.args else None
        if first is not None and first.keyword is None and self._key(first.value) and func.startswith(self.random) \
                and (func != self.split or any(a.keyword is not None and a.keyword.value == "num" for a in updated.args)):
            # (a split with num=: the keys of the examples a batched module maps a module over, batch.batch_loop)
            loop[2].add(first.value.value)
            return updated.with_changes(args=[first.with_changes(value=cst.Name(f"draw_{first.value.value}")),
                                              *updated.args[1:]])
        args = []
        for a in updated.args:
            k = self._key(a.value) if a.keyword and a.keyword.value in KEY_KEYWORDS else None
            if k:
                loop[2].add(k)
                a = a.with_changes(value=cst.Name(f"draw_{k}"))
            args.append(a)
        return updated.with_changes(args=args)

    def _close(self, original, updated):
        names = self.found.pop()[2]
        if not names:
            return updated
        lines = []
        for k in sorted(names):
            value = f"{self.split}({k})" + (f" if {k} is not None else (None, None)" if self.optional else "")
            lines.append(parsed_statement(f"{k}, draw_{k} = {value}\n"))
        body = updated.body
        return updated.with_changes(body=body.with_changes(body=[*lines, *body.body]))

    leave_For = leave_While = _close


def _key_names(n: int) -> list[str]:
    return ["key"] if n == 1 else [f"key{i}" for i in range(1, n + 1)]


def _split_line(n: int, ctx, optional: bool) -> cst.SimpleStatementLine:
    split = ctx.spell_text("jax.random.split")
    targets = ", ".join(_key_names(n))
    value = f"{split}(key)" if n == 2 else f"{split}(key, {n})"
    if optional:
        value += f" if key is not None else ({', '.join(['None'] * n)})"
    return statement(f"{targets} = {value}\n")


def _docstring_end(body) -> int:
    if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) \
            and isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        return 1
    return 0


class _Dropped(cst.CSTTransformer):
    """The lines batch.py marked for removal (``__fwport_drop__()``, what was ``batch = x.shape[0]``) go; a
    block left empty gets ``pass``."""

    def leave_SimpleStatementLine(self, original, updated):
        kept = [b for b in updated.body if not (isinstance(b, cst.Expr) and isinstance(b.value, cst.Call)
                                                 and dotted_text(b.value.func) == DROP)]
        if len(kept) == len(updated.body):
            return updated
        if not kept:
            return cst.RemoveFromParent()
        return updated.with_changes(body=[*kept[:-1], kept[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)])

    def leave_IndentedBlock(self, original, updated):
        return updated if updated.body else updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])


def _finish_class(cls: cst.ClassDef, ctx, plan: dict, keyed: set[str], member: bool = False) -> cst.ClassDef:
    cls = configs.frozensets(cls, ctx)  # a set nothing changes → a frozenset, a static field (configs.py)
    cls = configs.copies(cls, ctx)  # a Namespace read for attributes → a field per attribute (configs.py)
    if plan.get("tied"):  # the tie and the output layer it replaced go (tying.py)
        cls = rewrite(cls, tying.Dropped())
    if isinstance(plan.get("tied"), dict):  # a tie under a flag: the output layer's calls choose by it
        cls = rewrite(cls, tying.TiedCalls(plan["tied"]))
    if plan.get("surgery"):  # model surgery → a method returning the new model
        cls = cls.with_changes(body=cls.body.with_changes(body=[
            surgery.functional(s, frozenset(plan["surgery"][s.name.value]), ctx,
                               frozenset(ctx.analyses.get(configs.REPLACED, {}).get(cls.name.value, ())))
            if isinstance(s, cst.FunctionDef) and s.name.value in plan["surgery"] else s for s in cls.body.body]))
    fields: dict[str, str] = {}
    body = []
    helpers = frozenset(plan.get("helpers", ()))
    params = plan.get("keyed_params", {})
    done: dict[str, cst.FunctionDef] = {}
    keyed_helpers: frozenset[str] = frozenset()
    originals = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value in helpers}
    for _ in range(len(originals)):  # a helper takes a key when something in it draws, perhaps another helper
        done = {n: _keyed_function(fn, ctx, _site(frozenset(keyed), keyed_helpers, frozenset(params.get(n, ()))))
                for n, fn in originals.items()}
        now = frozenset(n for n, fn in done.items() if any(p.name.value == "key" for p in fn.params.kwonly_params))
        if now == keyed_helpers:
            break
        keyed_helpers = now
    helpers = keyed_helpers
    for s in cls.body.body:
        if isinstance(s, cst.FunctionDef) and s.name.value == "__init__":
            site = _site(frozenset(keyed), helpers, frozenset(params.get("__init__", ())))
            s = _finish_init(s, ctx, fields, site, frozenset(plan.get("sequences", ())))
            if any(p.name.value == "key" for p in s.params.kwonly_params):
                keyed.add(cls.name.value)
        elif isinstance(s, cst.FunctionDef) and s.name.value in plan.get("called", ()):
            _collect_fields(s, ctx, fields, frozenset(plan.get("sequences", ())))
            s = done.get(s.name.value, s)
        elif isinstance(s, cst.FunctionDef) and s.name.value in plan.get("appliers", ()):
            s = _keyed_function(s, ctx, _site(frozenset(keyed), frozenset(), frozenset()))
        elif isinstance(s, cst.FunctionDef) and s.name.value == "__call__" and plan["stateful"]:
            s = rewrite(s, _HoistState(frozenset(plan["stateful"])))
        if isinstance(s, cst.FunctionDef) and (s.name.value == "__call__" and plan.get("dropped")
                                               or s.name.value in plan.get("dropped_methods", ())):
            s = rewrite(s, _Dropped())
        if isinstance(s, cst.FunctionDef) and s.name.value == "__call__" and member:
            s = s.with_changes(params=_kwonly(s.params, "key", cst.Name("None")))  # eqx.nn.Sequential passes key=
        per_example = s.name.value in plan.get("keyed_per_example", ()) if isinstance(s, cst.FunctionDef) else False
        if isinstance(s, cst.FunctionDef) and (s.name.value == "__call__" and plan["key_sites"] > 1
                                               or s.name.value in plan.get("keyed_methods", ()) or per_example):
            t = _CallKeys(ctx.spell_text("jax.random") + ".")
            fb = rewrite(s.body, t)
            optional = s.name.value == "__call__" and not plan.get("key_required") or per_example
            if t.n > 1:  # one key per consumer (a dropout, a drawing method, a draw)
                stmts = list(fb.body)
                at = _docstring_end(stmts)
                stmts.insert(at, _split_line(t.n, ctx, optional=optional))
                s = s.with_changes(body=fb.with_changes(body=stmts))
            s = rewrite(s, _LoopKeys(ctx, optional))
        elif isinstance(s, cst.FunctionDef) and s.name.value == "__call__" and plan["key_sites"] == 1:
            # its one consumer in a loop (DETR's encoder: `for layer in self.layers: layer(..., key=key)`): a key per
            # iteration, as PyTorch's generator moves on
            s = rewrite(s, _LoopKeys(ctx, not plan.get("key_required")))
        body.append(s)
    for name, ann in ctx.analyses.get(configs.HELD, {}).get(cls.name.value, {}).items():
        if name in fields:  # a configuration object, or a scalar read of one: static (configs.py)
            fields[name] = ann
    lines = [statement(f"{name}: {ann}\n") for name, ann in fields.items()]
    if lines:
        at = _docstring_end(body)
        rest = body[at:]
        if rest:  # one blank line between the fields and what follows
            rest[0] = rest[0].with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        body = [*body[:at], *lines, *rest]
    bases = cls.bases
    if member and plan["stateful"]:  # eqx.nn.Sequential threads the state through a StatefulLayer only
        eqx_module = ctx.spell_text("equinox.Module")
        bases = [b.with_changes(value=ctx.spell("equinox.nn.StatefulLayer")) if code(b.value) == eqx_module else b
                 for b in bases]
    return cls.with_changes(bases=bases, body=cls.body.with_changes(body=body))


def _annotation(value: cst.BaseExpression, params: dict[str, cst.Param], ctx, sequences: frozenset[str] = frozenset()) -> str:
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
                                                 or value.func.value in layers.HELPERS
                                                 or written.back(ctx).get(value.func.value) in layers.HELPERS):
            return value.func.value  # a translated module of this file, or a helper layer written into it
        if isinstance(value.func, cst.Name) and value.func.value in ctx.analyses.get(OUTSIDE + ".returns", {}):
            return ctx.analyses[OUTSIDE + ".returns"][value.func.value]  # a builder function's layer
        if f.startswith("self.") and f[5:] in sequences:  # a helper method returning a Sequential
            return ctx.spell_text("equinox.nn.Sequential")
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
        if p.default is not None:  # None tells nothing of what a caller gives (a module, an array)
            kind = _annotation(p.default, {}, ctx)
            return "object" if kind == "None" else kind
    if isinstance(value, cst.BinaryOperation) and all(isinstance(n, cst.Integer) for n in (value.left, value.right)):
        return "int" + static
    return "object"


def _collect_fields(fn: cst.FunctionDef, ctx, fields: dict[str, str], sequences: frozenset[str]) -> None:
    """The fields a method of construction (``__init__``, a method it calls) sets: ``self.NAME = value``."""
    params = {p.name.value: p for p in (*fn.params.params, *fn.params.kwonly_params)}
    nested: list[cst.Assign] = []
    for s in fn.body.body:
        if not isinstance(s, cst.SimpleStatementLine):
            nested += _nested_assigns(s)
            continue
        for small in s.body:
            if isinstance(small, cst.Assign):  # (each target of `self.size = h, w = pair(size)`)
                for target in small.targets:
                    t = dotted_text(target.target)
                    if t and t.startswith("self.") and t.count(".") == 1 and t[5:] not in fields:
                        fields[t[5:]] = _annotation(small.value, params, ctx, sequences)
                        if t == "self." + modes.FIELD and fields[t[5:]].startswith("bool"):
                            fields[t[5:]] = "bool"  # a leaf: eqx.nn.inference_mode sets it (modes.py)
    # set only inside a block (`if not self.flash: self.bias = ...`): perhaps never, so None unless set
    for small in nested:
        t = dotted_text(small.targets[0].target)
        if t and t.startswith("self.") and t.count(".") == 1 and t[5:] not in fields:
            ann = _annotation(small.value, params, ctx, sequences)
            fields[t[5:]] = ann.replace("eqx.field(static=True)", "eqx.field(static=True, default=None)") \
                if "eqx.field(" in ann else f"{ann} = None" if ann == "object" else f"{ann} | None = None"


#: ctx.analyses: ``self.NAME`` of the fields a module class's __init__ may leave None (``self.bias = nn.Parameter(...)
#: if bias else None``, or set only inside a block): the rules guard an optional operand (F.layer_norm's bias)
OPTIONAL = "torch2jax.optional-fields"


def _optional_fields(module: cst.Module, classes: set[str]) -> set[str]:
    """``self.NAME`` for each field an ``__init__`` of the module classes may leave None: assigned None, an
    ``... if ... else None``, or only inside a block."""
    out: set[str] = set()
    for cls, init in configs.class_inits(module, classes):
        top: set[str] = set()
        for st in init.body.body:
            for small in st.body if isinstance(st, cst.SimpleStatementLine) else ():
                if isinstance(small, cst.Assign):
                    top.update(t for x in small.targets for t in [dotted_text(x.target)] if t)
        for a in (a for st in init.body.body for a in _nested_assigns(st)):
            t = dotted_text(a.targets[0].target)
            if not (t and t.startswith("self.") and t.count(".") == 1):
                continue
            v = a.value
            none = lambda e: isinstance(e, cst.Name) and e.value == "None"
            if none(v) or isinstance(v, cst.IfExp) and (none(v.body) or none(v.orelse)) or t not in top:
                out.add(t)
    return out


class _NestedAssigns(cst.CSTVisitor):
    # (a class of the module, not of each call: creating a visitor class costs several times its walk)
    def __init__(self) -> None:
        super().__init__()
        self.out: list[cst.Assign] = []

    def visit_FunctionDef(self, n) -> bool:
        return False

    def visit_ClassDef(self, n) -> bool:
        return False

    def visit_Assign(self, n: cst.Assign) -> None:
        if len(n.targets) == 1:
            self.out.append(n)


def _nested_assigns(node: cst.CSTNode) -> list[cst.Assign]:
    """The single-target assignments inside a compound statement (not in nested functions or classes)."""
    v = _NestedAssigns()
    scan(node, v)
    return v.out


def _lambda_def(stmt: cst.BaseStatement, site) -> cst.BaseStatement:
    """``attn_block = lambda: Attention(...)`` in ``__init__``'s own body, building something that takes a key →
    ``def attn_block(): return Attention(...)``, a local builder (_local_builders) that then takes ``*, key`` and
    gets a split at each call (parallel_vit): a lambda cannot split a key of its own. Other statements as they are."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)
            and len(stmt.body[0].targets) == 1 and isinstance(stmt.body[0].targets[0].target, cst.Name)
            and isinstance(stmt.body[0].value, cst.Lambda)):
        return stmt
    lam = stmt.body[0].value
    if not _holds_site(lam.body, site):
        return stmt
    return cst.FunctionDef(
        name=stmt.body[0].targets[0].target, params=lam.params, leading_lines=stmt.leading_lines,
        body=cst.IndentedBlock([cst.SimpleStatementLine([cst.Return(lam.body.with_changes(lpar=[], rpar=[]))])]))


def _finish_init(fn: cst.FunctionDef, ctx, fields: dict[str, str], site, sequences: frozenset[str]) -> cst.FunctionDef:
    stmts = [_lambda_def(s, site) for s in fn.body.body if not _is_super_init(s)]
    fn = fn.with_changes(body=fn.body.with_changes(body=stmts))
    local = _local_builders(fn)
    if local:  # a builder function defined in __init__ takes a key as a helper method does, each call a split
        site = _local_site(site, local, stmts, ctx)
        stmts = [_keyed_function(s, ctx, site) if isinstance(s, cst.FunctionDef) and s.name.value in site.keyed else s
                 for s in stmts]
    _collect_fields(fn.with_changes(body=fn.body.with_changes(body=stmts)), ctx, fields, sequences)
    block, n = _thread_keys(fn, fn.body.with_changes(body=stmts), ctx, site)
    if n == 0:  # nothing draws initial values: no key parameter
        kw = [p for p in fn.params.kwonly_params if p.name.value != "key"]
        star = fn.params.star_arg if kw or isinstance(fn.params.star_arg, cst.Param) else cst.MaybeSentinel.DEFAULT
        return fn.with_changes(params=fn.params.with_changes(kwonly_params=kw, star_arg=star), body=block)
    return fn.with_changes(body=block)
