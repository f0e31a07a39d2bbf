"""Definitions written into an output (helpers, the fit loop) given as pieces: each piece is parsed once per
process, and the statements are those of the parse of the whole text, node for node."""
from __future__ import annotations

import itertools

import libcst as cst
import pytest

from fwport.core.imports import parsed_definitions
from fwport.packs.tf2torch.helpers import _MODULES, HELPERS as TF2TORCH_HELPERS
from fwport.packs.torch2jax.layers import HELPERS as TORCH2JAX_HELPERS


def spelled(template: str) -> str:
    """A tf2torch helper as written into a file importing torch, torch.nn as nn and torch.nn.functional as F."""
    for key, prefix in {"nn": "nn.", "torch": "torch.", "F": "F.", **{k: p for k, (p, _) in _MODULES.items()}}.items():
        template = template.replace("{" + key + "}", prefix)
    return template


def whole(pieces: list[str]) -> list[cst.BaseStatement]:
    """What the parse of the concatenation gives: its statements, two blank lines above the first."""
    body = list(cst.parse_module("".join(pieces).lstrip("\n")).body)
    body[0] = body[0].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
    return body


def same(pieces: list[str]) -> bool:
    got, want = parsed_definitions(tuple(pieces)), whole(pieces)
    return len(got) == len(want) and all(g.deep_equals(w) for g, w in zip(got, want))


@pytest.mark.parametrize("helpers", [TF2TORCH_HELPERS, TORCH2JAX_HELPERS], ids=["tf2torch", "torch2jax"])
def test_pieces_give_the_statements_of_the_whole_text(helpers):
    texts = [spelled(t) for t in helpers.values()]
    assert all(same([t]) for t in texts)
    for a, b in itertools.islice(itertools.permutations(texts, 2), 0, None, 101):  # a spread of the pairs
        assert same([a, b]), (a[:80], b[:80])
    assert same(texts[:40])


@pytest.mark.parametrize("pieces", [
    ["\n\nx = 1\n", "# a comment that belongs to the next definition\n\ny = 2\n"],
    ["def f():\n    return 1\n# trailing\n", "\n\ndef g():\n    return 2\n"],
    ["x = 1", "\n\ny = 2\n"],  # no final newline: the two texts parsed together
    ["def f():\n  return 1\n", "def g():\n    return 2\n"],  # different indentations
    ["\n\n", "# only a comment\n", "z = 3\n"],
    ["class A:\n    pass\n", "\n\n\n\nclass B(A):\n    pass\n"],
])
def test_boundaries_between_pieces(pieces):
    assert same(pieces)
    assert cst.Module(body=parsed_definitions(tuple(pieces))).code == cst.Module(body=whole(pieces)).code
