"""torch2jax gaps of t2j30: the module bindings clashes.py reads come from the shared binding walker."""
from __future__ import annotations

import textwrap

import libcst as cst

from fwport.core.pipeline import translate_source
from fwport.packs.torch2jax import clashes


def _t(src: str):
    return translate_source(textwrap.dedent(src).lstrip("\n"), "f.py", "torch2jax")


def _errors(r):
    return [f for f in r.findings if f.severity.value == "error"]


class _Ctx:
    def __init__(self, source: str):
        self.analyses = {"parsed": (cst.parse_module(source), source)}


# --- 1. module bindings through fwport/core/bindings.py -------------------------------------------------------

BINDINGS = '''\
import numpy as onp, os.path
from jax import numpy as jnp
from . import sibling
if os.path.exists("x"):
    for np, k in []:
        pass
with open("f") as eqx:
    pass
try:
    pass
except ValueError as optax:
    pass
print(jax := 1)
squares = [v * v for v in range(3)]
del squares


def f():
    global counter
    local = 1
    counter = 2


class A:
    attr = 3

    def m(self):
        global state
        state = 4
'''


def test_module_bindings_are_read_by_the_shared_walker():
    b = clashes.module_bindings(_Ctx(BINDINGS))
    assert b["onp"] == [(1, 1, "numpy")] and b["os"] == [(1, 1, "os")]
    assert b["jnp"] == [(2, 1, "jax.numpy")] and b["sibling"] == [(3, 1, "..sibling")]
    assert b["np"] == [(5, 9, None)] and b["k"] == [(5, 13, None)]  # a for target inside an if: the name's place
    assert b["eqx"] == [(7, 19, None)] and b["optax"] == [(11, 22, None)] and b["jax"] == [(13, 7, None)]
    assert b["squares"] == [(14, 1, None)]  # (its `del` is no binding; `v` is the comprehension's own)
    assert b["counter"] == [(19, 12, None)] and b["state"] == [(28, 16, None)]  # `global` in a function, a method
    assert b["f"] and b["A"] and "local" not in b and "attr" not in b and "v" not in b and "self" not in b


def test_a_global_declared_in_a_function_clashes_with_the_output():
    r = _t("import torch\n\n\ndef setup():\n    global jnp\n    jnp = 3\n\n\nx = torch.zeros(3)\n")
    e = [f for f in _errors(r) if "binds `jnp`" in f.message]
    assert len(e) == 1 and e[0].line == 5
