"""(placeholder) structural pass: sequential."""
from __future__ import annotations

import libcst as cst

from fwport.context import FileContext


def run(module: cst.Module, ctx: FileContext) -> cst.Module:
    return module
