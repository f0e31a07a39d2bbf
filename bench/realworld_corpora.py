"""The corpora the session notes measure on: every Keras and PyTorch file of the dev set's repositories, not only
the 31 files the dev set's specs name, and a one-line summary of a `--report` over them.

    python bench/realworld_corpora.py build --mirrors /work/.mirror --out /tmp/corpora
    fwport tf2torch /tmp/corpora/keras-io -j 1 --check --report kio.json -q
    fwport tf2torch /tmp/corpora/tf -j 1 --check --report tf.json -q
    fwport torch2jax /tmp/corpora/torch -j 1 --check --report pt.json -q
    python bench/realworld_corpora.py summary kio.json tf.json pt.json [--top 15]

`build` reads the newest commit of each repository in ../shared/realworld/sources.toml from MIRRORS
(`<owner>+<name>/repo`, a bare git directory or a clone, as the `fetch` tool leaves them) and writes, flat,
`<name>__<path with / as __>`:
- `keras-io/`: keras-io's `examples/**/*.py` (the tf.keras-era examples; their notebooks are copies);
- `tf/`: every `.py` and `.ipynb` of the Keras repositories that imports tensorflow or keras (keras-io's
  notebooks left out, for the same reason);
- `torch/`: every `.py` and `.ipynb` of the PyTorch repositories that imports torch.
Files over 2 MB are skipped. OUT gets a `.gitignore` of `*`: the files are third-party code, never committed.

`summary` prints, per report: files, error findings, clean files (converted or unchanged, no error), warnings, and
with `--top N` the most frequent error codes. Asserts nothing: the figures go in notes.
"""
from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

SOURCES = Path(__file__).resolve().parent.parent.parent / "shared" / "realworld" / "sources.toml"
# an import of the framework (torchvision's too), at a line's start in a .py, inside a JSON string in a notebook
IMPORTS = {"tf": re.compile(rb"^\s*(import|from)\s+(tensorflow|keras)", re.M),
           "torch": re.compile(rb"^\s*(import|from)\s+torch", re.M)}
NB_IMPORTS = {"tf": re.compile(rb'"\s*(import|from)\s+(tensorflow|keras)'), "torch": re.compile(rb'"\s*(import|from)\s+torch')}


def _git_dir(mirrors: Path, repo: str) -> Path:
    d = mirrors / repo.replace("/", "+") / "repo"
    return d / ".git" if (d / ".git").is_dir() else d


def _files(git: Path) -> list[str]:
    out = subprocess.run(["git", "--git-dir", str(git), "ls-tree", "-r", "--name-only", "HEAD"],
                         capture_output=True, text=True, check=True).stdout
    return [p for p in out.splitlines() if p.endswith((".py", ".ipynb"))]


def build(mirrors: Path, out: Path, sources: Path = SOURCES) -> dict[str, int]:
    repos = tomllib.loads(sources.read_text())["repo"]
    counts: collections.Counter[str] = collections.Counter()
    for folder in ("keras-io", "tf", "torch"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    (out / ".gitignore").write_text("*\n")
    for repo in repos:
        name = repo.get("fetch", repo["name"])
        git = _git_dir(mirrors, name)
        if not git.is_dir():
            print(f"missing: {name} (no {git}); fetch it first", file=sys.stderr)
            continue
        corpus = repo["corpus"]
        short = repo["name"].split("/")[1]
        for path in _files(git):
            kio_notebook = short == "keras-io" and path.endswith(".ipynb")
            if kio_notebook:
                continue
            data = subprocess.run(["git", "--git-dir", str(git), "show", f"HEAD:{path}"], capture_output=True).stdout
            if len(data) > 2_000_000:
                continue
            pattern = NB_IMPORTS[corpus] if path.endswith(".ipynb") else IMPORTS[corpus]
            if not pattern.search(data):
                continue
            flat = short + "__" + path.replace("/", "__")
            targets = [corpus]
            if short == "keras-io" and path.startswith("examples/") and path.endswith(".py"):
                targets.append("keras-io")
            for target in targets:
                (out / target / flat).write_bytes(data)
                counts[target] += 1
    return dict(counts)


def summary(report: Path, top: int = 0) -> str:
    files = json.loads(report.read_text())["files"]
    errors = warnings = clean = 0
    codes: collections.Counter[str] = collections.Counter()
    for f in files:
        errs = [x for x in f["findings"] if x["severity"] == "error"]
        errors += len(errs)
        warnings += sum(x["severity"] == "warning" for x in f["findings"])
        clean += not errs and f["status"] in ("converted", "unchanged")
        codes.update(x["code"] for x in errs)
    lines = [f"{report.name}: {len(files)} files, {errors} errors, {clean} clean, {warnings} warnings"]
    lines += [f"  {n:6d}  {code}" for code, n in codes.most_common(top)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="write the corpora from the mirrors")
    b.add_argument("--mirrors", type=Path, required=True)
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--sources", type=Path, default=SOURCES)
    s = sub.add_parser("summary", help="summarise --report files")
    s.add_argument("reports", type=Path, nargs="+")
    s.add_argument("--top", type=int, default=0)
    a = p.parse_args(argv)
    if a.cmd == "build":
        for folder, n in sorted(build(a.mirrors, a.out, a.sources).items()):
            print(f"{a.out / folder}: {n} files")
    else:
        for r in a.reports:
            print(summary(r, a.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
