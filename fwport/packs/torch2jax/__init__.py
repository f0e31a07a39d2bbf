"""The PyTorch → JAX/Equinox (+ optax) pack: ``fwport torch2jax``.

Where things are:
  __init__.py     DIRECTION: what the core asks of this pack (names, planners, spellings, codes...)
  passes/         the structural passes, in order: modules (nn.Module → eqx.Module, per-example
                  forward), training (torch.optim loops → optax); their finishing steps add the
                  lines an Equinox module needs (fields, key splits)
  batch.py        per-example shape code: the batch axis dropped from dims, views and sizes
  ops.py          call transforms of the rules (nn.Sequential, activations as modules, losses...)
  layers.py       layers Equinox lacks 1:1 (LSTM/GRU/RNN, MultiheadAttention, PixelShuffle): helpers written
                  into the output and their call transforms
  data.py         the helpers written into a file that loads data (DataLoader → NumpyLoader)
  modes.py        self.training inside a module → not self.inference (a field eqx.nn.inference_mode sets)
  nograd.py       torch.no_grad / set_grad_enabled / enable_grad: what leaves a block in differentiated code detached
  frozen.py       parts frozen before a training loop (requires_grad False) → optax.multi_transform with set_to_zero
  backends.py     torch.backends switches (allow_tf32, cudnn.benchmark, ...) → jax.config.update, or removed
  registry.py     this pack's table of named transforms
  ../../../rules/torch2jax/   the data rules, one per file
"""
from __future__ import annotations

import re

from fwport.core.direction import Direction, Requirements, Spelling
from fwport.core.names import SourceNames
from fwport.packs.torch2jax import layers, ops, vision  # noqa: F401  (registers the named transforms)
from fwport.packs.torch2jax.passes import FINISH, PLANNERS
from fwport.packs.torch2jax.registry import TRANSFORMS

#: Top-level packages that make a file a PyTorch source (torchvision imports PyTorch: its data code is
#: translated to numpy helpers, vision.py, and anything else of it is a no-rule error with GUIDANCE).
SOURCE_ROOTS = ("torch", "torchvision")
#: modules of other packages that hold PyTorch code (einops's layers as torch.nn.Modules)
SOURCE_MODULES = ("einops.layers.torch",)

# Longest prefix first: the canonical spelling of each source namespace.
_CANON_PREFIXES: tuple[tuple[str, str], ...] = (
    ("torch.nn.modules.module.", "torch.nn."),
    ("torch.nn.modules.linear.", "torch.nn."),
    ("torch.nn.modules.conv.", "torch.nn."),
    ("torch.nn.modules.", "torch.nn."),
    ("torch.optim.sgd.", "torch.optim."),
    ("torch.optim.adam.", "torch.optim."),
    ("torch.optim.adamw.", "torch.optim."),
)

CODES = {
    "batch-axis": "per-example code: a dimension, size or view that involves the batch axis, which an "
                  "Equinox module (one example at a time) does not have",
    "key-added": "an explicit PRNG key was threaded where the source used PyTorch's global random state",
    "single-process": "distributed PyTorch code (a process per device) translated as one JAX process that drives "
                      "every local device: exact for the work of one process (world_size 1), with no data "
                      "parallelism written",
    "no-download": "a torchvision dataset asked to download: the translation reads the files already on disk "
                   "and has no downloader",
}

CODE_ADVICE = {
    "batch-axis": ("error", "Write the shape code for one example (drop the batch axis), or keep the function "
                   "batched and call it outside the module; an assumed batch axis (`view(-1, n)`) is a warning: "
                   "check that `n` is the size of one example."),
    "key-added": ("info", "Pass a key (`jax.random.key(seed)`, split per use) where the translated code asks for one."),
    "single-process": ("warning", "Run the translation as one process (no launcher: torchrun / mp.spawn are gone). "
                       "To spread the batch over several devices, shard it over a jax.sharding.Mesh (NamedSharding, "
                       "a jitted step) or use jax.pmap; on several hosts call jax.distributed.initialize() first."),
    "no-download": ("warning", "Download the files once where the translated code reads them (torchvision's "
                    "download=True in a PyTorch environment, or the dataset's site), or point root at an existing copy."),
}

_PACKED = ("JAX has no packed sequences: keep the padded (batch, L, ...) array and the lengths, and mask with "
           "`valid = jnp.arange(L) < length` per example. The recurrent layer runs over all L steps: zero its outputs "
           "past the length (jnp.where(valid[:, None], out, 0), what pad_packed_sequence gives), read the final state "
           "at step length - 1 (out[length - 1] for one layer and direction; the backward direction of a bidirectional "
           "layer must start at each sequence's own end: reverse the first `length` steps); a loss over the packed data "
           "(packed[0], the valid steps) is the masked sum divided by valid.sum()")

#: what to write instead of torchvision APIs without a rule (the no-rule error's message)
GUIDANCE = {
    "torchvision.datasets": "only MNIST, FashionMNIST, CIFAR10 and CIFAR100 (files on disk in their documented "
                            "formats) are translated; read other data with numpy (or PIL) into arrays and wrap them "
                            "in ArrayDataset / an indexable class",
    "torchvision.transforms": "only Compose, ToTensor, Normalize, Lambda, Pad, CenterCrop, Resize (to the size the image "
                              "has), RandomCrop, RandomResizedCrop and RandomHorizontalFlip are translated; write this "
                              "step in numpy and call it through Lambda",
    "torchvision.utils": "only save_image (PNG) and make_grid are translated; write the rest with numpy",
    "torchvision": "torchvision imports PyTorch: models and ops need a JAX counterpart written or chosen by hand",
    # several devices and processes: JAX runs one program over every device it sees
    "torch.distributed": "JAX has no process group: one program drives every device (jax.sharding.Mesh, arrays placed "
                         "with NamedSharding and a jitted step; jax.distributed.initialize() first on several hosts), "
                         "so set-up, collectives and RPC are rewritten by hand around a sharded step",
    # (a single-host data-parallel script is translated as one process: distributed.py; what follows is refused)
    "torch.distributed.rpc": "RPC between processes (remote modules, parameter servers, RRefs) has no JAX counterpart: "
                             "JAX runs one program over every device (jax.sharding.Mesh); restructure the work as one "
                             "jitted step over sharded arrays by hand",
    "torch.distributed.autograd": "distributed autograd goes with RPC, which JAX does not have: one jitted step over "
                                  "sharded arrays computes the gradients (jax.grad) across devices",
    "torch.distributed.optim": "a distributed optimizer goes with RPC, which JAX does not have: an optax optimizer "
                               "updates sharded parameters inside one jitted step",
    "torch.distributed.fsdp": "FSDP shards parameters, gradients and optimizer state over processes: in JAX place the "
                              "parameter arrays with a NamedSharding over a jax.sharding.Mesh and jit the step (XLA "
                              "inserts the gathers); not written by fwport",
    "torch.distributed.checkpoint": "a sharded checkpoint of several processes: save the arrays of the one JAX program "
                                    "(eqx.tree_serialise_leaves, or orbax for sharded arrays) by hand",
    "torch.distributed.tensor": "tensor parallelism (DTensor, parallelize_module, Shard/Replicate placements): in JAX "
                                "give each parameter a NamedSharding over a jax.sharding.Mesh (PartitionSpec per axis) "
                                "and jit the step; not written by fwport",
    "torch.distributed._tensor": "tensor parallelism (DTensor, Shard/Replicate placements, device meshes): in JAX give "
                                 "each array a NamedSharding over a jax.sharding.Mesh and jit the step; not written by "
                                 "fwport",
    "torch.distributed.device_mesh": "a device mesh: jax.sharding.Mesh(jax.devices(), axis_names) by hand, with "
                                     "NamedSharding placements for the arrays",
    "torch.distributed.barrier": "a barrier orders several processes (one writes a file, the others wait to read it); "
                                 "the one-process translation has no other process: remove it once the ordering it "
                                 "guards is checked",
    "torch.distributed.all_gather": "all_gather fills a list with every process's tensor: in the one-process "
                                    "translation the list holds this process's value only; rewrite the gathering "
                                    "(over a sharded array it is the array itself)",
    "torch.nn.parallel": "remove the wrapper: in JAX the batch is sharded over a jax.sharding.Mesh and the jitted step "
                         "computes gradients over the whole batch (no per-replica model, no all-reduce to write)",
    "torch.nn.DataParallel": "remove the wrapper: in JAX the batch is sharded over a jax.sharding.Mesh and the jitted "
                             "step computes gradients over the whole batch",
    "torch.utils.data.distributed": "with one JAX program over all devices, batch the whole dataset and shard each "
                                    "batch (jax.sharding); on several hosts split it by jax.process_index() (a "
                                    "sampler given to a DataLoader's sampler= and read only by set_epoch becomes the "
                                    "loader's shuffle; this one is read elsewhere or splits the data by a literal "
                                    "replica count)",
    "torch.utils.data.DistributedSampler": "a DistributedSampler given to a DataLoader's sampler= and read only by "
                                           "set_epoch becomes the loader's shuffle (one JAX process reads the whole "
                                           "dataset); this one is read elsewhere or splits the data by a literal "
                                           "replica count: index the dataset by hand",
    "torch.multiprocessing": "one JAX process drives all local devices: run the function once instead of spawning a "
                             "process per device",
    "torch.cuda": "JAX places arrays on its default device (jax.devices()[0]): device selection is jax.device_put, "
                  "and streams, caches and memory queries have no counterpart to translate; remove them",
    "torch.amp": "mixed precision in JAX is explicit: cast parameters and inputs to bfloat16 where wanted and keep the "
                 "loss in float32 (loss scaling matters for float16 only)",
    "torch.fx": "torch.fx traces PyTorch programs: in JAX inspect a function with jax.make_jaxpr; rewriting its graph "
                "has no direct counterpart",
    "torch.jit": "jit the function instead (jax.jit, or eqx.filter_jit for a module) and drop the scripting / tracing",
    # (a call is its rule's, compile.toml; this is what a bare @torch.compile decorator's residue says)
    "torch.compile": "jit the function instead (jax.jit, or eqx.filter_jit for a module)",
    # packed sequences (variable lengths in one batch): JAX keeps the padded array and a mask
    "torch.nn.utils.rnn.pack_padded_sequence": _PACKED,
    "torch.nn.utils.rnn.pad_packed_sequence": _PACKED,
    "torch.nn.utils.rnn.pack_sequence": _PACKED,
    "torch.nn.utils.rnn.unpack_sequence": _PACKED,
    "torch.nn.utils.rnn.PackedSequence": _PACKED,
    "torch.hub": "torch.hub downloads PyTorch code and weights: use a JAX implementation of the model, or translate "
                 "the model's source and convert its state_dict with `fwport weights`",
}

DIRECTION = Direction(
    name="torch2jax",
    summary="PyTorch (nn.Module, torch.optim) → JAX / Equinox / optax",
    source=SourceNames(SOURCE_ROOTS, _CANON_PREFIXES, {}, modules=SOURCE_MODULES),
    mentions=re.compile(r"\btorch(?:vision)?\b"),
    source_title="PyTorch",
    planners=PLANNERS,
    finish=FINISH,
    spellings=(
        Spelling("jax.numpy.", "jnp.", "import jax.numpy as jnp"),
        Spelling("jax.experimental.sparse.", "jsparse.", "from jax.experimental import sparse as jsparse"),
        Spelling("jax.", "jax.", "import jax"),
        Spelling("equinox.", "eqx.", "import equinox as eqx"),
        Spelling("optax.", "optax.", "import optax"),
        Spelling("math.", "math.", "import math"),
        Spelling("functools.", "functools.", "import functools"),
        Spelling("numpy.", "np.", "import numpy as np"),
    ),
    import_order=("import einops", "import functools", "import math", "import equinox as eqx", "import jax", "import jax.numpy as jnp",
                  "from jax.experimental import sparse as jsparse", "import numpy as np", "import optax"),
    source_label=lambda name, v: "PyTorch",
    codes=CODES,
    code_advice=CODE_ADVICE,
    transforms=TRANSFORMS,
    guidance=GUIDANCE,
    requirements=Requirements(source=frozenset({"torch", "torchvision", "torchaudio", "pytorch"}),
                              target="jax", conda={}, label="PyTorch"),
    command_help="Translate PyTorch source (nn.Module, torch.optim) to JAX with Equinox and optax.",
)
