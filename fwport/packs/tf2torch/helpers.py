"""Helper modules a translation writes out into the file that needs them (DESIGN: the output never
depends on fwport).

A shape function asks for one with :func:`use` and emits a call to it; the finishing step
:func:`finish` writes the definition of every helper the output still calls after the imports of
the file (one the file already defines is not written twice: translating again changes nothing).
"""
from __future__ import annotations

import libcst as cst

from fwport.core.context import FileContext
from fwport.core.imports import is_source_import_line
from fwport.core.names import scan
from fwport.packs.tf2torch.datahelpers import DATA_DEPS, DATA_HELPERS, LOCAL_HELPERS

_KEY = "tf2torch-helpers"

# name → (its source text with {nn}/{F} spellings, the torch names it needs spelled)
_SAME_PAD = '''

class SamePad{nd}d({nn}Module):
    """TensorFlow's padding="same" before a window of this kernel, stride and dilation: the padding
    depends on the input size (the odd pixel goes after), so it is computed at each call."""

    def __init__(self, kernel_size, stride, dilation=1):
        super().__init__()
        self.kernel_size, self.stride, self.dilation = (
            tuple(v) if isinstance(v, (tuple, list)) else (v,) * {nd} for v in (kernel_size, stride, dilation))

    def forward(self, x):
        pads = []
        for n, k, s, d in zip(x.shape[:-{nd1}:-1], self.kernel_size[::-1], self.stride[::-1], self.dilation[::-1]):
            total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
            pads += [total // 2, total - total // 2]
        return {F}pad(x, pads)
'''

_RESCALING = '''

class Rescaling({nn}Module):
    """keras.layers.Rescaling: x * scale + offset (integer images come out as floats)."""

    def __init__(self, scale, offset=0.0):
        super().__init__()
        self.scale, self.offset = scale, offset

    def forward(self, x):
        return x * self.scale + self.offset
'''

_RNN_OUTPUT = '''

class RNNOutput({nn}Module):
    """The output of a torch RNN without its final state: the whole sequence (Keras's
    return_sequences=True), or its last step (return_sequences=False)."""

    def __init__(self, return_sequences=False):
        super().__init__()
        self.return_sequences = return_sequences

    def forward(self, output):
        sequence = output[0]
        return sequence if self.return_sequences else sequence[:, -1]
'''

_BIDIRECTIONAL_OUTPUT = '''

class BidirectionalOutput({nn}Module):
    """The output of a bidirectional torch RNN as keras.layers.Bidirectional gives it: the two directions
    merged (concat, sum, mul or ave), over the whole sequence or at each direction's last step (the
    backward direction ends at the first step)."""

    def __init__(self, return_sequences=False, merge_mode="concat"):
        super().__init__()
        self.return_sequences, self.merge_mode = return_sequences, merge_mode

    def forward(self, output):
        forward, backward = output[0].chunk(2, dim=-1)
        if not self.return_sequences:
            forward, backward = forward[:, -1], backward[:, 0]
        if self.merge_mode == "concat":
            return {torch}cat([forward, backward], dim=-1)
        if self.merge_mode == "sum":
            return forward + backward
        if self.merge_mode == "mul":
            return forward * backward
        return (forward + backward) / 2
'''

_NORMALIZATION = '''

class Normalization({nn}Module):
    """keras.layers.Normalization over the last axis: (x - mean) / max(sqrt(variance), 1e-7). The
    statistics are given, loaded (state_dict), or computed from data by adapt() as Keras does (the
    population variance over every axis but the last)."""

    def __init__(self, num_features=None, mean=None, variance=None):
        super().__init__()
        given = mean is not None
        if given:
            mean, variance = {torch}as_tensor(mean, dtype={torch}float32), {torch}as_tensor(variance, dtype={torch}float32)
        elif num_features is not None:
            mean, variance = {torch}zeros(num_features), {torch}ones(num_features)
        self.register_buffer("mean", mean, persistent=not given)
        self.register_buffer("variance", variance, persistent=not given)
        self.register_buffer("count", None if given else {torch}zeros((), dtype={torch}int64))

    @{torch}no_grad()
    def adapt(self, data):
        data = {torch}as_tensor(data, dtype={torch}float32).reshape(-1, {torch}as_tensor(data).shape[-1])
        self.mean, self.variance = data.mean(dim=0), data.var(dim=0, unbiased=False)
        self.count = {torch}tensor(data.shape[0])

    def forward(self, x):
        return (x - self.mean) / {torch}clamp(self.variance.sqrt(), min=1e-7)
'''

HELPERS: dict[str, str] = {f"SamePad{nd}d": _SAME_PAD.replace("{nd}", str(nd)).replace("{nd1}", str(nd + 1))
                           for nd in (1, 2, 3)}
HELPERS["Rescaling"] = _RESCALING
HELPERS["RNNOutput"] = _RNN_OUTPUT
HELPERS["Normalization"] = _NORMALIZATION
HELPERS["BidirectionalOutput"] = _BIDIRECTIONAL_OUTPUT
HELPERS.update(DATA_HELPERS)


def use(ctx: FileContext, name: str) -> str:
    """Ask for helper ``name`` in this file; returns the name to call."""
    ctx.analyses.setdefault(_KEY, set()).add(name)
    return name


class _Refs(cst.CSTVisitor):
    def __init__(self, names: set[str]):
        self.names = names
        self.called: set[str] = set()
        self.defined: set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            func = func.value  # DataPipeline.from_tensor_slices(...)
        if isinstance(func, cst.Name) and func.value in self.names:
            self.called.add(func.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value in self.names:
            self.defined.add(node.name.value)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if node.name.value in self.names:
            self.defined.add(node.name.value)


def _imports_or_strings(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(b, (cst.Import, cst.ImportFrom)) or (isinstance(b, cst.Expr) and isinstance(
            b.value, (cst.SimpleString, cst.ConcatenatedString))) for b in stmt.body)


def insert_after_imports(module: cst.Module, text: str, ctx: FileContext) -> cst.Module:
    """``text`` (definitions) written into the module after its docstring and the imports at its top
    (string statements between them, as notebooks have, included), and never above the place where
    the import pass writes the torch imports the definitions use (the first source import)."""
    return _insert_at(module, text, _insertion_index(module, ctx))


def _insertion_index(module: cst.Module, ctx: FileContext) -> int:
    body = list(module.body)
    at = 0
    while at < len(body) and _imports_or_strings(body[at]):
        at += 1
    while at > 0 and not isinstance(body[at - 1].body[0], (cst.Import, cst.ImportFrom)) and at - 1 > 0:
        at -= 1  # the strings after the last import stay with the code they introduce
    first_source = next((i for i, st in enumerate(body) if is_source_import_line(st, ctx.imports.is_source)), None)
    if first_source is not None:
        at = max(at, first_source + 1)
    return at


def _insert_at(module: cst.Module, text: str, at: int) -> cst.Module:
    new = list(cst.parse_module(text.lstrip("\n")).body)
    body = list(module.body)
    blank = [cst.EmptyLine(), cst.EmptyLine()]
    new[0] = new[0].with_changes(leading_lines=blank)
    if at < len(body):  # the statement after keeps two blank lines above it
        body[at] = body[at].with_changes(leading_lines=[*blank, *[ln for ln in body[at].leading_lines
                                                                   if ln.comment is not None]])
    return module.with_changes(body=[*body[:at], *new, *body[at:]])


def _spelled(template: str, ctx: FileContext) -> str:
    """The helper's text with the file's spellings of torch.nn / torch.nn.functional (imports recorded)."""
    if "{nn}" in template:
        template = template.replace("{nn}", ctx.spell_text("torch.nn.Module")[: -len("Module")])
    if "{torch}" in template:
        template = template.replace("{torch}", ctx.spell_text("torch.cat")[: -len("cat")])
    if "{F}" in template:
        template = template.replace("{F}", ctx.spell_text("torch.nn.functional.pad")[: -len("pad")])
    for key, (prefix, line) in _MODULES.items():
        if "{" + key + "}" in template:
            template = template.replace("{" + key + "}", prefix)
            ctx.needed_imports.add(line)
    if "{{" in template or "}}" in template:  # the data helpers are written with str.format's escapes
        template = template.replace("{{", "{").replace("}}", "}")
    return template


#: other modules a helper uses: placeholder → (its spelling, the import line)
_MODULES = {"np": ("np.", "import numpy as np"), "os": ("os.", "import os"),
            "torchvision": ("torchvision.", "import torchvision"), "Image": ("Image.", "from PIL import Image")}


def _without_source_imports_of(module: cst.Module, names: set[str], ctx: FileContext) -> cst.Module:
    """``from tensorflow.keras.preprocessing.image import load_img``: the helper written out has the
    name of the source function its calls replaced, so the import (which would rebind the name to the
    source function) goes."""
    body = list(module.body)
    changed = False
    for i, st in enumerate(body):
        if not isinstance(st, cst.SimpleStatementLine) or len(st.body) != 1 or not isinstance(st.body[0], cst.ImportFrom):
            continue
        imp = st.body[0]
        if imp.relative or isinstance(imp.names, cst.ImportStar) or imp.module is None:
            continue
        mod = cst.Module([]).code_for_node(imp.module)
        if not ctx.imports.is_source(mod):
            continue
        keep = [a for a in imp.names if (a.asname.name.value if a.asname else cst.Module([]).code_for_node(a.name))
                not in names]
        if len(keep) == len(imp.names):
            continue
        changed = True
        if keep:
            keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            body[i] = st.with_changes(body=[imp.with_changes(names=keep)])
        else:
            body[i] = None
    if not changed:
        return module
    out = []
    carried = []
    for st, orig in zip(body, module.body):
        if st is None:
            carried += [ln for ln in orig.leading_lines if ln.comment is not None]
            continue
        if carried:
            st = st.with_changes(leading_lines=[*carried, *st.leading_lines])
            carried = []
        out.append(st)
    return module.with_changes(body=out)


def _data_helpers_first(module: cst.Module, todo: list[str], ctx: FileContext) -> tuple[cst.Module, list[str]]:
    """The data helpers among ``todo`` (datahelpers.py): a source import of the same name goes, and the
    functions that import what they use are written above the first top-level statement that calls one
    (a notebook may call load_img in a cell above its first TensorFlow import); the other helpers to
    write after the imports."""
    module = _without_source_imports_of(module, set(todo), ctx)
    local = [n for n in todo if n in LOCAL_HELPERS]
    if local:
        at = _insertion_index(module, ctx)
        refs = _Refs(set(local))
        for i, st in enumerate(module.body[:at]):
            scan(st, refs)
            if refs.called:
                at = i
                break
        module = _insert_at(module, "".join(_spelled(HELPERS[n], ctx) for n in local), at)
    return module, [n for n in todo if n not in LOCAL_HELPERS]


def finish(module: cst.Module, ctx: FileContext) -> cst.Module:
    """Write out the helpers the output calls, after the file's imports."""
    wanted = ctx.analyses.get(_KEY)
    if not wanted:
        return module
    refs = _Refs(set(wanted))
    scan(module, refs)
    todo = refs.called - refs.defined
    for name in list(todo):
        todo |= {dep for dep in DATA_DEPS.get(name, ()) if dep not in refs.defined}
    todo = sorted(todo)
    if not todo:
        return module
    module, todo = _data_helpers_first(module, todo, ctx)
    if not todo:
        return module
    return insert_after_imports(module, "".join(_spelled(HELPERS[n], ctx) for n in todo), ctx)
