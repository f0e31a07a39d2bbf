"""Dependency files of a translated tree: the source framework's requirements become the target's
(for tf2torch: TensorFlow/Keras → torch; the direction's :class:`~fwport.core.direction.Requirements`
says which distributions go and which come, carried by :class:`Targets`).

Pure text → text functions, one per format; each edits only the requirement it replaces and keeps
every other byte (comments, markers, order, other requirements). What a requirement becomes:

- a source-framework package (``Targets.source``; tf2torch: tensorflow and its builds, tf-keras, keras,
  tf-nightly...) is replaced by the target (``torch``) plus what the translated code imports beyond it
  (:func:`added_imports`: torchvision, torchmetrics... when the outputs import them), with the
  environment marker it had (``tensorflow; sys_platform != "darwin"`` → ``torch; sys_platform !=
  "darwin"``); its version and extras are dropped (they were TensorFlow's) and its comment kept;
- a target already required with the same marker (or with none) is not added again: the source
  requirement is then removed;
- in a conda ``environment.yml`` the conda list gets ``pytorch`` (conda's name), its ``pip:`` list ``torch``.

Each change is a :class:`Change` (line in the original, old text, new texts); the caller reports
them as ``dependency-updated`` findings. What the functions cannot rewrite (a computed list in
setup.py, a Poetry table) is returned as a note for a ``dependency-kept`` warning.
"""
from __future__ import annotations

import ast
import re
import sys
import tomllib
from dataclasses import dataclass, field

from fwport.core.direction import Requirements

#: Import name → distribution name where they differ.
_DISTRIBUTION = {"PIL": "pillow", "sklearn": "scikit-learn", "cv2": "opencv-python", "yaml": "pyyaml"}


class Targets(list):
    """What replaces the source framework's requirements, in order (the target's own distribution
    first), with what the direction says about the source: its distributions (normalized), the
    conda names of targets, and how messages name it. A list, so a plan iterates the targets."""

    def __init__(self, names: list[str], spec: Requirements):
        super().__init__(names)
        self.source: frozenset[str] = frozenset(normalize(n) for n in spec.source)
        self.conda: dict[str, str] = dict(spec.conda)
        self.label: str = spec.label


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# --- what the translated code needs ------------------------------------------------------------------------
_IMPORT = re.compile(r"^[ \t]*(?:import[ \t]+([\w.]+(?:[ \t]*(?:as[ \t]+\w+)?[ \t]*,[ \t]*[\w.]+)*)|from[ \t]+([\w.]+)[ \t]+import\b)",
                     re.M)


def import_roots(text: str) -> set[str]:
    """The top-level packages a Python text imports (a regular-expression read of its import lines)."""
    roots = set()
    for m in _IMPORT.finditer(text):
        if m.group(1):
            for part in m.group(1).split(","):
                roots.add(part.split()[0].split(".")[0])
        else:
            roots.add(m.group(2).split(".")[0])
    return roots


def added_imports(before: str, after: str, source_roots: tuple[str, ...] = ()) -> list[str]:
    """The third-party packages the translation made the code import (not the standard library)."""
    new = import_roots(after) - import_roots(before)
    return sorted(r for r in new if r and r not in sys.stdlib_module_names and r not in source_roots
                  and not r.startswith("__"))


def target_requirements(imports: set[str] | list[str], spec: Requirements) -> Targets:
    """What replaces a source framework: the target first (torch), then the other packages the outputs import."""
    rest = sorted({normalize(_DISTRIBUTION.get(r, r)) for r in imports} - {spec.target})
    return Targets([spec.target, *rest], spec)


# --- the common part: which requirement becomes what ---------------------------------------------------------
@dataclass
class Change:
    line: int  # 1-based, in the original text
    old: str
    new: list[str]  # empty: removed


@dataclass
class Update:
    text: str
    changes: list[Change] = field(default_factory=list)
    notes: list[tuple[int, str]] = field(default_factory=list)  # (line, what was not rewritten)


def _marker_key(marker: str) -> str:
    return " ".join(marker.split())


class _Planner:
    """Decides, requirement by requirement in file order, what each source requirement becomes."""

    def __init__(self, targets: Targets, existing: list[tuple[str, str]]):
        self.targets = targets
        self.have = {(n, _marker_key(m)) for n, m in existing}  # targets already there, by (name, marker)

    def replace(self, marker: str, conda: bool = False) -> list[str]:
        m = _marker_key(marker)
        out = []
        for t in self.targets:
            if (t, "") in self.have or (t, m) in self.have:
                continue
            self.have.add((t, m))
            name = self.targets.conda.get(t, t) if conda else t
            out.append(f"{name}; {m}" if m else name)
        return out


_REQ = re.compile(r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?P<extras>\[[^\]]*\])?"
                  r"(?P<spec>\s*@[^;]*|[\s<>=!~,.*+\w-]*?)\s*(?P<marker>;.*)?$")


def parse_requirement(text: str) -> tuple[str, str] | None:
    """(normalized name, marker without the ';') of a PEP 508 requirement string; None if it is not one."""
    m = _REQ.match(text.strip())
    if not m:
        return None
    return normalize(m.group("name")), (m.group("marker") or "")[1:].strip()


# --- line-based formats: requirements.txt, setup.cfg ----------------------------------------------------------
@dataclass
class _Slot:
    first: int  # index of the first physical line
    last: int  # index of the last physical line (a requirement continued with backslashes)
    prefix: str  # what precedes the requirement on its line (indentation, ``key = ``)
    req: str
    comment: str  # an inline comment, with the spaces before it
    name: str
    marker: str
    indent: str  # indentation for more lines of the same list
    conda: bool = False  # a conda package spec (torch is called pytorch there)


def _split_comment(body: str) -> tuple[str, str]:
    m = re.search(r"\s+#", body)
    return (body[: m.start()], body[m.start():]) if m else (body, "")


def _line_slot(lines: list[str], i: int, prefix_re: re.Pattern | None = None) -> _Slot | None:
    raw = lines[i].rstrip("\r\n")
    prefix = ""
    if prefix_re is not None:
        m = prefix_re.match(raw)
        if not m:
            return None
        prefix, raw = raw[: m.end()], raw[m.end():]
    indent = raw[: len(raw) - len(raw.lstrip())]
    body, comment = _split_comment(raw.strip())
    last = i
    while body.endswith("\\") and last + 1 < len(lines):  # hash options continue the requirement
        last += 1
        body = body[:-1].rstrip()
    if not body or body.startswith(("-", "#")) or "://" in body.split("@")[0]:
        return None
    parsed = parse_requirement(body)
    if not parsed:
        return None
    return _Slot(i, last, prefix + indent, body, comment, parsed[0], parsed[1], indent or " " * 4 * bool(prefix))


def _apply_slots(lines: list[str], slots: list[_Slot], targets: Targets) -> Update:
    planner = _Planner(targets, [(s.name, s.marker) for s in slots if s.name not in targets.source])
    out = list(lines)
    changes = []
    for s in slots:
        if s.name not in targets.source:
            continue
        new = planner.replace(s.marker, s.conda)
        eol = lines[s.last][len(lines[s.last].rstrip("\r\n")):] or "\n"
        if new:
            text = s.prefix + new[0] + s.comment + eol
            text += "".join(s.indent + r + eol for r in new[1:])
        else:  # removed; a `key =` before it stays (an empty value)
            text = s.prefix.rstrip() + eol if s.prefix.strip() and not s.prefix.strip().startswith("-") else ""
        out[s.first] = text
        for j in range(s.first + 1, s.last + 1):
            out[j] = ""
        changes.append(Change(s.first + 1, s.req, new))
    return Update("".join(out), changes)


def update_requirements_txt(text: str, targets: Targets) -> Update:
    lines = text.splitlines(keepends=True)
    slots = [s for i in range(len(lines)) if (s := _line_slot(lines, i))]
    slots = _drop_continued(slots)
    return _apply_slots(lines, slots, targets)


def _drop_continued(slots: list[_Slot]) -> list[_Slot]:
    out, covered = [], -1
    for s in slots:
        if s.first <= covered:
            continue
        out.append(s)
        covered = s.last
    return out


_CFG_SECTION = re.compile(r"^\s*\[([^\]]+)\]")
_CFG_KEY = re.compile(r"^([A-Za-z_][\w.-]*)\s*[=:]\s*")
_CFG_REQ_KEYS = {"install_requires", "setup_requires", "tests_require"}


def update_setup_cfg(text: str, targets: Targets) -> Update:
    """``[options] install_requires`` (and setup/tests_require) and every ``[options.extras_require]`` list."""
    lines = text.splitlines(keepends=True)
    slots: list[_Slot] = []
    section, in_list = "", False
    for i, line in enumerate(lines):
        body = line.rstrip("\r\n")
        m = _CFG_SECTION.match(body)
        if m:
            section, in_list = m.group(1).strip(), False
            continue
        if not body.strip() or body.lstrip().startswith(("#", ";")):
            continue
        if not body[0].isspace():  # a key
            k = _CFG_KEY.match(body)
            in_list = bool(k) and ((section == "options" and k.group(1) in _CFG_REQ_KEYS)
                                   or section == "options.extras_require")
            if in_list and body[k.end():].strip():
                s = _line_slot(lines, i, _CFG_KEY)
                if s:
                    slots.append(s)
        elif in_list:
            s = _line_slot(lines, i)
            if s:
                slots.append(s)
    return _apply_slots(lines, slots, targets)


# --- environment.yml --------------------------------------------------------------------------------------
_YAML_ITEM = re.compile(r"^(?P<indent>\s*)-\s+(?P<body>.*)$")
_CONDA_SPEC = re.compile(r"^(?P<chan>[\w./-]+::)?(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*?)(?P<spec>[\s=<>!~].*)?$")


def update_environment_yml(text: str, targets: Targets) -> Update:
    """The conda list under ``dependencies:`` (→ ``pytorch``) and its ``- pip:`` list (→ ``torch``)."""
    lines = text.splitlines(keepends=True)
    conda: list[_Slot] = []
    pip: list[_Slot] = []
    top, pip_indent = "", None
    for i, line in enumerate(lines):
        body = line.rstrip("\r\n")
        if body and not body[0].isspace() and not body.startswith(("#", "-")):
            top, pip_indent = body.split(":", 1)[0].strip(), None
            continue
        m = _YAML_ITEM.match(body)
        if top != "dependencies" or not m:
            continue
        indent = len(m.group("indent"))
        if pip_indent is not None and indent <= pip_indent:
            pip_indent = None
        item, comment = _split_comment(m.group("body").strip())
        unq = item.strip("'\"")
        if unq.rstrip(":").strip() == "pip" and item.rstrip().endswith(":"):
            pip_indent = indent
            continue
        prefix = body[: m.start("body")]
        if pip_indent is not None:
            parsed = parse_requirement(unq)
            if parsed:
                pip.append(_Slot(i, i, prefix, item, comment, parsed[0], parsed[1], prefix))
        else:
            c = _CONDA_SPEC.match(unq)
            if c:
                name = normalize(c.group("name"))
                chan = c.group("chan") or ""
                pip_like = {conda_name: pip_name for pip_name, conda_name in targets.conda.items()}.get(name, name)
                conda.append(_Slot(i, i, prefix + chan, item, comment, pip_like, "", prefix, conda=True))
    # one plan for both lists: conda's pytorch and pip's torch are the same package
    return _apply_slots(lines, sorted(conda + pip, key=lambda s: s.first), targets)


# --- pyproject.toml ---------------------------------------------------------------------------------------
_TOML_TABLE = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")
_TOML_ARRAY_KEY = re.compile(r"^\s*([A-Za-z0-9_\"'.-]+)\s*=\s*\[")


@dataclass
class _Literal:
    start: int  # offsets in the text, quotes included
    end: int
    value: str
    quote: str


def _toml_array_strings(text: str, pos: int) -> tuple[list[_Literal], int]:
    """The string items of the TOML array whose ``[`` is at ``pos``; and the offset after its ``]``."""
    items = []
    depth, i, n = 0, pos, len(text)
    while i < n:
        c = text[i]
        if c == "#":
            i = text.find("\n", i)
            if i < 0:
                break
            continue
        if c in "\"'":
            q = c * 3 if text.startswith(c * 3, i) else c
            j = i + len(q)
            while j < n and not text.startswith(q, j):
                j += 2 if (c == '"' and text[j] == "\\") else 1
            if depth == 1 and len(q) == 1:
                value = text[i + 1: j]
                items.append(_Literal(i, j + 1, value.replace('\\"', '"') if c == '"' else value, c))
            i = j + len(q)
            continue
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                return items, i + 1
        i += 1
    return items, n


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _edit_literals(text: str, literals: list[_Literal], targets: Targets, existing: list[tuple[str, str]]) -> Update:
    """Replace (or remove) the source requirements among string literals of lists, in place."""
    planner = _Planner(targets, existing)
    edits: list[tuple[int, int, str]] = []
    changes = []
    for lit in literals:
        parsed = parse_requirement(lit.value)
        if not parsed or parsed[0] not in targets.source:
            continue
        new = planner.replace(parsed[1])
        changes.append(Change(_line_of(text, lit.start), lit.value, new))
        line_start = text.rfind("\n", 0, lit.start) + 1
        own_line = not text[line_start: lit.start].strip()
        after = re.compile(r"\s*,[ \t]*").match(text, lit.end)
        if new:
            quoted = [f"{lit.quote}{r}{lit.quote}" for r in new]
            if own_line and len(new) > 1:  # one item a line, the line's comment stays on the first
                line_end = text.find("\n", lit.end)
                line_end = len(text) if line_end < 0 else line_end + 1
                edits.append((lit.start, lit.end, quoted[0] + ("" if after else ",")))
                indent = text[line_start: lit.start]
                edits.append((line_end, line_end, "".join(f"{indent}{q},\n" for q in quoted[1:])))
            else:
                edits.append((lit.start, lit.end, ", ".join(quoted)))
            continue
        if own_line:  # the whole line goes (with its comma and comment)
            line_end = text.find("\n", lit.end)
            line_end = len(text) if line_end < 0 else line_end + 1
            rest = text[(after.end() if after else lit.end): line_end]
            if not rest.strip() or rest.strip().startswith("#"):
                edits.append((line_start, line_end, ""))
                continue
        if after:
            edits.append((lit.start, after.end(), ""))
        else:  # the last item: take the comma before it
            before = re.search(r",\s*$", text[:lit.start])
            edits.append((before.start() if before else lit.start, lit.end, ""))
    merged: list[tuple[int, int, str]] = []
    for e in sorted(edits, key=lambda e: (e[0], -e[1])):  # overlapping removals (a whole list emptied) merge
        if merged and not e[2] and not merged[-1][2] and e[0] < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e[1]), "")
        else:
            merged.append(e)
    for start, end, new_text in sorted(merged, key=lambda e: (e[0], e[1]), reverse=True):
        text = text[:start] + new_text + text[end:]
    return Update(text, changes)


def update_pyproject(text: str, targets: Targets) -> Update:
    """``[project] dependencies``, every ``[project.optional-dependencies]`` list and PEP 735
    ``[dependency-groups]``; a Poetry table naming a source framework gives a note."""
    literals: list[_Literal] = []
    notes: list[tuple[int, str]] = []
    table = ""
    pos = 0
    lines = text.splitlines(keepends=True)
    offsets = []
    for ln in lines:
        offsets.append(pos)
        pos += len(ln)
    skip_until = -1
    for i, ln in enumerate(lines):
        if offsets[i] < skip_until:
            continue
        m = _TOML_TABLE.match(ln)
        if m:
            table = m.group(1).replace(" ", "")
            continue
        k = _TOML_ARRAY_KEY.match(ln)
        key = k.group(1).strip("\"'") if k else ""
        if k and ((table == "project" and key == "dependencies")
                  or table in ("project.optional-dependencies", "dependency-groups")):
            items, end = _toml_array_strings(text, offsets[i] + k.end() - 1)
            literals.extend(items)
            skip_until = end
        elif table.startswith("tool.poetry") and table.endswith("dependencies"):
            kv = re.match(r"^\s*([A-Za-z0-9_.\"'-]+)\s*=", ln)
            if kv and normalize(kv.group(1).strip("\"'")) in targets.source:
                notes.append((i + 1, f"[{table}] {kv.group(1).strip(chr(34) + chr(39))}: Poetry tables are not rewritten; "
                                     "replace it with torch by hand"))
    existing = [p for lit in literals if (p := parse_requirement(lit.value)) and p[0] not in targets.source]
    up = _edit_literals(text, literals, targets, existing)
    up.notes = notes
    if up.changes:
        try:
            tomllib.loads(up.text)
        except tomllib.TOMLDecodeError as e:  # never hand back a broken file
            return Update(text, [], notes + [(up.changes[0].line, f"the dependency lists could not be rewritten ({e}); "
                                                                  f"replace {targets.label} with {targets[0]} by hand")])
    return up


# --- setup.py -------------------------------------------------------------------------------------------------
_SETUP_KEYS = {"install_requires", "extras_require", "setup_requires", "tests_require", "requires"}


def update_setup_py(text: str, targets: Targets) -> Update:
    """Literal lists of requirement strings given to setup() (``install_requires=[...]``,
    ``extras_require={...: [...]}``), directly or through a module-level name."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return Update(text)
    names: set[str] = set()
    values: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg in _SETUP_KEYS:
                    values.append(kw.value)
    for v in list(values):
        if isinstance(v, ast.Dict):
            values.extend(v.values)
    names = {v.id for v in values if isinstance(v, ast.Name)}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names for t in node.targets):
            values.append(node.value)
            if isinstance(node.value, ast.Dict):
                values.extend(node.value.values)
    line_starts = [0]
    for ln in text.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(ln))

    def offset(line: int, col: int) -> int:  # ast columns are UTF-8 byte offsets
        start = line_starts[line - 1]
        raw = text[start: line_starts[line]].encode("utf-8")[:col]
        return start + len(raw.decode("utf-8", "replace"))

    literals = []
    for v in values:
        if not isinstance(v, (ast.List, ast.Tuple)):
            continue
        for e in v.elts:
            if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.lineno == e.end_lineno:
                start, end = offset(e.lineno, e.col_offset), offset(e.end_lineno, e.end_col_offset)
                src = text[start:end]
                quote = src.lstrip("rRbBuU")[:1]
                if src.lstrip("rRbBuU")[:3] in ('"""', "'''") or src[: 1] not in "\"'":
                    continue  # a triple-quoted or prefixed string: left alone
                literals.append(_Literal(start, end, e.value, quote))
    literals.sort(key=lambda lit: lit.start)
    existing = [p for lit in literals if (p := parse_requirement(lit.value)) and p[0] not in targets.source]
    up = _edit_literals(text, literals, targets, existing)
    try:
        ast.parse(up.text)
    except SyntaxError:
        return Update(text, [], [(1, f"the requirement lists could not be rewritten; replace {targets.label} with {targets[0]} by hand")])
    left = [m for m in re.finditer(r"[\"']((?:tensorflow|keras|tf-keras|tf_keras|tf-nightly)[\w.-]*)", up.text)
            if normalize(m.group(1)) in targets.source]
    for m in left:
        up.notes.append((_line_of(up.text, m.start()), f"{m.group(1)!r} is still named here, in a form fwport does "
                                                       "not rewrite; replace it with torch by hand if it is a requirement"))
    return up


# --- which files ------------------------------------------------------------------------------------------
def kind_of(relpath: str) -> str | None:
    """Which dependency format a file (its path relative to the tree) is, or None."""
    parts = relpath.replace("\\", "/").split("/")
    name = parts[-1]
    if name == "pyproject.toml":
        return "pyproject"
    if name == "setup.py":
        return "setup.py"
    if name == "setup.cfg":
        return "setup.cfg"
    if name in ("environment.yml", "environment.yaml"):
        return "environment"
    if name.endswith(".txt") and (name.startswith("requirements") or (len(parts) > 1 and parts[-2] == "requirements")):
        return "requirements"
    return None


UPDATERS = {"pyproject": update_pyproject, "setup.py": update_setup_py, "setup.cfg": update_setup_cfg,
            "environment": update_environment_yml, "requirements": update_requirements_txt}
