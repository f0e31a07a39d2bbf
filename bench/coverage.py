"""Op coverage: the share of real-world call sites of TensorFlow / Keras op APIs that fwport has a
rule (or a structural pass) for, weighted by how often each name is used.

    python bench/coverage.py                       # share + the 30 most used uncovered names
    python bench/coverage.py --top 80              # a longer list
    python bench/coverage.py --prefix tensorflow.nn.   # one namespace
    python bench/coverage.py --tsv other-frequencies.tsv

The frequencies come from ``api-frequency-tf.tsv`` (a census of public Keras/TensorFlow code: one
row per canonical name, ``total`` = calls + references + decorators + bases + annotations). The
names counted are the op namespaces: ``tensorflow.*``, ``keras.ops.*``, ``keras.activations.*``,
``keras.backend.*`` (layers, models and optimizers are measured by their own passes). A name counts
as covered when a rule of the pack matches it or a structural pass handles it (``@tf.function``, the
``keras.layers.Layer`` / ``keras.Model`` bases of the subclass pass, ``keras.Input`` / ``InputLayer`` of the
Sequential and functional passes); names are compared in their canonical spelling (Keras 2's
``keras.layers.experimental.preprocessing.Rescaling`` is ``keras.layers.Rescaling``). ``--rules-only``
leaves the structural passes out. "covered" means fwport translates it or refuses it with a reason, not
that every argument maps.
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fwport.packs.tf2torch import DIRECTION  # noqa: E402
from fwport.packs.tf2torch.passes.decorators import REMOVED  # noqa: E402
from fwport.packs.tf2torch.passes.sequential import INPUTS  # noqa: E402
from fwport.packs.tf2torch.passes.subclass import BASES  # noqa: E402
from fwport.core.rule import load_pack  # noqa: E402

DEFAULT_TSV = Path(__file__).resolve().parents[2] / "shared" / "reference" / "api-frequency-tf.tsv"
NAMESPACES = ("tensorflow.", "keras.ops.", "keras.activations.", "keras.backend.")


def coverage(rows: list[dict], covered: set[str], prefixes: tuple[str, ...]) -> tuple[int, int, list[tuple[int, str]]]:
    """(covered call sites, all call sites, uncovered (total, name) most used first)."""
    hit = total = 0
    missing = []
    for r in rows:
        name = r["name"]
        if not name.startswith(prefixes):
            continue
        n = int(r["total"] or 0)
        total += n
        if name in covered or DIRECTION.source.canonical(name) in covered:
            hit += n
        else:
            missing.append((n, name))
    return hit, total, sorted(missing, key=lambda t: (-t[0], t[1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tsv", type=Path, default=DEFAULT_TSV, help="frequency table (name, total columns)")
    ap.add_argument("--top", type=int, default=30, help="how many uncovered names to list")
    ap.add_argument("--prefix", action="append", help="count only names with this prefix (repeatable)")
    ap.add_argument("--rules-only", action="store_true", help="count only the names rules match (no structural pass)")
    args = ap.parse_args(argv)
    if not args.tsv.exists():
        print(f"no frequency table at {args.tsv}: pass --tsv", file=sys.stderr)
        return 2
    with args.tsv.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    pack = load_pack("tf2torch")
    covered = set(pack.by_name) | (set() if args.rules_only else set(REMOVED) | set(BASES) | set(INPUTS))
    hit, total, missing = coverage(rows, covered, tuple(args.prefix or NAMESPACES))
    names_total = sum(1 for r in rows if r["name"].startswith(tuple(args.prefix or NAMESPACES)))
    print(f"covered: {hit} of {total} call sites ({100 * hit / max(total, 1):.1f}%), "
          f"{names_total - len(missing)} of {names_total} names; namespaces: {', '.join(args.prefix or NAMESPACES)}")
    print(f"most used uncovered names (total uses):")
    for n, name in missing[:args.top]:
        print(f"  {n:6d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
