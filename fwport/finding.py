"""Findings: what a translation reports about a file, as data.

Every finding carries a code from the closed set below; ``docs/findings.md`` documents each.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum


class Severity(str, Enum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


#: The closed set of finding codes. A new code is added here and documented in docs/findings.md.
CODES: dict[str, str] = {
    "unsupported-argument": "an argument (or argument value) the target cannot express; the call is left as it was",
    "unsupported-construct": "a source construct fwport does not translate yet; left as it was",
    "no-rule": "a source-framework API with no rule in the pack; left as it was",
    "default-differs": "a default differs between the frameworks; the source value was pinned in the output",
    "approximate": "translated, but not bit-exact (a documented small numerical difference)",
    "dropped-argument": "an argument with no effect on the computed values was dropped",
    "shape-unknown": "a size the target needs could not be inferred statically; a lazy module or a placeholder was emitted",
    "layout-changed": "channels-last code became channels-first (NCHW); inputs must be permuted accordingly",
    "layout-kept": "a region kept the channels-last layout; permutes were emitted around layout-bound layers",
    "idiom-replaced": "a source API with no exact target counterpart became the target's idiom for it (model.summary() → print(model)): same purpose, different output",
    "decorator-removed": "a TensorFlow-only decorator (e.g. @tf.function) was removed",
    "residue": "the output still references the source framework",
    "keras-version": "the Keras generation (2 or 3) the file was written for, which decides some defaults",
    "parse-error": "the file is not valid Python 3",
    "input-error": "the file cannot be read as text (binary, not in its declared encoding or UTF-8, too large, missing)",
    "output-error": "the translated file could not be written (permissions, disk full, a character its declared encoding cannot hold); the original is untouched",
    "internal-error": "fwport crashed on this file; please report it",
}

#: the codes of errors that leave a source API untranslated (a finding's ``api`` names it)
UNTRANSLATED_CODES = frozenset({"unsupported-argument", "unsupported-construct", "no-rule"})


@dataclass(frozen=True)
class Finding:
    severity: Severity
    code: str
    message: str
    path: str = ""
    line: int = 0
    column: int = 0
    rule: str = ""
    api: str = ""  # the source API left untranslated (no-rule, unsupported-*), canonical spelling

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"unknown finding code {self.code!r}; add it to fwport.finding.CODES")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["severity"] = self.severity.value
        if not self.api:
            del d["api"]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Finding":
        """The inverse of :meth:`to_dict` (a saved JSON report)."""
        return cls(Severity(d["severity"]), d["code"], d.get("message", ""), d.get("path", ""), int(d.get("line") or 0),
                   int(d.get("column") or 0), d.get("rule") or "", d.get("api") or "")

    def located(self, path: str, line: int, column: int) -> "Finding":
        return Finding(self.severity, self.code, self.message, path, line, column, self.rule, self.api)

    def render(self) -> str:
        where = f"{self.path}:{self.line}:{self.column}" if self.line else (self.path or "<input>")
        rule = f" [{self.rule}]" if self.rule else ""
        return f"{where}: {self.severity.value}: {self.code}: {self.message}{rule}"
