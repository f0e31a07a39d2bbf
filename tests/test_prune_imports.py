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
    assert r.output.splitlines().count("import logging") == 1  # at the top (the written tf_logger imports its own)
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


NESTED = '''import tensorflow as tf
try:
    import tensorflow_addons as tfa
    from tensorflow import keras
except ImportError:
    pass


class Block:
    """Mentions tf in a docstring only."""

    def f(self, x):
        return x + 1


if tf is not None:
    from tensorflow import keras as K
    y = 1
'''


def test_pruning_with_statement_texts_skips_compound_statements_without_imports(monkeypatch):
    """With ``statement_text`` (the Layout's), the pruning does not enter a compound statement whose text holds
    no ``import``: the same module as the full walk, the class asked about never (its text has no import)."""
    import libcst as cst

    from fwport.core import imports
    from fwport.core.imports import prune_imports
    from fwport.core.position import Layout

    module = cst.parse_module(NESTED)
    aliases = {"tf", "tfa", "keras", "K"}

    def is_source(name: str) -> bool:
        return name.split(".")[0] in ("tensorflow", "tensorflow_addons")

    plain, plain_text = prune_imports(module, aliases, is_source)
    layout, asked = Layout(), []

    def statement_text(s, m):
        asked.append(s)
        return layout.statement_text(s, m)

    entered = []
    real = imports._prune_statement
    monkeypatch.setattr(imports, "_prune_statement", lambda s, *a: entered.append(s) or real(s, *a))
    fast, fast_text = prune_imports(module, aliases, is_source, layout.text, statement_text)
    assert fast_text == plain_text == fast.code
    assert "import tensorflow_addons" not in fast_text and "from tensorflow import keras\n" not in fast_text
    assert "import tensorflow as tf" in fast_text and "keras as K" not in fast_text  # `tf` read, `K` not
    assert any(type(s) is cst.ClassDef for s in asked)  # its text asked for...
    assert not any(type(s) is cst.ClassDef for s in entered)  # ...and the class not entered
    assert any(type(s) is cst.Try for s in entered) and any(type(s) is cst.If for s in entered)


def test_existing_imports_asked_about_wanted_lines_answer_as_the_full_set():
    """add_imports asks which of the lines it needs the module has: only the imports whose first name is a word
    of one of them are rendered, with the same answer for every line asked about as the full set gives."""
    import libcst as cst

    from fwport.core.imports import _existing_imports

    module = cst.parse_module("import torch\nimport numpy as np; from torch import nn\nfrom . import x\n"
                              "from torch.nn import functional as F\nimport os.path\nif 1:\n    import math\n")
    wanted = ["import torch", "from torch import nn", "import math", "import torch.nn.functional as F",
              "from torch.nn import functional as F", "import numpy as np", "from . import x", "import sys"]
    full, few = _existing_imports(module), _existing_imports(module, wanted)
    assert few <= full and full - few == {"import os.path"}  # (no line asked about names `os`)
    assert [w for w in wanted if w in full] == [w for w in wanted if w in few] == [
        "import torch", "from torch import nn", "from torch.nn import functional as F", "from . import x"]


def test_a_name_read_only_as_a_functions_parameter_is_not_a_use():
    # the written fit / evaluate take `metrics` (their metric objects): not the file's `from keras import metrics`
    # (tf2torch: `metrics=[metrics.binary_accuracy]` translated, the import stayed and the output imported Keras)
    import textwrap

    from fwport.core.imports import _parameters_only
    import libcst as cst

    fn = cst.parse_module(textwrap.dedent('''
        def fit(model, metrics, x):
            return [m(x) for m in metrics.values()]
    ''')).body[0]
    assert _parameters_only(fn, {"metrics", "x"}) == {"metrics", "x"}
    for kept in ('''
        def fit(model, metrics=metrics.Mean()):
            return metrics
    ''', '''
        def fit(model, metrics):
            def inner():
                global metrics
                return metrics.Mean()
            return inner()
    ''', '''
        @metrics.wrap
        def fit(model, metrics):
            return metrics
    '''):
        fn = cst.parse_module(textwrap.dedent(kept)).body[0]
        assert _parameters_only(fn, {"metrics"}) == set(), kept


def test_a_name_a_class_reads_only_as_a_methods_parameter_is_not_a_use():
    # TF's MLP tutorial: `def __init__(self, layers)` beside `from tensorflow.keras import layers`, whose layers the
    # file's other lines used (translated away): the import stayed and the output imported TensorFlow
    import textwrap

    from fwport.core.imports import _method_parameters_only
    import libcst as cst

    def names(src: str, asked: set) -> set:
        module = cst.parse_module(textwrap.dedent(src))
        return _method_parameters_only(module.body[0], asked, module)

    assert names('''
        class MLP(nn.Module):
            size = 3

            def __init__(self, layers, n=size):
                super().__init__()
                self.layers = nn.ModuleList(layers)
    ''', {"layers", "nn"}) == {"layers"}
    for kept in ('''
        class Block(layers.Layer):
            def __init__(self, layers):
                self.layers = layers
    ''', '''
        class MLP:
            default = layers.Dense(2)

            def __init__(self, layers):
                self.layers = layers
    ''', '''
        class MLP:
            def __init__(self, layers):
                self.layers = layers

            def head(self):
                return layers.Dense(2)
    '''):
        assert names(kept, {"layers"}) == set(), kept
    r = translate_source(textwrap.dedent('''
        import tensorflow as tf
        from tensorflow.keras import layers


        class MLP(tf.Module):
            def __init__(self, layers):
                self.layers = layers

            def __call__(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x


        mlp = MLP([layers.Dense(4), layers.Dense(2)])
    ''').lstrip(), "mlp.py")
    assert "tensorflow" not in r.output, r.output
