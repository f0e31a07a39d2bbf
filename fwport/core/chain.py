"""Chained directions: ``fwport tf2jax`` is tf2torch, then torch2jax on its output, in one command.

The registry names a chain's stages (``fwport/packs/__init__.py``, ``CHAINS``); its :class:`Direction` is
composed from theirs (``direction.chained``). Each stage is an ordinary translation
(``pipeline.translate_source``) of the previous stage's output; the driver (files, trees, notebooks,
workers, atomic writes, reports: runner.py) is the one every direction uses.

Findings are reported in the original file: a later stage's finding sits on a line of the text it read
(the previous stage's output), mapped back through each earlier stage by a line diff of that stage's
input and output. A line the earlier stage kept maps exactly; a line it rewrote maps onto the source
line(s) it replaced; a line it wrote out of nothing (a helper class, a generated loop) onto the source
line it was inserted at, the message then saying which line of the intermediate text holds it. Every
finding's rule names its stage (``[torch2jax/lstm]``, or ``[torch2jax]`` without a rule), so
``fwport rules show torch2jax/lstm`` finds it.
"""
from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path

from fwport.core.finding import Finding, Severity
from fwport.core.result import FileResult, Status


def stage_rule_dirs(stage: str, extra_dirs: tuple[str, ...], stages: tuple[str, ...]) -> tuple[str, ...]:
    """The extra rule folders of one stage: ``<dir>/<stage>/`` folders, and flat folders (no subfolder
    named after any stage) for the first stage, whose source they are written for."""
    out = []
    for d in extra_dirs:
        if (Path(d) / stage).is_dir():
            out.append(d)
        elif stage == stages[0] and not any((Path(d) / s).is_dir() for s in stages):
            out.append(d)
    return tuple(out)


class LineMap:
    """Lines of a stage's output → lines of its input (1-based), from a diff of the two texts."""

    def __init__(self, before: str, after: str):
        a, b = before.splitlines(), after.splitlines()
        self.n_before, self.after = len(a), b
        self.blocks = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()

    def forward(self, line: int, like: str = "") -> int:
        """The output line an input line became (1-based): itself when kept; else, of the lines that
        replaced it, the one holding ``like`` (the code it stood above), or most like it; the line after,
        where it was removed."""
        k = line - 1
        for tag, i1, i2, j1, j2 in self.blocks:
            if i1 <= k < i2:
                if tag == "equal":
                    return j1 + (k - i1) + 1
                if tag == "replace" and like and j2 > j1 + 1:
                    needle = like.strip().rstrip(",")
                    return max(range(j1, j2), key=lambda j: (needle in self.after[j], difflib.SequenceMatcher(
                        None, needle, self.after[j].strip()).ratio(), -j)) + 1
                return j1 + 1
        return max(self.blocks[-1][4], 1) if self.blocks else 1

    def back(self, line: int) -> tuple[int, bool]:
        """(the input line, whether the output line is that line unchanged)."""
        if line <= 0:
            return line, True
        k = line - 1
        for tag, i1, i2, j1, j2 in self.blocks:
            if j1 <= k < j2:
                if tag == "equal":
                    return i1 + (k - j1) + 1, True
                if i2 > i1:  # rewritten: the source line at the same offset, within what it replaced
                    return i1 + min(k - j1, i2 - i1 - 1) + 1, False
                return min(i1 + 1, max(self.n_before, 1)), False  # written out of nothing: where it was inserted
        return max(self.n_before, 1), False


def translate_chain(text: str, path: str, stages: list[tuple[str, object, dict]]) -> FileResult:
    """Translate ``text`` through ``stages`` (``(name, loaded rule pack, options)`` each, in order); the
    result is the last stage's output with every stage's findings located in ``text``."""
    from fwport.core.pipeline import translate_source

    texts = [text]
    maps: list[LineMap] = []
    findings: list[Finding] = []
    first: FileResult | None = None
    for k, (name, pack, options) in enumerate(stages):
        r = translate_source(texts[-1], path, pack, options)
        if first is None:
            first = r
        findings += [_located(f, name, maps, [s[0] for s in stages[:k]]) for f in r.findings]
        if r.status is Status.FAILED:
            if k > 0:  # the earlier stage wrote something this one cannot read: fwport's bug, not the user's
                findings.append(Finding(Severity.ERROR, "internal-error", f"the {stages[k - 1][0]} output could not be "
                                        f"read by {name}; the file was left as it was; please report it with this file", path))
            return FileResult(path, Status.FAILED, text, text, findings, first.layers, first.version,
                              first.version_name, first.models)
        output = _keep_comments(texts[-1], r.output) if k > 0 else r.output
        maps.append(LineMap(texts[-1], output))
        texts.append(output)
    findings.sort(key=lambda f: (f.line, f.column))
    status = Status.CONVERTED if texts[-1] != text else Status.UNCHANGED
    return FileResult(path, status, text, texts[-1], findings, first.layers, first.version, first.version_name,
                      first.models)


_MARK = "# fwport:"


def _keep_comments(before: str, after: str) -> str:
    """An earlier stage's ``# fwport:`` comments that this stage dropped (a multi-line call it wrote on
    one line loses the comments inside) put back above the line their code became, with its indent:
    the output must say what was left untranslated. Not where it would land inside a string (the
    program's syntax tree must stay the same)."""
    import ast

    lost = [i for i, line in enumerate(before.splitlines(), 1) if line.lstrip().startswith(_MARK)]
    kept = {line.strip() for line in after.splitlines() if line.lstrip().startswith(_MARK)}
    lines = before.splitlines()
    lost = [i for i in lost if lines[i - 1].strip() not in kept]
    if not lost:
        return after
    m = LineMap(before, after)
    out = after.splitlines(keepends=True)
    newline = "\r\n" if after.endswith("\r\n") else "\n"

    def code_below(i: int) -> str:  # the line of code the comment stands above
        return next((ln for ln in lines[i:] if ln.strip() and not ln.lstrip().startswith("#")), "")

    places = {i: m.forward(i, code_below(i)) for i in lost}
    for i in sorted(lost, key=lambda i: (-places[i], -i)):  # bottom up: earlier insertions keep their lines
        j = min(places[i], len(out) + 1)
        target = out[j - 1] if j <= len(out) else ""
        indent = target[: len(target) - len(target.lstrip())] if target.strip() else ""
        out.insert(j - 1, indent + lines[i - 1].strip() + newline)
    new = "".join(out)
    try:
        same = ast.dump(ast.parse(new)) == ast.dump(ast.parse(after))
    except (SyntaxError, ValueError, RecursionError):
        same = False
    return new if same else after


def _located(f: Finding, stage: str, maps: list[LineMap], earlier: list[str]) -> Finding:
    """A stage's finding with its stage named and its line moved back to the original text."""
    rule = f"{stage}/{f.rule}" if f.rule else stage
    line, exact, note = f.line, True, ""
    for m, name in zip(reversed(maps), reversed(earlier)):
        source_line, same = m.back(line)
        if not same and exact:
            note = f" (line {line} of the {name} output)"
            exact = False
        line = source_line
    return dataclasses.replace(f, rule=rule, line=line, column=f.column if exact else 0, message=f.message + note)
