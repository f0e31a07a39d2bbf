"""The translation pipeline for one source text:

parse → resolve names → structural passes → rule pass → residue scan → ``# fwport:`` comments →
imports fixed → text. Every step appends findings; the result is a :class:`FileResult`.
"""
from __future__ import annotations

import io
import re
import tokenize
from collections import defaultdict

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from fwport.context import FileContext
from fwport.engine import RuleTransformer
from fwport.finding import Finding, Severity
from fwport.imports import fix_imports
from fwport.names import collect_imports
from fwport.passes import PASSES, decorators
from fwport.residue import scan_residue
from fwport.result import FileResult, Status
from fwport.rule import Pack, load_pack

_MENTIONS = re.compile(r"\b(tensorflow|keras|tf_keras)\b")
_KERAS2_HINTS = re.compile(r"\btf_keras\b|\bexperimental\.preprocessing\b|\blr\s*=|\.fit_generator\(|"
                           r"\bLeakyReLU\(\s*alpha\s*=|\btf\.compat\.v1\b|\bkeras\.engine\b")


def mentions_source(text: str) -> bool:
    return _MENTIONS.search(text) is not None


def detect_keras_version(text: str, forced: int | None = None) -> tuple[int, str]:
    """Which Keras the file was written for: 3 unless the file shows Keras 2 (or it is forced)."""
    if forced in (2, 3):
        return forced, "set by option"
    m = re.search(r"#\s*fwport:\s*keras\s*=\s*([23])", text)
    if m:
        return int(m.group(1)), "set by a '# fwport: keras=N' comment"
    m = _KERAS2_HINTS.search(text)
    if m:
        return 2, f"Keras 2 usage: {m.group(0).strip()!r}"
    return 3, "no Keras 2 usage found"


def _locate(tree: cst.Module, ctx: FileContext) -> None:
    """Give the findings a pass left pending their line and column in that pass's input tree."""
    if not ctx.pending:
        return
    positions = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
    error_lines = {f.line for f in ctx.findings if f.severity is Severity.ERROR}
    for p in ctx.pending:
        pos = positions.get(p.node) if p.node is not None else None
        line, col = (pos.start.line, pos.start.column + 1) if pos else (0, 0)
        if p.finding.code == "residue" and line in error_lines:
            continue  # that line already has an error saying what was left untranslated
        ctx.findings.append(p.finding.located(ctx.path, line, col))
        if p.comment and line:
            ctx.options.setdefault("_comments", defaultdict(list))[line].append(p.finding)
    ctx.pending.clear()


def _string_lines(text: str) -> set[int]:
    """Lines that lie inside a multi-line string (never insert a comment there)."""
    inside: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                inside.update(range(tok.start[0] + 1, tok.end[0] + 1))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return inside


def insert_comments(text: str, comments: dict[int, list[Finding]]) -> str:
    """Put ``# fwport: code: message`` above each line that has an error finding."""
    lines = text.splitlines(keepends=True)
    no_go = _string_lines(text)
    for line in sorted(comments, reverse=True):
        target = line
        while target > 1 and lines[target - 2].rstrip("\r\n").endswith("\\"):
            target -= 1
        if target in no_go or target > len(lines):
            continue
        current = lines[target - 1]
        indent = current[: len(current) - len(current.lstrip())]
        eol = "\r\n" if current.endswith("\r\n") else "\n"
        new = []
        seen = set()
        for f in comments[line]:
            c = f"{indent}# fwport: {f.code}: {f.message}".rstrip()
            if c in seen:
                continue
            seen.add(c)
            # already there (the file was translated before): keep the fixpoint
            if any(l.rstrip("\r\n") == c for l in lines[max(0, target - 1 - 8): target - 1]):
                continue
            new.append(c + eol)
        lines[target - 1: target - 1] = new
    return "".join(lines)


def translate_source(source: str, path: str = "<string>", pack: Pack | None = None,
                     options: dict | None = None) -> FileResult:
    """Translate one TensorFlow/Keras source text to PyTorch. Never raises on user input."""
    options = dict(options or {})
    if not mentions_source(source):
        return FileResult(path, Status.UNCHANGED, source, source)
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as e:
        f = Finding(Severity.ERROR, "parse-error", f"not valid Python 3: {e.message}", path,
                    e.raw_line, e.raw_column + 1)
        return FileResult(path, Status.FAILED, source, source, [f])
    imports = collect_imports(module)
    if not imports.source_aliases():
        return FileResult(path, Status.UNCHANGED, source, source)
    version, why = detect_keras_version(source, options.get("keras"))
    pack = pack or load_pack("tf2torch")
    ctx = FileContext(path, pack, imports, version, options)
    ctx.findings.append(Finding(Severity.INFO, "keras-version", f"translating as Keras {version} code ({why})", path))

    for run_pass in PASSES:
        new = run_pass(module, ctx)
        _locate(module, ctx)
        module = new
    new = module.visit(RuleTransformer(ctx))
    _locate(module, ctx)
    module = new
    scan_residue(module, ctx)
    _locate(module, ctx)

    text = module.code
    comments = ctx.options.pop("_comments", None)
    if comments:
        text = insert_comments(text, comments)
        module = cst.parse_module(text)
    # steps that remove lines run only now, once every finding is located and every comment placed
    module = decorators.finish(module, ctx)
    text = module.code
    if ctx.needed_imports or text != source:
        module = fix_imports(module, ctx.needed_imports)
        text = module.code
    ctx.findings.sort(key=lambda f: (f.line, f.column))
    status = Status.CONVERTED if text != source else Status.UNCHANGED
    return FileResult(path, status, source, text, ctx.findings, ctx.layers, version, list(ctx.models.values()))
