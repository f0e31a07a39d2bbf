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

_MAX_POOL_PAD = '''

class MaxPoolSamePad{nd}d({nn}Module):
    """TensorFlow's padding="same" before a max pooling window of this size and stride, computed at
    each call (the odd pixel goes after); the padding is -inf, so no window ever takes it."""

    def __init__(self, pool_size, stride):
        super().__init__()
        self.pool_size, self.stride = (
            tuple(v) if isinstance(v, (tuple, list)) else (v,) * {nd} for v in (pool_size, stride))

    def forward(self, x):
        pads = []
        for n, k, s in zip(x.shape[:-{nd1}:-1], self.pool_size[::-1], self.stride[::-1]):
            total = max((-(-n // s) - 1) * s + k - n, 0)
            pads += [total // 2, total - total // 2]
        return {F}pad(x, pads, value=float("-inf"))
'''

_CHANNELS_LAST_RESHAPE = '''

class ChannelsLastReshape({nn}Module):
    """keras.layers.Reshape in a model converted to channels-first: a feature map is put back in
    Keras's channels-last order, reshaped as Keras reshapes it (row-major, batch axis kept), and a
    feature map that comes out is made channels-first again."""

    def __init__(self, shape):
        super().__init__()
        self.shape = tuple(shape)

    def forward(self, x):
        if x.dim() > 2:
            x = x.movedim(1, -1)
        x = x.reshape(x.shape[0], *self.shape)
        return x.movedim(-1, 1) if x.dim() > 2 else x
'''

_GAUSSIAN_NOISE = '''

class GaussianNoise({nn}Module):
    """keras.layers.GaussianNoise: adds N(0, stddev) noise in training, the identity in eval()."""

    def __init__(self, stddev):
        super().__init__()
        self.stddev = stddev

    def forward(self, x):
        return x + {torch}randn_like(x) * self.stddev if self.training else x
'''

_GAUSSIAN_DROPOUT = '''

class GaussianDropout({nn}Module):
    """keras.layers.GaussianDropout: multiplies by N(1, rate / (1 - rate)) noise in training, the
    identity in eval()."""

    def __init__(self, rate):
        super().__init__()
        self.rate = rate

    def forward(self, x):
        if not self.training or not 0 < self.rate < 1:
            return x
        return x * (1 + {torch}randn_like(x) * (self.rate / (1 - self.rate)) ** 0.5)
'''

_UNIT_NORMALIZATION = '''

class UnitNormalization({nn}Module):
    """keras.layers.UnitNormalization: x / ||x|| along dim, with Keras's floor of 1e-12 on the squared norm."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return x * {torch}rsqrt({torch}clamp(x.square().sum(dim=self.dim, keepdim=True), min=1e-12))
'''

_PERMUTE = '''

class Permute({nn}Module):
    """keras.layers.Permute: reorders the axes after the batch axis (dims count from 1)."""

    def __init__(self, dims):
        super().__init__()
        self.dims = tuple(dims)

    def forward(self, x):
        return x.permute(0, *self.dims)
'''

_REPEAT_VECTOR = '''

class RepeatVector({nn}Module):
    """keras.layers.RepeatVector: (batch, features) → n copies along a new axis at dim (1 in Keras's
    layout, 2 where the model is channels-first)."""

    def __init__(self, n, dim=1):
        super().__init__()
        self.n, self.dim = n, dim

    def forward(self, x):
        x = x.unsqueeze(self.dim)
        return x.repeat(*(self.n if d == self.dim else 1 for d in range(x.dim())))
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
HELPERS.update({f"MaxPoolSamePad{nd}d": _MAX_POOL_PAD.replace("{nd}", str(nd)).replace("{nd1}", str(nd + 1))
                for nd in (1, 2, 3)})
HELPERS["Rescaling"] = _RESCALING
HELPERS["Permute"] = _PERMUTE
HELPERS["RepeatVector"] = _REPEAT_VECTOR
HELPERS["GaussianNoise"] = _GAUSSIAN_NOISE
HELPERS["GaussianDropout"] = _GAUSSIAN_DROPOUT
HELPERS["UnitNormalization"] = _UNIT_NORMALIZATION
HELPERS["ChannelsLastReshape"] = _CHANNELS_LAST_RESHAPE
HELPERS["RNNOutput"] = _RNN_OUTPUT
HELPERS["Normalization"] = _NORMALIZATION
HELPERS["BidirectionalOutput"] = _BIDIRECTIONAL_OUTPUT


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
        if isinstance(node.func, cst.Name) and node.func.value in self.names:
            self.called.add(node.func.value)

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
    new = list(cst.parse_module(text.lstrip("\n")).body)
    body = list(module.body)
    at = 0
    while at < len(body) and _imports_or_strings(body[at]):
        at += 1
    while at > 0 and not isinstance(body[at - 1].body[0], (cst.Import, cst.ImportFrom)) and at - 1 > 0:
        at -= 1  # the strings after the last import stay with the code they introduce
    first_source = next((i for i, st in enumerate(body) if is_source_import_line(st, ctx.imports.is_source)), None)
    if first_source is not None:
        at = max(at, first_source + 1)
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
    return template


def finish(module: cst.Module, ctx: FileContext) -> cst.Module:
    """Write out the helpers the output calls, after the file's imports."""
    wanted = ctx.analyses.get(_KEY)
    if not wanted:
        return module
    refs = _Refs(set(wanted))
    scan(module, refs)
    todo = sorted(refs.called - refs.defined)
    if not todo:
        return module
    return insert_after_imports(module, "".join(_spelled(HELPERS[n], ctx) for n in todo), ctx)
