"""Where agents keep their session logs by default, as each adapter declares them.

An adapter names its agent's log directories (`pgsearch.adapters.Adapter.locations`)
as patterns, so that ``pgsearch ingest`` with no path can read every agent's logs
on this machine and a new adapter only declares its own:

- ``~`` at the start is the home directory;
- ``${VAR:-default}`` is the environment variable ``VAR`` when it is set and not
  empty, else ``default`` (itself maybe starting with ``~``): the override an agent
  offers for its own directory, such as ``CODEX_HOME`` or ``CLAUDE_CONFIG_DIR``;
- ``*``, ``?`` and ``[...]`` are globs, matched against what exists.

Nothing here imports an adapter's parser: the patterns are plain strings.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Mapping
from pathlib import Path

_VARIABLE_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_GLOB_CHARS = frozenset("*?[")


def expand(pattern: str, environ: Mapping[str, str] | None = None, home: Path | None = None) -> str:
    """`pattern` with its ``${VAR:-default}`` and ``~`` expanded (globs left as they are)."""
    env = os.environ if environ is None else environ
    home_dir = str(home if home is not None else Path.home())

    def variable(match: re.Match[str]) -> str:
        value = env.get(match.group(1), "")
        return value if value else (match.group(2) or "")

    text = _VARIABLE_RE.sub(variable, pattern)
    if text == "~" or text.startswith("~/"):
        text = home_dir + text[1:]
    return text


def existing(
    pattern: str, environ: Mapping[str, str] | None = None, home: Path | None = None
) -> list[Path]:
    """The directories or files `pattern` names that exist, sorted."""
    path = expand(pattern, environ, home)
    if _GLOB_CHARS.isdisjoint(path):
        return [Path(path)] if os.path.exists(path) else []
    return sorted(Path(p) for p in glob.glob(path))


def shown(path: Path | str, home: Path | None = None) -> str:
    """`path` as a person reads it: under the home directory as ``~/...``."""
    home_dir = home if home is not None else Path.home()
    try:
        rest = Path(path).relative_to(home_dir)
    except ValueError:
        return str(path)
    return "~" if str(rest) == "." else f"~/{rest}"
