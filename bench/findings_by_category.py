"""Error findings per file, by category: what still stands between each file and a clean translation.

    python bench/findings_by_category.py FILE_OR_DIR...                 # any files
    python bench/findings_by_category.py --dev CACHE [--direction tf2torch]   # the real-world dev set
    python bench/findings_by_category.py --report R.json [--summary]   # a saved `fwport ... --report`

``--report`` reads what a run over any tree wrote (notebooks included), e.g. over a folder of public
code: ``fwport tf2torch DIR --check --report R.json -q``; ``--summary`` prints only the totals and the
top categories (for hundreds of files).

``--dev`` reads the dev set's specs (``../shared/realworld/specs_<tf|torch>.py``) and the files that
``extract.py`` wrote to CACHE. A category is the finding code, with the API family the finding is
about where it names one (``no-rule: keras.layers``, ``unsupported-construct``...). Prints a table
(files × the most frequent categories) and the totals; asserts nothing.
"""
from __future__ import annotations

import argparse
import json
from types import SimpleNamespace
import importlib.util
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fwport.core.finding import Severity  # noqa: E402
from fwport.core.pipeline import translate_source  # noqa: E402
from fwport.core.runner import InputError, read_source_encoded  # noqa: E402


def category(f) -> str:
    api = getattr(f, "api", None) or ""
    if api:
        family = ".".join(api.split(".")[:2]) if api.count(".") >= 2 else api
        return f"{f.code}: {family}"
    return f.code


def dev_files(cache: Path, direction: str) -> list[tuple[str, Path]]:
    side = "tf" if direction == "tf2torch" else "torch"
    specs_path = ROOT.parent / "shared" / "realworld" / f"specs_{side}.py"
    spec = importlib.util.spec_from_file_location("specs", specs_path)
    specs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(specs)  # type: ignore[union-attr]
    return [(s["id"], cache / s["local"]) for s in specs.SPECS]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--dev", type=Path, metavar="CACHE", help="the real-world dev set extracted to CACHE")
    ap.add_argument("--direction", default="tf2torch")
    ap.add_argument("--top", type=int, default=8, help="categories shown as columns (default 8)")
    ap.add_argument("--report", type=Path, help="a JSON report written by `fwport <direction> --report`")
    ap.add_argument("--summary", action="store_true", help="only the totals and the top categories")
    a = ap.parse_args()
    files: list[tuple[str, Path]] = dev_files(a.dev, a.direction) if a.dev else []
    for p in a.paths:
        files += [(str(f), f) for f in sorted(p.rglob("*.py"))] if p.is_dir() else [(str(p), p)]
    per_file: dict[str, Counter] = {}
    if a.report:
        for r in json.loads(a.report.read_text(encoding="utf-8"))["files"]:
            per_file[r["path"]] = Counter(category(SimpleNamespace(code=f["code"], api=f.get("api", "")))
                                          for f in r["findings"] if f["severity"] == Severity.ERROR.value)
    elif not files:
        ap.error("no input: give files, folders, --dev CACHE or --report R.json")
    for name, path in files:
        try:
            text = read_source_encoded(str(path))[0]
        except InputError as e:
            print(f"{name}: cannot read: {e}", file=sys.stderr)
            continue
        result = translate_source(text, str(path), a.direction)
        per_file[name] = Counter(category(f) for f in result.findings if f.severity is Severity.ERROR)
    total = sum(per_file.values(), Counter())
    top = [c for c, _ in total.most_common(a.top)]
    width = max(len(n) for n in per_file) if per_file else 10
    print(f"{'file':<{width}} {'errors':>6}  " + "  ".join(f"[{i + 1}]" for i in range(len(top))) + "  other")
    for name, counts in ([] if a.summary else per_file.items()):
        other = sum(counts.values()) - sum(counts[c] for c in top)
        print(f"{name:<{width}} {sum(counts.values()):>6}  " + "  ".join(f"{counts[c]:>3}" for c in top) + f"  {other:>5}")
    print(f"{'total':<{width}} {sum(total.values()):>6}  " + "  ".join(f"{total[c]:>3}" for c in top)
          + f"  {sum(total.values()) - sum(total[c] for c in top):>5}")
    print(f"files with no error finding: {sum(1 for c in per_file.values() if not c)} of {len(per_file)}")
    for i, c in enumerate(top):
        print(f"  [{i + 1}] {c}: {total[c]}")


if __name__ == "__main__":
    main()
