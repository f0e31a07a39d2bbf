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
    # the Sequential pass refuses this EinsumDense (channels-first map) and settles it; rebuilding the
    # tree here must not let the rule pass turn it into a context-free torch module
    src = ("import tensorflow as tf\nfrom tensorflow.keras import layers, Sequential\n\n"
           "m = Sequential([layers.Input((8, 8, 3)), layers.Conv2D(4, 3),\n"
           "                layers.EinsumDense('abcd,de->abce', output_shape=(None, None, 5))])\n\n\n"
           "@tf.function\ndef f(x):\n    return m(x)\n")
    r = _t(src)
    assert "layers.EinsumDense('abcd,de->abce'" in r.output, r.output
    assert "@tf.function" not in r.output


_REGISTERING = (
    "import keras\nfrom tensorflow.python.util.tf_export import keras_export\n"
    "from keras.src.api_export import keras_export as export3\n\n\n"
    "@keras_export('keras.layers.CovNineteenLayer', v1=[])\nclass Block:\n    pass\n\n\n"
    "@export3(['keras.ops.cov_nineteen', 'keras.ops.nn.cov_nineteen'])\ndef op(x):\n    return x\n\n\n"
    "@keras.saving.register_keras_serializable(package='cov19')\nclass Loss:\n    def get_config(self):\n"
    "        return {}\n\n\n"
    "@keras.utils.register_keras_serializable('cov19', name='scale')\ndef scale(x):\n    return x\n"
)


def test_registering_decorators_removed_and_return_the_object_unchanged():
    """Keras's registering decorators (TensorFlow's keras_export, Keras 3's keras.src.api_export.keras_export,
    register_keras_serializable under keras.saving / keras.utils) are removed with an info finding: each returns
    the object it decorates (checked in a TensorFlow subprocess), so the names bind the same classes and
    functions; only Keras's name registries, which torch has none of, lose an entry."""
    import os
    import subprocess
    import sys
    from importlib.util import find_spec

    r = _t(_REGISTERING)
    assert r.output.lstrip("\n") == ("class Block:\n    pass\n\n\ndef op(x):\n    return x\n\n\n"
                                     "class Loss:\n    def get_config(self):\n        return {}\n\n\n"
                                     "def scale(x):\n    return x\n"), r.output
    removed = [f for f in r.findings if f.code == "decorator-removed"]
    assert [f.line for f in removed] == [6, 11, 16, 22] and all(f.severity is Severity.INFO for f in removed)
    assert "registers the name as Keras's public API" in removed[0].message
    assert "'package>name'" in removed[2].message
    assert _codes(r) == ["decorator-removed"] * 4, r.findings
    if find_spec("tensorflow") is None or find_spec("keras") is None:
        return
    check = _REGISTERING + (
        "\nclass A:\n    def get_config(self):\n        return {}\n\n\ndef g(x):\n    return x\n\n\n"
        "assert keras_export('keras.layers.CovA')(A) is A and keras_export('keras.cov_g', v1=['keras.g'])(g) is g\n"
        "class B:\n    pass\n\n\nassert export3('keras.ops.CovB')(B) is B\n"
        "assert keras.saving.register_keras_serializable('p')(A) is A\n"
        "assert keras.utils.register_keras_serializable('p', name='gg')(g) is g\n"
        "assert isinstance(Block, type) and isinstance(Loss, type) and op(3) == 3 and scale(4) == 4\n"
        "assert keras.saving.get_registered_object('cov19>Loss') is Loss\n"
        "assert keras.saving.get_registered_object('cov19>scale') is scale\n"
        "print('same objects')\n")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("same objects"), proc.stderr[-3000:]


def test_bare_register_keras_serializable_is_not_removed():
    """``@register_keras_serializable`` without its call binds the decorator factory's result (a function) to the
    name: removing it would change what the name is, so it is left to the rule pass (an error)."""
    r = _t("import keras\n\n\n@keras.saving.register_keras_serializable\nclass Loss:\n    pass\n")
    assert "@keras.saving.register_keras_serializable" in r.output
    assert "decorator-removed" not in _codes(r) and any(f.severity is Severity.ERROR for f in r.findings), r.findings
