"""Helpers the translation writes into a file that loads data (the output never depends on fwport or
PyTorch): ``torch.utils.data.TensorDataset`` → ``ArrayDataset``, ``DataLoader`` → ``NumpyLoader``, and
``torch.load`` of a file of numpy data → ``load_pickled_arrays`` (the training pass decides which loads).

Why a loader written into the file rather than a library: a JAX user batches numpy arrays by hand or
with a small generator; ``NumpyLoader`` is that generator with DataLoader's interface (``len``,
``.dataset``, ``batch_size``, ``shuffle``, ``drop_last``), so the loops over it stay as written.
Shuffling draws from a numpy ``Generator`` seeded with ``seed`` (explicit, like a JAX key), which
gives PyTorch's distribution of orders, not its order. Batches are tuples of JAX arrays, one per
field of the examples; an ``ArrayDataset`` is sliced a batch at a time (its arrays kept as numpy,
so that no batch copies the whole array from the device), any other indexable dataset (a
torchvision dataset, a list of pairs) is read example by example and stacked, as PyTorch's default
collate stacks it.

The call transform ``data-helper`` (ops.py) asks for a helper; the training pass's finishing step writes
the definitions of those the output calls and does not define, after the imports (:func:`finish`).
"""
from __future__ import annotations

import libcst as cst

from fwport.packs.torch2jax.ops import HELPERS

_ARRAY_DATASET = '''
class ArrayDataset:
    """PyTorch's TensorDataset: example i is the tuple of the i-th rows of arrays of one length."""

    def __init__(self, *arrays):
        assert all(len(a) == len(arrays[0]) for a in arrays), "arrays of different lengths"
        self.arrays = tuple({np}asarray(a) for a in arrays)

    def __len__(self):
        return len(self.arrays[0])

    def __getitem__(self, i):
        return tuple(a[i] for a in self.arrays)
'''

_NUMPY_LOADER = '''
class NumpyLoader:
    """PyTorch's DataLoader batching: batch_size examples at a time, the last batch smaller
    unless drop_last; with shuffle=True a new permutation each pass, drawn from a numpy Generator
    seeded with `seed` (not PyTorch's order). Each batch is a tuple of JAX arrays, one per field of
    the examples (an ArrayDataset is sliced, another dataset read example by example and stacked)."""

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, seed=0):
        self.dataset, self.batch_size, self.shuffle, self.drop_last = dataset, batch_size, shuffle, drop_last
        self.rng = {np}random.default_rng(seed)

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        n = len(self.dataset)
        order = self.rng.permutation(n) if self.shuffle else {np}arange(n)
        for b in range(len(self)):
            idx = order[b * self.batch_size:(b + 1) * self.batch_size]
            if isinstance(self.dataset, ArrayDataset):
                yield tuple({jnp}asarray(a[idx]) for a in self.dataset.arrays)
                continue
            examples = [self.dataset[int(i)] for i in idx]
            if isinstance(examples[0], (tuple, list)):
                yield tuple({jnp}asarray({np}stack([{np}asarray(e[k]) for e in examples]))
                            for k in range(len(examples[0])))
            else:
                yield {jnp}asarray({np}stack([{np}asarray(e) for e in examples]))
'''

_LOAD_PICKLED_ARRAYS = '''
def load_pickled_arrays(path):
    """What torch.save wrote when it saved no tensor (numpy arrays, numbers, lists, dicts of them): the pickle
    in its zip archive, read without PyTorch. A tensor inside is an error (reading it needs PyTorch)."""
    import pickle
    import zipfile

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if module == "torch" or module.startswith("torch."):
                self.persistent_load(None)
            return super().find_class(module, name)

        def persistent_load(self, pid):
            raise ValueError(f"{{path}} holds a PyTorch tensor: save it as numpy (tensor.numpy()) and load that")

    with zipfile.ZipFile(path) as archive:
        name = next(n for n in archive.namelist() if n.endswith("data.pkl"))
        with archive.open(name) as f:
            return Unpickler(f).load()
'''

# name → its text; a helper's dependencies are written with it
TEXTS = {"ArrayDataset": _ARRAY_DATASET, "NumpyLoader": _NUMPY_LOADER, "load_pickled_arrays": _LOAD_PICKLED_ARRAYS}
DEPS = {"NumpyLoader": ("ArrayDataset",)}  # NumpyLoader tests isinstance(dataset, ArrayDataset)


class _Refs(cst.CSTVisitor):
    def __init__(self):
        self.names: set[str] = set()
        self.defined: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in TEXTS:
            self.names.add(node.value)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if node.name.value in TEXTS:
            self.defined.add(node.name.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value in TEXTS:
            self.defined.add(node.name.value)


def finish(module: cst.Module, ctx) -> cst.Module:
    """The helpers the output uses and does not define, after the imports at the top of the file."""
    if not ctx.analyses.get(HELPERS):
        return module
    refs = _Refs()
    module.visit(refs)
    todo = {n for n in refs.names - refs.defined}
    todo |= {d for n in todo for d in DEPS.get(n, ()) if d not in refs.defined}
    if not todo:
        return module
    spelled = {"np": ctx.spell_text("numpy.") , "jnp": ctx.spell_text("jax.numpy.")}
    order = [n for n in TEXTS if n in todo]  # dependencies first
    text = "\n\n".join(TEXTS[n].strip("\n").format(**spelled) for n in order) + "\n"
    new = list(cst.parse_module(text).body)
    body = list(module.body)
    at = 0
    while at < len(body) and isinstance(body[at], cst.SimpleStatementLine) and all(
            isinstance(s, (cst.Import, cst.ImportFrom)) or isinstance(s, cst.Expr) and isinstance(
                s.value, (cst.SimpleString, cst.ConcatenatedString)) for s in body[at].body):
        at += 1
    blank = [cst.EmptyLine(), cst.EmptyLine()]
    new = [s.with_changes(leading_lines=blank) for s in new]
    if at < len(body):
        body[at] = body[at].with_changes(leading_lines=[*blank, *[ln for ln in body[at].leading_lines
                                                                   if ln.comment is not None]])
    return module.with_changes(body=[*body[:at], *new, *body[at:]])
