"""The verify certificate: writing it (JSON) and rendering it as a readable table. Pure data."""
from __future__ import annotations

import json
import os
import tempfile


def write_json(cert: dict, path: str) -> None:
    """Atomically: a temp file in the same folder, then a rename."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".fwport-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(cert, fh, indent=2, sort_keys=False, default=str)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _num(x) -> str:
    return "-" if x is None else f"{x:.2e}"


def _row(e: dict, name_key: str = "name") -> str:
    mark = "ok  " if e.get("ok") else "FAIL"
    shape = f"  shapes {e['shape'][0]} vs {e['shape'][1]}" if e.get("shape") else ""
    detail = f"  {e['detail']}" if e.get("detail") else ""
    src = f"  ← {e['source']}" if e.get("source") else ""
    note = f"  ({e['note']})" if e.get("note") else ""
    return f"  {mark} {str(e.get(name_key)):<34} abs {_num(e.get('max_abs'))}  rel {_num(e.get('max_rel'))}{src}{shape}{detail}{note}"


def _keras_header(cert: dict, lines: list, v: dict, dev: dict) -> None:
    lines.append(f"fwport verify: {cert.get('original')} ({cert.get('model')}) vs {cert.get('translated')} "
                 f"({cert.get('translated_model')})")
    lines.append(f"  Keras {cert['keras']['major']} ({v.get('keras', '?')}, TensorFlow {v.get('tensorflow', '?')}) on "
                 f"{dev.get('keras', '?')}; torch {v.get('torch', '?')} on {dev.get('torch', '?')}; TF32 off")
    tol = cert.get("tolerance", {})
    lines.append(f"  inputs {', '.join(cert.get('inputs', []))} (seed {cert.get('seed')}, {cert.get('dtype')}, "
                 f"layout {cert.get('layout', {}).get('inputs')}); tolerance rtol {tol.get('rtol')} atol {tol.get('atol')} "
                 "× max|keras|")
    if cert.get("stochastic"):
        lines.append(f"  stochastic forward ({cert['stochastic']['why']}): the draws are {cert['stochastic']['draws']}")
    lines += [f"  {side} loaded: {note}" for side, note in (cert.get("loaded") or {}).items()]


def loading_results(loaded: dict | None) -> list[dict]:
    """A failed check where the original file runs as a whole and its translation does not (DETR's classes once
    named a later class in a field annotation: NameError on import). The verifier still compares the
    translation's definitions, loaded one by one, but a user importing the translated file gets the error."""
    original, translated = (loaded or {}).get("original") or "", (loaded or {}).get("translated") or ""
    head = "definitions only (the whole file stops at "
    if translated.startswith(head) and not original.startswith("definitions only"):
        why = translated[len(head):].split("); ")[0].removesuffix(")")
        return [{"name": "translated file", "ok": False,
                 "detail": f"importing it stops at {why}, where the original file runs as a whole"}]
    return []


def render(cert: dict, verbose: bool = False) -> str:
    if cert.get("direction") == "tf2jax":  # two stages and the end-to-end comparison
        from fwport.verify.tf2jax import render as render_chain
        return render_chain(cert, verbose)
    lines = []
    v = cert.get("versions", {})
    dev = cert.get("device", {})
    if cert.get("direction") == "torch2jax":
        from fwport.verify.torch2jax import render_header
        lines += render_header(cert)
    else:
        _keras_header(cert, lines, v, dev)
    res = cert.get("results", {})
    lines += [f"  FAIL {e['name']}: {e['detail']}" for e in res.get("loading") or []]
    for group, title in (("outputs", "forward (inference mode)"), ("input_gradients", "gradients w.r.t. inputs"),
                         ("gradients", "gradients w.r.t. parameters"), ("step", "after one SGD step (training mode)"),
                         ("train", "training (the files' own step function)"),
                         ("losses", "losses the training function returns"), ("trained", "parameters after training")):
        es = res.get(group) or []
        if not es:
            continue
        if group == "train":
            tr = cert.get("train", {})
            lines.append(f"  {tr.get('steps')} steps of {tr.get('step')}({', '.join(tr.get('batch', []))}); optimizer "
                         f"{tr.get('optimizer')}; tolerance rtol {tr.get('rtol')} atol {tr.get('atol')} × max|keras|"
                         + (f"; {tr['note']}" if tr.get("note") else ""))
        bad = [e for e in es if not e.get("ok")]
        lines.append(f"{title}: {len(es) - len(bad)}/{len(es)} within tolerance")
        for e in es if (verbose or group in ("outputs", "input_gradients")) else bad or es[:0]:
            lines.append(_row(e))
    layers = res.get("layers") or []
    if layers and (verbose or cert.get("verdict") != "pass"):
        lines.append("per layer (Keras layer → torch module):")
        for e in layers:
            lines.append(_row(dict(e, name=f"{e['layer']} {e['point']} → {e['torch']}")))
    for p in cert.get("problems", []) if not res else []:
        lines.append(f"  problem: {p}")
    for w in cert.get("warnings", []):
        lines.append(f"  warning: {w}")
    fd = cert.get("first_diverging")
    if fd:
        lines.append(f"first diverging layer: {fd['layer']} ({fd.get('point')}, torch {fd.get('torch')}, "
                     f"rule {fd.get('rule') or '-'}): max abs {_num(fd.get('max_abs'))}, rel {_num(fd.get('max_rel'))}")
    t = cert.get("timing")
    if t:
        lines.append("time: " + ", ".join(f"{k} {v:.2f}s" for k, v in t.items()))
    verdict = cert.get("verdict", "error").upper()
    lines.append(f"verdict: {verdict}")
    return "\n".join(lines)
