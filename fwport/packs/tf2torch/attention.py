"""Shape functions for attention layers: keras.layers.MultiHeadAttention → the KerasMultiHeadAttention
helper module (helpers.py), which keeps Keras's call signature, variables and einsums, so that its call
sites stay as written; and what the structural passes need to know about such multi-input layers."""
from __future__ import annotations

import libcst as cst

from fwport.core.bind import NOT_LITERAL, literal_value
from fwport.core.engine import LayerContext, LayerEmission, MappedCall, build_call, code, expr
from fwport.core.finding import Severity
from fwport.packs.tf2torch import helpers
from fwport.packs.tf2torch.dims import known, sizes_of
from fwport.core.names import dotted_text
from fwport.packs.tf2torch.layer import _failed, _option
from fwport.packs.tf2torch.ops import _atom_code
from fwport.packs.tf2torch.registry import call_transform, shape

# shape functions of layers called on several tensors (query, value, key, attention_mask ...): the
# call's parameters in Keras's order, and the ones that take tensors
MULTI_INPUT = {"multi-head-attention": ("query", "value", "key", "query_mask", "value_mask", "key_mask",
                                        "attention_mask", "return_attention_scores", "training",
                                        "use_causal_mask"),
               "keras-attention": ("inputs", "mask", "training", "return_attention_scores", "use_causal_mask"),
               "dot": ("inputs",)}
TENSOR_PARAMS = {"query", "value", "key", "query_mask", "value_mask", "key_mask", "attention_mask", "inputs", "mask"}


@shape("multi-head-attention")
def multi_head_attention(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """MultiHeadAttention → ``KerasMultiHeadAttention(num_heads, key_dim, ...)`` (written out in the
    file). Its parameters take Keras's shapes and are created at the first call, so no size needs to be
    known here; the output has the query's shape with the last size ``output_shape`` (else the query's).
    A query of several step axes (keras-io's mobilevit: (batch, patch, patches, features)) attends over all
    of them at once, as Keras's default attention_axes does."""
    in_shape = lctx.in_shape
    if lctx.layout == "nchw":
        return _failed(m, ctx, "unsupported-construct", "MultiHeadAttention in a model converted to channels-first "
                       "would see (batch, features, steps): keep this model channels-last")
    if in_shape is not None and len(in_shape) < 2:
        return _failed(m, ctx, "unsupported-construct", "MultiHeadAttention on a query of shape (batch, "
                       f"{', '.join(map(str, in_shape))}): only (batch, steps..., features) inputs are translated")
    out_node = m.extras.get("output_shape")
    out_dim = None
    if out_node is not None:
        lit = literal_value(out_node, NOT_LITERAL)
        if isinstance(lit, (tuple, list)):
            if len(lit) != 1:
                return _failed(m, ctx, "unsupported-argument", f"output_shape={code(out_node)}: only one output "
                               "size (an int) is translated")
            out_dim = lit[0]
        elif lit is None:
            out_node = None
        else:
            out_dim = sizes_of(lctx).dim(out_node)
    args = [code(m.extras[k]) for k in ("num_heads", "key_dim") if k in m.extras]
    if len(args) != 2:
        return _failed(m, ctx, "unsupported-argument", "MultiHeadAttention needs num_heads and key_dim")
    for key in ("value_dim", "dropout", "use_bias", "output_shape"):
        node = m.extras.get(key)
        if node is not None and not (key == "output_shape" and out_node is None):
            args.append(f"{key}={code(node)}")
    module = expr(f"{helpers.use(ctx, 'KerasMultiHeadAttention')}({', '.join(args)})")
    out = None
    if in_shape is not None:
        last = out_dim if out_node is not None else in_shape[-1]
        out = (*in_shape[:-1], last if known(last) else None)
    return LayerEmission([module], out, 0)


def bind_call(call: cst.Call, shape_fn: str) -> dict[str, cst.Arg] | None:
    """The arguments of a call of a multi-input layer by Keras's parameter name; None when they do not
    bind (a star argument, an unknown keyword, too many)."""
    params = MULTI_INPUT[shape_fn]
    out: dict[str, cst.Arg] = {}
    pos = 0
    for a in call.args:
        if a.star:
            return None
        if a.keyword is None:
            if pos >= len(params):
                return None
            out[params[pos]] = a
            pos += 1
        elif a.keyword.value in params and a.keyword.value not in out:
            out[a.keyword.value] = a
        else:
            return None
    return out


def lazy_layer_norm(m: MappedCall, ctx, lctx: LayerContext, axes: list, out_shape) -> LayerEmission:
    """LayerNormalization whose normalised sizes are known only at the first call (a custom layer's
    ``LayerNormalization()`` on an input of unknown size): the LazyLayerNorm helper (written out in the
    file), an ``nn.LayerNorm`` sized by its first input as Keras builds the layer then. Exact over the
    last axes: ``axis`` must name them with negative indices (-1, or [-2, -1]) where the rank is unknown."""
    if lctx.layout == "nchw":
        return _failed(m, ctx, "shape-unknown", "LayerNorm of unknown size on a feature map converted to "
                       "channels-first: give the model its input shape")
    n = len(axes)
    if sorted(axes) != list(range(-n, 0)):
        return _failed(m, ctx, "shape-unknown", f"LayerNormalization over axis {_axis_text(m)} of an input whose "
                       "rank is unknown here: torch normalises the last axes only; write axis=-1 (or [-2, -1]), "
                       "or give the model its input shape")
    args = [f"{k}={code(v)}" for k, v in m.kwargs.items() if k in ("eps", "elementwise_affine", "bias")]
    if n != 1:
        args.append(f"axes={n}")
    module = expr(f"{helpers.use(ctx, 'LazyLayerNorm')}({', '.join(args)})")
    ctx.report(Severity.INFO, "shape-unknown", "normalised size unknown here: emitted LazyLayerNorm (written out in "
               "the file), an nn.LayerNorm sized by its first input as Keras builds the layer", m.node, m.rule)
    return LayerEmission([module], out_shape, variant=None if n == 1 else "multi-axis")


def _axis_text(m: MappedCall) -> str:
    return code(m.extras["axis"]) if "axis" in m.extras else "-1"


# --- what hand-written transformers (a GPT as Model subclasses) use besides layers ------------------------

@call_transform("initializer-object")
def initializer_object(m: MappedCall, ctx):
    """``keras.initializers.Zeros()`` / ``Ones()`` as an object (``zeros_init = keras.initializers.Zeros()``)
    → torch's in-place initializer function ``nn.init.zeros_`` / ``nn.init.ones_``, torch's form of an
    initializer. Passed to ``add_weight(initializer=...)`` the subclass pass reads the Keras call itself;
    elsewhere the object becomes the function, which a torch user applies to a tensor (calling it with
    a shape, as Keras allows, raises in torch)."""
    return expr(ctx.spell_text(m.rule.emit["target"]))


@shape("dropout")
def dropout(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """Dropout → nn.Dropout; with a ``noise_shape`` (one mask shared along the axes where it is 1, as a
    GPT's classifier head or SpatialDropout write it) → the SharedDropout helper written out in the file:
    a mask of that shape (None: the input's size there) drawn each training call and scaled by
    1 / (1 - rate), Keras's computation at any rank and in either layout of the axes."""
    node = m.extras.get("noise_shape")
    if node is None or literal_value(node, NOT_LITERAL) is None:
        built = build_call(m, ctx)
        return LayerEmission([built] if built is not None else [m.call], lctx.in_shape, failed=built is None)
    if lctx.layout == "nchw":
        return _failed(m, ctx, "unsupported-argument", f"noise_shape={code(node)} in a model converted to "
                       "channels-first: its axes are Keras's channels-last ones; keep this model channels-last")
    rate = m.kwargs.get("p")
    name = helpers.use(ctx, "SharedDropout")
    return LayerEmission([expr(f"{name}({code(rate) if rate is not None else '0.5'}, {code(node)})")], lctx.in_shape)


def _python_number(node: cst.BaseExpression) -> bool:
    """An expression that is a Python number in the translation: a literal, a size (``x.shape[-1]``,
    ``tf.shape(x)[0]``, ``len(x)``), or arithmetic on those. ``.to(dtype)`` does not exist on it."""
    if isinstance(node, (cst.Integer, cst.Float)):
        return True
    if isinstance(node, cst.UnaryOperation):
        return _python_number(node.expression)
    if isinstance(node, cst.BinaryOperation):
        return _python_number(node.left) and _python_number(node.right)
    if isinstance(node, cst.Subscript):
        v = node.value
        return ((isinstance(v, cst.Attribute) and v.attr.value == "shape")
                or (isinstance(v, cst.Call) and (dotted_text(v.func) or "").rsplit(".", 1)[-1] == "shape"))
    return isinstance(node, cst.Call) and dotted_text(node.func) == "len"


@call_transform("cast")
def cast(m: MappedCall, ctx):
    """``tf.cast(x, dtype)`` → ``x.to(dtype)``; on a Python number (a size such as ``v.shape[-1]``, which
    TensorFlow turns into a tensor) → ``torch.tensor(x).to(dtype)``."""
    x, dtype = m.extras.get("x"), m.kwargs.get("dtype")
    if x is None or dtype is None:
        return None
    if _python_number(x):
        return expr(f"{ctx.spell_text('torch.tensor')}({code(x)}).to({code(dtype)})")
    if _stored_arithmetic(x):  # self.total_steps - self.warmup_steps: numbers or tensors, as_tensor takes both
        return expr(f"{ctx.spell_text('torch.as_tensor')}({code(x)}, dtype={code(dtype)})")
    return expr(f"{_atom_code(x)}.to({code(dtype)})")


@call_transform("cast-to")
def cast_to(m: MappedCall, ctx):
    """``tf.compat.v1.to_float(x)`` / ``to_int32`` / ... : ``tf.cast`` to the dtype the rule's
    ``emit.options.dtype`` names (a torch dtype), written as ``cast`` writes it."""
    m.kwargs["dtype"] = expr(ctx.spell_text(_option(m, "dtype")))
    return cast(m, ctx)


def _stored_arithmetic(node: cst.BaseExpression) -> bool:
    """Arithmetic on attributes of ``self`` and numbers (``self.total_steps - self.warmup_steps`` of a learning-rate
    schedule): hyperparameters stored by __init__, Python numbers as often as tensors, which have no ``.to``."""
    def operand(n) -> bool:
        if isinstance(n, cst.BinaryOperation):
            return operand(n.left) and operand(n.right)
        if isinstance(n, cst.UnaryOperation):
            return operand(n.expression)
        return (_python_number(n) or isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name)
                and n.value.value == "self")
    return isinstance(node, cst.BinaryOperation) and operand(node)


@shape("keras-attention")
def keras_attention(m: MappedCall, ctx, lctx: LayerContext) -> LayerEmission:
    """keras.layers.Attention (score_mode="dot") → the KerasAttention helper written out in the file: Keras's
    call ([query, value, key], mask=[query_mask, value_mask]), scores without 1/sqrt(d) (times a learned
    scalar when use_scale), Keras's masking. Its output has the query's steps and the value's features."""
    if lctx.layout == "nchw":
        return _failed(m, ctx, "unsupported-construct", "Attention in a model converted to channels-first would see "
                       "(batch, features, steps): keep this model channels-last")
    mode = literal_value(m.extras["score_mode"], NOT_LITERAL) if "score_mode" in m.extras else "dot"
    if mode != "dot":
        return _failed(m, ctx, "unsupported-argument", f"score_mode={code(m.extras['score_mode'])}: only the "
                       "dot-product scores are translated")
    additive = bool(_option(m, "additive"))
    args = [f"{k}={code(m.extras[k])}" for k in ("use_scale", "dropout") if k in m.extras]
    if additive:  # AdditiveAttention's use_scale defaults to True
        args = [*(["use_scale=True"] if "use_scale" not in m.extras else []), *args, "additive=True"]
    module = expr(f"{helpers.use(ctx, 'KerasAttention')}({', '.join(args)})")
    return LayerEmission([module], None, 0)
