"""Import fixing, applied once at the end: drop source-framework imports no longer used, add the
target imports the emitted code needs (where the first source import stood)."""
from __future__ import annotations

import ast
import functools
import io
import re
import textwrap
import tokenize
from bisect import bisect_right

import libcst as cst

from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from fwport.core.hooks import TypeTest
from fwport.core.names import find_all, scan
from fwport.core.parse import parse_module
from fwport.core.position import render, share
from fwport.core.rewrite import fresh_copy

if TYPE_CHECKING:
    from fwport.core.context import FileContext

IsSource = Callable[[str], bool]  # the direction's test for a source-framework module name


class _UsedNames(cst.CSTVisitor):
    def __init__(self) -> None:
        self.used: set[str] = set()

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.used.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        scan(node.value, self)  # the attribute name itself is not a reference
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        scan(node.value, self)  # keyword names are not references
        return False

    def visit_Param(self, node: cst.Param) -> bool:
        if node.annotation:
            scan(node.annotation, self)
        if node.default:
            scan(node.default, self)
        return False


def used_names(module: cst.Module) -> set[str]:
    v = _UsedNames()
    scan(module, v)
    return v.used


def _module_text(node: cst.BaseExpression | None) -> str:
    return render(node) if node is not None else ""


def _local(a: cst.ImportAlias, imported_from: bool) -> str:
    """The name an import's alias binds: ``import a.b`` → a, ``import a as b`` / ``from x import a as b`` → b."""
    if a.asname is not None:
        return a.asname.name.value  # type: ignore[union-attr]
    full = _module_text(a.name)
    return full if imported_from else full.split(".")[0]


def _prune(stmt: cst.BaseSmallStatement, used: set[str], is_source: IsSource) -> cst.BaseSmallStatement | None:
    """The import statement without its unused source-framework names (None: drop it)."""
    if isinstance(stmt, cst.Import):
        keep = []
        for a in stmt.names:
            full = _module_text(a.name)
            local = _local(a, False)
            if is_source(full) and local not in used:
                continue
            keep.append(a)
        if len(keep) == len(stmt.names):
            return stmt
        return stmt.with_changes(names=_fix_commas(keep)) if keep else None
    if isinstance(stmt, cst.ImportFrom) and not stmt.relative and not isinstance(stmt.names, cst.ImportStar):
        if not is_source(_module_text(stmt.module)):
            return stmt
        keep = []
        for a in stmt.names:
            local = _local(a, True)
            if local in used:
                keep.append(a)
        if len(keep) == len(stmt.names):
            return stmt
        if not keep:
            return None
        return stmt.with_changes(names=_fix_commas(keep), lpar=stmt.lpar if len(keep) > 1 else None,
                                 rpar=stmt.rpar if len(keep) > 1 else None)
    return stmt


def _fix_commas(names: list[cst.ImportAlias]) -> list[cst.ImportAlias]:
    out = list(names)
    out[-1] = out[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return out


def _existing_imports(module: cst.Module, wanted: Iterable[str] | None = None) -> set[str]:
    """The texts of the module's top-level import statements; with ``wanted`` (import lines), only those that
    may be one of them (their first name is a word of one: the others are not rendered)."""
    words = None if wanted is None else {w for line in wanted for w in _WORD.findall(line)}
    have = set()
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for s in stmt.body:
                if isinstance(s, (cst.Import, cst.ImportFrom)):
                    if words is not None:
                        first = s.names[0].name if s.__class__ is cst.Import else s.module
                        while first.__class__ is cst.Attribute:
                            first = first.value
                        if first.__class__ is cst.Name and first.value not in words:
                            continue
                    have.add(render(s).strip())
    return have


_WORD = re.compile(r"\w+")


def is_source_import_line(stmt: cst.CSTNode, is_source: IsSource) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for s in stmt.body:
        if isinstance(s, cst.Import) and any(is_source(_module_text(a.name)) for a in s.names):
            return True
        if isinstance(s, cst.ImportFrom) and not s.relative and is_source(_module_text(s.module)):
            return True
    return False


def _insert_index(module: cst.Module, is_source: IsSource) -> int:
    for i, stmt in enumerate(module.body):
        if is_source_import_line(stmt, is_source):
            return i
    i = 0
    body = module.body
    if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) \
            and isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        i = 1
    while i < len(body) and isinstance(body[i], cst.SimpleStatementLine) and \
            isinstance(body[i].body[0], cst.ImportFrom) and _module_text(body[i].body[0].module) == "__future__":
        i += 1
    return i


_FSTRING = re.compile(r"(?i)^(?:rf|fr|f)['\"]")


def _fstring_names(token: str) -> set[str] | None:
    """The names the expressions of an f-string read (``f"{tf.__version__}"`` reads ``tf``)."""
    try:
        tree = ast.parse(token, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def used_names_in(text: str) -> set[str] | None:
    """Names the code refers to, read from its tokens (comments and strings are not references,
    nor attribute names or the names an import statement binds). None if it does not tokenize."""
    used: set[str] = set()
    in_import = False
    start_of_line = True
    after_dot = False
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            kind, value = tok.type, tok.string
            if kind in (tokenize.NEWLINE, tokenize.ENDMARKER):
                in_import, start_of_line, after_dot = False, True, False
                continue
            if kind in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
                continue
            if kind == tokenize.STRING and _FSTRING.match(value):  # (one token before Python 3.12)
                inner = _fstring_names(value)
                if inner is None:
                    return None
                used |= inner
            if kind == tokenize.NAME:
                if start_of_line and value in ("import", "from"):
                    in_import = True
                elif not in_import and not after_dot:
                    used.add(value)
            after_dot = kind == tokenize.OP and value == "."
            start_of_line = kind == tokenize.OP and value == ";"
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    return used


def _used_among(module: cst.Module, asked: set[str], statement_text) -> set[str] | None:
    """The names of ``asked`` that :func:`used_names_in` of the module's text finds used, from the tokens
    of only the top-level statements whose text mentions one of them as a word (not after a dot): a
    statement starts after a NEWLINE token, where used_names_in's reading starts afresh, so the text's
    names are the union of its statements' (its header and footer are comments). Each statement's
    names are kept per process by its text (the helpers a pack writes into many outputs). None where
    a statement does not tokenize on its own, or the module's text is not its statements' (no final
    newline): the caller reads the whole text."""
    if not module.body or not module.has_trailing_newline:
        return None
    pattern = re.compile(r"(?<![\w.])(?:" + "|".join(map(re.escape, sorted(asked, key=len, reverse=True))) + r")\b")
    found: set[str] = set()
    for stmt in module.body:
        text = statement_text(stmt, module)
        if pattern.search(text) is None:
            continue
        names = _statement_names(text)
        if names is None:
            return None
        if stmt.__class__ is cst.FunctionDef and names & asked:
            names = names - _parameters_only(stmt, names & asked)
        elif stmt.__class__ is cst.ClassDef and names & asked:
            names = names - _method_parameters_only(stmt, names & asked, module)
        found |= names & asked
    return found


def _parameters_only(fn: cst.FunctionDef, names: set[str]) -> set[str]:
    """The names of ``names`` that ``fn`` reads only as its own parameters (a helper's ``def fit(model, metrics,
    ...)`` beside a source ``from keras import metrics``): a parameter of that name that neither its decorators, its
    defaults and annotations (evaluated in the module) read nor a ``global`` statement in it hands back to the module."""
    p = fn.params
    params = [*p.posonly_params, *p.params, *p.kwonly_params,
              *(a for a in (p.star_arg, p.star_kwarg) if isinstance(a, cst.Param))]
    mine = {q.name.value for q in params} & names
    if not mine:
        return set()
    header = [*fn.decorators, *(q.default for q in params if q.default is not None),
              *(q.annotation for q in params if q.annotation is not None), *([fn.returns] if fn.returns else [])]
    read = {n.value for h in header for n in find_all(h, cst.Name)}
    freed = {a.name.value for g in find_all(fn.body, cst.Global) for a in g.names}
    return mine - read - freed




def _method_parameters_only(cls: cst.ClassDef, names: set[str], module: cst.Module) -> set[str]:
    """The names of ``names`` that a class reads only in methods having them as parameters (_parameters_only): the
    ``def __init__(self, layers)`` of a class beside a source ``from keras import layers``. Its header (bases,
    keywords, decorators) and each other statement of its body are read as texts of their own."""
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    methods = [s for s in body if s.__class__ is cst.FunctionDef]
    mine = set().union(*(_parameters_only(m, names) for m in methods))
    if not mine:
        return set()
    header = [*cls.decorators, *cls.bases, *cls.keywords]
    if any(n.value in mine for h in header for n in find_all(h, cst.Name)):
        return set()  # (a base or a decorator reads the module's name; so does its argument's keyword, rarely)
    for s in body:
        if not mine:
            break
        reads = mine - _parameters_only(s, mine) if s.__class__ is cst.FunctionDef else mine
        if reads:
            found = _statement_names(textwrap.dedent(module.code_for_node(s)))
            if found is None:
                return set()
            mine = mine - (found & reads)
    return mine


@functools.lru_cache(maxsize=2048)
def _statement_names(text: str) -> frozenset[str] | None:
    names = used_names_in(text)
    return frozenset(names) if names is not None else None


class _AllBut:
    """The names used by a text where only ``unused`` are known unused: every other name counts as
    used (an import the check did not look at is kept)."""

    def __init__(self, unused: set[str]):
        self.unused = unused

    def __contains__(self, name: object) -> bool:
        return name not in self.unused


_IMPORT_LINE = re.compile(r"\s*(?:import\s|from\s+\.*[\w.]*\s+import\s)")


def _may_reference(text: str, names: set[str]) -> bool:
    """Whether ``text`` may refer to one of ``names``: False only when every occurrence of each as
    a word (not after a dot) is on a line that starts an import or in a comment after code with no
    quote (the cheap test; True sends the caller to the exact one, :func:`used_names_in`)."""
    pattern = re.compile(r"(?<![\w.])(?:" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")\b")
    for m in pattern.finditer(text):
        line = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
        if _IMPORT_LINE.match(line) and "(" not in line and "\\" not in line:
            continue
        hash_at = line.find("#")
        if hash_at >= 0 and "'" not in line[:hash_at] and '"' not in line[:hash_at]:
            continue
        return True
    return False


# --- the unused-import check without tokenizing, where strings hide every mention ----------------------
# A translated file's generated helpers carry docstrings that name the source framework
# ("""keras.layers.GRU as an nn.GRU ..."""), and _may_reference, which reads lines, sends such a file
# to used_names_in, whose tokenizing costs more than the rest of the import fixing. The strings and
# comments below are found as Python 3.11's tokenizer finds its STRING and COMMENT tokens (a string
# runs to its first unescaped closing quote, a comment to the end of its line, each found left to
# right outside the others), by one regular expression per kind of quote.

_STRING_OR_COMMENT = re.compile(r"[#'\"]")
_STRING_END = {
    "'''": re.compile(r"'''(?:[^'\\]|\\.|'(?!''))*'''", re.S),
    '"""': re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*"""', re.S),
    "'": re.compile(r"'(?:[^'\\\n]|\\.)*'", re.S),
    '"': re.compile(r'"(?:[^"\\\n]|\\.)*"', re.S),
}
_WORD_BEFORE = re.compile(r"\w*$")


def _string_spans(text: str) -> list[tuple[int, int, bool]] | None:
    """(start, end, may hold code) of every string and comment of ``text``, in order, a string's
    prefix included; an f-string (a string after any word with an f in it) may hold code. None
    where a string does not end (the text does not tokenize)."""
    spans: list[tuple[int, int, bool]] = []
    i = 0
    while True:
        m = _STRING_OR_COMMENT.search(text, i)
        if m is None:
            return spans
        j = m.start()
        c = text[j]
        if c == "#":
            end = text.find("\n", j)
            end = len(text) if end < 0 else end
            spans.append((j, end, False))
            i = end
            continue
        end = string_end(text, j)
        if end is None:
            return None
        prefix = _WORD_BEFORE.search(text, max(0, j - 8), j).group()
        spans.append((j - len(prefix), end, "f" in prefix.lower()))
        i = end


def string_end(text: str, j: int) -> int | None:
    """Where the string whose opening quote is ``text[j]`` ends (just past its closing quote), as Python 3.11's
    tokenizer reads it; None where it does not end."""
    c = text[j]
    s = _STRING_END[c * 3 if text.startswith(c * 3, j) else c].match(text, j)
    return None if s is None else s.end()


def _import_locals(body, is_source: IsSource, out: set[str]) -> set[str]:
    """``out`` with the names the source-framework imports among the statements ``body`` (nested ones
    too) bind: every name :func:`_prune` may ask about (and some it never reaches)."""
    for stmt in body:
        c = stmt.__class__  # (libcst's concrete node classes have no subclasses)
        if c is cst.SimpleStatementLine or c is cst.SimpleStatementSuite:
            for s in stmt.body:
                if s.__class__ is cst.Import:
                    for a in s.names:
                        full = _module_text(a.name)
                        if is_source(full):
                            out.add(_local(a, False))
                elif s.__class__ is cst.ImportFrom and not s.relative and s.names.__class__ is not cst.ImportStar \
                        and is_source(_module_text(s.module)):
                    for a in s.names:
                        out.add(_local(a, True))
            continue
        for name in ("body", "orelse", "finalbody", "handlers"):
            part = getattr(stmt, name, None)
            if part.__class__ is cst.IndentedBlock:
                _import_locals(part.body, is_source, out)
            elif _IS_CST_NODE[part.__class__]:
                _import_locals([part], is_source, out)
            elif isinstance(part, (tuple, list)):
                _import_locals(part, is_source, out)
    return out


def _unreferenced(text: str, names: set[str]) -> bool:
    """True only when none of ``names`` is referenced in ``text`` as :func:`used_names_in` counts
    references, and ``used_names_in`` would answer (it reads every f-string): each mention as a word
    (not after a dot) is inside a string that is not an f-string, in a comment, or on a line that
    starts an import (as :func:`_may_reference` reads those). False when unsure."""
    spans = _string_spans(text)
    if spans is None:
        return False
    for start, end, code in spans:
        if code and _fstring_names(text[start:end]) is None:
            return False  # (used_names_in gives up on it, and the caller asks the tree)
    starts = [s for s, _, _ in spans]
    pattern = re.compile(r"(?<![\w.])(?:" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")\b")
    for m in pattern.finditer(text):
        pos = m.start()
        k = bisect_right(starts, pos) - 1
        if k >= 0 and pos < spans[k][1]:
            if spans[k][2]:
                return False  # inside an f-string: maybe in one of its expressions
            continue
        # the whole line (a module's name in `from torch import nn` is after no `import`), up to a
        # comment after code with no quote
        end = text.find("\n", pos)
        line = text[text.rfind("\n", 0, pos) + 1:end if end >= 0 else len(text)]
        hash_at = line.find("#")
        if hash_at >= 0 and "'" not in line[:hash_at] and '"' not in line[:hash_at]:
            line = line[:hash_at]
        if _IMPORT_LINE.match(line) and "(" not in line and "\\" not in line:
            continue  # a line that starts an import statement and ends it: no name in it is a use
        return False
    return True


def _prune_body(body, used: set[str], is_source: IsSource) -> list:
    out = []
    changed = False
    for stmt in body:
        new = _prune_statement(stmt, used, is_source)
        changed |= new is not stmt
        if new is not None:
            out.append(new)
    return out if changed else list(body)


def _prune_block(block, used: set[str], is_source: IsSource):
    if isinstance(block, cst.IndentedBlock):
        body = _prune_body(block.body, used, is_source)
        if len(body) == len(block.body) and all(a is b for a, b in zip(body, block.body)):
            return block
        # a block whose only statement was a removed import gets `pass` (try: import tensorflow)
        return block.with_changes(body=body or [cst.SimpleStatementLine([cst.Pass()])])
    return block


_IMPORTS = (cst.Import, cst.ImportFrom)
#: what may hold an import in a block of its own
_HOLDS_BLOCKS = TypeTest(cst.BaseCompoundStatement, cst.Else, cst.Finally, cst.ExceptHandler, cst.ExceptStarHandler)
_IS_CST_NODE = TypeTest(cst.CSTNode)


def _prune_statement(stmt, used: set[str], is_source: IsSource):
    """``stmt`` without its unused source-framework imports (nested ones too); the same object
    when nothing changes, None when the whole statement goes."""
    if stmt.__class__ is cst.SimpleStatementLine:
        if not any(s.__class__ in _IMPORTS for s in stmt.body):
            return stmt
        body = []
        for s in stmt.body:
            p = _prune(s, used, is_source) if s.__class__ in _IMPORTS else s
            if p is not None:
                body.append(p)
        if not body:
            return None
        if len(body) == len(stmt.body) and all(a is b for a, b in zip(body, stmt.body)):
            return stmt
        body[-1] = body[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return stmt.with_changes(body=body)
    if not _HOLDS_BLOCKS[stmt.__class__]:
        return stmt
    changes = {}
    if hasattr(stmt, "body"):
        new = _prune_block(stmt.body, used, is_source)
        if new is not stmt.body:
            changes["body"] = new
    for name in ("orelse", "finalbody"):
        part = getattr(stmt, name, None)
        if part is not None:
            new = _prune_statement(part, used, is_source)
            if new is not part:
                changes[name] = new
    handlers = getattr(stmt, "handlers", None)
    if handlers:
        new_handlers = [_prune_statement(h, used, is_source) for h in handlers]
        if any(a is not b for a, b in zip(new_handlers, handlers)):
            changes["handlers"] = new_handlers
    return stmt.with_changes(**changes) if changes else stmt


def add_imports(module: cst.Module, needed: set[str], order: tuple[str, ...], is_source: IsSource) -> cst.Module:
    """``module`` with the imports ``needed`` that it does not have yet, where the first
    source-framework import stood (or after the docstring and ``__future__`` imports)."""
    have = _existing_imports(module, needed)
    add = [imp for imp in order if imp in needed and imp not in have]
    add += sorted(imp for imp in needed if imp not in order and imp not in have)
    if add:
        idx = _insert_index(module, is_source)
        new = [fresh_copy(_import_statement(imp)) for imp in add]
        if idx < len(module.body):
            # keep the comments/blank lines that preceded the statement we insert before
            first = module.body[idx]
            new[0] = new[0].with_changes(leading_lines=first.leading_lines)
            rest = list(module.body)
            rest[idx] = first.with_changes(leading_lines=[])
            module = module.with_changes(body=rest[:idx] + new + rest[idx:])
        else:
            module = module.with_changes(body=list(module.body) + new)
    return module


@functools.lru_cache(maxsize=1024)
def _bound_by(line: str) -> tuple[str, ...]:
    """The names an import line binds: ``import a.b`` → a, ``import a as b`` / ``from x import a as b`` → b."""
    names = []
    for s in _import_statement(line).body:
        if isinstance(s, (cst.Import, cst.ImportFrom)) and not isinstance(s.names, cst.ImportStar):
            names += [_local(a, isinstance(s, cst.ImportFrom)) for a in s.names]
    return tuple(names)


@functools.lru_cache(maxsize=1024)
def _import_statement(line: str) -> cst.SimpleStatementLine:
    """An import line parsed once per process (``import torch`` is added to most outputs)."""
    return cst.parse_statement(line + "\n")


def prune_imports(module: cst.Module, source_aliases: set[str], is_source: IsSource,
                  render=None, statement_text=None, added: Iterable[str] = ()) -> tuple[cst.Module, str]:
    """Drop the source-framework imports whose names the code no longer uses; the module and its text
    (``render``: how to get a module's text, e.g. :meth:`fwport.core.position.Layout.text`;
    ``statement_text(statement, module)``: a top-level statement's text, e.g.
    :meth:`fwport.core.position.Layout.statement_text`, lets only the statements that mention a name
    the pruning asks about be tokenized). A source import that binds a name one of the target's imports
    ``added`` binds too goes whatever reads the name (``from tensorflow.compat.v1 import logging`` beside
    the ``import logging`` its translation needs): the translated reads are the target's, and kept, the
    source import would shadow it."""
    if render is None:
        def render(m: cst.Module) -> str:
            return m.code
    text = render(module)
    if not source_aliases:
        return module, text  # (no source import to drop)
    taken = source_aliases & {name for line in added for name in _bound_by(line)}
    if taken:
        module = module.with_changes(body=_prune_top(module, _AllBut(taken), is_source, statement_text))
        source_aliases = source_aliases - taken
        text = render(module)
        if not source_aliases:
            return module, text
    if not _may_reference(text, source_aliases):
        # every mention of a source name is in an import line or a comment: all of them unused,
        # known without tokenizing the output (the common case once a file is translated)
        used: set[str] | _AllBut = _AllBut(source_aliases)
    else:
        asked = _import_locals(_with_imports(module, statement_text), is_source, set(source_aliases))
        if _unreferenced(text, asked):
            # every mention of the names the pruning asks about is in a string, a comment or an
            # import line: used_names_in would find none of them used; known without tokenizing
            used = _AllBut(asked)
        else:
            found = _used_among(module, asked, statement_text) if statement_text is not None else None
            if found is not None:
                used = _AllBut(asked - found)
            else:
                used = used_names_in(text)
                if used is None:
                    used = used_names(module)
    if any(a not in used for a in source_aliases):
        module = module.with_changes(body=_prune_top(module, used, is_source, statement_text))
        text = render(module)
    return module, text


def _with_imports(module: cst.Module, statement_text) -> list:
    """The top-level statements of ``module`` that may hold an import: all of them, or with
    ``statement_text`` the simple ones and the compound ones whose text has the word (an import
    statement always spells it out; the texts are the ones the output's text was made of, kept)."""
    if statement_text is None:
        return module.body
    return [s for s in module.body if s.__class__ is cst.SimpleStatementLine or "import" in statement_text(s, module)]


def _prune_top(module: cst.Module, used, is_source: IsSource, statement_text) -> list:
    """``_prune_body(module.body)``, not entering a compound statement whose text holds no import."""
    if statement_text is None:
        return _prune_body(module.body, used, is_source)
    out = []
    changed = False
    for stmt in module.body:
        if stmt.__class__ is not cst.SimpleStatementLine and "import" not in statement_text(stmt, module):
            out.append(stmt)
            continue
        new = _prune_statement(stmt, used, is_source)
        changed |= new is not stmt
        if new is not None:
            out.append(new)
    return out if changed else list(module.body)


# --- definitions a translation writes into its output, after the file's imports ------------------------


def insert_after_imports(module: cst.Module, text: str | Sequence[str], ctx: FileContext) -> cst.Module:
    """``text`` (definitions) written into the module after its docstring and the imports at its top
    (string statements between them, as notebooks have, included), and never above the place where
    the import pass writes the target's imports the definitions use (the first source import).
    ``text`` may be given as its pieces (one per helper): the module is the same as for their
    concatenation, each piece parsed once per process however the files combine them. A helper written under
    another name than its own (the file binds its name: fwport/core/written.py) is renamed in the definitions."""
    return insert_at(module, text, insertion_index(module, ctx), ctx)


def insertion_index(module: cst.Module, ctx: FileContext) -> int:
    """Where insert_after_imports writes: after the docstring, the imports and the strings among them at
    the top, and below the first source import."""
    body = list(module.body)
    at = 0
    while at < len(body) and _imports_or_strings(body[at]):
        at += 1
    while at > 0 and not isinstance(body[at - 1].body[0], (cst.Import, cst.ImportFrom)) and at - 1 > 0:
        at -= 1  # the strings after the last import stay with the code they introduce
    first_source = next((i for i, st in enumerate(body) if is_source_import_line(st, ctx.imports.is_source)), None)
    if first_source is not None:
        at = max(at, first_source + 1)
    return at


def insert_at(module: cst.Module, text: str | Sequence[str], at: int, ctx: FileContext | None = None) -> cst.Module:
    """``text`` (or its pieces) written as statements before ``module.body[at]``, two blank lines above
    the first of them and above the statement after them (given ``ctx``: the helpers written under another
    name than their own renamed, written.rename)."""
    new = list(parsed_definitions((text,) if isinstance(text, str) else tuple(text)))
    if ctx is not None:
        from fwport.core import written
        new = written.check(ctx, written.rename(new, written.renamed(ctx)))
    body = list(module.body)
    blank = [cst.EmptyLine(), cst.EmptyLine()]
    if at < len(body):  # the statement after keeps two blank lines above it
        body[at] = body[at].with_changes(leading_lines=[*blank, *[ln for ln in body[at].leading_lines
                                                                   if ln.comment is not None]])
    return module.with_changes(body=[*body[:at], *new, *body[at:]])


def _imports_or_strings(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(b, (cst.Import, cst.ImportFrom)) or (isinstance(b, cst.Expr) and isinstance(
            b.value, (cst.SimpleString, cst.ConcatenatedString))) for b in stmt.body)


def parsed_definitions(pieces: tuple[str, ...]) -> tuple[cst.BaseStatement, ...]:
    """The statements of ``"".join(pieces)`` (leading newlines stripped) as written into a module, two
    blank lines above the first. Each piece is parsed once per process and its statements are shared
    (position.share: rendered once), so that files asking for different sets of the same helpers do
    not parse the whole text again; pieces that would not parse alone as they do in the whole text
    (a piece without a statement or a final newline, indentations that differ) are parsed whole."""
    while pieces and not pieces[0].strip("\n"):
        pieces = pieces[1:]
    if not pieces:
        raise ValueError("no definitions to write")
    parts = [_piece(p.lstrip("\n")) for p in pieces]
    if any(part is None or part.default_indent != parts[0].default_indent for part in parts) or \
            any(not p.endswith("\n") for p in pieces[:-1]):
        return _placed(None, "".join(pieces).lstrip("\n"))
    return tuple(s for prev, p in zip((None, *pieces), pieces) for s in _placed(prev, p))


@functools.lru_cache(maxsize=1024)
def _piece(text: str) -> cst.Module | None:
    """One piece of definitions, without its leading newlines, parsed (None where it holds no statement)."""
    module = parse_module(text)
    return module if module.body else None


@functools.lru_cache(maxsize=2048)
def _placed(prev: str | None, text: str) -> tuple[cst.BaseStatement, ...]:
    """The statements of piece ``text`` as they stand after piece ``prev`` (None: first, two blank lines
    above it): the lines between the two (``prev``'s footer, ``text``'s blank lines and header) above its
    first statement, as the parse of the two together gives them. Shared: rendered once per process."""
    stripped = text.lstrip("\n")
    module = _piece(stripped)
    if module is None:
        raise ValueError(f"no definitions in {stripped[:60]!r}")
    new = list(module.body)
    if prev is None:
        new[0] = new[0].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
    else:
        blank = [cst.EmptyLine() for _ in range(len(text) - len(stripped))]
        new[0] = new[0].with_changes(leading_lines=[*_piece(prev.lstrip("\n")).footer, *blank, *module.header,
                                                    *new[0].leading_lines])
    share(new)
    return tuple(new)
