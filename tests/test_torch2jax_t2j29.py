"""torch2jax gaps of t2j29: names the output reads that the file binds (clashes.py), nn.Linear on inputs of
rank > 1 per example, `+=` on tensors outside forward, module outputs in the in-place check, packed sequences."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from fwport.core.pipeline import translate_source


def _t(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "f.py", "torch2jax")


def _errors(r):
    return [f for f in r.findings if f.severity.value == "error"]


def _run(tmp_path, text: str, script: str) -> str:
    """Run the translation with torch unimportable, then ``script`` (ns: the translation's globals)."""
    (tmp_path / "t.py").write_text(text)
    run = "import sys, runpy\nsys.modules['torch'] = None\nns = runpy.run_path(sys.argv[1])\n" + script
    p = subprocess.run([sys.executable, "-c", run, str(tmp_path / "t.py")], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


# --- 1. names the file binds --------------------------------------------------------------------------------

REBOUND_NP = '''
import numpy as onp
import torch
from torch.utils.data import DataLoader, TensorDataset

np = 3  # a count, not numpy

x = torch.tensor(onp.arange(24, dtype=onp.float32).reshape(8, 3))
loader = DataLoader(TensorDataset(x, x), batch_size=4, shuffle=True)
'''


def test_helpers_spell_numpy_through_the_files_own_alias_when_np_is_rebound(tmp_path):
    r = _t(REBOUND_NP)
    assert not _errors(r)
    assert "np." not in r.output.replace("onp.", "").replace("jnp.", "")
    assert "onp.random.default_rng(seed)" in r.output and "import numpy as np\n" not in r.output
    pytest.importorskip("jax")
    out = _run(tmp_path, r.output, "print(ns['np'], sorted(float(v) for xb, yb in ns['loader'] for v in xb[:, 0]))\n")
    assert out.split("\n")[0] == "3 [0.0, 3.0, 6.0, 9.0, 12.0, 15.0, 18.0, 21.0]"


def test_helpers_import_numpy_under_a_free_name_when_np_is_taken():
    r = _t(REBOUND_NP.replace("import numpy as onp\n", "").replace("onp.arange(24, dtype=onp.float32)",
                                                                    "[float(i) for i in range(24)]"))
    assert "\nimport numpy\n" in r.output and "numpy.random.default_rng(seed)" in r.output
    assert "import numpy as np" not in r.output
    again = translate_source(r.output, "f.py", "torch2jax")
    assert again.output == r.output


def test_a_file_that_binds_jnp_gets_an_error_at_the_binding():
    r = _t('''
        import torch

        jnp = 3
        x = torch.zeros(3)
    ''')
    (e,) = _errors(r)
    assert (e.line, e.code) == (3, "unsupported-construct") and "`jnp`" in e.message
    assert r.output.index("# fwport: unsupported-construct: this file binds `jnp`") < r.output.index("jnp = 3")
    r = _t("import numpy as jnp\nimport torch\nx = torch.zeros(3)\n")
    (e,) = _errors(r)
    assert e.line == 1 and "imports numpy as `jnp`" in e.message
    # the module's own import, a name bound only inside a function, a class attribute: no clash
    r = _t("import jax.numpy as jnp\nimport torch\n\n\ndef f():\n    jnp = 1\n    return jnp\n\n\nclass A:\n"
           "    jnp = 2\n\n\nx = torch.zeros(3)\n")
    assert not _errors(r)
