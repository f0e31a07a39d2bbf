"""torch2jax constructs met in wider real PyTorch code (issue 10; /tmp/crash/pt): nn.InstanceNorm1d/2d/3d
(→ eqx.nn.GroupNorm with one group per channel, fast_neural_style), nn.GroupNorm, torch.as_tensor, the
elementwise comparisons torch.gt/lt/ge/le/eq/ne, torch dtypes as values and the casts x.to(dtype) / x.type(dtype)
(→ x.astype), a model's cast (→ a cast of its arrays). Each is translated, run with torch unimportable, and compared
with PyTorch: modules through `fwport verify` (forward and gradients), functions in float64."""
from __future__ import annotations

import textwrap

import pytest

from helpers import error_findings as errors, needs, t2j
from runners import SIDE_HEAD, python, saved_arrays, verify_torch2jax

needs_frameworks = needs("torch", "jax", "equinox")


NORMS = '''
import torch
from torch import nn
import torch.nn.functional as F


class Norms(nn.Module):
    def __init__(self, channels=8):
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.inorm = nn.InstanceNorm2d(channels, affine=True)
        self.plain = nn.InstanceNorm2d(channels, eps=1e-3)
        self.gnorm = nn.GroupNorm(4, channels)
        self.conv1 = nn.Conv1d(channels, 6, 1)
        self.inorm1 = nn.InstanceNorm1d(6, affine=True)

    def forward(self, x):
        y = F.relu(self.inorm(self.conv(x)))
        y = self.plain(y * 2.0 + 1.0)
        y = self.gnorm(y) * 0.5 + y
        y = torch.where((y > 0).to(torch.bool), y, y * 0.5) + (y < 0.5).type(torch.float64)
        return self.inorm1(self.conv1(y.flatten(2)))
'''


def test_instance_and_group_norm_become_equinox_group_norms():
    r = t2j(NORMS)
    assert not errors(r), r.findings
    out = r.output
    # one group per channel; affine written always (PyTorch's default False, Equinox's True)
    assert "self.inorm = eqx.nn.GroupNorm(channels, channels, channelwise_affine=True)" in out
    assert "self.plain = eqx.nn.GroupNorm(channels, channels, eps=1e-3, channelwise_affine=False)" in out
    assert "self.gnorm = eqx.nn.GroupNorm(4, channels)" in out
    assert "self.inorm1 = eqx.nn.GroupNorm(6, 6, channelwise_affine=True)" in out
    assert "self.conv1(y.reshape(*y.shape[:1], -1))" in out  # flatten(2) of a batch: one example (C, H * W)


@pytest.mark.parametrize("src, message", [
    ("nn.InstanceNorm2d(8, track_running_stats=True)", "track_running_stats"),
    ("nn.InstanceNorm2d(cfg['c'])", "give it a name first"),
])
def test_instance_norm_with_what_has_no_translation_is_an_error(src, message):
    r = t2j(f'''
        import torch
        from torch import nn


        class Net(nn.Module):
            def __init__(self, cfg):
                super().__init__()
                self.norm = {src}

            def forward(self, x):
                return self.norm(x)
        ''')
    errs = errors(r)
    assert errs and message in errs[0].message and errs[0].line == 8, r.findings


@needs_frameworks
def test_the_norms_verify_against_pytorch(tmp_path):
    src = tmp_path / "norms.py"
    src.write_text(textwrap.dedent(NORMS).lstrip("\n"))
    translated = tmp_path / "norms_jax.py"
    translated.write_text(t2j(NORMS).output)
    cert = verify_torch2jax(src, translated, "Norms", ["float32[3,3,6,5]"])
    assert cert["verdict"] == "pass", str(cert)[:3000]
    assert cert["results"]["outputs"] and cert["results"]["gradients"]


FUNCS = '''
import numpy as np
import torch

DTYPES = {"half": torch.float16, "single": torch.float32, "double": torch.float64}


def ops(a, b, n, dtype=torch.float32):
    ok = a.dtype == torch.float64 and DTYPES["half"] == torch.half
    return [ok, torch.zeros(2, dtype=dtype), torch.zeros(2, dtype=DTYPES["double"]).dtype == DTYPES["double"],
            a.to(torch.float32), (a > b).type(torch.int32), a.to(dtype=torch.float16), (a + 1).to(torch.bool),
            torch.as_tensor(n).type(torch.long), a[0].to(torch.int8) if ok else a,
            torch.as_tensor(n), torch.as_tensor([1.5, 2.0, -3.0], dtype=torch.float64),
            torch.as_tensor(n, dtype=torch.float32, device="cpu"),
            torch.gt(a, b), torch.lt(a, 0.0), torch.ge(a, b), torch.le(b, 0.1), torch.eq(a, a), torch.ne(a, b),
            torch.greater(a, 0.5), torch.less_equal(a, b), torch.not_equal(torch.gt(a, 0), torch.lt(b, 0)),
            torch.gt(a.round().long(), 0.5)]
'''

_RUN = SIDE_HEAD + """
rng = np.random.default_rng(0)
a, b = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
a[0, :2] = b[0, :2]  # equal entries: ge/le/eq/ne differ from gt/lt there
n = rng.standard_normal((2, 3))
if side == "torch":
    import torch
    a, b = torch.from_numpy(a), torch.from_numpy(b)
else:
    import jax.numpy as jnp
    a, b = jnp.asarray(a), jnp.asarray(b)
np.savez(sys.argv[3], *[np.asarray(o) for o in ns["ops"](a, b, n)])
"""


@needs_frameworks
def test_as_tensor_and_comparisons_compute_what_pytorch_computes(tmp_path):
    import numpy as np
    r = t2j(FUNCS)
    assert not errors(r), r.findings
    assert "jnp.asarray([1.5, 2.0, -3.0], dtype=jnp.float64)" in r.output and "device" not in r.output
    assert 'DTYPES = {"half": jnp.float16, "single": jnp.float32, "double": jnp.float64}' in r.output
    assert "(a > b).astype(jnp.int32)" in r.output and "a.astype(jnp.float16)" in r.output and "torch" not in r.output
    paths = {"torch": tmp_path / "f.py", "jax": tmp_path / "f_jax.py"}
    paths["torch"].write_text(textwrap.dedent(FUNCS).lstrip("\n"))
    paths["jax"].write_text(r.output)
    outs = {}
    for side, path in paths.items():
        outs[side] = saved_arrays(_RUN, side, path, tmp_path / f"{side}.npz")
    assert len(outs["torch"]) == len(outs["jax"]) == 22
    for i, (t, j) in enumerate(zip(outs["torch"], outs["jax"])):
        assert t.shape == j.shape and t.dtype == j.dtype, f"output {i}: {t.shape} {t.dtype} vs {j.shape} {j.dtype}"
        np.testing.assert_array_equal(j, t, err_msg=f"output {i}")


MODEL_CAST = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)


model = Net()
model.to(torch.float64)
half = model.to(torch.half)
'''


def test_a_models_cast_is_a_cast_of_its_arrays_and_inside_an_expression_an_error():
    r = t2j(MODEL_CAST)
    assert "model = jax.tree_util.tree_map(lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, model)" \
        in r.output
    errs = errors(r)
    assert len(errs) == 1 and errs[0].line == 16 and "a model's cast inside an expression" in errs[0].message, r.findings


def test_a_dtype_held_by_a_name_is_passed_on_and_a_computed_one_refused():
    r = t2j('''
        import torch

        def f(n, dtype=torch.float32):
            return torch.zeros(n, dtype=dtype), torch.ones(n, dtype=pick(dtype))
        ''')
    assert "def f(n, dtype=jnp.float32):" in r.output and "jnp.zeros(n, dtype=dtype)" in r.output
    errs = errors(r)
    assert len(errs) == 1 and "dtype=pick(dtype)" in errs[0].message, r.findings


DATASET = '''
import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset, DataLoader


class Squares(Dataset):
    def __init__(self, n):
        self.x = np.arange(n, dtype=np.float32)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.x[i] ** 2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.out = nn.Linear(3, 2, bias=False)

    def forward(self, x):
        return self.out(self.fc(x))


def count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def run():
    model = Net()
    sums = [float(b.sum()) + float(a.sum()) for a, b in DataLoader(Squares(10), batch_size=4)]
    return sums, count(model), len([p for p in model.parameters()])
'''


@needs_frameworks
def test_a_dataset_subclass_loads_and_a_models_parameters_count_as_in_pytorch(tmp_path):
    import runpy
    r = t2j(DATASET)
    assert not errors(r), r.findings
    out = r.output
    assert "class Squares:" in out and "def count(model: eqx.Module) -> int:" in out
    assert "for p in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array)) if True)" in out
    src, translated = tmp_path / "d.py", tmp_path / "d_jax.py"
    src.write_text(textwrap.dedent(DATASET).lstrip("\n"))
    translated.write_text(out)
    want = runpy.run_path(str(src))["run"]()
    code = f"import sys, runpy; sys.modules['torch'] = None; print(repr(runpy.run_path({str(translated)!r})['run']()))"
    p = python("-c", code, side="torch2jax-jax", timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert eval(p.stdout.strip()) == want  # batches 4, 4, 2; 4*3 + 3 + 3*2 = 21 parameters in 3 arrays


def test_a_loop_that_changes_each_parameter_is_an_error():
    r = t2j('''
        import torch
        from torch import nn

        model = nn.Sequential(nn.Linear(4, 3))
        for p in model.parameters():
            p.requires_grad = False
        norms = [p.grad.norm() for p in model.parameters()]
        ''')
    errs = [e for e in errors(r) if "JAX arrays are immutable" in e.message]
    assert [e.line for e in errs] == [5, 7], r.findings
