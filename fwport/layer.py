"""Shape functions: how each Keras layer becomes torch module(s) given what is known of its input.

A shape function receives the mapped call (target keywords already renamed/transformed by the
rule's ``[args]``), the file context and a :class:`LayerContext`; it returns a
:class:`LayerEmission`: the module expressions, the output shape (source layout, no batch axis),
the weight-map variant and its symbols. Keras layer activations (``activation=``) become extra
modules after the layer.
"""
from __future__ import annotations

import libcst as cst

from fwport.bind import NOT_LITERAL, literal_value
from fwport.engine import LayerContext, LayerEmission, MappedCall, build_call, code, expr
from fwport.finding import Severity
from fwport.names import dotted_text
from fwport.transform import shape, value_transform

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
}
_KERAS3_ONLY = {"hard_sigmoid": ("torch.nn.Hardsigmoid", "")}  # Keras 2's is clip(0.2x + 0.5, 0, 1)
_IDENTITY = {"linear", None}
_ACTIVATION_PREFIXES = ("keras.activations.", "tensorflow.nn.", "tensorflow.math.", "tensorflow.")


def activation_name(value: cst.BaseExpression, ctx) -> str | None | object:
    """The activation a Keras ``activation=`` argument names, or NOT_LITERAL if unknowable."""
    lit = literal_value(value, NOT_LITERAL)
    if lit is None or isinstance(lit, str):
        return lit
    q = ctx.imports.resolve(value) if dotted_text(value) else None
    if q:
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
    table = dict(_ACTIVATIONS)
    if ctx.keras_version == 3:
        table.update(_KERAS3_ONLY)
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


def input_shape_from_kwargs(m: MappedCall) -> tuple | None:
    """``input_shape=`` / ``batch_input_shape=`` / ``input_dim=`` given to a layer, as a shape tuple."""
    if "input_shape" in m.extras:
        v = literal_value(m.extras["input_shape"], None)
        return tuple(v) if isinstance(v, (tuple, list)) else None
    if "batch_input_shape" in m.extras:
        v = literal_value(m.extras["batch_input_shape"], None)
        return tuple(v[1:]) if isinstance(v, (tuple, list)) else None
    if "input_dim" in m.extras:
        v = literal_value(m.extras["input_dim"], None)
        return (v,) if isinstance(v, int) else None
    return None


@shape("dense")
def dense(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    in_shape = input_shape_from_kwargs(m) or lctx.in_shape
    units = m.literal("out_features", None)
    if lctx.layout == "nchw" and in_shape is not None and len(in_shape) > 1:
        m.fail(ctx, "unsupported-construct", "Dense on a channels-first feature map acts on the channel axis "
               "in Keras; flatten or pool first, or translate this model without the layout change")
        return LayerEmission([m.call], failed=True)
    in_features = in_shape[-1] if in_shape else None
    if isinstance(in_features, int):
        m.kwargs = {"in_features": expr(str(in_features)), **m.kwargs}
        layer = build_call(m, ctx)
    else:
        layer = build_call(m, ctx, target=m.rule.emit["lazy"], positional=["out_features"])
        ctx.report(Severity.INFO, "shape-unknown", "input size unknown here: emitted nn.LazyLinear, which "
                   "infers it on the first forward pass", m.node, m.rule)
    acts = activation_modules(m, ctx)
    if layer is None or acts is None:
        return LayerEmission([m.call], failed=True)
    out_shape = (*in_shape[:-1], units) if in_shape is not None and isinstance(units, int) else None
    variant = None
    symbols: dict[str, int] = {}
    if lctx.flatten_of is not None:
        variant = "after-flatten"
        h, w, c = lctx.flatten_of
        symbols = {"H": h, "W": w, "C": c, "O": units} if isinstance(units, int) else {"H": h, "W": w, "C": c}
    return LayerEmission([layer, *acts], out_shape, 0, variant, symbols)
