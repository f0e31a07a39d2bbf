"""Running translations over files and trees: reading bad input safely, writing atomically, and
spreading the work over the cores with memory flat in the number of files.

Nothing here prints. :func:`run` yields one :class:`Outcome` per file, in the order the files were
found; the command line renders them (``fwport/core/report.py``).
"""
from __future__ import annotations

import ast
import codecs
import difflib
import errno
import fnmatch
import os
import pickle
import re
import stat
import tempfile
import tokenize
import traceback
from collections import deque
from contextlib import contextmanager
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from fwport.core.config import DEFAULT_MAX_SIZE
from fwport.core.finding import Finding, Severity
from fwport.core.result import FileResult, Status

#: Folders never walked into: tooling, caches, installed packages and build outputs.
SKIP_DIRS = frozenset({".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "__pycache__",
                       ".mypy_cache", ".pytest_cache", ".ruff_cache", "node_modules", "site-packages",
                       "dist-packages", "build", "dist", ".eggs", ".ipynb_checkpoints"})
#: What a folder walk translates: Python files and Jupyter notebooks (fwport/core/notebook.py).
TRANSLATED_SUFFIXES = (".py", ".ipynb")
BOM = "\ufeff"
#: The largest notebook file read (outputs included); its code cells must still fit max_size.
NOTEBOOK_MAX_SIZE = 256 * 2**20


# --- finding the files ------------------------------------------------------------------------------
def _skip_dir(path: str, name: str) -> bool:
    if name in SKIP_DIRS or name.endswith(".egg-info"):
        return True
    return os.path.exists(os.path.join(path, "pyvenv.cfg"))  # a virtual environment under any name


def is_excluded(path: Path, patterns: Iterable[str], roots: Iterable[Path]) -> bool:
    """Whether an exclude glob matches ``path``.

    A pattern with a slash is matched against the path relative to each root (the pyproject
    folder, the folder being walked), where ``*`` also crosses slashes and a folder pattern covers
    everything below it; a pattern without one is matched against every path component.
    """
    patterns = tuple(patterns)
    if not patterns:
        return False
    rels = []
    for root in roots:
        try:
            # realpath, not Path.resolve: a symlink loop must not raise (RuntimeError) and end the run
            rels.append(Path(os.path.realpath(path)).relative_to(os.path.realpath(root)).as_posix())
        except ValueError:
            continue
    parts = path.parts
    for p in patterns:
        p = p.rstrip("/")
        if "/" in p:
            if any(fnmatch.fnmatchcase(r, p) or fnmatch.fnmatchcase(r, p + "/*") for r in rels):
                return True
        elif any(fnmatch.fnmatchcase(part, p) for part in parts):
            return True
    return False


@dataclass(frozen=True)
class Job:
    """One file to translate and what to do with the result."""

    source: str
    dest: str | None = None  # where to write the output (None: nowhere)
    keep_text: bool = False  # return the source and output texts (single file to stdout)
    diff: bool = False  # return a unified diff
    in_place: bool = False  # dest is the source itself: never touch it when nothing changed
    skipped: bool = False  # excluded by configuration (named explicitly on the command line)


def iter_files(paths: Iterable[str], exclude: Iterable[str] = (), config_root: str | None = None,
               avoid: str | None = None) -> Iterator[tuple[Path, Path, bool]]:
    """``(file, root, excluded)`` for every file to consider: files named on the command line (any
    extension) and the ``.py`` and ``.ipynb`` files of the folders walked, in a stable order. ``root`` is the
    folder the file's output path is relative to. Lazy: no list of the whole tree is built.
    ``avoid``: a folder never walked into (the output folder, when it lies inside an input)."""
    exclude = tuple(exclude)
    base = [Path(config_root)] if config_root else []
    avoid_real = os.path.realpath(avoid) if avoid else None
    for p in paths:
        path = Path(p)
        if path.is_dir():
            for dirpath, dirnames, filenames in os.walk(path):
                here = Path(dirpath)
                dirnames[:] = sorted(d for d in dirnames if not _skip_dir(os.path.join(dirpath, d), d)
                                     and not is_excluded(here / d, exclude, base + [path])
                                     and not (avoid_real and os.path.realpath(os.path.join(dirpath, d)) == avoid_real))
                for name in sorted(filenames):
                    if name.endswith(TRANSLATED_SUFFIXES):
                        f = here / name
                        if not is_excluded(f, exclude, base + [path]):
                            yield f, path, False
        else:
            yield path, path.parent, is_excluded(path, exclude, base + [path.parent])


def output_base(root: Path, paths: list[str], out: Path) -> Path:
    """Where the tree of ``root`` (an input folder, or the folder of an input file) goes under the
    output folder ``out``: ``out`` itself for a single input; with several inputs each keeps its own
    name (``-o out a/ b/`` gives ``out/a/...`` and ``out/b/...``), so two inputs never write the
    same output file (see :func:`colliding_inputs`)."""
    if len(paths) <= 1:
        return out
    if any(os.path.realpath(p) == os.path.realpath(root) and Path(p).is_dir() for p in paths):
        return out / Path(os.path.realpath(root)).name
    return out  # a loose file: out/<its name>


def colliding_inputs(paths: list[str]) -> list[tuple[str, str]]:
    """Pairs of inputs that would write the same place under one output folder (same last name)."""
    if len(paths) <= 1:
        return []
    seen: dict[str, str] = {}
    pairs = []
    for p in paths:
        name = Path(os.path.realpath(p)).name
        if name in seen:
            pairs.append((seen[name], p))
        else:
            seen[name] = p
    return pairs


def plan_jobs(paths: Iterable[str], *, output: str | None = None, in_place: bool = False, diff: bool = False,
              keep_text: bool = False, exclude: Iterable[str] = (), config_root: str | None = None) -> Iterator[Job]:
    """The jobs for a command line. With ``output`` a folder, each input's tree is mirrored under it
    (one folder given on the command line maps onto ``output`` itself; several each onto
    ``output/<its name>``: :func:`output_base`)."""
    paths = list(paths)
    out = Path(output) if output else None
    # -o names a file only for one input file (and an -o that is not an existing folder)
    out_is_file = (out is not None and len(paths) == 1 and not Path(paths[0]).is_dir() and not out.is_dir()
                   and not output.endswith(("/", os.sep)))
    for f, root, excluded in iter_files(paths, exclude, config_root, None if out_is_file or out is None else output):
        if excluded:
            yield Job(str(f), skipped=True)
            continue
        dest = None
        if in_place:
            dest = str(f)
        elif out is not None:
            dest = str(out) if out_is_file else str(output_base(root, paths, out) / f.relative_to(root))
        yield Job(str(f), dest, keep_text, diff, in_place)


# --- reading ----------------------------------------------------------------------------------------
class InputError(Exception):
    def __init__(self, finding: Finding, data: bytes | None = None):
        super().__init__(finding.message)
        self.finding, self.data = finding, data


def _input_error(path: str, message: str, data: bytes | None = None, line: int = 0) -> InputError:
    return InputError(Finding(Severity.ERROR, "input-error", message, path, line, 1 if line else 0), data)


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n} bytes"


def read_source(path: str, max_size: int = DEFAULT_MAX_SIZE) -> tuple[str, bytes]:
    """The text of a Python file and its bytes. Raises :class:`InputError` with a message that
    says what is wrong and what to do."""
    text, data, _ = read_source_encoded(path, max_size)
    return text, data


def read_source_encoded(path: str, max_size: int = DEFAULT_MAX_SIZE) -> tuple[str, bytes, str]:
    """Like :func:`read_source`, with the codec to write the file's translation in: decoded as
    Python does (PEP 263: a ``coding`` line on line 1 or 2, a UTF-8 BOM, else UTF-8). A BOM stays
    in the text (``"utf-8"`` is returned: the BOM is written back as the text's first character)."""
    try:
        size = os.stat(path).st_size
        if size > max_size:
            raise _input_error(path, f"the file is {_mb(size)}, over the {_mb(max_size)} limit; "
                                     "set max_size (bytes) under [tool.fwport] in pyproject.toml to translate it")
        with open(path, "rb") as fh:
            data = fh.read(max_size + 1)
    except FileNotFoundError:
        raise _input_error(path, "no such file or directory") from None
    except IsADirectoryError:
        raise _input_error(path, "is a directory") from None
    except PermissionError:
        raise _input_error(path, "permission denied: cannot read the file") from None
    except OSError as e:
        raise _input_error(path, f"cannot read the file: {e.strerror or e}") from None
    if len(data) > max_size:  # grew while we read it
        raise _input_error(path, f"the file is over the {_mb(max_size)} limit (max_size)")
    if b"\0" in data:
        raise _input_error(path, "a binary file (it contains NUL bytes), not Python source", data)
    encoding, cookie_line = declared_encoding(path, data)
    codec = "utf-8" if encoding in ("utf-8", "utf-8-sig") else encoding
    try:
        text = data.decode(codec)
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        if cookie_line:
            raise _input_error(path, f"not {encoding} text (byte 0x{data[e.start]:02x} at line {line}), though line "
                                     f"{cookie_line} declares that encoding; fix the coding line or the file", data) from None
        raise _input_error(path, f"not UTF-8 text (byte 0x{data[e.start]:02x} at line {line}); "
                                 "re-save the file as UTF-8 or declare its encoding (PEP 263)", data) from None
    return text, data, codec


_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


def declared_encoding(path: str, data: bytes) -> tuple[str, int]:
    """``(encoding, line of the coding declaration or 0)``, as Python decides it
    (``tokenize.detect_encoding``); an unknown or contradictory declaration is an input error."""
    lines = data.splitlines(keepends=True)[:2]
    cookie_line = 0
    for i, line in enumerate(lines, 1):
        line = line.removeprefix(codecs.BOM_UTF8) if i == 1 else line
        if _COOKIE.match(line):
            cookie_line = i
            break
        if line.strip() and not line.lstrip().startswith(b"#"):
            break  # a declaration after code does not count (PEP 263)
    it = iter(lines)
    try:
        encoding, _ = tokenize.detect_encoding(lambda: next(it, b""))
    except SyntaxError as e:
        if cookie_line and ("unknown encoding" in str(e) or "encoding problem" in str(e)):
            name = _COOKIE.match(lines[cookie_line - 1].removeprefix(codecs.BOM_UTF8)).group(1).decode("ascii", "replace")
            why = ("but the file starts with a UTF-8 byte order mark" if "encoding problem" in str(e)
                   else "which Python does not know")
            raise _input_error(path, f"line {cookie_line} declares the encoding {name!r}, {why}; "
                                     "fix the coding line (PEP 263)", data, cookie_line) from None
        return "utf-8", 0  # undeclared and not UTF-8: the decode says where
    if cookie_line:
        try:
            if not codecs.lookup(encoding)._is_text_encoding:
                raise LookupError(encoding)
        except LookupError:
            raise _input_error(path, f"line {cookie_line} declares the encoding {encoding!r}, which is not a "
                                     "text encoding; fix the coding line (PEP 263)", data, cookie_line) from None
    return encoding, cookie_line if encoding not in ("utf-8", "utf-8-sig") else 0


_PY2_HINTS = ("Missing parentheses in call to 'print'", "Missing parentheses in call to 'exec'",
              "invalid decimal literal", "leading zeros in decimal integer literals")


def explain_parse_error(text: str, path: str, fallback: Finding) -> Finding:
    """A parse error as Python itself words it (clearer than the parser's token list), with a hint
    for Python 2 code."""
    try:
        ast.parse(text, filename=path)
    except SyntaxError as e:
        msg = f"not valid Python 3: {e.msg}"
        line = (e.text or "").strip()
        py2 = (any(h in (e.msg or "") for h in _PY2_HINTS) or " <> " in line
               or line.startswith(("print ", "exec "))
               or (line.startswith(("except ", "raise ")) and "," in line))
        if py2:
            msg += " (this looks like Python 2 code: fwport reads Python 3; port it to Python 3 first, e.g. with 2to3)"
        return Finding(Severity.ERROR, "parse-error", msg, path, e.lineno or 0, e.offset or 0)
    except (ValueError, RecursionError, MemoryError):
        pass
    return fallback


def unified_diff(old: str, new: str, a: str, b: str) -> str:
    lines = []
    for line in difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), a, b):
        lines.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(lines)


# --- writing ----------------------------------------------------------------------------------------
TMP_SUFFIX = ".fwport-tmp"


def remove_stale_temp(dest: str) -> None:
    """Remove the temporary files a killed writer of ``dest`` left beside it (see write_atomic)."""
    target = os.path.realpath(dest)
    folder, base = os.path.split(target)
    try:
        names = os.listdir(folder or ".")
    except OSError:
        return
    for name in names:
        if name.startswith(f".{base}.") and name.endswith(TMP_SUFFIX):
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass


def new_file_mode() -> int:
    """The mode a newly created file gets under the process's umask (``mkstemp`` gives 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_atomic(dest: str, data: bytes, mode: int | None = None) -> None:
    """Write ``data`` to ``dest`` through a temporary file in the same folder and ``os.replace``:
    a reader (or an interrupted run) sees the old file or the new one, never half of one."""
    target = os.path.realpath(dest)  # writing through a symlink updates what it points to
    folder = os.path.dirname(target) or "."
    os.makedirs(folder, exist_ok=True)
    if mode is None:
        try:
            mode = os.stat(target).st_mode & 0o7777
        except FileNotFoundError:
            mode = new_file_mode()
    with replaced_atomically(target) as (fh, tmp):
        fh.write(data)
        os.chmod(tmp, mode)


@contextmanager
def replaced_atomically(dest: str):
    """``(file, its path)``: a temporary file beside ``dest`` to write; when the block ends it is
    flushed to disk and renamed over ``dest``, and if the block fails it is removed (``dest`` is
    untouched either way until the rename)."""
    folder = os.path.dirname(dest) or "."
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(dest)}.", suffix=TMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh, tmp
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


# --- one file -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    """What every job of a run shares (sent once to each worker process)."""

    pack: str = "tf2torch"
    extra_dirs: tuple[str, ...] = ()
    disabled: tuple[str, ...] = ()
    options: tuple[tuple[str, object], ...] = ()  # translate_source options (keras, compile)
    max_size: int = DEFAULT_MAX_SIZE


@dataclass
class Outcome:
    result: FileResult
    job: Job
    diff: str = ""
    written: bool = False
    extra: dict = field(default_factory=dict)


def translate_text(text: str, path: str, settings: Settings) -> FileResult:
    """Translate one text: a BOM is kept, a parse error is explained, a crash becomes a finding."""
    from fwport.core.direction import get_direction
    from fwport.core.rule import load_pack
    from fwport.core.pipeline import translate_source

    bom = text.startswith(BOM)
    body = text[1:] if bom else text
    if _too_deep(body) and not _python_parses(body):  # libcst's native parser would overflow its stack
        f = explain_parse_error(body, path, Finding(Severity.ERROR, "parse-error", "not valid Python 3: brackets "
                                                    f"nested more than {_MAX_DEPTH} deep", path))
        return FileResult(path, Status.FAILED, text, text, [f])
    try:
        stages = get_direction(settings.pack).stages
        if stages:  # a chain (fwport tf2jax): each stage on the previous one's output
            from fwport.core.chain import stage_rule_dirs, translate_chain
            result = translate_chain(body, path, [
                (s, load_pack(s, stage_rule_dirs(s, settings.extra_dirs, stages), settings.disabled),
                 dict(settings.options)) for s in stages])
        else:
            pack = load_pack(settings.pack, settings.extra_dirs, settings.disabled)
            result = translate_source(body, path, pack, dict(settings.options))
    except RecursionError:
        f = Finding(Severity.ERROR, "internal-error", "the code is nested too deeply for the parser "
                    "(Python's recursion limit); split the deepest expression", path)
        return FileResult(path, Status.FAILED, text, text, [f])
    except Exception as e:  # a bug in fwport must not end the run, nor show a traceback
        where = traceback.extract_tb(e.__traceback__)[-1]
        f = Finding(Severity.ERROR, "internal-error",
                    f"fwport crashed: {type(e).__name__}: {e} (at {Path(where.filename).name}:{where.lineno}); "
                    "the file was left as it was; please report it with this file", path)
        return FileResult(path, Status.FAILED, text, text, [f])
    if result.status is Status.FAILED:
        result.findings = [explain_parse_error(body, path, f) if f.code == "parse-error" else f
                           for f in result.findings]
    if bom:
        result.source, result.output = text, BOM + result.output
    return result


def _unencodable(result: FileResult, text: str, encoding: str, e: UnicodeEncodeError) -> FileResult:
    """The translation holds a character the file's declared encoding cannot write: the file fails."""
    bad = e.object[e.start]
    line = e.object.count("\n", 0, e.start) + 1
    f = Finding(Severity.ERROR, "output-error",
                f"the translation has {bad!r} (U+{ord(bad):04X}) on its line {line}, which the file's declared "
                f"encoding {encoding} cannot represent; the translation was not written (declare utf-8 instead)",
                result.path)
    return FileResult(result.path, Status.FAILED, text, text, [*result.findings, f], result.layers,
                      result.version, result.version_name, result.models)


_MAX_DEPTH = 200  # Python's own limit on nested brackets (the tokenizer's MAXLEVEL)
_BRACKET = re.compile(r"[][(){}]")


def _too_deep(text: str) -> bool:
    """Whether brackets nest deeper than Python allows (counting those in strings and comments
    too: a hit is confirmed with Python's parser). Costs a scan of the brackets, only in a file
    with that many opening ones."""
    if text.count("(") + text.count("[") + text.count("{") <= _MAX_DEPTH:
        return False
    depth = 0
    for m in _BRACKET.finditer(text):
        if m.group() in "([{":
            depth += 1
            if depth > _MAX_DEPTH:
                return True
        elif depth:
            depth -= 1
    return False


def _check_writable(dest: str) -> None:
    """A read-only destination is not replaced (a rename would, and root may write anything):
    like ``cp``, fwport does not overwrite a file its owner marked read-only."""
    try:
        st = os.stat(dest)
    except OSError:
        return
    if stat.S_ISREG(st.st_mode) and not st.st_mode & 0o222:
        raise PermissionError(errno.EACCES, "the file is read-only; not overwritten (make it writable to replace it)")


def _python_parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def run_job(job: Job, settings: Settings) -> Outcome:
    """Read, translate, write (atomically) and describe one file. Never raises on user input."""
    if job.skipped:
        return Outcome(FileResult(job.source, Status.SKIPPED), job)
    data: bytes | None = None
    encoding, new = "utf-8", b""
    notebook = None
    try:
        # a notebook's size is mostly its outputs (images): max_size applies to its code (fwport/core/notebook.py)
        limit = max(settings.max_size, NOTEBOOK_MAX_SIZE) if job.source.endswith(".ipynb") else settings.max_size
        text, data, encoding = read_source_encoded(job.source, limit)
    except InputError as e:
        result = FileResult(job.source, Status.FAILED, findings=[e.finding])
        data = e.data
        text = None
    else:
        if job.source.endswith(".ipynb"):  # cell by cell, one import table (fwport/core/notebook.py)
            from fwport.core.notebook import translate_notebook
            notebook = translate_notebook(text, job.source, settings)
            result = notebook.result
        else:
            result = translate_text(text, job.source, settings)
        if result.status is Status.CONVERTED:
            try:  # the translation is written in the file's own encoding (PEP 263)
                new = result.output.encode(encoding)
            except UnicodeEncodeError as e:
                result = _unencodable(result, text, encoding, e)
    out = Outcome(result, job)
    if encoding != "utf-8":
        out.extra["encoding"] = encoding  # stdout and --diff bytes are in it too
    # the code itself: a notebook's code cells, else the text
    code_in, code_out = (notebook.code_in, notebook.code_out) if notebook else (text, result.output)
    if text is not None and job.diff and result.output != text:
        a, b = (job.source, job.source) if os.path.isabs(job.source) else (f"a/{job.source}", f"b/{job.source}")
        out.diff = notebook.diff(a, b) if notebook else unified_diff(text, result.output, a, b)
    if text is not None and result.status is Status.CONVERTED and job.dest is not None and not job.in_place:
        # what the translation made the code import (a mirrored tree's dependency files add it: fwport/core/tree.py)
        from fwport.core.deps import added_imports
        from fwport.core.direction import get_direction
        out.extra["imports"] = added_imports(code_in, code_out, get_direction(settings.pack).source.roots)
    if job.dest is not None and data is not None and not (job.in_place and (result.status is not Status.CONVERTED)):
        # a mirrored tree is complete: unchanged (and unparsable) files are copied byte for byte
        new = new if result.status is Status.CONVERTED else data
        try:
            _check_writable(job.dest)
            write_atomic(job.dest, new, None if job.in_place else os.stat(job.source).st_mode & 0o7777)
            out.written = True
        except OSError as e:
            result.findings.append(Finding(Severity.ERROR, "output-error",
                                           f"cannot write {job.dest}: {e.strerror or e}", job.source))
            if result.status is not Status.FAILED:
                result.status = Status.FAILED
    if text is not None and result.status is not Status.FAILED:  # for the migration overview
        from fwport.core.direction import get_direction
        from fwport.core.migration import call_stats
        out.extra.update(call_stats(code_in, code_out, get_direction(settings.pack)))
    if not job.keep_text:  # memory stays flat in the number of files
        result.source = result.output = ""
    return out


# --- many files ---------------------------------------------------------------------------------------
# A worker returns its Outcome already pickled, and the parent unpickles it itself: a result that
# cannot cross the process boundary then costs only its own file. (Left to the pool, a result that
# fails to unpickle breaks the pool's manager thread, which kills every worker.) A worker that dies
# (killed, out of memory, a crash in native code) breaks the pool: the files in flight are retried
# one by one, each alone in a fresh process, to tell the culprit from its neighbours, and a fresh
# pool takes the rest.
_WORKER_SETTINGS: Settings | None = None


def _init_worker(settings: Settings) -> None:
    global _WORKER_SETTINGS
    _WORKER_SETTINGS = settings
    from fwport.core.chain import stage_rule_dirs
    from fwport.core.direction import get_direction
    from fwport.core.rule import load_pack
    stages = get_direction(settings.pack).stages
    for s in stages or (settings.pack,):
        load_pack(s, stage_rule_dirs(s, settings.extra_dirs, stages) if stages else settings.extra_dirs, settings.disabled)


def _worker(job: Job) -> bytes:
    assert _WORKER_SETTINGS is not None
    outcome = run_job(job, _WORKER_SETTINGS)
    try:
        return pickle.dumps(outcome, pickle.HIGHEST_PROTOCOL)
    except Exception as e:  # a result that cannot be pickled: report the file, not a broken pool
        return pickle.dumps(_failed(job, f"its result could not be sent back from the worker process "
                                         f"({type(e).__name__}: {e}); please report it with this file"))


def _failed(job: Job, message: str) -> Outcome:
    f = Finding(Severity.ERROR, "internal-error", message, job.source)
    return Outcome(FileResult(job.source, Status.FAILED, findings=[f]), job)


def _unpickle(job: Job, data: bytes) -> Outcome:
    try:
        outcome = pickle.loads(data)
    except Exception as e:
        return _failed(job, f"its result could not be read back from the worker process "
                            f"({type(e).__name__}: {e}); please report it with this file")
    if not isinstance(outcome, Outcome):
        return _failed(job, f"the worker sent back a {type(outcome).__name__}, not a result")
    return outcome


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def run(jobs: Iterable[Job], settings: Settings, workers: int | None = None) -> Iterator[Outcome]:
    """Run the jobs, yielding outcomes in the order of ``jobs``. Never raises because of one file:
    a crash, an unpicklable result or a dead worker becomes that file's ``internal-error``.

    Up to a few jobs per worker are in flight at once, so memory stays flat however many files
    there are; a handful of files is translated in this process (a pool would cost more than it saves).
    """
    workers = workers or default_workers()
    it = iter(jobs)
    head: list[Job] = []
    for job in it:
        head.append(job)
        if len(head) > 2 * workers:
            break
    if workers == 1 or len(head) <= 2:
        for job in _chain(head, it):
            yield run_job(job, settings)
        return
    pool = _Pool(settings, workers)
    window = 4 * workers
    pending: deque[_Slot] = deque()
    try:
        for job in _chain(head, it):
            pending.append(pool.submit(job, pending))
            while len(pending) >= window:
                yield pool.collect(pending)
        while pending:
            yield pool.collect(pending)
    finally:
        pool.close(pending)


def _chain(head: list[Job], rest: Iterator[Job]) -> Iterator[Job]:
    yield from head
    yield from rest


@dataclass
class _Slot:
    """A job in flight: its future, or its outcome once known."""

    job: Job
    future: Future | None = None
    outcome: Outcome | None = None


class _Pool:
    """A process pool that survives its workers: see the comment above ``_init_worker``."""

    def __init__(self, settings: Settings, workers: int):
        self.settings, self.workers = settings, workers
        self.executor = self._new(workers)

    def _new(self, workers: int) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(workers, initializer=_init_worker, initargs=(self.settings,))

    def submit(self, job: Job, pending: deque[_Slot]) -> _Slot:
        try:
            return _Slot(job, self.executor.submit(_worker, job))
        except BrokenProcessPool:  # broke since the last collect: sort out what was in flight
            self._recover(pending)
            return _Slot(job, self.executor.submit(_worker, job))

    def collect(self, pending: deque[_Slot]) -> Outcome:
        slot = pending[0]
        if slot.outcome is None:
            try:
                data = slot.future.result()
            except BrokenProcessPool:
                self._recover(pending)
            except Exception as e:  # e.g. the job could not be sent to the worker
                slot.outcome = _failed(slot.job, f"fwport could not run this file in a worker process "
                                                 f"({type(e).__name__}: {e}); please report it with this file")
            else:
                slot.outcome = _unpickle(slot.job, data)
        pending.popleft()
        assert slot.outcome is not None
        return slot.outcome

    def _recover(self, pending: deque[_Slot]) -> None:
        """The pool broke: keep the results that arrived, retry every other job in flight alone (so
        that only the file that kills a worker is reported), and start a fresh pool for the rest."""
        self.executor.shutdown(wait=True, cancel_futures=True)  # every worker has ended
        for slot in pending:
            if slot.outcome is not None:
                continue
            if slot.job.dest is not None:  # a worker killed while writing leaves its temporary file
                remove_stale_temp(slot.job.dest)
            fut = slot.future
            if fut is not None and fut.done() and not fut.cancelled() and fut.exception() is None:
                slot.outcome = _unpickle(slot.job, fut.result())
            else:
                slot.outcome = self._alone(slot.job)
        self.executor = self._new(self.workers)

    def _alone(self, job: Job) -> Outcome:
        single = self._new(1)
        try:
            return _unpickle(job, single.submit(_worker, job).result())
        except BrokenProcessPool:
            return _failed(job, "the worker process translating this file died (killed, out of memory or a "
                                "crash in native code), also when retried alone; the file was left as it was")
        except Exception as e:
            return _failed(job, f"fwport could not run this file in a worker process "
                                f"({type(e).__name__}: {e}); please report it with this file")
        finally:
            single.shutdown(wait=True, cancel_futures=True)

    def close(self, pending: deque[_Slot]) -> None:
        for slot in pending:
            if slot.future is not None:
                slot.future.cancel()
        self.executor.shutdown(wait=True, cancel_futures=True)


# --- residue: what a migrated tree must no longer contain -----------------------------------------------------
def find_source_references(text: str, path: str, roots: tuple[str, ...]) -> list[Finding]:
    """Every import of TensorFlow/Keras (any nesting, ``importlib.import_module("tensorflow")``
    included) in a Python text, as error findings. Raises SyntaxError for unparsable text."""
    tree = ast.parse(text.lstrip(BOM), filename=path)
    found: list[Finding] = []

    def report(node: ast.AST, what: str) -> None:
        found.append(Finding(Severity.ERROR, "residue", f"still uses the source framework: {what}", path,
                             node.lineno, node.col_offset + 1))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in roots:
                    report(node, f"import {a.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in roots:
                report(node, f"from {node.module} import ...")
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) and node.args[0].value.split(".")[0] in roots:
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if name in ("import_module", "__import__"):
                report(node, f"{name}({node.args[0].value!r})")
    found.sort(key=lambda f: (f.line, f.column))
    return found


def check_residue(path: str, roots: tuple[str, ...], max_size: int = DEFAULT_MAX_SIZE) -> FileResult:
    """A FileResult whose findings are the TensorFlow/Keras imports left in one file."""
    try:
        text, _ = read_source(path, max_size)
    except InputError as e:
        return FileResult(path, Status.FAILED, findings=[e.finding])
    if path.endswith(".ipynb"):
        from fwport.core.notebook import notebook_residue
        return notebook_residue(text, path, roots)
    try:
        findings = find_source_references(text, path, roots)
    except SyntaxError as e:
        f = explain_parse_error(text.lstrip(BOM), path, Finding(Severity.ERROR, "parse-error", f"not valid Python 3: {e.msg}",
                                                                path, e.lineno or 0, e.offset or 0))
        return FileResult(path, Status.FAILED, findings=[f])
    return FileResult(path, Status.UNCHANGED, findings=findings)
