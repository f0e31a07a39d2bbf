"""``fwport verify`` and ``fwport weights`` (click commands; registered in fwport/core/cli.py's group).

Imports no framework: the frameworks run in subprocesses (see run.py).
"""
from __future__ import annotations

import json
import sys

import click

CHECKS = ("forward", "grad", "step", "train")


def _json_arg(text: str | None, what: str) -> dict:
    if not text:
        return {}
    try:
        v = json.loads(text)
    except json.JSONDecodeError as e:
        raise click.BadParameter(f"not JSON ({e.msg}); e.g. --args '{{\"units\": 32}}'", param_hint=what) from None
    if not isinstance(v, dict):
        raise click.BadParameter("expected a JSON object of keyword arguments", param_hint=what)
    return v


def _batch_axis(value: str) -> str:
    """--batch-axis: auto, none, an axis, or one per input (``0,0,none,0``)."""
    parts = [p.strip() for p in str(value).split(",")]
    if value in ("auto", "none") or all(p == "none" or p.isdigit() for p in parts):
        return ",".join(parts)
    raise click.BadParameter(f"{value!r}: auto, none, an axis (0, 1), or one per input (0,0,none,0)")


def _defines(items) -> dict:
    """``--define NAME=VALUE`` options → {name: value}, the value read as JSON where it is JSON."""
    out = {}
    for item in items:
        name, eq, text = item.partition("=")
        if not eq or not name.strip().isidentifier():
            raise click.BadParameter(f"{item!r}: expected NAME=VALUE, e.g. n_classes=2", param_hint="--define")
        try:
            out[name.strip()] = json.loads(text)
        except json.JSONDecodeError:
            out[name.strip()] = text
    return out


def _checks(text: str) -> tuple[str, ...]:
    items = tuple(c.strip() for c in text.split(",") if c.strip())
    bad = [c for c in items if c not in CHECKS]
    if bad or not items:
        raise click.BadParameter(f"{', '.join(bad) or 'nothing'}: use a comma-separated subset of {', '.join(CHECKS)}",
                                 param_hint="--check")
    return items


def _fail(e, command: str = "verify") -> None:
    click.echo(f"fwport {command}: error: {e}", err=True)
    if getattr(e, "detail", "") and getattr(e, "kind", "") in ("crash", "exception", "timeout"):
        click.echo(f"--- {e.side} side output (last lines) ---\n{e.detail.rstrip()}", err=True)
    sys.exit(2)


@click.command("verify")
@click.argument("original", type=click.Path(exists=True, dir_okay=False))
@click.argument("translated", type=click.Path(exists=True, dir_okay=False))
@click.option("--model", "model", required=True, help="Class, builder function or model object in ORIGINAL, or a call "
              "whose names resolve in each file: 'ResNet(ResidualBlock, [2, 2, 2])'.")
@click.option("--translated-model", help="Its name in TRANSLATED when it differs.")
@click.option("--args", "args", help="Constructor/builder keyword arguments as a JSON object.")
@click.option("--input", "inputs", multiple=True, help="dtype[d0,d1,...][:high], in the original's layout; repeatable.")
@click.option("--check", "check", default="forward,grad", show_default=True, help="forward,grad,step,train")
@click.option("--dtype", type=click.Choice(["float32", "float64"]), default="float32", show_default=True)
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--rtol", type=float, help="Relative tolerance (default: 1e-5 for float32, 1e-10 for float64).")
@click.option("--atol", type=float, help="Absolute tolerance as a fraction of each tensor's max |value|.")
@click.option("--keras", "keras", type=click.Choice(["2", "3"]), help="Keras the original targets (default: detected).")
@click.option("--direction", type=click.Choice(["tf2torch", "torch2jax", "tf2jax"]))
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--lr", type=float, default=0.1, show_default=True, help="Learning rate of the --check step SGD step.")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds per framework request.")
@click.option("--train-step", "train_step", help="--check train: the training-step function of both files, "
              "called once per batch (default: train_step).")
@click.option("--batch", "batch", multiple=True, help="--check train: one argument of the step function per "
              "option, as dtype[d0,...][:high] (labels: int64[8]:10); repeatable.")
@click.option("--steps", type=int, default=3, show_default=True, help="--check train: optimizer steps (one batch each).")
@click.option("--load", "load", type=click.Choice(["auto", "whole", "defs"]), default="auto", show_default=True,
              help="How each file is loaded: whole runs it as a script; defs runs only its imports, functions, "
              "classes and call-free assignments (a failed import the definitions do not use is stubbed); auto runs "
              "it whole and, if that fails, its definitions only (the certificate says so).")
@click.option("--batch-axis", "batch_axis", default="auto", show_default=True, callback=lambda c, p, v: _batch_axis(v),
              help="torch2jax: where each input holds the batch axis, for jax.vmap: 0 (first), 1 (second: PyTorch's "
              "sequence layers take (L, N, ...), and a recurrent state (layers, N, H)), none (the model takes its inputs "
              "whole: a graph's features and adjacency), or one per input (0,0,none,0: none for an input every "
              "example shares); auto probes the original on the two halves of the batch split on axis 0, then 1. The "
              "outputs' axes are probed the same way.")
@click.option("--define", "defines", multiple=True, metavar="NAME=VALUE",
              help="A module-level name both files read, set before they load (a value the script computes from "
              "its data: --define n_classes=2); VALUE is JSON, else a string. Repeatable.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the certificate here.")
@click.option("-v", "--verbose", is_flag=True, help="List every tensor, not only the failing ones.")
def verify_command(original, translated, model, translated_model, args, inputs, check, dtype, device, rtol, atol,
                   keras, direction, seed, lr, timeout, train_step, batch, steps, load, batch_axis, defines, json_path,
                   verbose) -> None:
    """Prove TRANSLATED computes the same model as ORIGINAL: exit 0 pass, 1 mismatch, 2 error."""
    from fwport.verify.certificate import render, write_json
    from fwport.verify.run import Options, VerifyError, verify

    opts = Options(original, translated, model, translated_model, _json_arg(args, "--args"), list(inputs),
                   _checks(check), dtype, device, rtol, atol, int(keras) if keras else None, direction, seed,
                   timeout, lr, train_step=train_step or "train_step", batch=list(batch), steps=steps, load=load,
                   batch_axis=batch_axis, defines=_defines(defines))
    try:
        cert = verify(opts)
    except VerifyError as e:
        if json_path:
            write_json({"verdict": "error", "error": str(e), "side": e.side, "kind": e.kind,
                        "detail": e.detail[-4000:]}, json_path)
        _fail(e)
        return
    click.echo(render(cert, verbose))
    if json_path:
        write_json(cert, json_path)
    sys.exit(0 if cert["verdict"] == "pass" else 1)


@click.command("weights")
@click.argument("checkpoint", type=click.Path(exists=True, dir_okay=False))
@click.option("--source", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The original source that defines the model (Keras for --to .pt, PyTorch for --to .eqx).")
@click.option("--model", "model", required=True, help="Class, builder function or model object in --source.")
@click.option("--to", "to", required=True, multiple=True,
              help="model.pt and/or model.safetensors (from Keras), or model.eqx (from PyTorch); repeatable.")
@click.option("--translated", type=click.Path(exists=True, dir_okay=False),
              help="The translated file (default: translate --source now).")
@click.option("--translated-model", help="The model's name in the translated file when it differs.")
@click.option("--args", "args", help="Constructor/builder keyword arguments as a JSON object.")
@click.option("--input", "inputs", multiple=True, help="Input spec, when the model does not declare its input shape "
              "(--to .eqx --check: always, in PyTorch's layout).")
@click.option("--keras", "keras", type=click.Choice(["2", "3"]))
@click.option("--check", is_flag=True, help="Load both checkpoints and compare their forward outputs.")
@click.option("--timeout", type=float, default=600.0, show_default=True)
def weights_command(checkpoint, source, model, to, translated, translated_model, args, inputs, keras, check,
                    timeout) -> None:
    """Convert a checkpoint for the translated model, by the same maps as verify, matched by name.

    A Keras checkpoint (.weights.h5, .keras) → a PyTorch state_dict (--to .pt/.pth/.safetensors), by the
    rules' weight maps. A PyTorch state_dict (torch.save(model.state_dict(), f); .pt/.pth/.safetensors) →
    the translated Equinox model's leaves (--to model.eqx), read back with
    `model = eqx.tree_deserialise_leaves("model.eqx", model)` (`model, state = ...(f, (model, state))` for a
    model with BatchNorm), as the translation of model.load_state_dict(torch.load(f)) does."""
    from fwport.verify.certificate import render
    from fwport.verify.run import Options, Session, VerifyError, _verify, convert

    eqx_to = [t for t in to if t.endswith(".eqx")]
    if eqx_to:
        if len(to) > 1:
            raise click.BadParameter("--to model.eqx is one file, written alone", param_hint="--to")
        if not checkpoint.endswith((".pt", ".pth", ".safetensors")):
            raise click.BadParameter(f"{checkpoint}: --to .eqx converts a PyTorch state_dict (.pt, .pth or "
                                     ".safetensors)", param_hint="CHECKPOINT")
        _weights_to_eqx(checkpoint, source, model, eqx_to[0], translated, translated_model, _json_arg(args, "--args"),
                        list(inputs), check, timeout)
        return
    for t in to:
        if not (t.endswith(".pt") or t.endswith(".pth") or t.endswith(".safetensors")):
            raise click.BadParameter(f"{t}: write .pt, .pth or .safetensors (or .eqx from a PyTorch state_dict)",
                                     param_hint="--to")
    kv = int(keras) if keras else None
    try:
        with Session() as session:
            rep = convert(checkpoint, source, model, list(to), translated, _json_arg(args, "--args"), list(inputs),
                          kv, "cpu", timeout, session)
            if not rep["ok"]:
                for p in rep["problems"]:
                    click.echo(f"fwport weights: {p}", err=True)
                sys.exit(1)
            click.echo(f"wrote {', '.join(to)}: {len(rep['keys'])} tensors from {checkpoint}")
            if check:
                import tempfile
                from pathlib import Path
                with tempfile.TemporaryDirectory() as d:
                    tfile = translated
                    if tfile is None:
                        from fwport.core.pipeline import translate_source
                        tfile = str(Path(d) / "translated.py")
                        Path(tfile).write_text(translate_source(Path(source).read_text(encoding="utf-8"), source).output,
                                               encoding="utf-8")
                    opts = Options(source, tfile, model, args=_json_arg(args, "--args"), inputs=list(inputs),
                                   checks=("forward",), keras=kv, device="cpu", timeout=timeout,
                                   weights_file=str(Path(checkpoint).resolve()), torch_state_file=str(Path(to[0]).resolve()))
                    cert = _verify(opts, session)
                click.echo(render(cert))
                sys.exit(0 if cert["verdict"] == "pass" else 1)
    except VerifyError as e:
        _fail(e, "weights")


def _weights_to_eqx(checkpoint, source, model, to, translated, translated_model, args, inputs, check, timeout) -> None:
    """``fwport weights model.pt --source model.py --model Net --to model.eqx [--check --input ...]``."""
    import tempfile
    from pathlib import Path

    from fwport.verify import torch2jax
    from fwport.verify.certificate import render
    from fwport.verify.run import Options, Session, VerifyError

    if check and not inputs:
        raise click.BadParameter("--check needs the input shape: --input 'float32[4,20]' (PyTorch's layout)",
                                 param_hint="--input")
    try:
        with Session() as session, tempfile.TemporaryDirectory(prefix="fwport-weights-") as d:
            if translated is None:
                from fwport.core.pipeline import translate_source
                from fwport.verify.run import _read
                translated = str(Path(d) / "translated.py")
                Path(translated).write_text(translate_source(_read(source, "original"), source, "torch2jax").output,
                                            encoding="utf-8")
            rep = torch2jax.convert(checkpoint, source, model, to, translated, args, timeout, session, translated_model)
            if not rep["ok"]:
                for p in rep["problems"]:
                    click.echo(f"fwport weights: {p}", err=True)
                click.echo(f"fwport weights: {to} not written", err=True)
                sys.exit(1)
            click.echo(f"wrote {to}: {rep['arrays']} arrays from {checkpoint}"
                       + (" (model, state): read it with eqx.tree_deserialise_leaves(f, (model, state))"
                          if rep["stateful"] else ""))
            if check:
                opts = Options(source, translated, model, translated_model, args, inputs, ("forward",), device="cpu",
                               direction="torch2jax", timeout=timeout,
                               torch_state_file=str(Path(checkpoint).resolve()), eqx_file=str(Path(to).resolve()))
                cert = torch2jax.verify(opts, session)
                click.echo(render(cert))
                sys.exit(0 if cert["verdict"] == "pass" else 1)
    except VerifyError as e:
        _fail(e, "weights")
