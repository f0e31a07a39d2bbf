"""fwport: translate deep-learning code between frameworks, and prove the result is the same model.

The public API, in the order data flows through it:
"""
from fwport.core.finding import CODES, Finding, Severity
from fwport.core.rule import Pack, Rule, RuleError, load_pack
from fwport.core.result import FileResult, Status
from fwport.core.pipeline import translate_source

__all__ = [
    "translate_source", "detect_keras_version",
    "load_pack", "Pack", "Rule", "RuleError",
    "FileResult", "Status", "Finding", "Severity", "CODES",
]
__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "detect_keras_version":  # the tf2torch pack's; imported only when asked for
        from fwport.packs.tf2torch import detect_keras_version

        return detect_keras_version
    raise AttributeError(f"module 'fwport' has no attribute {name!r}")
