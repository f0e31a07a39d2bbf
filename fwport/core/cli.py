"""The command line. It parses options, asks the library for results and renders them; it never
computes a translation itself. Exit codes everywhere: 0 clean; 1 something needs a human; 2 a usage
or input error (a file that could not be read or parsed, a crash).

Importing this module must not import TensorFlow, PyTorch or JAX (`fwport --help` stays fast and
works without them): the framework-backed commands are loaded only when they run.
"""
from __future__ import annotations

import difflib
import importlib
import os
import sys
import tempfile
from pathlib import Path

import click

from fwport import __version__
from fwport.core.config import Config, ConfigError, check_disabled, load_config
from fwport.core.finding import Severity
from fwport.core.result import Status

EXIT_CLEAN, EXIT_ATTENTION, EXIT_ERROR = 0, 1, 2

# Commands that need a framework: loaded when they run, listed from here in `fwport --help`.
_LAZY_COMMANDS = {
    "verify": ("fwport.verify.cli", "verify_command",
               "Prove a translation computes the same model (runs both frameworks)."),
    "weights": ("fwport.verify.cli", "weights_command",
                "Convert a checkpoint for the translated model: Keras → PyTorch state dict, PyTorch → Equinox."),
}


def _directions() -> dict[str, str]:
    """Direction name → its one-line help, from the pack registry (no pack is imported)."""
    packs = importlib.import_module("fwport.packs")
    return {name: packs.HELP.get(name, f"Translate source code ({name}).")
            for name in [*packs.PACKS, *getattr(packs, "CHAINS", {})]}


class _Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_LAZY_COMMANDS, *_directions()})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        cmd = super().get_command(ctx, name)
        if cmd is None and name in _directions():
            return _direction_command(name)
        if cmd is not None or name not in _LAZY_COMMANDS:
            return cmd
        module, attr, short = _LAZY_COMMANDS[name]
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            reason = f"{type(e).__name__}: {e}"

            @click.command(name, help=short, context_settings={"ignore_unknown_options": True})
            @click.argument("args", nargs=-1, type=click.UNPROCESSED)
            def unavailable(args: tuple[str, ...]) -> None:
                _fail(f"`fwport {name}` is not available here ({reason}); install the extras with "
                      "`pip install 'fwport[verify]'`")

            return unavailable

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # the short help of lazy commands comes from the table: listing must not import them
        rows = []
        directions = _directions()
        for name in self.list_commands(ctx):
            if name in directions and name not in self.commands:
                rows.append((name, directions[name]))
            elif name in _LAZY_COMMANDS and name not in self.commands:
                rows.append((name, _LAZY_COMMANDS[name][2]))
            else:
                cmd = self.commands[name]
                if not cmd.hidden:
                    rows.append((name, cmd.get_short_help_str(formatter.width - 6 - len(name))))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _write_stdout(text: str, encoding: str = "utf-8") -> None:
    # bytes, so CRLF line endings and non-ASCII text come out exactly as translated, in the file's
    # own encoding (PEP 263): `fwport tf2torch a.py > b.py` and `--diff | git apply` keep it valid
    sys.stdout.flush()
    if hasattr(sys.stdout, "buffer"):
        # (the code always encodes: it was read in that encoding; a diff header's path may not)
        sys.stdout.buffer.write(text.encode(encoding, "backslashreplace"))
    else:  # a captured stream (tests)
        sys.stdout.write(text)
    sys.stdout.flush()


def _fail(message: str, code: int = EXIT_ERROR) -> None:
    click.echo(f"fwport: error: {message}", err=True)
    sys.exit(code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, message="fwport %(version)s")
def main() -> None:
    """Translate deep-learning code between frameworks and prove the result is the same model.

    Exit codes: 0 clean; 1 something needs a human (a construct left untranslated, --check found a
    change, a verification mismatch); 2 a usage or input error.
    """


# --- configuration --------------------------------------------------------------------------------
def _config(paths: tuple[str, ...], config_file: str | None) -> Config:
    from fwport.core.config import parse_config
    import tomllib

    try:
        if config_file:
            p = Path(config_file)
            data = tomllib.loads(p.read_text(encoding="utf-8"))
            return parse_config(data.get("tool", {}).get("fwport", {}), p.resolve())
        return load_config(paths[0] if paths else None)
    except ConfigError as e:
        _fail(str(e))
    except (OSError, tomllib.TOMLDecodeError) as e:
        _fail(f"{config_file}: cannot read the configuration ({e})")
    raise AssertionError  # unreachable


def _known_rule_ids(pack: str, extra_dirs: tuple[str, ...]) -> set[str]:
    from fwport.core.rule import builtin_rules_dir

    dirs = [builtin_rules_dir() / pack] + [Path(d) / pack if (Path(d) / pack).is_dir() else Path(d) for d in extra_dirs]
    return {p.stem for d in dirs if d.is_dir() for p in d.glob("*.toml")}


def _load_pack(pack: str, cfg: Config, extra: tuple[str, ...], disabled: tuple[str, ...]):
    from fwport.core.rule import RuleError, load_pack

    extra_dirs = tuple(dict.fromkeys([*cfg.rules, *(str(Path(d).resolve()) for d in extra)]))
    for d in extra:
        if not Path(d).is_dir():
            _fail(f"--rules {d}: no such folder of rule files")
    disabled = tuple(dict.fromkeys([*cfg.disable, *disabled]))
    from fwport.core.chain import stage_rule_dirs
    from fwport.core.direction import get_direction

    stages = get_direction(pack).stages  # a chain (tf2jax) loads each of its stages' packs
    dirs = {s: stage_rule_dirs(s, extra_dirs, stages) for s in stages} if stages else {pack: extra_dirs}
    try:
        check_disabled(Config(cfg.path, cfg.root, disable=disabled), pack,
                       set().union(*(_known_rule_ids(s, d) for s, d in dirs.items())))
        for s, d in dirs.items():
            load_pack(s, d, disabled)
    except (ConfigError, RuleError) as e:
        _fail(str(e))
    return extra_dirs, disabled


# --- progress on a terminal -------------------------------------------------------------------------
class _Progress:
    """A one-line counter on stderr, only when stderr is a terminal; cleared before other output."""

    def __init__(self, enabled: bool, total: int):
        self.enabled, self.total, self.done = enabled and total > 1, total, 0

    def clear(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\x1b[K")

    def step(self, path: str) -> None:
        self.done += 1
        if self.enabled:
            width = len(str(self.total))
            sys.stderr.write(f"\r\x1b[K[{self.done:>{width}}/{self.total}] {path[-60:]}")
            sys.stderr.flush()


# --- fwport <direction> (tf2torch, ...) ----------------------------------------------------------------
# One command per registered direction (fwport/packs/__init__.py): the options below, shared by
# all, plus the direction's own (Direction.cli_options, e.g. tf2torch's --keras and --compile).
@click.command("translate")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("-o", "--output", metavar="FILE|DIR",
              help="Write the translation here: a file for one input file, else a folder that mirrors the inputs.")
@click.option("--in-place", is_flag=True, help="Overwrite each file with its translation (files with nothing to translate are not touched).")
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff of each change on stdout instead of the translation.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if any file would change (the pre-commit contract).")
@click.option("--report", "report_file", metavar="FILE.json", type=click.Path(dir_okay=False),
              help="Write every file's result (status, findings, layer records, models) as JSON.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True,
              help="Format of the report on stderr.")
@click.option("-q", "--quiet", is_flag=True, help="Report only warnings and errors (no info findings).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Worker processes for a tree (default: one per core).")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Leave matching files and folders alone (adds to [tool.fwport] exclude).")
@click.option("--rules", "rule_dirs", multiple=True, metavar="DIR", help="An extra folder of rule files (adds to [tool.fwport] rules).")
@click.option("--disable", multiple=True, metavar="ID", help="Switch a rule off (adds to [tool.fwport] disable).")
@click.option("--max-size", type=click.IntRange(min=1), metavar="BYTES", help="Largest file translated (default 5 MB, or max_size).")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False),
              help="The pyproject.toml to read [tool.fwport] from (default: the nearest one above the first path).")
def _translate(paths: tuple[str, ...], output: str | None, in_place: bool, show_diff: bool, check: bool,
               report_file: str | None, fmt: str, quiet: bool, jobs: int | None,
               exclude: tuple[str, ...], rule_dirs: tuple[str, ...], disable: tuple[str, ...], max_size: int | None,
               config_file: str | None, direction: str = "", **pack_options: object) -> None:
    """Translate source code between frameworks.

    One file: the translation on stdout, findings on stderr. A folder is walked for .py files and
    Jupyter notebooks (skipping .git, virtual environments, site-packages, build outputs and excluded
    globs) and translated in parallel; name where the result goes with -o DIR, --in-place, --diff or
    --check. With -o DIR, DIR gets the whole folder: other files copied, dependency files updated.
    """
    from fwport.core.report import REPORTS, Summary
    from fwport.core.runner import Settings, iter_files, new_file_mode, plan_jobs, run

    if in_place and output:
        _fail("--in-place and -o/--output exclude each other: pick one")
    if check and (in_place or output):
        _fail("--check writes nothing: drop --in-place / -o (add --diff to see the changes)")
    single = len(paths) == 1 and not Path(paths[0]).is_dir()
    to_stdout = single and not (output or in_place or show_diff or check)
    if not single and not (output or in_place or show_diff or check):
        _fail("several files or a folder: say where the translations go with -o DIR or --in-place "
              "(or use --diff / --check to only look)")
    if output:
        out = Path(output)
        if not single and out.exists() and not out.is_dir():
            _fail(f"-o {output}: is a file, but the inputs are several files or a folder: give a folder")
        for p in paths:
            if Path(p).is_dir() and out.resolve() == Path(p).resolve():
                _fail(f"-o {output} is the input folder itself: use --in-place to overwrite files")
        from fwport.core.runner import colliding_inputs

        for a, b in colliding_inputs(list(paths)) if not single else ():
            _fail(f"-o {output}: {a} and {b} would both be written to {output}/{Path(b).resolve().name}: "
                  "translate them in separate runs or rename one")

    cfg = _config(paths, config_file)
    extra_dirs, disabled = _load_pack(direction, cfg, rule_dirs, disable)
    options = _pack_options(direction, cfg, pack_options)
    options = _prepare(direction, paths, options)
    settings = Settings(direction, extra_dirs, disabled, tuple(sorted(options.items())), max_size or cfg.max_size)
    excludes = (*cfg.exclude, *exclude)

    # an -o folder inside an input folder is never translated again (a second run would nest out/out/...)
    out_root = os.path.join(os.path.realpath(output), "") if output and not single else None

    def jobs_iter():
        for job in plan_jobs(paths, output=output, in_place=in_place, diff=show_diff, keep_text=to_stdout,
                             exclude=excludes, config_root=cfg.root):
            if out_root is None or not os.path.realpath(job.source).startswith(out_root):
                yield job

    mirror = None
    if output and not single and any(Path(p).is_dir() for p in paths):
        from fwport.core.tree import Mirror  # the whole tree: other files copied, dependency files updated
        mirror = Mirror(paths, output, excludes, cfg.root, show_diff, direction)
    progress_on = sys.stderr.isatty() and not single
    total = sum(1 for _ in iter_files(paths, excludes, cfg.root, output if mirror else None)) if progress_on else 0
    progress = _Progress(progress_on, total)
    min_sev = Severity.WARNING if quiet else Severity.INFO
    stderr_report = REPORTS[fmt](sys.stderr, min_sev)
    json_fh, json_tmp, json_report = None, None, None
    if report_file:
        folder = os.path.dirname(os.path.abspath(report_file))
        os.makedirs(folder, exist_ok=True)
        fd, json_tmp = tempfile.mkstemp(dir=folder, prefix=".fwport-report.", suffix=".tmp")
        json_fh = os.fdopen(fd, "w", encoding="utf-8")
        json_report = REPORTS["json"](json_fh, Severity.INFO)
        json_report.start()
    summary = Summary()
    stderr_report.start()
    stopped: str | None = None  # why the run ended early; the reports are written all the same
    try:
        outcomes = run(jobs_iter(), settings, jobs)
        for outcome in (mirror.wrap(outcomes) if mirror else outcomes):
            r = outcome.result
            progress.clear()
            extra = {"output_path": outcome.job.dest if outcome.written else None, **outcome.extra}
            summary.add(r, extra)
            stderr_report.add(r, extra)
            if json_report:
                json_report.add(r, extra)
            if check and r.changed and fmt == "text":
                click.echo(f"would translate {r.path}", err=True)
            encoding = outcome.extra.get("encoding", "utf-8")
            if outcome.diff:
                _write_stdout(outcome.diff, encoding)
            if to_stdout and r.status is not Status.FAILED:
                _write_stdout(r.output, encoding)
            progress.step(r.path)
    except KeyboardInterrupt:
        stopped = "interrupted; files written so far are complete, the rest are untouched"
    except Exception as e:  # a bug in the runner itself: never lose the report of what was done
        stopped = (f"fwport crashed after {summary.files} file(s) ({type(e).__name__}: {e}); files written so "
                   "far are complete, the rest are untouched; please report it")
    progress.clear()
    summary.copied = mirror.copied if mirror else 0
    try:
        stderr_report.finish(summary, check)
        if json_report:
            json_report.finish(summary, check)
            json_fh.close()
            os.chmod(json_tmp, new_file_mode())  # a report like any file the user writes, not mkstemp's 0600
            os.replace(json_tmp, report_file)
            json_tmp = None
    except OSError as e:  # e.g. the disk filled up: say so, leave no partial report behind
        stopped = stopped or f"cannot write the report{f' {report_file}' if report_file else ''}: {e.strerror or e}"
    finally:
        if json_tmp:
            try:
                json_fh.close()
            except OSError:
                pass
            os.unlink(json_tmp)
    if stopped:
        _fail(stopped, 130 if stopped.startswith("interrupted") else EXIT_ERROR)
    sys.exit(summary.exit_code(check))


def _pack_options(direction: str, cfg: Config, given: dict[str, object]) -> dict[str, object]:
    """The translate options of the direction's own command-line flags, else of [tool.fwport]."""
    from fwport.core.direction import get_direction

    options: dict[str, object] = {}
    for o in get_direction(direction).cli_options:
        value = given.get(o.key)
        if value in (None, False, ()) and o.config_key:
            value = getattr(cfg, o.config_key, None)
        if value not in (None, False, ()):
            options[o.key] = o.convert(value)
    return options


def _prepare(direction: str, paths: tuple[str, ...], options: dict[str, object]) -> dict[str, object]:
    """The direction's step before translating (tf2torch --trace), if it has one."""
    from fwport.core.direction import PrepareError, get_direction

    prepare = get_direction(direction).prepare
    if prepare is None:
        return options
    try:
        return prepare(paths, options)
    except PrepareError as e:
        _fail(str(e))


def _direction_command(name: str) -> click.Command:
    """`fwport <name>`: the shared translate options plus the direction's own."""
    import functools

    from fwport.core.direction import get_direction

    d = get_direction(name)
    own = [click.Option([o.flag, o.key], is_flag=not o.choices and not o.metavar,
                        type=click.Choice(list(o.choices)) if o.choices else None, metavar=o.metavar or None,
                        multiple=o.multiple, help=o.help) for o in d.cli_options]
    common = (_translate.help or "").split("\n\n", 1)[-1]
    return click.Command(name, params=[*_translate.params, *own], help=f"{d.command_help or d.summary}\n\n{common}",
                         callback=functools.partial(_translate.callback, direction=name),
                         context_settings={"help_option_names": ["-h", "--help"]})


# --- fwport report ----------------------------------------------------------------------------------
@main.command("report")
@click.argument("report_file", metavar="FILE.json", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True,
              help="How to render it (on stdout).")
@click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors (no info findings).")
def report(report_file: str, fmt: str, quiet: bool) -> None:
    """Re-render a saved `--report FILE.json`: the migration overview, the findings, the summary.

    Exits as the run that wrote it did: 0 clean, 1 something needs a human, 2 a file failed.
    """
    from fwport.core.migration import ReportError, replay

    from fwport.core.report import REPORTS

    writer = REPORTS[fmt](sys.stdout, Severity.WARNING if quiet else Severity.INFO)
    try:
        code = replay(report_file, writer)
    except ReportError as e:
        _fail(str(e))
    sys.stdout.flush()
    sys.exit(code)


# --- fwport residue ---------------------------------------------------------------------------------
@main.command("residue")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--exclude", multiple=True, metavar="GLOB", help="Leave matching files and folders alone.")
@click.option("--direction", "direction_name", metavar="NAME", default=None,
              help="Whose source framework to look for: a direction (tf2torch, ...); default: the default one.")
def residue(paths: tuple[str, ...], exclude: tuple[str, ...], direction_name: str | None) -> None:
    """Exit 1 while any file still imports the source framework (TensorFlow or Keras by default),
    for a migrated tree.

    Folders are walked for .py files like tf2torch does. Unreadable or unparsable files exit 2.
    """
    from fwport.core.direction import default_direction, get_direction
    from fwport.core.report import Summary
    from fwport.core.runner import check_residue, iter_files

    cfg = _config(paths, None)
    excludes = (*cfg.exclude, *exclude)
    try:
        direction = get_direction(direction_name or default_direction())
    except KeyError as e:
        _fail(e.args[0])
    roots = direction.source.roots
    title = direction.source_title or "/".join(roots)
    summary, dirty = Summary(), 0
    for path, _, excluded in iter_files(paths, excludes, cfg.root):
        if excluded:
            continue
        r = check_residue(str(path), roots, cfg.max_size)
        summary.add(r)
        dirty += bool(r.findings) and r.status is not Status.FAILED
        for f in r.findings:
            click.echo(f.render(), err=True)
    n = summary.files
    click.echo(f"fwport residue: {n} file{'s' if n != 1 else ''} checked, {dirty} still use {title}"
               + (f", {summary.failed} could not be read" if summary.failed else ""), err=True)
    sys.exit(EXIT_ERROR if summary.failed else EXIT_ATTENTION if dirty else EXIT_CLEAN)


# --- fwport rules ---------------------------------------------------------------------------------------
def _packs() -> list[str]:
    from fwport.core.rule import builtin_rules_dir

    root = builtin_rules_dir()
    return sorted(d.name for d in root.iterdir() if d.is_dir() and any(d.glob("*.toml"))) if root.is_dir() else []


@main.command("rules", context_settings={"ignore_unknown_options": False})
@click.argument("args", nargs=-1, metavar="[PACK] | show [PACK/]ID")
def rules(args: tuple[str, ...]) -> None:
    """The rule catalogue: `fwport rules [PACK]` lists rules; `fwport rules show ID` shows one
    (arguments, defaults, weight maps, notes and its examples as diffs)."""
    from fwport.core.direction import default_direction
    from fwport.core.report import render_rule_list, render_rule_text
    from fwport.core.rule import RuleError, load_pack

    cfg = _config((), None)
    packs = _packs()
    try:
        default = default_direction()

        def user_dirs(p: str) -> tuple[str, ...]:  # <dir>/<pack>/ is that pack's; a flat folder the default's
            return tuple(d for d in cfg.rules if (Path(d) / p).is_dir()
                         or p == default and not any((Path(d) / q).is_dir() for q in packs))

        loaded = {p: load_pack(p, user_dirs(p), cfg.disable) for p in packs}  # each pack as its command uses it
    except RuleError as e:
        _fail(str(e))
    if not args:
        click.echo("\n".join(render_rule_list(loaded[p].rules.values(), p) for p in packs), nl=False)
        return
    if args[0] == "show":
        if len(args) != 2:
            _fail("usage: fwport rules show [PACK/]ID")
        want = args[1]
        pack_name, _, rid = want.rpartition("/")
        candidates = [loaded[pack_name]] if pack_name in loaded else list(loaded.values()) if not pack_name else []
        if pack_name and not candidates:
            _fail(f"no rule pack {pack_name!r}; the packs are {', '.join(packs)}")
        for pack in candidates:
            if rid in pack.rules:
                click.echo(render_rule_text(pack.rules[rid]), nl=False)
                return
        known = sorted({r for p in candidates for r in p.rules} | {f"{p.name}/{r}" for p in candidates for r in p.rules})
        close = difflib.get_close_matches(want, known, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        _fail(f"no rule {want!r}{hint} (list them with `fwport rules`)")
    if len(args) == 1 and args[0] in loaded:
        click.echo(render_rule_list(loaded[args[0]].rules.values(), args[0]), nl=False)
        return
    close = difflib.get_close_matches(args[0], packs, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    _fail(f"no rule pack {args[0]!r}{hint} The packs are: {', '.join(packs)}; to show a rule: fwport rules show ID")
