"""Value transforms: one source argument → target keyword(s). Referred to by name from rule files."""
from __future__ import annotations

import libcst as cst

from fwport.bind import NOT_LITERAL, literal_value
from fwport.transform import value_transform


def _number(value: float) -> cst.BaseExpression:
    text = repr(float(value))
    return cst.parse_expression(text)


@value_transform("one-minus")
def one_minus(value, spec, m, ctx):
    """Keras BatchNormalization momentum weighs the old statistic; torch's weighs the new one."""
    lit = literal_value(value, NOT_LITERAL)
    if isinstance(lit, (int, float)) and not isinstance(lit, bool):
        out = _number(round(1.0 - float(lit), 12))
    else:
        out = cst.parse_expression(f"1 - ({cst.Module([]).code_for_node(value)})")
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
