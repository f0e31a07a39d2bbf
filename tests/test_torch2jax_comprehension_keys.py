"""Modules built by a comprehension over a sequence in ``__init__`` (TextCNN's ``[nn.Conv2d(1, n, (size, e)) for
size in filter_sizes]``, ``zip(ins, outs)``, ``enumerate(sizes)``): each element gets a split of the key
(``for size, subkey in zip(filter_sizes, jax.random.split(key1, len(filter_sizes)))``), as ``range(n)`` did;
a generator given to nn.ModuleList becomes a list
(modules.py, _comp_count). Checked by ``fwport verify`` (forward and gradients) against PyTorch; an iterable
with no len (a call) keeps the error."""
from __future__ import annotations

import pytest

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from helpers import error_texts as errors, needs

PACK = load_pack("torch2jax")

SRC = """import torch
import torch.nn as nn


class M(nn.Module):
    def __init__(self, ins=(4, 5), outs=(5, 6), sizes=[1, 2, 3]):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(n, k) for n, k in zip(ins, outs)])
        self.heads = nn.ModuleList([nn.Linear(6, i + 1) for i, _ in enumerate(sizes)])
        self.tails = nn.ModuleList([nn.Linear(6, s) for s in sizes])
        self.mids = nn.ModuleList(nn.Linear(6, 6) for _ in sizes[1:])  # a generator: a list of Equinox layers

    def forward(self, y):
        for layer in self.layers:
            y = torch.relu(layer(y))
        for mid in self.mids:
            y = torch.tanh(mid(y))
        return torch.cat([h(y) for h in self.heads] + [t(y) for t in self.tails], dim=-1)
"""


def test_a_comprehension_over_a_sequence_splits_a_key_per_element():
    r = translate_source(SRC, "m.py", PACK)
    assert not errors(r), errors(r)
    out = r.output
    assert ("[eqx.nn.Linear(n, k, key=subkey) for (n, k), subkey in zip(zip(ins, outs), "
            "jax.random.split(key1, min(len(ins), len(outs))))]") in out, out
    assert ("[eqx.nn.Linear(6, i + 1, key=subkey) for (i, _), subkey in zip(enumerate(sizes), "
            "jax.random.split(key2, len(sizes)))]") in out, out
    assert "[eqx.nn.Linear(6, s, key=subkey) for s, subkey in zip(sizes, jax.random.split(key3, len(sizes)))]" in out
    assert "self.mids = [eqx.nn.Linear(6, 6, key=subkey) for _, subkey in zip(sizes[1:], " \
           "jax.random.split(key4, len(sizes[1:])))]" in out, out


@pytest.mark.parametrize("before, it", [("", "zip(ins, reversed(outs))"),
                                       ("pairs = zip(ins, outs)\n        ", "pairs")])  # (cct's n_filter_list_pairs)
def test_a_comprehension_over_an_iterable_without_len_keeps_the_error(before, it):
    src = SRC.replace("self.layers = nn.ModuleList([nn.Linear(n, k) for n, k in zip(ins, outs)])",
                      f"{before}self.layers = nn.ModuleList([nn.Linear(n, k) for n, k in {it}])")
    r = translate_source(src, "m.py", PACK)
    line = 8 + before.count("\n")
    assert any(e.startswith(f"L{line} ") and "a comprehension in __init__()" in e for e in errors(r)), errors(r)


@needs("torch", "equinox")
def test_modules_built_by_comprehensions_over_sequences_compute_what_pytorch_computes(session, tmp_path):
    from fwport.verify.run import Options, verify
    r = translate_source(SRC, "m.py", PACK)
    (tmp_path / "m.py").write_text(SRC)
    (tmp_path / "m_jax.py").write_text(r.output)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "m_jax.py"), "M()", inputs=["float32[3,4]"],
                          checks=("forward", "grad"), device="cpu", direction="torch2jax"), session)
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging") or cert
