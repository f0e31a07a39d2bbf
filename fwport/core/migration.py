"""The migration overview: how far a tree's move off the source framework has got.

Per file, :func:`call_stats` counts the *source-framework call sites*: calls whose callee resolves,
through the file's imports, to a source-framework name of the direction (tf2torch: ``tf.reduce_sum(...)``,
``layers.Dense(...)``, ``keras.Sequential(...)``; a method call on an object such as
``model.fit(...)`` is not one). It counts them in the source and in the output: those still in the
output are the ones left untranslated (a call a rule refused or has no rule for comes back as
written). Over a run, :class:`Overview` adds them up: the share translated is
``(calls in the sources - calls left) / calls in the sources`` over the files that were
translated or looked at (a failed file is counted as failed, not in the share), and the APIs left
are ranked by how often they occur, with the files they occur in.

The count is one stdlib ``ast`` parse of the source and one of the output per file that mentions
the source framework: far cheaper than the translation itself. Nothing here imports a framework.
"""
from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass, field

from fwport.core.direction import Direction, default_direction, get_direction
from fwport.core.result import FileResult, Status

#: how many files are listed per API in the text and Markdown renderings (the JSON has them all)
FILES_SHOWN = 5


def count_source_calls(text: str, direction: Direction | None = None) -> Counter:
    """Canonical source-framework name -> number of call sites calling it in ``text``.

    Names are resolved through the file's ``import`` / ``from ... import`` statements (anywhere in
    the file); a name the file rebinds is not told apart (a cheap count, not the translator's scope
    analysis). Unparsable text counts nothing."""
    d = direction or get_direction(default_direction())
    counts: Counter = Counter()
    if not d.mentions.search(text):
        return counts
    try:
        tree = ast.parse(text.lstrip("\ufeff"))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return counts
    aliases: dict[str, str] = {}
    calls: list[ast.Call] = []
    try:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                calls.append(node)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        aliases[a.asname] = a.name
                    else:
                        head = a.name.split(".")[0]
                        aliases[head] = head
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    if a.name != "*":
                        aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    except RecursionError:
        return Counter()
    if not any(d.source.is_source(q) for q in aliases.values()):
        return counts
    for call in calls:
        parts: list[str] = []
        fn = call.func
        while isinstance(fn, ast.Attribute):
            parts.append(fn.attr)
            fn = fn.value
        if not isinstance(fn, ast.Name) or fn.id not in aliases:
            continue
        qualified = ".".join([aliases[fn.id], *reversed(parts)])
        if d.source.is_source(qualified):
            counts[d.source.canonical(qualified)] += 1
    return counts


def call_stats(source: str, output: str, direction: Direction | None = None) -> dict:
    """``{"source_calls": n, "calls_left": {api: n}}`` for one file (see the module's docstring)."""
    found = count_source_calls(source, direction)
    total = sum(found.values())
    left = count_source_calls(output, direction) if output != source else found
    return {"source_calls": total, "calls_left": dict(sorted(left.items()))}


@dataclass
class Overview:
    """What a lead wants to know of a migration branch, added up one file at a time."""

    translated: int = 0
    unchanged: int = 0
    attention: int = 0
    failed: int = 0
    skipped: int = 0
    source_calls: int = 0
    calls_left: int = 0
    apis: dict[str, dict[str, int]] = field(default_factory=dict)  # api -> {path: count}

    def add(self, r: FileResult, extra: dict | None = None) -> None:
        if r.status is Status.FAILED:
            self.failed += 1
            return
        if r.status is Status.SKIPPED:
            self.skipped += 1
            return
        if r.needs_attention:
            self.attention += 1
        elif r.status is Status.CONVERTED:
            self.translated += 1
        else:
            self.unchanged += 1
        extra = extra or {}
        left = extra.get("calls_left") or {}
        self.source_calls += int(extra.get("source_calls") or 0)
        self.calls_left += sum(left.values())
        for api, n in left.items():
            self.apis.setdefault(api, {})[r.path] = self.apis.get(api, {}).get(r.path, 0) + n

    @property
    def share(self) -> float | None:
        """The share of source-framework call sites translated; None when there were none."""
        if not self.source_calls:
            return None
        return max(0, self.source_calls - self.calls_left) / self.source_calls

    def ranked(self) -> list[tuple[str, int, list[tuple[str, int]]]]:
        """``(api, count, [(file, count), ...])``, most frequent first (files likewise)."""
        rows = []
        for api, files in self.apis.items():
            by_file = sorted(files.items(), key=lambda kv: (-kv[1], kv[0]))
            rows.append((api, sum(files.values()), by_file))
        rows.sort(key=lambda row: (-row[1], row[0]))
        return rows

    def to_dict(self) -> dict:
        share = self.share
        return {
            "files": {"translated": self.translated, "unchanged": self.unchanged,
                      "needs_attention": self.attention, "failed": self.failed, "skipped": self.skipped},
            "calls": {"in_sources": self.source_calls, "translated": self.source_calls - min(self.calls_left, self.source_calls),
                      "left": self.calls_left, "share_translated": None if share is None else round(share, 4)},
            "untranslated_apis": [{"api": api, "count": n, "files": [{"path": p, "count": c} for p, c in files]}
                                  for api, n, files in self.ranked()],
        }

    def render_text(self) -> str:
        out = ["fwport: migration overview",
               f"  files: {self.translated} translated, {self.unchanged} unchanged, "
               f"{self.attention} need attention, {self.failed} failed" + (f", {self.skipped} skipped" if self.skipped else ""),
               f"  source-framework call sites translated: {_share_text(self)}"]
        rows = self.ranked()
        if rows:
            out.append("  untranslated APIs (call sites left, by count):")
            width = max(len(str(n)) for _, n, _ in rows)
            for api, n, files in rows:
                out.append(f"    {n:>{width}}  {api}  ({_files_text(files)})")
        return "\n".join(out) + "\n"

    def render_markdown(self) -> str:
        out = ["## Overview", "",
               "| files | translated | unchanged | need attention | failed |" + (" skipped |" if self.skipped else ""),
               "|---:|---:|---:|---:|---:|" + ("---:|" if self.skipped else ""),
               f"| {self.translated + self.unchanged + self.attention + self.failed + self.skipped} | {self.translated} | "
               f"{self.unchanged} | {self.attention} | {self.failed} |" + (f" {self.skipped} |" if self.skipped else ""),
               "", f"Source-framework call sites translated: **{_share_text(self)}**.", ""]
        rows = self.ranked()
        if rows:
            out += ["### Untranslated APIs", "", "| API | call sites | files |", "|---|---:|---|"]
            for api, n, files in rows:
                shown = ", ".join(f"`{p}` ({c})" for p, c in files[:FILES_SHOWN])
                more = f", and {len(files) - FILES_SHOWN} more" if len(files) > FILES_SHOWN else ""
                out.append(f"| `{api}` | {n} | {shown}{more} |")
            out.append("")
        return "\n".join(out) + "\n"


def _share_text(o: Overview) -> str:
    share = o.share
    if share is None:
        return "none in the sources"
    done = o.source_calls - min(o.calls_left, o.source_calls)
    return f"{share:.1%} ({done} of {o.source_calls}; {o.calls_left} left)"


def _files_text(files: list[tuple[str, int]]) -> str:
    shown = ", ".join(f"{p}: {c}" if c > 1 else p for p, c in files[:FILES_SHOWN])
    return shown + (f", and {len(files) - FILES_SHOWN} more files" if len(files) > FILES_SHOWN else "")


# --- re-rendering a saved report (fwport report) ---------------------------------------------------
class ReportError(Exception):
    """A saved report that cannot be read: the message names the file and what is wrong."""


_RESULT_KEYS = ("path", "status", "findings", "needs_attention")


def replay(path: str, writer) -> int:
    """Feed the files of a saved JSON report (``--report FILE.json``) to a report writer, as the
    run that wrote it did, and return the exit code that run had."""
    import json

    from fwport.core.finding import Finding
    from fwport.core.report import Summary

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: cannot read it ({e})") from None
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}: not JSON (line {e.lineno}: {e.msg}); "
                          "is it a complete `fwport tf2torch --report` file?") from None
    if not isinstance(data, dict) or data.get("tool") != "fwport" or not isinstance(data.get("files"), list):
        raise ReportError(f"{path}: not an fwport report (written by `fwport tf2torch --report FILE.json`)")
    summary = Summary()
    results = []
    for entry in data["files"]:
        try:
            r = FileResult(entry["path"], Status(entry["status"]),
                           findings=[Finding.from_dict(f) for f in entry.get("findings", [])])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ReportError(f"{path}: a file entry is malformed ({type(e).__name__}: {e})") from None
        results.append((r, {k: v for k, v in entry.items() if k not in _RESULT_KEYS}))
    saved = data.get("summary") if isinstance(data.get("summary"), dict) else {}
    writer.start()
    for r, extra in results:
        summary.add(r, extra)
        writer.add(r, extra)
    writer.finish(summary, bool(saved.get("check")))
    code = saved.get("exit_code")
    return code if code in (0, 1, 2) else summary.exit_code()
