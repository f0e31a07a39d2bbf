"""PyTorch types named in annotations (types.py ANNOTATIONS): a module, an optimizer, a loader or a dataset, alone,
in a union or inside Optional[...], become the types the translation's values have (eqx.Module,
optax.GradientTransformation, typing.Iterable, typing.Any), so that the output names no PyTorch type and loads
and runs with torch unimportable."""
from __future__ import annotations

import subprocess
import sys

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source

SOURCE = '''
import torch
from torch import nn
from torch.nn import Module
from torch.utils.data import DataLoader, Dataset
from typing import Optional


class Trainer:
    def __init__(self, model: torch.nn.Module, train_data: DataLoader, optimizer: torch.optim.Optimizer,
                 extra: Module | dict | None = None, other: Optional[nn.Module] = None) -> None:
        self.train_data = train_data


def prepare_dataloader(dataset: Dataset, batch_size: int) -> DataLoader:
    return DataLoader(dataset, batch_size=batch_size)
'''


def test_pytorch_types_in_annotations_become_the_translations_types(tmp_path):
    r = translate_source(SOURCE, "trainer.py", "torch2jax")
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    out = r.output
    for text in ("model: eqx.Module", "train_data: typing.Iterable", "optimizer: optax.GradientTransformation",
                 "extra: eqx.Module | dict | None", "other: Optional[eqx.Module]", "dataset: typing.Any",
                 ") -> typing.Iterable:"):
        assert text in out, out
    assert "torch" not in out
    (tmp_path / "trainer.py").write_text(out)
    run = ("import sys, runpy\nsys.modules['torch'] = None\nns = runpy.run_path('trainer.py')\n"
           "loader = ns['prepare_dataloader']([1.0, 2.0, 3.0], 2)\n"
           "t = ns['Trainer'](None, loader, None)\nprint([b.shape for b in t.train_data])\n")
    p = subprocess.run([sys.executable, "-c", run], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "[(2,), (1,)]"
