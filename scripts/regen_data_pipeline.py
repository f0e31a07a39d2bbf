"""Rewrite the DataPipeline class text copied into the tf2torch rule examples and fixtures (the translations of
tf.data code write the whole class into the output) with the current text of datahelpers.py's DataPipeline.

    python scripts/regen_data_pipeline.py [--check]

A copy is the block from `class DataPipeline(` to the next line that is neither blank nor indented. With --check
nothing is written and the exit status is 1 where a copy differs."""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's fwport, not an installed one

from fwport.packs.tf2torch.helpers import HELPERS  # noqa: E402
CLASS = re.compile(r"^class DataPipeline\(.*?(?=^\S)", re.M | re.S)


def current() -> str:
    text = HELPERS["DataPipeline"].replace("{torch}", "torch.").replace("{np}", "np.")
    return text.strip("\n") + "\n"


def main(check: bool) -> int:
    new = current()
    stale = []
    for path in sorted([*ROOT.glob("rules/tf2torch/*.toml"), *ROOT.glob("fixtures/tf2torch/*/expected.py")]):
        text = path.read_text()
        if "class DataPipeline(" not in text:
            continue

        def repl(m: re.Match) -> str:
            blank = m.group(0)[len(m.group(0).rstrip("\n")) + 1:]  # the blank lines after the class kept
            return new + blank
        out = CLASS.sub(repl, text)
        if out != text:
            stale.append(path.relative_to(ROOT))
            if not check:
                path.write_text(out)
    for p in stale:
        print(("stale: " if check else "rewritten: ") + str(p))
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main("--check" in sys.argv[1:]))
