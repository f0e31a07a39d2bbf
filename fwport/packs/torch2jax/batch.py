"""Per-example shape code: a translated module sees one example, so every dimension a batched
PyTorch tensor op names loses the batch axis (``dim=1`` → ``axis=0``), views and sizes drop it
(``x.view(x.size(0), -1)`` → ``x.reshape(-1)``), and whatever needs the batch axis itself is an
error finding (``batch-axis``), never a silent shift. A batch size read into a name (``batch = x.shape[0]``)
is tracked: where it only sizes a view or a per-batch copy of a tensor every example shares
(``torch.zeros(batch, H)``, ``t.expand(batch, -1, -1)``, ``einops.repeat(t, '... d -> b ... d', b=batch)``,
vit-pytorch's ``repeat(self.cls_token, '() n d -> b n d', b=b)``) one example's form leaves the batch axis out;
any other read of the name is refused.

:class:`Forward` rewrites one ``forward`` body. It knows which names hold batched tensors (the
parameters, and whatever is computed from them) and translates the calls whose meaning depends on
the batch axis; elementwise functions (``F.relu``) are left to the rules.
"""
from __future__ import annotations

import re

import libcst as cst

from fwport.core.engine import NOT_LITERAL, code, expr, literal_value
from fwport.core.finding import Severity
from fwport.core.names import _CHILD_FIELDS, _IS_NODE, _LEAF, _child_fields, _is_node, dotted_text, find_all, scan
from fwport.packs.torch2jax import layers, ops

F = "torch.nn.functional."
#: a statement the rewrite removes (`batch = x.shape[0]`), removed with its line by the modules pass's finish
DROP = "__fwport_drop__"

#: per-example rank each layer takes (Equinox layers take exactly one example; more leading axes: vmap)
LAYER_RANK = {"torch.nn.Linear": 1, "torch.nn.LayerNorm": 1, "torch.nn.Embedding": 0, "torch.nn.Conv1d": 2, "torch.nn.Conv2d": 3,
              "torch.nn.Conv3d": 4}
#: layers whose output rank is their input's; and those that change it
SAME_RANK = frozenset({"torch.nn.Linear", "torch.nn.ReLU", "torch.nn.GELU", "torch.nn.Tanh", "torch.nn.Sigmoid",
                       "torch.nn.Dropout", "torch.nn.LayerNorm", "torch.nn.Conv1d", "torch.nn.Conv2d",
                       "torch.nn.MaxPool2d", "torch.nn.AvgPool2d", "torch.nn.AdaptiveAvgPool2d", "torch.nn.SiLU",
                       "torch.nn.LeakyReLU", "torch.nn.Identity", "torch.nn.Softmax", "torch.nn.GroupNorm",
                       "torch.nn.InstanceNorm1d", "torch.nn.InstanceNorm2d", "torch.nn.InstanceNorm3d"}) | layers.SAME_RANK
#: ctx.analyses: rank_unknown has said (once per file) that one vector per example is assumed for the user's input
VECTOR_ASSUMED = "torch2jax.batch.vector-assumed"
#: layers whose Equinox form takes one (channels, *spatial) example and no other rank: their result's rank is known
FIXED_RANK = {"torch.nn.Conv1d": 2, "torch.nn.Conv2d": 3, "torch.nn.Conv3d": 4, "torch.nn.MaxPool2d": 3,
              "torch.nn.AvgPool2d": 3, "torch.nn.AdaptiveAvgPool2d": 3}
RANK_CHANGE = {"torch.nn.Embedding": 1, "torch.nn.Embedding.from_pretrained": 1}  # the latter: any indices' shape
#: PyTorch's sequence layers, which take (L, N, features) unless built with batch_first=True (per example: (L, features))
SEQUENCE_LAYERS = frozenset({"torch.nn.LSTM", "torch.nn.GRU", "torch.nn.RNN", "torch.nn.MultiheadAttention",
                             *layers.TRANSFORMER_CALLS})
#: layers acting on the trailing axes alone: wherever the batch axis is, they keep it there
TRAILING = frozenset({"torch.nn.Linear", "torch.nn.LayerNorm", "torch.nn.Embedding", "torch.nn.Dropout", "torch.nn.ReLU",
                      "torch.nn.GELU", "torch.nn.Tanh", "torch.nn.Sigmoid", "torch.nn.SiLU", "torch.nn.LeakyReLU",
                      "torch.nn.Identity", "torch.nn.Embedding.from_pretrained"})
#: a forward parameter no caller gives a batched value (a mask left None): not batched
NOT_BATCHED = -2
#: ctx.analyses: the attributes (``self.attend``) the file binds, at every binding, to ``nn.Softmax`` over a literal
#: negative dim → that dim (last_axis_layers)
LAST_AXES = "torch2jax.batch.last-axes"
#: ctx.analyses: ids of the sequence-layer constructions whose every call gets the batch axis where it takes it
SEQ_PROVEN = "torch2jax.seq-proven"
#: a batch position whose parts disagree (``a + b`` with a's batch axis first and b's second): refused where it matters
UNKNOWN = -1


class Merged(int):
    """A batch axis merged into axis ``int(self)`` as its inner factor: ``(L, N, V).view(-1, V)`` is (L * N, V), rows
    (step, example) pairs; one example's view is (L, V), and ``jax.vmap(..., out_axes=a + 1)`` then a reshape merging
    axes a and a + 1 gives PyTorch's."""

    def __repr__(self) -> str:
        return f"Merged({int(self)})"

    def __eq__(self, other) -> bool:  # never equal to a plain position, nor to the other kind of merge
        return type(other) is type(self) and int(self) == int(other)

    def __ne__(self, other) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((type(self).__name__, int(self)))


class Grouped(Merged):
    """A batch axis merged into axis ``int(self)`` as its *outer* factor: einops's ``'b n d -> (b n) d'``, window
    attention's ``(b x y) n d`` and ``(b h) n d``. One example's axis holds the other factors (``(b h) n d`` of one
    example is ``(h) n d`` = ``h n d``), so one example's tensor has PyTorch's rank and dimensions, as for
    :class:`Merged`; PyTorch's layout is ``jax.vmap(..., out_axes=a)`` with axes a and a + 1 reshaped into one."""

    def __repr__(self) -> str:
        return f"Grouped({int(self)})"


def axis_text(a) -> str:
    """How a batch position reads in a comment or a finding."""
    if a is None:
        return "none"
    if isinstance(a, tuple):
        return "(" + ", ".join(axis_text(x) for x in a) + ")"
    if isinstance(a, Grouped):
        return f"{int(a)} merged outermost into {int(a)}"
    if isinstance(a, Merged):
        return f"{int(a) + 1} merged into {int(a)}"
    return "?" if a == UNKNOWN else str(a)


#: PyTorch's functions that build a tensor from a (nested) list literal
LITERAL_TENSORS = frozenset({"torch.tensor", "torch.LongTensor", "torch.FloatTensor", "torch.Tensor", "torch.as_tensor",
                             "torch.IntTensor", "torch.DoubleTensor", "torch.BoolTensor"})
#: functions that place the batch axis themselves wherever it is (batch.Forward.function), or act on trailing axes
PLACED = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.stack", "torch.softmax", "torch.log_softmax",
                    F + "softmax", F + "log_softmax", "torch.sum", "torch.mean", "torch.amax", "torch.amin", F + "linear",
                    F + "layer_norm", F + "embedding", F + "gelu", F + "relu", F + "silu", F + "dropout", "torch.zeros_like",
                    "torch.ones_like", "torch.where", "torch.tanh", "torch.sigmoid", "torch.exp", "torch.log",
                    "torch.sqrt", "torch.abs", "torch.clamp", "torch.maximum", "torch.minimum", "torch.pow"})
#: comparison methods of a tensor → the operator (``x.eq(0)`` → ``(x == 0)``, as outside the modules)
COMPARISONS = {"eq": cst.Equal, "ne": cst.NotEqual, "gt": cst.GreaterThan, "ge": cst.GreaterThanEqual,
               "lt": cst.LessThan, "le": cst.LessThanEqual}
#: source functions whose result has their first argument's rank
ELEMENTWISE = frozenset({"relu", "tanh", "sigmoid", "gelu", "exp", "log", "abs", "sqrt", "softmax", "log_softmax",
                         "silu", "leaky_relu", "elu", "dropout", "sin", "cos", "glu", "layer_norm", "zeros_like",
                         "ones_like", "randn_like", "clamp", "clip", "pow", "neg", "erf", "log1p", "rsqrt", "tan",
                         "full_like"})


def last_axis_layers(ctx) -> dict[str, int]:
    """The attributes the source binds, at every ``self.NAME = ...`` of the file, to ``nn.Softmax(dim=-k)`` (a literal
    negative dim) → -k: such a layer acts along an axis counted from the end, wherever the batch axis is, so a tensor
    holding the batch axis elsewhere than first (grouped outermost: ``(b h) n n``) may reach it where that axis is not
    the batch's (Forward.last_axis_call). Computed once per file from the source."""
    found = ctx.analyses.get(LAST_AXES)
    if found is None:
        module = ctx.analyses["parsed"][0] if "parsed" in ctx.analyses else None
        dims: dict[str, set[int]] = {}
        other: set[str] = set()
        for node in find_all(module, cst.Assign) + find_all(module, cst.AnnAssign) if module is not None else ():
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for t in targets:
                for e in (t.elements if isinstance(t, (cst.Tuple, cst.List)) else [t]):
                    text = dotted_text(e.value if isinstance(e, (cst.Element, cst.StarredElement)) else e) or ""
                    if not text.startswith("self.") or text.count(".") != 1:
                        continue
                    d = _softmax_dim(node.value, ctx) if e is t and node.value is not None else None
                    if d is None:
                        other.add(text[5:])
                    else:
                        dims.setdefault(text[5:], set()).add(d)
        found = ctx.analyses[LAST_AXES] = {a: ds.pop() for a, ds in dims.items() if a not in other and len(ds) == 1}
    return found


def _softmax_dim(value: cst.BaseExpression, ctx) -> int | None:
    """``nn.Softmax(dim=-k)`` / ``nn.Softmax(-k)`` (k a literal) → -k; anything else None."""
    if not isinstance(value, cst.Call) or len(value.args) != 1 \
            or ctx.imports.resolve(value.func) != "torch.nn.Softmax":
        return None
    a = value.args[0]
    if a.star or a.keyword is not None and a.keyword.value != "dim":
        return None
    d = int_literal(a.value)
    return d if d is not None and d < 0 else None


def int_literal(node: cst.BaseExpression | None) -> int | None:
    """An integer written as a literal (``1``, ``-1``), else None."""
    if isinstance(node, cst.Integer):
        return int(node.value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and isinstance(node.expression, cst.Integer):
        return -int(node.expression.value)
    return None


#: the factories whose sizes give a buffer's rank and its literal size-1 axes (buffer_shapes)
_SIZED_FACTORIES = frozenset({"torch.zeros", "torch.ones", "torch.empty", "torch.randn", "torch.rand"})
#: jax's indexed updates (`pe = pe.at[:, 0::2].set(v)`, the inplace pass's writes into a slice)
_AT_UPDATES = frozenset({"set", "add", "multiply", "divide", "subtract", "min", "max", "power"})
#: tensor methods that keep the shape
_SAME_SHAPE = frozenset({"float", "double", "half", "detach", "clone", "contiguous", "to", "cpu", "cuda"})


def buffer_shapes(init: cst.FunctionDef | None, ctx) -> dict[str, tuple[frozenset, int]]:
    """The buffers ``__init__`` registers (``self.register_buffer("pe", pe)``) whose rank and size-1 axes follow from
    its top-level statements, where written out: ``pe = torch.zeros(max_len, d_model)`` (rank 2, sizes not literal 1),
    written into by slices (``pe[:, 0::2] = ...``: the shape stays), then ``pe = pe.unsqueeze(0).transpose(0, 1)`` /
    ``pe.unsqueeze(1)`` / ``pe.unsqueeze(-2)`` (rank 3, axis 1 of size 1): name → (the size-1 axes, the rank). A
    forward adding such a buffer to a tensor reads which of its axes lines up with the batch axis (Forward.buffer_read).
    A name rebound any other way, or inside a compound statement, is not followed."""
    if init is None:
        return {}
    known: dict[str, tuple[frozenset, int]] = {}
    out: dict[str, tuple[frozenset, int]] = {}
    for st in init.body.body:
        if not isinstance(st, cst.SimpleStatementLine):
            for n in _assigned_names(st):
                known.pop(n, None)
            continue
        for small in st.body:
            if isinstance(small, cst.Assign):
                targets = [t.target for t in small.targets]
                attr = (dotted_text(targets[0]) or "") if len(targets) == 1 else ""
                if attr.startswith("self.") and attr.count(".") == 1 and isinstance(small.value, cst.Call) \
                        and ctx.imports.resolve(small.value.func) == "torch.nn.Parameter":
                    shape = _built_shape(small.value, known, ctx)  # `self.pos_embedding = nn.Parameter(torch.randn(1, n, d))`
                    if shape is not None:
                        out[attr[5:]] = shape
                    continue
                if len(targets) == 1 and isinstance(targets[0], cst.Name):
                    shape = _built_shape(small.value, known, ctx)
                    if shape is None:
                        known.pop(targets[0].value, None)
                    else:
                        known[targets[0].value] = shape
                    continue
                for n in _assigned_names(small):
                    known.pop(n, None)
            elif isinstance(small, (cst.AugAssign, cst.AnnAssign)) and isinstance(small.target, cst.Name):
                known.pop(small.target.value, None)
            elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) \
                    and dotted_text(small.value.func) == "self.register_buffer" and len(small.value.args) >= 2 \
                    and isinstance(small.value.args[0].value, cst.SimpleString) and small.value.args[0].keyword is None \
                    and small.value.args[1].keyword is None and not small.value.args[1].star:
                shape = _built_shape(small.value.args[1].value, known, ctx)
                if shape is not None:
                    out[small.value.args[0].value.evaluated_value] = shape
    return out


class _AssignedNames(cst.CSTVisitor):
    """The names a statement binds (assignments, loop targets): buffer_shapes stops following them."""

    def __init__(self) -> None:
        super().__init__()
        self.out: set[str] = set()

    def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
        self.out.update(_target_names(n.target))

    def visit_AugAssign(self, n: cst.AugAssign) -> None:
        self.out.update(_target_names(n.target))

    def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
        self.out.update(_target_names(n.target))

    def visit_For(self, n: cst.For) -> None:
        self.out.update(_target_names(n.target))

    def visit_NamedExpr(self, n: cst.NamedExpr) -> None:
        self.out.update(_target_names(n.target))


def _assigned_names(node: cst.CSTNode) -> set[str]:
    v = _AssignedNames()
    scan(node, v)  # (not node.visit(v): libcst's walk rebuilds every node it passes, ~8% of a fixture's time)
    return v.out


def _built_shape(value: cst.BaseExpression, known: dict, ctx) -> tuple[frozenset, int] | None:
    """buffer_shapes: (the size-1 axes, the rank) of an expression of __init__, where it follows."""
    if isinstance(value, cst.Name):
        return known.get(value.value)
    if not isinstance(value, cst.Call) or any(a.star for a in value.args):
        return None
    q = ctx.imports.resolve(value.func)
    if q == "torch.nn.Parameter" and value.args and value.args[0].keyword is None:
        return _built_shape(value.args[0].value, known, ctx)  # a parameter: the shape of the array it is given
    if q in _SIZED_FACTORIES:
        sizes = [a.value for a in value.args if a.keyword is None]
        sizes += [a.value for a in value.args if a.keyword is not None and a.keyword.value == "size"]
        if len(sizes) == 1 and isinstance(sizes[0], (cst.Tuple, cst.List)):
            sizes = [e.value for e in sizes[0].elements]
        if not sizes or any(isinstance(e, cst.StarredElement) for e in sizes):
            return None
        return frozenset(i for i, e in enumerate(sizes) if int_literal(e) == 1), len(sizes)
    if q == "torch.unsqueeze" and len(value.args) == 2:
        return _unsqueezed(_built_shape(value.args[0].value, known, ctx), int_literal(value.args[1].value))
    if not isinstance(value.func, cst.Attribute) or value.func.attr.value in ("view", "reshape"):
        return None
    f = value.func.value
    if isinstance(f, cst.Subscript) and isinstance(f.value, cst.Attribute) and f.value.attr.value == "at" \
            and value.func.attr.value in _AT_UPDATES:  # a slice write, as the inplace pass writes it: the shape stays
        return _built_shape(f.value.value, known, ctx)
    name, args = value.func.attr.value, [a.value for a in value.args]
    if any(a.keyword is not None and not (name == "to" and a.keyword.value in ("device", "dtype")) for a in value.args):
        return None
    inner = _built_shape(value.func.value, known, ctx)
    if inner is None:
        return None
    if name in _SAME_SHAPE:
        return inner
    if name == "unsqueeze" and len(args) == 1:
        return _unsqueezed(inner, int_literal(args[0]))
    if name in ("transpose", "swapaxes") and len(args) == 2:
        ones, rank = inner
        a, b = int_literal(args[0]), int_literal(args[1])
        if a is None or b is None or not -rank <= a < rank or not -rank <= b < rank:
            return None
        a, b = a % rank, b % rank
        swap = {a: b, b: a}
        return frozenset(swap.get(o, o) for o in ones), rank
    return None


def _unsqueezed(inner, d: int | None) -> tuple[frozenset, int] | None:
    if inner is None or d is None:
        return None
    ones, rank = inner
    if not -rank - 1 <= d <= rank:
        return None
    d = d % (rank + 1)
    return frozenset({d, *(o if o < d else o + 1 for o in ones)}), rank + 1


#: ctx.analyses: id(a forward's body) → (the body, its _device_only, its sole_holders_in by (inputs, passing names),
#: its _tensor_reads by the modules given), for Forward.visit_IndentedBlock
_BODY_FACTS = "torch2jax.batch.body-facts"


class _NamesIn(cst.CSTVisitor):
    # (a class of the module, not of each call: creating a visitor class costs several times its walk)
    def __init__(self) -> None:
        super().__init__()
        self.out: set[str] = set()

    def visit_Name(self, n: cst.Name) -> None:
        self.out.add(n.value)

    def visit_Attribute(self, n: cst.Attribute) -> bool:
        scan(n.value, self)  # `x.shape`: x, not `shape`
        return False


def names_in(node: cst.CSTNode) -> set[str]:
    """The names written in ``node`` but an attribute's (``x.shape``: x): what ``scan`` with :class:`_NamesIn`
    collects, by a walk of its own (asked of nearly every expression a forward translates)."""
    out: set[str] = set()
    _names_into(node, out)
    return out


def _names_into(node: cst.CSTNode, out: set[str]) -> None:
    t = node.__class__
    while t is cst.Attribute:  # its value's names, not its own
        node = node.value
        t = node.__class__
    if t is cst.Name:
        out.add(node.value)
        return
    for name in _CHILD_FIELDS.get(t) or _child_fields(t):
        value = getattr(node, name)
        c = value.__class__
        if c is tuple or c is list:
            for child in value:
                if child.__class__ is cst.Name:
                    out.add(child.value)
                elif _CHILD_FIELDS.get(child.__class__) is not _LEAF:
                    _names_into(child, out)
        elif _IS_NODE.get(c) or (c not in _IS_NODE and _is_node(value)):
            if c is cst.Name:
                out.add(value.value)
            elif _CHILD_FIELDS.get(c) is not _LEAF:
                _names_into(value, out)


def _args(call: cst.Call, names: tuple[str, ...]) -> tuple[dict[str, cst.BaseExpression], list[str]]:
    """Bind a call's arguments to ``names`` (positional in order, then keywords); unknown keywords listed."""
    out: dict[str, cst.BaseExpression] = {}
    unknown: list[str] = []
    i = 0
    for a in call.args:
        if a.star:
            unknown.append("*")
        elif a.keyword is None:
            if i < len(names):
                out[names[i]] = a.value
            else:
                unknown.append(f"#{i}")
            i += 1
        elif a.keyword.value in names:
            out[a.keyword.value] = a.value
        else:
            unknown.append(a.keyword.value)
    return out, unknown


def _dict_entry(func: cst.BaseExpression) -> str | None:
    """``self.d["k"]`` → ``d["k"]`` (an entry of an nn.ModuleDict, as modules.py names it), else None."""
    if isinstance(func, cst.Subscript) and len(func.slice) == 1 and isinstance(func.slice[0].slice, cst.Index) \
            and isinstance(func.slice[0].slice.value, cst.SimpleString):
        base = dotted_text(func.value) or ""
        if base.startswith("self.") and base.count(".") == 1:
            return f'{base[5:]}["{func.slice[0].slice.value.evaluated_value}"]'
    return None


class _DeviceUses(cst.CSTVisitor):
    """_device_only: names bound ``name = x.device``, and the names read or bound otherwise."""

    def __init__(self):
        super().__init__()
        self.bound: set[str] = set()
        self.other: set[str] = set()
        self.skip: set[int] = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) \
                and isinstance(node.value, cst.Attribute) and node.value.attr.value == "device":
            self.bound.add(node.targets[0].target.value)
            self.skip.add(id(node.targets[0].target))
        elif _device_elements(node):  # `device, dtype = x.device, x.dtype`: device as above, the others bound otherwise
            at = {i for i, _ in _device_elements(node)}
            for i, e in enumerate(node.targets[0].target.elements):
                if i in at:
                    self.bound.add(e.value.value)
                    self.skip.add(id(e.value))
                elif isinstance(e.value, cst.Name):
                    self.other.add(e.value.value)
        else:
            for t in node.targets:
                if isinstance(t.target, cst.Name):
                    self.other.add(t.target.value)  # bound otherwise too

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.skip.add(id(node.keyword))
            if node.keyword.value == "device" and isinstance(node.value, cst.Name):
                self.skip.add(id(node.value))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.skip.add(id(node.attr))

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "to" and len(node.args) == 1 \
                and node.args[0].keyword is None and isinstance(node.args[0].value, cst.Name):
            self.skip.add(id(node.args[0].value))  # `.to(device)`: the move is removed
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "to" and len(node.args) == 2 \
                and node.args[0].keyword is None and isinstance(node.args[0].value, cst.Name) \
                and node.args[1].keyword is not None and node.args[1].keyword.value == "dtype":
            self.skip.add(id(node.args[0].value))  # `.to(device, dtype=d)`: the move is removed, the cast stays

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) not in self.skip:
            self.other.add(node.value)


def _device_elements(node: cst.Assign) -> list[tuple[int, int]]:
    """The positions (in the names, in the values) of ``name = x.device`` pairs in ``a, name, ... = v, x.device, ...``
    (a tuple of values, none starred, as many as the names; or, beside one starred name, as many as the others or
    more: ``n, *rest, device = 3, a, b, x.device`` pairs the names after the star with the last values)."""
    if len(node.targets) != 1 or not isinstance(node.targets[0].target, (cst.Tuple, cst.List)) \
            or not isinstance(node.value, (cst.Tuple, cst.List)):
        return []
    ts, vs = node.targets[0].target.elements, node.value.elements
    stars = [i for i, t in enumerate(ts) if isinstance(t, cst.StarredElement)]
    if any(isinstance(e, cst.StarredElement) for e in vs) or len(stars) > 1 \
            or (len(vs) < len(ts) - 1 if stars else len(ts) != len(vs)):
        return []
    pairs = [(i, i if not stars or i < stars[0] else len(vs) - (len(ts) - i)) for i in range(len(ts))
             if not stars or i != stars[0]]
    return [(i, j) for i, j in pairs if isinstance(ts[i].value, cst.Name)
            and isinstance(vs[j].value, cst.Attribute) and vs[j].value.attr.value == "device"]


def _device_only(body: cst.CSTNode) -> set[str]:
    """Names bound ``name = x.device`` whose every read is a ``device=`` argument or a ``.to(device)`` move (the rules
    drop those)."""
    u = _DeviceUses()
    scan(body, u)
    return u.bound - u.other


#: attributes and methods only a tensor has (beside tensor_methods.TORCH_ONLY): a name read through one is a tensor
TENSOR_ATTRIBUTES = frozenset({"shape", "size", "view", "reshape", "transpose", "squeeze", "flatten", "ndim", "dtype",
                               "device", "matmul", "to", "float", "long", "repeat", "max", "min", "sum", "mean"})


#: a layer whose call takes one tensor first and returns one (beside SAME_RANK, RANK_CHANGE)
_TENSOR_LAYERS = SAME_RANK | frozenset(RANK_CHANGE) | frozenset(LAYER_RANK)
#: torch functions whose result is no single tensor (a tuple or list of them), or that take a list first
_NOT_ONE_TENSOR = frozenset({"split", "chunk", "unbind", "max", "min", "sort", "topk", "kthvalue", "median", "mode",
                             "meshgrid", "nonzero", "unique", "broadcast_tensors", "cat", "concat", "concatenate",
                             "stack", "hstack", "vstack", "dstack", "var_mean", "std_mean", "aminmax", "histogram",
                             "tensor_split", "hsplit", "vsplit", "dsplit", "array_split", "unstack", "where", "frexp",
                             "svd", "eig", "eigh", "qr", "slogdet", "lstsq", "multi_head_attention_forward"})


class _TensorReads(cst.CSTVisitor):
    """_tensor_reads: the names the code reads as tensors."""

    def __init__(self, resolve, modules: dict[str, str], torch_only: frozenset):
        super().__init__()
        self.resolve = resolve
        self.modules = modules
        self.torch_only = torch_only  # (tensor_methods.TORCH_ONLY: that module imports this one)
        self.out: set[str] = set()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if isinstance(node.value, cst.Name) and (node.attr.value in TENSOR_ATTRIBUTES or node.attr.value in self.torch_only):
            self.out.add(node.value.value)

    def visit_Call(self, node: cst.Call) -> None:
        first = node.args[0] if node.args and node.args[0].keyword is None and not node.args[0].star else None
        if first is None or not isinstance(first.value, cst.Name):
            return
        text = dotted_text(node.func) or ""
        if text.startswith("self.") and text.count(".") == 1 and self.modules.get(text[5:]) in _TENSOR_LAYERS:
            self.out.add(first.value.value)
            return
        q = self.resolve(node.func) or ""
        if q.startswith(("torch.nn.functional.", "torch.")) and q.count(".") <= 3 \
                and q.rsplit(".", 1)[-1] not in _NOT_ONE_TENSOR and not q.startswith("torch.nn.functional.multi"):
            self.out.add(first.value.value)


def _tensor_reads(body: cst.CSTNode, resolve, modules: dict[str, str]) -> set[str]:
    """Names the code reads as tensors: the receiver of an attribute or method only a tensor has (``x.shape``,
    ``x.size(0)``, ``x.view(...)``), the first argument of a layer (``self.fc(x)``) or of a torch function
    (``F.relu(x)``); a list, tuple or dict of tensors is none of these."""
    from fwport.packs.torch2jax.tensor_methods import TORCH_ONLY  # (it imports this module)
    r = _TensorReads(resolve, modules, TORCH_ONLY)
    scan(body, r)
    return r.out


def _device_move(call: cst.Call, ctx) -> bool:
    """``x.to(device)`` / ``x.to(y.device)`` / ``x.to("cuda")`` / ``x.to(device=d)``: a move to a device alone (no dtype)."""
    from fwport.packs.torch2jax.passes.training import _is_device  # (training imports this module's users)
    if len(call.args) != 1 or call.args[0].star or call.args[0].keyword is not None and call.args[0].keyword.value != "device":
        return False
    v = call.args[0].value
    return isinstance(v, cst.Attribute) and v.attr.value == "device" or _is_device(v, ctx)


def _moved_cast(call: cst.Call, ctx) -> cst.BaseExpression | None:
    """``x.to(device, dtype=d)`` / ``x.to(device=dev, dtype=d)`` (a device as _device_move reads one, and a dtype
    keyword): the dtype ``d`` (of ``call``, translated or not); JAX places arrays itself, so it is ``x.astype(d)``."""
    kw = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    pos = [a for a in call.args if a.keyword is None]
    if any(a.star for a in call.args) or set(kw) - {"device", "dtype"} or "dtype" not in kw \
            or len(pos) + ("device" in kw) != 1 or len(pos) > 1:
        return None
    device = pos[0] if pos else next(a for a in call.args if a.keyword is not None and a.keyword.value == "device")
    return kw["dtype"] if _device_move(call.with_changes(args=[device]), ctx) else None


def _scalar(node: cst.BaseExpression) -> bool:
    """A Python number computed from sizes: literals, ``x.shape[i]``, ``math.*`` (of anything: a math function
    returns a Python float), arithmetic (``1.0 / math.sqrt(k.shape[-1])``): it broadcasts into an array without
    adding axes."""
    if isinstance(node, (cst.Integer, cst.Float)):
        return True
    if isinstance(node, cst.UnaryOperation):
        return _scalar(node.expression)
    if isinstance(node, cst.BinaryOperation):
        return _scalar(node.left) and _scalar(node.right)
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute) and node.value.attr.value == "shape":
        return len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index)
    if isinstance(node, cst.Call) and (dotted_text(node.func) or "").startswith("math."):
        # a Python float whatever it is given (math.sqrt(self.d_model)); math.prod multiplies what it is given
        return dotted_text(node.func) != "math.prod" or all(
            a.keyword is None and not a.star and _scalar(a.value) for a in node.args)
    return False


def combine(axes) -> object:
    """The batch position of an expression from its parts' (None: not batched): theirs where they agree."""
    found = {a for a in axes if a is not None}
    if not found:
        return None
    if len(found) == 1:
        return found.pop()
    return UNKNOWN


class _AxisKeepingCalls(cst.CSTVisitor):
    """Whether every call in an expression keeps its input's axes (see origins). A class of the module, not
    of each call: creating a visitor class costs several times its walk."""

    def __init__(self, owner) -> None:
        super().__init__()
        self.owner = owner
        self.keeps = True

    def visit_Call(self, node: cst.Call) -> None:
        owner = self.owner
        text = dotted_text(node.func) or ""
        q = owner.ctx.imports.resolve(node.func)
        if text.startswith("self.") and text.count(".") == 1 and owner.modules.get(text[5:]) in TRAILING:
            return
        if q is not None and q.rsplit(".", 1)[-1] in ELEMENTWISE:
            return
        module = owner.module_called(node.func)
        if module is not None and module[0] == "class" and _keeps_axes(owner.file.table.get(module[1])):
            return  # a module of the file returning the batch axis where its input holds it (a PositionalEncoding)
        self.keeps = False


def _keeps_axes(info) -> bool:
    """Whether a module class of the file (its ranks.ClassRanks) returns the batch axis where its inputs, all at one
    place, hold it (so far as ranks.py has probed it)."""
    if info is None or info.out_axes is None:
        return False
    given = set(info.axes.values()) or {0}
    return len(given) == 1 and type(info.out_axes) is int and info.out_axes == next(iter(given))


#: elementwise tensor methods with no argument that an nn.Parameter attribute read in a forward is given
#: (``self.temperature.exp()``): the jnp function of the array, as for a batched value (Forward.elementwise)
_PARAMETER_ELEMENTWISE = frozenset({"relu", "sigmoid", "tanh", "exp", "log", "abs", "sqrt", "sin", "cos", "float",
                                    "detach", "clone"})


def _vector_norms(ctx) -> frozenset[str]:
    """The attributes (``self.norm``) every nn.LayerNorm the file assigns them normalises over the last axis alone
    (ranks.per_vector: an integer normalized_shape, or one of them), and nothing else is assigned them; from the
    source, once per file."""
    found = ctx.analyses.get("torch2jax.vector-norms")
    if found is None:
        from fwport.packs.torch2jax.ranks import per_vector
        module = ctx.analyses["parsed"][0] if "parsed" in ctx.analyses else None
        good, bad = set(), set()
        for a in find_all(module, cst.Assign) if module is not None else ():
            for t in a.targets:
                text = dotted_text(t.target) or ""
                if not text.startswith("self.") or text.count(".") != 1:
                    continue
                q = ctx.imports.resolve(a.value.func) if isinstance(a.value, cst.Call) else None
                (good if q == "torch.nn.LayerNorm" and per_vector(q, a.value) else bad).add(text[5:])
        found = ctx.analyses["torch2jax.vector-norms"] = frozenset(good - bad)
    return found


class Forward(cst.CSTTransformer):
    """Rewrites one ``forward`` body for one example (see the module docstring).

    ``modules``: attribute → the qualified source class of each submodule (``torch.nn.Dropout``);
    ``keyed``: the attributes whose call takes a key (dropout, a Sequential holding one)."""

    def __init__(self, ctx, batched: set[str], keyed: set[str], modules: dict[str, str] | None = None,
                 stateful: set[str] = frozenset(), buffers: set[str] = frozenset(), ranks=None,
                 leading_ones: dict[str, tuple[int, int]] | None = None):
        super().__init__()
        # ranks.py's view of the file (a ranks.ClassRanks): what this module's parameters hold, which attributes and
        # loop names are modules of this file or Sequentials, and the ranks each of those returns
        self.file = ranks
        self.inputs = frozenset(batched)  # the forward's own parameters
        self.instances: dict[str, str] = dict(ranks.instances) if ranks is not None else {}  # name → class of this file
        self.buffers = buffers  # registered buffers: read through jax.lax.stop_gradient
        self.leading_ones = leading_ones or {}  # buffers built with leading axes of size 1: (how many, rank)
        self.stateful = stateful  # attributes whose call takes and returns the state (BatchNorm)
        self.state_sites: list[cst.Call] = []
        self.ctx = ctx
        self.batched = set(batched)
        self.keyed = keyed
        # this file's module classes, and this class's methods forward calls (ranks.method_key), whose call takes a key
        # (dropout inside): their calls get `key=key` (split per consumer, and per iteration in a loop, by modules.py)
        self.keyed_classes: set[str] = set()
        #: fields of the class ``__init__`` sets to a negative literal only (modules.negative_fields: ``self.dim``
        #: given to a function of the file as its dimension counts from the end)
        self.negative_fields: frozenset[str] = frozenset()
        # sequence-layer attributes built with dropout → the keyword their call takes the key by (modules.py)
        self.keyed_sequences: dict[str, str] = {}
        self.modules = dict(modules or {})
        self.rank: dict[str, int] = {}  # per-example rank of names, where the code proves it
        self.batch_sizes: set[str] = set()  # names bound to the batch size (`B, T, C = x.shape`)
        # names bound to the examples' numbers as a column, `batch_range = torch.arange(B)[:, None]` (MAE), read only
        # as the first index of a gather `x[batch_range, idx]` (batch_range_index); the reads :meth:`range_index` took
        self.batch_ranges: set[str] = set()
        # per-example parts of a per-batch draw or copy (`torch.rand(B, n)`, `torch.zeros(B, n)`): batched results
        self.draws: dict[int, int] = {}
        self.range_reads: set[int] = set()
        self.dtype_names: set[str] = set()  # names bound to an array's dtype (`dtype = x.dtype`), for x.to(dtype)
        self.key_sites: list[cst.Call] = []  # the submodule calls that got `key=` (numbered by finish)
        self.kept: set[int] = set()  # `x.size(0)` inside `x.view(x.size(0), -1)`: dropped with the view
        self.shape_checks: dict[int, int] = {}  # `x.shape == (batch, h, w)`: the tuple → where the batch size stands
        self.parts: dict[int, int] = {}  # `.split` calls unpacked into that many names
        self.unpacked: dict[str, int] = {}  # ranks of the names the statement being left unpacks
        self.not_read: set[int] = set()
        self.dropped = False  # a statement became DROP
        self.token_views: set[int] = set()  # views flattening one example's tokens for a loss (token_loss)
        self.device_names: set[str] | None = None  # `device = x.device` names read only as `device=` arguments
        self.tensor_reads: set[str] = set()  # names the forward reads as tensors (_tensor_reads)
        self.statements: set[int] = set()  # calls that are a whole statement (visit_Expr)
        self.in_place: dict[int, str] = {}  # translated in-place method calls → the name they assign (leave_Expr)
        # id(statement call) → the names that are then the only holders of their memory (inplace.sole_holders)
        self.sole: dict[int, frozenset[str]] = {}
        self.part_lists: set[str] = set()  # names bound to a list of parts (`parts = x.split(2, dim=-1)`)
        self.tensors: set[str] = set()  # names bound to one tensor (makes_tensor), as the statements go
        self.size_uses: list[cst.Name] = []  # reads of a batch-size name no per-example form took (refused)
        self.size_marks: list[int] = []  # per open call: len(size_uses) when it was entered  # Name nodes that are no read of a variable (keywords, attributes, parameters)
        if ranks is not None:
            self.rank.update(ranks.params)
        # what ranks.py collects: the ranks of the positional arguments each module class of the file is called
        # with, the input ranks of each Sequential attribute, and the ranks this forward returns
        self.seen_calls: dict[str, list[tuple]] = {}
        # per call of a module class: whether it passes a value of unknown rank that is not the user's input
        # handed through (this forward's own parameter, in a module no other module of the file feeds blind)
        self.seen_blind: dict[str, list[bool]] = {}
        self.seen_sequences: dict[str, list] = {}
        self.returns: list = []
        # where the batch axis is (docs/torch2jax-batch-axis.md): PyTorch's sequence layers take (L, N, ...), so a value
        # may hold it second; names absent from `axis` hold it first. `node_axis`: the position of a translated
        # expression that moved it (a transpose, a layer's results), by node
        self.axis: dict[str, object] = dict(ranks.axes) if ranks is not None else {}
        for p in [p for p, a in self.axis.items() if a == NOT_BATCHED]:
            del self.axis[p]
            self.batched.discard(p)
        self.node_axis: dict[int, object] = {}
        # the inputs each name is computed from without moving an axis (a sequence layer reached that way with the batch
        # axis first means the input holds it second: `second`, which ranks.py tries next)
        self.origin: dict[str, frozenset] = {p: frozenset({p}) for p in batched}
        self.second: set[str] = set()
        self.unbatched: set[str] = set()  # inputs found shared by the batch (`q.unsqueeze(1).repeat(1, bs, 1)`)
        self.input_reads: dict[str, int] = {}  # reads of each input so far
        self.seq_first: dict[str, bool] = dict(ranks.seq_first) if ranks is not None else {}
        for a, q in (ranks.seq_classes.items() if ranks is not None else ()):
            self.modules.setdefault(a, q)  # assigned in a branch of __init__ (`if rnn_type == ...:`)
        self.seq_proven: set[str] = set()  # sequence layers every call of which gets the batch axis where it takes it
        self.seq_refused: set[str] = set()
        self.seen_axes: dict[str, list] = {}  # per call of a module class: (positional axes, keyword axes)
        self.return_axes: list = []
        self.constants: dict[str, tuple[int, bool]] = {}  # names bound to literal-built tensors (constant_rank)
        self.one_tensor: set[int] = set()  # results that are one tensor (not several): unpacking goes over dimension 0
        self.windowed: set[int] = set()  # module calls given tensors holding the batch axis grouped (over_windows)
        # a batched module (modules.py's _batched_classes): every axis as PyTorch writes them, the batch's included;
        # its per-example layers and its attributes holding per-example modules of the file (`examples`) are called
        # through jax.vmap over the batch
        self.batch_whole = False
        self.examples: set[str] = set()
        # ... its ModuleLists a loop unpacks (modules._looped_lists: attribute → the classes of one element), the
        # batched classes among them (called whole), and the loop names bound to them (→ class)
        self.loop_lists: dict[str, tuple[str, ...]] = {}
        self.whole_classes: set[str] = set()
        self.loop_names: dict[str, str] = {}
        self.vector_sequences: set[str] = set()  # ... those Sequentials among them whose Linear takes one vector

    # --- what holds a batched tensor ---------------------------------------------------------------
    def is_batched(self, node: cst.BaseExpression) -> bool:
        return bool(names_in(node) & self.batched)

    # --- where its batch axis is -----------------------------------------------------------------------
    def axis_of(self, node: cst.BaseExpression):
        """The batch position of a (translated) expression: 0 (first), 1, ..., a :class:`Merged`, a tuple for a
        layer's several results, :data:`UNKNOWN` where its parts disagree, None where nothing in it is batched."""
        if id(node) in self.node_axis:
            return self.node_axis[id(node)]
        if isinstance(node, cst.Name):
            return self.axis.get(node.value, 0) if node.value in self.batched else None
        if isinstance(node, (cst.Tuple, cst.List)) and self.axes_moved():  # several values: one position if they agree
            parts = tuple(self.axis_of(e.value) for e in node.elements)
            return parts[0] if parts and all(p == parts[0] for p in parts) else parts
        if not self.axes_moved():  # every batch axis first (the usual case): no need to look further
            return 0 if self.is_batched(node) else None
        if isinstance(node, cst.Subscript):  # (leave_Subscript records what an index moves)
            a = self.axis_of(node.value)
            return UNKNOWN if isinstance(a, tuple) else a
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Name) and node.func.value == "len" or isinstance(node.func, cst.Attribute) \
                    and node.func.attr.value in ("size", "dim") and len(node.args) <= 1:
                return None  # a Python number (a size, a rank): no batch axis (where it counts examples, an error says so)
            if isinstance(node.func, cst.Name) and node.func.value == "map" and len(node.args) == 2 \
                    and isinstance(node.args[0].value, cst.Lambda):  # each part: where the lambda's body holds it
                return self.axis_of(node.args[0].value.body)
            parts = [a.value for a in node.args]
            if isinstance(node.func, cst.Attribute):
                parts.append(node.func.value)
            return combine(self.axis_of(p) for p in parts)
        if isinstance(node, cst.BinaryOperation):
            return combine([self.axis_of(node.left), self.axis_of(node.right)])
        if isinstance(node, cst.UnaryOperation):
            return self.axis_of(node.expression)
        if isinstance(node, cst.IfExp):
            return combine([self.axis_of(node.body), self.axis_of(node.orelse)])
        return combine(self.axis.get(n, 0) for n in names_in(node) & self.batched)

    def axes_moved(self) -> bool:
        """Whether any value of this forward holds its batch axis elsewhere than first."""
        return bool(self.node_axis) or any(a != 0 for a in self.axis.values())

    def set_axis(self, name: str, a) -> None:
        if a is None or a == 0 and not isinstance(a, (Merged, tuple)):
            self.axis.pop(name, None)
        else:
            self.axis[name] = a

    def moved(self, node: cst.BaseExpression, a) -> cst.BaseExpression:
        """``node`` (a translated expression) holds the batch axis at ``a``."""
        self.node_axis[id(node)] = a
        return node

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if self.device_names is None:  # the forward's body, the first block seen
            from fwport.packs.torch2jax.inplace import passing_names, sole_holders_in
            # what the body's own text says, asked of the same body by every probe (ranks.py, _batched_classes) and by
            # the rewrite: kept by the body's identity, with what each answer depends on besides it
            facts = self.ctx.analyses.setdefault(_BODY_FACTS, {})
            held = facts.get(id(node))
            if held is None or held[0] is not node:
                held = facts[id(node)] = (node, _device_only(node), {}, [])
            self.device_names = set(held[1])
            key = (self.inputs, passing_names(self.ctx))
            sole = held[2].get(key)
            if sole is None:
                sole = held[2][key] = sole_holders_in(node.body, self.inputs, key[1])
            self.sole = dict(sole)
            reads = next((r for m, r in held[3] if m == self.modules), None)
            if reads is None:
                reads = _tensor_reads(node, self.ctx.imports.resolve, self.modules)
                held[3].append((dict(self.modules), reads))
            self.tensor_reads = set(reads)
            if self.batch_whole:
                self.new_tensors = _new_tensor_names(node, self.ctx)

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign | cst.RemovalSentinel:
        if len(original.targets) == 1 and isinstance(original.targets[0].target, cst.Name) \
                and original.targets[0].target.value in (self.device_names or ()) \
                and isinstance(original.value, cst.Attribute) and original.value.attr.value == "device":
            return self.drop()  # `device = idx.device` read only as device=: JAX places arrays itself
        devices = [(i, j) for i, j in _device_elements(original)
                   if original.targets[0].target.elements[i].value.value in (self.device_names or ())]
        if devices:  # `device, dtype = x.device, x.dtype`: the device's pair goes, as above
            return self.without_elements(original, updated, devices)
        if self.batch_whole and len(original.targets) == 1 and isinstance(original.targets[0].target, cst.Subscript):
            written = self.whole_write(original, original.targets[0].target, updated.value, "set")
            if written is not None:
                return written
        if id(original.value) in self.kept and self.batch_size_binding(original):
            self.batch_sizes.add(original.targets[0].target.value)
            return self.drop()
        if len(original.targets) == 1 and isinstance(original.targets[0].target, cst.Name) \
                and self.batch_range_size(original.value) is not None:
            self.batch_ranges.add(original.targets[0].target.value)
            self.ctx.report(Severity.INFO, "batch-axis", f"{code(original.targets[0].target)} = "
                            f"{code(original.value)}: the examples' numbers, which one example does not need: the "
                            "statement goes, and each gather it indexes takes one example's rows", original)
            return self.drop()
        t = original.targets[0].target if len(original.targets) == 1 else None
        if isinstance(t, cst.Subscript) and self.range_first(t):
            return self.range_update(t, updated.value, "set", original)
        if isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name) and t.value.value in self.batched \
                and self.is_tensor(t.value):
            return self.indexed_update(t, updated.value, "set", original)
        if isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name) and t.value.value not in self.batched \
                and self.is_batched(original.value):
            # `out = torch.empty([n, 1, c])` then `out[i] = <batched>`: the array was built with sizes of its own
            # (seq2seq's batch of one), which hold no batch axis fwport can place; what it becomes holds one somewhere
            self.error(original, f"{code(t)} = ...: {t.value.value} is not computed from the input (its sizes are the "
                       "code's own: a batch of one written as 1, or the batch size, which one example's copy leaves out) "
                       "and is given values computed from the input in place: fwport does not follow which of its axes "
                       "is the batch's; collect the values in a list and torch.stack them, or write this for one example")
            self.batched.add(t.value.value)
            self.set_axis(t.value.value, UNKNOWN)
            return updated
        sizes = self.batch_size_elements(original)
        if sizes:
            return self.without_batch_sizes(original, updated, sizes)
        unpacked = self.unpack_shape(original, updated)
        if unpacked is not None:
            return unpacked
        hit = self.is_batched(original.value) and not self.other_size(original.value) \
            or id(updated.value) in self.node_axis \
            and self.node_axis[id(updated.value)] is not None \
            or self.drawn(updated.value)  # (a shared input copied over the batch; a draw per example)
        r = self.rank_of(updated.value)
        self.unpack_ranks(original, updated)
        a = self.axis_of(updated.value) if hit else None
        origin = self.origins(original.value)
        if id(updated.value) in self.one_tensor and isinstance(a, int) and a > 0:
            a = tuple(a - 1 for _ in original.targets[0].target.elements) \
                if isinstance(original.targets[0].target, (cst.Tuple, cst.List)) else a  # its rows: one axis less
        for t in original.targets:
            self.bind_axes(t.target, a)
            for n in _target_names(t.target):
                (self.batched.add if hit else self.batched.discard)(n)
                (self.part_lists.add if isinstance(t.target, cst.Name) and _parts(updated.value)
                 else self.part_lists.discard)(n)
                (self.tensors.add if isinstance(t.target, cst.Name) and self.makes_tensor(updated.value)
                 else self.tensors.discard)(n)
                self.origin[n] = origin
                self.batch_sizes.discard(n)
                self.instances.pop(n, None)
                if r is not None and (isinstance(t.target, cst.Name) or _parts(updated.value)):
                    self.rank[n] = r
                elif n not in self.unpacked:
                    self.rank.pop(n, None)
            if isinstance(t.target, (cst.Tuple, cst.List)) and isinstance(updated.value, (cst.Tuple, cst.List)) \
                    and len(t.target.elements) == len(updated.value.elements) and not any(
                    isinstance(e, cst.StarredElement) for e in (*t.target.elements, *updated.value.elements)):
                for te, ve in zip(t.target.elements, updated.value.elements):  # `a, b = t[:k], t[k:]`: each its own
                    ri = self.rank_of(ve.value) if isinstance(te.value, cst.Name) else None
                    if ri is not None and te.value.value not in self.unpacked:
                        self.rank[te.value.value] = ri
        self.unpacked = {}
        const = self.constant_rank(original.value) if not hit else None
        for t in original.targets:
            for n in _target_names(t.target):
                if const is not None and isinstance(t.target, cst.Name):
                    self.constants[n] = const
                else:
                    self.constants.pop(n, None)
        return updated

    def bind_axes(self, target: cst.BaseExpression, a) -> None:
        """The batch positions of what an assignment binds: one for each name, or a tuple's elementwise."""
        if isinstance(target, cst.Name):
            self.set_axis(target.value, UNKNOWN if isinstance(a, tuple) else a)
        elif isinstance(target, (cst.Tuple, cst.List)):
            parts = a if isinstance(a, tuple) and len(a) == len(target.elements) else [a] * len(target.elements)
            for e, ai in zip(target.elements, parts):
                self.bind_axes(e.value, ai)

    def origins(self, value: cst.BaseExpression) -> frozenset:
        """The forward's inputs ``value`` is computed from without moving an axis (elementwise functions and layers
        on the trailing axes alone); empty where anything else is called."""
        calls = _AxisKeepingCalls(self)
        scan(value, calls)
        if not calls.keeps:
            return frozenset()
        return frozenset().union(*(self.origin.get(n, frozenset()) for n in names_in(value) & self.batched))

    def batch_size_elements(self, node: cst.Assign) -> list[int]:
        """``residual, batch_size = q, q.size(0)``: the positions of the names bound to the batch size. Beside a
        starred value or name (sep_vit's ``batch, height, width, heads = x.shape[0], *x.shape[-2:], self.heads``),
        the pairs before the first star, which pair by position whatever the star holds (and at least two names
        left, so that what remains still unpacks)."""
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, (cst.Tuple, cst.List)) \
                or not isinstance(node.value, (cst.Tuple, cst.List)):
            return []
        ts, vs = node.targets[0].target.elements, node.value.elements
        stars = [i for i, e in enumerate(ts) if isinstance(e, cst.StarredElement)] + \
            [i for i, e in enumerate(vs) if isinstance(e, cst.StarredElement)]
        if not stars and len(ts) != len(vs):
            return []
        upto = min(stars) if stars else len(ts)
        out = [i for i, (t, v) in enumerate(zip(ts[:upto], vs[:upto]))
               if isinstance(t.value, cst.Name) and self.is_batch_size(v.value, None)]
        return out if not stars or len(ts) - len(out) >= 2 else []

    def without_batch_sizes(self, original: cst.Assign, updated: cst.Assign, sizes: list[int]):
        """The assignment of :meth:`batch_size_elements` without them (their names hold the batch size)."""
        names = [original.targets[0].target.elements[i].value.value for i in sizes]
        out = self.without_elements(original, updated, sizes)
        self.batch_sizes.update(names)
        return out

    def without_elements(self, original: cst.Assign, updated: cst.Assign, sizes: list):
        """A tuple assignment without the pairs at ``sizes`` (positions, or (name's, value's) positions beside a
        starred name: _device_elements), the rest translated."""
        names = {p[0] if isinstance(p, tuple) else p for p in sizes}
        values = {p[1] if isinstance(p, tuple) else p for p in sizes}

        def parts(a: cst.Assign):
            ts = [e for i, e in enumerate(a.targets[0].target.elements) if i not in names]
            vs = [e for i, e in enumerate(a.value.elements) if i not in values]
            if len(ts) == 1 and not isinstance(ts[0], cst.StarredElement):
                return ts[0].value, vs[0].value
            ts[-1] = ts[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            if vs:
                vs[-1] = vs[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            # (`*rest, = v,`: a starred name alone keeps its tuple; libcst writes the comma of a one-element tuple)
            return a.targets[0].target.with_changes(elements=ts), a.value.with_changes(
                elements=vs, lpar=a.value.lpar or ([cst.LeftParen()] if len(vs) < 2 else []),
                rpar=a.value.rpar or ([cst.RightParen()] if len(vs) < 2 else []))
        if len(names) == len(original.targets[0].target.elements):
            return self.drop()
        (ot, ov), (ut, uv) = parts(original), parts(updated)
        return self.leave_Assign(original.with_changes(targets=[original.targets[0].with_changes(target=ot)], value=ov),
                                 updated.with_changes(targets=[updated.targets[0].with_changes(target=ut)], value=uv))

    def drop(self) -> cst.Expr:
        """A statement that goes: marked here (lines cannot go before every finding is located), its line
        removed by the modules pass's finish (:data:`DROP`)."""
        self.dropped = True
        return cst.Expr(cst.Call(cst.Name(DROP)))

    # --- `batch_range = torch.arange(B)[:, None]`, `x[batch_range, idx]` ----------------------------------------
    def batch_range_size(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        """``torch.arange(B)[:, None]`` (``.unsqueeze(1)``, ``.unsqueeze(-1)``, ``.view(-1, 1)``, ``.reshape(B, 1)``;
        a ``device=`` / ``dtype=`` keyword) of the batch size B: the examples' numbers as a column, which a gather
        ``x[batch_range, idx]`` pairs with each example's row of idx. B's node; None for anything else."""
        inner = None
        if isinstance(node, cst.Subscript) and len(node.slice) == 2:
            a, c = (e.slice for e in node.slice)
            if isinstance(a, cst.Slice) and a.lower is None and a.upper is None and a.step is None \
                    and isinstance(c, cst.Index) and code(c.value) == "None":
                inner = node.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and len(node.args) >= 1 \
                and not any(x.keyword or x.star for x in node.args):
            sizes = [code(x.value) for x in node.args]
            if node.func.attr.value == "unsqueeze" and sizes in (["1"], ["-1"]) \
                    or node.func.attr.value in ("view", "reshape") and len(sizes) == 2 and sizes[1] == "1":
                inner = node.func.value
        if not isinstance(inner, cst.Call) or self.ctx.imports.resolve(inner.func) != "torch.arange":
            return None
        positional = [x for x in inner.args if x.keyword is None]
        if len(positional) != 1 or positional[0].star or any(
                x.keyword is not None and x.keyword.value not in ("device", "dtype") for x in inner.args):
            return None
        size = positional[0].value
        if not self.is_batch_size(size, None):
            return None
        if isinstance(node, cst.Call) and node.func.attr.value in ("view", "reshape") \
                and code(node.args[0].value) != "-1" and not self.is_batch_size(node.args[0].value, None):
            return None
        return size

    def range_first(self, node: cst.Subscript) -> bool:
        """``x[batch_range, ...]``: the first index a name :meth:`batch_range_size` bound."""
        first = node.slice[0].slice if node.slice else None
        return isinstance(first, cst.Index) and isinstance(first.value, cst.Name) \
            and first.value.value in self.batch_ranges

    def range_index(self, original: cst.Subscript, what: str) -> cst.SubscriptElement | None:
        """``x[batch_range, idx]`` of x holding the batch axis first, idx a batched tensor holding it first with one
        axis per example (PyTorch's (B, k): row i of the result is x[i][idx[i]]): one example's gather is
        ``x[idx]``, whose index this returns. None (after an error) for anything else."""
        x, elems = original.value, list(original.slice)
        idx = elems[1].slice.value if len(elems) == 2 and isinstance(elems[1].slice, cst.Index) else None
        self.range_reads.add(id(elems[0].slice.value))
        xa = self.axis_of(x) if self.is_batched(x) else None
        ia = self.axis_of(idx) if idx is not None and self.is_batched(idx) else None
        if idx is None or xa != 0 or isinstance(xa, Merged) or ia != 0 or isinstance(ia, Merged) \
                or self.rank_of(idx) not in (1, None):  # (of another rank, PyTorch's (B, 1) column would not pair
            # each example with its row of idx: it raises, unless sizes happen to match; an unknown rank: the one case)
            self.error(original, f"{what}: {code(elems[0].slice.value)} numbers the examples; fwport follows "
                       "x[batch_range, idx] where x and idx are computed from the input, both hold the batch axis "
                       "first, and idx has one axis per example; write the gather for one example "
                       "(x[idx]) or do this outside the module, over the vmapped outputs")
            return None
        return elems[1].with_changes(comma=cst.MaybeSentinel.DEFAULT)

    def range_gather(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
        e = self.range_index(original, code(original))
        if e is None:
            return updated
        self.ctx.report(Severity.INFO, "batch-axis", f"{code(original)}: each example's rows at its indices; for "
                        f"one example x[idx]", original)
        return updated.with_changes(slice=[updated.slice[1].with_changes(comma=cst.MaybeSentinel.DEFAULT)])

    def range_update(self, target: cst.Subscript, value: cst.BaseExpression, method: str,
                     statement: cst.CSTNode | None = None):
        """``x[batch_range, idx] = v`` (``+=``): one example's ``x = x.at[idx].set(v)``, as :meth:`range_index`
        allows (x a name; one example's v has the rows of idx); else an error, left as written."""
        what = f"{code(target)} = ..." if method == "set" else f"{code(target)} {_AT_TEXT[method]}= ..."
        e = self.range_index(target, what) if isinstance(target.value, cst.Name) else None
        name = target.value.value if isinstance(target.value, cst.Name) else None
        if e is not None and statement is not None and name not in self.sole.get(id(statement), ()) \
                and name not in self.inputs and self.shared_write(statement, name, what):
            e = None
        if e is None:
            if name is None:
                self.error(target, f"{what}: fwport follows x[batch_range, idx] = v into a name x only")
            return cst.Assign([cst.AssignTarget(target)], value) if method == "set" else \
                cst.AugAssign(target, _AT_OPS[method], value)
        at = cst.Subscript(cst.Attribute(cst.Name(name), cst.Name("at")), [e])
        return cst.Assign([cst.AssignTarget(cst.Name(name))], _call(cst.Attribute(at, cst.Name(method)), [value]))

    def drawn(self, node: cst.BaseExpression) -> bool:
        """A per-example draw (:data:`DRAWS`), or a method chain on one (``torch.rand(B, n).argsort(dim=-1)``)."""
        while True:
            if id(node) in self.draws:
                return True
            if isinstance(node, cst.Call) and node.args and dotted_text(node.func) in (
                    "jnp.argsort", "jax.numpy.argsort"):
                node = node.args[0].value
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                node = node.func.value
            elif isinstance(node, cst.Attribute) and node.attr.value in ("indices", "values"):
                node = node.value  # `torch.rand(B, n).topk(k, dim=-1).indices`
            elif isinstance(node, cst.BinaryOperation) and not isinstance(node.operator, cst.MatrixMultiply):
                # `torch.ones(B, n) * 3`: with a number, or an array of no more axes than one example's part
                for a, o in ((node.left, node.right), (node.right, node.left)):
                    if self.drawn(a) and not self.is_batched(o) and (
                            isinstance(o, (cst.Integer, cst.Float)) or self.rank_of(o) is not None
                            and self.rank_of(o) <= self.rank_of(a)):
                        return True
                return False
            else:
                return False

    def batch_size_binding(self, node: cst.Assign) -> bool:
        """``batch = x.shape[0]`` (``x.size(0)``, or another name for the batch size) of a batched x: the name
        holds the batch size, which one example does not have; the statement goes, and each use of the name is
        translated where its per-example form is exact (:meth:`uses_batch_size`), else refused."""
        return len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) \
            and self.is_batch_size(node.value, None)

    def unpack_ranks(self, original: cst.Assign, updated: cst.Assign) -> None:
        """``out, (h, c) = self.lstm(x)``: the ranks of a layer's several results (layers.OUTPUT_RANKS)."""
        v = updated.value
        text = dotted_text(v.func) if isinstance(v, cst.Call) else None
        ranks = layers.OUTPUT_RANKS.get(self.modules.get(text[5:])) if text and text.startswith("self.") else None
        self.unpacked = {}
        if ranks is None or len(original.targets) != 1:
            return

        def bind(target, r):
            if isinstance(target, cst.Name) and isinstance(r, int):
                self.unpacked[target.value] = r
            elif isinstance(target, (cst.Tuple, cst.List)) and isinstance(r, tuple) and len(target.elements) == len(r):
                for e, ri in zip(target.elements, r):
                    bind(e.value, ri)

        bind(original.targets[0].target, ranks)
        self.rank.update(self.unpacked)

    def visit_Assign(self, node: cst.Assign) -> None:
        v = node.value
        for t in node.targets:  # `dtype = x.dtype`, `device, dtype = x.device, x.dtype`: names of a dtype
            pairs = [(t.target, v)] if not isinstance(t.target, (cst.Tuple, cst.List)) else list(zip(
                [e.value for e in t.target.elements], [e.value for e in v.elements])) \
                if isinstance(v, (cst.Tuple, cst.List)) and len(v.elements) == len(t.target.elements) else []
            for target, value in pairs:
                if isinstance(target, cst.Name):
                    if isinstance(value, cst.Attribute) and value.attr.value == "dtype":
                        self.dtype_names.add(target.value)
                    else:
                        self.dtype_names.discard(target.value)
        if self.batch_size_binding(node):
            self.kept.add(id(v))  # `batch = x.shape[0]`: removed by leave_Assign
        size = self.batch_range_size(v) if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) \
            else None
        if size is not None:
            self.kept.add(id(size))  # `batch_range = torch.arange(batch)[:, None]`: removed by leave_Assign
        for i in self.batch_size_elements(node):
            self.kept.add(id(v.elements[i].value))  # `r, batch = x, x.size(0)`: removed by leave_Assign
        if len(node.targets) == 1 and isinstance(node.targets[0].target, (cst.Tuple, cst.List)) \
                and isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "split" \
                and not any(isinstance(e, cst.StarredElement) for e in node.targets[0].target.elements):
            self.parts[id(v)] = len(node.targets[0].target.elements)  # `q, k, v = e.split(n, dim=2)`: 3 parts
        if len(node.targets) == 1 and isinstance(node.targets[0].target, (cst.Tuple, cst.List)) \
                and isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "size" \
                and not v.args:
            self.kept.add(id(v))  # `B, T, C = x.size()`: unpacked by leave_Assign

    def unpack_shape(self, original: cst.Assign, updated: cst.Assign):
        """``B, T, C = x.shape`` (or ``x.size()``) → ``T, C = x.shape``: B names the batch size (dropped
        where it sizes a view), and x has rank 2 per example."""
        v = original.value
        if isinstance(v, cst.Tuple):
            return self.unpack_starred_shape(original, updated)
        if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "size" and not v.args:
            x = v.func.value
        elif isinstance(v, cst.Attribute) and v.attr.value == "shape":
            x = v.value
        else:
            return None
        if len(original.targets) != 1 or not isinstance(original.targets[0].target, (cst.Tuple, cst.List)) \
                or not self.is_batched(x):
            return None
        elts = original.targets[0].target.elements
        b = self.plain_axis(x)
        if b is None or len(elts) <= b or not isinstance(elts[b].value, cst.Name) \
                or any(e.value.__class__ is cst.StarredElement for e in elts):
            return None
        self.batch_sizes.add(elts[b].value.value)
        if isinstance(x, cst.Name):
            self.rank[x.value] = len(elts) - 1
        rest = [e.with_changes(comma=cst.MaybeSentinel.DEFAULT) for i, e in enumerate(elts) if i != b]
        if not rest:
            return self.drop()
        target = cst.Tuple(rest, lpar=[], rpar=[]) if len(rest) > 1 else cst.Tuple(
            [rest[0].with_changes(comma=cst.Comma())], lpar=[], rpar=[])
        value = cst.Attribute(x, cst.Name("shape"))
        return updated.with_changes(targets=[updated.targets[0].with_changes(target=target)], value=value)

    def unpack_starred_shape(self, original: cst.Assign, updated: cst.Assign):
        """``b, n, _, h = *x.shape, self.heads`` (vit-pytorch) → ``n, _, h = *x.shape, self.heads``: the names the
        starred shape fills are as many as x's axes (the names no other value takes), and the one at the batch axis
        names the batch size, which one example's shape has not."""
        vs = original.value.elements
        if len(original.targets) != 1 or not isinstance(original.targets[0].target, (cst.Tuple, cst.List)):
            return None
        ts = original.targets[0].target.elements
        stars = [j for j, e in enumerate(vs) if isinstance(e, cst.StarredElement)]
        if len(stars) != 1 or any(isinstance(e, cst.StarredElement) for e in ts):
            return None
        j, sv = stars[0], vs[stars[0]].value
        if isinstance(sv, cst.Attribute) and sv.attr.value == "shape":
            x = sv.value
        elif isinstance(sv, cst.Call) and isinstance(sv.func, cst.Attribute) and sv.func.attr.value == "size" \
                and not sv.args:
            x = sv.func.value
        else:
            return None
        rank = len(ts) - (len(vs) - 1)  # PyTorch's rank of x
        b = self.plain_axis(x) if self.is_batched(x) else None
        if b is None or rank <= b or not isinstance(ts[j + b].value, cst.Name):
            return None
        self.batch_sizes.add(ts[j + b].value.value)
        if isinstance(x, cst.Name):
            self.rank[x.value] = rank - 1
        rest = [e for i, e in enumerate(updated.targets[0].target.elements) if i != j + b]
        rest[-1] = rest[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT if len(rest) > 1 else cst.Comma())
        target = updated.targets[0].target.with_changes(elements=rest)
        return updated.with_changes(targets=[updated.targets[0].with_changes(target=target)])

    # --- per-example ranks -------------------------------------------------------------------------
    def module_called(self, func: cst.BaseExpression) -> tuple[str, str] | None:
        """("class", C) for a call of an instance of this file's module class C (``self.block``, a loop name over a
        ModuleList of them); ("sequence", attr) for a Sequential attribute ranks.py follows; else None."""
        text = dotted_text(func) if self.file is not None else None
        if text is None:
            return None
        if text in self.instances:
            return "class", self.instances[text]
        if text.startswith("self.") and text.count(".") == 1 and text[5:] in self.file.sequences:
            return "sequence", text[5:]
        return None

    def visit_For(self, node: cst.For) -> None:
        """``for attn, ff in self.layers:`` over a ModuleList of this file's modules: the loop names are instances.
        A loop over a batched tensor (``for row in h``, ``zip(h, ...)``) is refused: it iterates over the examples."""
        self.over_examples(node.iter)
        it = dotted_text(node.iter) or ""
        if self.batch_whole and it.startswith("self.") and it[5:] in self.loop_lists:
            kinds = self.loop_lists[it[5:]]
            names = [node.target] if isinstance(node.target, cst.Name) else [e.value for e in node.target.elements]
            self.loop_names.update({n.value: k for n, k in zip(names, kinds)})
            return
        kinds = self.file.containers.get(it[5:]) if self.file is not None and it.startswith("self.") else None
        if kinds is None and self.file is not None and _dict_entry(node.iter) is not None:  # self.d["h"]
            kinds = self.file.containers.get(_dict_entry(node.iter))
        t = node.target
        if kinds is None:
            return
        if isinstance(t, cst.Name) and len(kinds) == 1:
            self.instances[t.value] = kinds[0]
        elif isinstance(t, (cst.Tuple, cst.List)) and len(t.elements) == len(kinds):
            for e, k in zip(t.elements, kinds):
                if isinstance(e.value, cst.Name):
                    self.instances[e.value.value] = k

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self.over_examples(node.iter)

    def first_axis_batched(self, node: cst.BaseExpression) -> bool:
        """Whether ``node`` is one tensor whose dimension 0 is the batch axis."""
        # (or holds it merged outermost there: len(x) / a loop over x count or pick the rows of every example)
        return self.is_batched(node) and self.axis_of(node) in (0, Grouped(0)) and self.is_tensor(node)

    def over_examples(self, it: cst.BaseExpression) -> None:
        """``for row in h`` / ``zip(h, ...)`` / ``enumerate(h)`` of a tensor holding the batch axis first: the loop is
        over the examples, which a per-example module does not have (left as written it would go over the example's
        first axis): an error."""
        parts = [it]
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in ("zip", "enumerate", "reversed"):
            parts = [a.value for a in it.args if a.keyword is None and not a.star]
        hit = next((p for p in parts if self.first_axis_batched(p)), None)
        if hit is not None:
            self.error(it, f"a loop over {code(hit)} goes over its dimension 0, the batch axis (one example per "
                       "iteration), which a per-example module does not have (left as written it would go over the "
                       "example's first axis): write the body for one example without the loop, or do this outside "
                       "the module, over the vmapped outputs")

    def rank_of(self, node: cst.BaseExpression) -> int | None:
        """The per-example rank of a translated expression, where it follows from known ranks."""
        if id(node) in self.draws:
            return self.draws[id(node)]
        if isinstance(node, cst.Name):
            return self.rank.get(node.value)
        if isinstance(node, cst.BinaryOperation):
            a, b = self.rank_of(node.left), self.rank_of(node.right)
            if isinstance(node.operator, cst.MatrixMultiply):
                return max(a, b) if a is not None and b is not None and min(a, b) >= 2 else None
            if a is None or b is None:  # a number, or an array without the batch axis, broadcasts into the other
                known = a if b is None else b
                other = node.right if b is None else node.left
                scalar = _scalar(other)  # `1.0 / math.sqrt(k.size(-1))`: a number from sizes
                while isinstance(other, cst.Subscript):  # `self.pos[:n]`: the array indexed, not its sizes
                    other = other.value
                return known if known is not None and (not self.is_batched(other) or scalar) else None
            return max(a, b)
        if isinstance(node, cst.Subscript):  # slices keep the rank, an integer index drops an axis
            v = node.value
            text = dotted_text(v.func) if isinstance(v, cst.Call) else None
            several = layers.OUTPUT_RANKS.get(self.modules.get(text[5:])) if text and text.startswith("self.") else None
            i = int_literal(node.slice[0].slice.value) if several and len(node.slice) == 1 \
                and isinstance(node.slice[0].slice, cst.Index) else None
            if i is not None and -len(several) <= i < len(several):  # `self.attn(q, k, v)[0]`: that result's
                return several[i] if isinstance(several[i], int) else None
            r = self.rank_of(node.value)
            if r is None:
                return None
            for e in node.slice:
                if isinstance(e.slice, cst.Index) and int_literal(e.slice.value) is not None:
                    r -= 1
                elif isinstance(e.slice, cst.Index) and code(e.slice.value) == "None":
                    r += 1
                elif len(node.slice) == 1 and isinstance(e.slice, cst.Index) and self.is_batched(e.slice.value) \
                        and self.rank_of(e.slice.value) is not None and self.axis_of(e.slice.value) == 0:
                    r += self.rank_of(e.slice.value) - 1  # `x[idx]`, one example's integer array idx: its axes first
                elif not (isinstance(e.slice, cst.Slice) or isinstance(e.slice, cst.Index)
                          and isinstance(e.slice.value, cst.Ellipsis)):
                    return None
            return r if r >= 0 else None
        if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:  # `(x == 0)`: elementwise, as `x + 0`
            return self.rank_of(cst.BinaryOperation(node.left, cst.Add(), node.comparisons[0].comparator))
        if isinstance(node, cst.IfExp):  # `a if c else b`: the rank both branches have
            a, b = self.rank_of(node.body), self.rank_of(node.orelse)
            return a if a == b else None
        if not isinstance(node, cst.Call):
            return None
        f = node.func
        text = dotted_text(f) or ""
        args = [a.value for a in node.args if a.keyword is None and not a.star]
        if text == "map" and len(args) == 2 and isinstance(args[0], cst.Lambda):  # each part: the lambda's body
            return self.rank_of(args[0].body)
        module = self.module_called(f)
        if module is not None:  # a module of this file, or a Sequential attribute: what ranks.py found it returns
            kind, name = module
            if kind == "class":
                return self.file.returns(name)
            return self.file.sequence_out(name, self.rank_of(args[0]) if args else None)
        q = self.ctx.imports.resolve(f)
        if q in ("einops.rearrange", "einops.reduce", "einops.repeat"):  # the axes its pattern's output names
            a, _ = _args(node, ("tensor", "pattern"))
            text = literal_value(a["pattern"], None) if "pattern" in a else None
            return pattern_rank(text) if isinstance(text, str) else None
        if q == "einops.einsum" and args:  # the names of its pattern's output (the pattern comes last)
            text = literal_value(args[-1], None)
            return len(text.split("->")[1].split()) if isinstance(text, str) and text.count("->") == 1 \
                and "..." not in text else None
        if text in ("jnp.argsort", "jax.numpy.argsort", "jax.lax.stop_gradient") and args:  # (x.argsort(dim), x.data)
            return self.rank_of(args[0])
        if q is not None:  # a source call the rules translate later
            if q == "torch.matmul" and len(args) == 2:
                text = "jnp.matmul"
            elif q.rsplit(".", 1)[-1] in ELEMENTWISE and args:
                return self.rank_of(args[0])
            else:
                return None
        if isinstance(f, cst.Attribute) and f.attr.value == "reshape":
            if len(args) == 1 and isinstance(args[0], (cst.Tuple, cst.List)):
                return len(args[0].elements)
            return len(args) if not any(a.star for a in node.args) else None
        if isinstance(f, cst.Call) and dotted_text(f.func) == "jax.vmap" and f.args:
            inner = dotted_text(f.args[0].value) or ""
            sub = self.modules.get(inner[5:]) if inner.startswith("self.") else None
            if _dict_entry(f.args[0].value) is not None:  # jax.vmap(self.d["k"])
                sub = self.modules.get(_dict_entry(f.args[0].value))
            r = self.rank_of(args[0]) if args else None
            if r is None and sub == "torch.nn.Embedding":
                r = 1
            if sub in RANK_CHANGE and r is not None:
                return r + RANK_CHANGE[sub]
            return r
        if text.startswith("self.") and self.file is not None and text[5:] in self.file.activations and len(args) == 1:
            return self.rank_of(args[0])  # self.activation(x), an attribute holding F.relu / F.gelu
        if (text.startswith("self.") and text.count(".") == 1 or _dict_entry(f) is not None) and args:
            sub = self.modules.get(text[5:] if text else _dict_entry(f))
            if sub in SAME_RANK or sub in RANK_CHANGE:
                r = self.rank_of(args[0])
                if r is None and sub == "torch.nn.Embedding.from_pretrained":
                    r = 1  # token ids, as for nn.Embedding (a scalar id gives a vector, which a vmapped layer refuses)
                if r is None and sub in FIXED_RANK:
                    r = FIXED_RANK[sub]  # Equinox's convolution / pooling takes one (channels, *spatial) example
                return None if r is None else r + RANK_CHANGE.get(sub, 0)
            return None
        if isinstance(f, cst.Attribute) and f.attr.value in ("mean", "sum", "max", "min", "astype") and self.is_batched(f.value):
            r = self.rank_of(f.value)
            kw = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
            if r is None or f.attr.value == "astype":
                return r
            if "axis" not in kw or args:  # over every axis, or arguments not read here
                return None
            keep = code(kw["keepdims"]) == "True" if "keepdims" in kw else False
            axes = kw["axis"].elements if isinstance(kw["axis"], cst.Tuple) else [kw["axis"]]
            return r if keep else r - len(axes)
        if text.startswith(("jax.nn.", "jnp.")) and args and text not in ("jnp.sum", "jnp.mean", "jnp.max", "jnp.min"):
            if text in ("jnp.concatenate", "jnp.stack"):  # the rank of any part whose rank is known
                parts = [e.value for e in args[0].elements] if isinstance(args[0], (cst.List, cst.Tuple)) else []
                r = next((r for r in map(self.rank_of, parts) if r is not None), None)
                return None if r is None else r + (text == "jnp.stack")
            if text == "jnp.split":  # a list of parts, each of the array's rank (read through unpacking, map)
                return self.rank_of(args[0])
            if text == "jnp.matmul" and len(args) == 2:
                a, b = self.rank_of(args[0]), self.rank_of(args[1])
                return max(a, b) if a is not None and b is not None and min(a, b) >= 2 else None
            if text == "jnp.einsum":  # the output's letters
                eq = literal_value(args[0], None)
                return len(eq.split("->")[1].replace(" ", "")) if isinstance(eq, str) and eq.count("->") == 1 \
                    and "..." not in eq else None
            if text == "jnp.swapaxes":
                return self.rank_of(args[0])
            if text == "jnp.broadcast_to" and len(args) == 2 and isinstance(args[1], cst.Tuple):
                return len(args[1].elements)
            if text == "jnp.expand_dims":
                r = self.rank_of(args[0])
                return None if r is None else r + 1
            if text == "jnp.transpose" and len(args) == 2 and isinstance(args[1], (cst.Tuple, cst.List)):
                return len(args[1].elements)  # (a permutation names every axis)
            return self.rank_of(args[0]) if text.startswith("jax.nn.") or text == "jnp.transpose" else None
        return None

    def vmapped(self, name: str, updated: cst.Call, original: cst.Call) -> cst.BaseExpression:
        """``self.fc(h)`` on an example of higher rank than the layer takes → ``jax.vmap(self.fc)(h)``."""
        if self.batch_whole:
            return self.batch_layer(name, updated, original)
        sub = self.modules.get(name)
        want = LAYER_RANK.get(sub)
        args = [a for a in updated.args if a.keyword is None]
        if want is None or len(args) != 1:
            return updated
        r = self.rank_of(args[0].value)
        if r is None and sub == "torch.nn.Embedding":
            r = 1  # token ids: PyTorch looks up arrays of them, Equinox one id at a time (vmap of a scalar fails loudly)
        if r is None and self.file is not None and self.file.blind and (
                sub == "torch.nn.Linear" or sub == "torch.nn.LayerNorm" and name in _vector_norms(self.ctx)):
            return self.any_rank(updated, original, f"self.{name}", sub)
        if r is None and sub in ("torch.nn.Linear", "torch.nn.LayerNorm"):
            self.rank_unknown(original, f"self.{name}", sub)
        if r is None or r <= want:
            return updated
        func = updated.func
        for _ in range(r - want):
            func = cst.Call(self.ctx.spell("jax.vmap"), [cst.Arg(func)])
        return updated.with_changes(func=func)

    def batch_layer(self, name: str, updated: cst.Call, original: cst.Call) -> cst.BaseExpression:
        """In a batched module, a per-example layer given a batch: a Linear or LayerNorm (one vector in Equinox, every
        leading axis in PyTorch) → ``jnp.vectorize(self.fc, signature="(n)->(m)")(x)``, an Embedding (one index) →
        ``jnp.vectorize(self.emb, signature="()->(d)")(ids)``: exact at any rank; a convolution (one example of a
        fixed rank) → ``jax.vmap(self.conv)(x)`` over the batch axis. Other layers (elementwise) as written."""
        sub = self.modules.get(name)
        args = [a for a in updated.args if a.keyword is None]
        if sub not in LAYER_RANK or len(args) != 1 or len(updated.args) != 1:
            return updated
        if sub in FIXED_RANK:
            return updated.with_changes(func=cst.Call(self.ctx.spell("jax.vmap"), [cst.Arg(updated.func)]))
        signature = {"torch.nn.Linear": '"(n)->(m)"', "torch.nn.LayerNorm": '"(n)->(n)"',
                     "torch.nn.Embedding": '"()->(d)"'}[sub]
        return updated.with_changes(func=cst.Call(self.ctx.spell("jax.numpy.vectorize"), [
            cst.Arg(updated.func), cst.Arg(cst.SimpleString(signature), keyword=cst.Name("signature"), equal=_EQ)]))

    def batch_method_refused(self, original: cst.Call) -> bool:
        """In a batched module (PyTorch's layout, tensor methods by tensor_methods.py as outside the classes), a
        tensor method a jax array has under the same name with another meaning, which that table does not write:
        ``x.flatten(0, 1)`` (jax's takes an order), ``x.repeat(1, n)`` (jax's repeats elements; PyTorch's tiles),
        ``x.split(2, dim=1)`` (jax's takes sections), ``x.unfold(...)``: an error, never left as written."""
        f = original.func
        name = f.attr.value
        if isinstance(f.value, cst.Name) and f.value.value == "self" or not original.args:
            return False
        first = original.args[0].value
        if name == "split" and not (isinstance(first, cst.Integer) or any(
                a.keyword is not None and a.keyword.value == "dim" for a in original.args)):
            return False  # (a string's split)
        if name not in ("flatten", "repeat", "split", "unfold"):
            return False
        self.error(original, f"{code(original)}: in a batched module (PyTorch's layout) .{name} with arguments is not "
                   f"translated yet, and a jax array's .{name} means something else; write its jnp form "
                   "(x.reshape(...), jnp.tile, jnp.split at indices, ...)", "unsupported-construct")
        return True

    def _mapped_args(self, original: cst.Call, updated: cst.Call) -> list[bool] | None:
        """For a per-example module called from a batched module (``batch_module``, ``batch_loop``): which positional
        arguments the examples share (a number or a literal: ``in_axes=None``), the rest mapped over the batch axis;
        None, with an error, where the call cannot be mapped (a keyword, a star, no argument, no tensor argument)."""
        if any(a.star or a.keyword is not None for a in updated.args) or not updated.args:
            self.error(original, f"{code(original)}: a per-example module called from a batched module is mapped over "
                       "the batch axis of its positional arguments; write them so (no keyword, no star)",
                       "unsupported-construct")
            return None
        shared = [_scalar(a.value) or literal_value(a.value, NOT_LITERAL) is not NOT_LITERAL for a in updated.args]
        if all(shared):
            self.error(original, f"{code(original)}: a per-example module called from a batched module with no "
                       "tensor argument to map over the batch axis", "unsupported-construct")
            return None
        return shared

    def batch_module(self, original: cst.Call, updated: cst.Call, keyed: bool) -> cst.BaseExpression:
        """In a batched module, ``self.block(x, n)`` of a per-example module of the file → ``jax.vmap(self.block)(x)``
        over the batch axis, or ``jax.vmap(lambda _w0, _w1: self.block(_w0, _w1, key=...), in_axes=(0, None),
        axis_name="batch")(x, n)``: a number or a literal shared by the examples, and where the module takes a key one
        per example, ``jax.random.fold_in(key, jax.lax.axis_index("batch"))`` (each its own dropout, as PyTorch's)."""
        shared = self._mapped_args(original, updated)
        if shared is None:
            return updated
        vmap = self.ctx.spell("jax.vmap")
        if not keyed and not any(shared):
            return updated.with_changes(func=cst.Call(vmap, [cst.Arg(updated.func)]))
        params = [f"_w{i}" for i in range(len(updated.args))]
        args = [a.with_changes(value=cst.Name(p)) for a, p in zip(updated.args, params)]
        if keyed:
            args.append(cst.Arg(expr(f"None if key is None else {self.ctx.spell_text('jax.random.fold_in')}(key, "
                                     f'{self.ctx.spell_text("jax.lax.axis_index")}("batch"))'),
                                keyword=cst.Name("key"), equal=_EQ))
        fn = cst.Lambda(cst.Parameters([cst.Param(cst.Name(p)) for p in params]), updated.with_changes(args=_commas(args)))
        kw = {"axis_name": cst.SimpleString('"batch"')} if keyed else {}
        if any(shared):
            kw["in_axes"] = cst.Tuple([cst.Element(cst.Name("None") if x else cst.Integer("0")) for x in shared])
        return _call(_call(vmap, [fn], **kw), [a.value for a in updated.args])

    def batch_loop(self, original: cst.Call, updated: cst.Call, cls: str) -> cst.BaseExpression:
        """In a batched module, ``ff(x)`` of a loop name over a ModuleList (``for attn, ff in self.layers``): a
        batched module of the file as written (``key=key`` where it takes one); a per-example one mapped over the
        batch, ``jax.vmap(lambda _w0, _k: ff(_w0, key=_k))(x, None if key is None else jax.random.split(key,
        num=x.shape[0]))`` where it takes a key: the keys drawn outside the mapped function, so that the loop gives each
        layer its own (modules._LoopKeys splits the key per iteration) and each example its own."""
        keyed = cls in self.keyed_classes
        key_arg = cst.Arg(cst.Name("key"), keyword=cst.Name("key"), equal=_EQ)
        if cls in self.whole_classes:
            if not keyed or any(a.keyword is not None and a.keyword.value == "key" for a in updated.args):
                return updated
            site = updated.with_changes(args=[*_commas(updated.args), key_arg])
            self.key_sites.append(site)
            return site
        shared = self._mapped_args(original, updated)
        if shared is None:
            return updated
        vmap = self.ctx.spell("jax.vmap")
        if not keyed and not any(shared):
            return updated.with_changes(func=cst.Call(vmap, [cst.Arg(updated.func)]))
        params = [f"_w{i}" for i in range(len(updated.args))]
        args = [a.with_changes(value=cst.Name(p)) for a, p in zip(updated.args, params)]
        values = [a.value for a in updated.args]
        axes = [cst.Name("None") if x else cst.Integer("0") for x in shared]
        if keyed:
            params.append("_k")
            args.append(cst.Arg(cst.Name("_k"), keyword=cst.Name("key"), equal=_EQ))
            first = values[shared.index(False)]
            values.append(expr(f"None if key is None else {self.ctx.spell_text('jax.random.split')}(key, "
                               f"num={_atom_code(first)}.shape[0])"))
            axes.append(cst.Integer("0"))
        fn = cst.Lambda(cst.Parameters([cst.Param(cst.Name(p)) for p in params]), updated.with_changes(args=_commas(args)))
        kw = {"in_axes": cst.Tuple([cst.Element(x) for x in axes])} if any(shared) else {}
        out = _call(_call(vmap, [fn], **kw), values)
        if keyed:
            self.key_sites.append(out)
        return out

    def functional_dropout(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``F.dropout(x, p, training=self.training)`` → ``eqx.nn.Dropout(p, inference=self.inference)(x, key=key)``
        (modes.py has made self.training ``not self.inference``): an inline dropout given the module's key, as a
        Dropout submodule's call is; ``training`` left out is PyTorch's True (dropout in eval mode too);
        ``training=False`` is the input itself."""
        a, unknown = _args(updated, ("input", "p", "training", "inplace"))
        if unknown or "input" not in a:
            self.error(original, f"{code(original)}: F.dropout takes input, p, training and inplace: write "
                       "them out (a starred or unknown argument is not followed)", "unsupported-construct")
            return updated
        training = a.get("training")
        t = literal_value(training, NOT_LITERAL) if training is not None else True
        if t is False:
            return a["input"]
        if t is True:
            inference = None
        elif isinstance(training, cst.UnaryOperation) and isinstance(training.operator, cst.Not):
            inference = training.expression.with_changes(lpar=[], rpar=[])
        else:
            inference = cst.UnaryOperation(cst.Not(), training)
        p = a.get("p", cst.Float("0.5"))
        layer = cst.Call(self.ctx.spell("equinox.nn.Dropout"),
                         [cst.Arg(p)] + ([cst.Arg(inference, keyword=cst.Name("inference"), equal=_EQ)]
                                         if inference is not None else []))
        out = cst.Call(layer, [cst.Arg(a["input"]), cst.Arg(cst.Name("key"), keyword=cst.Name("key"), equal=_EQ)])
        if inference is None:
            self.ctx.report(Severity.INFO, "key-added", f"{code(original)}: training is left out, which PyTorch takes "
                            "as True: it drops in eval mode too (and needs a key there), as written", original)
        self.key_sites.append(out)
        return out

    def users_input(self, value: cst.BaseExpression) -> bool:
        """``value`` is this forward's own parameter, in a module whose inputs are the user's (nothing in the file
        feeds it a value of unknown rank): an Outer handing its input to an inner block passes what the user gave."""
        return (isinstance(value, cst.Name) and value.value in self.inputs
                and (self.file is None or not self.file.blind))

    def any_rank(self, updated: cst.Call, original: cst.Call, what: str, layer: str) -> cst.BaseExpression:
        """A Linear, or a LayerNorm over the last axis, given a value whose per-example rank is not known, in a module
        another module of this file feeds a value of unknown rank (ranks.py: ``blind``) → ``jnp.vectorize(self.fc,
        signature="(n)->(m)")(x)`` (a LayerNorm: ``"(n)->(n)"``): PyTorch's layer maps over every leading axis,
        Equinox's takes one vector; vectorize maps it over however many leading axes the value has (none for a
        vector), so the call is exact at any rank."""
        kind = layer.rsplit(".", 1)[-1]
        signature = '"(n)->(m)"' if kind == "Linear" else '"(n)->(n)"'
        self.ctx.report(Severity.INFO, "idiom-replaced", f"{what} ({kind}) gets {code(original.args[0].value)}, whose "
                        f"per-example rank fwport cannot infer: called through jnp.vectorize(..., signature={signature}), "
                        f"which maps it over the leading axes as PyTorch's {kind} does (tokens), or calls it once on a "
                        "vector", original)
        vectorize = cst.Call(self.ctx.spell("jax.numpy.vectorize"), [
            cst.Arg(updated.func), cst.Arg(cst.SimpleString(signature), keyword=cst.Name("signature"), equal=_EQ)])
        return updated.with_changes(func=vectorize)

    def rank_unknown(self, node: cst.Call, what: str, layer: str) -> None:
        """A per-vector layer (Linear, LayerNorm) given a value whose per-example rank is not known, in a module
        another module of this file feeds a value of unknown rank (ranks.py): a warning, since Equinox's layer takes
        one vector and tokens need jax.vmap. (In a model nothing in the file calls, or one handed the user's input
        through, the input is the user's: one vector per example is assumed there, and said once per file, at the
        first such call the output keeps (not in ranks.py's probes): a sequence input (N, L, features) fails there.)"""
        if self.file is None or not self.file.blind:
            from fwport.packs.torch2jax.ranks import _Probe
            if isinstance(self.ctx, _Probe) or self.ctx.analyses.get(VECTOR_ASSUMED):
                return
            self.ctx.analyses[VECTOR_ASSUMED] = True
            self.ctx.report(Severity.WARNING, "batch-axis", f"{what} ({layer.rsplit('.', 1)[-1]}) gets "
                            f"{code(node.args[0].value) if node.args else 'a value'}, from the user's input, whose "
                            "per-example rank nothing in the file says: the translation takes one vector per example "
                            "((N, features) batches, as an MLP's); an input with more axes per example (tokens: "
                            f"(N, L, features)) fails here at run time: then call it jnp.vectorize({what}, "
                            'signature="(n)->(m)")(...) (LayerNorm: "(n)->(n)"), as for every per-vector layer after it',
                            node)
            return
        self.ctx.report(Severity.WARNING, "batch-axis", f"{what} ({layer.rsplit('.', 1)[-1]}) gets "
                        f"{code(node.args[0].value) if node.args else 'a value'}, whose per-example rank fwport "
                        "cannot infer: it is called as written, which takes one vector; if each example holds several "
                        f"(tokens), write jax.vmap({what})(...)", node)

    def leave_BinaryOperation(self, original, updated) -> cst.BaseExpression:
        """``x + y`` where x holds the batch axis elsewhere than first: y must hold it at the same place, or be a number
        (an array not computed from the input broadcasts from the right, and may meet the batch axis: refused)."""
        shared = self.shared_constant(original, updated)
        if shared is not None:
            return shared
        read = self.buffer_read(original, updated)
        if read is not None:
            return read
        if not self.axes_moved():
            return updated
        a, b = self.axis_of(updated.left), self.axis_of(updated.right)
        moved = [x for x in (a, b) if x is not None and (x != 0 or isinstance(x, Merged))]
        if not moved:
            return updated
        if a is not None and b is not None and a != b or a == UNKNOWN or b == UNKNOWN:
            self.error(original, f"{code(original)}: the operands hold the batch axis at different places ({axis_text(a)}, "
                       f"{axis_text(b)}); move one of them (.transpose) so that they agree")
            return updated
        other = updated.right if a is not None and b is None else updated.left if b is not None and a is None else None
        if other is not None and self.fits_after(other, updated.left if other is updated.right else updated.right,
                                                 moved[0]):
            return self.moved(updated, moved[0])
        if other is not None and not _scalar(other) and not isinstance(other, (cst.Integer, cst.Float, cst.Name)) \
                or other is not None and isinstance(other, cst.Name) and other.value not in ("None",) \
                and self.rank_of(other) is not None and self.rank_of(other) > 1:
            self.error(original, f"{code(original)}: {code(other)} is not computed from the input and broadcasts against "
                       f"a tensor whose batch axis is dimension {axis_text(moved[0])}, from the right: it may meet the "
                       "batch axis; write it for one example")
            return updated
        return self.moved(updated, moved[0])

    def fits_after(self, other: cst.BaseExpression, x: cst.BaseExpression, b) -> bool:
        """Whether ``other``, not computed from the input, broadcasts against ``x`` (holding the batch axis merged
        into an axis, :class:`Merged` / :class:`Grouped`: one example has PyTorch's rank) without meeting that axis: a
        number ``__init__`` computes (``self.scale = dim_head ** -0.5``), or an array of known rank below the axes
        after it (max_vit's bias ``'h i j'`` against ``'(b x y) h i j'``)."""
        if not isinstance(b, Merged):
            return False
        text = dotted_text(other) or ""
        if text.startswith("self.") and text.count(".") == 1 and self.file is not None and text[5:] in self.file.numbers:
            return True
        r, rx = self.rank_of(other), self.rank_of(x)
        if r is None and text.startswith("self.") and text.count(".") == 1 and self.file is not None:
            r = self.file.parameters.get(text[5:])  # nn.Parameter(torch.randn(heads, n, n)): 3
        return r is not None and rx is not None and r <= rx - int(b) - 1

    def buffer_read(self, original: cst.BinaryOperation, updated: cst.BinaryOperation, at: cst.CSTNode | None = None):
        """``x + self.pe[:x.size(0), :]``: a slice of a buffer whose rank and size-1 axes __init__ writes out
        (ranks.ClassRanks.buffers) meets a tensor computed from the input. PyTorch broadcasts from the right, so the
        buffer's axis that lines up with x's batch axis is known: of size 1 (word_language_model's (max_len, 1, E)
        against (L, N, E); a batch-first (1, max_len, E) against (N, L, E)), one example leaves it out (→
        ``self.pe[:x.shape[0], 0, :]``, ``self.pe[0, :x.shape[0]]``); of another size, it would meet the batch axis: an
        error. A buffer no longer than x's axes after the batch axis broadcasts as written. None: not such an operation."""
        if not isinstance(original.operator, cst.MatrixMultiply):
            for t, o in ((original.right, original.left), (original.left, original.right)):
                text = dotted_text(t.value) if isinstance(t, cst.Subscript) else None
                if text and text.startswith("self.") and text.count(".") >= 2 and len(t.slice) >= 2 \
                        and all(isinstance(e.slice, cst.Slice) for e in t.slice) and self.is_batched(o) \
                        and not self.is_batched(t):
                    # `tokens += self.encoder.pos_embedding[:, 1:n + 1]` (MAE): an array of another module (given to
                    # __init__) whose shape this file does not write out, sliced over several axes: its first may
                    # be PyTorch's size-1 batch axis, which one example's sum would keep (a rank too many)
                    self.error(at or original, f"{code(original)}: {text} is an array of another module whose shape fwport "
                               "does not know, sliced over several axes: which of its axes lines up with the batch "
                               f"axis is not known; write it for one example ({text}[0, ...] where its first axis is "
                               "PyTorch's size-1 batch axis)")
                    return updated
        if self.file is None or not self.file.buffers or isinstance(original.operator, cst.MatrixMultiply):
            return None
        def buffer(node) -> str:  # `self.pe[...]`: the buffer's name (the slice may read the input's sizes)
            t = (dotted_text(node.value) or "") if isinstance(node, cst.Subscript) else ""
            return t[5:] if t.startswith("self.") and t[5:] in self.file.buffers else ""
        lb = bool(buffer(original.right)) and self.is_batched(original.left)
        if not lb and not (buffer(original.left) and self.is_batched(original.right)):
            return None
        source, other = (original.right, updated.right) if lb else (original.left, updated.left)
        if not isinstance(other, cst.Subscript):
            return None
        base = f"self.{buffer(source)}"
        ones, r = self.file.buffers[base[5:]]
        elems = list(other.slice)
        if len(elems) > r or not all(isinstance(e.slice, cst.Slice) for e in elems):
            return None  # an index or an ellipsis: the axes it keeps are not followed here
        batched = updated.left if lb else updated.right
        b = self.axis_of(batched) if self.axes_moved() else 0
        rx = self.rank_of(batched)
        if type(b) is not int or b < 0 or rx is not None and r > rx + 1:
            return None
        if rx is None:
            if not b:
                return None
            self.error(original, f"{code(original)}: {base} (rank {r}) broadcasts against a tensor computed from the input "
                       f"whose batch axis is dimension {b} and whose rank fwport does not know, so which axis of the "
                       "buffer lines up with the batch axis is not known; write the buffer for one example, or give the "
                       "input's rank (a layer of known rank before it)")
            return updated
        k = b - (rx + 1 - r)  # the buffer's axis that lines up with the batch axis
        if k < 0:  # the buffer lines up with axes after the batch axis only: one example's broadcast is PyTorch's
            return self.moved(updated, b) if b else updated
        full = k >= len(elems) or (elems[k].slice.lower is None and elems[k].slice.upper is None
                                    and elems[k].slice.step is None)
        if k not in ones or not full:
            self.error(original, f"{code(original)}: {base} (rank {r}) broadcasts against a tensor computed from the input "
                       f"(its batch axis is dimension {b} of {rx + 1}), and its axis {k} lines up with the batch axis, "
                       f"which one example does not have{'' if k in ones else ': __init__ does not build that axis of size 1'}; "
                       "write the buffer for one example (without the batch's axis) or index that axis away")
            return updated
        colon = cst.SubscriptElement(cst.Slice(None, None))
        new = elems[:k] + [colon] * (k - len(elems)) + [cst.SubscriptElement(cst.Index(cst.Integer("0")))] + elems[k + 1:]
        new = [e.with_changes(comma=cst.MaybeSentinel.DEFAULT if i == len(new) - 1 else cst.Comma(
            whitespace_after=cst.SimpleWhitespace(" "))) for i, e in enumerate(new)]
        other = other.with_changes(slice=new)
        out = updated.with_changes(right=other) if lb else updated.with_changes(left=other)
        return self.moved(out, b) if b else out

    def constant_rank(self, node: cst.BaseExpression) -> tuple[int, bool] | None:
        """PyTorch's rank of a (source) tensor built from a literal in this forward, and whether its first size is 1:
        ``torch.LongTensor([[1, 2, 3]])`` (2, True), an Embedding of it (3, True), a name bound to one; None otherwise."""
        if isinstance(node, cst.Name):
            return self.constants.get(node.value)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and not node.args \
                and node.func.attr.value in ("long", "float", "cuda", "cpu", "detach", "int", "double"):
            return self.constant_rank(node.func.value)
        if not isinstance(node, cst.Call) or not node.args or node.args[0].keyword is not None or node.args[0].star:
            return None
        text = dotted_text(node.func) or ""
        if text.startswith("self.") and self.modules.get(text[5:]) in RANK_CHANGE:
            inner = self.constant_rank(node.args[0].value)
            return None if inner is None else (inner[0] + 1, inner[1])
        if self.ctx.imports.resolve(node.func) not in LITERAL_TENSORS:
            return None
        v, r, first = node.args[0].value, 0, None
        while isinstance(v, (cst.List, cst.Tuple)) and v.elements:
            first = len(v.elements) if first is None else first
            r, v = r + 1, v.elements[0].value
        return (r, first == 1) if r else None

    def shared_constant(self, original: cst.BinaryOperation, updated: cst.BinaryOperation):
        """``emb(x) + self.pos(torch.LongTensor([[1, 2, 3]]))``: a literal-built tensor (no batch axis) meets a batched
        one. Of a lower rank than PyTorch's batched operand it broadcasts against one example's trailing axes (as
        written); of the same rank with a first size 1 (a batch of one) that axis is the batch axis's, which one
        example leaves out (→ ``c[0]``); anything else would broadcast against the wrong axes: refused. None: not
        such an operation."""
        if isinstance(original.operator, cst.MatrixMultiply):
            return None
        lb, rb = self.is_batched(original.left), self.is_batched(original.right)
        if lb == rb:
            return None
        const = self.constant_rank(original.right if lb else original.left)
        if const is None:
            return None
        batched = updated.left if lb else updated.right
        b = self.axis_of(batched) if self.axes_moved() else 0
        r = self.rank_of(batched)
        rank, one = const
        if b == 0 and not isinstance(b, Merged) and r is not None and rank <= r:
            return None  # trailing axes only: one example's broadcast is PyTorch's
        if b == 0 and not isinstance(b, Merged) and r is not None and rank == r + 1 and one:
            c = updated.right if lb else updated.left
            c = cst.Subscript(_atom(c), [cst.SubscriptElement(cst.Index(cst.Integer("0")))])
            return updated.with_changes(right=c) if lb else updated.with_changes(left=c)
        what = "its rank is not known" if r is None else f"its batch axis is dimension {axis_text(b)} of {r + 1}" \
            if isinstance(b, int) and not isinstance(b, Merged) and b >= 0 else f"its batch axis is {axis_text(b)}"
        self.error(original, f"{code(original)}: {code(original.right if lb else original.left)} (rank {rank}, built "
                   f"from a literal) broadcasts against a tensor computed from the input ({what}), and may meet its "
                   "batch axis, which one example does not have; write the constant for one example (without a "
                   "leading batch-of-one axis) or give the input's rank")
        return updated

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if self.range_first(node):  # (the read range_index takes, before leave_Name sees it)
            self.range_reads.add(id(node.slice[0].slice.value))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        t = node.target
        if isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name) and t.value.value in self.batched \
                and type(node.operator) in _AT_METHODS and self.is_tensor(t.value):
            self.kept.add(id(t))  # indexed_update reads its index

    def shared_write(self, statement: cst.CSTNode, name: str, what: str) -> bool:
        """Whether ``what``, a write into the tensor ``name`` (``x[idx] = v``, ``x += v``), is refused (an error)
        because another name may share its memory at that statement (a view of it, or the tensor it views:
        inplace.sole_holders): PyTorch writes into that one too, which rebinding ``name`` cannot. A parameter of the
        forward is let through: the write changes the caller's tensor, and this forward's outputs are the same."""
        if name in self.sole.get(id(statement), ()) or name in self.inputs:
            return False
        self.error(statement, f"{what}: PyTorch writes into {name} in place, and {name} may share its memory with "
                   "another tensor here (a view or slice of one, or one viewed since it was made), which changes too; "
                   f"a jax array is immutable and rebinding {name} cannot reach that one: write the new value out of "
                   f"place ({name} = {name} + v, {name} = {name}.at[idx].set(v)) after copying ({name} = "
                   f"{name}.clone()) if only {name} should change, or rebind each tensor sharing it",
                   "unsupported-construct")
        return True

    def leave_AugAssign(self, original: cst.AugAssign, updated: cst.AugAssign):
        t = original.target
        if self.batch_whole and isinstance(t, cst.Subscript):
            written = self.whole_write(original, t, updated.value, _AT_METHODS.get(type(original.operator)))
            if written is not None:
                return written
        if isinstance(t, cst.Name) and t.value in self.batched and self.is_tensor(t) \
                and self.shared_write(original, t.value, f"{t.value} {code(original.operator).strip()} ..."):
            return updated
        if id(t) in self.kept and isinstance(t, cst.Subscript) and self.range_first(t):
            return self.range_update(t, updated.value, _AT_METHODS[type(original.operator)], original)
        if id(t) in self.kept and isinstance(t, cst.Subscript):
            return self.indexed_update(t, updated.value, _AT_METHODS[type(original.operator)], original)
        if isinstance(t, cst.Name) and type(original.operator) in _AUG_BINARY:  # `x += self.pos_embedding[:, :n]`
            op = _AUG_BINARY[type(original.operator)]()
            read = self.buffer_read(cst.BinaryOperation(t, op, original.value),
                                    cst.BinaryOperation(updated.target, op, updated.value), original)
            if read is not None:
                updated = updated.with_changes(value=read.right)
        if isinstance(original.target, cst.Name) and self.is_batched(original.value):
            self.batched.add(original.target.value)
        return updated

    def whole_write(self, statement, target: cst.Subscript, value: cst.BaseExpression, method: str | None):
        """In a batched module (PyTorch's layout, every axis as written): ``x[idx] = v`` (``x[idx] += v``) of a tensor
        the forward made (torch.zeros(...), torch.empty(...): _new_tensor_names) and that no other name shares at
        that statement (inplace.sole_holders) → ``x = x.at[idx].set(v)`` (``.add(v)``; ``x[x < 0] = v`` → ``x =
        jnp.where(x < 0, v, x)``), the index as written; a write into any other tensor (the forward's input, a view,
        one shared since it was made): an error, left as written. None where ``x`` is not known to be a tensor (a
        list, a dict: their item assignment stays)."""
        if not isinstance(target.value, cst.Name) or target.value.value == "self":
            return None
        name = target.value.value
        is_new = name in getattr(self, "new_tensors", ())
        if not is_new and name not in (self.tensor_reads or ()):
            return None
        what = f"{code(target)} = ..." if method == "set" else f"{code(target)} {_AT_TEXT.get(method, '?')}= ..."
        first = target.slice[0].slice if len(target.slice) == 1 else None
        mask = first.value if isinstance(first, cst.Index) and isinstance(first.value, cst.Comparison) else None
        if not is_new or name not in self.sole.get(id(statement), ()) or method is None \
                or mask is not None and method != "set":
            self.error(statement, f"{what}: a jax array has no item assignment, and {name} is not a tensor this "
                       "forward made and alone holds here (the forward's input, a view or slice of another, one shared "
                       "since it was made, or an operator .at has not), whose rebinding would not reach what shares it: "
                       f"write it out of place by hand ({name} = {name}.at[idx].set(v) after {name} = {name}.clone(), "
                       "rebinding each tensor sharing it)", "unsupported-construct")
            return cst.Assign([cst.AssignTarget(target)], value) if method == "set" else None
        if mask is not None:
            return cst.Assign([cst.AssignTarget(cst.Name(name))],
                              _call(self.ctx.spell("jax.numpy.where"), [mask, value, cst.Name(name)]))
        at = cst.Subscript(cst.Attribute(cst.Name(name), cst.Name("at")), target.slice)
        return cst.Assign([cst.AssignTarget(cst.Name(name))], cst.Call(cst.Attribute(at, cst.Name(method)), [cst.Arg(value)]))

    def indexed_update(self, target: cst.Subscript, value: cst.BaseExpression, method: str,
                       statement: cst.CSTNode | None = None):
        """``x[:, i] = v`` / ``x[..., j] += v`` of a batched tensor x (a jax array is not assigned into) → ``x =
        x.at[i].set(v)`` / ``x = x.at[..., j].add(v)``, the index written for one example (the batch axis's ``:``
        dropped); ``x[x < 0] = v`` → ``x = jnp.where(x < 0, v, x)``. An index that picks examples (a first index
        other than ``:`` / ``...``), or x holding the batch axis elsewhere than first: an error, left as written."""
        name = target.value.value
        elems = list(target.slice)
        first = elems[0].slice
        full = isinstance(first, cst.Slice) and first.lower is None and first.upper is None and first.step is None
        ellipsis = isinstance(first, cst.Index) and isinstance(first.value, cst.Ellipsis)
        b = self.axis_of(target.value) if self.axes_moved() else 0
        what = f"{code(target)} = ..." if method == "set" else f"{code(target)} {_AT_TEXT[method]}= ..."
        mask = first.value if len(elems) == 1 and isinstance(first, cst.Index) \
            and isinstance(first.value, cst.Comparison) else None
        if b != 0 or isinstance(b, Merged):
            self.error(target, f"{what}: {name} holds the batch axis at dimension {axis_text(b)}: write it for one "
                       "example, or move the batch axis first")
            return cst.Assign([cst.AssignTarget(target)], value) if method == "set" else \
                cst.AugAssign(target, _AT_OPS[method], value)
        shared = statement is not None and name not in self.sole.get(id(statement), ()) and name not in self.inputs
        if mask is not None and method == "set" and all(
                isinstance(o, cst.Name) and o.value == name or not names_in(o)
                for o in (mask.left, *(c.comparator for c in mask.comparisons))):
            # a mask of x's own elements against numbers (x < 0): x's shape, one example's mask elementwise
            if shared and self.shared_write(statement, name, what):  # a view of another, or viewed since
                return cst.Assign([cst.AssignTarget(target)], value)
            return cst.Assign([cst.AssignTarget(cst.Name(name))],
                              _call(self.ctx.spell("jax.numpy.where"), [mask, value, cst.Name(name)]))
        if not (full or ellipsis) or len(elems) == 1 and full:
            if not (len(elems) == 1 and full):
                self.error(target, f"{what}: the first index is on dimension 0 of {name}, the batch axis, which a "
                           "per-example module does not have (it picks examples): write ':' there (every example) "
                           "and the rest for one example, or do this outside the module")
                return cst.Assign([cst.AssignTarget(target)], value) if method == "set" else \
                    cst.AugAssign(target, _AT_OPS[method], value)
        if shared and self.shared_write(statement, name, what):  # a view of another, or viewed since
            return cst.Assign([cst.AssignTarget(target)], value) if method == "set" else \
                cst.AugAssign(target, _AT_OPS[method], value)
        rest = elems if ellipsis else elems[1:] if full and len(elems) > 1 else elems
        rest = [e.with_changes(comma=cst.MaybeSentinel.DEFAULT) if i == len(rest) - 1 else e for i, e in enumerate(rest)]
        at = cst.Subscript(cst.Attribute(cst.Name(name), cst.Name("at")), rest)
        return cst.Assign([cst.AssignTarget(cst.Name(name))], _call(cst.Attribute(at, cst.Name(method)), [value]))

    # --- reporting -----------------------------------------------------------------------------------
    def error(self, node: cst.CSTNode, message: str, code_: str = "batch-axis") -> None:
        self.ctx.report(Severity.ERROR, code_, message, node)

    def shift(self, node: cst.CSTNode, dim: cst.BaseExpression | None, what: str, b=0,
              rank: int | None = None) -> cst.BaseExpression | None:
        """The per-example axis for a ``dim`` of a tensor whose batch axis is at ``b`` (a per-example ``rank``, where
        known, places negative dims); None (and an error) when it cannot be one."""
        if isinstance(dim, (cst.Tuple, cst.List)) and dim.elements:  # several dims: each shifted
            out = [self.shift(node, e.value, what, b, rank) for e in dim.elements]
            return None if any(o is None for o in out) else cst.Tuple([cst.Element(o) for o in out])
        d = int_literal(dim) if dim is not None else None
        if dim is None or d is None:
            self.error(node, f"{what}: the dimension {code(dim) if dim is not None else '(none: all of them)'} "
                       "of a batched tensor is not a literal; write it for one example (without the batch axis)")
            return None
        if b != 0 or isinstance(b, Merged):
            return self.shift_moved(node, dim, d, what, b, rank)
        if d == 0:
            self.error(node, f"{what}: dimension 0 is the batch axis, which a per-example module does not have; "
                       "do this outside the module, over the vmapped outputs")
            return None
        return cst.Integer(str(d - 1)) if d > 0 else dim

    def unplaced(self, node: cst.CSTNode, what: str, b) -> None:
        self.error(node, f"{what}: the batch axis of this tensor is "
                   + ("not at one known position (its parts disagree, or it is several results)" if b == UNKNOWN or
                      isinstance(b, tuple) else f"merged outermost into dimension {int(b)} (an einops group put the "
                      "examples there with other axes)" if isinstance(b, Grouped) else
                      f"merged into dimension {int(b)} (a view put the examples inside it)")
                   + "; write the code for one example, or do this outside the module, over the vmapped outputs")

    def source_dim(self, d: int, b, rank: int | None) -> int | None:
        """A dimension of PyTorch's tensor as a non-negative index (None: negative, and its rank unknown)."""
        if d >= 0:
            return d
        if rank is None:
            return None
        return d + rank + (0 if isinstance(b, Merged) else 1)

    def shift_moved(self, node, dim, d: int, what: str, b, rank) -> cst.BaseExpression | None:
        """:meth:`shift` for a batch axis elsewhere than first: d < b stays, d > b is d - 1, d == b is the batch's."""
        if b == UNKNOWN or isinstance(b, tuple):
            self.unplaced(node, what, b)
            return None
        s = self.source_dim(d, b, rank)
        if s is None:
            self.error(node, f"{what}: dimension {d} of a tensor whose batch axis is dimension {axis_text(b)}: its rank "
                       "is not known here, so fwport cannot tell which axis that is; write a non-negative dimension")
            return None
        if isinstance(b, Merged):
            if s == int(b):
                self.unplaced(node, what, b)
                return None
            return dim
        if s == b:
            self.error(node, f"{what}: dimension {d} is the batch axis here (PyTorch's sequence layers hold it second), "
                       "which a per-example module does not have; do this outside the module, over the vmapped outputs")
            return None
        if d < 0:
            return dim
        return cst.Integer(str(d if d < b else d - 1))

    def permuted(self, original, recv, order: list[int], b, name: str) -> cst.BaseExpression:
        """A permutation of PyTorch's axes (``order``: the source axis at each new position) of a tensor whose batch axis
        is at ``b``: for one example, the permutation of the other axes (``x.transpose(0, 1)`` on (L, N, F): (L, F)
        as it is); the result holds the batch axis where ``order`` puts ``b``."""
        per = [o if o < b else o - 1 for o in order if o != b]
        new_b = order.index(b)
        if per == sorted(per):
            out = recv
        elif len(per) == 2 or sum(1 for i, o in enumerate(per) if i != o) == 2:
            i, j = [i for i, o in enumerate(per) if i != o]
            out = _call(self.ctx.spell("jax.numpy.swapaxes"), [recv, cst.Integer(str(i)), cst.Integer(str(j))])
        else:
            out = _call(self.ctx.spell("jax.numpy.transpose"), [recv, cst.Tuple([cst.Element(cst.Integer(str(o)))
                                                                                for o in per])])
        if new_b != 0 or b != 0:
            self.ctx.report(Severity.INFO, "batch-axis", f".{name}: the batch axis moves from dimension {b} to "
                            f"{new_b}; for one example this is " + ("the tensor as it is" if out is recv else code(out)),
                            original)
        return self.moved(out, new_b)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self.comprehension(node)

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self.comprehension(node)

    def comprehension(self, node: cst.GeneratorExp | cst.ListComp) -> None:
        """``(rearrange(t, 'b n (h d) -> b h n d', h=h) for t in qkv)`` over batched parts (``qkv = x.chunk(3, dim=-1)``):
        t is batched, with their rank, as in ``map(lambda t: ..., qkv)``. Only over a list of parts (a name bound to
        one, or ``x.chunk(...)`` / ``x.split(...)`` itself): over a tensor the loop goes over its batch axis
        (visit_CompFor refuses that)."""
        f, it = node.for_in, node.for_in.iter
        parts = (isinstance(it, cst.Name) and it.value in self.part_lists) or (
            isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value in ("chunk", "split"))
        if parts and isinstance(f.target, cst.Name) and f.inner_for_in is None and not f.asynchronous \
                and self.is_batched(it):
            name, r = f.target.value, self.rank_of(f.iter)
            self.batched.add(name)
            (self.rank.__setitem__(name, r) if r is not None else self.rank.pop(name, None))

    # --- calls -------------------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        self.size_marks.append(len(self.size_uses))
        f = node.func
        if self.ctx.imports.resolve(f) in (F + "cross_entropy", F + "nll_loss"):
            self.token_loss(node)
        if isinstance(f, cst.Name) and f.value == "map" and len(node.args) == 2 and isinstance(node.args[0].value, cst.Lambda) \
                and len(node.args[0].value.params.params) == 1 and self.is_batched(node.args[1].value):
            # `map(lambda t: rearrange(t, ...), qkv)` over batched parts: t is batched, with their rank
            name, r = node.args[0].value.params.params[0].name.value, self.rank_of(node.args[1].value)
            self.batched.add(name)
            (self.rank.__setitem__(name, r) if r is not None else self.rank.pop(name, None))
            if self.axes_moved():  # (q, k, v) holding the batch axis merged outermost into axis 0: t too
                a = self.axis_of(node.args[1].value)
                self.set_axis(name, UNKNOWN if isinstance(a, tuple) else a)
        if isinstance(f, cst.Attribute) and f.attr.value in ("view", "reshape") and node.args \
                and self.is_batch_size(node.args[0].value, f.value):
            self.kept.add(id(node.args[0].value))
            if isinstance(node.args[0].value, cst.Subscript) and isinstance(node.args[0].value.value, cst.Call):
                self.kept.add(id(node.args[0].value.value))  # `x.size()[0]`: its .size() goes with it
        if isinstance(f, cst.Attribute) and f.attr.value in ("view", "reshape") and node.args:
            rows = self.batch_rows(node)  # `x.view(B * T, C)`: the batch size a factor of the first size
            if rows is not None:
                self.kept.add(id(rows[0]))
            if self.shape_of_batched(node) is not None:  # `a.view(b.size())`
                self.kept.add(id(node.args[0].value))
        size = self.batch_size_argument(node)
        if size is None and self.ctx.imports.resolve(f) in ("einops.rearrange", "einops.reduce", "einops.repeat"):
            size = self.einops_batch_size(node)  # rearrange(x, 'b n d -> n b d', b=batch): b goes from the pattern
        if size is not None:
            self.kept.add(id(size))

    def shape_of_batched(self, node: cst.Call) -> cst.BaseExpression | None:
        """``a.view(b.size())`` / ``a.reshape(b.shape)`` (DETR's ``F.softmax(w.flatten(2), -1).view(w.size())``), a and
        b holding the batch axis first: b's tensor; each example's part of a takes the shape of b's (PyTorch's
        sizes agree, the batch's and the rest's), so one example's view is ``a.reshape(b.shape)``. None for any other."""
        if len(node.args) != 1 or node.args[0].star or node.args[0].keyword:
            return None
        v = node.args[0].value
        if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "size" and not v.args:
            b = v.func.value
        elif isinstance(v, cst.Attribute) and v.attr.value == "shape":
            b = v.value
        else:
            return None
        a = node.func.value
        ok = all(self.is_batched(t) and self.is_tensor(t) and self.plain_axis(t) == 0
                 and not isinstance(self.axis_of(t), Merged) for t in (a, b))
        return b if ok else None

    def visit_Comparison(self, node: cst.Comparison) -> None:
        """``x.shape == (batch, h, w)`` (vit_detpool's check of a mask's shape), x holding the batch axis at a known
        position and the tuple the batch size there: one example's shape is the rest (the size leaves the tuple)."""
        if len(node.comparisons) != 1 or not isinstance(node.comparisons[0].operator, (cst.Equal, cst.NotEqual)):
            return
        for x, t in ((node.left, node.comparisons[0].comparator), (node.comparisons[0].comparator, node.left)):
            if isinstance(x, cst.Attribute) and x.attr.value == "shape" and isinstance(t, cst.Tuple) \
                    and self.is_batched(x.value) and self.is_tensor(x.value):
                k = self.plain_axis(x.value)
                if k is not None and k < len(t.elements) and not isinstance(t.elements[k], cst.StarredElement) \
                        and self.is_batch_size(t.elements[k].value, x.value) \
                        and not any(isinstance(e, cst.StarredElement) for e in t.elements[:k]):
                    self.kept.add(id(t.elements[k].value))
                    self.shape_checks[id(t)] = k

    def leave_Tuple(self, original: cst.Tuple, updated: cst.Tuple) -> cst.BaseExpression:
        k = self.shape_checks.pop(id(original), None)
        if k is None:
            return updated
        rest = [e for i, e in enumerate(updated.elements) if i != k]
        if len(rest) == 1:
            rest = [rest[0].with_changes(comma=cst.Comma())]
        elif rest:
            rest[-1] = rest[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        self.ctx.report(Severity.INFO, "batch-axis", f"{code(original)}: the batch size leaves the shape compared "
                        "(one example's shape is the rest)", original)
        return updated.with_changes(elements=rest)

    # --- the batch size sizing a tensor that is the same for every example ----------------------------
    def batch_size_argument(self, node: cst.Call) -> cst.BaseExpression | None:
        """The batch size (``x.size(0)``, ``x.shape[0]``, a name bound to it) where it only makes per-batch copies of
        something the same for every example, so that one example's copy is exact without it:
        ``torch.zeros(B, H)`` (ones, empty, full), ``t.expand(B, -1, -1)`` and ``einops.repeat(t, '... -> b ...', b=B)``
        of a tensor not computed from the input. None for any other call."""
        q = self.ctx.imports.resolve(node.func)
        if q in FILLS or q in DRAWS:  # the batch size at any one position: `torch.zeros(layers * 2, x.size(0), H)`
            at = [s for s in _fill_sizes(q, node) if self.is_batch_size(s, None)]  # (a state); a draw per example
            return at[0] if len(at) == 1 else None
        if q == "einops.repeat":
            a, _ = _args(node, ("tensor", "pattern"))
            axis = _repeat_axis(a.get("pattern"))
            if axis is None or "tensor" not in a or self.is_batched(a["tensor"]):
                return None
            size = next((x.value for x in node.args if x.keyword is not None and x.keyword.value == axis), None)
            return size if size is not None and self.is_batch_size(size, None) else None
        f = node.func
        if isinstance(f, cst.Attribute) and f.attr.value == "expand" and node.args and not self.is_batched(f.value) \
                and not any(x.keyword or x.star for x in node.args) and self.is_batch_size(node.args[0].value, None) \
                and not isinstance(node.args[0].value, (cst.Tuple, cst.List)):
            return node.args[0].value
        return None

    def shared_input_repeat(self, original: cst.Call) -> cst.BaseExpression | None:
        """``q.unsqueeze(d).repeat(1, bs, 1)`` (DETR's query embedding), q an input of this forward read nowhere else
        and bs the batch size at position d: a tensor every example shares, copied over a new batch axis at d. q is
        no batched input (``unbatched``: ranks.py gives it no batch axis, in_axes None), and one example's copy is q
        itself (tiled by the other sizes); the result holds the batch axis at d."""
        f = original.func
        if not (isinstance(f, cst.Attribute) and f.attr.value == "repeat" and isinstance(f.value, cst.Call)
                and isinstance(f.value.func, cst.Attribute) and f.value.func.attr.value == "unsqueeze"
                and isinstance(f.value.func.value, cst.Name) and len(f.value.args) == 1):
            return None
        y, d = f.value.func.value, int_literal(f.value.args[0].value)
        sizes = [a.value for a in original.args]
        if d is None or d < 0 or any(a.keyword or a.star for a in original.args) or len(sizes) <= d \
                or not self.is_batch_size(sizes[d], None) \
                or any(int_literal(x) is None for i, x in enumerate(sizes) if i != d):
            return None
        if y.value in self.batched and not (y.value in self.inputs and self.input_reads.get(y.value) == 1):
            return None  # (read before: then it was taken as batched there)
        self.unbatched.add(y.value)
        self.rank[y.value] = len(sizes) - 1  # one example's copy: q itself, the sizes but the batch's
        self.size_uses = [n for n in self.size_uses if n is not sizes[d]]  # the batch size read here: taken
        rest = [x for i, x in enumerate(sizes) if i != d]
        out = cst.Name(y.value) if all(int_literal(x) == 1 for x in rest) else _call(
            self.ctx.spell("jax.numpy.tile"), [cst.Name(y.value), cst.Tuple([cst.Element(x) for x in rest])])
        self.ctx.report(Severity.INFO, "batch-axis", f"{code(original)}: {y.value} is shared by every example (an input "
                        f"without a batch axis: in_axes None), copied over the batch at dimension {d}; for one example "
                        f"the copy is {code(out)}", original)
        return self.moved(out, d)

    def per_example_copy(self, q: str | None, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """The call :meth:`batch_size_argument` accepted, for one example: the batch axis not built."""
        if q in FILLS or q in DRAWS:  # torch.zeros(B, H) → torch.zeros(H); the rules translate the rest
            sizes = _fill_sizes(q, original)
            d = next(i for i, x in enumerate(sizes) if self.is_batch_size(x, None))  # (batch_size_argument: one)
            positional = [x for x in updated.args if x.keyword is None]
            if len(positional) >= 1 and isinstance(positional[0].value, (cst.Tuple, cst.List)) \
                    and (q != "torch.full" or len(positional) == 2):
                t = positional[0].value
                rest = [e for i, e in enumerate(t.elements) if i != d]
                if len(rest) == 1:
                    rest = [rest[0].with_changes(comma=cst.Comma())]
                elif rest:
                    rest[-1] = rest[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                new = cst.Tuple(rest) if rest or isinstance(t, cst.Tuple) else cst.List([])
                out = updated.with_changes(args=[x.with_changes(value=new) if x is positional[0] else x
                                                 for x in updated.args])
            else:
                args = [x for x in updated.args if x is not positional[d]]
                if not any(x.keyword is None for x in args):  # torch.zeros(B) → one example's scalar
                    args = [cst.Arg(cst.Tuple([])), *args]
                out = updated.with_changes(args=_commas(args[:-1]) + args[-1:])
            if q in DRAWS:  # B independent draws: one per example, from its own key (the draw's key is split per
                # example by the caller: keys.py / the vmapped call), and the result holds the batch axis at d
                self.ctx.report(Severity.INFO, "batch-axis", f"{code(original)}: one draw per example (each example's "
                                f"part of PyTorch's independent draws), without the batch size", original)
            # (each example's part of PyTorch's copies, or of its draws: a batched value, its batch axis at d; a
            # copy of one number per example, `torch.full((B,), v)`, stays a number: no axis to index or move)
            if q in DRAWS or len(sizes) > 1:
                self.draws[id(out)] = len(sizes) - 1  # its per-example rank
            return self.moved(out, d) if d else out  # the copies hold the batch axis where its size was
        if q == "einops.repeat":  # '... d -> b ... d' → the tensor itself; '1 n d -> b n d' → its first (only) row;
            a, _ = _args(updated, ("tensor", "pattern"))  # else the pattern without b ('1 1 d -> f 1 d', f=frames)
            left, rest = _repeat_sides(a["pattern"])
            t = a["tensor"]
            if rest == left:
                return t
            if left[0] in ("1", "()") and rest == left[1:]:
                return cst.Subscript(_atom(t), [cst.SubscriptElement(cst.Index(cst.Integer("0")))])
            if rest[0] in ("1", "()") and rest[1:] == left:  # 'd -> b 1 d' → t[None]
                return cst.Subscript(_atom(t), [cst.SubscriptElement(cst.Index(cst.Name("None")))])
            axis = _repeat_axis(a["pattern"])
            args = [x.with_changes(value=_string(f"{' '.join(left)} -> {' '.join(rest)}", x.value))
                    if x.value is a["pattern"] else x
                    for x in updated.args if x.keyword is None or x.keyword.value != axis]
            return updated.with_changes(args=_commas(args))
        # t.expand(B, s2, ..., sk) → jnp.broadcast_to(t, (1, s2, ..., sk))[0], each -1 read from t's aligned axis
        recv = updated.func.value
        sizes = [x.value for x in updated.args]
        k = len(sizes)
        rest = [expr(f"{_atom_code(recv)}.shape[{i - k}]") if int_literal(sz) == -1 else sz
                for i, sz in enumerate(sizes) if i > 0]
        shape = cst.Tuple([cst.Element(cst.Integer("1")), *(cst.Element(x) for x in rest)])
        return cst.Subscript(_call(self.ctx.spell("jax.numpy.broadcast_to"), [recv, shape]),
                             [cst.SubscriptElement(cst.Index(cst.Integer("0")))])

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        if original.value in self.inputs and id(original) not in self.not_read:
            self.input_reads[original.value] = self.input_reads.get(original.value, 0) + 1
        if original.value in self.batch_ranges and id(original) not in self.range_reads \
                and id(original) not in self.not_read:
            self.error(original, f"{original.value} numbers the examples (torch.arange of the batch size), which a "
                       "per-example module does not have: fwport follows it as the first index of a gather, "
                       "x[batch_range, idx]; do this outside the module, over the vmapped outputs")
        if original.value in self.batch_sizes and id(original) not in self.kept and id(original) not in self.not_read:
            self.size_uses.append(original)  # refused when its statement is left, unless a call around it was
        return updated

    def refuse_size_uses(self) -> None:
        for n in self.size_uses:
            self.error(n, f"{n.value} is the batch size, which a per-example module does not have: it is translated "
                       "where it sizes a view (x.view(B, -1)) or a per-batch copy of what is the same for every example "
                       "(torch.zeros(B, H), t.expand(B, -1, -1), einops.repeat(t, '... -> b ...', b=B)); do this "
                       "outside the module, over the vmapped outputs")
        self.size_uses = []

    def visit_Expr(self, node: cst.Expr) -> None:
        if isinstance(node.value, cst.Call):
            self.statements.add(id(node.value))  # `x.masked_fill_(m, v)` as a statement: x = <its value>

    def leave_Expr(self, original: cst.Expr, updated: cst.Expr):
        target = self.in_place.pop(id(updated.value), None)
        if target is None:
            return updated
        return cst.Assign([cst.AssignTarget(cst.Name(target))], updated.value)

    def leave_SimpleStatementLine(self, original, updated):
        self.refuse_size_uses()
        return updated

    def leave_IndentedBlock(self, original, updated):
        self.refuse_size_uses()
        return updated

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.not_read.add(id(node.keyword))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.not_read.add(id(node.attr))

    def visit_Param(self, node: cst.Param) -> None:
        self.not_read.add(id(node.name))

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        before = len(self.ctx.pending)
        mark = self.size_marks.pop()
        attr = (dotted_text(original.func) or "")[5:] if (dotted_text(original.func) or "").startswith("self.") else None
        result = self.sequence_call(attr, original, updated) if attr in self.seq_first else None
        windows = self.windows_of(original, updated) if self.module_called(original.func) is not None else None
        if windows is not None:
            self.windowed.add(id(original))
        rows = attr in self.modules and self.modules[attr] in LAYER_RANK and len(updated.args) == 1 \
            and self.axis_of(updated.args[0].value) == Grouped(0) and (self.rank_of(updated.args[0].value) or 0) \
            > LAYER_RANK[self.modules[attr]]  # (Conv1d given '(b h w) c n': vmapped over the rows by rank, as ever)
        if windows is None and not rows and attr in self.modules and attr not in self.seq_first \
                and self.modules[attr] not in TRAILING and not self.last_axis_call(attr, updated) and any(
                self.axis_of(a.value) not in (None, 0) for a in updated.args[:1]):
            self.error(original, f"self.{attr} ({self.modules[attr].rsplit('.', 1)[-1]}) gets a tensor whose batch axis "
                       f"is dimension {axis_text(self.axis_of(updated.args[0].value))} (PyTorch's sequence layers hold it "
                       "second), and this layer takes it first: move it first (.transpose(0, 1)) before the call")
        out = self._call(original, updated)
        if attr in self.keyed_sequences and isinstance(out, cst.Call) and not any(
                a.keyword is not None and a.keyword.value == self.keyed_sequences[attr] for a in out.args):
            out = out.with_changes(args=[*_commas(out.args), cst.Arg(cst.Name("key"), equal=_EQ,
                                                                  keyword=cst.Name(self.keyed_sequences[attr]))])
            self.key_sites.append(out)  # its dropout in training: a key, as a Dropout layer's
        if result is not None:
            self.node_axis[id(out)] = result
        module = self.module_called(original.func) if result is None else None
        out_axes = self.file.table[module[1]].out_axes if module is not None and module[0] == "class" \
            and module[1] in self.file.table else None
        if out_axes is not None and (self.axes_moved() or out_axes != 0 or isinstance(out_axes, (tuple, Merged))):
            self.node_axis[id(out)] = out_axes  # where that forward returns it (ranks.py); first: as ever
        if windows is not None and isinstance(out, cst.Call):
            out = self.over_windows(original, out, windows, out_axes if module is not None and module[0] == "class"
                                    else 0)
        if module is not None and module[0] == "sequence" and updated.args \
                and self.axis_of(updated.args[0].value) == 0 and self.is_batched(original.args[0].value):
            last = moving_last_layer(self.file.sequences[module[1]])
            if last is not None:  # FiLM's Sequential(Linear, Rearrange('b (two d) -> two b 1 d')): at `two b`'s b
                self.ctx.analyses.setdefault(MOVING_LAYERS, set()).add(code(last[0]))
                self.node_axis[id(out)] = last[1]
                self.one_tensor.add(id(out))
        if any(p.node is original and p.finding.severity is Severity.ERROR for p in self.ctx.pending[before:]):
            del self.size_uses[mark:]  # the batch size inside a refused call: that call's error says it
            if out is updated:
                self.ctx.settle(out)  # refused here: the rule pass must not translate it out of context
        return out

    def last_axis_call(self, attr: str, call: cst.Call) -> bool:
        """``self.attend(dots)``, ``self.attend`` an ``nn.Softmax(dim=-k)`` (last_axis_layers) given one tensor whose
        batch axis is not first but whose dimension -k is provably not the batch's: grouped or merged into axis a of
        one example's r axes (PyTorch's rank r, one example's too) with r - k != a, or plainly at a of r + 1 axes
        before the dim (a < r + 1 - k: one example's axis -k is PyTorch's; a batch axis after it would shift it). The
        layer acts along that axis for one example as for the batch (its translation keeps the dim as written)."""
        d = last_axis_layers(self.ctx).get(attr)
        if d is None or len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
            return False
        a, r = self.axis_of(call.args[0].value), self.rank_of(call.args[0].value)
        if r is None or isinstance(a, tuple) or a is None or a == UNKNOWN:
            return False
        if isinstance(a, Merged):  # one example has PyTorch's rank: its axis -k is PyTorch's
            return 0 <= r + d != int(a)
        return 0 <= int(a) < r + 1 + d

    def _call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if id(original) in self.kept:
            return updated
        if isinstance(original.func, cst.Name) and original.func.value == "len" and len(updated.args) == 1 \
                and self.first_axis_batched(updated.args[0].value):
            self.error(original, f"{code(original)} is the batch size (dimension 0 of {code(original.args[0].value)} is "
                       "the batch axis), which a per-example module does not have (left as written it would be the size "
                       "of the example's first axis): do this outside the module, over the vmapped outputs")
            return updated
        entry = self.ctx.analyses.get(FUNCTION_DIMS, {}).get(original.func.value) \
            if isinstance(original.func, cst.Name) and not self.batch_whole \
            and original.func.value not in self.instances else None  # (one written for one example: a module's call)
        if entry is not None and any(self.is_batched(a.value) for a in original.args):
            from fwport.packs.torch2jax.passes.modules import function_dims_used
            dims = function_dims_used(entry, original, self.negative_fields, self.is_batched)
        else:
            dims = None
        if dims:
            shown = ", ".join(code(d) if len(code(d)) <= 40 else code(d)[:37] + "..." for d in dims[:3])
            self.error(original, f"{original.func.value}() is a function of this file, given a batched tensor here, "
                       f"where one example reaches it; its dimensions and sizes are written for the batch ({shown}"
                       f"{', ...' if len(dims) > 3 else ''}) and would be translated as written, counting the batch "
                       "axis one example does not have: write the function for one example, or call it outside the "
                       "module, over the vmapped outputs")
            return updated
        module = self.module_called(original.func)
        if module is not None:  # what ranks.py needs: the ranks this module / Sequential is called with
            rows = id(original) in self.windowed  # (over_windows: the callee gets one row of the windows)

            def row(a):
                return 0 if rows and isinstance(a, Grouped) else a
            ranks = tuple(r - 1 if rows and r is not None and isinstance(self.axis_of(a.value), Grouped) else r
                          for a, r in ((a, self.rank_of(a.value)) for a in updated.args
                                       if a.keyword is None and not a.star))
            (self.seen_calls if module[0] == "class" else self.seen_sequences).setdefault(module[1], []).append(ranks)
            if module[0] == "class":
                self.seen_axes.setdefault(module[1], []).append((
                    tuple(row(self.axis_of(a.value)) for a in updated.args if a.keyword is None and not a.star),
                    {a.keyword.value: "absent" if code(a.value) == "None" else row(self.axis_of(a.value))
                     for a in updated.args if a.keyword is not None}))
                passed = [a.value for a in original.args if a.keyword is None and not a.star]
                self.seen_blind.setdefault(module[1], []).append(any(
                    r is None and not self.users_input(v) for r, v in zip(ranks, passed)))
            if module[0] == "sequence" and not rows and any(self.axis_of(a.value) not in (None, 0) for a in updated.args):
                self.error(original, f"{code(original.func)} (a Sequential) gets a tensor whose batch axis is not first "
                           "(PyTorch's sequence layers hold it second): move it first (.transpose(0, 1)) before the call")
            if module[0] == "sequence" and ranks:
                from fwport.packs.torch2jax.ranks import WRAPPED, through
                blind: list = []
                through(self.file.sequences[module[1]], ranks[0], blind)
                wrapped = self.ctx.analyses.get(WRAPPED, ())  # (PerVector: exact at any rank, modules.py)
                blind = [c for c in blind if id(c) not in wrapped]
                if blind:
                    self.rank_unknown(original, code(original.func), self.ctx.imports.resolve(blind[0].func) or "")
            if module[0] == "class" and module[1] in self.keyed_classes \
                    and not any(a.keyword is not None and a.keyword.value == "key" for a in updated.args):
                site = updated.with_changes(args=[*_commas(updated.args),
                                                  cst.Arg(cst.Name("key"), keyword=cst.Name("key"), equal=_EQ)])
                self.key_sites.append(site)
                return site
        q = self.ctx.imports.resolve(original.func)
        shared = self.shared_input_repeat(original)
        if shared is not None:
            return shared
        if self.batch_size_argument(original) is not None:
            return self.per_example_copy(q, original, updated)
        if q is not None:
            return self.function(q, original, updated)
        func = original.func
        if self.batch_whole and isinstance(func, cst.Attribute) and self.batch_method_refused(original):
            return updated
        if self.batch_whole and isinstance(func, cst.Name) and func.value in self.loop_names:
            return self.batch_loop(original, updated, self.loop_names[func.value])
        if self.batch_whole and isinstance(func, cst.Attribute) and func.attr.value == "chunk" \
                and not (isinstance(func.value, cst.Name) and func.value.value == "self"):
            # (PyTorch's layout: the dim as written) x.chunk(3, dim=-1) → jnp.split(x, 3, axis=-1)
            a, _ = _args(updated, ("chunks", "dim"))
            return self.split("chunk", original, updated, updated.func.value, axis=a.get("dim", cst.Integer("0")))
        if self.batch_whole and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
                and func.value.value == "self" and func.attr.value in self.examples:
            out = self.batch_module(original, updated, func.attr.value in self.keyed)
            if func.attr.value in self.vector_sequences:  # (one vector per example assumed: said once per file)
                self.rank_unknown(original, f"self.{func.attr.value}", "torch.nn.Linear")
            if func.attr.value in self.keyed:
                self.key_sites.append(out)
            return out
        entry = _dict_entry(func)
        if entry is not None and entry in self.keyed:  # a dropout in an nn.ModuleDict: self.d["drop"](x)
            site = updated.with_changes(args=[*_commas(updated.args), cst.Arg(cst.Name("key"), keyword=cst.Name("key"),
                                                                          equal=_EQ)])
            self.key_sites.append(site)
            return site
        if entry is not None and entry in self.modules:  # a layer in an nn.ModuleDict: self.d["fc"](x)
            return self.vmapped(entry, updated, original)
        if isinstance(func, cst.Attribute):
            recv = dotted_text(func.value)
            if recv is not None and recv.startswith("self.") and recv.count(".") == 1 and func.attr.value == "__call__":
                return updated
            if isinstance(func.value, cst.Name) and func.value.value == "self" and func.attr.value in self.stateful:
                site = updated.with_changes(args=[*_commas(updated.args), cst.Arg(cst.Name("state"))])
                self.state_sites.append(site)
                return site
            if isinstance(func.value, cst.Name) and func.value.value == "self" and func.attr.value in self.modules \
                    and func.attr.value not in self.keyed:
                updated = layers.initial_state(self.modules[func.attr.value], updated, self.ctx)  # cell(x): zeros
                return self.vmapped(func.attr.value, updated, original)
            if isinstance(func.value, cst.Name) and func.value.value == "self" and func.attr.value in self.keyed:
                site = updated.with_changes(args=[*_commas(updated.args), cst.Arg(cst.Name("key"), keyword=cst.Name("key"),
                                                                              equal=_EQ)])
                self.key_sites.append(site)
                return site
            if isinstance(func.value, cst.Name) and func.attr.value in ("append", "extend", "insert", "pop", "remove",
                                                                           "clear"):  # list methods (no tensor has them)
                if func.attr.value != "pop" and any(self.is_batched(a.value) for a in original.args):
                    name = func.value.value
                    before = self.axis.get(name, 0) if name in self.batched else None
                    self.batched.add(name)  # a list of batched tensors
                    if self.axes_moved():
                        self.set_axis(name, combine([before, *(self.axis_of(a.value) for a in updated.args)]))
                return updated
            if self.is_batched(func.value) or self.drawn(updated.func.value):  # (`torch.rand(B, n).argsort(-1)`)
                return self.method(func.attr.value, original, updated)
            if func.attr.value in _PARAMETER_ELEMENTWISE and not updated.args and self.modules.get(
                    (dotted_text(func.value) or "").removeprefix("self.")) == "torch.nn.Parameter":
                # self.temperature.exp() of an nn.Parameter (vit_for_small_dataset): a jax array has no .exp()
                return self.elementwise(func.attr.value, updated.func.value, updated)
            dtype = ops.cast_dtype(original, self.ctx)
            if dtype is not None:  # self.mask.to(torch.bool) on an unbatched tensor: a cast too
                return _method(updated.func.value, "astype", [self.ctx.spell(f"jax.numpy.{dtype}")])
            if func.attr.value == "to" and _moved_cast(original, self.ctx) is not None and self.modules.get(
                    (dotted_text(func.value) or "").removeprefix("self."), "torch.nn.Parameter") == "torch.nn.Parameter":
                return _method(updated.func.value, "astype", [_moved_cast(updated, self.ctx)])  # .to(device, dtype=d)
            other = original.args[0].value if len(original.args) == 1 and original.args[0].keyword is None \
                and not original.args[0].star else None
            if func.attr.value == "to" and (isinstance(other, cst.Name) and other.value in self.dtype_names
                                            or isinstance(other, cst.Attribute) and other.attr.value == "dtype") \
                    and not (dotted_text(func.value) or "").removeprefix("self.") in self.modules:
                return _method(updated.func.value, "astype", [updated.args[0].value])  # t.to(dtype), dtype = x.dtype
            if not self.batch_whole and func.attr.value in _UNBATCHED_REFUSED \
                    and not (isinstance(func.value, cst.Name) and func.value.value == "self") \
                    and (dotted_text(func.value) or "").removeprefix("self.") not in self.modules:
                # (the tensor-method pass leaves a per-example forward to this class: a method no jax array has on a
                # tensor without the batch axis, `torch.zeros(n).scatter_(...)`, is no silent AttributeError)
                self.error(original, f".{func.attr.value}(...): a PyTorch tensor method no jax array has, not "
                           "translated in a per-example forward: left as written it fails (AttributeError); write its "
                           "jnp counterpart", "unsupported-construct")
        return updated

    def windows_of(self, original: cst.Call, updated: cst.Call) -> int | None:
        """The axis ``g`` where the arguments of a call of a module class of the file or a Sequential hold the batch
        axis merged outermost (:class:`Grouped`: vivit's ``spatial_attn(x)`` of ``(b f) n d``), every batched one
        there; None where none does (or they disagree: an error)."""
        args = [a for a in updated.args if not (a.keyword is not None and a.keyword.value in ("key", "dropout_key"))]
        axes = [self.axis_of(a.value) for a in args]
        if not any(isinstance(a, Grouped) for a in axes):
            return None
        g = next(a for a in axes if isinstance(a, Grouped))
        if any(a is not None and a != g for a in axes) or any(a.star for a in args):
            self.error(original, f"{code(original.func)}(...) is given tensors holding the batch axis at "
                       f"{', '.join(axis_text(a) for a in axes)}: fwport maps a module over the rows of one axis holding "
                       "it merged outermost (jax.vmap), where every batched argument holds it there; write the call "
                       "for one example")
            return None
        return int(g)

    def over_windows(self, original: cst.Call, out: cst.Call, g: int, out_axes) -> cst.BaseExpression:
        """A call of a module (of the file, or a Sequential) given tensors holding the batch axis merged outermost
        into axis ``g`` (``(b f) n d``): PyTorch's module treats each row of that axis as an example, and one
        example's tensor holds its rows (``f n d``), so the per-example module is mapped over them: ``jax.vmap(lambda
        _w0: spatial_attn(_w0), in_axes=g)(x)``; arguments holding no batch axis are passed whole, a key is split over
        the rows (each row its own dropout, as PyTorch's). The result holds the batch axis merged outermost where the
        module returns it."""
        if isinstance(out_axes, tuple) or isinstance(out_axes, Merged) or out_axes == UNKNOWN \
                or not isinstance(out_axes, int) and out_axes is not None:
            self.error(original, f"{code(original.func)}(...) is given tensors holding the batch axis merged outermost "
                       f"into dimension {g} and returns it at {axis_text(out_axes)}: fwport maps a module over such "
                       "rows where it returns one tensor holding its batch axis at one place")
            return out
        if any(out is site for site in self.state_sites):
            self.error(original, f"{code(original.func)}(...) is given tensors holding the batch axis merged outermost "
                       f"into dimension {g} and threads a state (BatchNorm): its statistics are over every row of every "
                       "example, which one example's rows cannot give; write it for one example")
            return out
        out_axes = out_axes or 0
        params, values, in_axes, rows = [], [], [], None
        new_args = []
        for i, a in enumerate(out.args):
            if a.keyword is not None and a.keyword.value in ("key", "dropout_key"):
                name = "_wk"
                values.append(None)
                in_axes.append(None)  # (placeholder: the split keys below)
            else:
                name = f"_w{i}"
                batched = isinstance(self.axis_of(a.value), Grouped)
                in_axes.append(g if batched else None)
                values.append(a.value)
                if batched and rows is None:
                    rows = a.value
            params.append(name)
            new_args.append(a.with_changes(value=cst.Name(name)))
        for i, (p, v) in enumerate(zip(params, values)):
            if p == "_wk":  # one key per row: None stays None (inference)
                # (by keyword: modules.py numbers it as a consumer of the call's key, and splits it in a loop)
                values[i] = expr(f"None if key is None else {self.ctx.spell_text('jax.random.split')}"
                                 f"(key=key, num={_atom_code(rows)}.shape[{g}])")
                in_axes[i] = 0
        body = out.with_changes(args=_commas(new_args))
        fn = cst.Lambda(cst.Parameters([cst.Param(cst.Name(p)) for p in params]), body)
        axes = cst.Tuple([cst.Element(cst.Name("None") if x is None else cst.Integer(str(x))) for x in in_axes])
        kw = {"in_axes": axes}
        if out_axes:
            kw["out_axes"] = cst.Integer(str(out_axes))
        call = _call(_call(self.ctx.spell("jax.vmap"), [fn], **kw), values)
        self.ctx.report(Severity.INFO, "batch-axis", f"{code(original.func)}(...): its tensors hold the batch axis merged "
                        f"outermost into dimension {g} (the examples' rows, e.g. windows or frames): the module, written "
                        "for one row, is mapped over one example's rows (jax.vmap)", original)
        return self.moved(call, Grouped(out_axes))

    def attention_masks(self, attr: str, original: cst.Call, a: dict, o: dict, masks: list[str], want: int) -> None:
        """The attention masks given to a sequence-first attention or transformer layer (``src_mask``, ``attn_mask``):
        PyTorch's (L, S) mask has no batch axis, so an input of the forward read only there is no batched one
        (``unbatched``: in_axes None); one computed from the input is an error saying so (the layer's construction
        error alone would blame batch_first)."""
        for k in masks:
            if self.axis_of(a[k]) is None:
                continue
            if k in o and isinstance(o[k], cst.Name) and o[k].value in self.inputs and self.input_reads.get(o[k].value) == 1:
                self.unbatched.add(o[k].value)
            elif want == 1:
                self.error(original, f"{code(o.get(k, a[k]))}, given to self.{attr} as {k}, is computed from the "
                           f"module's input: fwport takes it to hold the batch axis (dimension "
                           f"{axis_text(self.axis_of(a[k]))}), where PyTorch's {k} of (L, S) has none (and one of "
                           "(N * nhead, L, S) merges it with the heads); compute the mask from sizes alone "
                           "(torch.triu(torch.full((L, L), float('-inf')), 1)) or pass it in as an input of its own")

    def sequence_call(self, attr: str, original: cst.Call, updated: cst.Call):
        """A call of a PyTorch sequence layer (LSTM / GRU / RNN / MultiheadAttention): it takes the batch axis second
        ((L, N, ...), batch_first not True) or first. Where every tensor argument holds it there (key_padding_mask
        first; attn_mask none), the per-example layer takes exactly one example and the layer is proven
        (``seq_proven``: its construction is no error); the batch positions of its results are returned. Otherwise it
        is refused (the construction's error stays), and inputs that reach it unmoved with the batch axis first are
        noted (a recurrent state, hx and the final state returned, holds it second whatever batch_first says) (``second``: ranks.py tries them with it second)."""
        want = 1 if self.seq_first[attr] else 0
        attention = self.modules.get(attr) == "torch.nn.MultiheadAttention"
        names = ("query", "key", "value", "key_padding_mask", "need_weights", "attn_mask") if attention \
            else ("input", "hx")
        sequences = ("query", "key", "value") if attention else ("input", "hx")
        transformer = layers.TRANSFORMER_CALLS.get(self.modules.get(attr))
        if transformer is not None:  # one result; the masks of no batch axis (src_mask) or PyTorch's (N, L) padding
            names, sequences, padding = transformer
            a, unknown = _args(updated, names)
            o, _ = _args(original, names)
            for k in sequences:  # inputs reaching it with the batch axis first: ranks.py tries them with it second
                if k in a and k in o and want == 1 and self.axis_of(a[k]) == 0:
                    self.second |= self.origins(o[k])
            masks = [k for k in names if k in a and k not in sequences and k not in padding and code(a[k]) != "None"]
            self.attention_masks(attr, original, a, o, masks, want)
            ok = not unknown and names[0] in a and all(self.axis_of(a[k]) == want for k in sequences if k in a) \
                and all(self.axis_of(a[k]) in (None, 0) for k in padding if k in a) \
                and all(self.axis_of(a[k]) is None for k in names if k in a and k not in sequences and k not in padding)
            (self.seq_proven if ok else self.seq_refused).add(attr)
            for k in sequences if ok else ():
                if isinstance(a[k], cst.Name) and a[k].value not in self.rank:
                    self.rank[a[k].value] = 2
            return want if ok else None
        a, unknown = _args(updated, names)
        o, _ = _args(original, names)
        ok = not unknown and (names[0] in a)
        for k in sequences:
            if k in a and not (k == "hx" and code(a[k]) == "None"):
                got = self.axis_of(a[k])
                need = 1 if k == "hx" else want  # a recurrent state is (layers * directions, N, H) either way
                if got != need and not (k == "hx" and got is None):
                    ok = False
                    if got == 0 and need == 1 and k in o:
                        self.second |= self.origins(o[k])
        if attention and "key_padding_mask" in a and self.axis_of(a["key_padding_mask"]) not in (None, 0):
            ok = False
        if attention and "attn_mask" in a and code(a["attn_mask"]) != "None":
            self.attention_masks(attr, original, a, o, ["attn_mask"], want)
        if attention and "attn_mask" in a and self.axis_of(a["attn_mask"]) is not None:
            ok = False  # a per-example mask of PyTorch's (N * heads, L, S) form is not followed
        if not ok:
            self.seq_refused.add(attr)
            return None
        self.seq_proven.add(attr)
        for k in sequences[:3 if attention else 1]:  # a sequence per example: (L, features)
            if k in a and isinstance(a[k], cst.Name) and a[k].value not in self.rank:
                self.rank[a[k].value] = 2
        return (want, 0) if attention else (want, 1)  # a recurrent layer's final state: (layers * directions, N, H)

    def function(self, q: str, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        short = q.rsplit(".", 1)[-1]
        if q == "einops.einsum":
            return self.einops_einsum(original, updated)
        if q == "torch.einsum" and self.axes_moved() and any(
                isinstance(self.axis_of(a.value), Grouped) for a in updated.args[1:]):
            return self.grouped_einsum(original, updated)
        if q == "torch.matmul" and self.axes_moved() and len(updated.args) == 2 and any(
                isinstance(self.axis_of(a.value), Grouped) for a in updated.args):
            # both holding it merged outermost into axis g, of one rank with g before the matrix axes: one
            # example's matmul is PyTorch's as written (its batch axes broadcast alike)
            xs = [a.value for a in updated.args]
            axes, ranks_ = [self.axis_of(x) for x in xs], [self.rank_of(x) for x in xs]
            if not any(a.keyword or a.star for a in updated.args) and axes[0] == axes[1] and ranks_[0] is not None \
                    and ranks_[0] == ranks_[1] and int(axes[0]) < ranks_[0] - 2:
                return self.moved(_call(self.ctx.spell("jax.numpy.matmul"), xs), axes[0])
        if self.axes_moved() and q not in PLACED and short not in ELEMENTWISE and (
                q.startswith(F) or q.startswith("torch.") and q.count(".") == 1):
            moved = [x for x in (self.axis_of(a.value) for a in updated.args) if x is not None and x != 0
                     or isinstance(x, Merged)]
            if q == F + "interpolate" and all(x == 1 and not isinstance(x, Merged) for x in moved):
                moved = []  # (N, C, *spatial) with the batch axis as C: one example's first axis is N, a channel's peer
            if moved:  # a function whose meaning depends on the axes, given a tensor holding the batch axis elsewhere
                self.error(original, f"{q.replace(F, 'F.')} of a tensor whose batch axis is dimension "
                           f"{axis_text(moved[0])} (PyTorch's sequence layers hold it second): not followed there; move "
                           "the batch axis first (.transpose(0, 1)) before it, or do it outside the module")
                return updated
        if q == F + "scaled_dot_product_attention" and any(  # dropout_p: by keyword or fifth
                (a.keyword.value == "dropout_p" if a.keyword else i == 4 and not a.star)
                and ops.training_dropout(a.value) is not None for i, a in enumerate(original.args)):
            self.key_sites.append(updated)  # its dropout in training takes the call's key (ops.attention)
            drops = sorted(a for a, q in self.modules.items() if q == "torch.nn.Dropout" and "[" not in a)
            if drops:  # inference as the module's own dropout has it (eqx.nn.inference_mode switches that one)
                self.ctx.analyses.setdefault(ops.ATTENTION_INFERENCE, {})[code(updated)] = f"self.{drops[0]}.inference"
            return updated
        if q in ("einops.rearrange", "einops.reduce", "einops.repeat"):
            return self.einops_batch_axis(q, original, updated)
        if q in ("torch.cat", "torch.concat", "torch.concatenate", "torch.stack"):
            a, unknown = _args(updated, ("tensors", "dim"))
            if "tensors" not in a or unknown or not self.is_batched(original):
                return updated
            target = "jax.numpy.stack" if short == "stack" else "jax.numpy.concatenate"
            b = self.parts_axis(a["tensors"]) if self.axes_moved() else 0
            if b != 0 or isinstance(b, Merged) or short == "stack" and int_literal(a.get("dim", cst.Integer("0"))) == 0:
                return self.moved_join(short, target, original, a, b)
            axis = self.shift(original, a.get("dim", cst.Integer("0")), f"torch.{short}")
            if axis is None:
                return updated
            return _call(self.ctx.spell(target), [a["tensors"]], axis=axis)
        if q in ("torch.flatten",):
            a, unknown = _args(updated, ("input", "start_dim", "end_dim"))
            if unknown or "input" not in a or not self.is_batched(original):
                return updated
            out = self.flatten(original, a["input"], a.get("start_dim", cst.Integer("0")), a.get("end_dim"))
            return updated if out is None else out
        if q in (F + "softmax", F + "log_softmax", "torch.softmax", "torch.log_softmax"):
            a, unknown = _args(updated, ("input", "dim"))
            if unknown or "input" not in a or not self.is_batched(original):
                return updated
            what, (b, r) = q.replace("torch.nn.functional.", "F."), self.placed(a["input"])
            dim = a.get("dim")
            if dim is None and (b != 0 or isinstance(b, Merged) or r is None):
                self.error(original, f"{what} without dim: PyTorch picks the dim from the batched input's rank (0 "
                           "for a 1- or 3-D input, 1 otherwise; deprecated), which fwport does not know here: write "
                           "dim= in the source")
                return updated
            if dim is None:  # PyTorch's implicit dim of the batched input (rank r + 1)
                dim = cst.Integer("0" if r + 1 in (1, 3) else "1")
            axis = self.shift(original, dim, what, b, r)
            return updated if axis is None else self.moved(
                _call(self.ctx.spell(f"jax.nn.{short}"), [a["input"]], axis=axis), self.axis_of(a["input"]))
        if q == F + "normalize":  # dim (1 by default) without the batch axis; the rule writes the norm
            a, unknown = _args(updated, ("input", "p", "dim", "eps", "out"))
            if unknown or "input" not in a or not self.is_batched(original):
                return updated
            axis = self.shift(original, a.get("dim", cst.Integer("1")), "F.normalize", *self.placed(a["input"]))
            if axis is None:
                return updated
            kw = {k: a[k] for k in ("p", "eps", "out") if k in a}
            return _call(updated.func, [a["input"]], dim=axis, **kw)
        if q in ("torch.sum", "torch.mean", "torch.amax", "torch.amin"):
            a, unknown = _args(updated, ("input", "dim", "keepdim"))
            if unknown or "input" not in a or not self.is_batched(original):
                return updated
            b, r = self.placed(a["input"])
            if b != 0 or isinstance(b, Merged):
                self.error(original, f"torch.{short} of a tensor whose batch axis is dimension {axis_text(b)}: not "
                           "followed there; use the method (x.sum(dim)) or move the batch axis first")
                return updated
            axis = self.shift(original, a.get("dim"), f"torch.{short}")
            if axis is None:
                return updated
            kw = {"axis": axis}
            if "keepdim" in a:
                kw["keepdims"] = a["keepdim"]
            return _call(self.ctx.spell(f"jax.numpy.{ {'amax': 'max', 'amin': 'min'}.get(short, short)}"), [a["input"]], **kw)
        if q == "torch.einsum":
            return self.einsum(original, updated)
        if q == F + "glu":
            a, unknown = _args(updated, ("input", "dim"))
            if unknown or "input" not in a or not self.is_batched(original):
                return updated
            axis = self.shift(original, a.get("dim", expr("-1")), "F.glu")
            return updated if axis is None else _call(self.ctx.spell("jax.nn.glu"), [a["input"]], axis=axis)
        if q in ("torch.max", "torch.min"):
            a, unknown = _args(updated, ("input", "dim", "keepdim"))
            if unknown or "input" not in a or not self.is_batched(a["input"]):
                return updated
            return self.extreme(short, original, updated, a["input"], a.get("dim"), a.get("keepdim"))
        if q in ("torch.var", "torch.std"):  # the batch axis dropped from dim; the rule writes ddof (ops.variance)
            a, unknown = _args(updated, ("input", "dim", "unbiased", "keepdim"))
            if "input" not in a or not self.is_batched(a["input"]) or set(unknown) - {"correction"}:
                return updated
            axis = self.shift(original, a.get("dim"), f"torch.{short}")
            if axis is None:
                return updated
            return updated.with_changes(args=[x.with_changes(value=axis) if x.value is a["dim"] else x for x in updated.args])
        if q == "torch.topk":
            a, unknown = _args(updated, ("input", "k", "dim"))
            if "input" not in a or not self.is_batched(a["input"]) or "dim" not in a:
                return updated  # the last axis by default: the same for one example
            axis = self.shift(original, a["dim"], "torch.topk")
            if axis is None:
                return updated
            return updated.with_changes(args=[x.with_changes(value=axis) if x.value is a["dim"] else x for x in updated.args])
        if q == "torch.argsort":  # dim (the last by default: the same for one example) shifted; the rule writes the rest
            a, unknown = _args(updated, ("input", "dim", "descending"))
            if "input" not in a or not self.is_batched(a["input"]) or "dim" not in a:
                return updated
            return self.dim_shifted(original, updated, a["dim"], "torch.argsort")
        if q in ("torch.bmm", "torch.mm") and len(updated.args) == 2 and any(self.is_batched(a.value) for a in original.args):
            if short == "bmm" and not all(self.is_batched(x.value) for x in updated.args):
                self.error(original, "torch.bmm of a batched tensor with one that is not: the second one's first axis "
                           "is its own batch, which one example cannot pick; compute it outside the module")
                return updated
            if short == "mm" and self.is_batched(original.args[1].value):
                self.error(original, "torch.mm with a batched second matrix: its rows are the batch axis, which a "
                           "per-example module does not have; compute it outside the module")
                return updated
            return _call(self.ctx.spell("jax.numpy.matmul"), [x.value for x in updated.args])
        if q in ("torch.dot", "torch.diag") and any(self.is_batched(a.value) for a in original.args[:2] if not a.keyword):
            self.error(original, f"torch.{short} of a batched tensor involves the batch axis, which a per-example "
                       "module does not have; do this outside the module, over the vmapped outputs")
            return updated
        if q in (F + "max_pool2d", F + "avg_pool2d", F + "max_pool1d", F + "avg_pool1d"):
            return self.pool(q, original, updated)
        if q == F + "interpolate":
            return self.interpolate(original, updated)
        if q == F + "dropout":
            return self.functional_dropout(original, updated)
        if q == "torch.split":  # sizes: the method's rewrite; a list of sizes: the rule's, dim shifted
            a, unknown = _args(updated, ("tensor", "split_size_or_sections", "dim"))
            if unknown or "tensor" not in a or "split_size_or_sections" not in a or not self.is_batched(a["tensor"]):
                return updated
            sizes = a["split_size_or_sections"]
            if isinstance(sizes, (cst.List, cst.Tuple)):
                return self.dim_shifted(original, updated, a.get("dim", cst.Integer("0")), "torch.split")
            rest = [cst.Arg(sizes)] + ([cst.Arg(a["dim"], keyword=cst.Name("dim"), equal=_EQ)] if "dim" in a else [])
            stripped = updated.with_changes(args=rest)  # as the method has them
            out = self.split("split", original, stripped, a["tensor"])
            return updated if out is stripped else out
        if q == "torch.unbind":
            a, unknown = _args(updated, ("input", "dim"))
            if unknown or "input" not in a or not self.is_batched(a["input"]):
                return updated
            axis = self.shift(original, a.get("dim", cst.Integer("0")), "torch.unbind")
            return updated if axis is None else _call(self.ctx.spell("jax.numpy.unstack"), [a["input"]], axis=axis)
        if q == "torch.norm":  # dim shifted, the rule writes the vector norm; over every axis: the batch's too
            a, unknown = _args(updated, ("input", "p", "dim", "keepdim", "out", "dtype"))
            if unknown or "input" not in a or not self.is_batched(a["input"]):
                return updated
            return self.dim_shifted(original, updated, a.get("dim"), "torch.norm")
        if q in (F + "linear", F + "conv1d", F + "conv2d", "torch.conv1d", "torch.conv2d"):
            names = ("input", "weight", "bias") if short == "linear" else \
                ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
            a, unknown = _args(updated, names)
            if unknown or "input" not in a or not self.is_batched(a["input"]):
                return updated
            if any(k in a and self.is_batched(a[k]) for k in ("weight", "bias")):
                self.error(original, f"{q.replace(F, 'F.')} with a weight or bias computed from the batch: one "
                           "example cannot hold the batch's weights; compute it outside the module")
                return updated
            if short == "linear":
                return updated  # x @ w.T + b (the rule): the same for one example (in,) as for a batch
            checked, why = ops.conv_expr(self.ctx, a["input"], a["weight"], a.get("bias"), a, int(short[-2]))
            if checked is None:  # refused here, where the call is still as written
                self.error(original, f"{q.replace(F, 'F.')}: {why}", "unsupported-argument")
                return updated
            # one example (C, *spatial) given a batch axis of one, which the rule convolves in PyTorch's layout
            one = expr(f"{_atom_code(a['input'])}[None]")
            args = [x.with_changes(value=one) if x.value is a["input"] else x for x in updated.args]
            return cst.Subscript(updated.with_changes(args=args), [cst.SubscriptElement(cst.Index(cst.Integer("0")))])
        return updated  # elementwise functions: the rules translate them

    def dim_shifted(self, original: cst.Call, updated: cst.Call, dim, what: str) -> cst.BaseExpression:
        """``updated`` with its dimension argument ``dim`` written for one example (the rule translates the rest); as
        written, and an error, where it cannot be (dim=None: every axis, the batch's too)."""
        axis = self.shift(original, dim, what)
        if axis is None:
            return updated
        if not any(x.value is dim for x in updated.args):  # the default (0): never reached, shift refuses it
            return updated
        return updated.with_changes(args=[x.with_changes(value=axis) if x.value is dim else x for x in updated.args])

    def placed(self, x: cst.BaseExpression) -> tuple:
        """(batch position, per-example rank) of a translated tensor expression, for :meth:`shift`."""
        if not self.axes_moved():
            return 0, None
        b = self.axis_of(x)
        return (0 if b is None else b), self.rank_of(x)

    def parts_axis(self, tensors: cst.BaseExpression):
        """The batch position the parts of a torch.cat / torch.stack agree on (a list display, or a list of batched
        tensors built by append: the name's own)."""
        if isinstance(tensors, (cst.List, cst.Tuple)):
            return combine(self.axis_of(e.value) for e in tensors.elements)
        return self.axis_of(tensors)

    def moved_join(self, short: str, target: str, original, a, b) -> cst.BaseExpression:
        """torch.stack / torch.cat of tensors whose batch axis is at ``b`` (or stacked before a first one): a new axis
        at or before the batch's moves it on; a concatenation along the batch axis is refused."""
        d = int_literal(a.get("dim", cst.Integer("0")))
        if isinstance(b, Grouped) and short != "stack" and d is not None:
            # one example's parts have PyTorch's rank: along another axis than the grouped one, as written
            r = self.rank_of(a["tensors"].elements[0].value) if isinstance(a["tensors"], (cst.List, cst.Tuple)) \
                and a["tensors"].elements else None
            s_ = d if d >= 0 else None if r is None else d + r
            every = isinstance(a["tensors"], (cst.List, cst.Tuple)) and all(
                self.axis_of(e.value) == b for e in a["tensors"].elements)
            if s_ is not None and s_ != int(b) and every:
                return self.moved(_call(self.ctx.spell(target), [a["tensors"]], axis=a.get("dim", cst.Integer("0"))), b)
        if b == UNKNOWN or isinstance(b, (tuple, Merged)) or b is None or d is None or d < 0:
            self.error(original, f"torch.{short}: the parts' batch axis is {axis_text(b)} and the dimension "
                       f"{code(a.get('dim', cst.Integer('0')))}: fwport follows non-negative literal dimensions of "
                       "parts holding it at one known position")
            return original
        if short == "stack":
            new_b, per = (b + 1, d) if d <= b else (b, d - 1)
            if new_b != b:
                self.ctx.report(Severity.INFO, "batch-axis", f"torch.stack(..., dim={d}): the new axis comes before the "
                                f"batch axis, which moves from dimension {b} to {new_b}", original)
        elif d == b:
            self.error(original, f"torch.cat along dimension {d}, the batch axis here: do this outside the module")
            return original
        else:
            new_b, per = b, d if d < b else d - 1
        return self.moved(_call(self.ctx.spell(target), [a["tensors"]], axis=cst.Integer(str(per))), new_b)

    def pool(self, q: str, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        kind = q.rsplit(".", 1)[-1]  # max_pool2d
        names = ("input", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices") \
            if kind.startswith("max") else ("input", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad")
        a, unknown = _args(updated, names)
        if unknown or "input" not in a or "kernel_size" not in a:
            self.error(original, f"F.{kind}: arguments {', '.join(unknown) or 'input, kernel_size'} not understood",
                       "unsupported-construct")
            return updated
        module, why = ops.pool_module(self.ctx, kind, a)
        if module is None:
            self.error(original, why, "unsupported-argument")
            return updated
        return cst.Call(module, [cst.Arg(a["input"])])

    def interpolate(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``F.interpolate(x, ...)`` of a per-example tensor (C, *spatial) → ``Upsample(...)(x)``, the helper that takes
        one example (layers.py); a tensor of the module's own keeps its batch axis: the rule vmaps the helper over it."""
        a, unknown = _args(updated, ("input", "size", "scale_factor", "mode", "align_corners", "recompute_scale_factor",
                                     "antialias"))
        if "input" not in a or not self.is_batched(a["input"]):
            return updated
        if unknown:
            self.error(original, f"F.interpolate: arguments {', '.join(unknown)} not understood", "unsupported-construct")
            return updated
        for name, fine in (("recompute_scale_factor", (None, False)), ("antialias", (False,)),
                           ("mode", ("nearest", "linear", "bilinear", "trilinear"))):
            lit = literal_value(a[name], NOT_LITERAL) if name in a else fine[0]
            if lit not in fine and not (name == "mode" and lit is NOT_LITERAL):  # Upsample checks a mode it is given
                self.error(original, f"F.interpolate: {name}={code(a[name])} is not translated (modes: nearest, linear, "
                           "bilinear, trilinear; no antialias, recompute_scale_factor)", "unsupported-argument")
                return updated
        kw = {k: a[k] for k in ("size", "scale_factor", "mode", "align_corners") if k in a}
        return cst.Call(_call(cst.Name(layers.use(self.ctx, "Upsample")), [], **kw), [cst.Arg(a["input"])])

    def token_loss(self, node: cst.Call) -> None:
        """``F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))`` in forward (a language model's
        loss, nanoGPT): PyTorch flattens the batch and the tokens together and averages over all of them. Per
        example both views flatten this example's tokens (``reshape(-1, V)``, ``reshape(-1)``) and the loss is
        this example's mean: a warning says how the batch's mean relates to PyTorch's."""
        pos = [a.value for a in node.args if a.keyword is None and not a.star]
        views = [v for v in pos[:2] if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute)
                 and v.func.attr.value in ("view", "reshape") and v.args and not v.args[0].star
                 and int_literal(v.args[0].value) == -1 and all(int_literal(a.value) != -1 for a in v.args[1:])]
        if len(pos) < 2 or len(views) != 2 or len(views[0].args) != 2 or len(views[1].args) != 1:
            return
        self.token_views |= {id(v) for v in views}
        ignore = next((a for a in node.args if a.keyword and a.keyword.value == "ignore_index"), None)
        self.ctx.report(Severity.WARNING, "batch-axis", "a loss over the tokens inside forward: per example it is the "
                        "mean over this example's tokens; the mean of the vmapped losses is PyTorch's mean over the "
                        "batch's tokens when every example counts as many targets"
                        + (f" (ignore_index={code(ignore.value)} may make them differ)" if ignore is not None else ""),
                        node)

    def flatten(self, node, x, start, end) -> cst.BaseExpression | None:
        s = int_literal(start)
        if end is not None and int_literal(end) != -1:
            self.error(node, "flatten with end_dim: not translated yet; write the reshape for one example",
                       "unsupported-construct")
            return None
        if s is None or s == 0:
            self.error(node, "flatten from dimension 0 merges the batch axis; a per-example module flattens from "
                       "dimension 1 (the example's first axis)")
            return None
        if s == 1:
            return _method(x, "reshape", [cst.UnaryOperation(cst.Minus(), cst.Integer("1"))])
        return _method(x, "reshape", [expr(f"*{_atom_code(x)}.shape[:{s - 1}]"), expr("-1")])

    # --- tensor methods ------------------------------------------------------------------------------
    def method(self, name: str, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        recv = updated.func.value
        args = updated.args
        if name == "contiguous" and not args:
            return recv
        b = self.axis_of(recv)
        if b is not None and (b != 0 or isinstance(b, Merged)):
            out = self.moved_method(name, original, updated, recv, b)
            if out is not None:
                return out
        if name in ("view", "reshape"):
            dims = [a.value for a in args]
            if len(dims) == 1 and isinstance(dims[0], (cst.Tuple, cst.List)):
                dims = [e.value for e in dims[0].elements]
            if args and not args[0].star and not args[0].keyword and len(args) > 1 \
                    and all(not a.keyword for a in args) and any(a.star == "*" for a in args[1:]) \
                    and self.is_batch_size(dims[0], original.func.value):
                # x.view(x.shape[0], *img_shape): one example's shape is the rest, spread
                rest = args[1:]
                if len(rest) == 1:
                    return _method(recv, "reshape", [rest[0].value])
                return _method(recv, "reshape", [cst.Tuple([cst.StarredElement(a.value) if a.star else cst.Element(a.value)
                                                             for a in rest])])
            if any(a.star or a.keyword for a in args) or not dims:
                return updated
            first = dims[0]
            if id(original) in self.token_views:  # a loss over the tokens: this example's flattened (token_loss)
                return _method(recv, "reshape", dims)
            like = self.shape_of_batched(original)
            if like is not None:  # a.view(b.size()) → a.reshape(b.shape): each example's part takes b's shape
                v = updated.args[0].value
                t = v.func.value if isinstance(v, cst.Call) else v.value
                self.ctx.report(Severity.INFO, "batch-axis", f"{code(original)}: one example's part takes the shape of "
                                f"one example of {code(like)} (both hold the batch axis first)", original)
                return _method(recv, "reshape", [cst.Attribute(_atom(t), cst.Name("shape"))])
            rows = self.batch_rows(original)
            if rows is not None:  # (B * T, C) → (T, C): each example's rows, the batch merged outermost into them
                i = rows[1]
                per = _product([f for j, f in enumerate(_factors(_view_dims(updated)[0])) if j != i])
                self.ctx.report(Severity.INFO, "batch-axis", f".{name}({', '.join(code(d) for d in dims)}): the "
                                f"first size is the batch size times {code(per)}: one example's rows, the batch merged "
                                "outermost into dimension 0 (PyTorch's rows are the examples' rows in turn)", original)
                return self.moved(_method(recv, "reshape", [per, *_view_dims(updated)[1:]]), Grouped(0))
            if self.is_batch_size(first, original.func.value):
                rest = dims[1:]
            elif int_literal(first) == -1 and len(dims) > 1 and all(int_literal(d) != -1 for d in dims[1:]):
                self.ctx.report(Severity.WARNING, "batch-axis",
                                f".{name}(-1, ...) read as (batch, ...): the batch axis is dropped, so "
                                f"{', '.join(code(d) for d in dims[1:])} must be the shape of one example", original)
                rest = dims[1:]
            else:
                self.error(original, f".{name}({', '.join(code(d) for d in dims)}): the batch axis cannot be told "
                           "apart; write the first size as x.size(0) (or -1) and the rest for one example")
                return updated
            if not rest:
                self.error(original, f".{name} to the batch axis alone: a per-example module has a scalar here")
                return updated
            return _method(recv, "reshape", rest)
        if name == "flatten":
            a, unknown = _args(updated, ("start_dim", "end_dim"))
            if unknown:
                return updated
            out = self.flatten(original, recv, a.get("start_dim", cst.Integer("0")), a.get("end_dim"))
            return updated if out is None else out
        if name == "size":
            if not args:
                self.error(original, ".size() includes the batch size, which a per-example module does not have; "
                           "unpack it as B, ... = x.size() (B is then dropped) or use x.shape[1:]")
                return updated
            axis = self.shift(original, args[0].value, ".size")
            return updated if axis is None else cst.Subscript(
                cst.Attribute(recv, cst.Name("shape")), [cst.SubscriptElement(cst.Index(axis))])
        if name in ("dim", "ndimension") and not args:  # the batch axis jax.vmap takes away counts, as in PyTorch
            return cst.BinaryOperation(cst.Attribute(recv, cst.Name("ndim")), cst.Add(), cst.Integer("1"),
                                       lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        if name in ("chunk", "split"):
            return self.split(name, original, updated, recv)
        if name == "unbind":  # x.unbind(dim) → jnp.unstack(x, axis=dim - 1): the slices of one example (dim 0 refused)
            a, unknown = _args(updated, ("dim",))
            if unknown:
                self.error(original, f".unbind: arguments {', '.join(unknown)} not understood", "unsupported-construct")
                return updated
            axis = self.shift(original, a.get("dim", cst.Integer("0")), ".unbind")
            return updated if axis is None else _call(self.ctx.spell("jax.numpy.unstack"), [recv], axis=axis)
        if name in ("sum", "mean", "max", "min", "softmax", "log_softmax", "unsqueeze", "squeeze", "transpose",
                    "permute", "argmax"):
            return self.axis_method(name, original, updated, recv)
        if name == "argsort":  # x.argsort(dim=-1, descending=False) → jnp.argsort(x, axis=...) over one example's axes
            a, unknown = _args(updated, ("dim", "descending"))
            if set(unknown) - {"stable"}:
                self.error(original, f".argsort: arguments {', '.join(unknown)} not understood", "unsupported-construct")
                return updated
            axis = self.shift(original, a.get("dim", expr("-1")), ".argsort")
            if axis is None:
                return updated
            kw = {"axis": axis}
            if "descending" in a:
                kw["descending"] = a["descending"]
            stable = next((x.value for x in updated.args if x.keyword is not None and x.keyword.value == "stable"), None)
            if ops.argsort_unstable(stable) and not self.drawn(updated.func.value):
                # PyTorch's order among equal values is unspecified, JAX's stable (continuous draws have no ties)
                self.ctx.report(Severity.WARNING, "approximate", ops.ARGSORT_TIES, original)
            return _call(self.ctx.spell("jax.numpy.argsort"), [recv], **kw)
        if name == "bmm" and len(args) == 1 and not args[0].keyword:
            if not self.is_batched(original.args[0].value):
                self.error(original, ".bmm of a batched tensor with one that is not: the second one's first axis is "
                           "its own batch, which one example cannot pick; compute it outside the module")
                return updated
            return _call(self.ctx.spell("jax.numpy.matmul"), [recv, args[0].value])
        if name in ("numpy", "item", "tolist"):
            self.error(original, f".{name}() inside the module: one example is traced (jax.vmap, jit), it has no host "
                       "value; return the array and convert it outside the module (np.asarray(y))", "unsupported-construct")
            return updated
        if name in ("var", "std"):  # x.var(dim): PyTorch's unbiased estimate, as torch.var (ops.variance)
            a, unknown = _args(updated, ("dim", "unbiased", "keepdim"))
            if set(unknown) - {"correction"}:
                self.error(original, f".{name}: arguments {', '.join(unknown)} not understood", "unsupported-construct")
                return updated
            axis = self.shift(original, a.get("dim"), f".{name}")
            if axis is None:
                return updated
            ddof = next((x.value for x in updated.args if x.keyword and x.keyword.value == "correction"), None)
            flag = code(a["unbiased"]) if "unbiased" in a else "True"
            kw = {"axis": axis, "ddof": ddof or expr({"True": "1", "False": "0"}.get(flag, f"int({flag})"))}
            if "keepdim" in a:
                kw["keepdims"] = a["keepdim"]
            return _call(self.ctx.spell(f"jax.numpy.{name}"), [recv], **kw)
        if name == "masked_fill":
            return self.masked_fill(original, updated, recv)
        if name == "masked_fill_" and id(original) in self.statements and isinstance(recv, cst.Name):
            # x.masked_fill_(mask, v) as a statement → x = jnp.where(mask, v, x): the value it gives x in place, where
            # x is then the only holder of its memory (not a view of another tensor, nor an input, nor viewed since)
            if recv.value not in self.sole.get(id(original), ()):
                self.error(original, f".masked_fill_() into {recv.value}, which may share its memory with another "
                           "tensor (an input, a view or slice of one, or one viewed since it was made): PyTorch fills "
                           f"that one too, which rebinding {recv.value} cannot; write the out-of-place form where "
                           f"only {recv.value} should change ({recv.value} = {recv.value}.masked_fill(mask, value)), "
                           "or rebind each tensor sharing it", "unsupported-construct")
                return updated
            before = len(self.ctx.pending)
            out = self.masked_fill(original, updated, recv)
            if not any(p.node is original and p.finding.severity is Severity.ERROR for p in self.ctx.pending[before:]):
                self.in_place[id(out)] = recv.value
            return out
        if name == "copy_" and id(original) in self.statements and len(args) == 1 and not args[0].keyword:
            return self.copy_into(original, updated, recv, args[0].value)
        if name == "repeat":
            return self.repeat(original, updated, recv)
        if name in ("relu", "sigmoid", "tanh", "exp", "log", "abs", "sqrt", "sin", "cos", "float", "detach", "clone"):
            return self.elementwise(name, recv, updated)
        if name in COMPARISONS and len(args) == 1 and not args[0].keyword and not args[0].star \
                and (literal_value(original.args[0].value) is not NOT_LITERAL
                     or self.is_batched(original.args[0].value) and self.axis_of(args[0].value) == b):
            # x.eq(0): elementwise, against a number or a tensor batched where x is, the same for each example
            return cst.Comparison(recv, [cst.ComparisonTarget(COMPARISONS[name](), args[0].value)],
                                  lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        if name == "expand":
            return self.expand(original, updated, recv, b)
        if name == "expand_as":
            return self.expand_as(original, updated, recv, b)
        dtype = ops.cast_dtype(original, self.ctx)
        if dtype is not None:  # x.to(torch.bool): a cast of each element, wherever the batch axis is
            return _method(recv, "astype", [self.ctx.spell(f"jax.numpy.{dtype}")])
        if name in ("cuda", "cpu") and not args or name == "to" and _device_move(original, self.ctx):
            return recv  # a move to a device: JAX places arrays itself (as outside the modules)
        if name == "to" and _moved_cast(original, self.ctx) is not None:
            return _method(recv, "astype", [_moved_cast(updated, self.ctx)])  # x.to(device, dtype=d): the cast alone
        from fwport.packs.torch2jax.tensor_methods import _CASTS
        if name in _CASTS and not args:  # x.double(), x.long(), ...: a cast of each element, wherever the batch axis is
            return _method(recv, "astype", [self.ctx.spell(_CASTS[name])])
        if name == "type_as" and len(args) == 1 and args[0].keyword is None and not args[0].star:
            return _method(recv, "astype", [cst.Attribute(args[0].value, cst.Name("dtype"))])
        if name == "to" and len(args) == 1 and args[0].keyword is None and not args[0].star:
            other = original.args[0].value
            if isinstance(other, cst.Name) and other.value in self.dtype_names \
                    or isinstance(other, cst.Attribute) and other.attr.value == "dtype":
                return _method(recv, "astype", [args[0].value])  # x.to(dtype), dtype = y.dtype: a cast, per element
            if self.is_batched(other) or self.rank_of(other) is not None:
                # x.to(y), y an array: y's dtype (and device, which JAX places itself); a cast of each element
                return _method(recv, "astype", [cst.Attribute(args[0].value, cst.Name("dtype"))])
            self.error(original, f"{code(original)}: fwport cannot tell whether {code(other)} is a dtype, a device or a "
                       f"tensor (whose dtype .to takes); write .astype({code(other)}) for a dtype, .astype("
                       f"{code(other)}.dtype) for a tensor's, or drop the call for a device", "unsupported-construct")
            return updated
        from fwport.packs.torch2jax.inplace import METHODS, OPERATORS
        if (name in METHODS or name in OPERATORS) and id(original) in self.statements and isinstance(recv, cst.Name):
            # (the in-place planner rebinds it where recv is the sole holder of its memory: here it may not be)
            self.error(original, f".{name}() into {recv.value}, which may share its memory with another tensor (an "
                       "input, a view or slice of one, a module's output that is its input, or one viewed since it was "
                       f"made): PyTorch changes that one too, which rebinding {recv.value} cannot; write the "
                       f"out-of-place form where only {recv.value} should change ({recv.value} = {recv.value}."
                       f"{name[:-1]}(...)), or rebind each tensor sharing it", "unsupported-construct")
            return updated
        out = self.pointwise(name, original, updated, recv, b)
        if out is not None:
            return out
        from fwport.packs.torch2jax.tensor_methods import _DRAWS
        if name in _DRAWS:
            self.error(original, f".{name}(...): draws into {code(original.func.value)} in place inside the module; JAX "
                       f"draws with an explicit key into a new array, so this is not translated; write "
                       f"{_DRAWS[name].format(x=_atom_code(recv))} with a key the module is given (as dropout's), for "
                       "one example", "unsupported-construct")
            return updated
        if name in _CONTAINER_METHODS:
            self.error(original, f"{code(original)}: no tensor has .{name}(), so {code(original.func.value)}, which "
                       "fwport follows as a batched tensor here, holds several values (a dict, a named tuple, a nested "
                       "tensor); fwport does not follow the batch axis into what a container holds, so this is not "
                       "translated: index it by its literal keys (out['logits']), or do this outside the module, on "
                       "the vmapped outputs", "unsupported-construct")
            return updated
        self.error(original, f".{name}() on a batched tensor: not translated yet", "unsupported-construct")
        return updated

    def pointwise(self, name: str, original: cst.Call, updated: cst.Call, recv, b) -> cst.BaseExpression | None:
        """A tensor method of one example computed as PyTorch computes it on the batch (None: not one of these):
        arithmetic with one operand (``x.mul(y)`` → ``x * y``, then as the operator: leave_BinaryOperation), an
        elementwise function (``x.rsqrt()`` → ``jax.lax.rsqrt(x)``), ``x.clamp(lo, hi)`` of number bounds, and the
        methods over a dimension (``x.norm(dim=-1)``, ``x.cumsum(1)``: the dimension one example has)."""
        from fwport.packs.torch2jax.tensor_methods import _BINARY, _UNARY, _norm
        args = updated.args
        moved = b is not None and (b != 0 or isinstance(b, Merged))
        if (name == "add" or _BINARY.get(name) in ("*", "/", "-", "**", "%")) and len(args) == 1 \
                and args[0].keyword is None and not args[0].star:
            op = expr(f"a {_BINARY.get(name, '+')} b").operator
            return self.leave_BinaryOperation(
                cst.BinaryOperation(original.func.value, op, original.args[0].value),
                cst.BinaryOperation(recv, op, args[0].value, lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))
        out = None
        if name in _UNARY and not args:
            out = _call(self.ctx.spell(_UNARY[name]), [recv])
        elif name == "clamp":
            a, unknown = _args(updated, ("min", "max"))
            bounds = [a.get("min"), a.get("max")]
            if unknown or not a or not all(v is None or _scalar(v) or literal_value(v, NOT_LITERAL) is not NOT_LITERAL
                                           for v in bounds):
                return None  # (a tensor bound broadcasts against the batch: the error)
            out = _call(self.ctx.spell("jax.numpy.clip"), [recv, *(v if v is not None else cst.Name("None") for v in bounds)])
        elif name in ("norm", "cumsum", "cumprod"):
            a, unknown = _args(updated, ("p", "dim", "keepdim") if name == "norm" else ("dim", "dtype"))
            if unknown or "dim" not in a or name == "norm" and moved and "keepdim" not in a:
                return None  # (a norm that drops an axis before a moved batch axis moves it: the error)
            axis = self.shift(original, a["dim"], f".{name}", b)
            if axis is None:
                return updated
            if name == "norm":
                out = _norm(code(recv), {**a, "dim": axis}, self.ctx.spell_text)
                if out is None:
                    return None
            else:
                out = _call(self.ctx.spell(f"jax.numpy.{name}"), [recv], axis=axis,
                            **({"dtype": a["dtype"]} if "dtype" in a else {}))
        if out is None:
            return None
        return self.moved(out, b) if moved else out

    def copy_into(self, original: cst.Call, updated: cst.Call, recv, value) -> cst.BaseExpression:
        """``x.copy_(v)`` / ``x[idx].copy_(v)`` as a statement of the forward (the receiver already for one example) →
        ``x = jnp.broadcast_to(v, x.shape).astype(x.dtype)`` / ``x = x.at[idx].set(v)``: the values PyTorch writes
        into x (broadcast to its shape, cast to its dtype, as ``.at[].set`` does). Only a name or a subscript of one
        that is then the only holder of its memory (inplace.sole_holders, as for ``x.add_(y)``): rebinding it updates
        no other tensor, where a write into a view, or into an input, would change the tensor
        sharing its memory in PyTorch; those are errors."""
        base = recv.value if isinstance(recv, cst.Subscript) else recv
        if not isinstance(base, cst.Name):
            self.error(original, ".copy_() into something other than a name or a slice of one: not translated; "
                       "assign the new array to a name (x = x.at[idx].set(v))", "unsupported-construct")
            return updated
        if base.value not in self.sole.get(id(original), ()):
            self.error(original, f".copy_() into {code(base)}, which may share its memory with another tensor (an "
                       "input, a view, a slice): PyTorch writes into that one too, which rebinding a name cannot; "
                       f"copy it first ({code(base)} = {code(base)}.clone()) if only {code(base)} should change",
                       "unsupported-construct")
            return updated
        if isinstance(recv, cst.Subscript):  # x[idx] → x.at[idx].set(v)
            out = expr(f"{code(base)}.at{code(recv)[len(code(base)):]}.set({code(value)})")
        else:
            out = expr(f"{code(self.ctx.spell('jax.numpy.broadcast_to'))}({code(value)}, {code(base)}.shape)"
                       f".astype({code(base)}.dtype)")
        self.in_place[id(out)] = base.value
        return out

    def expand(self, original: cst.Call, updated: cst.Call, recv, b) -> cst.BaseExpression:
        """``x.expand(B, s1, ..., sk)`` of a batched tensor (batch axis first) → ``jnp.broadcast_to(x, (s1, ..., sk))``
        for one example: the first size is the batch's (-1, or the batch size where x's rank is known to be the
        sizes' count: no new axis before it); a later -1 is x's aligned axis, ``x.shape[i - n]``."""
        from fwport.packs.torch2jax.tensor_methods import _minus_one, _plain
        sizes = [a.value for a in updated.args]
        if len(sizes) == 1 and isinstance(sizes[0], (cst.Tuple, cst.List)) \
                and not any(isinstance(e, cst.StarredElement) for e in sizes[0].elements):
            sizes = [e.value for e in sizes[0].elements]
        r, n = self.rank_of(recv), len(sizes)
        why = None
        source = original.func.value
        if b not in (None, 0) or isinstance(b, Merged):
            why = f"the batch axis is dimension {axis_text(b)}, not the first"
        elif isinstance(source, cst.Subscript) and source.slice and isinstance(source.slice[0].slice, cst.Index) \
                and code(source.slice[0].slice.value) in ("None", "..."):
            why = f"{code(source)} puts an axis before the batch axis (or indexes from the end)"
        elif any(a.keyword or a.star for a in updated.args) or n < 2 or isinstance(sizes[0], (cst.Tuple, cst.List)):
            why = "its sizes are not written one per axis"
        elif r is not None and r + 1 != n:
            why = f"{n} sizes for a tensor of {r + 1} axes: the new axes come before the batch axis"
        elif not (_minus_one(sizes[0]) or r is not None and self.is_batch_size(original.args[0].value, original.func.value)):
            why = f"its first size, {code(sizes[0])}, is not shown to be the batch's (write -1 there)"
        elif any(_minus_one(sz) for sz in sizes[1:]) and not _plain(recv):
            why = "a -1 keeps an axis of the receiver, which is not a plain name here"
        if why is not None:
            self.error(original, f".expand of a batched tensor: {why}; write jnp.broadcast_to for one example")
            return updated
        self.size_uses = [x for x in self.size_uses if x is not original.args[0].value]  # the batch's size: taken
        rest = [expr(f"{_atom_code(recv)}.shape[{i - n}]") if _minus_one(sz) else sz
                for i, sz in enumerate(sizes) if i > 0]
        elements = [cst.Element(x) for x in rest]
        if len(elements) == 1:
            elements = [elements[0].with_changes(comma=cst.Comma())]
        return _call(self.ctx.spell("jax.numpy.broadcast_to"), [recv, cst.Tuple(elements)])

    def expand_as(self, original: cst.Call, updated: cst.Call, recv, b) -> cst.BaseExpression:
        """``x.expand_as(y)``, both batched with the batch axis first and of one known rank → one example's
        ``jnp.broadcast_to(x, y.shape)``; anything else would align the batch axis with another axis: refused."""
        other = updated.args[0].value if len(updated.args) == 1 and not updated.args[0].keyword else None
        if other is None or b not in (None, 0) or isinstance(b, Merged) or not self.is_batched(original.args[0].value) \
                or self.axis_of(other) not in (None, 0) or self.rank_of(recv) is None \
                or self.rank_of(recv) != self.rank_of(other):
            self.error(original, ".expand_as of a batched tensor: translated where both tensors hold the batch axis "
                       "first and have one known rank; write jnp.broadcast_to for one example")
            return updated
        return _call(self.ctx.spell("jax.numpy.broadcast_to"), [recv, cst.Attribute(_atom(other), cst.Name("shape"))])

    def moved_method(self, name: str, original: cst.Call, updated: cst.Call, recv, b):
        """The tensor methods whose translation depends on where the batch axis is, for one held elsewhere than first
        (``b``); None where :meth:`method`'s own translation holds (elementwise methods, the axis methods, which
        place it themselves)."""
        r = self.rank_of(recv)
        args = updated.args
        if name in ("view", "reshape"):
            dims = [a.value for a in args]
            if len(dims) == 1 and isinstance(dims[0], (cst.Tuple, cst.List)):
                dims = [e.value for e in dims[0].elements]
            if not isinstance(b, Merged) and b != UNKNOWN and not any(a.star or a.keyword for a in args) and dims \
                    and int_literal(dims[0]) == -1 and len(dims) > 1 and all(int_literal(d) != -1 for d in dims[1:]) \
                    and r is not None and len(dims) - 1 == r - b:
                # (d0, ..., N, t...).view(-1, t...): the axes up to the batch's merged, the examples their inner factor
                self.ctx.report(Severity.WARNING, "batch-axis",
                                f".{name}(-1, ...) of a tensor whose batch axis is dimension {b}: it merges the axes up "
                                f"to the batch's, each example's rows interleaved; one example's view is the same call "
                                f"(so {', '.join(code(d) for d in dims[1:])} must be the sizes after the batch axis), and "
                                f"PyTorch's layout is jax.vmap(..., out_axes={b}) with axes 0..{b} merged", original)
                return self.moved(_method(recv, "reshape", dims), Merged(0))
            self.error(original, f".{name}({', '.join(code(d) for d in dims)}) of a tensor whose batch axis is "
                       f"{'dimension ' + axis_text(b) if b != UNKNOWN else 'not at one known position'}: fwport follows "
                       "a view there only as .view(-1, <the sizes after the batch axis>); write the view for one example")
            return updated
        if name == "flatten":
            a, unknown = _args(updated, ("start_dim", "end_dim"))
            st = int_literal(a.get("start_dim", cst.Integer("0")))
            if unknown or isinstance(b, Merged) or b == UNKNOWN or st is None or st < 0 or st <= b:
                self.error(original, f".flatten from dimension {code(a.get('start_dim', cst.Integer('0')))} of a tensor "
                           f"whose batch axis is dimension {axis_text(b)}: it would merge the batch axis; flatten after it")
                return updated
            out = self.flatten(original, recv, cst.Integer(str(st)), a.get("end_dim"))
            return updated if out is None else self.moved(out, b)
        if name == "size":
            if not args:
                self.error(original, ".size() includes the batch size, which a per-example module does not have")
                return updated
            axis = self.shift(original, args[0].value, ".size", b, r)
            return updated if axis is None else cst.Subscript(
                cst.Attribute(recv, cst.Name("shape")), [cst.SubscriptElement(cst.Index(axis))])
        if name in ("chunk", "split"):
            a, _ = _args(updated, ("chunks" if name == "chunk" else "split_size", "dim"))
            axis = self.shift(original, a.get("dim", cst.Integer("0")), f".{name}", b, r)
            if axis is None:
                return updated
            return self.moved(self.split(name, original, updated, recv, axis), b)
        if name == "repeat":
            sizes = [x.value for x in args]
            if len(sizes) == 1 and isinstance(sizes[0], (cst.Tuple, cst.List)):
                sizes = [e.value for e in sizes[0].elements]
            if isinstance(b, Merged) or b == UNKNOWN or any(x.keyword or x.star for x in args) or r is None \
                    or len(sizes) != r + 1 or int_literal(sizes[b]) != 1:
                self.error(original, f".repeat({', '.join(code(x) for x in sizes)}) of a tensor whose batch axis is "
                           f"dimension {axis_text(b)}: translated when the sizes are one per axis (its rank known) and "
                           "the batch axis's is 1")
                return updated
            rest = [x for i, x in enumerate(sizes) if i != b]
            return self.moved(_call(self.ctx.spell("jax.numpy.tile"), [recv, cst.Tuple([cst.Element(x) for x in rest])]), b)
        if name in ("bmm", "masked_fill", "argmax", "numpy", "item", "tolist") or name not in (
                "sum", "mean", "max", "min", "softmax", "log_softmax", "unsqueeze", "squeeze", "transpose", "permute",
                "relu", "sigmoid", "tanh", "exp", "log", "abs", "sqrt", "sin", "cos", "float", "detach", "clone",
                "to", "long", "int", "bool", "double", "half", "contiguous"):  # elementwise, or no change of layout
            if name in ("numpy", "item", "tolist"):
                return None
            if name == "masked_fill" and self.axis_of(updated.args[0].value if updated.args else recv) == b:
                return None  # a mask with the batch axis where x has it: jnp.where per example
            self.error(original, f".{name}() of a tensor whose batch axis is dimension {axis_text(b)} (PyTorch's "
                       "sequence layers hold it second): not translated there; move the batch axis first "
                       "(.transpose(0, 1)) before it, or do it outside the module")
            return updated
        return None

    def einops_batch_axis(self, q: str, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """An einops pattern naming the batch axis alone on both sides (``'b n (h d) -> b h n d'``, ``'b n d -> n b d'``):
        inside a per-example module the tensor has no batch axis. Where the tensor is computed from the module's input
        and its batch position is known, the name standing there on the left is dropped from both sides (``'n (h d) ->
        h n d'``, an info finding; a size given for it goes too) and the result holds the batch axis where the name
        stood on the right (a name not read as a batch's, b..., only where that is first). A pattern grouping a b...
        axis at the batch position with others (``'(b h) n d'``, ``'b n d -> (b n) d'``) or reducing it away is an
        error; the batch axis in a ``...`` leaves the pattern as written. Where the tensor is not proven batched and
        the first axis is named like a batch, a ``batch-axis`` error gives the per-example pattern."""
        a, _ = _args(original, ("tensor", "pattern"))
        pattern = literal_value(a["pattern"], None) if "pattern" in a else None
        if not isinstance(pattern, str) or self.batch_whole:  # (a batched module's patterns are PyTorch's, as written)
            return updated
        if "tensor" in a and self.is_batched(a["tensor"]):
            # (a name computed from sizes, `wsz = x.shape[-1]`, counts as batched here: the new positions and errors
            # are for patterns naming the batch axis like one, b...; the first-axis rewrite is for any name, as ever)
            k = self.plain_axis(a["tensor"])
            g = self.grouped_axis(a["tensor"]) if k is None else None
            if k is None and g is None:  # merged or unknown (mostly after an error that says so): the first-axis
                one = per_example_pattern(pattern)  # rewrite, as ever
                return updated if one is None else \
                    self.rewrite_pattern(q, original, updated, pattern, (one[0], one[1], 0), 0)
            plan = per_example_einops(pattern, int(g) if g is not None else k, grouped=g is not None, merge=True)
            if plan is None and g is not None:  # (its '...' would hold the examples and the other factors apart)
                plan = f"leaves the batch axis (merged outermost into dimension {int(g)}) in a '...'"
            if plan is None:
                return updated
            if isinstance(plan, str):
                if g is not None or _batch_like(_word_at(pattern, k)):
                    self.error(original, f"{q}: the pattern '{pattern}' {plan}; a per-example module has no batch "
                               "axis: write it for one example, or do this outside the module, over the vmapped outputs")
                return updated
            if g is None and (k or plan[2] != 0) and not _batch_like(plan[0]):
                return updated  # ('j d -> i j d' of a size-derived array: as written)
            return self.rewrite_pattern(q, original, updated, pattern, plan, k if g is None else g)
        one = per_example_pattern(pattern)
        if one is not None and one[0].lower().startswith("b"):
            first, text = one
            self.error(original, f"{q}: the pattern '{pattern}' keeps the batch axis {first}, which one example does "
                       f"not have; write it for one example ('{text}') and check the layers around it take one example "
                       "(a per-token layer on a sequence needs jax.vmap)")
        return updated

    def rewrite_pattern(self, q, original, updated, pattern, plan, k) -> cst.BaseExpression:
        """The einops call with :func:`per_example_einops`'s pattern (its size argument for the name dropped)."""
        a, _ = _args(original, ("tensor", "pattern"))
        name, text, out = plan
        if name is None:  # one example's pattern as written (the axis holding the examples grouped, under one name)
            return self.moved(updated, out)
        self.ctx.report(Severity.INFO, "idiom-replaced", f"{q}: '{pattern}' → '{text}': the axis {name} is the "
                        "batch axis of the module's input, which one example does not have"
                        + (f" (the result holds it at dimension {out})" if out else ""), original)
        args = []
        for x, y in zip(original.args, updated.args):
            if x.keyword is not None and x.keyword.value == name:
                continue  # its size: one example has no such axis
            args.append(y.with_changes(value=_string(text, y.value)) if x.value is a["pattern"] else y)
        new = updated.with_changes(args=_commas(args))
        if out != 0 and not isinstance(out, Merged):
            self.one_tensor.add(id(new))  # `k, v = rearrange(t, 'b s (kv d) -> kv b s d', kv=2)`: rows hold it at 0
        # (its parts' positions say nothing of the result's)
        return self.moved(new, out) if out != 0 or k != 0 else new

    def einops_batch_size(self, node: cst.Call) -> cst.BaseExpression | None:
        """The size given for the batch axis's name in an einops call :meth:`einops_batch_axis` rewrites
        (``rearrange(x, 'b n d -> n b d', b=batch)``): it goes with the name."""
        a, _ = _args(node, ("tensor", "pattern"))
        pattern = literal_value(a["pattern"], None) if "pattern" in a else None
        if not isinstance(pattern, str) or "tensor" not in a or not self.is_batched(a["tensor"]):
            return None
        k = self.plain_axis(a["tensor"])
        g = self.grouped_axis(a["tensor"]) if k is None else None
        plan = per_example_einops(pattern, k, merge=True) if k is not None else \
            per_example_einops(pattern, int(g), grouped=True, merge=True) if g is not None else None
        if not isinstance(plan, tuple):
            return None
        return next((x.value for x in node.args if x.keyword is not None and x.keyword.value == plan[0]), None)

    def other_size(self, node: cst.BaseExpression) -> bool:
        """``len(x)`` of a tensor holding the batch axis after its first (seq2seq's ``n_step = len(dec_inputs)`` of
        (L, N, F)): a number, the same per example (one example's first axis is x's), nothing batched."""
        return isinstance(node, cst.Call) and dotted_text(node.func) == "len" and len(node.args) == 1 \
            and self.is_batched(node.args[0].value) and (self.plain_axis(node.args[0].value) or 0) > 0

    def batch_rows(self, node: cst.Call) -> tuple[cst.BaseExpression, int] | None:
        """``x.view(B * T, C)`` (``x.reshape(x.size(0) * x.size(1), x.size(2))``) of a tensor holding the batch axis
        first: the first size a product with the batch size one factor. PyTorch's rows are the examples' rows in turn
        (the batch axis is the outermost of x's layout), so one example's view is ``(T, C)`` and the result holds the
        batch axis merged outermost into dimension 0 (:class:`Grouped`). (The batch-size factor, its index among the
        factors) of the original call; None for any other view."""
        recv = node.func.value
        if not node.args or any(a.star or a.keyword for a in node.args) or not self.is_batched(recv) \
                or self.plain_axis(recv) != 0 or isinstance(self.axis_of(recv), Merged):
            return None
        dims = _view_dims(node)
        factors = _factors(dims[0]) if dims else []
        if len(factors) < 2 or any(int_literal(f) is not None and int_literal(f) < 1 for f in factors):
            return None
        at = [i for i, f in enumerate(factors) if self.is_batch_size(f, recv)]
        return (factors[at[0]], at[0]) if len(at) == 1 else None

    def is_batch_size(self, node: cst.BaseExpression, recv: cst.BaseExpression) -> bool:
        """``x.size(0)`` / ``x.shape[0]`` of a batched tensor, or a name bound to the batch size."""
        if isinstance(node, cst.Name) and node.value in self.batch_sizes:
            return True
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "len" \
                and len(node.args) == 1 and not node.args[0].star and not node.args[0].keyword:  # len(x): its first axis
            x = node.args[0].value
            return self.is_batched(x) and self.plain_axis(x) == 0 and self.is_tensor(x)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "size" \
                and len(node.args) == 1 and int_literal(node.args[0].value) is not None:
            return self.is_batched(node.func.value) and int_literal(node.args[0].value) == self.plain_axis(node.func.value)
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Call) and not node.value.args \
                and isinstance(node.value.func, cst.Attribute) and node.value.func.attr.value == "size" \
                and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) \
                and int_literal(node.slice[0].slice.value) is not None:  # `x.size()[0]`
            return self.is_batched(node.value.func.value) \
                and int_literal(node.slice[0].slice.value) == self.plain_axis(node.value.func.value)
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute) and node.value.attr.value == "shape" \
                and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) \
                and int_literal(node.slice[0].slice.value) is not None:
            return self.is_batched(node.value.value) \
                and int_literal(node.slice[0].slice.value) == self.plain_axis(node.value.value)
        return False

    def plain_axis(self, node: cst.BaseExpression) -> int | None:
        """The batch position of a (source) expression as a plain index (None: merged, unknown, several)."""
        b = self.axis_of(node) if self.axes_moved() else 0
        return b if isinstance(b, int) and not isinstance(b, Merged) and b >= 0 else None

    def grouped_axis(self, node: cst.BaseExpression) -> Grouped | None:
        """The batch position of a (source) expression where it is merged outermost into an axis (:class:`Grouped`)."""
        b = self.axis_of(node) if self.axes_moved() else 0
        return b if isinstance(b, Grouped) else None

    def axis_method(self, name, original, updated, recv) -> cst.BaseExpression:
        a, unknown = _args(updated, ("dim", "keepdim") if name not in ("transpose", "permute") else ("dim0", "dim1"))
        if unknown and name != "permute":
            self.error(original, f".{name}: arguments {', '.join(unknown)} not understood", "unsupported-construct")
            return updated
        b, r = self.axis_of(recv), self.rank_of(recv)
        if b is not None and b != 0 or isinstance(b, Merged) or name in ("permute", "transpose", "unsqueeze"):
            out = self.moved_axis_method(name, original, updated, recv, a, b if b is not None else 0, r)
            if out is not None:
                return out
        if name == "permute":
            dims = [x.value for x in updated.args]
            if len(dims) == 1 and isinstance(dims[0], (cst.Tuple, cst.List)):
                dims = [e.value for e in dims[0].elements]
            ints = [int_literal(d) for d in dims]
            if not ints or ints[0] != 0 or any(i is None or i <= 0 for i in ints[1:]):
                self.error(original, f".permute({', '.join(code(d) for d in dims)}): the batch axis must stay first "
                           "(dimension 0) with the others written as non-negative literals")
                return updated
            perm = cst.Tuple([cst.Element(cst.Integer(str(i - 1))) for i in ints[1:]])
            return _call(self.ctx.spell("jax.numpy.transpose"), [recv, perm])
        if name == "transpose":
            d0 = self.shift(original, a.get("dim0"), ".transpose")
            d1 = self.shift(original, a.get("dim1"), ".transpose") if d0 is not None else None
            return updated if d1 is None else _call(self.ctx.spell("jax.numpy.swapaxes"), [recv, d0, d1])
        axis = self.shift(original, a.get("dim"), f".{name}")
        if axis is None:
            return updated
        if name in ("softmax", "log_softmax"):
            return _call(self.ctx.spell(f"jax.nn.{name}"), [recv], axis=axis)
        if name == "unsqueeze":
            return _call(self.ctx.spell("jax.numpy.expand_dims"), [recv, axis])
        if name == "squeeze":
            return _call(self.ctx.spell("jax.numpy.squeeze"), [recv], axis=axis)
        if name in ("max", "min"):
            return self.extreme(name, original, updated, recv, a.get("dim"), a.get("keepdim"), axis)
        kw = {"axis": axis}
        if "keepdim" in a:
            kw["keepdims"] = a["keepdim"]
        return _method(recv, name, [], **kw)

    def moved_axis_method(self, name, original, updated, recv, a, b, r):
        """:meth:`axis_method` where the batch axis is not first, or moves (a transpose, permute or unsqueeze through
        it); None where the batch-first translation applies unchanged."""
        if isinstance(b, Grouped) and name in ("permute", "transpose"):
            return self.grouped_permute(name, original, updated, recv, a, b, r)
        if b == UNKNOWN or isinstance(b, (tuple, Merged)) and name in ("permute", "transpose", "unsqueeze", "squeeze"):
            self.unplaced(original, f".{name}", b)
            return updated
        rank = None if r is None else r + 1  # PyTorch's
        if name in ("permute", "transpose"):
            if name == "permute":
                dims = [x.value for x in updated.args]
                if len(dims) == 1 and isinstance(dims[0], (cst.Tuple, cst.List)):
                    dims = [e.value for e in dims[0].elements]
                ints = [int_literal(d) for d in dims]
                rank = len(ints)
                order = [None if i is None else i + rank if i < 0 else i for i in ints]
                if b == 0 and ints and ints[0] == 0:
                    return None  # the batch axis stays first: as before
                if any(o is None for o in order) or sorted(order) != list(range(rank)) or b >= rank:
                    self.error(original, f".permute({', '.join(code(d) for d in dims)}): the dimensions must be "
                               "integer literals, one per axis, for fwport to follow the batch axis")
                    return updated
            else:
                d0, d1 = (int_literal(a.get(k)) if a.get(k) is not None else None for k in ("dim0", "dim1"))
                s0, s1 = (None if d is None else self.source_dim(d, b, r) for d in (d0, d1))
                if b == 0 and (s0 != 0 and s1 != 0 or s0 is None or s1 is None):
                    return None  # not through the batch axis (or not followed): as before
                if s0 is None or s1 is None or rank is None and max(s0, s1) < b:
                    self.error(original, f".transpose: dimensions {code(a.get('dim0'))}, {code(a.get('dim1'))} of a "
                               f"tensor whose batch axis is dimension {b}: write them as integer literals (of known "
                               "sign) for fwport to follow the batch axis")
                    return updated
                n = max(rank or 0, s0 + 1, s1 + 1, b + 1)
                order = list(range(n))
                order[s0], order[s1] = order[s1], order[s0]
            return self.permuted(original, recv, order, b, name)
        if name == "unsqueeze":
            d = int_literal(a.get("dim"))
            s_ = None if d is None else d if d >= 0 else None if rank is None else d + rank + 1
            if b == 0 and (s_ is None or s_ > 0):
                return None  # as before
            if s_ is None:
                self.error(original, f".unsqueeze({code(a.get('dim')) if a.get('dim') is not None else ''}): write the "
                           "dimension as a non-negative integer literal for fwport to follow the batch axis")
                return updated
            new_b, per = (b + 1, s_) if s_ <= b else (b, s_ - 1)
            out = _call(self.ctx.spell("jax.numpy.expand_dims"), [recv, cst.Integer(str(per))])
            if new_b != b:
                self.ctx.report(Severity.INFO, "batch-axis", f".unsqueeze({d}): the new axis comes before the batch "
                                f"axis, which moves from dimension {b} to {new_b}", original)
            return self.moved(out, new_b)
        if name == "squeeze" and not isinstance(b, Merged):
            d = int_literal(a.get("dim")) if a.get("dim") is not None else None
            s_ = None if d is None else self.source_dim(d, b, r)
            if s_ is not None and s_ < b:
                out = _call(self.ctx.spell("jax.numpy.squeeze"), [recv], axis=cst.Integer(str(s_)))
                return self.moved(out, b - 1)
        axis = self.shift(original, a.get("dim"), f".{name}", b, r)
        if axis is None:
            return updated
        if name in ("softmax", "log_softmax"):
            out = _call(self.ctx.spell(f"jax.nn.{name}"), [recv], axis=axis)
        elif name == "squeeze":
            out = _call(self.ctx.spell("jax.numpy.squeeze"), [recv], axis=axis)
        elif name in ("max", "min"):
            return self.extreme(name, original, updated, recv, a.get("dim"), a.get("keepdim"), axis)
        else:
            kw = {"axis": axis}
            if "keepdim" in a:
                kw["keepdims"] = a["keepdim"]
            out = _method(recv, name, [], **kw)
        keep = "keepdim" in a and code(a["keepdim"]) == "True" or name in ("softmax", "log_softmax")
        d = self.source_dim(int_literal(a.get("dim")), b, r) if int_literal(a.get("dim")) is not None else None
        if keep:
            new_b = b
        elif d is None:
            new_b = UNKNOWN
        elif isinstance(b, Merged):
            new_b = b if d > int(b) else type(b)(int(b) - 1)  # (a Grouped stays one)
        else:
            new_b = b if d > b else b - 1
        return self.moved(out, new_b)

    def grouped_permute(self, name, original, updated, recv, a, b, r) -> cst.BaseExpression:
        """``.transpose`` / ``.permute`` of a tensor holding the batch axis merged outermost into axis ``b``
        (:class:`Grouped`): one example has PyTorch's rank, so the call is the same, and the batch axis goes with its
        axis."""
        if name == "permute":
            dims = [x.value for x in updated.args]
            if len(dims) == 1 and isinstance(dims[0], (cst.Tuple, cst.List)):
                dims = [e.value for e in dims[0].elements]
            ints = [int_literal(d) for d in dims]
            order = [None if i is None else i + len(ints) if i < 0 else i for i in ints]
            if any(o is None for o in order) or sorted(order) != list(range(len(ints))) or int(b) >= len(ints):
                self.error(original, f".permute({', '.join(code(d) for d in dims)}): the dimensions must be integer "
                           "literals, one per axis, for fwport to follow the batch axis")
                return updated
            return self.moved(_call(self.ctx.spell("jax.numpy.transpose"),
                                    [recv, cst.Tuple([cst.Element(cst.Integer(str(o))) for o in order])]),
                              Grouped(order.index(int(b))))
        d0, d1 = (int_literal(a.get(k)) if a.get(k) is not None else None for k in ("dim0", "dim1"))
        s0, s1 = (None if d is None else self.source_dim(d, b, r) for d in (d0, d1))
        if s0 is None or s1 is None:
            self.error(original, f".transpose: dimensions {code(a.get('dim0'))}, {code(a.get('dim1'))} of a tensor "
                       f"whose batch axis is dimension {axis_text(b)}: write them as integer literals (its rank is not "
                       "known here) for fwport to follow the batch axis")
            return updated
        new_b = s1 if s0 == int(b) else s0 if s1 == int(b) else int(b)
        return self.moved(_call(self.ctx.spell("jax.numpy.swapaxes"), [recv, cst.Integer(str(s0)),
                                                                         cst.Integer(str(s1))]), Grouped(new_b))

    def extreme(self, fn: str, original, updated, x, dim, keepdim, axis=None) -> cst.BaseExpression:
        """``torch.max(x, dim)`` / ``x.max(dim)`` of a batched x → ``(jnp.max(x, axis=d), jnp.argmax(x, axis=d))``
        with d for one example; over all axes (the batch's too) or with a tensor (other) it is refused here."""
        if dim is None:
            self.error(original, f"{fn} over every axis of a batched tensor includes the batch axis; do this outside "
                       "the module, over the vmapped outputs")
            return updated
        if axis is None:
            if int_literal(dim) is None:
                self.error(original, f"torch.{fn}(x, {code(dim)}): a tensor (elementwise {fn}imum) or a dimension? "
                           f"write dim= as an integer literal, or torch.{fn}imum", "unsupported-construct")
                return updated
            axis = self.shift(original, dim, f"torch.{fn}")
            if axis is None:
                return updated
        if not isinstance(x, (cst.Name, cst.Attribute, cst.Subscript)) or "(" in code(x):
            self.error(original, f"{fn} with a dim gives (values, indices), computed here from the input twice: "
                       f"assign {code(x)} to a name first", "unsupported-construct")
            return updated
        kw = {"axis": axis} if keepdim is None else {"axis": axis, "keepdims": keepdim}
        pair = [_call(self.ctx.spell(f"jax.numpy.{fn}"), [x], **kw), _call(self.ctx.spell(f"jax.numpy.arg{fn}"), [x], **kw)]
        return cst.Tuple([cst.Element(v) for v in pair])

    def einsum(self, original, updated) -> cst.BaseExpression:
        """``torch.einsum('bhid,bhjd->bhij', q, k)`` with batched q, k → ``jnp.einsum('hid,hjd->hij', q, k)``: the
        batch letter (the first of every batched operand, in no other operand, first in the output) is dropped.
        Batched operands that all start with '...' (as does the output, and no other operand has '...') keep the
        equation. Anything else is refused."""
        from fwport.core.engine import literal_value
        args = [a.value for a in updated.args]
        if not args or any(a.star or a.keyword for a in updated.args):
            return updated
        ops = args[1:]
        if len(ops) == 1 and isinstance(ops[0], (cst.List, cst.Tuple)):
            ops = [e.value for e in ops[0].elements]
        originals = [a.value for a in original.args[1:]]
        if len(originals) == 1 and isinstance(originals[0], (cst.List, cst.Tuple)):
            originals = [e.value for e in originals[0].elements]
        batched = [self.is_batched(o) for o in originals]
        if not any(batched):
            return updated
        eq = literal_value(args[0], None)

        def refuse(why: str) -> cst.BaseExpression:
            self.error(original, f"torch.einsum of batched tensors: {why}; write the equation for one example "
                       "(without the batch axis)")
            return updated
        if not isinstance(eq, str):
            return refuse("the equation is not a string literal")
        eq = eq.replace(" ", "")
        if "->" not in eq:
            return refuse("the output is implicit (no '->')")
        ins, out = eq.split("->")
        subs = ins.split(",")
        if len(subs) != len(ops):
            return refuse("the equation does not name every operand")
        mine = [sub for sub, b in zip(subs, batched) if b]
        if all(sub.startswith("...") for sub in mine) and out.startswith("..."):
            if any("..." in sub for sub, bb in zip(subs, batched) if not bb):
                return refuse("an operand not computed from the input has '...' axes, which may hold the batch's")
            new_eq = eq
        else:
            b = mine[0][:1]
            if not b.isalpha() or any(sub[:1] != b or sub.count(b) != 1 for sub in mine) \
                    or any(b in sub for sub, bb in zip(subs, batched) if not bb):
                return refuse(f"the batch axis is not the first letter of every batched operand ({', '.join(mine)}) "
                              "alone")
            if out[:1] != b or out.count(b) != 1:
                return refuse(f"the batch letter {b} is not the output's first")
            new_eq = ",".join(sub[1:] if bb else sub for sub, bb in zip(subs, batched)) + "->" + out[1:]
        quote = "'" if "'" not in new_eq else '"'
        return _call(self.ctx.spell("jax.numpy.einsum"), [cst.SimpleString(f"{quote}{new_eq}{quote}"), *ops])

    def einops_einsum(self, original, updated) -> cst.BaseExpression:
        """``einops.einsum(q, k, 'b h i d, b h j d -> b h i j')`` (its pattern last): the name at each batched operand's
        batch position, the same in each, not in the other operands, alone in the output, goes from every operand and
        the output (``'h i d, h j d -> h i j'``; the result holds the batch axis where the output had it); operands
        holding it merged outermost into one axis under one name (:class:`Grouped`) keep the pattern as written (that
        name holds one example's rows). Anything else is an error (left as written, the pattern names an axis one
        example does not have)."""
        args = list(updated.args)
        if not args or any(a.star or a.keyword for a in args):
            return updated
        pattern = literal_value(args[-1].value, None)
        ops = [a.value for a in original.args[:-1]]
        batched = [self.is_batched(o) for o in ops]
        if not any(batched):
            return updated

        def refuse(why: str) -> cst.BaseExpression:
            self.error(original, f"einops.einsum of tensors computed from the input: {why}; write the pattern for one "
                       "example (without the batch axis)")
            return updated
        if not isinstance(pattern, str) or pattern.count("->") != 1:
            return refuse("the pattern is not a string literal with '->'")
        ins, out = pattern.split("->")
        subs = [x.split() for x in ins.split(",")]
        out = out.split()
        if len(subs) != len(ops):
            return refuse("the pattern does not name every operand")
        axes = [self.axis_of(a.value) if self.axes_moved() else 0 if b else None  # (translated: nested calls placed)
                for a, b in zip(args[:-1], batched)]
        mine = [(sub, a) for sub, a in zip(subs, axes) if a is not None]
        if any(isinstance(a, Grouped) for _, a in mine):
            g = mine[0][1]
            names = {sub[int(g)] if int(g) < len(sub) and "..." not in sub[:int(g) + 1] else None for sub, _ in mine}
            name = names.pop() if len(names) == 1 else None
            if any(a != g for _, a in mine) or name is None or any(sub.count(name) != 1 for sub in subs) \
                    or out.count(name) != 1 or "..." in out[:out.index(name)]:
                return refuse(f"the operands hold the batch axis at {', '.join(axis_text(a) for _, a in mine)}: "
                              "followed where each holds it merged outermost into one axis under one name")
            return self.moved(updated, Grouped(out.index(name)))
        if all(sub[:1] == ["..."] for sub, _ in mine) and out[:1] == ["..."] \
                and not any("..." in sub for sub, b in zip(subs, batched) if not b):
            # the batch axis among the leading axes '...' stands for, in every batched operand and the output: the
            # pattern is one example's as written (as torch.einsum's '...')
            if any(a != mine[0][1] for _, a in mine) or mine[0][1] == UNKNOWN or isinstance(mine[0][1], tuple):
                return refuse("the operands hold the batch axis at different places")
            return self.moved(updated, mine[0][1]) if mine[0][1] != 0 else updated
        if any(a == UNKNOWN or isinstance(a, (tuple, Merged)) for _, a in mine):
            return refuse("the batch axis is not at one known position")
        names = {sub[a] if a < len(sub) and "..." not in sub[:a + 1] else None for sub, a in mine}
        name = names.pop() if len(names) == 1 else None
        if name is None or any(sub.count(name) != 1 for sub, _ in mine) \
                or any(name in sub for sub, b in zip(subs, batched) if not b):
            return refuse(f"the batch axis is not one name at each batched operand's batch position ("
                          f"{', '.join(' '.join(sub) for sub, _ in mine)})")
        if out.count(name) != 1 or "..." in out[:out.index(name)]:
            return refuse(f"the output does not keep the batch axis {name} once, before any '...'")
        j = out.index(name)
        text = ", ".join(" ".join(x for x in sub if not (b and x == name)) for sub, b in zip(subs, batched)) \
            + " -> " + " ".join(x for x in out if x != name)
        self.ctx.report(Severity.INFO, "idiom-replaced", f"einops.einsum: '{pattern}' → '{text}': the axis {name} is "
                        "the batch axis of the module's input, which one example does not have", original)
        new = updated.with_changes(args=[*args[:-1], args[-1].with_changes(value=_string(text, args[-1].value))])
        return self.moved(new, j) if j != 0 or any(a != 0 for _, a in mine) else new

    def grouped_einsum(self, original, updated) -> cst.BaseExpression:
        """``torch.einsum('b i d, b j d -> b i j', q, k)`` where q and k hold the batch axis merged outermost into one
        axis (:class:`Grouped`, window attention's ``(b h) n d``): one example's tensors have PyTorch's rank, the
        letter at that axis indexing the other factors (its heads, its windows), so the equation is one example's as
        written where every operand holds the batch axis there, under one letter that the output keeps (the result
        holds it where the output has that letter). Anything else is an error."""
        from fwport.core.engine import literal_value
        if any(a.star or a.keyword for a in updated.args) or len(updated.args) < 2:
            self.error(original, "torch.einsum of tensors holding the batch axis merged with other axes: write the "
                       "operands as positional arguments")
            return updated
        eq = literal_value(updated.args[0].value, None)
        ops = [a.value for a in updated.args[1:]]
        axes = [self.axis_of(o) for o in ops]

        def refuse(why: str) -> cst.BaseExpression:
            self.error(original, f"torch.einsum of tensors holding the batch axis merged outermost into an axis "
                       f"({', '.join(axis_text(a) for a in axes)}): {why}; write the equation for one example")
            return updated
        if not isinstance(eq, str) or "->" not in eq or "..." in eq:
            return refuse("the equation is not a literal with '->' and without '...'")
        ins, out = eq.replace(" ", "").split("->")
        subs = ins.split(",")
        if len(subs) != len(ops) or any(a is None or not isinstance(a, Grouped) or a != axes[0] for a in axes):
            return refuse("every operand must be computed from the input and hold it at the same axis")
        g = int(axes[0])
        letters = {sub[g] if g < len(sub) else None for sub in subs}
        letter = letters.pop() if len(letters) == 1 else None
        if letter is None or any(sub.count(letter) != 1 for sub in subs) or out.count(letter) != 1:
            return refuse(f"the operands' axis {g} is not one letter that each operand and the output name once")
        return self.moved(_call(self.ctx.spell("jax.numpy.einsum"), [updated.args[0].value, *ops]),
                          Grouped(out.index(letter)))

    def masked_fill(self, original, updated, recv) -> cst.BaseExpression:
        """``x.masked_fill(mask, value)`` → ``jnp.where(mask, value, x)`` when the mask has no more axes than one
        example of x: a batched mask, or one whose rank is known and not above x's. PyTorch aligns an unbatched
        mask with the batched x from the right, so a mask with an axis for the batch (a (1, 1, T, T) causal mask)
        would give one example an extra axis: refused."""
        a, unknown = _args(updated, ("mask", "value"))
        if unknown or "mask" not in a or "value" not in a:
            self.error(original, ".masked_fill: arguments not understood", "unsupported-construct")
            return updated
        mask = a["mask"]
        if not self.is_batched(original.args[0].value):
            rx = self.rank_of(recv)
            indexed = self.buffer_mask(original.args[0].value, mask, rx)
            if indexed is not None:
                return _call(self.ctx.spell("jax.numpy.where"), [indexed, a["value"], recv])
            rm = self.mask_rank(mask)
            if rm is None or rx is None or rm > rx:
                self.error(original, f".masked_fill with the mask {code(original.args[0].value)}, which is not computed "
                           "from the module's input: one example cannot tell whether an axis of it is the batch's; "
                           "index the mask down to the example's axes (mask[0, :, :T, :T]) or compute it from the input")
                return updated
        return _call(self.ctx.spell("jax.numpy.where"), [mask, a["value"], recv])

    def buffer_mask(self, original: cst.BaseExpression, mask: cst.BaseExpression, rx: int | None):
        """A mask read from a buffer whose leading axes are of size 1 (``self.bias[:, :, :T, :T] == 0``, the buffer
        built ``.view(1, 1, n, n)``), with more axes than one example of x (rank ``rx``): those size-1 axes are no
        batch axis, and PyTorch's broadcast from the right ignores them, so they are indexed away
        (``self.bias[0, :, :T, :T]``: still broadcast over the heads). None where that is not proven."""
        cmp_ = mask if isinstance(mask, cst.Comparison) and len(mask.comparisons) == 1 else None
        sub = cmp_.left if cmp_ is not None else mask
        src = original.left if isinstance(original, cst.Comparison) else original
        if rx is None or not isinstance(sub, cst.Subscript) or not isinstance(src, cst.Subscript):
            return None
        if cmp_ is not None and not isinstance(cmp_.comparisons[0].comparator, (cst.Integer, cst.Float)):
            return None
        base = dotted_text(src.value) or ""
        if not base.startswith("self.") or base[5:] not in self.buffers or base[5:] not in self.leading_ones:
            return None
        ones, rank = self.leading_ones[base[5:]]
        elems = list(sub.slice)
        if len(elems) != rank or rank <= rx or rank - rx > ones:
            return None
        extra = rank - rx
        if not all(isinstance(e.slice, cst.Slice) and e.slice.lower is None and e.slice.upper is None
                   and e.slice.step is None for e in elems[:extra - 1]):
            return None  # the axes dropped: whole slices of size-1 axes (the last of them kept as index 0 below)
        if not all(isinstance(e.slice, cst.Slice) and e.slice.lower is None and e.slice.upper is None
                   and e.slice.step is None for e in elems[extra - 1:extra]):
            return None
        # the extra leading axes become index 0: one example's mask keeps the rest (aligned from the right)
        new = [e.with_changes(slice=cst.Index(cst.Integer("0"))) for e in elems[:extra]] + elems[extra:]
        new = [e.with_changes(comma=cst.MaybeSentinel.DEFAULT if i == len(new) - 1 else cst.Comma(
            whitespace_after=cst.SimpleWhitespace(" "))) for i, e in enumerate(new)]
        indexed = sub.with_changes(slice=new)
        return cmp_.with_changes(left=indexed) if cmp_ is not None else indexed

    def mask_rank(self, node: cst.BaseExpression) -> int | None:
        """The rank of a mask expression where it follows from known ranks (a comparison keeps its operands')."""
        if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
            left, right = self.mask_rank(node.left), self.mask_rank(node.comparisons[0].comparator)
            if isinstance(node.comparisons[0].comparator, (cst.Integer, cst.Float)):
                return left
            return None if left is None or right is None else max(left, right)
        return self.rank_of(node)

    def repeat(self, original, updated, recv) -> cst.BaseExpression:
        """``x.repeat(1, a, b)`` of a batched x with as many sizes as x has axes → ``jnp.tile(x, (a, b))``: the batch
        axis is repeated once. Other counts, or a batch repeat other than 1, are refused."""
        sizes = [x.value for x in updated.args]
        if len(sizes) == 1 and isinstance(sizes[0], (cst.Tuple, cst.List)):
            sizes = [e.value for e in sizes[0].elements]
        r = self.rank_of(recv)
        if any(x.keyword or x.star for x in updated.args) or not sizes or int_literal(sizes[0]) != 1 \
                or r is None or len(sizes) != r + 1:
            self.error(original, f".repeat({', '.join(code(x) for x in sizes)}) of a batched tensor: translated when "
                       "the sizes are one per axis of the batched tensor (its rank known) and the first, the batch's, is 1")
            return updated
        return _call(self.ctx.spell("jax.numpy.tile"), [recv, cst.Tuple([cst.Element(x) for x in sizes[1:]])])

    def split(self, name, original, updated, recv, axis=None) -> cst.BaseExpression:
        """``x.chunk(3, dim=-1)`` → ``jnp.split(x, 3, axis=-1)`` (equal parts, an error where they are not);
        ``x.split(n, dim=2)`` → ``jnp.split(x, list(range(n, x.shape[1], n)), axis=1)`` (parts of n, the last one
        shorter, as in PyTorch)."""
        a, unknown = _args(updated, ("chunks" if name == "chunk" else "split_size", "dim"))
        count = a.get("chunks" if name == "chunk" else "split_size")
        if unknown or count is None:
            self.error(original, f".{name}: arguments {', '.join(unknown) or '(none)'} not understood", "unsupported-construct")
            return updated
        if axis is None:
            axis = self.shift(original, a.get("dim", cst.Integer("0")), f".{name}")
        if axis is None:
            return updated
        if name == "split":
            if isinstance(count, (cst.List, cst.Tuple)):
                self.error(original, ".split with a list of sizes: write jnp.split with the cumulative indices",
                           "unsupported-construct")
                return updated
            if dotted_text(recv) is None and id(original) in self.parts:  # unpacked into k names: k - 1 points
                n = code(count) if isinstance(count, (cst.Integer, cst.Name, cst.Attribute)) else _atom_code(count)
                points = [count] + [expr(f"{i} * {n}") for i in range(2, self.parts[id(original)])]
                return _call(self.ctx.spell("jax.numpy.split"), [recv, cst.List([cst.Element(x) for x in points])],
                             axis=axis)
            if dotted_text(recv) is None:  # its length is needed too: name it rather than compute it twice
                self.error(original, ".split(size) of an expression: assign the expression to a name first (its "
                           "length gives the split points)", "unsupported-construct")
                return updated
            # (a list: jnp.split reads anything but a sequence of indices as a number of sections)
            count = expr(f"list(range({code(count)}, {_atom_code(recv)}.shape[{code(axis)}], {code(count)}))")
        return _call(self.ctx.spell("jax.numpy.split"), [recv, count], axis=axis)

    def elementwise(self, name, recv, updated) -> cst.BaseExpression:
        if name in ("detach",):  # (an argument needs no parentheses: nograd.py's `(a * b).detach()`)
            return _call(self.ctx.spell("jax.lax.stop_gradient"), [recv.with_changes(lpar=[], rpar=[])])
        if name == "clone":
            return recv
        if name == "float":
            return _method(recv, "astype", [self.ctx.spell("jax.numpy.float32")])
        target = {"relu": "jax.nn.relu", "sigmoid": "jax.nn.sigmoid"}.get(name, f"jax.numpy.{name}")
        return _call(self.ctx.spell(target), [recv])

    def leave_Return(self, original: cst.Return, updated: cst.Return) -> cst.Return:
        self.returns.append(self.rank_of(updated.value) if updated.value is not None else None)
        self.return_axes.append(self.axis_of(updated.value) if updated.value is not None else None)
        if not self.state_sites or updated.value is None:
            return updated
        value = updated.value
        if isinstance(value, cst.Tuple) and not value.lpar:
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return updated.with_changes(value=cst.Tuple([cst.Element(value), cst.Element(cst.Name("state"))], lpar=[], rpar=[]))

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        if isinstance(original.value, cst.Name) and original.value.value == "self" and original.attr.value in self.buffers:
            return cst.Call(self.ctx.spell("jax.lax.stop_gradient"), [cst.Arg(updated)])
        if original.attr.value == "data" and self.is_batched(original.value) and self.makes_tensor(original.value):
            return _call(self.ctx.spell("jax.lax.stop_gradient"), [updated.value])  # x.data: its values, detached
        if original.attr.value == "ndim" and self.is_batched(original.value):  # as .dim(): the batch axis counts
            return cst.BinaryOperation(updated, cst.Add(), cst.Integer("1"), lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        if original.attr.value in ("T", "mT", "H", "mH") and self.is_batched(original.value):
            self.error(original, f"{code(original)}: a transpose of every axis (the batch axis's too) of a batched "
                       "tensor; write .transpose(d0, d1) (or .permute) with its dimensions, which fwport follows")
        return updated

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        return False  # `self.mask = ...` is no read

    # --- `x.shape[i]` ----------------------------------------------------------------------------------
    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
        if id(original) in self.kept:
            return updated
        if self.range_first(original):  # `x[batch_range, idx]`: one example's gather x[idx]
            return self.range_gather(original, updated)
        v = original.value
        b = self.axis_of(updated.value) if self.axes_moved() else 0
        if isinstance(b, tuple):  # a layer's results: `self.attn(q, k, v)[0]`
            i = int_literal(original.slice[0].slice.value) if len(original.slice) == 1 \
                and isinstance(original.slice[0].slice, cst.Index) else None
            return self.moved(updated, b[i] if i is not None and -len(b) <= i < len(b) else UNKNOWN)
        new_axes = self.leading_new_axes(original)
        if new_axes and self.is_batched(v) and b == 0 and not isinstance(b, Merged):
            # `h[None]` / `h[None, ...]`: new axes before the batch axis, which moves after them (as .unsqueeze(0))
            self.ctx.report(Severity.INFO, "batch-axis", f"{code(original)}: the new axis comes before the batch axis, "
                            f"which moves from dimension 0 to {new_axes}", original)
            return self.moved(updated, new_axes)
        if isinstance(v, cst.Attribute) and v.attr.value == "shape" and self.is_batched(v.value) \
                and len(original.slice) == 1 and isinstance(original.slice[0].slice, cst.Index):
            b = self.axis_of(updated.value.value)
            if b != 0 or isinstance(b, Merged):
                axis = self.shift(original, original.slice[0].slice.value, ".shape[...]", b, self.rank_of(updated.value.value))
                return updated if axis is None else updated.with_changes(slice=[cst.SubscriptElement(cst.Index(axis))])
        elif b is not None and (b != 0 or isinstance(b, Merged)) and self.is_batched(v):
            return self.moved_index(original, updated, b)
        if isinstance(v, cst.Attribute) and v.attr.value == "shape" and self.is_batched(v.value) \
                and len(original.slice) == 1 and isinstance(original.slice[0].slice, cst.Index):
            axis = self.shift(original, original.slice[0].slice.value, ".shape[...]")
            if axis is not None:
                return updated.with_changes(slice=[cst.SubscriptElement(cst.Index(axis))])
            return updated
        if len(original.slice) >= 2 and self.is_batched(v):
            return self.index(original, updated)
        if len(original.slice) == 1 and b == 0 and self.is_batched(v) and self.is_tensor(updated.value):
            return self.first_index(original, updated)
        return updated

    def is_tensor(self, node: cst.BaseExpression) -> bool:
        """Whether a (translated) batched value is one tensor, not a list, tuple or dict of them: its per-example rank
        is known, or the forward reads the name as a tensor (``x.shape``, ``x.view(...)``: _tensor_reads)."""
        if isinstance(node, cst.Name):
            if node.value in self.part_lists:
                return False
            return node.value in self.rank or node.value in self.tensors or node.value in self.tensor_reads
        return self.makes_tensor(node)

    def makes_tensor(self, node: cst.BaseExpression) -> bool:
        """Whether a (translated) expression gives one tensor: its rank is known, a layer's call (``self.fc(x)``,
        ``jax.vmap(self.fc)(x)``), a torch / jnp / jax.nn function giving one, arithmetic or an index of a tensor."""
        if isinstance(node, cst.Name):
            return self.is_tensor(node)
        if _parts(node):
            return False
        if self.rank_of(node) is not None:
            return True
        if isinstance(node, cst.BinaryOperation):
            return self.makes_tensor(node.left) or self.makes_tensor(node.right)
        if isinstance(node, cst.UnaryOperation):
            return self.makes_tensor(node.expression)
        if isinstance(node, cst.Subscript):
            return self.makes_tensor(node.value)
        if not isinstance(node, cst.Call):
            return False
        f = node.func
        if isinstance(f, cst.Call) and dotted_text(f.func) == "jax.vmap" and f.args:
            f = f.args[0].value
        text = dotted_text(f) or ""
        if text.startswith("self.") and text.count(".") == 1:
            return self.modules.get(text[5:]) in _TENSOR_LAYERS
        if text.startswith(("jnp.", "jax.nn.")) and text.count(".") == 1 + text.startswith("jax.nn."):
            return text.rsplit(".", 1)[-1] not in _NOT_ONE_TENSOR
        q = self.ctx.imports.resolve(f) or ""
        return q.startswith("torch.") and q.count(".") <= 3 and q.rsplit(".", 1)[-1] not in _NOT_ONE_TENSOR \
            and not q.startswith(("torch.nn.functional.multi", "torch.nn.modules", "torch.distributions"))

    def first_index(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
        """``x[i]`` / ``x[1:]`` / ``x[mask]`` of a tensor holding the batch axis first: the index picks examples, which
        a per-example module does not have (left as written it would index the example's first axis instead: refused);
        ``x[:]`` and ``x[...]`` are the whole example."""
        e = original.slice[0].slice
        if isinstance(e, cst.Index) and isinstance(e.value, cst.Ellipsis) \
                or isinstance(e, cst.Slice) and e.lower is None and e.upper is None and e.step is None:
            return updated
        self.error(original, f"{code(original)}: the index is on dimension 0 of {code(original.value)}, the batch axis as "
                   "fwport follows it (PyTorch's layout: first unless a sequence layer of this file moved it), which a "
                   "per-example module does not have (left as written it would index the example's first axis): index "
                   "the axes after it (x[:, i] is x[i] for one example), or do this outside the module, over the "
                   "vmapped outputs")
        return updated

    @staticmethod
    def leading_new_axes(original: cst.Subscript) -> int:
        """How many ``None`` an index ``x[None, None, ...]`` / ``x[None]`` puts first, where nothing but one ``...``
        follows them (0 for any other index)."""
        elems = [e.slice for e in original.slice]
        k = 0
        while k < len(elems) and isinstance(elems[k], cst.Index) and code(elems[k].value) == "None":
            k += 1
        rest = elems[k:]
        if not rest or len(rest) == 1 and isinstance(rest[0], cst.Index) and isinstance(rest[0].value, cst.Ellipsis):
            return k
        return 0

    def moved_index(self, original: cst.Subscript, updated: cst.Subscript, b) -> cst.BaseExpression:
        """``x[i]`` / ``x[i, :, j]`` of a tensor whose batch axis is at ``b`` (not first): the indices before it
        (integer literals or slices) stay, the batch axis's must be ``:`` and goes, the rest stay; the result holds
        the batch axis after the axes the indices kept."""
        elems = list(original.slice)
        if isinstance(b, Grouped):
            out = self.grouped_index(original, updated, b)
            if out is not None:
                return out
        if isinstance(b, Merged) or b == UNKNOWN or any(
                isinstance(e.slice, cst.Index) and (isinstance(e.slice.value, cst.Ellipsis)
                                                    or code(e.slice.value) == "None") for e in elems):
            self.error(original, f"{code(original)}: an index of a tensor whose batch axis is "
                       f"{axis_text(b)}: write it for one example, or move the batch axis first")
            return updated
        kept = 0
        for e in elems[:b]:
            if isinstance(e.slice, cst.Index) and int_literal(e.slice.value) is None:
                self.error(original, f"{code(original)}: the index {code(e.slice.value)} before the batch axis (dimension "
                           f"{b}) is not an integer literal: fwport cannot tell whether it keeps an axis")
                return updated
            kept += isinstance(e.slice, cst.Slice)
        if len(elems) <= b:
            return self.moved(updated, kept + b - len(elems))
        e = elems[b].slice
        if not (isinstance(e, cst.Slice) and e.lower is None and e.upper is None and e.step is None):
            self.error(original, f"{code(original)}: the index at dimension {b} picks examples (the batch axis is there); "
                       "write ':' there or do this outside the module")
            return updated
        rest = [x for i, x in enumerate(updated.slice) if i != b]
        if not rest:
            return self.moved(updated.value, 0)
        rest[-1] = rest[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return self.moved(updated.with_changes(slice=rest), kept)

    def grouped_index(self, original: cst.Subscript, updated: cst.Subscript, b) -> cst.BaseExpression | None:
        """``t[:, :1]``, ``t[..., :d]`` of a tensor holding the batch axis merged outermost into axis ``b``
        (:class:`Grouped`): one example has PyTorch's rank, so an index leaving that axis and those before it whole
        (``:``) is as written, the result holding it at ``b``. None where it does not follow (the caller's error)."""
        elems = list(original.slice)
        g = int(b)

        def whole(e) -> bool:
            return isinstance(e.slice, cst.Slice) and e.slice.lower is None and e.slice.upper is None \
                and e.slice.step is None

        def plain(e) -> bool:  # an index that keeps or drops one axis: a slice, an integer literal
            return isinstance(e.slice, cst.Slice) or isinstance(e.slice, cst.Index) and int_literal(e.slice.value) \
                is not None
        if elems and isinstance(elems[0].slice, cst.Index) and isinstance(elems[0].slice.value, cst.Ellipsis):
            tail, r = elems[1:], self.rank_of(original.value)
            if r is None or not all(plain(e) for e in tail) or len(tail) > r - g - 1:
                return None  # (the axes the tail indexes must all come after the grouped one)
            return self.moved(updated, b)
        if len(elems) <= g or not all(whole(e) for e in elems[:g + 1]) or not all(plain(e) for e in elems[g + 1:]):
            return None
        return self.moved(updated, b)

    def index(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
        """``x[:, 0]`` of a batched x (two indices or more: a tensor's, no list's) → ``x[0]``: the batch axis's
        ``:`` goes. ``x[..., 0]`` is the same for one example; another first index picks examples: refused."""
        first = original.slice[0].slice
        if isinstance(first, cst.Index) and isinstance(first.value, cst.Ellipsis):
            return updated
        if isinstance(first, cst.Slice) and first.lower is None and first.upper is None and first.step is None:
            rest = list(updated.slice[1:])
            rest[-1] = rest[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return updated.with_changes(slice=rest)
        self.error(original, f"{code(original)}: the first index is the batch axis's, which a per-example module does "
                   "not have; write ':' there (every example) or do this outside the module, over the vmapped outputs")
        return updated


#: an augmented assignment into an index → the ``.at[...]`` method that does it
#: an augmented assignment's operator → its binary operation (buffer_read reads `x += b` as `x + b`)
_AUG_BINARY = {cst.AddAssign: cst.Add, cst.SubtractAssign: cst.Subtract, cst.MultiplyAssign: cst.Multiply,
               cst.DivideAssign: cst.Divide}
def _new_tensor_names(body: cst.CSTNode, ctx) -> frozenset[str]:
    """The names a forward binds only to new tensors (torch.zeros(...), torch.empty(...), torch.arange(...): a torch
    function's result that is no view, inplace._new_tensor), never to anything else."""
    from fwport.packs.torch2jax.inplace import _new_tensor
    new, other = set(), set()
    for a in find_all(body, cst.Assign):
        for t in a.targets:
            for n in find_all(t.target, cst.Name):
                if isinstance(t.target, cst.Name):
                    (new if _new_tensor(a.value, ctx) else other).add(n.value)
                elif not isinstance(t.target, (cst.Subscript, cst.Attribute)):
                    other.add(n.value)
    for node in find_all(body, cst.For) + find_all(body, cst.With) + find_all(body, cst.AugAssign):
        for n in find_all(node.target if isinstance(node, (cst.For, cst.AugAssign)) else node, cst.Name):
            if isinstance(node, cst.For) or isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Name):
                other.add(n.value)
    return frozenset(new - other)


_AT_METHODS = {cst.AddAssign: "add", cst.SubtractAssign: "subtract", cst.MultiplyAssign: "multiply",
               cst.DivideAssign: "divide"}
_AT_TEXT = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/"}
_AT_OPS = {"add": cst.AddAssign(), "subtract": cst.SubtractAssign(), "multiply": cst.MultiplyAssign(),
           "divide": cst.DivideAssign()}

#: methods of containers that no tensor has (a module's dict of outputs, a named tuple, detr's NestedTensor)
_CONTAINER_METHODS = frozenset({"items", "keys", "values", "get", "_asdict", "decompose"})
#: tensor methods no jax array has that a per-example forward leaves on a tensor without the batch axis: an error
_UNBATCHED_REFUSED = frozenset({"scatter", "scatter_", "scatter_add", "scatter_add_", "topk", "gather", "index_select",
                                "masked_scatter", "index_fill", "index_fill_", "index_add", "index_add_", "index_copy"})
#: the functions that build a tensor of given sizes filled with one value
FILLS = frozenset({"torch.zeros", "torch.ones", "torch.empty", "torch.full"})
#: the functions that draw a tensor of given sizes, each element independent (`torch.rand(B, n)`: B examples' draws)
DRAWS = frozenset({"torch.rand", "torch.randn"})


def _fill_sizes(q: str, call: cst.Call) -> list[cst.BaseExpression]:
    """The sizes ``torch.zeros(B, H)`` / ``torch.zeros((B, H))`` / ``torch.full((B, H), v)`` builds (none if unclear)."""
    positional = [x for x in call.args if x.keyword is None]
    if any(x.star for x in call.args) or not positional:
        return []
    if isinstance(positional[0].value, (cst.Tuple, cst.List)):
        return [e.value for e in positional[0].value.elements] if q != "torch.full" or len(positional) == 2 else []
    return [] if q == "torch.full" else [x.value for x in positional]


def _repeat_sides(pattern: cst.BaseExpression | None) -> tuple[list[str], list[str]] | None:
    """The top-level axes of an ``einops.repeat`` pattern whose output's first axis is a new name, the batch's
    (``'() n d -> b n d'``, ``'d -> b 1 d'``, ``'1 1 d -> b f 1 d'``, ``'... d -> b ... d'``), every other axis
    of its input kept in what follows it: (its input's axes, its output's axes after the first); None for any
    other pattern (one mixing the new axis into a group, ``'n -> (b n)'``, moves examples into other axes)."""
    from fwport.core.engine import literal_value
    text = literal_value(pattern, None) if pattern is not None else None
    if not isinstance(text, str) or text.count("->") != 1:
        return None
    left, right = (_pattern_axes(side) for side in text.split("->"))
    if not left or not right or not right[0].isidentifier():
        return None
    first, rest = right[0], right[1:]
    names = (lambda axes: [w for a in axes for w in re.findall(r"\.\.\.|\w+", a) if not w.isdigit()])
    if first in names(left) or first in names(rest) or not set(names(left)) <= set(names(rest)):
        return None
    return left, rest


def _repeat_axis(pattern: cst.BaseExpression | None) -> str | None:
    """The new first axis of an ``einops.repeat`` pattern :func:`_repeat_sides` accepts; None for any other."""
    from fwport.core.engine import literal_value
    if _repeat_sides(pattern) is None:
        return None
    return _pattern_axes(literal_value(pattern, None).split("->")[1])[0]


def _pattern_axes(side: str) -> list[str] | None:
    """The top-level axes of one side of an einops pattern (``'n (h d)'`` → ``['n', '(h d)']``); None if unbalanced."""
    out, depth, cur = [], 0, ""
    for ch in side.replace("(", " ( ").replace(")", " ) ").split():
        if ch == "(":
            depth += 1
            cur += "(" if depth == 1 else " ("
        elif ch == ")":
            depth -= 1
            cur += ")"
            if depth == 0:
                out.append(cur)
                cur = ""
        elif depth:
            cur += ch if cur.endswith("(") else " " + ch
        else:
            out.append(ch)
        if depth < 0:
            return None
    return out if depth == 0 else None


def per_example_pattern(pattern: str) -> tuple[str, str] | None:
    """An einops pattern whose first axis is one name on both sides (``'b n (h d) -> b h n d'``) → (that name, the
    pattern without it: ``'n (h d) -> h n d'``); None for any other pattern."""
    if pattern.count("->") != 1:
        return None
    left, right = (_pattern_axes(side) for side in pattern.split("->"))
    if not left or not right or left[0] != right[0] or not left[0].isidentifier() \
            or left.count(left[0]) != 1 or right.count(right[0]) != 1:
        return None
    return left[0], f"{' '.join(left[1:])} -> {' '.join(right[1:])}"


def _batch_like(word: str | None) -> bool:
    """An einops axis name that reads as the batch's (``b``, ``batch``, ``bs``; a group by its first name)."""
    return bool(word) and word.strip("( ").lower().startswith("b")


def _first_word(pattern: str) -> str | None:
    return _word_at(pattern, 0)


def _word_at(pattern: str, k: int) -> str | None:
    """The top-level axis at position ``k`` of an einops pattern's left side (None where not read)."""
    left = _pattern_axes(pattern.split("->")[0]) if pattern.count("->") == 1 else None
    return left[k] if left and k < len(left) else None


def per_example_einops(pattern: str, k: int, grouped: bool = False, merge: bool = False) \
        -> tuple[str, str, int] | str | None:
    """An einops pattern given a tensor holding the batch axis at dimension ``k``: (the name standing there, the
    pattern without it on both sides, its position on the right) where that name is a lone axis on both sides with no
    ``...`` before it (``'b (two d) -> two b 1 d'``, k 0 → ``('b', '(two d) -> two 1 d', 1)``); a reason (str) where
    the pattern moves examples into other axes or away; None where the batch axis lies in a leading ``...`` on both
    sides (the pattern is the same for one example) or the pattern is not read.

    ``merge``: the name may also stand first in a group on the right (``'b (w p) d -> (b w) p d'``, k 0 → ``('b',
    '(w p) d -> (w) p d', Grouped(0))``): it goes from the group, and the result holds the batch axis merged outermost
    into that axis (:class:`Grouped`). ``grouped``: the tensor holds the batch axis merged outermost into dimension
    ``k`` (a :class:`Grouped`), which the left side reads as a group whose first name is the batch's (``'(b w) p d'``):
    it goes from that group too (``'(w) p d'``, one example's axis holding the other factors)."""
    if pattern.count("->") != 1:
        return None
    left, right = (_pattern_axes(side) for side in pattern.split("->"))
    if left is None or right is None:
        return None
    if any("..." in x for x in left[:k + 1]):  # the batch axis in (or after) a '...': left as written
        return None
    if k >= len(left):
        return None
    words = (lambda axes: [w for x in axes for w in re.findall(r"\.\.\.|\w+", x)])
    top = left[k]
    if grouped and top.isidentifier() and words(left).count(top) == 1:
        # the grouped axis under one name ('b n (h d) -> b h n d' of '(b x y) n (h d)'): one example's axis holds the
        # other factors, the name stands for them; where it stays (alone, or first in a group) the pattern is as written
        if top in right:
            j = right.index(top)
        else:
            j = next((j for j, x in enumerate(right) if top in words([x])), None)
            if j is None:
                return f"reduces away the axis {top}, which holds the batch axis merged outermost with others"
            if words([right[j]])[0] != top:
                return f"groups the axis {top}, which holds the batch axis merged outermost, inside {right[j]}, not " \
                       "outermost"
        if words(right).count(top) != 1:
            return f"uses the axis {top}, which holds the batch axis, more than once"
        if any("..." in x for x in right[:j + 1]):
            return f"places the axis {top}, which holds the batch axis, after a '...'"
        return None, pattern, Grouped(j)
    if grouped:
        inner = words([top])
        if not top.startswith("(") or not inner or not inner[0].isidentifier():
            return f"reads the batch axis (merged outermost into dimension {k} of the tensor) as {top}, not as a " \
                   "group whose first name is the batch's ('(b ...)')"
        name = inner[0]
        new_left = left[:k] + [_group(inner[1:])] + left[k + 1:]
    else:
        name = top
        if not name.isidentifier():
            return f"reads the batch axis (dimension {k} of the tensor) as {name}"
        new_left = left[:k] + left[k + 1:]
    if words(left).count(name) != 1:
        return None
    if name not in right:
        j = next((j for j, x in enumerate(right) if name in words([x])), None)
        if j is None:
            return f"reduces it away: {name} is the batch axis (dimension {k} of the tensor)"
        if not merge:
            return f"groups it with other axes: {name} is the batch axis (dimension {k} of the tensor)"
        if words([right[j]])[0] != name:
            return f"groups it with other axes inside {right[j]}, not outermost: {name} is the batch axis " \
                   f"(dimension {k} of the tensor), and one example cannot hold the axes before it"
        if words(right).count(name) != 1:
            return f"uses the batch axis {name} more than once"
        if any("..." in x for x in right[:j + 1]):
            return f"places the batch axis {name} after a '...'"
        rest = words([right[j]])[1:]
        new_right = right[:j] + [_group(rest)] + right[j + 1:]
        return name, f"{' '.join(new_left)} -> {' '.join(new_right)}", Grouped(j)
    out = right.index(name)
    if words(right).count(name) != 1:
        return f"uses the batch axis {name} more than once"
    if any("..." in x for x in right[:out]):
        return f"places the batch axis {name} after a '...'"
    new_right = right[:out] + right[out + 1:]
    return name, f"{' '.join(new_left)} -> {' '.join(new_right)}", out


def _group(names: list[str]) -> str:
    """An einops group of ``names`` as one example's pattern writes it: one name bare (``(h)`` is ``h``)."""
    return names[0] if len(names) == 1 else "(" + " ".join(names) + ")"  # (none: '()', an axis of size 1)


#: ctx.analyses entry: the source code of einops layers whose pattern moves the batch axis and which batch.Forward
#: follows (the last layer of a Sequential every call of which it saw): ops.py writes them for one example
MOVING_LAYERS = "torch2jax.moving-einops-layers"
#: analyses key (modules.py's _function_dims): module-level functions written for the batch → their dimensions
FUNCTION_DIMS = "torch2jax.function-dims"
#: analyses key (modules.py's negative_fields): class name → the fields its __init__ sets to negative literals only
NEGATIVE_FIELDS = "torch2jax.negative-fields"


def moving_last_layer(seq) -> tuple[cst.Call, int] | None:
    """A Sequential (ranks.Sequence) whose last layer is an einops Rearrange / Reduce that moves the batch axis from
    first to another top-level position (``Rearrange('b (two d) -> two b 1 d', two=2)``), every layer before it taking
    the batch axis first: (that layer's source call, the position). None for any other Sequential."""
    from fwport.core.engine import literal_value
    from fwport.packs.torch2jax.ranks import PATTERNED
    if not seq.layers or seq.other is not None or seq.layers[-1][0] not in PATTERNED:
        return None
    call = seq.layers[-1][1]
    pattern = literal_value(call.args[0].value, None) if call.args and call.args[0].keyword is None else None
    plan = per_example_einops(pattern, 0) if isinstance(pattern, str) else None
    if not isinstance(plan, tuple) or plan[2] == 0:
        return None
    return call, plan[2]


def pattern_rank(pattern: str) -> int | None:
    """The rank of what an einops pattern gives: its output's top-level axes (None with '...', which can be any)."""
    if pattern.count("->") != 1:
        return None
    right = _pattern_axes(pattern.split("->")[1])
    return None if right is None or any("..." in a for a in right) else len(right)


def ellipsis_rank(pattern: str, rank: int | None) -> int | None:
    """The rank a pattern whose both sides start with ``...`` (``'... () () -> ...'``) gives for an input of ``rank``:
    the axes ``...`` stands for kept, the named ones replaced; None where it does not follow."""
    if rank is None or pattern.count("->") != 1:
        return None
    left, right = (_pattern_axes(side) for side in pattern.split("->"))
    if not left or not right or left[0] != "..." or right[0] != "..." or "..." in " ".join(left[1:] + right[1:]):
        return None
    out = rank - (len(left) - 1) + (len(right) - 1)
    return out if out >= 0 and rank >= len(left) - 1 else None


def _string(text: str, like: cst.BaseExpression) -> cst.SimpleString:
    """``text`` as a string literal quoted as ``like`` is."""
    quote = '"' if isinstance(like, cst.SimpleString) and like.value.endswith('"') and '"' not in text else "'"
    return cst.SimpleString(f"{quote}{text}{quote}" if quote not in text else repr(text))


def _parts(value: cst.BaseExpression) -> bool:
    """A list of arrays unpacked into names, each of the rank rank_of gives it: ``jnp.split(...)``, ``map(...)``."""
    return isinstance(value, cst.Call) and dotted_text(value.func) in ("jnp.split", "map")


def _target_names(t: cst.BaseExpression) -> list[str]:
    if isinstance(t, cst.Name):
        return [t.value]
    if isinstance(t, (cst.Tuple, cst.List)):
        return [n for e in t.elements for n in _target_names(e.value)]
    return []


_EQ = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))


def _commas(args) -> list[cst.Arg]:
    return [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args]


def _call(func: cst.BaseExpression, positional: list, **kw) -> cst.Call:
    args = [cst.Arg(p) for p in positional] + [cst.Arg(v, keyword=cst.Name(k), equal=_EQ) for k, v in kw.items()]
    return cst.Call(func, args)


def _atom(node: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or node.lpar:
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _atom_code(node: cst.BaseExpression) -> str:
    return code(_atom(node))


def _factors(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The factors of a product (``B * T * H``, parenthesised or not), left to right; one factor for any other."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply) and not node.lpar:
        return _factors(node.left) + _factors(node.right)
    return [node]


def _product(factors: list[cst.BaseExpression]) -> cst.BaseExpression:
    """``a * b * c`` of the factors (one factor: itself)."""
    out = factors[0]
    for f in factors[1:]:
        out = cst.BinaryOperation(out, cst.Multiply(), f)
    return out


def _view_dims(node: cst.Call) -> list[cst.BaseExpression]:
    """The sizes of ``x.view(a, b)`` / ``x.view((a, b))``."""
    dims = [a.value for a in node.args]
    if len(dims) == 1 and isinstance(dims[0], (cst.Tuple, cst.List)):
        return [e.value for e in dims[0].elements]
    return dims


def _method(recv: cst.BaseExpression, name: str, positional: list, **kw) -> cst.Call:
    return _call(cst.Attribute(_atom(recv), cst.Name(name)), positional, **kw)
