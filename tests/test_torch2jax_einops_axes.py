"""torch2jax: einops patterns naming PyTorch's batch axis anywhere (task t2jein). Inside a per-example module the
name standing at the tensor's batch position goes from both sides of the pattern (``'b n d -> n b d'`` → ``'n d ->
n d'``), with a size given for it, and the result holds the batch axis where the name stood on the right, which
what follows reads (``reduce(y, 'n b d -> b d', 'mean')`` → ``'n d -> d'``). A pattern that groups the batch axis
with others or reduces it away moves examples: an error. Each translation is verified against PyTorch."""
from __future__ import annotations

import pytest

from helpers import error_findings as errors, needs, t2j
from runners import verify_model

needs_frameworks = needs("torch", "jax", "equinox", "einops")


SWAP = '''
import torch
import torch.nn as nn
from einops import rearrange, reduce


class Net(nn.Module):
    def __init__(self, dim=6):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, 3)

    def forward(self, x):
        batch = x.shape[0]
        y = rearrange(x, 'b (n d) -> n b d', b=batch, n=4)
        y = torch.tanh(self.proj(y))
        w = y.softmax(dim=0)
        z = reduce(y * w, 'n b d -> b d', 'sum')
        return self.head(z)
'''


def test_the_batch_name_goes_from_both_sides_wherever_it_stands():
    r = t2j(SWAP)
    assert errors(r) == [], r.findings
    assert "rearrange(x, '(n d) -> n d', n=4)" in r.output
    assert "reduce(y * w, 'n d -> d', 'sum')" in r.output
    assert "batch" not in r.output.split("def __call__")[1]  # its size went with the name
    # y holds the batch axis second in PyTorch: softmax over dim 0 (the tokens) stays dim 0 for one example
    assert "jax.nn.softmax(y, axis=0)" in r.output


@needs_frameworks
def test_the_batch_name_moved_inside_the_pattern_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, SWAP, "Net", ["float64[3,24]"])


REFUSED = {
    "grouped": ("rearrange(x, 'b n d -> (b n) d')", "groups it with other axes"),
    "reduced": ("reduce(x, 'b n d -> n d', 'mean')", "reduces it away"),
    "split": ("rearrange(x, '(b h) n -> b h n', h=2)", "reads the batch axis"),
}


@pytest.mark.parametrize("call, message", REFUSED.values(), ids=REFUSED.keys())
def test_a_pattern_moving_examples_is_an_error(call, message):
    src = f'''
import torch.nn as nn
from einops import rearrange, reduce


class Net(nn.Module):
    def forward(self, x):
        return {call}
'''
    r = t2j(src)
    found = [f for f in errors(r) if f.code == "batch-axis"]
    assert any(message in f.message for f in found), r.findings
