"""fwport: translate deep-learning code between frameworks, and prove the result is the same model.

The public API, in the order data flows through it:
"""
from fwport.core.finding import CODES, Finding, Severity
from fwport.core.rule import Pack, Rule, RuleError, load_pack
from fwport.core.result import FileResult, Status
from fwport.core.pipeline import detect_keras_version, translate_source

__all__ = [
    "translate_source", "detect_keras_version",
    "load_pack", "Pack", "Rule", "RuleError",
    "FileResult", "Status", "Finding", "Severity", "CODES",
]
__version__ = "0.1.0"
