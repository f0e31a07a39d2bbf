"""torch2jax: nn.Sequential models built at module level (yunjey's pytorch-tutorial GAN, tests/data/
torch_gan_sequential.py) → ``eqx.nn.Sequential([...])`` whose drawing layers each take a key split from the root
key (torch.manual_seed's), called per example; the GAN loop over them trains as PyTorch's: run on both sides from
the same weights (the translation with torch unimportable), the weights and every loss compared after 2 steps of
each optimizer. A Sequential holding something fwport does not translate as a layer stays an error."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source
from runners import python

pytest.importorskip("torch")
pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parent.parent
SEQ = ROOT / "tests" / "data" / "torch_gan_sequential.py"

_RUN = """import json, runpy, sys
import numpy as np
path, side = sys.argv[1:3]
rng = np.random.default_rng(0)
shapes = {"d0": (8, 6), "d2": (1, 8), "g0": (8, 4), "g2": (6, 8)}
init = {k: (rng.standard_normal(s) * 0.5, rng.standard_normal(s[0]) * 0.1) for k, s in shapes.items()}
data = [(rng.standard_normal((5, 6)), rng.standard_normal((5, 4))) for _ in range(2)]
prep = type(sys)("gan_prep")
if side == "torch":
    import torch
    def prepare(d, g):
        with torch.no_grad():
            for layer, k in ((d[0], "d0"), (d[2], "d2"), (g[0], "g0"), (g[2], "g2")):
                layer.weight.copy_(torch.tensor(init[k][0])); layer.bias.copy_(torch.tensor(init[k][1]))
        return d, g
    prep.batches = [(torch.tensor(r, dtype=torch.float32), torch.tensor(z, dtype=torch.float32)) for r, z in data]
    read = lambda m, i: m[i].weight.detach().numpy().tolist()
else:
    sys.modules["torch"] = None
    import equinox as eqx, jax.numpy as jnp
    def prepare(d, g):
        out = []
        for m, (a, b) in ((d, ("d0", "d2")), (g, ("g0", "g2"))):
            for i, k in ((0, a), (2, b)):
                w, bias = (jnp.asarray(v, jnp.float32) for v in init[k])
                m = eqx.tree_at(lambda t: (t.layers[i].weight, t.layers[i].bias), m, (w, bias))
            out.append(m)
        return tuple(out)
    prep.batches = [(jnp.asarray(r, jnp.float32), jnp.asarray(z, jnp.float32)) for r, z in data]
    read = lambda m, i: np.asarray(m.layers[i].weight).tolist()
prep.prepare = prepare
sys.modules["gan_prep"] = prep
g = runpy.run_path(path, run_name="__main__")
print(json.dumps(dict(d0=read(g["D"], 0), d2=read(g["D"], 2), g0=read(g["G"], 0), g2=read(g["G"], 2),
                      d_losses=g["d_losses"], g_losses=g["g_losses"])))
"""


def _translate(src: str):
    r = translate_source(src, "x.py", pack="torch2jax")
    return r.output, r.findings


def test_a_module_level_sequential_becomes_an_equinox_sequential_with_split_keys():
    text, findings = _translate(SEQ.read_text())
    assert not [f for f in findings if f.severity is Severity.ERROR], findings
    assert ("key, D_key1, D_key2 = jax.random.split(key, 3)\nD = eqx.nn.Sequential([\n"
            "    eqx.nn.Linear(image_size, hidden_size, key=D_key1),\n") in text, text
    assert "    eqx.nn.Linear(hidden_size, image_size, key=G_key2),\n" in text
    assert "D, opt_state_d, d_loss = train_step_d(D, opt_state_d, images, real_labels, fake_images, fake_labels)\n" in text
    assert "        fake_images = jax.vmap(G)(z)\n        outputs = jax.vmap(D)(fake_images)\n" in text
    assert any(f.code == "key-added" and "D = nn.Sequential(...) → eqx.nn.Sequential([...])" in f.message
               for f in findings), findings


def test_without_a_seed_the_keys_are_split_from_a_key_of_their_own():
    text, _ = _translate(SEQ.read_text().replace("torch.manual_seed(0)\n", ""))
    assert "D_key1, D_key2 = jax.random.split(jax.random.key(0), 2)\nD = eqx.nn.Sequential([\n" in text, text


def test_the_sequential_gan_trains_as_pytorch_does(tmp_path):
    import numpy as np
    text, _ = _translate(SEQ.read_text())
    out = tmp_path / "out.py"
    out.write_text(text)
    results = []
    for path, side in ((SEQ, "torch"), (out, "jax")):
        p = python("-c", _RUN, path, side, side=side, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        results.append(json.loads(p.stdout.strip().splitlines()[-1]))
    t, j = results
    assert len(t["g_losses"]) == len(j["g_losses"]) == 2
    for k in ("d0", "d2", "g0", "g2", "d_losses", "g_losses"):
        np.testing.assert_allclose(j[k], t[k], rtol=1e-4, atol=1e-5, err_msg=k)


@pytest.mark.parametrize("member", [
    "nn.Sequential(nn.Linear(hidden_size, 1))",  # a Sequential inside
    "nn.Linear(hidden_size, 1, bias=nn.Linear(1, 1))",  # a layer in a member's arguments
])
def test_a_sequential_of_other_members_stays_an_error(member):
    src = SEQ.read_text().replace("    nn.Linear(hidden_size, 1),\n", f"    {member},\n")
    text, findings = _translate(src)
    assert any("of layers built outside a module class" in f.message for f in findings
               if f.severity is Severity.ERROR), findings
