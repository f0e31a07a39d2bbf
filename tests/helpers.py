"""Set-up shared by the tests: a skip marker for the frameworks a test runs, a torch2jax translation of a snippet,
and the errors of a translation in the shapes tests compare them in (a test file imports the shape it asserts on,
usually as ``errors``). Subprocess runners and driver heads are in runners.py."""
from __future__ import annotations

import importlib.util
import textwrap
from collections import Counter

import pytest

from fwport.core.finding import Severity
from fwport.core.pipeline import translate_source


def needs(*modules: str) -> pytest.MarkDecorator:
    """Skip the test (or, as ``pytestmark``, the file) where one of ``modules`` is not installed."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)} installed")


def t2j(src: str, path: str = "m.py"):
    """The torch2jax translation of ``src`` (dedented, leading blank lines dropped) as file ``path``."""
    return translate_source(textwrap.dedent(src).lstrip("\n"), path, "torch2jax")


def by(r, severity: Severity) -> list:
    """The findings of translation ``r`` with ``severity``."""
    return [f for f in r.findings if f.severity is severity]


def error_findings(r) -> list:
    return by(r, Severity.ERROR)


def error_counts(r) -> Counter:
    """How many errors there are of each (code, line)."""
    return Counter((f.code, f.line) for f in by(r, Severity.ERROR))


def error_messages(r) -> list[str]:
    return [f.message for f in by(r, Severity.ERROR)]


def error_lines(r) -> list[tuple[int, str]]:
    """(line, message) of each error."""
    return [(f.line, f.message) for f in by(r, Severity.ERROR)]


def error_texts(r) -> list[str]:
    """``L<line> <code>: <message>`` of each error."""
    return [f"L{f.line} {f.code}: {f.message}" for f in by(r, Severity.ERROR)]


def error_summaries(r) -> list[str]:
    """``<code>: <message>`` of each error."""
    return [f"{f.code}: {f.message}" for f in by(r, Severity.ERROR)]


def per_example(src: str) -> str:
    """``src`` (one nn.Module class) holding an unused LSTM: a module that holds one cannot be a batched module
    (modules.py's _batched_classes), so it keeps the per-example translation and its ``batch-axis`` errors, which
    tests of those errors check (tests/test_torch2jax_batched.py: the module without it is batched)."""
    import re
    m = re.search(r"^( *)super\(.*\)\.__init__\(\)\n", src, re.M)
    if m:
        return src[:m.end()] + f"{m.group(1)}self._per_example = nn.LSTM(3, 3, batch_first=True)\n" + src[m.end():]
    m = re.search(r"^( *)class \w+\(nn\.Module\):\n", src, re.M)
    ind = m.group(1) + "    "
    return src[:m.end()] + (f"{ind}def __init__(self):\n{ind}    super().__init__()\n"
                            f"{ind}    self._per_example = nn.LSTM(3, 3, batch_first=True)\n\n") + src[m.end():]
