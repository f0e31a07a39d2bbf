"""Translate large real trees (the installed keras/src and tf_keras sources, or any folders given)
and report what a user would hit: crashes, outputs that do not parse, and translations that change
again when translated (fixpoint). Not a speed benchmark: the point is robustness on real code.

usage: python bench/stress_corpus.py [--every N] [DIR ...]
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fwport.core.rule import load_pack  # noqa: E402
from fwport.core.pipeline import translate_source  # noqa: E402


def default_roots() -> list[Path]:
    roots = []
    for name, sub in (("keras", "src"), ("tf_keras", "")):
        spec = importlib.util.find_spec(name)  # locates the package without importing it
        if spec is not None and spec.origin:
            roots.append(Path(spec.origin).parent / sub)
    return roots


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*", type=Path)
    ap.add_argument("--every", type=int, default=1, help="take every Nth file (default: all)")
    args = ap.parse_args()
    pack = load_pack("tf2torch")
    roots = args.dirs or default_roots()
    files = [f for root in roots for f in sorted(root.rglob("*.py"))][:: args.every]
    crashes, unparsable, not_fixpoint, lines = [], [], [], 0
    t0 = time.perf_counter()
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        lines += text.count("\n")
        try:
            r = translate_source(text, str(f), pack)
        except Exception as e:  # translate_source must not raise: every one is a bug
            crashes.append((f, f"{type(e).__name__}: {e}"))
            continue
        try:
            ast.parse(r.output)
        except SyntaxError as e:
            unparsable.append((f, str(e)))
            continue
        if translate_source(r.output, str(f), pack).output != r.output:
            not_fixpoint.append(f)
    took = time.perf_counter() - t0
    print(f"{len(files)} files, {lines} lines, {took:.1f} s (each translated twice)")
    print(f"crashes: {len(crashes)}; outputs that do not parse: {len(unparsable)}; "
          f"not a fixpoint: {len(not_fixpoint)} ({len(not_fixpoint) / max(len(files), 1):.1%})")
    for f, why in crashes[:10] + unparsable[:10]:
        print(f"  {f}: {why[:200]}")
    for f in not_fixpoint[:10]:
        print(f"  not a fixpoint: {f}")
    return 1 if crashes or unparsable else 0


if __name__ == "__main__":
    sys.exit(main())
