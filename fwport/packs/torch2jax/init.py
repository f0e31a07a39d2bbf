"""``torch.nn.init.*`` → the value an Equinox user draws for the parameter (used by passes/modules.py).

``init.orthogonal_(self.conv1.weight, init.calculate_gain('relu'))`` re-initialises a tensor in place; an
Equinox module is immutable, so the pass replaces the layer inside ``__init__``:
``self.conv1 = eqx.tree_at(lambda m: m.weight, self.conv1, <value>)``, the value drawn from ``key`` (the
finishing step hands it a split of ``__init__``'s key, like a layer's constructor).

The fans are PyTorch's: a weight is laid out (out, in, *kernel) in both frameworks, fan_in = in x kernel,
fan_out = out x kernel, so every variance-scaling initialiser is written with ``in_axis=1, out_axis=0``.
PyTorch's normal initialisers draw from a plain normal (JAX's glorot/he_normal truncate it), so they are
written as ``variance_scaling(..., "normal")``.
"""
from __future__ import annotations

import ast

import libcst as cst

from fwport.core.engine import code

#: initialisers that draw (take a key); the others are constants
DRAWS = frozenset({"uniform_", "normal_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
                   "orthogonal_", "trunc_normal_"})
#: their PyTorch signatures (the tensor first), for binding the call's arguments
SIGNATURES = {
    "uniform_": ("tensor", ("a", "0.0"), ("b", "1.0")),
    "normal_": ("tensor", ("mean", "0.0"), ("std", "1.0")),
    "trunc_normal_": ("tensor", ("mean", "0.0"), ("std", "1.0"), ("a", "-2.0"), ("b", "2.0")),
    "constant_": ("tensor", "val"),
    "zeros_": ("tensor",),
    "ones_": ("tensor",),
    "xavier_uniform_": ("tensor", ("gain", "1.0")),
    "xavier_normal_": ("tensor", ("gain", "1.0")),
    "kaiming_uniform_": ("tensor", ("a", "0"), ("mode", "'fan_in'"), ("nonlinearity", "'leaky_relu'")),
    "kaiming_normal_": ("tensor", ("a", "0"), ("mode", "'fan_in'"), ("nonlinearity", "'leaky_relu'")),
    "orthogonal_": ("tensor", ("gain", "1")),
}
TRANSLATED = frozenset(SIGNATURES)

#: calculate_gain(nonlinearity): the gain and its square, as Python expressions
_GAINS = {"linear": ("1.0", "1.0"), "identity": ("1.0", "1.0"), "sigmoid": ("1.0", "1.0"), "conv1d": ("1.0", "1.0"),
          "conv2d": ("1.0", "1.0"), "conv3d": ("1.0", "1.0"), "conv_transpose1d": ("1.0", "1.0"),
          "conv_transpose2d": ("1.0", "1.0"), "conv_transpose3d": ("1.0", "1.0"), "tanh": ("5 / 3", "25 / 9"),
          "relu": ("2 ** 0.5", "2.0"), "selu": ("3 / 4", "9 / 16")}


def _literal(node: cst.BaseExpression):
    try:
        return ast.literal_eval(code(node))
    except (ValueError, SyntaxError, TypeError):
        return None


def _operand(node: cst.BaseExpression, left: bool = False) -> str:
    """``node``'s text as an operand of * or /: in parentheses unless it is an atom (a name, a number, a call;
    a negative number too where it stands on the left)."""
    text = code(node)
    if isinstance(node, (cst.Name, cst.Attribute, cst.Integer, cst.Float, cst.Call, cst.Subscript)) \
            or left and isinstance(node, cst.UnaryOperation) and isinstance(node.expression, (cst.Integer, cst.Float)):
        return text
    return f"({text})"


class Unsupported(Exception):
    """The call cannot be written exactly; the message says why."""


def _bind(name: str, call: cst.Call) -> dict[str, cst.BaseExpression]:
    sig = SIGNATURES[name]
    names = [p if isinstance(p, str) else p[0] for p in sig]
    if any(a.star for a in call.args):
        raise Unsupported("its arguments are starred")
    out: dict[str, cst.BaseExpression] = {}
    pos = [a for a in call.args if a.keyword is None]
    if len(pos) > len(names):
        raise Unsupported("it has more arguments than PyTorch's signature")
    for n, a in zip(names, pos):
        out[n] = a.value
    for a in call.args:
        if a.keyword is not None:
            if a.keyword.value not in names:
                raise Unsupported(f"it has an argument `{a.keyword.value}` fwport does not know")
            out[a.keyword.value] = a.value
    for p in sig:
        if not isinstance(p, str) and p[0] not in out:
            out[p[0]] = cst.parse_expression(p[1])
    if "tensor" not in out or any(isinstance(p, str) and p not in out for p in sig):
        raise Unsupported("a required argument is missing")
    return out


def gain(node: cst.BaseExpression, is_gain_call) -> tuple[str, str]:
    """A gain argument: ``calculate_gain('relu')`` (a literal nonlinearity) or any expression → (gain, gain²)."""
    if isinstance(node, cst.Call) and is_gain_call(node):
        args = [a for a in node.args if not a.star]
        nl = _literal(args[0].value) if args else None
        param = args[1].value if len(args) > 1 else None
        if nl == "leaky_relu":
            s = "0.01" if param is None or code(param) == "None" else code(param)
            v = _literal(cst.parse_expression(s))
            square = repr(2.0 / (1 + v ** 2)) if isinstance(v, (int, float)) else f"2 / (1 + {s} ** 2)"
            return f"({square}) ** 0.5", square
        if isinstance(nl, str) and nl in _GAINS and param is None:
            return _GAINS[nl]
        raise Unsupported(f"calculate_gain({', '.join(code(a.value) for a in args)}) is not a gain fwport knows")
    v = _literal(node)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return code(node), repr(float(v) ** 2)
    text = code(node)
    return text, f"({text}) ** 2" if not isinstance(node, (cst.Name, cst.Attribute)) else f"{text} ** 2"


def _leaky_square(a: cst.BaseExpression, nonlinearity: cst.BaseExpression) -> str:
    """kaiming's gain² from ``a`` and ``nonlinearity`` (PyTorch's calculate_gain)."""
    nl = _literal(nonlinearity)
    if nl == "relu":
        return "2.0"
    if nl == "leaky_relu":
        v = _literal(a)
        if isinstance(v, (int, float)):
            return repr(2.0 / (1 + v ** 2))
        return f"2 / (1 + ({code(a)}) ** 2)"
    if isinstance(nl, str) and nl in _GAINS:
        return _GAINS[nl][1]
    raise Unsupported(f"nonlinearity={code(nonlinearity)} is not one fwport knows")


def value(name: str, call: cst.Call, shape: str, ctx, is_gain_call) -> str:
    """The expression that draws (from ``key``) or builds the new value of the tensor, of shape ``shape`` (the
    tensor's ``X.shape``)."""
    b = _bind(name, call)
    spell = ctx.spell_text
    vs = f"{spell('jax.nn.initializers.variance_scaling')}"
    if name == "zeros_":
        return f"{spell('jax.numpy.zeros')}({shape})"
    if name == "ones_":
        return f"{spell('jax.numpy.ones')}({shape})"
    if name == "constant_":  # the tensor's dtype, not the value's (jnp.full(shape, 0) would be an int32 array)
        return f"{spell('jax.numpy.full_like')}({shape.removesuffix('.shape')}, {code(b['val'])})"
    if name == "uniform_":
        return f"{spell('jax.random.uniform')}(key, {shape}, minval={code(b['a'])}, maxval={code(b['b'])})"
    if name == "normal_":
        draw = f"{spell('jax.random.normal')}(key, {shape})"
        std, mean = code(b["std"]), code(b["mean"])
        if _literal(b["std"]) != 1:
            draw = f"{std if isinstance(b['std'], (cst.Name, cst.Attribute, cst.Integer, cst.Float)) else f'({std})'} * {draw}"
        if _literal(b["mean"]) != 0:
            draw = f"{draw} + {mean if isinstance(b['mean'], (cst.Name, cst.Attribute, cst.Integer, cst.Float)) else f'({mean})'}"
        return draw
    if name == "trunc_normal_":  # mean + std * a draw from the standard normal cut at (a - mean) / std, (b - mean) / std
        centred, unit = _literal(b["mean"]) == 0, _literal(b["std"]) == 1
        s = _operand(b["std"])

        def bound(k: str) -> str:
            edge = _operand(b[k], left=True) if centred else f"{_operand(b[k], left=True)} - {_operand(b['mean'])}"
            return edge if unit else f"{edge} / {s}" if centred else f"({edge}) / {s}"

        draw = f"{spell('jax.random.truncated_normal')}(key, {bound('a')}, {bound('b')}, {shape})"
        if not unit:
            draw = f"{s} * {draw}"
        return draw if centred else f"{draw} + {_operand(b['mean'])}"
    if name in ("xavier_uniform_", "xavier_normal_"):
        _, square = gain(b["gain"], is_gain_call)
        dist = "uniform" if name == "xavier_uniform_" else "normal"
        return f'{vs}({square}, "fan_avg", "{dist}", in_axis=1, out_axis=0)(key, {shape})'
    if name in ("kaiming_uniform_", "kaiming_normal_"):
        square = _leaky_square(b["a"], b["nonlinearity"])
        mode = _literal(b["mode"])
        if mode not in ("fan_in", "fan_out"):
            raise Unsupported(f"mode={code(b['mode'])} is not 'fan_in' or 'fan_out'")
        dist = "uniform" if name == "kaiming_uniform_" else "normal"
        return f'{vs}({square}, "{mode}", "{dist}", in_axis=1, out_axis=0)(key, {shape})'
    if name == "orthogonal_":
        g, _ = gain(b["gain"], is_gain_call)
        scale = "" if _literal(cst.parse_expression(g)) == 1 else f"scale={g}, "
        return f"{spell('jax.nn.initializers.orthogonal')}({scale}column_axis=0)(key, {shape})"
    raise Unsupported(f"{name} is not translated")



# --- re-initialising what a loop or module.apply selects -------------------------------------------------
#
# ``for name, p in self.named_parameters(): if <test>: init.X_(p, ...)`` and ``self.apply(self._init_weights)``
# change parameters in place across the whole module. In Equinox the fields built so far are rebuilt
# instead: a helper (written into the output once) finds the arrays (or layers) the test selects, draws
# each anew with a key of its own, and puts them in place with eqx.tree_at.

_PATHS = '''

def _torch_name(path):
    """A pytree path as PyTorch names the parameter there ("encoder.layers.0.linear1.weight")."""
    return ".".join(str(getattr(k, "name", getattr(k, "key", getattr(k, "idx", k)))) for k in path)


def _at(tree, path):
    """The node of ``tree`` at ``path`` (a pytree path of attribute, dict and sequence keys)."""
    for k in path:
        tree = getattr(tree, k.name) if hasattr(k, "name") else tree[k.key if hasattr(k, "key") else k.idx]
    return tree
'''

_REINIT_ARRAYS = '''

def reinit_arrays(fields, select, draw, *, key=None):
    """PyTorch's in-place re-initialisation of parameters (``for name, p in self.named_parameters()``):
    each array of ``fields`` (name -> module) for which ``select(name, p)`` holds, the name spelled as
    PyTorch does, is replaced by ``draw(key, p)``, a key per array. Returns the fields' new values in their order."""
    paths = [path for path, p in jax.tree_util.tree_leaves_with_path(fields)
             if eqx.is_array(p) and select(_torch_name(path), p)]
    if not paths:
        return tuple(fields.values())
    keys = jax.random.split(key, len(paths)) if key is not None else [None] * len(paths)
    new = eqx.tree_at(lambda t: [_at(t, path) for path in paths], fields,
                      [draw(k, _at(fields, path)) for k, path in zip(keys, paths)])
    return tuple(new[name] for name in fields)
'''

_REINIT_LAYERS = '''

def reinit_layers(fields, select, fn, *, key):
    """PyTorch's ``module.apply(fn)`` re-initialising layers: each layer of ``fields`` (name -> module) that
    ``select`` picks is replaced by ``fn(layer, key=...)``, a key per layer. Returns the fields' new values
    in order."""
    paths = [path for path, x in jax.tree_util.tree_leaves_with_path(fields, is_leaf=select) if select(x)]
    if not paths:
        return tuple(fields.values())
    keys = jax.random.split(key, len(paths))
    new = eqx.tree_at(lambda t: [_at(t, path) for path in paths], fields,
                      [fn(_at(fields, path), key=k) for k, path in zip(keys, paths)])
    return tuple(new[name] for name in fields)
'''

_INIT_LAYERS = '''

def init_layers(model, init_fn, *, key):
    """PyTorch's ``model.apply(init_fn)`` with an init_fn re-initialising layers: each Equinox layer of
    ``model`` with parameters (Linear, Conv, ConvTranspose, BatchNorm, LayerNorm, GroupNorm, Embedding) is
    replaced by ``init_fn(layer, key=...)``, a key per layer; init_fn returns the layers it does not change as
    they are. Returns the new model."""
    def is_layer(x):
        return isinstance(x, (eqx.nn.Linear, eqx.nn.Conv, eqx.nn.ConvTranspose, eqx.nn.BatchNorm, eqx.nn.LayerNorm,
                              eqx.nn.GroupNorm, eqx.nn.Embedding))

    paths = [path for path, x in jax.tree_util.tree_leaves_with_path(model, is_leaf=is_layer) if is_layer(x)]
    if not paths:
        return model
    keys = jax.random.split(key, len(paths))
    return eqx.tree_at(lambda t: [_at(t, path) for path in paths], model,
                       [init_fn(_at(model, path), key=k) for k, path in zip(keys, paths)])
'''

#: the helpers above, by name (layers.finish writes the ones a file calls), and what each needs
HELPERS = {"_torch_name": _PATHS, "reinit_arrays": _REINIT_ARRAYS, "reinit_layers": _REINIT_LAYERS,
           "init_layers": _INIT_LAYERS}
DEPS = {"reinit_arrays": ("_torch_name",), "reinit_layers": ("_torch_name",), "init_layers": ("_torch_name",)}
#: the helpers whose call takes a key from the module's split
KEYED = frozenset({"reinit_layers", "reinit_arrays"})


# --- which Equinox layers a test of the layer's class selects -----------------------------------------------
#
# ``classname.find("Conv") != -1`` (or ``isinstance(m, nn.BatchNorm2d)``) in a function given to
# ``model.apply`` selects PyTorch layer classes; the translated function tests the Equinox classes they are
# translated to. Several PyTorch classes can become one Equinox class (BatchNorm1d/2d/3d → eqx.nn.BatchNorm,
# InstanceNorm → eqx.nn.GroupNorm): a test then selects more layers than PyTorch's did.

#: the Equinox class each PyTorch layer with parameters is translated to (the rules' targets)
EQX_LAYERS = {"Linear": "Linear", "Conv1d": "Conv1d", "Conv2d": "Conv2d", "Conv3d": "Conv3d",
              "ConvTranspose1d": "ConvTranspose1d", "ConvTranspose2d": "ConvTranspose2d",
              "ConvTranspose3d": "ConvTranspose3d", "BatchNorm1d": "BatchNorm", "BatchNorm2d": "BatchNorm",
              "BatchNorm3d": "BatchNorm", "LayerNorm": "LayerNorm", "GroupNorm": "GroupNorm",
              "InstanceNorm1d": "GroupNorm", "InstanceNorm2d": "GroupNorm", "InstanceNorm3d": "GroupNorm",
              "Embedding": "Embedding"}
#: PyTorch layers with parameters that are not one of those Equinox layers once translated
OTHER_LAYERS = ("Bilinear", "SyncBatchNorm", "EmbeddingBag", "LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell",
                "MultiheadAttention", "PReLU", "TransformerEncoderLayer", "TransformerDecoderLayer")
#: Equinox classes standing for all their variants (eqx.nn.Conv2d is an eqx.nn.Conv)
_BASES = {"Conv": ("Conv1d", "Conv2d", "Conv3d"), "ConvTranspose": ("ConvTranspose1d", "ConvTranspose2d",
                                                                    "ConvTranspose3d")}


def selected_layers(torch_names) -> tuple[list[str], list[str], list[str]]:
    """The PyTorch layer classes a test selects → (the Equinox classes to test, shortest spelling first:
    ``Conv`` for Conv1d/2d/3d; the PyTorch classes translated to those Equinox classes that the test did not
    select; the selected PyTorch layers with parameters that no Equinox layer class stands for)."""
    chosen = [t for t in torch_names if t in EQX_LAYERS]
    eqx_names = list(dict.fromkeys(EQX_LAYERS[t] for t in chosen))
    for base, variants in _BASES.items():
        if all(v in eqx_names for v in variants):
            eqx_names = [base if n == variants[0] else n for n in eqx_names if n not in variants[1:]]
    wider = [t for t in EQX_LAYERS if t not in chosen and EQX_LAYERS[t] in
             {v for n in eqx_names for v in _BASES.get(n, (n,))}]
    missing = [t for t in torch_names if t not in EQX_LAYERS]
    return eqx_names, wider, missing


def named_layers(substring: str) -> list[str]:
    """The PyTorch layers with parameters whose class name holds ``substring`` (``classname.find("Conv")``)."""
    return [t for t in (*EQX_LAYERS, *OTHER_LAYERS) if substring in t]
