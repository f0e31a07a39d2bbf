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
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import error_findings, t2j

#: run a script with TensorFlow and Keras unimportable (the script and its arguments follow)
WITHOUT_TENSORFLOW = ["-c", "import sys; sys.modules['tensorflow'] = None; sys.modules['keras'] = None;"
                            "sys.argv = sys.argv[1:]; exec(open(sys.argv[0]).read())"]


#: a warm worker (runners.Warm): runs request after request (a script's path and argv) in this one process, its
#: stdout and stderr captured, as ``python SCRIPT ARGS`` would; after each, what a script may change that a new
#: process would not have is put back: sys.argv/path/modules (a module it imported from outside the installed
#: packages is dropped, a module it blocked with None is back), the working folder, Keras's session and global
#: settings, torch's seed (random, as in a new process), default dtype and grad mode
_WARM = r"""
import contextlib, io, json, os, runpy, sys, sysconfig, traceback
if sys.argv[1] == "without-tensorflow":
    sys.modules["tensorflow"] = None
    sys.modules["keras"] = None
    sys.modules["tf_keras"] = None
INSTALLED = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")})
proto = os.fdopen(os.dup(1), "w")
for line in sys.stdin:
    req = json.loads(line)
    argv, path, modules, cwd = sys.argv, list(sys.path), dict(sys.modules), os.getcwd()
    out, err, rc = io.StringIO(), io.StringIO(), 0
    sys.argv = list(req["argv"])
    try:
        os.chdir(req["cwd"])
        sys.path.insert(0, req["path0"])
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                runpy.run_path(sys.argv[0], run_name="__main__")
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if not isinstance(e.code, (int, type(None))):
                    print(e.code, file=sys.stderr)
            except BaseException:
                rc = 1
                traceback.print_exc()
    finally:
        sys.argv, sys.path[:] = argv, path
        os.chdir(cwd)
        for m in list(sys.modules):
            if m not in modules:
                f = getattr(sys.modules[m], "__file__", None)
                if sys.modules[m] is None or f and not os.path.abspath(f).startswith(INSTALLED):
                    del sys.modules[m]
            elif sys.modules[m] is None and modules[m] is not None:
                sys.modules[m] = modules[m]
        try:
            for k in ("keras", "tf_keras"):
                if sys.modules.get(k) is not None:
                    sys.modules[k].backend.clear_session()
            if sys.modules.get("tensorflow") is not None:
                import tensorflow as tf
                tf.config.run_functions_eagerly(False)
            if sys.modules.get("keras") is not None:
                import keras
                keras.config.set_floatx("float32")
                keras.config.set_image_data_format("channels_last")
                keras.config.set_dtype_policy("float32")
            if sys.modules.get("jax") is not None:
                import jax
                jax.config.update("jax_enable_x64", False)
            if sys.modules.get("torch") is not None:
                import torch
                torch.seed()  # a new process's seed: not the one a run set
                torch.set_default_dtype(torch.float32)
                torch.set_grad_enabled(True)
        except BaseException:
            rc = rc or 1
            err.write("resetting the worker failed:\n" + traceback.format_exc())
    with open(req["reply"], "w") as fh:
        json.dump({"returncode": rc, "stdout": out.getvalue(), "stderr": err.getvalue()}, fh)
    proto.write("DONE\n")
    proto.flush()
"""


class Warm:
    """Warm framework subprocesses for run_side: one per side ("keras": TensorFlow importable; any other: not) and
    environment, each running driver after driver (_WARM) so that TensorFlow or torch is imported once per test file
    rather than once per run; a test file's workers end when a test of another file runs one."""

    workers: dict = {}
    owner: str | None = None
    verify_session = None  # fwport verify's Session of the test file (Warm.session)

    @classmethod
    def _own(cls) -> None:
        owner = os.environ.get("PYTEST_CURRENT_TEST", "").split("::")[0]
        if owner != cls.owner:
            cls.close()
            cls.owner = owner

    @classmethod
    def session(cls):
        """A ``fwport verify`` Session shared by the test file's verifications (its workers are made to be reused)."""
        from fwport.verify.run import Session

        cls._own()
        if cls.verify_session is None:
            cls.verify_session = Session()
        return cls.verify_session

    @classmethod
    def run(cls, script: Path | str, args: list, side: str, env: dict | None = None, timeout: float = 600,
            cwd: Path | str | None = None) -> subprocess.CompletedProcess:
        """As ``subprocess.run([python, script, *args], cwd=cwd, env=os.environ + env)`` with its output captured
        (``script`` a Path: a file; a str: the code of ``python -c``), in the worker of ``side`` (TensorFlow
        unimportable on the "torch" side; PyTorch and JAX each in their own worker)."""
        import selectors
        import tempfile
        import time

        env = {k: str(v) for k, v in (env or {}).items()}
        cwd = os.path.abspath(cwd or os.getcwd())

        cls._own()
        block = "without-tensorflow" if side == "torch" else "with-tensorflow"
        key = (side, tuple(sorted((k, v) for k, v in dict(os.environ, **env).items()  # a test's monkeypatched
                                  if k != "PYTEST_CURRENT_TEST")))  # variable: its own worker (not pytest's test name)
        proc = cls.workers.get(key)
        if proc is None or proc.poll() is not None:
            proc = subprocess.Popen([sys.executable, "-c", _WARM, block], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=dict(os.environ, **env))
            cls.workers[key] = proc
        with tempfile.TemporaryDirectory() as d:
            if isinstance(script, str):  # python -c: the code from a file, the working folder first on the path
                (Path(d) / "c.py").write_text(script)
                argv, path0 = [str(Path(d) / "c.py"), *map(str, args)], cwd
            else:
                argv = [os.path.join(cwd, script), *map(str, args)]
                path0 = os.path.dirname(argv[0])
            reply = Path(d) / "reply.json"
            proc.stdin.write((json.dumps({"argv": argv, "reply": str(reply), "cwd": cwd, "path0": path0}) + "\n")
                             .encode())
            proc.stdin.flush()
            deadline, buf = time.monotonic() + timeout, b""
            with selectors.DefaultSelector() as sel:
                sel.register(proc.stdout, selectors.EVENT_READ)
                while b"DONE\n" not in buf:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        proc.kill()
                        proc.wait()
                        del cls.workers[key]
                        raise subprocess.TimeoutExpired(argv, timeout)
                    if sel.select(min(left, 1.0)):
                        chunk = os.read(proc.stdout.fileno(), 1 << 16)
                        if not chunk:
                            break
                        buf += chunk
                    elif proc.poll() is not None:
                        break
            if not reply.exists():
                proc.kill()
                code = proc.wait()
                del cls.workers[key]
                return subprocess.CompletedProcess(argv, code or 1, "", "the warm worker died")
            r = json.loads(reply.read_text())
        return subprocess.CompletedProcess(argv, r["returncode"], r["stdout"], r["stderr"])

    @classmethod
    def close(cls) -> None:
        if cls.verify_session is not None:
            cls.verify_session.close()
            cls.verify_session = None
        for proc in cls.workers.values():
            if proc.poll() is None:
                proc.stdin.close()
        for proc in cls.workers.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        cls.workers = {}


import atexit  # noqa: E402

atexit.register(Warm.close)

_IMPORTS = re.compile(r"^\s*(?:import|from)\s+(tensorflow|keras|tf_keras|jax|equinox|optax|torch)\b", re.M)


def side_of(code: str) -> str:
    """The warm worker a program's imports call for: "keras" where it imports TensorFlow or Keras, else "jax" where it
    imports JAX, Equinox or optax, else "torch" (TensorFlow unimportable there, as for a translation)."""
    import ast
    try:
        found = {a.name.split(".")[0] for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Import) for a in n.names}
        found |= {n.module.split(".")[0] for n in ast.walk(ast.parse(code))
                  if isinstance(n, ast.ImportFrom) and n.module and not n.level}
    except SyntaxError:
        found = set(_IMPORTS.findall(code))
    if found & {"tensorflow", "keras", "tf_keras"}:
        return "keras"
    return "jax" if found & {"jax", "equinox", "optax"} else "torch"


def python(*argv, side: str | None = None, env: dict | None = None, cwd=None, timeout: float = 600,
           check: bool = False) -> subprocess.CompletedProcess:
    """As ``subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=cwd)`` (``argv``:
    ``"-c", code, args...`` or ``script, args...``), run in the test file's warm worker of ``side`` (Warm; by default
    side_of the program's text) so that a framework is imported once per file. ``env`` may be a whole environment
    (``dict(os.environ, X=...)``): what it adds to or changes in os.environ is what the worker is started with.
    ``check``: assert the run succeeded (its stderr's end is the message)."""
    argv = [str(a) if isinstance(a, Path) else a for a in argv]
    if argv[0] == "-c":
        script, args, text = argv[1], argv[2:], argv[1]
    else:
        script = Path(argv[0])
        args, text = argv[1:], (Path(cwd or ".") / script).read_text()
    extra = {k: str(v) for k, v in (env or {}).items() if os.environ.get(k) != str(v)}
    missing = [k for k in os.environ if env is not None and len(env) >= len(os.environ) // 2 and k not in env]
    assert not missing, f"an environment without {missing[:3]}: use subprocess.run"
    p = Warm.run(script, list(args), side or side_of(text), extra, timeout, cwd)
    if check:
        assert p.returncode == 0, p.stderr[-3000:]
    return p


def run_side(directory: Path, side: str, code: str, driver: str, *args: str, timeout: int = 600,
             **env: str) -> dict:
    """``code`` as model.py and ``driver`` as drive.py in ``directory`` (made here), the driver run with
    ``directory`` and ``args`` as its arguments (TensorFlow unimportable unless ``side`` is "keras",
    TF_CPP_MIN_LOG_LEVEL=3 and ``env`` set; in a warm worker of the test file, Warm); the JSON of its last
    ``RESULT`` line."""
    directory.mkdir(parents=True)
    (directory / "model.py").write_text(code)
    (directory / "drive.py").write_text(driver)
    p = Warm.run(directory / "drive.py", [str(directory), *args], side, dict(env, TF_CPP_MIN_LOG_LEVEL="3"), timeout)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert line, p.stderr[-3000:]
    return json.loads(line[-1][len("RESULT "):])


def keras_and_torch(tmp_path: Path, keras_code: str, torch_code: str, driver: str, **env: str) -> tuple[dict, dict]:
    """The driver's results on the Keras program and on its torch translation (run_side; the side is the
    driver's second argument)."""
    return (run_side(tmp_path / "keras", "keras", keras_code, driver, "keras", **env),
            run_side(tmp_path / "torch", "torch", torch_code, driver, "torch", **env))


class Runs:
    """The results of keras_and_torch_cases: ``runs[name]`` is the case's (Keras result, torch result) as
    keras_and_torch gives them (None for a side not run); a case that failed on a side, or whose translation
    failed, raises an AssertionError that names it."""

    def __init__(self, results: dict):
        self.results = results

    def __getitem__(self, name: str) -> tuple:
        pair = []
        for side, r in zip(("keras", "torch"), self.results[name]):
            if isinstance(r, BaseException):
                raise AssertionError(f"case {name!r}: {r}") from r
            if r is not None and "error" in r:
                raise AssertionError(f"case {name!r} failed on the {side} side:\n{r['error']}")
            pair.append(None if r is None else r["result"])
        return tuple(pair)


def keras_and_torch_cases(directory: Path, cases: dict) -> Runs:
    """keras_and_torch for several cases at once (for a module-scoped fixture: the tests assert on their case's
    results). ``cases`` maps a name to (keras_code, torch_code, driver) or (keras_code, torch_code, driver, env):
    torch_code None runs the Keras side only, an exception (a translation that failed) is that case's failure; a
    case that fails on a side is that case's failure, not the others'."""
    results = {}
    for name, (kcode, tcode, driver, *env) in cases.items():
        env = env[0] if env else {}
        results[name] = []
        for side, code in (("keras", kcode), ("torch", tcode)):
            if isinstance(code, str):
                try:
                    code = {"result": run_side(directory / name / side, side, code, driver, side, **env)}
                except AssertionError as e:
                    code = {"error": str(e)}
            results[name].append(code)
    return Runs(results)


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
        p = Warm.run(Path("drive.py"), [side, f"{side}_side.py", f"{side}.npy"], f"torch2jax-{side}", {}, timeout,
                     tmp_path)
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


def run_driver(driver: str, *args, timeout: int = 300, cwd=None, env=None, side: str | None = None
               ) -> subprocess.CompletedProcess:
    """``python -c driver args...`` (in ``cwd``), which must succeed: in the test file's warm worker of ``side`` where
    one is named (``env`` then adds to the environment, runners.python), or of the first argument's side where that is
    "torch" or "jax" and no ``env`` gives the whole environment (SIDE_HEAD's drivers), else in a process of its own."""
    if side is not None:
        return python("-c", driver, *args, side=side, env=env, cwd=cwd, timeout=timeout, check=True)
    if env is None and args and str(args[0]) in ("torch", "jax"):  # SIDE_HEAD's: a warm worker per side
        p = Warm.run(driver, args, f"torch2jax-{args[0]}", {}, timeout, cwd)
    else:
        p = subprocess.run([sys.executable, "-c", driver, *map(str, args)], capture_output=True, text=True,
                           timeout=timeout, cwd=cwd, env=env)
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
    from fwport.verify.run import Options, verify

    options = {"checks": ("forward", "grad"), "dtype": "float64", **options}
    opts = Options(str(original), str(translated), model, inputs=inputs, device="cpu", direction="torch2jax",
                   **options)
    return verify(opts, Warm.session())


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
                          checks=("forward",), device="cpu", keras=3), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")


def keras3_verified(tmp_path: Path, src: str, out: str, model: str, shape: str | list[str],
                    checks: tuple[str, ...] = ("forward", "grad")) -> dict:
    """``fwport verify`` of ``out`` (a tf2torch translation) against the Keras program ``src`` (written as given) under
    Keras 3, ``checks`` (forward and gradients) on the CPU, for ``model`` called on one input ``shape`` (or a list of
    shapes, one per input): asserts the verdict is pass and gives the certificate (skips without torch or
    TensorFlow)."""
    import pytest

    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    from fwport.verify import Options, verify
    (tmp_path / "m.py").write_text(src)
    (tmp_path / "t.py").write_text(out)
    cert = verify(Options(str(tmp_path / "m.py"), str(tmp_path / "t.py"), model,
                          inputs=[shape] if isinstance(shape, str) else list(shape), checks=checks, device="cpu",
                          keras=3), Warm.session())
    assert cert["verdict"] == "pass", cert.get("problems") or cert.get("first_diverging")
    return cert


#: the starting kernel (3 -> 1) of ONE_DENSE_INIT
ONE_DENSE_KERNEL = [[0.2], [-0.1], [0.3]]
#: written before a program on each side (one_dense_result): ``init(m)`` sets ONE_DENSE_KERNEL and a zero bias into a
#: model of one Dense(1) on 3 features (on torch a Sequential whose [0] is the Linear), ``kernel(m)`` gives its kernel
#: flat, ``hist(h)`` a fit's loss history; on the torch side TensorFlow is unimportable
ONE_DENSE_INIT = {"keras": f"""KERNEL = {ONE_DENSE_KERNEL}
def init(m):
    import numpy as np
    m.set_weights([np.array(KERNEL, 'float32'), np.zeros(1, 'float32')])
def kernel(m):
    return m.get_weights()[0].reshape(-1).tolist()
hist = lambda h: h.history["loss"]
""", "torch": f"""import sys
sys.modules['tensorflow'] = None
import torch
KERNEL = {ONE_DENSE_KERNEL}
def init(m):
    with torch.no_grad():
        m[0].weight.copy_(torch.tensor(KERNEL).T), m[0].bias.zero_()
def kernel(m):
    return m[0].weight.detach().numpy().T.reshape(-1).tolist()
hist = lambda h: h["loss"]
"""}


def one_dense_result(path: Path, side: str, program: str) -> dict:
    """ONE_DENSE_INIT[side] then ``program`` (which prints one line ``RESULT<json>``) written at ``path`` and run by
    Python (in the test file's warm worker of ``side``): the json (asserts the line is there)."""
    path.write_text(ONE_DENSE_INIT[side] + program)
    p = python(path, side=side, env={"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}, timeout=300)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert line is not None, p.stdout + p.stderr
    return json.loads(line[len("RESULT"):])
