"""Project configuration: the ``[tool.fwport]`` table of the nearest ``pyproject.toml``.

Searched upward from the first path on the command line (or the working directory); the first
``pyproject.toml`` that has a ``[tool.fwport]`` table wins, as ruff does, so a nested package with
its own unrelated ``pyproject.toml`` does not hide the project's settings. Command-line options
override the file. Anything malformed raises :class:`ConfigError`, whose message names the file,
the key and the fix.
"""
from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_MAX_SIZE = 5 * 1024 * 1024

#: key → (what it holds, an example), used to validate and to teach in error messages
KEYS: dict[str, tuple[str, str]] = {
    "exclude": ("a list of glob patterns of files or folders to leave alone", 'exclude = ["legacy/*", "*_pb2.py"]'),
    "rules": ("a list of extra rule folders, relative to the pyproject.toml", 'rules = ["tools/fwport-rules"]'),
    "disable": ("a list of rule ids to switch off", 'disable = ["dropout"]'),
    "keras": ("the Keras generation the code was written for: 2 or 3", "keras = 2"),
    "max_size": ("the largest file translated, in bytes", "max_size = 10_000_000"),
}


class ConfigError(ValueError):
    """The configuration is malformed. The message names the file, the key and the fix."""

    def __init__(self, path: Path | str, key: str, problem: str, fix: str):
        self.path, self.key, self.problem, self.fix = str(path), key, problem, fix
        super().__init__(f"{path}: [tool.fwport] key '{key}': {problem}. Fix: {fix}")


@dataclass(frozen=True)
class Config:
    path: str | None = None  # the pyproject.toml it came from; None for the defaults
    root: str | None = None  # its folder: exclude globs and rule folders are relative to it
    exclude: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()  # absolute paths
    disable: tuple[str, ...] = ()
    keras: int | None = None
    max_size: int = DEFAULT_MAX_SIZE
    extra: dict[str, Any] = field(default_factory=dict)


def find_pyproject(start: Path | str | None) -> Path | None:
    """The nearest pyproject.toml with a [tool.fwport] table, searching upward from ``start``."""
    here = Path(start or ".").resolve()
    if not here.is_dir():
        here = here.parent
    for d in (here, *here.parents):
        candidate = d / "pyproject.toml"
        if candidate.is_file():
            try:
                data = tomllib.loads(candidate.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as e:
                # a broken pyproject.toml on the way up is reported, not skipped: it may be ours
                raise ConfigError(candidate, "<file>", f"cannot be read as TOML ({e})", "fix the TOML syntax") from None
            if isinstance(data.get("tool"), dict) and "fwport" in data["tool"]:
                return candidate
    return None


def _string_list(value: Any, path: Path, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(path, key, f"expected a list of strings, found {value!r}", f"write e.g. {KEYS[key][1]}")
    return tuple(value)


def parse_config(table: Any, path: Path) -> Config:
    """Validate one ``[tool.fwport]`` table."""
    if not isinstance(table, dict):
        raise ConfigError(path, "tool.fwport", "expected a table", "write it as a [tool.fwport] section")
    for key in table:
        if key not in KEYS:
            close = difflib.get_close_matches(key, list(KEYS), n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise ConfigError(path, key, "unknown key",
                              f"{hint}remove it; the keys are {', '.join(KEYS)}")
    root = path.parent
    exclude = _string_list(table.get("exclude", []), path, "exclude")
    rules = []
    for r in _string_list(table.get("rules", []), path, "rules"):
        d = (root / r).resolve()
        if not d.is_dir():
            raise ConfigError(path, "rules", f"rule folder {r!r} does not exist (looked for {d})",
                              "give a folder of rule .toml files, relative to this pyproject.toml")
        rules.append(str(d))
    disable = _string_list(table.get("disable", []), path, "disable")
    keras = table.get("keras")
    if keras is not None and (isinstance(keras, bool) or keras not in (2, 3)):
        raise ConfigError(path, "keras", f"expected 2 or 3, found {keras!r}", "write keras = 2 or keras = 3 (a number)")
    max_size = table.get("max_size", DEFAULT_MAX_SIZE)
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size <= 0:
        raise ConfigError(path, "max_size", f"expected a positive number of bytes, found {max_size!r}",
                          f"write e.g. {KEYS['max_size'][1]}")
    return Config(str(path), str(root), exclude, tuple(rules), disable, keras, max_size)


def load_config(start: Path | str | None = None) -> Config:
    """The configuration that applies to ``start`` (a file or folder; the working directory by default)."""
    path = find_pyproject(start)
    if path is None:
        return Config()
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return parse_config(data["tool"]["fwport"], path)


def check_disabled(config: Config, pack: str, known: set[str]) -> None:
    """Every disabled id must name a rule (built-in or in an extra folder): a typo would silently do nothing."""
    for rid in config.disable:
        if rid not in known:
            close = difflib.get_close_matches(rid, sorted(known), n=3)
            hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
            raise ConfigError(config.path or "<options>", "disable", f"no rule {rid!r} in pack {pack!r}",
                              f"{hint}list the rules with `fwport rules {pack}`")
