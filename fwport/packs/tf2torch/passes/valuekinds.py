"""Planner: NumPy values meeting the torch modules a translation makes, and model outputs meeting NumPy.

Keras takes NumPy arrays wherever it takes tensors, and its eager tensors go into NumPy functions; torch's
modules take tensors only, and a tensor that requires grad refuses NumPy. Code that runs under Keras and
translates with no error would crash (``model(x)`` with ``x = np.random.rand(5, 4)``: "linear(): argument
'input' must be Tensor"; float64 data: "expected ... Float but found Double"; ``np.argmax(model(x))``:
"Can't call numpy() on Tensor that requires grad"). The read-only planner ``numpy_values`` (after the rewriting
passes: its edits are applied by the rule pass) looks at the calls of the models of the file (model_api's analysis of the source: Sequential / functional / subclass
models, builders, parameters given models) and of TensorFlow's ops, with the names bound only to NumPy values by
scope (an analysis of the source made once a file, which the training pass also asks for a loss's labels):

      model(x)  with x a NumPy value  →  model(torch.as_tensor(x, dtype=torch.float32))   (floats: Keras casts
                                         them to the layer's float32; where the dtype is not known here:
                                         model(as_float32(x)), a helper that casts floats only)
      np.f(model(x)), np.f(y) with y bound only to model(...) calls  →  np.f(model(x).detach().numpy())
      for xb, yb in ds: model(xb)   (ds a tf.data dataset)  →  model(as_float32(xb))   (a dataset of float64 arrays
                                         gives float64 tensors, which Keras casts and torch's layers refuse)
      tf.expand_dims(a, 0)  with a a NumPy value  →  torch.as_tensor(a).unsqueeze(0)   (any tf / keras.ops function
                                         whose rule takes a tensor: TensorFlow converts, torch does not)

  (TensorFlow's eager tensor gives NumPy its array; ``.detach().numpy()`` is that array.)

A NumPy value: a call of a ``numpy`` function that returns an array (not ``np.load``: an .npz archive, not
``np.meshgrid`` / ``np.split``...: lists), Keras's dataset loaders' arrays (``(x, y), _ =
keras.datasets.mnist.load_data()``), ``keras.utils.to_categorical``, and arithmetic, subscripts, ``.T`` and
``.astype / .reshape / ...`` of NumPy values; a name every binding of which in its scope is one. Anything else
is left as written (a tensor needs nothing). A parameter of a function (or method) of the file is a NumPy value in
its body where a call of it in the file gives one (the conversions take tensors too) (``_given_params``; the analysis made again until that
stops growing: ``train(x_np)`` calling ``step(x)``); so are the arrays of NumPy's random generators
(``rng = np.random.RandomState(0)``, ``rng.rand(...)``). Scopes are matched between the two trees by their functions'
names (``f.g``; a name defined twice: what both agree on): the passes rename methods (``call`` →
``forward``), whose model calls then keep what they had.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.bind import bind_def
from fwport.core.bindings import BindingWalker
from fwport.core.context import FileContext
from fwport.core.direction import fast
from fwport.core.finding import Severity
from fwport.core.hooks import TypeTest, default_visit
from fwport.core.names import ScopedResolver, find_all, param_names, scan
from fwport.core.position import render
from fwport.packs.tf2torch import helpers
from fwport.packs.tf2torch.passes.layerweights import KERAS_WEIGHTS

KINDS = "numpy_value_kinds"
#: the source functions whose first argument, a NumPy value, is converted (ops of TensorFlow, keras.ops, the backend)
_OPS = ("tensorflow.", "keras.ops.", "keras.backend.")
#: ...whose first parameter is a tensor (not a shape, a list of tensors, a path...)
_TENSOR_PARAMS = frozenset({"x", "input", "input_tensor", "image", "images", "inputs", "features", "tensor", "a",
                            "t", "logits", "labels", "y_true", "indices", "params"})
#: ...but not these: their translations take NumPy values as they are (torch.as_tensor, the data helpers)
_CONVERTING = ("tensorflow.convert_to_tensor", "tensorflow.constant", "tensorflow.Variable", "tensorflow.data.",
               "tensorflow.io.", "tensorflow.keras.", "tensorflow.py_function", "tensorflow.numpy_function",
               "tensorflow.print", "tensorflow.identity", "tensorflow.function", "tensorflow.summary.",
               "keras.ops.convert_to_tensor", "keras.ops.array", "keras.backend.constant", "keras.backend.variable")
#: numpy functions that return no array (or a list / tuple of them), or an object torch cannot take
_NOT_ARRAYS = frozenset({
    "load", "meshgrid", "split", "array_split", "hsplit", "vsplit", "dsplit", "histogram", "histogram2d",
    "histogramdd", "unique", "nonzero", "shape", "broadcast_arrays", "broadcast_shapes", "gradient", "dtype",
    "iinfo", "finfo", "vectorize", "frompyfunc", "errstate", "printoptions", "set_printoptions", "save", "savez",
    "savez_compressed", "savetxt", "isscalar", "nditer", "ndenumerate", "ndindex", "poly1d", "einsum_path",
    "random.default_rng", "random.RandomState", "random.Generator", "random.seed", "random.get_state",
    "random.set_state", "random.shuffle", "linalg.eig", "linalg.eigh", "linalg.svd", "linalg.qr", "linalg.slogdet",
    "linalg.lstsq", "where_one"})
_NOT_ARRAY_PREFIXES = ("char.", "testing.", "ma.", "lib.", "rec.", "ctypeslib.", "typing.", "emath.")
#: numpy functions whose array is floating whatever their arguments (no dtype= given)
_FLOATS = frozenset({
    "random.rand", "random.randn", "random.random", "random.random_sample", "random.ranf", "random.sample",
    "random.normal", "random.uniform", "random.standard_normal", "random.beta", "random.gamma",
    "random.exponential", "random.lognormal", "linspace", "logspace", "geomspace", "zeros", "ones", "empty",
    "full_like_float", "eye", "identity", "sin", "cos", "tan", "exp", "log", "log2", "log10", "log1p", "expm1",
    "sqrt", "tanh", "sinh", "cosh", "arctan", "arcsin", "arccos", "arctan2", "mean", "std", "var", "average"})
_FLOAT_DTYPES = frozenset({"float16", "float32", "float64", "float", "double", "single", "half", "float_"})
#: array methods that give an array of the receiver's dtype
_SAME_DTYPE_METHODS = frozenset({"reshape", "copy", "transpose", "squeeze", "flatten", "ravel", "clip", "round",
                                 "swapaxes", "repeat", "take"})
#: Keras functions whose value is a NumPy array (or a tuple of (x, y) pairs of them: the loaders)
_KERAS_ARRAYS = frozenset({"keras.utils.to_categorical"})
_KERAS_LOADERS_PREFIX = "keras.datasets."
#: NumPy's random generators (``rng = np.random.RandomState(0)``, ``np.random.default_rng(0)``): a name bound only to
#: one is known with this mark (no array itself), and these methods of it give arrays (→ surely floating)
_GENERATORS = frozenset({"numpy.random.RandomState", "numpy.random.default_rng", "numpy.random.Generator"})
GENERATOR = "generator"
_GENERATOR_METHODS = {
    "rand": True, "randn": True, "random": True, "random_sample": True, "normal": True, "uniform": True,
    "standard_normal": True, "beta": True, "gamma": True, "exponential": True, "lognormal": True,
    "randint": False, "integers": False, "binomial": False, "poisson": False, "permutation": False}


class _Kind:
    """What an expression is: ``numpy`` (an ndarray, or a NumPy scalar) and whether surely floating."""

    __slots__ = ("numpy", "floating")

    def __init__(self, numpy: bool, floating: bool = False) -> None:
        self.numpy, self.floating = numpy, floating


_NONE = _Kind(False)


def _dtype_floating(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value in _FLOAT_DTYPES if isinstance(node.evaluated_value, str) else False
    if isinstance(node, cst.Name):
        return node.value == "float"
    if isinstance(node, cst.Attribute):
        return node.attr.value in _FLOAT_DTYPES
    return False


def _number(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.UnaryOperation):
        node = node.expression
    return isinstance(node, (cst.Integer, cst.Float))


class Kinds:
    """Kinds of expressions in one scope: ``known`` names → whether surely floating (all NumPy)."""

    def __init__(self, qualname, known: dict[str, bool]) -> None:
        self.qualname, self.known = qualname, known

    def of(self, node: cst.BaseExpression) -> _Kind:
        if isinstance(node, cst.Name):
            f = self.known.get(node.value)
            return _Kind(True, f) if f is not None and f is not GENERATOR else _NONE
        if isinstance(node, cst.Call):
            return self._call(node)
        if isinstance(node, cst.Subscript):
            inner = self.of(node.value)
            return inner if inner.numpy else _NONE
        if isinstance(node, cst.Attribute) and node.attr.value == "T":
            return self.of(node.value)
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
            return self.of(node.expression)
        if isinstance(node, cst.BinaryOperation) and not isinstance(node.operator, cst.MatrixMultiply):
            left, right = self.of(node.left), self.of(node.right)
            if not (left.numpy or right.numpy) or not (left.numpy or _number(node.left)) \
                    or not (right.numpy or _number(node.right)):
                return _NONE
            floating = (isinstance(node.operator, cst.Divide) or left.floating or right.floating
                        or isinstance(node.left, cst.Float) or isinstance(node.right, cst.Float))
            return _Kind(True, floating)
        if isinstance(node, cst.Comparison) and len(node.comparisons) == 1 and not isinstance(
                node.comparisons[0].operator, (cst.In, cst.NotIn, cst.Is, cst.IsNot)):
            left, right = self.of(node.left), self.of(node.comparisons[0].comparator)
            if (left.numpy or right.numpy) and (left.numpy or _number(node.left)) \
                    and (right.numpy or _number(node.comparisons[0].comparator)):
                return _Kind(True, False)  # an array of bools
        return _NONE

    def _call(self, node: cst.Call) -> _Kind:
        func = node.func
        q = self.qualname(func)
        if q is not None:
            if q.startswith("numpy."):
                name = q[len("numpy."):]
                if name == "where" and len(node.args) == 1:
                    return _NONE
                if name in _NOT_ARRAYS or name.startswith(_NOT_ARRAY_PREFIXES) or not name:
                    return _NONE
                dtype = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "dtype"),
                             None)
                floating = _dtype_floating(dtype) if dtype is not None else name in _FLOATS
                if name in ("asarray", "array") and dtype is None and node.args:
                    floating = self.of(node.args[0].value).floating
                if name.startswith("float") and name[5:].isdigit():
                    floating = True  # np.float32(x)
                return _Kind(True, floating)
            if q in _KERAS_ARRAYS:
                return _Kind(True, True)
            return _NONE
        if isinstance(func, cst.Attribute):
            if func.attr.value in _GENERATOR_METHODS and self._generator(func.value):
                return _Kind(True, _GENERATOR_METHODS[func.attr.value])
            receiver = self.of(func.value)
            if not receiver.numpy:
                return _NONE
            method = func.attr.value
            if method == "astype" and node.args:
                return _Kind(True, _dtype_floating(node.args[0].value))
            if method in _SAME_DTYPE_METHODS:
                return receiver
            if method in ("mean", "std", "var"):
                return _Kind(True, True)
        return _NONE


    def _generator(self, node: cst.BaseExpression) -> bool:
        """``node`` is a NumPy random generator: made here, or a name bound only to one."""
        if isinstance(node, cst.Name):
            return self.known.get(node.value) is GENERATOR
        return isinstance(node, cst.Call) and self.qualname(node.func) in _GENERATORS


class _Scope(BindingWalker):
    """Every binding of one scope's body, with its value: ("value", v) for ``name = v``, ("unpacked", v) for a
    name in a tuple target of ``... = v``, ("for", iterable) for a loop variable, ("aug", v), ("other", None)."""

    def __init__(self, walrus: bool = True) -> None:
        # (only a `:=` binds inside an expression: without one in the file, expressions are not walked)
        super().__init__(expressions=walrus, comprehensions=False, imports=False)
        self.values: dict[str, list] = {}
        self._unpacked: dict[int, cst.BaseExpression] = {}
        self._paired: dict[int, cst.BaseExpression] = {}  # a name of a tuple target given its own element
        #: (id(iterable), name) → the name's place in a loop's flat pair target (``for k, m in d.items()``: m → 1)
        self.pair_place: dict[tuple[int, str], int] = {}

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if isinstance(t.target, (cst.Tuple, cst.List)):
                self._leaves(t.target, node.value)
        return super().visit_Assign(node)

    def visit_For(self, node: cst.For) -> None:
        if isinstance(node.target, (cst.Tuple, cst.List)):
            self._leaves(node.target, node.iter)
            if len(node.target.elements) == 2:
                for i, e in enumerate(node.target.elements):
                    if isinstance(e.value, cst.Name):
                        self.pair_place[(id(node.iter), e.value.value)] = i
        else:
            self._unpacked[id(node.target)] = node.iter  # (the loop's iterable, for its elements)
        return super().visit_For(node)

    def _leaves(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        pairs = isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements) and not any(
            isinstance(e, cst.StarredElement) for e in (*value.elements, *target.elements))
        for i, e in enumerate(target.elements):
            if pairs:  # x_train, x_test = x_train / 255.0, x_test / 255.0: each its value
                self._leaves(e.value, value.elements[i].value) if isinstance(e.value, (cst.Tuple, cst.List)) \
                    else self._paired.__setitem__(id(e.value), value.elements[i].value)
            elif isinstance(e.value, (cst.Tuple, cst.List)):
                self._leaves(e.value, value)
            else:
                self._unpacked[id(e.value)] = value

    def bound(self, target: cst.BaseExpression, how: str, value) -> None:
        if not isinstance(target, cst.Name):
            return
        if how in ("assign", "annassign") and value is not None:
            self.values.setdefault(target.value, []).append(("value", value))
        elif how == "assign" and id(target) in self._paired:
            self.values.setdefault(target.value, []).append(("value", self._paired[id(target)]))
        elif how == "assign" and id(target) in self._unpacked:
            self.values.setdefault(target.value, []).append(("unpacked", self._unpacked[id(target)]))
        elif how == "for" and id(target) in self._unpacked:
            self.values.setdefault(target.value, []).append(("for", self._unpacked[id(target)]))
        elif how == "augassign":
            self.values.setdefault(target.value, []).append(("aug", value))
        else:
            self.values.setdefault(target.value, []).append(("other", None))


def _aliased(func: cst.BaseExpression, s: _Scope, qualname) -> str | None:
    """``mnist.load_data`` where every binding of ``mnist`` in the scope is one module path (``mnist =
    tf.keras.datasets.mnist``, the TensorFlow quickstart's): that path's qualified name, ``.load_data`` after it."""
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
        return None
    values = s.values.get(func.value.value) or []
    names = {qualname(v) if how == "value" and isinstance(v, (cst.Attribute, cst.Name)) else None for how, v in values}
    if len(names) != 1 or None in names:
        return None
    return f"{names.pop()}.{func.attr.value}"


def _numpy_names(s: _Scope, params: set[str], outer: dict[str, bool], qualname) -> dict[str, bool]:
    """The names of one scope (its bindings ``s``) bound only to NumPy values (→ surely floating), those of
    ``outer`` it does not bind."""
    bound = set(s.values) | params
    known = {n: f for n, f in outer.items() if n not in bound}
    candidates = {n: vs for n, vs in s.values.items() if n not in params
                  and all(k in ("value", "unpacked", "aug") for k, _ in vs)}
    kinds = Kinds(qualname, known)
    for n in list(candidates):  # rng = np.random.RandomState(0): rng.rand(...) is an array
        if all(how == "value" and kinds._generator(v) and not isinstance(v, cst.Name) for how, v in candidates[n]):
            known[n] = GENERATOR
            del candidates[n]
    known.update({n: True for n in candidates})
    changed = True
    while changed:  # drop names with a binding that is not NumPy, until nothing changes
        changed = False
        for n in list(candidates):
            if n not in known:
                continue
            floating = True
            ok = True
            for how, v in candidates[n]:
                if how == "unpacked":
                    q = qualname(v.func) if isinstance(v, cst.Call) else None
                    if q is None and isinstance(v, cst.Call):
                        q = _aliased(v.func, s, qualname)
                    ok = q is not None and q.startswith(_KERAS_LOADERS_PREFIX) and q.endswith(".load_data")
                    floating = False  # (uint8 images, int labels)
                elif how == "aug":
                    k = kinds.of(v) if v is not None else _NONE
                    ok = v is not None and (k.numpy or _number(v))
                    floating = floating and (k.floating or isinstance(v, cst.Float))
                else:
                    k = kinds.of(v)
                    ok = k.numpy
                    floating = floating and k.floating
                if not ok:
                    break
            if not ok:
                del known[n]
                changed = True
            elif known[n] != floating:
                known[n] = floating
                changed = True
    return known


#: the methods of a tf.data dataset that give a dataset
_DATASET_METHODS = frozenset({"batch", "shuffle", "map", "prefetch", "take", "skip", "repeat", "cache", "filter",
                              "unbatch", "padded_batch", "rebatch", "with_options", "apply", "shard"})


def _dataset(node: cst.BaseExpression, datasets: set[str], qualname) -> bool:
    """A tf.data dataset: ``tf.data.Dataset.<constructor>(...)``, a dataset name, their dataset methods."""
    if isinstance(node, cst.Name):
        return node.value in datasets
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
        return False
    q = qualname(node.func)
    if q is not None:
        return q.startswith("tensorflow.data.Dataset.")
    return node.func.attr.value in _DATASET_METHODS and _dataset(node.func.value, datasets, qualname)


def _dataset_elements(s: _Scope, params: set[str], outer: set[str], qualname) -> set[str]:
    """The names of one scope (its bindings ``s``) bound only as the elements of a tf.data dataset (``for xb, yb in
    ds:``): tensors of the dataset's dtypes, float64 where it was made of float64 NumPy arrays (those of ``outer``
    it does not bind)."""
    datasets: set[str] = set()
    changed = True
    while changed:
        changed = False
        for n, vs in s.values.items():
            if n not in datasets and n not in params and all(
                    k == "value" and _dataset(v, datasets, qualname) for k, v in vs):
                datasets.add(n)
                changed = True
    mine = {n for n, vs in s.values.items() if n not in params and all(
        k == "for" and _dataset(v, datasets, qualname) for k, v in vs)}
    return mine | {n for n in outer if n not in s.values and n not in params}


#: (libcst's CSTVisitor.on_visit, then: only the functions, never inside a simple statement or an expression)
_NOT_ENTERED = TypeTest(cst.SimpleStatementLine, cst.BaseExpression)


class _Paths(ScopedResolver, cst.CSTVisitor):
    """The scope path (``f.g``: the names of the enclosing functions) of every function, while visiting."""

    def __init__(self, ctx: FileContext) -> None:
        super().__init__()
        self._init_scopes(ctx.imports)
        self.path: list[str] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool | None:
        self.path.append(node.name.value)
        return super().visit_FunctionDef(node)

    def leave_FunctionDef(self, original_node, updated_node=None):  # type: ignore[override]
        self.path.pop()
        return super().leave_FunctionDef(original_node, updated_node)


def _merge(into: dict, path: str, value) -> None:
    """``value`` for ``path``; a path met twice keeps what both agree on."""
    if path not in into:
        into[path] = value
    elif isinstance(value, dict):
        into[path] = {k: v and into[path][k] for k, v in value.items() if k in into[path]
                      and (v is GENERATOR) == (into[path][k] is GENERATOR)}
    else:
        into[path] = into[path] & value


class _Analyse(_Paths):
    """The NumPy names and dataset elements of each scope (by path) of one tree."""

    def __init__(self, ctx: FileContext, module: cst.Module, given: dict[str, dict[str, bool]] | None = None) -> None:
        super().__init__(ctx)
        self.ctx, self.module = ctx, module
        #: per function path: its parameters every call of it in the file gives a NumPy value (_given_params)
        self.given = given or {}
        self.numpy: dict[str, dict[str, bool]] = {}
        self.elements: dict[str, set[str]] = {}
        self._models: dict[str, set[str]] | None = None
        parsed = ctx.analyses.get("parsed")
        self.walrus = parsed is None or ":=" in parsed[1]
        scope = _Scope(self.walrus)
        scan(module, scope)
        top_numpy = _numpy_names(scope, set(), {}, self._resolve)
        top_elements = _dataset_elements(scope, set(), set(), self._resolve)
        self.stack: list[tuple[dict[str, bool], set[str]]] = [(top_numpy, top_elements)]
        _merge(self.numpy, "", top_numpy)
        _merge(self.elements, "", top_elements)

    def on_visit(self, node: cst.CSTNode) -> bool:
        # only the functions (compound statements): never inside a simple statement or an expression
        return default_visit(self, node) and not _NOT_ENTERED[node.__class__]

    def _resolve(self, node: cst.BaseExpression) -> str | None:
        return self.qualname(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool | None:
        super().visit_FunctionDef(node)
        outer_numpy, outer_elements = self.stack[-1]
        params = param_names(node)
        scope = _Scope(self.walrus)
        scan(node.body, scope)
        numpy = _numpy_names(scope, params, outer_numpy, self._resolve)
        elements = _dataset_elements(scope, params, outer_elements, self._resolve)
        self.stack.append((numpy, elements))
        path = ".".join(self.path)
        numpy.update({n: f for n, f in self.given.get(path, {}).items() if n in params and n not in scope.values})
        _merge(self.numpy, path, numpy)
        _merge(self.elements, path, elements)
        return None

    def leave_FunctionDef(self, original_node, updated_node=None):  # type: ignore[override]
        self.stack.pop()
        return super().leave_FunctionDef(original_node, updated_node)

    def models(self, path: str) -> set[str]:
        """The names that are surely models in the scope ``path`` (model_api's analysis, made the first time)."""
        if self._models is None:
            from fwport.packs.tf2torch.passes.model_api import models_of
            self._models = {}
            found = models_of(self.module, self.ctx)
            if found.any():
                scan(self.module, _ModelPaths(self.ctx, found, self._models))
        return self._models.get(path, set())


class _ModelPaths(_Paths):
    def __init__(self, ctx: FileContext, models, into: dict[str, set[str]]) -> None:
        super().__init__(ctx)
        self.found, self.into = models, into
        self.stack = [set(models.top.models)]
        _merge(into, "", self.stack[0])

    def on_visit(self, node: cst.CSTNode) -> bool:
        return default_visit(self, node) and not _NOT_ENTERED[node.__class__]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool | None:
        super().visit_FunctionDef(node)
        scope = self.found.scopes.get(id(node))
        mine = set(scope.models) if scope is not None else set()
        bound = scope.bound if scope is not None else param_names(node)
        models = mine | {m for m in self.stack[-1] if m not in bound}
        self.stack.append(models)
        _merge(self.into, ".".join(self.path), models)
        return None

    def leave_FunctionDef(self, original_node, updated_node=None):  # type: ignore[override]
        self.stack.pop()
        return super().leave_FunctionDef(original_node, updated_node)


class _Calls(_Paths):
    """Every function of the file (``defs``: name → [(def, path, method)]), every call of a name or an attribute
    with the path of the function it is in (``calls``: name → [(call, path)]), and the names read otherwise than
    as called (``read``: a Name not called, an attribute not called: a function passed on or stored)."""

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self.defs: dict[str, list] = {}
        self.calls: dict[str, list] = {}
        self.read: set[str] = set()
        self._called: set[int] = set()
        self._classes: list[int] = []  # len(self.path) at each class entered

    def visit_ClassDef(self, node: cst.ClassDef) -> bool | None:
        self._classes.append(len(self.path))
        return super().visit_ClassDef(node)

    def leave_ClassDef(self, original_node) -> None:
        self._classes.pop()
        super().leave_ClassDef(original_node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool | None:
        method = bool(self._classes) and self._classes[-1] == len(self.path)
        super().visit_FunctionDef(node)
        self.defs.setdefault(node.name.value, []).append((node, ".".join(self.path), method))
        self._called.add(id(node.name))
        return None

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) \
            else None
        if name is not None:
            self.calls.setdefault(name, []).append((node, ".".join(self.path)))
            self._called.add(id(func) if isinstance(func, cst.Name) else id(func.attr))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if id(node.attr) not in self._called:
            self.read.add(node.attr.value)
        self._called.add(id(node.attr))  # (its attr Name is no read of a function's name)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._called.add(id(node.keyword))

    def visit_Param(self, node: cst.Param) -> None:
        self._called.add(id(node.name))

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) not in self._called:
            self.read.add(node.value)


def _given_params(ctx: FileContext, a: _Analyse, found: _Calls) -> dict[str, dict[str, bool]]:
    """Per function path: the parameters a call of the function in the file gives a NumPy value (``def
    train_step(x, y)`` ... ``train_step(x_train[i:i + 32], y_train[i:i + 32])``; a method, ``trainer.train_step(x,
    y)``: the calls of an attribute of its name), → whether every call gives a floating one. Its translation is given
    that NumPy array where Keras's was (Keras converts it): the conversions written for it (torch.as_tensor, the
    as_float32 helper) also take the tensors other calls may give. Only a function whose name the file defines once
    and reads only to call it (not passed on, stored, decorated by anything but tf.function)."""
    out: dict[str, dict[str, bool]] = {}
    for name, defs in found.defs.items():
        if len(defs) != 1 or name in found.read or name not in found.calls:
            continue
        fn, path, method = defs[0]
        if any(a.qualname(d.decorator) != "tensorflow.function" for d in fn.decorators):
            continue  # (a staticmethod / classmethod / property, a decorator that wraps it)
        params = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)]
        if method:
            params = params[1:]
        calls = [(c, p) for c, p in found.calls[name] if isinstance(c.func, cst.Attribute) == method]
        if not calls or len(calls) != len(found.calls[name]):
            continue  # (a method's name called as a plain function's too: which one is not known)
        numpy: set[str] = set()  # given a NumPy value by some call
        floating = set(params)  # given a floating NumPy value by every call
        for call, at in calls:
            bound = bind_def(call, fn, skip=1 if method else 0)
            known = a.numpy.get(at)
            k = Kinds(a.qualname, known) if bound is not None and known is not None else None
            for q in params:
                kind = k.of(bound[q]) if k is not None and q in bound else _NONE
                if kind.numpy:
                    numpy.add(q)
                if not kind.floating:
                    floating.discard(q)
        kinds = {q: q in floating for q in params if q in numpy}
        if kinds:
            out[path] = kinds
    return out


def _analysis(ctx: FileContext) -> _Analyse:
    """The analysis of the source as the passes found it (the tree model_api's analysis was made of, else the
    parsed source), made once a file, when first asked; again while the parameters known NumPy by their calls
    (_given_params) grow: a NumPy value passed on through a function of the file to another."""
    a = ctx.analyses.get(KINDS)
    if a is None:
        cached = ctx.analyses.get("models_of")
        tree = cached[0] if cached is not None else ctx.analyses["parsed"][0]
        a = _Analyse(ctx, tree)
        scan(tree, a)
        found = _Calls(ctx)
        scan(tree, found)
        for _ in range(4):
            given = _given_params(ctx, a, found)
            if given == a.given:
                break
            a = _Analyse(ctx, tree, given)
            scan(tree, a)
        ctx.analyses[KINDS] = a
    return a


def numpy_kinds(ctx: FileContext, path: str, qualname) -> Kinds | None:
    """The kinds of expressions in the scope ``path`` (the training pass asks, for a loss's labels)."""
    known = _analysis(ctx).numpy.get(path)
    return Kinds(qualname, known) if known is not None else None


class _Edits(_Paths):
    def __init__(self, ctx: FileContext, module: cst.Module, analysis: _Analyse, checks: bool = False) -> None:
        super().__init__(ctx)
        self.checks = checks  # model_layouts (run_checks), not numpy_values
        self.ctx, self.a = ctx, analysis
        self.numpy, self.elements = analysis.numpy, analysis.elements
        self.scopes: list[cst.Module | cst.FunctionDef] = [module]
        self._outputs_of: dict[int, set[str]] = {}  # per scope: names bound only to model calls (made when asked)
        self._bindings: dict[int, _Scope] = {}  # per scope: its bindings (made when asked)
        self._tested: set[tuple[str, str]] | None = None  # (value, attribute) of each hasattr(value, "attr") (when asked)
        self.classes = 0  # the depth of classes around the node visited
        self._class_stack: list[tuple[cst.ClassDef, int]] = []  # (class, len(self.scopes) where it is defined)
        self._held: dict[tuple[int, str], list | None] = {}  # (id(class), attribute) → _held_infos's answer
        self._comps: list = []  # the comprehensions around the node visited
        self._params: dict[tuple[int, str], list | None] = {}  # (id(function), parameter) → _param_infos's answer

    def _outputs(self, depth: int) -> set[str]:
        node = self.scopes[depth]
        found = self._outputs_of.get(id(node))
        if found is None:
            path = ".".join(self.path[:depth])
            models = self.a.models(path)
            outer = self._outputs(depth - 1) if depth else set()
            s = _Scope(self.a.walrus)
            scan(node if isinstance(node, cst.Module) else node.body, s)
            params = param_names(node) if isinstance(node, cst.FunctionDef) else set()
            mine = {n for n, vs in s.values.items() if n not in params and all(
                how in ("value", "unpacked") and self._model_call(v, models) for how, v in vs)}  # (y, z = model(x))
            found = self._outputs_of[id(node)] = mine | {n for n in outer if n not in s.values and n not in params}
        return found

    @staticmethod
    def _model_call(node, models: set[str]) -> bool:
        return isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in models

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool | None:
        super().visit_FunctionDef(node)
        self.scopes.append(node)
        return None

    def leave_FunctionDef(self, original_node, updated_node=None):  # type: ignore[override]
        self.scopes.pop()
        return super().leave_FunctionDef(original_node, updated_node)

    def visit_ClassDef(self, node: cst.ClassDef) -> bool | None:
        self.classes += 1
        self._class_stack.append((node, len(self.scopes)))
        return super().visit_ClassDef(node)

    def leave_ClassDef(self, original_node) -> None:
        self.classes -= 1
        self._class_stack.pop()
        super().leave_ClassDef(original_node)

    def visit_Call(self, node: cst.Call) -> None:
        path = ".".join(self.path)
        self._op_input(node, path)
        if isinstance(node.func, cst.Name):
            if not self.checks:
                self._model_inputs(node, path)
            elif not self.classes:  # (a class's body: the subclass pass permutes around its Sequentials)
                self._layout(node, path)
            return
        if self.checks and not self.classes and isinstance(node.func, cst.Subscript) \
                and isinstance(node.func.value, cst.Name):
            self._layout(node, path)  # (models["cnn"](x), nets[0](x))
        if self.checks and self.classes and isinstance(node.func, cst.Attribute):
            self._held_call(node)  # (self.model(x), self.model.fit(...) in a plain class)
        if self.checks:
            return
        q = self.qualname(node.func)
        if q is None or not q.startswith("numpy."):
            return
        for arg in node.args:
            v = arg.value
            if arg.star or self.ctx.plans.get(v) is not None:
                continue
            base = v
            while isinstance(base, cst.Subscript):  # np.squeeze(y[:, 0])
                base = base.value
            if not isinstance(base, (cst.Call, cst.Name)) or (isinstance(base, cst.Call) and not isinstance(
                    base.func, cst.Name)):
                continue
            if self._model_call(base, self.a.models(path)) or (
                    isinstance(base, cst.Name) and base.value in self._outputs(len(self.scopes) - 1)):
                self.ctx.plans.add(v, _detached, by="numpy_values")

    def _model_inputs(self, node: cst.Call, path: str) -> None:
        """``model(x)`` with ``x`` a NumPy value or a dataset's element: a tensor of Keras's float32."""
        kinds = Kinds(self.qualname, self.numpy.get(path) or {})
        elements = self.elements.get(path, set())
        for arg in node.args:
            if arg.star or (arg.keyword is not None and arg.keyword.value not in ("x", "inputs")):
                continue
            kind = kinds.of(arg.value)
            base = arg.value
            while isinstance(base, cst.Subscript):
                base = base.value
            element = isinstance(base, cst.Name) and base.value in elements
            if not (kind.numpy or element) or self.ctx.plans.get(arg.value) is not None \
                    or node.func.value not in self.a.models(path):
                continue
            # (a dataset's element: Keras casts a float64 input to the layer's float32, torch's layers refuse it)
            self.ctx.plans.add(arg.value, self._to_tensor(kind.floating), by="numpy_values")

    def visit_Attribute(self, node: cst.Attribute) -> None:
        """``p.name`` of a model's weight (``for p in model.trainable_variables``), ``layer.weights`` /
        ``layer.name`` / ``layer.kernel`` of a layer taken out of a translated model (``layer = model.layers[1]``,
        ``for layer in model.layers``): the translation's parameter has no name (None), its module none of these
        Keras attributes (a crash): an error finding."""
        attr = node.attr.value
        if not self.checks or attr not in _WEIGHT_ONLY and attr not in _LAYER_ONLY or self.ctx.plans.get(node) is not None:
            return
        if attr in KERAS_WEIGHTS and not isinstance(node.value, cst.Name):
            return  # (model.layers[0].kernel: layer_weights's, a view in Keras's layout or its error)
        path = ".".join(self.path)
        kind = self._keras_kind(node.value, path)
        if kind is None:
            return
        if self.ctx.is_settled(node):
            return
        if self._tested is None:  # the code tests for the attribute (hasattr(layer, "units")): it handles its absence
            self._tested = {(render(c.args[0].value), c.args[1].value.value[1:-1]) for c in find_all(self.scopes[0], cst.Call)
                            if isinstance(c.func, cst.Name) and c.func.value == "hasattr" and len(c.args) == 2
                            and isinstance(c.args[1].value, cst.SimpleString)}
        if (render(node.value), attr) in self._tested:
            return
        text = render(node)
        if kind == "weight" and attr in _WEIGHT_ONLY:
            self._refuse(node, f"{text}: the translation's parameter (a torch tensor) has no Keras name ({text} is "
                         "None there); torch's names are those of model.named_parameters() ('0.weight', not Keras's "
                         "'dense/kernel'): iterate `for name, p in model.named_parameters()` and accept its names, "
                         "or keep a list of Keras's names yourself")
        elif kind == "layer" and attr in _LAYER_ONLY:
            from fwport.packs.tf2torch.passes.layerweights import HANDLED
            if id(node) in self.ctx.analyses.get(HANDLED, ()):
                return  # (e = model.layers[0]; e.get_weights(): layer_weights translated it)
            message = (f"{text}: the layer taken out of the translated model is the torch module it became, which "
                       f"has no Keras attribute .{attr} (an AttributeError): read the module's own (parameters(), "
                       "weight / bias in torch's layout, its class name) or write it by hand")
            if isinstance(node.value, cst.Subscript):
                if attr in ("get_weights", "set_weights"):
                    return  # (model.layers[0].get_weights(): layer_weights's)
                # model.layers[k].output: said when the edit of model.layers[k] is applied (before this one, inside
                # it), unless that edit refused model.layers itself
                sub, ctx = node.value, self.ctx

                def apply(orig, upd):
                    if not any(p.finding.severity is Severity.ERROR and (p.node is sub or p.node is sub.value)
                               for p in ctx.pending):
                        ctx.report(Severity.ERROR, "unsupported-construct", message, orig)
                    return upd
                self.ctx.plans.add(node, apply, by="model_layouts")
                return
            self._refuse(node, message)
        self.ctx.settle(node)

    def _metric_names(self, target: cst.BaseExpression, iterable: cst.BaseExpression, body) -> None:
        """``{m.name: m.result() for m in self.metrics}`` (a for loop too): the written-out metric classes keep no
        name (the rules drop Keras's name=), so ``m.name`` would raise AttributeError: an error finding."""
        if not (self.checks and isinstance(target, cst.Name) and isinstance(iterable, cst.Attribute)
                and iterable.attr.value == "metrics"):
            return
        if self.ctx.is_settled(iterable) or any(p.finding.severity is Severity.ERROR and p.node is iterable
                                                for p in self.ctx.pending):
            return  # (self.metrics refused itself: Keras's own metrics, which no translated class carries)
        parsed = self.ctx.analyses.get("parsed")
        text = parsed[1] if parsed is not None else self.scopes[0].code
        if f"# fwport: unsupported-construct: {render(iterable)}: " in text:
            return  # (an earlier translation refused it: its comment is said again, translating its output again)
        for node in find_all(body, cst.Attribute):
            if node.attr.value == "name" and isinstance(node.value, cst.Name) and node.value.value == target.value \
                    and not self.ctx.is_settled(node):
                self._refuse(node, f"{render(node)}: the metric objects of the translation (written-out classes) "
                             "keep no Keras name: write the names out (`{\"loss\": self.loss_tracker.result(), ...}`"
                             ", the keys history.history is read by)")
                self.ctx.settle(node)

    def visit_For(self, node: cst.For) -> None:
        self._metric_names(node.target, node.iter, node.body)

    def _comp(self, node, parts) -> None:
        self._comps.append(node)
        comp = node.for_in
        if comp.inner_for_in is None:
            for part in parts:
                self._metric_names(comp.target, comp.iter, part)

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self._comp(node, (node.key, node.value))

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._comp(node, (node.elt,))

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._comp(node, (node.elt,))

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self._comps.append(node)

    def _left_comp(self, original_node) -> None:
        self._comps.pop()

    leave_DictComp = leave_ListComp = leave_GeneratorExp = leave_SetComp = _left_comp

    def _comp_infos(self, name: str) -> tuple[bool, list | None]:
        """(whether a comprehension around the walk binds ``name``, the models it may be there: ``[m(x) for m in
        nets]``, ``{k: m(x) for k, m in models.items()}``, as a loop's name (_infos); None where not known)."""
        for comp in reversed(self._comps):
            c = comp.for_in
            found = None
            while c is not None:
                t = c.target
                if isinstance(t, cst.Name) and t.value == name:
                    found = (c.iter, None)
                elif isinstance(t, (cst.Tuple, cst.List)) and any(
                        e.value.value == name for e in t.elements if isinstance(e.value, cst.Name)):
                    places = [i for i, e in enumerate(t.elements) if isinstance(e.value, cst.Name)
                              and e.value.value == name]
                    found = (c.iter, places[0] if len(t.elements) == 2 and len(places) == 1 else -1)
                elif isinstance(t, (cst.Tuple, cst.List)) and any(
                        isinstance(a, cst.Name) and a.value == name for a in find_all(t, cst.Name)):
                    found = (None, -1)  # (nested deeper: not followed)
                c = c.inner_for_in
            if found is None:
                continue
            v, place = found
            if place == -1 or v is None:
                return True, None
            if isinstance(v, (cst.List, cst.Tuple)) and place is None:
                return True, self._elements(v, self.scopes, self.path, frozenset())
            if isinstance(v, cst.Name) and place is None:
                return True, self._container(v, self.scopes, self.path, frozenset())
            if isinstance(v, cst.Call):
                return True, self._iterated(v, place, self.scopes, self.path, frozenset())
            return True, None
        return False, None

    def _keras_kind(self, value: cst.BaseExpression, path: str) -> str | None:
        """"weight" / "layer" where ``value`` is one of a translated model's weights (its trainable_variables /
        weights... list or an element of it) / layers, or a name every binding of which (in the innermost scope
        binding it) is one; else None."""
        if isinstance(value, cst.Subscript):
            return self._list_kind(value.value, path, value)
        if not isinstance(value, cst.Name):
            return None
        name = value.value
        for depth in range(len(self.scopes) - 1, -1, -1):
            node = self.scopes[depth]
            if isinstance(node, cst.FunctionDef) and name in param_names(node):
                return None
            values = self._scope_bindings(depth).values.get(name)
            if not values:
                continue
            kinds = set()
            for how, v in values:
                if how == "for":  # for v in model.weights; for i, v in enumerate(model.weights)
                    if isinstance(v, cst.Call) and isinstance(v.func, cst.Name) and v.func.value == "enumerate" \
                            and v.args and not v.args[0].star:
                        v = v.args[0].value
                    kinds.add(self._list_kind(v, path))
                elif how == "value" and isinstance(v, cst.Subscript) and len(v.slice) == 1 \
                        and isinstance(v.slice[0].slice, cst.Index):
                    kinds.add(self._list_kind(v.value, path, v))
                else:
                    return None
            return kinds.pop() if len(kinds) == 1 else None
        return None

    def _list_kind(self, node: cst.BaseExpression, path: str, item: cst.BaseExpression | None = None) -> str | None:
        """"weight" / "layer" for ``model.trainable_variables`` (...) / ``model.layers`` of a model of the file
        that the passes translated (an edit planned on it, or on ``item``, the subscript of it read)."""
        if not (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name)
                and node.value.value in self.a.models(path)):
            return None
        attr = node.attr.value
        kind = "weight" if attr in _WEIGHT_LISTS else "layer" if attr == "layers" else None
        planned = self.ctx.plans.get(node) is not None or (item is not None and self.ctx.plans.get(item) is not None)
        return kind if planned else None

    def _scope_bindings(self, depth: int, node=None) -> _Scope:
        node = self.scopes[depth] if node is None else node
        s = self._bindings.get(id(node))
        if s is None:
            s = self._bindings[id(node)] = _Scope(self.a.walrus)
            scan(node if isinstance(node, cst.Module) else node.body, s)
        return s

    def _infos(self, name: str, scopes: list | None = None, path: list | None = None,
               seen: frozenset = frozenset()) -> list | None:
        """The models (ctx.models' infos) ``name`` may be where it is called (in the scopes ``scopes``, the
        functions ``path``: the walk's where not given): those of every value of its innermost binding (``model =
        nn.Sequential(...)``, ``model = build_model()``), of a parameter those every call of its function gives it
        (``def run(m, x): return m(x)`` ... ``run(model, images)``: _param_infos; an element None where one call's is
        not known); None where one is not known (another value, a parameter of a function not only called)."""
        models = self.ctx.models
        scopes = self.scopes if scopes is None else scopes
        path = self.path if path is None else path
        for depth in range(len(scopes) - 1, -1, -1):
            node = scopes[depth]
            if isinstance(node, cst.FunctionDef) and name in param_names(node):
                return self._param_infos(scopes[:depth + 1], path[:depth], name, seen)
            values = self._scope_bindings(depth, node).values.get(name)
            if not values:
                continue
            fn = path[depth - 1] if depth else None
            out = []
            for how, v in values:
                if how == "value" and isinstance(v, cst.Call):
                    if render(v.func) in ("nn.Sequential", "torch.nn.Sequential", self._sequential_text()):
                        keys = [f"{fn}.{name}", fn] if fn else [name]
                        info = next((models[k] for k in keys if k in models and models[k].kind == "sequential"), None)
                    elif isinstance(v.func, cst.Name):
                        info = models.get(v.func.value)
                    else:
                        info = None
                    if info is None:
                        return None
                    out.append(info)
                    continue
                # an element of a list / tuple / dict the scope writes out (for m in [cnn, mlp]; m = models["cnn"]):
                # each element's
                if how == "for" and isinstance(v, (cst.List, cst.Tuple)):
                    infos = self._elements(v, scopes[:depth + 1], path[:depth], seen)
                elif how == "for" and isinstance(v, cst.Name):  # for m in nets
                    infos = self._container(v, scopes[:depth + 1], path[:depth], seen)
                elif how == "for" and isinstance(v, cst.Call):  # for m in models.values(); for k, m in ....items()
                    place = self._scope_bindings(depth, node).pair_place.get((id(v), name))
                    infos = self._iterated(v, place, scopes[:depth + 1], path[:depth], seen)
                elif how == "value" and isinstance(v, cst.Subscript) and isinstance(v.value, cst.Name):  # nets[0]
                    infos = self._container(v.value, scopes[:depth + 1], path[:depth], seen)
                else:
                    infos = None
                if infos is None:
                    return None
                out.extend(infos)
            return out
        return None

    def _sequential_text(self) -> str:
        """How the output spells torch.nn.Sequential (asked without noting its import: a file that writes no
        nn.Sequential needs none)."""
        before = set(self.ctx.needed_imports)
        text = self.ctx.spell_text("torch.nn.Sequential")
        self.ctx.needed_imports.intersection_update(before)
        return text

    def _container(self, name: cst.Name | None, scopes: list, path: list, seen: frozenset) -> list | None:
        """The models (ctx.models' infos) the elements of the list / tuple / dict ``name`` is bound to (every binding
        of it in its innermost scope a literal one) may be; None where one is not known."""
        if name is None:
            return None
        for depth in range(len(scopes) - 1, -1, -1):
            node = scopes[depth]
            if isinstance(node, cst.FunctionDef) and name.value in param_names(node):
                return None
            values = self._scope_bindings(depth, node).values.get(name.value)
            if not values:
                continue
            out: list = []
            for how, v in values:
                infos = self._elements(v, scopes[:depth + 1], path[:depth], seen) if how == "value" else None
                if infos is None:
                    return None
                out.extend(infos)
            return out
        return None

    def _iterated(self, call: cst.Call, place: int | None, scopes: list, path: list, seen: frozenset) -> list | None:
        """The models a loop's name may be over ``call``: ``d.values()`` (the name the whole target), ``d.items()``
        and ``enumerate(nets)`` (the name the second of a pair target, ``place`` 1), ``d`` / ``nets`` a container
        the scopes write out (or a list written in place); None where not known."""
        if call.args and not (isinstance(call.func, cst.Name) and call.func.value == "enumerate"
                              and len(call.args) == 1 and not call.args[0].star and call.args[0].keyword is None):
            return None
        if isinstance(call.func, cst.Attribute):
            method = call.func.attr.value
            if not (method == "values" and place is None or method == "items" and place == 1):
                return None
            inner = call.func.value
        elif isinstance(call.func, cst.Name) and call.func.value == "enumerate" and place == 1 \
                and not any("enumerate" in self._scope_bindings(d, scopes[d]).values for d in range(len(scopes))):
            inner = call.args[0].value
        else:
            return None
        if isinstance(inner, (cst.List, cst.Tuple)):
            return self._elements(inner, scopes, path, seen)
        return self._container(inner, scopes, path, seen) if isinstance(inner, cst.Name) else None

    def _elements(self, value, scopes: list, path: list, seen: frozenset) -> list | None:
        """The models (ctx.models' infos) of the elements of a list / tuple / dict written out (names the scopes
        bind, calls of builders); None where one is not known, or ``value`` is no such literal."""
        if isinstance(value, cst.Dict):
            items = [e.value if isinstance(e, cst.DictElement) else None for e in value.elements]
        elif isinstance(value, (cst.List, cst.Tuple)):
            items = [e.value if isinstance(e, cst.Element) else None for e in value.elements]
        else:
            return None
        out = []
        for item in items:
            if isinstance(item, cst.Name):
                infos = self._infos(item.value, scopes, path, seen)
            elif isinstance(item, cst.Call) and isinstance(item.func, cst.Name):
                info = self.ctx.models.get(item.func.value)
                infos = [info] if info is not None else None
            else:
                infos = None
            if infos is None:
                return None
            out.extend(infos)
        return out

    def _nchw_layer(self, name: str, node: cst.Call) -> bool:
        """``layer(x)`` where ``layer`` is bound only to ``model.layers[k]`` of a Sequential made channels-first
        (``first = model.layers[0]``): the module it became is called on Keras's channels-last data: an error (as
        ``model.layers[0](x)`` is, model_api); True where said."""
        from fwport.packs.tf2torch.passes.sequential import SPANS
        values = self._innermost(name)
        models = {v.value.value.value for how, v in values if how == "value" and isinstance(v, cst.Subscript)
                  and isinstance(v.value, cst.Attribute) and v.value.attr.value == "layers"
                  and isinstance(v.value.value, cst.Name)}
        if not values or len(models) != 1 or len(values) != sum(1 for how, _ in values if how == "value"):
            return False
        model = models.pop()
        if not (self.ctx.analyses.get(SPANS, {}).get(model) or (None, False))[1]:
            return False
        self._refuse(node, f"{name} is a layer taken out of {model}.layers, and {model} is translated channels-first "
                     "(NCHW): the module it became would see its channels-last input's axes in another order than "
                     f"Keras's; call the model, or move the axes by hand ({name}(x.movedim(-1, 1)).movedim(1, -1))")
        return True

    def _innermost(self, name: str) -> list:
        """The bindings of ``name`` in the innermost scope of the walk binding it ([] for a parameter, none)."""
        for depth in range(len(self.scopes) - 1, -1, -1):
            node = self.scopes[depth]
            if isinstance(node, cst.FunctionDef) and name in param_names(node):
                return []
            values = self._scope_bindings(depth).values.get(name)
            if values:
                return values
        return []

    def _param_infos(self, scopes: list, path: list, name: str, seen: frozenset) -> list | None:
        """The models the parameter ``name`` of the function ``scopes[-1]`` is given by each call of it (a function
        defined once in the body of the module or of a function, whose name is read only to call it there): a
        name the call site binds (_infos there), a builder's call; an element None for a call whose argument is not
        known (a default, another expression, a starred argument) or for the function's name read otherwise (passed
        on as a value); the whole None where no call is known (a function called nowhere, a method, one defined under
        an if or twice)."""
        fn, parent = scopes[-1], scopes[-2] if len(scopes) > 1 else None
        if parent is None or id(fn) in seen:
            return None
        key = (id(fn), name)
        if key not in self._params:
            self._params[key] = self._given(scopes, path, name, seen)
        return self._params[key]

    def _given(self, scopes: list, path: list, name: str, seen: frozenset) -> list | None:
        fn, parent = scopes[-1], scopes[-2]
        body = parent.body if isinstance(parent, cst.Module) else parent.body.body
        if not any(stmt is fn for stmt in body) or len(self._scope_bindings(0, parent).values.get(
                fn.name.value) or ()) != 1:
            return None  # (a method, a function defined under an if or twice)
        called = fn.name.value
        sites = _Sites(fn, lambda f: called in param_names(f) or called in self._scope_bindings(0, f).values)
        scan(parent if isinstance(parent, cst.Module) else parent.body, sites)
        if not sites.calls:
            return None
        out: list = [None] if sites.other else []
        for call, stack in sites.calls:
            args = bind_def(call, fn)
            value = args.get(name) if args is not None else None
            if value is None:
                out.append(None)
                continue
            if isinstance(value, cst.Name):
                infos = self._infos(value.value, [*scopes[:-1], *stack], [*path[:-1], *(f.name.value for f in stack)],
                                    seen | {id(fn)})
                out.extend(infos if infos is not None else [None])
            elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
                out.append(self.ctx.models.get(value.func.value))
            else:
                out.append(None)
        return out

    def _held_call(self, node: cst.Call) -> None:
        """In a method of a plain class (no base class: a trainer, not a Keras subclass, which the subclass pass
        translates), ``self.model(x)`` where ``self.model`` holds a Sequential the passes made channels-first
        (``self.model = model`` in ``__init__``, ``Trainer(build_model())``; _held_infos): its input moved, as
        ``model(x)``'s (_layout); ``self.model.fit(...)`` (a Keras model method, which the translated module has not):
        an error."""
        cls, depth = self._class_stack[-1]
        if any(b.value.value != "object" if isinstance(b.value, cst.Name) else True for b in cls.bases) \
                or len(self.scopes) <= depth or not any(stmt is self.scopes[depth] for stmt in cls.body.body):
            return
        method = self.scopes[depth]
        params = method.params.params
        if not params or len(self.scopes) > depth + 1 and any(
                "self" in param_names(f) for f in self.scopes[depth + 1:]):
            return  # (a static method; a nested function's own self)
        me = params[0].name.value
        func = node.func
        if isinstance(func.value, cst.Name) and func.value.value == me:
            attr, keras_method = func.attr.value, None
        elif isinstance(func.value, cst.Attribute) and isinstance(func.value.value, cst.Name) \
                and func.value.value.value == me and func.attr.value in _KERAS_MODEL_METHODS:
            attr, keras_method = func.value.attr.value, func.attr.value
        else:
            return
        if self.ctx.plans.get(node) is not None or self.ctx.is_settled(node):
            return
        infos = self._held_infos(cls, depth, attr)
        if not infos or all(i is None for i in infos):
            return  # (nothing the file builds: not one of its models)
        name = f"{me}.{attr}"
        if keras_method is not None:
            from fwport.packs.tf2torch.passes.model_api import METHODS
            self._refuse(node, f"{name} holds a model the translation makes a torch module ({cls.name.value}("
                         f"...) is given it), which has no Keras method .{keras_method}(): {METHODS[keras_method]}")
            return
        nchw = any(i is not None and "nchw" in (i.layout, i.output_layout) for i in infos)
        if nchw and None in infos:
            self._refuse(node, f"{name} is given a Sequential model fwport made channels-first (NCHW) by a "
                         f"construction of {cls.name.value}, and elsewhere a value not known here; its channels-last "
                         "inputs cannot be moved for one and kept for the other: give it models the file builds, or "
                         "permute by hand (x.movedim(-1, 1); the output back with y.movedim(1, -1))")
            return
        if nchw:
            self._moves(node, name, infos)

    def _held_infos(self, cls: cst.ClassDef, depth: int, attr: str) -> list | None:
        """The models (ctx.models' infos; None where not known) ``self.<attr>`` of the plain class ``cls`` (defined
        in ``self.scopes[depth - 1]``) may hold: its every assignment is in ``__init__``, of a builder's call or of a
        parameter, which every construction ``Cls(...)`` of the class in the scope defining it gives (a name bound
        there, a builder's call); None where it is assigned nowhere."""
        key = (id(cls), attr)
        if key in self._held:
            return self._held[key]
        self._held[key] = None
        values: list = []
        for fn in (stmt for stmt in cls.body.body if isinstance(stmt, cst.FunctionDef)):
            me = fn.params.params[0].name.value if fn.params.params else None
            for target, value in _attribute_assignments(fn, me, attr):
                values.append((fn, target, value))
        if not values:
            return None
        out: list = []
        for fn, target, value in values:
            if fn.name.value != "__init__" or target is None:
                out.append(None)
            elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
                out.append(self.ctx.models.get(value.func.value))
            elif isinstance(value, cst.Name) and value.value in param_names(fn) \
                    and value.value not in self._scope_bindings(0, fn).values:
                out.extend(self._constructed(cls, fn, depth, value.value))
            else:
                out.append(None)
        self._held[key] = out
        return out

    def _constructed(self, cls: cst.ClassDef, init: cst.FunctionDef, depth: int, param: str) -> list:
        """The models each construction ``Cls(...)`` of the class, in the scope defining it, gives ``__init__``'s
        ``param`` (None where not known); [None] where the class is made nowhere or its name is read otherwise."""
        parent = self.scopes[depth - 1]
        body = parent.body if isinstance(parent, cst.Module) else parent.body.body
        if not any(stmt is cls for stmt in body):
            return [None]
        called = cls.name.value
        sites = _Sites(cls, lambda f: called in param_names(f) or called in self._scope_bindings(0, f).values)
        scan(parent if isinstance(parent, cst.Module) else parent.body, sites)
        if not sites.calls:
            return [None]
        out: list = [None] if sites.other else []
        scopes, path = self.scopes[:depth], self.path[:depth - 1]
        for call, stack in sites.calls:
            args = bind_def(call, init, skip=1)
            value = args.get(param) if args is not None else None
            if isinstance(value, cst.Name):
                infos = self._infos(value.value, [*scopes, *stack], [*path, *(f.name.value for f in stack)])
                out.extend(infos if infos is not None else [None])
            elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
                out.append(self.ctx.models.get(value.func.value))
            else:
                out.append(None)
        return out

    def _layout(self, node: cst.Call, path: str) -> None:
        """``model(x)`` of a Sequential the passes made channels-first (NCHW), called on Keras's channels-last
        data: ``model(x.movedim(-1, 1))`` (images of a known rank), its feature-map output moved back
        (``.movedim(1, -1)``) as the fit / predict functions written for it do; an error where the rank or the
        model is not known. So too ``models["cnn"](x)`` / ``nets[0](x)`` of a list / tuple / dict the file writes
        out (each of its elements')."""
        if not self.ctx.models or not any("nchw" in (m.layout, m.output_layout) for m in self.ctx.models.values()):
            return
        if isinstance(node.func, cst.Subscript):
            model, infos = False, self._container(node.func.value, self.scopes, self.path, frozenset())
            name = render(node.func)
        else:
            name = node.func.value
            bound, infos = self._comp_infos(name)
            if bound:  # [m(x) for m in nets]: the comprehension's name
                if infos is not None and any(i is not None and "nchw" in (i.layout, i.output_layout) for i in infos):
                    if None in infos:
                        self._refuse(node, f"{name} is bound to a Sequential model fwport made channels-first (NCHW) "
                                     "and to a value not known here; permute by hand (x.movedim(-1, 1); the output "
                                     "back with y.movedim(1, -1))")
                    else:
                        self._moves(node, name, infos)
                return
            if self._nchw_layer(name, node):
                return
            model = name in self.a.models(path)
            if not model and not any(name in param_names(f) for f in self.scopes[1:]) and not any(
                    how == "for" and isinstance(v, (cst.List, cst.Tuple, cst.Name, cst.Call))
                    or how == "value" and isinstance(v, cst.Subscript) for how, v in self._innermost(name)):
                return
            infos = self._infos(name)
        nchw = infos is not None and any(i is not None and "nchw" in (i.layout, i.output_layout) for i in infos)
        if infos is not None and not nchw or infos is None and not model:
            return  # (a parameter no call gives a channels-first model: whatever it is, not one of those)
        if infos is not None and None in infos:  # a parameter given a channels-first model, and what is not known
            self._refuse(node, f"{name} is given a Sequential model fwport made channels-first (NCHW) by a call of "
                         "this function, and by another call a value not known here; its channels-last inputs cannot "
                         "be moved for one and kept for the other: give it models the file builds, or permute by "
                         "hand (x.movedim(-1, 1); the output back with y.movedim(1, -1))")
            return
        if infos is None:
            # a name the file binds to a channels-first Sequential somewhere, here to something not known
            if any(i.layout == "nchw" or i.output_layout == "nchw" for k, i in self.ctx.models.items()
                   if k == name or k.endswith(f".{name}")):
                self._refuse(node, f"{name} may be a Sequential model fwport made channels-first (NCHW) or another "
                             "model here; its channels-last inputs cannot be moved for one and kept for the other: "
                             "bind one model to the name, or permute by hand (x.movedim(-1, 1); the output back "
                             "with y.movedim(1, -1))")
            return
        self._moves(node, name, infos)

    def _moves(self, node: cst.Call, name: str, infos: list) -> None:
        """``name(x)`` of the models ``infos`` (one a Sequential made channels-first): the input moved channels-first
        and the feature-map output back where every one is alike and its ranks are known; else an error."""
        from fwport.packs.tf2torch.passes.sequential import RANKS
        arg = next((a for a in node.args if not a.star and (a.keyword is None or a.keyword.value in ("x", "inputs"))),
                   None)
        ranks = {self.ctx.analyses.get(RANKS, {}).get(i.scope, (None, None)) if i.kind == "sequential"
                 else (None, None) for i in infos}
        layouts = {(i.layout, i.output_layout) for i in infos}
        if len(layouts) > 1 or len(ranks) > 1:
            self._refuse(node, f"{name} is bound to models that take or give different layouts here (one made "
                         "channels-first by fwport); permute by hand")
            return
        (layout, out_layout), (in_rank, out_rank) = layouts.pop(), ranks.pop()
        move_in = layout == "nchw" and (in_rank is None or in_rank >= 3)
        move_out = out_layout == "nchw" and (out_rank is None or out_rank >= 3)
        if (move_in and (in_rank is None or arg is None)) or (move_out and out_rank is None):
            self._refuse(node, f"{name} is a Sequential model fwport made channels-first (NCHW), called here on "
                         "Keras's channels-last data, and the rank of its input or output is not known: give its "
                         "first layer an input shape (keras.Input(shape=...)), or permute by hand (x.movedim(-1, 1);"
                         " the output back with y.movedim(1, -1))")
            return
        if move_in:
            edit = self.ctx.plans.get(arg.value)
            if edit is not None:
                before = edit.apply
                edit.apply = lambda o, u: _moved(before(o, u), -1, 1)
            else:  # (a value not known here to be a tensor: Keras takes an array too)
                cast = helpers.use(self.ctx, "as_float32")
                self.ctx.plans.add(arg.value, lambda o, u: _moved(cst.Call(cst.Name(cast), [cst.Arg(u)]), -1, 1),
                                   by="numpy_values")
        if move_out:
            if self.ctx.plans.get(node) is not None:
                self._refuse(node, f"{name}(...) gives channels-first (NCHW) feature maps in the translation; "
                             "move them back by hand (y.movedim(1, -1))")
                return
            self.ctx.plans.add(node, lambda o, u: _moved(u, 1, -1), by="numpy_values")
        said = [s for s, m in (("its input moved channels-first (x.movedim(-1, 1))", move_in),
                               ("its output moved back to channels-last (y.movedim(1, -1))", move_out)) if m]
        if said:
            self.ctx.report(Severity.INFO, "layout-changed", f"{name}(...) is a channels-first (NCHW) Sequential "
                            f"called on Keras's channels-last data: {' and '.join(said)}", node)

    def _refuse(self, node: cst.Call, message: str) -> None:
        self.ctx.report(Severity.ERROR, "unsupported-construct", message, node)

    def _op_input(self, node: cst.Call, path: str) -> None:
        """``tf.expand_dims(a, 0)`` with ``a`` a NumPy value: TensorFlow converts it, the torch method or function
        its rule writes needs a tensor: ``torch.as_tensor(a)`` (its dtype kept, as TensorFlow's conversion keeps
        it)."""
        if not node.args or node.args[0].keyword is not None or node.args[0].star:
            return
        q = self.qualname(node.func)
        if q is None or not q.startswith(_OPS) or q.startswith(_CONVERTING):
            return
        rule = self.ctx.pack.by_name.get(q)
        known = self.numpy.get(path)
        if rule is None or rule.kind != "function" or not known or not rule.params \
                or rule.params[0].name not in _TENSOR_PARAMS:
            return
        v = node.args[0].value
        if Kinds(self.qualname, known).of(v).numpy and self.ctx.plans.get(v) is None:
            self.ctx.plans.add(v, self._as_tensor, by="numpy_values")
            text = render(v)
            self.ctx.report(Severity.INFO, "idiom-replaced",
                            f"{text} is a NumPy array here: torch.as_tensor({text}) (TensorFlow converts it; "
                            "torch's operations take tensors)", v)

    def _as_tensor(self, original_node, updated_node):
        return cst.Call(self.ctx.spell("torch.as_tensor"), [cst.Arg(updated_node)])

    def _to_tensor(self, floating: bool):
        ctx = self.ctx

        def apply(original_node, updated_node):
            if floating:
                return cst.Call(ctx.spell("torch.as_tensor"), [
                    cst.Arg(updated_node),
                    cst.Arg(ctx.spell("torch.float32"), keyword=cst.Name("dtype"),
                            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))])
            return cst.Call(cst.Name(helpers.use(ctx, "as_float32")), [cst.Arg(updated_node)])
        return apply


#: a model's lists of weights (model_api makes them the module's parameters) and what a parameter has not
_WEIGHT_LISTS = frozenset({"trainable_variables", "trainable_weights", "variables", "weights"})
_WEIGHT_ONLY = frozenset({"name", "path"})
#: Keras layer attributes the torch module a layer became has not (its weights, its name, its configuration)
_LAYER_ONLY = frozenset({"name", "weights", "variables", "kernel", "non_trainable_weights", "non_trainable_variables",
                         "get_weights", "set_weights", "output", "input", "output_shape", "input_shape", "units",
                         "filters", "kernel_size", "get_config", "count_params", "built"})


class _Sites(cst.CSTVisitor):
    """The calls of the function ``fn`` in the body of the scope that defines it (``parent``), each with the
    functions around it (``calls``: (call, [FunctionDef...])), and whether its name is read otherwise (``other``:
    passed on, stored, rebound). A nested function (``rebinds(function)``) or lambda that binds the name again is
    not entered."""

    def __init__(self, fn: cst.FunctionDef, rebinds) -> None:
        super().__init__()
        self.fn, self.name, self.rebinds = fn, fn.name.value, rebinds
        self.calls: list[tuple[cst.Call, list]] = []
        self.other = False
        self.stack: list[cst.FunctionDef] = []
        self._skip: set[int] = set()  # Name nodes that are no read of it (an attribute, a keyword, the def)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        if node is self.fn:
            self._skip.add(id(node.name))
            self.stack.append(node)
            return True
        if self.rebinds(node):
            return False
        self.stack.append(node)
        return True

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        if self.stack and self.stack[-1] is original_node:
            self.stack.pop()

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return self.name not in {p.name.value for p in (*node.params.params, *node.params.posonly_params,
                                                         *node.params.kwonly_params)}

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._skip.add(id(node.name))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._skip.add(id(node.attr))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._skip.add(id(node.keyword))

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == self.name:
            self._skip.add(id(node.func))
            # (a call in the function itself, its recursion, gives what it was given)
            if not any(f is self.fn for f in self.stack):
                self.calls.append((node, [f for f in self.stack]))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name and id(node) not in self._skip:
            self.other = True


#: the Keras model methods a translated module has not (model_api.METHODS's), called on ``self.model`` in a plain class
_KERAS_MODEL_METHODS = frozenset({"compile", "fit", "fit_generator", "train_on_batch", "evaluate", "evaluate_generator",
                                  "test_on_batch", "predict", "predict_generator", "predict_on_batch", "summary",
                                  "save", "save_weights", "load_weights", "get_weights", "set_weights", "get_layer",
                                  "count_params", "to_json", "get_config"})


def _attribute_assignments(fn: cst.FunctionDef, me: str | None, attr: str) -> list:
    """(target, value) of each binding of ``me.attr`` in ``fn`` (nested functions' too): target None where it is
    no plain ``me.attr = value`` (a tuple target, an augmented assignment, a loop's name)."""
    if me is None:
        return []

    def hit(t) -> bool:
        return isinstance(t, cst.Attribute) and t.attr.value == attr and isinstance(t.value, cst.Name) \
            and t.value.value == me
    out = []
    for node in (n for kind in (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.WithItem)
                 for n in find_all(fn.body, kind)):
        if isinstance(node, cst.Assign):
            for t in node.targets:
                if hit(t.target):
                    out.append((t.target, node.value))
                elif any(hit(a) for a in find_all(t.target, cst.Attribute)):
                    out.append((None, None))
        elif isinstance(node, cst.AnnAssign):
            if hit(node.target):
                out.append((node.target, node.value) if node.value is not None else (None, None))
        elif isinstance(node, cst.AugAssign):
            if hit(node.target):
                out.append((None, None))
        else:
            t = node.target if isinstance(node, cst.For) else (node.asname.name if node.asname else None)
            if t is not None and any(hit(a) for a in (t, *find_all(t, cst.Attribute))):
                out.append((None, None))
    return out


def _moved(node: cst.BaseExpression, source: int, destination: int) -> cst.Call:
    """``node.movedim(source, destination)`` (parenthesized where it needs it)."""
    if not isinstance(node, (cst.Name, cst.Call, cst.Attribute, cst.Subscript)) and not node.lpar:
        node = node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])

    def num(n: int) -> cst.BaseExpression:
        return cst.Integer(str(n)) if n >= 0 else cst.UnaryOperation(cst.Minus(), cst.Integer(str(-n)))
    return cst.Call(cst.Attribute(node, cst.Name("movedim")), [
        cst.Arg(num(source), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), cst.Arg(num(destination))])


def _detached(original_node, updated_node):
    receiver = updated_node
    if not isinstance(receiver, (cst.Name, cst.Call, cst.Attribute, cst.Subscript)) and not receiver.lpar:
        receiver = receiver.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(cst.Attribute(cst.Call(cst.Attribute(receiver, cst.Name("detach"))), cst.Name("numpy")))


def run(module: cst.Module, ctx: FileContext) -> cst.Module:
    """(after the rewriting passes) Records the edits (module docstring); returns ``module`` itself."""
    scan(module, _Edits(ctx, module, _analysis(ctx)))
    return module


#: the trigger of run_checks: a Sequential (called on channels-last data), a model's weights or layers read, a Keras
#: model method called on an attribute (self.model.fit(...) in a trainer class)
CHECKS_TRIGGER = fast(r"\bSequential\b|\.\s*(?:layers|metrics|trainable_variables|trainable_weights|variables|weights)\b"
                      r"|\bself\.\w+\.(?:compile|fit|evaluate|predict|train_on_batch|save_weights|load_weights)\b")


def run_checks(module: cst.Module, ctx: FileContext) -> cst.Module:
    """(read-only, after numpy_values and layer_weights, whose edits it finds) ``model(x)`` of a Sequential made
    channels-first, called on Keras's channels-last data: the input moved channels-first, the output back
    (_Edits._layout; through loops over containers of models, _iterated, and a plain class's self.model,
    _held_call); a Keras attribute read on a translated model's weight or layer that the translation has not:
    an error (_Edits.visit_Attribute). Returns ``module`` itself."""
    scan(module, _Edits(ctx, module, _analysis(ctx), checks=True))
    return module
