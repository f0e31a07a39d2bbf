"""Shape functions: how each Keras layer becomes torch module(s) given what is known of its input."""
from __future__ import annotations

import libcst as cst

from fwport.transform import shape
