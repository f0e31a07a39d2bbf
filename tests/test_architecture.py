"""The shape of the package: the core knows no framework and imports no pack; a new direction is a
pack registered by name, with no edit inside the core."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import fwport.packs
from fwport.core import direction as direction_mod
from fwport.core.direction import Direction, Spelling, get_direction
from fwport.core.names import SourceNames
from fwport.core.pipeline import translate_source
from fwport.core.result import Status
from fwport.core.rule import load_pack
from fwport.core.transform import Transforms

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "fwport" / "core"


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):  # function-level (lazy) imports count too
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return out


def test_no_module_of_the_core_imports_a_pack_or_a_framework():
    offenders = []
    for path in sorted(CORE.glob("*.py")):
        for name in _imports(path):
            if name.startswith(("fwport.packs", "tensorflow", "keras", "tf_keras", "torch", "jax", "equinox")):
                offenders.append(f"{path.name}: {name}")
    assert offenders == []


def test_the_core_imports_without_any_pack():
    # a fresh interpreter where importing any pack fails: every core module still imports
    modules = sorted(f"fwport.core.{p.stem}" for p in CORE.glob("*.py") if p.stem != "__init__")
    code = textwrap.dedent(f"""
        import importlib, sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "fwport.packs" or name.startswith("fwport.packs."):
                    raise ImportError("packs are blocked: " + name)

        sys.meta_path.insert(0, Block())
        for m in {modules!r}:
            importlib.import_module(m)
        print(sorted(n for n in sys.modules if n.startswith("fwport.packs")))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    assert len(modules) >= 15


def test_the_core_has_no_import_cycle_with_the_pack():
    # the pack imports the core; nothing the core imports at module level comes back to the pack
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / "fwport").rglob("*.py")):
        mod = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        deps = set()
        for node in tree.body:  # module level only: lazy imports inside functions are not cycles
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("fwport"):
                deps.add(node.module)
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("fwport")}
        graph[mod] = deps
    core = {m for m in graph if m.startswith("fwport.core")}
    reach: set[str] = set()
    todo = list(core)
    while todo:
        m = todo.pop()
        for d in graph.get(m, ()):
            if d not in reach:
                reach.add(d)
                todo.append(d)
    assert not {m for m in reach if m.startswith("fwport.packs")}


def test_every_registered_pack_has_its_rules_folder_and_a_direction():
    for name, module in fwport.packs.PACKS.items():
        d = get_direction(name)
        assert d.name == name and module == f"fwport.packs.{name}"
        assert (ROOT / "rules" / name).is_dir()
        assert load_pack(name).rules


# --- a new direction, added from outside the core -----------------------------------------------------
TOY_RULE = '''
summary = "toyfw.twice(x) -> math.prod((x, 2))"
kind = "function"

[match]
names = ["toyfw.ops.twice"]
signature = "x, name=None"

[emit]
target = "operator.mul"
positional = ["a", "b"]
transform = "twice"

[args]
x = { rename = "a" }
name = { drop = "toy op names mean nothing" }
'''


def test_a_new_direction_needs_no_edit_in_the_core(tmp_path, monkeypatch):
    transforms = Transforms("toy2py")

    @transforms.call("twice")
    def twice(m, ctx):
        import libcst as cst

        ctx.spell_text("operator.mul")
        return cst.parse_expression(f"operator.mul({cst.Module([]).code_for_node(m.kwargs['a'])}, 2)")

    toy = Direction(
        name="toy2py", summary="a toy framework to plain Python",
        source=SourceNames(("toyfw",), (("toyfw.math.", "toyfw.ops."),)),
        mentions=re.compile(r"\btoyfw\b"),
        spellings=(Spelling("operator.", "operator.", "import operator"),),
        import_order=("import operator",),
        codes={"toy-note": "a code only the toy pack has"},
        code_advice={"toy-note": ("info", "nothing")},
        transforms=transforms,
    )
    module = type(sys)("toy_pack_for_test")
    module.DIRECTION = toy
    monkeypatch.setitem(sys.modules, "toy_pack_for_test", module)
    monkeypatch.setitem(fwport.packs.PACKS, "toy2py", "toy_pack_for_test")
    direction_mod.get_direction.cache_clear()
    rules = tmp_path / "rules" / "toy2py"
    rules.mkdir(parents=True)
    (rules / "twice.toml").write_text(TOY_RULE)
    try:
        pack = load_pack("toy2py", (str(tmp_path / "rules"),))
        src = "import toyfw as t\nfrom toyfw import math as M\n\ny = t.ops.twice(x, name='a') + M.twice(3)\n"
        r = translate_source(src, "toy.py", pack)
        assert r.status is Status.CONVERTED
        assert r.output == "import operator\n\ny = operator.mul(x, 2) + operator.mul(3, 2)\n"
        assert [f.code for f in r.findings] == ["dropped-argument"]
        assert translate_source("import os\n", "x.py", pack).status is Status.UNCHANGED
        # the command line has a command for it, with the shared options
        from click.testing import CliRunner

        from fwport.core.cli import main

        monkeypatch.setitem(fwport.packs.HELP, "toy2py", "Translate toyfw to Python.")
        f = tmp_path / "toy.py"
        f.write_text(src)
        res = CliRunner().invoke(main, ["toy2py", str(f), "--rules", str(tmp_path / "rules")])
        assert res.exit_code == 0, res.output
        assert res.stdout == "import operator\n\ny = operator.mul(x, 2) + operator.mul(3, 2)\n"
        assert re.search(r"\btoy2py\s+Translate toyfw to Python\.", CliRunner().invoke(main, ["--help"]).output)
    finally:
        direction_mod.get_direction.cache_clear()


#: files that still define libcst visitor classes inside functions (each to be hoisted: a class object, and the
#: hook tables fwport keeps on it, made again at every call, cost more than most of the walks they do)
_NESTED_VISITORS_LEFT = {
    "fwport/packs/tf2torch/passes/data_format.py", "fwport/packs/tf2torch/passes/regularizers.py",
    "fwport/packs/tf2torch/passes/subclass.py", "fwport/packs/tf2torch/passes/training.py", "fwport/packs/torch2jax/ops.py",
    "fwport/packs/torch2jax/passes/modules.py", "fwport/packs/torch2jax/passes/training.py",
}


def test_visitor_classes_are_defined_once_at_module_level():
    """A ``cst.CSTVisitor`` / ``cst.CSTTransformer`` subclass written inside a function is a new class at each call:
    Python builds it (an ABC: costly), and names.scan / rewrite build its hook tables again. State goes through
    ``__init__`` instead. Only the files listed above still have such classes."""
    nested: dict[str, list[str]] = {}
    for path in sorted((ROOT / "fwport").rglob("*.py")):
        def walk(node, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.ClassDef) and in_function \
                        and any(re.search(r"\bCST(Visitor|Transformer)\b", ast.unparse(b)) for b in child.bases):
                    nested.setdefault(str(path.relative_to(ROOT)), []).append(f"{child.name} (line {child.lineno})")
                walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))
        walk(ast.parse(path.read_text(encoding="utf-8")), False)
    new = {f: classes for f, classes in nested.items() if f not in _NESTED_VISITORS_LEFT}
    assert not new, f"visitor classes defined inside functions (hoist them to module level): {new}"
    assert set(nested) == _NESTED_VISITORS_LEFT, f"no nested visitor left in {_NESTED_VISITORS_LEFT - set(nested)}: " \
                                                 "take it off the list"
