"""A module whose forward uses the per-example rewrites of fwport/packs/torch2jax/batch.py (max/min with
indices, topk, split of an expression, einsum, masked_fill, bmm, glu, repeat): tests/test_torch2jax_ops.py
compares PyTorch on the batch with the translation under jax.vmap."""
import torch
import torch.nn.functional as F
from torch import nn


class PerExample(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        B, T, C = x.size()
        v, i = torch.max(x, 2)
        lo, j = x.min(dim=1, keepdim=True)
        top, where_top = torch.topk(x, 2, dim=1)
        a, b = (x * 2).split(3, dim=2)
        att = torch.einsum('btc,bsc->bts', x, y)
        att = att.masked_fill(att > 0.5, 0.0)
        z = torch.bmm(att, y)
        g = F.glu(x, dim=2)
        r = x.repeat(1, 2, 1)
        return v, i, lo, j, top, where_top, a, b, att, z, g, r
