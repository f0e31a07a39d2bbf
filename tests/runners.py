"""Running a program and its translation side by side, each in its own subprocess (shared by the tests).

A test writes the program (``model.py``) and a driver (``drive.py``, which imports the model, computes
and prints one line ``RESULT <json>``) into a folder per side; the driver runs with the folder and the
side as its arguments. On every side but ``keras`` TensorFlow and Keras are made unimportable, so a
translation that still needs them fails there instead of passing by accident.

torch2jax: a driver made of a head (TORCH_OR_JAX, SIDE_HEAD) and a body runs on the PyTorch program and on its
translation, with PyTorch unimportable on the JAX side; verify_model and verify_torch2jax run ``fwport verify``."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import error_findings, t2j

#: run a script with TensorFlow and Keras unimportable (the script and its arguments follow)
WITHOUT_TENSORFLOW = ["-c", "import sys; sys.modules['tensorflow'] = None; sys.modules['keras'] = None;"
                            "sys.argv = sys.argv[1:]; exec(open(sys.argv[0]).read())"]


def run_side(directory: Path, side: str, code: str, driver: str, *args: str, timeout: int = 600,
             **env: str) -> dict:
    """``code`` as model.py and ``driver`` as drive.py in ``directory`` (made here), the driver run with
    ``directory`` and ``args`` as its arguments (TensorFlow unimportable unless ``side`` is "keras",
    TF_CPP_MIN_LOG_LEVEL=3 and ``env`` set); the JSON of its last ``RESULT`` line."""
    directory.mkdir()
    (directory / "model.py").write_text(code)
    (directory / "drive.py").write_text(driver)
    pre = [] if side == "keras" else WITHOUT_TENSORFLOW
    p = subprocess.run([sys.executable, *pre, str(directory / "drive.py"), str(directory), *args], capture_output=True,
                       text=True, timeout=timeout, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **env))
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert line, p.stderr[-3000:]
    return json.loads(line[-1][len("RESULT "):])


def keras_and_torch(tmp_path: Path, keras_code: str, torch_code: str, driver: str, **env: str) -> tuple[dict, dict]:
    """The driver's results on the Keras program and on its torch translation (run_side; the side is the
    driver's second argument)."""
    return (run_side(tmp_path / "keras", "keras", keras_code, driver, "keras", **env),
            run_side(tmp_path / "torch", "torch", torch_code, driver, "torch", **env))


def compare_fit(keras_out: dict, torch_out: dict, keys: list[str], *, atol: float = 1e-6) -> None:
    """The results of a fit driver (``history``: the fit's history, ``evaluate``, ``kernels``: the weights after it,
    and ``predict`` where the driver gives it) on the Keras side and the torch side agree, within 2e-4 relative;
    the history holds exactly ``keys``."""
    import numpy as np

    kh, th = keras_out["history"], torch_out["history"]
    assert sorted(th) == sorted(kh) == sorted(keys)
    for k in kh:
        np.testing.assert_allclose(th[k], kh[k], rtol=2e-4, atol=atol, err_msg=k)
    np.testing.assert_allclose(torch_out["evaluate"], keras_out["evaluate"], rtol=2e-4, atol=atol)
    assert ("predict" in torch_out) == ("predict" in keras_out)
    if "predict" in keras_out:
        np.testing.assert_allclose(torch_out["predict"], keras_out["predict"], rtol=2e-4, atol=2e-5)
    for a, b in zip(keras_out["kernels"], torch_out["kernels"], strict=True):
        np.testing.assert_allclose(b, a, rtol=2e-4, atol=2e-5)


#: the head of a torch2jax driver: `side` ("torch" or "jax"; on "jax" torch is unimportable and JAX computes in
#: float64), the program's namespace `ns`; the driver's body follows and saves its outputs with np.save(OUT, ...)
TORCH_OR_JAX = """
import sys, numpy as np, runpy
side, OUT = sys.argv[1], sys.argv[3]
if side == "jax":
    sys.modules["torch"] = None
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import equinox as eqx
else:
    import torch
    torch.set_default_dtype(torch.float64)
ns = runpy.run_path(sys.argv[2])
"""


def torch_and_jax(tmp_path: Path, torch_code: str, jax_code: str, body: str, timeout: int = 300) -> tuple:
    """The arrays a driver (TORCH_OR_JAX + ``body``) saves on the PyTorch program and on its JAX translation,
    each run in its own subprocess: (torch's, jax's)."""
    import numpy as np

    (tmp_path / "torch_side.py").write_text(torch_code)
    (tmp_path / "jax_side.py").write_text(jax_code)
    (tmp_path / "drive.py").write_text(TORCH_OR_JAX + body)
    for side in ("torch", "jax"):
        p = subprocess.run([sys.executable, "drive.py", side, f"{side}_side.py", f"{side}.npy"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=timeout)
        assert p.returncode == 0, f"the {side} side failed:\n{p.stderr[-3000:]}"
    return np.load(tmp_path / "torch.npy"), np.load(tmp_path / "jax.npy")


#: the head of a driver run as ``python -c SIDE_HEAD + body SIDE PROGRAM [OUT ...]`` (saved_arrays, printed_json):
#: `side` ("torch" or "jax"; on "jax" torch is unimportable and JAX computes in float64), the program's namespace `ns`,
#: numpy as `np`, json and sys; the body computes on `side` and saves or prints what it compares
SIDE_HEAD = """
import json, runpy, sys
import numpy as np
side = sys.argv[1]
if side == "jax":
    sys.modules["torch"] = None  # the translation must not need it
    import jax
    jax.config.update("jax_enable_x64", True)
ns = runpy.run_path(sys.argv[2])
"""


def run_driver(driver: str, *args, timeout: int = 300, **kw) -> subprocess.CompletedProcess:
    """``python -c driver args...`` (``kw`` to subprocess.run: cwd, env), which must succeed."""
    p = subprocess.run([sys.executable, "-c", driver, *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, **kw)
    assert p.returncode == 0, p.stderr[-3000:]
    return p


def printed_json(driver: str, *args, **kw):
    """The JSON of the last line a driver (run_driver) prints."""
    return json.loads(run_driver(driver, *args, **kw).stdout.strip().splitlines()[-1])


def saved_arrays(driver: str, side: str, program: Path, out: Path, *args) -> list:
    """The arrays a driver (SIDE_HEAD + a body that ends ``np.savez(sys.argv[3], *arrays)``) saves on ``side`` of
    ``program``, in their order."""
    import numpy as np

    run_driver(driver, side, program, out, *args)
    with np.load(out) as z:
        return [z[k] for k in sorted(z.files, key=lambda k: int(k.split("_")[1]))]


def both_sides(tmp_path, src: str, body: str) -> tuple[list, list]:
    """The arrays ``body`` (SIDE_HEAD's driver: ``side``, ``ns``, ``conv`` an array of the side) saves on the
    original and on its translation (which has no error)."""
    src = textwrap.dedent(src).lstrip("\n")
    r = t2j(src, "f.py")
    assert not error_findings(r), r.findings
    (tmp_path / "orig.py").write_text(src)
    (tmp_path / "jax.py").write_text(r.output)
    driver = SIDE_HEAD + textwrap.dedent("""
    if side == "torch":
        import torch
        conv = torch.from_numpy
    else:
        import jax.numpy as jnp
        conv = jnp.asarray
    """) + textwrap.dedent(body)
    return [saved_arrays(driver, side, tmp_path / p, tmp_path / f"{side}.npz")
            for side, p in (("torch", "orig.py"), ("jax", "jax.py"))]


def verify_torch2jax(original: Path, translated: Path, model: str, inputs: list[str], **options) -> dict:
    """The certificate of ``fwport verify`` of ``translated`` against ``original`` (torch2jax on the CPU, forward and
    gradients in float64 unless ``options`` say otherwise; ``options`` are verify's Options)."""
    from fwport.verify.run import Options, Session, verify

    options = {"checks": ("forward", "grad"), "dtype": "float64", **options}
    opts = Options(str(original), str(translated), model, inputs=inputs, device="cpu", direction="torch2jax",
                   **options)
    with Session() as session:
        return verify(opts, session)


def verify_model(tmp_path: Path, source: str, model: str, inputs: list[str], **options) -> dict:
    """The torch2jax translation of snippet ``source`` (helpers.t2j), which has no errors, verified against it
    (verify_torch2jax with ``options``) and passing: the certificate."""
    original = tmp_path / "model.py"
    original.write_text(textwrap.dedent(source).lstrip("\n"))
    r = t2j(source)
    assert not error_findings(r), r.findings
    translated = tmp_path / "model_jax.py"
    translated.write_text(r.output)
    cert = verify_torch2jax(original, translated, model, inputs, **options)
    assert cert["verdict"] == "pass", str(cert)[:3000]
    return cert


def keras3_forward_verified(tmp_path: Path, src: str, out: str, model: str, shape: str) -> None:
    """``fwport verify`` of ``out`` (a tf2torch translation) against the Keras program ``src`` under Keras 3, forward
    only on the CPU, for ``model`` called on one input ``shape``: asserts the verdict is pass (skips without torch
    or TensorFlow)."""
    import pytest

    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model, inputs=[shape],
                          checks=("forward",), device="cpu", keras=3))
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
