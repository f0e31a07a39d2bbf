"""torch2jax: a per-example module's gathers by the examples' numbers and its per-batch random draws (MAE, SimMIM).

``batch_range = torch.arange(B)[:, None]`` numbers the examples as a column; ``x[batch_range, idx]`` (idx (B, k))
takes, for each example i, the rows ``x[i][idx[i]]``: one example's gather is ``x[idx]``, and ``x[batch_range, idx] =
v`` is ``x = x.at[idx].set(v)``. The statement binding batch_range goes; another use of it stays an error.
``torch.rand(B, n)`` / ``torch.randn(B, n)`` draw B independent rows: one example's part is a draw of ``(n,)`` from
its own key (the caller's key split per example), a batched value (``r[:, :k]`` → ``r[:k]``). Gathers are verified
against PyTorch (``fwport verify``, forward and gradients); draws by their distribution (each example its own)."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import error_findings as errors, needs, t2j
from runners import both_sides, verify_model

needs_frameworks = needs("torch", "jax", "equinox")

GATHER = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, dim=6, keep=3):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)
        self.keep = keep

    def forward(self, x):
        batch, n, _ = x.shape
        order = self.fc(x).sum(dim=-1).argsort(dim=-1, descending=True)
        kept, dropped = order[:, :self.keep], order[:, self.keep:]
        batch_range = torch.arange(batch, device=x.device)[:, None]
        tokens = x[batch_range, kept]
        out = torch.zeros_like(x)
        out[batch_range, kept] = self.out(tokens)
        out[batch_range, dropped] = x[batch_range, dropped] * 2
        return out
'''


def test_a_gather_by_the_examples_numbers_is_one_examples_gather():
    r = t2j(GATHER)
    assert errors(r) == [], r.findings
    out = r.output
    assert "batch_range" not in out and "arange" not in out  # the statement goes
    assert "jnp.argsort(" in out and "descending=True" in out
    assert "tokens = x[kept]" in out
    assert "out = out.at[kept].set(jax.vmap(self.out)(tokens))" in out
    assert "out = out.at[dropped].set(x[dropped] * 2)" in out


@needs_frameworks
def test_gathers_by_the_examples_numbers_verify_against_pytorch(tmp_path):
    verify_model(tmp_path, GATHER, "Net", ["float64[4,7,6]"])


@pytest.mark.parametrize("column", ["torch.arange(batch).unsqueeze(1)", "torch.arange(batch).view(-1, 1)",
                                    "torch.arange(x.shape[0])[:, None]"])
def test_other_spellings_of_the_column_are_followed(column):
    r = t2j(GATHER.replace("torch.arange(batch, device=x.device)[:, None]", column))
    assert errors(r) == [], r.findings
    assert "tokens = x[kept]" in r.output


def _line(src: str, text: str) -> int:
    return next(i for i, line in enumerate(src.lstrip("\n").splitlines(), 1) if text in line)


def test_other_uses_of_the_examples_numbers_are_errors():
    # (a GRU held: no batched module, whose whole-batch forward would take the batch axis as PyTorch's)
    src = GATHER.replace("self.keep = keep", "self.keep = keep\n        self.rnn = nn.GRU(dim, dim, batch_first=True)")
    bad = src.replace("return out", "return out + batch_range")
    r = t2j(bad)
    assert [f.line for f in errors(r) if "numbers the examples" in f.message] == [_line(bad, "return out")], r.findings
    # an index of another rank than one example's vector of positions: PyTorch's column would not pair them
    bad = src.replace("tokens = x[batch_range, kept]", "tokens = x[batch_range, kept[:, None]]")
    r = t2j(bad)
    assert [f.line for f in errors(r) if "numbers the examples" in f.message] == [_line(bad, "tokens = x[")], \
        r.findings


DRAWS = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, keep=3):
        super().__init__()
        self.keep = keep

    def forward(self, x):
        batch, n, _ = x.shape
        noise = torch.randn(batch, n, 1, device=x.device)
        order = torch.rand(batch, n, device=x.device).argsort(dim=-1)
        batch_range = torch.arange(batch, device=x.device)[:, None]
        tokens = x[batch_range, order[:, :self.keep]]
        return tokens, noise
'''


def test_a_per_batch_draw_is_one_draw_per_example():
    r = t2j(DRAWS)
    assert errors(r) == [], r.findings
    assert "jax.random.normal(key1, (n, 1))" in r.output
    assert "jnp.argsort(jax.random.uniform(key2, n), axis=-1)" in r.output
    assert "tokens = x[order[:self.keep]]" in r.output
    assert any("one draw per example" in f.message for f in r.findings)


@needs_frameworks
def test_per_batch_draws_have_pytorchs_distribution_per_example(tmp_path):
    torch_out, jax_out = both_sides(tmp_path, DRAWS, """
    B, n, d = 2000, 6, 2
    x = np.arange(B * n * d, dtype=np.float64).reshape(B, n, d)
    if side == "torch":
        import torch
        torch.manual_seed(0)
        tokens, noise = ns["Net"]()(conv(x))
    else:
        import jax
        model = ns["Net"]()  # (no layer: no key)
        keys = jax.random.split(jax.random.key(1), B)
        tokens, noise = jax.vmap(lambda xi, k: model(xi, key=k))(conv(x), keys)
    tokens, noise = np.asarray(tokens), np.asarray(noise)
    pos = (tokens[..., 0] - x[:, :1, 0]) / d  # the row of each example each token is
    exact = np.abs(tokens - x[np.arange(B)[:, None], pos.round().astype(int)]).max()
    distinct = np.mean([len(set(p)) == 3 for p in pos.round().astype(int)])
    first = np.bincount(pos[:, 0].round().astype(int), minlength=n) / B  # each row equally likely first
    np.savez(sys.argv[3], np.array(tokens.shape), np.array(noise.shape), np.array([exact, distinct]), first,
             np.array([noise.mean(), noise.std(), noise[:, 0, 0].std(), np.corrcoef(noise[:, 0, 0], noise[:, 1, 0])[0, 1]]))
    """)
    for a, b in zip(torch_out[:2], jax_out[:2]):
        np.testing.assert_array_equal(a, b)  # PyTorch's shapes, the batch axis first
    np.testing.assert_array_equal(jax_out[2], [0.0, 1.0])  # each token one of its example's rows, three distinct
    np.testing.assert_allclose(jax_out[3], torch_out[3], atol=0.05)  # a uniform permutation per example
    np.testing.assert_allclose(jax_out[3], np.full(6, 1 / 6), atol=0.05)
    # standard normal noise, independent across examples (a draw shared by the batch has no spread across it)
    np.testing.assert_allclose(jax_out[4], torch_out[4], atol=0.06)
    np.testing.assert_allclose(jax_out[4], [0.0, 1.0, 1.0, 0.0], atol=0.06)


UNBATCHED = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        idx = torch.rand(10).topk(k=3, dim=-1).indices
        m = torch.zeros(10).scatter_(-1, idx, 1).bool()
        return self.fc(x), m
'''


def test_a_method_no_jax_array_has_on_an_unbatched_tensor_of_a_forward_is_an_error():
    # (left as written it would fail: the per-example forward is batch.py's, which the tensor-method pass skips)
    r = t2j(UNBATCHED)
    assert sorted((f.line, f.message.split("(")[0]) for f in errors(r)) == [(11, ".topk"), (12, ".scatter_")]


COPY = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        batch = x.shape[0]
        z = torch.ones(batch, 4, 8) * 3
        return self.fc(x) + z[:, 1]
'''


def test_a_per_batch_copy_holds_the_batch_axis_first():
    # (one example's copy is (4, 8): PyTorch's z[:, 1] is its row 1, not its column)
    r = t2j(COPY)
    assert errors(r) == [], r.findings
    assert "z = jnp.ones((4, 8)) * 3" in r.output and "+ z[1]" in r.output


@needs_frameworks
def test_a_per_batch_copy_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, COPY, "Net", ["float64[3,8]"])


NESTED = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, encoder, dim=8):
        super().__init__()
        self.encoder = encoder
        self.fc = nn.Linear(dim, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)  # (no batched module, which keeps PyTorch's layout)

    def forward(self, x):
        tokens = self.fc(x)
        tokens += self.encoder.pos_embedding[:, 1:5]
        return tokens
'''


def test_a_sliced_array_of_another_module_added_to_a_batched_tensor_is_an_error():
    # (its first axis may be PyTorch's size-1 batch axis: one example's sum would keep it)
    r = t2j(NESTED)
    assert [f.line for f in errors(r) if "array of another module" in f.message] == [14], r.findings
