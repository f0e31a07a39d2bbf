"""Positions of a few nodes, at the cost of one render.

libcst's ``PositionProvider`` records a ``CodeRange`` for every node of the tree; translation needs
the positions of the handful of nodes that carry findings (and, for ``# fwport:`` comments, the
line span of statements). This code-generation state only counts lines and columns and records
the nodes it is asked about, so it costs about what rendering the module costs.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterable, Iterator

import libcst as cst
from libcst._nodes.internal import CodegenState


class _Recorder(CodegenState):
    def __init__(self, module: cst.Module, targets: set[int], statements: bool):
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.line = 1
        self.column = 0
        self.last_content_line = 1
        self.targets = targets
        self.statements = statements
        self.starts: dict[int, tuple[int, int]] = {}
        self.spans: dict[int, tuple[int, int]] = {}

    def add_indent_tokens(self) -> None:
        for tok in self.indent_tokens:
            self.add_token(tok)

    def add_token(self, value: str) -> None:
        newlines = value.count("\n")
        if newlines:
            if value.strip():
                self.last_content_line = self.line + value.rstrip().count("\n")
            self.line += newlines
            self.column = len(value) - value.rfind("\n") - 1
        else:
            self.column += len(value)
            if value.strip():
                self.last_content_line = self.line

    def pop_trailing_newline(self) -> None:
        pass  # positions only: the trailing newline comes after every node

    @contextmanager
    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None,
                                  end_node: cst.CSTNode | None = None) -> Iterator[None]:
        key = id(node)
        wanted = key in self.targets
        if wanted and start_node is not None:
            self.targets.add(id(start_node))  # the node starts where this child does
        start = (self.line, self.column)
        yield
        if wanted:
            self.starts[key] = self.starts.get(id(start_node), start) if start_node is not None else start
        if self.statements and isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement, cst.Arg, cst.Element)):
            self.spans[key] = (start[0], self.last_content_line)


def node_positions(module: cst.Module, nodes: Iterable[cst.CSTNode]) -> dict[int, tuple[int, int]]:
    """``id(node)`` → (line, column), 1-based, for the given nodes of ``module`` (others are absent)."""
    targets = {id(n) for n in nodes if n is not None}
    if not targets:
        return {}
    state = _Recorder(module, targets, statements=False)
    module._codegen(state)
    return {k: (line, col + 1) for k, (line, col) in state.starts.items()}


def statement_spans(module: cst.Module) -> tuple[dict[int, tuple[int, int]], int]:
    """``id(node)`` → (first line, last line) for every statement of ``module`` (and every call
    argument and container element, where comments may go too), and the number of lines."""
    state = _Recorder(module, set(), statements=True)
    module._codegen(state)
    return state.spans, state.line - 1
