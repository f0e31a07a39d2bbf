"""(read-only) A Keras 3 trap: a ``keras.Model`` subclass whose ``call`` takes no ``training`` parameter.

Keras 3's ``train_step`` calls ``self(x, training=True)`` only where the model's ``call`` has a ``training``
parameter (``_call_has_training_arg``); otherwise it calls ``self(x)``, and every layer of the model then gets
training=None in fit: a Dropout does not drop, a GaussianNoise adds nothing, a BatchNormalization normalises with
its moving statistics and leaves them unchanged (Keras 3.15, measured: tests/test_keras3_training_arg.py). tf_keras
(Keras 2) passes fit's training=True on. A ``model(x, training=True)`` call (a GradientTape step) sets it in both,
and a Sequential or functional model passes it to its layers in both.

The translation's torch modules follow ``model.train()``, as the written fit loop sets it: the Keras 2 behaviour and
the code's evident intent. Where the file is Keras 3 code, the model holds such layers (directly, in a container,
or through its own Layer classes of the file) and may be trained by fit, this is a warning at the class's call. A
layer held in ``self.<attr>`` every call of which passes a literal flag (``self.base(x, training=False)``: the
subclass pass keeps it in that mode by a written train()) runs in that mode on both sides, and is not counted.
"""
from __future__ import annotations

import libcst as cst

from fwport.core.context import FileContext
from fwport.core.finding import Severity
from fwport.core.names import find_all

#: layers whose computation depends on training (their Keras name after ``keras.layers.``)
TRAINING_LAYERS = frozenset({
    "Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "AlphaDropout", "GaussianDropout",
    "GaussianNoise", "BatchNormalization", "RandomFlip", "RandomRotation", "RandomZoom", "RandomTranslation",
    "RandomContrast", "RandomBrightness", "RandomCrop", "RandomHeight", "RandomWidth",
})
#: layers that depend on training where given a non-zero ``dropout=`` / ``recurrent_dropout=``
_DROPOUT_ARGS = ("dropout", "recurrent_dropout")
#: ... of them, those that do nothing at a literal rate (stddev) 0
_RATED = frozenset({"Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "AlphaDropout",
                    "GaussianDropout", "GaussianNoise"})
_MODEL = "keras.Model"
_LAYER_BASES = ("keras.Model", "keras.layers.Layer")


def _params(fn: cst.FunctionDef) -> set[str]:
    return {p.name.value for p in (*fn.params.params, *fn.params.posonly_params, *fn.params.kwonly_params)}


def _methods(cls: cst.ClassDef) -> dict[str, cst.FunctionDef]:
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    return {s.name.value: s for s in body if isinstance(s, cst.FunctionDef)}


def _layer_of(call: cst.Call, ctx: FileContext) -> str | None:
    """The training-dependent Keras layer ``call`` builds, as ``Dropout(0.5)`` / ``LSTM(dropout=...)``, or None."""
    name = ctx.imports.resolve(call.func) or ""
    if not name.startswith("keras.layers."):
        return None
    short = name.rsplit(".", 1)[1]
    if short in TRAINING_LAYERS:
        rate = call.args[0] if call.args and call.args[0].keyword is None else next(
            (a for a in call.args if a.keyword is not None and a.keyword.value in ("rate", "stddev")), None)
        return None if short in _RATED and rate is not None and _zero(rate.value) else short
    for a in call.args:
        if a.keyword is not None and a.keyword.value in _DROPOUT_ARGS and not _zero(a.value):
            return f"{short}({a.keyword.value}=...)"
    return None


def _literal_flag(call: cst.Call) -> bool:
    """``call`` passes a literal training flag (``training=False``, or True / False after the input)."""
    return any(isinstance(a.value, cst.Name) and a.value.value in ("True", "False")
               and (a.keyword is not None and a.keyword.value == "training" or a.keyword is None and i == 1)
               for i, a in enumerate(call.args))


def _fixed_mode_builds(cls: cst.ClassDef) -> set[int]:
    """The ids of the calls that build what ``self.<attr>`` holds (the layers of a Sequential built there too),
    for each attr of ``cls`` used only in calls that pass a literal training flag (and read through:
    ``self.base.trainable = False``)."""
    calls: dict[str, list] = {}
    uses: dict[str, int] = {}
    through: dict[str, int] = {}
    for n in find_all(cls, cst.Attribute):
        if isinstance(n.value, cst.Name) and n.value.value == "self":
            uses[n.attr.value] = uses.get(n.attr.value, 0) + 1
        elif isinstance(n.value, cst.Attribute) and isinstance(n.value.value, cst.Name) \
                and n.value.value.value == "self":
            through[n.value.attr.value] = through.get(n.value.attr.value, 0) + 1
    for c in find_all(cls, cst.Call):
        f = c.func
        if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == "self":
            calls.setdefault(f.attr.value, []).append(c)
    made: dict[str, list] = {}
    for a in find_all(cls, cst.Assign):
        t = a.targets[0].target if len(a.targets) == 1 else None
        if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self":
            made.setdefault(t.attr.value, []).append(a.value)
    out: set[int] = set()
    for attr, cs in calls.items():
        values = made.get(attr, [])
        if all(_literal_flag(c) for c in cs) and uses[attr] == len(cs) + len(values) + through.get(attr, 0):
            out |= {id(c) for v in values for c in find_all(v, cst.Call)}
    return out


def _zero(value: cst.BaseExpression) -> bool:
    return isinstance(value, (cst.Integer, cst.Float)) and float(value.value.replace("_", "")) == 0


def _effects(layers: list[str]) -> str:
    """What running ``layers`` as in inference does, in words."""
    text = " ".join(layers)
    out = []
    if "Dropout" in text or "dropout=" in text:
        out.append("no dropout")
    if "GaussianNoise" in text:
        out.append("no noise")
    if "Random" in text:
        out.append("no augmentation")
    if "BatchNormalization" in text:
        out.append("BatchNormalization normalises with its moving statistics and leaves them unchanged")
    return "; ".join(out)


def run(module: cst.Module, ctx: FileContext) -> cst.Module:
    if ctx.version == 2:
        return module
    classes = {c.name.value: c for c in find_all(module, cst.ClassDef)}
    functions = {f.name.value: f for f in module.body if isinstance(f, cst.FunctionDef)}  # builders (create_ffn)
    resolve = ctx.imports.resolve

    def kind(cls: cst.ClassDef, seen=()) -> str | None:  # "keras.Model" / "keras.layers.Layer" / None
        for b in cls.bases:
            if b.keyword is not None:
                continue
            name = resolve(b.value)
            if name in _LAYER_BASES:
                return name
            if isinstance(b.value, cst.Name) and b.value.value in classes and b.value.value not in seen:
                k = kind(classes[b.value.value], (*seen, b.value.value))
                if k:
                    return k
        return None

    held: dict[str, list[str]] = {}  # class (or builder function) name → the training-dependent layers it holds

    def holds(name: str, seen: tuple = (), flat: bool = True) -> list[str]:
        """The training-dependent layers class (or builder) ``name`` holds: flat, their kinds; else one entry per
        layer it builds (``Dropout``, ``Block (holding Dropout, BatchNormalization)``)."""
        if flat and name in held:
            return held[name]
        cls, out = classes.get(name) or functions[name], []
        fixed = _fixed_mode_builds(cls) if name in classes else set()
        for call in find_all(cls, cst.Call):
            if id(call) in fixed:
                continue
            layer = _layer_of(call, ctx)
            callee = call.func.value if isinstance(call.func, cst.Name) else None
            items = [layer] if layer else []
            if layer is None and callee not in seen and callee != name and (
                    callee in functions or (callee in classes and kind(classes[callee]))):
                inner = holds(callee, (*seen, name))
                items = inner if flat else [f"{callee} (holding {', '.join(inner)})"] if inner else []
            out += [x for x in items if x not in out]
        for b in getattr(cls, "bases", ()):  # a base class of the file: its layers too
            if b.keyword is None and isinstance(b.value, cst.Name) and b.value.value in classes \
                    and b.value.value not in seen and b.value.value != name:
                out += [x for x in holds(b.value.value, (*seen, name), flat) if x not in out]
        if flat:
            held[name] = out
        return out

    calls = [c for c in find_all(module, cst.Call)]
    fits = any(isinstance(c.func, cst.Attribute) and c.func.attr.value in ("fit", "train_on_batch") for c in calls)
    tape = any((resolve(c.func) or "").endswith("GradientTape") for c in calls)
    if tape and not fits:  # trained by the file's own steps only: model(x, training=...) decides, in both
        return module
    # a model class built inside another Keras class of the file is a component: the outer model is the one fit
    # calls (and the outer's training, if any, reaches the component's layers through the call context)
    parts = {c.func.value for cls in classes.values() if kind(cls) for c in find_all(cls, cst.Call)
             if isinstance(c.func, cst.Name) and c.func.value != cls.name.value}
    for name, cls in classes.items():
        if kind(cls) != _MODEL or name in parts:
            continue
        methods = _methods(cls)
        fn = methods.get("call")
        if fn is None or "training" in _params(fn) or "train_step" in methods:
            continue
        layers = holds(name, flat=False)
        if not layers:
            continue
        ctx.report(Severity.WARNING, "approximate",
                   f"Keras 3: the call of the keras.Model subclass {name} takes no training parameter, so Keras 3's "
                   f"fit() calls the model without training=True and its layers get training=None: {', '.join(layers)} "
                   f"run as in inference during fit ({_effects(layers)}), where tf_keras (Keras 2) and the "
                   "translation (model.train() in the fit loop) train them: the translated fit differs from Keras 3's. "
                   "To make both agree, give the Keras call a `training=None` parameter and pass it on "
                   "(`self.dropout(x, training=training)`); a `model(x, training=True)` step (GradientTape) is the "
                   "same in both", fn)
    return module
