"""Op coverage: the share of real-world call sites of TensorFlow / Keras op APIs that fwport has a
rule (or a structural pass) for, weighted by how often each name is used.

    python bench/coverage.py                       # share + the 30 most used uncovered names, with why
    python bench/coverage.py --top 80              # a longer list
    python bench/coverage.py --prefix tensorflow.nn.   # one namespace
    python bench/coverage.py --tsv other-frequencies.tsv
    python bench/coverage.py --direction torch2jax      # torch.* names, api-frequency-torch.tsv
    python bench/coverage.py --scope models        # issue 8's measure: model-building APIs
    python bench/coverage.py --scope training      # issue 9's: training, data and I/O APIs

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

``--scope`` picks another set of names, public API only (the table's ``core`` group, ``api`` kind; no
methods, no ``tensorflow.python.*`` internals, no third-party ecosystem):

- ``models``: what builds and runs a model: ``keras.layers.*``, ``keras.ops.*``,
  ``keras.activations.*``, ``keras.initializers.*``, ``keras.regularizers.*``, ``keras.constraints.*``
  and ``tensorflow.*`` outside the data, training and I/O namespaces listed in ``TRAINING_IO``
  (``tensorflow.nn``, ``tensorflow.math``, ``tensorflow.image`` included);
- ``training``: those namespaces, plus ``keras.optimizers/losses/metrics/callbacks/datasets/utils/
  preprocessing/models/saving``.
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
from fwport.core.direction import get_direction  # noqa: E402
from fwport.core.rule import load_pack  # noqa: E402



def _reference() -> Path:
    """The shared folder beside the checkout (/work/main → /work/shared; a worktree /work/wt/NAME finds it higher
    up, one elsewhere (/tmp/wt/NAME) through the main checkout its .git file points into)."""
    here = Path(__file__).resolve().parents[1]
    places = list(here.parents)
    git = here / ".git"
    if git.is_file() and git.read_text(encoding="utf-8").startswith("gitdir:"):
        places += list(Path(git.read_text(encoding="utf-8")[7:].strip()).resolve().parents)
    return next((p / "shared" / "reference" for p in places if (p / "shared" / "reference").is_dir()),
                here.parent / "shared" / "reference")


REFERENCE = _reference()
REASONS = Path(__file__).resolve().parent / "coverage_reasons.toml"
DEFAULT_TSV = REFERENCE / "api-frequency-tf.tsv"
NAMESPACES = ("tensorflow.", "keras.ops.", "keras.activations.", "keras.backend.")
MODELS = ("keras.layers.", "keras.ops.", "keras.activations.", "keras.initializers.", "keras.regularizers.",
          "keras.constraints.", "tensorflow.")
# tensorflow.* namespaces that hold data, training, I/O and runtime configuration, not model code
TRAINING_IO = tuple("tensorflow." + n for n in (
    "data.", "io.", "train.", "saved_model.", "summary.", "distribute.", "config.", "GradientTape",
    "keras.", "lite.", "estimator.", "feature_column.", "experimental.dtensor.", "debugging.",
    "profiler.", "tpu.", "test.", "errors.", "sysconfig.", "autograph.", "compat.", "function",
    "random.set_seed", "optimizers.", "losses.", "metrics."))
TRAINING = TRAINING_IO + tuple("keras." + n for n in (
    "optimizers.", "losses.", "metrics.", "callbacks.", "datasets.", "utils.", "preprocessing.",
    "models.", "saving."))
SCOPES = {"ops": NAMESPACES, "models": MODELS, "training": TRAINING}


def _tf2torch_structural() -> set[str]:
    """The Keras/TF names tf2torch's passes handle without a rule of their own: decorators removed,
    the Layer/Model bases, Input/InputLayer, Sequential, the functional keras.Model(inputs, outputs),
    regularizer factories (the regularizers pass), the tape, the Callback and LearningRateSchedule bases (the
    training pass),
    the merge functions (the functional pass), `with` name scopes (utilities.py), runtime settings, plot_model,
    tf.distribute strategies and tf.summary.scalar (the runtime pass), tf.random.Generator.from_seed (rngs.py)."""
    from fwport.packs.tf2torch.passes.functional import MERGE_FNS, MERGE_LAYERS, MODEL
    from fwport.packs.tf2torch.passes.regularizers import _KINDS
    from fwport.packs.tf2torch.passes.sequential import SEQUENTIAL
    from fwport.packs.tf2torch.passes.runtime import NAMES as RUNTIME
    from fwport.packs.tf2torch.passes.training import CALLBACK, SCHEDULE, TAPE
    from fwport.packs.tf2torch.rngs import FROM_SEED
    from fwport.packs.tf2torch.utilities import NAME_SCOPES
    return (set(REMOVED) | set(BASES) | set(INPUTS) | set(_KINDS) | set(MERGE_FNS) | set(MERGE_LAYERS)
            | set(RUNTIME) | set(NAME_SCOPES) | {TAPE, CALLBACK, SCHEDULE, SEQUENTIAL, MODEL, FROM_SEED})


def _torch2jax_structural() -> set[str]:
    """The torch names torch2jax's passes handle without a rule: the Module base, no_grad (removed),
    manual_seed (a root key), the TorchScript-only decorators the training pass removes (training.SCRIPT_ONLY),
    the torch.nn.init functions that modules.py / init.py turn into the drawn or constant arrays (with
    calculate_gain, whose gain they write out), the Dataset base that types.py drops from a subclass, and the
    backend switches backends.py writes as jax.config.update or removes (cudnn.benchmark, allow_tf32...), the
    process-group calls distributed.py removes for a one-process translation (init_process_group, all_reduce...). (The
    per-example functions batch.py rewrites inside a module's forward all have rules for the other places too.)"""
    from fwport.packs.torch2jax import backends, distributed, init
    from fwport.packs.torch2jax.passes.training import NO_GRAD, SCRIPT_ONLY
    from fwport.packs.torch2jax.types import DATASET
    inits = {f"torch.nn.init.{n}" for n in init.TRANSLATED} | {"torch.nn.init.calculate_gain"}
    return {"torch.nn.Module", "torch.manual_seed", *NO_GRAD, *SCRIPT_ONLY, *inits, *DATASET, *backends.HANDLED,
            *distributed.HANDLED}


def load_reasons(direction: str, path: Path = REASONS) -> dict[str, str]:
    """bench/coverage_reasons.toml's table for ``direction``: API name → why it has no rule."""
    import tomllib
    with path.open("rb") as f:
        return dict(tomllib.load(f).get(direction, {}))


def reason_for(name: str, direction, reasons: dict[str, str]) -> str | None:
    """Why ``name`` has no rule: the pack's guidance (the no-rule error's advice) or the reasons table, by the
    name or one it belongs to (tensorflow.RaggedTensor for tensorflow.RaggedTensor.from_row_splits)."""
    advice = direction.guidance_for(name)
    if advice:
        return "guidance (the no-rule error's advice): " + advice
    for key in dict.fromkeys((name, direction.source.canonical(name))):
        while key:
            if key in reasons:
                return reasons[key]
            key = key.rpartition(".")[0]
    return None


def constant_members(rows: list[dict], pack) -> set[str]:
    """Names that are an attribute of a translated constant (tensorflow.__version__.startswith): the engine
    leaves the method on the translated value (torch.__version__.startswith), so they are covered."""
    constants = {n for n, r in pack.by_name.items() if r.kind == "constant"}
    return {r["name"] for r in rows if r["name"].rpartition(".")[0] in constants}


def coverage(rows: list[dict], covered: set[str], prefixes: tuple[str, ...],
             canonical=DIRECTION.source.canonical, exclude: tuple[str, ...] = ()
             ) -> tuple[int, int, list[tuple[int, str]]]:
    """(covered call sites, all call sites, uncovered (total, name) most used first) over the names
    that start with one of ``prefixes`` and none of ``exclude``."""
    hit = total = 0
    missing = []
    for r in rows:
        name = r["name"]
        if not name.startswith(prefixes) or (exclude and name.startswith(exclude)):
            continue
        n = int(r["total"] or 0)
        total += n
        if name in covered or canonical(name) in covered:
            hit += n
        else:
            missing.append((n, name))
    return hit, total, sorted(missing, key=lambda t: (-t[0], t[1]))


def scope_rows(rows: list[dict], scope: str, direction: str = "tf2torch") -> list[dict]:
    """The table's rows a scope counts: ``models`` and ``training`` public API only (no methods, internals or
    third-party code)."""
    if scope != "ops" and direction == "tf2torch":
        return [r for r in rows if r.get("group", "core") == "core" and r.get("kind", "api") == "api"]
    return rows


def measure(rows: list[dict], direction: str, prefixes: tuple[str, ...], exclude: tuple[str, ...] = (),
            rules_only: bool = False) -> tuple[int, int, list[tuple[int, str]]]:
    """coverage() with the direction's pack and, unless rules_only, its structural passes."""
    pack = load_pack(direction)
    covered = set(pack.by_name)
    if not rules_only:
        covered |= (_torch2jax_structural() if direction == "torch2jax" else _tf2torch_structural())
        covered |= constant_members(rows, pack)
    return coverage(rows, covered, prefixes, get_direction(direction).source.canonical, exclude)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--direction", default="tf2torch", choices=("tf2torch", "torch2jax"))
    ap.add_argument("--tsv", type=Path, help="frequency table (name, total columns); default: the direction's")
    ap.add_argument("--top", type=int, default=30, help="how many uncovered names to list")
    ap.add_argument("--prefix", action="append", help="count only names with this prefix (repeatable)")
    ap.add_argument("--rules-only", action="store_true", help="count only the names rules match (no structural pass)")
    ap.add_argument("--scope", choices=sorted(SCOPES), default="ops",
                    help="tf2torch: which names: ops (default), models (issue 8), training (issue 9)")
    ap.add_argument("--full", action="store_true", help="print each reason whole (default: cut at 140 characters)")
    args = ap.parse_args(argv)
    torch = args.direction == "torch2jax"
    args.tsv = args.tsv or (REFERENCE / "api-frequency-torch.tsv" if torch else DEFAULT_TSV)
    namespaces = ("torch.",) if torch else SCOPES[args.scope]
    exclude = TRAINING_IO if args.scope == "models" and not torch else ()
    if not args.tsv.exists():
        print(f"no frequency table at {args.tsv}: pass --tsv", file=sys.stderr)
        return 2
    with args.tsv.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    rows = scope_rows(rows, args.scope, args.direction)
    prefixes = tuple(args.prefix or namespaces)
    hit, total, missing = measure(rows, args.direction, prefixes, exclude, args.rules_only)
    names_total = sum(1 for r in rows if r["name"].startswith(prefixes) and not (exclude and r["name"].startswith(exclude)))
    print(f"covered: {hit} of {total} call sites ({100 * hit / max(total, 1):.1f}%), "
          f"{names_total - len(missing)} of {names_total} names; namespaces: {', '.join(prefixes)}"
          + (f"; not counted: {', '.join(exclude)}" if exclude else ""))
    direction = get_direction(args.direction)
    reasons = load_reasons(args.direction)
    why = {name: reason_for(name, direction, reasons) for _, name in missing}
    told = sum(n for n, name in missing if why[name])
    print(f"uncovered names with a reason (bench/coverage_reasons.toml or the pack's guidance): "
          f"{sum(1 for v in why.values() if v)} of {len(missing)}, {told} of {total - hit} call sites")
    print("most used uncovered names (total uses) and why:")
    for n, name in missing[:args.top]:
        reason = why[name] or "no reason recorded"
        if not args.full and len(reason) > 140:
            reason = reason[:139] + "…"
        print(f"  {n:6d}  {name}  — {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
