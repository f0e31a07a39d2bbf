"""The cheap walks and renders the pipeline relies on give what libcst's own would.

``names.scan`` must call a visitor's hooks on the same nodes in the same order as ``node.visit``
(trivia aside), ``rewrite.rewrite`` must give what ``node.visit(transformer)`` gives while keeping
every untouched node, and ``position.Layout`` must give the same text, positions and statement spans as
rendering the whole module, however many modules share its statements.
"""
from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from fwport.core.bindings import BindingWalker
from fwport.core.hooks import default_leave_transform, default_visit
from fwport.core.names import ScopedResolver, children, find_all, scan
from fwport.core.position import Layout, node_positions, statement_spans
from fwport.core.rewrite import rewrite

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "fixtures" / "tf2torch").glob("*/model.py"))

EXTRA = '''# header comment

"""Docstring."""
import tensorflow as tf  # trailing


@tf.function
def f(x, *, training=None):
    # inside
    y = [tf.abs(x),  # first
         tf.exp(x)]
    return (lambda z: z + 1)(y[0]) if training else {k: v for k, v in zip("ab", y)}


class A(tf.keras.layers.Layer):
    def call(self, x):
        with tf.name_scope("a"):
            for i in range(2):
                x = x + i
        return x
# footer comment
'''

_TRIVIA = (cst.BaseParenthesizableWhitespace, cst.EmptyLine, cst.TrailingWhitespace, cst.Newline, cst.Comment,
           cst.Comma, cst.Dot, cst.Colon, cst.Semicolon, cst.AssignEqual, cst.LeftParen, cst.RightParen,
           cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace, cst.RightCurlyBrace, cst.Asynchronous)


class _Log(cst.CSTVisitor):
    def __init__(self) -> None:
        self.log: list[tuple[str, int]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if not isinstance(node, _TRIVIA):
            self.log.append(("visit", id(node)))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if not isinstance(original_node, _TRIVIA):
            self.log.append(("leave", id(original_node)))


def _texts():
    return [EXTRA] + [p.read_text(encoding="utf-8") for p in SAMPLES]


@pytest.mark.parametrize("text", _texts())
def test_scan_visits_what_visit_visits_in_the_same_order(text):
    module = cst.parse_module(text)
    a, b = _Log(), _Log()
    module.visit(a)
    scan(module, b)
    assert b.log == a.log


def test_children_are_libcsts_children_in_the_same_order():
    """names.children(node) gives libcst's node.children (trivia included, the same nodes, in order) for
    every node of the fixture programs of both directions and of nodes built with libcst's defaults."""
    torch2jax = sorted((ROOT / "fixtures" / "torch2jax").glob("*/model.py"))
    texts = _texts() + [p.read_text(encoding="utf-8") for p in torch2jax]
    built = [cst.Call(cst.Name("f"), [cst.Arg(cst.Name("x")), cst.Arg(cst.Integer("1"), keyword=cst.Name("k"))]),
             cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name("y"))], cst.Name("x"))]),
             cst.FunctionDef(cst.Name("g"), cst.Parameters([cst.Param(cst.Name("a"))]),
                             cst.IndentedBlock([cst.SimpleStatementLine([cst.Pass()])]))]
    types, count = set(), 0
    stack = [cst.parse_module(t) for t in texts] + built
    while stack:
        node = stack.pop()
        expected = node.children
        got = children(node)
        assert len(got) == len(expected) and all(a is b for a, b in zip(got, expected)), type(node).__name__
        types.add(type(node))
        count += 1
        stack.extend(expected)
    assert len(types) > 80 and count > 50_000  # (the fixtures hold most of libcst's node types)


@pytest.mark.parametrize("text", _texts())
def test_find_all_gives_what_a_visitor_collects_in_the_same_order(text):
    module = cst.parse_module(text)
    for kind in (cst.Call, cst.Name, cst.Assign, cst.FunctionDef, cst.Subscript):
        seen = []

        class _Collect(cst.CSTVisitor):
            def on_visit(self, node: cst.CSTNode) -> bool:
                if type(node) is kind:
                    seen.append(node)
                return True

        module.visit(_Collect())
        found = find_all(module, kind)
        assert [id(n) for n in found] == [id(n) for n in seen]
        found.clear()  # a new list each time: the kept answer is not the caller's to change
        assert [id(n) for n in find_all(module, kind)] == [id(n) for n in seen]
    inner = module.body[-1]  # a statement of the module asked on its own
    assert [id(n) for n in find_all(inner, cst.Name)] == \
        [id(n) for n in find_all(module, cst.Name) if any(n is m for m in find_all(inner, cst.Name))]


@pytest.mark.parametrize("text", _texts())
def test_layout_gives_the_text_positions_and_spans_of_a_whole_render(text):
    module = cst.parse_module(text)
    layout = Layout()
    assert layout.text(module) == module.code == text
    nodes = []

    class _All(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nodes.append(node)
            return True

    scan(module, _All())
    assert node_positions(module, nodes, layout) == node_positions(module, nodes)
    spans, lines = statement_spans(module, layout)
    assert lines == text.count("\n")
    # every statement, argument and element: the lines its text spans (comments and blank lines
    # above it excluded, as its trailing newline)
    lines_of = text.split("\n")
    for node in nodes:
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement, cst.Arg, cst.Element)):
            first, last = spans.get(id(node))
            assert first == node_positions(module, [node])[id(node)][0]
            assert lines_of[last - 1].strip() and first <= last
    # a module sharing all statements but one: only that one is rendered again, the rest reused
    changed = module.with_changes(body=[*module.body[:-1], module.body[-1].deep_clone()])
    assert layout.text(changed) == changed.code
    assert node_positions(changed, [changed.body[-1]], layout) == node_positions(changed, [changed.body[-1]])
    # a few nodes asked at a time (their statements looked for in each statement's marks, no map of every
    # node), the two modules asked about in turn (each kept by the Layout): the same positions
    fresh, every = Layout(), node_positions(module, nodes)
    for k in range(0, len(nodes), 7):
        few = nodes[k:k + 2]
        assert node_positions(module, few, fresh) == {id(n): every[id(n)] for n in few if id(n) in every}
        assert node_positions(changed, [changed.body[-1]], fresh) == node_positions(changed, [changed.body[-1]])


class _Edit(cst.CSTTransformer):
    """A transformer exercising every answer a leave hook can give: a replacement (``abs`` → ``neg``,
    an integer doubled), a removal from a sequence (a ``del`` argument), a removal of an optional
    child (a return value), a flattening (``pass`` → two statements), and a hook on an attribute."""

    def __init__(self) -> None:
        self.attributes: list[str] = []

    def on_visit_attribute(self, node, attribute) -> None:
        if isinstance(node, cst.Call):
            self.attributes.append(attribute)

    def leave_Name(self, original_node, updated_node):
        return updated_node.with_changes(value="neg") if updated_node.value == "abs" else updated_node

    def leave_Integer(self, original_node, updated_node):
        # (a new node only where the value changes: the identity check below reads equal as untouched)
        value = int(updated_node.value, 0)
        return cst.Integer(str(2 * value)) if value else updated_node

    def leave_Arg(self, original_node, updated_node):
        if isinstance(updated_node.value, cst.Name) and updated_node.value.value == "drop_me":
            return cst.RemovalSentinel.REMOVE
        return updated_node

    def leave_Return(self, original_node, updated_node):
        return updated_node.with_changes(value=None) if isinstance(updated_node.value, cst.Name) else updated_node

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if isinstance(updated_node.body[0], cst.Pass):
            return cst.FlattenSentinel([cst.parse_statement("a = 1\n"), cst.parse_statement("b = 2\n")])
        return updated_node


REWRITE = '''import tensorflow as tf


def f(x, drop_me):
    y = tf.abs(x, drop_me) + 3  # keep me
    if y:
        pass
    return y


def untouched(a, b):
    return a + b
'''


@pytest.mark.parametrize("text", [REWRITE, *_texts()])
def test_rewrite_gives_what_visit_gives_and_keeps_untouched_nodes(text):
    module = cst.parse_module(text)
    by_libcst, ours = _Edit(), _Edit()
    expected = module.visit(by_libcst)
    got = rewrite(module, ours)
    assert got.code == expected.code
    assert ours.attributes == [a for a in by_libcst.attributes if a in ("func", "args")]
    for old, new in zip(module.body, got.body):  # a statement with no edit inside is the input node
        if old.deep_equals(new):
            assert new is old
    assert rewrite(module, cst.CSTTransformer()) is module


def test_rewrite_edits_and_removes_as_libcst_does():
    got = rewrite(cst.parse_module(REWRITE), _Edit()).code
    assert "y = tf.neg(x, ) + 6  # keep me" in got  # the comma stays, as libcst leaves it
    assert "        a = 1\n        b = 2\n" in got and "pass" not in got
    assert "    return \n" in got
    assert "def untouched(a, b):\n    return a + b\n" in got


def test_rewrite_refuses_to_remove_a_required_child():
    class _Bad(cst.CSTTransformer):
        def leave_Name(self, original_node, updated_node):
            return cst.RemovalSentinel.REMOVE

    with pytest.raises(TypeError, match="required child"):
        rewrite(cst.parse_module("x + y\n"), _Bad())



def test_rewrite_validates_a_rebuilt_node_as_libcst_does():
    """A parent rebuilt around a changed child is checked as with_changes checks it: ``not(x)`` whose parentheses a
    transformer drops is ``notx``, which libcst refuses (CSTValidationError), never rendered."""
    class _Unparenthesise(cst.CSTTransformer):
        def leave_Name(self, original_node, updated_node):
            return updated_node.with_changes(lpar=(), rpar=())

    module = cst.parse_module("y = not(x)\n")
    with pytest.raises(cst.CSTValidationError):
        module.visit(_Unparenthesise())
    with pytest.raises(cst.CSTValidationError):
        rewrite(module, _Unparenthesise())

# --- the visitors that keep libcst's on_visit / on_leave: their hooks come from fwport.core.hooks -------
class _Mixin:
    def visit_Name(self, node):
        self.log.append(("mixin visit_Name", id(node)))


class _Hooks(_Mixin, cst.CSTVisitor):
    """Hooks of every kind libcst finds by name: one that prunes (returns False), one inherited from a
    mixin, a static method, leave hooks; libcst's on_visit / on_leave kept."""

    def __init__(self) -> None:
        self.log: list[tuple[str, int]] = []

    def visit_Call(self, node):
        self.log.append(("visit_Call", id(node)))
        return not (isinstance(node.func, cst.Name) and node.func.value == "range")  # not into range(...)

    def leave_Call(self, node):
        self.log.append(("leave_Call", id(node)))

    @staticmethod
    def visit_Integer(node):
        _STATIC.append(node.value)

    def leave_FunctionDef(self, node):
        self.log.append(("leave_FunctionDef", id(node)))


class _Override(_Hooks):
    def visit_Name(self, node):  # overrides the mixin's
        self.log.append(("own visit_Name", id(node)))
        return False


class _Guarded(_Hooks):
    """A visitor with its own on_visit that calls hooks.default_visit in place of super().on_visit."""

    def on_visit(self, node):
        return not isinstance(node, cst.Lambda) and default_visit(self, node)


_STATIC: list[str] = []


@pytest.mark.parametrize("cls", [_Hooks, _Override, _Guarded])
@pytest.mark.parametrize("text", _texts()[:6])
def test_scan_calls_a_visitors_own_hooks_as_visit_does(text, cls):
    module = cst.parse_module(text)
    a, b = cls(), cls()
    _STATIC.clear()
    module.visit(a)
    by_libcst = list(_STATIC)
    _STATIC.clear()
    scan(module, b)
    assert b.log == a.log and _STATIC == by_libcst
    assert any(k == "visit_Call" for k, _ in a.log)  # the hooks ran at all


class _Binds(BindingWalker):
    """BindingWalker's own on_visit (scan does not enter a node type with no hook and no child field for it)."""

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.log: list[tuple] = []

    def bound(self, target, how, value) -> None:
        self.log.append((id(target), how, id(value), self.loop))

    def enter_scope(self, node) -> bool:  # (every body walked: more nodes met)
        return not isinstance(node, cst.Lambda) or self.lambdas

    def visit_Name(self, node):
        self.log.append(("visit_Name", id(node)))

    def leave_Integer(self, node):
        self.log.append(("leave_Integer", id(node)))


@pytest.mark.parametrize("options", [{}, {"expressions": False}, {"lambdas": True, "comprehensions": False}])
@pytest.mark.parametrize("text", _texts()[:6])
def test_scan_of_a_binding_walker_meets_what_visit_meets(text, options):
    module = cst.parse_module(text)
    a, b = _Binds(**options), _Binds(**options)
    module.visit(a)
    scan(module, b)
    assert b.log == a.log and any(k == "visit_Name" for k, *_ in a.log) == options.get("expressions", True)


def test_default_hooks_answer_as_libcst_does():
    call = cst.parse_expression("range(3)")
    v = _Hooks()
    assert default_visit(v, call) is cst.CSTVisitor.on_visit(v, call) is False
    assert default_visit(v, call.func) is cst.CSTVisitor.on_visit(v, call.func) is True
    t = _Edit()
    name = cst.Name("abs")
    assert default_leave_transform(t, name, name).value == cst.CSTTransformer.on_leave(t, name, name).value == "neg"
    assert default_leave_transform(cst.CSTTransformer(), name, name) is name


class _AttributeHooks(cst.CSTTransformer):
    """A transformer with an attribute hook by name (libcst's on_visit_attribute calls it)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def visit_Call_func(self, node) -> None:
        self.seen.append(cst.Module([]).code_for_node(node.func))

    def leave_Integer(self, original_node, updated_node):
        return updated_node.with_changes(value=str(int(updated_node.value, 0) + 1))


class _Resolving(ScopedResolver, cst.CSTTransformer):
    """The passes' kind: ScopedResolver's empty attribute hooks, libcst's on_visit / on_leave."""

    def __init__(self) -> None:
        self._scopes, self._bound = [], {}
        self.depths: list[int] = []

    def visit_FunctionDef(self, node):
        self.depths.append(len(self._scopes))
        return super().visit_FunctionDef(node)

    def leave_Name(self, original_node, updated_node):
        return updated_node.with_changes(value="neg") if updated_node.value == "abs" else updated_node


@pytest.mark.parametrize("cls", [_AttributeHooks, _Resolving])
@pytest.mark.parametrize("text", [REWRITE, *_texts()[:6]])
def test_rewrite_calls_hooks_by_name_as_visit_does(text, cls):
    module = cst.parse_module(text)
    a, b = cls(), cls()
    expected = module.visit(a)
    got = rewrite(module, b)
    assert got.code == expected.code
    assert vars(b) == vars(a)


class _StatementsOnly(cst.CSTTransformer):
    """Hooks on statements alone (a `with` unwrapped, decorators dropped, a log of what it met): the
    kind rewrite does not walk into expressions for."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def visit_FunctionDef(self, node) -> None:
        self.log.append("def " + node.name.value)

    def leave_FunctionDef(self, original_node, updated_node):
        return updated_node.with_changes(decorators=[])

    def leave_With(self, original_node, updated_node):
        self.log.append("with")
        return cst.FlattenSentinel(updated_node.body.body)

    def leave_Return(self, original_node, updated_node):
        self.log.append("return")
        return updated_node


class _AlsoAName(_StatementsOnly):
    """The same with one expression hook: walked into expressions again."""

    def leave_Name(self, original_node, updated_node):
        return updated_node.with_changes(value="neg") if updated_node.value == "abs" else updated_node


@pytest.mark.parametrize("cls", [_StatementsOnly, _AlsoAName])
@pytest.mark.parametrize("text", [EXTRA, REWRITE, *_texts()[:6]])
def test_rewrite_of_a_statements_only_transformer_gives_what_visit_gives(text, cls):
    from fwport.core.names import SKIP as _SKIP

    module = cst.parse_module(text)
    a, b = cls(), cls()
    expected = module.visit(a)
    got = rewrite(module, b)
    assert got.code == expected.code
    assert b.log == a.log
    skipped = cls.__dict__["_fwport_rewrite"].get(cst.Call)
    assert (skipped is _SKIP) == (cls is _StatementsOnly)  # expressions skipped only without expression hooks
    fresh = rewrite(module, cls(), fresh=True)  # a copy enters every node, expressions too
    assert fresh.code == expected.code
    copied = find_all(fresh, cst.Call)
    assert len(copied) == len(find_all(got, cst.Call))
    assert not {id(c) for c in find_all(module, cst.Call)} & {id(c) for c in copied}


class _StatementVisitor(cst.CSTVisitor):
    """Hooks on statements alone (one prunes a class): scan need not enter expressions for it."""

    def __init__(self) -> None:
        self.log: list[tuple[str, int]] = []

    def visit_ClassDef(self, node):
        self.log.append(("visit_ClassDef", id(node)))
        return False

    def visit_Assign(self, node):
        self.log.append(("visit_Assign", id(node)))

    def leave_FunctionDef(self, node):
        self.log.append(("leave_FunctionDef", id(node)))

    def visit_Return(self, node):
        self.log.append(("visit_Return", id(node)))


@pytest.mark.parametrize("text", [EXTRA, REWRITE, *_texts()[:6]])
def test_scan_of_a_statements_only_visitor_meets_what_visit_meets(text):
    from fwport.core.names import SKIP

    module = cst.parse_module(text)
    a, b = _StatementVisitor(), _StatementVisitor()
    module.visit(a)
    scan(module, b)
    assert b.log == a.log and a.log
    assert _StatementVisitor.__dict__["_fwport_scan"].get(cst.Call) in (SKIP, None)
    assert any(v is SKIP for v in _StatementVisitor.__dict__["_fwport_scan"].values())


def test_type_test_answers_as_isinstance_for_every_libcst_node_type():
    """hooks.TypeTest stands for isinstance against libcst's (ABC) node classes in the walks; the walks test
    libcst's concrete classes by identity, which holds only while none of them has a subclass."""
    from fwport.core.bindings import _IS_COMPREHENSION, _IS_EXPRESSION
    from fwport.core.hooks import TypeTest
    from fwport.core.names import IS_SKIPPABLE, SKIPPABLE

    node_types = [c for c in vars(cst).values() if isinstance(c, type) and issubclass(c, cst.CSTNode)]
    tests = [(TypeTest(cst.BaseExpression), (cst.BaseExpression,)), (IS_SKIPPABLE, SKIPPABLE),
             (_IS_EXPRESSION, (cst.BaseExpression,)),
             (_IS_COMPREHENSION, (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)),
             (TypeTest(cst.BaseCompoundStatement, cst.Else), (cst.BaseCompoundStatement, cst.Else))]
    nodes: list[cst.CSTNode] = []
    todo = [cst.parse_module(t) for t in (EXTRA, "x = [a for a in b]\nif c:\n    pass\nelse:\n    d(*e)\n")]
    while todo:
        n = todo.pop()
        nodes.append(n)
        todo.extend(n.children)
    assert len({type(n) for n in nodes}) > 20
    for test, classes in tests:
        for t in node_types + [tuple, list, type(None), cst.MaybeSentinel]:
            assert test[t] == issubclass(t, classes), (t, classes)
        for n in nodes:
            assert test[n.__class__] == isinstance(n, classes)
    for name in ("Attribute", "Name", "Comma", "Colon", "Semicolon", "AssignEqual", "LeftParen", "RightParen",
                 "ParamSlash", "If", "Param", "ParamStar", "ImportStar", "Tuple", "List", "StarredElement", "Comment",
                 "SimpleStatementLine", "SimpleStatementSuite", "Import", "ImportFrom", "IndentedBlock"):
        assert getattr(cst, name).__subclasses__() == [], name
    assert cst.FlattenSentinel.__subclasses__() == []


def test_buffer_shapes_assigned_names_are_what_libcsts_visit_collects():
    """torch2jax batch._assigned_names walks with ``scan`` (libcst's ``node.visit`` rebuilt every node it passed, ~8%
    of a torch2jax fixture's time): the same names as that visit, for every statement of the torch2jax fixtures and
    of made ones (loop targets, walrus, augmented and annotated assignments, tuple targets)."""
    from fwport.packs.torch2jax.batch import _AssignedNames, _assigned_names

    made = "for i, (a, b) in z:\n    c += 1\n    d: int = 2\n    if (e := f(g)):\n        h = k, m = 1, 2\n"
    texts = [made] + [p.read_text(encoding="utf-8") for p in sorted((ROOT / "fixtures" / "torch2jax").glob("*/model.py"))]
    checked = 0
    for text in texts:
        for stmt in find_all(cst.parse_module(text), cst.SimpleStatementLine) + \
                find_all(cst.parse_module(text), cst.For) + find_all(cst.parse_module(text), cst.If):
            v = _AssignedNames()
            stmt.visit(v)
            assert _assigned_names(stmt) == v.out
            checked += bool(v.out)
    assert checked > 100
    assert _assigned_names(cst.parse_statement(made)) == {"i", "a", "b", "c", "d", "e", "h", "k", "m"}
