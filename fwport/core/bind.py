"""Binding a call to its source signature: positional arguments become named ones first."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

import libcst as cst

from fwport.core.hooks import TypeTest
from fwport.core.position import render
from fwport.core.rule import Rule

class _NotLiteral:
    """The answer "not a literal": one object, with a fixed repr (a message that quotes it by
    mistake must not print a memory address, which changes from run to run)."""

    def __repr__(self) -> str:
        return "<not a literal>"

    def __reduce__(self) -> str:
        return "_NOT_LITERAL"  # unpickles as this very object


_NOT_LITERAL = _NotLiteral()


@dataclass
class BoundCall:
    """The arguments of one call, keyed by source parameter name (aliases resolved)."""

    values: dict[str, cst.BaseExpression] = field(default_factory=dict)
    spelled: dict[str, str] = field(default_factory=dict)  # parameter -> keyword actually written
    extra: dict[str, cst.BaseExpression] = field(default_factory=dict)  # went to **kwargs
    star_args: list[cst.Arg] = field(default_factory=list)  # *a / **kw we cannot bind
    varargs: list[cst.BaseExpression] = field(default_factory=list)  # positionals bound to *args
    starred: frozenset[int] = frozenset()  # indices in varargs written `*x` (unpacked into *args)
    error: str | None = None

    def literal(self, name: str, default=_NOT_LITERAL):
        """The Python value of an argument written as a literal, else ``default``."""
        node = self.values.get(name)
        if node is None:
            return default
        return literal_value(node, default)

    def has(self, name: str) -> bool:
        return name in self.values

    def vararg_args(self) -> list[cst.Arg]:
        """The arguments bound to ``*args``, as written: ``*x`` keeps its star."""
        return [cst.Arg(v, star="*" if i in self.starred else "") for i, v in enumerate(self.varargs)]


#: names and expressions that are never literals, told from their node type without rendering them
_NEVER_LITERAL = (cst.Attribute, cst.Subscript, cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp,
                  cst.GeneratorExp, cst.Await, cst.Yield, cst.IfExp, cst.NamedExpr, cst.Comparison, cst.BooleanOperation,
                  cst.FormattedString)
_IS_NEVER_LITERAL = TypeTest(*_NEVER_LITERAL)
_NAMED_CONSTANTS = {"True": True, "False": False, "None": None}
_TOKENS = frozenset({cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString})


def call_argument(call: cst.Call, keyword: str, position: int | None = None, *,
                  star_stops: bool = False) -> cst.BaseExpression | None:
    """The argument of a source call given as ``keyword=`` or, where ``position`` is not None, at that position;
    None where it is not given. ``star_stops``: None as soon as a ``*args`` / ``**kwargs`` comes first (after one
    the positions are unknown); otherwise a starred argument is only never the one returned."""
    for i, a in enumerate(call.args):
        if a.star and star_stops:
            return None
        if (a.keyword is not None and a.keyword.value == keyword) or (
                a.keyword is None and not a.star and position is not None and i == position):
            return a.value
    return None


def literal_value(node: cst.BaseExpression, default=_NOT_LITERAL):
    if _IS_NEVER_LITERAL[node.__class__]:
        return default
    if type(node) is cst.Call and not (type(node.func) is cst.Name and node.func.value == "set"):
        return default  # (`set()` is one)
    if type(node) is cst.Name:
        return _NAMED_CONSTANTS.get(node.value, default)
    if type(node) in _TOKENS:  # its own text, parentheses aside
        node_text = node.value
        try:  # without a parse: int() in base 0 reads a literal as Python does (0x1f, 1_000), float() a
            # decimal one, rounding as Python does; past int()'s digit limit, literal_eval decides as before
            if type(node) is cst.Integer:
                return int(node_text, 0)
            if type(node) is cst.Float:
                return float(node_text)
        except ValueError:
            pass
        if type(node) is cst.SimpleString:
            plain = _plain_string(node_text)
            if plain is not None:
                return plain
    else:
        node_text = render(node)
    try:
        return ast.literal_eval(node_text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return default


NOT_LITERAL = _NOT_LITERAL


def _plain_string(text: str) -> str | None:
    """The value of a string token with no prefix and nothing to decode (no backslash, carriage return
    or NUL): the text between its quotes, which is what ``ast.literal_eval`` gives; None otherwise
    (most strings in a program are such names, paths, modes: a parse each saved)."""
    if "\\" in text or "\r" in text or "\x00" in text:
        return None
    quote = text[:3] if text[:3] in ('"""', "'''") else text[:1]
    if quote not in ('"', "'", '"""', "'''") or len(text) < 2 * len(quote) or not text.endswith(quote):
        return None
    return text[len(quote):len(text) - len(quote)]


def bind_call(call: cst.Call, rule: Rule) -> BoundCall:
    """Bind ``call``'s arguments to ``rule``'s source signature, as Python would."""
    out = BoundCall()
    positional = [p for p in rule.params if p.kind == "positional"]
    has_varargs = any(p.kind == "var_positional" for p in rule.params)
    has_varkw = any(p.kind == "var_keyword" for p in rule.params)
    known = {p.name for p in rule.params if p.kind in ("positional", "keyword")}
    var_name = next((p.name for p in rule.params if p.kind == "var_positional"), None)
    i = 0
    starred = set()
    for arg in call.args:
        if arg.star == "*" and has_varargs and i >= len(positional) and not out.star_args:
            # every named positional is already given, so `*x` can only feed *args (nn.Sequential(*layers))
            starred.add(len(out.varargs))
            out.varargs.append(arg.value)
            continue
        if arg.star:
            out.star_args.append(arg)
            continue
        if arg.keyword is None:
            if i < len(positional):
                out.values[positional[i].name] = arg.value
                out.spelled[positional[i].name] = positional[i].name
                i += 1
            elif has_varargs:
                out.varargs.append(arg.value)
            else:
                out.error = f"too many positional arguments ({i + 1} given, the signature takes {len(positional)})"
            continue
        kw = arg.keyword.value
        name = kw
        if kw not in known:
            spec = rule.arg_for_keyword(kw)
            if spec is not None:
                name = spec.name
        if kw == var_name and name not in known and not out.varargs:
            # PyTorch's factories take their sizes as *size or as one sequence, size=(2, 3): that sequence
            # is the one positional it stands for (torch.zeros((2, 3)))
            out.varargs.append(arg.value)
            continue
        if name in known:
            if name in out.values:
                out.error = f"argument {name!r} given twice (as {out.spelled[name]!r} and {kw!r})"
            out.values[name] = arg.value
            out.spelled[name] = kw
        elif has_varkw:
            out.extra[kw] = arg.value
        else:
            out.error = f"unexpected keyword argument {kw!r}"
    out.starred = frozenset(starred)
    if out.error is None and not out.star_args:  # Python would raise TypeError: refuse, as written
        missing = [p.name for p in rule.params if p.kind in ("positional", "keyword") and p.default is None
                   and p.name not in out.values]
        if missing:
            out.error = f"missing required argument {missing[0]!r}"
    return out


def bind_def(call: cst.Call, fn: cst.FunctionDef, skip: int = 0) -> dict[str, cst.BaseExpression] | None:
    """The argument each parameter of the source function ``fn`` gets at ``call`` (a default where the
    call gives none; ``skip``: leading parameters the call does not spell, ``self``); None where a starred
    argument hides which, or the call gives more positionals or unknown keywords than ``fn`` takes."""
    if any(a.star for a in call.args):
        return None
    p = fn.params
    positional = [*p.posonly_params, *p.params][skip:]
    given = [a for a in call.args if a.keyword is None]
    if len(given) > len(positional) and not isinstance(p.star_arg, cst.Param):
        return None
    out = {q.name.value: a.value for q, a in zip(positional, given)}
    names = {q.name.value for q in (*p.params, *p.kwonly_params)}
    for a in call.args:
        if a.keyword is not None:
            if a.keyword.value not in names and not isinstance(p.star_kwarg, cst.Param):
                return None
            out[a.keyword.value] = a.value
    for q in (*positional, *p.kwonly_params):
        if q.name.value not in out and q.default is not None:
            out[q.name.value] = q.default
    return out
