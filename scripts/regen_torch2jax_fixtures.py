"""Regenerate (or check) the expected translations of the torch2jax fixtures.

    python scripts/regen_torch2jax_fixtures.py            # write expected.py + expected_findings.json
    python scripts/regen_torch2jax_fixtures.py --check    # exit 1 if any would change

Every fixture is a folder fixtures/torch2jax/<name>/ with model.py (the PyTorch program) and
verify.json (how to build and drive it: "model", "args", "inputs", "checks"; "kind": "training"
for a training loop, see tests/test_torch2jax.py). Regenerating accepts what fwport produces today:
read every changed expected.py before committing it.
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

FIXTURES = ROOT / "fixtures" / "torch2jax"


def fixture_dirs() -> list[Path]:
    return sorted(p for p in FIXTURES.iterdir() if (p / "model.py").is_file())


def translate_fixture(d: Path):
    return translate_source((d / "model.py").read_text(), f"fixtures/torch2jax/{d.name}/model.py", "torch2jax")


def findings_data(result) -> list[dict]:
    return [{"severity": f.severity.value, "code": f.code, "line": f.line, "rule": f.rule} for f in result.findings]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    stale = 0
    for d in fixture_dirs():
        r = translate_fixture(d)
        files = {d / "expected.py": r.output, d / "expected_findings.json": json.dumps(findings_data(r), indent=1) + "\n"}
        for path, text in files.items():
            old = path.read_text() if path.exists() else ""
            if old == text:
                continue
            stale += 1
            if a.check:
                sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True), str(path), "now"))
            else:
                path.write_text(text)
                print(f"wrote {path.relative_to(ROOT)}")
    return 1 if a.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
