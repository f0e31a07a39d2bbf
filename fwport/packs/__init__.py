"""The translation packs, one per direction: ``fwport/packs/<name>/`` (its code) beside
``rules/<name>/`` (its data rules). A pack's ``__init__`` defines ``DIRECTION``
(:class:`fwport.core.direction.Direction`). Registering a pack is adding a line here; the core
loads packs by these names and never imports a pack module itself.
"""

#: direction name → the module that defines its DIRECTION
PACKS = {
    "tf2torch": "fwport.packs.tf2torch",
    "torch2jax": "fwport.packs.torch2jax",
}

#: chained directions: name → the directions run one after the other, each on the previous one's output
#: (`fwport tf2jax` is tf2torch, then torch2jax; fwport/core/chain.py)
CHAINS = {
    "tf2jax": ("tf2torch", "torch2jax"),
}

#: the one-line help of `fwport <name>` in `fwport --help` (listing commands imports no pack)
HELP = {
    "tf2torch": "Translate TensorFlow/Keras source to PyTorch.",
    "torch2jax": "Translate PyTorch source to JAX/Equinox (+ optax).",
    "tf2jax": "Translate TensorFlow/Keras source to JAX/Equinox (+ optax): tf2torch, then torch2jax.",
}

#: the direction used when none is named (``fwport.translate_source(text)``)
DEFAULT = "tf2torch"
