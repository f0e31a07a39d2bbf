"""Jupyter notebooks (``.ipynb``), translated cell by cell with one import table for the whole notebook.

The code cells are joined into one Python text and translated once, so an import in cell 1 makes
``tf.x`` in cell 5 resolvable, exactly as running the notebook top to bottom does. After each cell
the joined text has a marker statement (``__fwport_cell__(k)``): a statement, not a comment,
because the translator keeps statements it has no rule for where they are, while comments go with
the statement they precede (and a pruned import takes its comments along). The translation may add
or remove lines inside a cell (imports, a multi-line call made one line, a removed decorator); the
markers still say where each cell ends.

IPython syntax that is not Python — line magics (``%matplotlib inline``), shell lines
(``!pip install``), ``x = !ls``, ``obj?`` help, and the first line of a Python cell magic
(``%%time``) — is masked line for line by a placeholder statement (``__fwport_ipython__(n)``) at the
same indentation, and restored after: it comes back exactly as written. A cell whose cell magic
runs something else (``%%bash``, ``%%writefile``, ``%%html``...) is left as it is; so is a cell that
does not parse (reported as ``parse-error`` at its cell and line; the other cells are translated).

Target imports go to the first translated code cell with Python in it (a setup cell of only
``!pip install`` lines stays as it is, first): a source import is put at its top before
translating (tf2torch: ``import tensorflow as __fwport_anchor__``); the import fixer inserts the
target imports where the first source import stands and then drops the unused anchor.

Changed code cells lose their outputs and execution count (they came from the old code); other
cells keep theirs. A notebook with nothing to translate is returned as read, byte for byte.
Findings carry their cell (1-based, every cell counted, markdown too: ``nb.cells[N - 1]``) and
their line in that cell: ``nb.ipynb:cell 3:2:5``.
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
import re
import warnings
from dataclasses import dataclass, field

from fwport.core.finding import Finding, Severity
from fwport.core.result import FileResult, Status

SUFFIX = ".ipynb"
_CELL = "__fwport_cell__({})"
_MASK = "__fwport_ipython__({})"
_MASK_RE = re.compile(r"^([ \t]*)__fwport_ipython__\((\d+)\)[ \t]*$")
def _anchor(roots: tuple[str, ...]) -> str:
    """An import of the source framework that marks where the target imports go (then dropped)."""
    return f"import {roots[0]} as __fwport_anchor__"


def _source_import(roots: tuple[str, ...]) -> re.Pattern:
    return re.compile(r"^[ \t]*(?:import|from)[ \t]+(?:" + "|".join(map(re.escape, roots)) + r")\b", re.M)
_FUTURE = re.compile(r"^[ \t]*from[ \t]+__future__[ \t]+import\b", re.M)

#: Cell magics whose body is Python (translated, the magic line kept); any other cell magic's cell is left alone.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "memit", "mprun"})

# IPython-only lines, at the start of a logical line: %magic, !shell, `x = !cmd` / `x = %magic`, `obj?` / `?obj`
_IPYTHON_LINE = re.compile(r"^[ \t]*(?:[%!]"
                           r"|[A-Za-z_][\w.]*(?:[ \t]*,[ \t]*[A-Za-z_][\w.]*)*[ \t]*=[ \t]*[%!]"
                           r"|\?{1,2}[A-Za-z_][\w.]*[ \t]*$"
                           r"|[A-Za-z_][\w.]*\?{1,2}[ \t]*$)")


def is_notebook(path: str) -> bool:
    return path.endswith(SUFFIX)


# --- masking IPython syntax ------------------------------------------------------------------------------
def _scan(line: str, depth: int, quote: str | None) -> tuple[int, str | None]:
    """Bracket depth and open triple-quoted string after ``line`` (enough to tell logical line starts)."""
    i, n = 0, len(line)
    while i < n:
        if quote:
            j = line.find(quote, i)
            if j < 0:
                return depth, quote
            i, quote = j + 3, None
            continue
        c = line[i]
        if c == "#":
            break
        if c in "\"'":
            if line.startswith(c * 3, i):
                quote, i = c * 3, i + 3
                continue
            j = i + 1
            while j < n and line[j] != c:
                j += 2 if line[j] == "\\" else 1
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(0, depth - 1)
        i += 1
    return depth, quote


def mask_ipython(source: str, masks: list[str]) -> str | None:
    """``source`` with its IPython-only lines replaced by placeholders (their text appended to
    ``masks``); None for a cell that is not Python (a cell magic other than %%time and the like)."""
    lines = source.splitlines(keepends=True)
    if lines and lines[0].lstrip().startswith("%%"):
        name = lines[0].lstrip()[2:].split(None, 1)[0] if lines[0].strip() != "%%" else ""
        if name not in PYTHON_CELL_MAGICS:
            return None
    out = []
    depth, quote, continued, in_magic, indent = 0, None, False, False, ""
    for line in lines:
        body = line.rstrip("\r\n")
        ending = line[len(body):]
        starts_logical = depth == 0 and quote is None and not continued
        if in_magic or (starts_logical and _IPYTHON_LINE.match(body)):
            if not in_magic:
                indent = body[: len(body) - len(body.lstrip(" \t"))]
            out.append(f"{indent}{_MASK.format(len(masks))}{ending}")
            masks.append(body)
            in_magic = body.endswith("\\")  # a magic continued on the next line
            continue
        out.append(line)
        depth, quote = _scan(body, depth, quote)
        continued = body.endswith("\\") and quote is None
    return "".join(out)


def unmask_ipython(text: str, masks: list[str]) -> tuple[str, int]:
    """The placeholders replaced by the lines they hid; and how many were found."""
    found = 0
    out = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        m = _MASK_RE.match(body)
        if m and int(m.group(2)) < len(masks):
            out.append(masks[int(m.group(2))] + line[len(body):])
            found += 1
        else:
            out.append(line)
    return "".join(out), found


# --- translating --------------------------------------------------------------------------------------
@dataclass
class _Region:
    cell: int  # 1-based index in nb.cells
    start: int  # first line in the joined text
    lines: int
    masks: list[str]
    newline: bool  # the cell's source ended with a line break
    indent: str = ""  # the indentation of the cell's first line, which IPython removes from every line


@dataclass
class NotebookTranslation:
    result: FileResult
    code_in: str = ""  # the code cells joined (what was translated)
    code_out: str = ""
    changes: list[tuple[int, str, str]] = field(default_factory=list)  # (cell, old source, new source)

    def diff(self, a: str, b: str) -> str:
        """A unified diff of each changed code cell, headed by the notebook's path and the cell."""
        parts = []
        for cell, old, new in self.changes:
            old_lines = [ln if ln.endswith("\n") else ln + "\n" for ln in old.splitlines(keepends=True)]
            new_lines = [ln if ln.endswith("\n") else ln + "\n" for ln in new.splitlines(keepends=True)]
            parts.append("".join(difflib.unified_diff(old_lines, new_lines, f"{a} (cell {cell})", f"{b} (cell {cell})")))
        return "".join(parts)


def _input_error(path: str, message: str) -> Finding:
    return Finding(Severity.ERROR, "input-error", message, path)


def read_notebook(text: str, path: str):
    """The notebook as nbformat's v4 node; raises ValueError with a message for a file that is not one."""
    import nbformat

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nb = nbformat.reads(text, as_version=4, capture_validation_error={})
    except Exception as e:  # nbformat raises JSON, schema and conversion errors of many types
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"not a Jupyter notebook ({msg[:200]})") from None
    if not isinstance(nb.get("cells"), list) or not all(isinstance(c, dict) and "cell_type" in c for c in nb.cells):
        raise ValueError("not a Jupyter notebook (no list of cells)")
    return nb


def _language(nb) -> str:
    meta = nb.get("metadata") or {}
    lang = (meta.get("kernelspec") or {}).get("language") or (meta.get("language_info") or {}).get("name") or "python"
    return str(lang).lower()


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def translate_notebook(text: str, path: str, settings) -> NotebookTranslation:
    from fwport.core.direction import get_direction

    direction = get_direction(settings.pack)
    roots = direction.source.roots
    anchor_line = _anchor(roots)
    """Translate one notebook's text (see the module's docstring). Never raises on user input."""
    from fwport.core.runner import BOM, explain_parse_error, translate_text

    bom = text.startswith(BOM)
    try:
        nb = read_notebook(text[1:] if bom else text, path)
    except ValueError as e:
        return NotebookTranslation(FileResult(path, Status.FAILED, text, text, [_input_error(path, str(e))]))
    unchanged = NotebookTranslation(FileResult(path, Status.UNCHANGED, text, text))
    if _language(nb) not in ("python", "python3", "ipython", "ipython3"):
        return unchanged

    findings: list[Finding] = []
    # (cell, masked source, masks, ended with \n, indentation IPython removes)
    included: list[tuple[int, str, list[str], bool, str]] = []
    for i, cell in enumerate(nb.cells, 1):
        if cell.get("cell_type") != "code":
            continue
        src = _source(cell)
        indent = _leading_indent(src)
        if indent:
            src = _dedent(src, indent)
        masks: list[str] = []
        masked = mask_ipython(src, masks)
        if masked is None:  # a cell magic that runs something else: left as it is, never silently
            if direction.mentions.search(src):
                magic = src.lstrip().split(None, 1)[0]
                findings.append(Finding(Severity.ERROR, "unsupported-construct",
                                        f"a {magic} cell is not Python fwport translates, and it mentions the source "
                                        "framework: the cell was left as it was; translate it by hand",
                                        path, 1, 1, cell=i))
            continue
        try:
            ast.parse(masked)
        except (SyntaxError, ValueError) as e:
            if isinstance(e, SyntaxError):
                fallback = Finding(Severity.ERROR, "parse-error", f"not valid Python 3: {e.msg}", path,
                                   e.lineno or 0, e.offset or 0)
                f = explain_parse_error(masked, path, fallback)
                findings.append(dataclasses.replace(f, cell=i, message=f.message + "; the cell was left as it was"))
            continue
        except (RecursionError, MemoryError):
            continue
        included.append((i, masked, masks, src.endswith("\n"), indent))
    joined_all = "\n".join(m for _, m, _, _, _ in included)
    # the source roots, or a module of another package that is source code too (tensorflow_datasets: `\b` does
    # not end `tensorflow` before `_`, so a notebook importing only it was left as it was, with no finding)
    if not included or not _source_import(roots + direction.source.modules).search(joined_all):
        unchanged.result.findings = findings
        return unchanged

    if len(joined_all) > settings.max_size:
        from fwport.core.runner import _mb
        return NotebookTranslation(FileResult(path, Status.FAILED, text, text, findings + [_input_error(
            path, f"its code cells are {_mb(len(joined_all))}, over the {_mb(settings.max_size)} limit; set max_size "
                  "(bytes) under [tool.fwport] in pyproject.toml to translate it")]))
    # the joined text: cell, marker, [anchor] cell, marker, ...: the anchor opens the first cell with
    # Python in it (a setup cell of only `!pip install` lines stays first)
    first = next((k for k, (_, masked, _, _, _) in enumerate(included) if _has_python(masked)), 0)
    anchor = not _FUTURE.search(included[first][1])
    parts: list[str] = []
    regions: list[_Region] = []
    line = 1
    for k, (i, masked, masks, newline, indent) in enumerate(included):
        if anchor and k == first:
            parts.append(anchor_line + "\n")
            line += 1
        seg = masked if masked.endswith("\n") or not masked else masked + "\n"
        n = seg.count("\n")
        regions.append(_Region(i, line, n, masks, newline, indent))
        parts.append(seg)
        parts.append(_CELL.format(k) + "\n")
        line += n + 1
    joined = "".join(parts)
    r = translate_text(joined, path, settings)
    r.findings = findings + [_locate(f, regions) for f in r.findings]
    r.findings.sort(key=lambda f: (f.cell, f.line, f.column))
    if r.status is Status.FAILED:
        return NotebookTranslation(FileResult(path, Status.FAILED, text, text, r.findings), joined, joined)
    if r.output == joined:
        return NotebookTranslation(FileResult(path, Status.UNCHANGED, text, text, r.findings, r.layers,
                                              r.version, r.version_name, r.models), joined, joined)

    segments = _split(r.output, len(regions))
    if segments is None:
        f = Finding(Severity.ERROR, "internal-error", "the notebook's cell boundaries were lost in translation; "
                    "the notebook was left as it was; please report it with this notebook", path)
        return NotebookTranslation(FileResult(path, Status.FAILED, text, text, r.findings + [f]), joined, joined)
    changes: list[tuple[int, str, str]] = []
    for region, seg in zip(regions, segments):
        if region is regions[first] and anchor_line in seg:  # only when the import fixer did not run
            seg = "".join(ln for ln in seg.splitlines(keepends=True) if ln.rstrip("\r\n") != anchor_line)
        new, found = unmask_ipython(seg, region.masks)
        if found != len(region.masks):
            f = Finding(Severity.ERROR, "internal-error", f"the IPython lines of cell {region.cell} were lost in "
                        "translation; the notebook was left as it was; please report it with this notebook", path)
            return NotebookTranslation(FileResult(path, Status.FAILED, text, text, r.findings + [f]), joined, joined)
        if not region.newline and new.endswith("\n"):
            new = new[:-1]
        if region.indent:  # the cell's own indentation back
            new = "".join(region.indent + ln if ln.strip() else ln for ln in new.splitlines(keepends=True))
        cell = nb.cells[region.cell - 1]
        old = _source(cell)
        if new != old:
            changes.append((region.cell, old, new))
            cell["source"] = new
            cell["outputs"] = []
            cell["execution_count"] = None
    if not changes:
        return NotebookTranslation(FileResult(path, Status.UNCHANGED, text, text, r.findings, r.layers,
                                              r.version, r.version_name, r.models), joined, r.output)
    import nbformat

    out = nbformat.writes(nb, capture_validation_error={})
    if text.endswith("\n") and not out.endswith("\n"):
        out += "\n"
    if bom:
        out = BOM + out
    result = FileResult(path, Status.CONVERTED, text, out, r.findings, r.layers, r.version, r.version_name, r.models)
    return NotebookTranslation(result, joined, r.output, changes)


def _leading_indent(src: str) -> str:
    """The spaces and tabs the cell's first line starts with: IPython removes them from every line that
    starts with them before running the cell (its leading_indent transform), so an indented cell runs."""
    return src[:len(src) - len(src.lstrip(" \t"))] if src[:1] in (" ", "\t") and "\n" not in src[:len(src) - len(src.lstrip(" \t"))] else ""


def _dedent(src: str, indent: str) -> str:
    if not indent:
        return src
    return "".join(ln[len(indent):] if ln.startswith(indent) else ln for ln in src.splitlines(keepends=True))


def _has_python(masked: str) -> bool:
    """Whether a masked cell has a line that is neither blank, a comment nor an IPython placeholder."""
    return any(ln.strip() and not ln.lstrip().startswith("#") and not _MASK_RE.match(ln)
               for ln in masked.splitlines())


def _locate(f: Finding, regions: list[_Region]) -> Finding:
    """A finding of the joined text, located in its cell."""
    if not f.line or not regions:
        return f
    for reg in regions:
        if f.line < reg.start + reg.lines + 1:  # the cell's lines and its marker line
            line = min(max(f.line - reg.start + 1, 1), max(reg.lines, 1))
            column = f.column + len(reg.indent) if f.column else f.column
            return dataclasses.replace(f, cell=reg.cell, line=line, column=column)
    return dataclasses.replace(f, cell=regions[-1].cell, line=max(regions[-1].lines, 1))


def _split(text: str, count: int) -> list[str] | None:
    """The translated text cut at the markers; None unless exactly the ``count`` markers are there,
    in order, with nothing but blank lines after the last."""
    segments: list[str] = []
    current: list[str] = []
    for line in text.splitlines(keepends=True):
        if line.rstrip("\r\n") == _CELL.format(len(segments)):
            segments.append("".join(current))
            current = []
        elif "__fwport_cell__(" in line and line.lstrip().startswith("__fwport_cell__("):
            return None  # a marker out of order
        else:
            current.append(line)
    if len(segments) != count or "".join(current).strip():
        return None
    return segments


def notebook_residue(text: str, path: str, roots: tuple[str, ...]) -> FileResult:
    """``fwport residue`` for a notebook: the TensorFlow/Keras imports left in its code cells, by cell."""
    from fwport.core.runner import BOM, find_source_references

    try:
        nb = read_notebook(text[1:] if text.startswith(BOM) else text, path)
    except ValueError as e:
        return FileResult(path, Status.FAILED, findings=[_input_error(path, str(e))])
    found: list[Finding] = []
    if _language(nb) in ("python", "python3", "ipython", "ipython3"):
        for i, cell in enumerate(nb.cells, 1):
            if cell.get("cell_type") != "code":
                continue
            src = _source(cell)
            indent = _leading_indent(src)
            masked = mask_ipython(_dedent(src, indent), [])
            if masked is None:
                continue
            try:
                found += [dataclasses.replace(f, cell=i, column=f.column + len(indent) if f.column else f.column)
                          for f in find_source_references(masked, path, roots)]
            except (SyntaxError, ValueError, RecursionError):
                continue  # not Python: nothing is imported from it
    return FileResult(path, Status.UNCHANGED, findings=found)
