"""The @tf.function pass: removal (or @torch.compile), every spelling, shadowing, and findings that
stay on the source's lines although the output loses the decorator lines."""
from __future__ import annotations

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source


def _t(src: str, **options):
    return translate_source(src, "m.py", options=options or None)


def _codes(r):
    return [f.code for f in r.findings if f.code != "keras-version"]


def test_plain_decorator_removed():
    r = _t("import tensorflow as tf\n\n\n@tf.function\ndef step(x):\n    return tf.reduce_sum(x)\n")
    assert r.output == "import torch\n\n\ndef step(x):\n    return torch.sum(x)\n"
    removed = [f for f in r.findings if f.code == "decorator-removed"]
    assert len(removed) == 1 and removed[0].line == 4 and removed[0].severity is Severity.INFO


def test_decorator_with_arguments_and_other_decorators_kept():
    src = ("import functools\nimport tensorflow as tf\n\n\n@functools.lru_cache\n"
           "@tf.function(jit_compile=True, reduce_retracing=True)\n@staticmethod\ndef f(x):\n    return x\n")
    r = _t(src)
    assert r.output == "import functools\n\n\n@functools.lru_cache\n@staticmethod\ndef f(x):\n    return x\n"
    assert _codes(r) == ["decorator-removed"]
    assert "arguments" in r.findings[-1].message


def test_from_import_spelling_and_method():
    src = ("from tensorflow import function as tf_function\n\n\nclass M:\n"
           "    @tf_function\n    def call(self, x):\n        return x\n")
    r = _t(src)
    # (the import fixer may leave the blank lines that followed the removed import)
    assert r.output.lstrip("\n") == "class M:\n    def call(self, x):\n        return x\n"
    assert _codes(r) == ["decorator-removed"]


def test_shadowed_tf_is_not_tensorflow():
    src = ("import tensorflow as tf\n\n\ndef outer(tf):\n    @tf.function\n    def inner():\n"
           "        return 1\n    return inner\n")
    r = _t(src)
    assert "@tf.function" in r.output
    assert "decorator-removed" not in _codes(r)


def test_parameter_named_tf_does_not_shadow_its_own_decorator():
    # the decorator is evaluated in the enclosing scope, where tf is TensorFlow
    src = "import tensorflow as tf\n\n\n@tf.function\ndef f(tf):\n    return tf\n"
    r = _t(src)
    assert "@tf.function" not in r.output and "def f(tf):" in r.output
    assert _codes(r) == ["decorator-removed"]


def test_compile_option_emits_torch_compile():
    src = ("import tensorflow as tf\n\n\n@tf.function(jit_compile=True)\ndef step(x):\n"
           "    return tf.reduce_sum(x)\n\n\nfast = tf.function(step)\n")
    r = _t(src, compile=True)
    assert r.output == ("import torch\n\n\n@torch.compile\ndef step(x):\n    return torch.sum(x)\n\n\n"
                        "fast = torch.compile(step)\n")
    assert _codes(r) == ["decorator-removed", "decorator-removed"]


def test_tf_function_call_unwrapped():
    r = _t("import tensorflow as tf\n\n\ndef f(x):\n    return x\n\n\ng = tf.function(f, jit_compile=True)\n")
    assert r.output.lstrip("\n") == "def f(x):\n    return x\n\n\ng = f\n"
    assert "dropped" in [f for f in r.findings if f.code == "decorator-removed"][0].message


def test_findings_and_comments_stay_on_source_lines_after_removal():
    src = ("import tensorflow as tf\n\n\n@tf.function\n@tf.function\ndef f(x):\n"
           "    y = tf.reduce_prod(x, axis=[0, 1])\n    return tf.unknown_op(y)\n")
    r = _t(src)
    errors = {f.code: f.line for f in r.findings if f.severity is Severity.ERROR}
    lines = src.splitlines()
    # the findings point at the source lines of the offending calls
    assert "tf.reduce_prod" in lines[errors["unsupported-argument"] - 1]
    assert "tf.unknown_op" in lines[errors["no-rule"] - 1]
    # each `# fwport:` comment sits right above the line it is about, in the output
    out = r.output.splitlines()
    for code, needle in (("unsupported-argument", "tf.reduce_prod"), ("no-rule", "tf.unknown_op")):
        i = next(k for k, line in enumerate(out) if needle in line)
        assert out[i - 1].strip().startswith(f"# fwport: {code}:"), r.output
    assert "@" not in r.output
    # translating the output again changes nothing
    assert _t(r.output).output == r.output


def test_comment_between_decorators_survives():
    src = "import tensorflow as tf\n\n\n@tf.function\n# keep me\n@staticmethod\ndef f():\n    return 1\n"
    r = _t(src)
    assert r.output.lstrip("\n") == "# keep me\n@staticmethod\ndef f():\n    return 1\n"


def test_nodes_settled_by_earlier_passes_stay_settled():
    # the Sequential pass refuses this Dense (channels-first map) and settles it; rebuilding the
    # tree here must not let the rule pass turn it into a context-free nn.LazyLinear
    src = ("import tensorflow as tf\nfrom tensorflow.keras import layers, Sequential\n\n"
           "m = Sequential([layers.Input((8, 8, 3)), layers.Conv2D(4, 3), layers.Dense(5)])\n\n\n"
           "@tf.function\ndef f(x):\n    return m(x)\n")
    r = _t(src)
    assert "layers.Dense(5)" in r.output and "nn.LazyLinear" not in r.output, r.output
    assert "@tf.function" not in r.output
