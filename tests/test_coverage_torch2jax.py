"""bench/coverage.py --direction torch2jax counts what the torch2jax passes handle without a rule (the TorchScript
decorators removed, torch.nn.init in __init__, the Dataset base, no_grad): each is translated, not a no-rule error."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_coverage", ROOT / "bench" / "coverage.py")
coverage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(coverage)

SOURCE = '''
import torch
from torch import nn
from torch.utils.data import Dataset


class Pairs(Dataset):
    def __init__(self, x):
        self.x = x

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        nn.init.normal_(self.fc.weight, std=0.02)
        nn.init.zeros_(self.fc.bias)

    @torch.jit.ignore
    def forward(self, x):
        return self.fc(x)


def predict(model, x):
    with torch.no_grad():
        return model(x)
'''


def test_structural_names_are_counted_and_translated():
    names = coverage._torch2jax_structural()
    used = {"torch.jit.ignore", "torch.nn.init.normal_", "torch.nn.init.zeros_", "torch.utils.data.Dataset",
            "torch.no_grad", "torch.nn.Module"}
    assert used <= names and "torch.nn.init.calculate_gain" in names
    r = translate_source(SOURCE, "net.py", load_pack("torch2jax"))
    assert not [f for f in r.findings if f.code == "no-rule" or f.severity.value == "error"], r.findings
    assert "torch" not in r.output and "Dataset" not in r.output and "jit" not in r.output, r.output


def test_rules_only_leaves_them_out():
    rows = [{"name": "torch.jit.ignore", "total": "3"}, {"name": "torch.split", "total": "2"}]
    pack = load_pack("torch2jax")
    with_passes = coverage.coverage(rows, set(pack.by_name) | coverage._torch2jax_structural(), ("torch.",))
    rules_only = coverage.coverage(rows, set(pack.by_name), ("torch.",))
    assert with_passes[:2] == (5, 5) and rules_only[:2] == (2, 5)
