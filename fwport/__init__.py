"""fwport: translate deep-learning code between frameworks, and prove the result is the same model.

The public API, in the order data flows through it (imported when first used, so that
``fwport --help`` loads neither libcst nor a pack):

    translate_source(text, path, pack, options) -> FileResult   fwport.core.pipeline
    load_pack(name) -> Pack; Rule; RuleError                     fwport.core.rule
    get_direction(name) -> Direction                             fwport.core.direction
    FileResult, Status, LayerRecord, ModelInfo                   fwport.core.result
    Finding, Severity, CODES                                     fwport.core.finding
    detect_keras_version(text)                                   fwport.packs.tf2torch
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_API = {
    "translate_source": "fwport.core.pipeline",
    "load_pack": "fwport.core.rule", "Pack": "fwport.core.rule", "Rule": "fwport.core.rule",
    "RuleError": "fwport.core.rule",
    "get_direction": "fwport.core.direction", "Direction": "fwport.core.direction",
    "FileResult": "fwport.core.result", "Status": "fwport.core.result", "LayerRecord": "fwport.core.result",
    "ModelInfo": "fwport.core.result",
    "Finding": "fwport.core.finding", "Severity": "fwport.core.finding", "CODES": "fwport.core.finding",
    "detect_keras_version": "fwport.packs.tf2torch",
}
__all__ = [*_API, "__version__"]


def __getattr__(name: str):
    if name in _API:
        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fwport' has no attribute {name!r}")
