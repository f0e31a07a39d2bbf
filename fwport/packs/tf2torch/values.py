"""Value transforms: one source argument → target keyword(s). Referred to by name from rule files."""
from __future__ import annotations

import libcst as cst

from fwport.core.bind import NOT_LITERAL, literal_value
from fwport.core.engine import expr
from fwport.core.position import render
from fwport.packs.tf2torch import helpers
from fwport.packs.tf2torch.registry import value_transform


def _number(value: float) -> cst.BaseExpression:
    return expr(repr(float(value)))


@value_transform("one-minus")
def one_minus(value, spec, m, ctx):
    """Keras BatchNormalization momentum weighs the old statistic; torch's weighs the new one."""
    lit = literal_value(value, NOT_LITERAL)
    if isinstance(lit, (int, float)) and not isinstance(lit, bool):
        out = _number(round(1.0 - float(lit), 12))
    else:
        out = cst.parse_expression(f"1 - ({render(value)})")
    m.kwargs[spec.to or spec.name] = out


@value_transform("dim")
def dim(value, spec, m, ctx):
    """An ``axis`` argument: an int stays, a list/tuple of ints becomes a tuple (torch's dim)."""
    lit = literal_value(value, NOT_LITERAL)
    if lit is None:
        return  # reduce over everything: torch's default when dim is omitted
    if isinstance(lit, list):
        value = cst.parse_expression(repr(tuple(lit)))
    m.kwargs[spec.to or "dim"] = value


@value_transform("keep")
def keep(value, spec, m, ctx):
    """Pass the value through under ``to`` (or the same name) for a call transform to use."""
    m.extras[spec.name] = value


# --- tf.* / keras.ops.* arguments -----------------------------------------------------------------

def _code(node: cst.CSTNode) -> str:
    return render(node)


def torch_dtype(value: cst.BaseExpression, m, ctx) -> cst.BaseExpression | None:
    """A dtype argument as a torch dtype expression, or None (with an error finding on ``m``).

    ``"float32"`` (a string) goes through the pack's dtype constant rules (``tensorflow.float32``);
    ``tf.float32`` has already become ``torch.float32`` by the time the call is mapped (the rule
    pass rewrites inner expressions first); any other expression (``x.dtype``) is kept as written.
    """
    lit = literal_value(value, NOT_LITERAL)
    if isinstance(lit, str):
        rule = ctx.pack.by_name.get(f"tensorflow.{lit}")
        if rule is None or rule.kind != "constant":
            m.fail(ctx, "unsupported-argument", f"dtype {lit!r} has no torch equivalent")
            return None
        return ctx.spell(rule.emit["target"])
    if lit is None:
        return None
    q = ctx.imports.resolve(value)
    if q is not None and q.split(".")[0] in ("tensorflow", "keras", "tf_keras"):
        m.fail(ctx, "unsupported-argument", f"dtype {_code(value)} has no torch equivalent")
        return None
    return value


@value_transform("dtype")
def dtype(value, spec, m, ctx):
    """A TensorFlow/Keras dtype (``tf.float32`` or ``"float32"``) → the torch dtype."""
    out = torch_dtype(value, m, ctx)
    if out is not None:
        m.kwargs[spec.to or "dtype"] = out


@value_transform("dtype-or-string")
def dtype_or_string(value, spec, m, ctx):
    """:func:`dtype`, except that ``tf.string`` / ``"string"`` sets ``m.extras["string"]`` for the call transform
    (tf.constant's: a string constant is a NumPy object array, ops.py) instead of failing."""
    lit = literal_value(value, NOT_LITERAL)
    if lit == "string" or (not isinstance(lit, str) and ctx.imports.resolve(value) in ("tensorflow.string",
                                                                                      "tensorflow.dtypes.string")):
        m.extras["string"] = True
        return
    dtype(value, spec, m, ctx)


@value_transform("axis-or-last")
def axis_or_last(value, spec, m, ctx):
    """An ``axis`` whose None means the last axis (tf.nn.softmax): torch needs it spelled."""
    lit = literal_value(value, NOT_LITERAL)
    m.kwargs[spec.to or "dim"] = cst.parse_expression("-1") if lit is None else value


@value_transform("axis-or-first")
def axis_or_first(value, spec, m, ctx):
    """An ``axis`` whose None means axis 0 (tf.argmax): torch's None would flatten instead."""
    lit = literal_value(value, NOT_LITERAL)
    m.kwargs[spec.to or "dim"] = cst.parse_expression("0") if lit is None else value


@value_transform("gelu-approximate")
def gelu_approximate(value, spec, m, ctx):
    """``approximate=True`` (the tanh form) → ``approximate='tanh'``; False is torch's default."""
    lit = literal_value(value, NOT_LITERAL)
    if lit is False:
        return
    if lit is True:
        m.kwargs["approximate"] = cst.parse_expression("'tanh'")
    else:
        m.kwargs["approximate"] = cst.parse_expression(f"'tanh' if {_code(value)} else 'none'")


@value_transform("keepdim")
def keepdim(value, spec, m, ctx):
    """``keepdims``: False is torch's default and is not written."""
    if literal_value(value, NOT_LITERAL) is False:
        return
    m.kwargs[spec.to or "keepdim"] = value


@value_transform("index-dtype")
def index_dtype(value, spec, m, ctx):
    """An index ``output_type``: torch's argmax/argmin always return int64, so any other dtype
    (tf.int32) becomes a cast of the result, ``.to(torch.int32)``, which the ``call`` transform
    applies (the indices are exact in either dtype)."""
    out = torch_dtype(value, m, ctx)
    if out is None or _code(out).replace(" ", "") == "torch.int64":
        return
    m.extras["result_dtype"] = out


@value_transform("sort-direction")
def sort_direction(value, spec, m, ctx):
    """``direction='DESCENDING'`` → ``descending=True``."""
    lit = literal_value(value, NOT_LITERAL)
    if lit == "ASCENDING":
        return
    if lit == "DESCENDING":
        m.kwargs[spec.to or "descending"] = cst.parse_expression("True")
        return
    m.fail(ctx, "unsupported-argument", f"direction={_code(value)}: write 'ASCENDING' or 'DESCENDING' literally")


@value_transform("resize-method")
def resize_method(value, spec, m, ctx):
    """tf.image.resize's ``method``: "bilinear" / "nearest" (strings, or ResizeMethod.BILINEAR /
    NEAREST_NEIGHBOR, which their constant rules make the strings) — the two torch computes exactly; for
    tf.image.resize itself (the image-resize call transform) also "bicubic" and "area", which it writes out."""
    lit = literal_value(value, NOT_LITERAL)
    if lit in ("bilinear", "nearest"):
        if lit == "nearest":
            m.kwargs[spec.to or "method"] = value
        return
    if lit in ("bicubic", "area") and m.rule.emit.get("transform") == "image-resize":
        m.extras["resize_kernel"] = lit  # tf.image.resize: TensorFlow's kernel written out (image.py)
        return
    if m.rule.emit.get("transform") == "image-resize":
        m.fail(ctx, "unsupported-argument", f"method={_code(value)}: bilinear, nearest, bicubic and area (written as "
               "literals) are translated; lanczos3, lanczos5, gaussian and mitchellcubic (TensorFlow's "
               "scale_and_translate kernels) are not")
        return
    m.fail(ctx, "unsupported-argument", f"method={_code(value)}: only bilinear and nearest are translated (torch's "
           "bicubic uses another kernel (a=-0.75 against TensorFlow's -0.5); area, lanczos, gaussian and "
           "mitchellcubic have no exact torch counterpart)")


@value_transform("seeded-generator")
def seeded_generator(value, spec, m, ctx):
    """An op-level ``seed=s`` → ``generator=seeded_generator(s, "<the torch function>")``: one torch.Generator
    per operation and seed, seeded once (the helper), as TensorFlow keeps one stream per op and seed."""
    if literal_value(value, NOT_LITERAL) is None:
        return  # seed=None: the global generator, torch's default
    name = helpers.use(ctx, "seeded_generator")
    op = m.rule.emit["target"]
    m.kwargs[spec.to or "generator"] = cst.parse_expression(f'{name}({render(value)}, "{op}")')


@value_transform("stateless-generator")
def stateless_generator(value, spec, m, ctx):
    """A stateless op's ``seed=(a, b)`` → ``generator=stateless_generator((a, b))``: a torch.Generator seeded
    afresh from the pair at each call (the helper), so one seed gives the same draws every time, as in
    TensorFlow (other values than TensorFlow's)."""
    if literal_value(value, NOT_LITERAL) is None:
        return
    name = helpers.use(ctx, "stateless_generator")
    m.kwargs[spec.to or "generator"] = cst.parse_expression(f"{name}({render(value)})")
