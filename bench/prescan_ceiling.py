"""The ceiling of an `ast` pre-scan (issue 7, "Parse only what changes, if it pays"): how many top-level
statements, and lines, of a corpus mention nothing fwport could act on, so that libcst need not parse them.

    python bench/prescan_ceiling.py                       # tf2torch fixtures, ~20k lines of keras/src
    python bench/prescan_ceiling.py --keras-lines 0 --corpus /tmp/kio/examples --corpus /tmp/crash/tf

A top-level statement (its decorators included) is *relevant* under three nested definitions, each a
superset of the one before; the statements relevant under none are *inert* (what a pre-scan could keep as
text). All names are read with stdlib `ast` (`Name` ids, `Attribute` attributes, imported and defined names,
keyword argument names):

- names:    it is an import, or it mentions a name the file binds by importing a source module
            (tensorflow, keras, tf_keras, the SOURCE_MODULES) or a free conventional alias (`tf`, `keras`);
            then, to a fixpoint, it shares any name (read or bound) with a relevant statement: the names
            bound to framework values further up, the functions and classes relevant code calls, the
            constants its sizes read, the functions that call relevant ones.
- triggers: + its text matches a planner's trigger (the planners run where their trigger matches the
            file; a statement matching one may be what they act on) or holds `**` (spread.expand).
- methods:  + it mentions (as an attribute or keyword) an identifier that the tf2torch pack's code
            compares with: every identifier-shaped string literal in fwport/packs/tf2torch (the method names
            the planners act on for untyped values: `fit`, `numpy`, `shape`, ...; a superset).
The fixpoint runs after each widening. Prints, per corpus: files, files with no source import (fwport
parses these and returns them as they are), statements and lines, and the inert share under each definition.

`--time N` also runs the prototype (`prescanned`): each inert statement replaced by a string statement of the
same lines, the text translated, the statements spliced back; it counts the files whose output, status and
findings are the plain translation's and times both (docs/architecture.md, Performance, speedD: not adopted).
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_translate import _files, keras_src  # noqa: E402
from fwport.core.direction import get_direction  # noqa: E402
from fwport.packs.tf2torch import SOURCE_MODULES, SOURCE_ROOTS  # noqa: E402

SOURCES = set(SOURCE_ROOTS) | set(SOURCE_MODULES)
IDENT = re.compile(r"[A-Za-z_]\w*\Z")


def pack_identifiers() -> set[str]:
    """Every identifier-shaped string literal in the tf2torch pack's code."""
    out: set[str] = set()
    for p in (ROOT / "fwport" / "packs" / "tf2torch").rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and IDENT.match(node.value):
                out.add(node.value)
    return out


def _names(stmt: ast.stmt) -> tuple[set[str], set[str]]:
    """(names: Name ids, defined and imported names; attrs: attribute names and keyword names)."""
    names, attrs = set(), set()
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name):
            names.add(n.id)
        elif isinstance(n, ast.Attribute):
            attrs.add(n.attr)
        elif isinstance(n, ast.keyword) and n.arg:
            attrs.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.alias):
            names.add((n.asname or n.name).split(".")[0])
    return names, attrs


def _span(stmt: ast.stmt) -> tuple[int, int]:
    first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
    return first, stmt.end_lineno or stmt.lineno


def classify(text: str, triggers, methods: set[str], keep: list | None = None) \
        -> tuple[int, int, list[int], list[int], bool] | None:
    """(statements, their lines, inert statements per level, inert lines per level, whether it imports a source
    module); None: not Python 3."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    lines = text.splitlines()
    stmts = tree.body
    info = [_names(s) for s in stmts]
    spans = [_span(s) for s in stmts]
    texts = ["\n".join(lines[a - 1:b]) for a, b in spans]
    source_names = {"tf", "keras"}
    has_src = False
    for s in ast.walk(tree):
        if isinstance(s, ast.Import):
            for a in s.names:
                if a.name.split(".")[0] in SOURCES:
                    has_src = True
                    source_names.add(a.asname or a.name.split(".")[0])
        elif isinstance(s, ast.ImportFrom) and s.module and s.level == 0 and s.module.split(".")[0] in SOURCES:
            has_src = True
            source_names.update(a.asname or a.name for a in s.names)
    relevant = [isinstance(s, (ast.Import, ast.ImportFrom)) or bool(info[i][0] & source_names)
                for i, s in enumerate(stmts)]

    def close() -> None:
        seen: set[str] = set()
        for i, r in enumerate(relevant):
            if r:
                seen |= info[i][0]
        changed = True
        while changed:
            changed = False
            for i, r in enumerate(relevant):
                if not r and info[i][0] & seen:
                    relevant[i] = True
                    seen |= info[i][0]
                    changed = True

    inert_n, inert_l = [], []
    for level in range(3):
        if level == 1:
            relevant[:] = [r or "**" in texts[i] or any(t.search(texts[i]) for t in triggers)
                           for i, r in enumerate(relevant)]
        elif level == 2:
            relevant[:] = [r or bool(info[i][1] & methods) for i, r in enumerate(relevant)]
        close()
        inert = [i for i, r in enumerate(relevant) if not r]
        inert_n.append(len(inert))
        inert_l.append(sum(spans[i][1] - spans[i][0] + 1 for i in inert))
    if keep is not None:  # the text with each inert statement that has its lines to itself as a marker string
        out, pieces = list(lines), {}
        for i in reversed(inert):
            a, b = spans[i]
            if (i and spans[i - 1][1] >= a) or (i + 1 < len(spans) and spans[i + 1][0] <= b):
                continue  # shares a line with another statement (`a = 1; b = 2`)
            marker = f'"""fwport-inert-{i}' + "\n" * (b - a) + '"""'  # a string statement of the same lines
            pieces[marker] = "\n".join(lines[a - 1:b])
            out[a - 1:b] = [marker]
        keep.append(("\n".join(out) + ("\n" if text.endswith("\n") else ""), pieces))
    return len(stmts), sum(b - a + 1 for a, b in spans), inert_n, inert_l, has_src


def splice(text: str, pieces: dict[str, str]) -> str | None:
    """The translation of a text with markers, each marker replaced by its statement as written; None where a
    marker is not in it exactly once (the pre-scan would translate the whole file then)."""
    for marker, original in pieces.items():
        if text.count(marker) != 1:
            return None
        text = text.replace(marker, original)
    return text


def prescanned(text: str, path: str, pack, triggers, methods):
    """The prototype: an `ast` scan, the inert statements as markers, libcst and fwport on the rest, spliced."""
    from fwport.core.pipeline import translate_source
    keep: list = []
    if classify(text, triggers, methods, keep) is None or not keep[0][1]:
        return translate_source(text, path, pack)
    reduced, pieces = keep[0]
    if not get_direction(pack.name).mentions.search(reduced):
        # the file-level gate read only what became a marker (`keras` in prose, `import keras_nlp` in the code:
        # /tmp/crash/tf's render_nlp_tags.py): it is the text as written that decides
        return translate_source(text, path, pack)
    r = translate_source(reduced, path, pack)
    out = splice(r.output, pieces)
    if out is None:
        return translate_source(text, path, pack)
    r.source, r.output = text, out
    return r


def timing(files, triggers, methods, best_of: int) -> None:
    import time
    from fwport.core.pipeline import translate_source
    from fwport.core.rule import load_pack
    pack = load_pack("tf2torch")
    texts = [t for _, t in files if get_direction("tf2torch").mentions.search(t)]
    texts = [t for t in texts if classify(t, triggers, methods) is not None]

    def run(batch, fn) -> float:
        best = float("inf")
        for _ in range(best_of):
            t0 = time.process_time()
            for t in batch:
                fn(t)
            best = min(best, time.process_time() - t0)
        return best

    same = 0
    for t in texts:  # identity (and the warm-up)
        a, b = translate_source(t, "x.py", pack), prescanned(t, "x.py", pack, triggers, methods)
        same += a.output == b.output and a.status == b.status and a.findings == b.findings
    full = part = scan = float("inf")
    for _ in range(best_of):  # alternately, so that a busy moment hits both alike
        full = min(full, run(texts, lambda t: translate_source(t, "x.py", pack)))
        part = min(part, run(texts, lambda t: prescanned(t, "x.py", pack, triggers, methods)))
        scan = min(scan, run(texts, ast.parse))
    print(f"    identical output, status and findings: {same}/{len(texts)} files; fwport {full:.2f} s, with the "
          f"pre-scan {part:.2f} s ({part / full - 1:+.1%}); ast.parse alone {scan:.2f} s ({scan / full:.1%} of fwport)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keras-lines", type=int, default=20_000, help="lines of keras/src (0: all)")
    ap.add_argument("--corpus", action="append", default=[], metavar="DIR", help="also a folder of .py files")
    ap.add_argument("--time", type=int, default=0, metavar="N",
                    help="also check and time (CPU, best of N) the prototype on each corpus: the inert statements "
                         "(+methods) replaced by a string statement of the same lines, translated, spliced back "
                         "(`prescanned`); against fwport as written, and stdlib ast.parse alone")
    a = ap.parse_args()
    direction = get_direction("tf2torch")
    triggers = [p.trigger for p in direction.planners]
    methods = pack_identifiers()
    parts = {"tf2torch fixtures": [(str(p), p.read_text(encoding="utf-8"))
                                   for p in sorted((ROOT / "fixtures" / "tf2torch").glob("*/model.py"))]}
    src = keras_src()
    if src is not None:
        parts["keras/src"] = _files(src, a.keras_lines)
    for folder in a.corpus:
        parts[folder] = _files(Path(folder), 0, skip_tests=False)
    print(f"{len(methods)} identifiers in the pack's string literals; {len(triggers)} planner triggers")
    print(f"{'corpus':<22} {'files':>5} {'no-src':>6} {'stmts':>7} {'lines':>8}   inert statements / lines (share): "
          "names | +triggers | +methods")
    for name, files in parts.items():
        n_files = no_src = stmts = lines = 0
        inert_n, inert_l = [0, 0, 0], [0, 0, 0]
        for _, text in files:
            if not direction.mentions.search(text):
                continue  # fwport returns these before parsing
            r = classify(text, triggers, methods)
            if r is None:
                continue
            n_files += 1
            s, l, nn, nl, has_src = r
            no_src += not has_src
            stmts += s
            lines += l
            for k in range(3):
                inert_n[k] += nn[k]
                inert_l[k] += nl[k]
        if a.time:
            timing(files, triggers, methods, a.time)
        cols = " | ".join(f"{inert_n[k]}/{inert_l[k]} ({inert_n[k] / max(stmts, 1):.0%}/{inert_l[k] / max(lines, 1):.0%})"
                          for k in range(3))
        print(f"{name:<22} {n_files:>5} {no_src:>6} {stmts:>7} {lines:>8}   {cols}")


if __name__ == "__main__":
    main()
