"""torch2jax: a function of the file that forward calls with batched tensors (nlp-tutorial's
``get_attn_pad_mask(seq_q, seq_k)``, llama's ``repeat_kv(x, n_rep)``) is written for one example as forward is, where
only the forwards call it, each of its parameters batched in every call or in none, and its body translates for one
example without an error; otherwise the function keeps its batch form and its calls their error (the module is
then written batched where it can be, as before). Verified against PyTorch (fwport verify, forward and
gradients)."""
from __future__ import annotations

from helpers import error_findings as errors, needs, t2j
from runners import verify_model

needs_frameworks = needs("torch", "jax", "equinox")

PAD_MASK = '''
import torch
import torch.nn as nn


def get_attn_pad_mask(seq_q, seq_k):
    batch_size, len_q = seq_q.size()
    batch_size, len_k = seq_k.size()
    pad_attn_mask = seq_k.data.eq(0).unsqueeze(1)
    return pad_attn_mask.expand(batch_size, len_q, len_k)


def repeat_kv(x, n_rep):
    bs, slen, heads, head_dim = x.shape
    return x[:, :, :, None, :].expand(bs, slen, heads, n_rep, head_dim).reshape(bs, slen, heads * n_rep, head_dim)


class Net(nn.Module):
    def __init__(self, vocab=7, dim=8):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, tokens):
        h = self.emb(tokens)
        mask = get_attn_pad_mask(tokens, tokens)
        scores = torch.matmul(h, self.proj(h).transpose(-1, -2)).masked_fill(mask, -1e9)
        out = torch.matmul(scores.softmax(dim=-1), h)
        wide = repeat_kv(out.view(out.size(0), out.size(1), 2, 4), 2)
        return wide.sum(-1)
'''


def test_a_function_forward_gives_the_batch_is_written_for_one_example():
    r = t2j(PAD_MASK)
    assert errors(r) == [], r.findings
    assert "    len_q, = seq_q.shape\n" in r.output
    assert "return jnp.broadcast_to(pad_attn_mask, (len_q, len_k))" in r.output
    assert "jnp.expand_dims((jax.lax.stop_gradient(seq_k) == 0), 0)" in r.output
    assert "    slen, heads, head_dim = x.shape\n" in r.output
    assert "batched module" not in r.output


@needs_frameworks
def test_a_function_forward_gives_the_batch_verifies_against_pytorch(tmp_path):
    verify_model(tmp_path, PAD_MASK, "Net", ["int64[3,5]:7"])


def test_a_function_also_called_outside_the_modules_keeps_its_error():
    # the call at module level gives it the whole batch: one body cannot serve both, so the forward's call is refused
    r = t2j(PAD_MASK + "\n\nmask = get_attn_pad_mask(torch.zeros(2, 3), torch.zeros(2, 3))\n")
    assert "    batch_size, len_q = seq_q.shape\n" in r.output  # written for the batch, as the source
    assert "# batched module: takes the whole batch" in r.output  # (its caller takes the batch, as PyTorch's)


def test_a_function_given_the_batch_in_one_call_and_a_shared_value_in_another_keeps_its_error():
    src = PAD_MASK.replace("        return wide.sum(-1)",
                           "        shared = get_attn_pad_mask(torch.ones(1, 5), torch.ones(1, 5))\n"
                           "        return wide.sum(-1) + shared.sum()")
    r = t2j(src)
    assert "    batch_size, len_q = seq_q.shape\n" in r.output
    assert "# batched module: takes the whole batch" in r.output


def test_a_function_whose_body_cannot_be_written_for_one_example_keeps_its_error():
    # seq.size(0) in a list of sizes: the batch size, which one example has not; its call stays refused as before
    src = PAD_MASK.replace("def repeat_kv", '''def subsequent(seq):
    shape = [seq.size(0), seq.size(1), seq.size(1)]
    return torch.triu(torch.ones(shape), diagonal=1)


def repeat_kv''').replace("        return wide.sum(-1)", "        return wide.sum(-1) + subsequent(tokens).sum()")
    r = t2j(src)
    assert "    shape = [seq.shape[0], seq.shape[1], seq.shape[1]]\n" in r.output  # written for the batch
    assert "    len_q, = seq_q.shape\n" in r.output  # (the other one still for one example)
    said = [f.message for f in errors(r)]
    assert "# batched module: takes the whole batch" in r.output \
        or any(m.startswith("subsequent() is a function of this file") for m in said), said


POSEMB = '''
import torch
import torch.nn as nn


def posemb_sincos_1d(patches, temperature=10000):
    _, n, dim = patches.shape
    n = torch.arange(n)
    omega = torch.arange(dim // 2) / (dim // 2 - 1)
    omega = 1.0 / (temperature ** omega)
    n = n.flatten()[:, None] * omega[None, :]
    return torch.cat((n.sin(), n.cos()), dim=1).type(patches.dtype)


class Net(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        x = x * self.scale
        return (x + posemb_sincos_1d(x)).mean(dim=1)
'''


def test_a_function_whose_result_every_example_shares_is_written_for_one_example():
    # vit-pytorch's posemb_sincos_1d: sizes read from the batched input, a table of positions every example shares
    r = t2j(POSEMB)
    assert errors(r) == [], r.findings
    assert "    n, dim = patches.shape\n" in r.output and "batched module" not in r.output


@needs_frameworks
def test_a_function_whose_result_every_example_shares_verifies_against_pytorch(tmp_path):
    # (in float32: PyTorch builds the table in its default dtype, which float64 inputs would not change)
    verify_model(tmp_path, POSEMB, "Net", ["float32[2,5,8]"], dtype="float32")
