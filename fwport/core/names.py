"""Name resolution from the imports a file makes, without libcst's QualifiedNameProvider.

Resolving from our own import table is exact for the spellings that matter (every ``import`` and
``from ... import`` form, module-level aliases such as ``L = tf.keras.layers``) and costs one walk
over the module's statements, where QualifiedNameProvider costs several times a full parse.

All spellings of an API reach one canonical name, by the direction's :class:`SourceNames` (in the
tf2torch pack: ``tf.keras.layers.Dense``,
``tensorflow.keras.layers.Dense``, ``tf_keras.layers.Dense`` and ``keras.layers.Dense`` are all
``keras.layers.Dense``; ``tf.math.reduce_sum`` stays ``tensorflow.math.reduce_sum`` (a rule lists
both ``tensorflow.reduce_sum`` and ``tensorflow.math.reduce_sum``)).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields

import libcst as cst

from fwport.core.bindings import BindingWalker
from fwport.core.hooks import TypeTest, default_visit, plain_visitor, table


class SourceNames:
    """What makes a name a source-framework name, and the canonical spelling of each (given by
    the direction pack: ``fwport.core.direction.Direction.source``).

    ``prefixes`` are tried longest first, repeatedly, until none applies: a prefix ending in ``.``
    rewrites a namespace (``tensorflow.keras.`` → ``keras.``), one without rewrites a whole name
    and what is below it (``keras.layers.Input`` must not match ``keras.layers.InputLayer``).
    """

    def __init__(self, roots: tuple[str, ...], prefixes: tuple[tuple[str, str], ...] = (),
                 exact: dict[str, str] | None = None, modules: tuple[str, ...] = ()):
        self.roots = tuple(roots)  # top-level packages: a file importing one is a source file
        self.prefixes = tuple(prefixes)
        self.exact = dict(exact or {})
        # modules of another package that are source-framework code too (einops.layers.torch: PyTorch layers):
        # their names are translated by rules or reported as residue, their unused imports removed
        self.modules = tuple(modules)
        self._canonical: dict[str, str] = {}  # names resolve again and again: remember each answer

    def is_source(self, qualified: str) -> bool:
        return qualified.split(".", 1)[0] in self.roots \
            or any(qualified == m or qualified.startswith(m + ".") for m in self.modules)

    def canonical(self, name: str) -> str:
        """The canonical spelling of a fully qualified source name."""
        done = self._canonical.get(name)
        if done is None:
            done = self._canonicalize(name)
            if len(self._canonical) < 100_000:  # a pure function of the name: remembered, within bounds
                self._canonical[name] = done
        return done

    def _canonicalize(self, name: str) -> str:
        if name in self.exact:
            return self.exact[name]
        changed = True
        while changed:
            changed = False
            for prefix, repl in self.prefixes:
                if name == prefix.rstrip(".") and prefix.endswith(".") and prefix != repl:
                    name = repl.rstrip(".")
                    changed = True
                    break
                if prefix.endswith("."):
                    hit = name.startswith(prefix)
                else:
                    hit = name == prefix or name.startswith(prefix + ".")
                if hit and prefix != repl:
                    name = repl + name[len(prefix):]
                    changed = True
                    break
        return name


def dotted(node: cst.BaseExpression) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; None for anything that is not a plain dotted name."""
    parts: list[str] = []
    while type(node) is cst.Attribute:  # (libcst's concrete node classes have no subclasses)
        parts.append(node.attr.value)
        node = node.value
    if type(node) is cst.Name:
        parts.append(node.value)
        return parts[::-1]
    return None


def dotted_text(node: cst.BaseExpression) -> str | None:
    parts = dotted(node)
    return ".".join(parts) if parts else None


def _module_name(node: cst.BaseExpression | None) -> str:
    return dotted_text(node) if node is not None else ""  # type: ignore[return-value]


def marked(node: cst.CSTNode, hit) -> set[int]:
    """The ids of the nodes under ``node`` (itself included) with a node inside (or being one) for
    which ``hit(node)`` is true: what a transformer must descend into (see ``skip_unmarked``)."""
    out: set[int] = set()

    def walk(n: cst.CSTNode) -> bool:
        hot = hit(n)
        t = n.__class__
        for name in _CHILD_FIELDS.get(t) or _child_fields(t):
            value = getattr(n, name)
            c = value.__class__
            if c is tuple or c is list:
                for child in value:
                    if walk(child):
                        hot = True
            elif _IS_NODE.get(c) or (c not in _IS_NODE and _is_node(value)):
                if walk(value):
                    hot = True
        if hot:
            out.add(id(n))
        return hot

    walk(node)
    return out


#: what a transformer may leave unvisited (never a statement, which may hold anything)
SKIPPABLE = (cst.BaseExpression, cst.Arg, cst.Element)
IS_SKIPPABLE = TypeTest(*SKIPPABLE)
#: libcst node types (by name, as hooks.table keys them) that no expression holds: statements, their
#: blocks and their statement-only parts. A walk that looks for these alone (a visitor whose hooks are
#: all on them, find_all of one of them) need not enter an expression.
STATEMENT_LEVEL = frozenset(
    name for name, c in vars(cst).items()
    if isinstance(c, type) and issubclass(c, cst.CSTNode) and issubclass(c, (
        cst.BaseStatement, cst.BaseSmallStatement, cst.BaseSuite, cst.Module, cst.Decorator, cst.ExceptHandler,
        cst.ExceptStarHandler, cst.Else, cst.Finally, cst.WithItem, cst.ImportAlias)))
#: an entry of a walk's table by node type: the node is not entered (an expression, for a walk that
#: looks for statement-level nodes alone)
SKIP = ()


def skip_unmarked(transformer, node: cst.CSTNode, hot: set[int] | None) -> bool | None:
    """For a transformer's ``on_visit``: False (after running the node's own visit hook, so that its
    leave hook finds what it expects) when ``node`` is an expression, argument or element outside
    ``hot``; None otherwise (visit as usual). A subtree left unvisited comes back as the very input
    node, which is what visiting it would have rebuilt when no hook inside changes anything."""
    if hot is not None and id(node) not in hot and IS_SKIPPABLE[node.__class__]:
        default_visit(transformer, node)
        return False
    return None


# --- read-only walks ---------------------------------------------------------------------------------
# ``node.visit(visitor)`` rebuilds every node it passes through (libcst's traversal replaces
# children even for a read-only CSTVisitor) and visits every whitespace, comma and parenthesis.
# ``scan`` calls the same visitor hooks, children in the same lexical order, without rebuilding
# anything and without descending into the trivia (whitespace, comments, punctuation): no analysis
# here looks at those.

_TRIVIA_FIELDS = frozenset({"lpar", "rpar", "leading_lines", "lines_after_decorators", "header", "footer",
                            "trailing_whitespace", "comma", "semicolon", "dot", "colon", "equal", "lbracket",
                            "rbracket", "lbrace", "rbrace", "newline", "asynchronous"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(t: type) -> tuple[str, ...]:
    """The fields of node type ``t`` that hold child nodes other than trivia, in the order libcst
    visits them (the order of the field names in its ``_visit_and_replace_children``)."""
    fields = _CHILD_FIELDS.get(t)
    if fields is None:
        fields = _CHILD_FIELDS[t] = tuple(n for n in _all_fields(t)
                                          if n not in _TRIVIA_FIELDS and not n.startswith("whitespace"))
    return fields


_ALL_FIELDS: dict[type, tuple[str, ...]] = {}


def _all_fields(t: type) -> tuple[str, ...]:
    """The fields of node type ``t`` that may hold child nodes, trivia included, in the order libcst
    visits them (see _child_fields)."""
    fields = _ALL_FIELDS.get(t)
    if fields is None:
        names = {f.name for f in dataclass_fields(t)}
        order: list[str] = []
        for c in t._visit_and_replace_children.__code__.co_consts:
            if isinstance(c, str) and c in names and c not in order:
                order.append(c)
        fields = _ALL_FIELDS[t] = tuple(order)
    return fields


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """libcst's ``node.children`` (every child node, trivia included, in lexical order) read from the
    node's fields. libcst's property rebuilds the node to collect them (a new node, validated, per
    call: ~100 times this); tests/test_walks.py checks both agree on every node of the fixtures."""
    t = node.__class__
    out: list[cst.CSTNode] = []
    for name in _ALL_FIELDS.get(t) or _all_fields(t):
        value = getattr(node, name)
        c = value.__class__
        if c is tuple or c is list:
            out.extend(value)
        elif _IS_NODE.get(c) or (c not in _IS_NODE and _is_node(value)):
            out.append(value)
    return out


_IS_NODE: dict[type, bool] = {}


def _is_node(value) -> bool:
    """Whether a field's value is a node (other than a tuple or a list, which the walks test by their
    very class: a subclass of them in a tree would be a pass's mistake, said at once)."""
    if isinstance(value, (tuple, list)):
        raise TypeError(f"a libcst field holds a {type(value).__name__}: give it a tuple or a list")
    _IS_NODE[value.__class__] = is_node = isinstance(value, cst.CSTNode)
    return is_node


def scan(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """``node.visit(visitor)`` for a read-only visitor, at a fraction of the cost (see above)."""
    cls = type(visitor)
    if plain_visitor(cls):  # libcst's on_visit / on_leave: the hooks looked up once per node type
        by_type = cls.__dict__.get("_fwport_scan")
        if by_type is None:
            tab = table(cls)
            by_type = {None: (tab, all(n in STATEMENT_LEVEL for n in tab))}  # (True → expressions skipped)
            setattr(cls, "_fwport_scan", by_type)
        entry = by_type.get(node.__class__)
        if entry is None:
            entry = _scan_entry(node.__class__, by_type)
        if entry is not SKIP:
            _scan_hooks(node, visitor, entry, by_type)
    else:  # its own on_visit: with libcst's on_leave (its leave hooks from the table), or its own
        by_type = cls.__dict__.get("_fwport_scan_own")
        if by_type is None:
            leaves = table(cls) if cls.on_leave is cst.CSTVisitor.on_leave else None
            # BindingWalker's on_visit only filters and calls the node's visit hook: a node type with no
            # hook and no child fields is not entered (SKIP), as for a plain visitor
            by_type = {None: (leaves, leaves is not None and cls.on_visit is BindingWalker.on_visit)}
            setattr(cls, "_fwport_scan_own", by_type)
        entry = by_type.get(node.__class__)
        if entry is None:
            entry = _scan_own_entry(node.__class__, by_type)
        if entry is not SKIP:
            _scan(node, visitor, entry, by_type, by_type[None][0] is None)


class ValueVisitor(cst.CSTVisitor):
    """A read-only visitor (for :func:`scan`) that meets the names code reads as values only: not an
    attribute's name (``x.mnist`` does not read ``mnist``) nor a keyword argument's (``f(train=True)``
    does not read ``train``). Subclasses add their ``visit_Name`` and other hooks."""

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        scan(node.value, self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        scan(node.value, self)
        return False


def _scan(node: cst.CSTNode, visitor: cst.CSTVisitor, entry: tuple, by_type: dict, own_leave: bool) -> None:
    # entry: the node type's (leave hook, child fields), looked up by the caller; by_type: node type →
    # that entry (or SKIP, see _scan_own_entry), kept on the visitor's class
    leave, fields = entry
    if visitor.on_visit(node):
        for name in fields:
            value = getattr(node, name)
            c = value.__class__
            if c is tuple or c is list:
                for child in value:
                    e = by_type.get(child.__class__)
                    if e is None:
                        e = _scan_own_entry(child.__class__, by_type)
                    if e is not SKIP:
                        _scan(child, visitor, e, by_type, own_leave)
            elif _IS_NODE.get(c) or (c not in _IS_NODE and _is_node(value)):
                e = by_type.get(c)
                if e is None:
                    e = _scan_own_entry(c, by_type)
                if e is not SKIP:
                    _scan(value, visitor, e, by_type, own_leave)
    if own_leave:
        visitor.on_leave(node)
    elif leave is not None:
        leave(visitor, node)


def _scan_own_entry(t: type, by_type: dict) -> tuple:
    """Node type ``t``'s entry for a visitor with its own on_visit (``by_type[None]``: (its leave hooks by
    node type name, None where it has its own on_leave; whether its on_visit is BindingWalker's))."""
    leaves, pure = by_type[None]
    hooks = leaves.get(t.__name__, _NO_HOOKS) if leaves is not None else _NO_HOOKS
    fields = _CHILD_FIELDS.get(t) or _child_fields(t)
    entry = by_type[t] = SKIP if pure and hooks == _NO_HOOKS and not fields else (hooks[1], fields)
    return entry


def _scan_hooks(node: cst.CSTNode, visitor: cst.CSTVisitor, entry: tuple, by_type: dict) -> None:
    # entry: the node type's (visit hook, leave hook, child fields) of the visitor's class, looked up
    # by the caller; by_type: node type → that entry, kept on the class (one dict look-up per node).
    # A node type with no hook and no child fields (a Name, a number, an operator, for most visitors)
    # is SKIP: the parent does not call this function for it (a third to half of the calls).
    visit, leave, fields = entry
    if visit is None or visit(visitor, node) is not False:
        for name in fields:
            value = getattr(node, name)
            c = value.__class__
            if c is tuple or c is list:
                for child in value:
                    e = by_type.get(child.__class__)
                    if e is None:
                        e = _scan_entry(child.__class__, by_type)
                    if e is not SKIP:
                        _scan_hooks(child, visitor, e, by_type)
            elif _IS_NODE.get(c) or (c not in _IS_NODE and _is_node(value)):
                e = by_type.get(c)
                if e is None:
                    e = _scan_entry(c, by_type)
                if e is not SKIP:
                    _scan_hooks(value, visitor, e, by_type)
    if leave is not None:
        leave(visitor, node)


def _scan_entry(t: type, by_type: dict) -> tuple:
    """Node type ``t``'s entry in ``by_type`` (``by_type[None]``: (the class's hook table, whether its hooks
    are all on statement-level nodes)), computed once per (visitor class, node type)."""
    tab, statements_only = by_type[None]
    if statements_only and IS_SKIPPABLE[t]:  # (a dict look-up: issubclass against the ABCs runs in Python)
        entry = SKIP
    else:
        entry = tab.get(t.__name__, _NO_HOOKS) + (_CHILD_FIELDS.get(t) or _child_fields(t),)
        entry = SKIP if entry == (None, None, ()) else entry
    by_type[t] = entry
    return entry


def method_of(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    """The method ``name`` a class statement defines in its body (``__init__``, ``forward``), else None."""
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    return next((s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == name), None)


_NO_HOOKS = (None, None)


def find_all(node: cst.CSTNode, kind: type) -> list:
    """The nodes of type ``kind`` under ``node`` (itself included), in the order a visitor's
    ``visit_<Kind>`` meets them (what ``scan`` with a visitor appending them gives).

    Planners ask this of the same unchanged nodes again and again (the calls of a method, for each
    question about it): the answer is kept by node identity (the node held with it, a few hundred at
    most; a node never changes), a new list returned."""
    key = (id(node), kind)
    hit = _FOUND.get(key)
    if hit is not None and hit[0] is node:
        return list(hit[1])
    out: list = []
    if kind.__name__ in STATEMENT_LEVEL and getattr(cst, kind.__name__, None) is kind:
        _find_statements(node, kind, out)
    else:
        _find(node, kind, out)
    if len(_FOUND) >= 1024:
        _FOUND.clear()
    _FOUND[key] = (node, tuple(out))
    return out


_FOUND: dict[tuple[int, type], tuple[cst.CSTNode, tuple]] = {}
_IS_EXPRESSION: dict[type, bool] = {}


def _find_statements(node: cst.CSTNode, kind: type, out: list) -> None:
    """_find of a statement-level kind: expressions (which hold none) not entered."""
    t = node.__class__
    if t is kind:
        out.append(node)
    for name in _CHILD_FIELDS.get(t) or _child_fields(t):
        value = getattr(node, name)
        c = value.__class__
        if c is tuple or c is list:
            for child in value:
                e = _IS_EXPRESSION.get(child.__class__)
                if e is None:
                    e = _IS_EXPRESSION[child.__class__] = isinstance(child, SKIPPABLE)
                if not e:
                    _find_statements(child, kind, out)
        elif _IS_NODE.get(c) or (c not in _IS_NODE and _is_node(value)):
            e = _IS_EXPRESSION.get(c)
            if e is None:
                e = _IS_EXPRESSION[c] = isinstance(value, SKIPPABLE)
            if not e:
                _find_statements(value, kind, out)


def _find(node: cst.CSTNode, kind: type, out: list) -> None:
    # (a child of another kind with no child fields, a leaf, is not called for)
    t = node.__class__
    if t is kind:
        out.append(node)
    for name in _CHILD_FIELDS.get(t) or _child_fields(t):
        value = getattr(node, name)
        c = value.__class__
        if c is tuple or c is list:
            for child in value:
                c = child.__class__
                if c is kind or _CHILD_FIELDS.get(c) is not _LEAF:
                    _find(child, kind, out)
        elif _IS_NODE.get(c) or (c not in _IS_NODE and _is_node(value)):
            if c is kind or _CHILD_FIELDS.get(c) is not _LEAF:
                _find(value, kind, out)


_LEAF = ()  # (the child fields of a node type that has none)


@dataclass
class ImportTable:
    """Local name → fully qualified name, for every import (and module-level alias) of a file."""

    names: SourceNames
    aliases: dict[str, str] = field(default_factory=dict)
    #: import statements that bind source-framework names, for the import fixer
    source_imports: list[cst.CSTNode] = field(default_factory=list)
    #: aliases the file may rebind locally (a parameter, an assignment...): only these need the
    #: (costly) shadowing analysis. None: not computed, treat every alias as rebindable.
    rebindable: set[str] | None = None

    def resolve_parts(self, parts: list[str]) -> str | None:
        head = parts[0]
        if head not in self.aliases:
            return None
        return self.names.canonical(".".join([self.aliases[head], *parts[1:]]))

    def resolve(self, node: cst.BaseExpression) -> str | None:
        parts = dotted(node)
        return self.resolve_parts(parts) if parts else None

    def source_aliases(self) -> set[str]:
        return {local for local, q in self.aliases.items() if self.names.is_source(q)}

    def is_source(self, qualified: str) -> bool:
        return self.names.is_source(qualified)


class _ImportCollector(cst.CSTVisitor):
    def __init__(self, table: ImportTable):
        self.t = table
        self.depth = 0  # function nesting; module-level aliases only at depth 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.depth += 1

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.depth -= 1

    def visit_Import(self, node: cst.Import) -> None:
        for a in node.names:
            full = _module_name(a.name)
            if a.asname is not None and isinstance(a.asname.name, cst.Name):
                self.t.aliases[a.asname.name.value] = full
            else:
                head = full.split(".")[0]
                self.t.aliases[head] = head
            if self.t.is_source(full):
                self.t.source_imports.append(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative:
            return
        mod = _module_name(node.module)
        if self.t.is_source(mod):
            self.t.source_imports.append(node)
        if isinstance(node.names, cst.ImportStar):
            return
        for a in node.names:
            name = _module_name(a.name)
            local = a.asname.name.value if a.asname is not None and isinstance(a.asname.name, cst.Name) else name
            self.t.aliases[local] = f"{mod}.{name}"

    def visit_Assign(self, node: cst.Assign) -> None:
        # module-level `L = tf.keras.layers` style aliases
        if self.depth or len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        parts = dotted(node.value)
        if not parts or parts[0] not in self.t.aliases:
            return
        resolved = self.t.resolve_parts(parts)
        if resolved and self.t.is_source(resolved) and resolved.count(".") <= 2 and resolved[:1].islower():
            # only module-like targets (tf.keras.layers), never calls or objects
            last = resolved.rsplit(".", 1)[-1]
            if last[:1].islower():
                self.t.aliases[node.targets[0].target.value] = resolved


def _walk_statements(body, collector: _ImportCollector) -> None:
    """Imports and aliases are statements: walk statement lists only, never into expressions."""
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    collector.visit_Import(small)
                elif isinstance(small, cst.ImportFrom):
                    collector.visit_ImportFrom(small)
                elif isinstance(small, cst.Assign):
                    collector.visit_Assign(small)
            continue
        is_function = isinstance(stmt, cst.FunctionDef)
        collector.depth += is_function
        for block in _blocks(stmt):
            _walk_statements(block, collector)
        collector.depth -= is_function


def _blocks(stmt: cst.CSTNode):
    """The statement lists nested in a compound statement (elif chains and handlers included)."""
    body = getattr(stmt, "body", None)
    if isinstance(body, cst.IndentedBlock):
        yield body.body
    elif isinstance(body, cst.SimpleStatementSuite):
        yield [cst.SimpleStatementLine(body=body.body)]
    for name in ("orelse", "finalbody"):
        part = getattr(stmt, name, None)
        if isinstance(part, cst.If):
            yield [part]  # elif: a statement of its own
        elif part is not None:
            yield from _blocks(part)
    for part in [*(getattr(stmt, "handlers", ()) or ()), *(getattr(stmt, "cases", ()) or ())]:
        yield from _blocks(part)


def collect_imports(module: cst.Module, names: SourceNames, source: str | None = None) -> ImportTable:
    """The import table of ``module``; with ``source`` (its text), also which aliases the file
    might rebind, found by a conservative text search (a false alarm only costs time)."""
    table = ImportTable(names)
    _walk_statements(module.body, _ImportCollector(table))
    if source is not None:
        code = _IMPORT_LINES.sub("", source)  # an import's own `as tf` binds the alias, not rebinds it
        table.rebindable = _rebindable(set(table.aliases), code)
    return table


_IMPORT_LINES = re.compile(r"^[ \t]*(?:import|from)\b[^\n(]*(?:\([^)]*\))?[^\n]*", re.M)


def _rebindable(aliases: set[str], source: str) -> set[str]:
    """The aliases that appear where a name can be bound (one scan for all of them)."""
    if not aliases:
        return set()
    a = "(?P<n{}>" + "|".join(map(re.escape, sorted(aliases, key=len, reverse=True))) + r")\b"
    # every match starts with an alias's first character, `as`, `for`, `lambda` or `*`: the lookahead
    # says so at each position in one character-class test, before the five alternatives are tried
    # (the same matches, about twice as fast)
    first = "".join(sorted({re.escape(alias[:1]) for alias in aliases} | {"a", "f", "l", r"\*"}))
    pattern = re.compile((f"(?=[{first}])" if all(aliases) else "") + "(?:" + "|".join([
        r"(?<![.\w])" + a.format(0) + r"\s*(?:[,):=]|[-+*/%&|^@]=|//=|\*\*=|>>=|<<=)",
        r"\bas\s+" + a.format(1), r"\*\s*" + a.format(2), r"\bfor\s+" + a.format(3),
        r"\blambda\s+" + a.format(4),
    ]) + ")")
    found = {next(v for v in m.groupdict().values() if v) for m in pattern.finditer(source)}
    if "global" in source or "nonlocal" in source:  # (a regex scan of the whole text otherwise)
        for m in re.finditer(r"\b(?:global|nonlocal)\b([^\n]*)", source):
            found |= {n for n in re.findall(r"\w+", m.group(1)) if n in aliases}
    return found & aliases


class _FreeReads(BindingWalker):
    """The first read ``alias.attr`` of each alias, and the aliases bound anywhere in the module (in
    every scope: functions, lambdas, comprehensions, parameters)."""

    def __init__(self, aliases: set[str]):
        super().__init__(lambdas=True)
        self.aliases = aliases
        self.bound_anywhere: set[str] = set()
        self.first: dict[str, cst.Attribute] = {}

    def enter_scope(self, node) -> bool:
        return True

    def bound(self, target: cst.BaseExpression, how: str, value) -> None:
        if isinstance(target, cst.Name) and target.value in self.aliases:
            self.bound_anywhere.add(target.value)

    def visit_Param(self, node: cst.Param) -> None:
        if node.name.value in self.aliases:
            self.bound_anywhere.add(node.name.value)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._targets(node.target, "for")

    def visit_Attribute(self, node: cst.Attribute) -> None:
        head = node.value
        if isinstance(head, cst.Name) and head.value in self.aliases:
            self.first.setdefault(head.value, node)


def free_conventional_aliases(module: cst.Module, table: ImportTable, source: str,
                              conventional: dict[str, str]) -> dict[str, cst.Attribute]:
    """The conventional aliases of the source framework (``tf`` → ``tensorflow``) that the file reads
    as ``alias.name`` but binds nowhere (no import, assignment, parameter... in any scope): a notebook
    fragment, or a file whose ``import tensorflow as tf`` is in a cell it does not hold. Each is added
    to ``table`` as that import; the result maps it to its first read, for the warning that says so."""
    wanted = {a for a in conventional if a not in table.aliases
              and re.search(rf"(?<![.\w]){re.escape(a)}\s*\.", source)}
    if wanted:  # (the text search also finds docstrings and imports: are they read as `alias.name`?)
        heads: set[str] = set()
        _attribute_heads(module, heads)
        wanted &= heads
    if not wanted:
        return {}
    reads = _FreeReads(wanted)
    scan(module, reads)
    found = {a: node for a, node in reads.first.items() if a not in reads.bound_anywhere}
    for alias in found:
        table.aliases[alias] = conventional[alias]
    return found


def _attribute_heads(node: cst.CSTNode, out: set[str]) -> None:
    """The names ``node`` reads as ``name.attr`` (import statements aside): a cheap walk that tells
    whether the binding walk of :func:`free_conventional_aliases` can find anything."""
    t = type(node)
    if t is cst.Attribute and type(node.value) is cst.Name:
        out.add(node.value.value)
    elif t is cst.Import or t is cst.ImportFrom:
        return
    for name in _CHILD_FIELDS.get(t) or _child_fields(t):
        value = getattr(node, name)
        if isinstance(value, (tuple, list)):
            for child in value:
                _attribute_heads(child, out)
        elif _IS_NODE.get(value.__class__) or (value.__class__ not in _IS_NODE and _is_node(value)):
            _attribute_heads(value, out)


def param_names(fn: cst.FunctionDef | cst.Lambda) -> set[str]:
    """The names a function's or lambda's parameters bind (``*args`` and ``**kwargs`` included)."""
    p = fn.params
    names = {x.name.value for x in [*p.posonly_params, *p.params, *p.kwonly_params]}
    for star in (p.star_arg, p.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    return names


def bound_names(fn: cst.FunctionDef | cst.Lambda) -> set[str]:
    """Names a function binds locally (parameters and assignment targets), which shadow imports.

    Every pass with a ScopedResolver asks again about the same (unchanged) functions: the answer is
    kept by node identity (the node held with it, a few hundred at most), a copy returned."""
    hit = _BOUND.get(id(fn))
    if hit is not None and hit[0] is fn:
        return set(hit[1])
    names = _bound_names(fn)
    if len(_BOUND) >= 512:
        _BOUND.clear()
    _BOUND[id(fn)] = (fn, frozenset(names))
    return names


_BOUND: dict[int, tuple[cst.CSTNode, frozenset[str]]] = {}


def _bound_names(fn: cst.FunctionDef | cst.Lambda) -> set[str]:
    names: set[str] = set()
    params = fn.params
    for p in [*params.posonly_params, *params.params, *params.kwonly_params]:
        names.add(p.name.value)
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    if isinstance(fn, cst.FunctionDef):
        scan(fn.body, _LocalBinder(names))
    return names


class _LocalBinder(BindingWalker):
    """The names a function body binds by statements (``:=`` aside), local imports excepted: those
    are real imports, handled by the import table."""

    _HOWS = frozenset({"assign", "annassign", "annotation", "augassign", "for", "as", "def", "class"})

    def __init__(self, names: set[str]):
        super().__init__(expressions=False, imports=False)
        self.names = names

    def bound(self, target: cst.BaseExpression, how: str, value) -> None:
        if how in self._HOWS and isinstance(target, cst.Name):
            self.names.add(target.value)


class ScopedResolver:
    """Resolves names through the import table, honouring local shadowing.

    Mix into a CSTTransformer/CSTVisitor: it keeps a stack of the names bound by enclosing
    functions, and :meth:`qualname` returns None for a head name that a function rebinds.
    """

    imports: ImportTable

    # libcst asks a transformer about every field of every node it visits (``visit_Call_func``...):
    # no visitor here has such hooks, so the questions are not asked
    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        return None

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        return None

    def _init_scopes(self, imports: ImportTable) -> None:
        self.imports = imports
        self._scopes: list[cst.FunctionDef | cst.Lambda] = []
        self._bound: dict[int, set[str]] = {}

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool | None:
        self._scopes.append(node)
        return None

    def leave_FunctionDef(self, original_node, updated_node=None):  # type: ignore[override]
        self._scopes.pop()
        return updated_node if updated_node is not None else None

    def visit_Lambda(self, node: cst.Lambda) -> bool | None:
        self._scopes.append(node)
        return None

    def leave_Lambda(self, original_node, updated_node=None):  # type: ignore[override]
        self._scopes.pop()
        return updated_node if updated_node is not None else None

    def shadowed(self, head: str) -> bool:
        rebindable = self.imports.rebindable
        if rebindable is not None and head not in rebindable:
            return False
        for fn in self._scopes:
            names = self._bound.get(id(fn))
            if names is None:
                names = self._bound[id(fn)] = bound_names(fn)
            if head in names:
                return True
        return False

    def qualname(self, node: cst.BaseExpression) -> str | None:
        head = node
        while type(head) is cst.Attribute:
            head = head.value
        if type(head) is not cst.Name or head.value not in self.imports.aliases:
            return None  # the common case, decided without building the dotted name
        parts = dotted(node)
        if not parts or self.shadowed(parts[0]):
            return None
        return self.imports.resolve_parts(parts)
