"""Call transforms for Keras optimizers and losses (rules/tf2torch/adam.toml, sparse-categorical-crossentropy.toml...).

Both need what only the training pass (passes/training.py) knows, handed over in ``m.extras``:
an optimizer the parameters it updates (``params``), a loss object that its calls were given torch's
argument order (``calls_adapted``: a name bound only to alike loss objects, or one created and called at once,
``keras.losses.X(...)(y_true, y_pred)``). Met anywhere else (passed to ``compile``, a loss called in a
way the pass does not follow), the call is refused with an error saying what to write.
"""
from __future__ import annotations

import re

import libcst as cst

from fwport.core.bind import NOT_LITERAL, bind_call, literal_value
from fwport.core.engine import _with_commas, code
from fwport.core.engine import expr as parsed_expression  # (parsed once per process, a fresh copy per call)
from fwport.core.finding import Severity
from fwport.packs.tf2torch import helpers
from fwport.packs.tf2torch.registry import call_transform

_EQ = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))


def _kw(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(value, keyword=cst.Name(name), equal=_EQ)


CLIPS = ("clipnorm", "global_clipnorm", "clipvalue")  # Keras allows one of them


def is_schedule(node, ctx) -> bool:
    """Whether an optimizer's learning_rate (as written) is a learning-rate schedule: a call of a
    keras.optimizers.schedules class, or a name the training pass found bound to one (or to an
    instance of a LearningRateSchedule subclass of the file)."""
    if isinstance(node, cst.Call):
        q = ctx.imports.resolve(node.func)
        rule = ctx.pack.by_name.get(q) if q else None
        if rule is not None and rule.emit.get("transform") == "schedule":
            return True
        return isinstance(node.func, cst.Name) and (node.func.value in ctx.analyses.get("schedule_classes", ())
                                                    or node.func.value in SCHEDULE_CLASSES)
    return isinstance(node, cst.Name) and node.value in ctx.analyses.get("schedules", ())


@call_transform("optimizer")
def optimizer(m, ctx):
    """``torch.optim.X(params, lr=..., ...)``: ``beta1``/``beta2`` (renamed ``beta_1``/``beta_2``)
    become torch's ``betas`` tuple; ``emit.options.set`` holds arguments always written (name →
    expression), e.g. Nadam's ``momentum_decay``; ``emit.options.decay_not_scaled``: the source's decoupled
    weight decay is not multiplied by the learning rate (TensorFlow Addons'), torch's is: weight_decay / lr;
    ``emit.options.decoupled``: how torch writes Keras's decoupled ``weight_decay`` (see ``_decoupled``)."""
    target = m.rule.emit["target"]
    params = m.extras.get("params")
    factory = m.extras.get("factory")  # given to a compile that creates it over the parameters it updates
    if factory:
        params = ctx.spell(target)
    if params is None:
        m.fail(ctx, "unsupported-construct",
               f"{m.rule.names[0].rsplit('.', 1)[-1]}(...): a torch optimizer takes the parameters it updates when "
               f"it is created, and fwport cannot tell which here; write {target}(model.parameters(), ...) once the "
               "model exists (fwport does it for `opt = ...` used by `opt.apply_gradients(zip(grads, "
               "model.trainable_variables))`)")
        return None
    kwargs = dict(m.kwargs)
    decoupled = m.rule.emit.get("options", {}).get("decoupled")
    extra = {}  # arguments the decay adds (NAdam's decoupled_weight_decay=True)
    if decoupled is not None and "weight_decay" in kwargs:
        if literal_value(kwargs["weight_decay"], NOT_LITERAL) is None:  # weight_decay=None: Keras does not decay
            del kwargs["weight_decay"]
        else:
            target, extra = _decoupled(m, ctx, decoupled, kwargs, target)
            if target is None:
                return None
            if factory:
                params = ctx.spell(target)
    clipping = {k: kwargs.pop(k) for k in CLIPS if k in kwargs}
    clipping = {k: v for k, v in clipping.items() if literal_value(v, NOT_LITERAL) is not None}
    if clipping and not m.extras.get("clipping_handled"):
        m.fail(ctx, "unsupported-argument",
               f"{', '.join(clipping)}: torch optimizers do not clip; fwport writes the clip before step() in the "
               "GradientTape steps and the fit loops it translates, and cannot here: call "
               "torch.nn.utils.clip_grad_norm_(p, c) for each parameter p (clipnorm), clip_grad_norm_(params, c) "
               "(global_clipnorm) or clip_grad_value_(params, c) (clipvalue) between backward() and step()")
        return None
    source = m.node if isinstance(m.node, cst.Call) else m.call  # the call as written
    if "lr" in kwargs and is_schedule(bind_call(source, m.rule).values.get("learning_rate"), ctx):
        if not m.extras.get("schedule_handled"):
            m.fail(ctx, "unsupported-argument",
                   f"learning_rate={m.written('learning_rate')}: a schedule, which Keras evaluates at every step of "
                   "the optimizer; fwport creates its torch scheduler for optimizers bound to a name and stepped by "
                   "the GradientTape steps or the fit loop it translates, and cannot here: create the optimizer "
                   "with lr=1.0 and torch.optim.lr_scheduler.LambdaLR(optimizer, schedule), and call its step() "
                   "after each optimizer.step()")
            return None
        m.extras["schedule_expr"] = kwargs["lr"]  # the pass writes LambdaLR(optimizer, <it>)
        kwargs["lr"] = cst.Float("1.0")  # LambdaLR multiplies this by the schedule's value
    if m.rule.emit.get("options", {}).get("decay_not_scaled") and "weight_decay" in kwargs:
        # TensorFlow Addons' decoupled decay subtracts wd * p, torch's lr * wd * p: the same step with wd / lr
        if "schedule_expr" in m.extras or isinstance(kwargs["weight_decay"], cst.Lambda):
            m.fail(ctx, "unsupported-argument",
                   f"weight_decay={m.written('weight_decay')}: this optimizer decays by weight_decay * p at each step "
                   "(not multiplied by the learning rate), torch's AdamW by lr * weight_decay * p; with a schedule or "
                   "a callable the two follow different curves: write the decay by hand (p.mul_(1 - wd) for each "
                   "parameter under torch.no_grad() before optimizer.step(), and weight_decay=0)")
            return None
        lr = kwargs.get("lr", cst.Float("0.001"))
        wd, lr = (code(v) if isinstance(v, (cst.Integer, cst.Float)) else _atom_text(v)
                  for v in (kwargs["weight_decay"], lr))
        kwargs["weight_decay"] = parsed_expression(f"{wd} / {lr}")
    if "lr" in kwargs:  # the learning rate first, as torch code writes it
        kwargs = {"lr": kwargs.pop("lr"), **kwargs}
    b1, b2 = kwargs.pop("beta1", None), kwargs.pop("beta2", None)
    args = [cst.Arg(params)]
    for k, v in kwargs.items():
        args.append(_kw(k, v))
        if k == "lr" and (b1 is not None or b2 is not None):
            args.append(_kw("betas", cst.Tuple([cst.Element(b1 or cst.Float("0.9")),
                                                 cst.Element(b2 or cst.Float("0.999"))])))
    if (b1 is not None or b2 is not None) and "lr" not in kwargs:
        args.insert(1, _kw("betas", cst.Tuple([cst.Element(b1 or cst.Float("0.9")),
                                                cst.Element(b2 or cst.Float("0.999"))])))
    for k, v in {**m.rule.emit.get("options", {}).get("set", {}), **extra}.items():  # constants always written
        args.append(_kw(k, parsed_expression(v)))
    if factory:  # functools.partial(torch.optim.X, lr=...): called with the parameters later
        return cst.Call(ctx.spell("functools.partial"), _with_commas(args))
    return cst.Call(ctx.spell(target), _with_commas(args))


def _decoupled(m, ctx, how: dict, kwargs: dict, target: str):
    """Keras's ``weight_decay`` (``p -= lr * wd * p`` before the update, keras/src/optimizers/base_optimizer.py)
    in torch: ``how.target``, a torch optimizer that decays the same way (Adam's AdamW); ``how.set``, arguments
    that make the target's decay decoupled (NAdam's ``decoupled_weight_decay=True``); ``how.exact_without``, an
    argument (SGD's momentum) without which torch's coupled decay (``g += wd * p``) gives the same step, refused
    when it is given. Returns the target and the arguments to add, (None, {}) when refused."""
    arg = how.get("exact_without")
    if arg is not None and literal_value(kwargs.get(arg, cst.Float("0.0")), NOT_LITERAL) not in (0, 0.0):
        m.fail(ctx, "unsupported-argument",
               f"weight_decay={m.written('weight_decay')} with {arg}={m.written(arg)}: Keras decays the weights apart "
               f"from the gradient (p -= lr * wd * p before the update), torch's weight_decay adds wd * p to the "
               f"gradient, which the {arg} then accumulates: drop weight_decay here and decay the parameters by hand "
               "before optimizer.step() (`with torch.no_grad(): p.mul_(1 - lr * wd)` for each parameter)")
        return None, {}
    return how.get("target", target), dict(how.get("set", {}))


def reduction_literal(node, ctx):
    """A loss's reduction= as a Python value: a literal, or keras.losses.Reduction.NONE... by its constant
    rule ("none"); NOT_LITERAL otherwise."""
    lit = literal_value(node, NOT_LITERAL)
    if lit is NOT_LITERAL:
        q = ctx.imports.resolve(node)
        rule = ctx.pack.by_name.get(q) if q else None
        if rule is not None and rule.kind == "constant":
            lit = literal_value(parsed_expression(rule.emit["target"]), NOT_LITERAL)
    return lit


def loss_options(rule, ctx) -> dict:
    """A loss rule's ``emit.options`` for this file: its ``keras2`` table over the rest in Keras 2 code (tf_keras
    computes some losses otherwise than Keras 3: its binary cross-entropy of probabilities adds epsilon inside the
    logs), the rest as they are in Keras 3 code."""
    opts = rule.emit.get("options", {})
    return {**opts, **opts["keras2"]} if ctx.version == 2 and "keras2" in opts else opts


_SATURATING = re.compile(r"sigmoid|softmax", re.IGNORECASE)
_LOGITS_WARNED = "probability_loss_warned"


def probabilities_warning(ctx, node, loss: str) -> None:
    """A cross-entropy of probabilities (``from_logits=False``) in a file with a sigmoid / softmax activation: a
    warning (once a file) that Keras computes it from the activation's logits and the translation does not.

    Keras's sigmoid and softmax keep their input on their output (Keras 3: ``_keras_logits``; Keras 2 in a graph:
    the op's input), and its cross-entropies of probabilities use it: the exact loss of the logits. The translation
    takes the probabilities clipped to [1e-7, 1 - 1e-7], as Keras does for predictions without logits: the same
    values while the logits stay within about ±15, but a saturated prediction's loss stops near 16 and its gradient
    is 0 where Keras's keeps growing (tests/test_valuekinds.py measures it)."""
    parsed = ctx.analyses.get("parsed")
    if ctx.analyses.get(_LOGITS_WARNED) or parsed is None or not _SATURATING.search(parsed[1]):
        return
    ctx.analyses[_LOGITS_WARNED] = True
    ctx.report(Severity.WARNING, "approximate",
               f"{loss} of probabilities: where the predictions come straight from a sigmoid / softmax activation "
               "Keras computes this loss from the activation's logits (it keeps them on its output), the translation "
               "from the probabilities clipped to [1e-7, 1 - 1e-7]: equal while the logits stay within about ±15, but "
               "a saturated prediction's loss stops near 16 (Keras's grows with the logit: 40 for a logit of 40 and "
               "the wrong label) and its gradient is 0; for Keras's values, leave the final activation out of the "
               "model, use from_logits=True (nn.BCEWithLogitsLoss / nn.CrossEntropyLoss) and apply the activation "
               "where the probabilities are read", node)


@call_transform("loss")
def loss(m, ctx):
    """A loss module: ``emit.target`` for logits (``from_logits=True``, or a loss without the flag),
    ``emit.options.probabilities`` for probabilities; its calls are adapted by the training pass."""
    kwargs = dict(m.kwargs)
    logits = kwargs.pop("from_logits", None)
    flag = False if logits is None else literal_value(logits, NOT_LITERAL)
    if flag not in (True, False):
        m.fail(ctx, "unsupported-argument", f"from_logits={m.written('from_logits')}: write True or False "
               "(the torch loss and how its input is prepared depend on it)")
        return None
    if not m.extras.get("calls_adapted"):
        m.fail(ctx, "unsupported-construct",
               f"{m.rule.names[0].rsplit('.', 1)[-1]}(...): torch losses take (input, target), Keras (y_true, y_pred), "
               "and fwport cannot follow this loss object's calls (bind it once to a name, "
               "`loss_fn = ...`, and call it as loss_fn(y_true, y_pred))")
        return None
    opts = loss_options(m.rule, ctx)
    if "reduction" in m.extras:  # a rule whose per-sample loss is torch's reduction='none' (opts per_sample)
        given = m.extras.pop("reduction")
        lit = reduction_literal(given, ctx)
        if lit in ("none", None, "sum") and m.extras.get("compiled"):
            m.fail(ctx, "unsupported-argument", f"reduction={m.written('reduction')}: a compiled loss must be one "
                   "number; the loop fwport writes for compile/fit takes the default reduction (the mean)")
            return None
        if lit in ("none", None, "sum") and opts.get("mean_last"):
            # Keras's per-sample loss is the mean over the last axis, torch's 'none' the elements: the
            # training pass reduces each call (.mean(-1), .mean(-1).sum() for 'sum')
            kwargs["reduction"] = cst.SimpleString('"none"')
        elif lit in ("none", None, "sum"):
            kwargs["reduction"] = cst.SimpleString('"sum"' if lit == "sum" else '"none"')
        elif lit not in ("sum_over_batch_size", "auto"):
            m.fail(ctx, "unsupported-argument", f"reduction={m.written('reduction')}: write one of Keras's reductions "
                   "('sum_over_batch_size', 'sum', None / keras.losses.Reduction.NONE): the torch loss takes it when "
                   "it is created")
            return None
    if opts.get("helper"):  # a module written into the file (helpers.py), called as torch losses are
        return cst.Call(cst.Name(helpers.use(ctx, opts["helper"])), _with_commas([_kw(k, v) for k, v in kwargs.items()]))
    if flag is False and opts.get("probabilities_helper"):  # Keras 2's formula, written into the file (helpers.py)
        if m.extras.get("compiled") and opts.get("helper_graph"):  # computed in a tf.function by Keras (its graph's order)
            kwargs["graph"] = cst.Name("True")
        return cst.Call(cst.Name(helpers.use(ctx, opts["probabilities_helper"])),
                        _with_commas([_kw(k, v) for k, v in kwargs.items()]))
    target = m.rule.emit["target"] if flag is True or "probabilities" not in opts else opts["probabilities"]
    return cst.Call(ctx.spell(target), _with_commas([_kw(k, v) for k, v in kwargs.items()]))


def keras2_metric_warning(ctx, node, cls: str) -> None:
    """Keras 2 code's binary cross-entropy (cosine similarity) metric: a warning that the written class computes
    Keras 3's formula."""
    if ctx.version == 2 and cls == "CosineSimilarity":
        ctx.report(Severity.WARNING, "approximate",
                   "CosineSimilarity metric in Keras 2 code: tf_keras normalises each side with tf.math.l2_normalize, "
                   "x / max(norm, 1e-6), the written metric class as Keras 3, x / max(norm, 1e-7): equal for every "
                   "vector of norm 1e-6 or more", node)
        return
    if ctx.version != 2 or cls != "BinaryCrossentropy":
        return
    ctx.report(Severity.WARNING, "approximate",
               "BinaryCrossentropy metric in Keras 2 code: tf_keras adds 1e-7 inside the logs of its binary "
               "cross-entropy of probabilities, the written metric class computes Keras 3's formula (nothing added): "
               "a sample whose probability p is within about 1e-5 of 0 or 1 differs by up to log(1 + 1e-7 / p) "
               "(log 2 = 0.69 for a clipped one, p = 1e-7); equal elsewhere, and where the written fit gives the "
               "metric the logits of a final sigmoid", node)


@call_transform("metric")
def metric(m, ctx):
    """A Keras metric object → an instance of a small class with the same interface (``m(...)``,
    ``update_state``, ``result``, ``reset_state``), written into the file once (passes/fitloop.py)."""
    cls = m.rule.emit["options"]["class"]
    for k in m.rule.emit["options"].get("scalars", ()):  # one value only (Keras also takes a list)
        if isinstance(m.kwargs.get(k), (cst.List, cst.Tuple)):
            m.fail(ctx, "unsupported-argument", f"{k}={m.written(k)}: the written-out {cls} takes one threshold; "
                   f"create one {cls}(thresholds=t) per threshold")
            return None
    ctx.spell_text("torch.as_tensor")  # the written-out class uses torch
    keras2_metric_warning(ctx, m.node, cls)
    ctx.options.setdefault("_metric_classes", set()).add(cls)
    return cst.Call(cst.Name(cls), _with_commas([_kw(k, v) for k, v in m.kwargs.items()]))


@call_transform("callback")
def callback(m, ctx):
    """A Keras callback → an instance of a small class with Keras's semantics, written into the file
    once (passes/fitloop.py); the generated fit (and TrainStepModule.fit) call it as Keras does."""
    cls = m.rule.emit["options"]["class"]
    ctx.options.setdefault("_callback_classes", set()).add(cls)
    first = m.rule.emit["options"].get("positional")
    args = [cst.Arg(v) if k == first else _kw(k, v) for k, v in m.kwargs.items()]
    args.sort(key=lambda a: a.keyword is not None)
    if cls in ("ReduceLROnPlateau", "LearningRateScheduler") and ctx.version == 2:  # Keras 2 logs the rate as "lr"
        args.append(_kw("log_name", cst.SimpleString('"lr"')))
    return cst.Call(cst.Name(cls), _with_commas(args))


def _atom_text(node: cst.BaseExpression) -> str:
    from fwport.core.position import render
    text = render(node)
    return text if isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) else f"({text})"


@call_transform("loss-function")
def loss_function(m, ctx):
    """``keras.losses.<name>(y_true, y_pred, ...)``: the per-sample loss (Keras reduces over the last
    axis only), from torch's functional loss with ``reduction='none'``. ``emit.options``: ``logits`` /
    ``probabilities`` (the F. function for each), ``target`` (long / float), ``input`` for
    probabilities (log-clip / clip; normalize-clip: the ``probabilities_helper`` divides them by their sum and clips
    them), ``classes_first`` (move the class axis to 1), ``mean_last``; or
    ``helper``: a function of helpers.py written into the file, called as ``helper(y_true, y_pred)``."""
    from fwport.core.position import render

    opts = loss_options(m.rule, ctx)
    kwargs = dict(m.kwargs)
    logits = kwargs.pop("from_logits", None)
    flag = False if logits is None else literal_value(logits, NOT_LITERAL)
    if flag not in (True, False):
        m.fail(ctx, "unsupported-argument", f"from_logits={m.written('from_logits')}: write True or False")
        return None
    y_true, y_pred = kwargs.pop("target", None), kwargs.pop("input", None)
    if y_true is None or y_pred is None:
        return None
    if opts.get("helper"):  # a written function of Keras's formula (helpers.py), called in Keras's order
        return cst.Call(cst.Name(helpers.use(ctx, opts["helper"])),
                        _with_commas([cst.Arg(y_true), cst.Arg(y_pred), *(_kw(k, v) for k, v in kwargs.items())]))
    p, t = _atom_text(y_pred), _atom_text(y_true)
    labels_of = p if isinstance(y_pred, (cst.Name, cst.Attribute)) else None  # the shape labels take
    fn = opts["logits"] if flag or "probabilities" not in opts else opts["probabilities"]
    if not flag and m.rule.emit.get("options", {}).get("input") in ("log-clip", "clip", "normalize-clip"):
        probabilities_warning(ctx, m.node, m.rule.names[0].rsplit(".", 1)[-1])
    helper = opts.get("probabilities_helper") if not flag else None  # Keras 2's formula (helpers.py), torch's order
    if not flag and opts.get("input") == "log-clip":
        p = f"{ctx.spell_text('torch.log')}({p}.clamp(1e-7, 1 - 1e-7))"
    elif not flag and opts.get("input") == "clip":
        p = f"{p}.clamp(1e-7, 1 - 1e-7)"
    if opts.get("target") == "long":
        t = f"{t}.long()"
        if labels_of is not None:  # (n,) or (n, 1): Keras drops a trailing axis of size 1
            t += f".reshape({labels_of}.shape[:-1])"
    elif opts.get("target") == "float":
        t = f"{t}.float()"
    if opts.get("classes_first"):
        p = f"{p}.movedim(-1, 1)"
        if opts.get("target") != "long":
            t = f"{t}.movedim(-1, 1)"
    extra = "".join(f", {k}={render(v)}" for k, v in kwargs.items())
    out = f"{helpers.use(ctx, helper)}({p}, {t}{extra})" if helper else \
        f"{ctx.spell_text(fn)}({p}, {t}, reduction='none'{extra})"
    if opts.get("mean_last"):
        out += ".mean(-1)"
    return parsed_expression(out)


# --- learning-rate schedules: written-out classes, called with the optimizer's step as Keras calls them ---

@call_transform("schedule")
def schedule(m, ctx):
    """A keras.optimizers.schedules object → an instance of a small class written into the file once
    (its value at an optimizer step, by Keras's formula); an optimizer given it gets a LambdaLR
    (passes/training.py)."""
    cls = m.rule.emit["options"]["class"]
    ctx.options.setdefault("_schedule_classes", set()).add(cls)
    return cst.Call(cst.Name(cls), _with_commas([_kw(k, v) for k, v in m.kwargs.items()]))


SCHEDULE_CLASSES = {
    "ExponentialDecay": '''class ExponentialDecay:
    """keras.optimizers.schedules.ExponentialDecay: the learning rate at optimizer step `step` (from 0)
    is initial_learning_rate * decay_rate ** (step / decay_steps), the exponent floored with staircase."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False):
        self.initial_learning_rate, self.decay_steps = initial_learning_rate, decay_steps
        self.decay_rate, self.staircase = decay_rate, staircase

    def __call__(self, step):
        p = float(step) / self.decay_steps
        if self.staircase:
            p = math.floor(p)
        return self.initial_learning_rate * self.decay_rate ** p
''',
    "InverseTimeDecay": '''class InverseTimeDecay:
    """keras.optimizers.schedules.InverseTimeDecay: the learning rate at optimizer step `step` (from 0)
    is initial_learning_rate / (1 + decay_rate * step / decay_steps), the ratio floored with staircase."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False):
        self.initial_learning_rate, self.decay_steps = initial_learning_rate, decay_steps
        self.decay_rate, self.staircase = decay_rate, staircase

    def __call__(self, step):
        p = float(step) / self.decay_steps
        if self.staircase:
            p = math.floor(p)
        return self.initial_learning_rate / (1 + self.decay_rate * p)
''',
    "PiecewiseConstantDecay": '''class PiecewiseConstantDecay:
    """keras.optimizers.schedules.PiecewiseConstantDecay: values[0] up to and including step
    boundaries[0], values[i] after boundaries[i - 1] up to boundaries[i], values[-1] after the last."""

    def __init__(self, boundaries, values):
        self.boundaries, self.values = list(boundaries), list(values)

    def __call__(self, step):
        for boundary, value in zip(self.boundaries, self.values):
            if step <= boundary:
                return value
        return self.values[-1]
''',
    "PolynomialDecay": '''class PolynomialDecay:
    """keras.optimizers.schedules.PolynomialDecay: from initial_learning_rate to end_learning_rate over
    decay_steps as (1 - step / decay_steps) ** power, then constant; with cycle, decay_steps grows to the
    first multiple of itself at or past the step."""

    def __init__(self, initial_learning_rate, decay_steps, end_learning_rate=0.0001, power=1.0, cycle=False):
        self.initial_learning_rate, self.decay_steps = initial_learning_rate, decay_steps
        self.end_learning_rate, self.power, self.cycle = end_learning_rate, power, cycle

    def __call__(self, step):
        step, decay_steps = float(step), self.decay_steps
        if self.cycle:
            decay_steps *= max(math.ceil(step / decay_steps), 1)
        else:
            step = min(step, decay_steps)
        fraction = (1 - step / decay_steps) ** self.power
        return (self.initial_learning_rate - self.end_learning_rate) * fraction + self.end_learning_rate
''',
    "CosineDecay": '''class CosineDecay:
    """keras.optimizers.schedules.CosineDecay: with a warmup_target, a linear warmup from
    initial_learning_rate to it over warmup_steps; then a cosine from there (initial_learning_rate
    without warmup) down to alpha times it over decay_steps, constant after."""

    def __init__(self, initial_learning_rate, decay_steps, alpha=0.0, warmup_target=None, warmup_steps=0):
        self.initial_learning_rate, self.decay_steps, self.alpha = initial_learning_rate, decay_steps, alpha
        self.warmup_target, self.warmup_steps = warmup_target, warmup_steps

    def __call__(self, step):
        step = float(step)
        if self.warmup_target is None:
            return self.decayed(min(step, self.decay_steps), self.initial_learning_rate)
        step = min(step, self.decay_steps + self.warmup_steps)
        if step < self.warmup_steps:
            rise = self.warmup_target - self.initial_learning_rate
            return self.initial_learning_rate + rise * step / self.warmup_steps
        return self.decayed(step - self.warmup_steps, self.warmup_target)

    def decayed(self, step, start):
        cosine = 0.5 * (1 + math.cos(math.pi * step / self.decay_steps))
        return start * ((1 - self.alpha) * cosine + self.alpha)
''',
}


def schedule_classes(names: set[str], spell) -> str:
    """The schedule classes a file uses."""
    if names - {"PiecewiseConstantDecay"}:
        spell("math.floor")  # noting the import
    return "\n\n".join(SCHEDULE_CLASSES[n] for n in sorted(names))


@call_transform("average-loss")
def average_loss(m, ctx):
    """``tf.nn.compute_average_loss(per_example_loss, sample_weight, global_batch_size)`` → the weighted
    losses' sum divided by the global batch size: ``global_batch_size`` when given, else the per-example
    losses' first dimension (TensorFlow's per-replica batch times the replicas, which is the whole batch
    in the one process fwport writes for a strategy)."""
    from fwport.core.position import render
    loss = m.kwargs.get("per_example_loss")
    if loss is None:
        return None
    weighted = _atom_text(loss)
    if "sample_weight" in m.kwargs:
        weighted = f"({weighted} * {_atom_text(m.kwargs['sample_weight'])})"
    size = m.kwargs.get("global_batch_size")
    divisor = _atom_text(size) if size is not None else f"{_atom_text(loss)}.shape[0]"
    return parsed_expression(f"{weighted}.sum() / {divisor}")
