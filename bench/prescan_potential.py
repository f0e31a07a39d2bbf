"""How much an stdlib-``ast`` pre-scan could save: the share of top-level statements (by lines)
that libcst would still have to parse because they mention a source-framework name or match a
structural pass's trigger, on the benchmark corpora of ``bench_translate.py``.

    python bench/prescan_potential.py

Only the "cold" statements (no source name, no trigger) could be kept as text without a libcst
parse; the ``ast`` parse that finds them is paid on every file. Prints figures, asserts nothing.
"""
from __future__ import annotations

import ast
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import libcst as cst  # noqa: E402

import bench_translate  # noqa: E402
from fwport.core.direction import get_direction  # noqa: E402


def source_aliases(tree: ast.Module, roots: tuple[str, ...]) -> set[str]:
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            out.update((a.asname or a.name).split(".")[0] for a in n.names if a.name.split(".")[0] in roots)
        elif isinstance(n, ast.ImportFrom) and n.module and not n.level and n.module.split(".")[0] in roots:
            out.update(a.asname or a.name for a in n.names)
    return out


def main() -> None:
    direction = get_direction("tf2torch")
    roots = tuple(direction.source.roots)
    triggers = [p.trigger for p in direction.planners]
    print(f"{'corpus':<12} {'lines':>8} {'hot lines':>10} {'hot':>5}  {'ast parse':>9} {'libcst parse':>12}")
    for name, files in bench_translate.corpus(20, 20_000).items():
        total = hot = 0
        t_ast = t_cst = 0.0
        for _, text in files:
            t0 = time.process_time()
            tree = ast.parse(text)
            t_ast += time.process_time() - t0
            t0 = time.process_time()
            cst.parse_module(text)
            t_cst += time.process_time() - t0
            aliases = source_aliases(tree, roots)
            if not aliases:
                continue
            mention = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(aliases))) + r")\b")
            lines = text.splitlines(keepends=True)
            for stmt in tree.body:
                first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
                chunk = "".join(lines[first - 1:stmt.end_lineno])
                n = stmt.end_lineno - first + 1
                total += n
                if isinstance(stmt, (ast.Import, ast.ImportFrom)) or mention.search(chunk) \
                        or any(t.search(chunk) for t in triggers):
                    hot += n
        print(f"{name:<12} {total:>8} {hot:>10} {hot / max(total, 1):>5.0%}  {t_ast:>8.2f}s {t_cst:>11.2f}s")


if __name__ == "__main__":
    main()
