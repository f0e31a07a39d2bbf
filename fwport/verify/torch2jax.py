"""``fwport verify`` for PyTorch → JAX/Equinox: the original in a torch subprocess
(torch_source_side.py), the translation in a JAX one (jax_side.py), the same inputs, the torch
state_dict moved into the Equinox model by name, outputs compared in eval / inference mode
(``jax.vmap`` over the batch), gradients of one scalar loss with respect to every parameter and
input, and (``--check step``) every parameter and BatchNorm running statistic after one torch.optim.SGD step
against one optax.sgd step on that loss, in training mode. Imports no framework.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np


def verify(opts, session, xs: list | None = None, keep: dict | None = None) -> dict:
    """``xs``: the inputs (PyTorch's layout) when the caller draws them (tf2jax: Keras's, moved); ``keep``
    receives the JAX outputs (``out0``...). ``opts.torch_state_file``: a checkpoint both sides start from
    (else the original's seeded initial values); ``opts.eqx_file``: the JAX side reads its model from
    this file (eqx.tree_deserialise_leaves) instead of being given the torch state."""
    from fwport.verify.certificate import loading_results
    from fwport.verify.run import TOLERANCES, VerifyError, _ask, compare
    from fwport.verify.spec import InputSpec, SpecError, make_inputs

    if "train" in opts.checks:  # refused, never dropped: a PASS would claim a training comparison not made
        raise VerifyError("--check train is not implemented for torch2jax's verify yet (forward, grad and step are); "
                          "a training function is compared by fwport.verify.torch2jax.verify_training "
                          "(function(model, *inputs, **train_args) on both sides)", kind="user")
    if not opts.inputs:
        raise VerifyError("give the input shape with --input, e.g. --input 'float32[4,20]' (batch axis first, "
                          "in the PyTorch layout)", kind="user")
    try:
        specs = [InputSpec.parse(s).with_dtype(opts.dtype) for s in opts.inputs]
    except SpecError as e:
        raise VerifyError(str(e), kind="user") from None
    rtol, atol = TOLERANCES[opts.dtype]
    rtol = opts.rtol if opts.rtol is not None else rtol
    atol = opts.atol if opts.atol is not None else atol
    t0 = time.perf_counter()
    times: dict[str, float] = {}
    xs = make_inputs(specs, opts.seed) if xs is None else xs
    with tempfile.TemporaryDirectory(prefix="fwport-verify-") as tmp:
        d = Path(tmp)
        np.savez(d / "x.npz", **{f"x{i}": x for i, x in enumerate(xs)})
        tw = session.worker("torch_source", 0, opts.device)
        jw = session.worker("jax", 0, opts.device)
        common = {"dtype": opts.dtype, "device": opts.device, "seed": opts.seed, "args": opts.args,
                  "checks": list(opts.checks), "inputs": str(d / "x.npz"), "load": opts.load,
                  "define": getattr(opts, "defines", {}), "lr": opts.lr}
        axis_option = getattr(opts, "batch_axis", "auto")
        batched = axis_option == "auto" and _batched_module(Path(opts.translated), opts.translated_model or opts.model)
        tresp = _ask(session, tw, dict(common, op="run", source=str(Path(opts.original).resolve()), model=opts.model,
                                       out=str(d / "torch.npz"), weights=opts.torch_state_file,
                                       batch_axis="none" if batched else axis_option), opts.timeout)
        if batched and "batch_axis_why" in tresp:
            tresp["batch_axis_why"] = "the translation is a batched module (its __call__ takes the whole batch)"
        times["torch"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        jresp = _ask(session, jw, dict(common, op="run", source=str(Path(opts.translated).resolve()),
                                       model=opts.translated_model or opts.model, torch=str(d / "torch.npz"),
                                       out=str(d / "jax.npz"), modules=tresp.get("modules", {}), tied=tresp.get("tied", {}),
                                       eqx=getattr(opts, "eqx_file", None), batch_axis=tresp.get("batch_axis", 0),
                                       out_axes=tresp.get("out_axes"),
                                       constant_draws=bool(tresp.get("stochastic")),
                                       step_mode=(tresp.get("step") or {}).get("mode")), opts.timeout)
        times["jax"] = time.perf_counter() - t1
        cert = _base(opts, specs, rtol, atol, tresp, jresp)
        if jresp["problems"]:
            cert.update(verdict="mismatch", problems=jresp["problems"], results={})
            cert["timing"] = times
            return cert
        with np.load(d / "torch.npz") as z:
            T = {k: z[k] for k in z.files}
        with np.load(d / "jax.npz") as z:
            J = {k: z[k] for k in z.files}
    if keep is not None:
        keep.update({k: v for k, v in J.items() if k.startswith("out")})
    results: dict[str, list] = {"outputs": [], "gradients": [], "input_gradients": [],
                                "loading": loading_results(cert.get("loaded"))}
    for i in range(tresp["outputs"]):
        results["outputs"].append({"name": f"output {i}", **compare(T[f"out{i}"], J.get(f"out{i}", np.zeros(0)), rtol, atol)})
    if tresp["outputs"] != jresp["outputs"]:
        results["outputs"].append({"name": "output count", "ok": False,
                                   "detail": f"PyTorch returns {tresp['outputs']} outputs, the translation {jresp['outputs']}"})
    if "grad" in opts.checks:
        grads = {k[2:]: v for k, v in T.items() if k.startswith("g:")}
        scale = max([float(np.abs(v).max()) for v in grads.values() if v.size] + [0.0])
        for name, g in grads.items():
            r = compare(g, J.get(f"g:{name}", np.zeros(0)), rtol, atol, 1e-3 * scale)
            results["gradients"].append({"name": name, **r})
        for i in range(len(xs)):
            if f"gx{i}" in T:
                results["input_gradients"].append({"name": f"input {i}", **compare(T[f"gx{i}"], J.get(f"gx{i}", np.zeros(0)),
                                                                                  rtol, atol)})
    if "step" in opts.checks:
        results["step"] = _compare_step(T, J, tresp["step"], tresp.get("tied", {}), rtol, atol)
        cert["step"] = {k: tresp["step"][k] for k in ("mode", "why", "lr")}
        cert["step"]["optimizer"] = "torch.optim.SGD against optax.sgd, one step on sum(out * R)"
    ok = all(e["ok"] for es in results.values() for e in es)
    cert.update(results=results, verdict="pass" if ok else "mismatch")
    for group, point in (("gradients", "gradient"), ("step", "after one SGD step")):
        bad = [e for e in results.get(group, []) if not e["ok"]]
        if bad:  # the module whose parameters diverge first, in the original's registration order
            cert["first_diverging"] = {"layer": bad[0]["name"].rsplit(".", 1)[0], "point": point,
                                       "torch": bad[0]["name"], "max_abs": bad[0].get("max_abs"),
                                       "max_rel": bad[0].get("max_rel")}
            break
    times["total"] = time.perf_counter() - t0
    cert["timing"] = times
    return cert


def _compare_step(T: dict, J: dict, step: dict, tied: dict, rtol: float, atol: float) -> list[dict]:
    """Every parameter and running statistic after one SGD step, PyTorch's (``s:``) against the translation's.
    Equinox's BatchNorm averages the biased batch variance where PyTorch averages the unbiased one: from its
    running variance v' (momentum 1 - m over the loaded v), PyTorch's is v' + (v' - (1 - m) v) / (n - 1), n the
    values per channel of the batch (exact in training mode; the translation's warning states the difference).
    A torch array two Equinox arrays hold together (an LSTM's two biases, folded) has no stepped value of its own."""
    from fwport.verify.run import compare
    out = []
    norms = step.get("batchnorm", {})
    for k in [k for k in T if k.startswith("s:")]:  # the original's state_dict order
        name = k[2:]
        prefix, leaf = name.rsplit(".", 1) if "." in name else ("", name)
        got = J.get(k)
        if got is None and name in tied:
            got = J.get(f"s:{tied[name]}")
        note = ""
        if leaf == "running_var" and f"bnvar:{prefix}" in J:
            got = J[f"bnvar:{prefix}"]
            if prefix in norms:
                m, n = norms[prefix]["momentum"], norms[prefix]["n"]
                got = got + (got - (1 - m) * T[f"w:{name}"]) / max(n - 1, 1)
                note = f"Equinox's biased variance as PyTorch's unbiased one (n = {n} per channel)"
        if got is None:
            if leaf in ("running_mean", "running_var"):
                out.append({"name": name, "ok": False, "detail": "the translation keeps no running statistics here "
                            "(an eqx.nn.BatchNorm with mode=\"batch\" and its state)"})
            continue  # an array the translation folds with another (no stepped value of its own)
        got = np.asarray(got)
        r = compare(T[k], got.reshape(T[k].shape) if got.size == T[k].size else got, rtol, atol)
        out.append({"name": name, **r, **({"note": note} if note else {})})
    return out


def verify_training(opts, session, function: str, train_args: dict | None = None) -> dict:
    """Both training functions, ``function(model, *inputs, **train_args)``, from the same initial
    parameters (the original's, moved by name): the trained parameters and the returned losses
    compared. Inputs are drawn from ``opts.inputs`` (integer labels as ``int64[8]:3``)."""
    from fwport.verify.run import TOLERANCES, VerifyError, _ask, compare
    from fwport.verify.spec import InputSpec, SpecError, make_inputs

    try:
        specs = [InputSpec.parse(s).with_dtype(opts.dtype) for s in opts.inputs]
    except SpecError as e:
        raise VerifyError(str(e), kind="user") from None
    rtol, atol = TOLERANCES[opts.dtype]
    rtol = opts.rtol if opts.rtol is not None else rtol
    atol = opts.atol if opts.atol is not None else atol
    t0 = time.perf_counter()
    xs = make_inputs(specs, opts.seed)
    with tempfile.TemporaryDirectory(prefix="fwport-verify-") as tmp:
        d = Path(tmp)
        np.savez(d / "x.npz", **{f"x{i}": x for i, x in enumerate(xs)})
        common = {"dtype": opts.dtype, "device": opts.device, "seed": opts.seed, "args": opts.args, "op": "train",
                  "load": opts.load, "define": getattr(opts, "defines", {}),
                  "train": function, "train_args": train_args or {}, "inputs": str(d / "x.npz"), "model": opts.model}
        tresp = _ask(session, session.worker("torch_source", 0, opts.device),
                     dict(common, source=str(Path(opts.original).resolve()), out=str(d / "torch.npz")), opts.timeout)
        jresp = _ask(session, session.worker("jax", 0, opts.device),
                     dict(common, source=str(Path(opts.translated).resolve()), torch=str(d / "torch.npz"),
                          out=str(d / "jax.npz"), modules=tresp.get("modules", {}), tied=tresp.get("tied", {})), opts.timeout)
        cert = _base(opts, specs, rtol, atol, tresp, jresp)
        cert["training"] = {"function": function, "args": train_args or {}}
        if jresp["problems"]:
            cert.update(verdict="mismatch", problems=jresp["problems"], results={})
            return cert
        with np.load(d / "torch.npz") as z:
            T = {k: z[k] for k in z.files}
        with np.load(d / "jax.npz") as z:
            J = {k: z[k] for k in z.files}
    results: dict[str, list] = {"trained": [], "losses": []}
    for k in sorted(k for k in T if k.startswith("s:")):
        results["trained"].append({"name": k[2:], **compare(T[k], J.get(k, np.zeros(0)), rtol, atol)})
    if "losses" in T:
        results["losses"].append({"name": "losses", **compare(T["losses"], J.get("losses", np.zeros(0)), rtol, atol)})
    ok = bool(results["trained"]) and all(e["ok"] for es in results.values() for e in es)
    cert.update(results=results, verdict="pass" if ok else "mismatch", timing={"total": time.perf_counter() - t0})
    return cert


def convert(checkpoint: str, source: str, model: str, to: str, translated: str | None = None, args: dict | None = None,
            timeout: float = 600.0, session=None, translated_model: str | None = None) -> dict:
    """``fwport weights model.pt --to model.eqx``: a PyTorch state_dict → the translated Equinox model's
    leaves (eqx.tree_serialise_leaves; ``(model, state)`` for a model with BatchNorm), moved by name
    through the verifier's maps (eqx_layouts.py, jax_side.load_state). The torch side builds the original
    model (``--model``/``--args``, as verify does) and loads the checkpoint strictly; the JAX side builds
    the translation and writes the file atomically. Returns a report; raises VerifyError when it cannot."""
    from fwport.verify.run import Session, VerifyError, _ask, _read

    own = session is None
    session = session or Session()
    tmp = tempfile.TemporaryDirectory(prefix="fwport-weights-")
    try:
        d = Path(tmp.name)
        if translated is None:
            from fwport.core.pipeline import translate_source
            translated = str(d / "translated.py")
            Path(translated).write_text(translate_source(_read(source, "original"), source, "torch2jax").output,
                                        encoding="utf-8")
        dest = Path(to)
        if not dest.parent.is_dir():
            raise VerifyError(f"--to {to}: no folder {dest.parent}", kind="user")
        common = {"dtype": "float32", "device": "cpu", "seed": 0, "args": args or {}}
        tresp = _ask(session, session.worker("torch_source", 0, "cpu"),
                     dict(common, op="state", source=str(Path(source).resolve()), model=model,
                          weights=str(Path(checkpoint).resolve()), out=str(d / "torch.npz")), timeout)
        jresp = _ask(session, session.worker("jax", 0, "cpu"),
                     dict(common, op="save", source=str(Path(translated).resolve()), model=translated_model or model,
                          torch=str(d / "torch.npz"), modules=tresp.get("modules", {}), tied=tresp.get("tied", {}), to=str(dest.resolve())),
                     timeout)
        if jresp["problems"]:
            return {"ok": False, "problems": jresp["problems"]}
        return {"ok": True, "arrays": jresp["arrays"], "stateful": jresp["stateful"], "translated": translated}
    finally:
        if own:
            session.close()
        tmp.cleanup()


def _base(opts, specs, rtol, atol, tresp, jresp) -> dict:
    import platform
    return {
        "fwport_verify": 1, "direction": "torch2jax",
        "original": opts.original, "translated": opts.translated,
        "model": opts.model, "translated_model": opts.translated_model or opts.model, "args": opts.args,
        "versions": {**tresp["versions"], **jresp["versions"], "python": platform.python_version(),
                     "numpy": np.__version__},
        "device": {"torch": tresp["device"], "jax": jresp["device"], "tf32": "off",
                   "jax_default_matmul_precision": "highest"},
        "dtype": opts.dtype, "seed": opts.seed, "inputs": [s.render() for s in specs],
        "checks": list(opts.checks),
        "loaded": {side: r.get("loaded") for side, r in (("original", tresp), ("translated", jresp)) if r.get("loaded")},
        "tolerance": {"rtol": rtol, "atol": atol,
                      "rule": "|torch - jax| <= atol * max|torch| + rtol * |torch|, per tensor"},
        **({"batch_axis": {"axis": tresp.get("batch_axis", 0), "why": tresp["batch_axis_why"],
                           **({"out_axes": tresp["out_axes"]} if tresp.get("out_axes") else {})}}
           if "batch_axis_why" in tresp else {}),
        **({"stochastic": {"detected": True, "draws": "constant on both sides: normal draws 0.5, uniform draws the "
                           "middle of their range (torch.randn/randn_like/rand/rand_like/normal/normal_/uniform_, "
                           "jax.random.normal/uniform)",
                           "why": "the original's outputs differ between two seeds of PyTorch's generator"}}
           if tresp.get("stochastic") else {}),
    }


def render_header(cert: dict) -> list[str]:
    v, dev, tol = cert.get("versions", {}), cert.get("device", {}), cert.get("tolerance", {})
    return [f"fwport verify: {cert.get('original')} ({cert.get('model')}) vs {cert.get('translated')} "
            f"({cert.get('translated_model')})",
            f"  torch {v.get('torch', '?')} on {dev.get('torch', '?')}; JAX {v.get('jax', '?')} (Equinox "
            f"{v.get('equinox', '?')}) on {dev.get('jax', '?')}; TF32 off, matmul precision highest",
            f"  inputs {', '.join(cert.get('inputs', []))} (seed {cert.get('seed')}, {cert.get('dtype')}); tolerance "
            f"rtol {tol.get('rtol')} atol {tol.get('atol')} × max|torch|; " + _batch_text(cert)] \
        + ([f"  stochastic forward ({cert['stochastic']['why']}): the draws are {cert['stochastic']['draws']}"]
           if cert.get("stochastic") else []) \
        + [f"  {side} loaded: {note}" for side, note in (cert.get("loaded") or {}).items()] \
        + ([f"  step: {cert['step']['optimizer']}, lr {cert['step']['lr']}, in {cert['step']['why']}"]
           if cert.get("step") else [])


def _batch_text(cert: dict) -> str:
    b = cert.get("batch_axis")
    if b is None:
        return "the JAX model is vmapped over the batch"
    if b["axis"] is None:
        return f"the JAX model takes the inputs whole, no batch axis ({b['why']})"
    return f"the JAX model is vmapped over the batch ({b['why']})"


#: the comment fwport writes on a batched module's ``def __call__`` line (modules.py's BATCHED_MARK)
_BATCHED_MARK = "# batched module:"


def _batched_module(translated: Path, model: str) -> bool:
    """Whether the translation's class ``model`` is a batched module (torch2jax: a forward that needs the batch axis
    itself keeps PyTorch's layout and takes the whole batch): its ``def __call__`` line carries fwport's comment, so
    the JAX model is called without jax.vmap, as ``--batch-axis none`` says."""
    import ast

    try:
        text = translated.read_text()
        tree = ast.parse(text)
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    lines = text.splitlines()
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == model:
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "__call__" and fn.body:
                    return any(_BATCHED_MARK in line for line in lines[fn.lineno - 1:fn.body[0].lineno - 1])
    return False
