"""``fwport tf2torch FILE --trace --model EXPR --input SPEC``: sizes the source does not write down, taken
from one run of the original model under TensorFlow.

:func:`prepare` (the direction's step before translating) runs the model as ``fwport verify`` runs it
(its Keras subprocess, ``--model``, ``--input``, ``--load``): while the source builds and calls the
model, every layer's creation site (the constructor call's line and column) and the shapes of its
inputs are noted, and the translation gets them as the option ``observed_shapes``. This process never
imports TensorFlow (only the subprocess does); without it, ``--trace`` says so.

:func:`observed_shape` decides what a layer is translated with (``translate_layer`` asks it): the rank
and the feature axis (the last; the first for ``data_format="channels_first"``) of the observed input,
where the passes know neither. Those are what Keras's ``build`` fixes in the weights, so they hold for
every input the model can take. Other sizes (a height or width) are not taken: a model may be called on
other sizes than the traced one, and a translation that assumed them (a static ``same`` padding) would
be wrong for those, silently; the exact run-time forms (SamePad2d) stay.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path

from fwport.core.bind import literal_value
from fwport.core.direction import PrepareError

TRACE_TIMEOUT = 600.0


def prepare(paths: tuple[str, ...], options: dict) -> dict:
    options = dict(options)
    trace = options.pop("trace", False)
    model = options.pop("trace_model", None)
    inputs = tuple(options.pop("trace_inputs", ()) or ())
    load = options.pop("trace_load", None)
    args = options.pop("trace_args", None)
    defines = tuple(options.pop("trace_defines", ()) or ())
    if not trace:
        if model or inputs or load or args or defines:
            raise PrepareError("--model, --input, --load, --args and --define go with --trace (which runs that "
                               "model once under TensorFlow to take the sizes the source does not write down)")
        return options
    if len(paths) != 1 or Path(paths[0]).is_dir():
        raise PrepareError("--trace runs the model of one file: give one .py file")
    if not model:
        raise PrepareError("--trace needs --model EXPR: the model to run (a builder call such as "
                           "'build_model(10)', a class, or a model variable of the file)")
    if not inputs:
        raise PrepareError("--trace needs --input SPEC: the model's inputs with their batch axis, e.g. "
                           "--input 'float32[2,28,28,1]' (one per input)")
    path = paths[0]
    try:
        source = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PrepareError(f"--trace: cannot read {path}: {e}") from None
    from fwport.packs.tf2torch import detect_keras_version

    keras_major, _ = detect_keras_version(source, options.get("keras"))
    needed = ("tensorflow", "tf_keras") if keras_major == 2 else ("tensorflow",)
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if missing:
        raise PrepareError(f"--trace runs the original model under TensorFlow, and {' and '.join(missing)} "
                           f"{'is' if len(missing) == 1 else 'are'} not installed here: install "
                           f"{' '.join('tensorflow-cpu' if m == 'tensorflow' else 'tf-keras' for m in missing)}, "
                           "or translate without --trace")
    import click

    from fwport.verify.cli import _defines, _json_arg

    try:  # read as fwport verify reads them
        args, defines = _json_arg(args, "--args"), _defines(defines)
    except click.BadParameter as e:
        raise PrepareError(e.format_message()) from None
    options["observed_shapes"] = run_trace(path, model, inputs, load or "auto", keras_major, args, defines)
    return options


def run_trace(path: str, model: str, inputs: tuple[str, ...], load: str, keras_major: int, args: dict | None = None,
              defines: dict | None = None, timeout: float = TRACE_TIMEOUT) -> tuple:
    """The Keras subprocess of fwport verify, asked to build ``model`` and call it once on inputs drawn
    from ``inputs``: ((line, column, shape or None), ...) per creation site of the file's layers."""
    import numpy as np

    from fwport.verify.run import Session, VerifyError, _ask
    from fwport.verify.spec import InputSpec, SpecError, make_inputs

    try:
        specs = [InputSpec.parse(s) for s in inputs]
    except SpecError as e:
        raise PrepareError(f"--input: {e}") from None
    with tempfile.TemporaryDirectory(prefix="fwport-trace-") as tmp, Session() as session:
        xs = make_inputs(specs, 0)
        np.savez(os.path.join(tmp, "x.npz"), **{f"x{i}": x for i, x in enumerate(xs)})
        w = session.worker("keras", keras_major, "cpu")
        try:
            resp = _ask(session, w, {"op": "trace", "source": str(Path(path).resolve()), "model": model,
                                     "inputs": os.path.join(tmp, "x.npz"), "load": load, "seed": 0,
                                     "args": args or {}, "define": defines or {}}, timeout)
        except VerifyError as e:
            raise PrepareError(f"--trace: running {model} under TensorFlow failed: {e}") from None
    shapes = tuple((int(line), int(col), tuple(shape) if shape is not None else None)
                   for line, col, shape in resp["shapes"])
    loaded = f" ({resp['loaded']})" if resp.get("loaded") else ""
    sys.stderr.write(f"fwport: --trace: ran {model} under Keras {keras_major}{loaded}: the input shapes of the "
                     f"layers created at {len(shapes)} places of {path}\n")
    return shapes


def observed_shape(lctx, observed, call, rule):
    """The input shape ``translate_layer`` uses: the passes' own (``lctx.in_shape``, source layout without the
    batch axis, None where unknown), with the rank and the feature axis taken from the traced run where the
    passes do not know them (see the module's docstring). Not the rank in a region converted to
    channels-first: there an input of unknown rank may be a flattened map in another order than Keras's
    (the Dense after it refuses rather than guess)."""
    static = lctx.in_shape
    if observed is None:  # the layers created there saw inputs of different ranks
        return static
    observed = tuple(observed)
    if not observed or (static is None and lctx.layout == "nchw"):
        return static
    if static is None:
        shape = [None] * len(observed)
    elif len(static) != len(observed):
        return static
    else:
        shape = list(static)
    fmt = next((literal_value(a.value, None) for a in call.args if a.keyword and a.keyword.value == "data_format"),
               None)
    axis = 0 if fmt == "channels_first" and len(shape) > 1 else len(shape) - 1
    if shape[axis] is None and observed[axis] is not None:
        shape[axis] = observed[axis]
    return tuple(shape)
