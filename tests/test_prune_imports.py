"""A source import that binds the name one of the target's imports binds goes (core.imports.prune_imports):
`from tensorflow.compat.v1 import logging` was kept beside the translation's `import logging`, below it,
so it shadowed the standard library's module the translated lines read (and the output imported TensorFlow)."""
from __future__ import annotations

import subprocess
import sys

from fwport.core.imports import _bound_by
from fwport.core.pipeline import translate_source

SRC = '''from tensorflow.compat.v1 import logging

logging.set_verbosity(logging.INFO)
logging.warning("step %d", 3)
'''


def test_the_source_import_of_a_name_the_target_imports_goes(tmp_path):
    r = translate_source(SRC, "t.py")
    assert "from tensorflow" not in r.output and "import tensorflow" not in r.output, r.output
    assert r.output.count("import logging") == 1
    path = tmp_path / "t.py"
    path.write_text("import sys\nsys.modules['tensorflow'] = None\n" + r.output)
    p = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "step 3" in p.stderr  # through the standard library's logging


def test_names_an_import_line_binds():
    assert _bound_by("import logging") == ("logging",)
    assert _bound_by("import torch.nn.functional as F") == ("F",)
    assert _bound_by("import os.path") == ("os",)
    assert _bound_by("from torch import nn, optim as o") == ("nn", "o")
