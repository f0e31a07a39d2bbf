"""``fwport verify`` for TensorFlow/Keras → JAX/Equinox (``fwport tf2jax``), end to end, by the two
verifiers it is made of. Imports no framework.

The original is translated by tf2torch as ``fwport tf2jax``'s first stage does (the intermediate
PyTorch file). Then, on the same inputs:

1. Keras against that PyTorch file (run.py's tf2torch verification): the Keras model's weights
   (seeded values, or ``--weights``-style checkpoint) moved by the rules' weight maps into a torch
   state_dict, which is kept;
2. that PyTorch file, holding that state_dict, against the JAX translation (torch2jax.py): the state
   moved by name into the Equinox model (eqx_layouts.py);
3. Keras's outputs against JAX's, directly (JAX's in Keras's layout).

Each framework runs in its own subprocess. The verdict is a pass only when all three pass; the
certificate holds both stages' certificates and the end-to-end comparison.
"""
from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np


def verify(opts, session) -> dict:
    from fwport.core.pipeline import translate_source
    from fwport.core.rule import load_pack
    from fwport.packs.tf2torch import detect_keras_version
    from fwport.verify import torch2jax
    from fwport.verify.run import TOLERANCES, VerifyError, _read, _verify, compare
    from fwport.verify.spec import to_source_layout

    if set(opts.checks) - {"forward", "grad"}:
        raise VerifyError("tf2jax verifies forward and grad (--check step / train: verify each stage on its own)",
                          kind="user")
    t0 = time.perf_counter()
    original = _read(opts.original, "original")
    keras_major, _ = detect_keras_version(original, opts.keras)
    rtol, atol = TOLERANCES[opts.dtype]
    rtol = opts.rtol if opts.rtol is not None else rtol
    atol = opts.atol if opts.atol is not None else atol
    with tempfile.TemporaryDirectory(prefix="fwport-verify-tf2jax-") as tmp:
        d = Path(tmp)
        intermediate = d / "intermediate_torch.py"
        first = translate_source(original, opts.original, load_pack("tf2torch"), {"keras": keras_major})
        intermediate.write_text(first.output, encoding="utf-8")
        state = d / "state.npz"
        keep: dict = {}
        cert1 = _verify(dataclasses.replace(opts, translated=str(intermediate), translated_model=None,
                                            direction="tf2torch"), session, keep_state=str(state), keep=keep)
        cert = {"fwport_verify": 1, "direction": "tf2jax", "original": opts.original, "translated": opts.translated,
                "model": opts.model, "translated_model": opts.translated_model or opts.model, "args": opts.args,
                "dtype": opts.dtype, "seed": opts.seed, "checks": list(opts.checks),
                "tolerance": {"rtol": rtol, "atol": atol,
                              "rule": "|keras - jax| <= atol * max|keras| + rtol * |keras|, per tensor"},
                "stages": {"tf2torch": cert1}}
        if cert1.get("verdict") != "pass" or not state.is_file():
            cert.update(verdict=cert1.get("verdict", "mismatch"), results={},
                        problems=[f"tf2torch: {p}" for p in cert1.get("problems", [])] or ["tf2torch stage failed"])
            return cert
        xs = keep["xs_target"]
        specs = [f"{x.dtype.name}[{','.join(map(str, x.shape))}]" for x in xs]
        jax_out: dict = {}
        cert2 = torch2jax.verify(dataclasses.replace(opts, original=str(intermediate), translated_model=opts.translated_model,
                                                     inputs=specs, direction="torch2jax", torch_state_file=str(state),
                                                     rtol=rtol, atol=atol), session, xs=xs, keep=jax_out)
        cert2["original"] = f"{opts.original} (tf2torch)"
        cert["stages"]["torch2jax"] = cert2
    results = []
    for i, k in enumerate(keep["outputs"]):
        j = jax_out.get(f"out{i}")
        got = to_source_layout(j, keep["out_layout"]) if j is not None else np.zeros(0)
        results.append({"name": f"output {i}", **compare(k, got, rtol, atol)})
    if len(jax_out) != len(keep["outputs"]):
        results.append({"name": "output count", "ok": False,
                        "detail": f"Keras returns {len(keep['outputs'])} outputs, JAX {len(jax_out)}"})
    ok = cert2.get("verdict") == "pass" and bool(results) and all(e["ok"] for e in results)
    cert["results"] = {"outputs": results}
    cert["verdict"] = "pass" if ok else "mismatch"
    cert["problems"] = [f"torch2jax: {p}" for p in cert2.get("problems", [])] + \
                       [f"end to end: {e['name']}" for e in results if not e["ok"]]
    cert["timing"] = {"total": time.perf_counter() - t0}
    return cert


def render(cert: dict, verbose: bool = False) -> str:
    from fwport.verify.certificate import _row, render as render_one

    lines = [f"fwport verify (tf2jax): {cert.get('original')} ({cert.get('model')}) vs {cert.get('translated')} "
             f"({cert.get('translated_model')}), through the tf2torch translation"]
    for name, stage in cert.get("stages", {}).items():
        lines.append(f"--- stage {name} ---")
        lines += ["  " + line for line in render_one(stage, verbose).splitlines()]
    es = cert.get("results", {}).get("outputs") or []
    if es:
        bad = [e for e in es if not e.get("ok")]
        tol = cert.get("tolerance", {})
        lines.append(f"--- end to end: Keras against JAX (rtol {tol.get('rtol')} atol {tol.get('atol')} × max|keras|) ---")
        lines.append(f"forward (inference mode): {len(es) - len(bad)}/{len(es)} within tolerance")
        lines += [_row(e) for e in es]
    for p in cert.get("problems", []):
        lines.append(f"  problem: {p}")
    t = cert.get("timing")
    if t:
        lines.append("time: " + ", ".join(f"{k} {v:.2f}s" for k, v in t.items()))
    lines.append(f"verdict: {cert.get('verdict', 'error').upper()}")
    return "\n".join(lines)
