"""Findings: what a translation reports about a file, as data.

Every finding carries a code from the closed set below; ``docs/findings.md`` documents each.
"""
from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from enum import Enum


class Severity(str, Enum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


#: The closed set of finding codes: the core's, here, and each pack's (``Direction.codes``), added
#: when the pack loads. docs/findings.md is generated from them.
CODES: dict[str, str] = {
    "unsupported-argument": "an argument (or argument value) the target cannot express; the call is left as it was",
    "unsupported-construct": "a source construct fwport does not translate yet; left as it was",
    "no-rule": "a source-framework API with no rule in the pack; left as it was",
    "default-differs": "a default differs between the frameworks; the source value was pinned in the output",
    "approximate": "translated, but not bit-exact (a documented small numerical difference)",
    "dropped-argument": "an argument with no effect on the computed values was dropped",
    "shape-unknown": "a size the target needs could not be inferred statically; a lazy module or a placeholder was emitted",
    "idiom-replaced": "a source API with no exact target counterpart became the target's idiom for it (model.summary() → print(model)): same purpose, different output",
    "assumed-import": "a conventional name of the source framework (tf) is read but bound nowhere in the file (a notebook fragment): it was taken as that framework's import",
    "residue": "the output still references the source framework",
    "parse-error": "the file is not valid Python 3",
    "input-error": "the file cannot be read as text (binary, not in its declared encoding or UTF-8, too large, missing)",
    "output-error": "the translated file could not be written (permissions, disk full, a character its declared encoding cannot hold); the original is untouched",
    "internal-error": "fwport crashed on this file; please report it",
    "dependency-updated": "a dependency file of a tree written with -o DIR: a source-framework requirement became the target's (TensorFlow/Keras → torch), or was removed as a duplicate",
    "dependency-kept": "a dependency file names the source framework in a form fwport does not rewrite (a computed list, a Poetry table); edit it by hand",
}

#: the codes of errors that leave a source API untranslated (a finding's ``api`` names it)
UNTRANSLATED_CODES = frozenset({"unsupported-argument", "unsupported-construct", "no-rule"})


#: code → the pack that defined it (codes of the core are not listed)
CODE_PACKS: dict[str, str] = {}


def register_codes(codes: dict[str, str], pack: str = "") -> None:
    """Add a pack's finding codes to the closed set (a code keeps one meaning across packs)."""
    for code, meaning in codes.items():
        if code in CODES and CODES[code] != meaning:
            raise ValueError(f"finding code {code!r} is already defined with another meaning")
        CODES[code] = meaning
        if pack:
            CODE_PACKS[code] = pack


@dataclass(frozen=True)
class Finding:
    severity: Severity
    code: str
    message: str
    path: str = ""
    line: int = 0
    column: int = 0
    rule: str = ""
    cell: int = 0  # in a notebook: the cell (1-based, every cell counted) that ``line`` is in
    api: str = ""  # the source API left untranslated (no-rule, unsupported-*), canonical spelling

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"unknown finding code {self.code!r}; add it to fwport.core.finding.CODES or to the pack's Direction.codes")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["severity"] = self.severity.value
        if not self.cell:
            del d["cell"]  # only notebook findings have one
        if not self.api:
            del d["api"]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Finding":
        """The inverse of :meth:`to_dict` (a saved JSON report)."""
        return cls(Severity(d["severity"]), d["code"], d.get("message", ""), d.get("path", ""), int(d.get("line") or 0),
                   int(d.get("column") or 0), d.get("rule") or "", cell=int(d.get("cell") or 0), api=d.get("api") or "")

    def located(self, path: str, line: int, column: int) -> "Finding":
        return dataclasses.replace(self, path=path, line=line, column=column)

    def render(self) -> str:
        where = f"{self.path}:{self.line}:{self.column}" if self.line else (self.path or "<input>")
        if self.cell:
            where = f"{self.path}:cell {self.cell}:{self.line}:{self.column}" if self.line else f"{self.path}:cell {self.cell}"
        rule = f" [{self.rule}]" if self.rule else ""
        return f"{where}: {self.severity.value}: {self.code}: {self.message}{rule}"
