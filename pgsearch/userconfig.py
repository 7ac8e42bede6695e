"""A person's defaults: which workspace a command uses when none is named.

The first of these that says something wins:

1. ``--workspace``/``-w`` on the command line;
2. ``--workspace-from-cwd``: the project of the current directory (a Claude Code
   worktree counts as its project), the workspace ``ingest --workspace-from-cwd``
   puts that project's logs in;
3. the environment variable ``PGSEARCH_WORKSPACE``;
4. ``workspace = "..."`` in the config file: ``PGSEARCH_CONFIG``, else
   ``$XDG_CONFIG_HOME/pgsearch/config.toml``, else ``~/.config/pgsearch/config.toml``;
5. the workspace named ``default``.

A workspace named by a path is shown by its last component (`short_name`), and a
command given that short name finds it when no other workspace has it
(`pgsearch.cli`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pgsearch.errors import ConfigError

WORKSPACE_VARIABLE = "PGSEARCH_WORKSPACE"
CONFIG_VARIABLE = "PGSEARCH_CONFIG"
DEFAULT_WORKSPACE = "default"
#: Keys the config file may hold.
CONFIG_KEYS = ("workspace",)
#: A Claude Code worktree of a project (``claude --worktree``, sub-agents in
#: ``isolation: worktree``): its sessions belong to the project.
_WORKTREE_RE = re.compile(r"^(.+?)[/\\]\.claude[/\\]worktrees[/\\][^/\\]+(?:[/\\].*)?$")


@dataclass(frozen=True, kw_only=True)
class Chosen:
    """A workspace and what chose it (for messages: ``from PGSEARCH_WORKSPACE``)."""

    workspace: str
    source: str
    #: Chosen from the current directory: its parents may name the workspace instead.
    from_cwd: bool = False


def project_of(cwd: str) -> str:
    """The project a working directory belongs to (a worktree maps to its project)."""
    match = _WORKTREE_RE.match(cwd)
    return match.group(1) if match else cwd


def short_name(workspace: str) -> str:
    """How a workspace is shown: a path by its last component, anything else as it is."""
    if "/" not in workspace and "\\" not in workspace:
        return workspace
    parts = [p for p in re.split(r"[/\\]", workspace) if p]
    return parts[-1] if parts else workspace


def config_path(environ: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    """Where the config file is (whether or not it exists)."""
    env = os.environ if environ is None else environ
    if env.get(CONFIG_VARIABLE):
        return Path(env[CONFIG_VARIABLE]).expanduser()
    if env.get("XDG_CONFIG_HOME"):
        return Path(env["XDG_CONFIG_HOME"]) / "pgsearch" / "config.toml"
    return (home if home is not None else Path.home()) / ".config" / "pgsearch" / "config.toml"


def read_config(path: Path) -> dict[str, str]:
    """The config file's settings (none when it does not exist); `ConfigError` naming
    the file and what is wrong when it cannot be read."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config file ({exc.strerror})") from None
    import tomllib  # only once there is a file to read

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: not a valid TOML file ({exc})") from None
    unknown = sorted(set(data) - set(CONFIG_KEYS))
    if unknown:
        raise ConfigError(
            f"{path}: unknown setting {unknown[0]!r} (known: {', '.join(CONFIG_KEYS)})"
        )
    out: dict[str, str] = {}
    for key, value in data.items():
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{path}: {key} must be a non-empty string")
        out[key] = value.strip()
    return out


def choose_workspace(
    given: str | None,
    *,
    from_cwd: bool = False,
    environ: Mapping[str, str] | None = None,
    cwd: str | None = None,
    home: Path | None = None,
) -> Chosen:
    """The workspace a command uses, by the order in this module's docstring."""
    env = os.environ if environ is None else environ
    if given is not None and from_cwd:
        raise ConfigError("give either --workspace or --workspace-from-cwd, not both")
    if given is not None:
        return Chosen(workspace=given, source="--workspace")
    if from_cwd:
        here = cwd if cwd is not None else os.getcwd()
        return Chosen(workspace=project_of(here), source="the current directory", from_cwd=True)
    if env.get(WORKSPACE_VARIABLE, "").strip():
        return Chosen(workspace=env[WORKSPACE_VARIABLE].strip(), source=WORKSPACE_VARIABLE)
    path = config_path(env, home)
    configured = read_config(path).get("workspace")
    if configured:
        return Chosen(workspace=configured, source=f"the config file {path}")
    return Chosen(workspace=DEFAULT_WORKSPACE, source="the default")


def parents_of(path: str) -> list[str]:
    """`path`'s parent directories, nearest first (for a workspace named by a path)."""
    if not path.startswith("/"):
        return []
    parts = [p for p in path.split("/") if p]
    return ["/" + "/".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]
