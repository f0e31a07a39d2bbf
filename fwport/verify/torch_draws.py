"""Constant random draws for the PyTorch side of ``fwport verify`` (either direction): a model whose forward
draws random numbers in eval mode (a VAE's sampling layer) is compared with its draws made constants on both
sides, which checks the deterministic path and the path that scales the noise. Imports torch only."""
from __future__ import annotations

import torch

#: what a draw gives while the draws are constant (a stochastic forward, see run): a normal draw 0.5 (not its
#: mean 0, which would hide the path scaling the noise, eps * std), a uniform one the middle of its range
NORMAL_DRAW = UNIFORM_DRAW = 0.5


class ConstantDraws:
    """While active, torch's continuous draws are constants: torch.randn / randn_like / normal / Tensor.normal_
    give NORMAL_DRAW (times std, plus mean), torch.rand / rand_like / Tensor.uniform_ UNIFORM_DRAW of their
    range. Patched as attributes of torch (what ``torch.randn(...)`` looks up at each call), restored on exit
    (the worker serves more requests). Discrete draws (randint, randperm, bernoulli, multinomial) stay random."""

    def __enter__(self):
        def sized(value):
            def draw(*size, **kw):
                size = kw.pop("size", None) or (size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size)
                t = torch.full(tuple(size), value, dtype=kw.get("dtype") or torch.get_default_dtype(),
                               device=kw.get("device"))
                return t.requires_grad_(bool(kw.get("requires_grad", False)))
            return draw

        def like(value):
            return lambda x, **kw: torch.full_like(x, value, dtype=kw.get("dtype"), device=kw.get("device"))

        def normal(mean=0.0, std=1.0, size=None, **kw):
            if size is not None:
                return sized(float(mean) + NORMAL_DRAW * float(std))(size, **kw)
            return torch.as_tensor(mean) + NORMAL_DRAW * torch.as_tensor(std) + torch.zeros(
                torch.broadcast_shapes(torch.as_tensor(mean).shape, torch.as_tensor(std).shape))

        self.saved = [(torch, n, getattr(torch, n)) for n in ("randn", "rand", "randn_like", "rand_like", "normal")] + \
            [(torch.Tensor, n, getattr(torch.Tensor, n)) for n in ("normal_", "uniform_")]
        torch.randn, torch.rand = sized(NORMAL_DRAW), sized(UNIFORM_DRAW)
        torch.randn_like, torch.rand_like, torch.normal = like(NORMAL_DRAW), like(UNIFORM_DRAW), normal
        torch.Tensor.normal_ = lambda t, mean=0.0, std=1.0, **kw: t.fill_(mean + NORMAL_DRAW * std)
        torch.Tensor.uniform_ = lambda t, a=0.0, b=1.0, **kw: t.fill_(a + UNIFORM_DRAW * (b - a))
        return self

    def __exit__(self, *exc):
        for owner, name, value in self.saved:
            setattr(owner, name, value)
