"""Draws from PyTorch's global generator in code no key reaches (a script's `def test():`, a Dataset filled with
random tensors, top-level code of a file with no torch.manual_seed): a root key made where the scope starts
(module level: above its first draw), `key = jax.random.key(0)`, split before each statement that draws
(`key, subkey = jax.random.split(key)`: in a loop's body anew at every iteration), one key per element of a
comprehension, and a warning that the numbers differ from PyTorch's and the seed is fixed. Run against PyTorch:
the same shapes and kinds, two draws independent, every iteration and element its own numbers, deterministic."""
from __future__ import annotations

import json
import textwrap

from fwport.core.finding import Severity
from helpers import by, needs, t2j
from runners import python

needs_frameworks = needs("jax", "torch")

SCRIPT = '''
import torch


def test():
    a = torch.randn(2, 3)
    b = torch.randn(2, 3)
    return a, b


def loop():
    out = []
    for _ in range(3):
        out.append(torch.rand(4))
        if torch.rand(1) < 2.0:
            out.append(torch.randn(2) * 0.0 + torch.randn(2))
    return out


def one():
    return torch.randint(0, 10, (5,))


class RandomData:
    def __init__(self, size):
        self.size = size
        self.data = [(torch.rand(20), torch.rand(1)) for _ in range(size)]

    def __len__(self):
        return self.size


x = torch.randn(3, 5)
perm = torch.randperm(6)
big = torch.rand(20000)
if __name__ == "__main__":
    ints = torch.randint(0, 10, (4,))
'''

HARNESS = '''

import json as _json
import numpy as _np


def _d(v):
    a = _np.asarray(v)
    return [list(a.shape), a.dtype.kind]


def _b(v):
    return _np.asarray(v).tobytes()


_a, _bb = test()
_l = loop()
_ds = RandomData(3)
_all = [_a, _bb, *_l, one(), x, perm, ints, *[t for p in _ds.data for t in p]]
print(_json.dumps({
    "shapes": [_d(v) for v in _all],
    "a_b_differ": _b(_a) != _b(_bb),
    "loop_all_differ": len({_b(v) for v in _l}) == len(_l),
    "items_differ": len({_b(p[0]) for p in _ds.data}) == 3 and _b(_ds.data[0][1]) != _b(_ds.data[1][1]),
    "perm": sorted(_np.asarray(perm).tolist()) == list(range(6)),
    "ints": all(0 <= i < 10 for i in _np.asarray(ints).tolist() + _np.asarray(one()).tolist()),
    "uniform_mean": round(float(_np.asarray(big).mean()), 1),
    "x_differs": _b(x) not in {_b(_a), _b(_bb)},
    "values": [float(_np.asarray(v).sum()) for v in _all],
}))
'''


def _run(path, block_torch: bool) -> dict:
    pre = "import sys; sys.modules['torch'] = None; " if block_torch else "import sys; "
    p = python("-c", pre + "exec(open(sys.argv[1]).read(), {'__name__': '__main__'})", path,
               side="jax" if block_torch else "torch", timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@needs_frameworks
def test_keyless_draws_run_with_pytorchs_shapes_independent_keys_and_deterministic(tmp_path):
    r = t2j(SCRIPT)
    assert not by(r, Severity.ERROR), r.findings
    src = tmp_path / "torch_side.py"
    src.write_text(textwrap.dedent(SCRIPT) + HARNESS)
    out = tmp_path / "jax_side.py"
    out.write_text(r.output + HARNESS)
    want = _run(src, block_torch=False)
    got = _run(out, block_torch=True)
    again = _run(out, block_torch=True)
    assert got["shapes"] == want["shapes"], (got["shapes"], want["shapes"])
    for flag in ("a_b_differ", "loop_all_differ", "items_differ", "perm", "ints", "x_differs"):
        assert want[flag] and got[flag], (flag, want, got)
    assert got["uniform_mean"] == want["uniform_mean"] == 0.5  # the same distribution (the numbers differ)
    assert got["values"] == again["values"]  # a fixed root key: the same numbers at every run


def test_the_root_key_where_the_scope_starts_a_split_per_statement_and_per_iteration():
    r = t2j(SCRIPT)
    out = r.output
    assert ("def test():\n"
            "    key = jax.random.key(0)  # fwport: PyTorch drew from its global generator here; seed fixed at 0\n"
            "    key, subkey = jax.random.split(key)\n"
            "    a = jax.random.normal(subkey, (2, 3))\n"
            "    key, subkey = jax.random.split(key)\n"
            "    b = jax.random.normal(subkey, (2, 3))\n") in out, out
    assert ("    for _ in range(3):\n"
            "        key, subkey = jax.random.split(key)\n"
            "        out.append(jax.random.uniform(subkey, 4))\n"
            "        key, subkey = jax.random.split(key)\n"
            "        if jax.random.uniform(subkey, 1) < 2.0:\n"
            "            key, subkey1, subkey2 = jax.random.split(key, 3)\n"
            "            out.append(jax.random.normal(subkey1, 2) * 0.0 + jax.random.normal(subkey2, 2))\n") in out, out
    # one draw in a function nothing else keys: the root key itself
    assert ("def one():\n"
            "    key = jax.random.key(0)  # fwport: PyTorch drew from its global generator here; seed fixed at 0\n"
            "    return jax.random.randint(key, (5,), 0, 10)\n") in out, out
    # a comprehension: one key per element, one per draw of the element
    assert ("        self.data = [(jax.random.uniform(k1, 20), jax.random.uniform(k2, 1)) for k1, k2 in "
            "jax.random.split(subkey, (size, 2))]\n") in out, out
    # module level: above its first draw, not above the definitions
    assert ("\n\nkey = jax.random.key(0)  # fwport: PyTorch drew from its global generator here; seed fixed at 0\n"
            "key, subkey = jax.random.split(key)\n"
            "x = jax.random.normal(subkey, (3, 5))\n") in out, out
    assert ('if __name__ == "__main__":\n'
            "    key, subkey = jax.random.split(key)\n"
            "    ints = jax.random.randint(subkey, (4,), 0, 10)\n") in out, out
    assert out.count("jax.random.key(0)") == 5, out
    warnings = {f.line: f.message for f in by(r, Severity.WARNING)}
    assert sorted(warnings) == [5, 13, 20, 26, 32], r.findings  # each scope's first draw
    assert "the seed is fixed at 0" in warnings[5] and "give test() a `key` argument" in warnings[5]
    assert "every RandomData(...) draws the same numbers" in warnings[26]
    assert "seed the root key as you like" in warnings[32]


def test_a_model_built_in_the_scope_takes_a_split_of_the_same_root_key():
    # one root key per scope: the model's initialisation (modules.py's _RootKey) and the training steps
    # (training.py) split the key the draws advance, never a second jax.random.key(0) with overlapping keys
    r = t2j('''
        import torch
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
                self.d = nn.Dropout(0.5)

            def forward(self, x):
                return self.d(self.fc(x))


        def main():
            x = torch.randn(3, 4)
            model = Net()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for i in range(3):
                opt.zero_grad()
                loss = model(x).sum()
                loss.backward()
                opt.step()
            return torch.rand(3)


        model = Net()
        y = model(torch.randn(2, 4))
    ''')
    assert not by(r, Severity.ERROR), r.findings
    out = r.output
    main = out.split("def main():\n")[1].split("\n\n\n")[0]
    assert main.count("jax.random.key(0)") == 1, main
    assert main.index("key, subkey = jax.random.split(key)") < main.index("key, model_key = jax.random.split(key)") \
        < main.index("key, step_key = jax.random.split(key)"), main
    assert ("key = jax.random.key(0)  # fwport: PyTorch drew from its global generator here; seed fixed at 0\n"
            "key, model_key = jax.random.split(key)\n"
            "model = Net(key=model_key)\n"
            # the model is in training mode here (no .eval()): its dropout draws, keys one per example
            # (the input bound to a name where it is passed: drawn once, its size read from the name)
            "key, subkey1, subkey2 = jax.random.split(key, 3)\n"
            "y = jax.vmap(model)(inputs := jax.random.normal(subkey1, (2, 4)), key=jax.random.split(subkey2, "
            "inputs.shape[0]))\n") in out, out


REFUSED = '''
import torch


class Data:
    noise = torch.randn(3)

    def __getitem__(self, index):
        return torch.randn(3)


f = lambda: torch.randn(3)


def g(n):
    while torch.rand(1) < 0.5:
        n += 1
    if n: y = torch.randn(2)
    return [torch.randn(i) for i in range(n) if i % 2], {i: torch.rand(1) for i in range(n)}


def h(x=torch.randn(2)):
    return x
'''


def test_draws_no_root_key_can_key_exactly_stay_errors_saying_what_to_write():
    r = t2j(REFUSED)
    errs = {f.line: f.message for f in by(r, Severity.ERROR)}
    assert sorted(errs) == [5, 8, 11, 15, 17, 18, 21], r.findings
    assert "class body" in errs[5]
    assert "jax.random.fold_in(self.key, index)" in errs[8]
    assert "inside a lambda" in errs[11]
    assert "while loop's test" in errs[15]
    assert "on a line of its own" in errs[17]
    assert "comprehension other than" in errs[18]
    assert "default argument" in errs[21]
    assert "jax.random" not in "".join(x for x in r.output.splitlines(True) if not x.lstrip().startswith("#"))


CALLED = '''
import torch


def get_batch(n=4):
    x = torch.randn(n)
    return x, x * 2


def noisy(x):
    return x + get_batch(x.shape[0])[0]


def callback():
    return torch.rand(2)


batches = []
for step in range(3):
    batch_x, batch_y = get_batch()
    batches.append(batch_x)
z = noisy(torch.zeros(4))
hooks = [callback]
'''


def test_a_drawing_function_the_file_calls_takes_a_key_its_callers_split():
    r = t2j(CALLED)
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    out = r.output
    assert ("def get_batch(n=4, *, key):\n"
            "    x = jax.random.normal(key, n)\n") in out, out
    assert ("def noisy(x, *, key):\n"
            "    return x + get_batch(x.shape[0], key=key)[0]\n") in out, out
    # used as a value: a root key of its own (its warning says every call draws the same numbers)
    assert "def callback():\n    key = jax.random.key(0)" in out, out
    assert ("for step in range(3):\n"
            "    key, subkey = jax.random.split(key)\n"
            "    batch_x, batch_y = get_batch(key=subkey)\n") in out, out
    assert "z = noisy(jnp.zeros(4), key=subkey)\n" in out, out
    warned = sorted(f.line for f in r.findings if f.severity is Severity.WARNING)
    assert warned == [14, 19], r.findings  # callback(), the module's top-level code (not the functions given a key)


@needs_frameworks
def test_each_call_of_a_function_given_a_key_draws_new_numbers(tmp_path):
    r = t2j(CALLED)
    path = tmp_path / "t.py"
    path.write_text(r.output + "\nimport numpy as np\nprint(len({np.asarray(b).tobytes() for b in batches}), "
                    "np.asarray(z).shape)\n")
    p = python("-c", "import sys; sys.modules['torch'] = None; exec(open(sys.argv[1]).read())", path, side="jax",
               timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.split("\n")[0] == "3 (4,)"


LOSS_DRAWS = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.ones(3, 4)
losses = []
for i in range(3):
    opt.zero_grad()
    loss = model(x + 0.1 * torch.randn(3, 4)).sum()
    loss.backward()
    opt.step()
    losses.append(float(loss))
'''


@needs_frameworks
def test_a_draw_in_a_loss_reaches_the_train_step_as_a_new_key_per_step(tmp_path):
    r = t2j(LOSS_DRAWS)
    assert not [f for f in r.findings if f.severity is Severity.ERROR], r.findings
    assert "def train_step(model, opt_state, subkey):\n" in r.output, r.output
    assert ("    key, subkey = jax.random.split(key)\n"
            "    model, opt_state, loss = train_step(model, opt_state, subkey)\n") in r.output, r.output
    path = tmp_path / "t.py"
    path.write_text(r.output + "\nprint(len(set(losses)))\n")
    p = python("-c", "import sys; sys.modules['torch'] = None; exec(open(sys.argv[1]).read())", path, side="jax",
               timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == "3"


SEEDED = '''
import torch

torch.manual_seed(3)
x = torch.randn(3)
y = torch.randn(3)
zs = []
for i in range(3):
    zs.append(torch.rand(2))
'''


@needs_frameworks
def test_draws_after_torch_manual_seed_split_its_root_key(tmp_path):
    # before: every draw of the scope read the seed's key itself, x == y and the same zs at every iteration
    r = t2j(SEEDED)
    assert not [f for f in r.findings if f.severity is not Severity.INFO], r.findings
    assert ("key = jax.random.key(3)\n"
            "key, subkey = jax.random.split(key)\n"
            "x = jax.random.normal(subkey, 3)\n") in r.output, r.output
    assert "jax.random.key(0)" not in r.output
    path = tmp_path / "t.py"
    path.write_text(r.output + "\nimport numpy as np\nprint(bool((np.asarray(x) != np.asarray(y)).all()), "
                    "len({np.asarray(z).tobytes() for z in zs}))\n")
    p = python("-c", "import sys; sys.modules['torch'] = None; exec(open(sys.argv[1]).read())", path, side="jax",
               timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == "True 3"


def test_a_name_the_keys_would_take_is_refused_never_overwritten():
    r = t2j('''
        import torch


        def f(n):
            subkey = n * 2
            return torch.randn(subkey)


        def g(k):
            return [torch.randn(k) for _ in range(3)]
    ''')
    errs = {f.line: f.message for f in r.findings if f.severity is Severity.ERROR}
    assert sorted(errs) == [6, 10], r.findings
    assert "uses the name subkey" in errs[6] and "reads k, a name fwport gives the keys" in errs[10]


def test_a_function_whose_caller_cannot_split_keeps_a_root_key_of_its_own():
    r = t2j('''
        import torch


        def get_batch():
            return torch.randn(4)


        def main():
            subkey = 1
            return get_batch(), subkey
    ''')
    assert "def get_batch():\n    key = jax.random.key(0)" in r.output, r.output
    assert "return get_batch(), subkey\n" in r.output
