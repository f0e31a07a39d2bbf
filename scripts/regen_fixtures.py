"""Regenerate (or check) the expected translations of the whole-program fixtures.

    python scripts/regen_fixtures.py            # write expected.py + expected_findings.json
    python scripts/regen_fixtures.py --check    # exit 1 if any would change (prints the diff)
    python scripts/regen_fixtures.py NAME ...   # only these fixtures

Every fixture is a folder fixtures/tf2torch/<name>/ with model.py (the Keras program) and
verify.json (how to build and drive it). Regenerating accepts whatever fwport produces today as
the expected output: read every changed expected.py before committing it. Where fwport's output
is wrong, the correct translation is written by hand and verify.json says so in
"known_bugs": {"expected": "<what fwport gets wrong>"}; such fixtures are not rewritten (unless
--force) and --check leaves them to the test suite (a strict xfail there). Their
expected_findings.json holds the findings of that correct translation, also by hand. Other parts:
"fixpoint" (translating the output again changes it), "verify" (right text, wrong weight records).
A translation that must refuse says why in "xfail" (the program cannot run) or "refusals" (error
findings outside the model, e.g. model.fit); tests/test_fixtures.py checks every fixture says one.
"""
from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fwport.core.pipeline import translate_source  # noqa: E402

FIXTURES = ROOT / "fixtures" / "tf2torch"


def fixture_dirs(names: list[str] | None = None) -> list[Path]:
    dirs = sorted(p for p in FIXTURES.iterdir() if (p / "model.py").is_file())
    if names:
        unknown = set(names) - {d.name for d in dirs}
        if unknown:
            raise SystemExit(f"no such fixture(s): {', '.join(sorted(unknown))} (see {FIXTURES})")
        dirs = [d for d in dirs if d.name in names]
    return dirs


def findings_data(result) -> list[dict]:
    """The findings as recorded in expected_findings.json: what, where and which rule (messages
    are free to improve without churning the fixtures)."""
    return [{"severity": f.severity.value, "code": f.code, "line": f.line, "rule": f.rule}
            for f in result.findings]


def translate_fixture(d: Path):
    source = (d / "model.py").read_text()
    return translate_source(source, f"fixtures/tf2torch/{d.name}/model.py")


def render_findings(result) -> str:
    return json.dumps(findings_data(result), indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="fixture names (default: all)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if anything differs")
    ap.add_argument("--force", action="store_true", help="also rewrite hand-written expectations (known_bugs.expected)")
    opts = ap.parse_args(argv)
    differs = []
    for d in fixture_dirs(opts.names):
        verify = json.loads((d / "verify.json").read_text())
        if verify.get("known_bugs", {}).get("expected") and not opts.force:
            print(f"kept (hand-written, known bug): {d.name}", file=sys.stderr)
            continue
        result = translate_fixture(d)
        wanted = {d / "expected.py": result.output, d / "expected_findings.json": render_findings(result)}
        for path, text in wanted.items():
            old = path.read_text() if path.exists() else ""
            if old == text:
                continue
            differs.append(path)
            if opts.check:
                rel = path.relative_to(ROOT)
                sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                           f"a/{rel}", f"b/{rel}"))
            else:
                path.write_text(text)
    verb = "would change" if opts.check else "written"
    for p in differs:
        print(f"{verb}: {p.relative_to(ROOT)}", file=sys.stderr)
    if not differs:
        print("all fixtures up to date", file=sys.stderr)
    return 1 if (opts.check and differs) else 0


if __name__ == "__main__":
    raise SystemExit(main())
