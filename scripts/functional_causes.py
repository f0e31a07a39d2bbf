"""The cause table of tf2torch's "this functional model is left as written" findings (issue 8).

usage: python scripts/functional_causes.py PATH... [--top N] [--examples] [--report FILE]

Translates PATH (files or folders, as `fwport tf2torch PATH --check`) in this process with the functional
pass's give-up recording the errors reported while that model was followed (the "errors above" its finding
points to), then prints, per normalised cause (code and message, quoted names and numbers as _), how many
models it is the first error of, how many models have it as their only cause, and how many it appears in.
--report FILE keeps the JSON report, each left-as-written finding's message followed by ||CAUSES|| and its
errors. Run it from the repository root (it imports this checkout's fwport)."""
from __future__ import annotations

import collections
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.getcwd())

from fwport.core.finding import Severity  # noqa: E402
from fwport.packs.tf2torch.passes import functional as F  # noqa: E402

LEFT = "this functional model is left as written"
SEP = "||CAUSES||"


def _recording(give_up):
    def patched(self, stmts, model_call):
        ctx = self.ctx
        mark = getattr(self, "mark", len(ctx.pending))
        errors = [f"{p.finding.code}: {p.finding.message}" for p in ctx.pending[mark:]
                  if p.finding.severity is Severity.ERROR]
        out = give_up(self, stmts, model_call)
        for p in ctx.pending[-1:]:
            if p.finding.message.startswith(LEFT):
                object.__setattr__(p.finding, "message", p.finding.message + SEP + " ## ".join(errors))
        return out
    return patched


def _norm(message: str) -> str:
    message = re.sub(r"^in [\w.]+\(\.\.\.\): ", "", message)
    return re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`|\b\d+\b", "_", message)[:120].replace("\n", " ")


def table(report: dict, top: int, examples: bool) -> None:
    first, only, anywhere = collections.Counter(), collections.Counter(), collections.Counter()
    where = collections.defaultdict(list)
    total = 0
    for f in report["files"]:
        for x in f.get("findings", []):
            if x["severity"] != "error" or not x["message"].startswith(LEFT):
                continue
            total += 1
            causes = [c for c in x["message"].split(SEP, 1)[-1].split(" ## ") if c] if SEP in x["message"] else []
            key = _norm(causes[0]) if causes else "(none recorded)"
            first[key] += 1
            where[key].append(f"{f['path']}:{x['line']}")
            kinds = {_norm(c) for c in causes}
            if len(kinds) == 1:
                only[next(iter(kinds))] += 1
            for k in kinds:
                anywhere[k] += 1
    print(f"left-as-written models: {total}\nfirst  only  any  cause")
    for key, n in first.most_common(top):
        print(f"{n:5d} {only[key]:5d} {anywhere[key]:4d}  {key}")
        if examples:
            print("                 ", "; ".join(where[key][:5]))


def main(argv: list[str]) -> None:
    top = int(argv[argv.index("--top") + 1]) if "--top" in argv else 30
    keep = argv[argv.index("--report") + 1] if "--report" in argv else None
    paths = [a for i, a in enumerate(argv) if not a.startswith("--") and (i == 0 or argv[i - 1] not in ("--top", "--report"))]
    out = keep or tempfile.mktemp(suffix=".json")
    F._Builder._give_up = _recording(F._Builder._give_up)
    from fwport.core.cli import main as fwport_main
    sys.argv = ["fwport", "tf2torch", *paths, "--check", "--report", out, "-q"]
    try:
        fwport_main()
    except SystemExit:
        pass
    with open(out) as fh:
        table(json.load(fh), top, "--examples" in argv)
    if keep is None:
        os.unlink(out)


if __name__ == "__main__":
    main(sys.argv[1:])
