"""torch2jax leftovers of the PT corpus (t2jmisc): tensor methods (``.unbind``), ``torch.no_grad`` residue,
``torch.jit.script``, torchvision's make_grid and RandomResizedCrop. Each translation is run against PyTorch on the
same input and compared."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from helpers import per_example
from runners import both_sides, verify_model

pytest.importorskip("torch")
pytest.importorskip("jax")


def t2j(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "f.py", "torch2jax")


def errors(r):
    return [f for f in r.findings if f.severity is Severity.ERROR]


UNBIND = '''
import torch


def box_cxcywh_to_xyxy(x):
    x_c, y_c, w, h = x.unbind(-1)
    b = [(x_c - 0.5 * w), (y_c - 0.5 * h), (x_c + 0.5 * w), (y_c + 0.5 * h)]
    return torch.stack(b, dim=-1)


def slices(x):
    return [*x.unbind(), *x.unbind(1), *x.unbind(dim=2), *x.unbind(-2)]
'''


def test_unbind_outside_modules_over_each_dim(tmp_path):
    r = t2j(UNBIND)
    assert ".unbind(" not in r.output and "jnp.unstack(x, axis=-1)" in r.output and "jnp.unstack(x)" in r.output
    torch_out, jax_out = both_sides(tmp_path, UNBIND, """
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    out = [ns["box_cxcywh_to_xyxy"](conv(x[0, :, :]))] + list(ns["slices"](conv(x)))
    np.savez(sys.argv[3], *[np.asarray(o) for o in out])
    """)
    assert len(torch_out) == len(jax_out) == 1 + 2 + 3 + 4 + 3
    for a, b in zip(torch_out, jax_out):
        assert a.shape == b.shape
        np.testing.assert_allclose(b, a, rtol=1e-12)


UNBIND_MODULE = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def forward(self, x):
        a, b, c = x.unbind(dim=1)
        first, *rest = x.unbind(-1)
        return torch.cat([a * b + c, first * rest[0] - rest[2]], dim=1)
'''


def test_unbind_inside_a_module_drops_the_batch_axis(tmp_path):
    r = t2j(UNBIND_MODULE)
    assert "jnp.unstack(x, axis=0)" in r.output
    verify_model(tmp_path, UNBIND_MODULE, "Net", ["float64[5,3,4]"])


UNBIND_BATCH = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class Net(nn.Module):
        def forward(self, x):
            a, b = x.unbind()
            return a + b
    ''')


def test_unbind_of_the_batch_axis_inside_a_per_example_module_is_refused():
    src = per_example(UNBIND_BATCH).lstrip("\n")  # a module that cannot be batched (it holds an LSTM) keeps its error
    line = src.splitlines().index("        a, b = x.unbind()") + 1
    r = t2j(src)
    assert any(".unbind: dimension 0 is the batch axis" in f.message and f.line == line for f in errors(r)), r.findings


def test_unbind_of_the_batch_axis_makes_a_batched_module(tmp_path):
    # t2jwhole: a module whose forward needs the batch axis is batched, and the unbind keeps PyTorch's dim 0
    r = t2j(UNBIND_BATCH)
    assert not errors(r), r.findings
    assert "a, b = jnp.unstack(x)" in r.output and "# batched module" in r.output
    verify_model(tmp_path, UNBIND_BATCH, "Net", ["float64[2,3,4]"])


SCRIPTED = '''
import torch
import torch.nn as nn


@torch.jit.script
def fused_gelu(x):
    return x * 0.5 * (1.0 + torch.erf(x / 1.41421356))


def bias_gelu(b, y):
    return fused_gelu(b + y)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return bias_gelu(1.0, self.fc(x))


scripted_gelu = torch.jit.script(bias_gelu)
'''


def test_torch_jit_script_keeps_the_function_and_module(tmp_path):
    r = t2j(SCRIPTED)
    assert "torch" not in r.output.replace("# fwport", "")
    warned = {f.line for f in r.findings if f.severity is Severity.WARNING and "jax.jit" in f.message}
    assert warned == {5, 23}, r.findings  # the decorator, the call
    torch_out, jax_out = both_sides(tmp_path, SCRIPTED, """
    x = np.random.default_rng(1).standard_normal((5, 3))
    np.savez(sys.argv[3], np.asarray(ns["scripted_gelu"](conv(x), conv(x[::-1].copy()))), np.asarray(ns["fused_gelu"](conv(x))))
    """)
    for a, b in zip(torch_out, jax_out, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-12)


def test_torch_jit_script_of_a_module_statement_is_removed_and_the_module_verified(tmp_path):
    src = SCRIPTED + '''

def build():
    model = Net()
    model = torch.jit.script(model)
    torch.jit.script(model)
    return model
'''
    r = t2j(src)
    assert "jit" not in r.output and "model = Net(" in r.output and not errors(r), r.findings
    verify_model(tmp_path, SCRIPTED, "Net", ["float64[5,4]"])


def make_grid_torch(tensor, nrow=8, padding=2, normalize=False, value_range=None, scale_each=False, pad_value=0.0):
    """torchvision.utils.make_grid's documented algorithm in torch ops (torchvision is not installed here): a list
    stacked, 2-D / 3-D made a batch, one channel repeated to three, clamp_/sub_/div_ normalisation, new_full grid,
    narrow().copy_() per image, one image returned squeezed."""
    import math

    import torch

    if isinstance(tensor, list):
        tensor = torch.stack(tensor, dim=0)
    if tensor.dim() == 2:
        tensor = tensor.unsqueeze(0)
    if tensor.dim() == 3:
        if tensor.size(0) == 1:
            tensor = torch.cat((tensor, tensor, tensor), 0)
        tensor = tensor.unsqueeze(0)
    if tensor.dim() == 4 and tensor.size(1) == 1:
        tensor = torch.cat((tensor, tensor, tensor), 1)
    if normalize:
        tensor = tensor.clone()

        def norm_ip(img, low, high):
            img.clamp_(min=low, max=high)
            img.sub_(low).div_(max(high - low, 1e-5))

        def norm_range(t):
            norm_ip(t, *value_range) if value_range is not None else norm_ip(t, float(t.min()), float(t.max()))

        if scale_each:
            for t in tensor:
                norm_range(t)
        else:
            norm_range(tensor)
    if tensor.size(0) == 1:
        return tensor.squeeze(0)
    nmaps = tensor.size(0)
    xmaps = min(nrow, nmaps)
    ymaps = int(math.ceil(float(nmaps) / xmaps))
    height, width = int(tensor.size(2) + padding), int(tensor.size(3) + padding)
    grid = tensor.new_full((tensor.size(1), height * ymaps + padding, width * xmaps + padding), pad_value)
    k = 0
    for y in range(ymaps):
        for x in range(xmaps):
            if k >= nmaps:
                break
            grid.narrow(1, y * height + padding, height - padding).narrow(2, x * width + padding, width - padding).copy_(tensor[k])
            k = k + 1
    return grid


MAKE_GRID_CASES = [
    ((7, 1, 5, 6), dict(nrow=3)),
    ((7, 3, 5, 6), dict(nrow=3, padding=0, normalize=True)),
    ((5, 3, 4, 4), dict(normalize=True, scale_each=True, pad_value=1.0)),
    ((6, 2, 4, 3), dict(nrow=4, padding=3, normalize=True, value_range=(-0.5, 0.5))),
    ((1, 1, 4, 5), dict(normalize=True)),
    ((4, 5), dict()),
]


@pytest.mark.parametrize("shape,kw", MAKE_GRID_CASES)
def test_make_grid_is_torchvisions_grid(tmp_path, shape, kw):
    import torch

    x = (np.random.default_rng(len(shape) * 10 + shape[0]).standard_normal(shape) * 0.6 + 0.3).astype(np.float32)
    args = ", ".join(f"{k}={v!r}" for k, v in kw.items())
    src = f"import torch\nfrom torchvision.utils import make_grid\n\n\ndef grid(x):\n    return make_grid(x{', ' + args if args else ''})\n"
    r = translate_source(src, "g.py", "torch2jax")
    assert not errors(r) and "import torch" not in r.output and "make_grid_np(" in r.output, (r.findings, r.output)
    ns: dict = {}
    exec(compile(r.output, "g_jax.py", "exec"), ns)
    import jax.numpy as jnp

    got = ns["grid"](jnp.asarray(x))
    expect = make_grid_torch(torch.from_numpy(x), **kw).numpy()
    assert got.shape == expect.shape and got.dtype == expect.dtype
    np.testing.assert_allclose(got, expect, rtol=1e-6, atol=1e-7)
    as_list = ns["grid"]([jnp.asarray(t) for t in x]) if len(shape) == 4 else None
    if as_list is not None:
        np.testing.assert_allclose(as_list, expect, rtol=1e-6, atol=1e-7)


def random_resized_crop_class(size, **kw):
    """NumpyRandomResizedCrop as the translation writes it (exec'd from the output)."""
    args = "".join(f", {k}={v!r}" for k, v in kw.items())
    r = translate_source(f"import torchvision.transforms as T\n\ncrop = T.RandomResizedCrop({size!r}{args})\n",
                         "c.py", "torch2jax")
    assert not errors(r) and "import torch" not in r.output, r.findings
    assert any(f.severity is Severity.WARNING and "not PyTorch's random numbers" in f.message for f in r.findings)
    ns: dict = {}
    exec(compile(r.output, "c_jax.py", "exec"), ns)
    return ns["crop"]


@pytest.mark.parametrize("box,size", [((3, 5, 40, 30), (16, 16)), ((0, 0, 50, 64), (20, 24)), ((7, 2, 9, 13), (32, 24)),
                                      ((10, 10, 20, 20), (20, 20))])
def test_random_resized_crop_resizes_a_box_as_torch_for_tensors(box, size):
    """A ToTensor array (C, H, W): for a fixed box, the crop and torch's interpolate(bilinear, antialias=True)
    (torchvision's resize of a tensor) agree to float32 rounding, down- and upscaling."""
    import torch

    crop = random_resized_crop_class(list(size))
    x = np.random.default_rng(3).uniform(size=(3, 64, 80)).astype(np.float32)
    i, j, h, w = box
    got = crop.crop_resize(x, i, j, h, w)
    expect = torch.nn.functional.interpolate(torch.from_numpy(x[None, :, i:i + h, j:j + w]), size=size, mode="bilinear",
                                             align_corners=False, antialias=True)[0].numpy()
    assert got.shape == expect.shape == (3, *size) and got.dtype == np.float32
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("box,size", [((3, 5, 40, 30), (16, 16)), ((0, 0, 50, 64), (20, 24)), ((7, 2, 9, 13), (32, 24)),
                                      ((1, 1, 31, 17), (31, 40))])
@pytest.mark.parametrize("channels", [None, 3])
def test_random_resized_crop_resizes_a_uint8_image_as_pil(box, size, channels):
    """A uint8 image (torchvision's PIL image): for a fixed box, PIL's crop + resize(BILINEAR), pixel for pixel."""
    Image = pytest.importorskip("PIL.Image")
    crop = random_resized_crop_class(size)
    shape = (64, 80) if channels is None else (64, 80, channels)
    img = np.random.default_rng(4).integers(0, 256, shape).astype(np.uint8)
    img[20:40] = np.linspace(0, 255, 80).astype(np.uint8)[:, None] if channels else np.linspace(0, 255, 80).astype(np.uint8)
    i, j, h, w = box
    got = crop.crop_resize(img, i, j, h, w)
    expect = np.asarray(Image.fromarray(img).crop((j, i, j + w, i + h)).resize((size[1], size[0]), Image.BILINEAR))
    assert got.shape == expect.shape and got.dtype == np.uint8
    assert np.array_equal(got, expect), np.abs(got.astype(int) - expect).max()


def test_random_resized_crop_draws_boxes_as_torchvision_chooses_them():
    crop = random_resized_crop_class(8, scale=(0.3, 0.6), ratio=(0.5, 2.0))
    boxes = [crop.get_params(60, 90) for _ in range(400)]
    for i, j, h, w in boxes:
        assert 0 <= i <= 60 - h and 0 <= j <= 90 - w
        assert 0.3 * 5400 - 90 - 60 <= h * w <= 0.6 * 5400 + 90 + 60  # the area drawn, each side rounded
        assert 0.5 - 0.1 <= w / h <= 2.0 + 0.1
    assert len(set(boxes)) > 300  # drawn, not fixed
    out = crop(np.zeros((60, 90, 3), np.uint8))
    assert out.shape == (8, 8, 3)
    # no box fits (an area over the image's): torchvision's fallback, the centre box within the ratio's bounds
    wide = random_resized_crop_class(8, scale=(2.0, 3.0), ratio=(0.75, 1.3333333333333333))
    assert wide.get_params(60, 120) == (0, 20, 60, 80)  # in_ratio 2 > 4/3: h = 60, w = round(60 * 4/3)
    assert wide.get_params(100, 50) == (16, 0, 67, 50)  # in_ratio 0.5 < 3/4: w = 50, h = round(50 / 0.75)
    assert wide.get_params(50, 60) == (0, 0, 50, 60)  # within the bounds: the whole image
