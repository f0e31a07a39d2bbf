"""Speed of what comes out: forward + backward of translated models next to the same models written
by hand, channels-first, the way a PyTorch engineer would.

    python bench/bench_models.py [--batch 32] [--iters 20] [--threads 1]

For each model: the translation is the fixture's expected.py (what `fwport tf2torch` writes today),
the hand-written twin below has the same layers in the same order, and both get the same weights
(copied parameter by parameter) so that the script first checks that they compute the same thing
(the input permuted to channels-last for the translation where it keeps Keras's layout), then times
them alternately and prints the median time of one forward + backward step and the speed ratio
(hand / translated: 1.0 is as fast as hand-written; issue 8's target is >= 0.95).

Needs torch only. Asserts nothing beyond the equality check; a benchmark, not a test.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "tf2torch"


def translated(fixture: str):
    """The translated program of a fixture, imported as a module."""
    path = FIXTURES / fixture / "expected.py"
    spec = importlib.util.spec_from_file_location(f"translated_{fixture}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


# --- the hand-written twins --------------------------------------------------------------------------

class SkipNetHand(nn.Module):
    """fixtures/tf2torch/residual_block, channels-first throughout (no permutes)."""

    def __init__(self, num_classes=10, in_channels=3):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_channels, 8, 3, padding=1), nn.ReLU())
        self.conv1 = nn.Conv2d(8, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16, momentum=0.01, eps=0.001)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16, momentum=0.01, eps=0.001)
        self.project = nn.Conv2d(8, 16, 1)
        self.relu = nn.ReLU()
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Linear(24, num_classes)

    def forward(self, images):
        stem = self.stem(images)
        y = self.relu(self.bn1(self.conv1(stem)))
        y = self.bn2(self.conv2(y))
        block = self.relu(self.project(stem) + y)
        return self.classifier(self.pool(torch.cat([stem, block], dim=1)))


class SmallResnetHand(nn.Module):
    """fixtures/tf2torch/functional_resnet as one writes it by hand: the strided 3x3 convolution
    padded by 1 on every side (Keras pads 'same' after only: the translation does it exactly with a
    ZeroPad2d, a cost this comparison includes)."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16, momentum=0.01, eps=0.001)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16, momentum=0.01, eps=0.001)
        self.conv3 = nn.Conv2d(16, 16, 3, padding=1)
        self.conv4 = nn.Conv2d(16, 32, 1, stride=2)
        self.conv5 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.bn3 = nn.BatchNorm2d(32, momentum=0.01, eps=0.001)
        self.conv6 = nn.Conv2d(32, 32, 3, padding=1)
        self.conv7 = nn.Conv2d(32, 8, 1)
        self.conv8 = nn.Conv2d(32, 8, 3, padding=1)
        self.conv9 = nn.Conv2d(48, 48, 1)
        self.dropout = nn.Dropout(0.2)
        self.fc = nn.Linear(48, num_classes)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(x + self.conv3(torch.relu(self.bn2(self.conv2(x)))))
        x = torch.relu(self.conv4(x) + self.conv6(torch.relu(self.bn3(self.conv5(x)))))
        x = torch.cat([self.conv7(x), self.conv8(x), x], dim=1)
        x = x * 0.5 + self.conv9(x)
        x = self.dropout(x.mean(dim=(2, 3)))
        return torch.softmax(self.fc(x), dim=-1)


class RecurrentHand(nn.Module):
    """fixtures/tf2torch/recurrent_text's build_model: the three recurrent layers called in forward."""

    def __init__(self, vocab=50, classes=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, 8)
        self.lstm = nn.LSTM(8, 12, batch_first=True)
        self.gru = nn.GRU(12, 10, batch_first=True)
        self.rnn = nn.RNN(10, 7, nonlinearity="relu", batch_first=True)
        self.out = nn.Linear(7, classes)

    def forward(self, tokens):
        x, _ = self.lstm(self.embed(tokens))
        x, _ = self.gru(x)
        x, _ = self.rnn(x)
        return self.out(x[:, -1])


# --- the comparison ------------------------------------------------------------------------------------

def cases(batch: int):
    """(name, translated model, its input, hand-written model, its input, same weights?)"""
    g = torch.Generator().manual_seed(0)
    images = torch.randn(batch, 3, 64, 64, generator=g)
    yield ("subclassed CNN (residual_block: kept channels-last, permutes)",
           translated("residual_block").SkipNet(10), images.permute(0, 2, 3, 1).contiguous(),
           SkipNetHand(10), images, True)
    cifar = torch.randn(batch, 3, 32, 32, generator=g)
    yield ("functional ResNet (functional_resnet: channels-first inside, one permute at entry)",
           translated("functional_resnet").build_resnet(10), cifar.permute(0, 2, 3, 1).contiguous(),
           SmallResnetHand(10), cifar, False)
    tokens = torch.randint(0, 50, (batch, 40), generator=g)
    yield ("LSTM/GRU/RNN (recurrent_text: nn.Sequential)",
           translated("recurrent_text").build_model(50, 3), tokens, RecurrentHand(50, 3), tokens, True)


def copy_weights(src: nn.Module, dst: nn.Module) -> None:
    """Parameters and buffers in order (the twins declare their layers in the same order)."""
    a = [*src.parameters()], [*src.buffers()]
    b = [*dst.parameters()], [*dst.buffers()]
    for xs, ys in zip(a, b):
        assert [tuple(x.shape) for x in xs] == [tuple(y.shape) for y in ys], "the twins differ in their layers"
        with torch.no_grad():
            for x, y in zip(xs, ys):
                y.copy_(x)


def step(model: nn.Module, x: torch.Tensor) -> None:
    model.zero_grad(set_to_none=True)
    out = model(x)
    out.float().sum().backward()


def timed(model: nn.Module, x: torch.Tensor) -> float:
    t = time.perf_counter()
    step(model, x)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iters", type=int, default=20, help="timed steps of each model (alternating)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1: steadier figures)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {a.threads} thread(s), batch {a.batch}, median of {a.iters} "
          "forward+backward steps")
    print(f"{'model':<62} {'translated ms':>13} {'hand ms':>8} {'speed ratio':>11}")
    for name, tmod, tx, hmod, hx, same in cases(a.batch):
        tmod.train()
        hmod.train()
        with torch.no_grad():
            tmod(tx)  # lazy modules take their sizes from a first call
        if same:
            copy_weights(tmod, hmod)
            tmod.eval()
            hmod.eval()
            with torch.no_grad():
                diff = (tmod(tx) - hmod(hx)).abs().max().item()
            assert diff < 1e-4, f"{name}: the translation and its twin differ by {diff}"
            tmod.train()
            hmod.train()
        for _ in range(3):
            step(tmod, tx)
            step(hmod, hx)
        tt, ht = [], []
        for _ in range(a.iters):
            tt.append(timed(tmod, tx))
            ht.append(timed(hmod, hx))
        t, h = statistics.median(tt) * 1e3, statistics.median(ht) * 1e3
        print(f"{name:<62} {t:>13.2f} {h:>8.2f} {h / t:>11.2f}")
    print("speed ratio = hand-written time / translated time (target >= 0.95)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
