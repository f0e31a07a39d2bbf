"""PyTorch's backend switches (torch.backends.cudnn.*, allow_tf32, set_float32_matmul_precision,
use_deterministic_algorithms) → jax.config.update("jax_default_matmul_precision", ...) or removed with a finding
(fwport/packs/torch2jax/backends.py); the translation run with JAX (torch unimportable) sets the precision
PyTorch's switches asked for. Device queries (torch.cuda.device_count, torch.accelerator.device_count,
is_bf16_supported; rules in rules/torch2jax) answer as PyTorch does on this machine."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import python


def t2j(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "m.py", "torch2jax")


SCRIPT = '''
import torch
import torch.backends.cudnn as cudnn

torch.backends.cuda.matmul.allow_tf32 = True  # allow tf32 on matmul
torch.backends.cudnn.allow_tf32 = True  # allow tf32 on cudnn


def setup(fast, tf32):
    if fast:
        cudnn.benchmark = True
    torch.backends.cudnn.deterministic = True
    torch.backends.cuda.matmul.allow_tf32 = tf32
    return torch.zeros(2)


def lower():
    torch.set_float32_matmul_precision("medium")
'''


def test_switches_become_jax_config_or_go():
    r = t2j(SCRIPT)
    out = r.output
    assert "torch" not in out and "cudnn" not in out
    assert out.count('jax.config.update("jax_default_matmul_precision", "tensorfloat32")  # allow tf32 on matmul') == 1
    assert "import jax\n" in out
    # the only statement of its block is removed: `pass` keeps the block
    assert "    if fast:\n        pass\n" in out
    assert 'jax.config.update("jax_default_matmul_precision", "tensorfloat32" if tf32 else "float32")' in out
    assert 'jax.config.update("jax_default_matmul_precision", "bfloat16")' in out
    errors = [f for f in r.findings if f.severity is Severity.ERROR]
    assert errors == []
    warnings = [f.message for f in r.findings if f.severity is Severity.WARNING]
    # deterministic=True has no JAX switch: the XLA flag is named
    assert any("--xla_gpu_deterministic_ops=true" in m and "deterministic = True" in m for m in warnings)
    # the two flags are set apart (True / tf32): one JAX setting cannot keep them apart
    assert any("different precisions" in m for m in warnings)
    infos = [f.message for f in r.findings if f.severity is Severity.INFO]
    assert any("cudnn.benchmark = True: removed" in m for m in infos)
    assert any("already sets JAX's precision" in m for m in infos)


def test_removed_line_keeps_the_blank_lines_above():
    r = t2j('''
        import torch

        torch.backends.cudnn.benchmark = True
        x = torch.zeros(3)
    ''')
    assert r.output.split("\n")[:4] == ["import jax.numpy as jnp", "", "x = jnp.zeros(3)", ""]


@pytest.mark.parametrize("src, says", [
    ("torch.backends.cuda.matmul.allow_tf32 = False\n", "sets only matmuls' precision"),
    ("torch.backends.cudnn.allow_tf32 = False\n", "sets only convolutions' precision"),
])
def test_one_switch_of_two_is_a_warning(src, says):
    r = t2j("import torch\n\n" + src)
    assert 'jax.config.update("jax_default_matmul_precision", "float32")' in r.output
    assert [f.message for f in r.findings if f.severity is Severity.WARNING and says in f.message]


def test_both_switches_alike_are_no_warning():
    r = t2j("import torch\n\ntorch.backends.cuda.matmul.allow_tf32 = False\ntorch.backends.cudnn.allow_tf32 = False\n")
    assert r.output.count("jax.config.update") == 1
    assert not [f for f in r.findings if f.severity is not Severity.INFO]


def test_unreadable_precision_is_left_for_the_residue_scan():
    r = t2j("import torch\n\ndef f(p):\n    torch.set_float32_matmul_precision(p)\n")
    assert "torch.set_float32_matmul_precision(p)" in r.output
    assert [f for f in r.findings if f.severity is Severity.ERROR]


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs jax")
def test_translation_sets_the_precision_pytorch_asked_for(tmp_path):
    (tmp_path / "m.py").write_text(t2j(SCRIPT).output)
    driver = textwrap.dedent('''
        import json, sys
        sys.modules["torch"] = None
        sys.path.insert(0, sys.argv[1])
        import jax
        import m
        seen = [jax.config.jax_default_matmul_precision]
        m.setup(True, False)
        seen.append(jax.config.jax_default_matmul_precision)
        m.setup(False, True)
        seen.append(jax.config.jax_default_matmul_precision)
        m.lower()
        seen.append(jax.config.jax_default_matmul_precision)
        print("RESULT " + json.dumps(seen))
    ''')
    p = subprocess.run([sys.executable, "-c", driver, str(tmp_path)], capture_output=True, text=True, timeout=300)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert line, p.stderr[-2000:]
    assert json.loads(line[0][7:]) == ["tensorfloat32", "float32", "tensorfloat32", "bfloat16"]


DEVICES = '''
import torch

counts = [torch.cuda.device_count(), torch.accelerator.device_count(), torch.cuda.is_available(),
          torch.backends.mps.is_available()]
bf16 = 'bfloat16' if torch.cuda.is_bf16_supported() else 'float16'
'''


@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("jax", "torch")), reason="needs jax and torch")
def test_device_queries_answer_as_pytorch_does_here(tmp_path):
    r = t2j(DEVICES)
    assert not [f for f in r.findings if f.severity is Severity.ERROR] and "torch" not in r.output
    seen = {}
    for side, code in (("torch", textwrap.dedent(DEVICES)), ("jax", r.output)):
        (tmp_path / f"{side}.py").write_text(code)
        pre = 'import sys; sys.modules["torch"] = None; ' if side == "jax" else ""
        p = python("-c", pre + f"import runpy, json; ns = runpy.run_path({str(tmp_path / (side + '.py'))!r}); "
                   "print('RESULT ' + json.dumps(ns['counts']))", side=f"torch2jax-{side}", timeout=300)
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
        assert line, p.stderr[-2000:]
        seen[side] = json.loads(line[0][7:])
    assert seen["jax"] == seen["torch"]  # (on this machine: no GPU, [0, 0, false, false] on both)


AUTOCAST = '''
import torch
from torch.amp import autocast


@autocast('cuda', enabled = False)
def rotate(x):
    return x * 2


def run(x):
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=False):
        y = rotate(x)
    with torch.cuda.amp.autocast():
        return y @ y.T
'''


def test_autocast_becomes_nullcontext_and_its_decorator_goes():
    r = t2j(AUTOCAST)
    out = r.output
    assert "torch" not in out and "autocast" not in out and "@autocast" not in out and "\n\n\ndef rotate" in out
    assert out.count("with contextlib.nullcontext():") == 2
    approx = [f for f in r.findings if f.code == "approximate"]
    assert len(approx) == 1 and approx[0].line == 13  # only the region autocast is on in
    assert not [f for f in r.findings if f.severity is Severity.ERROR]


@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("jax", "torch")), reason="needs jax and torch")
def test_autocast_translation_computes_what_pytorch_does_on_the_cpu(tmp_path):
    import numpy as np
    from runners import torch_and_jax
    body = '''
x = np.arange(12.0).reshape(3, 4) / 7
if side == "torch":
    x = torch.tensor(x)
np.save(OUT, np.asarray(ns["run"](x)))
'''
    t, j = torch_and_jax(tmp_path, textwrap.dedent(AUTOCAST).lstrip("\n"), t2j(AUTOCAST).output, body)
    np.testing.assert_allclose(j, t, rtol=1e-12)  # (CUDA autocast leaves CPU arrays in their dtype)
