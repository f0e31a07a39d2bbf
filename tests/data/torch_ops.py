"""Tensor functions for tests/test_torch2jax_ops.py: translated, run with torch blocked, compared with PyTorch.
Every output is deterministic (the sampling functions are given rows with one possible draw, or compared as sets)."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)  # the root key the draws below take (without one, no key would reach them: an error)

def ops(x, p, t, a, b, q, k, v, onehot, w, bias):
    values, indices = torch.max(x, 1)
    low, where_low = torch.min(x, dim=0, keepdim=True)
    top_v, top_i = torch.topk(x, 2)
    top_v0, top_i0 = torch.topk(x, 3, dim=0)
    perm = torch.randperm(7)
    noise = torch.randn_like(x)
    drawn = torch.multinomial(onehot, num_samples=1)
    n_out, rows = 3, [[1.0, 2.0], [3.0, 4.0]]  # torch.Tensor(name): an int is a size, a sequence data
    return [
        torch.arange(5),
        torch.arange(1, 10, 3),
        torch.arange(0, 2, 0.25, dtype=torch.float64),
        torch.arange(start=2, end=6),
        torch.sin(x),
        torch.cos(x),
        torch.log(p),
        torch.sqrt(p),
        torch.mm(x, x.T),
        torch.dot(x[0], x[1]),
        torch.bmm(a, b),
        torch.eye(4),
        torch.eye(3, 5, dtype=torch.float64),
        torch.diag(x[0]),
        torch.diag(x, diagonal=1),
        torch.stack([x, p]),
        torch.stack([x, p], dim=2),
        torch.zeros_like(x),
        torch.ones_like(p),
        torch.zeros(2, 3, dtype=torch.float64),
        torch.empty(2, 3).shape,
        torch.empty(size=(4, 2)).shape,  # the sizes given as one sequence by keyword
        torch.ones(size=[2, 3], dtype=torch.float64),
        values,
        indices,
        low,
        where_low,
        torch.max(x),
        torch.min(x, other=p),
        top_v,
        top_i,
        top_v0,
        top_i0,
        torch.FloatTensor([[1, 2], [3, 4]]),
        torch.LongTensor([3, 1, 2]),
        torch.FloatTensor(2, 3).shape,
        torch.Tensor(n_out).shape,
        torch.Tensor(rows),
        F.layer_norm(x, x.shape[-1:], w, bias),
        F.layer_norm(a, (4, 5)),
        F.layer_norm(x, [5], eps=1e-3),
        F.scaled_dot_product_attention(q, k, v),
        F.scaled_dot_product_attention(q, k, v, is_causal=True),
        F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3),
        F.binary_cross_entropy(p, t),
        F.binary_cross_entropy(onehot, t[:, :4], reduction="sum"),
        F.binary_cross_entropy(p, t, reduction="none"),
        F.glu(x[:, :4]),
        F.glu(x[:4], dim=0),
        torch.tensor([[1.5, 2.0], [3.0, 4.0]], dtype=torch.float64),
        torch.tensor([3, 1, 2]),
        torch.einsum("bij,bjk->bik", a, b),
        torch.einsum("ij,kj->ik", [x, p]),
        torch.where(x > 0, x, p),
        torch.where(x > 0, x, 0.0),
        torch.linspace(-1, 1, steps=9, dtype=torch.float64),
        torch.full((2, 3), 1.5, dtype=torch.float64),
        torch.full((2,), 7),
        torch.clamp(x, -0.5, 0.5),
        torch.clamp(x, min=0.0),
        torch.clip(x, max=0.1),
        torch.abs(x),
        torch.pow(p, 3),
        torch.pow(2.0, x),
        ((torch.randint(3, 7, (50,)) >= 3) & (torch.randint(3, 7, (50,)) < 7)).all(),
        ((torch.rand(4, 5) >= 0) & (torch.rand(4, 5) < 1)).all(),
        perm,  # compared as a set
        noise.shape,
        drawn,
    ]
