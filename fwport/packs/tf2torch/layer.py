"""Shape functions: how each Keras layer becomes torch module(s) given what is known of its input.

A shape function receives the mapped call (target keywords already renamed/transformed by the
rule's ``[args]``), the file context and a :class:`LayerContext`; it returns a
:class:`LayerEmission`: the module expressions, the output shape (source layout, no batch axis),
the weight-map variant and its symbols. Keras layer activations (``activation=``) become extra
modules after the layer.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import libcst as cst

from fwport.core.bind import NOT_LITERAL, call_argument, literal_value
from fwport.packs.tf2torch import dims as D
from fwport.packs.tf2torch import helpers
from fwport.packs.tf2torch.dims import known, sizes_of
from fwport.packs.tf2torch.masks import HELPER_OF
from fwport.core.engine import (LayerContext, LayerEmission, MappedCall, build_call, code, expr, map_call,
                                 translate_layer)
from fwport.core.direction import fast
from fwport.core.finding import Severity
from fwport.core.names import dotted_text
from fwport.packs.tf2torch.registry import call_transform, shape, value_transform

# Keras activation name → (torch module, keyword arguments as text). Slopes and approximations are
# those of the *string / function* form, which differ from the layer defaults (LeakyReLU 0.2 vs 0.3).
_ACTIVATIONS: dict[str, tuple[str, str]] = {
    "relu": ("torch.nn.ReLU", ""),
    "relu6": ("torch.nn.ReLU6", ""),
    "sigmoid": ("torch.nn.Sigmoid", ""),
    "tanh": ("torch.nn.Tanh", ""),
    "softmax": ("torch.nn.Softmax", "dim={axis}"),
    "log_softmax": ("torch.nn.LogSoftmax", "dim={axis}"),
    "elu": ("torch.nn.ELU", ""),
    "selu": ("torch.nn.SELU", ""),
    "softplus": ("torch.nn.Softplus", ""),
    "softsign": ("torch.nn.Softsign", ""),
    "swish": ("torch.nn.SiLU", ""),
    "silu": ("torch.nn.SiLU", ""),
    "gelu": ("torch.nn.GELU", ""),  # keras.activations.gelu is exact by default
    "mish": ("torch.nn.Mish", ""),
    "leaky_relu": ("torch.nn.LeakyReLU", "negative_slope=0.2"),
    "hard_swish": ("torch.nn.Hardswish", ""),
    "hard_silu": ("torch.nn.Hardswish", ""),
    "gelu_tanh": ("torch.nn.GELU", 'approximate="tanh"'),  # keras.ops.gelu defaults to approximate=True
}
# keras.ops.X passed as an activation: the functions' own defaults (ops.gelu is the tanh form)
_OPS_ACTIVATIONS = {"relu": "relu", "relu6": "relu6", "sigmoid": "sigmoid", "tanh": "tanh", "softmax": "softmax",
                    "log_softmax": "log_softmax", "elu": "elu", "selu": "selu", "softplus": "softplus",
                    "softsign": "softsign", "silu": "silu", "swish": "silu", "gelu": "gelu_tanh",
                    "leaky_relu": "leaky_relu", "hard_silu": "hard_silu", "hard_swish": "hard_silu",
                    "mish": "mish"}
_KERAS3_ONLY = {"hard_sigmoid": ("torch.nn.Hardsigmoid", "")}  # Keras 2's is clip(0.2x + 0.5, 0, 1)
_IDENTITY = {"linear", None}
# TF 1's spellings (import tensorflow.compat.v1 as tf) name the same functions, with the same defaults
_ACTIVATION_PREFIXES = ("keras.activations.", "tensorflow.compat.v1.nn.", "tensorflow.compat.v1.math.",
                        "tensorflow.compat.v1.", "tensorflow.nn.", "tensorflow.math.", "tensorflow.")


def activation_name(value: cst.BaseExpression, ctx) -> str | None | object:
    """The activation a Keras ``activation=`` argument names, or NOT_LITERAL if unknowable."""
    lit = literal_value(value, NOT_LITERAL)
    if lit is None or isinstance(lit, str):
        return lit
    q = ctx.imports.resolve(value) if dotted_text(value) else None
    if q:
        if q.startswith("keras.ops."):
            return _OPS_ACTIVATIONS.get(q[len("keras.ops."):], NOT_LITERAL)
        for prefix in _ACTIVATION_PREFIXES:
            if q.startswith(prefix):
                name = q[len(prefix):]
                return {"nn.relu": "relu"}.get(name, name)
    return NOT_LITERAL


def activation_modules(m: MappedCall, ctx, channel_axis: int = -1) -> list[cst.BaseExpression] | None:
    """Modules for the layer's ``activation=`` (empty for none/linear); None after reporting a failure."""
    value = m.extras.get("activation")
    if value is None:
        return []
    name = activation_name(value, ctx)
    if name in _IDENTITY:
        return []
    table = _activation_table(ctx.version)
    if name is NOT_LITERAL or name not in table:
        shown = code(value)
        why = ("Keras 2's hard_sigmoid is clip(0.2x + 0.5, 0, 1), which torch has no module for"
               if name == "hard_sigmoid" else "no torch module computes it exactly")
        m.fail(ctx, "unsupported-argument", f"activation={shown}: {why}")
        return None
    target, kwargs = table[name]
    return [expr(f"{ctx.spell_text(target)}({kwargs.format(axis=channel_axis)})")]


@value_transform("keras-activation")
def keras_activation(value, spec, m, ctx):
    """Held for the shape function, which emits the activation as a module after the layer."""
    m.extras["activation"] = value


def _activation_table(version: int) -> dict[str, tuple[str, str]]:
    """The activation names of this Keras version (activation= and keras.activations.get) → torch module."""
    return {**_ACTIVATIONS, **_KERAS3_ONLY} if version == 3 else _ACTIVATIONS


def _activation_text(name: str, version: int) -> str | None:
    """Python text of the torch module a Keras activation name stands for (None: not one torch computes)."""
    table = _activation_table(version)
    if name not in table or name == "gelu_tanh":  # keras.ops.gelu's default, not a Keras activation name
        return None
    target, kwargs = table[name]
    return f"{target}({kwargs.format(axis=-1)})"


def _activation_helper(version: int) -> str:
    """The written ``keras_activation`` (Keras 3) / ``keras2_activation`` helper: keras.activations.get
    at run time, for an identifier fwport cannot read (a constructor's parameter)."""
    name = "keras_activation" if version == 3 else "keras2_activation"
    names = [n for n in _ACTIVATIONS if n != "gelu_tanh"] + (list(_KERAS3_ONLY) if version == 3 else [])
    entries = "".join(f"\n        {n!r}: {_activation_text(n, version).replace('torch.nn.', '{nn}')}," for n in names)
    if version == 2:  # Keras 2's hard_sigmoid has no torch module
        entries += "\n        'hard_sigmoid': lambda x: (0.2 * x + 0.5).clamp(0.0, 1.0),"
    return f'''

def {name}(identifier):
    """keras.activations.get (Keras {version}): the function an activation name stands for (None and
    "linear": the identity), as a torch module; a callable is returned as it is."""
    if callable(identifier):
        return identifier
    if identifier is None or identifier == "linear":
        return {{nn}}Identity()
    table = {{{entries}
        'exponential': {{torch}}exp,
    }}
    if not isinstance(identifier, str) or identifier not in table:
        raise ValueError(f"Unknown activation function: {{identifier!r}}")
    return table[identifier]
'''


helpers.HELPERS["keras_activation"] = _activation_helper(3)
helpers.HELPERS["keras2_activation"] = _activation_helper(2)


@call_transform("activations-get")
def activations_get(m: MappedCall, ctx) -> cst.BaseExpression | None:
    """``keras.activations.get(identifier)``: a literal name → its torch module (``nn.ReLU()``, the
    functions' defaults: leaky_relu 0.2, exact gelu, softmax over the last axis); a name fwport cannot
    read → the written ``keras_activation`` helper, which looks it up when the code runs."""
    value = m.kwargs.get("identifier")
    if value is None:
        return None
    lit = literal_value(value, NOT_LITERAL)
    if lit is None or lit == "linear":
        return expr(f"{ctx.spell_text('torch.nn.Identity')}()")
    if isinstance(lit, str):
        text = _activation_text(lit, ctx.version)
        if text is None and lit != "exponential":
            m.fail(ctx, "unsupported-argument", f"activation {lit!r}: "
                   + ("Keras 2's hard_sigmoid is clip(0.2x + 0.5, 0, 1), which torch has no module for"
                      if lit == "hard_sigmoid" else "no torch module computes it exactly"))
            return None
        if text is None:
            return expr(ctx.spell_text("torch.exp"))
        target, _, args = text.partition("(")
        return expr(f"{ctx.spell_text(target)}({args}")
    name = helpers.use(ctx, "keras_activation" if ctx.version == 3 else "keras2_activation")
    return build_call(m, ctx, target=name)


def input_shape_from_kwargs(m: MappedCall, lctx: LayerContext | None = None, rank: int | None = None) -> tuple | None:
    """``input_shape=`` / ``batch_input_shape=`` / ``input_dim=`` given to a layer, as a shape tuple
    of sizes (ints, symbolic sizes or None). ``rank``: the input rank the layer itself implies
    (a Conv2D's is 3 without the batch), which gives ``input_shape=<a parameter>`` its sizes
    (``input_shape[0], input_shape[1], input_shape[-1]``)."""
    sizes = sizes_of(lctx) if lctx is not None else D.LITERAL
    if "input_shape" in m.extras:
        node = m.extras["input_shape"]
        name = sizes.shape_name(node)
        if name is not None and rank is not None:
            return D.symbolic_shape(name, rank)
        return sizes.shape(node)
    if "batch_input_shape" in m.extras:
        shape = sizes.shape(m.extras["batch_input_shape"])
        return shape[1:] if shape else None
    if "input_dim" in m.extras:
        return sizes.shape(m.extras["input_dim"], rank1=True)
    if "input_length" in m.extras and m.rule.emit.get("shape") != "embedding":
        n = sizes.dim(m.extras["input_length"])
        return (n, None) if known(n) else None
    return None


def _dim(lctx: LayerContext, node: cst.BaseExpression | None):
    """A size argument of the layer (units, filters): an int, a symbolic size, or None."""
    return sizes_of(lctx).dim(node)


def _no_context(lctx: LayerContext) -> bool:
    """The layer is translated where it stands (a functional-API call, a module-level layer): no
    pass follows its inputs, so nothing can permute a channels-last tensor for it."""
    return not lctx.scope and not lctx.source_path and not getattr(lctx, "call_site", False)


def _check_context(m: MappedCall, ctx, lctx: LayerContext, em: LayerEmission) -> LayerEmission:
    """A layer that needs channels-first inputs, translated with no call site to permute: refused."""
    if em.failed or not em.layout_bound or not _no_context(lctx):
        return em
    name = m.rule.names[0].rsplit(".", 1)[-1]
    target = code(em.modules[em.weight_module].func) if isinstance(em.modules[em.weight_module], cst.Call) else "it"
    return _failed(m, ctx, "unsupported-construct", f"{name} acts on channels-last inputs, but {target} takes "
                   "channels-first ones, and this call is not part of a model fwport follows (a keras.Sequential or "
                   "a Model subclass) where it could permute them: build the layers in a Sequential or a Model "
                   "subclass, or call the torch module on x.movedim(-1, 1) and move the channels back after")


@shape("dense")
def dense(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    in_shape = input_shape_from_kwargs(m, lctx) or lctx.in_shape
    units = _dim(lctx, m.kwargs.get("out_features"))
    if in_shape is None and "input_shape" in m.extras:  # input_shape=<a parameter>: any rank, last size known
        name = sizes_of(lctx).shape_name(m.extras["input_shape"])
        in_features = f"{name}[-1]" if name is not None else None
    else:
        in_features = in_shape[-1] if in_shape else None
    if lctx.layout == "nchw" and in_shape is not None and len(in_shape) > 1:
        return _dense_on_channels(m, ctx, in_shape, units)
    if lctx.layout == "nchw" and in_shape is None:
        return _failed(m, ctx, "shape-unknown", "Dense in a model converted to channels-first, on an input of "
                       "unknown rank: cannot tell whether it sees a flattened feature map (whose kernel rows "
                       "must be reordered); give the model its input shape")
    if known(in_features):
        m.kwargs = {"in_features": expr(str(in_features)), **m.kwargs}
        layer = build_call(m, ctx)
    else:
        layer = build_call(m, ctx, target=m.rule.emit["lazy"], positional=["out_features"])
        ctx.report(Severity.INFO, "shape-unknown", "input size unknown here: emitted nn.LazyLinear, which "
                   "infers it on the first forward pass", m.node, m.rule)
    acts = activation_modules(m, ctx)
    if layer is None or acts is None:
        return LayerEmission([m.call], failed=True)
    # the rank is known even where the units are not
    out_shape = (*in_shape[:-1], units if known(units) else None) if in_shape is not None else None
    variant = None
    symbols: dict[str, int] = {}
    if lctx.flatten_of is not None:
        variant = "after-flatten"
        h, w, c = lctx.flatten_of
        if not all(_int(x) for x in (h, w, c)):
            what = ("of unknown size" if not all(known(x) for x in (h, w, c)) else
                    f"whose size is known only as {h}, {w}, {c}")
            return _failed(m, ctx, "shape-unknown", f"Dense after the Flatten of a feature map {what}: its "
                           "kernel rows must be reordered from (h, w, c) to (c, h, w), and converting its weights "
                           "needs H, W and C as numbers; give the model a literal input shape "
                           "(keras.Input(shape=(28, 28, 1))), or keep the model channels-last")
        # the map needs the feature map's sizes only: the units may be any expression
        symbols = {"H": int(h), "W": int(w), "C": int(c), "F": int(h) * int(w) * int(c)}
    return LayerEmission([layer, *acts], out_shape, 0, variant, symbols)


def _dense_on_channels(m: MappedCall, ctx, in_shape: tuple, units) -> LayerEmission:
    """Dense on a feature map of a model converted to channels-first (a RepeatVector's steps, a conv's map):
    Keras's Dense acts on the last axis, which is the channel axis (dim 1) here, at every position; a
    Conv{1,2,3}d with kernel size 1 is that map exactly (variants `channels-first-{1,2,3}d`: the kernel
    transposed, reshaped to (units, in, 1...), the symbol I the input features)."""
    nd = len(in_shape) - 1
    in_features = in_shape[-1]
    if nd > 3:
        return _failed(m, ctx, "unsupported-construct", f"Dense on a {nd}-D feature map converted to channels-first: "
                       "no torch Conv acts on its channels; translate this model without the layout change")
    if not _int(in_features):
        return _failed(m, ctx, "shape-unknown", "Dense on a feature map converted to channels-first acts on its "
                       "channels (dim 1), which needs their number to convert the kernel; give the model a "
                       "literal input shape")
    kwargs = dict(m.kwargs)
    out = kwargs.pop("out_features", None)
    if out is None:
        return _failed(m, ctx, "unsupported-argument", "units is required")
    m.kwargs = {"in_channels": expr(str(in_features)), "out_channels": out, "kernel_size": expr("1"), **kwargs}
    layer = build_call(m, ctx, target=f"torch.nn.Conv{nd}d", positional=["in_channels", "out_channels",
                                                                        "kernel_size"])
    acts = activation_modules(m, ctx, 1)
    if layer is None or acts is None:
        return LayerEmission([m.call], failed=True)
    ctx.report(Severity.INFO, "layout-changed", f"Dense on a feature map converted to channels-first acts on its "
               f"channels (dim 1) at every position, as Keras's does on the last axis: emitted Conv{nd}d with "
               "kernel size 1, the same map (its weight map transposes and reshapes the kernel)", m.node, m.rule)
    out_shape = (*in_shape[:-1], units if known(units) else None)
    return LayerEmission([layer, *acts], out_shape, 0, f"channels-first-{nd}d", {"I": int(in_features)})


# --- helpers shared by the shape functions ---------------------------------------------------------

_INT_OPS = {cst.Add: lambda a, b: a + b, cst.Subtract: lambda a, b: a - b, cst.Multiply: lambda a, b: a * b,
            cst.FloorDivide: lambda a, b: a // b if b else None}


def int_value(node: cst.BaseExpression | None) -> int | None:
    """A literal int, or integer arithmetic on literal ints (``7 * 7 * 256``, a generator's Dense
    units); None for anything else."""
    if node is None:
        return None
    if isinstance(node, cst.BinaryOperation) and type(node.operator) in _INT_OPS:
        a, b = int_value(node.left), int_value(node.right)
        return None if a is None or b is None else _INT_OPS[type(node.operator)](a, b)
    v = literal_value(node, None)
    return v if _int(v) else None


def _failed(m: MappedCall, ctx, code_: str, message: str) -> LayerEmission:
    m.fail(ctx, code_, message)
    return LayerEmission([m.call], failed=True)


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _ntuple(v, n: int) -> tuple | None:
    """A literal int or sequence of n ints as an n-tuple; None when it is not one."""
    if _int(v):
        return (v,) * n
    if isinstance(v, (list, tuple)) and len(v) == n and all(_int(i) for i in v):
        return tuple(v)
    return None


def _compact(t: tuple) -> str:
    """``(2, 2)`` → ``2``: the idiomatic torch spelling of a per-dimension size."""
    return str(t[0]) if len(set(t)) == 1 else str(tuple(t))


def _set_kw(m: MappedCall, key: str, value: cst.BaseExpression, after: tuple[str, ...]) -> None:
    """Set a target keyword where torch's signature puts it (after the last of ``after`` present)."""
    items = [(k, v) for k, v in m.kwargs.items() if k != key]
    at = max((i + 1 for i, (k, _) in enumerate(items) if k in after), default=len(items))
    items.insert(at, (key, value))
    m.kwargs = dict(items)


_CONV_ORDER = ("in_channels", "out_channels", "kernel_size", "stride")
_POOL_ORDER = ("kernel_size", "stride")


def _option(m: MappedCall, key: str):
    return m.rule.emit.get("options", {}).get(key)


def _data_format(m: MappedCall, ctx) -> str | None:
    """'channels_last' (also for None: Keras's default image_data_format), 'channels_first', or
    None after reporting a value that cannot be read statically."""
    node = m.extras.get("data_format")
    lit = "channels_last" if node is None else literal_value(node, NOT_LITERAL)
    if lit is None or lit == "channels_last":
        return "channels_last"
    if lit == "channels_first":
        return "channels_first"
    m.fail(ctx, "unsupported-argument", f"data_format={code(node)} is not a literal: the channel axis "
           "must be known to translate the layer; fwport reads a literal, or, for a parameter of a class's "
           "__init__, its literal default or the one literal every instantiation in this file passes "
           "(the class then checks it): give one of those")
    return None


@dataclass
class _Map:
    """A feature map as a shape function sees it: spatial sizes and channels (None: unknown)."""

    spatial: tuple
    channels: int | str | None
    first: bool  # the source layer is channels_first

    def shape(self) -> tuple:
        return (self.channels, *self.spatial) if self.first else (*self.spatial, self.channels)


def _feature_map(m: MappedCall, ctx, lctx: LayerContext, nd: int) -> _Map | None:
    """The layer's input as a feature map with ``nd`` spatial axes, after checking the layout."""
    fmt = _data_format(m, ctx)
    if fmt is None:
        return None
    first = fmt == "channels_first"
    if first and lctx.layout == "nchw":
        m.fail(ctx, "unsupported-construct", "data_format='channels_first' inside a channels-last model that "
               "is being converted to channels-first: mixed layouts cannot be remapped exactly")
        return None
    in_shape = input_shape_from_kwargs(m, lctx, nd + 1) or lctx.in_shape
    if in_shape is None:
        return _Map((None,) * nd, None, first)
    if len(in_shape) != nd + 1:
        m.fail(ctx, "unsupported-construct", f"{m.rule.names[0].rsplit('.', 1)[-1]} expects a {nd + 2}-D input "
               f"(batch included); this one has shape (batch, {', '.join(map(str, in_shape))})")
        return None
    in_shape = tuple(in_shape)
    return _Map(in_shape[1:], in_shape[0], True) if first else _Map(in_shape[:-1], in_shape[-1], False)


def _layout_bound(fm: _Map, nd: int) -> int:
    """Channels-last source layers need their input permuted where a region keeps that layout."""
    return 0 if fm.first else nd + 2


def _same_pads(n, k: int, s: int, d: int = 1) -> tuple[int, int] | None:
    """TensorFlow's 'same' padding for one axis: (before, after), the extra pad after.

    For a symbolic size the padding is known where it is the same for every size: it depends on
    the size only through ``n % s`` (once the input is at least a window long), so trying each
    remainder decides it (stride 1 always pads ``(k - 1) * d`` in all)."""
    if not _int(n):
        if not known(n):
            return None
        base = ((k - 1) * d + 1) * s + s
        options = {_same_pads(base + r, k, s, d) for r in range(s)}
        return options.pop() if len(options) == 1 else None
    out = -(-n // s)
    total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
    return total // 2, total - total // 2


def _valid_out(n, k: int, s: int, d: int = 1):
    """Output size of a 'valid' window: ``(n - (k - 1) * d - 1) // s + 1``, readable when symbolic."""
    span = (k - 1) * d + 1
    if s == 1:
        return D.add(n, -(span - 1))
    return D.floordiv(D.add(n, s - span), s)


def _torch_pad_order(pads: list[tuple[int, int]]) -> tuple[int, ...]:
    """Per-axis (before, after) in source order → torch's pad tuple (last axis first)."""
    out: list[int] = []
    for lo, hi in reversed(pads):
        out += [lo, hi]
    return tuple(out)


def _channel_axis(lctx: LayerContext, rank: int | None, first: bool = False) -> int:
    """The torch channel axis for an activation with an axis (softmax) on this input."""
    if first or (lctx.layout == "nchw" and rank is not None and rank > 1):
        return 1
    return -1


def remap_axis(axis: int, in_shape: tuple | None, lctx: LayerContext) -> int | None:
    """A Keras axis (batch axis 0) → the torch axis in this layout; None when it cannot be known.

    In a channels-first region, the channel axis (last in Keras) becomes 1 and the spatial axes
    move up by one; tensors of rank 2 are laid out alike in both."""
    if lctx.layout != "nchw":
        return axis
    if in_shape is None:
        return None
    rank = len(in_shape) + 1
    if rank <= 2:
        return axis
    if not -rank <= axis < rank:
        return None
    a = axis % rank
    if a == 0:
        return 0
    return 1 if a == rank - 1 else a + 1


# --- convolutions ------------------------------------------------------------------------------------

@value_transform("keras-padding")
def keras_padding(value, spec, m, ctx):
    """Held for the shape function: 'same' / 'causal' depend on the kernel, stride and input size."""
    m.extras["padding"] = value


_COMPARE = {cst.Equal: lambda a, b: a == b, cst.NotEqual: lambda a, b: a != b, cst.LessThan: lambda a, b: a < b,
            cst.LessThanEqual: lambda a, b: a <= b, cst.GreaterThan: lambda a, b: a > b,
            cst.GreaterThanEqual: lambda a, b: a >= b}


def _folded(node: cst.BaseExpression):
    """A literal, or a conditional whose test compares literals (``"same" if 1 == 1 else "valid"``: a
    helper's ``strides == 1`` once the functional pass wrote its argument in): the branch it takes."""
    if isinstance(node, cst.IfExp):
        test = node.test
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            a = literal_value(test.left, NOT_LITERAL)
            b = literal_value(test.comparisons[0].comparator, NOT_LITERAL)
            op = _COMPARE.get(type(test.comparisons[0].operator))
            if a is NOT_LITERAL or b is NOT_LITERAL or op is None:
                return NOT_LITERAL
            try:
                taken = op(a, b)
            except TypeError:
                return NOT_LITERAL
        else:
            taken = literal_value(test, NOT_LITERAL)
            if not isinstance(taken, bool):
                return NOT_LITERAL
        return _folded(node.body if taken else node.orelse)
    return literal_value(node, NOT_LITERAL)


def _given(m: MappedCall, target_kw: str, default):
    """The literal value of an argument, ``default`` when it is not given, NOT_LITERAL when it is an
    expression known only at run time (never the default then: a stride that is a parameter is not 1)."""
    return default if target_kw not in m.kwargs else m.literal(target_kw)


def _same_pad_helper(m: MappedCall, ctx, nd: int, s, spatial: tuple = ()) -> cst.BaseExpression:
    """TensorFlow's 'same' padding computed at each call, where it cannot be computed here (a stride,
    kernel or dilation known only at run time, or an input size that is unknown or whose parity decides
    the padding): the SamePad helper written out in the file, before a conv with padding 0."""
    args = [code(m.kwargs["kernel_size"]), code(m.kwargs["stride"]) if "stride" in m.kwargs else "1"]
    if "dilation" in m.kwargs:
        args.append(code(m.kwargs["dilation"]))
    why = ("a stride, kernel size or dilation known only at run time" if s is None or
           any(_ntuple(_given(m, kw, 1), nd) is None for kw in ("kernel_size", "dilation")) else
           "the input size, which is not known statically here" if not spatial or not all(known(n) for n in spatial)
           else "whether the input size (" + ", ".join(map(str, spatial)) + ") is even or odd")
    ctx.report(Severity.INFO, "shape-unknown", f"padding='same' pads by an amount that depends on {why}: "
               f"SamePad{nd}d (written out in this file) computes TensorFlow's padding at each call", m.node, m.rule)
    return expr(f"{helpers.use(ctx, f'SamePad{nd}d')}({', '.join(args)})")


@shape("conv")
def conv(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    nd = _option(m, "nd")
    fm = _feature_map(m, ctx, lctx, nd)
    if fm is None:
        return LayerEmission([m.call], failed=True)
    k = _ntuple(m.literal("kernel_size", None), nd)
    s = _ntuple(_given(m, "stride", 1), nd)
    d = _ntuple(_given(m, "dilation", 1), nd)
    pad_node = m.extras.get("padding")
    padding = "valid" if pad_node is None else _folded(pad_node)
    padding = padding.lower() if isinstance(padding, str) else padding
    pre: list[cst.BaseExpression] = []
    pad_mod = f"torch.nn.ZeroPad{nd}d"
    if padding == "valid":
        pass
    elif padding == "same":
        if s is not None and all(x == 1 for x in s):
            _set_kw(m, "padding", pad_node if literal_value(pad_node) == "same" else expr('"same"'), _CONV_ORDER)
        else:
            pads = None
            if k is not None and d is not None and s is not None:
                pads = [_same_pads(n, kk, ss, dd) for n, kk, ss, dd in zip(fm.spatial, k, s, d)]
            if pads is None or any(p is None for p in pads):
                pre.append(_same_pad_helper(m, ctx, nd, s, fm.spatial))
            elif all(lo == hi for lo, hi in pads):
                _set_kw(m, "padding", expr(_compact(tuple(lo for lo, _ in pads))), _CONV_ORDER)
            else:  # TensorFlow puts the extra pad after (bottom/right); torch pads symmetrically
                pre.append(expr(f"{ctx.spell_text(pad_mod)}({_torch_pad_order(pads)})"))
    elif padding == "causal" and nd == 1:
        if k is None or d is None:
            return _failed(m, ctx, "unsupported-argument", "padding='causal' needs literal kernel_size and "
                           "dilation_rate")
        left = (k[0] - 1) * d[0]
        if left:
            pre.append(expr(f"{ctx.spell_text('torch.nn.ConstantPad1d')}(({left}, 0), 0.0)"))
    else:
        return _failed(m, ctx, "unsupported-argument", f"padding={code(pad_node)} has no exact torch equivalent")

    if known(fm.channels):
        m.kwargs = {"in_channels": expr(str(fm.channels)), **m.kwargs}
        layer = build_call(m, ctx)
    else:  # torch's lazy convolutions take padding='same' like the others
        layer = build_call(m, ctx, target=m.rule.emit["lazy"], positional=["out_channels", "kernel_size"])
        ctx.report(Severity.INFO, "shape-unknown", f"input channels unknown here: emitted "
                   f"{m.rule.emit['lazy'].rsplit('.', 1)[-1]}, which infers them on the first forward pass",
                   m.node, m.rule)
    acts = activation_modules(m, ctx, _channel_axis(lctx, nd + 1, fm.first))
    if layer is None or acts is None:
        return LayerEmission([m.call], failed=True)
    out_sp: list = []
    for i, n in enumerate(fm.spatial):
        if not known(n) or s is None:
            out_sp.append(None)
        elif padding == "valid":
            out_sp.append(None if k is None or d is None else _valid_out(n, k[i], s[i], d[i]))
        else:  # 'same', and 'causal' (left padding, then a valid window): ceil(n / s)
            out_sp.append(D.ceildiv(n, s[i]))
    filters = _dim(lctx, m.kwargs.get("out_channels"))
    out = _Map(tuple(out_sp), filters if known(filters) else None, fm.first).shape()
    em = LayerEmission([*pre, layer, *acts], out, len(pre), layout_bound=_layout_bound(fm, nd))
    return _check_context(m, ctx, lctx, em)


@shape("conv-transpose")
def conv_transpose(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """Conv{1,2,3}DTranspose: TensorFlow's output size and crop, exactly (see the rule's notes)."""
    nd = _option(m, "nd")
    fm = _feature_map(m, ctx, lctx, nd)
    if fm is None:
        return LayerEmission([m.call], failed=True)
    k = _ntuple(m.literal("kernel_size", None), nd)
    s = _ntuple(_given(m, "stride", 1), nd)
    if k is None or s is None:
        return _failed(m, ctx, "unsupported-argument", "kernel_size and strides must be literal ints or tuples: "
                       "the output size and TensorFlow's crop depend on them")
    m.kwargs["kernel_size"] = expr(_compact(k))
    if "stride" in m.kwargs:
        m.kwargs["stride"] = expr(_compact(s))
    dil = literal_value(m.extras["dilation_rate"], NOT_LITERAL) if "dilation_rate" in m.extras else 1
    if _ntuple(dil, nd) != (1,) * nd:
        return _failed(m, ctx, "unsupported-argument", f"dilation_rate={code(m.extras['dilation_rate'])}: a dilated "
                       "transposed convolution is not translated yet")
    op = literal_value(m.extras["output_padding"], NOT_LITERAL) if "output_padding" in m.extras else None
    if op is not None:
        op = _ntuple(op, nd) if op is not NOT_LITERAL else None
        if op is None or any(not 0 <= p < ss for p, ss in zip(op, s)):
            return _failed(m, ctx, "unsupported-argument", f"output_padding={code(m.extras['output_padding'])}: "
                           "literal ints below the strides are translated (Keras refuses the others)")
    pad_node = m.extras.get("padding")
    padding = "valid" if pad_node is None else _folded(pad_node)
    padding = padding.lower() if isinstance(padding, str) else padding
    if padding not in ("valid", "same"):
        return _failed(m, ctx, "unsupported-argument", f"padding={code(pad_node)} has no exact torch equivalent")
    pads, out_pads, crops = [], [], []
    for i, (kk, ss) in enumerate(zip(k, s)):
        if op is not None:
            # Keras's size (n - 1)*s + k - 2*(k // 2 if same else 0) + output_padding is the full transposed conv
            # (bias-only rows after it where it is longer) from TensorFlow's crop max(full - size, 0) // 2: torch's
            # padding crops that many at both ends, output_padding adds the rest after, a ZeroPad crops one too many
            extra = op[i] - 2 * (kk // 2 if padding == "same" else 0)
            pads.append(max(-extra, 0) // 2)
            out_pads.append(max(extra + 2 * pads[-1], 0))
            crops.append(max(-(extra + 2 * pads[-1]), 0))
        elif padding == "same" and kk >= ss:
            pads.append((kk - ss) // 2)
            out_pads.append(0)
            crops.append((kk - ss) % 2)  # TensorFlow crops the odd pixel after
        else:  # valid, or same with k < s: nothing cropped; the rows no tap reaches are added after
            pads.append(0)
            out_pads.append(max(ss - kk, 0))
            crops.append(0)
    if any(pads):
        _set_kw(m, "padding", expr(_compact(tuple(pads))), _CONV_ORDER)
    if any(out_pads):
        _set_kw(m, "output_padding", expr(_compact(tuple(out_pads))), (*_CONV_ORDER, "padding"))
    post: list[cst.BaseExpression] = []
    if any(crops):
        pad_mod = f"torch.nn.ZeroPad{nd}d"
        post.append(expr(f"{ctx.spell_text(pad_mod)}({_torch_pad_order([(0, -c) for c in crops])})"))
    if known(fm.channels):
        m.kwargs = {"in_channels": expr(str(fm.channels)), **m.kwargs}
        layer = build_call(m, ctx)
    else:
        layer = build_call(m, ctx, target=m.rule.emit["lazy"], positional=["out_channels", "kernel_size"])
        ctx.report(Severity.INFO, "shape-unknown", f"input channels unknown here: emitted "
                   f"{m.rule.emit['lazy'].rsplit('.', 1)[-1]}, which infers them on the first forward pass",
                   m.node, m.rule)
    acts = activation_modules(m, ctx, _channel_axis(lctx, nd + 1, fm.first))
    if layer is None or acts is None:
        return LayerEmission([m.call], failed=True)
    if op is not None:
        out_sp = tuple(D.add(D.mul(D.add(n, -1), ss), kk - 2 * (kk // 2 if padding == "same" else 0) + pp)
                       if known(n) else None for n, kk, ss, pp in zip(fm.spatial, k, s, op))
    else:
        out_sp = tuple(D.mul(n, ss) if padding == "same" else D.add(D.mul(n, ss), max(kk - ss, 0))
                       if known(n) else None for n, kk, ss in zip(fm.spatial, k, s))
    filters = _dim(lctx, m.kwargs.get("out_channels"))
    out = _Map(out_sp, filters if known(filters) else None, fm.first).shape()
    em = LayerEmission([layer, *post, *acts], out, 0, layout_bound=_layout_bound(fm, nd))
    return _check_context(m, ctx, lctx, em)


def _writable(size, lctx: LayerContext) -> bool:
    """A size written with names, every one of which may be written where the layer is built."""
    if not isinstance(size, str):
        return False
    sizes = sizes_of(lctx)
    return all(n in sizes.stable or n in sizes.constants for n in re.findall(r"[A-Za-z_]\w*", size))


def _channels_or_fail(m: MappedCall, ctx, fm: _Map, name: str, lctx: LayerContext | None = None):
    """The input channels (the groups of torch's convolution): a number, or with ``lctx`` a size written
    with names that may be written where the module is built (a builder's or __init__'s parameter,
    ``filters``: an int when the module is built)."""
    if not (_int(fm.channels) or lctx is not None and _writable(fm.channels, lctx)):
        _failed(m, ctx, "shape-unknown", f"{name} needs its number of input channels as a number (the groups of "
                "torch's convolution): give the model its input shape (keras.Input(shape=(...)))")
        return None
    return fm.channels


@shape("depthwise-conv")
def depthwise_conv(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """DepthwiseConv2D → a grouped nn.Conv2d (groups = C, C * depth_multiplier outputs, channel c's
    m-th filter at output c * dm + m, as Keras orders them)."""
    nd = _option(m, "nd")
    fm = _feature_map(m, ctx, lctx, nd)
    if fm is None:
        return LayerEmission([m.call], failed=True)
    c = _channels_or_fail(m, ctx, fm, "DepthwiseConv2D", lctx)
    dm = literal_value(m.extras["depth_multiplier"], NOT_LITERAL) if "depth_multiplier" in m.extras else 1
    k = _ntuple(m.literal("kernel_size", None), nd)
    if c is None:
        return LayerEmission([m.call], failed=True)
    if not _int(dm) or k is None and dm != 1:
        return _failed(m, ctx, "unsupported-argument", "kernel_size and depth_multiplier must be literal ints")
    m.kwargs = {"in_channels": expr(str(c)), "out_channels": expr(str(D.mul(c, dm))), **m.kwargs}
    if k is not None:
        m.kwargs["kernel_size"] = expr(_compact(k))
    _set_kw(m, "groups", expr(str(c)), (*_CONV_ORDER, "padding", "dilation"))
    em = conv(m, ctx, lctx)
    if not em.failed:
        keras2 = "keras2" if ctx.version == 2 else None  # the kernel is `depthwise_kernel` there
        if k is not None:
            em.symbols = {"KH": k[0], "KW": k[-1]}
            em.variant = keras2
        else:  # a kernel size known when the model is built (a parameter): with one filter per channel
            # Keras's (kh, kw, C, 1) kernel permuted is torch's (C, 1, kh, kw) weight, no size needed
            em.variant = f"{keras2}-dm1" if keras2 else "dm1"
    return em


@shape("separable-conv")
def separable_conv(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """SeparableConv2D → nn.Sequential(depthwise nn.Conv2d (groups = C, no bias), pointwise 1x1
    nn.Conv2d (the bias)): one module holding both, so that the weight map reaches both by name."""
    nd = _option(m, "nd")
    fm = _feature_map(m, ctx, lctx, nd)
    if fm is None:
        return LayerEmission([m.call], failed=True)
    c = _channels_or_fail(m, ctx, fm, "SeparableConv2D", lctx)
    dm = literal_value(m.extras["depth_multiplier"], NOT_LITERAL) if "depth_multiplier" in m.extras else 1
    k = _ntuple(m.literal("kernel_size", None), nd)
    if c is None:
        return LayerEmission([m.call], failed=True)
    if not _int(dm) or k is None:
        return _failed(m, ctx, "unsupported-argument", "kernel_size and depth_multiplier must be literal ints")
    filters = m.kwargs.pop("out_channels")
    bias = m.kwargs.pop("bias", None)
    activation = m.extras.pop("activation", None)
    m.kwargs = {"in_channels": expr(str(c)), "out_channels": expr(str(D.mul(c, dm))), **m.kwargs}
    m.kwargs["kernel_size"] = expr(_compact(k))
    _set_kw(m, "groups", expr(str(c)), (*_CONV_ORDER, "padding", "dilation"))
    m.kwargs["bias"] = expr("False")
    em = conv(m, ctx, lctx)
    if em.failed:
        return em
    conv2d = ctx.spell_text(f"torch.nn.Conv{nd}d")
    pointwise = expr(f"{conv2d}({D.mul(c, dm)}, {code(filters)}, 1" + ("" if bias is None else f", bias={code(bias)}") + ")")
    both = cst.Call(ctx.spell("torch.nn.Sequential"), [cst.Arg(em.modules[em.weight_module]), cst.Arg(pointwise)])
    if activation is not None:
        m.extras["activation"] = activation
    acts = activation_modules(m, ctx, _channel_axis(lctx, nd + 1, fm.first))
    if acts is None:
        return LayerEmission([m.call], failed=True)
    n_filters = _dim(lctx, filters)
    out = None
    if em.out_shape is not None:
        sp = em.out_shape[1:] if fm.first else em.out_shape[:-1]
        out = _Map(tuple(sp), n_filters if known(n_filters) else None, fm.first).shape()
    modules = [*em.modules[:em.weight_module], both, *acts]
    return LayerEmission(modules, out, em.weight_module, symbols={"KH": k[0], "KW": k[-1]},
                         layout_bound=em.layout_bound)


@shape("rescaling")
def rescaling(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """Rescaling → the Rescaling helper module (written out in the file): x * scale + offset. A scale or
    offset that is not a number broadcasts over the last axis in Keras: refused where the layout changes."""
    args = []
    for key in ("scale", "offset"):
        node = m.extras.get(key)
        if node is None:
            continue
        if lctx.layout == "nchw" and not _number_expr(node):
            return _failed(m, ctx, "unsupported-argument", f"{key}={code(node)} is not a literal number: a per-channel "
                           f"{key} broadcasts over the channels-last axis in Keras, which is dim 1 here")
        args.append(code(node) if key == "scale" else f"offset={code(node)}" if "scale" in m.extras else
                    f"1.0, {code(node)}")
    name = helpers.use(ctx, "Rescaling")
    return LayerEmission([expr(f"{name}({', '.join(args)})")], lctx.in_shape)


def _number_expr(node: cst.BaseExpression) -> bool:
    """A number written out: a literal, or arithmetic on literals (1.0 / 255, -1)."""
    if isinstance(node, cst.BinaryOperation):
        return _number_expr(node.left) and _number_expr(node.right)
    if isinstance(node, cst.UnaryOperation):
        return _number_expr(node.expression)
    v = literal_value(node, NOT_LITERAL)
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_RNN_TARGETS = {"lstm": "torch.nn.LSTM", "gru": "torch.nn.GRU", "rnn": "torch.nn.RNN"}


@shape("rnn")
def rnn(m: MappedCall, ctx, lctx: LayerContext, merge_mode: str | None = None) -> LayerEmission:
    """The recurrent layers (:func:`_rnn`); ``dropout=`` without ``recurrent_dropout=`` → the SequenceDropout
    helper before them: Keras (its default implementation, and the fused one) multiplies the inputs by one
    mask of the features per sequence, the same at every step, which that module draws. Not under
    Bidirectional (Keras draws a mask per direction) nor after a mask (the input is a packed sequence)."""
    if lctx.layout == "nchw":
        # a Sequential converted to channels-first hands it (batch, features, steps): a Permute before it gives it
        # Keras's (batch, steps, features), and one after a sequence output moves the features back to dim 1
        em = rnn(m, ctx, dataclasses.replace(lctx, layout="keep"), merge_mode)
        if em.failed:
            return em
        swap = expr(f"{helpers.use(ctx, 'Permute')}((2, 1))")
        back = [expr(f"{helpers.use(ctx, 'Permute')}((2, 1))")] if em.out_shape is not None and len(em.out_shape) == 2 else []
        if em.out_shape is None:
            return _failed(m, ctx, "unsupported-construct", f"{m.rule.names[0].rsplit('.', 1)[-1]} in a model converted to channels-first: the rank "
                           "of its output is unknown here, so fwport cannot tell whether to move its features back to "
                           "dim 1: keep this model channels-last or permute by hand")
        em.modules = [swap, *em.modules, *back]
        em.weight_module += 1
        return em
    backwards = m.extras.get("go_backwards")
    if (backwards is not None and literal_value(backwards, NOT_LITERAL) is True and merge_mode is None
            and not getattr(lctx, "mask_in", False) and not getattr(lctx, "mask_keep", False)
            and ctx.analyses.get(RNN_CALLED_AS_KERAS, {}).get(id(m.node)) is not m.node):
        # (under Bidirectional, on a masked sequence, called with its states: refused by _rnn)
        m.extras = {k: v for k, v in m.extras.items() if k != "go_backwards"}
        em = rnn(m, ctx, lctx)
        if em.failed:
            return em
        name = m.rule.names[0].rsplit(".", 1)[-1]
        ctx.report(Severity.INFO, "idiom-replaced", f"go_backwards=True → ReverseSteps (written out in this file) "
                   f"before the {name}: it reads the steps last to first, and its outputs stay in that order, as "
                   "Keras returns them", m.node, m.rule)
        em.modules = [expr(f"{helpers.use(ctx, 'ReverseSteps')}()"), *em.modules]
        em.weight_module += 1
        return em
    rec = m.extras.get("recurrent_dropout")
    if rec is not None and literal_value(rec, NOT_LITERAL) not in (0, 0.0) and not _file_trains(ctx):
        m.extras = {k: v for k, v in m.extras.items() if k != "recurrent_dropout"}
        ctx.report(Severity.WARNING, "approximate", f"recurrent_dropout={code(rec)} dropped: Keras applies it only in "
                   "training (one mask of the recurrent state per sequence, which torch's RNNs do not draw), and this "
                   "file never trains a model (no fit, train_on_batch, train_step, GradientTape, nor a call with "
                   "training=): the translation computes Keras's inference exactly; training it would differ (write "
                   "the cell by hand to train it)", m.node, m.rule)
    rec = m.extras.get("recurrent_dropout")
    if rec is not None and literal_value(rec, NOT_LITERAL) not in (0, 0.0) and merge_mode is None \
            and not getattr(lctx, "mask_in", False) and not getattr(lctx, "mask_keep", False):
        return _recurrent_dropout(m, ctx, lctx)
    node = m.extras.get("dropout")
    if merge_mode is not None and node is not None and literal_value(node, NOT_LITERAL) not in (0, 0.0):
        return _bidirectional_dropout(m, ctx, lctx, merge_mode)
    if node is None or literal_value(node, NOT_LITERAL) in (0, 0.0) or merge_mode is not None \
            or (rec is not None and literal_value(rec, NOT_LITERAL) not in (0, 0.0)) or getattr(lctx, "mask_in", False) \
            or ctx.analyses.get(RNN_CALLED_AS_KERAS, {}).get(id(m.node)) is m.node:  # called with initial_state=...
        return _rnn(m, ctx, lctx, merge_mode)
    per_step = _keras2_per_step(m, ctx)
    if per_step is None:
        return _failed(m, ctx, "unsupported-argument", _KERAS2_UNFUSED.format(code(node)))
    m.extras = {k: v for k, v in m.extras.items() if k != "dropout"}
    em = _rnn(m, ctx, lctx, merge_mode)
    if em.failed:
        return em
    drop = expr(f"{helpers.use(ctx, 'SequenceDropout')}({code(node)}{', per_step=True' if per_step else ''})")
    ctx.report(Severity.INFO, "idiom-replaced", f"dropout={code(node)} → SequenceDropout (written out in this file) "
               f"before the {m.rule.names[0].rsplit('.', 1)[-1]}: one mask of the input features per "
               f"{'step (Keras 2 fused path)' if per_step else 'sequence'} in training, as Keras's; the identity in "
               "eval()", m.node, m.rule)
    em.modules = [drop, *em.modules]
    em.weight_module += 1
    return em


#: what trains a model, or calls a layer in training, in a file's text (a training= other than a literal False
#: too: Keras applies the layer's training-only behaviour where a call passes training=True on)
_TRAINS = fast(r"\.\s*(?:fit|fit_generator|train_on_batch|minimize)\s*\(|\bGradientTape\b|\bapply_gradients\b|"
               r"\bdef\s+train_step\b|\btraining\s*=(?!=|\s*False\b)|\blearning_phase\b")


def _file_trains(ctx) -> bool:
    """Whether the file may train a model or call its layers in training (:data:`_TRAINS` in its text; True
    where the text is not known)."""
    parsed = ctx.analyses.get("parsed")
    return parsed is None or _TRAINS.search(parsed[1]) is not None


_KERAS2_UNFUSED = ("dropout={}: Keras 2's layer draws one mask per step on its fused path and one per sequence on its "
                   "cell's (unroll=True or use_bias=False; per gate with implementation=1): fwport writes them where "
                   "unroll= and use_bias= are literals and implementation= is 2; apply the dropout by hand")


def _keras2_per_step(m: MappedCall, ctx) -> bool | None:
    """Whether the recurrent layer's dropout= masks each step's features (True) or each sequence's (False): Keras 2's
    LSTM and GRU take their fused path (tf_keras's _could_use_gpu_kernel: tanh / sigmoid, no recurrent_dropout and
    reset_after=True, which fwport requires, no unroll=True, use_bias=True), which multiplies the whole input by one
    mask of its shape; with unroll=True or use_bias=False the cell's path, whose mask (implementation=2) is one
    per sequence, as Keras 2's SimpleRNN and Keras 3 draw it. None where that cannot be read (not literals, or
    implementation=1 on the cell's path: a mask per gate)."""
    if not (ctx.version == 2 and _option(m, "kind") in ("lstm", "gru")):
        return False
    given = {a.keyword.value: literal_value(a.value, NOT_LITERAL) for a in m.call.args if a.keyword is not None}
    unfused = given.get("unroll", False) is True or given.get("use_bias", True) is False
    if given.get("unroll", False) not in (True, False) or given.get("use_bias", True) not in (True, False) \
            or (unfused and given.get("implementation", 2) != 2):
        return None
    return not unfused  # (the cell's path: implementation=2, one mask of the step's input per sequence)


def _recurrent_dropout(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """LSTM / GRU / SimpleRNN(recurrent_dropout=q) → the RecurrentDropout<kind> helper (written out in the file;
    LazyRecurrentDropout<kind> where the Lazy<kind> helper is what the layer becomes): a subclass of the torch module
    (its parameter names, so the weight maps hold) that is torch's recurrence in eval() and in train() the cell's
    loop with Keras's masks (one per gate of the inputs for dropout=, of the previous output for recurrent_dropout=,
    drawn once per sequence). Where the layer becomes something else, the refusal of :func:`_rnn` stands."""
    extras = m.extras
    rec, node = extras["recurrent_dropout"], extras.get("dropout")
    for v in (rec, node):
        if v is not None and not isinstance(literal_value(v, NOT_LITERAL), (int, float)):
            return _failed(m, ctx, "unsupported-argument", f"{code(v)}: the dropout rates of a recurrent layer with "
                           "recurrent_dropout= must be number literals here")
    mark = len(ctx.pending)
    m.extras = {k: v for k, v in extras.items() if k not in ("dropout", "recurrent_dropout")}
    em = _rnn(m, ctx, lctx)
    if em.failed:
        return em
    kind = _HELPER_KINDS[_option(m, "kind")]
    layer = em.modules[0]
    made = code(layer.func).rsplit(".", 1)[-1] if isinstance(layer, cst.Call) else None
    if made not in (kind, f"Lazy{kind}"):
        del ctx.pending[mark:]
        m.extras = extras
        return _rnn(m, ctx, lctx)
    helper = helpers.use(ctx, f"{'Lazy' if made != kind else ''}RecurrentDropout{kind}")
    eq = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    args = [cst.Arg(rec, keyword=cst.Name("recurrent_dropout"), equal=eq)]
    if node is not None and literal_value(node, NOT_LITERAL) not in (0, 0.0):
        args.insert(0, cst.Arg(node, keyword=cst.Name("input_dropout"), equal=eq))
    em.modules = [layer.with_changes(func=cst.Name(helper), args=[*layer.args, *args]), *em.modules[1:]]
    ctx.report(Severity.INFO, "idiom-replaced", f"recurrent_dropout={code(rec)} → {helper} (written out in this "
               "file): torch's recurrence in eval(); in train() the cell's loop with Keras's masks of the previous "
               "output (and of the inputs, dropout=), one per gate, drawn once per sequence", m.node, m.rule)
    return em


def _bidirectional_dropout(m: MappedCall, ctx, lctx: LayerContext, merge_mode: str) -> LayerEmission:
    """Bidirectional(LSTM/GRU/SimpleRNN(dropout=p)) → the Bidirectional<kind>Dropout helper (written out in the
    file), a subclass of the torch module (its parameter names, so the weight maps hold) that in training runs
    once per direction on the inputs times that direction's own mask, as Keras's two layers draw theirs. Where
    the plain torch module is not what the layer becomes (recurrent_dropout, a mask, input size unknown, called
    with its states), the refusal of :func:`_rnn` stands."""
    node = m.extras["dropout"]
    rec = m.extras.get("recurrent_dropout")
    if ((rec is not None and literal_value(rec, NOT_LITERAL) not in (0, 0.0)) or getattr(lctx, "mask_in", False)
            or getattr(lctx, "mask_keep", False) or ctx.analyses.get(RNN_CALLED_AS_KERAS, {}).get(id(m.node)) is m.node):
        return _rnn(m, ctx, lctx, merge_mode)
    mark = len(ctx.pending)
    extras = m.extras
    m.extras = {k: v for k, v in extras.items() if k != "dropout"}
    em = _rnn(m, ctx, lctx, merge_mode)
    if em.failed:
        return em
    kind = _HELPER_KINDS[_option(m, "kind")]
    layer = em.modules[0]
    made = code(layer.func).rsplit(".", 1)[-1] if isinstance(layer, cst.Call) else None
    if made not in (kind, f"Lazy{kind}"):
        del ctx.pending[mark:]  # (another helper: none is made now, as the branches above refuse)
        m.extras = extras
        return _rnn(m, ctx, lctx, merge_mode)
    per_step = _keras2_per_step(m, ctx)
    if per_step is None:
        del ctx.pending[mark:]
        m.extras = extras
        return _failed(m, ctx, "unsupported-argument", _KERAS2_UNFUSED.format(code(node)))
    helper = helpers.use(ctx, f"{'Lazy' if made != kind else ''}Bidirectional{kind}Dropout")
    eq = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    args = [cst.Arg(node, keyword=cst.Name("input_dropout"), equal=eq)]
    if per_step:
        args.append(cst.Arg(cst.Name("True"), keyword=cst.Name("per_step"), equal=eq))
    em.modules = [layer.with_changes(func=cst.Name(helper), args=[*layer.args, *args]), *em.modules[1:]]
    ctx.report(Severity.INFO, "idiom-replaced", f"dropout={code(node)} under Bidirectional → {helper} (written out in "
               f"this file): in training each direction reads the inputs times its own mask of the features per "
               f"{'step' if per_step else 'sequence'}, as Keras's two layers draw theirs (the module runs once per "
               "direction); one run in eval()", m.node, m.rule)
    return em


def _rnn(m: MappedCall, ctx, lctx: LayerContext, merge_mode: str | None = None) -> LayerEmission:
    """LSTM / GRU / SimpleRNN → nn.LSTM / nn.GRU / nn.RNN (batch_first=True) and the RNNOutput helper
    (written out in the file) that keeps the sequence or its last step as Keras's return_sequences.
    What torch's modules cannot compute the same is refused: other activations, dropout inside the
    recurrence, states returned or carried, reversed sequences, GRU's reset_after=False."""
    kind = _option(m, "kind")
    name = m.rule.names[0].rsplit(".", 1)[-1]
    in_shape = input_shape_from_kwargs(m, lctx, 2) or lctx.in_shape
    if in_shape is not None and len(in_shape) != 2:
        return _failed(m, ctx, "unsupported-construct", f"{name} expects a 3-D input (batch, steps, features); this "
                       f"one has shape (batch, {', '.join(map(str, in_shape))})")
    if lctx.layout == "nchw":
        return _failed(m, ctx, "unsupported-construct", f"{name} in a model converted to channels-first would see "
                       "(batch, features, steps): keep this model channels-last or permute before it by hand")
    features = in_shape[-1] if in_shape is not None else None
    # the Lazy{kind} helper: where the input size is known only at the first call (Keras builds the layer
    # then), and where a subclass's call() passes initial_state= or unpacks the states (return_state)
    called_as_keras = ctx.analyses.get(RNN_CALLED_AS_KERAS, {}).get(id(m.node)) is m.node
    helper = (merge_mode is None and called_as_keras) or not known(features)
    if not known(features) and not helper:
        return _failed(m, ctx, "shape-unknown", f"{name} needs the number of input features (torch has no lazy "
                       f"{_RNN_TARGETS[kind].rsplit('.', 1)[-1]}): give the model its input shape, e.g. "
                       "keras.Input(shape=(steps, features))")
    flags = {}
    for key, default in (("return_sequences", False), ("return_state", False), ("go_backwards", False),
                         ("stateful", False), ("time_major", False), ("reset_after", True)):
        node = m.extras.get(key)
        v = default if node is None else literal_value(node, NOT_LITERAL)
        if v not in (True, False):
            return _failed(m, ctx, "unsupported-argument", f"{key}={code(node)} must be a literal True/False")
        flags[key] = v
    if called_as_keras and merge_mode is None:
        flags["return_state"] = False  # the helper returns them as Keras does
    for key, why in (("return_state", "the final states come back as extra outputs in Keras; unpack torch's "
                      "(output, h_n) by hand"),
                     ("go_backwards", "Keras reads the steps last to first and returns its outputs in that order: "
                      "fwport writes ReverseSteps before the layer, but not under Bidirectional, on a masked "
                      "sequence, or for a layer called with its states; flip the input (x.flip(1)) by hand"),
                     ("time_major", "write batch_first=False by hand")):
        if flags[key]:
            return _failed(m, ctx, "unsupported-argument", f"{key}=True: {why}")
    if kind == "gru" and not flags["reset_after"]:
        return _failed(m, ctx, "unsupported-argument", "reset_after=False applies the reset gate before the recurrent "
                       "matrix (Keras 2's default GRU), which torch's GRU does not: write the cell by hand")
    for key in ("recurrent_dropout", "dropout"):  # (the first the reason where both are given)
        node = m.extras.get(key)
        if node is not None and literal_value(node, NOT_LITERAL) not in (0, 0.0):
            return _failed(m, ctx, "unsupported-argument", f"{key}={code(node)}: Keras drops "
                           + ("the recurrent state inside the recurrence with one mask per sequence, which torch's "
                              "RNNs do not: write the cell by hand"
                              if key == "recurrent_dropout" else
                              "the inputs with one mask of the features per sequence (one per direction under "
                              "Bidirectional), which fwport reproduces for torch's module of a known input size, but "
                              "not on a masked sequence, for a layer called with its states, nor under Bidirectional "
                              "where the input size is unknown here: apply the dropout by hand")
                           )
    for key, default in (("activation", "tanh"), ("recurrent_activation", "sigmoid")):
        node = m.extras.get(key)
        if node is None or (kind == "rnn" and key == "recurrent_activation"):
            continue
        act = activation_name(node, ctx)
        if kind == "rnn" and key == "activation" and act == "relu":
            m.kwargs["nonlinearity"] = expr('"relu"')
            continue
        if act != default:
            return _failed(m, ctx, "unsupported-argument", f"{key}={code(node)}: torch's {name.replace('SimpleRNN', 'RNN')} "
                           f"computes {default} there")
    if flags["stateful"]:
        return _stateful_rnn(m, ctx, lctx, kind, features, in_shape, merge_mode)
    if getattr(lctx, "mask_keep", False):
        return _masked_rnn(m, ctx, lctx, kind, features, in_shape, merge_mode)
    if helper:
        if getattr(lctx, "mask_in", False):
            return _failed(m, ctx, "shape-unknown", f"{name} after a mask, on inputs whose feature size is unknown "
                           "here: give the model its input shape")
        return _lazy_rnn(m, ctx, lctx, kind, features, in_shape, merge_mode)
    m.kwargs = {"input_size": expr(str(features)), **m.kwargs}
    m.kwargs["batch_first"] = expr("True")
    units = _dim(lctx, m.kwargs.get("hidden_size"))
    units = units if known(units) else None
    masked: list[str] | None = None  # Keras's mask reaches it as a PackedSequence (passes/sequential.py)
    if getattr(lctx, "mask_in", False):
        masked = []
        if getattr(lctx, "mask_out", False) and flags["return_sequences"]:
            masked = ["packed=True"]  # the next recurrent layer takes the sequence still packed
        elif flags["return_sequences"]:
            steps = in_shape[0] if in_shape is not None else None
            if not _int(steps):
                return _failed(m, ctx, "shape-unknown", f"{name}(return_sequences=True) after a mask, on sequences "
                               "of a length unknown here: Keras returns every step (the padded ones too), which the "
                               "packed output must be padded back to; give the model its input shape "
                               "(keras.Input(shape=(steps,)))")
            masked = [f"total_length={steps}"]
    if merge_mode is not None:  # the layer wrapped by Bidirectional
        m.kwargs["bidirectional"] = expr("True")
        args = ["return_sequences=True"] if flags["return_sequences"] else []
        if merge_mode != "concat":
            args.append(f'merge_mode="{merge_mode}"')
        out_mod = expr(f"{helpers.use(ctx, 'MaskedBidirectionalOutput' if masked is not None else 'BidirectionalOutput')}"
                       f"({', '.join(args + (masked or []))})")
        if merge_mode == "concat":
            units = D.mul(units, 2) if units is not None else None
    else:
        args = (["return_sequences=True"] if flags["return_sequences"] else []) + (masked or [])
        out_mod = expr(f"{helpers.use(ctx, 'MaskedRNNOutput' if masked is not None else 'RNNOutput')}({', '.join(args)})")
    layer = build_call(m, ctx)
    if layer is None:
        return LayerEmission([m.call], failed=True)
    out = (in_shape[0], units) if flags["return_sequences"] else (units,)
    return LayerEmission([layer, out_mod], out, 0, variant=kind if merge_mode is not None else None)


def _masked_rnn(m: MappedCall, ctx, lctx: LayerContext, kind: str, features, in_shape,
                merge_mode: str | None) -> LayerEmission:
    """A recurrent layer called on a tensor that carries Keras's mask, which the functional pass passes as
    ``mask=`` (masks.py): the Masked<kind> helper (written out in the file), a Lazy<kind> (sizes, states,
    merge modes; torch's parameter names, so the weight maps hold) that runs over the kept steps as
    Keras's does."""
    name = m.rule.names[0].rsplit(".", 1)[-1]
    if _true(m, "return_state"):
        return _failed(m, ctx, "unsupported-argument", "return_state=True on a sequence that carries Keras's mask: "
                       "not translated; take the final states from the masked run by hand")
    em = _lazy_rnn(m, ctx, lctx, kind, features, in_shape, merge_mode)
    if em.failed:
        return em
    helper = helpers.use(ctx, HELPER_OF[kind])
    ctx.report(Severity.INFO, "idiom-replaced", f"{name} on a sequence that carries Keras's mask → {helper} (written "
               "out in this file), called with the mask: it runs over the kept steps (a PackedSequence) as Keras's "
               "skips the masked ones; exact for right-padded sequences, a ValueError at run time for others",
               m.node, m.rule)
    em.modules = [em.modules[0].with_changes(func=cst.Name(helper))]
    return em


def _stateful_rnn(m: MappedCall, ctx, lctx: LayerContext, kind: str, features, in_shape,
                  merge_mode: str | None) -> LayerEmission:
    """stateful=True: the Stateful<kind> helper (written out in the file), a Lazy<kind> (called and returning as
    Keras's layer; torch's parameter names, so the weight maps hold) that starts each call from the states the
    previous one ended with, detached, and whose reset_states() sets them to zeros, as Keras's stateful layer
    does. Refused under Bidirectional and on a masked sequence."""
    name = m.rule.names[0].rsplit(".", 1)[-1]
    if merge_mode is not None:
        return _failed(m, ctx, "unsupported-argument", "stateful=True under Bidirectional: Keras carries the states "
                       "of both directions from one call into the next, which fwport does not write; keep the final "
                       "states of torch's bidirectional module and pass them as h_0 by hand")
    if getattr(lctx, "mask_in", False) or getattr(lctx, "mask_keep", False):
        return _failed(m, ctx, "unsupported-argument", "stateful=True on a sequence that carries Keras's mask: not "
                       "translated; keep the final states of the masked run and pass them as h_0 by hand")
    em = _lazy_rnn(m, ctx, lctx, kind, features, in_shape, prefix="Stateful")
    if em.failed:
        return em
    helper = helpers.use(ctx, f"Stateful{_HELPER_KINDS[kind]}")
    ctx.report(Severity.INFO, "idiom-replaced", f"{name}(stateful=True) → {helper} (written out in this file): each "
               "call starts from the states the previous one ended with (detached: Keras does not backpropagate into "
               "an earlier batch), reset_states() sets them to zeros, and an input of another batch size is a "
               "ValueError, as in Keras", m.node, m.rule)
    return em


#: ctx.analyses: ids of the recurrent layer calls whose module is called as Keras calls it (initial_state=,
#: states returned): the subclass pass marks them, the rnn shape function emits the Lazy<kind> helper
RNN_CALLED_AS_KERAS = "tf2torch-rnn-called-as-keras"
_HELPER_KINDS = {"lstm": "LSTM", "gru": "GRU", "rnn": "RNN"}


def _true(m: MappedCall, key: str) -> bool:
    node = m.extras.get(key)
    return node is not None and literal_value(node, NOT_LITERAL) is True


def _lazy_rnn(m: MappedCall, ctx, lctx: LayerContext, kind: str, features, in_shape,
              merge_mode: str | None = None, prefix: str = "Lazy") -> LayerEmission:
    """``Lazy<kind>(units, [input_size], return_sequences=..., return_state=...)``: the helper module (a
    subclass of torch's, so the weight maps hold) that is called and returns as Keras's layer, and makes
    its input weights on the first call where the input size is not known here (``prefix``: a helper
    derived from it, Stateful<kind>)."""
    name = helpers.use(ctx, f"{prefix}{_HELPER_KINDS[kind]}")
    kwargs = {"hidden_size": m.kwargs.pop("hidden_size")}
    if known(features):
        kwargs["input_size"] = expr(str(features))
    for key in ("return_sequences", "return_state"):
        if _true(m, key):
            kwargs[key] = expr("True")
    if merge_mode is not None:  # the layer wrapped by Bidirectional
        if merge_mode != "concat":
            kwargs["merge_mode"] = expr(f'"{merge_mode}"')
        m.kwargs["bidirectional"] = expr("True")
    m.kwargs = {**kwargs, **m.kwargs}
    layer = build_call(m, ctx, positional=["hidden_size", "input_size"])
    if layer is None:
        return LayerEmission([m.call], failed=True)
    layer = layer.with_changes(func=cst.Name(name))
    variant = kind if merge_mode is not None else None
    if not known(features):
        ctx.report(Severity.INFO, "shape-unknown", f"input size unknown here: emitted {name} (written into the file), "
                   "which makes its input weights on the first call, as Keras builds the layer", m.node, m.rule)
    if _true(m, "return_state"):
        return LayerEmission([layer], None, 0)  # a tuple: what comes out is followed no further
    u = _dim(lctx, kwargs["hidden_size"])
    u = u if known(u) else None
    if merge_mode == "concat" and u is not None:
        u = D.mul(u, 2)
    seq = _true(m, "return_sequences")
    out = ((in_shape[0] if in_shape is not None else None), u) if seq else (u,)
    return LayerEmission([layer], out, 0, variant=variant)


@shape("rnn-cell")
def rnn_cell(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """LSTMCell / GRUCell / SimpleRNNCell → the LazyLSTMCell / LazyGRUCell / LazyRNNCell helper: torch's
    cell, called as Keras calls a cell (``cell(x, states)`` → ``(output, new_states)``), its input weights
    made on the first call where the input size is not known here. Refused as for the layers: other
    activations, dropout inside the cell, GRU's reset_after=False."""
    kind = _option(m, "kind")
    name = m.rule.names[0].rsplit(".", 1)[-1]
    in_shape = input_shape_from_kwargs(m, lctx, 1) or lctx.in_shape
    features = in_shape[-1] if in_shape is not None and len(in_shape) == 1 else None
    node = m.extras.get("reset_after")
    if kind == "gru" and node is not None and literal_value(node, NOT_LITERAL) is not True:
        return _failed(m, ctx, "unsupported-argument", f"reset_after={code(node)}: only reset_after=True (the reset gate "
                       "after the recurrent matrix) is torch's GRUCell; write the cell by hand")
    for key in ("dropout", "recurrent_dropout"):
        node = m.extras.get(key)
        if node is not None and literal_value(node, NOT_LITERAL) not in (0, 0.0):
            return _failed(m, ctx, "unsupported-argument", f"{key}={code(node)}: Keras's cell drops its inputs (or "
                           "states) with masks it keeps for the sequence, which torch's cells do not; apply "
                           "nn.Dropout by hand")
    for key, default in (("activation", "tanh"), ("recurrent_activation", "sigmoid")):
        node = m.extras.get(key)
        if node is None or (kind == "rnn" and key == "recurrent_activation"):
            continue
        act = activation_name(node, ctx)
        if kind == "rnn" and key == "activation" and act == "relu":
            m.kwargs["nonlinearity"] = expr('"relu"')
            continue
        if act != default:
            return _failed(m, ctx, "unsupported-argument", f"{key}={code(node)}: torch's "
                           f"{name.replace('SimpleRNN', 'RNN')} computes {default} there")
    helper = helpers.use(ctx, f"Lazy{_HELPER_KINDS[kind]}Cell")
    kwargs = {"hidden_size": m.kwargs.pop("hidden_size")}
    if known(features):
        kwargs["input_size"] = expr(str(features))
    m.kwargs = {**kwargs, **m.kwargs}
    layer = build_call(m, ctx, positional=["hidden_size", "input_size"])
    if layer is None:
        return LayerEmission([m.call], failed=True)
    if not known(features):
        ctx.report(Severity.INFO, "shape-unknown", f"input size unknown here: emitted {helper} (written into the "
                   "file), which makes its input weights on the first call, as Keras builds the cell", m.node, m.rule)
    return LayerEmission([layer.with_changes(func=cst.Name(helper))], None, 0)


_LAYER_OF_CELL = {"lstm": "keras.layers.LSTM", "gru": "keras.layers.GRU", "rnn": "keras.layers.SimpleRNN"}


def _cell_of(m_or_call, ctx):
    """(the cell call, its rule) of ``keras.layers.RNN(<a cell written in the call>)``, else (node, None)."""
    inner = m_or_call.extras.get("cell") if isinstance(m_or_call, MappedCall) else call_argument(m_or_call, "cell", 0)
    q = ctx.imports.resolve(inner.func) if isinstance(inner, cst.Call) and dotted_text(inner.func) else None
    rule = ctx.pack.by_name.get(q) if q else None
    return inner, (rule if rule is not None and rule.emit.get("shape") == "rnn-cell" else None)


def recurrent_kind(call: cst.Call, rule, ctx) -> str | None:
    """"lstm", "gru" or "rnn" for a recurrent layer's constructor call (LSTM, GRU, SimpleRNN, RNN(cell))."""
    if rule.emit.get("shape") == "rnn":
        return _option_of(rule, "kind")
    if rule.emit.get("shape") == "rnn-layer":
        _, cell = _cell_of(call, ctx)
        return _option_of(cell, "kind") if cell is not None else None
    return None


def _option_of(rule, key: str):
    return rule.emit.get("options", {}).get(key)


@shape("rnn-layer")
def rnn_layer(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """keras.layers.RNN(LSTMCell/GRUCell/SimpleRNNCell(...)) → what the LSTM / GRU / SimpleRNN layer with the
    cell's arguments and the wrapper's flags becomes (their refusals apply); its weights move by the
    variant of the cell's kind (``cell.kernel`` as for those layers)."""
    inner, cell_rule = _cell_of(m, ctx)
    if cell_rule is None:
        shown = code(inner) if inner is not None else "?"
        return _failed(m, ctx, "unsupported-argument", f"cell={shown}: only a keras.layers.LSTMCell, GRUCell or "
                       "SimpleRNNCell written in the call is translated (a list of cells or a custom cell is not)")
    kind = _option_of(cell_rule, "kind")
    rule = ctx.pack.by_name.get(_LAYER_OF_CELL[kind])
    mi = map_call(inner, rule, ctx, inner)
    if mi.failed:
        return LayerEmission([m.call], failed=True)
    if mi.extras.pop("frozen", None):  # RNN(LSTMCell(..., trainable=False)): the cell's weights are the layer's
        m.extras["frozen"] = True
    for key, value in m.extras.items():
        if key != "cell":
            mi.extras[key] = value
    if ctx.analyses.get(RNN_CALLED_AS_KERAS, {}).get(id(m.node)) is m.node:
        ctx.analyses[RNN_CALLED_AS_KERAS][id(inner)] = inner
    em = rnn(mi, ctx, lctx)
    if em.failed:
        return LayerEmission([m.call], failed=True)
    em.variant = kind
    return em


@shape("bidirectional")
def bidirectional(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """Bidirectional(LSTM/GRU/SimpleRNN) → the torch RNN with bidirectional=True and the
    BidirectionalOutput helper (merge modes concat, sum, mul, ave; Keras's last step of the backward
    direction is torch's first). The weight-map variant is the wrapped kind (lstm, gru, rnn)."""
    inner = m.extras.get("layer")
    q = ctx.imports.resolve(inner.func) if isinstance(inner, cst.Call) and dotted_text(inner.func) else None
    rule = ctx.pack.by_name.get(q) if q else None
    if rule is None or rule.emit.get("shape") != "rnn":
        shown = code(inner) if inner is not None else "?"
        return _failed(m, ctx, "unsupported-argument", f"layer={shown}: only a keras.layers.LSTM, GRU or SimpleRNN "
                       "written in the call is translated (torch's bidirectional RNNs)")
    if "backward_layer" in m.extras and literal_value(m.extras["backward_layer"], NOT_LITERAL) is not None:
        why = _not_a_mirror(inner, rule, m.extras["backward_layer"], ctx)
        if why:
            return _failed(m, ctx, "unsupported-argument", f"backward_layer=: {why}: torch's bidirectional RNN runs "
                           "the same layer (kind, units, options) both ways, the backward one on the reversed "
                           "steps; write the two directions by hand (two RNNs, the second on x.flip(1), its "
                           "sequence output flipped back, merged by merge_mode)")
    mode = literal_value(m.extras["merge_mode"], NOT_LITERAL) if "merge_mode" in m.extras else "concat"
    if mode not in ("concat", "sum", "mul", "ave"):
        return _failed(m, ctx, "unsupported-argument", f"merge_mode={code(m.extras['merge_mode'])}: only 'concat', "
                       "'sum', 'mul' and 'ave' are translated (None returns the two directions as a list)")
    mi = map_call(inner, rule, ctx, inner)
    if mi.failed:
        return LayerEmission([m.call], failed=True)
    if mi.extras.pop("frozen", None):  # Bidirectional(LSTM(..., trainable=False)): both directions copy it
        m.extras["frozen"] = True
    for key in ("input_shape", "batch_input_shape", "input_dim", "input_length"):
        if key in m.extras and key not in mi.extras:
            mi.extras[key] = m.extras[key]
    em = rnn(mi, ctx, lctx, merge_mode=mode)
    return LayerEmission([m.call], failed=True) if em.failed else em


def _not_a_mirror(inner: cst.Call, rule, back: cst.BaseExpression, ctx) -> str | None:
    """Why ``backward_layer=back`` is not the layer torch's bidirectional RNN runs backwards (None when it is):
    a call of the same layer with the same arguments but go_backwards=True (and any name), as Keras builds its
    own backward layer from ``layer``; its weights are then Keras's ``backward_layer.*`` as without it."""
    from fwport.core.bind import bind_call
    q = ctx.imports.resolve(back.func) if isinstance(back, cst.Call) and dotted_text(back.func) else None
    if q is None or ctx.pack.by_name.get(q) is not rule:
        return f"{code(back)} is not a {rule.names[0].rsplit('.', 1)[-1]} written in the call"
    fwd, bwd = bind_call(inner, rule), bind_call(back, rule)
    if fwd.error or bwd.error or fwd.star_args or bwd.star_args:
        return "its arguments cannot be read"
    if bwd.literal("go_backwards", False) is not True or fwd.literal("go_backwards", False) is not False:
        return "only a backward layer with go_backwards=True (the forward one without) is translated"
    same = lambda b: {k: code(v) for k, v in {**b.values, **b.extra}.items() if k not in ("go_backwards", "name")}
    f, b = same(fwd), same(bwd)
    diff = sorted(k for k in {*f, *b} if f.get(k) != b.get(k))
    if diff:
        return f"it differs from the forward layer in {', '.join(diff)}"
    return None


# inner layers TimeDistributed cannot fold into the batch: they mix samples (BatchNormalization's
# statistics, which Keras 3 takes per time step), take several inputs, or are themselves sequence layers
_NOT_TIME_DISTRIBUTED = {"batch-norm": "BatchNormalization normalises over the batch, which Keras 3 takes per time "
                                       "step (its statistics and moving averages) and the folded batch would "
                                       "take over all steps at once",
                         "rnn": "a recurrent layer", "rnn-layer": "a recurrent layer", "bidirectional": "a recurrent layer",
                         "multi-head-attention": "a layer of several inputs", "keras-attention": "a layer of several inputs",
                         "merge": "a layer of several inputs", "dot": "a layer of several inputs",
                         "time-distributed": "a TimeDistributed layer"}


@shape("time-distributed")
def time_distributed(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """TimeDistributed(layer) → the TimeDistributed helper (written out in the file) around the wrapped layer's
    torch module(s): the time axis folded into the batch ((batch, T, ...) → (batch·T, ...)), the layer, and
    the time axis back. Exact for the layers that treat samples independently (Keras 3 calls the layer once
    per step); a convolution or pooling inside gets its steps channels-first and back. The weight-map
    variant is the wrapped layer's rule (its variables are Keras's ``layer.*``, torch's ``layer.*``)."""
    from dataclasses import replace
    inner = m.extras.get("layer")
    q = ctx.imports.resolve(inner.func) if isinstance(inner, cst.Call) and dotted_text(inner.func) else None
    rule = ctx.pack.by_name.get(q) if q else None
    shown = code(inner) if inner is not None else "?"
    if rule is None or rule.kind != "layer":
        written = m.written("layer")  # the rule pass translated the wrapped layer first: the source's says why
        wq = ctx.imports.resolve(expr(written).func) if written and isinstance(expr(written), cst.Call) \
            and dotted_text(expr(written).func) else None
        wrule = ctx.pack.by_name.get(wq) if wq else None
        why = _NOT_TIME_DISTRIBUTED.get(wrule.emit.get("shape")) if wrule is not None else None
        if why:
            return _failed(m, ctx, "unsupported-construct", f"TimeDistributed({written}): {why}; folding the time "
                           "axis into the batch would not compute what Keras does: apply the layer per step by hand")
        return _failed(m, ctx, "unsupported-argument", f"layer={written or shown}: only a Keras layer written in the "
                       "call is translated (its torch module is built here)")
    why = _NOT_TIME_DISTRIBUTED.get(rule.emit.get("shape"))
    if why:
        return _failed(m, ctx, "unsupported-construct", f"TimeDistributed({shown}): {why}; folding the time axis "
                       "into the batch would not compute what Keras does: apply the layer per step by hand")
    if lctx.layout == "nchw":
        return _failed(m, ctx, "unsupported-construct", "TimeDistributed in a model converted to channels-first: its "
                       "input's axes are Keras's (batch, time, ...) channels-last ones; keep the layers around it "
                       "channels-last (each convolution inside a TimeDistributed)")
    in_shape = input_shape_from_kwargs(m, lctx) or lctx.in_shape
    if in_shape is not None and len(in_shape) < 2:
        return _failed(m, ctx, "unsupported-construct", "TimeDistributed needs an input of at least 3 dimensions "
                       "(batch, time, ...)")
    step = tuple(in_shape[1:]) if in_shape is not None else None
    first = rule.emit.get("layout") == "channels-first" and (step is None or len(step) > 1)
    inner_ctx = replace(lctx, in_shape=step, layout="nchw" if first else "keep",
                        scope=lctx.scope or "TimeDistributed", source_path="", flatten_of=None)
    em = translate_layer(inner, rule, ctx, inner_ctx, inner)
    if em.failed or em.functional is not None or not em.modules:
        if not em.failed:
            return _failed(m, ctx, "unsupported-construct", f"TimeDistributed({shown}): a layer of several inputs")
        return LayerEmission([m.call], failed=True)
    if rule.weights and (em.variant is not None or not any(w.when == rule.id for w in m.rule.weights)):
        return _failed(m, ctx, "unsupported-construct", f"TimeDistributed({shown}): the weights of "
                       f"{rule.names[0].rsplit('.', 1)[-1]} inside it have no weight map here yet; apply the layer "
                       "to x.reshape(-1, *x.shape[2:]) by hand")
    mods = em.modules
    w = em.weight_module
    args = [code(mods[w])]
    if w:
        args.append(f"before=[{', '.join(code(x) for x in mods[:w])}]")
    if mods[w + 1:]:
        args.append(f"after=[{', '.join(code(x) for x in mods[w + 1:])}]")
    if first:
        args.append("channels_first=True")
    ctx.spell_text("torch.nn.Module")
    name = helpers.use(ctx, "TimeDistributed")
    t = in_shape[0] if in_shape is not None else None
    out = (t, *em.out_shape) if em.out_shape is not None else None
    return LayerEmission([expr(f"{name}({', '.join(args)})")], out, variant=rule.id if rule.weights else None)


class _FreeNames(cst.CSTVisitor):
    """The names a function body reads (not attribute names, keywords, or its own parameters and locals)."""

    def __init__(self):
        self.read: list[cst.Name] = []
        self.bound: set[str] = set()

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Param(self, node: cst.Param) -> bool:
        self.bound.add(node.name.value)
        if node.default is not None:
            node.default.visit(self)
        return False

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        for n in _target_names(node.target):
            self.bound.add(n)
        return True

    def visit_CompFor(self, node: cst.CompFor) -> None:
        for n in _target_names(node.target):
            self.bound.add(n)

    def visit_Name(self, node: cst.Name) -> None:
        self.read.append(node)


def _target_names(t: cst.BaseExpression) -> list[str]:
    if isinstance(t, cst.Name):
        return [t.value]
    if isinstance(t, (cst.Tuple, cst.List)):
        return [n for e in t.elements for n in _target_names(e.value)]
    return []


_BUILTINS = frozenset(dir(__import__("builtins")))


def _lambda_function(node: cst.BaseExpression, ctx, lctx: LayerContext):
    """(the function's text in the call, why not) for Lambda's function: a lambda, or a function defined at the
    top of this file, whose body reads only its parameters and locals, imported names (their calls are
    translated by the rules where they stand), builtins and the module's constants: anything else is state
    fwport cannot follow."""
    if isinstance(node, cst.Lambda):
        body: cst.CSTNode = node
        what = "the lambda"
    elif isinstance(node, cst.Name):
        parsed = ctx.analyses.get("parsed")
        body = next((st for st in (parsed[0].body if parsed else ()) if isinstance(st, cst.FunctionDef)
                     and st.name.value == node.value), None)
        if body is None:
            return None, f"{node.value} is not a function defined at the top of this file"
        if body.decorators:
            return None, f"{node.value} is decorated"
        what = node.value
    else:
        return None, f"{code(node)} is not a lambda or a function of this file"
    v = _FreeNames()
    if isinstance(body, cst.Lambda):
        body.params.visit(v)
        body.body.visit(v)
    else:
        body.params.visit(v)
        body.body.visit(v)
    sizes = sizes_of(lctx)
    for n in v.read:
        name = n.value
        if name in v.bound or name in ctx.imports.aliases or name in _BUILTINS or name in sizes.constants:
            continue
        return None, f"{what} reads {name}, which is not one of its parameters or locals, an import, a builtin or " \
                     "an int module constant: state fwport cannot follow"
    return code(node), None


def _elementwise_of(node: cst.BaseExpression, param: str) -> bool:
    """The lambda body is arithmetic between its one parameter and numbers (x / 255.0, 2 * x - 1)."""
    if isinstance(node, cst.Name):
        return node.value == param
    if isinstance(node, (cst.Integer, cst.Float)):
        return True
    if isinstance(node, cst.UnaryOperation):
        return _elementwise_of(node.expression, param)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Subtract, cst.Multiply,
                                                                          cst.Divide, cst.Power)):
        return _elementwise_of(node.left, param) and _elementwise_of(node.right, param)
    return False


def mentions_source_alias(node: cst.CSTNode, ctx) -> bool:
    """``node`` reads a name the file imports from the source framework (tf, keras, K, layers...)."""
    aliases = ctx.imports.source_aliases()
    v = _FreeNames()
    node.visit(v)
    return any(n.value in aliases for n in v.read)


@shape("lambda")
def lambda_layer(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """Lambda(function) → the Lambda helper (written out in the file) calling the same function: a lambda or a
    function of this file whose tf / keras.ops calls the rules translate where they stand (an error there for
    one without a rule). Refused where the function reads state fwport cannot follow, and in a model converted
    to channels-first (its axes are Keras's)."""
    fn = m.extras.get("function")
    if fn is None:
        return _failed(m, ctx, "unsupported-argument", "function is required")
    if lctx.layout == "nchw":
        return _failed(m, ctx, "unsupported-construct", f"Lambda({code(fn)}) in a model converted to channels-first: "
                       "its function sees Keras's channels-last axes; keep this model channels-last")
    text, why = _lambda_function(fn, ctx, lctx)
    if text is None:
        return _failed(m, ctx, "unsupported-construct", f"Lambda: {why}; write the computation as an nn.Module by hand")
    in_shape = input_shape_from_kwargs(m, lctx) or lctx.in_shape
    out = None
    if isinstance(fn, cst.Lambda) and len(fn.params.params) == 1 and _elementwise_of(fn.body, fn.params.params[0].name.value):
        out = in_shape
    name = helpers.use(ctx, "Lambda")
    return LayerEmission([expr(f"{name}({text})")], out)


@shape("refuse")
def refuse(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """A Keras layer that has no place in a torch model (text preprocessing, random augmentation): an
    error finding that says where its work goes in PyTorch (the rule's ``options.why``)."""
    name = m.rule.names[0].rsplit(".", 1)[-1]
    return _failed(m, ctx, "unsupported-construct", f"{name} {_option(m, 'why')}")


@shape("random-flip")
def random_flip(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """RandomFlip(mode) → the RandomFlip helper module (written out in the file): each image flipped on its
    own with probability 1/2 in training, the identity in eval(), as Keras's; along the model's axes (the
    width is -2 in channels-last images, -1 in a model converted to channels-first)."""
    mode = literal_value(m.extras["mode"], NOT_LITERAL) if "mode" in m.extras else "horizontal_and_vertical"
    if mode not in ("horizontal", "vertical", "horizontal_and_vertical"):
        return _failed(m, ctx, "unsupported-argument", f"mode={code(m.extras['mode'])}: give 'horizontal', "
                       "'vertical' or 'horizontal_and_vertical' as a literal")
    data_format = literal_value(m.extras["data_format"], NOT_LITERAL) if "data_format" in m.extras else None
    if data_format not in (None, "channels_last", "channels_first"):
        return _failed(m, ctx, "unsupported-argument", f"data_format={code(m.extras['data_format'])}: not a literal")
    first = lctx.layout == "nchw" or data_format == "channels_first"
    if "seed" in m.extras and literal_value(m.extras["seed"], None) is not None:
        ctx.report(Severity.INFO, "dropped-argument", "seed dropped: the flips draw from torch's global generator "
                   "(torch.manual_seed)", m.node, m.rule)
    args = f'"{mode}"' + (", height_dim=-2, width_dim=-1" if first else "")
    ctx.report(Severity.INFO, "idiom-replaced", "RandomFlip → RandomFlip (written out in this file): active in "
               "training only, as Keras's; put the model in eval() for inference", m.node, m.rule)
    return LayerEmission([expr(f"{helpers.use(ctx, 'RandomFlip')}({args})")], lctx.in_shape)


def _augmentation_options(m: MappedCall, ctx) -> str | None:
    """fill_mode / interpolation / fill_value of RandomRotation / RandomZoom as the helper's keywords (only the
    ones given); None after an error."""
    out = []
    for key, allowed in (("fill_mode", ("reflect", "nearest", "constant", "wrap")), ("interpolation", ("bilinear", "nearest"))):
        if key not in m.extras:
            continue
        v = literal_value(m.extras[key], NOT_LITERAL)
        if v not in allowed:
            m.fail(ctx, "unsupported-argument", f"{key}={code(m.extras[key])}: give one of {', '.join(map(repr, allowed))}")
            return None
        out.append(f'{key}="{v}"')
    if "fill_value" in m.extras:
        out.append(f"fill_value={code(m.extras['fill_value'])}")
    if "fill_mode" in m.extras and literal_value(m.extras["fill_mode"], None) == "wrap":
        ctx.report(Severity.WARNING, "approximate", "fill_mode='wrap': the wrapped coordinates are sampled with the "
                   "border's values at the seam (torch's grid_sample has no wrap padding)", m.node, m.rule)
    return "".join(f", {o}" for o in out)


def _factor_text(m: MappedCall, ctx, key: str, lctx: LayerContext | None = None) -> str | None:
    """A Keras augmentation factor written as the source wrote it: a number or a (lower, upper) pair; where the
    module is built at the layer's place (not moved by the functional pass), also a plain expression
    (max_translation, zoom_factor / 2), which the helper reads as Keras does when it is built."""
    node = m.extras.get(key)
    v = literal_value(node, NOT_LITERAL) if node is not None else NOT_LITERAL
    if isinstance(v, (int, float)) and not isinstance(v, bool) or (
            isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(e, (int, float)) for e in v)):
        return code(node)
    if node is not None and lctx is not None and not getattr(lctx, "moved", False):
        def plain(e: cst.BaseExpression) -> bool:  # a number, or a plain expression the helper reads when built
            v = literal_value(e, NOT_LITERAL)
            return isinstance(v, (int, float)) and not isinstance(v, bool) or isinstance(
                _written_sizes(cst.Tuple([cst.Element(e)]), ctx), tuple)
        pair = isinstance(node, (cst.Tuple, cst.List)) and len(node.elements) == 2 and not any(
            isinstance(e, cst.StarredElement) for e in node.elements)
        if plain(node) or pair and all(plain(e.value) for e in node.elements):
            return code(node)
    m.fail(ctx, "unsupported-argument", f"{key}={m.written(key) or code(node)}: give a number or a (lower, upper) "
           "pair of numbers as literals")
    return None


@shape("random-transform")
def random_transform(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """RandomRotation / RandomZoom → the helper module of the same name (written out in the file): per-image
    transforms about the centre in training only, sampled with Keras's conventions (pixel centres, reflect about
    the edge), the identity in eval(); channels-last or channels-first as the model is."""
    name = m.rule.names[0].rsplit(".", 1)[-1]
    keys = ("factor",) if name == "RandomRotation" else ("height_factor", "width_factor")
    factors = []
    for k in keys:
        if k not in m.extras or literal_value(m.extras[k], NOT_LITERAL) is None and k == "width_factor":
            continue
        text = _factor_text(m, ctx, k, lctx)
        if text is None:
            return LayerEmission([m.call], failed=True)
        factors.append(text if k != "width_factor" else f"width_factor={text}")
    options = _augmentation_options(m, ctx)
    data_format = literal_value(m.extras["data_format"], NOT_LITERAL) if "data_format" in m.extras else None
    if options is None or data_format not in (None, "channels_last", "channels_first"):
        if options is not None:
            m.fail(ctx, "unsupported-argument", f"data_format={code(m.extras['data_format'])}: not a literal")
        return LayerEmission([m.call], failed=True)
    first = lctx.layout == "nchw" or data_format == "channels_first"
    if "seed" in m.extras and literal_value(m.extras["seed"], None) is not None:
        ctx.report(Severity.INFO, "dropped-argument", "seed dropped: the transforms draw from torch's global "
                   "generator (torch.manual_seed)", m.node, m.rule)
    ctx.report(Severity.INFO, "idiom-replaced", f"{name} → {name} (written out in this file): active in training "
               "only, as Keras's; put the model in eval() for inference", m.node, m.rule)
    args = ", ".join(factors) + options + (", channels_last=False" if first else "")
    return LayerEmission([expr(f"{helpers.use(ctx, name)}({args})")], lctx.in_shape)


@shape("random-adjust")
def random_adjust(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """RandomCrop / RandomContrast / RandomBrightness → the helper module of the same name (written out in the
    file), with Keras 3's draws (one crop offset per batch; a contrast factor and a brightness delta per image),
    the identity in eval() as Keras 3's at inference. Keras 2's layers behave otherwise at inference (its
    RandomCrop centre-crops there) and draw otherwise: refused there with the guidance the rule gives."""
    name = m.rule.names[0].rsplit(".", 1)[-1]
    guidance = {"RandomCrop": "torchvision.transforms.v2.RandomCrop to each training sample (and CenterCrop at "
                              "inference, as Keras 2 does)",
                "RandomContrast": "torchvision.transforms.v2.ColorJitter(contrast=...) to each training sample",
                "RandomBrightness": "torchvision.transforms.v2.ColorJitter(brightness=...) to each training sample"}[name]
    keras2 = ctx.version == 2 and name in ("RandomCrop", "RandomContrast")
    if ctx.version == 2 and not keras2:
        return _failed(m, ctx, "unsupported-construct", f"{name} of Keras 2 (tf.keras) is random data augmentation "
                       "whose draws and inference behaviour fwport does not reproduce: in the data pipeline, apply "
                       f"{guidance}, and leave the layer out of the model")
    data_format = literal_value(m.extras["data_format"], NOT_LITERAL) if "data_format" in m.extras else None
    if data_format not in (None, "channels_last", "channels_first"):
        return _failed(m, ctx, "unsupported-argument", f"data_format={code(m.extras['data_format'])}: not a literal")
    first = lctx.layout == "nchw" or data_format == "channels_first"
    if keras2 and (data_format is not None or "value_range" in m.extras):
        return _failed(m, ctx, "unsupported-argument", f"{name} of Keras 2 takes no "
                       f"{'data_format' if data_format is not None else 'value_range'} (Keras 3's argument)")
    if name == "RandomCrop":
        h, w = (m.extras.get(k) for k in ("height", "width"))
        if h is None or w is None:
            return _failed(m, ctx, "unsupported-argument", "RandomCrop needs height and width")
        args = f"{code(h)}, {code(w)}"
    else:
        factor = _factor_text(m, ctx, "factor", lctx)
        if factor is None:
            return LayerEmission([m.call], failed=True)
        args = factor
        if "value_range" in m.extras:
            vr = literal_value(m.extras["value_range"], NOT_LITERAL)
            if not (isinstance(vr, (list, tuple)) and len(vr) == 2 and all(isinstance(v, (int, float)) for v in vr)):
                return _failed(m, ctx, "unsupported-argument", f"value_range={code(m.extras['value_range'])}: give "
                               "a (low, high) pair of numbers as literals")
            args += f", value_range={code(m.extras['value_range'])}"
    if first and name != "RandomBrightness":
        args += ", channels_last=False"
    if "seed" in m.extras and literal_value(m.extras["seed"], None) is not None:
        ctx.report(Severity.INFO, "dropped-argument", "seed dropped: the draws come from torch's global generator "
                   "(torch.manual_seed)", m.node, m.rule)
    helper = "Keras2" + name if keras2 else name
    if keras2:
        what = ("random crops in training, the centred crop of the target's aspect ratio resized in eval() (Keras "
                "2's inference)" if name == "RandomCrop" else "one contrast factor per call in training, the "
                "identity in eval()")
        ctx.report(Severity.INFO, "idiom-replaced", f"{name} of Keras 2 → {helper} (written out in this file): "
                   f"{what}; Keras 2 runs it in training mode unless called with training=False (predict, "
                   "evaluate): put the model in eval() where Keras would infer", m.node, m.rule)
    else:
        ctx.report(Severity.INFO, "idiom-replaced", f"{name} → {name} (written out in this file): active in "
                   "training only, as Keras's; put the model in eval() for inference", m.node, m.rule)
    out = lctx.in_shape
    if name == "RandomCrop" and out is not None and len(out) == 3:
        hh, ww = (literal_value(m.extras[k], NOT_LITERAL) for k in ("height", "width"))
        # the training shape (Keras 2's in eval() too); at inference Keras 3 gives the input back, whose size
        # the model must then take
        out = (hh, ww, out[2]) if data_format != "channels_first" else (out[0], hh, ww)
        out = tuple(d if _int(d) else None for d in out)
    return LayerEmission([expr(f"{helpers.use(ctx, helper)}({args})")], out)


@shape("resizing")
def resizing(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """Resizing → nn.Upsample(size=(h, w)) (it also shrinks): TensorFlow's bilinear resize samples at
    half-pixel centres without antialiasing, torch's bilinear with align_corners=False; its nearest is
    torch's "nearest-exact". Kernels that differ (bicubic's a, area, lanczos), antialiasing and the
    aspect-ratio options are refused."""
    fm = _feature_map(m, ctx, lctx, 2)
    if fm is None:
        return LayerEmission([m.call], failed=True)
    h, w = (literal_value(m.extras[k], NOT_LITERAL) if k in m.extras else NOT_LITERAL for k in ("height", "width"))
    size = f"({code(m.extras['height'])}, {code(m.extras['width'])})"
    mode = literal_value(m.extras["interpolation"], NOT_LITERAL) if "interpolation" in m.extras else "bilinear"
    modes = {"bilinear": 'mode="bilinear"', "nearest": 'mode="nearest-exact"'}
    if mode not in modes:
        return _failed(m, ctx, "unsupported-argument", f"interpolation={code(m.extras['interpolation'])}: only "
                       "'bilinear' and 'nearest' resize alike in both frameworks")
    for key in ("crop_to_aspect_ratio", "pad_to_aspect_ratio", "antialias"):
        if key in m.extras and literal_value(m.extras[key], NOT_LITERAL) is not False:
            return _failed(m, ctx, "unsupported-argument", f"{key}={code(m.extras[key])} is not translated yet")
    layer = expr(f"{ctx.spell_text('torch.nn.Upsample')}(size={size}, {modes[mode]})")
    sp = tuple(v if _int(v) else None for v in (h, w))
    em = LayerEmission([layer], _Map(sp, fm.channels, fm.first).shape(), layout_bound=_layout_bound(fm, 2))
    return _check_context(m, ctx, lctx, em)


@shape("center-crop")
def center_crop(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """CenterCrop → the CenterCrop helper (written out in the file) on channels-first images: the central
    height × width window, the odd pixel of a margin after, as Keras takes it. Keras resizes an image
    smaller than that (smart_resize) instead: refused where the size is known here, an error raised by
    the helper where it is not."""
    fm = _feature_map(m, ctx, lctx, 2)
    if fm is None:
        return LayerEmission([m.call], failed=True)
    if "height" not in m.extras or "width" not in m.extras:
        return _failed(m, ctx, "unsupported-argument", "height and width are required")
    h, w = (literal_value(m.extras[k], NOT_LITERAL) for k in ("height", "width"))
    for n, want in zip(fm.spatial, (h, w)):
        if _int(n) and _int(want) and n < want:
            return _failed(m, ctx, "unsupported-construct", f"CenterCrop({code(m.extras['height'])}, "
                           f"{code(m.extras['width'])}) of {fm.spatial[0]} × {fm.spatial[1]} images: Keras resizes "
                           "an image smaller than the crop (smart_resize: a crop to the aspect ratio, then a "
                           "bilinear resize) instead of cropping it; use Resizing, or crop by hand")
    ctx.spell_text("torch.nn.Module")
    name = helpers.use(ctx, "CenterCrop")
    layer = expr(f"{name}({code(m.extras['height'])}, {code(m.extras['width'])})")
    sp = tuple(v if _int(v) else None for v in (h, w))
    em = LayerEmission([layer], _Map(sp, fm.channels, fm.first).shape(), layout_bound=_layout_bound(fm, 2))
    return _check_context(m, ctx, lctx, em)


@shape("dot")
def dot(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """Dot(axes, normalize) → the Dot helper (written out in the file), called on [x, y] as Keras calls the
    layer: Keras's batch_dot over one axis of each input. Its output shape is known here for the usual
    pair of (batch, n) vectors only."""
    if lctx.layout == "nchw":
        return _failed(m, ctx, "unsupported-construct", "Dot in a model converted to channels-first: its axes are "
                       "Keras's channels-last ones; keep this model channels-last")
    axes_node = m.extras.get("axes")
    if axes_node is None:
        return _failed(m, ctx, "unsupported-argument", "axes is required")
    axes = literal_value(axes_node, NOT_LITERAL)
    pair = (axes, axes) if _int(axes) else tuple(axes) if isinstance(axes, (list, tuple)) else None
    if pair is None or len(pair) != 2 or not all(_int(a) for a in pair):
        return _failed(m, ctx, "unsupported-argument", f"axes={code(axes_node)}: a literal int or pair of ints")
    norm = m.extras.get("normalize")
    if norm is not None and literal_value(norm, NOT_LITERAL) not in (True, False):
        return _failed(m, ctx, "unsupported-argument", f"normalize={code(norm)} must be a literal True/False")
    if ctx.version == 2 and norm is not None and literal_value(norm, NOT_LITERAL) is True:
        ctx.report(Severity.WARNING, "approximate", "normalize=True: Keras 2 normalises with tf.nn.l2_normalize "
                   "(a floor of 1e-12 on the squared norm), the module as Keras 3 does (a floor of 1e-7 on the "
                   "norm): the two differ only for vectors of norm below 1e-6", m.node, m.rule)
    in_shape = lctx.in_shape
    out = (1,) if in_shape is not None and len(in_shape) == 1 and all(a in (1, -1) for a in pair) else None
    ctx.spell_text("torch.nn.Module")
    name = helpers.use(ctx, "Dot")
    args = code(axes_node) + (f", normalize={code(norm)}" if norm is not None and literal_value(norm, None) else "")
    return LayerEmission([expr(f"{name}({args})")], out)


@shape("normalization")
def normalization(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """Normalization over the last axis → the Normalization helper written out in the file (buffers
    mean / variance / count, adapt() like Keras's); in a channels-first region (where the last Keras axis
    is dim 1) its ChannelsFirstNormalization subclass. Other axes and invert=True are refused."""
    in_shape = input_shape_from_kwargs(m, lctx) or lctx.in_shape
    axis = literal_value(m.extras["axis"], NOT_LITERAL) if "axis" in m.extras else -1
    last = in_shape is not None and _int(axis) and axis in (-1, len(in_shape))
    if axis != -1 and not last:
        return _failed(m, ctx, "unsupported-argument", f"axis={code(m.extras['axis'])}: only the last axis is "
                       "translated (the helper normalises features in the last dimension)")
    if "invert" in m.extras and literal_value(m.extras["invert"], NOT_LITERAL) is not False:
        return _failed(m, ctx, "unsupported-argument", "invert=True (denormalisation) is not translated yet")
    # in a model converted to channels-first, Keras's last axis is dim 1 of every tensor (a feature map
    # moved, or a (batch, features) one): the statistics broadcast there (ChannelsFirstNormalization)
    channels_first = lctx.layout == "nchw" and (in_shape is None or len(in_shape) > 1)
    args = []
    if "mean" in m.extras or "variance" in m.extras:
        if "mean" not in m.extras or "variance" not in m.extras:
            return _failed(m, ctx, "unsupported-argument", "give both mean= and variance= (or neither)")
        args = [f"mean={code(m.extras['mean'])}", f"variance={code(m.extras['variance'])}"]
    elif in_shape is not None and known(in_shape[-1]):
        args = [str(in_shape[-1])]
    ctx.spell_text("torch.nn.Module")
    name = helpers.use(ctx, "ChannelsFirstNormalization" if channels_first else "Normalization")
    return LayerEmission([expr(f"{name}({', '.join(args)})")], in_shape)


# --- pooling -----------------------------------------------------------------------------------------

@shape("pool")
def pool(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    nd, kind = _option(m, "nd"), _option(m, "kind")
    fm = _feature_map(m, ctx, lctx, nd)
    if fm is None:
        return LayerEmission([m.call], failed=True)
    if "kernel_size" not in m.kwargs:  # torch requires it; Keras defaults pool_size
        default = next(p.default for p in m.rule.params if p.name == "pool_size")
        m.kwargs = {"kernel_size": expr(default), **m.kwargs}
    k = _ntuple(m.literal("kernel_size", None), nd)
    if k is not None:
        m.kwargs["kernel_size"] = expr(_compact(k))
    stride_lit = _given(m, "stride", None)  # NOT_LITERAL for a stride known only at run time: s is None
    s = k if stride_lit is None else _ntuple(stride_lit, nd)
    if stride_lit is not None and s is not None:
        m.kwargs["stride"] = expr(_compact(s))
    pad_node = m.extras.get("padding")
    padding = "valid" if pad_node is None else _folded(pad_node)
    padding = padding.lower() if isinstance(padding, str) else padding
    pre: list[cst.BaseExpression] = []
    if padding == "same":
        if k is None or s is None:
            return _failed(m, ctx, "unsupported-argument", "padding='same' needs literal pool_size and strides")
        samples = [_pad_samples(n, kk, ss) for n, kk, ss in zip(fm.spatial, k, s)]
        unknown = any(smp is None for smp in samples)
        uniform = not unknown and all(len({p for _, p in smp}) == 1 for smp in samples)
        after = not unknown and all(lo == 0 and _ceil_mode_out(n, kk, ss) == -(-n // ss)
                                    for smp, kk, ss in zip(samples, k, s) for n, (lo, _) in smp)
        if kind == "max" and (unknown or (not uniform and not after)):
            # the padding depends on a size unknown here, or on its parity: computed at each call
            why = ("the input size, which is not known statically here" if unknown
                   else "whether the input size (" + ", ".join(str(n) for n in fm.spatial) + ") is even or odd")
            ctx.report(Severity.INFO, "shape-unknown", f"padding='same' pads by an amount that depends on {why}: "
                       f"MaxPoolSamePad{nd}d (written out in this file) computes TensorFlow's padding at each call, "
                       "with -inf", m.node, m.rule)
            helper = helpers.use(ctx, f"MaxPoolSamePad{nd}d")
            pre.append(expr(f"{helper}({code(m.kwargs['kernel_size'])}, {_compact(s)})"))
            samples = [[(None, (0, 0))]] * nd  # the pooling itself pads nothing
        elif unknown:
            return _failed(m, ctx, "shape-unknown", "padding='same' pads by an amount that depends on the input "
                           "size, which is unknown here: give the model its input shape (keras.Input(shape=...))")
        uniform = all(len({p for _, p in smp}) == 1 for smp in samples)
        pads = [smp[0][1] for smp in samples]
        if uniform and all(lo == hi for lo, hi in pads):
            if any(lo for lo, _ in pads):
                _set_kw(m, "padding", expr(_compact(tuple(lo for lo, _ in pads))), _POOL_ORDER)
                if kind == "avg":  # Keras divides by the number of real elements
                    m.kwargs["count_include_pad"] = expr("False")
        elif all(lo == 0 and _ceil_mode_out(n, kk, ss) == -(-n // ss)
                 for smp, kk, ss in zip(samples, k, s) for n, (lo, _) in smp):
            # all the padding is after: torch's ceil_mode windows overhang the end exactly as TF's do,
            # and average only over real elements
            m.kwargs["ceil_mode"] = expr("True")
        elif not uniform:
            return _failed(m, ctx, "shape-unknown", "padding='same' here pads by an amount that depends on "
                           "whether the input size (" + ", ".join(str(n) for n in fm.spatial) + ") is even or "
                           "odd: give the model a literal input shape, or pad explicitly")
        elif kind == "max":
            value = 'float("-inf")'
            pre.append(expr(f"{ctx.spell_text('torch.nn.ConstantPad' + str(nd) + 'd')}"
                            f"({_torch_pad_order(pads)}, {value})"))
        else:
            return _failed(m, ctx, "unsupported-argument", "average pooling with padding='same' here pads "
                           f"{pads} (before, after) per axis: torch cannot pad asymmetrically and still divide "
                           "by the count of real elements; pad and divide by a pooled mask by hand")
    elif padding != "valid":
        return _failed(m, ctx, "unsupported-argument", f"padding={code(pad_node)} has no exact torch equivalent")
    layer = build_call(m, ctx)
    if layer is None:
        return LayerEmission([m.call], failed=True)
    out_sp = []
    for i, n in enumerate(fm.spatial):
        if not known(n) or s is None or k is None:
            out_sp.append(None)
        elif padding == "same":
            out_sp.append(D.ceildiv(n, s[i]))
        else:
            out_sp.append(_valid_out(n, k[i], s[i]))
    out = _Map(tuple(out_sp), fm.channels, fm.first).shape()
    em = LayerEmission([*pre, layer], out, len(pre), layout_bound=_layout_bound(fm, nd))
    return _check_context(m, ctx, lctx, em)


def _pad_samples(n, k: int, s: int) -> list[tuple[int, tuple[int, int]]] | None:
    """(size, 'same' pads) for a known size; for a symbolic one, a size of each remainder mod the
    stride (what the padding depends on)."""
    if _int(n):
        return [(n, _same_pads(n, k, s))]
    if not known(n):
        return None
    base = (k + 1) * s
    return [(base + r, _same_pads(base + r, k, s)) for r in range(s)]


def _ceil_mode_out(n: int, k: int, s: int) -> int:
    out = -(-(n - k) // s) + 1
    if (out - 1) * s >= n:  # torch drops a last window that would start past the input
        out -= 1
    return out


@shape("global-pool")
def global_pool(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    nd, kind = _option(m, "nd"), _option(m, "kind")
    fm = _feature_map(m, ctx, lctx, nd)
    if fm is None:
        return LayerEmission([m.call], failed=True)
    keepdims = literal_value(m.extras["keepdims"], NOT_LITERAL) if "keepdims" in m.extras else False
    if keepdims not in (True, False):
        return _failed(m, ctx, "unsupported-argument", "keepdims must be a literal True/False")
    target = f"torch.nn.Adaptive{'Avg' if kind == 'avg' else 'Max'}Pool{nd}d"
    mods = [expr(f"{ctx.spell_text(target)}(1)")]
    if keepdims:
        out = _Map((1,) * nd, fm.channels, fm.first).shape()
    else:
        mods.append(expr(f"{ctx.spell_text('torch.nn.Flatten')}()"))
        out = (fm.channels,)
    return _check_context(m, ctx, lctx, LayerEmission(mods, out, layout_bound=_layout_bound(fm, nd)))


# --- reshaping ----------------------------------------------------------------------------------------

@shape("flatten")
def flatten(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    fmt = _data_format(m, ctx)
    if fmt is None:
        return LayerEmission([m.call], failed=True)
    in_shape = input_shape_from_kwargs(m, lctx) or lctx.in_shape
    layer = build_call(m, ctx)
    if layer is None:
        return LayerEmission([m.call], failed=True)
    if in_shape is None:
        if lctx.layout == "nchw" and fmt != "channels_first":
            # in a model converted to channels-first Keras's last axis is dim 1 at any rank: moved last, the
            # input flattens in Keras's order whatever its rank (features: nothing moves), exactly
            name = helpers.use(ctx, "ChannelsLastReshape")
            ctx.report(Severity.INFO, "layout-kept", f"Flatten of an input of unknown rank in a model converted to "
                       f"channels-first: {name}((-1,)) (written out in this file) moves the channels last before "
                       "flattening, Keras's (h, w, c) order for a feature map, so the layers after it take Keras's "
                       "weights as they are", m.node, m.rule)
            return LayerEmission([expr(f"{name}((-1,))")], (None,))
        if lctx.layout == "nchw" or fmt == "channels_first":
            return _failed(m, ctx, "shape-unknown", "cannot tell whether Flatten sees a feature map (whose "
                           "flattening order differs between the layouts): give the model its input shape")
        return LayerEmission([layer], (None,))
    size = D.prod(in_shape) if all(known(n) for n in in_shape) else None
    flatten_of = None
    if len(in_shape) > 1 and (lctx.layout == "nchw" or fmt == "channels_first"):
        if fmt == "channels_first" and lctx.layout == "nchw":
            return _failed(m, ctx, "unsupported-construct", "Flatten(data_format='channels_first') inside a model "
                           "converted to channels-first: the flattening order cannot be remapped exactly")
        if fmt == "channels_first":
            c, *sp = in_shape
        else:
            *sp, c = in_shape
        if fmt != "channels_first" and (len(in_shape) > 3 or not all(_int(n) for n in in_shape)):
            # the next Dense could not reorder its kernel rows (a 3-D map, or sizes known only when the
            # model is built): the map is flattened in Keras's (h, w, c) or (d, h, w, c) order, channels moved last
            name = helpers.use(ctx, "ChannelsLastReshape")
            shown = ", ".join(map(str, in_shape))
            why = (f"a channels-first volume ({shown}): the Dense after it can reorder the kernel rows of a 2-D "
                   f"map only, so" if len(in_shape) > 3 else
                   f"a channels-first feature map whose sizes are not all numbers here ({shown}):")
            ctx.report(Severity.INFO, "layout-kept", f"Flatten of {why} {name}((-1,)) (written out in this file) "
                       "flattens it in Keras's channels-last order and the layers after it take Keras's weights as "
                       "they are", m.node, m.rule)
            # the size stays unknown (the Dense after it is lazy): a size written with names is not always
            # valid where the layers after it are built (a helper's own size names, keras-io speaker_recognition)
            return LayerEmission([expr(f"{name}((-1,))")], (size if _int(size) else None,))
        # Keras flattens in (h, w, c) order, torch's channels-first map in (c, h, w): the next
        # Dense permutes its kernel rows by these sizes
        h, w = (sp[0], 1) if len(sp) == 1 else sp
        flatten_of = (h, w, c)
    return LayerEmission([layer], (size,), flatten_of=flatten_of)


def _written_sizes(node: cst.BaseExpression | None, ctx) -> tuple | str | None:
    """A shape argument as written, for a module built where the layer call is: a tuple or list literal →
    its sizes (ints, or the source text of each size expression); another plain expression (a name, an
    attribute) → its text, a shape of unknown rank; None where an element is not a plain size expression
    (a call, a starred item, something of TensorFlow's)."""
    if node is None:
        return None

    def plain(n: cst.BaseExpression) -> bool:
        if isinstance(n, (cst.Name, cst.Attribute)) and dotted_text(n) and ctx.imports.resolve(n) is not None:
            return False  # a name of TensorFlow's
        if isinstance(n, (cst.Integer, cst.Name)):
            return True
        if isinstance(n, cst.Attribute):
            return plain(n.value)
        if isinstance(n, cst.Subscript):
            return plain(n.value) and all(isinstance(e.slice, cst.Index) and plain(e.slice.value) for e in n.slice)
        if isinstance(n, cst.BinaryOperation):
            return plain(n.left) and plain(n.right)
        if isinstance(n, cst.UnaryOperation):
            return plain(n.expression)
        return False

    if isinstance(node, (cst.Tuple, cst.List)):
        if any(isinstance(e, cst.StarredElement) or not plain(e.value) for e in node.elements) or not node.elements:
            return None
        out = []
        for e in node.elements:
            v = literal_value(e.value, NOT_LITERAL)
            out.append(v if _int(v) else f"({code(e.value)})" if not isinstance(e.value, (cst.Name, cst.Attribute,
                                                                                           cst.Subscript)) else code(e.value))
        return tuple(out)
    if plain(node) and not isinstance(node, cst.Integer):
        return code(node)
    return None


@shape("reshape")
def reshape(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    # ints written as literals or with module constants ((7, 7, generator_in_channels)): a constant keeps its name
    # or sizes named by the builder's parameters ((-1, input_dim, 1)), written as they are: torch reads them
    # where the module is built, as Keras does
    sizes = sizes_of(lctx)
    node = m.extras.get("target_shape")
    target = sizes.shape(node)
    in_shape = input_shape_from_kwargs(m, lctx) or lctx.in_shape
    whole = sizes.shape_name(node) if target is None else None
    if whole is not None and lctx.layout != "nchw":
        # a whole shape given by a builder parameter (Reshape(adjacency_shape)): its rank is unknown here
        flat, unflatten = ctx.spell_text("torch.nn.Flatten"), ctx.spell_text("torch.nn.Unflatten")
        un = expr(f"{unflatten}(1, tuple({whole}))")
        return LayerEmission([un] if in_shape is not None and len(in_shape) == 1 else [expr(f"{flat}()"), un])
    if (target is None or not all(_int(t) or isinstance(t, str) for t in target)) and not getattr(lctx, "moved", False):
        # the module is built where the layer is (a Sequential's list, a subclass's __init__): the sizes as
        # written there (self.kernel_size, a local new_shape) are the very values Keras reads
        written = _written_sizes(node, ctx)
        if isinstance(written, str):
            if lctx.layout == "nchw":
                target = None
            else:
                flat, unflatten = ctx.spell_text("torch.nn.Flatten"), ctx.spell_text("torch.nn.Unflatten")
                return LayerEmission([expr(f"{flat}()"), expr(f"{unflatten}(1, tuple({written}))")])
        elif written is not None:
            target = written
    if target is None or not all(_int(t) or isinstance(t, str) for t in target) \
            or sum(1 for t in target if t == -1) > 1:
        return _failed(m, ctx, "unsupported-argument", "target_shape must be a tuple of sizes fwport can read where "
                       "the layer is built: ints written as literals or module constants, parameters of the "
                       "function that builds the model, or sizes of the model's tensors (x.shape[-1]) that are "
                       "known (at most one -1)")
    if lctx.layout == "nchw" and (in_shape is None or len(in_shape) > 1 or len(target) > 1):
        return _failed(m, ctx, "unsupported-construct", "Reshape to or from a feature map in a model converted "
                       "to channels-first: Keras reshapes in channels-last order, so the result would be "
                       "silently permuted; reshape explicitly with permutes, or keep this model channels-last")
    target = tuple(target)
    size = None
    if in_shape is not None and all(_int(n) for n in in_shape):
        size = 1
        for n in in_shape:
            size *= n
    if -1 in target and size is not None and all(_int(t) for t in target):
        known = 1
        for t in target:
            known *= t if t != -1 else 1
        target = tuple(size // known if t == -1 else t for t in target)
    flat = ctx.spell_text("torch.nn.Flatten")
    mods = [expr(f"{flat}()")]
    if len(target) > 1:
        dims = ", ".join(t if isinstance(t, str) else repr(t) for t in target)
        unflatten = expr(f"{ctx.spell_text('torch.nn.Unflatten')}(1, ({dims}))")
        mods = [unflatten] if in_shape is not None and len(in_shape) == 1 else [*mods, unflatten]
    out = tuple(None if t == -1 else t for t in target)
    return LayerEmission(mods, out)


# --- normalization ------------------------------------------------------------------------------------

def _affine_flags(m: MappedCall, ctx, scale_kw: str) -> bool | str:
    """center/scale → torch's affine flags; False after reporting a combination torch lacks, "no-scale"
    for scale=False with center=True (torch has a switch for the bias alone, none for the weight alone:
    the caller wraps the module in the without_scale helper, whose weight is a constant of ones)."""
    center = literal_value(m.extras["center"], NOT_LITERAL) if "center" in m.extras else True
    scale_ = literal_value(m.extras["scale"], NOT_LITERAL) if "scale" in m.extras else True
    if center not in (True, False) or scale_ not in (True, False):
        m.fail(ctx, "unsupported-argument", "center/scale must be literal True/False")
        return False
    if center and not scale_:
        return "no-scale"
    if not center and not scale_:
        m.kwargs[scale_kw] = expr("False")
    elif not center:
        m.kwargs["bias"] = expr("False")
    return True


def _without_scale(layer: cst.BaseExpression, ctx) -> cst.Call:
    """scale=False with center=True: the torch norm (affine, so it has its bias) wrapped in the
    without_scale helper, which makes its weight a non-persistent buffer of ones: Keras's computation
    with no scale, never trained, and not in the state_dict (the weight maps' gamma moves are absent)."""
    return cst.Call(func=cst.Name(helpers.use(ctx, "without_scale")), args=[cst.Arg(layer)])


def _no_scale_lazy(m: MappedCall, ctx) -> LayerEmission:
    return _failed(m, ctx, "shape-unknown", "scale=False with center=True on an input whose size is unknown here: "
                   "torch norms have a bias-only switch but no weight-only one, and the constant weight of ones "
                   "that stands for Keras's missing scale needs the size; give the model its input shape")


def _bn_channels(in_shape: tuple, axis: int):
    """The size of the normalised axis of a (batch-less) input shape, or None where the axis is not in it."""
    rank = len(in_shape) + 1
    return in_shape[axis % rank - 1] if -rank <= axis < rank and axis % rank else None


@shape("batch-norm")
def batch_norm(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    in_shape = input_shape_from_kwargs(m, lctx) or lctx.in_shape
    axis = _axis(m)
    if not _int(axis):
        return _failed(m, ctx, "unsupported-argument", f"axis={code(m.extras['axis'])}: only a single literal "
                       "axis maps onto torch's BatchNorm (which normalises per channel at dim 1)")
    flags = _affine_flags(m, ctx, "affine")
    if not flags:
        return LayerEmission([m.call], failed=True)
    if flags == "no-scale" and (in_shape is None or not known(_bn_channels(in_shape, axis) or 1)):
        return _no_scale_lazy(m, ctx)
    if in_shape is None and axis == -1 and lctx.layout != "nchw":
        # Keras's layout kept: the last axis at any rank, BatchNorm1d over the rows (a helper written out)
        layer = build_call(m, ctx, target="torch.nn.LazyBatchNorm1d")
        if layer is None:
            return LayerEmission([m.call], failed=True)
        ctx.report(Severity.INFO, "shape-unknown", "the input rank is unknown here: emitted LazyLastAxisBatchNorm "
                   "(written out in this file), BatchNorm1d over the rows x.reshape(-1, C) with C taken from the "
                   "first call, which is Keras's computation over the last axis at any rank", m.node, m.rule)
        return LayerEmission([layer.with_changes(func=cst.Name(helpers.use(ctx, "LazyLastAxisBatchNorm")))])
    if in_shape is None and axis == -1 and lctx.layout == "nchw" and lctx.flatten_of is None:
        # a model converted to channels-first: Keras's last axis is dim 1 at any rank, where torch's batch
        # norm computes per channel whatever the rank (a helper: BatchNorm1d checks for 2-D or 3-D inputs)
        layer = build_call(m, ctx, target="torch.nn.LazyBatchNorm1d")
        if layer is None:
            return LayerEmission([m.call], failed=True)
        ctx.report(Severity.INFO, "shape-unknown", "the input rank is unknown here: emitted "
                   "LazyChannelsFirstBatchNorm (written out in this file), torch's batch norm over dim 1 (the "
                   "channels of a channels-first model at any rank) with the channel count taken from the first "
                   "call", m.node, m.rule)
        return LayerEmission([layer.with_changes(func=cst.Name(helpers.use(ctx, "LazyChannelsFirstBatchNorm")))])
    if in_shape is None:
        return _failed(m, ctx, "shape-unknown", "the input rank is unknown here, so neither BatchNorm1d nor "
                       "BatchNorm2d can be chosen: give the model its input shape")
    rank = len(in_shape) + 1
    if not -rank <= axis < rank or axis % rank == 0:
        return _failed(m, ctx, "unsupported-argument", f"axis={axis} is not a feature axis of a {rank}-D input")
    a = axis % rank
    if rank == 2 or lctx.layout == "nchw":
        if a != rank - 1:
            return _failed(m, ctx, "unsupported-construct", f"BatchNormalization over axis {axis} of a channels-last "
                           "input converted to channels-first: only the channel axis maps onto torch's BatchNorm")
        bound, channels = 0, in_shape[-1]
    elif a == 1:  # channels_first source: torch's own layout
        bound, channels = 0, in_shape[0]
    elif a == rank - 1:
        bound, channels = rank, in_shape[-1]
    else:
        return _failed(m, ctx, "unsupported-construct", f"BatchNormalization over axis {axis}: torch's BatchNorm "
                       "normalises per channel at dim 1; permute explicitly")
    dims = max(rank - 2, 1)
    if dims > 3:
        return _failed(m, ctx, "unsupported-construct", f"no torch BatchNorm for a {rank}-D input")
    if known(channels):
        m.kwargs = {"num_features": expr(str(channels)), **m.kwargs}
        layer = build_call(m, ctx, target=f"torch.nn.BatchNorm{dims}d")
    else:
        layer = build_call(m, ctx, target=f"torch.nn.LazyBatchNorm{dims}d")
        ctx.report(Severity.INFO, "shape-unknown", f"channels unknown here: emitted LazyBatchNorm{dims}d, which "
                   "infers them on the first forward pass", m.node, m.rule)
    if layer is None:
        return LayerEmission([m.call], failed=True)
    if flags == "no-scale":
        layer = _without_scale(layer, ctx)
    variant, symbols = None, {}
    if lctx.flatten_of is not None and rank == 2:
        # features of a flattened channels-first map: (c, h, w) order here, (h, w, c) in Keras, so the
        # per-feature parameters are reordered, and the order carries on to the next Dense
        h, w, c = lctx.flatten_of
        if not all(_int(x) for x in (h, w, c)):
            return _failed(m, ctx, "shape-unknown", "BatchNormalization after the Flatten of a feature map whose "
                           f"sizes are not all numbers ({h}, {w}, {c}): its parameters must be reordered from "
                           "(h, w, c) to (c, h, w) order, which needs H, W and C; give the model a literal input shape")
        variant, symbols = "after-flatten", {"H": int(h), "W": int(w), "C": int(c)}
    return _check_context(m, ctx, lctx, LayerEmission([layer], tuple(in_shape), layout_bound=bound, variant=variant,
                                                      symbols=symbols, flatten_of=lctx.flatten_of if variant else None))


@shape("layer-norm")
def layer_norm(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    in_shape = input_shape_from_kwargs(m, lctx) or lctx.in_shape
    axis = _axis(m)
    axes = [axis] if _int(axis) else axis
    if not isinstance(axes, (list, tuple)) or not axes or not all(_int(a) for a in axes):
        return _failed(m, ctx, "unsupported-argument", "axis must be a literal int or list of ints")
    flags = _affine_flags(m, ctx, "elementwise_affine")
    if not flags:
        return LayerEmission([m.call], failed=True)
    if flags == "no-scale" and (in_shape is None or not all(known(n) for n in in_shape)):
        return _no_scale_lazy(m, ctx)
    if in_shape is None:
        from fwport.packs.tf2torch.attention import lazy_layer_norm
        return lazy_layer_norm(m, ctx, lctx, axes, None)
    rank = len(in_shape) + 1
    norm = sorted({a % rank for a in axes if -rank <= a < rank})
    if len(norm) != len(axes) or 0 in norm or norm != list(range(rank - len(norm), rank)):
        return _failed(m, ctx, "unsupported-construct", f"LayerNormalization over axis {axis}: torch's LayerNorm "
                       "normalises the trailing axes only")
    if lctx.layout == "nchw" and rank > 2:
        return _failed(m, ctx, "unsupported-construct", "LayerNormalization on a feature map converted to "
                       "channels-first normalises over the channel axis, which is no longer last: torch's "
                       "LayerNorm cannot express it; keep this model channels-last")
    sizes = tuple(in_shape[a - 1] for a in norm)
    if not all(known(n) for n in sizes):
        from fwport.packs.tf2torch.attention import lazy_layer_norm
        return lazy_layer_norm(m, ctx, lctx, [a - rank for a in norm], tuple(in_shape))
    m.kwargs = {"normalized_shape": expr(str(sizes[0]) if len(sizes) == 1 else str(sizes)), **m.kwargs}
    layer = build_call(m, ctx)
    if layer is None:
        return LayerEmission([m.call], failed=True)
    if flags == "no-scale":
        layer = _without_scale(layer, ctx)
    return LayerEmission([layer], tuple(in_shape), variant=None if len(sizes) == 1 else "multi-axis")


# --- embedding ----------------------------------------------------------------------------------------

@shape("embedding")
def embedding(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    if lctx.layout == "nchw":
        # (a Sequential converted to channels-first; the functional pass moves the axis where it calls the layer):
        # its output (batch, *ids, D) is channels-last: a Permute after it moves D to dim 1, where the layers after
        # it take their channels (Keras's (T, D) stays the shape it records)
        in_shape = input_shape_from_kwargs(m, lctx) or lctx.in_shape
        if in_shape is None and "input_length" in m.extras:
            n = _dim(lctx, m.extras["input_length"])
            in_shape = (n,) if known(n) else None
        if in_shape is None:
            return _failed(m, ctx, "unsupported-construct", "Embedding outputs (batch, T, D) channels-last, and the "
                           "channels-first layers after it need its D moved to dim 1, where the rank of its ids is "
                           "unknown here: give the model its input shape (keras.Input(shape=(T,)) or input_length=)")
        em = embedding(m, ctx, dataclasses.replace(lctx, layout="keep", in_shape=tuple(in_shape)))
        if em.failed or not in_shape:
            return em
        r = len(in_shape)
        em.modules = [*em.modules, expr(f"{helpers.use(ctx, 'Permute')}(({r + 1}, {', '.join(map(str, range(1, r + 1)))}))")]
        return em
    in_shape = input_shape_from_kwargs(m, lctx) or lctx.in_shape
    if in_shape is None and "input_length" in m.extras:
        n = _dim(lctx, m.extras["input_length"])
        in_shape = (n,) if known(n) else None
    mask = literal_value(m.extras["mask_zero"], NOT_LITERAL) if "mask_zero" in m.extras else False
    if mask is True and getattr(lctx, "mask_tracked", False):
        # the functional pass carries the mask (ids != 0) to the layers that read it (masks.py)
        layer = build_call(m, ctx)
    elif mask is not False:
        if mask is not True or not getattr(lctx, "mask_out", False):
            return _failed(m, ctx, "unsupported-argument", f"mask_zero={code(m.extras['mask_zero'])}: Keras propagates "
                           "the mask to later layers and losses; torch's padding_idx does not: pack the sequences "
                           "(pack_padded_sequence) and mask the loss by hand")
        _report_mask(m, ctx, "the steps from the first 0 on")
        layer = build_call(m, ctx, target="torch.nn.Module")
        if layer is None:
            return LayerEmission([m.call], failed=True)
        layer = layer.with_changes(func=cst.Name(helpers.use(ctx, "MaskedEmbedding")))
    else:
        layer = build_call(m, ctx)
    if layer is None:
        return LayerEmission([m.call], failed=True)
    dim = _dim(lctx, m.kwargs.get("embedding_dim"))
    out = (*in_shape, dim if known(dim) else None) if in_shape is not None else None
    return LayerEmission([layer], out)


def _report_mask(m: MappedCall, ctx, what: str) -> None:
    ctx.report(Severity.INFO, "idiom-replaced", f"Keras's mask → a PackedSequence for the recurrent layer after it "
               f"(torch's RNNs skip {what}, as Keras's do): exact for right-padded sequences, a ValueError at run "
               "time for others; Keras also leaves the padded steps out of the loss, which the torch loss must "
               "do by hand", m.node, m.rule)


@shape("masking")
def masking(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """Masking(mask_value) before a recurrent layer of a Sequential → the Masking helper (written out in the
    file): a PackedSequence of the steps before the first step all of whose features equal mask_value."""
    if not getattr(lctx, "mask_out", False):
        return _failed(m, ctx, "unsupported-construct", "Masking: Keras propagates its mask to the layers after it "
                       "(recurrent layers skip the masked steps, losses and some layers ignore them); fwport "
                       "translates it only right before an LSTM, GRU or SimpleRNN of a Sequential (a PackedSequence): "
                       "pack the sequences (pack_padded_sequence) by hand")
    value = m.extras.get("mask_value")
    if value is not None and not isinstance(literal_value(value, NOT_LITERAL), (int, float)):
        return _failed(m, ctx, "unsupported-argument", f"mask_value={code(value)} must be a literal number")
    _report_mask(m, ctx, "the masked steps")
    name = helpers.use(ctx, "Masking")
    return LayerEmission([expr(f"{name}({code(value) if value is not None else ''})")], lctx.in_shape)


@shape("reversible-embedding")
def reversible_embedding(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """ReversibleEmbedding → the ReversibleEmbedding helper (written out in the file): an nn.Embedding whose
    call with reverse=True gives the logits x @ weight.T (or a reverse_weight of its own when
    tie_weights=False), soft-capped as Keras caps them."""
    for key, ok in (("mask_zero", (False,)), ("reverse_dtype", (None,))):
        node = m.extras.get(key)
        if node is not None and literal_value(node, NOT_LITERAL) not in ok:
            why = ("Keras propagates the mask to later layers and losses: pack the sequences by hand"
                   if key == "mask_zero" else "the reverse projection computed in another dtype: cast by hand")
            return _failed(m, ctx, "unsupported-argument", f"{key}={code(node)}: {why}")
    if "num_embeddings" not in m.kwargs or "embedding_dim" not in m.kwargs:
        return _failed(m, ctx, "unsupported-argument", "input_dim and output_dim are required")
    args = [code(m.kwargs["num_embeddings"]), code(m.kwargs["embedding_dim"])]
    args += [f"{k}={code(m.extras[k])}" for k in ("tie_weights", "logit_soft_cap") if k in m.extras]
    ctx.spell_text("torch.nn.Module")
    name = helpers.use(ctx, "ReversibleEmbedding")
    in_shape = input_shape_from_kwargs(m, lctx) or lctx.in_shape
    dim = _dim(lctx, m.kwargs.get("embedding_dim"))
    out = (*in_shape, dim if known(dim) else None) if in_shape is not None else None
    return LayerEmission([expr(f"{name}({', '.join(args)})")], out)


# --- activation layers --------------------------------------------------------------------------------

@shape("activation")
def activation_layer(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    rank = len(lctx.in_shape) + 1 if lctx.in_shape is not None else None
    if lctx.layout == "nchw" and rank is None:
        name = activation_name(m.extras.get("activation"), ctx) if "activation" in m.extras else None
        if name in ("softmax", "log_softmax"):
            return _failed(m, ctx, "shape-unknown", "softmax over the channel axis of an input whose rank is "
                           "unknown: cannot tell which torch dim that is")
    acts = activation_modules(m, ctx, _channel_axis(lctx, rank))
    if acts is None:
        return LayerEmission([m.call], failed=True)
    if not acts:
        acts = [expr(f"{ctx.spell_text('torch.nn.Identity')}()")]
    return LayerEmission(acts, lctx.in_shape)


@shape("relu")
def relu(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    vals = {}
    for key, default in (("max_value", None), ("negative_slope", 0.0), ("threshold", 0.0)):
        node = m.extras.get(key)
        v = default if node is None else literal_value(node, NOT_LITERAL)
        if v is NOT_LITERAL or not (v is None or isinstance(v, (int, float)) and not isinstance(v, bool)):
            return _failed(m, ctx, "unsupported-argument", f"{key}={code(node)} is not a literal number")
        vals[key] = v
    mx, slope, thr = vals["max_value"], vals["negative_slope"], vals["threshold"]
    nn_ = lambda name: ctx.spell_text(f"torch.nn.{name}")  # noqa: E731
    if slope == 0 and thr == 0 and mx is None:
        text = f"{nn_('ReLU')}()"
    elif slope == 0 and thr == 0 and mx == 6:
        text = f"{nn_('ReLU6')}()"
    elif slope == 0 and thr == 0 and mx >= 0:
        text = f"{nn_('Hardtanh')}(0.0, {float(mx)!r})"
    elif slope == 0 and mx is None:  # Keras keeps x where x > threshold (strictly), else 0
        text = f"{nn_('Threshold')}({float(thr)!r}, 0.0)"
    elif thr == 0 and mx is None:
        text = f"{nn_('LeakyReLU')}(negative_slope={float(slope)!r})"
    else:
        return _failed(m, ctx, "unsupported-argument", f"ReLU(max_value={mx}, negative_slope={slope}, "
                       f"threshold={thr}) combines clipping, slope and threshold: no single torch module; "
                       "write it as torch.where/clamp")
    return LayerEmission([expr(text)], lctx.in_shape)


@shape("prelu")
def prelu(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    in_shape = input_shape_from_kwargs(m, lctx) or lctx.in_shape
    shared = literal_value(m.extras["shared_axes"], NOT_LITERAL) if "shared_axes" in m.extras else None
    if _int(shared):
        shared = [shared]
    if not (shared is None or isinstance(shared, (list, tuple)) and all(_int(a) for a in shared)):
        return _failed(m, ctx, "unsupported-argument", "shared_axes must be a literal list of ints")
    if in_shape is None:
        return _failed(m, ctx, "shape-unknown", "PReLU's parameter count depends on the input shape, unknown here")
    rank = len(in_shape) + 1
    shared = {a % rank for a in (shared or [])}
    feature = set(range(1, rank))
    bound = 0
    if shared == feature:
        n = 1
    elif shared == feature - {rank - 1}:  # one slope per channel (or per feature on a 2-D input)
        n = in_shape[-1]
        bound = rank if rank > 2 else 0
    else:
        return _failed(m, ctx, "unsupported-construct", f"PReLU with shared_axes={sorted(shared) or None} on a "
                       f"{rank}-D input learns a slope per element; torch's PReLU has one per channel or one "
                       "in all (use shared_axes over every axis but the channels)")
    if not known(n):
        return _failed(m, ctx, "shape-unknown", "PReLU's channel count is unknown here")
    layer = expr(f"{ctx.spell_text('torch.nn.PReLU')}({n})")
    em = LayerEmission([layer], tuple(in_shape), layout_bound=0 if lctx.layout == "nchw" else bound)
    return _check_context(m, ctx, lctx, em)


def _axis(m: MappedCall):
    """The layer's ``axis`` argument as a literal (NOT_LITERAL when it is not one); -1 when omitted."""
    return literal_value(m.extras["axis"], NOT_LITERAL) if "axis" in m.extras else -1


def _dim_of_axis(m: MappedCall, ctx, lctx: LayerContext, not_int: str, rank_unknown: str) -> int | LayerEmission:
    """The torch dim of the layer's single literal axis in this region's layout, or the failed
    emission (``rank_unknown`` may use ``{axis}``)."""
    axis = _axis(m)
    if not _int(axis):
        return _failed(m, ctx, "unsupported-argument", not_int)
    dim = remap_axis(axis, lctx.in_shape, lctx)
    if dim is None:
        return _failed(m, ctx, "shape-unknown", rank_unknown.format(axis=axis))
    return dim


@shape("softmax")
def softmax(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    dim = _dim_of_axis(m, ctx, lctx, "axis must be a literal int (torch's Softmax takes one dim)",
                       "softmax over axis {axis} of an input whose rank is unknown in a channels-first region: "
                       "cannot tell which torch dim that is")
    if isinstance(dim, LayerEmission):
        return dim
    return LayerEmission([expr(f"{ctx.spell_text('torch.nn.Softmax')}(dim={dim})")], lctx.in_shape)


# --- merge layers: no torch module, an expression at the call site ---------------------------------

def _elements(arg: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    if isinstance(arg, (cst.List, cst.Tuple)) and not any(isinstance(e, cst.StarredElement) for e in arg.elements):
        return [e.value for e in arg.elements]
    return None


@shape("merge")
def merge(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    op = _option(m, "op")
    name = m.rule.names[0].rsplit(".", 1)[-1]
    if _no_context(lctx):
        return _failed(m, ctx, "unsupported-construct", f"{name} has no torch module: write the operation where "
                       f"the layer is called ({ {'add': 'a + b', 'mul': 'a * b', 'cat': 'torch.cat([a, b], dim=...)', 'sub': 'a - b', 'avg': '(a + b) / 2', 'max': 'torch.maximum(a, b)', 'min': 'torch.minimum(a, b)'}[op] })")
    if op == "cat":
        dim = _dim_of_axis(m, ctx, lctx, "axis must be a literal int",
                           "concatenation axis {axis} on inputs whose rank is unknown in a channels-first region")
        if isinstance(dim, LayerEmission):
            return dim
        cat = ctx.spell_text("torch.cat")

        def functional(arg: cst.BaseExpression) -> cst.BaseExpression:
            return expr(f"{cat}({code(arg)}, dim={dim})")
    elif op in ("sub", "avg", "max", "min"):
        def functional(arg: cst.BaseExpression) -> cst.BaseExpression:
            items = _elements(arg)
            stack = ctx.spell_text("torch.stack") if items is None and op != "sub" else ""
            fn = ctx.spell_text("torch.maximum" if op == "max" else "torch.minimum") if op in ("max", "min") else ""
            if op == "sub":  # Keras checks for exactly two inputs when it is built
                a, b = items if items is not None and len(items) == 2 else (expr(f"{code(arg)}[0]"), expr(f"{code(arg)}[1]"))
                return expr(f"{_paren(a)} - {_paren(b)}")
            if items is None:
                return expr(f"{stack}({code(arg)})." + {"avg": "mean", "max": "amax", "min": "amin"}[op] + "(dim=0)")
            if op == "avg":
                return expr(f"({' + '.join(_paren(i) for i in items)}) / {len(items)}")
            text = code(items[0])
            for i in items[1:]:
                text = f"{fn}({text}, {code(i)})"
            return expr(text)
    else:
        sym = " + " if op == "add" else " * "

        def functional(arg: cst.BaseExpression) -> cst.BaseExpression:
            items = _elements(arg)
            if items is None:  # (math imported only where it is used)
                return expr(f"{'sum' if op == 'add' else ctx.spell_text('math.prod')}({code(arg)})")
            return expr(sym.join(f"({code(i)})" if isinstance(i, (cst.BinaryOperation, cst.BooleanOperation,
                                                                  cst.IfExp, cst.Lambda)) else code(i)
                                 for i in items))
    return LayerEmission([], lctx.in_shape, functional=functional)


def _paren(node: cst.BaseExpression) -> str:
    text = code(node)
    return f"({text})" if isinstance(node, (cst.BinaryOperation, cst.BooleanOperation, cst.IfExp, cst.Lambda)) else text


# --- padding and resizing ------------------------------------------------------------------------------

def _size_arg(node: cst.BaseExpression | None, lctx: LayerContext, default=NOT_LITERAL):
    """A padding / cropping / size argument's value where the layer is built: a literal, or ints and (nested)
    tuples of them read through the module's constants and the sizes known there (``PAD``, ``(pad, PAD)``,
    ``image_size // 4`` with ``image_size`` a constant); ``default`` where it is not known as ints."""
    if node is None:
        return default
    value = literal_value(node, NOT_LITERAL)
    if value is not NOT_LITERAL:
        return value
    sizes = sizes_of(lctx)
    if isinstance(node, (cst.Tuple, cst.List)):
        items = [NOT_LITERAL if isinstance(e, cst.StarredElement) else _size_arg(e.value, lctx) for e in node.elements]
        return default if not items or any(i is NOT_LITERAL for i in items) else tuple(items)
    if isinstance(node, cst.Name) and node.value in sizes.constants:
        return sizes.constants[node.value]
    d = sizes.dim(node)
    return d if _int(d) else default


@shape("zero-padding")
def zero_padding(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    fm = _feature_map(m, ctx, lctx, 2)
    if fm is None:
        return LayerEmission([m.call], failed=True)
    p = _size_arg(m.extras["padding"], lctx) if "padding" in m.extras else (1, 1)
    if _int(p):
        pads = [(p, p), (p, p)]
    elif isinstance(p, (list, tuple)) and len(p) == 2 and all(_int(x) for x in p):
        pads = [(p[0], p[0]), (p[1], p[1])]
    elif isinstance(p, (list, tuple)) and len(p) == 2 and all(_ntuple(x, 2) for x in p):
        pads = [tuple(p[0]), tuple(p[1])]
    elif isinstance(m.extras.get("padding"), cst.Tuple) and isinstance(
            written := _written_sizes(m.extras["padding"], ctx), tuple) and len(written) == 2:
        # (h, w) written as plain size expressions ((k // 2, k // 2)): the same pads, in torch's order, as text
        pads = [(written[0], written[0]), (written[1], written[1])]
    else:
        return _failed(m, ctx, "unsupported-argument", "padding must be a literal int, (h, w) or ((top, bottom), "
                       "(left, right))")
    if not all(_int(x) for pr in pads for x in pr):
        text = "(" + ", ".join(str(x) for x in _torch_pad_order(pads)) + ")"
    elif len({x for pr in pads for x in pr}) == 1:
        text = _compact(_torch_pad_order(pads))
    else:
        text = str(_torch_pad_order(pads))
    layer = expr(f"{ctx.spell_text('torch.nn.ZeroPad2d')}({text})")
    sp = tuple(D.add(n, lo + hi) if known(n) and _int(lo) and _int(hi) else None
               for n, (lo, hi) in zip(fm.spatial, pads))
    em = LayerEmission([layer], _Map(sp, fm.channels, fm.first).shape(), layout_bound=_layout_bound(fm, 2))
    return _check_context(m, ctx, lctx, em)


def _pairs(value, nd: int) -> list[tuple[int, int]] | None:
    """Keras's padding / cropping argument for ``nd`` spatial axes → (before, after) per axis: an int
    (all sides), one int per axis (both sides), or one (before, after) pair per axis; for one axis
    also a bare (before, after) pair."""
    if _int(value):
        return [(value, value)] * nd
    if not isinstance(value, (list, tuple)):
        return None
    if nd == 1 and len(value) == 2 and all(_int(x) for x in value):
        return [(value[0], value[1])]
    if len(value) != nd:
        return None
    if all(_int(x) for x in value):
        return [(x, x) for x in value]
    if all(isinstance(x, (list, tuple)) and len(x) == 2 and all(_int(y) for y in x) for x in value):
        return [tuple(x) for x in value]
    return None


@shape("pad-crop")
def pad_crop(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """ZeroPadding1D/3D and Cropping1D/2D/3D → nn.ZeroPad{1,2,3}d: torch pads with negative amounts by
    cropping, so a crop is a ZeroPad of the negated amounts (exact: a slice)."""
    nd, kind = _option(m, "nd"), _option(m, "kind")
    fm = _feature_map(m, ctx, lctx, nd)
    if fm is None:
        return LayerEmission([m.call], failed=True)
    arg = "padding" if kind == "pad" else "cropping"
    default = next(p.default for p in m.rule.params if p.name == arg)
    node = m.extras.get(arg)
    value = _size_arg(node, lctx) if node is not None else literal_value(expr(default), NOT_LITERAL)
    pairs = _pairs(value, nd)
    if pairs is None:
        forms = "an int, (before, after)" if nd == 1 else f"an int, {nd} ints, or {nd} (before, after) pairs"
        return _failed(m, ctx, "unsupported-argument", f"{arg} must be a literal: {forms}")
    sign = 1 if kind == "pad" else -1
    pads = [(sign * lo, sign * hi) for lo, hi in pairs]
    order = _torch_pad_order(pads)
    text = str(order[0]) if len(set(order)) == 1 else str(order)
    layer = expr(f"{ctx.spell_text(f'torch.nn.ZeroPad{nd}d')}({text})")
    sp = tuple(D.add(n, lo + hi) if known(n) else None for n, (lo, hi) in zip(fm.spatial, pads))
    if any(_int(n) and n <= 0 for n in sp):
        return _failed(m, ctx, "unsupported-argument", f"the crop leaves nothing of the input ({', '.join(map(str, fm.spatial))})")
    em = LayerEmission([layer], _Map(sp, fm.channels, fm.first).shape(), layout_bound=_layout_bound(fm, nd))
    return _check_context(m, ctx, lctx, em)


@shape("spatial-dropout")
def spatial_dropout(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """SpatialDropout1D/2D/3D → nn.Dropout1d/2d/3d: both zero whole channels (Keras's noise shape is
    (batch, 1, ..., channels)); torch's take the channels at dim 1."""
    nd = _option(m, "nd")
    fm = _feature_map(m, ctx, lctx, nd)
    if fm is None:
        return LayerEmission([m.call], failed=True)
    layer = build_call(m, ctx)
    if layer is None:
        return LayerEmission([m.call], failed=True)
    em = LayerEmission([layer], _Map(fm.spatial, fm.channels, fm.first).shape(), layout_bound=_layout_bound(fm, nd))
    return _check_context(m, ctx, lctx, em)


@shape("noise")
def noise(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """GaussianNoise / GaussianDropout → the helper of that name written out in the file (elementwise:
    any layout; the identity in eval())."""
    name = helpers.use(ctx, _option(m, "helper"))
    arg = "stddev" if name == "GaussianNoise" else "rate"
    value = m.extras.get(arg)
    if value is None:
        return _failed(m, ctx, "unsupported-argument", f"{arg} is required")
    return LayerEmission([expr(f"{name}({code(value)})")], lctx.in_shape)


@shape("permute")
def permute(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """Permute(dims) → the Permute helper; in a model converted to channels-first the permutation is
    composed with the layouts (channels-first in, the channels-first form of Keras's result out)."""
    in_shape = input_shape_from_kwargs(m, lctx) or lctx.in_shape
    dims = literal_value(m.extras["dims"], NOT_LITERAL) if "dims" in m.extras else NOT_LITERAL
    if not isinstance(dims, (tuple, list)) or sorted(dims) != list(range(1, len(dims) + 1)):
        return _failed(m, ctx, "unsupported-argument", "dims must be a literal permutation of 1..rank-1")
    r = len(dims) + 1
    if in_shape is not None and len(in_shape) + 1 != r:
        return _failed(m, ctx, "unsupported-construct", f"Permute{tuple(dims)} on an input of rank {len(in_shape) + 1}")
    perm = tuple(dims)
    if lctx.layout == "nchw" and r > 2:
        # torch dim i of a channels-first tensor holds Keras axis held[i]
        held = [0, r - 1, *range(1, r - 1)]
        out_axes = [r - 1 if d == 1 else d - 1 for d in range(1, r)]  # Keras output axis at torch dim d
        perm = tuple(held.index(dims[a - 1]) for a in out_axes)
    out = tuple(in_shape[d - 1] for d in dims) if in_shape is not None else None
    name = helpers.use(ctx, "Permute")
    return LayerEmission([expr(f"{name}({perm})")], out)


@shape("repeat-vector")
def repeat_vector(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """RepeatVector(n) → the RepeatVector helper: the new axis at dim 1 (2 where the model is
    channels-first, whose rank-3 tensors hold their features at dim 1)."""
    in_shape = input_shape_from_kwargs(m, lctx) or lctx.in_shape
    n = m.extras.get("n")
    if n is None:
        return _failed(m, ctx, "unsupported-argument", "n is required")
    if in_shape is not None and len(in_shape) != 1:
        return _failed(m, ctx, "unsupported-construct", "RepeatVector takes (batch, features)")
    name = helpers.use(ctx, "RepeatVector")
    dim = ", dim=2" if lctx.layout == "nchw" else ""
    out = (_dim(lctx, n) if known(_dim(lctx, n)) else None, in_shape[0]) if in_shape is not None else None
    return LayerEmission([expr(f"{name}({code(n)}{dim})")], out)


@shape("unit-norm")
def unit_norm(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """UnitNormalization → the UnitNormalization helper (written out in the file) on the same axis,
    remapped where the model is channels-first."""
    in_shape = input_shape_from_kwargs(m, lctx) or lctx.in_shape
    axis = _axis(m)
    if not _int(axis):
        return _failed(m, ctx, "unsupported-argument", "axis must be a literal int")
    dim = remap_axis(axis, in_shape, lctx)
    if dim is None:
        return _failed(m, ctx, "shape-unknown", f"axis={axis} in a model converted to channels-first, on an input "
                       "of unknown rank: cannot tell where that axis is")
    name = helpers.use(ctx, "UnitNormalization")
    return LayerEmission([expr(f"{name}({'' if dim == -1 else dim})")], in_shape)


@shape("random-fourier")
def random_fourier(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """RandomFourierFeatures(output_dim, kernel_initializer, scale, trainable) → the RandomFourierFeatures
    helper, given the input size (Keras takes it from its (batch, input_dim) input when it builds)."""
    in_shape = input_shape_from_kwargs(m, lctx) or lctx.in_shape
    if in_shape is not None and len(in_shape) != 1:
        return _failed(m, ctx, "unsupported-construct", f"RandomFourierFeatures on an input of rank {len(in_shape) + 1}: "
                       "Keras takes (batch, features) only")
    if in_shape is None or not known(in_shape[0]):
        return _failed(m, ctx, "shape-unknown", "RandomFourierFeatures needs its input size, which is unknown here: "
                       "give the model its input shape (keras.Input(shape=(features,)))")
    kind = literal_value(m.extras["kernel_initializer"], NOT_LITERAL) if "kernel_initializer" in m.extras else "gaussian"
    if not isinstance(kind, str) or kind.lower() not in ("gaussian", "laplacian"):
        return _failed(m, ctx, "unsupported-argument", "kernel_initializer must be \"gaussian\" or \"laplacian\" "
                       "written as a string (an initializer object draws a kernel fwport does not translate)")
    out = m.extras.get("output_dim")
    if out is None:
        return _failed(m, ctx, "unsupported-argument", "output_dim is required")
    args = [str(in_shape[0]), code(out)]
    if kind.lower() != "gaussian":
        args.append(repr(kind))
    for name in ("scale", "trainable"):
        if name in m.extras:
            args.append(f"{name}={code(m.extras[name])}")
    name = helpers.use(ctx, "RandomFourierFeatures")
    dim = _dim(lctx, out)
    module = expr(f"{name}({', '.join(args)})")
    ctx.settle(module)  # the helper has the source class's name: the rule pass must not take it for Keras's
    return LayerEmission([module], (dim if known(dim) else None,))


@shape("rms-norm")
def rms_norm(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """RMSNormalization over trailing axes → nn.RMSNorm(normalized_shape, eps): x * rsqrt(mean(x²) +
    eps) * scale in both, the scale of the normalised axes' shape."""
    in_shape = input_shape_from_kwargs(m, lctx) or lctx.in_shape
    axis = _axis(m)
    axes = [axis] if _int(axis) else axis
    if not isinstance(axes, (list, tuple)) or not axes or not all(_int(a) for a in axes):
        return _failed(m, ctx, "unsupported-argument", "axis must be a literal int or list of ints")
    if in_shape is None:
        return _lazy_rms_norm(m, ctx, lctx, axes)
    rank = len(in_shape) + 1
    norm = sorted({a % rank for a in axes if -rank <= a < rank})
    if len(norm) != len(axes) or 0 in norm or norm != list(range(rank - len(norm), rank)):
        return _failed(m, ctx, "unsupported-construct", f"RMSNormalization over axis {axis}: torch's RMSNorm "
                       "normalises the trailing axes only")
    if lctx.layout == "nchw" and rank > 2:
        return _failed(m, ctx, "unsupported-construct", "RMSNormalization on a feature map converted to "
                       "channels-first normalises over the channel axis, which is no longer last: torch's "
                       "RMSNorm cannot express it; keep this model channels-last")
    sizes = tuple(in_shape[a - 1] for a in norm)
    if not all(known(n) for n in sizes):
        return _lazy_rms_norm(m, ctx, lctx, [a - rank for a in norm])
    m.kwargs = {"normalized_shape": expr(str(sizes[0]) if len(sizes) == 1 else str(sizes)), **m.kwargs}
    layer = build_call(m, ctx)
    if layer is None:
        return LayerEmission([m.call], failed=True)
    return LayerEmission([layer], tuple(in_shape))


def _lazy_rms_norm(m: MappedCall, ctx, lctx: LayerContext, axes: list) -> LayerEmission:
    """RMSNormalization whose normalised sizes are known only at the first call: the LazyRMSNorm helper
    (written out in the file), an nn.RMSNorm sized by its first input as Keras builds the layer then.
    Exact over the last axes, named with negative indices where the rank is unknown."""
    n = len(axes)
    if lctx.layout == "nchw" or sorted(axes) != list(range(-n, 0)):
        return _failed(m, ctx, "shape-unknown", f"RMSNormalization over axis {code(m.extras['axis']) if 'axis' in m.extras else -1} "
                       "of an input whose shape is unknown here: torch normalises the last axes only; write axis=-1 "
                       "(or [-2, -1]), or give the model its input shape")
    args = [f"eps={code(m.kwargs['eps'])}"] if "eps" in m.kwargs else []
    if n != 1:
        args.append(f"axes={n}")
    ctx.report(Severity.INFO, "shape-unknown", "normalised size unknown here: emitted LazyRMSNorm (written out in the "
               "file), an nn.RMSNorm sized by its first input as Keras builds the layer", m.node, m.rule)
    return LayerEmission([expr(f"{helpers.use(ctx, 'LazyRMSNorm')}({', '.join(args)})")], lctx.in_shape)


@shape("activity-regularization")
def activity_regularization(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """ActivityRegularization: the identity on the values. With both factors 0 (Keras's defaults)
    nn.Identity; else the ActivityRegularization helper, which keeps Keras's penalty of its last call
    (l1·Σ|x| + l2·Σx², divided by the batch size) for a regularization_loss() the training code adds."""
    lits = {k: literal_value(m.extras[k], NOT_LITERAL) if k in m.extras else 0.0 for k in ("l1", "l2")}
    if all(v == 0 for v in lits.values() if not isinstance(v, bool)) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in lits.values()):
        return LayerEmission([expr(f"{ctx.spell_text('torch.nn.Identity')}()")], lctx.in_shape)
    ctx.spell_text("torch.nn.Module")
    name = helpers.use(ctx, "ActivityRegularization")
    args = ", ".join(f"{k}={code(m.extras[k])}" for k in ("l1", "l2") if k in m.extras)
    ctx.report(Severity.INFO, "idiom-replaced", "ActivityRegularization → the ActivityRegularization module written "
               "out in this file: Keras adds its penalty to the loss itself (model.losses), torch does not: add "
               "sum(m.regularization_loss() for m in model.modules() if hasattr(m, 'regularization_loss')) to the "
               "loss where the model is trained", m.node, m.rule)
    return LayerEmission([expr(f"{name}({args})")], lctx.in_shape)


def einsum_dense_shapes(equation: str, output_shape, bias_axes, shape: tuple):
    """(kernel shape, bias shape or None, output shape) of a Keras EinsumDense on an input of ``shape``
    (batch axis first, None where unknown), as Keras's build reads the equation; None if the equation
    is not one Keras accepts (``ab,bc->ac``, ``...b,bc->...c``, ``ab...,bc->ac...``)."""
    import re
    forms = [(r"([a-zA-Z]+),([a-zA-Z]+)->([a-zA-Z]+)$", None), (r"\.\.\.([a-zA-Z]+),([a-zA-Z]+)->\.\.\.([a-zA-Z]+)$", "left"),
             (r"([a-zA-Z]{2,})\.\.\.,([a-zA-Z]+)->([a-zA-Z]{2,})\.\.\.$", "right")]
    match = next(((mm, side) for rx, side in forms if (mm := re.match(rx, equation.replace(" ", "")))), None)
    if match is None:
        return None
    (inputs, kernel, outputs), side = match[0].groups(), match[1]
    given = list(output_shape) if isinstance(output_shape, (list, tuple)) else [output_shape]
    elided = len(shape) - len(inputs)
    if elided < 0 or (side is None and elided) or len(outputs) + (0 if side is None else 0) > len(given) + 1:
        return None
    out = [shape[0], *given]
    if elided > 0 and side == "left":
        out[1:1] = shape[1:elided]
    elif elided > 0:
        out += shape[len(shape) - elided:]
    shift_in, shift_out = (elided - len(shape), elided - len(out)) if side == "left" else (0, 0)
    if len(outputs) > len(out):
        return None
    size = {c: shape[i + shift_in] for i, c in enumerate(inputs)}
    for i, c in enumerate(outputs):
        if c in size and out[i + shift_out] is not None and size[c] is not None and out[i + shift_out] != size[c]:
            return None
        if c in size:
            out[i + shift_out] = size[c]
        else:
            size[c] = out[i + shift_out]
    if any(c not in size for c in kernel) or any(c not in inputs and c not in kernel for c in outputs):
        return None
    bias = None
    if bias_axes:
        if any(c not in outputs for c in bias_axes):
            return None
        first = min(outputs.index(c) for c in bias_axes)
        bias = tuple(size[c] if c in bias_axes else 1 for c in outputs[first:])
        if side != "left":
            bias += (1,) * elided
    return tuple(size[c] for c in kernel), bias, tuple(out)


@shape("einsum-dense")
def einsum_dense(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """EinsumDense → the EinsumDense helper (written out in the file): torch.einsum on the same equation,
    its weight in Keras's kernel layout (the weight map copies it), built from the input shape where it is
    known here, else at the first call (torch's lazy modules, as Keras builds the layer)."""
    if lctx.layout == "nchw":
        return _failed(m, ctx, "unsupported-construct", "EinsumDense in a model converted to channels-first: its "
                       "equation names Keras's channels-last axes; keep this model channels-last")
    eq_node, out_node = m.extras.get("equation"), m.extras.get("output_shape")
    if eq_node is None or out_node is None:
        return _failed(m, ctx, "unsupported-argument", "equation and output_shape are required")
    equation = literal_value(eq_node, NOT_LITERAL)
    bias_node = m.extras.get("bias_axes")
    bias_axes = literal_value(bias_node, NOT_LITERAL) if bias_node is not None else None
    if not isinstance(equation, str):
        return _failed(m, ctx, "unsupported-argument", f"equation={code(eq_node)} is not a literal string: the "
                       "weight's shape is read from it")
    if bias_axes is not None and not isinstance(bias_axes, str):
        return _failed(m, ctx, "unsupported-argument", f"bias_axes={code(bias_node)} is not a literal string")
    in_shape = input_shape_from_kwargs(m, lctx) or lctx.in_shape
    out_lit = literal_value(out_node, NOT_LITERAL)
    out_shape = None
    args = [code(eq_node), code(out_node)] + ([f"bias_axes={code(bias_node)}"] if bias_axes else [])
    static = in_shape is not None and all(_int(n) for n in in_shape)
    if in_shape is not None and out_lit is not NOT_LITERAL:
        shapes = einsum_dense_shapes(equation, out_lit, bias_axes, (None, *in_shape))
        if shapes is None:
            return _failed(m, ctx, "unsupported-argument", f"EinsumDense({code(eq_node)}, {code(out_node)}"
                           f"{', bias_axes=' + code(bias_node) if bias_axes else ''}) on an input of shape "
                           f"{(None, *in_shape)}: Keras refuses this equation or shape")
        out_shape = tuple(shapes[2][1:])
        if static and all(_int(n) for n in shapes[0]):
            args.append(f"input_shape={tuple(in_shape)}")
    else:
        static = False
    if not static:
        ctx.report(Severity.INFO, "shape-unknown", "input shape unknown here: the EinsumDense module (written out in "
                   "the file) creates its weight at the first call, as Keras builds the layer", m.node, m.rule)
    acts = activation_modules(m, ctx)
    if acts is None:
        return LayerEmission([m.call], failed=True)
    ctx.spell_text("torch.nn.Module")
    name = helpers.use(ctx, "EinsumDense")
    return LayerEmission([expr(f"{name}({', '.join(args)})"), *acts], out_shape)


@shape("group-norm")
def group_norm(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """GroupNormalization over the channel axis → nn.GroupNorm(groups, channels, eps) on channels at dim 1."""
    in_shape = input_shape_from_kwargs(m, lctx) or lctx.in_shape
    axis = _axis(m)
    if in_shape is None:
        return _failed(m, ctx, "shape-unknown", "GroupNorm needs the channel count, unknown here, and torch has no "
                       "lazy GroupNorm: give the model its input shape")
    rank = len(in_shape) + 1
    if not _int(axis) or axis % rank != rank - 1:
        return _failed(m, ctx, "unsupported-argument", f"axis={axis}: only the channel axis (-1) is translated")
    center = literal_value(m.extras["center"], NOT_LITERAL) if "center" in m.extras else True
    scale_ = literal_value(m.extras["scale"], NOT_LITERAL) if "scale" in m.extras else True
    if center not in (True, False) or scale_ not in (True, False) or center != scale_:
        return _failed(m, ctx, "unsupported-argument", "center and scale must both be literal True or both False: "
                       "torch's GroupNorm has one affine switch for its weight and bias")
    if not center:
        m.kwargs["affine"] = expr("False")
    channels = in_shape[-1]
    if not known(channels):
        return _failed(m, ctx, "shape-unknown", "GroupNorm needs the channel count, unknown here, and torch has no "
                       "lazy GroupNorm: give the model its input shape")
    groups = m.literal("num_groups", 32)
    groups_node = m.kwargs.get("num_groups", expr("32"))
    if _option(m, "instance") or groups == -1:
        # tfa: InstanceNormalization always, GroupNormalization(groups=-1): one group per channel
        groups, groups_node = channels, expr(str(channels))
    if _int(groups) and _int(channels) and channels % groups:
        return _failed(m, ctx, "unsupported-argument", f"{channels} channels cannot be split into {groups} groups")
    m.kwargs = {"num_groups": groups_node, "num_channels": expr(str(channels)),
                **{k: v for k, v in m.kwargs.items() if k != "num_groups"}}
    layer = build_call(m, ctx)
    if layer is None:
        return LayerEmission([m.call], failed=True)
    bound = rank if rank > 2 else 0
    em = LayerEmission([layer], tuple(in_shape), layout_bound=bound)
    return _check_context(m, ctx, lctx, em)


@shape("upsampling")
def upsampling(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    nd = _option(m, "nd") or 2  # UpSampling1D/3D repeat each step / voxel: nearest, exactly
    fm = _feature_map(m, ctx, lctx, nd)
    if fm is None:
        return LayerEmission([m.call], failed=True)
    node = m.extras.get("size")
    size = _ntuple(_size_arg(node, lctx, None) if node is not None else (2,) * nd, nd)
    mode = literal_value(m.extras["interpolation"], None) if "interpolation" in m.extras else "nearest"
    # a size named by the builder's parameters (UpSampling2D(size=image_size) in a helper called with it): Keras's
    # int or (rows, cols) is torch's scale_factor as it is, in the same order, so the name is written as it is
    written = sizes_of(lctx).dim(node) if size is None and node is not None else None
    if size is None and not _writable(written, lctx):
        return _failed(m, ctx, "unsupported-argument", "size must be a literal int" + (
            "" if nd == 1 else f" or a tuple of {nd} ints") + " (or a module constant, or a parameter of the "
            "function that builds the model)")
    if mode not in ("nearest", "bilinear"):
        return _failed(m, ctx, "unsupported-argument", f"interpolation={mode!r}: torch's kernels for it differ "
                       "from TensorFlow's (only 'nearest' and 'bilinear' are exact)")
    extra = ", mode=\"bilinear\"" if mode == "bilinear" else ""
    layer = expr(f"{ctx.spell_text('torch.nn.Upsample')}(scale_factor={_compact(size) if size else written}{extra})")
    # a written size may be an int or a tuple: the output's spatial sizes are known only from ints
    sp = tuple(D.mul(n, f) if known(n) else None for n, f in zip(fm.spatial, size)) if size else (None,) * nd
    em = LayerEmission([layer], _Map(sp, fm.channels, fm.first).shape(), layout_bound=_layout_bound(fm, nd))
    return _check_context(m, ctx, lctx, em)


# --- Keras initializers held as values (custom layers) -----------------------------------------------------

@call_transform("initializer-config")
def initializer_config(m: MappedCall, ctx) -> cst.BaseExpression | None:
    """An initializer object (``keras.initializers.RandomNormal(stddev=0.02)``, ``tf.random_normal_initializer()``,
    ``tf.zeros_initializer()``, ``keras.initializers.HeNormal()``) → ``KerasInitializer("random_normal",
    stddev=0.02)``: the helper written into the file, which a Keras program uses the ways it used the object:
    called with a shape (``w_init(shape=(n, units), dtype="float32")``, the TensorFlow guide's custom layer) it
    draws from Keras's distribution with these parameters; given to ``add_weight(initializer=...)`` the subclass
    pass reads it as well. The rule's ``options.names`` gives the Keras name of each name it matches."""
    name = _option(m, "names").get(ctx.imports.resolve(m.node.func) if isinstance(m.node, cst.Call) else None)
    if name is None:
        return None
    args = "".join(f", {k}={code(v)}" for k, v in m.kwargs.items())
    return expr(f'{helpers.use(ctx, "KerasInitializer")}("{name}"{args})')


@call_transform("keras-regularizer")
def keras_regularizer(m: MappedCall, ctx) -> cst.BaseExpression | None:
    """Keras regularizers held as values (custom layers): ``keras.regularizers.get(identifier)`` →
    ``KerasRegularizer(identifier)`` (None stays None), ``l2(1e-4)`` / ``L1L2(l1=.., l2=..)`` →
    ``KerasRegularizer("L2", l2=1e-4)``, ``serialize(r)`` → ``KerasRegularizer.serialize(r)``: the helper
    (written into the file) that gives Keras's penalty when called with a weight; add_weight(regularizer=...)
    adds it to the class's regularization_loss() (subclass pass). ``options.names``: the class each
    constructor name makes; ``options.method``: "get" or "serialize"."""
    helper = helpers.use(ctx, "KerasRegularizer")
    keras2 = ", keras2=True" if ctx.version == 2 else ""
    method = _option(m, "method")
    if method == "serialize":
        value = m.kwargs.get("regularizer")
        return None if value is None else expr(f"{helper}.serialize({code(value)})")
    if method == "get":
        value = m.kwargs.get("identifier")
        return None if value is None else expr(f"{helper}({code(value)}{keras2})")
    qual = ctx.imports.resolve(m.node.func) if isinstance(m.node, cst.Call) else None
    name = (_option(m, "names") or {}).get(qual)
    if name is None:
        return None
    config = dict(m.kwargs)
    if qual == "keras.regularizers.l1_l2" and ctx.version == 2:  # Keras 2's function: both factors 0.01
        config = {"l1": expr("0.01"), "l2": expr("0.01"), **config}
    args = "".join(f", {k}={code(v)}" for k, v in config.items())
    return expr(f'{helper}("{name}"{args})')


@call_transform("keras-constraint")
def keras_constraint(m: MappedCall, ctx) -> cst.BaseExpression | None:
    """Keras weight constraints held as values (custom layers): ``keras.constraints.get(identifier)`` →
    ``KerasConstraint(identifier)`` (None stays None), ``max_norm(2)`` / ``MinMaxNorm(...)`` / ``NonNeg()`` /
    ``UnitNorm(axis=...)`` → ``KerasConstraint("MaxNorm", max_value=2)``, ``serialize(c)`` →
    ``KerasConstraint.serialize(c)``: the helper (written into the file) that gives Keras's projection when
    called with a weight; add_weight(constraint=...) records it in the class's apply_constraints() (subclass
    pass), which the loop fwport writes calls after each optimizer.step(). ``options.names``: the class each
    constructor name makes; ``options.method``: "get" or "serialize"."""
    helper = helpers.use(ctx, "KerasConstraint")
    method = _option(m, "method")
    if method == "serialize":
        value = m.kwargs.get("constraint")
        return None if value is None else expr(f"{helper}.serialize({code(value)})")
    if method == "get":
        value = m.kwargs.get("identifier")
        return None if value is None else expr(f"{helper}({code(value)})")
    qual = ctx.imports.resolve(m.node.func) if isinstance(m.node, cst.Call) else None
    name = (_option(m, "names") or {}).get(qual)
    if name is None:
        return None
    args = "".join(f", {k}={code(v)}" for k, v in m.kwargs.items())
    return expr(f'{helper}("{name}"{args})')


@call_transform("keras-initializer")
def keras_initializer(m: MappedCall, ctx) -> cst.BaseExpression | None:
    """``keras.initializers.get(identifier)`` → ``KerasInitializer(identifier)``: the helper (written into
    the file) that draws from Keras's distribution when called with a shape; ``serialize(init)`` →
    ``KerasInitializer(init).get_config()`` (a config the helper reads back)."""
    value = m.kwargs.get("identifier")
    if value is None:
        return None
    call = expr(f"{helpers.use(ctx, 'KerasInitializer')}({code(value)})")
    if _option(m, "method") == "get_config":
        ctx.report(Severity.INFO, "unsupported-construct", "keras.initializers.serialize → KerasInitializer(...)."
                   "get_config(): {'class_name': ..., 'config': {}}, which KerasInitializer reads back (not Keras's "
                   "full config: torch saves weights, not layer configs)", m.node, m.rule)
        return cst.Call(cst.Attribute(call, cst.Name("get_config")))
    return call


# layers whose forward pass changes with trainable=False beyond their weights' gradients: Keras runs a frozen
# BatchNormalization in inference mode (its moving statistics, never updated) even under training=True
# (BatchNormalization.call: ``if training and self.trainable``; Keras 2 since TF 2.0 too)
_FROZEN_RUNS_OTHERWISE = {"batch-normalization"}


def frozen_layer(m: MappedCall, em: LayerEmission, ctx) -> LayerEmission:
    """A layer built with ``trainable=False`` (Direction.frozen_layer): its weight module gets
    ``.requires_grad_(False)`` (which returns the module), exactly Keras's frozen layer for a layer whose forward
    pass does not read the flag; a layer without weights stays as it is (the flag changes nothing there). A
    BatchNormalization is refused: Keras runs it in inference mode whenever it is frozen, which torch's
    ``model.train()`` undoes."""
    rid = m.rule.id
    if rid in _FROZEN_RUNS_OTHERWISE:
        return _failed(m, ctx, "unsupported-argument", "trainable=False: Keras runs a frozen BatchNormalization in "
                       "inference mode (its moving mean and variance, never updated) even under training=True, while "
                       "torch's BatchNorm uses the batch's statistics in model.train(): freeze it with "
                       "requires_grad_(False) and keep it in eval() after each model.train() (or override its train())")
    if not m.rule.weights:
        return em
    if "Lazy" in code(em.modules[em.weight_module]):
        # an uninitialised parameter refuses requires_grad_ (torch raises before the first forward pass)
        return _failed(m, ctx, "unsupported-argument", "trainable=False on a layer whose input size is unknown here "
                       "(a lazy torch module, whose weights do not exist before its first forward pass, when "
                       "requires_grad_(False) cannot reach them): give the model its input shape (keras.Input(shape="
                       "...) or input_shape=), or freeze the module after a first forward pass")
    # Keras 3 leaves a frozen weight's regularizer penalty out of the loss: regularization_loss() counts each term
    # under its weight's requires_grad (regularizers._frozen_guard; the key of passes/regularizers.FROZEN)
    ctx.analyses.setdefault("tf2torch-frozen", "trainable")
    modules = list(em.modules)
    w = modules[em.weight_module]
    modules[em.weight_module] = cst.Call(cst.Attribute(w, cst.Name("requires_grad_")), [cst.Arg(cst.Name("False"))])
    ctx.report(Severity.INFO, "idiom-replaced", "trainable=False → .requires_grad_(False) on the module (its weights "
               "get no gradients and the optimizer leaves them as they are, as Keras's frozen layer)", m.node, m.rule)
    em.modules = modules
    return em


#: the layers whose kernel tfa's WeightNormalization normalises as torch's weight_norm(dim=0) does: the kernel's
#: last axis (Keras) is the output channels of a Dense or a convolution and the input channels of a transposed one,
#: which is dim 0 of the torch module's weight in each case
_WEIGHT_NORM_SHAPES = ("dense", "conv", "conv-transpose")


@shape("weight-normalization")
def weight_normalization(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """tfa.layers.WeightNormalization(layer, data_init=False) → the wrapped layer's torch module(s), its weight module
    under ``nn.utils.parametrizations.weight_norm(..., dim=0)``: tfa's kernel g * v / ||v||, the norm over every axis
    of v but the last (Keras's), one g per output unit of a Dense or a convolution (per input channel of a transposed
    one): torch's dim 0 in each layout. data_init=True (tfa's default) initialises g and the bias from the first
    batch's statistics, in training, on the first call: refused."""
    init = m.extras.get("data_init")
    if init is None or literal_value(init, NOT_LITERAL) is not False:
        shown = f"data_init={code(init)}" if init is not None else "data_init=True (tfa's default)"
        return _failed(m, ctx, "unsupported-argument", f"{shown}: tfa's WeightNormalization then sets g and the bias "
                       "from the statistics of the first batch it sees in training (a data-dependent init, run once "
                       "on the first call), which torch's weight_norm does not: pass data_init=False (g starts at "
                       "||v||, as torch.nn.utils.parametrizations.weight_norm(layer, dim=0) does), or do that "
                       "initialisation by hand")
    inner = m.extras.get("layer")
    q = ctx.imports.resolve(inner.func) if isinstance(inner, cst.Call) and dotted_text(inner.func) else None
    rule = ctx.pack.by_name.get(q) if q else None
    shown = code(inner) if inner is not None else "?"
    if rule is None or rule.kind != "layer" or rule.emit.get("shape") not in _WEIGHT_NORM_SHAPES:
        return _failed(m, ctx, "unsupported-argument", f"layer={m.written('layer') or shown}: only a Dense or a "
                       "convolution (transposed too) written in the call is translated (torch's weight_norm on its "
                       "weight, dim=0); tfa's recurrent case and other layers are not")
    em = translate_layer(inner, rule, ctx, lctx, inner)
    if em.failed or em.functional is not None or not em.modules:
        return LayerEmission([m.call], failed=True) if em.failed else \
            _failed(m, ctx, "unsupported-construct", f"WeightNormalization({shown}): a layer of several inputs")
    w = em.weight_module
    norm = ctx.spell_text("torch.nn.utils.parametrizations.weight_norm")
    em.modules = [*em.modules[:w], expr(f"{norm}({code(em.modules[w])}, dim=0)"), *em.modules[w + 1:]]
    em.variant = None
    ctx.report(Severity.INFO, "idiom-replaced", f"WeightNormalization({shown.split('(')[0]}(...), data_init=False) → "
               "torch.nn.utils.parametrizations.weight_norm(..., dim=0): the weight is g * v / ||v|| over every dim "
               "but the first, as tfa's kernel over every axis but its last", m.node, m.rule)
    return em
