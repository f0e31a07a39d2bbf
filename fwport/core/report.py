"""Rendering results as text, JSON and Markdown. The library computes; this module only formats.

Reports stream: a writer takes one file's result at a time, so a run over a huge tree never holds
every result at once. The rule catalogue (``fwport rules``, the generated rule reference) is
rendered here too, so the command line and the docs show a rule the same way.
"""
from __future__ import annotations

import difflib
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import IO, Iterable

from fwport.core.finding import Finding, Severity
from fwport.core.migration import Overview
from fwport.core.result import FileResult, Status

SEVERITIES = (Severity.ERROR, Severity.WARNING, Severity.INFO)


# --- the summary ------------------------------------------------------------------------------------
@dataclass
class Summary:
    """What a run did. Every file is counted once, in its worst category."""

    translated: int = 0
    unchanged: int = 0
    attention: int = 0  # translated or not, at least one error finding: a human must look
    failed: int = 0
    skipped: int = 0
    would_change: int = 0  # --check: files whose translation differs from the file
    copied: int = 0  # -o DIR: the other files of the tree, copied as they are (not counted in files)
    findings: dict[str, int] = field(default_factory=lambda: {s.value: 0 for s in SEVERITIES})
    attention_paths: list[str] = field(default_factory=list)
    failed_paths: list[str] = field(default_factory=list)
    overview: Overview = field(default_factory=Overview)  # fed by the call counts of ``extra``

    def add(self, r: FileResult, extra: dict | None = None) -> None:
        self.overview.add(r, extra)
        for f in r.findings:
            self.findings[f.severity.value] += 1
        if r.status is Status.FAILED:
            self.failed += 1
            self.failed_paths.append(r.path)
        elif r.status is Status.SKIPPED:
            self.skipped += 1
        elif r.needs_attention:
            self.attention += 1
            self.attention_paths.append(r.path)
        elif r.status is Status.CONVERTED:
            self.translated += 1
        else:
            self.unchanged += 1
        if r.status is Status.CONVERTED:
            self.would_change += 1

    @property
    def files(self) -> int:
        return self.translated + self.unchanged + self.attention + self.failed + self.skipped

    def exit_code(self, check: bool = False) -> int:
        """2: a file could not be handled; 1: a human must look (or --check found a change); 0: clean."""
        if self.failed:
            return 2
        if self.attention or (check and self.would_change):
            return 1
        return 0

    def to_dict(self) -> dict:
        return {"files": self.files, "translated": self.translated, "unchanged": self.unchanged,
                "needs_attention": self.attention, "failed": self.failed, "skipped": self.skipped,
                "would_change": self.would_change, "copied": self.copied, "findings": dict(self.findings)}


def render_summary(s: Summary, check: bool = False) -> str:
    parts = [f"{s.translated} translated", f"{s.unchanged} unchanged", f"{s.attention} need attention",
             f"{s.failed} failed"]
    if s.skipped:
        parts.append(f"{s.skipped} skipped")
    found = ", ".join(f"{n} {sev}{'s' if n != 1 and sev != 'info' else ''}" for sev, n in s.findings.items())
    copied = f"; {s.copied} other file{'s' if s.copied != 1 else ''} copied" if s.copied else ""
    line = f"fwport: {s.files} file{'s' if s.files != 1 else ''}: {', '.join(parts)}{copied}; findings: {found}"
    if check:
        line += f"; {s.would_change} would change"
    return line


# --- streaming report writers ---------------------------------------------------------------------------
class Report:
    """A report over many files: ``add`` each result as it arrives, then ``finish``."""

    def __init__(self, stream: IO[str], min_severity: Severity = Severity.INFO):
        self.stream = stream
        self.shown = SEVERITIES[: SEVERITIES.index(min_severity) + 1]

    def visible(self, r: FileResult) -> list[Finding]:
        return [f for f in r.findings if f.severity in self.shown]

    def start(self) -> None:
        pass

    def add(self, r: FileResult, extra: dict | None = None) -> None:
        raise NotImplementedError

    def finish(self, s: Summary, check: bool = False) -> None:
        raise NotImplementedError


class TextReport(Report):
    """Findings as they arrive; at the end, for a run over several files, the migration overview
    (a stream cannot start with totals), then the one-line summary."""

    def add(self, r: FileResult, extra: dict | None = None) -> None:
        for f in self.visible(r):
            self.stream.write(f.render() + "\n")

    def finish(self, s: Summary, check: bool = False) -> None:
        if s.files > 1:
            self.stream.write(s.overview.render_text())
        self.stream.write(render_summary(s, check) + "\n")


class _Spooled(Report):
    """A report whose body is kept in a temporary file until ``finish`` writes the whole document,
    overview first: memory stays flat however many files there are."""

    def start(self) -> None:
        self.spool = tempfile.TemporaryFile("w+", encoding="utf-8")

    def copy_spool(self) -> None:
        self.spool.seek(0)
        shutil.copyfileobj(self.spool, self.stream)
        self.spool.close()


class JsonReport(_Spooled):
    """``{"tool", "version", "overview": {...}, "files": [...], "summary": {...}}``: the overview
    comes first (a dashboard reads it without the files); the files are spooled as they arrive."""

    def start(self) -> None:
        super().start()
        self.first = True

    def add(self, r: FileResult, extra: dict | None = None) -> None:
        d = r.to_dict()
        d["findings"] = [f.to_dict() for f in self.visible(r)]
        d.update(extra or {})
        self.spool.write(("" if self.first else ",\n") + json.dumps(d))
        self.first = False

    def finish(self, s: Summary, check: bool = False) -> None:
        from fwport import __version__
        self.stream.write(f'{{"tool": "fwport", "version": {json.dumps(__version__)}, '
                          f'"overview": {json.dumps(s.overview.to_dict())}, "files": [\n')
        self.copy_spool()
        summary = {**s.to_dict(), "check": check, "exit_code": s.exit_code(check)}
        self.stream.write(f'\n], "summary": {json.dumps(summary)}}}\n')


class MarkdownReport(_Spooled):
    """The overview and what needs a human first, then a log of every file with findings."""

    def add(self, r: FileResult, extra: dict | None = None) -> None:
        shown = self.visible(r)
        if not shown and r.status is not Status.FAILED:
            return
        self.spool.write(f"### `{r.path}` ({r.status.value})\n\n")
        if shown:
            self.spool.write("| line | severity | code | message | rule |\n|---:|---|---|---|---|\n")
            for f in shown:
                self.spool.write(f"| {f'cell {f.cell}:' if f.cell else ''}{f.line or ''} | {f.severity.value} | `{f.code}` | {_md_cell(f.message)} | "
                                 f"{f.rule} |\n")
            self.spool.write("\n")

    def finish(self, s: Summary, check: bool = False) -> None:
        self.stream.write("# fwport report\n\n" + s.overview.render_markdown() + "\n")
        self.stream.write("## Summary\n\n" + render_summary(s, check).removeprefix("fwport: ") + "\n\n")
        if s.failed_paths or s.attention_paths:
            self.stream.write("## Needs attention\n\n")
            for p in s.failed_paths:
                self.stream.write(f"- `{p}`: failed\n")
            for p in s.attention_paths:
                self.stream.write(f"- `{p}`: error findings\n")
            self.stream.write("\n")
        self.stream.write("## Files\n\n")
        self.copy_spool()


REPORTS = {"text": TextReport, "json": JsonReport, "markdown": MarkdownReport}


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# --- the rule catalogue -----------------------------------------------------------------------------
def rule_target(rule) -> str:
    e = rule.emit
    if "target" in e:
        return e["target"]
    if "method" in e:
        return f"<{e['self_arg']}>.{e['method']}(...)"
    return f"(transform {e['transform']})"


def example_diff(before: str, after: str) -> str:
    """An example as a unified diff showing the whole program."""
    a, b = before.strip("\n").splitlines(keepends=True), after.strip("\n").splitlines(keepends=True)
    if a and not a[-1].endswith("\n"):
        a[-1] += "\n"
    if b and not b[-1].endswith("\n"):
        b[-1] += "\n"
    lines = list(difflib.unified_diff(a, b, "before", "after", n=max(len(a), len(b))))
    return "".join(lines) if lines else "".join(a)


def _arg_detail(spec) -> str:
    if spec.verb == "rename":
        return f"→ {spec.value}"
    if spec.verb == "transform":
        return spec.value + (f" → {spec.to}" if spec.to else "")
    detail = spec.value
    if spec.supported_values:
        detail += f" (supported values: {', '.join(map(repr, spec.supported_values))})"
    if spec.unsupported_values:
        detail += f" (unsupported values: {', '.join(map(repr, spec.unsupported_values))})"
    if spec.aliases:
        detail += f" (also spelled {', '.join(spec.aliases)})"
    return detail


def render_rule_list(rules: Iterable, pack: str) -> str:
    rules = sorted(rules, key=lambda r: r.id)
    out = [f"{pack}: {len(rules)} rule{'s' if len(rules) != 1 else ''}"]
    width = max((len(r.id) for r in rules), default=0)
    for r in rules:
        names = ", ".join(r.names)
        out.append(f"  {r.id.ljust(width)}  {names} → {rule_target(r)}")
        out.append(f"  {' ' * width}  {r.summary}")
    return "\n".join(out) + "\n"


def render_rule_text(rule) -> str:
    out = [f"{rule.pack}/{rule.id}: {rule.summary}", f"  file:    {rule.path}", f"  kind:    {rule.kind}",
           f"  source:  {', '.join(rule.names)}", f"  target:  {rule_target(rule)}"]
    if rule.emit.get("lazy"):
        out.append(f"           (when the input size is unknown: {rule.emit['lazy']})")
    if rule.args:
        out.append("\nArguments")
        w = max(len(n) for n in rule.args)
        for name, spec in rule.args.items():
            out.append(f"  {name.ljust(w)}  {spec.verb.ljust(11)}  {_arg_detail(spec)}")
    if rule.defaults:
        out.append("\nDefaults that differ (value when the argument is omitted)")
        for d in rule.defaults.values():
            k2 = f", Keras 2: {d.keras2}" if d.keras2 else ""
            out.append(f"  {d.name}: source {d.source}{k2}; target {d.target or '(no such parameter)'}"
                       f"{'; the source value is pinned in the output' if d.pin else ''}")
    if rule.weights:
        out.append("\nWeights (source variable → target parameter: array operations)")
        for wm in rule.weights:
            when = f" [when {wm.when}]" if wm.when else ""
            out.append(f"  {wm.source} → {wm.target}{when}: {', '.join(op.render() for op in wm.ops)}")
    if rule.notes.strip():
        out.append("\nNotes")
        out.extend("  " + line for line in rule.notes.strip().splitlines())
    for title, items in (("Examples", rule.examples), ("Known gaps (xfail)", rule.xfail)):
        if items:
            out.append(f"\n{title}")
            for ex in items:
                meta = []
                if ex.findings:
                    meta.append(f"findings: {', '.join(ex.findings)}")
                if ex.keras:
                    meta.append(f"Keras {ex.keras}")
                if ex.reason:
                    meta.append(ex.reason)
                out.append(f"  {ex.name}" + (f"  ({'; '.join(meta)})" if meta else ""))
                out.extend("    " + line for line in example_diff(ex.before, ex.after).splitlines())
    if rule.unchanged:
        out.append("\nLeft unchanged")
        for ex in rule.unchanged:
            out.append(f"  {ex.name}")
            out.extend("    " + line for line in ex.before.strip("\n").splitlines())
    return "\n".join(out) + "\n"


def render_rule_markdown(rule, heading: str = "##") -> str:
    out = [f"{heading} `{rule.id}`", "", rule.summary, "",
           f"- source: {', '.join(f'`{n}`' for n in rule.names)}", f"- target: `{rule_target(rule)}`",
           f"- kind: {rule.kind}"]
    if rule.emit.get("lazy"):
        out.append(f"- when the input size is unknown: `{rule.emit['lazy']}`")
    out.append(f"- file: `rules/{rule.pack}/{rule.id}.toml`")
    out.append("")
    if rule.args:
        out += ["| argument | verb | detail |", "|---|---|---|"]
        out += [f"| `{n}` | {s.verb} | {_md_cell(_arg_detail(s))} |" for n, s in rule.args.items()]
        out.append("")
    if rule.defaults:
        out += ["Defaults that differ (the value when the argument is omitted):", "",
                "| argument | source | target | pinned |", "|---|---|---|---|"]
        for d in rule.defaults.values():
            src = d.source + (f" (Keras 2: {d.keras2})" if d.keras2 else "")
            out.append(f"| `{d.name}` | `{src}` | {f'`{d.target}`' if d.target else '—'} | {'yes' if d.pin else 'no'} |")
        out.append("")
    if rule.weights:
        out += ["Weights:", "", "| source | target | when | ops |", "|---|---|---|---|"]
        for wm in rule.weights:
            out.append(f"| `{wm.source}` | `{wm.target}` | {wm.when or ''} | "
                       f"{', '.join(f'`{op.render()}`' for op in wm.ops)} |")
        out.append("")
    if rule.notes.strip():
        out += [rule.notes.strip(), ""]
    for title, items in (("Examples", rule.examples), ("Known gaps (xfail)", rule.xfail)):
        for ex in items:
            meta = []
            if ex.findings:
                meta.append("findings: " + ", ".join(f"`{c}`" for c in ex.findings))
            if ex.keras:
                meta.append(f"Keras {ex.keras}")
            if ex.reason:
                meta.append(ex.reason)
            out.append(f"{title[:-1] if title == 'Examples' else 'Known gap'} `{ex.name}`"
                       + (f" ({'; '.join(meta)})" if meta else "") + ":")
            out += ["", "```diff", example_diff(ex.before, ex.after).rstrip("\n"), "```", ""]
    for ex in rule.unchanged:
        out += [f"Left unchanged `{ex.name}`:", "", "```python", ex.before.strip("\n"), "```", ""]
    return "\n".join(out)
