"""Structural passes, run in this order before the rule pass (see fwport/core/direction.py), each
only where its trigger appears in the source text; FINISH steps add and remove lines at the very end."""
from __future__ import annotations

from fwport.core.direction import Planner, Trigger, fast
from fwport.packs.torch2jax import layers
from fwport.packs.torch2jax import backends, clashes, fills, nograd, data, distributed, features, groups, inplace, keys, modes, params, tensor_methods, types, x64
from fwport.packs.torch2jax.passes import modules, training, unroll

PLANNERS: tuple[Planner, ...] = (
    # torch.no_grad() blocks / decorators in code a loss differentiates through: what leaves them → .detach()
    # (jax.lax.stop_gradient's rule), reported here (first: the passes after it see torch code); removed by finish
    Planner("grad-mode", nograd.TRIGGER, nograd.plan),
    # self.d.name → self.d["name"] where self.d is an nn.ModuleDict (it becomes a dict): before modules
    Planner("module-dict", fast(r"\bModuleDict\b"), layers.module_dict_reads),
    # getattr(nn, name)(...) under `if name in ['LSTM', 'GRU']:` → one call per class, chosen by name (before modules)
    Planner("named-layers", fast(r"getattr\(\s*\w+\s*,"), layers.named_layers),
    # nn.Sequential(*block(...)) with a helper returning a list of layers: written out per call (before modules)
    Planner("unroll", fast(r"Sequential\(\s*\*"), unroll.run),
    # class M(nn.Transformer) with its own forward → an nn.Module building nn.Transformer's encoder (before modules)
    Planner("transformer-subclass", fast(r"\bTransformer\s*\)"), layers.transformer_subclasses),
    # a random fill of a fresh tensor (torch.empty(n).uniform_(a, b)) → the draw building it (torch.rand(n) * (b - a)
    # + a; fills.py), which the random rules and keys.py translate: before the passes that read draws and fills
    Planner("fresh-fills", fills.TRIGGER, fills.plan),
    # in-place updates of a model's parameters outside the classes (`for p in model.parameters(): p.data.clamp_(..)`,
    # `model.fc.weight.data.mul_(2)`) → the model rebuilt (jax.tree_util.tree_map / eqx.tree_at; params.py)
    Planner("parameter-updates", params.TRIGGER, params.run),
    # y.add_(x) / h.relu_() as a statement on a tensor nothing else holds → y = y + x / h = h.relu() (inplace.py)
    Planner("in-place", fast(inplace.TRIGGER), inplace.rebind),
    # self.training read in a module's methods → `not self.inference`, a field set False in __init__ (modes.py),
    # which eqx.nn.inference_mode sets (before modules, which declares the field)
    Planner("modes", modes.TRIGGER, modes.plan),
    # nn.Module subclasses → eqx.Module, forward → a per-example __call__
    # (Sequential: a builder function that returns one, in a file with no module class)
    # (and a class deriving from another torch layer, `class M(nn.Transformer)`: an error naming it)
    # (and a function re-initialising the layers given to it, for model.apply: `def weights_init(m)`)
    Planner("modules", fast(r"(?m)\bModule\b|\bSequential\b|^\s*class\s+\w+\s*\([^)]*\bnn\.|\binit\.\w+_\s*\("),
            modules.run),
    # a line of several statements holding a training step's piece (`l.backward(); opt.step()`) → one per line
    # (before the passes that read steps: stateful-calls, training)
    Planner("step-lines", fast(r";"), training.split_step_lines),
    # a model keeping a layer state (BatchNorm): its state's name, its calls inside larger expressions moved to
    # statements of their own (`d_out = discriminator(x)` above `loss = bce(d_out, valid)`), before training
    Planner("stateful-calls", fast(r"\bBatchNorm"), training.hoist_stateful_calls),
    # torch.manual_seed → a root key, model.train()/eval() → inference_mode, loops checked; a layer built outside
    # the classes (`model = nn.Linear(1, 1)`) called per example
    Planner("training", fast(r"\bmanual_seed\b|\bno_grad\b|\binference_mode\b|\benable_grad\b|\bset_grad_enabled\b|\b(?:load|save)\s*\(|\.(?:train|eval|backward|to|cuda|cpu|parameters|load_state_dict|size|to_sparse)\s*\(|\bTensor\s*\(|\bModule\b|\.data\b|(?m:^\s*\w+\s*=\s*(?:torch\.)?nn\.[A-Z])"), training.run),
    # (read-only, last) DataLoader(dataset, **kwargs) with a dict the file builds: bound by its keys
    Planner("loader-kwargs", fast(r"\bDataLoader\b"), data.loader_kwargs),
    # (read-only, last) tensor methods outside the module classes → jnp (eq → ==, view → reshape, ...)
    Planner("tensor-methods", fast(r"\.(?:" + "|".join(sorted(tensor_methods.METHODS | tensor_methods.TORCH_ONLY | {"parameters", "named_parameters", "to", "type"})) + r")\s*\(|\.requires_grad\b|\bself\s*\("),
            tensor_methods.plan),
    # (read-only, last) a Dataset base dropped (the loader reads __len__/__getitem__); nn.Module in annotations → eqx.Module
    Planner("types", Trigger(r"\bDataset\b|\bModule\b", "Dataset", "Module"), types.plan),
    # (read-only, last) an optimizer over complementary parameter groups (decay / no decay) → optax's mask=
    Planner("param-groups", fast(r"'params['\"]|\"params['\"]"), groups.plan),
    # (read-only) a frozen nn.Embedding.from_pretrained table: the optimizers' updates masked where it is (groups.py)
    Planner("frozen-tables", fast(r"\bfrom_pretrained\b"), groups.frozen_tables),
    # (read-only, last) hasattr(torch.nn.functional, 'name') → True where a rule translates that name; an
    # argument's presence in inspect.signature(torch.optim.X).parameters → whether the rule takes it
    # (read-only, last) draws from PyTorch's global generator where no jax.random key will be in scope: refused
    Planner("keyless-draws", keys.TRIGGER, keys.plan),
    Planner("feature-tests", Trigger(r"\bhasattr\s*\(|\bsignature\s*\(", "hasattr", "signature"), features.plan),
    # (read-only, after training, whose loops it must not see change) one-process distributed scripts:
    # init/destroy_process_group, set_device, all_reduce, `m = DDP(m)` removed; a DistributedSampler → the loader's shuffle
    Planner("distributed", distributed.TRIGGER, distributed.plan),
    # (read-only, the very last: it plans the statement after one it removes, to keep the blank lines above)
    # torch.backends switches (cudnn.benchmark, allow_tf32, ...) → jax.config.update, or removed
    Planner("backends", backends.TRIGGER, backends.plan),
)
# fields, key splits and super().__init__() removal: they add and remove lines; then the helper layers
# the output calls (layers.py) and the DataLoader helpers (data.py), after the imports
FINISH = (unroll.finish, modules.finish, training.finish, layers.finish, data.finish, x64.finish,
          clashes.finish)  # (last: the names every step before it spelled)
