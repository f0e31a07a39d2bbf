"""torch2jax's ``modules._Derived`` (which names of a module-level function carry its input, for
``_function_dims``) read each expression with libcst's ``node.children``, which rebuilds and validates the node per
call (a tenth of a torch2jax fixture's time); it reads the names of each binding's value once now
(``_Derived.reads``) and intersects sets. The answers must not change: each test compares with the walk as it was,
kept here as the reference."""
from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from fwport.core.names import find_all
from fwport.core.parse import parse_module
from fwport.packs.torch2jax.passes.modules import _Derived

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted((ROOT / "fixtures" / "torch2jax").glob("*/model.py"))


def _mentions(node: cst.CSTNode, names: set[str]) -> bool:
    """_Derived.mentions as it was (libcst's children)."""
    if isinstance(node, cst.Name):
        return node.value in names
    if isinstance(node, cst.Attribute):
        return node.attr.value not in _Derived.SIZES and _mentions(node.value, names)
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute) and node.value.attr.value == "shape":
        return any(_mentions(e, names) for e in node.slice)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
            and (node.func.attr.value in _Derived.SIZE_CALLS or node.func.attr.value == "size" and node.args):
        return any(_mentions(a, names) for a in node.args)
    return any(_mentions(c, names) for c in node.children)


def _names(fn: cst.FunctionDef, roots: set[str]) -> set[str]:
    """_Derived.names as it was."""
    names = set(roots)
    binds = [([t.target for t in a.targets], a.value) for a in find_all(fn.body, cst.Assign)]
    binds += [([a.target], a.value) for a in (*find_all(fn.body, cst.AugAssign), *find_all(fn.body, cst.AnnAssign))
              if a.value is not None]
    binds += [([a.target], a.iter) for a in (*find_all(fn.body, cst.For), *find_all(fn.body, cst.CompFor))]
    binds += [([a.target], a.value) for a in find_all(fn.body, cst.NamedExpr)]
    binds += [([a.asname.name], a.item) for a in find_all(fn.body, cst.WithItem) if a.asname is not None]
    changed = True
    while changed:
        changed = False
        for targets, value in binds:
            if _mentions(value, names):
                new = {n.value for t in targets for n in find_all(t, cst.Name)} - names
                if new:
                    names |= new
                    changed = True
    return names


def _params(fn: cst.FunctionDef) -> list[str]:
    p = fn.params
    return [q.name.value for q in (*p.posonly_params, *p.params, *p.kwonly_params)] + \
        [q.name.value for q in (p.star_arg, p.star_kwarg) if isinstance(q, cst.Param)]


EXTRA = textwrap.dedent("""\
    def drop_path(x, p: float = 0.0, training: bool = False):
        keep = 1 - p
        shape = (x.shape[0],) + (1,) * (x.ndim - 1)
        mask = x.new_empty(shape).bernoulli_(keep)
        n = x.size(0) + x.size()[1] + x.dim()
        y = x.device
        with torch.no_grad() as g:
            z = (w := x.sum(1)) * g
        for a, b in zip(x, mask):
            total: float = a + b
            total += [q for q in x.shape]
        return x * mask / keep, y, z, w, total, n
    """)


def _functions():
    for path in FIXTURES:
        for fn in find_all(parse_module(path.read_text(encoding="utf-8")), cst.FunctionDef):
            yield path.parent.name, fn
    for fn in find_all(parse_module(EXTRA), cst.FunctionDef):
        yield "extra", fn


def test_names_and_reach_as_before():
    checked = 0
    for where, fn in _functions():
        params = _params(fn)
        reach = _Derived.reach(fn)
        nested = bool(find_all(fn.body, cst.FunctionDef) or find_all(fn.body, cst.Lambda)
                      or find_all(fn.body, cst.ClassDef))
        derived = {q: _names(fn, {q}) for q in params}
        for q in params:
            assert _Derived.names(fn, {q}) == derived[q], (where, fn.name.value, q)
        for kind in (cst.Name, cst.Attribute, cst.Subscript, cst.Call, cst.BinaryOperation, cst.Tuple):
            for node in find_all(fn.body, kind):
                want = None if nested else frozenset(q for q in params if _mentions(node, derived[q]))
                assert reach(node) == want, (where, fn.name.value, cst.Module([]).code_for_node(node))
                checked += 1
    assert checked > 2000


@pytest.mark.parametrize("text, names", [
    ("x.shape[0] + y", {"y"}), ("x.shape", {"x"}), ("x.size(0) * z.numel()", set()), ("x.size()", {"x"}),
    ("x.device.type", set()), ("f(a, b=c)[d].e", {"f", "a", "b", "c", "d"}), ("[u for u in v]", {"u", "v"}),
])
def test_reads(text, names):
    node = cst.parse_expression(text)
    assert _Derived.reads(node) == names
    for n in {"a", "c", "f", "u", "v", "x", "y", "z", "d", "e", "b"}:
        assert _mentions(node, {n}) == (n in names)


def test_no_libcst_children_property_in_fwport():
    """libcst's ``node.children`` rebuilds and validates the node at every read (what made _Derived slow):
    fwport reads children from the fields (names.children). Any ``.children`` attribute read in fwport/ other than
    a call (``model.children()`` in a message) or a mention in a docstring or comment is found here."""
    import io
    import tokenize
    found = []
    for path in sorted((ROOT / "fwport").rglob("*.py")):
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
                  if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)]
        for a, b, c in zip(tokens, tokens[1:], tokens[2:] + [None]):
            if a.string == "." and b.type == tokenize.NAME and b.string == "children" and (c is None or c.string != "("):
                found.append(f"{path.relative_to(ROOT)}:{b.start[0]}")
    assert not found, found
