"""sequential.finish removes the lines the brackets of ``Sequential([...])`` stood on with ``_drop_marked``, a
copy of each marked statement that edits its whitespace alone. It must give what libcst's ``visit`` of a
transformer doing that gave (it did before speedF): the same code, and every node a new object (later finishing
steps key on node identity, and libcst's visit gave them none of the input's)."""
from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

import fwport.packs.tf2torch.passes.sequential as sequential
from fwport.core.names import children
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [
    "import keras\nm = keras.Sequential([\n    keras.layers.Dense(4),  # a\n    keras.layers.ReLU(),\n])\n",
    "import keras\nm = keras.Sequential(\n    [\n        keras.layers.Dense(4),\n    ]\n)\n",
    "import keras\n\ndef f():\n    return keras.Sequential(\n        [\n            keras.layers.Dense(4),\n"
    "            keras.layers.Dense(2),\n        ]\n    )\n",
]


class _LibcstDrop(cst.CSTTransformer):
    """The transformer sequential.finish ran with libcst's visit before."""

    def leave_ParenthesizedWhitespace(self, original_node, updated_node):
        lines = [ln for ln in updated_node.empty_lines if ln.comment is None or ln.comment.value != sequential.LINE_MARK]
        return updated_node.with_changes(empty_lines=lines) if len(lines) != len(updated_node.empty_lines) \
            else updated_node


def _nodes(node):
    out, todo = [], [node]
    while todo:
        n = todo.pop()
        out.append(n)
        todo.extend(children(n))
    return out


def test_drop_marked_is_libcsts_visit(monkeypatch):
    seen = []
    real = sequential._drop_marked

    def checked(statement):  # (its own calls on the parts of the statement go to the real one)
        monkeypatch.setattr(sequential, "_drop_marked", real)
        out = real(statement)
        monkeypatch.setattr(sequential, "_drop_marked", checked)
        seen.append((statement, out))
        return out

    monkeypatch.setattr(sequential, "_drop_marked", checked)
    pack = load_pack("tf2torch")
    for p in sorted((ROOT / "fixtures" / "tf2torch").glob("*/model.py")):
        translate_source(p.read_text(), str(p), pack)
    for src in SOURCES:
        translate_source(src, "m.py", pack)
    monkeypatch.setattr(sequential, "_drop_marked", real)
    assert len(seen) >= 4, "too few marked statements: the comparison proves little"
    empty = cst.Module([])
    marks = 0
    for statement, out in seen:
        before = empty.code_for_node(statement)
        marks += before.count(sequential.LINE_MARK)
        assert empty.code_for_node(out) == empty.code_for_node(statement.visit(_LibcstDrop()))
        assert sequential.LINE_MARK not in empty.code_for_node(out)
        assert not {id(n) for n in _nodes(statement)} & {id(n) for n in _nodes(out)}  # every node new
    assert marks >= len(seen)


@pytest.mark.parametrize("src", SOURCES)
def test_sequential_output_keeps_no_mark(src):
    out = translate_source(src, "m.py", load_pack("tf2torch")).output
    assert sequential.LINE_MARK not in out and "nn.Sequential(" in out
