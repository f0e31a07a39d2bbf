"""Double precision: a PyTorch program computes in float64 where it asks (``dtype=torch.double``,
``model.double()``); JAX turns every float64 request into float32 unless its x64 mode is on. A translation
that asks for float64 anywhere turns the mode on after its imports, where a JAX user writes it, before any
array is made; otherwise the program would silently compute in single precision."""
from __future__ import annotations

import libcst as cst

from fwport.core.finding import Finding, Severity

_WIDE = frozenset({"float64", "complex128", "double", "cdouble"})
LINE = 'jax.config.update("jax_enable_x64", True)  # the program computes in float64, as the PyTorch source does\n'


class _Wide(cst.CSTVisitor):
    def __init__(self) -> None:
        self.node: cst.CSTNode | None = None
        self.enabled = False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if self.node is None and node.attr.value in _WIDE and isinstance(node.value, (cst.Name, cst.Attribute)) \
                and cst.Module([]).code_for_node(node.value) in ("jnp", "jax.numpy", "np", "numpy"):
            self.node = node
        return True

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if node.value.strip("\"'") == "jax_enable_x64":
            self.enabled = True


def finish(module: cst.Module, ctx) -> cst.Module:
    from fwport.core.names import scan
    from fwport.core.imports import insert_after_imports

    layout = ctx.analyses.get("layout")  # (the output's text: each statement rendered once for the final text too)
    text = layout.text(module) if layout is not None else None
    if text is not None and not any(w in text for w in _WIDE):
        return module  # no float64 attribute can be written without its name
    seen = _Wide()
    scan(module, seen)
    if seen.node is None or seen.enabled:
        return module
    ctx.spell_text("jax.config")  # records `import jax`
    # (a finding of the whole file: the finishing steps run after findings are placed on source lines)
    ctx.findings.append(Finding(Severity.INFO, "idiom-replaced", "the program computes in float64: jax.config."
                                "update(\"jax_enable_x64\", True) is written after the imports (without it JAX "
                                "makes float32 arrays of every float64 request)", ctx.path, 0, 0))
    return insert_after_imports(module, LINE, ctx)
