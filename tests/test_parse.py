"""fwport.core.parse: libcst's parsers with node validation off while they run give the same trees
and the same syntax errors, and leave validation on for nodes built afterwards."""
from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from fwport.core.parse import parse_expression, parse_module, parse_statement

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted(ROOT.glob("fixtures/*/*/model.py")) + sorted(ROOT.glob("fixtures/*/*/expected.py"))


def test_same_trees_as_libcst_on_every_fixture():
    assert FILES
    for path in FILES:
        text = path.read_text(encoding="utf-8")
        ours, theirs = parse_module(text), cst.parse_module(text)
        assert ours.deep_equals(theirs), path
        assert ours.code == text, path


def test_snippets_and_syntax_errors():
    assert parse_expression("f(a, *b, k=1)[::2]").deep_equals(cst.parse_expression("f(a, *b, k=1)[::2]"))
    assert parse_statement("x: int = not y\n").deep_equals(cst.parse_statement("x: int = not y\n"))
    for bad in ("def f(:\n", "x = = 1\n", "f(a=1, b)\n"):
        with pytest.raises(cst.ParserSyntaxError) as ours:
            parse_module(bad)
        with pytest.raises(cst.ParserSyntaxError) as theirs:
            cst.parse_module(bad)
        assert (ours.value.raw_line, ours.value.raw_column, ours.value.message) == \
            (theirs.value.raw_line, theirs.value.raw_column, theirs.value.message)


def test_validation_is_back_on_after_a_parse_and_after_a_syntax_error():
    def invalid():  # `not` glued to its operand: libcst's validation refuses it
        return cst.UnaryOperation(cst.Not(whitespace_after=cst.SimpleWhitespace("")), cst.Name("x"))

    parse_module("x = 1\n")
    with pytest.raises(cst.CSTValidationError):
        invalid()
    with pytest.raises(cst.ParserSyntaxError):
        parse_module("x = = 1\n")
    with pytest.raises(cst.CSTValidationError):
        invalid()


def test_literal_value_reads_number_tokens_as_python_does_without_a_parse():
    """bind.literal_value reads Integer / Float tokens with int(text, 0) / float(text): the values (and types)
    ast.literal_eval gives, digit limit included (past it, literal_eval decides)."""
    import ast
    import random

    from fwport.core.bind import NOT_LITERAL, literal_value

    rng = random.Random(0)
    texts = ["0", "00", "0_0", "7", "1_000", "0x1F", "0o17", "0b101", "0XdeadBEEF", "1.5", "1e-3", "1_0.5e1_0",
             ".5", "5.", "1E500", "1e-400", "0e0", "3.141592653589793238", "1" * 5000]
    texts += [repr(rng.random() * 10 ** rng.randint(-30, 30)).replace("e+", "e") for _ in range(500)]
    texts += [str(rng.randint(0, 10 ** rng.randint(1, 40))) for _ in range(500)]
    for text in texts:
        try:
            expected = ast.literal_eval(text)
        except SyntaxError:  # (past the digit limit)
            expected = NOT_LITERAL
        got = literal_value(cst.parse_expression(text))
        assert got == expected and type(got) is type(expected), text[:40]


def test_literal_value_reads_plain_string_tokens_as_python_does_without_a_parse():
    """bind.literal_value gives a string token with no prefix and no backslash the text between its quotes:
    the value ast.literal_eval gives, for every kind of quote; prefixed strings, escapes and implicit
    concatenations still go to literal_eval (same values)."""
    import ast
    import random
    import warnings

    from fwport.core.bind import _plain_string, literal_value

    rng = random.Random(0)
    texts = ['""', "''", '""""""', "''''''", '"a"', "'a'", "'\"'", '"\'"', '"""a"b"""', "'''a\nb'''",
             '"""\n"""', "'''x''y'''", '"é ✓ 𝄞"', '"\\n"', "'\\\\'", "r'a\\d'", "b'abc'", "u'abc'",
             "R\"q\"", "'a' 'b'", '"tab\there"', "'#'"]
    alphabet = "ab \t\"'#é\\n{}"
    for _ in range(2000):
        body = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
        for quote in ('"', "'", '"""', "'''"):
            text = quote + body + quote
            try:
                if not isinstance(cst.parse_expression(text), cst.SimpleString):
                    continue
            except Exception:  # (not one token: a syntax error, or libcst refusing the concatenation)
                continue
            texts.append(text)
    plain = 0
    for text in texts:
        with warnings.catch_warnings():  # (random bodies hold invalid escapes: a DeprecationWarning each, both ways)
            warnings.simplefilter("ignore", DeprecationWarning)
            expected = ast.literal_eval(text)
            got = literal_value(cst.parse_expression(text))
        assert got == expected and type(got) is type(expected), text
        plain += _plain_string(text) is not None
    assert plain > 1000  # (the fast path was taken, not only literal_eval)


def _fields(node):
    import dataclasses
    return {f.name: getattr(node, f.name) for f in dataclasses.fields(node)}


def test_with_changes_is_libcsts_on_every_node_of_the_fixtures():
    """parse.with_changes (installed while translate_source runs) gives what libcst's gives: the same class, every
    field the very object (the change's or the node's), for every node of every fixture, with no change and with
    each child field changed; the same errors for a change that fails validation and for an unknown name."""
    from fwport.core.names import children
    from fwport.core.parse import with_changes
    libcsts = cst.CSTNode.__dict__["with_changes"]
    count = 0
    for path in FILES[::6]:
        todo = [cst.parse_module(path.read_text(encoding="utf-8"))]
        while todo:
            node = todo.pop()
            todo.extend(children(node))
            for changes in [{}] + [{k: v} for k, v in _fields(node).items() if isinstance(v, (cst.CSTNode, tuple))]:
                ours, theirs = with_changes(node, **changes), libcsts(node, **changes)
                assert type(ours) is type(theirs) and ours is not node
                assert all(a is b for a, b in zip(_fields(ours).values(), _fields(theirs).values())), path
                assert _fields(ours).keys() == _fields(theirs).keys()
                count += 1
    assert count > 10_000
    call = cst.parse_expression("f(a, b)")
    bad = {"args": (cst.Arg(cst.Name("a"), keyword=cst.Name("k")), cst.Arg(cst.Name("b")))}
    for fn in (with_changes, libcsts):
        with pytest.raises(cst.CSTValidationError):
            fn(call, **bad)
        with pytest.raises(TypeError):
            fn(call, nonsense=1)
        with pytest.raises(cst.CSTValidationError):
            fn(cst.parse_expression("not x"), operator=cst.Not(whitespace_after=cst.SimpleWhitespace("")))


def test_translate_source_installs_with_changes_meanwhile_only():
    from fwport.core import parse
    from fwport.core.pipeline import translate_source
    libcsts = cst.CSTNode.__dict__["with_changes"]
    seen = []
    import fwport.core.pipeline as pipeline
    inner = pipeline._translate_source

    def spy(*args, **kwargs):
        seen.append(cst.CSTNode.__dict__["with_changes"])
        return inner(*args, **kwargs)
    pipeline._translate_source = spy
    try:
        translate_source("import torch\nx = torch.zeros(3)\n", "t.py", "torch2jax")
    finally:
        pipeline._translate_source = inner
    assert seen == [parse.with_changes]
    assert cst.CSTNode.__dict__["with_changes"] is libcsts


def test_fast_changes_overlapping_callers_put_back_only_at_the_last():
    """Overlapping translations (threads, or one inside another) install parse.with_changes once; libcst's is put
    back when the last one leaves, not when the first does (which left the others' swap in place for good before:
    each put back what it found), and an exception on the way out puts it back too."""
    import threading

    from fwport.core import parse
    libcsts = cst.CSTNode.__dict__["with_changes"]
    outer, inner = parse.fast_changes(), parse.fast_changes()
    outer.__enter__()
    inner.__enter__()  # entered second, found parse.with_changes installed
    assert cst.CSTNode.__dict__["with_changes"] is parse.with_changes
    outer.__exit__(None, None, None)  # the first to enter leaves first: the second still runs
    assert cst.CSTNode.__dict__["with_changes"] is parse.with_changes
    inner.__exit__(None, None, None)
    assert cst.CSTNode.__dict__["with_changes"] is libcsts

    with pytest.raises(ValueError):
        with parse.fast_changes():
            raise ValueError
    assert cst.CSTNode.__dict__["with_changes"] is libcsts

    # threads translating at once: each sees parse.with_changes throughout, libcst's is back after all of them
    from fwport.core.pipeline import translate_source
    text = "import torch\nx = torch.zeros(3)\ny = torch.sum(x, dim=0)\n"
    alone = translate_source(text, "t.py", "torch2jax").output
    start, seen, outputs, errors = threading.Barrier(4), [], [], []

    def work():
        try:
            start.wait()
            for _ in range(5):
                with parse.fast_changes():
                    seen.append(cst.CSTNode.__dict__["with_changes"])
                    outputs.append(translate_source(text, "t.py", "torch2jax").output)
        except Exception as e:  # pragma: no cover (said below)
            errors.append(e)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert seen == [parse.with_changes] * 20
    assert outputs == [alone] * 20
    assert cst.CSTNode.__dict__["with_changes"] is libcsts
    assert parse._swap == {"depth": 0, "previous": None}
