"""libcst's parsers without the validation of every node they build.

Each libcst node runs ``_validate()`` when it is constructed (``CSTNode.__post_init__``): it checks
what a tree built by hand may get wrong (a missing space after ``not``, a keyword argument before a
positional one). The parser builds only what its grammar accepts, so the checks never fail there
(libcst's own note on ``__post_init__`` says so), yet they cost a sixth of a parse. These functions
parse with the checks off for the duration of the call; nodes the passes build afterwards are
validated as before.
"""
from __future__ import annotations

import libcst as cst

_VALIDATE = cst.CSTNode.__dict__["__post_init__"]


def _no_validation(self) -> None:
    return None


def _unvalidated(parser, text: str):
    cst.CSTNode.__post_init__ = _no_validation
    try:
        return parser(text)
    finally:
        cst.CSTNode.__post_init__ = _VALIDATE


def parse_module(text: str) -> cst.Module:
    """``cst.parse_module(text)``: the same tree, the same ``ParserSyntaxError``."""
    return _unvalidated(cst.parse_module, text)


def parse_statement(text: str) -> cst.BaseStatement:
    """``cst.parse_statement(text)``."""
    return _unvalidated(cst.parse_statement, text)


def parse_expression(text: str) -> cst.BaseExpression:
    """``cst.parse_expression(text)``."""
    return _unvalidated(cst.parse_expression, text)
