"""PyTorch tensor methods in the code outside the module classes → their jnp spelling (a read-only
planner; the rule pass applies the edits).

Outside an ``nn.Module`` the arrays keep PyTorch's shapes (the batch axis included: no per-example
rewriting, which is batch.py's job inside the modules), so a tensor method becomes the jnp function
that computes the same thing, as PyTorch defines it: ``output.argmax(dim=1, keepdim=True)`` →
``jnp.argmax(output, axis=1, keepdims=True)``, ``pred.eq(t.view_as(pred))`` →
``pred == t.reshape(pred.shape)``, ``mu.pow(2)`` → ``mu ** 2``, ``logvar.exp()`` → ``jnp.exp(logvar)``,
``x.std(dim=0)`` → ``jnp.std(x, axis=0, ddof=1)`` (PyTorch's is unbiased). Left as written, each of
these would fail on a jax array (it has no ``eq``, ``pow``, ``view_as`` ...), or compute something else
(``x.view(-1, 784)`` is a dtype view in jax).

The methods are chosen by name: the names below are PyTorch tensor methods that no Python
container, string or jax array has with the same meaning, so a receiver that calls one is a tensor.
A call whose arguments do not fit the table (unknown keywords, ``*args``) is left for the residue
scan and the reader.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.engine import code, expr
from fwport.core.finding import Severity
from fwport.core.names import dotted_text, scan
from fwport.packs.torch2jax.batch import _atom_code as _atom  # the receiver, parenthesised when not an atom

# method → jnp function applied to the receiver, no argument
_UNARY = {"exp": "jax.numpy.exp", "log": "jax.numpy.log", "sqrt": "jax.numpy.sqrt", "abs": "jax.numpy.abs",
          "tanh": "jax.numpy.tanh", "sigmoid": "jax.nn.sigmoid", "relu": "jax.nn.relu", "neg": "jax.numpy.negative",
          "log1p": "jax.numpy.log1p", "sin": "jax.numpy.sin", "cos": "jax.numpy.cos", "floor": "jax.numpy.floor",
          "ceil": "jax.numpy.ceil", "sign": "jax.numpy.sign", "rsqrt": "jax.lax.rsqrt", "reciprocal": "jax.numpy.reciprocal",
          "expm1": "jax.numpy.expm1", "isnan": "jax.numpy.isnan", "isinf": "jax.numpy.isinf"}
# method → Python operator with one operand
_BINARY = {"eq": "==", "ne": "!=", "gt": ">", "lt": "<", "ge": ">=", "le": "<=", "pow": "**", "mul": "*",
           "sub": "-", "div": "/", "matmul": "@", "mm": "@", "bmm": "@", "true_divide": "/",
           "remainder": "%"}  # not add: a set's add (PyTorch's remainder has Python's sign, as jnp's %)
# reductions taking dim / keepdim → jnp function (axis / keepdims), std and var unbiased as in PyTorch
_REDUCE = {"sum": "jax.numpy.sum", "mean": "jax.numpy.mean", "prod": "jax.numpy.prod",
           "argmax": "jax.numpy.argmax", "argmin": "jax.numpy.argmin", "std": "jax.numpy.std",
           "var": "jax.numpy.var", "logsumexp": "jax.scipy.special.logsumexp", "all": "jax.numpy.all",
           "any": "jax.numpy.any"}
_CASTS = {"float": "jax.numpy.float32", "bool": "jax.numpy.bool_", "double": "jax.numpy.float64",
          "half": "jax.numpy.float16", "long": "jax.numpy.int64", "int": "jax.numpy.int32", "byte": "jax.numpy.uint8",
          "char": "jax.numpy.int8", "short": "jax.numpy.int16", "bfloat16": "jax.numpy.bfloat16"}
METHODS = frozenset({*_UNARY, *_BINARY, *_REDUCE, *_CASTS, "view", "view_as", "size", "dim", "numel", "unsqueeze",
                     "permute", "transpose", "t", "clamp", "masked_fill", "contiguous", "type_as", "detach", "numpy",
                     "softmax", "log_softmax", "new_zeros", "new_ones", "expand", "expand_as", "unbind", "topk",
                     "argsort", "clone", "flip", "roll", "tril", "triu", "norm", "new_tensor", "new_full", "new_empty",
                     "repeat_interleave", "index_select", "gather", "scatter", "pin_memory", "element_size",
                     "is_contiguous", "cumsum", "cumprod"})
#: PyTorch tensor methods that neither a jax array nor a numpy array has (nor, by that name, a Python container or
#: string): a call the table above does not translate (not in it, or arguments it does not read) is reported,
#: never left to fail (AttributeError) or to compute something else
TORCH_ONLY = frozenset({
    *_UNARY, *(m for m in _BINARY if m != "matmul"), *_CASTS, "view_as", "dim", "numel", "unsqueeze", "permute",
    "t", "clamp", "masked_fill", "contiguous", "type_as", "detach", "numpy", "softmax", "log_softmax", "clone",
    "byte", "short", "char", "bfloat16", "expand", "expand_as", "index_select", "gather", "scatter", "scatter_add",
    "narrow", "new_zeros", "new_ones", "new_full", "new_tensor", "new_empty", "masked_select", "masked_scatter",
    "index_fill", "index_add", "index_copy", "chunk", "unbind", "topk", "kthvalue", "norm", "bmm", "mm", "addmm",
    "baddbmm", "rsqrt", "reciprocal", "expm1", "flip", "roll", "repeat_interleave", "tril", "triu", "isnan",
    "isinf", "is_contiguous", "element_size", "data_ptr", "pin_memory", "retain_grad", "register_hook",
    "detach_", "zero_", "copy_", "fill_", "add_", "sub_", "mul_", "div_", "pow_", "clamp_", "masked_fill_",
    "unsqueeze_", "squeeze_", "t_", "transpose_", "exp_", "log_", "sqrt_", "abs_", "neg_", "relu_", "sigmoid_",
    "tanh_", "index_fill_", "index_add_", "scatter_", "scatter_add_", "uniform_", "normal_", "bernoulli_",
    "random_", "exponential_", "cauchy_", "geometric_", "log_normal_", "stride", "storage", "untyped_storage",
    "storage_offset", "set_", "resize_", "share_memory_", "rsqrt_", "reciprocal_", "tril_", "triu_", "floor_",
    "ceil_", "sign_", "log1p_"})
#: in-place methods → the out-of-place method whose value they give the tensor (translated where nothing else holds
#: it: the tensor a torch function just made; inplace.py rebinds a statement's where the receiver is the sole holder)
_OUT_OF_PLACE = {f"{m}_": m for m in ("add", "sub", "mul", "div", "pow", "clamp", "masked_fill", "scatter", "exp",
                                      "log", "sqrt", "abs", "neg", "relu", "sigmoid", "tanh", "floor", "ceil", "sign",
                                      "log1p", "rsqrt", "reciprocal", "t", "tril", "triu")}
#: in-place draws → the jax.random spelling of the same draw, for the error (``{x}``: the receiver)
_DRAWS = {"random_": "jax.random.randint(key, {x}.shape, low, high, dtype={x}.dtype) (random_(high): low 0)",
          "uniform_": "jax.random.uniform(key, {x}.shape, {x}.dtype, minval=a, maxval=b)",
          "normal_": "mean + std * jax.random.normal(key, {x}.shape, {x}.dtype)",
          "bernoulli_": "jax.random.bernoulli(key, p, {x}.shape).astype({x}.dtype)",
          "exponential_": "jax.random.exponential(key, {x}.shape, {x}.dtype) / lambd",
          "cauchy_": "median + sigma * jax.random.cauchy(key, {x}.shape, {x}.dtype)",
          "geometric_": "jax.random.geometric(key, p, {x}.shape)", "log_normal_": "jnp.exp(mean + std * "
          "jax.random.normal(key, {x}.shape, {x}.dtype))"}
#: methods of PyTorch's memory and autograd model, which a jax array does not have → what to write instead
_NO_COUNTERPART = {
    "stride": "a jax array has no strides (XLA owns its layout): compute from x.shape what the strides were read for",
    "storage": "a jax array exposes no storage: compare or copy the values (x.shape, x.dtype, np.asarray(x))",
    "untyped_storage": "a jax array exposes no storage: compare or copy the values (x.shape, x.dtype, np.asarray(x))",
    "storage_offset": "a jax array is never a view into another's storage: its offset is 0",
    "data_ptr": "a jax array has no pointer to compare or share; x.unsafe_buffer_pointer() gives the device buffer's "
                "address, but arrays never alias as PyTorch's views do",
    "set_": "a jax array cannot be pointed at another's storage: rebind the name to the other array",
    "resize_": "a jax array has a fixed shape: rebind the name to a new array (jnp.resize(x, shape) repeats the "
               "values, jnp.zeros(shape) gives fresh ones)",
    "share_memory_": "jax arrays are not shared between processes: pass np.asarray(x) to the workers",
    "retain_grad": "there is no .grad to keep: jax.grad returns the gradient of the arguments of the differentiated "
                   "function; make this intermediate value one of them (or return it with has_aux=True)",
    "register_hook": "a jax array has no backward hooks: transform the gradient where jax.grad returns it, or wrap "
                     "the function in jax.custom_vjp",
}
#: in-place writes of a whole tensor → their out-of-place form (for the error that says what to write)
_WRITES = {"copy_": "x = x.at[idx].set(y) for x[idx].copy_(y)", "zero_": "x = jnp.zeros_like(x)",
           "fill_": "x = jnp.full_like(x, v)"}
# not repeat (numpy's repeats elements, PyTorch's tiles) nor an argument-less std/var (numpy's are
# biased, PyTorch's not): a receiver that may be a numpy array keeps them
# reductions jax arrays already have with numpy's meaning when called without dim/keepdim
_SAME_WITHOUT_DIM = {"sum", "mean", "prod", "argmax", "argmin", "all", "any"}


def _instead(name: str, call: cst.Call) -> str | None:
    """The error for a method with no exact jnp counterpart that says what to write instead (an in-place draw,
    detach_, an in-place arithmetic method on a tensor something else may hold, PyTorch's memory and autograd
    methods); None for the others (the generic error)."""
    recv = code(call.func.value)
    if name in _DRAWS:
        named = isinstance(call.func.value, (cst.Name, cst.Attribute, cst.Subscript))
        draw = _DRAWS[name].format(x=_atom(call.func.value) if named else "x")
        return (f".{name}(...): draws into {recv} in place; JAX draws with an explicit key into a new array, so this is "
                "not translated; write " + (f"{recv} = {draw}" if named else f"{draw} (x the tensor it fills)")
                + " with a key split from your PRNG key (rebinding every tensor sharing its memory too)")
    if name == "detach_":
        return (f".detach_(): cuts {recv} from PyTorch's graph in place; a jax array carries no graph, so this is not "
                f"translated: write {recv} = jax.lax.stop_gradient({recv}) where a function jax.grad differentiates "
                "reads it (truncated backpropagation: the state carried between steps), and drop it elsewhere")
    if name in _NO_COUNTERPART:
        return f".{name}(...): not translated, {_NO_COUNTERPART[name]}"
    if name in _OUT_OF_PLACE or name.endswith("_") and name[:-1] in METHODS:
        base = _OUT_OF_PLACE.get(name, name[:-1])
        args = ", ".join(("*" if a.star == "*" else "**" if a.star else f"{a.keyword.value}=" if a.keyword else "")
                         + code(a.value) for a in call.args)
        v = call.func.value
        rebind = f"{code(v.value)} = {code(v.value)}.at[{''.join(code(e) for e in v.slice)}].set({recv}.{base}(" \
            f"{args}))" if isinstance(v, cst.Subscript) and len(v.slice) >= 1 else f"{recv} = {recv}.{base}({args})" \
            if isinstance(v, (cst.Name, cst.Attribute)) else f"{recv}.{base}({args}) for its value"
        return (f".{name}(...): writes into {recv} in place, and so into every tensor sharing its memory (a slice of "
                "another, an argument, a module's parameter or buffer, an alias); a jax array is immutable, so this is "
                f"not translated: write the out-of-place value and rebind it, {rebind} (fwport translates that form), "
                "and rebind each tensor that shares its memory too")
    return None


def _module_output(fn: cst.FunctionDef, name: str, use: cst.CSTNode) -> bool:
    """Whether the binding of ``name`` that reaches ``use`` (a node of a statement of ``fn``'s body) is what a layer of
    its class returns (``x = self.to_patch_embedding(img)``, then ``x += ...`` keeps it): a tensor, whose dtype ``t.to(x)``
    takes. Only along the body's own statements (a compound statement binding it before the use: not known)."""
    from fwport.core.names import find_all
    if name in {p.name.value for p in (*fn.params.params, *fn.params.kwonly_params, *fn.params.posonly_params)} \
            or not isinstance(fn.body, cst.IndentedBlock):
        return False
    body = list(fn.body.body)
    at = next((i for i, st in enumerate(body) if any(c is use for c in find_all(st, type(use)))), None)
    if at is None:
        return False
    for st in reversed(body[:at]):
        small = st.body[0] if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 else None
        if isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name) and small.target.value == name:
            continue  # (x += v keeps what x holds)
        binds = [a for a in find_all(st, cst.Assign) if any(name in _target_names(t.target) for t in a.targets)]
        if any(name in _target_names(f.target) for f in find_all(st, cst.For)) \
                or any(isinstance(w.target, cst.Name) and w.target.value == name for w in find_all(st, cst.NamedExpr)):
            return False
        if not binds:
            continue
        a = binds[0]
        return small is a and len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name) \
            and isinstance(a.value, cst.Call) and isinstance(a.value.func, cst.Attribute) \
            and isinstance(a.value.func.value, cst.Name) and a.value.func.value.value == "self" \
            and not any(x.star for x in a.value.args)
    return False


def _target_names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for e in target.elements for n in _target_names(e.value)}
    return set()


def _operand(node: cst.BaseExpression) -> str:
    text = code(node)
    if isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float,
                         cst.SimpleString)) or node.lpar:
        return text
    return f"({text})"


def _dtype_like(node: cst.BaseExpression) -> bool:
    """``torch.int32``, ``np.uint8``, ``jnp.float32``, ``dtype``, ``a.dtype``: an argument of a dtype view."""
    if isinstance(node, cst.Name):
        return node.value == "dtype"
    if isinstance(node, cst.Attribute):
        root = node
        while isinstance(root, cst.Attribute):
            root = root.value
        return node.attr.value == "dtype" or isinstance(root, cst.Name) and root.value in ("torch", "np", "numpy", "jnp")
    return False


def _plain(node: cst.BaseExpression) -> bool:
    """A name, an attribute of one, a subscript of those by constants, jnp / jax.nn functions and arithmetic of
    such: read twice, it is the same array (JAX's functions have no side effects)."""
    if isinstance(node, (cst.Name, cst.Integer, cst.Float)):
        return True
    if isinstance(node, cst.UnaryOperation):
        return _plain(node.expression)
    if isinstance(node, (cst.BinaryOperation, cst.Comparison)):
        return _plain(node.left) and (_plain(node.right) if isinstance(node, cst.BinaryOperation)
                                      else all(_plain(c.comparator) for c in node.comparisons))
    if isinstance(node, cst.Call):
        return (dotted_text(node.func) or "").startswith(("jnp.", "jax.numpy.", "jax.nn.")) \
            and all(_plain(a.value) and not a.star for a in node.args)
    if isinstance(node, cst.Attribute):
        return _plain(node.value)
    if isinstance(node, cst.Subscript):
        return _plain(node.value) and all(
            isinstance(e.slice, cst.Index) and isinstance(e.slice.value, (cst.Integer, cst.Name))
            or isinstance(e.slice, cst.Slice) and all(p is None or isinstance(p, (cst.Integer, cst.UnaryOperation))
                                                      for p in (e.slice.lower, e.slice.upper, e.slice.step))
            for e in node.slice)
    return False


def expand(recv: cst.BaseExpression, sizes: list[cst.BaseExpression], spell) -> cst.BaseExpression | None:
    """``x.expand(s0, ..., sk)`` → ``jnp.broadcast_to(x, (s0, ..., sk))``: PyTorch's -1 (keep that axis) is the
    receiver's axis aligned from the end, ``x.shape[i - n]`` (the receiver read twice: only a plain one); one
    argument (a size or a shape) is broadcast_to's shape as it is (a -1 inside fails there, loudly)."""
    if len(sizes) == 1 and not isinstance(sizes[0], (cst.Tuple, cst.List)):
        return expr(f"{spell('jax.numpy.broadcast_to')}({code(recv)}, {code(sizes[0])})")
    if len(sizes) == 1:
        sizes = [e.value for e in sizes[0].elements if not isinstance(e, cst.StarredElement)] \
            if not any(isinstance(e, cst.StarredElement) for e in sizes[0].elements) else None
        if not sizes:
            return None
    n = len(sizes)
    keep = [i for i, sz in enumerate(sizes) if _minus_one(sz)]
    if keep and not _plain(recv):
        return None
    parts = [f"{_atom(recv)}.shape[{i - n}]" if i in keep else code(sz) for i, sz in enumerate(sizes)]
    return expr(f"{spell('jax.numpy.broadcast_to')}({code(recv)}, ({', '.join(parts)}{',' if n == 1 else ''}))")


def _minus_one(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) \
        and isinstance(node.expression, cst.Integer) and node.expression.value == "1"


def translate(name: str, call: cst.Call, spell) -> cst.BaseExpression | None:
    """The jnp spelling of ``recv.name(args)`` (``call`` with its arguments translated), or None when
    the arguments do not fit."""
    recv = call.func.value
    args = call.args
    if any(a.star for a in args):
        return None
    pos = [a.value for a in args if a.keyword is None]
    kw = {a.keyword.value: a.value for a in args if a.keyword is not None}
    r = _atom(recv)
    if name in _UNARY and not args:
        return expr(f"{spell(_UNARY[name])}({code(recv)})")
    if name in _BINARY and len(pos) == 1 and not kw:
        return cst.parse_expression(f"({r} {_BINARY[name]} {_operand(pos[0])})")
    if name in _CASTS and not args:
        return expr(f"{r}.astype({spell(_CASTS[name])})")
    if name in _REDUCE:
        dim = kw.pop("dim", pos[0] if pos else None)
        keep = kw.pop("keepdim", pos[1] if len(pos) > 1 else None)
        unbiased = kw.pop("unbiased", None)
        if kw or len(pos) > 2 or (unbiased is not None and name not in ("std", "var")):
            return None
        if name in _SAME_WITHOUT_DIM and dim is None and keep is None:
            return None  # the jax array's own method computes the same
        if name in ("std", "var") and not ({"dim", "keepdim", "unbiased"} & {a.keyword.value for a in args if a.keyword}):
            return None  # x.std() / x.std(0) is numpy's too, biased: only PyTorch's keywords tell
        parts = [code(recv)]
        if dim is not None:
            parts.append(f"axis={code(dim)}")
        if keep is not None:
            parts.append(f"keepdims={code(keep)}")
        if name in ("std", "var"):
            flag = code(unbiased) if unbiased is not None else "True"
            ddof = {"True": "1", "False": "0"}.get(flag, f"int({flag})")
            parts.append(f"ddof={ddof}")
        return expr(f"{spell(_REDUCE[name])}({', '.join(parts)})")
    if name == "view":
        if kw or not pos or (len(pos) == 1 and _dtype_like(pos[0])):
            return None  # a dtype view: x.view(torch.int32), a numpy array's a.view(np.uint8)
        return expr(f"{r}.reshape({', '.join(code(p) for p in pos)})")
    if name == "view_as" and len(pos) == 1 and not kw:
        return expr(f"{r}.reshape({_atom(pos[0])}.shape)")
    if name == "type_as" and len(pos) == 1 and not kw:
        return expr(f"{r}.astype({_atom(pos[0])}.dtype)")
    if name == "size" and not kw and len(pos) <= 1:
        return expr(f"{r}.shape[{code(pos[0])}]" if pos else f"{r}.shape")
    if name == "dim" and not args:
        return expr(f"{r}.ndim")
    if name == "numel" and not args:
        return expr(f"{r}.size")
    if name == "unsqueeze" and len(pos) + len(kw) == 1 and set(kw) <= {"dim"}:
        return expr(f"{spell('jax.numpy.expand_dims')}({code(recv)}, {code(pos[0] if pos else kw['dim'])})")
    if name == "permute" and pos and not kw:
        dims = pos[0] if len(pos) == 1 and isinstance(pos[0], (cst.Tuple, cst.List)) else None
        axes = code(dims) if dims is not None else "(" + ", ".join(code(p) for p in pos) + ("," if len(pos) == 1 else "") + ")"
        return expr(f"{spell('jax.numpy.transpose')}({code(recv)}, {axes})")
    if name == "transpose" and len(pos) == 2 and not kw:
        return expr(f"{spell('jax.numpy.swapaxes')}({code(recv)}, {code(pos[0])}, {code(pos[1])})")
    if name == "t" and not args:
        return expr(f"{r}.T")
    if name == "clamp" and len(pos) + len(kw) >= 1 and set(kw) <= {"min", "max"} and len(pos) <= 2:
        lo = pos[0] if pos else kw.get("min")
        hi = pos[1] if len(pos) > 1 else kw.get("max")
        return expr(f"{spell('jax.numpy.clip')}({code(recv)}, {code(lo) if lo is not None else 'None'}, "
                    f"{code(hi) if hi is not None else 'None'})")
    if name == "masked_fill" and len(pos) == 2 and not kw:
        return expr(f"{spell('jax.numpy.where')}({code(pos[0])}, {code(pos[1])}, {code(recv)})")
    if name in ("contiguous", "clone") and not args:  # (a jax array is never written in place: no copy to make)
        return recv
    if name in ("new_zeros", "new_ones") and pos and not set(kw) - {"dtype"} and not any(a.star for a in args):
        # x.new_zeros(n, m) / x.new_zeros((n, m)): x's dtype unless one is given (a torch dtype: the rules translate it)
        size = code(pos[0]) if len(pos) == 1 and isinstance(pos[0], (cst.Tuple, cst.List)) else \
            "(" + ", ".join(code(p) for p in pos) + ("," if len(pos) == 1 else "") + ")"
        dtype = code(kw["dtype"]) if "dtype" in kw else f"{r}.dtype"
        return expr(f"{spell('jax.numpy.' + name[4:])}({size}, dtype={dtype})")
    if name == "expand" and pos and not kw:
        return expand(recv, pos, spell)
    if name == "expand_as" and len(pos) == 1 and not kw:
        return expr(f"{spell('jax.numpy.broadcast_to')}({code(recv)}, {_atom(pos[0])}.shape)")
    if name == "detach" and not args:  # outside a gradient: the same values; inside one, no gradient through it
        return expr(f"{spell('jax.lax.stop_gradient')}({code(recv.with_changes(lpar=[], rpar=[]))})")
    if name == "numpy" and not args:
        return expr(f"{spell('numpy.asarray')}({code(recv)})")
    if name == "unbind" and len(pos) + len(kw) <= 1 and set(kw) <= {"dim"}:  # a tuple of the slices, as PyTorch's
        dim = pos[0] if pos else kw.get("dim")
        return expr(f"{spell('jax.numpy.unstack')}({code(recv)}" + (f", axis={code(dim)})" if dim is not None else ")"))
    if name == "topk":
        return _topk(recv, pos, kw, spell)
    if name == "argsort":
        return _argsort(recv, pos, kw, spell)
    if name in ("softmax", "log_softmax") and len(pos) + len(kw) == 1 and set(kw) <= {"dim"}:
        return expr(f"{spell('jax.nn.' + name)}({code(recv)}, axis={code(pos[0] if pos else kw['dim'])})")
    given = _bind(name, pos, kw) if name in _SIGNATURES else None
    if given is None:
        return None
    x = code(recv)
    if name == "flip" and given.get("dims"):  # x.flip(-1), x.flip(0, 1), x.flip((0, 1))
        return expr(f"{spell('jax.numpy.flip')}({x}, {_axes(given['dims'])})")
    if name == "roll" and "shifts" in given:  # without dims both flatten, roll and restore the shape
        dims = f", axis={_axes([given['dims']])}" if "dims" in given else ""
        return expr(f"{spell('jax.numpy.roll')}({x}, {code(given['shifts'])}{dims})")
    if name in ("tril", "triu"):
        k = f", k={code(given['diagonal'])}" if "diagonal" in given else ""
        return expr(f"{spell('jax.numpy.' + name)}({x}{k})")
    if name == "norm":
        return _norm(x, given, spell)
    if name in ("new_tensor", "new_full", "new_empty"):
        dtype = code(given["dtype"]) if "dtype" in given else f"{r}.dtype"  # (x's dtype, as PyTorch's)
        if name == "new_tensor" and "data" in given:
            return expr(f"{spell('jax.numpy.asarray')}({code(given['data'])}, dtype={dtype})")
        size = given.get("size")
        if not size:
            return None
        size = size if isinstance(size, list) else [size]
        size = code(size[0]) if len(size) == 1 and isinstance(size[0], (cst.Tuple, cst.List)) else \
            "(" + ", ".join(code(p) for p in size) + ("," if len(size) == 1 else "") + ")"
        if name == "new_full" and "fill_value" in given:
            return expr(f"{spell('jax.numpy.full')}({size}, {code(given['fill_value'])}, dtype={dtype})")
        if name == "new_empty":  # (uninitialised in PyTorch: any values are its values)
            return expr(f"{spell('jax.numpy.empty')}({size}, dtype={dtype})")
        return None
    if name == "repeat_interleave" and "repeats" in given:  # without dim both repeat the flattened elements
        parts = [x, code(given["repeats"])]
        if "dim" in given:
            parts.append(f"axis={code(given['dim'])}")
        if "output_size" in given:
            parts.append(f"total_repeat_length={code(given['output_size'])}")
        return expr(f"{spell('jax.numpy.repeat')}({', '.join(parts)})")
    if name == "index_select" and {"dim", "index"} <= set(given):
        return expr(f"{spell('jax.numpy.take')}({x}, {code(given['index'])}, axis={code(given['dim'])})")
    if name == "gather" and {"dim", "index"} <= set(given):
        return expr(f"{spell('jax.numpy.take_along_axis')}({x}, {code(given['index'])}, axis={code(given['dim'])})")
    if name == "scatter" and {"dim", "index"} <= set(given) and ("src" in given) != ("value" in given):
        v = code(given["src"] if "src" in given else given["value"])
        return expr(f"{spell('jax.numpy.put_along_axis')}({x}, {code(given['index'])}, {v}, "
                    f"axis={code(given['dim'])}, inplace=False)")
    if name in ("cumsum", "cumprod") and "dim" in given and any(a.keyword for a in args):
        dtype = f", dtype={code(given['dtype'])}" if "dtype" in given else ""
        return expr(f"{spell('jax.numpy.' + name)}({x}, axis={code(given['dim'])}{dtype})")
    if name == "pin_memory" and not given:  # page-locked host memory for faster copies: JAX places arrays itself
        return recv
    if name == "element_size" and not given:
        return expr(f"{r}.dtype.itemsize")
    if name == "is_contiguous" and not given:  # (a jax array has no strides: its layout is XLA's, never a view's)
        return cst.Name("True")
    return None


#: the PyTorch signatures of the methods translated from bound arguments (``*name``: the rest of the positionals);
#: keywords that change nothing on JAX (device, requires_grad, pin_memory, layout) are accepted and dropped
_SIGNATURES = {
    "flip": ("*dims",), "roll": ("shifts", "dims"), "tril": ("diagonal",), "triu": ("diagonal",),
    "norm": ("p", "dim", "keepdim", "dtype"), "new_tensor": ("data",), "new_full": ("size", "fill_value"),
    "new_empty": ("*size",), "repeat_interleave": ("repeats", "dim"), "index_select": ("dim", "index"),
    "gather": ("dim", "index"), "scatter": ("dim", "index", "src"),
    "cumsum": ("dim",), "cumprod": ("dim",), "pin_memory": (), "element_size": (), "is_contiguous": (),
}
#: keywords each method takes beyond its positional names (those in _DROPPED: accepted, nothing to write)
_KEYWORDS = {"flip": {"dims"}, "new_tensor": {"dtype"}, "new_full": {"dtype"}, "new_empty": {"dtype", "size"},
             "repeat_interleave": {"output_size"}, "scatter": {"value"},
             "cumsum": {"dtype"}, "cumprod": {"dtype"}}
_DROPPED = {"device", "requires_grad", "pin_memory", "layout"}
#: new_* keywords only: a ``device`` elsewhere is no tensor's
_DROPPABLE = {"new_tensor", "new_full", "new_empty"}


def _bind(method: str, pos, kw) -> dict | None:
    """PyTorch's arguments of ``method`` by name (a ``*name`` parameter: the list of the positionals from there);
    None where they do not fit its signature."""
    names = _SIGNATURES[method]
    name_of = next((i for i, n in enumerate(names) if n.startswith("*")), None)
    given: dict = {}
    if name_of is not None:
        plain = list(names[:name_of])
        if len(pos) < len(plain):
            return None
        given.update(zip(plain, pos))
        rest = pos[len(plain):]
        if rest:
            given[names[name_of][1:]] = rest
    else:
        if len(pos) > len(names):
            return None
        given.update(zip(names, pos))
    for k, v in kw.items():
        if k in given or k not in {n.lstrip("*") for n in names} | _KEYWORDS.get(method, set()) \
                and not (method in _DROPPABLE and k in _DROPPED):
            return None
        if k in _DROPPED and method in _DROPPABLE:
            continue
        given[k] = [v] if name_of is not None and k == names[name_of][1:] else v
    return given


def _axes(dims: list[cst.BaseExpression]) -> str:
    """``flip``'s dims (one list or tuple, or several numbers) as jnp's axis: a number, or a tuple of them."""
    if len(dims) == 1 and isinstance(dims[0], cst.List):
        return "(" + ", ".join(code(e.value) for e in dims[0].elements) + ("," if len(dims[0].elements) == 1 else "") + ")"
    if len(dims) == 1:
        return code(dims[0])
    return "(" + ", ".join(code(d) for d in dims) + ")"


#: spellings of infinity (a norm's p: the largest magnitude)
_INFINITY = frozenset({'float("inf")', "math.inf", "np.inf", "numpy.inf", "jnp.inf", "torch.inf", "jax.numpy.inf"})


def _norm(x: str, given: dict, spell) -> cst.BaseExpression | None:
    """``x.norm(p="fro", dim=None, keepdim=False)`` → ``jnp.linalg.vector_norm(x, ord=p, axis=dim, keepdims=...)``:
    PyTorch's is a vector norm (over every element without dim) for a number p and for "fro" (the 2-norm), as
    torch.norm (ops.vector_norm). A p that is no literal number or "fro" (``block.norm(h)``: a module's norm layer,
    "nuc"), or a dtype, is refused."""
    from fwport.core.engine import NOT_LITERAL, literal_value
    p = given.get("p")
    value = literal_value(p, NOT_LITERAL) if p is not None else None
    if "dtype" in given or p is not None and not (value == "fro" or isinstance(value, (int, float))
                                                  and not isinstance(value, bool)) \
            and code(p).replace("'", '"').lstrip("-") not in _INFINITY:
        return None
    parts = [x]
    if value not in (None, "fro", 2):
        parts.append(f"ord={code(p)}")
    if given.get("dim") is not None:
        parts.append(f"axis={code(given['dim'])}")
    if "keepdim" in given:
        parts.append(f"keepdims={code(given['keepdim'])}")
    return expr(f"{spell('jax.numpy.linalg.vector_norm')}({', '.join(parts)})")


def _topk(recv, pos, kw, spell) -> cst.BaseExpression | None:
    """``x.topk(k, dim=-1, largest=True, sorted=True)`` → ``jax.lax.top_k(x, k)`` (``axis=dim`` for another dim): the
    k largest and their indices, largest first, as PyTorch's sorted result (an unsorted one promises no order).
    ``largest`` must be the literal True (the smallest: refused, left for the residue scan)."""
    from fwport.core.engine import literal_value
    names = ("k", "dim", "largest", "sorted")
    if len(pos) > len(names) or set(kw) - set(names) or set(kw) & set(names[:len(pos)]):
        return None
    given = {**dict(zip(names, pos)), **kw}
    if "k" not in given:
        return None
    if "largest" in given and literal_value(given["largest"], None) is not True:
        return None
    if "sorted" in given and not isinstance(literal_value(given["sorted"], None), bool):
        return None
    dim = given.get("dim")
    axis = "" if dim is None or literal_value(dim, None) == -1 else f", axis={code(dim)}"
    return expr(f"{spell('jax.lax.top_k')}({code(recv)}, {code(given['k'])}{axis})")


def _argsort(recv, pos, kw, spell) -> cst.BaseExpression | None:
    """``x.argsort(dim=-1, descending=False, stable=False)`` → ``jnp.argsort(x, axis=dim, descending=...)`` where a
    PyTorch keyword (dim, descending, stable) or a second positional argument says x is a tensor (a numpy or jax
    array's ``a.argsort(axis)`` sorts the same way: left as written); jnp's sort is stable (the warning of apply)."""
    names = ("dim", "descending")
    if len(pos) > len(names) or set(kw) - {*names, "stable"} or set(kw) & set(names[:len(pos)]) \
            or not (kw or len(pos) > 1):
        return None
    given = {**dict(zip(names, pos)), **kw}
    parts = [code(recv)]
    if "dim" in given:
        parts.append(f"axis={code(given['dim'])}")
    if "descending" in given:
        parts.append(f"descending={code(given['descending'])}")
    return expr(f"{spell('jax.numpy.argsort')}({', '.join(parts)})")


def _fill(call: cst.Call, spell=None) -> str | None:
    """``x.fill_(v)`` (one positional value) / ``x.zero_()`` → the jnp text of the array it leaves (with ``spell``;
    without it, any text: whether the call is one); None for other calls."""
    name = call.func.attr.value if isinstance(call.func, cst.Attribute) else None
    spell = spell or (lambda q: q)
    recv = code(call.func.value) if name else ""
    if name == "fill_" and len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star:
        return f"{spell('jax.numpy.full_like')}({recv}, {code(call.args[0].value)})"
    if name == "zero_" and not call.args:
        return f"{spell('jax.numpy.zeros_like')}({recv})"
    return None


class _Changes(cst.CSTVisitor):
    """_changes: whether the code assigns ``name`` or into it, calls an in-place method of it, or reads its
    ``.grad`` / ``.data``."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name
        self.found = False

    def rooted(self, node) -> bool:
        while isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        return isinstance(node, cst.Name) and node.value == self.name

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self.found = self.found or self.rooted(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.found = self.found or self.rooted(node.target)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self.rooted(node) and (node.attr.value in ("grad", "data") or node.attr.value.endswith("_")
                                  and not node.attr.value.startswith("_")):
            self.found = True


def _changes(body: cst.CSTNode, name: str) -> bool:
    """Whether ``body`` assigns to ``name`` or an attribute or item of it, calls an in-place method on it or on one of
    its attributes (``p.data.zero_()``), or reads ``name.grad`` / ``name.data``: PyTorch state a jax array has not."""
    finder = _Changes(name)
    scan(body, finder)
    return finder.found


class _SelfAttributes(cst.CSTVisitor):
    """The attributes ``self.<name>`` the code reads, into ``out``."""

    def __init__(self, out: set[str]):
        super().__init__()
        self.out = out

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if isinstance(node.value, cst.Name) and node.value.value == "self":
            self.out.add(node.attr.value)


def _whole_methods(cls: cst.ClassDef) -> list[cst.FunctionDef]:
    """The methods of a translated module class that see whole arrays, not one example: ``__init__`` (the tables
    it computes: a positional encoding's ``.unsqueeze(1)``, ``.float()``), and the others but ``__call__``
    (batch.py's) and a method ``__call__`` calls (``self.attend(x)``: per example too)."""
    fns = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    called: set[str] = set()
    if "__call__" in fns:
        scan(fns["__call__"], _SelfAttributes(called))
    return [fn for name, fn in fns.items() if name not in ("__call__", "forward") and name not in called
            and not any(dotted_text(d.decorator) in ("staticmethod", "classmethod") for d in fn.decorators)]


class _RequiresGrad(cst.CSTVisitor):
    """tensor_methods.plan: ``<name>.requires_grad`` in a loop over a model's parameters → True."""

    def __init__(self, ctx, name):
        super().__init__()
        self.ctx = ctx
        self.name = name

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "requires_grad" and isinstance(node.value, cst.Name) \
                and node.value.value == self.name and self.ctx.plans.get(node) is None:
            def trains(original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
                self.ctx.report(Severity.INFO, "idiom-replaced", f"{code(original)} → True: a JAX array has no "
                                "requires_grad; every array of the model is trained (freeze one with a filter "
                                "or optax.set_to_zero by hand)", original)
                return cst.Name("True")
            self.ctx.plans.add(node, trains, descend=False, by="tensor-methods")


class _ModelLeaves(cst.CSTVisitor):
    """``for p in model.parameters()`` (a loop or a comprehension, outside the module classes) → over the model's
    arrays; ``p.requires_grad`` there → True. Where the parameters are an argument (an optimizer's), its rule's."""

    def __init__(self, ctx, models):
        super().__init__()
        self.ctx = ctx
        self.models = models

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def over(self, it: cst.BaseExpression, target: cst.BaseExpression, body: cst.CSTNode) -> None:
        if not (isinstance(it, cst.Call) and not it.args and isinstance(it.func, cst.Attribute)
                and it.func.attr.value == "parameters" and isinstance(it.func.value, cst.Name)
                and it.func.value.value in self.models and self.ctx.plans.get(it) is None):
            return
        model = it.func.value.value
        name = target.value if isinstance(target, cst.Name) else None
        if name is None or _changes(body, name):
            def refuse(original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
                self.ctx.report(Severity.ERROR, "unsupported-construct", f"for ... in {model}.parameters(): the loop "
                           "changes or reads PyTorch state of each parameter (an assignment, an in-place method, "
                           ".grad, .data); JAX arrays are immutable and carry no gradient: freeze with a filter "
                           "(eqx.partition) or optax.set_to_zero, compute on the gradients eqx.filter_grad returns, "
                           "and rebuild the model with eqx.tree_at", original)
                return updated
            self.ctx.plans.add(it, refuse, by="tensor-methods")
            return

        def leaves(original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            self.ctx.report(Severity.INFO, "idiom-replaced", f"{model}.parameters() → the model's arrays (jax.tree_util."
                       f"tree_leaves(eqx.filter({model}, eqx.is_inexact_array))): a shared parameter is one array, "
                       "as PyTorch counts it once; registered float buffers are arrays of the model too", original)
            return expr(f"{self.ctx.spell_text('jax.tree_util.tree_leaves')}({self.ctx.spell_text('equinox.filter')}"
                        f"({model}, {self.ctx.spell_text('equinox.is_inexact_array')}))")
        self.ctx.plans.add(it, leaves, by="tensor-methods")

        scan(body, _RequiresGrad(self.ctx, name))

    def visit_For(self, node: cst.For) -> None:
        self.over(node.iter, node.target, node.body)

    def comprehension(self, node) -> None:
        self.over(node.for_in.iter, node.for_in.target, node)

    visit_GeneratorExp = visit_ListComp = visit_SetComp = visit_DictComp = comprehension


class _Casts(cst.CSTVisitor):
    """tensor_methods.plan: every cast left in the classes the scan of ``calls`` (a _TensorCalls) skips (a Dataset's
    __getitem__)."""

    def __init__(self, ctx, calls):
        super().__init__()
        self.ctx = ctx
        self.calls = calls

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.calls.functions.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.calls.functions.pop()

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("to", "type") \
                and self.ctx.plans.get(node) is None:
            self.calls.cast(node)


class _TensorCalls(cst.CSTVisitor):
    """tensor_methods.plan: the edits of tensor methods outside the module classes and in their whole-array methods."""

    in_module = False  # inside a module class's whole-array method

    def __init__(self, ctx, translated: set, nexted: set, filled: set, modules: set, module_plans: str):
        super().__init__()
        self.ctx = ctx
        self.translated = translated  # the module classes
        self.nexted = nexted  # self.parameters() calls that next(...) takes
        self.filled = filled  # `x.fill_(v)` calls that are a statement (visit_Expr)
        self.modules = modules  # modules the output spells
        self.module_plans = module_plans  # (modules.PLANS: ctx.analyses's key of the module classes' plans)
        self.functions: list[cst.FunctionDef] = []  # the functions a scan is in (innermost last)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.functions.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        if node.name.value in self.translated:
            plan = self.ctx.analyses[self.module_plans][node.name.value]
            self.in_module = True
            for fn in _whole_methods(node):
                if fn.name.value not in plan.get("per_example", ()):  # (called by what forward calls)
                    scan(fn, self)
            self.in_module = False
            # the methods forward calls see one example: their tensor methods by the same table (a dimension
            # there that is not negative is modules.py's batch-axis error); those batch.py wrote, as forward, are done
            helpers = set(plan.get("per_example", ())) - set(plan.get("traced", ()))
            if plan.get("batched"):  # a batched module's __call__ keeps PyTorch's shapes, as the code outside does
                helpers |= {"__call__", "forward"}
            for fn in node.body.body:
                if isinstance(fn, cst.FunctionDef) and fn.name.value in helpers:
                    scan(fn, self)
        return False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self.in_module and node.attr.value == "requires_grad" and self.ctx.plans.get(node) is None:
            def trains(original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
                self.ctx.report(Severity.INFO, "idiom-replaced", f"{code(original)} → True: a JAX array has no "
                           "requires_grad; every array of the model is trained (freeze one with a filter or "
                           "optax.set_to_zero by hand)", original)
                return cst.Name("True")
            self.ctx.plans.add(node, trains, descend=False, by="tensor-methods")
        if node.attr.value in ("values", "indices") and isinstance(node.value, cst.Call) \
                and isinstance(node.value.func, cst.Attribute) and node.value.func.attr.value == "topk" \
                and self.ctx.plans.get(node) is None:
            # x.topk(k).indices: PyTorch's named tuple; jax.lax.top_k gives a plain (values, indices) pair
            def field(original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
                inner = updated.value
                if not (isinstance(inner, cst.Call) and (dotted_text(inner.func) or "").endswith("lax.top_k")):
                    return updated  # not translated (largest=False): its error stands
                return expr(f"{code(inner)}[{0 if original.attr.value == 'values' else 1}]")
            self.ctx.plans.add(node, field, by="tensor-methods")

    def assign_target(self, node: cst.Assign) -> None:
        # `logits[logits < v[:, [-1]]] = -inf` (generate): a jax array is not assigned into
        t = node.targets[0].target if len(node.targets) == 1 else None
        if not (self.in_module and isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name)
                and len(t.slice) == 1 and isinstance(t.slice[0].slice, cst.Index)) or self.ctx.plans.get(node) is not None:
            return
        name = t.value.value

        def assign(original: cst.Assign, updated: cst.Assign) -> cst.Assign:
            index, value = updated.targets[0].target.slice[0].slice.value, updated.value
            if isinstance(index, cst.Comparison):  # a boolean mask: where it holds, the value
                new = f"{self.ctx.spell_text('jax.numpy.where')}({code(index)}, {code(value)}, {name})"
            else:
                new = f"{name}.at[{code(index)}].set({code(value)})"
            return cst.Assign([cst.AssignTarget(cst.Name(name))], expr(new))

        self.ctx.plans.add(node, assign, by="tensor-methods")

    def visit_Expr(self, node: cst.Expr) -> None:
        """``x.fill_(v)`` / ``x.zero_()`` as a statement, x a name → ``x = jnp.full_like(x, v)`` / ``jnp.zeros_like(x)``:
        the values it gives x in place, in x's shape and dtype."""
        call = node.value
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name)
                and call.func.value.value not in self.modules and self.ctx.imports.resolve(call.func.value) is None
                and _fill(call) is not None) or self.ctx.plans.get(node) is not None or self.ctx.plans.get(call) is not None:
            return
        name = call.func.value.value

        def assign(original: cst.Expr, updated: cst.Expr) -> cst.BaseSmallStatement:
            return cst.Assign([cst.AssignTarget(cst.Name(name))], expr(_fill(updated.value, self.ctx.spell_text)))

        self.ctx.plans.add(node, assign, by="tensor-methods")
        self.filled.add(id(call))  # the statement's edit writes it (visit_Call leaves it)

    def visit_Assign(self, node: cst.Assign) -> None:
        self.assign_target(node)
        t = node.targets[0].target if len(node.targets) == 1 else None
        if isinstance(t, (cst.Tuple, cst.List)) and len(t.elements) == 2:  # `_, pred = output.max(1)`
            self.extreme(node.value)

    def visit_Subscript(self, node: cst.Subscript) -> None:  # `output.max(1)[1]`
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) \
                and code(node.slice[0].slice.value) in ("0", "1"):
            self.extreme(node.value)

    def extreme(self, node) -> None:
        """``x.max(d)`` / ``x.min(d)`` read as a pair: PyTorch's (values, indices), numpy's would be the values
        alone (``_, pred = output.max(1)`` would unpack the batch's maxima) → a tuple of jnp.max and jnp.argmax."""
        if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
                and node.func.attr.value in ("max", "min") and self.ctx.plans.get(node) is None
                and self.ctx.imports.resolve(node.func) is None and self.ctx.imports.resolve(node.func.value) is None):
            return
        args = node.args
        if not (len(args) in (1, 2) and not any(a.star for a in args)
                and all(a.keyword is None or a.keyword.value in ("dim", "keepdim") for a in args)):
            return
        fn = node.func.attr.value

        def pair(original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            a = {("dim", "keepdim")[i] if x.keyword is None else x.keyword.value: x.value
                 for i, x in enumerate(updated.args)}
            keep = f", keepdims={code(a['keepdim'])}" if "keepdim" in a else ""
            x, d = code(updated.func.value), code(a["dim"])
            self.ctx.report(Severity.INFO, "idiom-replaced", f".{fn}({code(original.args[0].value)}) read as a pair: "
                       f"PyTorch's (values, indices) → (jnp.{fn}, jnp.arg{fn})", original)
            return expr(f"({self.ctx.spell_text('jax.numpy.' + fn)}({x}, axis={d}{keep}), "
                        f"{self.ctx.spell_text('jax.numpy.arg' + fn)}({x}, axis={d}{keep}))")

        if any(a.keyword is None for a in args[:1]) or args[0].keyword.value == "dim":
            self.ctx.plans.add(node, pair, by="tensor-methods")

    def cast(self, node: cst.Call) -> None:
        """``x.to(torch.float16)`` / ``x.type(torch.bool)`` → ``x.astype(jnp.float16)``; on a model (whose cast as
        a statement the training pass writes) an error: a module is cast leaf by leaf."""
        from fwport.packs.torch2jax.ops import cast_dtype
        from fwport.packs.torch2jax.passes.training import MODELS

        dtype = cast_dtype(node, self.ctx)
        if dtype is None:
            self.unknown_to(node)
            return
        recv = node.func.value
        if dotted_text(recv) in self.ctx.analyses.get(MODELS, ()):
            def refuse(original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
                self.ctx.report(Severity.ERROR, "unsupported-construct", f"{code(original)}: a model's cast inside an "
                           "expression is not translated; write it as a statement of its own (model.to(dtype)), "
                           f"or cast its arrays by hand: jax.tree_util.tree_map(lambda a: a.astype(jnp.{dtype}) "
                           "if eqx.is_inexact_array(a) else a, model)", original)
                return updated
            self.ctx.plans.add(node, refuse, by="tensor-methods")
            return

        def astype(original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            return expr(f"{_atom(updated.func.value)}.astype({self.ctx.spell_text('jax.numpy.' + dtype)})")
        self.ctx.plans.add(node, astype, by="tensor-methods")

    def model_cast(self, node: cst.Call, dtype: str) -> None:
        """``Net(...).double()`` (``.float()``, ``.half()``), a module class of the file built and cast in one
        expression → each floating array of the new model cast, as the statement ``model.double()`` becomes:
        ``jax.tree_util.tree_map(lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, Net(...))``
        (an Equinox module has no ``.astype``)."""
        def tree_cast(original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            self.ctx.report(Severity.INFO, "idiom-replaced", f"{code(original)}: the model's floating arrays cast "
                            f"leaf by leaf ({dtype.split('.')[-1]}), as PyTorch casts its parameters and buffers",
                            original)
            return expr(f"{self.ctx.spell_text('jax.tree_util.tree_map')}(lambda a: a.astype("
                        f"{self.ctx.spell_text(dtype)}) if {self.ctx.spell_text('equinox.is_inexact_array')}(a) else a, "
                        f"{code(updated.func.value)})")
        self.ctx.plans.add(node, tree_cast, by="tensor-methods")

    def unknown_to(self, node: cst.Call) -> None:
        """``x.to(v)`` of one argument that is no torch dtype written out (cast) and no device move (the training pass
        removes those): ``x.to(y.dtype)`` / ``x.to(dtype=v)`` → ``x.astype(...)``; a ``v`` fwport cannot tell a dtype,
        a device or a tensor (``x.to(q)``, ``dtype = rest[-1]``) is an error, as inside a forward (batch.py): left
        as written, a jax array has no ``.to``."""
        from fwport.packs.torch2jax.batch import _device_move
        from fwport.packs.torch2jax.passes.training import MODELS

        f = node.func
        if isinstance(f, cst.Attribute) and f.attr.value == "type" and len(node.args) == 1 and not node.args[0].star \
                and node.args[0].keyword is None and _dtype_like(node.args[0].value) \
                and dotted_text(f.value) not in self.ctx.analyses.get(MODELS, ()) \
                and self.ctx.imports.resolve(f) is None and self.ctx.imports.resolve(f.value) is None \
                and self.ctx.plans.get(node) is None:
            def astype_of(original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
                return expr(f"{_atom(updated.func.value)}.astype({code(updated.args[0].value)})")
            self.ctx.plans.add(node, astype_of, by="tensor-methods")  # x.type(dtype), a name or y.dtype: a cast
            return
        if not isinstance(f, cst.Attribute) or f.attr.value != "to" or len(node.args) != 1 or node.args[0].star \
                or node.args[0].keyword is not None and node.args[0].keyword.value != "dtype":
            return
        recv, v = f.value, node.args[0].value
        if dotted_text(recv) in self.ctx.analyses.get(MODELS, ()) or self.ctx.imports.resolve(f) is not None \
                or self.ctx.imports.resolve(recv) is not None or _device_move(node, self.ctx) \
                or self.ctx.plans.get(node) is not None:
            return  # a model's move or cast (the training pass's), a module's function, a device move
        if isinstance(v, cst.Name) and self.functions and _module_output(self.functions[-1], v.value, node):
            def astype_like(original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
                return expr(f"{_atom(updated.func.value)}.astype({code(updated.args[0].value)}.dtype)")
            self.ctx.plans.add(node, astype_like, by="tensor-methods")  # x.to(y), y a layer's output: y's dtype
            return
        if isinstance(v, cst.Attribute) and v.attr.value == "dtype" or node.args[0].keyword is not None:
            def astype(original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
                return expr(f"{_atom(updated.func.value)}.astype({code(updated.args[0].value)})")
            self.ctx.plans.add(node, astype, by="tensor-methods")  # x.to(y.dtype), x.to(dtype=d): a cast
            return

        def refuse(original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            self.ctx.report(Severity.ERROR, "unsupported-construct", f"{code(original)}: fwport cannot tell whether "
                            f"{code(v)} is a dtype, a device or a tensor (whose dtype .to takes); write .astype("
                            f"{code(v)}) for a dtype, .astype({code(v)}.dtype) for a tensor's, or drop the call for a "
                            "device", original)
            return updated
        self.ctx.plans.add(node, refuse, by="tensor-methods")

    def visit_Call(self, node: cst.Call) -> None:
        f = node.func
        if self.in_module and isinstance(f, cst.Name) and f.value == "self" and self.ctx.plans.get(node) is None:
            def batched(original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
                self.ctx.report(Severity.INFO, "idiom-replaced", f"{code(original)}: the module takes one example; "
                           "the batch this method holds goes through jax.vmap(self)", original)
                return updated.with_changes(func=cst.Call(self.ctx.spell("jax.vmap"), [cst.Arg(cst.Name("self"))]))
            self.ctx.plans.add(node, batched, by="tensor-methods")
            return
        if self.in_module and dotted_text(f) == "self.named_parameters" and not node.args \
                and self.ctx.plans.get(node) is None:
            def named(original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
                from fwport.packs.torch2jax import layers
                self.ctx.report(Severity.INFO, "idiom-replaced", "self.named_parameters() → (PyTorch's name, array) "
                           "for each array of the module (_torch_name of its pytree path)", original)
                return expr(f"[({layers.use(self.ctx, '_torch_name')}(path), p) for path, p in "
                            f"{self.ctx.spell_text('jax.tree_util.tree_leaves_with_path')}({self.ctx.spell_text('equinox.filter')}"
                            f"(self, {self.ctx.spell_text('equinox.is_inexact_array')}))]")
            self.ctx.plans.add(node, named, by="tensor-methods")
            return
        if self.in_module and dotted_text(f) == "next" and len(node.args) == 1 \
                and isinstance(node.args[0].value, cst.Call) and dotted_text(node.args[0].value.func) == "self.parameters":
            self.nexted.add(id(node.args[0].value))  # next(self.parameters()): an iterator of the arrays
        if self.in_module and dotted_text(f) == "self.parameters" and not node.args and self.ctx.plans.get(node) is None:
            def leaves(original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
                if id(original) in self.nexted:
                    return expr(f"iter({self.ctx.spell_text('jax.tree_util.tree_leaves')}({self.ctx.spell_text('equinox.filter')}"
                                f"(self, {self.ctx.spell_text('equinox.is_inexact_array')})))")
                self.ctx.report(Severity.INFO, "idiom-replaced", "self.parameters() → the module's arrays "
                           "(jax.tree_util.tree_leaves(eqx.filter(self, eqx.is_inexact_array))): a shared "
                           "parameter is one array, as PyTorch counts it once; registered float buffers are "
                           "arrays of the module too", original)
                return expr(f"{self.ctx.spell_text('jax.tree_util.tree_leaves')}({self.ctx.spell_text('equinox.filter')}"
                            f"(self, {self.ctx.spell_text('equinox.is_inexact_array')}))")
            self.ctx.plans.add(node, leaves, by="tensor-methods")
            return
        if id(node) in self.filled:
            return
        if isinstance(f, cst.Attribute) and f.attr.value in ("to", "type") and self.ctx.plans.get(node) is None:
            self.cast(node)
            return
        if not isinstance(f, cst.Attribute) or f.attr.value not in METHODS | TORCH_ONLY \
                or self.ctx.plans.get(node) is not None:
            return
        if self.ctx.imports.resolve(f) is not None or self.ctx.imports.resolve(f.value) is not None:
            return  # torch.exp(...), np.exp(...), a module's function: the rules' business
        root = f.value
        while isinstance(root, cst.Attribute):
            root = root.value
        if isinstance(root, cst.Name) and root.value in self.modules:
            return
        name = f.attr.value
        if name in ("float", "double", "half") and not node.args and isinstance(f.value, cst.Call) \
                and isinstance(f.value.func, cst.Name) and f.value.func.value in self.translated:
            self.model_cast(node, _CASTS[name])  # Net().double(): a model built and cast in one expression
            return
        if isinstance(f.value, cst.Name) and f.value.value == "self" or name in _UNARY and node.args:
            return  # a method of the class (self.norm(x): a layer), or a function's (m.relu(*a)): no tensor's
        temporary = isinstance(f.value, cst.Call) and _fill(node) is not None  # torch.ones(1, 1).fill_(v)
        from fwport.packs.torch2jax.inplace import _new_tensor
        # torch.zeros(B, n).scatter_(1, idx, 1): an in-place method of the tensor a torch function just made, which
        # nothing else holds: its out-of-place value
        fresh = _OUT_OF_PLACE.get(name) if _new_tensor(f.value, self.ctx) else None

        def apply(original: cst.Call, updated: cst.Call, name=name) -> cst.BaseExpression:
            if temporary:  # the array a call just made, filled: nothing else holds it
                return expr(_fill(updated, self.ctx.spell_text))
            out = translate(name, updated, self.ctx.spell_text) if name in METHODS else None
            if out is None and fresh == "add" and len(updated.args) == 1 and not updated.args[0].keyword \
                    and not updated.args[0].star:  # (add is no table's method: a set's add)
                out = cst.parse_expression(f"({_atom(updated.func.value)} + {_operand(updated.args[0].value)})")
            if out is None and fresh is not None:
                out = translate(fresh, updated.with_changes(func=updated.func.with_changes(attr=cst.Name(fresh))),
                                self.ctx.spell_text)
            advice = _instead(name, original) if out is None and not self.ctx.is_settled(original) else None
            if advice is not None:
                self.ctx.report(Severity.ERROR, "unsupported-construct", advice, original)
            elif out is None and name in _WRITES and not self.ctx.is_settled(original):
                self.ctx.report(Severity.ERROR, "unsupported-construct", f".{name}(...) writes into "
                                f"{code(original.func.value)} in place, and so into every tensor sharing its memory (a "
                                "slice of another, a loop variable over one, a module's parameter or buffer); a jax "
                                "array is immutable, so this is not translated: rebind the new value where it is read "
                                f"({_WRITES[name]}, every alias too), replace a module's array with eqx.tree_at(lambda "
                                "m: m.weight, model, value) (fwport does this in __init__), and thread a buffer "
                                "updated in forward through eqx.nn.State", original)
            elif out is None and name in TORCH_ONLY and not self.ctx.is_settled(original):
                self.ctx.report(Severity.ERROR, "unsupported-construct", f".{name}(...): a PyTorch tensor method no jax "
                           "array has, not translated" + (" with these arguments" if name in METHODS else "")
                           + ": left as written it fails (AttributeError); write its jnp counterpart "
                           "(jnp.<function>(x, ...); x = x.at[...].set(...) for an in-place method)", original)
            elif out is None and name in ("std", "var") and len(original.args) <= 1 \
                    and not any(a.keyword or a.star for a in original.args) and not self.ctx.is_settled(original):
                # x.std() / x.std(1): numpy's spelling too, so left as written; a tensor's would be unbiased
                size = "sqrt(N / (N - 1))" if name == "std" else "N / (N - 1)"
                recv = code(original.func.value)
                self.ctx.report(Severity.WARNING, "approximate", f"{code(original)} is left as written: a jax array's "
                                f"(and numpy's) .{name}() divides by N, PyTorch's tensor .{name}() by N - 1 (unbiased): "
                                f"where {recv} is a PyTorch tensor, this is smaller than PyTorch's by a factor {size} "
                                f"(N the values reduced); write jnp.{name}({recv}"
                                + (f", axis={code(original.args[0].value)}" if original.args else "") + ", ddof=1)",
                                original)
            if out is not None and (name in ("gather", "scatter") or fresh == "scatter"):
                self.ctx.report(Severity.INFO, "idiom-replaced", f"{code(original)}: jnp.{'take' if name == 'gather' else 'put'}"
                                "_along_axis, PyTorch's where the index has the tensor's sizes along the other axes (a "
                                "smaller one, which PyTorch allows, fails to broadcast there, or broadcasts if it is 1)",
                                original)
            if out is not None and name == "argsort":
                from fwport.packs.torch2jax.ops import ARGSORT_TIES, argsort_unstable
                stable = next((a.value for a in original.args if a.keyword is not None and a.keyword.value == "stable"),
                              None)
                recv = original.func.value
                drawn = isinstance(recv, cst.Call) and self.ctx.imports.resolve(recv.func) in (
                    "torch.rand", "torch.randn", "torch.rand_like", "torch.randn_like")  # no ties among them
                if argsort_unstable(stable) and not drawn:
                    self.ctx.report(Severity.WARNING, "approximate", ARGSORT_TIES, original)
            return updated if out is None else out

        self.ctx.plans.add(node, apply, by="tensor-methods")


def plan(module: cst.Module, ctx) -> cst.Module:
    """Record an edit for every tensor method call in the statements outside the classes, and in the methods of
    the module classes that see whole arrays (``get_num_params``: ``p.numel()``, ``self.parameters()``) or that
    forward calls (``encode``: one example, the dimension-free methods); forward is batch.py's; other classes keep
    their code."""
    from fwport.packs.torch2jax.passes.modules import PLANS

    # modules the output spells (jnp.sum(...) written by an earlier pass is not a method of a tensor)
    modules = {sp.short.split(".")[0] for sp in ctx.direction.spellings} | {"jax", "jnp", "np", "numpy", "math"}
    calls = _TensorCalls(ctx, set(ctx.analyses.get(PLANS, {})), set(), set(), modules, PLANS)
    scan(module, calls)
    from fwport.packs.torch2jax.passes.training import MODELS
    models = ctx.analyses.get(MODELS, set())

    if models:
        scan(module, _ModelLeaves(ctx, models))

    scan(module, _Casts(ctx, calls))
    return module
