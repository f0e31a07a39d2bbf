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


# --- attention and transformer layers (rules multi-head-attention, layer-normalization) ---------------

_KERAS_MHA = '''

class KerasMultiHeadAttention({nn}modules.lazy.LazyModuleMixin, {nn}Module):
    """keras.layers.MultiHeadAttention, computed as Keras computes it: called as Keras calls it
    (query, value, key=None, attention_mask=None, ...; key defaults to value), with Keras's variables
    (the query/key/value kernels (features, heads, size) with biases (heads, size), the output kernel
    (heads, value size, features) with its bias) and its einsums. The input sizes come from the first
    call, as Keras builds the layer (torch's lazy modules). attention_mask: True (or 1) attends."""

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True, output_shape=None):
        super().__init__()
        self.num_heads, self.key_dim, self.value_dim = num_heads, key_dim, value_dim or key_dim
        self.use_bias = use_bias
        self.output_shape = output_shape[0] if isinstance(output_shape, (tuple, list)) else output_shape
        self.dropout = {nn}Dropout(dropout)
        for name in ("query", "key", "value", "output"):
            self.register_parameter(name + "_kernel", {nn}UninitializedParameter())
            self.register_parameter(name + "_bias", {nn}UninitializedParameter() if use_bias else None)

    def initialize_parameters(self, query, value, key=None, *args, **kwargs):
        if not self.has_uninitialized_params():
            return
        key = value if key is None else key
        h, dk, dv = self.num_heads, self.key_dim, self.value_dim
        out = self.output_shape or query.shape[-1]
        shapes = {"query": (query.shape[-1], h, dk), "key": (key.shape[-1], h, dk),
                  "value": (value.shape[-1], h, dv), "output": (h, dv, out)}
        with {torch}no_grad():
            for name, shape in shapes.items():
                kernel = getattr(self, name + "_kernel")
                kernel.materialize(shape)
                fan_in, fan_out = shape[0] * shape[1], shape[0] * shape[2]  # Keras's glorot_uniform fans
                limit = (6.0 / (fan_in + fan_out)) ** 0.5
                kernel.uniform_(-limit, limit)
                if self.use_bias:
                    bias = getattr(self, name + "_bias")
                    bias.materialize(shape[1:] if name != "output" else shape[2:])
                    bias.zero_()

    def _project(self, x, name):
        y = {torch}einsum("bte,ehd->bthd", x, getattr(self, name + "_kernel"))
        return y + getattr(self, name + "_bias") if self.use_bias else y

    def forward(self, query, value, key=None, attention_mask=None, return_attention_scores=False,
                use_causal_mask=False, value_mask=None, key_mask=None):
        if query.dim() != 3 or value.dim() != 3:
            raise ValueError("KerasMultiHeadAttention takes (batch, steps, features) inputs")
        key = value if key is None else key
        masks = [] if attention_mask is None else [attention_mask.bool()]
        if value_mask is not None:
            masks.append(value_mask.bool()[:, None, :])
        if key_mask is not None:
            masks.append(key_mask.bool()[:, None, :])
        if use_causal_mask:
            steps = {torch}ones(query.shape[1], value.shape[1], dtype={torch}bool, device=query.device)
            masks.append(steps.tril()[None])
        q = self._project(query, "query") * (1.0 / self.key_dim ** 0.5)
        k, v = self._project(key, "key"), self._project(value, "value")
        scores = {torch}einsum("bshd,bthd->bhts", k, q)
        if masks:
            mask = masks[0]
            for m in masks[1:]:
                mask = mask & m
            while mask.dim() < 4:
                mask = mask.unsqueeze(-3)
            scores = {torch}softmax(scores.masked_fill(~mask, -1e9), dim=-1)
            if self.dropout.p > 0 or return_attention_scores:
                # Keras 3 computes these with its masked softmax, which gives a query that attends nothing 0
                # (its fused attention, used otherwise, gives it the mean of the values, as above)
                scores = scores.masked_fill(~mask, 0.0)
        else:
            scores = {torch}softmax(scores, dim=-1)
        out = {torch}einsum("bhts,bshd->bthd", self.dropout(scores), v)
        out = {torch}einsum("bthd,hdo->bto", out, self.output_kernel)
        if self.use_bias:
            out = out + self.output_bias
        return (out, scores) if return_attention_scores else out
'''

_LAZY_LAYER_NORM = '''

class LazyLayerNorm({nn}modules.lazy.LazyModuleMixin, {nn}LayerNorm):
    """keras.layers.LayerNormalization over the last axes whose sizes are known only at the first call
    (Keras builds the layer then): an nn.LayerNorm over the last `axes` axes, sized by that call."""

    cls_to_become = {nn}LayerNorm

    def __init__(self, eps=1e-3, elementwise_affine=True, bias=True, axes=1):
        super().__init__(0, eps, elementwise_affine=False)
        self.elementwise_affine, self.axes = elementwise_affine, axes
        if elementwise_affine:
            self.weight = {nn}UninitializedParameter()
            self.bias = {nn}UninitializedParameter() if bias else None

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.normalized_shape != (0,):
            super().reset_parameters()

    def initialize_parameters(self, input):
        self.normalized_shape = tuple(input.shape[-self.axes:])
        if self.has_uninitialized_params():
            with {torch}no_grad():
                for p in (self.weight, self.bias):
                    if p is not None:
                        p.materialize(self.normalized_shape)
                self.reset_parameters()
'''

_SHARED_DROPOUT = '''

class SharedDropout({nn}Module):
    """keras.layers.Dropout(rate, noise_shape): one mask of shape noise_shape (None: the input's size
    on that axis) shared along the axes where it is 1, scaled by 1 / (1 - rate); identity in eval mode."""

    def __init__(self, p, noise_shape):
        super().__init__()
        self.p, self.noise_shape = p, tuple(noise_shape)

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        shape = [x.shape[i] if n is None else n for i, n in enumerate(self.noise_shape)]
        keep = {torch}empty(shape, dtype=x.dtype, device=x.device).bernoulli_(1 - self.p)
        return x * keep / (1 - self.p)
'''

_KERAS_ATTENTION = '''

class KerasAttention({nn}modules.lazy.LazyModuleMixin, {nn}Module):
    """keras.layers.Attention (dot-product scores, times a learned scalar when use_scale) and, with
    additive=True, keras.layers.AdditiveAttention (sum(scale * tanh(q + k)) over the features, its scale
    sized by the first call as Keras builds the layer). Called as Keras calls them: [query, value] or
    [query, value, key], mask=[query_mask, value_mask]; a value position whose mask is False gets its score
    lowered by 1e9 before the softmax, a query whose mask is False gets 0."""

    def __init__(self, use_scale=False, dropout=0.0, additive=False):
        super().__init__()
        self.dropout, self.additive = dropout, additive
        if not use_scale:
            self.scale = None
        elif additive:
            self.scale = {nn}UninitializedParameter()
        else:
            self.scale = {nn}Parameter({torch}ones(()))

    def initialize_parameters(self, inputs, *args, **kwargs):
        if self.has_uninitialized_params():
            with {torch}no_grad():
                dim = inputs[0].shape[-1]
                self.scale.materialize((dim,))
                self.scale.uniform_(-(6.0 / (1 + dim)) ** 0.5, (6.0 / (1 + dim)) ** 0.5)  # Keras's glorot_uniform

    def _scores(self, q, k):
        if self.additive:
            t = {torch}tanh(q.unsqueeze(-2) + k.unsqueeze(-3))
            return (t * self.scale if self.scale is not None else t).sum(dim=-1)
        scores = {torch}matmul(q, k.transpose(-2, -1))
        return scores * self.scale if self.scale is not None else scores

    def forward(self, inputs, mask=None, return_attention_scores=False, use_causal_mask=False):
        q, v = inputs[0], inputs[1]
        k = inputs[2] if len(inputs) > 2 else v
        scores = self._scores(q, k)
        q_mask, v_mask = (mask[0], mask[1]) if mask else (None, None)
        keep = v_mask.bool().unsqueeze(-2) if v_mask is not None else None
        if use_causal_mask:
            causal = {torch}ones(scores.shape[-2], scores.shape[-1], dtype={torch}bool, device=scores.device).tril()
            keep = causal if keep is None else keep & causal
        if keep is not None:
            scores = {torch}where(keep, scores, scores - 1e9)
        weights = {torch}softmax(scores, dim=-1)
        if self.training and self.dropout > 0:
            weights = {F}dropout(weights, self.dropout)
        out = {torch}matmul(weights, v)
        if q_mask is not None:
            out = {torch}where(q_mask.bool().unsqueeze(-1), out, {torch}zeros_like(out))
        return (out, weights) if return_attention_scores else out
'''

HELPERS["KerasAttention"] = _KERAS_ATTENTION
HELPERS["SharedDropout"] = _SHARED_DROPOUT
HELPERS["KerasMultiHeadAttention"] = _KERAS_MHA
HELPERS["LazyLayerNorm"] = _LAZY_LAYER_NORM
