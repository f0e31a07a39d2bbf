"""Input specifications (``float32[2,28,28,1]``, ``int32[2,40]:5000``) and the inputs drawn from them.

Shapes are in the *original's* layout, batch axis included. Inputs are seeded and chosen to expose
traps: each batch item gets its own scale (small- and large-variance activations: an epsilon or a
clamp shows up on the small ones, an overflow or a saturated clip on the large ones), and a mean
offset so that a missing centring term cannot hide.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("int8", "int16", "int32", "int64", "uint8", "bool")
_SPEC = re.compile(r"^\s*([a-z0-9]+)\s*\[\s*([0-9,\s]*)\]\s*(?::\s*(-?\d+)(?:\s*\.\.\s*(-?\d+))?)?\s*$")
# per-item scale of float inputs, cycled over the batch: typical, small, large variance
ITEM_SCALES = (1.0, 0.05, 8.0, 0.5)


class SpecError(ValueError):
    pass


@dataclass(frozen=True)
class InputSpec:
    dtype: str
    shape: tuple[int, ...]
    low: int = 0  # integer inputs: values in [low, high)
    high: int | None = None

    @classmethod
    def parse(cls, text: str) -> "InputSpec":
        m = _SPEC.match(text)
        if not m:
            raise SpecError(f"input spec {text!r}: expected dtype[d0,d1,...] with an optional integer range, "
                            "e.g. float32[2,28,28,1] or int32[2,40]:5000 (values 0..4999) or int32[2,40]:1..100")
        dtype, dims, a, b = m.groups()
        if dtype not in FLOATS + INTS:
            raise SpecError(f"input spec {text!r}: unknown dtype {dtype!r}; use one of {', '.join(FLOATS + INTS)}")
        shape = tuple(int(d) for d in dims.replace(" ", "").split(",") if d)
        if not shape:
            raise SpecError(f"input spec {text!r}: give the shape, batch axis first, e.g. float32[2,16]")
        if a is not None and dtype in FLOATS:
            raise SpecError(f"input spec {text!r}: a value range is for integer inputs only")
        low, high = 0, None
        if a is not None:
            low, high = (0, int(a)) if b is None else (int(a), int(b) + 1)
            if high <= low:
                raise SpecError(f"input spec {text!r}: empty value range")
        return cls(dtype, shape, low, high)

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOATS

    def render(self) -> str:
        s = f"{self.dtype}[{','.join(map(str, self.shape))}]"
        if not self.is_float and self.high is not None:
            s += f":{self.high}" if self.low == 0 else f":{self.low}..{self.high - 1}"
        return s

    def with_dtype(self, dtype: str) -> "InputSpec":
        return InputSpec(dtype if self.is_float else self.dtype, self.shape, self.low, self.high)


def default_specs(input_shapes: list[tuple], batch: int = 2) -> list[InputSpec]:
    """Specs from a model's declared input shapes (source layout, no batch axis)."""
    out = []
    for s in input_shapes:
        if s is None or any(d is None for d in s):
            raise SpecError(f"the model's declared input shape {s} has unknown sizes: give --input dtype[...]")
        out.append(InputSpec("float32", (batch, *s)))
    return out


def make_inputs(specs: list[InputSpec], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in specs:
        if spec.is_float:
            x = rng.standard_normal(spec.shape)
            scales = np.array([ITEM_SCALES[i % len(ITEM_SCALES)] for i in range(spec.shape[0])])
            x = x * scales.reshape((-1,) + (1,) * (len(spec.shape) - 1)) + 0.1
            arrays.append(x.astype("float64" if spec.dtype == "float64" else "float32"))
        elif spec.dtype == "bool":
            arrays.append(rng.integers(0, 2, spec.shape).astype(bool))
        else:
            high = spec.high if spec.high is not None else 10
            arrays.append(rng.integers(spec.low, high, spec.shape).astype(spec.dtype))
    return arrays


def to_target_layout(x: np.ndarray, layout: str) -> np.ndarray:
    """Source (channels-last) layout → the translation's, for inputs of a model recorded as ``nchw``."""
    if layout == "nchw" and x.ndim >= 3:
        return np.ascontiguousarray(np.moveaxis(x, -1, 1))
    return x


def to_source_layout(x: np.ndarray, layout: str) -> np.ndarray:
    if layout == "nchw" and x.ndim >= 3:
        return np.ascontiguousarray(np.moveaxis(x, 1, -1))
    return x
