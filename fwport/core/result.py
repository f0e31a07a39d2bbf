"""Results are data: what translating one file produced. The library never prints."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from fwport.core.context import LayerRecord, ModelInfo
from fwport.core.finding import Finding, Severity


class Status(str, Enum):
    CONVERTED = "converted"  # the output differs from the input
    UNCHANGED = "unchanged"  # nothing to translate; output is byte-identical to the input
    SKIPPED = "skipped"  # excluded by configuration
    FAILED = "failed"  # the input could not be translated at all (parse error, unreadable, crash)


@dataclass
class FileResult:
    path: str
    status: Status
    source: str = ""
    output: str = ""
    findings: list[Finding] = field(default_factory=list)
    layers: list[LayerRecord] = field(default_factory=list)
    version: int | None = None  # the source generation the text was written for (Keras 2 or 3)
    version_name: str = "version"  # its key in reports (the direction's: keras_version)
    models: list[ModelInfo] = field(default_factory=list)

    @property
    def needs_attention(self) -> bool:
        return any(f.severity is Severity.ERROR for f in self.findings)

    @property
    def changed(self) -> bool:
        return self.status is Status.CONVERTED

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity)

    def to_dict(self, with_text: bool = False) -> dict:
        d = {
            "path": self.path,
            "status": self.status.value,
            "needs_attention": self.needs_attention,
            self.version_name: self.version,
            "findings": [f.to_dict() for f in self.findings],
            "layers": [r.to_dict() for r in self.layers],
            "models": [m.to_dict() for m in self.models],
        }
        if with_text:
            d["output"] = self.output
        return d
