"""torch2jax: torchvision's data code → numpy helpers written into the output (fwport/packs/torch2jax/vision.py).

Fake dataset files in torchvision's documented formats (MNIST's IDX files, CIFAR's python pickles) are written
into tmp_path; the translated code (run with torch and torchvision unimportable) must give the batches torchvision
gives. torchvision is not installed here, so the expectation is computed from the bytes written, with torch's own
ops where torchvision's are torch ops (ToTensor's division, Normalize's sub/div, make_grid's normalisation).
What is not translated is an error at its line; download=True a warning.
"""
from __future__ import annotations

import gzip
import importlib.util
import pickle
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from fwport.core.rule import load_pack
from runners import python

PACK = load_pack("torch2jax")
HAS = {m: importlib.util.find_spec(m) is not None for m in ("torch", "jax")}
needs = pytest.mark.skipif(not (HAS["torch"] and HAS["jax"]), reason="needs torch (the expectation) and jax")

# runs a translated file with torch and torchvision unimportable; it saves its batches to OUT.npz
RUN = ("import sys\nsys.modules['torch'] = None\nsys.modules['torchvision'] = None\nimport runpy\n"
       "runpy.run_path(sys.argv[1], run_name='__main__')\n")


def t2j(text: str):
    return translate_source(text, "example.py", PACK)


def run_translated(tmp_path: Path, source: str) -> dict:
    r = t2j(source)
    assert not [f for f in r.findings if f.severity == Severity.ERROR], r.findings
    assert "torch" not in "".join(line for line in r.output.splitlines() if line.startswith(("import", "from")))
    path = tmp_path / "translated.py"
    path.write_text(r.output)
    p = python("-c", RUN, path, side="jax", cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    with np.load(tmp_path / "out.npz") as f:
        return dict(f)


def write_idx(path: Path, array: np.ndarray, gz: bool) -> None:
    header = bytes([0, 0, 8, array.ndim]) + b"".join(struct.pack(">i", n) for n in array.shape)
    data = header + array.astype(np.uint8).tobytes()
    if gz:
        Path(str(path) + ".gz").write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)


def fake_mnist(root: Path, name: str, gz: bool, n: int = 10, seed: int = 0):
    rng = np.random.default_rng(seed)
    raw = root / name / "raw"
    raw.mkdir(parents=True)
    out = {}
    for split in ("train", "t10k"):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        write_idx(raw / f"{split}-images-idx3-ubyte", images, gz)
        write_idx(raw / f"{split}-labels-idx1-ubyte", labels, gz)
        out[split] = (images, labels)
    return out


SAVE = ("\nxs, ys = zip(*[(np.asarray(x), np.asarray(y)) for x, y in loader])\n"
        "np.savez('out.npz', x=np.concatenate(xs), y=np.concatenate(ys), n=np.array([len(b) for b in ys]))\n")


@needs
@pytest.mark.parametrize("name,gz", [("MNIST", False), ("FashionMNIST", True)])
def test_mnist_files_give_torchvisions_batches(tmp_path, name, gz):
    import torch

    files = fake_mnist(tmp_path, name, gz)
    source = (f"import numpy as np\nimport torch\nfrom torchvision import datasets, transforms\n\n"
              f"ds = datasets.{name}({str(tmp_path)!r}, train=False, transform=transforms.Compose(["
              f"transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))]))\n"
              f"loader = torch.utils.data.DataLoader(ds, batch_size=4, shuffle=False)\n" + SAVE)
    out = run_translated(tmp_path, source)
    images, labels = files["t10k"]
    # torchvision: ToTensor = to float32, div(255); Normalize = sub_(mean).div_(std) with float32 tensors
    expect = torch.from_numpy(images).unsqueeze(1).to(torch.float32).div(255)
    expect = expect.sub(torch.tensor([0.1307]).view(-1, 1, 1)).div(torch.tensor([0.3081]).view(-1, 1, 1)).numpy()
    assert out["x"].dtype == np.float32 and out["x"].shape == (10, 1, 28, 28)
    assert np.array_equal(out["x"], expect)
    assert np.array_equal(out["y"], labels.astype(np.int64))
    assert list(out["n"]) == [4, 4, 2]


@needs
def test_mnist_without_transform_gives_the_images(tmp_path):
    files = fake_mnist(tmp_path, "MNIST", gz=True)
    source = ("import numpy as np\nimport torchvision\nimport torch\n\n"
              f"ds = torchvision.datasets.MNIST(root={str(tmp_path)!r})\n"
              "loader = torch.utils.data.DataLoader(ds, batch_size=5)\n" + SAVE)
    out = run_translated(tmp_path, source)
    assert out["x"].dtype == np.uint8 and np.array_equal(out["x"], files["train"][0])


def write_cifar(root: Path, hundred: bool, n: int = 6, seed: int = 1):
    rng = np.random.default_rng(seed)
    base = root / ("cifar-100-python" if hundred else "cifar-10-batches-py")
    base.mkdir(parents=True)
    names = (["train"], ["test"]) if hundred else ([f"data_batch_{k}" for k in range(1, 6)], ["test_batch"])
    key = "fine_labels" if hundred else "labels"
    out = {}
    for split, files in zip(("train", "test"), names):
        data, labels = [], []
        for f in files:
            d = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
            lab = [int(v) for v in rng.integers(0, 100 if hundred else 10, n)]
            with open(base / f, "wb") as fh:
                pickle.dump({"data": d, key: lab, "coarse_labels" if hundred else "batch_label": lab}, fh)
            data.append(d)
            labels += lab
        out[split] = (np.concatenate(data), labels)
    meta = ("meta", "fine_label_names") if hundred else ("batches.meta", "label_names")
    with open(base / meta[0], "wb") as fh:
        pickle.dump({meta[1]: [f"c{k}" for k in range(100 if hundred else 10)]}, fh)
    return out


@needs
@pytest.mark.parametrize("hundred", [False, True])
def test_cifar_pickles_give_torchvisions_batches(tmp_path, hundred):
    import torch

    files = write_cifar(tmp_path, hundred)
    cls = "CIFAR100" if hundred else "CIFAR10"
    source = ("import numpy as np\nimport torch\nimport torchvision\nimport torchvision.transforms as transforms\n\n"
              f"ds = torchvision.datasets.{cls}(root={str(tmp_path)!r}, train=True, transform=transforms.ToTensor(), "
              "download=False)\nassert len(ds.classes) == len(set(ds.classes))\n"
              "loader = torch.utils.data.DataLoader(ds, batch_size=7)\n" + SAVE)
    out = run_translated(tmp_path, source)
    data, labels = files["train"]
    # torchvision: rows reshaped (3, 32, 32) and moved to HWC for PIL; ToTensor moves them back and divides
    expect = torch.from_numpy(data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).copy()).permute(0, 3, 1, 2)
    expect = expect.to(torch.float32).div(255).numpy()
    assert np.array_equal(out["x"], expect)
    assert list(out["y"]) == labels


@needs
def test_augmentation_crops_and_flips_the_padded_image(tmp_path):
    """Pad(4), RandomHorizontalFlip, RandomCrop(32): each example is one of the 9 x 9 crops of the padded image,
    mirrored or not; the draws are reproducible (seeded) and both flips and several offsets occur."""
    files = write_cifar(tmp_path, False, n=40)
    source = ("import numpy as np\nimport torch\nimport torchvision\nimport torchvision.transforms as transforms\n\n"
              "t = transforms.Compose([transforms.Pad(4), transforms.RandomHorizontalFlip(), transforms.RandomCrop(32), "
              f"transforms.ToTensor()])\nds = torchvision.datasets.CIFAR10({str(tmp_path)!r}, train=True, transform=t)\n"
              "loader = torch.utils.data.DataLoader(ds, batch_size=50)\n" + SAVE)
    r = t2j(source)
    assert "NumpyRandomHorizontalFlip(seed=1)" in r.output and "NumpyRandomCrop(32, seed=2)" in r.output
    out = run_translated(tmp_path, source)
    again = run_translated(tmp_path, source)
    assert np.array_equal(out["x"], again["x"])
    images = files["train"][0].reshape(-1, 3, 32, 32).astype(np.float32) / np.float32(255)
    padded = np.pad(images, ((0, 0), (0, 0), (4, 4), (4, 4)))
    seen = set()
    for k, x in enumerate(out["x"]):
        hits = [(i, j, f) for i in range(9) for j in range(9) for f in (0, 1)
                if np.array_equal(x, (padded[k][..., ::-1] if f else padded[k])[:, i:i + 32, j:j + 32])]
        assert hits, f"example {k} is no crop of its padded image"
        seen |= {h[2] for h in hits} | {("offset", h[0], h[1]) for h in hits}
    assert {0, 1} <= seen and len([s for s in seen if isinstance(s, tuple)]) > 3


@needs
def test_resize_keeps_an_image_of_that_size_and_refuses_others(tmp_path):
    fake_mnist(tmp_path, "MNIST", gz=False)
    source = ("import numpy as np\nimport torch\nfrom torchvision import datasets, transforms\n\n"
              f"ds = datasets.MNIST({str(tmp_path)!r}, transform=transforms.Compose([transforms.Resize(28), "
              "transforms.ToTensor(), transforms.Lambda(lambda x: x * 2)]))\n"
              "loader = torch.utils.data.DataLoader(ds, batch_size=10)\n" + SAVE)
    r = t2j(source)
    assert any(f.severity == Severity.WARNING and "Resize" in f.message for f in r.findings)
    out = run_translated(tmp_path, source)
    images = np.frombuffer((tmp_path / "MNIST/raw/train-images-idx3-ubyte").read_bytes()[16:], np.uint8)
    assert np.array_equal(out["x"], (images.reshape(10, 1, 28, 28).astype(np.float32) / np.float32(255)) * 2)
    bad = source.replace("Resize(28)", "Resize(32)")
    path = tmp_path / "bad.py"
    path.write_text(t2j(bad).output)
    p = python("-c", RUN, path, side="jax", cwd=tmp_path)
    assert p.returncode != 0 and "Resize of a 28x28 image to 32x32" in p.stderr


def make_grid_expected(t, nrow, padding, normalize, pad_value=0.0):
    """make_grid + save_image's rounding as torchvision's documented algorithm, in torch ops."""
    import math

    import torch

    if t.size(1) == 1:
        t = torch.cat((t, t, t), 1)
    if normalize:
        t = t.clone()
        low, high = float(t.min()), float(t.max())
        t.clamp_(min=low, max=high)
        t.sub_(low).div_(max(high - low, 1e-5))
    n = t.size(0)
    xmaps = min(nrow, n)
    ymaps = int(math.ceil(float(n) / xmaps))
    height, width = t.size(2) + padding, t.size(3) + padding
    grid = t.new_full((3, height * ymaps + padding, width * xmaps + padding), pad_value)
    k = 0
    for y in range(ymaps):
        for x in range(xmaps):
            if k >= n:
                break
            grid.narrow(1, y * height + padding, height - padding).narrow(2, x * width + padding, width - padding).copy_(t[k])
            k += 1
    return grid.mul(255).add_(0.5).clamp_(0, 255).permute(1, 2, 0).to(torch.uint8).numpy()


def read_png(path: Path) -> np.ndarray:
    """An 8-bit RGB PNG of unfiltered rows (what save_image_png writes), decoded with zlib."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, chunks = 8, {}
    while at < len(data):
        n = struct.unpack(">I", data[at:at + 4])[0]
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + n]
        assert struct.unpack(">I", data[at + 8 + n:at + 12 + n])[0] == zlib.crc32(kind + body)
        chunks[kind] = chunks.get(kind, b"") + body
        at += 12 + n
    w, h, depth, color = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (depth, color) == (8, 2)
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(h, 1 + 3 * w)
    assert not rows[:, 0].any()
    return rows[:, 1:].reshape(h, w, 3)


@needs
@pytest.mark.parametrize("normalize", [False, True])
def test_save_image_writes_torchvisions_grid(tmp_path, normalize):
    import torch

    torch.manual_seed(0)
    images = torch.randn(7, 1, 5, 6) * (0.6 if normalize else 0.3) + 0.5
    np.save(tmp_path / "images.npy", images.numpy())
    source = ("import numpy as np\nimport torch\nfrom torchvision.utils import save_image\n\n"
              "x = torch.from_numpy(np.load('images.npy'))\n"
              f"save_image(x, 'grid.png', nrow=3, normalize={normalize})\nnp.savez('out.npz')\n")
    run_translated(tmp_path, source)
    got = read_png(tmp_path / "grid.png")
    expect = make_grid_expected(images, 3, 2, normalize)
    assert got.shape == expect.shape == (3 * 7 + 2, 3 * 8 + 2, 3)
    assert np.array_equal(got, expect)
    if importlib.util.find_spec("PIL") is not None:  # an ordinary PNG reader reads the same pixels
        from PIL import Image

        assert np.array_equal(np.asarray(Image.open(tmp_path / "grid.png").convert("RGB")), expect)


def test_what_is_not_translated_is_an_error_at_its_line():
    r = t2j("import torch\nimport torchvision\nfrom torchvision import transforms\n\n"
            "ds = torchvision.datasets.ImageFolder('imgs', transform=transforms.ToTensor())\n"
            "jitter = transforms.ColorJitter(0.4)\n"
            "net = torchvision.models.resnet18()\n")
    errors = {(f.line, f.code) for f in r.findings if f.severity == Severity.ERROR}
    assert {(5, "no-rule"), (6, "no-rule"), (7, "no-rule")} <= errors
    message = next(f.message for f in r.findings if f.line == 5 and f.severity == Severity.ERROR)
    assert "ImageFolder" in message and "MNIST" in message  # the guidance: what is translated


def test_download_true_is_a_warning_and_false_says_nothing():
    warn = t2j("import torch\nfrom torchvision import datasets\n\nds = datasets.MNIST('data', download=True)\n")
    assert [(f.line, f.severity) for f in warn.findings if f.code == "no-download"] == [(4, Severity.WARNING)]
    assert "root/MNIST/raw" in next(f.message for f in warn.findings if f.code == "no-download")
    quiet = t2j("import torch\nfrom torchvision import datasets\n\nds = datasets.MNIST('data', download=False)\n")
    assert not [f for f in quiet.findings if f.code == "no-download"]
    assert "download" not in quiet.output.split("\nds = ")[1]


@needs
def test_center_crop_takes_torchvisions_centre_and_pads_small_images(tmp_path):
    """CenterCrop → NumpyCenterCrop: torchvision's corner round((h - th) / 2), round((w - tw) / 2) (Python's
    rounding: 1.5 → 2, 0.5 → 0), on images (H, W, C uint8) and ToTensor arrays (C, H, W); an image smaller than
    the crop is zero-padded first, (d - n) // 2 before and (d - n + 1) // 2 after, as torchvision pads."""
    source = ("import numpy as np\nimport torchvision.transforms as transforms\nfrom torchvision.transforms import "
              "CenterCrop\n\nimg = np.arange(5 * 6 * 3).reshape(5, 6, 3).astype(np.uint8)\n"
              "chw = np.arange(2 * 6 * 7, dtype=np.float32).reshape(2, 6, 7) + 1\n"
              "np.savez('out.npz', a=transforms.CenterCrop(3)(img), b=CenterCrop((4, 3))(chw), "
              "c=transforms.CenterCrop([9])(chw), d=transforms.CenterCrop(5)(chw), "
              "e=transforms.Compose([transforms.CenterCrop(4), transforms.ToTensor()])(img))\n")
    r = t2j(source)
    assert "NumpyCenterCrop(3)" in r.output and "NumpyCenterCrop((4, 3))" in r.output
    out = run_translated(tmp_path, source)
    img = np.arange(5 * 6 * 3).reshape(5, 6, 3).astype(np.uint8)
    chw = np.arange(2 * 6 * 7, dtype=np.float32).reshape(2, 6, 7) + 1
    assert np.array_equal(out["a"], img[1:4, 2:5])  # top round(1.0) = 1, left round(1.5) = 2
    assert np.array_equal(out["b"], chw[:, 1:5, 2:5])
    assert np.array_equal(out["c"], np.pad(chw, ((0, 0), (1, 2), (1, 1))))  # 6 → 9: 1 before, 2 after
    assert np.array_equal(out["d"], chw[:, 0:5, 1:6])  # top round(0.5) = 0
    expect = img[0:4, 1:5].transpose(2, 0, 1).astype(np.float32) / np.float32(255)  # top round(0.5), left round(1.0)
    assert out["e"].dtype == np.float32 and np.array_equal(out["e"], expect)
