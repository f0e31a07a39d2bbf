"""Translation speed: fwport next to a bare libcst parse + render of the same files, one core.

Times are the CPU time of this process (``time.process_time``), so that other work on the machine
does not skew the ratio; the start-up and --tree figures are wall-clock times of subprocesses.

    python bench/bench_translate.py                 # tf2torch: fixtures x20 + ~20k lines of keras/src;
                                                    # torch2jax: fixtures x20 + ~20k lines of torch/nn/modules
    python bench/bench_translate.py --direction torch2jax   # one direction's corpora only
    python bench/bench_translate.py --keras-lines 0 # all of keras/src (--torch-lines 0: all of torch/nn/modules)
    python bench/bench_translate.py --profile       # + where fwport's time goes (cProfile)
    python bench/bench_translate.py --tree          # + the CLI over the keras tree on every core
    python bench/bench_translate.py --big 50000     # only: one file of N tf lines, fwport vs bare
    python bench/bench_translate.py --small 200     # only: an empty file and a 10-line program, N times each
    python bench/bench_translate.py --direction tf2torch --corpus /tmp/kio/examples   # + a folder of distinct files

The design target (DESIGN.md, "Performance budget"): fwport at no less than half the lines per
second of the bare parse + render. Also measured: the start-up of `fwport --help` and of a one-file
translation (subprocess wall time, median of a few runs). Nothing here asserts: it prints figures.
"""
from __future__ import annotations

import argparse
import cProfile
import importlib.util
import io
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import libcst as cst  # noqa: E402

from fwport.core.rule import load_pack  # noqa: E402
from fwport.core.pipeline import translate_source  # noqa: E402


def keras_src() -> Path | None:
    spec = importlib.util.find_spec("keras")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    src = Path(list(spec.submodule_search_locations)[0]) / "src"
    return src if src.is_dir() else None


def torch_modules() -> Path | None:
    """The installed PyTorch's torch/nn/modules: a large body of PyTorch code (nn.Module classes, tensor methods)."""
    spec = importlib.util.find_spec("torch")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    src = Path(list(spec.submodule_search_locations)[0]) / "nn" / "modules"
    return src if src.is_dir() else None


def _files(src: Path, max_lines: int, skip_tests: bool = True) -> list[tuple[str, str]]:
    files, lines = [], 0
    for p in sorted(src.rglob("*.py")):
        if skip_tests and p.name.endswith("_test.py"):
            continue
        t = p.read_text(encoding="utf-8")
        files.append((str(p.relative_to(src.parent)), t))
        lines += t.count("\n")
        if max_lines and lines >= max_lines:
            break
    return files


def corpus(repeat: int, keras_lines: int, torch_lines: int = 20_000,
           directions: tuple[str, ...] = ("tf2torch", "torch2jax")) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """Corpus name → (the direction translating it, its files): each direction's fixtures ``repeat`` times, and a
    large body of real source (keras/src for tf2torch, torch/nn/modules for torch2jax)."""
    out: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    for direction in directions:
        fixtures = sorted((ROOT / "fixtures" / direction).glob("*/model.py"))
        if not fixtures:  # no fixtures yet: the rules' examples are real programs too
            texts = [(f"{r.id}/{ex.name}", ex.before) for r in load_pack(direction).rules.values() for ex in r.examples]
        else:
            texts = [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in fixtures]
        out[f"{direction} fixtures"] = (direction, [(f"{name}#{i}", t) for i in range(repeat) for name, t in texts])
        src, limit = (keras_src(), keras_lines) if direction == "tf2torch" else (torch_modules(), torch_lines)
        if src is not None:
            out["torch/nn/modules" if direction == "torch2jax" else "keras/src"] = \
                (direction, _files(src, limit))
    return out


def lines_of(files: list[tuple[str, str]]) -> int:
    return sum(t.count("\n") for _, t in files)


def bare(files: list[tuple[str, str]]) -> float:
    t0 = time.process_time()
    for _, t in files:
        try:
            cst.parse_module(t).code
        except cst.ParserSyntaxError:
            pass
    return time.process_time() - t0


CRASHES: dict[str, list[str]] = {}


def fwport_run(files: list[tuple[str, str]], pack) -> tuple[float, dict[str, int]]:
    statuses: dict[str, int] = {}
    t0 = time.process_time()
    for name, t in files:
        try:
            status = translate_source(t, name, pack).status.value
        except Exception as e:  # a bug to report, not a reason to stop measuring
            status = "crashed"
            CRASHES.setdefault(f"{type(e).__name__}: {e}", []).append(name)
        statuses[status] = statuses.get(status, 0) + 1
    return time.process_time() - t0, statuses


def startup(args: list[str], runs: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "fwport", *args], env=env, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=20, help="copies of the fixture programs (default 20)")
    ap.add_argument("--keras-lines", type=int, default=20_000, help="lines of keras/src to include (0: all)")
    ap.add_argument("--torch-lines", type=int, default=20_000, help="lines of torch/nn/modules to include (0: all)")
    ap.add_argument("--direction", choices=("all", "tf2torch", "torch2jax"), default="all",
                    help="the corpora of one direction only (default: both, each translated by its own direction)")
    ap.add_argument("--corpus", action="append", default=[], metavar="DIR",
                    help="also time the .py files under DIR (e.g. /tmp/kio/examples), translated by --direction (or "
                         "tf2torch): distinct files, where the fixtures repeated --repeat times share what each process "
                         "caches (the helpers written into outputs; with --best-of 1, as later runs reuse the first one's caches "
                         "too); may be given more than once")
    ap.add_argument("--runs", type=int, default=5, help="runs for the start-up medians")
    ap.add_argument("--best-of", type=int, default=3, metavar="N",
                    help="time each corpus N times, bare and fwport alternately, and keep each one's best (default 3)")
    ap.add_argument("--profile", action="store_true", help="profile fwport on the corpus and print the top functions")
    ap.add_argument("--stages", action="store_true", help="time each pipeline stage of fwport (ms per file)")
    ap.add_argument("--walks", action="store_true",
                    help="count the read-only walks fwport makes per file (find_all's questions and walks, scans, "
                         "rewrites: cProfile's primitive calls, each distinct file once)")
    ap.add_argument("--tree", action="store_true", help="also time `fwport tf2torch keras/src -o TMP` on every core")
    ap.add_argument("--big", type=int, default=0, metavar="N",
                    help="only time one file of N `x = tf.reduce_sum(tf.zeros(3), axis=0)` lines (target: <= 2x bare)")
    ap.add_argument("--small", type=int, default=0, metavar="N",
                    help="only: the fixed cost per file, an empty file and a 10-line program of each direction translated "
                         "N times (ms per file, fwport and bare)")
    a = ap.parse_args()

    pack = load_pack("tf2torch")
    if a.big:
        big_file(a.big, pack)
        return
    if a.small:
        small_files(a.small, a.best_of, ("tf2torch", "torch2jax") if a.direction == "all" else (a.direction,))
        return
    directions = ("tf2torch", "torch2jax") if a.direction == "all" else (a.direction,)
    packs = {d: load_pack(d) for d in directions}
    parts = corpus(a.repeat, a.keras_lines, a.torch_lines, directions)
    for folder in a.corpus:
        d = "tf2torch" if a.direction == "all" else a.direction
        packs.setdefault(d, load_pack(d))
        parts[folder] = (d, _files(Path(folder), 0, skip_tests=False))
    for direction, files in parts.values():  # warm up: imports, caches
        fwport_run(files[:3], packs[direction])
        bare(files[:3])
    print(f"{'corpus':<20} {'direction':<10} {'files':>6} {'lines':>8} {'bare lines/s':>13} {'fwport lines/s':>15} "
          f"{'ratio':>6}  statuses")
    totals = {d: [0.0, 0.0, 0.0] for d in directions}  # lines, bare time, fwport time
    for name, (direction, files) in parts.items():
        n = lines_of(files)
        tb = tf = float("inf")
        for _ in range(max(1, a.best_of)):  # alternately, so that a busy moment hits both alike
            tb = min(tb, bare(files))
            t, statuses = fwport_run(files, packs[direction])
            tf = min(tf, t)
        for i, v in enumerate((n, tb, tf)):
            totals[direction][i] += v
        print(f"{name:<20} {direction:<10} {len(files):>6} {n:>8} {n / tb:>13,.0f} {n / tf:>15,.0f} {tb / tf:>6.2f}  "
              + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())))
    for direction, (lines, t_bare, t_fw) in totals.items():
        print(f"{'all ' + direction:<20} {direction:<10} {'':>6} {int(lines):>8} {lines / t_bare:>13,.0f} "
              f"{lines / t_fw:>15,.0f} {t_bare / t_fw:>6.2f}")
    total_bare = sum(t[1] for t in totals.values())
    total_fw = sum(t[2] for t in totals.values())
    for error, names in CRASHES.items():
        print(f"crashed ({len(names)} runs): {error}: e.g. {names[0]}")
    print(f"target: fwport >= 0.5 x bare; {'met' if total_bare / total_fw >= 0.5 else 'NOT met'}")

    one = ROOT / "fixtures" / "tf2torch" / "mnist_convnet" / "model.py"
    if not one.exists():
        one = Path(tempfile.mkstemp(suffix=".py")[1])
        one.write_text("import tensorflow as tf\n\ny = tf.reduce_sum(x, 1)\n")
    print(f"start-up, median of {a.runs}: `fwport --help` {startup(['--help'], a.runs):.2f} s; "
          f"`fwport tf2torch {one.name}` {startup(['tf2torch', str(one)], a.runs):.2f} s; "
          f"`python -c pass` {statistics.median(_bare_python() for _ in range(a.runs)):.2f} s")

    if a.tree and keras_src() is not None:
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "fwport", "tf2torch", str(keras_src()), "-o", out, "-q",
                                "--format", "json"], env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                               text=True, cwd=ROOT)
            dt = time.perf_counter() - t0
            import json
            summary = json.loads(p.stderr)["summary"] if p.stderr.strip().startswith("{") else p.stderr[-300:]
            print(f"tree: fwport tf2torch keras/src -o TMP on {os.cpu_count()} cores: {dt:.1f} s (exit {p.returncode}); {summary}")

    if a.stages:
        for d in directions:
            stage_times([f for direction, fs in parts.values() if direction == d for f in fs], packs[d])

    if a.walks:
        for d in directions:
            walk_counts([f for direction, fs in parts.values() if direction == d for f in fs], packs[d])

    if a.profile:
        prof = cProfile.Profile()
        prof.enable()
        for direction, files in parts.values():
            fwport_run(files, packs[direction])
        prof.disable()
        s = io.StringIO()
        st = pstats.Stats(prof, stream=s)
        st.sort_stats("cumulative").print_stats(35)
        print(s.getvalue())
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(20)
        print(s.getvalue())


def big_file(n: int, pack) -> None:
    """One file of ``n`` identical translatable lines: fwport's time against libcst's parse + render."""
    text = "import tensorflow as tf\n" + "x = tf.reduce_sum(tf.zeros(3), axis=0)\n" * n
    fwport_run([("warm.py", "import tensorflow as tf\nx = tf.reduce_sum(tf.zeros(3), axis=0)\n")], pack)
    tb = bare([("big.py", text)])
    tf, statuses = fwport_run([("big.py", text)], pack)
    print(f"big file: {n + 1} lines; bare parse + render {tb:.2f} s; fwport {tf:.2f} s; "
          f"fwport / bare {tf / tb:.2f} (target <= 2); " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())))
    for error, names in CRASHES.items():
        print(f"crashed: {error}")


#: a 10-line program of each direction (a function, a model, a call of each): what a small file costs
SMALL = {
    "tf2torch": ("import tensorflow as tf\nfrom tensorflow import keras\n\n\ndef f(x):\n"
                 "    y = tf.reduce_sum(x, axis=0)\n    return y + tf.shape(tf.concat([x, x], axis=1))[0]\n\n"
                 "model = keras.Sequential([keras.layers.Dense(4)])\nout = f(tf.zeros((2, 3)))\n"),
    "torch2jax": ("import torch\nimport torch.nn as nn\n\n\nclass M(nn.Module):\n    def __init__(self):\n"
                  "        super().__init__()\n        self.fc = nn.Linear(3, 4)\n\n"
                  "    def forward(self, x):\n        return torch.relu(self.fc(x)).sum(dim=0)\n"),
}


def small_files(n: int, best_of: int, directions: tuple[str, ...]) -> None:
    """The fixed cost of a file: an empty one and a 10-line program, each translated ``n`` times (best of
    ``best_of``), next to libcst's parse + render of the same text."""
    for direction in directions:
        pack = load_pack(direction)
        for label, text in (("empty", ""), ("10 lines", SMALL[direction])):
            files = [("small.py", text)] * n
            fwport_run(files[:5], pack)
            tb = min(bare(files) for _ in range(max(1, best_of)))
            tf = min(fwport_run(files, pack)[0] for _ in range(max(1, best_of)))
            print(f"{direction:<10} {label:<9} bare {tb / n * 1000:7.3f} ms/file  fwport {tf / n * 1000:7.3f} ms/file  "
                  f"ratio {tb / tf if tf else float('inf'):.2f}")


def stage_times(files: list[tuple[str, str]], pack) -> None:
    """Wrap each stage translate_source calls (the file's parse, each planner, each finishing step, the
    rule pass, the renders of the text) and add up its CPU time; the rest is glue."""
    import dataclasses

    import fwport.core.pipeline as tr
    import fwport.core.position as position

    totals: dict[str, float] = {}

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            t0 = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                totals[name] = totals.get(name, 0.0) + time.process_time() - t0
        return wrapper

    direction = tr.get_direction(pack.name)
    hooks = {"planners": tuple(dataclasses.replace(p, run=timed(f"pass {p.name}", p.run)) for p in direction.planners),
             "finish": tuple(timed(f"finish {getattr(f, '__module__', '?').rsplit('.', 1)[-1]}.{f.__name__}", f)
                             for f in direction.finish)}
    for hook in ("out_of_scope", "detect_version"):
        if getattr(direction, hook) is not None:
            hooks[hook] = timed(hook, getattr(direction, hook))
    timed_direction = dataclasses.replace(direction, **hooks)
    names = {"parse_module": "parse (the file)", "rewrite": "rule pass", "prune_imports": "prune_imports",
             "add_imports": "add_imports", "_locate": "_locate (positions)", "collect_imports": "collect_imports",
             "statement_spans": "statement_spans", "free_conventional_aliases": "free_conventional_aliases"}
    saved = {name: getattr(tr, name) for name in names}
    saved_get, saved_text = tr.get_direction, position.Layout.text
    try:
        tr.get_direction = lambda name: timed_direction
        for name, label in names.items():
            setattr(tr, name, timed(label, saved[name]))
        position.Layout.text = timed("Layout.text (the output's text)", saved_text)
        total, _ = fwport_run(files, pack)
    finally:
        tr.get_direction = saved_get
        position.Layout.text = saved_text
        for name, fn in saved.items():
            setattr(tr, name, fn)
    n = len(files)
    print(f"stages over {n} files, {total / n * 1000:.1f} ms per file (a pass's own renders and parses are inside it)")
    for name, t in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<40} {t / n * 1000:8.2f} ms/file  {t / total:6.1%}")
    rest = total - sum(totals.values())
    print(f"  {'glue (rest)':<40} {rest / n * 1000:8.2f} ms/file  {rest / total:6.1%}")


def walk_counts(files: list[tuple[str, str]], pack) -> None:
    """How many walks the translations make, per file (each distinct file once, after a warm-up): the questions
    ``names.find_all`` is asked, the walks it makes for them (the others are answers it kept), the scans
    (``names.scan`` called from outside a scan) and the rewrites; cProfile's primitive calls."""
    import fwport.core.names as names_mod
    import fwport.core.rewrite as rewrite_mod

    distinct = list({name.split("#")[0]: (name, t) for name, t in files}.values())
    fwport_run(distinct, pack)
    prof = cProfile.Profile()
    prof.enable()
    fwport_run(distinct, pack)
    prof.disable()
    calls: dict[str, int] = {}
    wanted = {(names_mod.__file__, "find_all"): "find_all questions", (names_mod.__file__, "_find"): "find_all walks",
              (names_mod.__file__, "_find_statements"): "find_all walks", (names_mod.__file__, "scan"): "scans",
              (rewrite_mod.__file__, "rewrite"): "rewrites"}
    for (path, _, fn), (primitive, *_) in pstats.Stats(prof).stats.items():
        label = wanted.get((path, fn))
        if label is not None:
            calls[label] = calls.get(label, 0) + primitive
    n = len(distinct)
    print(f"walks of {pack.name} over {n} files, per file: "
          + ", ".join(f"{k} {calls.get(k, 0) / n:.1f}" for k in dict.fromkeys(wanted.values())))


def _bare_python() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"])
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
