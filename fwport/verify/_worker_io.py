"""The request loop of a framework subprocess (numpy only; imported by keras_side / torch_side).

Requests and responses are JSON lines; arrays travel in ``.npz`` files named in them. The response
channel is a duplicate of the original stdout: fd 1 itself is pointed at stderr, so that whatever the
user's code or the framework prints (C++ logs included) cannot corrupt the protocol.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback


class UserError(Exception):
    """An error in what the verifier was asked to do (no such model, bad path): reported, not a crash."""


def serve(handle) -> None:
    resp_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    out = os.fdopen(resp_fd, "w", buffering=1)
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        if req.get("op") == "exit":
            break
        t0 = time.perf_counter()
        try:
            resp = handle(req) or {}
            resp["ok"] = True
        except BaseException as e:  # report everything, the parent decides
            resp = {"ok": False, "error": f"{type(e).__name__}: {e}", "kind": type(e).__name__,
                    "user_error": isinstance(e, UserError), "traceback": traceback.format_exc()}
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                out.write(json.dumps(resp) + "\n")
                raise
        resp["seconds"] = time.perf_counter() - t0
        resp["id"] = req.get("id")
        out.write(json.dumps(resp) + "\n")
        out.flush()


def parse_path(path: str) -> list:
    """``features.layers[2].conv`` → ["features", "layers", 2, "conv"] (a record's attribute path)."""
    parts: list = []
    for token in path.split("."):
        if not token:
            continue
        name, _, rest = token.partition("[")
        if name:
            parts.append(name)
        while rest:
            idx, _, rest = rest.partition("]")
            parts.append(int(idx))
            rest = rest.lstrip("[")
    return parts


def resolve(root, path: str):
    obj = root
    walked = []
    for p in parse_path(path):
        try:
            obj = obj[p] if isinstance(p, int) else getattr(obj, p)
        except (AttributeError, IndexError, KeyError, TypeError):
            where = ".".join(map(str, walked)) or "the model"
            raise UserError(f"{path!r}: {where} has no {'item' if isinstance(p, int) else 'attribute'} {p!r}") from None
        walked.append(p)
    return obj


def build_object(ns: dict, name: str, args: dict, is_model, kind: str = "model", wrap=None) -> object:
    """NAME in a module namespace: a class (instantiated), a builder function (called) or a model object."""
    if name not in ns:
        candidates = [k for k, v in ns.items() if not k.startswith("_") and (isinstance(v, type) or callable(v) or is_model(v))]
        raise UserError(f"no {name!r} in the file; it defines: {', '.join(sorted(candidates)[:20]) or 'nothing usable'}")
    obj = ns[name]
    if kind == "function":
        if not callable(obj):
            raise UserError(f"{name!r} is a {type(obj).__name__}, not a function")
        return wrap(obj, args)
    if is_model(obj):
        if args:
            raise UserError(f"{name!r} is a model object; --args applies to classes and builder functions")
        return obj
    if callable(obj):
        return obj(**args)
    raise UserError(f"{name!r} is a {type(obj).__name__}, not a model class, builder function or model")
