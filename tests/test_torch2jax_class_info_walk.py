"""ranks._class_info walks a class's ``__init__`` once: the sequence layers' visitor (sequence_layers) rides along
with _InitAttributes' walk, where it made a walk of its own. Each class's answer must be what sequence_layers gives
by itself, on every class of the fixtures and on programs that hold sequence layers."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import fwport.packs.torch2jax.ranks as ranks
from fwport.core.pipeline import translate_source

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted((ROOT / "fixtures" / "torch2jax").glob("*/model.py"))

SEQUENCES = textwrap.dedent("""\
    import torch
    import torch.nn as nn

    class Tagger(nn.Module):
        def __init__(self, d, kind):
            super().__init__()
            self.lstm = nn.LSTM(d, d, batch_first=True)
            self.gru = nn.GRU(d, d) if kind == "gru" else nn.RNN(d, d)
            layer = nn.TransformerEncoderLayer(d, 2, batch_first=True)
            self.stack = nn.TransformerEncoder(layer, 2)
            self.mixed = nn.LSTM(d, d)
            if kind:
                self.mixed = nn.Linear(d, d)
            self.head = nn.Linear(d, 3)

        def forward(self, x):
            y, _ = self.lstm(x)
            z, _ = self.gru(y)
            return self.head(self.stack(z))
    """)


def _checked(text: str, name: str) -> int:
    """Translates ``text``; every class _class_info sees: its sequence layers as sequence_layers gives them."""
    inner = ranks._class_info
    checked = []

    def spy(cls, ctx, *args, **kwargs):
        info = inner(cls, ctx, *args, **kwargs)
        init = next((s for s in cls.body.body if getattr(getattr(s, "name", None), "value", None) == "__init__"), None)
        if init is not None:
            assert (info.seq_classes, info.seq_first) == ranks.sequence_layers(init, ctx), (name, cls.name.value)
            checked.append((info.seq_classes, info.seq_first))
        return info
    ranks._class_info = spy
    try:
        translate_source(text, name, "torch2jax")
    finally:
        ranks._class_info = inner
    return checked


@pytest.mark.parametrize("path", FIXTURES, ids=[p.parent.name for p in FIXTURES])
def test_class_info_sequences_as_sequence_layers_gives(path):
    _checked(path.read_text(encoding="utf-8"), str(path))


def test_class_info_sequences_on_sequence_layers():
    checked = _checked(SEQUENCES, "tagger.py")
    assert checked == [({"lstm": "torch.nn.LSTM", "gru": "torch.nn.GRU", "stack": "torch.nn.TransformerEncoder"},
                        {"lstm": False, "gru": True, "stack": False})]
