"""Double precision: a PyTorch program that asks for float64 (dtype=torch.double, model.double()) gets JAX's
x64 mode switched on after its imports, and model.double() casts every floating array of the module; run
with torch unimportable, the translation computes in float64 (without the switch JAX would give float32
arrays for every float64 request and say nothing)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from fwport.core.pipeline import translate_source
from fwport.packs.torch2jax.x64 import LINE

SOURCE = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x)


def build():
    net = Net()
    net.double()
    return net, torch.zeros(3, dtype=torch.double)
'''


def test_float64_programs_switch_x64_on_and_cast_the_model():
    r = translate_source(textwrap.dedent(SOURCE).lstrip("\n"), "f.py", "torch2jax")
    assert r.output.count(LINE) == 1
    assert r.output.index(LINE) < r.output.index("class Net")
    assert "net = jax.tree_util.tree_map(lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, net)" \
        in r.output
    again = translate_source(r.output, "f.py", "torch2jax")
    assert again.output.count(LINE) == 1  # written once


def test_a_float32_program_is_left_as_it_is():
    r = translate_source("import torch\nx = torch.zeros(3, dtype=torch.float32)\n", "f.py", "torch2jax")
    assert "jax_enable_x64" not in r.output


def test_the_translation_computes_in_float64(tmp_path):
    pytest.importorskip("jax")
    pytest.importorskip("equinox")
    r = translate_source(textwrap.dedent(SOURCE).lstrip("\n"), "f.py", "torch2jax")
    (tmp_path / "t.py").write_text(r.output)
    run = ("import sys, runpy\nsys.modules['torch'] = None\nns = runpy.run_path(sys.argv[1])\n"
           "net, x = ns['build']()\nprint(net.fc.weight.dtype, x.dtype, net(x).dtype)\n")
    p = subprocess.run([sys.executable, "-c", run, str(tmp_path / "t.py")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.split() == ["float64", "float64", "float64"]
