"""Keras's mask carried through a functional model (passes/functional.py) as a tensor of its own.

Keras attaches a mask to the output of ``Embedding(mask_zero=True)`` (True at the steps whose id is not 0)
and carries it along the layers that support masking: the ones that leave the values alone and pass it
on (Dense, Dropout, Activation, LayerNormalization, ...), and the ones that read it. Of the latter, a
recurrent layer (LSTM, GRU, SimpleRNN, alone or under Bidirectional) skips the masked steps: its state is
held over them, and with ``return_sequences=True`` a masked step repeats the output before it (zeros under
Bidirectional, which also runs its backward direction over the kept steps only); it passes the mask on
with its sequence and drops it with its last step. Keras 3 gives a layer its input's mask only when the
call has a single tensor argument: a recurrent layer called with ``initial_state=`` runs over every step
unmasked there (Keras 2 masks it), and still passes the mask on. A model output that still carries the mask has its
masked steps left out of the loss and the metrics of ``compile()``/``fit()``.

The translation writes the mask where Keras would apply it: ``ids != 0`` where the ids are, passed as
``mask=`` to the recurrent layers that read it (the ``Masked<kind>`` helpers: torch's RNN run on a
PackedSequence of the kept steps, exact for right-padded sequences and a ValueError at run time for
others). A layer that reads the mask in ways not translated here (attention, pooling, merges, a layer
class of the file) is refused, and an output that carries the mask gets a warning about the loss.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.bind import NOT_LITERAL, literal_value
from fwport.core.names import dotted_text
from fwport.packs.tf2torch import helpers
from fwport.packs.tf2torch.datahelpers import DATA_DEPS

#: rule layers that support masking and leave the values alone: Keras passes the mask on through them
PASSES_MASK = frozenset({"dense", "dropout", "activation", "layer-normalization", "relu", "leaky-relu", "prelu",
                         "gaussian-dropout", "gaussian-noise", "alpha-dropout"})
#: rule layers that read the mask and are translated with it (the Masked<kind> helpers)
RECURRENT = frozenset({"rnn", "bidirectional"})


def mask_zero(rule, call) -> bool:
    """``Embedding(..., mask_zero=True)``: its output carries Keras's mask."""
    if rule is None or getattr(rule, "id", None) != "embedding":
        return False
    for a in call.args:
        if a.keyword is not None and a.keyword.value == "mask_zero":
            return literal_value(a.value, NOT_LITERAL) is True
    return False


def _return_sequences(call) -> bool:
    """The recurrent layer of ``call`` (the one wrapped by Bidirectional) returns its sequence."""
    inner = call
    for a in call.args:
        if (a.keyword is None or a.keyword.value == "layer") and hasattr(a.value, "func"):
            inner = a.value
            break
    for a in inner.args:
        if a.keyword is not None and a.keyword.value == "return_sequences":
            return literal_value(a.value, NOT_LITERAL) is True
    return False


#: ctx.analyses: class name → ids of the constructor calls of a layer class of the file whose calls in a
#: functional model got the mask Keras gives its call()'s ``mask`` (the subclass pass keeps that parameter)
MASK_CALLERS = "tf2torch-mask-callers"

_NOT_EQUAL = ("not_equal",)


def _is_not_zero(node, name: str) -> bool:
    """``name != 0``, ``ops.not_equal(name, 0)``, ``tf.math.not_equal(name, 0)``."""
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1 \
            and isinstance(node.comparisons[0].operator, cst.NotEqual):
        left, right = node.left, node.comparisons[0].comparator
    elif isinstance(node, cst.Call) and dotted_text(node.func) and dotted_text(node.func).rsplit(".", 1)[-1] \
            in _NOT_EQUAL and len(node.args) == 2 and all(a.keyword is None for a in node.args):
        left, right = node.args[0].value, node.args[1].value
    else:
        return False
    return isinstance(left, cst.Name) and left.value == name and literal_value(right, NOT_LITERAL) == 0


def _returned(fn: cst.FunctionDef):
    """What ``fn`` returns where its body is ``return E``, or ``name = E`` then ``return name``; else None."""
    body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else []
    smalls = [st.body[0] for st in body if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1]
    if len(smalls) != len(body) or not smalls or not isinstance(smalls[-1], cst.Return):
        return None
    if len(smalls) == 1:
        return smalls[0].value
    first, ret = smalls[0], smalls[1]
    if len(smalls) == 2 and isinstance(first, cst.Assign) and len(first.targets) == 1 \
            and isinstance(first.targets[0].target, cst.Name) and isinstance(ret.value, cst.Name) \
            and ret.value.value == first.targets[0].target.value:
        return first.value
    return None


def _any_nonzero(node, name: str) -> bool:
    """``tf.reduce_any(tf.cast(name, "bool"), axis=-1)`` (or ``ops.any(ops.cast(...), axis=-1)``): the steps with a
    nonzero feature."""
    if not (isinstance(node, cst.Call) and (dotted_text(node.func) or "").rsplit(".", 1)[-1] in ("reduce_any", "any")):
        return False
    args = [a for a in node.args if a.keyword is None]
    axis = [a.value for a in node.args if a.keyword is not None and a.keyword.value == "axis"] + args[1:2]
    if not args or len(axis) != 1 or literal_value(axis[0], NOT_LITERAL) != -1:
        return False
    cast = args[0].value
    if not (isinstance(cast, cst.Call) and (dotted_text(cast.func) or "").rsplit(".", 1)[-1] == "cast"
            and len(cast.args) == 2 and isinstance(cast.args[0].value, cst.Name) and cast.args[0].value.value == name):
        return False
    dtype = cast.args[1].value
    return literal_value(dtype, NOT_LITERAL) == "bool" or (dotted_text(dtype) or "").endswith(".bool")


def user_mask(module: cst.Module | None, class_name: str) -> tuple[bool, str]:
    """What Keras does with masks at a call of the layer class ``class_name`` of the file: (whether its
    call() takes ``mask``, which Keras fills; what its output carries: "ids" (compute_mask returns
    ``inputs != 0``), "any" (it returns ``tf.reduce_any(tf.cast(inputs, "bool"), axis=-1)``), "passes" (supports_masking = True, or compute_mask returns the mask), "drops" (no
    compute_mask, masking not supported) or "unknown" (a compute_mask of another form))."""
    cls = next((st for st in (module.body if module is not None else ()) if isinstance(st, cst.ClassDef)
                and st.name.value == class_name), None)
    if cls is None or not isinstance(cls.body, cst.IndentedBlock):
        return False, "unknown"
    fns = {f.name.value: f for f in cls.body.body if isinstance(f, cst.FunctionDef)}
    call = fns.get("call")
    reads = call is not None and any(p.name.value == "mask" for p in [*call.params.params, *call.params.kwonly_params])
    compute = fns.get("compute_mask")
    if compute is not None:
        params = [p.name.value for p in compute.params.params]
        value = _returned(compute)
        if value is not None and len(params) >= 2 and _is_not_zero(value, params[1]):
            return reads, "ids"
        if value is not None and len(params) >= 2 and _any_nonzero(value, params[1]):
            return reads, "any"
        if value is not None and len(params) >= 3 and isinstance(value, cst.Name) and value.value == params[2]:
            return reads, "passes"
        return reads, "unknown"
    supports = "supports_masking = True" in cst.Module(body=[cls]).code
    return reads, "passes" if supports else "drops"


def flow(kind: str, rule, call, in_mask: str | None, ids: str, keras: int = 3,
         with_states: bool = False, user: tuple[bool, str] | None = None) -> tuple[str | None, bool]:
    """Keras's mask through one layer call of a functional model: (the mask its output carries, as code,
    or None; whether the call passes ``mask=`` to its module). ``ids`` is the code of its input, ``in_mask``
    the code of the mask the input carries, ``with_states`` whether the call passes initial_state= tensors.
    A layer that reads the mask in a way not translated raises ValueError with why."""
    if kind == "user":
        reads, out = user if user is not None else (False, "unknown")
        if out == "unknown":
            raise ValueError(f"{rule}.compute_mask attaches a Keras mask that fwport cannot read (it follows "
                             "`return inputs != 0`, `return tf.reduce_any(tf.cast(inputs, 'bool'), axis=-1)` and "
                             "`return mask`): apply the mask by hand")
        # Keras fills call()'s mask only when the call has one tensor argument (Keras 3), from the first (Keras 2)
        passed = in_mask is not None and reads and not (with_states and keras != 2)
        carried = {"ids": f"{ids} != 0", "any": f"({ids} != 0).any(dim=-1)", "passes": in_mask, "drops": None}.get(out)
        return carried, passed
    if in_mask is None:
        return (f"{ids} != 0" if kind == "rule" and mask_zero(rule, call) else None), False
    shape = rule.emit.get("shape") if kind == "rule" else None
    if shape in RECURRENT:
        # Keras 3 fills a layer's mask= only when the call has one tensor argument: with initial_state= the
        # recurrence runs over every step, yet the output still carries the mask (compute_mask); Keras 2 masks
        return (in_mask if _return_sequences(call) else None), not (with_states and keras != 2)
    if kind == "rule" and rule.id in PASSES_MASK:
        return in_mask, False
    raise ValueError(refusal(in_mask))


def refusal(in_mask: str) -> str:
    return (f"this layer receives the Keras mask ({in_mask}) that an Embedding(mask_zero=True) or a compute_mask "
            "attaches to a tensor: fwport carries it to LSTM, GRU, SimpleRNN and Bidirectional layers (and through Dense, Dropout, "
            "Activation and LayerNormalization), not to this layer, which may read it (attention, pooling and merges "
            "leave the masked steps out): apply the mask here by hand, or drop mask_zero=True if nothing after "
            "the embedding needs it")


LOSS_WARNING = ("this model's output carries Keras's mask (from an Embedding(mask_zero=True) or a compute_mask): Keras leaves the masked "
                "steps out of the loss and the metrics of compile()/fit(), torch's loss does not: weight the loss of "
                "each step by the mask ({mask}) by hand")


_MASKED_RNN = '''

class Masked{kind}(Lazy{kind}):
    """keras.layers.{keras} (with bidirectional=True, under keras.layers.Bidirectional) on a sequence that
    carries Keras's mask (True at the steps Keras keeps): the recurrence runs over the kept steps only (a
    PackedSequence), as Keras's skips the masked ones and holds its state over them. It returns what Keras
    returns: each sequence's last kept step (the backward direction's last is the first step), or every
    step (return_sequences), where a masked step repeats the output before it, or is zeros under
    Bidirectional. Sizes, initial_state and merge_mode as for Lazy{kind}."""

    def forward(self, x, mask, initial_state=None):
        state = initial_state
        if state is not None:
{to_torch}
        output, state = {nn}{kind}.forward(self, _packed_steps(x, mask), state)
        if not self.return_sequences:
            h = {final_h}
            # one step of each direction's final state
            return self.merged({torch}cat([h[-2], h[-1]], dim=-1)[:, None]) if self.bidirectional else h[-1]
        padded, lengths = {nn}utils.rnn.pad_packed_sequence(output, batch_first=True, total_length=x.shape[1])
        if self.bidirectional:
            return self.merged(padded)
        steps = {torch}arange(padded.shape[1], device=padded.device)
        last = {torch}minimum(steps[None, :], (lengths.to(padded.device) - 1)[:, None])
        return padded.gather(1, last[..., None].expand(-1, -1, padded.shape[-1]))
'''

_KINDS = {  # torch kind → (Keras name, Keras states → torch's, torch's final hidden state)
    "GRU": ("GRU", "            state = (state[0] if isinstance(state, (list, tuple)) else state).unsqueeze(0)",
            "state"),
    "RNN": ("SimpleRNN", "            state = (state[0] if isinstance(state, (list, tuple)) else state).unsqueeze(0)",
            "state"),
    "LSTM": ("LSTM", "            state = tuple(s.unsqueeze(0) for s in state)", "state[0]"),
}
HELPER_OF = {"lstm": "MaskedLSTM", "gru": "MaskedGRU", "rnn": "MaskedRNN"}

helpers.HELPERS["_packed_steps"] = helpers._PACK_STEPS
for _kind, (_keras, _to, _final) in _KINDS.items():
    helpers.HELPERS[f"Masked{_kind}"] = (_MASKED_RNN.replace("{kind}", _kind).replace("{keras}", _keras)
                                         .replace("{to_torch}", _to).replace("{final_h}", _final))
    DATA_DEPS[f"Masked{_kind}"] = (f"Lazy{_kind}", "_packed_steps")
