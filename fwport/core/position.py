"""Positions of a few nodes, at the cost of one render.

libcst's ``PositionProvider`` records a ``CodeRange`` for every node of the tree; translation needs
the positions of the handful of nodes that carry findings (and, for ``# fwport:`` comments, the
line span of statements). This code-generation state only counts lines and columns and records
the nodes it is asked about, so it costs about what rendering the module costs.

The pipeline uses :class:`Layout`: each top-level statement rendered once per translation (by
identity), noting where every node starts, lines and columns worked out only for the nodes asked
about; :func:`render` is a plain render without libcst's per-node position hooks.
"""
from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from difflib import SequenceMatcher
from contextlib import nullcontext
from itertools import accumulate
from typing import Iterable

import libcst as cst
from libcst._nodes.internal import CodegenState

from fwport.core.codegen import emit


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

    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None,
                                  end_node: cst.CSTNode | None = None) -> "_Position":
        return _Position(self, node, start_node)


#: the nodes whose line span is recorded (where comments may go)
_SPANNED = frozenset(c for c in vars(cst).values() if isinstance(c, type) and issubclass(
    c, (cst.SimpleStatementLine, cst.BaseCompoundStatement, cst.Arg, cst.Element)))


class _Position:
    """The context of one ``record_syntactic_position`` (a class: a generator-based context manager
    per node costs several times as much)."""

    __slots__ = ("state", "node", "start_node", "start", "wanted")

    def __init__(self, state: _Recorder, node: cst.CSTNode, start_node: cst.CSTNode | None):
        self.state = state
        self.node = node
        self.start_node = start_node

    def __enter__(self) -> None:
        state = self.state
        self.wanted = wanted = id(self.node) in state.targets
        if wanted and self.start_node is not None:
            state.targets.add(id(self.start_node))  # the node starts where this child does
        self.start = (state.line, state.column)

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None:
            return False
        state, key, start = self.state, id(self.node), self.start
        if self.wanted:
            start_node = self.start_node
            state.starts[key] = state.starts.get(id(start_node), start) if start_node is not None else start
        if state.statements and type(self.node) in _SPANNED:
            state.spans[key] = (start[0], state.last_content_line)
        return False


def node_positions(module: cst.Module, nodes: Iterable[cst.CSTNode],
                   layout: "Layout | None" = None) -> dict[int, tuple[int, int]]:
    """``id(node)`` → (line, column), 1-based, for the given nodes of ``module`` (others are absent)."""
    targets = {id(n) for n in nodes if n is not None}
    if not targets:
        return {}
    if layout is not None:
        return layout.positions(module, targets)
    state = _Recorder(module, targets, statements=False)
    module._codegen(state)
    return {k: (line, col + 1) for k, (line, col) in state.starts.items()}


def statement_spans(module: cst.Module, layout: "Layout | None" = None) -> tuple[dict[int, tuple[int, int]], int]:
    """``id(node)`` → (first line, last line) for every statement of ``module`` (and every call
    argument and container element, where comments may go too), and the number of lines."""
    return (layout or Layout()).spans(module)


class PlainState(CodegenState):
    """libcst's code generation state, without the generator-based context manager libcst opens
    around every node for position providers (text only, several times fewer calls)."""

    starts = None  # (fwport.core.codegen.emit notes no positions)

    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        return _NO_POSITION


_NO_POSITION = nullcontext()


def render(node: cst.CSTNode, module: cst.Module | None = None) -> str:
    """``module.code_for_node(node)`` (an empty module's indentation and newline by default), by
    :func:`fwport.core.codegen.emit` (the same text, several times faster for the common nodes)."""
    state = PlainState(default_indent=module.default_indent if module is not None else " " * 4,
                       default_newline=module.default_newline if module is not None else "\n")
    emit(node, state)
    return "".join(state.tokens)


class _Marks(PlainState):
    """A plain render that notes, for every node, the index of the token it starts at (and for the
    spanned ones, where it ends): lines and columns are worked out from the text only for the nodes
    asked about (a render that counts lines at every token costs several times as much)."""

    spanned = _SPANNED

    def __init__(self, module: cst.Module):
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.starts: dict[int, int] = {}
        self.spans: dict[int, tuple[int, int]] = {}

    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        return _Mark(self, node, start_node)


class _Mark:
    __slots__ = ("state", "node", "start_node", "start")

    def __init__(self, state: _Marks, node: cst.CSTNode, start_node: cst.CSTNode | None):
        self.state = state
        self.node = node
        self.start_node = start_node

    def __enter__(self) -> None:
        self.start = len(self.state.tokens)

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            state, key, start = self.state, id(self.node), self.start
            # the node starts where its start_node does (a child, rendered by now)
            state.starts[key] = state.starts.get(id(self.start_node), start) if self.start_node is not None else start
            if type(self.node) in _SPANNED:
                state.spans[key] = (start, len(state.tokens))
        return False


class _Statement:
    """One top-level statement rendered on its own: its text, its number of lines, and the
    positions (every node's start) and spans relative to its first line."""

    __slots__ = ("node", "text", "lines", "starts", "spans", "tokens", "_offsets", "_newlines")

    def __init__(self, module: cst.Module, node: cst.CSTNode):
        state = _Marks(module)
        emit(node, state)
        self.node = node  # held: the cache is keyed by id
        self.tokens = state.tokens
        self.text = "".join(state.tokens)
        self.lines = self.text.count("\n")
        self.starts = state.starts  # id → index of its first token
        self.spans = state.spans  # id → (index of its first token, index after its last one)
        self._offsets: list[int] | None = None
        self._newlines: list[int] = []

    def _offset(self, token: int) -> int:
        if self._offsets is None:
            self._offsets = list(accumulate(map(len, self.tokens), initial=0))
            self._newlines = [m.start() for m in _NEWLINE.finditer(self.text)]
        return self._offsets[token]

    def _line(self, offset: int) -> int:
        """The 1-based line of the character at ``offset``."""
        return bisect_left(self._newlines, offset) + 1

    def position(self, key: int) -> tuple[int, int]:
        """(line, column), 1-based line and 0-based column, of the node ``key``."""
        offset = self._offset(self.starts[key])
        return self._line(offset), offset - (self.text.rfind("\n", 0, offset) + 1)

    def span(self, key: int) -> tuple[int, int] | None:
        """(first line, last line with content) of the statement, argument or element ``key``."""
        marks = self.spans.get(key)
        if marks is None:
            return None
        start, end = marks
        first = self._line(self._offset(start))
        k = end - 1
        while k >= 0 and not self.tokens[k].strip():
            k -= 1
        if k < 0:
            return first, 1
        return first, self._line(self._offset(k) + len(self.tokens[k].rstrip()))


_NEWLINE = re.compile("\n")


#: top-level statements that many translations insert as the very same objects (a pack's helper
#: code, parsed once per process), registered with :func:`share`: each rendered once per process
#: (per indentation and newline), not once per file
_SHARED: dict[int, cst.CSTNode] = {}
_SHARED_TEXT: dict[tuple[int, str, str], str] = {}


def share(statements: Iterable[cst.CSTNode]) -> None:
    """Register statements that are inserted, unchanged, into many outputs (held for the process)."""
    for s in statements:
        _SHARED[id(s)] = s


def _render_statement(s: cst.CSTNode, module: cst.Module) -> str:
    if _SHARED.get(id(s)) is not s:
        return render(s, module)
    key = (id(s), module.default_indent, module.default_newline)
    text = _SHARED_TEXT.get(key)
    if text is None:
        text = _SHARED_TEXT[key] = render(s, module)
    return text


class Layout:
    """Text, positions and statement spans of the modules one translation goes through, each
    top-level statement rendered once however many modules share it.

    The pipeline's modules differ from one another in a few top-level statements (a structural pass
    rebuilds only the statements it changes; the rule pass does not descend into statements with
    nothing to translate; the import fixer touches the imports): the others are the very same
    nodes, whose text and positions (relative to their first line) are kept here by identity. A
    top-level statement renders the same wherever it stands (no indentation comes from outside)."""

    def __init__(self) -> None:
        self._done: dict[int, _Statement] = {}
        self._texts: dict[int, tuple[cst.CSTNode, str]] = {}  # statements only ever rendered as text
        self._parts_of: dict[int, _Parts] = {}  # id(module) → its statements, each one's first line...

    def _statement(self, module: cst.Module, node: cst.CSTNode) -> _Statement:
        r = self._done.get(id(node))
        if r is None or r.node is not node:
            r = self._done[id(node)] = _Statement(module, node)
        return r

    def _parts(self, module: cst.Module) -> "_Parts":
        parts = self._parts_of.get(id(module))
        if parts is not None and parts.module is module:
            return parts
        stmts = [self._statement(module, s) for s in module.body]
        line = 1 + sum(module.code_for_node(h).count("\n") for h in module.header)
        firsts = []
        for r in stmts:
            firsts.append(line)
            line += r.lines
        # (the modules _locate asks about in turn, the source's and a pass's: each kept, not the last one)
        parts = self._parts_of[id(module)] = _Parts(module, stmts, firsts, line)
        return parts

    def text(self, module: cst.Module) -> str:
        """``module.code``."""
        if not module.has_trailing_newline or not module.body:
            return module.code
        parts = [module.code_for_node(h) for h in module.header]
        parts += [self.statement_text(s, module) for s in module.body]
        parts += [module.code_for_node(f) for f in module.footer]
        return "".join(parts)

    def statement_text(self, s: cst.CSTNode, module: cst.Module) -> str:
        """The text of top-level statement ``s`` of ``module``, rendered once however many modules hold it
        (a finishing step that looks for a mark in the text finds the statements to change without a walk)."""
        r = self._done.get(id(s))
        if r is not None and r.node is s:
            return r.text
        t = self._texts.get(id(s))
        if t is None or t[0] is not s:  # a statement not rendered yet: no positions needed, a plain render
            t = self._texts[id(s)] = (s, _render_statement(s, module))
        return t[1]

    def source_lines(self, tree: cst.Module, original: cst.Module):
        """A function from a line of ``tree`` to the line of ``original`` it comes from, where a pass made
        statements longer or shorter (a multi-line ``model.compile(...)`` written as one line), or None
        when no line moved. Top-level statements that no pass rebuilt are the very nodes of ``original``;
        a rebuilt one is paired with the one of ``original`` it stands for (in order, between two that
        were not rebuilt), and its lines with that one's by a line diff of the two texts (the lines a
        pass left as they were match; a line it changed maps to the first line of what it replaced)."""
        if tree is original:
            return None
        a, b = self._parts(original), self._parts(tree)
        old, old_firsts, new, new_firsts = a.stmts, a.firsts, b.stmts, b.firsts
        where = {id(r.node): j for j, r in enumerate(old)}
        # a block's statements a pass put at the top level (the functional pass's _flatten_withs: a model built in
        # a module-level `with` block, its header left in place as `with ...: pass`, the block's statements after
        # it, which later passes rebuild one for one): found by one of them that is still the very node of the
        # block of a top-level statement of ``original``, each line of each of them is that statement's line from
        # where its node stands in the block
        kept = {id(r.node) for r in new}
        nested: dict[int, tuple[int, int]] = {}
        for j, r in enumerate(old):
            body = getattr(r.node, "body", None)
            if id(r.node) not in kept and isinstance(body, cst.IndentedBlock):
                for m, child in enumerate(body.body):
                    nested[id(child)] = (j, m)
        inner: dict[int, int] = {}  # a new statement's index → the line of original its first line is
        anchor_of: dict[int, int] = {i: where[id(r.node)] for i, r in enumerate(new) if id(r.node) in where}
        for i, r in enumerate(new):
            if id(r.node) not in nested or i in inner:
                continue
            j, m = nested[id(r.node)]
            children = old[j].node.body.body
            h = i - m - 1
            if h < 0 or h + len(children) >= len(new) or type(new[h].node) is not type(old[j].node) \
                    or any(k in anchor_of for k in range(h, h + len(children) + 1)):
                continue
            anchor_of[h] = j
            for m, child in enumerate(children):
                line = old_firsts[j] + old[j].position(id(child))[0] - 1
                inner[h + 1 + m] = line - len(getattr(child, "leading_lines", ()))
                anchor_of[h + 1 + m] = j
        pairs: list[int | None] = [None] * len(new)
        anchors = [(-1, -1)] + sorted(anchor_of.items()) + [(len(new), len(old))]
        for (pi, pj), (ni, nj) in zip(anchors, anchors[1:]):
            if ni < len(new):
                pairs[ni] = nj
            run_new, run_old = range(pi + 1, ni), range(pj + 1, nj)
            for k, i in enumerate(run_new):
                pairs[i] = run_old[k] if len(run_new) == len(run_old) else (run_old[0] if run_old else None)
        if all(j is not None and new[i] is old[j] and new_firsts[i] == old_firsts[j] for i, j in enumerate(pairs)):
            return None
        diffs: dict[int, list] = {}

        def inside(i: int, j: int, offset: int) -> int:
            """The 0-based line of old[j] that line ``offset`` of new[i] comes from."""
            blocks = diffs.get(i)
            if blocks is None:
                blocks = diffs[i] = SequenceMatcher(None, new[i].text.splitlines(), old[j].text.splitlines(),
                                                    autojunk=False).get_matching_blocks()
            prev_a = prev_b = 0
            for a, b, size in blocks:
                if offset < a:  # in a changed region: its line in what it replaced, if that is as long,
                    # else the first line of what it replaced
                    return prev_b + offset - prev_a if a - prev_a == b - prev_b else prev_b
                if offset < a + size:
                    return b + offset - a
                prev_a, prev_b = a + size, b + size
            return prev_b

        def source_line(line: int) -> int:
            i = bisect_right(new_firsts, line) - 1
            if i < 0:
                return line
            if i in inner:
                return inner[i] + line - new_firsts[i]
            j = pairs[i]
            if j is None:  # a statement a pass added: the line of the statement before it
                k = next((k for k in range(i - 1, -1, -1) if pairs[k] is not None), None)
                return line if k is None else old_firsts[pairs[k]]
            if new[i] is old[j]:
                return line - new_firsts[i] + old_firsts[j]
            return old_firsts[j] + inside(i, j, line - new_firsts[i])
        return source_line

    def positions(self, module: cst.Module, targets: set[int]) -> dict[int, tuple[int, int]]:
        """As :func:`node_positions`."""
        parts = self._parts(module)
        stmts, firsts = parts.stmts, parts.firsts
        out = {}
        for key in targets:
            i = parts.owner_of(key, len(targets))
            if i is not None:
                line, col = stmts[i].position(key)
                out[key] = (firsts[i] + line - 1, col + 1)
        return out

    def spans(self, module: cst.Module) -> tuple["_Spans", int]:
        """As :func:`statement_spans`."""
        if not module.body:
            return {}, module.code.count("\n")
        parts = self._parts(module)
        lines = parts.end - 1 + sum(module.code_for_node(f).count("\n") for f in module.footer)
        # as statement_spans counts: its recorder keeps no tokens, so the module adds the newline
        # it adds to an empty module
        return _Spans(parts.stmts, parts.firsts, parts.owner()), lines


class _Parts:
    """A module's top-level statements as the Layout rendered them, the first line of each, the line after the
    last; which statement holds a node is looked for in the few statements' marks where a few nodes are asked
    about (the positions of a pass's findings), and kept for every node only where many are (spans)."""

    __slots__ = ("module", "stmts", "firsts", "end", "_owner")

    def __init__(self, module: cst.Module, stmts: list[_Statement], firsts: list[int], end: int):
        self.module = module  # held: the Layout keeps it by id
        self.stmts, self.firsts, self.end = stmts, firsts, end
        self._owner: dict[int, int] | None = None

    def owner(self) -> dict[int, int]:
        """id(node) → the index of the statement that holds it, for every node."""
        if self._owner is None:
            owner: dict[int, int] = {}
            for i, r in enumerate(self.stmts):
                owner.update(dict.fromkeys(r.starts, i))
            self._owner = owner
        return self._owner

    def owner_of(self, key: int, asked: int) -> int | None:
        """The index of the statement holding node ``key`` (one of ``asked`` nodes), or None."""
        if self._owner is None and asked * len(self.stmts) < 256:
            for i in range(len(self.stmts) - 1, -1, -1):  # (the last one holding it, as owner() has it)
                if key in self.stmts[i].starts:
                    return i
            return None
        return self.owner().get(key)


class _Spans:
    """The ``spans`` mapping of :meth:`Layout.spans`, shifted to module lines when read."""

    def __init__(self, stmts: list[_Statement], firsts: list[int], owner: dict[int, int]):
        self._stmts, self._firsts, self._owner = stmts, firsts, owner

    def get(self, key: int, default=None):
        i = self._owner.get(key)
        if i is None:
            return default
        span = self._stmts[i].span(key)
        if span is None:
            return default
        shift = self._firsts[i] - 1
        return (span[0] + shift, span[1] + shift)

    def __bool__(self) -> bool:
        return bool(self._stmts)
