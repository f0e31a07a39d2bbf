"""Rendering of the node types translation renders most, at a fraction of libcst's cost.

libcst renders a node through ``_codegen`` → ``_codegen_impl`` with a generator-based context
manager around most nodes (``_parenthesize``, ``record_syntactic_position``), which is most of what
a render costs. :func:`emit` writes the same tokens, in the same order, for the node types listed
in ``_EMIT`` (exact types: a subclass is libcst's to render), each function the counterpart of that
type's ``_codegen_impl`` in libcst 1.x without the position bookkeeping; any other node is rendered
by libcst itself (its children then by libcst too). The tokens are libcst's, one for one.

A state whose ``starts`` is a dict (``fwport.core.position._Marks``) also gets, for every node whose
``_codegen_impl`` calls ``record_syntactic_position``, the index of the token it starts at, noted
where libcst's call would note it, and in ``spans`` (start, end) for the node types in its
``spanned``; a plain state has ``starts = None``. ``tests/test_codegen.py`` checks tokens, starts
and spans against libcst's on the fixtures.

A whitespace field (``whitespace_before``, ...) that holds a ``SimpleWhitespace``, as most do, has its
text appended where it is met (``w.__class__ is _SIMPLE``), without ``emit``'s look-up and call (a
tenth of a render); a ``ParenthesizedWhitespace`` goes through ``emit``. So do the commonest
children of the commonest nodes: an unparenthesized ``Name`` as an attribute's value or name, a
call's function or an argument's value (its mark and its text), a line's ``Newline``.
"""
from __future__ import annotations

from typing import Callable, Sequence

import libcst as cst
from libcst._nodes.op import _BaseOneTokenOp

_DEFAULT = cst.MaybeSentinel.DEFAULT
_SIMPLE = cst.SimpleWhitespace
_NAME = cst.Name
_NEWLINE = cst.Newline


def emit(node: cst.CSTNode, state) -> None:
    """Append ``node``'s tokens to ``state.tokens`` (and its marks, for a state that keeps them)."""
    f = _EMIT.get(node.__class__)
    if f is None:
        node._codegen(state)
    else:
        f(node, state)


def _lpar(node, state) -> None:
    for p in node.lpar:
        emit(p, state)


def _rpar(node, state) -> None:
    for p in node.rpar:
        emit(p, state)


def _left_paren(node: cst.LeftParen, state) -> None:
    state.tokens.append("(")
    w = node.whitespace_after
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)


def _right_paren(node: cst.RightParen, state) -> None:
    w = node.whitespace_before
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    state.tokens.append(")")


def _value(node, state) -> None:  # SimpleWhitespace, Comment
    state.tokens.append(node.value)


def _atom(node, state) -> None:  # Name, Integer, Float, SimpleString
    if node.lpar:
        _lpar(node, state)
        if state.starts is not None:
            state.starts[id(node)] = len(state.tokens)
        state.tokens.append(node.value)
        _rpar(node, state)
    else:
        if state.starts is not None:
            state.starts[id(node)] = len(state.tokens)
        state.tokens.append(node.value)


def _mark(node, state) -> None:
    """Where libcst's ``record_syntactic_position(node)`` opens (the node's start)."""
    if state.starts is not None:
        state.starts[id(node)] = len(state.tokens)


def _span(node, state, start: int) -> None:
    """Where it closes, for the node types whose line span is kept."""
    if state.starts is not None and node.__class__ in state.spanned:
        state.spans[id(node)] = (start, len(state.tokens))


def _newline(node: cst.Newline, state) -> None:
    value = node.value
    state.tokens.append(state.default_newline if value is None else value)


def _trailing_whitespace(node: cst.TrailingWhitespace, state) -> None:
    w = node.whitespace
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    if node.comment is not None:
        emit(node.comment, state)
    n = node.newline
    if n.__class__ is _NEWLINE:
        state.tokens.append(state.default_newline if n.value is None else n.value)
    else:
        emit(n, state)


def _empty_line(node: cst.EmptyLine, state) -> None:
    if node.indent:
        state.tokens.extend(state.indent_tokens)
    w = node.whitespace
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    if node.comment is not None:
        emit(node.comment, state)
    emit(node.newline, state)


def _one_token_op(node, state) -> None:  # Comma, Dot, Add, Equal, ...
    w = node.whitespace_before
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    if state.starts is not None:
        state.starts[id(node)] = len(state.tokens)
    state.tokens.append(node._get_token())
    w = node.whitespace_after
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)


def _unary_op(node, state) -> None:  # Minus, Plus, BitInvert, Not
    state.tokens.append(node._get_token())
    w = node.whitespace_after
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)


def _parenthesized_whitespace(node: cst.ParenthesizedWhitespace, state) -> None:
    emit(node.first_line, state)
    for line in node.empty_lines:
        emit(line, state)
    if node.indent:
        state.tokens.extend(state.indent_tokens)
    emit(node.last_line, state)


def _ellipsis(node: cst.Ellipsis, state) -> None:
    _lpar(node, state)
    _mark(node, state)
    state.tokens.append("...")
    _rpar(node, state)


def _slice(node: cst.Slice, state) -> None:
    if node.lower is not None:
        emit(node.lower, state)
    emit(node.first_colon, state)
    if node.upper is not None:
        emit(node.upper, state)
    second_colon = node.second_colon
    if second_colon is _DEFAULT and node.step is not None:
        state.tokens.append(":")
    elif second_colon.__class__ is cst.Colon:
        emit(second_colon, state)
    if node.step is not None:
        emit(node.step, state)


def _if_exp(node: cst.IfExp, state) -> None:
    _lpar(node, state)
    _mark(node, state)
    tokens = state.tokens
    emit(node.body, state)
    w = node.whitespace_before_if
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    tokens.append("if")
    w = node.whitespace_after_if
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    emit(node.test, state)
    w = node.whitespace_before_else
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    tokens.append("else")
    w = node.whitespace_after_else
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    emit(node.orelse, state)
    _rpar(node, state)


def _attribute(node: cst.Attribute, state) -> None:
    _lpar(node, state)
    _mark(node, state)
    v = node.value
    if v.__class__ is _NAME and not v.lpar:
        if state.starts is not None:
            state.starts[id(v)] = len(state.tokens)
        state.tokens.append(v.value)
    else:
        emit(v, state)
    emit(node.dot, state)
    v = node.attr
    if v.__class__ is _NAME and not v.lpar:
        if state.starts is not None:
            state.starts[id(v)] = len(state.tokens)
        state.tokens.append(v.value)
    else:
        emit(v, state)
    _rpar(node, state)


def _call(node: cst.Call, state) -> None:
    _lpar(node, state)
    _mark(node, state)
    v = node.func
    if v.__class__ is _NAME and not v.lpar:
        if state.starts is not None:
            state.starts[id(v)] = len(state.tokens)
        state.tokens.append(v.value)
    else:
        emit(v, state)
    w = node.whitespace_after_func
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    state.tokens.append("(")
    w = node.whitespace_before_args
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    args = node.args
    last = len(args) - 1
    for i, arg in enumerate(args):
        if arg.__class__ is cst.Arg:
            _arg(arg, state, i != last)
        else:
            arg._codegen(state, default_comma=(i != last))
    state.tokens.append(")")
    _rpar(node, state)


def _arg(node: cst.Arg, state, default_comma: bool = False) -> None:
    tokens = state.tokens
    start = len(tokens)
    _mark(node, state)
    tokens.append(node.star)
    w = node.whitespace_after_star
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    keyword = node.keyword
    if keyword is not None:
        emit(keyword, state)
    equal = node.equal
    if equal is _DEFAULT and keyword is not None:
        tokens.append(" = ")
    elif equal.__class__ is cst.AssignEqual:
        emit(equal, state)
    v = node.value
    if v.__class__ is _NAME and not v.lpar:
        if state.starts is not None:
            state.starts[id(v)] = len(state.tokens)
        state.tokens.append(v.value)
    else:
        emit(v, state)
    _span(node, state, start)
    comma = node.comma
    if comma is _DEFAULT and default_comma:
        tokens.append(", ")
    elif comma.__class__ is cst.Comma:
        emit(comma, state)
    w = node.whitespace_after_arg
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)


def _comma_of(node, state, default_comma: bool, default_comma_whitespace: bool) -> None:
    """BaseElement._codegen_comma."""
    comma = node.comma
    if comma is _DEFAULT and default_comma:
        state.tokens.append(", " if default_comma_whitespace else ",")
    elif comma.__class__ is cst.Comma:
        emit(comma, state)


def _element(node: cst.Element, state, default_comma: bool = False, default_comma_whitespace: bool = False) -> None:
    start = len(state.tokens)
    _mark(node, state)
    emit(node.value, state)
    _span(node, state, start)
    _comma_of(node, state, default_comma, default_comma_whitespace)


def _elements(elements, state, single_comma: bool) -> None:
    last = len(elements) - 1
    if single_comma and last == 0:  # a one-element tuple keeps its comma, without a space
        el = elements[0]
        if el.__class__ is cst.Element:
            _element(el, state, True, False)
        else:
            el._codegen(state, default_comma=True, default_comma_whitespace=False)
        return
    for i, el in enumerate(elements):
        if el.__class__ is cst.Element:
            _element(el, state, i < last, True)
        else:
            el._codegen(state, default_comma=(i < last), default_comma_whitespace=True)


def _list(node: cst.List, state) -> None:
    _lpar(node, state)
    _mark(node, state)
    emit(node.lbracket, state)
    _elements(node.elements, state, False)
    emit(node.rbracket, state)
    _rpar(node, state)


def _tuple(node: cst.Tuple, state) -> None:
    _lpar(node, state)
    _mark(node, state)
    _elements(node.elements, state, True)
    _rpar(node, state)


def _bracket(node, state) -> None:  # LeftSquareBracket, LeftCurlyBrace
    state.tokens.append(_BRACKETS[node.__class__])
    w = node.whitespace_after
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)


def _closing_bracket(node, state) -> None:  # RightSquareBracket, RightCurlyBrace
    w = node.whitespace_before
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    state.tokens.append(_BRACKETS[node.__class__])


_BRACKETS = {cst.LeftSquareBracket: "[", cst.RightSquareBracket: "]", cst.LeftCurlyBrace: "{",
             cst.RightCurlyBrace: "}"}


def _subscript(node: cst.Subscript, state) -> None:
    _lpar(node, state)
    _mark(node, state)
    emit(node.value, state)
    w = node.whitespace_after_value
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    emit(node.lbracket, state)
    slices = node.slice
    last = len(slices) - 1
    for i, s in enumerate(slices):
        if s.__class__ is cst.SubscriptElement:
            _mark(s, state)
            emit(s.slice, state)
            comma = s.comma
            if comma is _DEFAULT and i != last:
                state.tokens.append(", ")
            elif comma.__class__ is cst.Comma:
                emit(comma, state)
        else:
            s._codegen(state, default_comma=(i != last))
    emit(node.rbracket, state)
    _rpar(node, state)


def _index(node: cst.Index, state) -> None:
    if node.star is not None:
        state.tokens.append(node.star)
    if node.whitespace_after_star is not None:
        w = node.whitespace_after_star
        if w.__class__ is _SIMPLE:
            state.tokens.append(w.value)
        else:
            emit(w, state)
    emit(node.value, state)


def _binary(node: cst.BinaryOperation, state) -> None:
    _lpar(node, state)
    _mark(node, state)
    emit(node.left, state)
    emit(node.operator, state)
    emit(node.right, state)
    _rpar(node, state)


def _unary(node: cst.UnaryOperation, state) -> None:
    _lpar(node, state)
    _mark(node, state)
    emit(node.operator, state)
    emit(node.expression, state)
    _rpar(node, state)


def _comparison(node: cst.Comparison, state) -> None:
    _lpar(node, state)
    _mark(node, state)
    emit(node.left, state)
    for c in node.comparisons:
        emit(c, state)
    _rpar(node, state)


def _comparison_target(node: cst.ComparisonTarget, state) -> None:
    emit(node.operator, state)
    emit(node.comparator, state)


def _dict(node: cst.Dict, state) -> None:
    _lpar(node, state)
    _mark(node, state)
    emit(node.lbrace, state)
    elements = node.elements
    last = len(elements) - 1
    for i, el in enumerate(elements):
        if el.__class__ is cst.DictElement:
            _mark(el, state)
            emit(el.key, state)
            emit(el.whitespace_before_colon, state)
            state.tokens.append(":")
            emit(el.whitespace_after_colon, state)
            emit(el.value, state)
            _comma_of(el, state, i < last, True)
        else:
            el._codegen(state, default_comma=(i < last), default_comma_whitespace=True)
    emit(node.rbrace, state)
    _rpar(node, state)


# --- statements ------------------------------------------------------------------------------------

def _semicolon(node, state, default_semicolon: bool) -> None:
    semicolon = node.semicolon
    if semicolon is _DEFAULT:
        if default_semicolon:
            state.tokens.append("; ")
    elif semicolon.__class__ is cst.Semicolon:
        emit(semicolon, state)


def _expr(node: cst.Expr, state, default_semicolon: bool = False) -> None:
    _mark(node, state)
    emit(node.value, state)
    _semicolon(node, state, default_semicolon)


def _assign(node: cst.Assign, state, default_semicolon: bool = False) -> None:
    _mark(node, state)
    for t in node.targets:
        if t.__class__ is cst.AssignTarget:
            _mark(t, state)
            emit(t.target, state)
            emit(t.whitespace_before_equal, state)
            state.tokens.append("=")
            emit(t.whitespace_after_equal, state)
        else:
            t._codegen(state)
    emit(node.value, state)
    _semicolon(node, state, default_semicolon)


def _aug_assign(node: cst.AugAssign, state, default_semicolon: bool = False) -> None:
    _mark(node, state)
    emit(node.target, state)
    emit(node.operator, state)
    emit(node.value, state)
    _semicolon(node, state, default_semicolon)


def _return(node: cst.Return, state, default_semicolon: bool = False) -> None:
    _mark(node, state)
    state.tokens.append("return")
    ws = node.whitespace_after_return
    value = node.value
    if ws is _DEFAULT:
        if value is not None:
            state.tokens.append(" ")
    else:
        emit(ws, state)
    if value is not None:
        emit(value, state)
    _semicolon(node, state, default_semicolon)


def _pass(node: cst.Pass, state, default_semicolon: bool = False) -> None:
    _mark(node, state)
    state.tokens.append("pass")
    _semicolon(node, state, default_semicolon)


def _import_alias(node: cst.ImportAlias, state, default_comma: bool = False) -> None:
    _mark(node, state)
    emit(node.name, state)
    if node.asname is not None:
        emit(node.asname, state)
    comma = node.comma
    if comma is _DEFAULT and default_comma:
        state.tokens.append(", ")
    elif comma.__class__ is cst.Comma:
        emit(comma, state)


def _import_names(names, state) -> None:
    last = len(names) - 1
    for i, name in enumerate(names):
        if name.__class__ is cst.ImportAlias:
            _import_alias(name, state, i != last)
        else:
            name._codegen(state, default_comma=(i != last))


def _import(node: cst.Import, state, default_semicolon: bool = False) -> None:
    _mark(node, state)
    state.tokens.append("import")
    w = node.whitespace_after_import
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    _import_names(node.names, state)
    _semicolon(node, state, default_semicolon)


def _import_from(node: cst.ImportFrom, state, default_semicolon: bool = False) -> None:
    _mark(node, state)
    tokens = state.tokens
    tokens.append("from")
    w = node.whitespace_after_from
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    for dot in node.relative:
        emit(dot, state)
    if node.module is not None:
        emit(node.module, state)
    w = node.whitespace_before_import
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    tokens.append("import")
    w = node.whitespace_after_import
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    if node.lpar is not None:
        emit(node.lpar, state)
    names = node.names
    if isinstance(names, Sequence):
        _import_names(names, state)
    if names.__class__ is cst.ImportStar:
        emit(names, state)
    if node.rpar is not None:
        emit(node.rpar, state)
    _semicolon(node, state, default_semicolon)


def _as_name(node: cst.AsName, state) -> None:
    w = node.whitespace_before_as
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    state.tokens.append("as")
    w = node.whitespace_after_as
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    emit(node.name, state)


_SMALL: dict[type, Callable] = {cst.Expr: _expr, cst.Assign: _assign, cst.AugAssign: _aug_assign,
                                cst.Return: _return, cst.Pass: _pass, cst.Import: _import, cst.ImportFrom: _import_from}


def _simple_statement_line(node: cst.SimpleStatementLine, state) -> None:
    for ll in node.leading_lines:
        emit(ll, state)
    state.tokens.extend(state.indent_tokens)
    start = len(state.tokens)
    _mark(node, state)
    body = node.body
    if body:
        last = len(body) - 1
        for i, s in enumerate(body):
            f = _SMALL.get(s.__class__)
            if f is None:
                s._codegen(state, default_semicolon=(i != last))
            else:
                f(s, state, i != last)
    else:
        state.tokens.append("pass")
    _span(node, state, start)
    emit(node.trailing_whitespace, state)


def _indented_block(node: cst.IndentedBlock, state) -> None:
    emit(node.header, state)
    indent = node.indent
    state.indent_tokens.append(state.default_indent if indent is None else indent)
    if node.body:
        start = len(state.tokens)
        for s in node.body:
            emit(s, state)
        if state.starts is not None:  # it starts where its first statement does
            state.starts[id(node)] = state.starts.get(id(node.body[0]), start)
    else:  # an empty block renders as `pass`
        state.tokens.extend(state.indent_tokens)
        _mark(node, state)
        state.tokens.append("pass")
        state.tokens.append(state.default_newline)
    for f in node.footer:
        emit(f, state)
    state.indent_tokens.pop()


def _decorated_start(node, state) -> None:
    for ll in node.leading_lines:
        emit(ll, state)
    for d in node.decorators:
        emit(d, state)
    for ll in node.lines_after_decorators:
        emit(ll, state)
    state.tokens.extend(state.indent_tokens)


def _decorator(node: cst.Decorator, state) -> None:
    for ll in node.leading_lines:
        emit(ll, state)
    state.tokens.extend(state.indent_tokens)
    _mark(node, state)
    state.tokens.append("@")
    w = node.whitespace_after_at
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    emit(node.decorator, state)
    emit(node.trailing_whitespace, state)


def _function_def(node: cst.FunctionDef, state) -> None:
    _decorated_start(node, state)
    tokens = state.tokens
    start = len(tokens)
    _mark(node, state)
    if node.asynchronous is not None:
        emit(node.asynchronous, state)
    tokens.append("def")
    w = node.whitespace_after_def
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    emit(node.name, state)
    w = node.whitespace_after_name
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    if node.type_parameters is not None:
        emit(node.type_parameters, state)
    w = node.whitespace_after_type_parameters
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    tokens.append("(")
    w = node.whitespace_before_params
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    emit(node.params, state)
    tokens.append(")")
    if node.returns is not None:
        node.returns._codegen(state, default_indicator="->")
    w = node.whitespace_before_colon
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    tokens.append(":")
    emit(node.body, state)
    _span(node, state, start)


def _class_def(node: cst.ClassDef, state) -> None:
    _decorated_start(node, state)
    tokens = state.tokens
    start = len(tokens)
    _mark(node, state)
    tokens.append("class")
    w = node.whitespace_after_class
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    emit(node.name, state)
    w = node.whitespace_after_name
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    if node.type_parameters is not None:
        emit(node.type_parameters, state)
    w = node.whitespace_after_type_parameters
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    has_args = bool(node.bases or node.keywords)
    lpar = node.lpar
    if isinstance(lpar, cst.MaybeSentinel):
        if has_args:
            tokens.append("(")
    elif lpar.__class__ is cst.LeftParen:
        emit(lpar, state)
    args = [*node.bases, *node.keywords]
    last = len(args) - 1
    for i, arg in enumerate(args):
        if arg.__class__ is cst.Arg:
            _arg(arg, state, i != last)
        else:
            arg._codegen(state, default_comma=(i != last))
    rpar = node.rpar
    if isinstance(rpar, cst.MaybeSentinel):
        if has_args:
            tokens.append(")")
    elif rpar.__class__ is cst.RightParen:
        emit(rpar, state)
    w = node.whitespace_before_colon
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    tokens.append(":")
    emit(node.body, state)
    _span(node, state, start)


def _if(node: cst.If, state, is_elif: bool = False) -> None:
    for ll in node.leading_lines:
        emit(ll, state)
    state.tokens.extend(state.indent_tokens)
    start = len(state.tokens)
    _mark(node, state)
    state.tokens.append("elif" if is_elif else "if")
    w = node.whitespace_before_test
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    emit(node.test, state)
    w = node.whitespace_after_test
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    state.tokens.append(":")
    emit(node.body, state)
    orelse = node.orelse
    if orelse is not None:
        if orelse.__class__ is cst.If:
            _if(orelse, state, True)
        elif orelse.__class__ is cst.If:
            orelse._codegen(state, is_elif=True)
        else:
            emit(orelse, state)
    _span(node, state, start)


def _else(node: cst.Else, state) -> None:
    for ll in node.leading_lines:
        emit(ll, state)
    state.tokens.extend(state.indent_tokens)
    start = len(state.tokens)
    _mark(node, state)
    state.tokens.append("else")
    w = node.whitespace_before_colon
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    state.tokens.append(":")
    emit(node.body, state)
    _span(node, state, start)


def _for(node: cst.For, state) -> None:
    for ll in node.leading_lines:
        emit(ll, state)
    tokens = state.tokens
    tokens.extend(state.indent_tokens)
    start = len(tokens)
    _mark(node, state)
    if node.asynchronous is not None:
        emit(node.asynchronous, state)
    tokens.append("for")
    w = node.whitespace_after_for
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    emit(node.target, state)
    w = node.whitespace_before_in
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    tokens.append("in")
    w = node.whitespace_after_in
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    emit(node.iter, state)
    w = node.whitespace_before_colon
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    tokens.append(":")
    emit(node.body, state)
    if node.orelse is not None:
        emit(node.orelse, state)
    _span(node, state, start)


def _parameters(node: cst.Parameters, state) -> None:
    """Parameters._codegen_impl, its Param children by :func:`_param`."""
    star_arg = node.star_arg
    if isinstance(star_arg, cst.MaybeSentinel):
        starincluded = len(node.kwonly_params) > 0
    elif isinstance(star_arg, (cst.Param, cst.ParamStar)):
        starincluded = True
    else:
        starincluded = False
    for p in node.posonly_params:
        _param(p, state, "", True)
    more_values = starincluded or len(node.params) > 0 or len(node.kwonly_params) > 0 or node.star_kwarg is not None
    posonly_ind = node.posonly_ind
    if posonly_ind.__class__ is cst.ParamSlash:
        posonly_ind._codegen(state, default_comma=more_values)
    elif len(node.posonly_params) > 0:
        state.tokens.append("/, " if more_values else "/")
    last = len(node.params) - 1
    more_values = starincluded or len(node.kwonly_params) > 0 or node.star_kwarg is not None
    for i, p in enumerate(node.params):
        _param(p, state, "", i < last or more_values)
    if isinstance(star_arg, cst.MaybeSentinel):
        if starincluded:
            state.tokens.append("*, ")
    elif star_arg.__class__ is cst.Param:
        _param(star_arg, state, "*", len(node.kwonly_params) > 0 or node.star_kwarg is not None)
    elif star_arg.__class__ is cst.ParamStar:
        emit(star_arg, state)
    last = len(node.kwonly_params) - 1
    more_values = node.star_kwarg is not None
    for i, p in enumerate(node.kwonly_params):
        _param(p, state, "", i < last or more_values)
    if node.star_kwarg is not None:
        _param(node.star_kwarg, state, "**", False)


def _param(node: cst.Param, state, default_star: str, default_comma: bool) -> None:
    if node.__class__ is not cst.Param:
        node._codegen(state, default_star=default_star, default_comma=default_comma)
        return
    tokens = state.tokens
    _mark(node, state)
    star = node.star
    if isinstance(star, cst.MaybeSentinel):
        star = default_star
    if isinstance(star, str):
        tokens.append(star)
    w = node.whitespace_after_star
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)
    emit(node.name, state)
    if node.annotation is not None:
        node.annotation._codegen(state, default_indicator=":")
    equal = node.equal
    if equal is _DEFAULT and node.default is not None:
        tokens.append(" = ")
    elif equal.__class__ is cst.AssignEqual:
        emit(equal, state)
    if node.default is not None:
        emit(node.default, state)
    comma = node.comma
    if comma is _DEFAULT and default_comma:
        tokens.append(", ")
    elif comma.__class__ is cst.Comma:
        emit(comma, state)
    w = node.whitespace_after_param
    if w.__class__ is _SIMPLE:
        state.tokens.append(w.value)
    else:
        emit(w, state)


_EMIT: dict[type, Callable] = {
    cst.Name: _atom, cst.Integer: _atom, cst.Float: _atom, cst.SimpleString: _atom,
    cst.SimpleWhitespace: _value, cst.Comment: _value, cst.Newline: _newline,
    cst.TrailingWhitespace: _trailing_whitespace, cst.EmptyLine: _empty_line,
    cst.LeftParen: _left_paren, cst.RightParen: _right_paren,
    cst.LeftSquareBracket: _bracket, cst.LeftCurlyBrace: _bracket,
    cst.RightSquareBracket: _closing_bracket, cst.RightCurlyBrace: _closing_bracket,
    cst.Attribute: _attribute, cst.Call: _call, cst.Arg: _arg, cst.Element: _element,
    cst.List: _list, cst.Tuple: _tuple, cst.Subscript: _subscript, cst.Index: _index,
    cst.BinaryOperation: _binary, cst.BooleanOperation: _binary,
    cst.Minus: _unary_op, cst.Plus: _unary_op, cst.BitInvert: _unary_op, cst.Not: _unary_op,
    cst.ParenthesizedWhitespace: _parenthesized_whitespace, cst.Ellipsis: _ellipsis, cst.Slice: _slice,
    cst.IfExp: _if_exp, cst.UnaryOperation: _unary, cst.Comparison: _comparison,
    cst.ComparisonTarget: _comparison_target, cst.Dict: _dict,
    cst.SimpleStatementLine: _simple_statement_line, cst.IndentedBlock: _indented_block,
    cst.Decorator: _decorator, cst.FunctionDef: _function_def, cst.ClassDef: _class_def,
    cst.If: _if, cst.Else: _else, cst.For: _for, cst.Parameters: _parameters,
    cst.Expr: _expr, cst.Assign: _assign, cst.AugAssign: _aug_assign, cst.Return: _return, cst.Pass: _pass,
    cst.Import: _import, cst.ImportFrom: _import_from, cst.ImportAlias: _import_alias, cst.AsName: _as_name,
}
# every one-token operator whose _codegen_impl is the base class's (whitespace, token, whitespace)
_EMIT.update({c: _one_token_op for c in vars(cst).values()
              if isinstance(c, type) and issubclass(c, _BaseOneTokenOp)
              and all("_codegen_impl" not in k.__dict__ for k in c.__mro__[:c.__mro__.index(_BaseOneTokenOp)])})
