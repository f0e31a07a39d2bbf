"""Every rule's source signature against the real Keras 3 / TensorFlow object, and every keyword a
rule emits against the real torch callable: a framework release that changes an API breaks a test
here, not a user's translation.

Convention for names in a rule that Keras 3 does not have (documented in each rule's notes):
- a Keras 2 spelling of a renamed argument is listed in that argument's ``aliases`` (never in the
  signature), e.g. LeakyReLU ``alpha`` → ``negative_slope``;
- a Keras 2-only parameter is keyword-only in ``match.signature`` (after ``*``) and has a
  ``[defaults.<name>]`` entry whose ``keras2`` gives its Keras 2 default;
- a default in the rule that differs from Keras 3's (or that Keras 3 lacks) has a
  ``[defaults.<name>]`` entry with ``keras2`` equal to the rule's default (a Keras 2 default).

One subprocess per framework for all rules.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from importlib.util import find_spec

import pytest

from fwport.core.rule import load_pack

PACK = load_pack("tf2torch")
RULES = sorted(PACK.rules.values(), key=lambda r: r.id)

_INTROSPECT = r'''
import importlib, inspect, json, sys
names = json.loads(sys.argv[1])
out = {}
for name in names:
    parts = name.split(".")
    try:
        # the longest importable module prefix, then attributes (methods of classes included)
        for i in range(len(parts) - 1, 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
                break
            except ImportError:
                continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
    except Exception as e:
        out[name] = {"error": f"{type(e).__name__}: {e}"}
        continue
    if inspect.isclass(obj) and hasattr(getattr(obj, "DESCRIPTOR", None), "fields"):
        # a protocol buffer message (tf.train.Example): its fields, keywords only, unset by default
        out[name] = {"params": [[f.name, "KEYWORD_ONLY", "None"] for f in obj.DESCRIPTOR.fields]}
        continue
    try:
        target = obj.__init__ if inspect.isclass(obj) else obj
        if target is object.__init__:  # a namedtuple (tf.io.FixedLenFeature): the class's own (__new__'s)
            target = obj
        sig = inspect.signature(target)
    except (TypeError, ValueError) as e:
        out[name] = {"error": f"no signature: {e}"}
        continue
    params = []
    for p in sig.parameters.values():
        if p.name == "self":
            continue
        default = None if p.default is inspect.Parameter.empty else repr(p.default)
        params.append([p.name, str(p.kind), default])
    out[name] = {"params": params}
print(json.dumps(out))
'''


def _introspect(names: list[str], module_of_interest: str) -> dict:
    if find_spec(module_of_interest) is None:
        pytest.skip(f"{module_of_interest} is not installed")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-c", _INTROSPECT, json.dumps(names)], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


#: Keras 2 classes Keras 3 dropped: their signature is read from tf_keras (Keras 2)
_KERAS2_ONLY = {"keras.layers.RandomFourierFeatures": "tf_keras.layers.experimental.RandomFourierFeatures",
                "keras.preprocessing.text.Tokenizer": "tf_keras.preprocessing.text.Tokenizer",
                "keras.preprocessing.image.ImageDataGenerator": "tf_keras.preprocessing.image.ImageDataGenerator"}


def _source_module(canonical: str) -> str:
    """Where a canonical source name lives in an installed Keras 3 / TensorFlow (tf_keras for _KERAS2_ONLY)."""
    if canonical in _KERAS2_ONLY:
        return _KERAS2_ONLY[canonical]
    if canonical.startswith("keras.backend."):
        # K.mean & co. are Keras 2's backend, which Keras 3 keeps as tf.keras.backend
        return "keras._tf_keras.keras.backend." + canonical[len("keras.backend."):]
    if canonical.startswith("keras."):
        return canonical  # Keras 3 itself
    return canonical  # tensorflow.* as is


def _literal(text: str | None):
    if text is None:
        return None
    try:
        return ("value", ast.literal_eval(text))
    except (ValueError, SyntaxError):
        return ("text", text)


@pytest.fixture(scope="module")
def keras3():
    names = sorted({_source_module(r.names[0]) for r in RULES if r.kind != "constant"})
    return _introspect(names, "keras")


@pytest.fixture(scope="module")
def torch_sigs():
    targets = set()
    for r in RULES:
        for key in ("target", "lazy"):
            if isinstance(r.emit.get(key), str) and r.kind != "constant":
                targets.add(r.emit[key])
    return _introspect(sorted(targets), "torch")


def _keras_params(info: dict) -> list[tuple[str, str, str | None]]:
    return [tuple(p) for p in info["params"] if p[1] not in ("VAR_POSITIONAL", "VAR_KEYWORD")]


def _source_info(rule, keras3) -> dict:
    root = rule.names[0].split(".")[0]
    if root not in ("keras", "tensorflow") and find_spec(root) is None:
        # a library built on TensorFlow (tensorflow_addons ...) that does not install beside Keras 3: its
        # rule's signature was copied from the library's source (the rule's notes say which version)
        pytest.skip(f"{root} is not installed")
    return keras3[_source_module(rule.names[0])]


@pytest.mark.parametrize("rule", [r for r in RULES if r.kind != "constant"], ids=lambda r: r.id)
def test_source_signature_matches_keras3(rule, keras3):
    info = _source_info(rule, keras3)
    assert "error" not in info, f"{rule.path}: {rule.names[0]} cannot be introspected: {info.get('error')}"
    real = _keras_params(info)
    real_names = [n for n, _, _ in real]
    mine = {p.name: p for p in rule.params if p.kind in ("positional", "keyword")}
    missing = [n for n in real_names if n not in mine]
    assert not missing, f"{rule.path}: Keras 3 parameters missing from match.signature: {missing}"
    # positional binding depends on the order: the rule's order of Keras 3 names must be Keras 3's
    order = [p.name for p in rule.params if p.name in real_names]
    assert order == real_names, f"{rule.path}: parameter order differs from Keras 3: {real_names}"
    for p in rule.params:
        if p.kind in ("var_positional", "var_keyword"):
            continue
        d = rule.defaults.get(p.name)
        if p.name not in real_names:
            assert p.kind == "keyword" and d is not None and d.keras2 is not None, (
                f"{rule.path}: {p.name!r} is not a Keras 3 parameter: make it keyword-only with a "
                f"[defaults.{p.name}] keras2 entry (Keras 2-only), or move it to an alias")
            continue
        real_default = dict((n, dft) for n, _, dft in real)[p.name]
        if (p.default == "None" and isinstance(real_default, str) and real_default.startswith("<")
                and rule.args[p.name].verb in ("unsupported", "drop")):
            continue  # an object with no source spelling (an enum member): None stands for it, never passed on
        if isinstance(real_default, str) and real_default in (f"<class 'numpy.{p.default}'>", f"<class '{p.default}'>"):
            continue  # a numpy dtype class (tf.experimental.numpy's dtype=int64) or a builtin (dtype=float), by its name
        if _literal(p.default) != _literal(real_default) and not (
                isinstance(real_default, str) and p.default is not None
                and real_default.strip("'\"").lower() == p.default.strip("'\"").lower()):
            assert d is not None and d.keras2 is not None and _literal(d.keras2) == _literal(p.default), (
                f"{rule.path}: default of {p.name!r} is {p.default} in the rule but {real_default} in Keras 3; "
                f"document a Keras 2 default with [defaults.{p.name}] keras2 = {p.default!r}")


@pytest.mark.parametrize("rule", [r for r in RULES if r.kind != "constant"], ids=lambda r: r.id)
def test_aliases_are_not_keras3_parameters(rule, keras3):
    info = _source_info(rule, keras3)
    real_names = {n for n, _, _ in _keras_params(info)}
    for spec in rule.args.values():
        clash = set(spec.aliases) & real_names
        assert not clash, f"{rule.path}: aliases {sorted(clash)} are Keras 3 parameters of their own"


def _emitted_keywords(rule) -> set[str]:
    kws = {spec.value for spec in rule.args.values() if spec.verb == "rename"}
    kws |= {spec.to for spec in rule.args.values() if spec.to and spec.verb in ("transform", "approximate")}
    kws |= set(rule.emit.get("positional", []))
    return kws


@pytest.mark.parametrize("rule", [r for r in RULES if r.kind != "constant" and "method" not in r.emit
                                  and "transform" not in r.emit and "target" in r.emit], ids=lambda r: r.id)
def test_emitted_keywords_exist_on_target(rule, torch_sigs):
    """Keywords a rule emits by itself (renames, ``to``, ``positional``); a call transform or shape
    function adds others, which its own examples check."""
    info = torch_sigs[rule.emit["target"]]
    if "no signature" in info.get("error", ""):
        pytest.skip(f"{rule.emit['target']} is a builtin without an introspectable signature")
    assert "error" not in info, f"{rule.path}: {rule.emit['target']} cannot be introspected: {info.get('error')}"
    names = {p[0] for p in info["params"]}
    if any(p[1] == "VAR_KEYWORD" for p in info["params"]):
        return
    extra = _emitted_keywords(rule) - names
    assert not extra, f"{rule.path}: {rule.emit['target']} has no parameter(s) {sorted(extra)}"
    lazy = rule.emit.get("lazy")
    if lazy:
        lazy_names = {p[0] for p in torch_sigs[lazy]["params"]}
        extra = _emitted_keywords(rule) - lazy_names - {"in_features", "in_channels"}
        assert not extra, f"{rule.path}: {lazy} has no parameter(s) {sorted(extra)}"
