"""Constructs of real PyTorch code that torch2jax translated without an error into something that does not compute
the same thing (or that fails when run): each is now exact, checked against PyTorch, or an error finding."""
from __future__ import annotations

import pytest

from helpers import needs, t2j
from runners import verify_model


def errors(r):
    return [f for f in r.findings if f.severity.value == "error"]


# --- (c) a ModuleList of BatchNorm layers: eqx.nn.BatchNorm takes and returns a state, which nothing threads ----

BN_LISTS = {
    "comprehension": "self.bns = nn.ModuleList([nn.BatchNorm1d(4) for _ in range(3)])",
    "appended": "self.bns = nn.ModuleList()\n        for _ in range(3):\n            self.bns.append(nn.BatchNorm1d(4))",
    "local list": "bns = []\n        for _ in range(3):\n            bns.append(nn.BatchNorm1d(4))\n"
                  "        self.bns = nn.ModuleList(bns)",
    "blocks keeping one": "self.bns = nn.ModuleList([Block() for _ in range(3)])",
}


@pytest.mark.parametrize("build", sorted(BN_LISTS))
def test_a_module_list_of_batch_norms_is_an_error_however_it_is_built(build):
    """Each member's call would need the state (`bn(x, state)` → `(y, state)`): left as `bn(x)` it failed when run
    (a missing argument), with no finding."""
    src = ("import torch\nimport torch.nn as nn\n\n\nclass Block(nn.Module):\n    def __init__(self):\n"
           "        super().__init__()\n        self.bn = nn.BatchNorm1d(4)\n\n    def forward(self, x):\n"
           "        return self.bn(x)\n\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           f"        {BN_LISTS[build]}\n\n    def forward(self, x):\n        for bn in self.bns:\n"
           "            x = torch.relu(bn(x))\n        return x\n")
    r = t2j(src)
    errs = errors(r)
    assert [(f.code, f.line) for f in errs] == [("unsupported-construct", 14)], errs
    assert "ModuleList holding BatchNorm" in errs[0].message
    assert "# fwport: unsupported-construct: Net: a ModuleList holding BatchNorm" in r.output


def test_layers_appended_to_a_list_an_nn_sequential_takes_still_thread_the_state():
    """`layers.append(nn.BatchNorm1d(4))` then `self.seq = nn.Sequential(*layers)`: eqx.nn.Sequential threads the
    state through its members, so this one is translated (not refused by the rule above)."""
    r = t2j("import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        layers = []\n        for _ in range(2):\n"
            "            layers.append(nn.Linear(4, 4))\n            layers.append(nn.BatchNorm1d(4))\n"
            "        self.seq = nn.Sequential(*layers)\n\n    def forward(self, x):\n        return self.seq(x)\n")
    assert errors(r) == []
    assert "    def __call__(self, x, state):\n        return self.seq(x, state)\n" in r.output
