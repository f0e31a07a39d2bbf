"""torch2jax: a statement that only moves a name to a device (``D = D.to(device)``, ``x = x.cuda()``) is removed
rather than left as the self-assignment ``D = D`` (JAX places arrays itself): at module level and in functions, its
comments and blank lines kept for the statement that follows (at the block's end when none follows), ``pass`` where
the block would be empty."""
from __future__ import annotations

import ast

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

SRC = '''import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
D = nn.Linear(3, 4)

# move it
D = D.to(device)
x = torch.zeros(3)
x = x.cuda()


def f(model, device):
    # to the device
    model = model.to(device)
    return model


def g(model):
    model = model.cuda()


def h(x, n):
    if n:
        # only a move
        x = x.to(device)
    y = x + 1
    # the last statement
    y = y.cuda()
'''


def test_device_moves_of_a_name_are_removed_with_their_comments_kept():
    r = translate_source(SRC, "x.py", pack="torch2jax")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    text = r.output
    ast.parse(text)
    for gone in ("D = D\n", "x = x\n", "model = model\n", "y = y\n", ".to(", ".cuda("):
        assert gone not in text, text
    assert "D = eqx.nn.Linear(3, 4, key=" in text and "\n# move it\nx = jnp.zeros(3)\n" in text, text
    assert "def f(model, device):\n    # to the device\n    return model\n" in text, text
    assert "def g(model):\n    pass\n" in text, text
    assert "    if n:\n        # only a move\n        pass\n    y = x + 1\n    # the last statement\n" in text, text


def test_a_self_assignment_of_another_form_is_kept():
    # `x = x.to(torch.float64)` is a cast, not a move: it stays an assignment
    r = translate_source("import torch\nx = torch.zeros(3)\nx = x.to(torch.float64)\n", "x.py", pack="torch2jax")
    assert "\nx = x.astype(jnp.float64)\n" in r.output, r.output
