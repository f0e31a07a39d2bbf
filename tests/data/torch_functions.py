"""Functions of tensors for tests/test_torch2jax.py: translated, run with torch blocked, compared."""
import torch
import torch.nn.functional as F


def losses(logits, labels, pred, target):
    return [
        F.cross_entropy(logits, labels),
        F.cross_entropy(logits, labels, reduction="sum"),
        F.nll_loss(F.log_softmax(logits, dim=1), labels),
        F.nll_loss(F.log_softmax(logits, dim=-1), labels, reduction="none"),
        F.mse_loss(pred, target),
        F.mse_loss(pred, target, reduction="sum"),
        torch.sum(pred, dim=1),
        torch.mean(pred, dim=0, keepdim=True),
        F.softmax(logits, dim=-1),
        torch.matmul(pred, target.T),
        F.gelu(pred),
        torch.cat([pred, target], dim=1),
    ]
