"""fwport torch2jax: a whole module pickled with torch.save(model, f) and read back with torch.load(f).

``torch.save(model, f)`` → ``eqx.tree_serialise_leaves(f, model)`` (the model's arrays); ``m = torch.load(f)``
→ ``m = eqx.tree_deserialise_leaves(f, like)``, ``like`` a model of the same structure in scope: ``m`` itself
where the code builds it elsewhere, else the one model the file saves to the same path. The translation runs
under JAX alone and restores what was saved, as PyTorch does (both run in separate processes); a load with no
such model stays an error.
"""
from __future__ import annotations

from fwport.core.pipeline import translate_source
from helpers import error_findings as errors, needs
from runners import printed_json

SRC = '''\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x)


torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
x = torch.linspace(-1, 1, 12).reshape(4, 3)
y = torch.ones(4, 2)
init = model(x)
torch.save(model, "net.pt")
for _ in range(3):
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
trained = model(x)
copy = torch.load("net.pt", weights_only=False)
loaded_copy = copy(x)
model = torch.load("net.pt", map_location="cpu", weights_only=False)
loaded = model(x)
'''


def t2j(text: str):
    return translate_source(text, "net.py", "torch2jax")


def test_a_pickled_model_is_saved_and_read_back_as_its_arrays():
    r = t2j(SRC)
    assert not errors(r), r.findings
    out = r.output
    assert 'eqx.tree_serialise_leaves("net.pt", model)\n' in out
    assert 'copy = eqx.tree_deserialise_leaves("net.pt", model)\nloaded_copy = jax.vmap(copy)(x)\n' in out, out
    assert 'model = eqx.tree_deserialise_leaves("net.pt", model)\nloaded = jax.vmap(model)(x)\n' in out, out


def test_a_load_with_no_model_of_its_structure_stays_an_error():
    r = t2j(SRC + 'other = torch.load("elsewhere.pt")\n')
    errs = errors(r)
    assert len(errs) == 1 and "torch.load(...) reads a pickle" in errs[0].message and errs[0].line == 31, r.findings
    # two models saved to the same path: which one the file holds is not known statically
    r = t2j(SRC.replace('init = model(x)\n', 'init = model(x)\nsecond = Net()\ntorch.save(second, "net.pt")\n'))
    assert any(e.line == 29 and "torch.load(...) reads a pickle" in e.message for e in errors(r)), r.findings


_RUN = '''
import sys, json, runpy
import numpy as np
side, path = sys.argv[1:3]
if side == "jax":
    sys.modules["torch"] = None
ns = runpy.run_path(path, run_name="__main__")  # (torch pickles the class by its module's name)
print(json.dumps({k: np.asarray(ns[k].detach() if side == "torch" else ns[k]).tolist()
                  for k in ("init", "trained", "loaded_copy", "loaded")}))
'''


@needs("torch", "jax", "equinox")
def test_the_translation_restores_what_it_saved_as_pytorch_does(tmp_path):
    import numpy as np
    (tmp_path / "torch_side").mkdir()
    (tmp_path / "jax_side").mkdir()
    (tmp_path / "orig.py").write_text(SRC)
    (tmp_path / "jax.py").write_text(t2j(SRC).output)
    got = {}
    for side, path in (("torch", "orig.py"), ("jax", "jax.py")):
        printed = printed_json(_RUN, side, tmp_path / path, cwd=tmp_path / f"{side}_side",
                               env={"JAX_PLATFORMS": "cpu", "PATH": ""})
        got[side] = {k: np.array(v) for k, v in printed.items()}
        assert (tmp_path / f"{side}_side" / "net.pt").exists()
    for side, v in got.items():
        assert v["init"].shape == (4, 2)
        assert not np.allclose(v["trained"], v["init"], atol=1e-3), side  # training moved the weights
        # the load gives back the weights saved before training, into a copy and into the model itself
        np.testing.assert_allclose(v["loaded_copy"], v["init"], rtol=1e-6, atol=1e-7, err_msg=side)
        np.testing.assert_allclose(v["loaded"], v["init"], rtol=1e-6, atol=1e-7, err_msg=side)
