"""The translation pipeline for one source text, for any direction:

parse → resolve names → the direction's structural passes (each only where its trigger appears) →
rule pass (rules, residue scan, ``# fwport:`` comments) → the direction's finishing steps → imports
fixed → text. Every step appends findings; the result is a :class:`FileResult`. Positions are
computed only for the nodes that carry findings.
"""
from __future__ import annotations

import gc
import re

import libcst as cst

from fwport.core.context import FileContext
from fwport.core.direction import Direction, default_direction, get_direction
from fwport.core.engine import RuleTransformer
from fwport.core.finding import Finding, Severity
from fwport.core.imports import add_imports, prune_imports
from fwport.core.names import collect_imports, free_conventional_aliases, scan
from fwport.core import spread
from fwport.core.parse import fast_changes, parse_module
from fwport.core.position import Layout, node_positions, statement_spans
from fwport.core.result import FileResult, Status
from fwport.core.rewrite import rewrite
from fwport.core.rule import Pack, load_pack


def _locate(tree: cst.Module, ctx: FileContext, comments: dict[int, list[Finding]] | None,
            layout: Layout | None = None) -> None:
    """Give the findings a pass left pending their line and column in the source: their position in
    that pass's input tree, moved back to the source's line where an earlier pass made a statement
    longer or shorter (Layout.source_lines).

    Error findings that want a ``# fwport:`` comment and were not placed by their pass go into
    ``comments`` by their line in the tree (where the rule pass places them)."""
    if not ctx.pending:
        return
    positions = node_positions(tree, [p.node for p in ctx.pending if p.node is not None], layout)
    parsed = ctx.analyses.get("parsed")
    to_source = layout.source_lines(tree, parsed[0]) if parsed is not None and layout is not None else None
    located = []
    for p in ctx.pending:
        line, col = positions.get(id(p.node), (0, 0)) if p.node is not None else (0, 0)
        f = p.finding.located(ctx.path, to_source(line) if to_source is not None and line else line, col)
        located.append((p, f, line))
    error_lines = {f.line for f in ctx.findings if f.severity is Severity.ERROR}
    error_lines |= {f.line for _, f, _ in located if f.severity is Severity.ERROR and f.code != "residue"}
    for p, f, line in located:
        if f.code == "residue" and f.line in error_lines:
            continue  # that line already has an error saying what was left untranslated
        ctx.findings.append(f)
        if p.comment and line and comments is not None:  # (a line of the tree the comment goes into)
            comments.setdefault(line, []).append(p.finding)
    ctx.pending.clear()


def _count_lines(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def _lines_mentioning(source: str, imports) -> list[int]:
    """The source lines that contain an imported name (where the rule pass has work to do)."""
    names = sorted(imports.aliases, key=len, reverse=True)
    if not names:
        return []
    pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, names)) + r")\b")
    return [i for i, line in enumerate(source.splitlines(), 1) if pattern.search(line)]


def mentions_source(text: str, direction: Direction | None = None) -> bool:
    """Whether the text can concern the direction's source framework at all (a cheap text test)."""
    return (direction or get_direction(default_direction())).mentions.search(text) is not None


class _Calls(cst.CSTVisitor):
    def __init__(self) -> None:
        self.calls: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)


def _observed_at(module: cst.Module, observed, layout: Layout | None = None) -> dict[int, object]:
    """``id(call)`` → the input shape observed by running the source (``observed_shapes``: (line, column,
    shape), column 1-based) for the calls of ``module`` that start there (a layer's constructor call;
    translate_layer reads it through ``Direction.observed_shape``; ``layout``: the translation's, whose
    renders of the source's statements the passes' findings are then located with too)."""
    at = {(int(line), int(col)): shape for line, col, shape in observed}
    finder = _Calls()
    scan(module, finder)
    return {k: at[pos] for k, pos in node_positions(module, finder.calls, layout).items() if pos in at}


def translate_source(source: str, path: str = "<string>", pack: Pack | str | None = None,
                     options: dict | None = None) -> FileResult:
    """Translate one source text in the direction of ``pack`` (a loaded rule pack or a direction
    name, a chained one included: ``"tf2jax"``; by default the registry's default direction). Never
    raises on user input.

    Python's cyclic garbage collector is paused meanwhile (as it was before, after): parsing and
    rewriting allocate hundreds of thousands of acyclic nodes, and every collection they trigger
    walks all the objects the process holds (rules, templates, caches), a fifth of the time on large
    files; the nodes are freed by their reference counts all the same. libcst's ``with_changes`` is
    ``parse.with_changes`` meanwhile (the same nodes, without ``dataclasses.replace``'s cost)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        with fast_changes():
            return _translate_source(source, path, pack, options)
    finally:
        if enabled:
            gc.enable()


def _translate_source(source: str, path: str, pack: Pack | str | None, options: dict | None) -> FileResult:
    options = dict(options or {})
    if not isinstance(pack, Pack):
        stages = get_direction(pack or default_direction()).stages
        if stages:  # a chained direction (tf2jax): each stage on the previous one's output
            from fwport.core.chain import translate_chain
            return translate_chain(source, path, [(s, load_pack(s), options) for s in stages])
        pack = load_pack(pack or default_direction())
    direction = get_direction(pack.name)
    if not direction.mentions.search(source):
        return FileResult(path, Status.UNCHANGED, source, source)
    try:
        module = parse_module(source)
    except cst.ParserSyntaxError as e:
        f = Finding(Severity.ERROR, "parse-error", f"not valid Python 3: {e.message}", path,
                    e.raw_line, e.raw_column + 1)
        return FileResult(path, Status.FAILED, source, source, [f])
    imports = collect_imports(module, direction.source, source)
    if not imports.source_imports:
        return FileResult(path, Status.UNCHANGED, source, source)
    assumed = free_conventional_aliases(module, imports, source, direction.conventional_aliases) \
        if direction.conventional_aliases else {}
    if direction.out_of_scope is not None:
        refused = direction.out_of_scope(module, imports, source, path)
        if refused is not None:  # one error for the whole file, which stays as written (needs attention, exit 1)
            return FileResult(path, Status.UNCHANGED, source, source, [refused])
    ctx = FileContext(path, pack, imports, direction, None, options)
    ctx.analyses["parsed"] = (module, source)  # the tree parsed from the source, and the source
    # text, positions and spans of every module below, each top-level statement rendered once
    layout = Layout()
    if options.get("observed_shapes") and direction.observed_shape is not None:
        ctx.analyses["observed_shapes"] = _observed_at(module, options["observed_shapes"], layout)
    for alias, first in assumed.items():
        module_name = imports.aliases[alias]
        ctx.report(Severity.WARNING, "assumed-import",
                   f"`{alias}` is read here (first) but bound nowhere in the file: taken as `import {module_name} as "
                   f"{alias}` (its conventional name; a notebook cell or file that imports it is not part of this "
                   "input). Add the import to the source if it is meant to be there", first)
    if direction.detect_version is not None:
        ctx.version, why = direction.detect_version(source, options.get(direction.version_option))
        ctx.findings.append(Finding(Severity.INFO, direction.version_code,
                                    f"translating as {direction.version_label(ctx.version)} code ({why})", path))

    if "**" in source:  # `**config` of a dict literal written out as keyword arguments (spread.py)
        module = spread.expand(module, ctx, source, layout)
    comments: dict[int, list[Finding]] = {}
    ctx.analyses["layout"] = layout  # (a pass that needs a changed module's text: layout.text(module))
    for planner in direction.planners:
        if not planner.trigger.search(source):
            continue  # nothing this pass rewrites can be in the file
        new = planner.run(module, ctx)
        _locate(module, ctx, comments, layout)
        module = new
    # the rule pass translates calls, reports what it leaves (no rule, refused, residue) and leaves
    # every error as a `# fwport:` comment above its statement, the earlier passes' ones included
    if not comments:
        # no comment waits for a line: the rule pass finds the statements with work inside by their
        # names (RuleTransformer._mark_hot), a walk several times cheaper than the render that
        # statement spans (lines) would cost
        spans: dict = {}
        relevant: list[int] | None = None
    else:
        spans, lines = statement_spans(module, layout)
        # (a statement holding a planned edit may mention no imported name: none is skipped then)
        relevant = _lines_mentioning(source, imports) if lines == _count_lines(source) and not ctx.plans else None
    rules = RuleTransformer(ctx, comments, spans, relevant)
    new = rewrite(module, rules)
    ctx.plans.check_applied()
    _locate(module, ctx, None, layout)
    module = new

    # steps that remove lines run only now, once every finding is located and every comment placed
    for finish in direction.finish:
        module = finish(module, ctx)
    module = spread.finish(module, ctx)
    text = layout.text(module)
    if ctx.needed_imports or text != source:  # a file with nothing translated stays byte-identical
        is_source = ctx.imports.is_source
        module = add_imports(module, ctx.needed_imports, direction.import_order, is_source)
        module, text = prune_imports(module, ctx.imports.source_aliases(), is_source, layout.text,
                                      layout.statement_text, ctx.needed_imports)
    ctx.findings.sort(key=lambda f: (f.line, f.column))
    status = Status.CONVERTED if text != source else Status.UNCHANGED
    return FileResult(path, status, source, text, ctx.findings, ctx.layers, ctx.version, direction.version_name,
                      list(ctx.models.values()))
