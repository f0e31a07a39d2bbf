"""``-o DIR`` for folders: the output is the whole repository, not only its Python files.

The runner translates the ``.py`` and ``.ipynb`` files (and copies those with nothing to translate);
:class:`Mirror` does the rest, in the parent process once the translations are done (copying is
I/O, and the dependency files need to know what the translated code imports):

- every other file of the walked folders is copied byte for byte, its mode and times kept, through
  a temporary file and a rename like every write (a reader never sees half a file);
- a symbolic link (to a file or a folder, dangling or not) is recreated as a link with the same
  target text, never followed: a relative link inside the tree then points at the mirrored file,
  as it did in the input (``.py`` links are the runner's: it writes their translation as a file);
- the dependency files (:func:`fwport.core.deps.kind_of`: requirements*.txt, pyproject.toml, setup.py,
  setup.cfg, environment.yml) are written with TensorFlow/Keras replaced by torch and by what
  the translated files import beyond it, each change an ``info`` ``dependency-updated`` finding;
  such a file is then reported like a translated one;
- the folders the walker skips (``.git``, virtual environments, caches, build outputs,
  ``.ipynb_checkpoints``), excluded globs and the output folder itself (when it lies inside an
  input) are not copied.

Copied files are counted in :attr:`Mirror.copied`, not as translated files. Nothing here runs for
``--check``, ``--diff`` without ``-o``, ``--in-place`` or one file to stdout.
"""
from __future__ import annotations

import difflib
import os
import shutil
from pathlib import Path
from typing import Iterable, Iterator

from fwport.core import deps
from fwport.core.finding import Finding, Severity
from fwport.core.result import FileResult, Status
from fwport.core.runner import (TMP_SUFFIX, output_base, replaced_atomically, TRANSLATED_SUFFIXES, Job, Outcome, _skip_dir, is_excluded, unified_diff,
                           write_atomic)


def copy_atomic(src: str, dest: str) -> None:
    """Copy a file's bytes, mode and times to ``dest`` through a temporary file and a rename.
    ``dest`` itself is replaced (a link there from an earlier run is not written through)."""
    folder = os.path.dirname(dest) or "."
    os.makedirs(folder, exist_ok=True)
    with replaced_atomically(dest) as (out, tmp), open(src, "rb") as inp:
        shutil.copyfileobj(inp, out, 1 << 20)
        out.flush()
        shutil.copystat(src, tmp)  # mode and times (the rename keeps them)


def link_atomic(target: str, dest: str) -> None:
    """A symbolic link at ``dest`` with the text ``target`` (replacing a file or link there)."""
    folder = os.path.dirname(dest) or "."
    os.makedirs(folder, exist_ok=True)
    for n in range(100):
        tmp = os.path.join(folder, f".{os.path.basename(dest)}.{os.getpid()}.{n}{TMP_SUFFIX}")
        try:
            os.symlink(target, tmp)
            break
        except FileExistsError:
            continue
    else:
        raise OSError(f"cannot create a temporary link beside {dest}")
    try:
        os.replace(tmp, dest)
    except BaseException:
        os.unlink(tmp)
        raise


class Mirror:
    """The rest of each input folder under the output folder (see the module's docstring)."""

    def __init__(self, paths: Iterable[str], output: str, exclude: Iterable[str] = (),
                 config_root: str | None = None, diff: bool = False, direction: str | None = None):
        from fwport.core.direction import default_direction, get_direction

        #: how dependency files change (None: the direction has no say; they are copied as they are)
        self.requirements = get_direction(direction or default_direction()).requirements
        self.paths = [str(p) for p in paths]
        self.roots = [Path(p) for p in self.paths if Path(p).is_dir()]
        self.output = Path(output)
        self.exclude = tuple(exclude)
        self.base = [Path(config_root)] if config_root else []
        self.diff = diff
        self.copied = 0  # files (and links) copied as they are
        self.imports: set[str] = set()  # what the translated files import that their sources did not
        self.held: dict[str, Outcome] = {}  # setup.py: translated by the runner, its requirements updated here

    def wrap(self, outcomes: Iterable[Outcome]) -> Iterator[Outcome]:
        """The runner's outcomes, then the outcomes of the dependency files and failed copies."""
        for o in outcomes:
            self.imports.update(o.extra.get("imports", ()))
            if o.written and o.job.dest and os.path.basename(o.job.source) == "setup.py" and not o.job.in_place:
                self.held[o.job.source] = o  # reported once its requirements are updated
                continue
            yield o
        yield from self.finish()

    # --- the walk ---------------------------------------------------------------------------------
    def _walk(self, root: Path) -> Iterator[tuple[Path, Path, bool]]:
        """``(path, path relative to root, is a link)`` of every file and folder link to copy."""
        avoid = os.path.realpath(self.output)
        roots = self.base + [root]
        for dirpath, dirnames, filenames in os.walk(root):
            here = Path(dirpath)
            keep = []
            for d in sorted(dirnames):
                full = here / d
                if _skip_dir(str(full), d) or is_excluded(full, self.exclude, roots) or os.path.realpath(full) == avoid:
                    continue
                if full.is_symlink():
                    yield full, full.relative_to(root), True
                else:
                    keep.append(d)
            dirnames[:] = keep
            for name in sorted(filenames):
                f = here / name
                if is_excluded(f, self.exclude, roots):
                    continue
                if name.endswith(TRANSLATED_SUFFIXES):
                    continue  # the runner's
                yield f, f.relative_to(root), f.is_symlink()

    def finish(self) -> Iterator[Outcome]:
        targets = deps.target_requirements(self.imports, self.requirements) if self.requirements else None
        for root in self.roots:
            for src, rel, link in self._walk(root):
                dest = output_base(root, self.paths, self.output) / rel
                if link:
                    try:
                        link_atomic(os.readlink(src), str(dest))
                        self.copied += 1
                    except OSError as e:
                        yield self._failed(src, "output-error", f"cannot recreate the link at {dest}: {e.strerror or e}")
                    continue
                kind = deps.kind_of(rel.as_posix()) if targets is not None else None
                if kind:
                    outcome = self._dependency(src, dest, kind, targets)
                    if outcome is not None:
                        yield outcome
                        continue
                try:
                    copy_atomic(str(src), str(dest))
                    self.copied += 1
                except OSError as e:
                    code = "input-error" if not os.access(src, os.R_OK) else "output-error"
                    yield self._failed(src, code, f"cannot copy to {dest}: {e.strerror or e}")
        for source, o in self.held.items():
            yield self._setup_py(o, targets) if targets is not None else o
        self.held.clear()

    # --- dependency files --------------------------------------------------------------------------
    def _update(self, path: str, text: str, kind: str, targets: deps.Targets) -> tuple[str, list[Finding]]:
        up = deps.UPDATERS[kind](text, targets)
        findings = []
        for c in up.changes:
            what = f"{c.old} → {', '.join(c.new)}" if c.new else f"{c.old} removed ({targets[0]} is already required)"
            findings.append(Finding(Severity.INFO, "dependency-updated", what, path, c.line, 1))
        for line, note in up.notes:
            findings.append(Finding(Severity.WARNING, "dependency-kept", note, path, line, 1))
        findings.sort(key=lambda f: f.line)
        return up.text, findings

    def _dependency(self, src: Path, dest: Path, kind: str, targets: deps.Targets) -> Outcome | None:
        """Write an updated dependency file; None when there is nothing to change (it is copied)."""
        try:
            data = src.read_bytes()
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None  # copied as it is (a read error is reported by the copy)
        new, findings = self._update(str(src), text, kind, targets)
        if not findings:
            return None
        job = Job(str(src), str(dest))
        status = Status.CONVERTED if new != text else Status.UNCHANGED
        outcome = Outcome(FileResult(str(src), status, findings=findings), job)
        try:
            if new != text:
                write_atomic(str(dest), new.encode("utf-8"), os.stat(src).st_mode & 0o7777)
            else:
                copy_atomic(str(src), str(dest))
            outcome.written = True
        except OSError as e:
            outcome.result.findings.append(Finding(Severity.ERROR, "output-error",
                                                   f"cannot write {dest}: {e.strerror or e}", str(src)))
            outcome.result.status = Status.FAILED
        if self.diff and new != text:
            outcome.diff = unified_diff(text, new, f"a/{src}", f"b/{src}") if not src.is_absolute() else \
                unified_diff(text, new, str(src), str(src))
        return outcome

    def _setup_py(self, o: Outcome, targets: deps.Targets) -> Outcome:
        """setup.py as the runner wrote it (translated or copied), its requirement lists updated."""
        dest = o.job.dest
        assert dest is not None
        try:
            text = Path(dest).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return o
        new, findings = self._update(o.result.path, text, "setup.py", targets)
        if findings:
            o.result.findings.extend(findings)
        if new != text:
            try:
                write_atomic(dest, new.encode("utf-8"))
                if o.result.status is Status.UNCHANGED:
                    o.result.status = Status.CONVERTED
                if self.diff:
                    o.diff += "".join(difflib.unified_diff(text.splitlines(keepends=True), new.splitlines(keepends=True),
                                                           f"a/{o.result.path}", f"b/{o.result.path}"))
            except OSError as e:
                o.result.findings.append(Finding(Severity.ERROR, "output-error", f"cannot write {dest}: {e.strerror or e}",
                                                 o.result.path))
                o.result.status = Status.FAILED
        return o

    @staticmethod
    def _failed(src: Path, code: str, message: str) -> Outcome:
        f = Finding(Severity.ERROR, code, message, str(src))
        return Outcome(FileResult(str(src), Status.FAILED, findings=[f]), Job(str(src)))
