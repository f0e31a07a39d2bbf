"""Call transforms for ``tf.*`` / ``keras.ops.*`` calls that are not a plain ``target(**kwargs)``.

Each transform gets the mapped call (arguments already renamed / transformed by the rule's ``args``
table, under their *target* names in ``m.kwargs``, or kept raw in ``m.extras`` by ``keep``) and
returns the output expression, or None after reporting why the call is left as it was. Options a
rule passes to its transform live in ``emit.options``.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.bind import NOT_LITERAL, literal_value
from fwport.core.engine import _atom, _is_number, build_call, expr
from fwport.core.position import render
from fwport.packs.tf2torch import helpers
from fwport.packs.tf2torch.registry import TRANSFORMS, call_transform
from fwport.packs.tf2torch.values import torch_dtype

INT32 = "torch.int32"
#: ids of the elements of tf.stack / tf.concat lists that are Python numbers (passes/pyvalues.py)
PY_NUMBERS = "python_number_elements"


def _code(node: cst.CSTNode) -> str:
    return render(node)


def _e(text: str) -> cst.BaseExpression:
    return expr(text)


def _atom_code(node: cst.BaseExpression) -> str:
    """Source text of ``node`` usable as a method receiver (parenthesised when it is not an atom)."""
    return _code(_atom(node))


def _lit(node: cst.BaseExpression | None):
    return NOT_LITERAL if node is None else literal_value(node, NOT_LITERAL)


def _all_ints(value) -> bool:
    """A literal made only of Python ints (TensorFlow makes int32 of it, torch int64)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    if isinstance(value, (list, tuple)) and value:
        return all(_all_ints(v) for v in value)
    return False


def _all_numbers(value) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    if isinstance(value, (list, tuple)) and value:
        return all(_all_numbers(v) for v in value)
    return False


def _options(m) -> dict:
    return m.rule.emit.get("options", {})


def _spell(ctx, name: str) -> str:
    return ctx.spell_text(name)


def _plain(m, ctx) -> cst.BaseExpression | None:
    """``target(...)`` as the rule's emit table says (build_call without the transform); an ``input`` that is a
    Python number or a list of them made a tensor (``tf.reduce_sum([1.0, 2.0])``: torch's functions take tensors)."""
    x = m.kwargs.get("input")
    if x is not None and _is_number(x):
        m.kwargs["input"] = cst.Call(ctx.spell("torch.tensor"), [cst.Arg(x)])
    return build_call(m, ctx, target=m.rule.emit["target"])


# --- generic -------------------------------------------------------------------------------------

@call_transform("call")
def call(m, ctx):
    """A plain call with the extras a declarative rule cannot say, all from ``emit.options``:

    - ``kwargs``: fixed keywords (Python text), e.g. ``{ reduction = "'none'" }``;
    - ``int_dtype``: the target keyword holding a value; when that value is a literal made only
      of ints and no dtype is given, pin ``dtype=torch.int32`` (TensorFlow's inference; torch's
      would be int64);
    - ``float_dtype``: likewise, but for a literal of ints pin ``torch.float64`` (tf.linspace);
    - ``then``: a suffix applied to the result, e.g. ``.values`` or ``.int()``.

    A value transform may ask for a cast of the result with ``m.extras["result_dtype"]``
    (``output_type=tf.int32`` → ``.to(torch.int32)``).
    """
    opts = _options(m)
    for k, v in opts.get("kwargs", {}).items():
        m.kwargs.setdefault(k, _e(v))
    for key, pinned in (("int_dtype", INT32), ("float_dtype", "torch.float64")):
        names = opts.get(key)
        if names and "dtype" not in m.kwargs:
            names = [names] if isinstance(names, str) else names
            values = [_lit(m.kwargs.get(n)) for n in names if n in m.kwargs]
            if values and all(_all_ints(v) for v in values):
                m.kwargs["dtype"] = ctx.spell(pinned)
    out = _plain(m, ctx)
    if out is None:
        return out
    if opts.get("then"):
        out = _e(_atom_code(out) + opts["then"])
    if "result_dtype" in m.extras:
        out = _e(f"{_atom_code(out)}.to({_code(m.extras['result_dtype'])})")
    return out


@call_transform("constant")
def constant(m, ctx):
    """``tf.constant(value, dtype, shape)``: without a shape, :func:`call` (torch.tensor, ints pinned to int32).
    With one, TensorFlow (eager and graph alike, checked with TF 2.21) fills the shape with a value of one element
    (a number or a one-element list), reshapes a value with as many elements as the shape, and raises (TypeError /
    InvalidArgumentError) for any other size: a number (or ``[number]``) → ``torch.full(shape, number)`` (an int's
    dtype pinned to int32, TensorFlow's); a literal list of that many elements (the shape written with int
    literals) → ``torch.tensor(value).reshape(shape)``; a value fwport cannot read under a literal shape of N
    elements → ``torch.tensor(value).reshape(-1).broadcast_to((N,)).reshape(shape)``, which fills, reshapes or raises
    as TensorFlow does (a one-element value of rank 2 or more, which TensorFlow refuses, is filled). Anything
    else (a shape fwport cannot read with a list or value it cannot count) stays an error."""
    shape = m.extras.pop("shape", None)
    if m.extras.pop("string", False) or _has_text(_lit(m.kwargs.get("data"))):
        return _string_constant(m, ctx, shape)
    if shape is None or _lit(shape) is None:
        return call(m, ctx)
    value = m.kwargs.get("data")
    lit = _lit(value)
    dims = _lit(shape)
    dims = list(dims) if isinstance(dims, (list, tuple)) and all(_all_ints(d) for d in dims) else None
    if isinstance(dims, list) and not dims:
        dims = [] if isinstance(lit, (int, float)) else None
    n = None if dims is None else __import__("math").prod(dims)
    if isinstance(lit, list) and len(lit) == 1 and isinstance(lit[0], (int, float)):
        lit, value = lit[0], value.elements[0].value if isinstance(value, (cst.List, cst.Tuple)) else value
    if isinstance(lit, (int, float)):  # (bool too: torch.full of a bool is bool, as TensorFlow's)
        dtype = m.kwargs.get("dtype") or (ctx.spell(INT32) if _all_ints(lit) else None)
        text = f"{_spell(ctx, 'torch.full')}({_code(shape)}, {_code(value)}"
        return _e(text + (f", dtype={_code(dtype)})" if dtype is not None else ")"))
    if lit is not NOT_LITERAL:
        size = _count(lit)
        if n is None or size is None or size != n:
            said = (f"TensorFlow raises here ({size} elements for a shape of {n})" if None not in (n, size) else
                    "fwport cannot count " + ("the shape's elements" if n is None else "the value's (a ragged list)"))
            m.fail(ctx, "unsupported-argument", f"shape={m.written('shape')}: TensorFlow fills the shape with a "
                   "value of one element and reshapes one of as many elements as the shape (raising for any other "
                   f"size): {said}: write torch.full(shape, value) or torch.tensor(value).reshape(shape)")
            return None
        out = call(m, ctx)
        return None if out is None else _e(f"{_atom_code(out)}.reshape({_code(shape)})")
    if n is None:
        m.fail(ctx, "unsupported-argument", f"shape={m.written('shape')}: TensorFlow fills the shape with a value of "
               "one element and reshapes one of as many elements as the shape: fwport can write that for a shape of "
               "int literals only: write torch.full(shape, value) or torch.tensor(value).reshape(shape)")
        return None
    out = call(m, ctx)
    return None if out is None else _e(f"{_atom_code(out)}.reshape(-1).broadcast_to(({n},)).reshape({_code(shape)})")


def _has_text(value) -> bool:
    """Whether a literal is a str / bytes or a (nested) list or tuple holding one."""
    if isinstance(value, (str, bytes)):
        return True
    return isinstance(value, (list, tuple)) and any(_has_text(v) for v in value)


def _string_constant(m, ctx, shape):
    """``tf.constant`` of strings (a str / bytes literal or a list of them, or ``dtype=tf.string``): strings stay
    Python strings in a translation (strings.py, texthelpers.py), so a string tensor becomes what its ``.numpy()``
    is in TensorFlow, a NumPy object array of the same shape (``numpy.array(value, dtype=object)``), which the
    translated string helpers and NumPy indexing take. Its elements are the values written (str), where
    TensorFlow's are UTF-8 bytes (a warning says so). A shape is refused (TensorFlow's fill / reshape of
    strings is not written), and so are values mixing strings and numbers (TensorFlow raises)."""
    lit = _lit(m.kwargs.get("data"))
    if shape is not None:
        m.fail(ctx, "unsupported-argument", f"shape={m.written('shape')} on a string constant: fwport translates "
               "a string tensor as a NumPy object array and does not write TensorFlow's fill / reshape for it: "
               "write numpy.full(shape, value, dtype=object) or numpy.array(value, dtype=object).reshape(shape)")
        return None
    if lit is not NOT_LITERAL and lit is not None and (not _all_text(lit) or _text_shape(lit) is None):
        m.fail(ctx, "unsupported-argument", f"tf.constant({m.written('value')}): "
               + ("strings mixed with other values" if not _all_text(lit) else "rows of different lengths")
               + ", which TensorFlow refuses (it raises): nothing to translate")
        return None
    ctx.report("warning", "idiom-replaced",
               f"tf.constant({m.written('value')}) of strings → np.array(..., dtype=object), what TensorFlow's "
               "string tensor's .numpy() is: its elements are the str values as written where TensorFlow's are "
               "UTF-8 bytes (b'...'); there is no torch string tensor", m.node, m.rule)
    ctx.needed_imports.add("import numpy as np")
    return _e(f"np.array({_code(m.kwargs['data'])}, dtype=object)")


def _text_shape(value) -> tuple | None:
    """The shape of a nested list literal of strings; None for a ragged one."""
    if not isinstance(value, (list, tuple)):
        return ()
    shapes = {_text_shape(v) for v in value}
    if None in shapes or len(shapes) > 1:
        return None
    return (len(value), *(shapes.pop() if shapes else ()))


def _all_text(value) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_all_text(v) for v in value)
    return isinstance(value, (str, bytes))


def _count(value) -> int | None:
    """The number of elements of a nested list literal of numbers; None for a ragged one."""
    if isinstance(value, (list, tuple)):
        sizes = [_count(v) for v in value]
        if any(s is None for s in sizes) or len({(_depth(v)) for v in value}) > 1:
            return None
        return sum(sizes)
    return 1 if isinstance(value, (int, float)) else None


def _depth(value) -> int:
    return 1 + _depth(value[0]) if isinstance(value, (list, tuple)) and value else 0


@call_transform("tensors")
def tensors(m, ctx):
    """``torch.stack`` / ``torch.cat`` of a list: the elements that are Python numbers (the planner
    passes/pyvalues.py found them: ``[i for i in range(n)]``, a name bound only to such values) become
    tensors, as TensorFlow converts them (torch takes tensors only): ``torch.as_tensor(element)``,
    with ``dtype=torch.int32`` for ints (TensorFlow's int32; stacked with int64 or floating tensors,
    torch's promotion gives their dtype, as TensorFlow's conversion does)."""
    found = ctx.analyses.get(PY_NUMBERS)
    values = m.kwargs.get("tensors")
    if found and isinstance(values, (cst.List, cst.Tuple)) and any(id(e.value) in found for e in values.elements):
        as_tensor = _spell(ctx, "torch.as_tensor")
        elements = []
        for e in values.elements:
            if id(e.value) in found:
                dtype = f", dtype={_spell(ctx, INT32)}" if found[id(e.value)] else ""
                e = e.with_changes(value=_e(f"{as_tensor}({_code(e.value)}{dtype})"))
            elements.append(e)
        m.kwargs["tensors"] = values.with_changes(elements=elements)
    return _plain(m, ctx)


@call_transform("reduce")
def reduce(m, ctx):
    """A reduction: ``axis`` None reduces everything; ``keepdims`` then needs ``dim=None`` spelled
    (``torch.sum(x, keepdim=True)`` does not exist). ``emit.options.single_dim``: the target takes
    one int dim (torch.prod); ``all_dims``: the target needs the dims listed (torch.logsumexp)."""
    opts = _options(m)
    dim = m.kwargs.get("dim")
    if opts.get("single_dim") and dim is not None:
        lit = _lit(dim)
        if isinstance(lit, tuple) and len(lit) == 1:
            m.kwargs["dim"] = _e(repr(lit[0]))
        elif not isinstance(lit, int):
            m.fail(ctx, "unsupported-argument", f"{m.rule.emit['target']} reduces over one axis only; "
                   "reduce one axis at a time")
            return None
    if dim is None and (opts.get("all_dims") or "keepdim" in m.kwargs):
        if opts.get("all_dims"):
            x = m.kwargs.get("input")
            if x is None:
                return None
            m.kwargs["dim"] = _e(f"tuple(range({_atom_code(x)}.dim()))")
        elif opts.get("single_dim"):
            m.fail(ctx, "unsupported-argument", "keepdims=True over all axes: reduce axis by axis")
            return None
        else:
            m.kwargs["dim"] = _e("None")
        # keep the keyword order input, dim, keepdim
        m.kwargs = {k: m.kwargs[k] for k in ("input", "dim", "keepdim") if k in m.kwargs} | m.kwargs
    for k, v in opts.get("kwargs", {}).items():
        m.kwargs.setdefault(k, _e(v))
    return _plain(m, ctx)


# --- tensors from values ---------------------------------------------------------------------------

@call_transform("shape")
def shape(m, ctx):
    """``tf.shape(x)`` is an int32 tensor: ``torch.tensor(x.shape, dtype=torch.int32)``; indexed by
    an int (``tf.shape(x)[0]``, the common use) it becomes the plain ``x.shape[0]``."""
    x = m.kwargs.get("input")
    if x is None:
        return None
    dtype = m.kwargs.get("dtype")
    if dtype is not None and _code(dtype).replace(" ", "") not in ("torch.int32",):
        tensor = f"{_spell(ctx, 'torch.tensor')}({_atom_code(x)}.shape, dtype={_code(dtype)})"
    else:
        tensor = f"{_spell(ctx, 'torch.tensor')}({_atom_code(x)}.shape, dtype={_spell(ctx, INT32)})"

    def indexed(sub: cst.Subscript) -> cst.BaseExpression:
        if isinstance(sub, cst.Subscript) and len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Index):
            idx = _lit(sub.slice[0].slice.value)
            if isinstance(idx, int) and not isinstance(idx, bool):
                return _e(f"{_atom_code(x)}.shape[{_code(sub.slice[0].slice.value)}]")
        if isinstance(sub, cst.Subscript) and len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Slice):
            # sliced (tf.shape(x)[:-1]): an int32 tensor, and as a size argument the torch.Size x.shape[:-1]
            part = _code(sub.slice[0].slice)
            ctx.argument_hook(sub, lambda target: _e(f"{_atom_code(x)}.shape[{part}]")
                              if target in SIZE_PARAMETERS else None)
        return sub

    ctx.subscript_hooks[id(m.node)] = indexed
    result = _e(tensor)
    # as the size of torch.zeros/ones/full/randn/rand/normal or the shape of reshape/broadcast_to, a tensor is
    # refused ("must be tuple of ints, not Tensor"): the torch.Size x.shape is what those take
    ctx.argument_hook(result, lambda target: _e(f"{_atom_code(x)}.shape") if target in SIZE_PARAMETERS else None)
    return result


#: parameters of torch functions that take a size as a tuple of ints (torch.Size), never a tensor
SIZE_PARAMETERS = frozenset({"size", "shape"})


@call_transform("keras-shape")
def keras_shape(m, ctx):
    """``keras.ops.shape(x)`` is a tuple of ints: ``x.shape``."""
    x = m.kwargs.get("input")
    return None if x is None else _e(f"{_atom_code(x)}.shape")


@call_transform("random-normal")
def random_normal(m, ctx):
    """``tf.random.normal`` → ``torch.randn`` (mean 0, stddev 1) or ``torch.normal(mean, std, size)``."""
    size = m.kwargs.pop("size")
    mean, std = m.kwargs.pop("mean", None), m.kwargs.pop("std", None)
    rest = "".join(f", {k}={_code(v)}" for k, v in m.kwargs.items())
    if (mean is None or _lit(mean) == 0) and (std is None or _lit(std) == 1):
        return _e(f"{_spell(ctx, 'torch.randn')}({_code(size)}{rest})")
    mean_t = "0.0" if mean is None else _code(mean)
    std_t = "1.0" if std is None else _code(std)
    return _e(f"{_spell(ctx, 'torch.normal')}({mean_t}, {std_t}, size={_code(size)}{rest})")


@call_transform("random-shuffle")
def random_shuffle(m, ctx):
    """``tf.random.shuffle(value)`` → ``value[torch.randperm(value.shape[0])]``: the rows (the first axis) in a
    random order, each draw a permutation as TensorFlow's (other values: another generator). The value is read
    twice, so it must be a name or an attribute (a call would run twice); a list of numbers becomes a tensor."""
    value = m.kwargs["input"]
    if _all_numbers(_lit(value)):
        recv = _code(_tensor_of(value, ctx))
        size = str(len(_lit(value)))
    elif _reads_only(value):
        recv = _atom_code(value)
        size = f"{recv}.shape[0]"
    else:
        m.fail(ctx, "unsupported-argument", f"value={m.written('value')}: the shuffled value is read twice in torch "
               "(value[torch.randperm(value.shape[0])]): bind it to a name first")
        return None
    generator = m.kwargs.get("generator")
    rest = "" if generator is None else f", generator={_code(generator)}"
    return _e(f"{recv}[{_spell(ctx, 'torch.randperm')}({size}{rest})]")


def _reads_only(node: cst.BaseExpression) -> bool:
    """A name, or attributes / constant subscripts of one (``self.ids``, ``boxes[0]``): reading it twice is
    reading one value."""
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        if isinstance(node, cst.Subscript) and _lit(node.slice[0].slice.value if isinstance(
                node.slice[0].slice, cst.Index) else None) is NOT_LITERAL:
            return False
        node = node.value
    return isinstance(node, cst.Name)


@call_transform("random-uniform")
def random_uniform(m, ctx):
    """``tf.random.uniform``: floats in [minval, maxval) → ``torch.rand`` (scaled and shifted when
    the bounds are not 0 and 1); integer dtypes → ``torch.randint(minval, maxval, size)``."""
    size = m.kwargs.pop("size")
    lo, hi = m.kwargs.pop("low", None), m.kwargs.pop("high", None)
    dtype = m.kwargs.get("dtype")
    dtext = "" if dtype is None else _code(dtype).replace(" ", "")
    if dtext.startswith("torch.int") or dtext.startswith("torch.uint"):
        if hi is None:
            m.fail(ctx, "unsupported-argument", "an integer tf.random.uniform needs maxval")
            return None
        rest = "".join(f", {k}={_code(v)}" for k, v in m.kwargs.items())
        return _e(f"{_spell(ctx, 'torch.randint')}({'0' if lo is None else _code(lo)}, {_code(hi)}, "
                  f"{_code(size)}{rest})")
    rest = "".join(f", {k}={_code(v)}" for k, v in m.kwargs.items())
    lo_zero = lo is None or _lit(lo) == 0
    hi_one = hi is None or _lit(hi) == 1
    if lo_zero and hi_one:
        return _e(f"{_spell(ctx, 'torch.rand')}({_code(size)}{rest})")
    lo_t = "0.0" if lo is None else _code(lo)
    hi_t = "1.0" if hi is None else _code(hi)
    gen = m.kwargs.pop("generator", None)  # torch.empty takes none: uniform_ draws
    rest = "".join(f", {k}={_code(v)}" for k, v in m.kwargs.items())
    draw = "" if gen is None else f", generator={_code(gen)}"
    return _e(f"{_spell(ctx, 'torch.empty')}({_code(size)}{rest}).uniform_({lo_t}, {hi_t}{draw})")


@call_transform("tnp-randint")
def tnp_randint(m, ctx):
    """``tf.experimental.numpy.random.randint(low, high=None, size=None, dtype=int64)``, numpy's: integers in
    [low, high), or [0, low) without high; size None is one number → ``torch.randint(low, high, size)``
    (int64, TensorFlow's default here too; an int size is a shape of one axis)."""
    lo, hi = m.kwargs.pop("low"), m.kwargs.pop("high", None)
    if hi is None or _lit(hi) is None:  # numpy's randint(n): [0, n)
        lo, hi = cst.Integer("0"), lo
    size = m.kwargs.pop("size", None)
    lit = _lit(size)
    if size is None or lit is None:
        size_text = "()"
    elif isinstance(lit, int) and not isinstance(lit, bool):
        size_text = f"({lit},)"
    elif isinstance(size, (cst.Tuple, cst.List)):
        size_text = _code(size)
    else:
        m.fail(ctx, "unsupported-argument", f"size={m.written('size')}: numpy's size is an int or a tuple, torch.randint "
               "takes a tuple only, and fwport cannot tell which this is: write a tuple")
        return None
    dtype = m.kwargs.pop("dtype", None)
    dtype_text = _spell(ctx, "torch.int64") if dtype is None else _code(dtype)
    return _e(f"{_spell(ctx, 'torch.randint')}({_code(lo)}, {_code(hi)}, {size_text}, dtype={dtype_text})")


@call_transform("random-categorical")
def random_categorical(m, ctx):
    """``tf.random.categorical(logits, num_samples)`` (rows of unnormalised log-probabilities, draws with
    replacement, int64 class ids of shape (batch, num_samples)) → ``torch.multinomial(logits.softmax(-1),
    num_samples, replacement=True)``; another dtype → ``.to(dtype)``."""
    logits, n = m.kwargs.get("input"), m.kwargs.get("num_samples")
    if logits is None or n is None:
        return None
    gen = m.kwargs.get("generator")
    out = (f"{_spell(ctx, 'torch.multinomial')}({_atom_code(logits)}.softmax(-1), {_code(n)}, replacement=True"
           f"{'' if gen is None else ', generator=' + _code(gen)})")
    dtype = m.kwargs.get("dtype")
    if dtype is not None and _code(dtype).replace(" ", "") != "torch.int64":
        out += f".to({_code(dtype)})"
    return _e(out)


@call_transform("bincount")
def bincount(m, ctx):
    """``tf.math.bincount(arr, weights, minlength)`` → ``torch.bincount``; without weights TensorFlow counts in
    its ``dtype`` (int32 by default, torch int64): ``.int()`` / ``.to(dtype)``; with weights both give the
    weights' dtype."""
    arr = m.kwargs.get("input")
    if arr is None:
        return None
    args = [_code(arr)] + [f"{k}={_code(m.kwargs[k])}" for k in ("weights", "minlength") if k in m.kwargs]
    out = f"{_spell(ctx, 'torch.bincount')}({', '.join(args)})"
    if "weights" not in m.kwargs:
        dtype = m.kwargs.get("dtype")
        text = INT32 if dtype is None else _code(dtype).replace(" ", "")
        if text != "torch.int64":
            out += ".int()" if text == INT32 else f".to({_code(dtype)})"
    return _e(out)


@call_transform("literal")
def literal(m, ctx):
    """A query whose answer is fixed in the translation: ``emit.options.value`` (Python text), e.g.
    ``tf.executing_eagerly()`` → ``True`` (torch runs every operation eagerly)."""
    return _e(_options(m)["value"])


@call_transform("vectorized-map")
def vectorized_map(m, ctx):
    """``tf.vectorized_map(fn, elems)`` → ``torch.vmap(fn)(elems)``: fn applied to each slice along the first
    axis of elems (a tensor, or a tuple / dict of them, which both pass to fn as one structure) and the results
    stacked. Where torch cannot vectorize fn (data-dependent Python control flow) vmap raises; TensorFlow
    would fall back to a loop."""
    fn, elems = m.kwargs["func"], m.kwargs["elems"]
    return _e(f"{_spell(ctx, 'torch.vmap')}({_code(fn)})({_code(elems)})")


@call_transform("confusion-matrix")
def confusion_matrix(m, ctx):
    """``tf.math.confusion_matrix(labels, predictions, num_classes)`` → ``torch.bincount(labels * n + predictions,
    minlength=n * n).reshape(n, n)``: row i, column j counts the pairs (label i, prediction j), int32 as
    TensorFlow's default dtype. num_classes is read three times, so it must be an int literal or a name;
    without it TensorFlow takes the largest label or prediction + 1, which the call leaves to be written."""
    n = m.kwargs.get("num_classes")
    if n is None or not (isinstance(n, cst.Name) or isinstance(_lit(n), int)):
        shown = m.written("num_classes") or "None"
        m.fail(ctx, "unsupported-argument", f"num_classes={shown}: give the number of classes as an int or a "
               "name (TensorFlow's default is the largest label or prediction + 1: write it as such)")
        return None
    labels, predictions = m.kwargs["labels"], m.kwargs["predictions"]
    dtype = m.kwargs.get("dtype") or ctx.spell(INT32)
    nn = _code(n)
    return _e(f"{_spell(ctx, 'torch.bincount')}({_atom_code(labels)} * {nn} + {_atom_code(predictions)}, "
              f"minlength={nn} * {nn}).reshape({nn}, {nn}).to({_code(dtype)})")


#: tf.math.divide_no_nan / keras.ops.divide_no_nan (rules divide-no-nan, ops-divide-no-nan: the image-helper transform)
helpers.HELPERS["divide_no_nan"] = '''

def divide_no_nan(x, y):
    """tf.math.divide_no_nan: x / y, and 0 where y is 0; the gradients there are 0 too, as TensorFlow's (a
    plain torch.where(y == 0, 0.0, x / y) would carry the division's inf into them as NaN)."""
    zero = y == 0
    return {torch}where(zero, 0.0, x / {torch}where(zero, 1.0, y))
'''


#: keras.ops.slice_update (rule ops-slice-update: the image-helper transform)
helpers.HELPERS["slice_update"] = '''

def slice_update(inputs, start_indices, updates):
    """Keras's ops.slice_update: a copy of inputs with updates written over the block that starts at
    start_indices (one per axis) and has updates' shape."""
    out = inputs.clone()
    out[tuple(slice(s, s + n) for s, n in zip(start_indices, updates.shape))] = updates
    return out
'''


# --- control flow -----------------------------------------------------------------------------------

class _Rename(cst.CSTTransformer):
    """Names of ``mapping`` in an expression → their values (not attribute names nor keywords)."""

    def __init__(self, mapping: dict[str, cst.BaseExpression]):
        super().__init__()
        self.mapping = mapping

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False  # its own parameters may shadow them

    def leave_Attribute(self, original_node, updated_node):
        return updated_node.with_changes(attr=original_node.attr)

    def leave_Arg(self, original_node, updated_node):
        return updated_node.with_changes(keyword=original_node.keyword)

    def leave_Name(self, original_node, updated_node):
        return self.mapping.get(original_node.value, updated_node)


def _inlined_body(fn: cst.Lambda) -> cst.BaseExpression | None:
    """The body of a lambda called at once with no arguments: parameters only with defaults that are names
    (``lambda fn=func: fn(x)``, a loop's value bound early) are those names in it; None otherwise."""
    p = fn.params
    if p.kwonly_params or p.posonly_params or p.star_arg is not cst.MaybeSentinel.DEFAULT or p.star_kwarg is not None:
        return None
    if not all(isinstance(q.default, (cst.Name, cst.Attribute)) for q in p.params):
        return None
    if not p.params:
        return fn.body
    return fn.body.visit(_Rename({q.name.value: q.default for q in p.params}))


def _branch(fn: cst.BaseExpression, unpack: bool) -> str:
    """The value of calling a branch of tf.cond: a lambda is its body (parameters with name defaults put in;
    a one-element list / tuple taken apart where TensorFlow 1's non-strict cond does), anything else is called."""
    body = _inlined_body(fn) if isinstance(fn, cst.Lambda) else None
    if body is not None:
        if unpack and isinstance(body, (cst.List, cst.Tuple)) and len(body.elements) == 1 \
                and isinstance(body.elements[0], cst.Element):
            body = body.elements[0].value
        return _operand(body)
    return f"{_atom_code(fn)}()"


def _operand(node: cst.BaseExpression) -> str:
    """``node`` as an operand of a conditional expression: parenthesised when it is a conditional or a
    lambda itself, or spans lines outside brackets of its own (a continuation the call's parentheses held)."""
    text = _code(node)
    if isinstance(node, (cst.IfExp, cst.Lambda)) or ("\n" in text and not node.lpar and not isinstance(
            node, (cst.Call, cst.Subscript, cst.List, cst.Dict, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp))):
        return f"({text})"
    return text


@call_transform("cond")
def cond(m, ctx):
    """``tf.cond(pred, true_fn, false_fn)`` runs one branch (eagerly: the one pred selects) →
    ``true_value if pred else false_value``; a lambda branch is its body, any other callable is called.
    TensorFlow 1 (``tf.compat.v1.cond``, strict=False) returns a branch's one-element list or tuple as its
    element: a lambda's literal one taken apart here."""
    pred = m.extras.get("pred")
    true_fn = m.extras.get("true_fn", m.extras.get("fn1"))
    false_fn = m.extras.get("false_fn", m.extras.get("fn2"))
    if pred is None or true_fn is None or false_fn is None:
        m.fail(ctx, "unsupported-argument", "give both true_fn and false_fn")
        return None
    strict = _lit(m.extras["strict"]) if "strict" in m.extras else False
    if strict not in (True, False):
        m.fail(ctx, "unsupported-argument", "strict must be a literal True or False")
        return None
    unpack = bool(_options(m).get("unpack_singletons")) and not strict
    return _e(f"{_branch(true_fn, unpack)} if {_operand(pred)} else {_branch(false_fn, unpack)}")


# --- shapes and indexing ---------------------------------------------------------------------------

@call_transform("transpose")
def transpose(m, ctx):
    """``tf.transpose(a, perm)`` → ``a.permute(...)``; no perm reverses every axis."""
    a = m.kwargs.get("input")
    perm = m.kwargs.get("dims")
    recv = _atom_code(a)
    lit = _lit(perm)
    if perm is None or lit is None:
        out = f"{recv}.permute(*reversed(range({recv}.dim())))"
    elif isinstance(lit, (list, tuple)) and _all_ints(list(lit)):
        out = f"{recv}.permute({', '.join(str(i) for i in lit)})"
    else:
        out = f"{recv}.permute(*{_code(_atom(perm))})"
    conj = _lit(m.extras.get("conjugate"))
    if conj is True:
        out += ".conj()"
    elif "conjugate" in m.extras and conj is not False:
        m.fail(ctx, "unsupported-argument", "conjugate must be a literal True or False")
        return None
    return _e(out)


def _index_along(recv: str, axis, index: str) -> str | None:
    """``recv[index]`` along a literal axis: ``x[:, i]`` for axis 1, ``x[..., i]`` for axis -1."""
    if not isinstance(axis, int) or isinstance(axis, bool):
        return None
    if axis >= 0:
        return f"{recv}[{', '.join([':'] * axis + [index])}]"
    return f"{recv}[{', '.join(['...', index] + [':'] * (-axis - 1))}]"


def _indexed(m, ctx, recv: str, axis, index: cst.BaseExpression) -> cst.BaseExpression | None:
    """``recv[index]`` along ``axis`` (the value of the call's ``dim``), or None after an error where the axis
    is not an int literal."""
    out = _index_along(recv, axis, _code(index))
    if out is None:
        m.fail(ctx, "unsupported-argument", f"axis={_code(m.kwargs['dim'])}: write the axis as an int literal")
        return None
    return _e(out)


@call_transform("gather")
def gather(m, ctx):
    """``tf.gather(params, indices, axis)`` → ``params[indices]`` along that axis (any index rank).

    ``emit.options.axis_none = "flatten"`` (keras.ops.take): axis None indexes the flattened tensor."""
    params, indices = m.kwargs.get("input"), m.kwargs.get("index")
    axis_node = m.kwargs.get("dim")
    axis = 0 if axis_node is None else _lit(axis_node)
    if _lit(m.extras.get("batch_dims", cst.Integer("0"))) not in (0,):
        m.fail(ctx, "unsupported-argument", "batch_dims != 0 has no one-call torch equivalent; "
               "index with explicit batch aranges (or torch.gather on broadcast indices)")
        return None
    recv = _atom_code(params)
    if (axis_node is None or axis is None) and _options(m).get("axis_none") == "flatten":
        return _e(f"{recv}.flatten()[{_code(indices)}]")
    return _indexed(m, ctx, recv, 0 if axis is None else axis, indices)


@call_transform("boolean-mask")
def boolean_mask(m, ctx):
    """``tf.boolean_mask(tensor, mask, axis)`` → ``tensor[mask]`` along that axis."""
    t, mask = m.kwargs["input"], m.kwargs["mask"]
    axis_node = m.kwargs.get("dim")
    axis = 0 if axis_node is None or _lit(axis_node) is None else _lit(axis_node)
    if isinstance(axis, int) and axis < 0:
        m.fail(ctx, "unsupported-argument", "a negative axis depends on the mask's rank; write it as a positive int")
        return None
    return _indexed(m, ctx, _atom_code(t), axis, mask)


@call_transform("take-along")
def take_along(m, ctx):
    """``keras.ops.take_along_axis(x, indices, axis)`` → ``torch.take_along_dim(x, indices, dim=axis)``: the same
    broadcasting, and axis None indexes the flattened tensor in both. torch takes int64 indices only (Keras any
    integer dtype): a literal becomes ``torch.tensor(...)``, int64 already, any other value ``.long()``."""
    indices = m.kwargs["indices"]
    if _all_ints(_lit(indices)):
        m.kwargs["indices"] = _e(f"{_spell(ctx, 'torch.tensor')}({_code(indices)})")
    else:
        m.kwargs["indices"] = _e(f"{_atom_code(indices)}.long()")
    return build_call(m, ctx, target=m.rule.emit["target"])


def _tensor_of(node: cst.BaseExpression, ctx) -> cst.BaseExpression:
    """A list display of numbers as the tensor TensorFlow makes of it (``torch.tensor``, int32 for ints, where
    torch would make int64); anything else as written."""
    value = _lit(node)
    if not _all_numbers(value):
        return node
    dtype = f", dtype={_spell(ctx, INT32)}" if _all_ints(value) else ""
    return _e(f"{_spell(ctx, 'torch.tensor')}({_code(node)}{dtype})")


@call_transform("meshgrid")
def meshgrid(m, ctx):
    """``tf.meshgrid(*tensors, indexing="xy")`` → ``torch.meshgrid(*tensors, indexing="xy")``: TensorFlow's
    default is NumPy's Cartesian "xy" (the first two output axes swapped), torch's is "ij", so the indexing is
    always written. Lists of numbers become tensors (int32 for ints, as TensorFlow converts them)."""
    indexing = m.kwargs.pop("indexing", None)
    m.kwargs.pop("name", None)
    if m.kwargs:
        m.fail(ctx, "unsupported-argument", f"tf.meshgrid got {', '.join(sorted(m.kwargs))}, which it does not take")
        return None
    mode = "xy" if indexing is None else _lit(indexing)
    if mode not in ("xy", "ij"):
        m.fail(ctx, "unsupported-argument", f"indexing={_code(indexing)}: give 'xy' or 'ij' as a literal")
        return None
    args = [a.with_changes(value=_tensor_of(a.value, ctx)) if not a.star else a for a in m.bound.vararg_args()]
    args.append(cst.Arg(cst.SimpleString(f'"{mode}"'), keyword=cst.Name("indexing"),
                        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))))
    return cst.Call(ctx.spell("torch.meshgrid"), [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                                                  for a in args[:-1]] + args[-1:])


@call_transform("sparse-tensor")
def sparse_tensor(m, ctx):
    """``tf.sparse.SparseTensor(indices, values, dense_shape)`` → ``torch.sparse_coo_tensor(indices.T, values,
    dense_shape)``: TensorFlow's indices are (number of values, rank), torch's (rank, number of values); a
    literal is written transposed, any other value ``torch.as_tensor(indices).T``. Values that are a list of ints
    are int32, as TensorFlow makes them."""
    indices, values, size = m.kwargs["indices"], m.kwargs["values"], m.kwargs["size"]
    rows = _lit(indices)
    if isinstance(rows, (list, tuple)) and rows and all(isinstance(r, (list, tuple)) and r for r in rows) \
            and _all_ints(rows) and len({len(r) for r in rows}) == 1:
        cols = ", ".join("[" + ", ".join(str(v) for v in col) + "]" for col in zip(*rows))
        written = f"[{cols}]"
    elif rows is not NOT_LITERAL:
        m.fail(ctx, "unsupported-argument", f"indices={_code(indices)}: give a list of index rows of one length "
               "(or a tensor of shape (number of values, rank))")
        return None
    else:
        written = f"{_spell(ctx, 'torch.as_tensor')}({_code(indices)}).T"
    value = _lit(values)
    dtype = f", dtype={_spell(ctx, INT32)}" if _all_ints(value) else ""
    return _e(f"{_spell(ctx, 'torch.sparse_coo_tensor')}({written}, {_code(values)}, {_code(size)}{dtype})")


@call_transform("where")
def where(m, ctx):
    """``tf.where(c, x, y)`` → ``torch.where``; ``tf.where(c)`` (the indices of the True entries,
    int64, shape (n, rank)) → ``torch.argwhere(c)``."""
    c, x, y = m.kwargs.get("condition"), m.kwargs.get("input"), m.kwargs.get("other")
    if x is None and y is None:
        one = _options(m).get("one_arg", "argwhere")
        if one == "argwhere":
            return _e(f"{_spell(ctx, 'torch.argwhere')}({_code(c)})")
        m.fail(ctx, "unsupported-argument", "the one-argument form returns a tuple of index arrays; "
               "use torch.nonzero(c, as_tuple=True) and check the index dtype")
        return None
    if x is None or y is None:
        m.fail(ctx, "unsupported-argument", "give both x and y (or neither)")
        return None
    if _options(m).get("rows"):  # tf.compat.v1.where: a rank-1 condition selects along the first axis
        return _e(f"{helpers.use(ctx, 'where_v1')}({_code(c)}, {_code(x)}, {_code(y)})")
    return _e(f"{_spell(ctx, 'torch.where')}({_code(c)}, {_code(x)}, {_code(y)})")


@call_transform("one-hot")
def one_hot(m, ctx):
    """``tf.one_hot(indices, depth)`` is **float32** (torch's ``F.one_hot`` is int64 and wants int64
    indices): ``F.one_hot(indices.long(), depth).float()``; on/off values → ``torch.where``;
    another axis → ``.movedim(-1, axis)``."""
    idx, depth = m.kwargs["input"], m.kwargs["num_classes"]
    on, off = m.kwargs.get("on_value"), m.kwargs.get("off_value")
    dtype = m.kwargs.get("dtype")
    axis = m.kwargs.get("axis")
    base = f"{_spell(ctx, 'torch.nn.functional.one_hot')}({_atom_code(idx)}.long(), {_code(depth)})"
    if on is not None or off is not None:
        on_t = _code(on) if on is not None else "1.0"
        off_t = _code(off) if off is not None else "0.0"
        if on is not None and off is not None and _all_ints(_lit(on)) and _all_ints(_lit(off)) and dtype is None:
            dtype = ctx.spell(INT32)  # int on/off values: TensorFlow infers int32
        out = f"{_spell(ctx, 'torch.where')}({base}.bool(), {on_t}, {off_t})"
        if dtype is not None:
            out += f".to({_code(dtype)})"
    else:
        d = "torch.float32" if dtype is None else _code(dtype).replace(" ", "")
        out = base + {"torch.float32": ".float()", "torch.int64": ""}.get(d, f".to({_code(dtype) if dtype is not None else d})")
    ax = _lit(axis)
    if axis is not None and ax not in (-1, None):
        if not isinstance(ax, int):
            m.fail(ctx, "unsupported-argument", "axis must be an int literal")
            return None
        out = f"{_atom_code(_e(out))}.movedim(-1, {ax})"
    return _e(out)


@call_transform("split")
def split(m, ctx):
    """``tf.split(x, n)``: n equal parts → ``torch.chunk(x, n, dim)`` (torch.split's int is a part
    *size*); ``tf.split(x, [2, 3])``: sizes → ``torch.split(x, [2, 3], dim)``."""
    x, what = m.kwargs["input"], m.kwargs["split_size_or_sections"]
    dim = m.kwargs.get("dim")
    lit = _lit(what)
    dim_t = "" if dim is None or _lit(dim) == 0 else f", dim={_code(dim)}"
    floor_div = isinstance(what, cst.BinaryOperation) and isinstance(what.operator, cst.FloorDivide)
    if isinstance(lit, int) and not isinstance(lit, bool) or ctx.analyses.get(PY_NUMBERS, {}).get(id(what)) or floor_div:
        # a literal, a name bound only to Python ints here (passes/pyvalues.py), or a floor division (`C // n`,
        # a number, never a list: no sequence takes //): a number of parts
        return _e(f"{_spell(ctx, 'torch.chunk')}({_code(x)}, {_code(what)}{dim_t})")
    if isinstance(lit, (list, tuple)) and _all_ints(list(lit)):
        if any(v < 0 for v in lit):
            m.fail(ctx, "unsupported-argument", "a -1 (inferred) size has no torch.split equivalent; "
                   "write the size out")
            return None
        return _e(f"{_spell(ctx, 'torch.split')}({_code(x)}, {_code(what)}{dim_t})")
    if isinstance(what, (cst.List, cst.Tuple)) and what.elements and not any(
            isinstance(e, cst.StarredElement) for e in what.elements) and not (
            isinstance(lit, (list, tuple)) and any(isinstance(v, int) and v < 0 for v in lit)):
        # a list display: sizes, whatever its elements are (a -1 among literals is refused above)
        if not any(isinstance(_lit(e.value), int) and _lit(e.value) < 0 for e in what.elements):
            return _e(f"{_spell(ctx, 'torch.split')}({_code(x)}, {_code(what)}{dim_t})")
    m.fail(ctx, "unsupported-argument", f"num_or_size_splits={_code(what)}: fwport cannot tell whether it is a number "
           "of equal parts (→ torch.chunk) or a list of sizes (→ torch.split; torch.split's int means a part size): "
           "write a literal or a list display, or bind the name to int(...) in this function")
    return None


# --- linear algebra ---------------------------------------------------------------------------------

@call_transform("matmul")
def matmul(m, ctx):
    """``tf.matmul(a, b, transpose_a=..., adjoint_b=...)`` → ``torch.matmul`` on
    ``a.transpose(-2, -1)`` / ``a.mH`` (the conjugate transpose)."""
    a, b = m.kwargs["input"], m.kwargs["other"]
    parts = []
    for node, side in ((a, "a"), (b, "b")):
        t = _lit(m.extras.get(f"transpose_{side}", cst.Name("False")))
        adj = _lit(m.extras.get(f"adjoint_{side}", cst.Name("False")))
        if t not in (True, False) or adj not in (True, False):
            m.fail(ctx, "unsupported-argument", f"transpose_{side}/adjoint_{side} must be literal booleans")
            return None
        if t and adj:
            m.fail(ctx, "unsupported-argument", f"transpose_{side} and adjoint_{side} cannot both be True")
            return None
        text = _code(node)
        if t:
            text = f"{_atom_code(node)}.transpose(-2, -1)"
        elif adj:
            text = f"{_atom_code(node)}.mH"
        parts.append(text)
    return _e(f"{_spell(ctx, 'torch.matmul')}({parts[0]}, {parts[1]})")


@call_transform("add-n")
def add_n(m, ctx):
    """``tf.add_n([a, b, c])`` → ``a + b + c``; a list that is not a literal → ``torch.stack(xs).sum(dim=0)``."""
    xs = m.kwargs["inputs"]
    if isinstance(xs, (cst.List, cst.Tuple)) and xs.elements and not any(
            isinstance(e, cst.StarredElement) for e in xs.elements):
        return _e(" + ".join(_code(_atom(e.value)) for e in xs.elements))
    return _e(f"{_spell(ctx, 'torch.stack')}({_code(xs)}).sum(dim=0)")


@call_transform("keras-merge")
def keras_merge(m, ctx):
    """The function forms of Keras's merge layers on a list of tensors: ``layers.add([a, b])`` → ``a + b``,
    ``multiply`` → ``a * b``, ``subtract`` → ``a - b``, ``average`` → ``(a + b) / 2``, ``maximum`` /
    ``minimum`` → ``torch.maximum(a, b)``; a list that is not written out → a reduction over
    ``torch.stack(xs)`` (dim 0)."""
    op = m.rule.emit.get("options", {}).get("op")
    xs = m.kwargs["inputs"]
    items = [e.value for e in xs.elements] if isinstance(xs, (cst.List, cst.Tuple)) and xs.elements and not any(
        isinstance(e, cst.StarredElement) for e in xs.elements) else None
    if op == "subtract":
        if items is None or len(items) != 2:
            m.fail(ctx, "unsupported-argument", "subtract takes exactly two tensors, written as a list")
            return None
        return _e(f"{_code(_atom(items[0]))} - {_code(_atom(items[1]))}")
    if items is None:
        stack = f"{_spell(ctx, 'torch.stack')}({_code(xs)})"
        reduce = {"add": "sum(dim=0)", "multiply": "prod(dim=0)", "average": "mean(dim=0)",
                  "maximum": "amax(dim=0)", "minimum": "amin(dim=0)"}[op]
        return _e(f"{stack}.{reduce}")
    if op in ("maximum", "minimum"):
        fn = _spell(ctx, f"torch.{op}")
        text = _code(items[0])
        for x in items[1:]:
            text = f"{fn}({text}, {_code(x)})"
        return _e(text)
    sym = {"add": " + ", "multiply": " * ", "average": " + "}[op]
    text = sym.join(_code(_atom(x)) for x in items)
    return _e(f"({text}) / {len(items)}" if op == "average" else text)


# --- numerics with their own formula ------------------------------------------------------------------

@call_transform("l2-normalize")
def l2_normalize(m, ctx):
    """``tf.math.l2_normalize``: ``x * rsqrt(max(sum(x**2), epsilon))`` — epsilon bounds the
    *squared* norm (F.normalize bounds the norm: they differ for tiny vectors), written out."""
    x = m.kwargs["input"]
    axis = m.kwargs.get("dim")
    eps = m.kwargs.get("eps")
    eps_t = "1e-12" if eps is None else _code(eps)
    xa = _atom_code(x)
    dim_t = "dim=None" if axis is None else f"dim={_code(axis)}"
    return _e(f"{xa} * {_spell(ctx, 'torch.rsqrt')}({_spell(ctx, 'torch.sum')}({xa} * {xa}, {dim_t}, "
              f"keepdim=True).clamp(min={eps_t}))")


@call_transform("moments")
def moments(m, ctx):
    """``tf.nn.moments(x, axes)`` → ``(mean, variance)`` with the **biased** variance."""
    x = m.kwargs["input"]
    dim = m.kwargs.get("dim")
    keep = m.kwargs.get("keepdim")
    if m.extras.get("shift") is not None and _lit(m.extras["shift"]) is not None:
        m.fail(ctx, "unsupported-argument", "shift is not used by TF2's moments either; remove it")
        return None
    kd = "" if keep is None else f", keepdim={_code(keep)}"
    d = f"dim={_code(dim)}" if dim is not None else "dim=None"
    return _e(f"({_spell(ctx, 'torch.mean')}({_code(x)}, {d}{kd}), "
              f"{_spell(ctx, 'torch.var')}({_code(x)}, {d}, correction=0{kd}))")


@call_transform("extremum")
def extremum(m, ctx):
    """``tf.maximum(x, 0.0)``: torch.maximum wants two tensors, so a number operand becomes
    ``torch.clamp(x, min=0.0)``; two tensors stay ``torch.maximum(a, b)``."""
    a, b = m.kwargs["input"], m.kwargs["other"]
    bound = _options(m)["bound"]  # "min" for maximum, "max" for minimum
    if _all_numbers(_lit(b)) and not _all_numbers(_lit(a)):
        return _e(f"{_spell(ctx, 'torch.clamp')}({_code(a)}, {bound}={_code(b)})")
    if _all_numbers(_lit(a)) and not _all_numbers(_lit(b)):
        return _e(f"{_spell(ctx, 'torch.clamp')}({_code(b)}, {bound}={_code(a)})")
    return _plain(m, ctx)


def _python_int(node: cst.BaseExpression) -> bool:
    """An expression that is a Python int in torch: a shape element (``x.shape[0]``, ``x.size(1)``), a
    count (``x.numel()``, ``x.dim()``, ``x.ndim``, ``len(x)``), or one of these negated."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return _python_int(node.expression)
    if isinstance(node, cst.Subscript):
        v = node.value
        return (isinstance(v, cst.Attribute) and v.attr.value == "shape" and len(node.slice) == 1
                and isinstance(node.slice[0].slice, cst.Index))
    if isinstance(node, cst.Attribute):
        return node.attr.value == "ndim"
    if isinstance(node, cst.Call):
        f = node.func
        if isinstance(f, cst.Name):
            return f.value == "len" and len(node.args) == 1
        if isinstance(f, cst.Attribute):
            return (f.attr.value in ("numel", "dim") and not node.args) or (f.attr.value == "size"
                                                                           and len(node.args) == 1)
    return False


_LOOSE = (cst.Comparison, cst.BooleanOperation, cst.IfExp, cst.Lambda, cst.NamedExpr)


@call_transform("comparison")
def comparison(m, ctx):
    """``tf.equal(x.shape[0], 0)``: a shape element is a Python int in torch and ``torch.eq`` takes a tensor
    first, so an operand that is one makes the comparison Python's operator (``x.shape[0] == 0``), which
    compares an int with an int or (broadcast) with a tensor as ``torch.eq`` would; tensors stay
    ``torch.eq(a, b)``."""
    a, b = m.kwargs["input"], m.kwargs["other"]
    if not (_python_int(a) or _python_int(b)):
        return _plain(m, ctx)

    def side(x):
        loose = isinstance(x, _LOOSE) or (isinstance(x, cst.UnaryOperation) and isinstance(x.operator, cst.Not))
        return f"({_code(x)})" if loose and not x.lpar else _code(x)
    return _e(f"{side(a)} {_options(m)['operator']} {side(b)}")


@call_transform("sparse-softmax-cross-entropy")
def sparse_softmax_ce(m, ctx):
    """Per-example cross-entropy with int labels; TF's class axis is the last one, torch's is 1."""
    labels, logits = m.kwargs["target"], m.kwargs["input"]
    return _e(f"{_spell(ctx, 'torch.nn.functional.cross_entropy')}({_atom_code(logits)}.movedim(-1, 1), "
              f"{_atom_code(labels)}.long(), reduction='none')")


@call_transform("softmax-cross-entropy")
def softmax_ce(m, ctx):
    """Per-example cross-entropy with probability labels along ``axis``: ``-Σ labels·log_softmax``."""
    labels, logits = m.kwargs["target"], m.kwargs["input"]
    axis = m.kwargs.get("dim")
    a = "-1" if axis is None else _code(axis)
    return _e(f"-{_spell(ctx, 'torch.sum')}({_atom_code(labels)} * "
              f"{_spell(ctx, 'torch.nn.functional.log_softmax')}({_code(logits)}, dim={a}), dim={a})")


def _pad_pairs(node: cst.BaseExpression) -> list | None:
    """A list / tuple display of two-element displays: its pairs, each size an int where it is a literal,
    else the source text of its expression (parenthesised where it is not a plain name)."""
    if not isinstance(node, (cst.List, cst.Tuple)) or not node.elements:
        return None
    pairs = []
    for e in node.elements:
        p = e.value if isinstance(e, cst.Element) else None
        if not isinstance(p, (cst.List, cst.Tuple)) or len(p.elements) != 2 \
                or any(not isinstance(v, cst.Element) for v in p.elements):
            return None
        pair = []
        for v in p.elements:
            lit = _lit(v.value)
            if isinstance(lit, int) and not isinstance(lit, bool):
                pair.append(lit)
            else:
                text = _code(v.value)
                pair.append(text if isinstance(v.value, (cst.Name, cst.Attribute, cst.Subscript, cst.Call))
                            else f"({text})")
        pairs.append(pair)
    return pairs


@call_transform("pad")
def pad(m, ctx):
    """``tf.pad(x, [[a, b], [c, d]])`` → ``F.pad(x, (c, d, a, b))``: torch lists the pads from the
    last axis backwards; leading (0, 0) pairs are left out. Constant mode only."""
    x, paddings = m.kwargs["input"], m.kwargs["pad"]
    lit = _lit(paddings)
    if not (isinstance(lit, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2
                                                   and _all_ints(list(p)) for p in lit)):
        # a display of [before, after] pairs whose sizes are expressions ([[0, pad_amount]]): written as they are
        lit = _pad_pairs(paddings)
        if lit is None:
            m.fail(ctx, "unsupported-argument", f"paddings={_code(paddings)}: write a list of [before, after] pairs "
                   "(each size a number or an expression) in the call, so that fwport can reverse their order "
                   "for torch")
            return None
    mode = _lit(m.extras.get("mode", cst.SimpleString("'CONSTANT'")))
    if not isinstance(mode, str) or mode.lower() != "constant":
        m.fail(ctx, "unsupported-argument", f"mode={mode!r}: only constant padding maps exactly "
               "(torch's reflect/replicate pad only some trailing axes; TF's SYMMETRIC has no equivalent)")
        return None
    pairs = [list(p) for p in lit]
    while pairs and pairs[0] == [0, 0]:
        pairs.pop(0)
    flat = [v if isinstance(v, (int, str)) else _code(v) for p in reversed(pairs) for v in p]
    value = m.kwargs.get("value")
    v = "" if value is None or _lit(value) in (0, None) else f", value={_code(value)}"
    return _e(f"{_spell(ctx, 'torch.nn.functional.pad')}({_code(x)}, ({', '.join(map(str, flat))}{',' if len(flat) == 1 else ''}){v})")


# --- follow-ups: indexing, norms, division, Keras backend ---------------------------------------------

def _simple(node: cst.BaseExpression) -> bool:
    """A name or attribute chain: safe to write twice (evaluating it twice has no effect)."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name)


def _twice(m, ctx, node: cst.BaseExpression, what: str) -> bool:
    if _simple(node):
        return True
    m.fail(ctx, "unsupported-argument", f"the translation uses {what} twice: assign `{_code(node)}` "
           "to a variable first")
    return False


@call_transform("gather-nd")
def gather_nd(m, ctx):
    """``tf.gather_nd(params, indices)``: the last axis of ``indices`` indexes the leading axes of
    ``params`` → ``params[tuple(indices.unbind(-1))]`` (same result shape, any index rank)."""
    if _lit(m.extras.get("batch_dims", cst.Integer("0"))) != 0:
        m.fail(ctx, "unsupported-argument", "batch_dims != 0: index with explicit batch aranges")
        return None
    return _e(f"{_atom_code(m.kwargs['input'])}[tuple({_atom_code(m.kwargs['indices'])}.unbind(-1))]")


@call_transform("size")
def size(m, ctx):
    """``tf.size(x)`` is a 0-d int32 tensor: ``torch.tensor(x.numel(), dtype=torch.int32)``."""
    dtype = m.kwargs.get("dtype")
    d = _spell(ctx, INT32) if dtype is None else _code(dtype)
    return _e(f"{_spell(ctx, 'torch.tensor')}({_atom_code(m.kwargs['input'])}.numel(), dtype={d})")


@call_transform("top-k")
def top_k(m, ctx):
    """``tf.math.top_k(x, k)`` → (values, indices) of the k largest along the last axis, ties in
    index order, indices int32. ``torch.topk`` orders ties as it likes, so the indices come from a
    stable descending sort: ``torch.argsort(x, dim=-1, descending=True, stable=True)[..., :k]``;
    the values are ``torch.topk(x, k).values`` (equal values: the order of ties does not show).
    ``.values`` / ``.indices`` / ``[0]`` / ``[1]`` on the call become just that part."""
    x = m.kwargs["input"]
    k = m.kwargs.get("k")
    k_t = "1" if k is None else _code(k)
    srt = _lit(m.extras.get("sorted", cst.Name("True")))
    if srt is not True:
        m.fail(ctx, "unsupported-argument", "sorted=False leaves the order unspecified in TensorFlow; "
               "write sorted=True (the torch translation is sorted)")
        return None
    dtype = m.kwargs.get("dtype")
    cast = ".int()" if dtype is None or _code(dtype).replace(" ", "") == "torch.int32" else \
        ("" if _code(dtype).replace(" ", "") == "torch.int64" else f".to({_code(dtype)})")
    values = f"{_spell(ctx, 'torch.topk')}({_code(x)}, {k_t}).values"
    indices = f"{_spell(ctx, 'torch.argsort')}({_code(x)}, dim=-1, descending=True, stable=True)[..., :{k_t}]{cast}"

    def part(parent):
        which = None
        if isinstance(parent, cst.Attribute) and parent.attr.value in ("values", "indices"):
            which = parent.attr.value
        elif isinstance(parent, cst.Subscript) and len(parent.slice) == 1 and isinstance(parent.slice[0].slice, cst.Index):
            which = {0: "values", 1: "indices"}.get(_lit(parent.slice[0].slice.value))
        if which is None:
            return parent
        return _e(values if which == "values" else indices)

    if not (_twice(m, ctx, x, "the input") and (k is None or _all_ints(_lit(k)) or _twice(m, ctx, k, "k"))):
        return None
    ctx.subscript_hooks[id(m.node)] = part
    return _e(f"({values}, {indices})")


@call_transform("norm")
def norm(m, ctx):
    """``tf.norm``: no axis or one axis → ``torch.linalg.vector_norm`` (the flattened tensor when
    axis is None, whatever ``ord``); two axes → a matrix norm: 'euclidean'/'fro' is the vector
    2-norm over both axes, 1 and inf → ``torch.linalg.matrix_norm``."""
    x = m.kwargs["input"]
    ord_node = m.extras.get("ord")
    o = "euclidean" if ord_node is None else _lit(ord_node)
    axis = m.kwargs.get("dim")
    ax = None if axis is None else _lit(axis)
    keep = m.kwargs.get("keepdim")
    keep_t = "" if keep is None or _lit(keep) in (False, None) else f", keepdim={_code(keep)}"
    two = isinstance(ax, tuple) and len(ax) == 2
    if ax is not None and not (isinstance(ax, int) or two or (isinstance(ax, tuple) and len(ax) == 1)):
        m.fail(ctx, "unsupported-argument", "axis must be None, an int or a pair of ints, written literally")
        return None
    dim_t = "" if ax is None else f", dim={_code(axis)}"
    if o in ("euclidean", "fro") or (o == 2 and not two):
        return _e(f"{_spell(ctx, 'torch.linalg.vector_norm')}({_code(x)}{dim_t}{keep_t})")
    if ord_node is not None and o is NOT_LITERAL:
        text = _code(ord_node).replace(" ", "")
        if text not in ("np.inf", "numpy.inf", "math.inf", "float('inf')", 'float("inf")'):
            m.fail(ctx, "unsupported-argument", f"ord={_code(ord_node)}: write the order literally")
            return None
        o = float("inf")
    if not two and isinstance(o, (int, float)) and not isinstance(o, bool) and o > 0:
        return _e(f"{_spell(ctx, 'torch.linalg.vector_norm')}({_code(x)}, ord={_code(ord_node)}{dim_t}{keep_t})")
    if two and o in (1, float("inf")):
        return _e(f"{_spell(ctx, 'torch.linalg.matrix_norm')}({_code(x)}, ord={_code(ord_node)}{dim_t}{keep_t})")
    m.fail(ctx, "unsupported-argument", f"ord={_code(ord_node)} with axis={_code(axis) if axis is not None else None} "
           "is not a norm TensorFlow computes the way torch does")
    return None


@call_transform("slice")
def slice_(m, ctx):
    """``tf.slice(x, begin, size)`` with literal lists → ``x[b0:b0 + s0, b1:, ...]`` (size -1: to the end)."""
    x, begin, size_ = m.kwargs["input"], _lit(m.kwargs["begin"]), _lit(m.kwargs["size"])
    if not (isinstance(begin, (list, tuple)) and isinstance(size_, (list, tuple)) and _all_ints(list(begin))
            and _all_ints(list(size_)) and len(begin) == len(size_)):
        m.fail(ctx, "unsupported-argument", "begin and size must be literal lists of ints of the same length")
        return None
    parts = []
    for b, s in zip(begin, size_):
        if b < 0 or s < -1:
            m.fail(ctx, "unsupported-argument", "negative begin (or size other than -1) is invalid in TensorFlow")
            return None
        parts.append(f"{b or ''}:" if s == -1 else f"{b or ''}:{b + s}")
    return _e(f"{_atom_code(x)}[{', '.join(parts)}]")


@call_transform("divide")
def divide(m, ctx):
    """``tf.divide(x, y)`` → ``x / y``. TensorFlow divides int32/int64 tensors into **float64**
    (torch: the default float32): two int literals are pinned, a float literal proves float
    operands, otherwise a warning says what to add for integer tensors.
    ``emit.options.int_result = "float32"`` (keras.ops.divide) makes every case exact."""
    x, y = m.kwargs["input"], m.kwargs["other"]
    lx, ly = _lit(x), _lit(y)
    if _all_ints(lx) and _all_ints(ly) and _options(m).get("int_result") != "float32":
        return _e(f"{_spell(ctx, 'torch.tensor')}({_code(x)} / {_code(y)}, dtype={_spell(ctx, 'torch.float64')})")
    float_lit = any(isinstance(v, float) or (isinstance(v, (list, tuple)) and _all_numbers(v) and not _all_ints(v))
                    for v in (lx, ly))
    if not float_lit and _options(m).get("int_result") != "float32":
        ctx.report("warning", "approximate", "integer tensors divide into float64 in TensorFlow and into "
                   "float32 in torch: if x and y are integers, write `x.double() / y`", m.node, m.rule)
    return _e(f"{_code(_atom(x))} / {_code(_atom(y))}")


@call_transform("bias-add")
def bias_add(m, ctx):
    """``tf.nn.bias_add(x, b)``: the bias runs along the last axis (``x + b``) or, channels-first,
    along axis 1 (``x + b[:, None, None]`` for NCHW: the spatial rank comes from data_format)."""
    x, b = m.kwargs["input"], m.kwargs["bias"]
    fmt = _lit(m.extras.get("data_format", cst.Name("None")))
    spatial = {None: 0, "NHWC": 0, "NWC": 0, "NDHWC": 0, "N...C": 0, "channels_last": 0,
               "NCW": 1, "NCHW": 2, "NCDHW": 3}.get(fmt, -1)
    if spatial < 0:
        written = repr(fmt) if fmt is not NOT_LITERAL else _code(m.extras["data_format"])
        m.fail(ctx, "unsupported-argument", f"data_format={written}: write one of NHWC, NCHW, NCW, NCDHW "
               "(channels_first needs the input rank, which is not known here)")
        return None
    bias = _code(_atom(b)) + ("" if not spatial else "[:" + ", None" * spatial + "]")
    return _e(f"{_code(_atom(x))} + {bias}")


@call_transform("clip-by-norm")
def clip_by_norm(m, ctx):
    """``tf.clip_by_norm(t, c, axes)`` → ``t * c / max(‖t‖, c)`` with the norm over ``axes`` (all when None)."""
    t, c = m.kwargs["input"], m.kwargs["max_norm"]
    if not (_twice(m, ctx, t, "t") and (_all_numbers(_lit(c)) or _twice(m, ctx, c, "clip_norm"))):
        return None
    dim = m.kwargs.get("dim")
    dim_t = "" if dim is None else f", dim={_code(dim)}"
    return _e(f"{_code(t)} * {_code(_atom(c))} / {_spell(ctx, 'torch.linalg.vector_norm')}({_code(t)}{dim_t}, "
              f"keepdim=True).clamp(min={_code(c)})")


@call_transform("matrix-transpose")
def matrix_transpose(m, ctx):
    """``tf.linalg.matrix_transpose(a)`` → ``a.mT`` (``conjugate=True`` → ``a.mH``)."""
    conj = _lit(m.extras.get("conjugate", cst.Name("False")))
    if conj not in (True, False):
        m.fail(ctx, "unsupported-argument", "conjugate must be a literal True or False")
        return None
    return _e(f"{_atom_code(m.kwargs['input'])}.{'mH' if conj else 'mT'}")


@call_transform("value")
def value(m, ctx):
    """A Keras configuration read (``K.epsilon()``, ``K.floatx()``, ``K.image_data_format()``) → its
    default value, ``emit.options.value``; an info finding says the default was assumed."""
    from fwport.packs.tf2torch.passes import data_format  # (the passes import this module)
    v = _options(m)["value"]
    if m.rule.names[0] in data_format.IMAGE_FORMAT_READS:
        setter = data_format.image_format_set(ctx)
        if setter is not None:  # which format is read depends on where in the run: not a constant
            m.fail(ctx, "unsupported-construct", f"{m.rule.names[0]}(): this file sets the image data format "
                   f"({render(setter.func)}(...)), so the format read here depends on the run: fwport decides it only "
                   "in a file that never sets it; write the layout this code runs with by hand")
            return None
        ctx.report("warning", "default-differs", data_format.image_format_message(f"{m.rule.names[0]}()"),
                   m.node, m.rule)
        return _e(v)
    ctx.report("info", "default-differs", f"{m.rule.names[0]}() reads the Keras configuration; its "
               f"default {v} is written in (set_epsilon/keras.json changes would not carry over)",
               m.node, m.rule)
    return _e(v)


@call_transform("keras-sqrt")
def keras_sqrt(m, ctx):
    """Keras 2's backend sqrt clips negative inputs to 0 first: ``torch.sqrt(x.clamp(min=0.0))``."""
    return _e(f"{_spell(ctx, 'torch.sqrt')}({_atom_code(m.kwargs['input'])}.clamp(min=0.0))")


@call_transform("keras-dot")
def keras_dot(m, ctx):
    """``K.dot(x, y)`` contracts x's last axis with y's second-to-last (Theano's dot): for any ranks
    ≥ 2 that is ``torch.tensordot(x, y, dims=([-1], [-2]))`` (``x @ y`` only when y is a matrix)."""
    return _e(f"{_spell(ctx, 'torch.tensordot')}({_code(m.kwargs['input'])}, {_code(m.kwargs['other'])}, "
              "dims=([-1], [-2]))")


@call_transform("int-shape")
def int_shape(m, ctx):
    """``K.int_shape(x)`` is a tuple of ints: ``tuple(x.shape)``."""
    return _e(f"tuple({_atom_code(m.kwargs['input'])}.shape)")


@call_transform("cumsum-flat")
def cumsum_flat(m, ctx):
    """``keras.ops.cumsum(x)`` without an axis sums the flattened tensor: ``torch.cumsum(x.flatten(), 0)``."""
    if "dim" not in m.kwargs:
        m.kwargs["input"] = _e(f"{_atom_code(m.kwargs['input'])}.flatten()")
        m.kwargs["dim"] = _e("0")
    m.kwargs = {k: m.kwargs[k] for k in ("input", "dim") if k in m.kwargs} | m.kwargs
    return _plain(m, ctx)


# --- tf.Variable ---------------------------------------------------------------------------------

_FLOAT_DTYPES = {"float16", "float32", "float64", "bfloat16", "half", "float", "double", "complex64", "complex128"}
#: the ids of the tf.Variable calls passes/variables.py found inside nn.Module classes (→ nn.Parameter)
IN_MODULE = "variables_in_modules"
#: the ids of those inside a Keras 3 Layer / Model class (not a tf.Module): Keras 3 does not track a raw tf.Variable
#: attribute (it is not in trainable_weights: fit and model.trainable_variables leave it untrained) → no grad
UNTRACKED = "variables_keras3_untracked"


def _floating(value, dtype: cst.BaseExpression | None, translated: cst.BaseExpression) -> bool | None:
    """Whether the variable is floating: from its dtype, its literal, or the dtype keyword of the
    call that makes it; None when unknown."""
    if dtype is not None:
        return _dtype_name(dtype) in _FLOAT_DTYPES
    if value is not NOT_LITERAL:
        if _all_ints(value) or isinstance(value, bool) or (isinstance(value, (list, tuple)) and value
                                                           and all(isinstance(v, bool) for v in value)):
            return False
        return True if _all_numbers(value) else None
    if isinstance(translated, cst.Call):
        for a in translated.args:
            if a.keyword is not None and a.keyword.value == "dtype":
                return _dtype_name(a.value) in _FLOAT_DTYPES
    return None


def _dtype_name(node: cst.BaseExpression) -> str:
    """``torch.float32`` / ``tf.float32`` / ``"float32"`` → ``float32`` (a dtype named by a string is read as
    the string, not as its quoted source text)."""
    lit = _lit(node)
    return lit if isinstance(lit, str) else _code(node).rsplit(".", 1)[-1]


@call_transform("variable")
def variable(m, ctx):
    """``tf.Variable(value, trainable=..., dtype=...)`` → a leaf tensor (see rules/tf2torch/variable.toml):
    requires_grad when trainable and floating; ``nn.Parameter`` inside a module class."""
    value = m.extras.get("initial_value")
    if value is None:
        m.fail(ctx, "unsupported-construct", "tf.Variable without an initial value")
        return None
    trainable = True
    if "trainable" in m.extras:
        t = _lit(m.extras["trainable"])
        if t is None or isinstance(t, bool):
            trainable = t is not False
        else:
            m.fail(ctx, "unsupported-argument", f"trainable={m.written('trainable')}: not a literal; fwport "
                   "needs to know whether the tensor requires grad")
            return None
    dtype = m.kwargs.get("dtype")
    lit = _lit(value)
    floating = _floating(lit, dtype, value)
    grad = trainable and floating is not False
    in_module = id(m.node) in ctx.analyses.get(IN_MODULE, ())
    original = m.node.args[0].value if isinstance(m.node, cst.Call) and m.node.args and not m.node.args[0].keyword \
        else None
    q = ctx.imports.resolve(original.func) if isinstance(original, cst.Call) else None
    fresh = q is not None and q.split(".")[0] in ("tensorflow", "keras", "tf_keras") and isinstance(value, cst.Call)
    d = f", dtype={_code(dtype)}" if dtype is not None else ""
    if lit is not NOT_LITERAL and _all_numbers(lit) or isinstance(lit, bool):
        if dtype is None and _all_ints(lit):
            d = f", dtype={_spell(ctx, INT32)}"
        req = ", requires_grad=True" if grad and not in_module else ""
        base = f"{_spell(ctx, 'torch.tensor')}({_code(value)}{d}{req})"
        done = True
    elif fresh:
        base = _atom_code(value) + (f".to({_code(dtype)})" if dtype is not None else "")
        done = False
    else:
        base = f"{_spell(ctx, 'torch.as_tensor')}({_code(value)}{d}).detach().clone()"
        done = False
    if in_module and grad and id(m.node) in ctx.analyses.get(UNTRACKED, ()):
        grad = False
        ctx.report("info", "idiom-replaced", "tf.Variable(...) held by a Keras 3 layer or model class → "
                   "nn.Parameter(..., requires_grad=False): Keras 3 tracks only its own variables (add_weight, "
                   "keras.Variable), so a raw tf.Variable attribute is not in trainable_weights and neither fit nor "
                   "an optimizer over model.trainable_variables trains it (Keras 2 / tf_keras does: there it is "
                   "trainable); use add_weight to train it", m.node, m.rule)
    if in_module:
        frozen = "" if grad else ", requires_grad=False"
        return _e(f"{_spell(ctx, 'torch.nn.Parameter')}({base}{frozen})")
    if grad and not done:
        base += ".requires_grad_()"
    return _e(base)


@call_transform("device-scope")
def device_scope(m, ctx):
    """``with tf.device("/GPU:0"):`` → ``with torch.device("cuda:0"):``: inside it torch makes new tensors on that
    device (torch.device is a context manager setting the default device), as TensorFlow places the ops it
    runs there. TensorFlow's names (``/CPU:0``, ``/GPU:1``, ``/device:GPU:0``, ``/job:localhost/.../GPU:0``)
    become torch's (``cpu``, ``cuda:1``); the name must be a string literal."""
    name = _lit(m.kwargs.get("device_name"))
    if not isinstance(name, str):
        m.fail(ctx, "unsupported-argument", f"device_name={m.written('device_name')}: give the device as a string "
               "literal (\"/GPU:0\"), or write torch.device(...) by hand")
        return None
    last = name.rstrip("/").rpartition("/")[2]
    kind, _, index = (last[len("device:"):] if last.lower().startswith("device:") else last).partition(":")
    kind = {"cpu": "cpu", "gpu": "cuda"}.get(kind.lower())
    if kind is None or (index and not index.isdigit()):
        m.fail(ctx, "unsupported-argument", f"device_name={name!r}: only CPU and GPU devices map onto torch's "
               "(\"cpu\", \"cuda:N\")")
        return None
    target = "cpu" if kind == "cpu" else f"cuda:{index or 0}"
    return _e(f'{_spell(ctx, "torch.device")}("{target}")')


@call_transform("flip")
def flip(m, ctx):
    """``keras.ops.flip(x, axis)`` → ``torch.flip(x, dims=axes)`` (a literal int becomes a tuple of one: torch.flip
    takes tuples only); no axis flips every axis:
    ``x.flip(tuple(range(x.dim())))`` (torch.flip needs the dims listed)."""
    x = m.kwargs.get("input")
    if x is None:
        return None
    dims = m.kwargs.get("dims")
    axes = None if dims is None else _lit(dims)
    if axes is None:
        return _e(f"{_atom_code(x)}.flip(tuple(range({_atom_code(x)}.dim())))") if _twice(m, ctx, x, "x") else None
    if _all_ints(axes) and isinstance(axes, int):
        m.kwargs["dims"] = _e(f"({axes},)")
    elif not (isinstance(axes, (list, tuple)) and _all_ints(list(axes))):
        m.fail(ctx, "unsupported-argument", f"axis={_code(dims)}: torch.flip takes a tuple of axes (an int is refused); "
               "write the axis as a literal int or tuple")
        return None
    return _plain(m, ctx)


@call_transform("l2-loss")
def l2_loss(m, ctx):
    """``tf.nn.l2_loss(t)``: half the sum of the squares, a 0-d tensor of t's dtype → ``torch.sum(t ** 2) / 2``."""
    t = m.kwargs.get("input")
    if t is None:
        return None
    return _e(f"{_spell(ctx, 'torch.sum')}({_code(_atom(t))} ** 2) / 2")


@call_transform("pool-nd")
def pool_nd(m, ctx):
    """``tf.nn.max_pool`` / ``tf.nn.avg_pool`` pool over as many axes as the input has beyond batch and channels.
    The 2-D case on channels-last images is the helper of tf.nn.max_pool2d / avg_pool2d (``emit.options``
    name it): it is told by ``data_format="NHWC"`` or by a ksize or strides list of 2 or 4 entries (TensorFlow
    takes 1, N or N + 2); any other call is refused, as its rank cannot be read."""
    fmt = m.kwargs.pop("data_format", None)
    layout = None if fmt is None else _lit(fmt)
    sizes = [_lit(m.kwargs.get(k)) for k in ("ksize", "strides")]
    if layout == "NHWC" or (layout is None and any(isinstance(v, (list, tuple)) and len(v) in (2, 4) for v in sizes)):
        return TRANSFORMS.calls["image-helper"](m, ctx)
    if layout is None:
        m.fail(ctx, "unsupported-argument", "the pooling's rank cannot be read here (an int ksize and strides, no "
               "data_format): write data_format='NHWC' if the input is a batch of images (N, H, W, C); for another rank "
               "permute the input to channels-first and pool it with F.max_pool1d / F.max_pool3d (F.avg_pool1d / "
               "F.avg_pool3d) by hand, padding 'SAME' as TensorFlow does")
    else:
        m.fail(ctx, "unsupported-argument", f"data_format={_code(fmt)}: only 2-D channels-last pooling ('NHWC') is "
               "translated here; for channels-first data call F.max_pool2d / F.avg_pool2d directly")
    return None


@call_transform("hard-sigmoid")
def hard_sigmoid(m, ctx):
    """``keras.activations.hard_sigmoid``: Keras 3's is relu6(x + 3) / 6, ``F.hardsigmoid(x)``; Keras 2's was
    clip(0.2 x + 0.5, 0, 1), another slope: ``torch.clamp(x * 0.2 + 0.5, 0.0, 1.0)`` in code written for it."""
    x = m.kwargs.get("input")
    if x is None:
        return None
    if ctx.version == 2:
        return _e(f"{_spell(ctx, 'torch.clamp')}({_code(_atom(x))} * 0.2 + 0.5, 0.0, 1.0)")
    return _plain(m, ctx)


@call_transform("diag-part")
def diag_part(m, ctx):
    """``tf.linalg.diag_part(x, k=d)``: the diagonal d above (below, d < 0) the main one of the innermost matrices
    → ``torch.diagonal(x, offset=d, dim1=-2, dim2=-1)``; a band of diagonals (k a pair) is refused."""
    k = m.kwargs.pop("offset", None)
    if k is not None:
        d = _lit(k)
        if not (isinstance(d, int) and not isinstance(d, bool)):
            m.fail(ctx, "unsupported-argument", f"k={_code(k)}: a band of diagonals (or a k fwport cannot read): take "
                   "each with torch.diagonal(x, offset=d, dim1=-2, dim2=-1) and pad and stack them as TensorFlow does")
            return None
        if d:
            m.kwargs["offset"] = k
    m.kwargs["dim1"], m.kwargs["dim2"] = _e("-2"), _e("-1")
    return _plain(m, ctx)


@call_transform("scatter-nd")
def scatter_nd(m, ctx):
    """``tf.tensor_scatter_nd_add / _sub / _update(tensor, indices, updates)``: indices (..., K) pick entries (K = the
    rank) or slices (K smaller) of tensor → ``tensor.index_put(tuple(indices.unbind(-1)), updates, accumulate=True)``
    (duplicate indices add up, as in TensorFlow; _sub adds ``-updates``; _update writes, ``accumulate`` left out).
    ``tf.scatter_nd(indices, updates, shape)`` scatters into zeros of updates' dtype, adding duplicates.
    ``emit.options.op`` says which: add, sub, update or scatter. Lists of numbers become the tensors TensorFlow
    makes of them."""
    op = _options(m)["op"]
    idx, upd = m.kwargs.get("indices"), m.kwargs.get("updates")
    if idx is None or upd is None:
        return None
    idx, upd = _tensor_of(idx, ctx), _tensor_of(upd, ctx)  # lists of numbers: the tensors TensorFlow makes
    if op == "scatter":
        shape_ = m.kwargs.get("shape")
        if shape_ is None or not _twice(m, ctx, upd, "updates"):
            return None
        base = f"{_spell(ctx, 'torch.zeros')}({_code(shape_)}, dtype={_atom_code(upd)}.dtype)"
    else:
        base = _atom_code(m.kwargs["tensor"])
    values = f"-{_atom_code(upd)}" if op == "sub" else _code(upd)
    acc = "" if op == "update" else ", accumulate=True"
    return _e(f"{base}.index_put(tuple({_atom_code(idx)}.unbind(-1)), {values}{acc})")


@call_transform("sequence-mask")
def sequence_mask(m, ctx):
    """``tf.sequence_mask(lengths, maxlen)``: ``mask[..., j] = j < lengths[...]`` →
    ``torch.arange(maxlen, device=lengths.device) < lengths.unsqueeze(-1)`` (maxlen None: the largest length);
    a dtype other than bool is a cast."""
    lengths = m.kwargs.get("lengths")
    if lengths is None or not _twice(m, ctx, lengths, "lengths"):
        return None
    maxlen = m.kwargs.get("maxlen")
    n = f"{_atom_code(lengths)}.max()" if maxlen is None or _lit(maxlen) is None else _code(maxlen)
    out = (f"{_spell(ctx, 'torch.arange')}({n}, device={_atom_code(lengths)}.device) < "
           f"{_atom_code(lengths)}.unsqueeze(-1)")
    dtype = m.kwargs.get("dtype")
    if dtype is not None and _code(dtype).replace(" ", "") != "torch.bool":
        out = f"({out}).to({_code(dtype)})"
    return _e(out)


@call_transform("dot-product-attention")
def dot_product_attention(m, ctx):
    """``keras.ops.dot_product_attention(query, key, value)`` on (batch, steps, heads, head size) →
    ``F.scaled_dot_product_attention`` on (batch, heads, steps, head size): each input ``.transpose(1, 2)`` and the
    result back. Both scale by 1 / sqrt(head size) unless told; ``bias`` is added to the logits (torch's float
    ``attn_mask``); ``is_causal`` keeps the same lower triangle. A boolean ``mask`` (True: attend) is torch's
    boolean ``attn_mask``, with a warning: a row with no key kept is NaN in torch, the mean of the values in Keras
    (which masks with a large negative number, not -inf). ``bias`` with ``mask``, or ``mask`` with ``is_causal``,
    is refused (torch takes one attn_mask, not both with is_causal)."""
    q, k, v = (m.kwargs.get(n) for n in ("query", "key", "value"))
    if q is None or k is None or v is None:
        return None
    bias, mask = m.kwargs.get("bias"), m.kwargs.get("mask")
    causal = m.kwargs.get("is_causal")
    causal_v = False if causal is None else _lit(causal)
    if bias is not None and mask is not None:
        m.fail(ctx, "unsupported-argument", "bias and mask together: torch takes one attn_mask; fold the mask into the "
               "bias (bias.masked_fill(~mask, float('-inf'))) and pass that as bias")
        return None
    if mask is not None and causal_v is not False:
        m.fail(ctx, "unsupported-argument", "mask with is_causal: torch's scaled_dot_product_attention takes an "
               "attn_mask or is_causal, not both; combine them (mask & torch.ones(T, S, dtype=torch.bool).tril()) "
               "and pass that as mask")
        return None
    if mask is not None:
        ctx.report("warning", "approximate", "mask → attn_mask: a query whose row of the mask keeps no key gives NaN in "
                   "torch, where Keras averages all the values (it masks with a large negative number)", m.node, m.rule)
    parts = [f"{_atom_code(t)}.transpose(1, 2)" for t in (q, k, v)]
    extra = bias if bias is not None else mask
    if extra is not None:
        parts.append(f"attn_mask={_code(extra)}")
    if causal is not None and causal_v is not False:
        parts.append(f"is_causal={_code(causal)}")
    scale = m.kwargs.get("scale")
    if scale is not None and _lit(scale) is not None:
        parts.append(f"scale={_code(scale)}")
    fn = _spell(ctx, "torch.nn.functional.scaled_dot_product_attention")
    return _e(f"{fn}({', '.join(parts)}).transpose(1, 2)")


@call_transform("keras-random")
def keras_random(m, ctx):
    """``keras.random.normal`` / ``uniform``: tf.random's translation (``emit.options.draw`` names its transform)
    with Keras's seed: an int seed draws the same values at every call (a stateless draw), which a torch.Generator
    made and seeded at the call does: ``generator=torch.Generator().manual_seed(seed)``; no seed draws from the global
    generator. A SeedGenerator (a stream of seeds) or a seed fwport cannot read is refused."""
    seed = m.kwargs.pop("seed", None)
    value = None if seed is None else _lit(seed)
    if value is not None:
        if not (isinstance(value, int) and not isinstance(value, bool)):
            m.fail(ctx, "unsupported-argument", f"seed={_code(seed)}: a keras.random.SeedGenerator (or a seed fwport "
                   "cannot read) draws new values at each call: create a torch.Generator once (g = "
                   "torch.Generator().manual_seed(s)) and pass generator=g to the torch draw")
            return None
        m.kwargs["generator"] = _e(f"{_spell(ctx, 'torch.Generator')}().manual_seed({_code(seed)})")
    return TRANSFORMS.calls[_options(m)["draw"]](m, ctx)


@call_transform("identity-value")
def identity_value(m, ctx):
    """A function that returns its input as it is (``keras.activations.linear(x)``) → ``x``."""
    x = m.kwargs.get("input")
    return None if x is None else x


@call_transform("cumprod")
def cumprod(m, ctx):
    """``tf.math.cumprod(x, axis)`` → ``torch.cumprod(x, dim=axis)``; ``exclusive=True`` (each product leaves its own
    entry out: a 1 first) multiplies x shifted one step along the axis with a 1 in front: a negative literal axis
    pads with ``F.pad(x, (..., 1, 0), value=1.0)`` and drops the last entry, a non-negative one concatenates
    ``torch.ones_like`` of the first slice before all but the last slice."""
    exclusive = m.extras.get("exclusive")
    flag = False if exclusive is None else _lit(exclusive)
    if flag is False:
        return _plain(m, ctx)
    x, dim = m.kwargs.get("input"), m.kwargs.get("dim")
    axis = None if dim is None else _lit(dim)
    if flag is not True or not (isinstance(axis, int) and not isinstance(axis, bool)):
        m.fail(ctx, "unsupported-argument", "exclusive needs a literal True or False and a literal axis here: "
               "shift x one step along the axis, a 1 first, then torch.cumprod")
        return None
    if axis < 0:
        pads = "0, 0, " * (-axis - 1) + "1, 0"
        rest = ", :" * (-axis - 1)
        shifted = f"{_spell(ctx, 'torch.nn.functional.pad')}({_code(x)}, ({pads}), value=1.0)[..., :-1{rest}]"
    else:
        if not _twice(m, ctx, x, "x"):
            return None
        lead = ":, " * axis
        shifted = (f"{_spell(ctx, 'torch.cat')}([{_spell(ctx, 'torch.ones_like')}({_atom_code(x)}[{lead}:1]), "
                   f"{_atom_code(x)}[{lead}:-1]], dim={axis})")
    return _e(f"{_spell(ctx, 'torch.cumprod')}({shifted}, dim={_code(dim)})")


def _prefers_float32(ctx) -> bool:
    """Whether the file may turn on experimental_enable_numpy_behavior(prefer_float32=True), which makes TensorFlow's
    numpy default to float32 instead of NumPy's float64 (any mention of prefer_float32 counts)."""
    return "prefer_float32" in (ctx.analyses.get("parsed") or (None, ""))[1]


@call_transform("tnp-float64")
def tnp_float64(m, ctx):
    """TensorFlow's numpy functions whose floats are NumPy's float64 where no dtype is given: ``tnp.ones(shape,
    dtype=float)`` → ``torch.ones(shape, dtype=torch.float64)`` (a dtype given is kept: Python's float / int / bool
    are float64 / int64 / bool in torch as in NumPy), ``tnp.random.randn(*shape)`` → ``torch.randn(*shape,
    dtype=torch.float64)`` (no size: one number, ``torch.randn(())``). In a file that may set prefer_float32 the
    default is float32 there: refused, unless ``.astype(dtype)`` follows (ndarrays.py: the cast fixes the dtype)."""
    dtype = m.kwargs.pop("dtype", None)
    from fwport.packs.tf2torch.ndarrays import CAST
    if dtype is None and _prefers_float32(ctx) and id(m.node) not in ctx.analyses.get(CAST, ()):
        m.fail(ctx, "unsupported-argument", "the file may turn on experimental_enable_numpy_behavior(prefer_float32=True), "
               "which makes this default float32 instead of float64: write dtype=")
        return None
    dtype_text = _spell(ctx, "torch.float64") if dtype is None else _code(dtype)
    target = _spell(ctx, m.rule.emit["target"])
    if "shape" in m.kwargs:
        size = _code(m.kwargs.pop("shape"))
    else:
        size = ", ".join(_code(a) for a in m.bound.vararg_args()) or "()"
    return _e(f"{target}({size}, dtype={dtype_text})")


helpers.HELPERS["tnp_asarray"] = '''

def tnp_asarray(a, dtype=None, copy=False):
    """TensorFlow's numpy asarray / array: a tensor keeps its dtype (copied with copy=True); Python numbers and
    lists and NumPy arrays take NumPy's dtypes (Python floats float64, ints int64); dtype= converts."""
    if isinstance(a, {torch}Tensor):
        a = a.clone() if copy else a
    else:
        a = ({torch}tensor if copy else {torch}as_tensor)({np}asarray(a))
    return a if dtype is None else a.to(dtype)
'''


@call_transform("tnp-asarray")
def tnp_asarray(m, ctx):
    """``tnp.asarray(a, dtype=None)`` → ``tnp_asarray(a[, dtype])`` and ``tnp.array(val, dtype=None, copy=True,
    ndmin=0)`` → ``tnp_asarray(val[, dtype], copy=True)``, a helper written into the file with NumPy's dtype
    inference (torch.as_tensor would make Python floats float32); ``ndmin`` other than 0, or a copy that is not a
    literal, is refused."""
    value = m.kwargs.get("a", m.kwargs.get("val"))
    if value is None:
        return None
    copy = m.rule.emit.get("options", {}).get("copy", False)
    if "copy" in m.kwargs:
        copy = _lit(m.kwargs["copy"])
        if not isinstance(copy, bool):
            m.fail(ctx, "unsupported-argument", f"copy={m.written('copy')}: write True or False")
            return None
    if "ndmin" in m.kwargs and _lit(m.kwargs["ndmin"]) != 0:
        m.fail(ctx, "unsupported-argument", f"ndmin={m.written('ndmin')}: the leading axes of size 1 are not written "
               "out: reshape the result")
        return None
    args = [_code(value)]
    if m.kwargs.get("dtype") is not None:
        args.append(f"dtype={_code(m.kwargs['dtype'])}")
    if copy:
        args.append("copy=True")
    return _e(f"{helpers.use(ctx, 'tnp_asarray')}({', '.join(args)})")


helpers.HELPERS["TensorArray"] = '''

class TensorArray:
    """tf.TensorArray as TensorFlow runs it eagerly: `size` slots of tensors of one dtype (growing past them with
    dynamic_size=True); write / unstack / scatter / split return the array itself, a slot never written reads as
    zeros of the element shape, and a slot is cleared by its read (clear_after_read, the default)."""

    def __init__(self, dtype, size=None, dynamic_size=None, clear_after_read=None, infer_shape=True,
                 element_shape=None):
        if size is None:
            raise ValueError("Size must be declared for TensorArrays when eager execution is enabled.")
        self.dtype = dtype
        self.dynamic_size = bool(dynamic_size)
        self.clear_after_read = True if clear_after_read is None else clear_after_read
        self.infer_shape = infer_shape
        self.element_shape = None if element_shape is None else [None if d is None else int(d) for d in element_shape]
        self._items = [None] * int(size)
        self._cleared = set()

    def size(self):
        return {torch}tensor(len(self._items), dtype={torch}int32)

    def identity(self):
        return self

    def close(self):
        return None

    def _write(self, index, value):
        index = int(index)
        if index < 0:
            raise IndexError(f"Writing to negative indices (index {index}) is not allowed.")
        if index >= len(self._items):
            if not self.dynamic_size:
                raise IndexError(f"Tried to write to index {index} but array is not resizeable and size is: "
                                 f"{len(self._items)}")
            self._items.extend([None] * (index - len(self._items) + 1))
        value = value if isinstance(value, {torch}Tensor) else {torch}as_tensor(value, dtype=self.dtype)
        if value.dtype != self.dtype:
            raise TypeError(f"TensorArray dtype is {self.dtype} but Op is trying to write dtype {value.dtype}")
        shape = list(value.shape)
        known = self.element_shape
        if known is not None and (len(known) != len(shape) or any(k not in (None, s) for k, s in zip(known, shape))):
            raise ValueError(f"Incompatible shape for value ({tuple(shape)}), expected ({known})")
        if self.infer_shape:
            self.element_shape = shape
        self._items[index] = value

    def write(self, index, value):
        self._write(index, value)
        return self

    def _zero(self, index):
        if self._items[index] is None:
            if self.element_shape is None or None in self.element_shape:
                raise ValueError("the element shape is not known: write the slot first")
            self._items[index] = {torch}zeros(self.element_shape, dtype=self.dtype)
        return self._items[index]

    def read(self, index):
        index = int(index)
        if index < 0 or index >= len(self._items):
            raise IndexError(f"Tried to read from index {index} but array size is: {len(self._items)}")
        if self._items[index] is None and index in self._cleared:
            raise RuntimeError(f"Could not read index {index} twice because it was cleared after a previous read "
                               "(perhaps try setting clear_after_read = false?)")
        value = self._zero(index)
        if self.clear_after_read:
            self._items[index] = None
            self._cleared.add(index)
        return value

    def stack(self):
        if not self._items:
            known = self.element_shape
            shape = (0, *known) if known is not None and None not in known else (0,)
            return {torch}zeros(shape, dtype=self.dtype)
        return {torch}stack([self._zero(i) for i in range(len(self._items))])

    def gather(self, indices):
        return {torch}stack([self._zero(int(i)) for i in indices])

    def concat(self):
        return {torch}cat([self._zero(i) for i in range(len(self._items))], 0)

    def unstack(self, value):
        items = list({torch}unbind(value))
        if len(items) > len(self._items) and not self.dynamic_size:
            raise ValueError(f"Cannot unstack {len(items)} tensors into a TensorArray of static size {len(self._items)}")
        self._items = items
        return self

    def scatter(self, indices, value):
        for index, item in zip(indices, {torch}unbind(value)):
            self._write(index, item)
        return self

    def split(self, value, lengths):
        items = list({torch}split(value, [int(n) for n in lengths]))
        if len(items) > len(self._items) and not self.dynamic_size:
            raise ValueError(f"Cannot split into {len(items)} tensors a TensorArray of static size {len(self._items)}")
        self._items = items
        return self
'''
