"""Per-example ranks across the module classes of one file, for batch.py: an Equinox Linear or LayerNorm takes one
vector, so a module whose forward gives one a (tokens, features) example must map it over the tokens, and what a
forward receives is known only from its callers (vit-pytorch: ViT's patch embedding makes (n, dim) tokens, which
its Transformer hands to each Attention and FeedForward).

:func:`analyse` runs batch.Forward over every forward of the file without keeping its output or findings (a probe),
with the ranks known so far, and collects what each module class is called with (positional arguments) and what
it returns, until nothing changes. The result, one :class:`ClassRanks` per class, is what the real rewrite starts
from: the ranks of the forward's parameters, which attributes and loop names hold this file's modules, and the
``nn.Sequential`` attributes, followed layer by layer (an einops ``Rearrange`` layer makes the rank its pattern
gives; per-vector layers given more than one axis are wrapped as ``PerVector(layer)``, a helper written into the
output, see layers.py).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import libcst as cst

from fwport.core.engine import literal_value
from fwport.core.names import dotted_text, find_all, method_of, scan
from fwport.packs.torch2jax.layers import STACKS

#: layers that take one vector in Equinox and map over every leading axis in PyTorch
PER_VECTOR = frozenset({"torch.nn.Linear", "torch.nn.LayerNorm"})
REARRANGE = "einops.layers.torch.Rearrange"
#: einops layers whose output rank their pattern gives (Reduce's reduction comes second)
PATTERNED = frozenset({REARRANGE, "einops.layers.torch.Reduce"})
HELPER = "PerVector"
#: analyses key: the ids of the source calls of the layers wrapped as PerVector (modules.py; batch.py warns of no other)
WRAPPED = "torch2jax.ranks.per-vector"
#: ctx.analyses: (class, __init__ parameter) → what the file's calls of the class give it (given_classes)
GIVEN = "torch2jax.given-classes"


@dataclass
class Sequence:
    """An ``nn.Sequential`` attribute: its layers (qualified class, the source call), and the class of the other
    branch where it is written ``nn.Sequential(...) if c else nn.Identity()``."""
    layers: list[tuple[str | None, cst.Call]]
    other: str | None = None


@dataclass
class ClassRanks:
    """What batch.Forward knows of one module class from the rest of the file (see the module docstring)."""
    table: dict  # class name → ClassRanks, the file's
    params: dict[str, int] = field(default_factory=dict)  # forward parameter → its per-example rank
    instances: dict[str, str] = field(default_factory=dict)  # `self.block` → the file's class it holds
    containers: dict[str, tuple[str, ...]] = field(default_factory=dict)  # ModuleList attribute → its elements' classes
    sequences: dict[str, Sequence] = field(default_factory=dict)
    out: int | None = None  # the rank forward returns
    called: bool = False  # another module of the file calls this one (its input ranks come from there)
    blind: bool = False  # ... with a value of unknown rank that is not the user's input handed through
    sequence_inputs: dict[str, list] = field(default_factory=dict)  # Sequential attribute → ranks it is called with
    axes: dict[str, object] = field(default_factory=dict)  # forward parameter → its batch position, where not first
    out_axes: object = None  # the batch position(s) of what forward returns (batch.axis_text), where they agree
    seq_first: dict[str, bool] = field(default_factory=dict)  # sequence-layer attribute → takes (L, N, ...)
    seq_classes: dict[str, str] = field(default_factory=dict)  # ... → its PyTorch class
    activations: set = field(default_factory=set)  # attributes holding an elementwise function (_get_activation_fn)
    buffers: dict = field(default_factory=dict)  # buffer → (its size-1 axes, its rank) where __init__ builds it literally
    # attributes __init__ binds only to Python numbers of its parameters (`self.scale = dim_head ** -0.5`)
    numbers: set = field(default_factory=set)
    # parameters __init__ builds as nn.Parameter(torch.randn(a, b, c)) (zeros, ones, rand, empty): their rank
    parameters: dict = field(default_factory=dict)

    def returns(self, cls: str) -> int | None:
        other = self.table.get(cls)
        return other.out if other is not None else None

    def sequence_out(self, attr: str, rank: int | None) -> int | None:
        return through(self.sequences[attr], rank)[0]

    def wraps(self) -> list[tuple[cst.Call, bool]]:
        """The source calls of per-vector layers inside Sequentials that get more than one axis, and, in a module
        another module of the file feeds a value of unknown rank (``blind``), those whose input rank is not known:
        PerVector maps the layer over however many leading axes it gets (none for a vector), exact at any rank, as
        a plain Linear's jnp.vectorize is (batch.Forward.any_rank). Each with whether its rank is unknown."""
        out = []
        for attr, seq in self.sequences.items():
            blind: list | None = [] if self.blind else None
            out += [(c, False) for c in through(seq, _agreed([r[0] if r else None
                                                              for r in self.sequence_inputs.get(attr, [])]), blind)[1]]
            out += [(c, True) for c in blind or ()]
        return out


def method_key(cls: str, method: str) -> str:
    """The table entry of a method forward calls (``Class.method``), beside the classes' own."""
    return f"{cls}.{method}"


def function_key(name: str) -> str:
    """The table entry of a function of the file that forwards call with batched tensors (``name()``)."""
    return f"{name}()"


def is_function_key(key: str) -> bool:
    return key.endswith("()")


def function_params(fn: cst.FunctionDef) -> list[str]:
    """A function's inputs, as :func:`forward_params` gives a forward's (no ``self`` to leave out)."""
    return [p.name.value for p in (*fn.params.params, *fn.params.kwonly_params)]


def per_example_functions(module: cst.Module, ctx, bodies: list[cst.FunctionDef],
                          functions: dict[str, cst.FunctionDef]) -> list[str]:
    """The functions of the file whose dimensions are written for the batch (modules._function_dims) that are read
    nowhere but as the callee of calls in ``bodies`` (the forwards and the methods they call, which see one example)
    and in one another: nlp-tutorial's ``get_attn_pad_mask(seq_q, seq_k)``. Each is written for one example as a
    forward is (batch.Forward, modules.per_example_function), called as a module is. One with ``*args``, a
    decorator, a nested function or class, or a read elsewhere (a call outside the modules gives it the batch) is
    not: a call of it stays refused."""
    from fwport.packs.torch2jax.batch import FUNCTION_DIMS
    from fwport.packs.torch2jax.passes.modules import _name_reads
    dims = ctx.analyses.get(FUNCTION_DIMS, {})
    if not dims or not bodies:
        return []
    called = {n for b in bodies for c in find_all(b, cst.Call) if isinstance(c.func, cst.Name)
              for n in [c.func.value] if n in dims and n in functions}
    if not called:
        return []
    candidates = set()
    for n in called:
        fn = functions[n]
        p = fn.params
        if fn.decorators or isinstance(p.star_arg, cst.Param) or p.star_kwarg is not None or p.posonly_params \
                or find_all(fn.body, cst.FunctionDef) or find_all(fn.body, cst.ClassDef) \
                or find_all(fn.body, cst.Lambda) or find_all(fn.body, cst.Yield):
            continue
        candidates.add(n)
    reads = _name_reads(module)
    changed = True
    while changed:  # every read of each: a call in a forward, or in another candidate
        changed = False
        scope = [*bodies, *(functions[n] for n in candidates)]
        for n in sorted(candidates):
            inside = sum(1 for b in scope for c in find_all(b, cst.Call)
                         if isinstance(c.func, cst.Name) and c.func.value == n)
            if reads[n] != 1 + inside:
                candidates.discard(n)
                changed = True
    return sorted(candidates)


def _agreed_axes(values: list):
    """The batch position(s) every return of a forward agrees on (None: not batched, or they differ)."""
    return values[0] if values and all(v == values[0] for v in values) else None


def forward_params(fn: cst.FunctionDef) -> list[str]:
    """A forward's inputs: its parameters after self, the keyword-only ones last (``forward(self, x, *, mask)``: a
    caller gives ``mask=m`` by name, which :func:`_param_axes` reads; positions index the positional ones alone)."""
    return [p.name.value for p in (*fn.params.params[1:], *fn.params.kwonly_params)]


def _param_axes(params: list[str], calls: list, optimistic: bool = False) -> dict[str, object]:
    """A module class's parameters → the batch position its callers agree on for each, where not first (a parameter
    given a batched value at different positions: batch.UNKNOWN). ``optimistic`` (while ranks.analyse iterates): a
    value whose position is not known yet says nothing, so that a cycle (a method's result fed back into it, DETR's
    with_pos_embed) settles where the known values agree; the settled table is checked without it."""
    from fwport.packs.torch2jax.batch import NOT_BATCHED, UNKNOWN, combine
    out = {}
    for i, p in enumerate(params):
        got = [c[0][i] if i < len(c[0]) else c[1].get(p, "absent") for c in calls]
        if all(g == "absent" or g is None for g in got):
            out[p] = NOT_BATCHED  # no caller gives it a value (a mask left None), or none computed from the input
            continue
        known = [g for g in got if g != "absent" and not (optimistic and g == UNKNOWN and not isinstance(g, tuple))]
        a = combine(known) if known or not optimistic else UNKNOWN
        if a is not None and (a != 0 or isinstance(a, tuple)):
            out[p] = UNKNOWN if isinstance(a, tuple) else a
    return out


def _agreed(values: list) -> int | None:
    return values[0] if values and values[0] is not None and all(v == values[0] for v in values) else None


def per_vector(q: str | None, call: cst.Call) -> bool:
    """A Linear, or a LayerNorm over the last axis alone (its normalized_shape an integer, or one of them)."""
    if q not in PER_VECTOR:
        return False
    if q == "torch.nn.LayerNorm" and call.args:
        v = literal_value(call.args[0].value, None)
        return not isinstance(v, (tuple, list)) or len(v) == 1
    return True


def through(seq: Sequence, rank: int | None, blind: list | None = None) -> tuple[int | None, list[cst.Call]]:
    """The rank a Sequential gives for one of ``rank``, and its per-vector layers that get more than one axis
    (``blind`` collects those whose input rank is not known)."""
    from fwport.packs.torch2jax.batch import FIXED_RANK, SAME_RANK, ellipsis_rank, pattern_rank, per_example_einops, \
        per_example_pattern
    wraps = []
    for q, call in seq.layers:
        if q in PATTERNED:
            pattern = literal_value(call.args[0].value, None) if call.args and call.args[0].keyword is None else None
            one = per_example_pattern(pattern) if isinstance(pattern, str) else None
            moving = per_example_einops(pattern, 0) if isinstance(pattern, str) and one is None else None
            one = one or (moving if isinstance(moving, tuple) else None)  # (ops.py writes it where batch.py follows it)
            rank = pattern_rank(one[1]) if one else ellipsis_rank(pattern, rank) if isinstance(pattern, str) else None
        elif per_vector(q, call):
            if rank is not None and rank > 1:
                wraps.append(call)
            elif rank is None and blind is not None:
                blind.append(call)
        elif q == "torch.nn.Flatten" and not call.args:
            rank = 1
        elif q in FIXED_RANK:
            rank = FIXED_RANK[q]
        elif q not in SAME_RANK:
            rank = None
    if seq.other is not None and seq.other not in SAME_RANK:
        rank = None
    return rank, wraps


def _sequence(value: cst.BaseExpression, ctx, local: dict | None = None) -> Sequence | None:
    """``nn.Sequential(<layer calls>)`` (or one branch of ``... if c else nn.Identity()``) → its Sequence. ``local``:
    the values __init__ assigned to its plain names so far: a layer given by a name bound once to a layer call
    (FiLM's ``proj = nn.Linear(dim, 2 * dim)``, then ``nn.Sequential(proj, Rearrange(...))``) is that call."""
    other = None
    if isinstance(value, cst.IfExp):
        for seq, alt in ((value.body, value.orelse), (value.orelse, value.body)):
            if isinstance(seq, cst.Call) and ctx.imports.resolve(seq.func) == "torch.nn.Sequential" \
                    and isinstance(alt, cst.Call):
                value, other = seq, ctx.imports.resolve(alt.func) or "?"
                break
        else:
            return None
    if not isinstance(value, cst.Call) or ctx.imports.resolve(value.func) != "torch.nn.Sequential":
        return None
    layers = []
    for a in value.args:
        v = a.value
        if isinstance(v, cst.Name) and local is not None and len(local.get(v.value, ())) == 1:
            v = local[v.value][0]
        if a.star or a.keyword or not isinstance(v, cst.Call):
            return None
        layers.append((ctx.imports.resolve(v.func), v))
    return Sequence(layers, other)


def _elements(value: cst.BaseExpression, ctx, classes: set[str]) -> tuple[str, ...] | None:
    """What one element of a ModuleList is: ``Block(...)`` → (Block,); ``nn.ModuleList([A(...), B(...)])`` or
    ``[A(...), B(...)]`` → (A, B)."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in classes:
        return (value.func.value,)
    if isinstance(value, cst.Call) and ctx.imports.resolve(value.func) == "torch.nn.ModuleList" and len(value.args) == 1:
        value = value.args[0].value
    if isinstance(value, (cst.List, cst.Tuple)) and value.elements:
        parts = [_elements(e.value, ctx, classes) for e in value.elements]
        if all(p is not None and len(p) == 1 for p in parts):
            return tuple(p[0] for p in parts)
    return None


class _Bound(cst.CSTVisitor):
    """Each name function ``fn`` assigns (nested functions not entered) → the values assigned (None: unpacked)."""

    def __init__(self, fn: cst.FunctionDef):
        super().__init__()
        self.fn = fn
        self.bound: dict[str, list] = {}

    def visit_Assign(self, n: cst.Assign) -> None:
        for t in n.targets:
            if isinstance(t.target, cst.Name):
                self.bound.setdefault(t.target.value, []).append(n.value)
            else:
                for name in target_names(t.target):
                    self.bound.setdefault(name, []).append(None)

    def visit_FunctionDef(self, n) -> bool:
        return n is self.fn


class _Calling(cst.CSTVisitor):
    """given_classes: the functions (by id) that call one of the classes ``inits`` as ``Name(...)`` themselves, not in
    a function nested in them (what _GivenCalls looks at)."""

    def __init__(self, inits: dict):
        super().__init__()
        self.inits = inits
        self.stack: list[cst.FunctionDef] = []
        self.found: set[int] = set()

    def visit_FunctionDef(self, n: cst.FunctionDef) -> None:
        self.stack.append(n)

    def leave_FunctionDef(self, n: cst.FunctionDef) -> None:
        self.stack.pop()

    def visit_Call(self, c: cst.Call) -> None:
        if self.stack and isinstance(c.func, cst.Name) and c.func.value in self.inits:
            self.found.add(id(self.stack[-1]))


class _GivenCalls(cst.CSTVisitor):
    """given_classes: the calls of the file's classes in function ``fn``, what each gives each ``__init__`` parameter."""

    def __init__(self, fn: cst.FunctionDef, inits: dict, kinds, out: dict, bind):
        super().__init__()
        self.fn, self.inits, self.kinds, self.out, self.bind = fn, inits, kinds, out, bind

    def visit_Call(self, c: cst.Call) -> None:
        inits = self.inits
        if isinstance(c.func, cst.Name) and c.func.value in inits:
            b = self.bind(c, inits[c.func.value], method=True)
            for p in inits[c.func.value].params.params[1:]:
                value = None if b is None else b.get(p.name.value)
                self.out.setdefault((c.func.value, p.name.value), set()).update(
                    self.kinds(value) if value is not None else {"?"})

    def visit_FunctionDef(self, n) -> bool:
        return n is self.fn


def given_classes(module: cst.Module, ctx, classes: set[str]) -> dict[tuple[str, str], frozenset]:
    """(class, ``__init__`` parameter) → what every call of the class in the file gives it: this file's module
    classes by name, PyTorch layers by qualified name, "None", or "?" for a value not followed. A value is a call, or a
    name bound in the calling function only to calls (``encoder_layer = TransformerEncoderLayer(...)``, DETR), or
    either branch of a conditional (``nn.LayerNorm(d) if pre_norm else None``)."""
    from fwport.packs.torch2jax.passes.modules import _bind
    # (an __init__ taking no positional parameter but self is given nothing: its calls need no walk)
    inits = {s.name.value: m for s in module.body if isinstance(s, cst.ClassDef) and s.name.value in classes
             for m in s.body.body if isinstance(m, cst.FunctionDef) and m.name.value == "__init__"
             and len(m.params.params) > 1}
    out: dict[tuple[str, str], set] = {}

    def kinds(value, bound: dict) -> set:
        found = set()
        for v in _branches(value):
            if isinstance(v, cst.Name) and v.value == "None":
                found.add("None")
            elif isinstance(v, cst.Name) and v.value in bound:
                found |= set().union(*(kinds(b, {}) for b in bound[v.value])) if bound[v.value] else {"?"}
            elif isinstance(v, cst.Call) and isinstance(v.func, cst.Name) and v.func.value in classes:
                found.add(v.func.value)
            elif isinstance(v, cst.Call) and (ctx.imports.resolve(v.func) or "").startswith("torch.nn."):
                found.add(ctx.imports.resolve(v.func))
            else:
                found.add("?")
        return found

    if not inits:
        return {}
    calling = _Calling(inits)  # (the functions that call none of the classes give nothing: not walked twice each)
    scan(module, calling)
    for fn in find_all(module, cst.FunctionDef):
        if id(fn) not in calling.found:
            continue
        names = _Bound(fn)
        scan(fn, names)
        bound = {k: [] if None in v else v for k, v in names.bound.items()}
        scan(fn, _GivenCalls(fn, inits, functools.partial(kinds, bound=bound), out, _bind))
    return {k: frozenset(v) for k, v in out.items()}


def target_names(t) -> list[str]:
    """The names an assignment target binds (``a``, ``a, (b, c)``); none for ``self.x`` or ``d[k]``."""
    if isinstance(t, cst.Name):
        return [t.value]
    if isinstance(t, (cst.Tuple, cst.List)):
        return [n for e in t.elements for n in target_names(e.value)]
    return []


def _clones(value: cst.BaseExpression, ctx, functions: dict) -> str | None:
    """``_get_clones(layer, N)``, a module-level function returning ``nn.ModuleList([copy.deepcopy(module) for i in
    range(N)])`` (DETR): the ``__init__`` parameter it copies (``layer``), else None."""
    from fwport.packs.torch2jax.passes.modules import _bind, _returns
    if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Name) or value.func.value not in functions:
        return None
    fn = functions[value.func.value]
    rets = _returns(fn)
    if len(rets) != 1 or not isinstance(rets[0], cst.Call) or ctx.imports.resolve(rets[0].func) != "torch.nn.ModuleList" \
            or len(rets[0].args) != 1 or not isinstance(rets[0].args[0].value, cst.ListComp):
        return None
    elt = rets[0].args[0].value.elt
    if not (isinstance(elt, cst.Call) and dotted_text(elt.func) in ("copy.deepcopy", "deepcopy") and len(elt.args) == 1
            and isinstance(elt.args[0].value, cst.Name)):
        return None
    b = _bind(value, fn, method=False)
    arg = b.get(elt.args[0].value.value) if b is not None else None
    return arg.value if isinstance(arg, cst.Name) else None


def _activation(value: cst.BaseExpression, ctx, functions: dict) -> bool:
    """``_get_activation_fn(name)`` (DETR): a module-level function each of whose returns is an elementwise torch
    function used as a value (``return F.relu``): the attribute it sets keeps the rank and the batch axis of what it
    is given."""
    from fwport.packs.torch2jax.batch import ELEMENTWISE
    from fwport.packs.torch2jax.passes.modules import _returns
    if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Name) or value.func.value not in functions:
        return False
    rets = _returns(functions[value.func.value])
    return bool(rets) and all((ctx.imports.resolve(r) or "").startswith("torch.")
                              and (ctx.imports.resolve(r) or "").rsplit(".", 1)[-1] in ELEMENTWISE for r in rets)


def given_submodules(init: cst.FunctionDef | None, cls: str, given: dict) -> dict[str, str]:
    """``self.norm = norm`` in ``__init__``, every caller giving ``norm`` one PyTorch layer class or None (DETR's
    ``nn.LayerNorm(d) if pre_norm else None``): attribute → that class, as if built there."""
    out = {}
    params = {p.name.value for p in init.params.params[1:]} if init is not None else set()
    for stmt in init.body.body if init is not None else []:
        for a in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else []:
            if isinstance(a, cst.Assign) and len(a.targets) == 1 and isinstance(a.value, cst.Name) \
                    and a.value.value in params:
                t = dotted_text(a.targets[0].target) or ""
                k = given_layer(given, cls, a.value.value)
                if t.startswith("self.") and t.count(".") == 1 and k is not None and k.startswith("torch.nn."):
                    out[t[5:]] = k
    return out


def given_layer(given: dict, cls: str, param: str) -> str | None:
    """The one class (this file's, or a PyTorch layer's qualified name) every caller gives ``param``, None left aside."""
    kinds = given.get((cls, param), frozenset()) - {"None"}
    return next(iter(kinds)) if len(kinds) == 1 and "?" not in kinds else None


def cls_init_params(cls: cst.ClassDef) -> list[cst.Param]:
    init = method_of(cls, "__init__")
    return [] if init is None else [*init.params.posonly_params, *init.params.params, *init.params.kwonly_params]


def _number(v: cst.BaseExpression, params: set[str]) -> bool:
    """A Python number computed from ``__init__``'s parameters (sizes) and literals by arithmetic (``dim_head ** -0.5``,
    ``1 / math.sqrt(dim)``), with at least one literal or math function in it (a parameter alone may be a tensor)."""
    def walk(n) -> tuple[bool, bool]:  # (a number, a literal or math call seen)
        if isinstance(n, (cst.Integer, cst.Float)):
            return True, True
        if isinstance(n, cst.Name):
            return n.value in params, False
        if isinstance(n, cst.UnaryOperation):
            return walk(n.expression)
        if isinstance(n, cst.BinaryOperation) and not isinstance(n.operator, cst.MatrixMultiply):
            (a, x), (b, y) = walk(n.left), walk(n.right)
            return a and b, x or y
        if isinstance(n, cst.Call) and (dotted_text(n.func) or "").startswith("math.") \
                and all(a.keyword is None and not a.star and walk(a.value)[0] for a in n.args):
            return True, True
        return False, False
    ok, seen = walk(v)
    return ok and seen


def _parameter_rank(v: cst.BaseExpression, ctx) -> int | None:
    """``nn.Parameter(torch.randn(a, b, c))`` (zeros, ones, rand, empty; sizes one per argument, or one tuple): 3."""
    if not (isinstance(v, cst.Call) and ctx.imports.resolve(v.func) == "torch.nn.Parameter" and v.args
            and v.args[0].keyword is None and isinstance(v.args[0].value, cst.Call)):
        return None
    inner = v.args[0].value
    if ctx.imports.resolve(inner.func) not in ("torch.randn", "torch.zeros", "torch.ones", "torch.rand", "torch.empty"):
        return None
    sizes = [a for a in inner.args if a.keyword is None]
    if any(a.star for a in sizes) or not sizes:
        return None
    if len(sizes) == 1 and isinstance(sizes[0].value, (cst.Tuple, cst.List)):
        return None if any(isinstance(e, cst.StarredElement) for e in sizes[0].value.elements) \
            else len(sizes[0].value.elements)
    return len(sizes)


class _InitAttributes(cst.CSTVisitor):
    """_class_info: what ``__init__`` of class ``cls`` assigns to its attributes (instances of the file's classes,
    containers of them, activations, sequences) and appends to them."""

    def __init__(self, cls, ctx, classes, given, functions, info, added, sequences: _SequenceLayers | None = None):
        super().__init__()
        self.sequences = sequences  # sequence_layers' visitor, told of each assignment in the same walk
        self.cls = cls
        self.ctx = ctx
        self.classes = classes
        self.given = given
        self.functions = functions
        self.info = info
        self.added = added
        self.assigned: dict[str, list] = {}  # attribute → the values __init__ assigns it
        self.params = {p.name.value for p in cls_init_params(cls)}
        self.local: dict[str, list] = {}  # plain name → the values assigned to it so far (None: unpacked, augmented)

    def visit_Assign(self, node: cst.Assign) -> None:
        if self.sequences is not None:
            self.sequences.visit_Assign(node)
        for target in node.targets:
            for name in target_names(target.target):
                self.local.setdefault(name, []).append(
                    node.value if isinstance(target.target, cst.Name) else None)
        t = dotted_text(node.targets[0].target) if len(node.targets) == 1 else None
        if not t or not t.startswith("self.") or t.count(".") != 1:
            return
        v = node.value
        self.assigned.setdefault(t[5:], []).append(v)
        if isinstance(v, cst.Call) and isinstance(v.func, cst.Name) and v.func.value in self.classes:
            self.info.instances[t] = v.func.value
        elif _clones(v, self.ctx, self.functions or {}) is not None:  # _get_clones(encoder_layer, N): its callers' class
            k = given_layer(self.given or {}, self.cls.name.value, _clones(v, self.ctx, self.functions or {}))
            self.added.setdefault(t[5:], set()).add((k,) if k in self.classes else None)
        elif isinstance(v, cst.Call) and self.ctx.imports.resolve(v.func) == "torch.nn.ModuleList" and len(v.args) == 1:
            items = v.args[0].value
            kinds = self.added.setdefault(t[5:], set())
            if isinstance(items, cst.ListComp):
                kinds.add(_elements(items.elt, self.ctx, self.classes))
            elif isinstance(items, (cst.List, cst.Tuple)):
                kinds.update(_elements(e.value, self.ctx, self.classes) for e in items.elements)
            else:
                kinds.add(None)
        if _activation(v, self.ctx, self.functions or {}):
            self.info.activations.add(t[5:])
        seq = _sequence(v, self.ctx, self.local)
        if seq is not None:
            self.info.sequences[t[5:]] = seq
        if isinstance(v, cst.Call) and self.ctx.imports.resolve(v.func) == "torch.nn.ModuleDict" and v.args \
                and isinstance(v.args[0].value, cst.Call) and dotted_text(v.args[0].value.func) == "dict":
            for a in v.args[0].value.args:  # nn.ModuleDict(dict(h=nn.ModuleList([Block(...) ...]))): self.d["h"]
                e = a.value
                if a.keyword is not None and isinstance(e, cst.Call) and self.ctx.imports.resolve(e.func) == "torch.nn.ModuleList" \
                        and len(e.args) == 1 and isinstance(e.args[0].value, cst.ListComp):
                    self.added.setdefault(f'{t[5:]}["{a.keyword.value}"]', set()).add(
                        _elements(e.args[0].value.elt, self.ctx, self.classes))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        t = dotted_text(node.target) or ""
        if t.startswith("self."):
            self.assigned.setdefault(t[5:], []).append(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        t = dotted_text(node.func) or ""
        if t.startswith("self.") and t.endswith(".append") and t.count(".") == 2 and len(node.args) == 1:
            self.added.setdefault(t[5:-7], set()).add(_elements(node.args[0].value, self.ctx, self.classes))


def _class_info(cls: cst.ClassDef, ctx, classes: set[str], table: dict, given: dict | None = None,
                functions: dict | None = None) -> ClassRanks:
    info = ClassRanks(table)
    init = method_of(cls, "__init__")
    if init is None:
        return info
    added: dict[str, set] = {}
    from fwport.packs.torch2jax.batch import SEQUENCE_LAYERS
    seq_classes: dict[str, set] = {}
    seq_first: dict[str, set] = {}
    # one walk of __init__: sequence_layers' visitor rides along (its only hook is on assignments, met in the same order)
    attrs = _InitAttributes(cls, ctx, classes, given, functions, info, added,
                            _SequenceLayers(ctx, seq_classes, seq_first, SEQUENCE_LAYERS))
    scan(init, attrs)
    info.numbers = {a for a, vs in attrs.assigned.items() if all(_number(v, attrs.params) for v in vs)}
    for a, vs in attrs.assigned.items():
        r = {_parameter_rank(v, ctx) for v in vs}
        if len(r) == 1 and None not in r:
            info.parameters[a] = r.pop()
    info.containers = {a: next(iter(k)) for a, k in added.items() if len(k) == 1 and None not in k}
    info.seq_classes, info.seq_first = _sequence_layout(seq_classes, seq_first)
    from fwport.packs.torch2jax.batch import buffer_shapes
    info.buffers = buffer_shapes(init, ctx)
    return info


class _SequenceLayers(cst.CSTVisitor):
    """sequence_layers: each ``self.<attribute>`` assignment's classes, and the layout of its sequence layers."""

    def __init__(self, ctx, classes, first, sequence_layers: frozenset):
        super().__init__()
        self.ctx = ctx
        self.classes = classes
        self.first = first
        self.sequence_layers = sequence_layers
        self.locals: dict[str, cst.BaseExpression] = {}  # name = <value> in __init__ (a transformer stack's layer)

    def built_layer(self, stack: cst.Call) -> cst.Call | None:
        """The layer call a TransformerEncoder / Decoder gets first: written there, or a name assigned it before."""
        first = stack.args[0].value if stack.args and stack.args[0].keyword is None else next(
            (a.value for a in stack.args if a.keyword is not None and a.keyword.value.endswith("_layer")), None)
        if isinstance(first, cst.Name):
            first = self.locals.get(first.value)
        return first if isinstance(first, cst.Call) else None

    def visit_Assign(self, node: cst.Assign) -> None:
        t = dotted_text(node.targets[0].target) if len(node.targets) == 1 else None
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            self.locals[node.targets[0].target.value] = node.value
        if not t or not t.startswith("self.") or t.count(".") != 1:
            return
        for v in _branches(node.value):  # `nn.LSTM(...) if kind == 'LSTM' else nn.GRU(...)`: each
            q = self.ctx.imports.resolve(v.func) if isinstance(v, cst.Call) else None
            if isinstance(v, cst.Call) and isinstance(v.func, cst.Call) and dotted_text(v.func.func) == "getattr":
                continue
            self.classes.setdefault(t[5:], set()).add(q)
            if q in self.sequence_layers:
                built = self.built_layer(v) if q in STACKS else v  # a stack takes its layer's batch_first
                bf = next((a.value for a in built.args if a.keyword is not None and a.keyword.value == "batch_first"),
                          None) if built is not None else None
                self.first.setdefault(t[5:], set()).add(bf is None or literal_value(bf, None) is not True)


def sequence_layers(init: cst.FunctionDef, ctx) -> tuple[dict[str, str], dict[str, bool]]:
    """``self.rnn = nn.LSTM(...)`` anywhere in ``__init__`` (a branch too: ``if rnn_type == ...:``): attribute → its
    class, and → whether it takes (L, N, ...) (batch_first not written True). An attribute also assigned something
    else is left out; a ``getattr(nn, name)(...)`` beside it is PyTorch left as written (a residue error), not counted."""
    from fwport.packs.torch2jax.batch import SEQUENCE_LAYERS
    classes: dict[str, set] = {}
    first: dict[str, set] = {}
    scan(init, _SequenceLayers(ctx, classes, first, SEQUENCE_LAYERS))
    return _sequence_layout(classes, first)


def _sequence_layout(classes: dict[str, set], first: dict[str, set]) -> tuple[dict[str, str], dict[str, bool]]:
    """sequence_layers' answer from what its visitor (_SequenceLayers) collected."""
    from fwport.packs.torch2jax.batch import SEQUENCE_LAYERS
    out = {a: sorted(qs)[0] for a, qs in classes.items() if qs and qs <= SEQUENCE_LAYERS}
    return out, {a: next(iter(first[a])) for a in out if len(first[a]) == 1}


def _branches(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The values an expression may be: both branches of a conditional, each one's own."""
    if isinstance(value, cst.IfExp):
        return _branches(value.body) + _branches(value.orelse)
    return [value]


class _Probe:
    """The file's context for a run whose output is not kept: no findings, no imports recorded."""

    def __init__(self, ctx):
        self._ctx = ctx
        self.pending: list = []

    def report(self, *args, **kwargs) -> None:
        pass

    def settle(self, *args, **kwargs) -> None:
        pass

    def spell(self, target: str):
        kept = set(self._ctx.needed_imports)
        try:
            return self._ctx.spell(target)
        finally:
            self._ctx.needed_imports.clear()
            self._ctx.needed_imports.update(kept)

    def spell_text(self, target: str) -> str:
        kept = set(self._ctx.needed_imports)
        try:
            return self._ctx.spell_text(target)
        finally:
            self._ctx.needed_imports.clear()
            self._ctx.needed_imports.update(kept)

    def __getattr__(self, name):
        return getattr(self._ctx, name)


def _built_inside(module: cst.Module, classes: set[str]) -> set[str]:
    """The module classes of the file that another class of the file calls by name (builds) somewhere in its body."""
    out = set()
    for s in module.body:
        if isinstance(s, cst.ClassDef) and s.name.value in classes:
            out |= {c.func.value for c in find_all(s, cst.Call)
                    if isinstance(c.func, cst.Name) and c.func.value in classes and c.func.value != s.name.value}
    return out


def analyse(module: cst.Module, ctx, classes: set[str], skip: set[str] = frozenset(),
            refused: frozenset[str] = frozenset()) -> dict[str, ClassRanks]:
    """One ClassRanks per module class of the file (``skip``: classes whose forward keeps every axis), and one per
    function of the file written for one example (per_example_functions; ``refused``: those that cannot be, which
    are analysed again without)."""
    from fwport.core.rewrite import rewrite
    from fwport.packs.torch2jax.batch import NOT_BATCHED, Forward
    from fwport.packs.torch2jax.passes.modules import _dict_entries, _reached, _submodules
    table: dict[str, ClassRanks] = {}
    forwards = {}
    given = ctx.analyses[GIVEN] = given_classes(module, ctx, classes)
    functions = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
    for s in module.body:
        if isinstance(s, cst.ClassDef) and s.name.value in classes:
            table[s.name.value] = _class_info(s, ctx, classes, table, given, functions)
            methods = {m.name.value: m for m in s.body.body if isinstance(m, cst.FunctionDef)}
            if "forward" in methods and s.name.value not in skip:
                subs = {**given_submodules(methods.get("__init__"), s.name.value, given),
                        **_submodules(methods.get("__init__"), ctx), **_dict_entries(methods.get("__init__"), ctx)}
                forwards[s.name.value] = (methods["forward"], subs)
                for m in sorted(_reached(methods, "forward") - {"forward", "__init__"}):
                    # a method forward calls (DETR's forward_post, with_pos_embed) sees one example too: probed as a
                    # forward of its own, given what its calls in the class pass (`self.m(...)`: an instance of it)
                    own = method_key(s.name.value, m)
                    info = table[s.name.value]
                    table[own] = ClassRanks(table, instances=info.instances, containers=info.containers,
                                            sequences=info.sequences, seq_first=info.seq_first,
                                            seq_classes=info.seq_classes, activations=info.activations,
                                            buffers=info.buffers)
                    info.instances[f"self.{m}"] = own
                    forwards[own] = (methods[m], subs)
    traced = [n for n in per_example_functions(module, ctx, [f for f, _ in forwards.values()], functions)
              if n not in refused]
    if traced:  # functions of the file forward calls with batched tensors: probed as forwards, called as modules
        names = {n: function_key(n) for n in traced}
        for info in list(table.values()):
            info.instances.update(names)
        for n in traced:
            table[names[n]] = ClassRanks(table, instances=dict(names))
            forwards[names[n]] = (functions[n], {})
    if not any(t.instances or t.containers or t.sequences or any(t.seq_first.values()) for t in table.values()):
        return table
    probe = _Probe(ctx)
    built = _built_inside(module, classes)
    for _ in range(min(2 * len(forwards), 24) + 2):  # (a value reaches a forward through a chain of calls and returns)
        seen: dict[str, list] = {}
        seen_axes: dict[str, list] = {}
        second: dict[str, set] = {}
        shared: dict[str, set] = {}
        blind: dict[str, list] = {}
        changed = False
        for name, (fwd, subs) in forwards.items():
            params = forward_params(fwd) if not is_function_key(name) else function_params(fwd)
            f = Forward(probe, set(params), set(), subs, ranks=table[name])
            rewrite(fwd.body, f)
            for k, v in f.seen_calls.items():
                seen.setdefault(k, []).extend(v)
            for k, v in f.seen_blind.items():
                blind.setdefault(k, []).extend(v)
            for k, v in f.seen_axes.items():
                seen_axes.setdefault(k, []).extend(v)
            out = _agreed(f.returns)
            out_axes = _agreed_axes(f.return_axes)
            changed |= out != table[name].out or f.seen_sequences != table[name].sequence_inputs \
                or out_axes != table[name].out_axes
            table[name].out, table[name].sequence_inputs, table[name].out_axes = out, f.seen_sequences, out_axes
            second[name] = f.second
            shared[name] = f.unbatched
        for name, (fwd, _) in forwards.items():
            params = forward_params(fwd) if not is_function_key(name) else function_params(fwd)
            calls = seen.get(name, [])
            axes = _param_axes(params, seen_axes.get(name, []), optimistic=True) if seen_axes.get(name) else \
                {**table[name].axes, **{p: 1 for p in second.get(name, ())},
                 **{p: NOT_BATCHED for p in shared.get(name, ())}}
            changed |= axes != table[name].axes
            table[name].axes = axes
            table[name].called = bool(calls)
            # a class another class of the file builds, whose calls the probes never see (held in a container they
            # do not follow: parallel_vit's Parallel(*fns) calling `fn(x)`), is fed by that module, not the user
            now_blind = any(blind.get(name, ())) or not calls and name in built
            changed |= now_blind != table[name].blind
            table[name].blind = now_blind
            ranks = {p: r for i, p in enumerate(params)
                     for r in [_agreed([c[i] if i < len(c) else None for c in calls])] if r is not None}
            changed |= ranks != table[name].params
            table[name].params = ranks
        if not changed:
            break
    for name, (fwd, _) in forwards.items():  # what the settled table's calls give, without optimism
        if seen_axes.get(name):
            table[name].axes = _param_axes(forward_params(fwd) if not is_function_key(name) else function_params(fwd),
                                           seen_axes[name])
    failed = {n for n in traced if not _one_example(functions[n], seen_axes.get(function_key(n), []), table, ctx)}
    if failed:
        return analyse(module, ctx, classes, skip, refused | failed)
    return table


def _one_example(fn: cst.FunctionDef, calls: list, table: dict, ctx) -> bool:
    """Whether a function forwards call (per_example_functions) can be written for one example: each of its
    parameters batched in every call or in none (a call giving the batch and one giving a value every example
    shares cannot both be served by one per-example body), one call at least giving a batched tensor, and its body
    translated for one example without an error finding (else each call keeps its own error, as before)."""
    from fwport.core.rewrite import rewrite
    from fwport.packs.torch2jax.batch import Forward
    params = function_params(fn)
    if not calls:
        return False
    seen = False
    for i, p in enumerate(params):
        got = [c[0][i] if i < len(c[0]) else c[1].get(p, "absent") for c in calls]
        batched = {g not in ("absent", None) for g in got}
        if len(batched) > 1:
            return False
        seen |= batched == {True}
    if not seen:
        return False
    probe = _Counting(ctx)
    rewrite(fn.body, Forward(probe, set(params), set(), {}, ranks=table[function_key(fn.name.value)]))
    return not probe.errors


class _Counting(_Probe):
    """A probe that counts the error findings it is given (and keeps none)."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self.errors = 0

    def report(self, severity, *args, **kwargs) -> None:
        from fwport.core.finding import Severity
        self.errors += severity is Severity.ERROR
