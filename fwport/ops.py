"""Call transforms for ``tf.*`` / ``keras.ops.*`` calls that are not a plain ``target(**kwargs)``."""
from __future__ import annotations

import libcst as cst

from fwport.transform import call_transform
