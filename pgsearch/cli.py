"""The `pgsearch` command: parse arguments, call the API, render text or JSON.

Errors pgsearch raises on purpose print one line (``pgsearch: error: ...``) and exit
with status 1; nothing here prints a traceback for them.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from pgsearch import adapters, embedded, policy
from pgsearch.errors import ConfigError, IngestError, NotFound, PgSearchError
from pgsearch.settings import DEFAULT_WATCH_INTERVAL, Settings
from pgsearch.terminal import inline, json_safe, quoted, terminal_safe
from pgsearch.types import (
    DEFAULT_CONTEXT,
    DEFAULT_EXCERPT_BYTES,
    DEFAULT_LIMIT,
    MAX_WINDOW,
    Scope,
    SessionMatch,
    SessionQueryRequest,
    SessionQueryResult,
    Window,
)

if TYPE_CHECKING:
    from pgsearch.api import PgSearch
    from pgsearch.db.diagnose import ServerFacts
    from pgsearch.ingest import FileResult

F = TypeVar("F", bound=Callable[..., Any])


def _echo(text: str, *, err: bool = False) -> None:
    """Print text with stored control sequences shown as escapes (`pgsearch.terminal`)."""
    click.echo(terminal_safe(text), err=err)


def _echo_json(data: Any) -> None:
    """Print `data` as JSON; control, C1 and bidi characters stay JSON escapes."""
    click.echo(json_safe(json.dumps(data, ensure_ascii=False, indent=2)))


def _fail(message: str) -> None:
    _echo(f"pgsearch: error: {message}", err=True)
    sys.exit(1)


def _broken_pipe() -> NoReturn:
    """The reader of our output went away (``pgsearch search ... | head -1``).

    End the way a well-behaved Unix filter does (``seq``, ``grep``, ``cat``): killed
    by SIGPIPE, which a shell reports as status 141 and does not complain about, and
    without a traceback. By the time this runs the command's database connection
    has been closed by the unwinding ``with`` block. Where there is no SIGPIPE
    (Windows), exit with the same status, 128 + 13.
    """
    # Nothing more may be written: anything still buffered would fail again at exit.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGPIPE)
    sys.exit(BROKEN_PIPE_STATUS)


#: 128 + SIGPIPE: what a shell reports for a writer whose reader closed the pipe.
BROKEN_PIPE_STATUS = 141


def handle_errors(fn: F) -> F:
    """Map `PgSearchError` to one line on stderr and exit status 1; a closed pipe
    to the conventional SIGPIPE ending."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            result = fn(*args, **kwargs)
            # Flush here, not at interpreter exit, where a closed pipe cannot be handled.
            sys.stdout.flush()
            return result
        except BrokenPipeError:
            _broken_pipe()
        except PgSearchError as exc:
            _fail(str(exc))
        except KeyboardInterrupt:
            _echo("pgsearch: interrupted", err=True)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


class Context:
    """Which server a command uses: the configured one, else the private embedded one.

    The embedded server is leased on first use and the lease is given back when the
    command ends (`close`), which stops the server if no other command uses it.
    """

    def __init__(self, dsn: str | None) -> None:
        self.dsn = dsn
        self._lease: embedded.Lease | None = None

    @property
    def uses_embedded(self) -> bool:
        return not embedded.connection_configured(self.dsn)

    def settings(self) -> Settings:
        if not self.uses_embedded:
            return Settings.from_env(dsn=self.dsn)
        return Settings.from_env(dsn=self.lease().dsn)

    def lease(self) -> embedded.Lease:
        if self._lease is None:
            _exit_cleanly_on_signals()
            server = embedded.EmbeddedServer()
            # Read only (no lock taken, nothing written): the home is checked by `lease`.
            first = not (server.home / "initialised").is_file()
            if first:
                _echo(
                    "pgsearch: first run: creating a private PostgreSQL server in "
                    f"{server.home} (a few seconds)...",
                    err=True,
                )
            self._lease = server.lease()
            if first:
                _echo("pgsearch: private server ready", err=True)
        return self._lease

    def open(self) -> PgSearch:
        # Imported here: a command that needs no database (help, tool-schema) skips it.
        from pgsearch.api import PgSearch

        # No connection opened ahead of use: the first unit takes the one that checked
        # the schema, and a command opens more only if it runs units in parallel.
        settings = self.settings().with_(pool_min=0)
        if self._lease is not None:
            return embedded.open_migrated(settings)
        return PgSearch.connect(settings=settings)

    def close(self) -> None:
        if self._lease is not None:
            lease, self._lease = self._lease, None
            lease.release()


def _exit_cleanly_on_signals() -> None:
    """Turn SIGTERM and SIGHUP into a normal exit, so that the lease is given back."""
    import signal

    def leave(signum: int, frame: object) -> None:
        sys.exit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, leave)


pass_ctx = click.make_pass_decorator(Context)

dsn_option = click.option(
    "--dsn",
    envvar="PGSEARCH_DSN",
    default=None,
    help="PostgreSQL connection string (else PGSEARCH_DSN, else libpq PG* variables, "
    "else the private embedded server).",
)


def _workspace_chosen(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    """The workspace a command uses (`pgsearch.userconfig`): -w, else PGSEARCH_WORKSPACE,
    else the config file, else ``default``; what chose it is kept for messages."""
    from pgsearch import userconfig

    try:
        chosen = userconfig.choose_workspace(value)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    ctx.meta["pgsearch.workspace"] = chosen
    return chosen.workspace


workspace_option = click.option(
    "--workspace",
    "-w",
    default=None,
    callback=_workspace_chosen,
    help="Workspace (tenant) id to work in (else PGSEARCH_WORKSPACE, else `workspace` in "
    "~/.config/pgsearch/config.toml, else 'default').",
)


def _known_workspace(pg: PgSearch, workspace: str) -> str:
    """`workspace` when it holds data; the one workspace it is the short name of (the
    last component of a workspace named by a path); else `ConfigError` naming what
    chose it and the closest existing workspaces."""
    import difflib

    from pgsearch import userconfig

    try:
        names = pg.workspaces()
    except ConfigError:  # row level security: workspaces cannot be listed
        return workspace
    if workspace in names:
        return workspace
    by_short = [n for n in names if userconfig.short_name(n) == workspace]
    if len(by_short) == 1:
        return by_short[0]
    if not names:  # nothing ingested anywhere yet: an empty answer says enough
        return workspace
    chosen = click.get_current_context().meta.get("pgsearch.workspace")
    source = f" (from {chosen.source})" if chosen is not None else ""
    shown = {userconfig.short_name(n): n for n in names}
    close = difflib.get_close_matches(workspace, [*names, *shown], n=3, cutoff=0.5)
    picks = list(dict.fromkeys(shown.get(c, c) for c in close))
    if picks:
        hint = "closest: " + ", ".join(inline(n) for n in picks)
    else:
        more = f" and {len(names) - 5} more" if len(names) > 5 else ""
        hint = "existing: " + ", ".join(inline(n) for n in names[:5]) + more
    raise ConfigError(f"no workspace {workspace!r}{source}; {hint}")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@dsn_option
@click.option("-v", "--verbose", count=True, help="Log more (-v info, -vv debug).")
@click.version_option(package_name="pgsearch")
@click.pass_context
def main(ctx: click.Context, dsn: str | None, verbose: int) -> None:
    """Search AI agent session histories stored in PostgreSQL."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    ctx.obj = Context(dsn)
    ctx.call_on_close(ctx.obj.close)


def run(args: Sequence[str] | None = None) -> NoReturn:
    """The ``pgsearch`` program: `main`, then the process ends at once.

    When `main` returns, the command's work is done: its connections are closed, its
    lease on the embedded server given back, its output written. Tearing down the
    interpreter after that (every module and object freed one by one) costs a short
    command such as a search about as much as its own query, so the process ends
    without it, once the exit handlers have run and the output is flushed. Should a
    thread still run, the interpreter's own exit (which waits for it) is used.
    """
    import atexit
    import gc
    import threading

    # Young-object collections 30 times rarer: a command builds its objects (modules,
    # classes) mostly at start, where collecting every 700 allocations found nothing
    # to free and cost a short command a twentieth of its time.
    gc.set_threshold(20_000, *gc.get_threshold()[1:])
    try:
        main.main(args=args)  # standalone: always ends by raising SystemExit
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    if threading.active_count() > 1:
        raise SystemExit(code)
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)  # as the interpreter does with sys.exit("text")
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120  # the interpreter's status when flushing fails at exit
    os._exit(code)


def _time(value: str | None, name: str) -> datetime | None:
    if value is None:
        return None
    from pgsearch.messages import parse_time

    try:
        return parse_time(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 time", param_hint=name) from None


@main.command()
@click.option("--revision", default="head", show_default=True, help="Target revision.")
@click.option("--create", is_flag=True, help="Create the database first if it does not exist.")
@click.option(
    "--downgrade",
    is_flag=True,
    help="Go down to --revision (dropping what later revisions added).",
)
@click.option(
    "--distribute",
    is_flag=True,
    help="Then distribute a single-node schema over Citus, with its data "
    "(the citus extension and its workers must be set up; see docs/scale-out.md).",
)
@pass_ctx
@handle_errors
def migrate(ctx: Context, revision: str, create: bool, downgrade: bool, distribute: bool) -> None:
    """Create or upgrade the pgsearch schema (run this in deploys)."""
    from pgsearch.api import PgSearch

    if distribute and downgrade:
        raise click.UsageError("--distribute and --downgrade cannot be combined")
    current = PgSearch.migrate(
        ctx.settings().dsn, revision, create=create, downgrade=downgrade, distribute=distribute
    )
    _echo(f"schema at revision {current}")


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=str))
@workspace_option
@click.option(
    "--relocate",
    nargs=2,
    type=click.Path(path_type=str),
    default=None,
    metavar="OLD NEW",
    help="What was ingested from OLD (a file or directory) now lives at NEW: re-home it, "
    "then ingest NEW (or the PATHS given).",
)
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(file_okay=False, path_type=str),
    help="Only read files under this directory (repeatable; symlinks resolved first).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(adapters.FORMAT_CHOICES),
    default=adapters.AUTO,
    show_default=True,
    help="Log format: pgsearch's OpenAI-style messages, Claude Code, Codex CLI, Gemini CLI "
    "or OpenCode sessions (auto: detected per file).",
)
@click.option(
    "--workspace-from-cwd",
    is_flag=True,
    help="Put each agent log in the workspace named by its working directory "
    "(--workspace for files that name none).",
)
@click.option(
    "--include-forgotten",
    is_flag=True,
    help="Bring back sessions removed with `pgsearch forget` (they stay forgotten otherwise).",
)
@click.option(
    "--watch",
    is_flag=True,
    help="Keep running: ingest files as they appear and grow, until Ctrl-C.",
)
@click.option(
    "--interval",
    default=DEFAULT_WATCH_INTERVAL,
    show_default=True,
    type=click.FloatRange(min=0.05),
    help="Seconds between polls with --watch.",
)
@pass_ctx
@handle_errors
def ingest(
    ctx: Context,
    paths: tuple[str, ...],
    workspace: str,
    roots: tuple[str, ...],
    quiet: bool,
    fmt: str,
    workspace_from_cwd: bool,
    include_forgotten: bool,
    watch: bool,
    interval: float,
    relocate: tuple[str, str] | None,
) -> None:
    """Ingest session files, or directories holding them; with none, every supported
    agent's default log locations on this machine (what was found is said).

    Reads pgsearch's own JSON Lines format and, detected per file, Claude Code
    session logs (~/.claude/projects), Codex CLI rollouts (~/.codex/sessions),
    Gemini CLI sessions (~/.gemini/tmp) and OpenCode sessions (its storage directory
    or `opencode export` files). Each file is one transaction. A file in pgsearch's
    format with a bad line is rejected whole (the error names file:line); in an agent
    log a bad line is skipped with a warning naming file:line and the rest lands.
    Re-ingesting is safe; a file that grew adds only its new lines. Exit status is 1
    if any file failed.

    With --watch, files are polled and re-ingested as they grow (a rewritten file is
    re-read whole); Ctrl-C stops and prints a summary.

    A session removed with `pgsearch forget` stays forgotten when its file is
    ingested or watched again; --include-forgotten brings it back.

    A file that moved (its directory renamed) is recognised by its content at the
    new path; --relocate OLD NEW says so explicitly for a whole tree.
    """
    if relocate:
        old, new = relocate
        with ctx.open() as pg:
            moved = pg.relocate(workspace=workspace, old=old, new=new)
        _echo(f"relocated {moved} files from {old} to {new}", err=True)
        paths = paths or (new,)
    if not paths:
        paths = _default_log_paths()
    if watch:
        _watch(
            ctx,
            paths,
            workspace=workspace,
            roots=roots,
            fmt=fmt,
            workspace_from_cwd=workspace_from_cwd,
            include_forgotten=include_forgotten,
            interval=interval,
            quiet=quiet,
        )
        return
    from pgsearch.ingest import find_jsonl

    unreadable: list[IngestError] = []
    files = find_jsonl(paths, unreadable)
    for problem in unreadable:
        _echo(f"pgsearch: warning: {problem}", err=True)
    if not files:
        _fail("no session files found in " + ", ".join(paths))
    with ctx.open() as pg:
        show = not quiet and sys.stderr.isatty()
        errors: list[str] = []

        def note(result: FileResult) -> None:
            if result.error is not None:
                errors.append(f"error: {result.error}")
            errors.extend(f"warning: {w}" for w in _warnings(result))
            if not show:
                for line in errors:
                    _echo(f"pgsearch: {line}", err=True)
                errors.clear()

        if show:
            with click.progressbar(length=len(files), label="ingesting", file=sys.stderr) as bar:

                def tick(result: FileResult) -> None:
                    note(result)
                    bar.update(1)

                report = pg.ingest_paths(
                    files,
                    workspace=workspace,
                    roots=roots or None,
                    on_file=tick,
                    format=fmt,
                    workspace_from_cwd=workspace_from_cwd,
                    include_forgotten=include_forgotten,
                )
            for line in errors:
                _echo(f"pgsearch: {line}", err=True)
        else:
            report = pg.ingest_paths(
                files,
                workspace=workspace,
                roots=roots or None,
                on_file=note,
                format=fmt,
                workspace_from_cwd=workspace_from_cwd,
                include_forgotten=include_forgotten,
            )
    _echo(report.summary())
    if report.errors:
        sys.exit(1)


def _default_log_paths() -> tuple[str, ...]:
    """Every supported agent's default log locations that exist on this machine, said
    on stderr (found where, and which agents have none); fails when there are none."""
    from pgsearch.locations import shown

    found: dict[str, list[str]] = {}
    missing: list[str] = []
    for location in adapters.default_locations():
        if location.paths:
            found.setdefault(location.label, []).extend(str(p) for p in location.paths)
        elif location.label not in missing:
            missing.append(location.label)
    missing = [label for label in missing if label not in found]
    if not found:
        _fail(
            "no agent logs in their default locations (pgsearch ingest --help lists them); "
            "give the session files or directories to ingest"
        )
    for label, where in found.items():
        places = ", ".join(shown(p) for p in dict.fromkeys(where))
        _echo(f"found {label} logs: {places}", err=True)
    if missing:
        _echo(f"none found for: {', '.join(missing)}", err=True)
    return tuple(dict.fromkeys(p for where in found.values() for p in where))


def _warnings(result: FileResult) -> list[str]:
    """The lines an agent log skipped, one per line (the rest counted)."""
    out = [str(w) for w in result.warnings]
    more = result.bad_lines - len(result.warnings)
    if more > 0:
        out.append(f"{result.path}: {more} more bad lines skipped")
    return out


def _color() -> bool:
    """Whether to colour output: standard output is a terminal and NO_COLOR is unset."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


#: How each kind of entry is named in a hit's header line.
_KIND_LABELS = {
    policy.USER_TEXT: "user",
    policy.ASSISTANT_TEXT: "assistant",
    policy.TOOL_INPUT: "tool call",
    policy.TOOL_OUTPUT: "tool output",
    policy.TOOL_ERROR: "tool error",
}
_BOLD, _DIM, _RESET = "\x1b[1m", "\x1b[2m", "\x1b[0m"


def _hit_header(m: SessionMatch, rank: int, *, browsing: bool, color: bool) -> str:
    """A hit's header line: rank, title and where it is (session and seq), what kind
    of entry, when (UTC, to the minute) and, for a search, its score. Stored fields
    are quoted or bare (`pgsearch.terminal.quoted`, `inline`): none can add a line
    or pass for another field."""
    title = terminal_safe(quoted(m.title)) + " " if m.title else ""
    where = f"{inline(m.session_id)} #{m.seq}"
    if m.parent_session_id:
        where += f" (in {inline(m.parent_session_id)})"
    kind = _KIND_LABELS.get(m.kind, m.kind)
    if m.tool_name:
        kind += f" {inline(m.tool_name)}"
    when = m.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    where, kind = terminal_safe(where), terminal_safe(kind)
    after = when if browsing else f"{when} · score {m.score:.3f}"
    if not color:
        return f"{rank}. {title}{where} · {kind} · {after}"
    return f"{_BOLD}{rank}. {title}{_RESET}{_DIM}{where}{_RESET} · {kind} · {_DIM}{after}{_RESET}"


def _render_result(
    result: SessionQueryResult, workspace: str, *, browsing: bool = False, color: bool = False
) -> str:
    """A result as text, safe to print as it is (stored control sequences escaped):
    per hit a header line (`_hit_header`), then its excerpt on one line indented by
    three spaces, so that no excerpt passes for a header. `browsing` (an empty query)
    lists newest entries: no scores. `color` shows the header in bold and dim and the
    matched words of each excerpt in bold colour."""
    from pgsearch.highlight import terminal_excerpt

    lines: list[str] = []
    if not result.matches:
        what = "no entries" if browsing else "no matches"
        lines.append(f"{what} ({_plural(result.searched, 'entry', 'entries')} searched)")
        if result.notice:
            lines.append(result.notice)
        return terminal_safe("\n".join(lines))
    if browsing:
        lines.append("newest entries:")
    for i, m in enumerate(result.matches, 1):
        lines.append(_hit_header(m, i, browsing=browsing, color=color))
        lines.append("   " + terminal_excerpt(m.excerpt, m.highlights, color=color))
    tail: list[str] = [""]
    shown = (
        _plural(len(result.matches), "entry", "entries")
        if browsing
        else _plural(len(result.matches), "match", "matches")
    )
    tail.append(
        f"{shown}, {_plural(result.searched, 'entry', 'entries')} searched"
        + (" (candidate cap reached)" if result.candidates_capped else "")
    )
    if result.notice:
        tail.append(result.notice)
    first = result.matches[0]
    tail.append(
        f"open a window: pgsearch around -w {workspace} --session {inline(first.session_id)} "
        f"--seq {first.seq}"
    )
    if result.next_cursor:
        tail.append(f"next page: add --cursor {result.next_cursor}")
    return "\n".join([*lines, terminal_safe("\n".join(tail))])


@main.command()
@click.argument("query", default="")
@workspace_option
@click.option("--session", "session_id", default=None, help="Search one session only.")
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice(policy.ALL_KINDS),
    help="Entry kinds to search (repeatable). Default: user, assistant, tool input, tool error.",
)
@click.option(
    "--role", "roles", multiple=True, type=click.Choice(policy.ROLES), help="Roles (repeatable)."
)
@click.option("--tool", "tool_name", default=None, help="Only entries of this tool.")
@click.option("--since", default=None, help="Only entries at or after this ISO 8601 time.")
@click.option("--until", default=None, help="Only entries before this ISO 8601 time.")
@click.option(
    "--limit",
    "-n",
    default=DEFAULT_LIMIT,
    show_default=True,
    type=click.IntRange(1),
    help="Matches per page (at most 50).",
)
@click.option(
    "--excerpt-bytes",
    default=DEFAULT_EXCERPT_BYTES,
    show_default=True,
    type=click.IntRange(1),
    help="Excerpt size (at most 2000).",
)
@click.option(
    "--all-hits", is_flag=True, help="Every matching entry, not just the best per session."
)
@click.option("--cursor", default=None, help="Continue from a previous page's cursor.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--explain",
    is_flag=True,
    help="Also print the search's plan, then each SQL statement and its server plan.",
)
@pass_ctx
@handle_errors
def search(
    ctx: Context,
    query: str,
    workspace: str,
    session_id: str | None,
    kinds: tuple[str, ...],
    roles: tuple[str, ...],
    tool_name: str | None,
    since: str | None,
    until: str | None,
    limit: int,
    excerpt_bytes: int,
    all_hits: bool,
    cursor: str | None,
    as_json: bool,
    explain: bool,
) -> None:
    """Search a workspace's sessions; an empty QUERY lists the newest entries.

    Typos, accents and case are tolerated ("databse" finds "database", "pokemon"
    finds "Pokémon"); quote words to prefer them as a phrase.
    """
    request = SessionQueryRequest(
        query=query,
        kinds=kinds,
        roles=roles,
        tool_name=tool_name,
        since=_time(since, "--since"),
        until=_time(until, "--until"),
        limit=limit,
        excerpt_bytes=excerpt_bytes,
        per_session=not all_hits,
        cursor=cursor,
        session_id=session_id,
    )
    with ctx.open() as pg:
        provider = pg.provider(workspace=workspace)
        result = provider.explain(request) if explain else provider.search(request)
        if result.searched == 0 and not result.matches:
            known = _known_workspace(pg, workspace)
            if known != workspace:
                workspace = known
                provider = pg.provider(workspace=workspace)
                result = provider.explain(request) if explain else provider.search(request)
    if as_json:
        data = result.to_json()
        if explain:
            if result.trace is not None:
                data["plan"] = result.trace.to_json()
            data["explain"] = list(result.explain)
        _echo_json(data)
        return
    if explain:
        if result.trace is not None:
            _echo(result.trace.describe())
            _echo("")
        for statement in result.explain:
            _echo(statement)
            _echo("")
    browsing = not (query or "").strip()
    click.echo(_render_result(result, workspace, browsing=browsing, color=_color()))


def _render_window(window: Window) -> str:
    lines = []
    for m in window.messages:
        # Headers start with a mark, message lines with spaces: no text passes for one.
        mark = ">>" if m.anchor else "--"
        tool = f" tool={inline(m.tool_name)}" if m.tool_name else ""
        lines.append(
            f"{mark} seq={m.seq} {m.kind} role={m.role}{tool} turn={m.turn} "
            f"{m.created_at.isoformat(timespec='seconds')}"
        )
        # Only newlines break lines: splitlines() would also obey \v, \f, \x1c-\x1e,
        # U+0085 and U+2028 from the log, which are shown escaped instead.
        content = m.content.replace("\r\n", "\n")
        if m.kind == "tool_input":
            from pgsearch.calls import readable_calls

            content = readable_calls(content)
        for text_line in content.split("\n"):
            lines.append(f"   {text_line}")
    if window.next_seq is not None:
        lines.append(f"more: --seq {window.next_seq}")
    return "\n".join(lines)


@main.command()
@workspace_option
@click.option("--session", "session_id", required=True, help="Session id.")
@click.option(
    "--seq", required=True, type=click.IntRange(0), help="Sequence number of the anchor message."
)
@click.option(
    "--before",
    "-B",
    default=DEFAULT_CONTEXT,
    show_default=True,
    type=click.IntRange(0),
    help="Messages before the anchor.",
)
@click.option(
    "--after",
    "-A",
    default=DEFAULT_CONTEXT,
    show_default=True,
    type=click.IntRange(0),
    help="Messages after the anchor.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the window as JSON.")
@pass_ctx
@handle_errors
def around(
    ctx: Context, workspace: str, session_id: str, seq: int, before: int, after: int, as_json: bool
) -> None:
    """Show the messages around one message (at most 16, anchor always shown)."""
    with ctx.open() as pg:
        try:
            window = pg.around(
                workspace=workspace, session_id=session_id, seq=seq, before=before, after=after
            )
        except NotFound:
            known = _known_workspace(pg, workspace)
            if known == workspace:
                raise
            window = pg.around(
                workspace=known, session_id=session_id, seq=seq, before=before, after=after
            )
    if as_json:
        _echo_json(window.to_json())
    else:
        _echo(_render_window(window))


@main.command()
@workspace_option
@click.option("--session", "session_id", required=True, help="Session id.")
@click.option(
    "--seq",
    "start_seq",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    help="First seq to show.",
)
@click.option(
    "--limit",
    "-n",
    default=MAX_WINDOW,
    show_default=True,
    type=click.IntRange(1, MAX_WINDOW),
    help="Messages per page.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the page as JSON.")
@pass_ctx
@handle_errors
def messages(
    ctx: Context, workspace: str, session_id: str, start_seq: int, limit: int, as_json: bool
) -> None:
    """List one session's messages, a page at a time."""
    with ctx.open() as pg:
        try:
            window = pg.session_messages(
                workspace=workspace, session_id=session_id, start_seq=start_seq, limit=limit
            )
        except NotFound:
            known = _known_workspace(pg, workspace)
            if known == workspace:
                raise
            window = pg.session_messages(
                workspace=known, session_id=session_id, start_seq=start_seq, limit=limit
            )
    if as_json:
        _echo_json(window.to_json())
    else:
        _echo(_render_window(window))


@main.command()
@workspace_option
@click.option(
    "--limit",
    "-n",
    default=100,
    show_default=True,
    type=click.IntRange(1),
    help="Sessions to list.",
)
@click.option("--offset", default=0, type=click.IntRange(0), help="Skip this many.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
@handle_errors
def sessions(ctx: Context, workspace: str, limit: int, offset: int, as_json: bool) -> None:
    """List a workspace's sessions, most recently active first."""
    with ctx.open() as pg:
        rows = pg.sessions(workspace=workspace, limit=limit, offset=offset)
        if not rows and offset == 0:
            known = _known_workspace(pg, workspace)
            if known != workspace:
                workspace = known
                rows = pg.sessions(workspace=workspace, limit=limit, offset=offset)
    if as_json:
        _echo_json([s.to_json() for s in rows])
        return
    if not rows:
        _echo(f"no sessions in workspace {workspace!r}")
    for s in rows:
        when = s.updated_at.isoformat(timespec="seconds") if s.updated_at else "-"
        title = quoted(s.title) if s.title else ""
        _echo(f"{inline(s.session_id)}\t{s.message_count} messages\t{when}\t{title}")


@main.command()
@workspace_option
@click.option("--session", "session_id", default=None, help="Forget one session only.")
@click.option(
    "--yes", is_flag=True, help="Do not ask for confirmation when forgetting a whole workspace."
)
@pass_ctx
@handle_errors
def forget(ctx: Context, workspace: str, session_id: str | None, yes: bool) -> None:
    """Delete a session (or a whole workspace) and update statistics.

    A forgotten session stays forgotten: ingesting or watching its file again skips
    it, until `pgsearch ingest --include-forgotten`. Forgetting a whole workspace
    removes everything of it; ingesting its files again starts afresh.
    """
    if (
        session_id is None
        and not yes
        and not click.confirm(f"Delete every session of workspace {workspace!r}?", err=True)
    ):
        _fail("nothing deleted")
    with ctx.open() as pg:
        if session_id is None:
            workspace = _known_workspace(pg, workspace)
        count = pg.forget(workspace=workspace, session_id=session_id)
    what = f"session {session_id!r}" if session_id else f"workspace {workspace!r}"
    _echo(f"forgot {what}: {count} messages deleted")


def _cache_line(facts: ServerFacts) -> str:
    """`pgsearch doctor`'s line on the server's buffer cache."""
    if not facts.tables:
        return f"shared_buffers {_size(facts.cache_bytes)}; no pgsearch tables yet"
    ratio = facts.hit_ratio
    reads = (
        "no block reads of them counted yet"
        if ratio is None
        else f"{100 * ratio:.1f} % of their block reads found there since the statistics were reset"
    )
    return (
        f"shared_buffers {_size(facts.cache_bytes)} for {_size(facts.searched_bytes)} of "
        f"searched tables and indexes; {reads}"
    )


def _size(num: int) -> str:
    value = float(num)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{num} B"


@main.command()
@click.option("--workspace", "-w", "workspaces", multiple=True, help="Only these workspaces.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
@handle_errors
def stats(ctx: Context, workspaces: Sequence[str], as_json: bool) -> None:
    """Per-workspace counts (sessions, messages, indexed, vocabulary) and table sizes."""
    with ctx.open() as pg:
        names = [_known_workspace(pg, w) for w in workspaces] or pg.workspaces()
        per = [pg.stats(workspace=w) for w in names]
        sizes = pg.table_sizes()
    if as_json:
        data = {"workspaces": [s.to_json() for s in per], "tables": [t.to_json() for t in sizes]}
        _echo_json(data)
        return
    _echo("workspace\tsessions\tmessages\tindexed\tvocabulary\tlisted terms\tlists behind")
    for s in per:
        behind = "never built" if s.lists_built_at is None else str(s.lists_behind)
        _echo(
            f"{s.workspace_id}\t{s.sessions}\t{s.messages}\t{s.indexed_messages}"
            f"\t{s.vocabulary}\t{s.listed_terms}\t{behind}"
        )
    _echo("")
    _echo("table\ttable size\tindex size")
    for t in sizes:
        _echo(f"{t.table}\t{_size(t.table_bytes)}\t{_size(t.index_bytes)}")


@main.command()
@click.option("--workspace", "-w", "workspaces", multiple=True, help="Only these workspaces.")
@click.option(
    "--if-behind",
    is_flag=True,
    help="Only workspaces whose lists fell behind (as ingest judges), not every one.",
)
@pass_ctx
@handle_errors
def maintain(ctx: Context, workspaces: Sequence[str], if_behind: bool) -> None:
    """Rebuild the term lists that bound the work of searches for frequent words.

    Each workspace is rebuilt in one transaction of its own, so a run stopped midway
    loses nothing: searches use the previous lists and read the messages stored since
    directly. `pgsearch stats` shows how far behind each workspace's lists are. A
    workspace's counts of entries by kind, role and tool are counted again first if a
    writer of an earlier release left them behind.
    """
    with ctx.open() as pg:
        names = [_known_workspace(pg, w) for w in workspaces] or pg.workspaces()
        for name in names:
            done = pg.maintain(workspace=name, force=not if_behind)
            if done:
                s = pg.stats(workspace=name)
                _echo(f"{name}: {s.listed_terms} terms listed")
            else:
                _echo(f"{name}: current")


@main.command("mcp")
@click.option(
    "--dsn",
    default=None,
    help="PostgreSQL connection string (else the global --dsn, PGSEARCH_DSN or PG*).",
)
@workspace_option
@click.option(
    "--session",
    "session_id",
    default=None,
    help="Pin the server to one session (tools then cannot reach others).",
)
@pass_ctx
@handle_errors
def mcp_command(ctx: Context, dsn: str | None, workspace: str, session_id: str | None) -> None:
    """Serve the session tools to an MCP client over stdio.

    The scope is fixed here: tool calls naming another workspace or session are
    refused. Needs the optional MCP SDK: pip install 'pgsearch[mcp]'.
    """
    from pgsearch import mcp_server

    if dsn:
        ctx.dsn = dsn
    # Opened once here so that a wrong DSN, a schema out of date or a bad scope fail
    # before the protocol starts (the embedded server is also migrated by it).
    with ctx.open() as pg:
        pg.provider(workspace=workspace, session_id=session_id)
        settings = pg.settings
    mcp_server.serve_stdio(settings, workspace=workspace, session_id=session_id)


@main.command("tool-schema")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["openai", "anthropic", "mcp"]),
    default="openai",
    show_default=True,
    help="Tool definition format of the host.",
)
@handle_errors
def tool_schema(fmt: str) -> None:
    """Print the session tools' names, descriptions and JSON schemas."""
    from pgsearch import tools

    _echo_json(tools.tool_definitions(fmt))


def _watch(
    ctx: Context,
    paths: Sequence[str],
    *,
    workspace: str,
    roots: Sequence[str],
    fmt: str,
    workspace_from_cwd: bool,
    include_forgotten: bool,
    interval: float,
    quiet: bool,
) -> None:
    """`pgsearch ingest --watch`: poll until Ctrl-C (or SIGTERM), then print a summary.

    With `include_forgotten`, the first pass over each file brings its forgotten
    sessions back; later passes leave what is forgotten afterwards forgotten."""
    import signal

    from pgsearch.watch import Watcher

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # Ctrl-C stops the watch even when the shell started it with SIGINT ignored (as
    # it does for background jobs); SIGTERM from a service manager stops it the same way.
    previous = signal.signal(signal.SIGTERM, stop)
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with ctx.open() as pg:
            seen: set[Path] = set()

            def ingest_one(path: Path) -> FileResult:
                first = path not in seen
                seen.add(path)
                return pg.ingest_file(
                    path,
                    workspace=workspace,
                    roots=roots or None,
                    format=fmt,
                    workspace_from_cwd=workspace_from_cwd,
                    include_forgotten=include_forgotten and first,
                )

            def note(result: FileResult) -> None:
                for warning in _warnings(result):
                    _echo(f"pgsearch: warning: {warning}", err=True)
                if result.error is not None:
                    _echo(f"pgsearch: error: {result.error}", err=True)
                elif not quiet and (result.messages or result.rewritten):
                    what = " (rewritten: re-read whole)" if result.rewritten else ""
                    _echo(
                        f"{result.path}: +{result.messages} messages{what} "
                        f"[workspace {result.workspace}]"
                    )

            watcher = Watcher(ingest_one, paths, interval=interval, on_file=note)
            if not quiet:
                _echo(f"watching {', '.join(paths)} every {interval:g}s; Ctrl-C stops", err=True)
            stats = watcher.run()
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
    _echo(f"stopped: {stats.summary()}")


# --- the embedded server and the doctor -----------------------------------------------


def _embedded_server() -> embedded.EmbeddedServer:
    return embedded.EmbeddedServer()


@main.group()
def server() -> None:
    """Manage the private embedded PostgreSQL (used when no server is configured).

    Commands start it on first use and the last one to finish stops it; `server
    start` keeps it up for long-lived hosts until `server stop`.
    """


@server.command("start")
@pass_ctx
@handle_errors
def server_start(ctx: Context) -> None:
    """Start the embedded server (initialising and migrating it) and keep it running."""
    srv = _embedded_server()
    with srv.lease() as lease:
        embedded.open_migrated(Settings.from_env(dsn=lease.dsn)).close()
        srv.pin(True)
    state = srv.status()
    _echo(
        f"embedded PostgreSQL {state.version} running (PID {state.pid}), data in {state.data}; "
        "it stays up until `pgsearch server stop`"
    )
    if not ctx.uses_embedded:
        _echo(
            "note: a server is configured (--dsn, PGSEARCH_DSN or PG*), so commands use "
            "that one, not this",
            err=True,
        )


@server.command("stop")
@handle_errors
def server_stop() -> None:
    """Stop the embedded server now, or when the commands still using it finish."""
    server = _embedded_server()
    if not server.status().running:
        server.stop()  # unpins it all the same
        _echo("embedded server is not running: nothing to stop")
        return
    users = server.stop()
    if users:
        pids = ", ".join(str(u.pid) for u in users)
        _echo(
            f"still in use by {len(users)} command(s) (PID {pids}); it stops when the "
            "last one finishes"
        )
    else:
        _echo("embedded server stopped")


@server.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@handle_errors
def server_status(as_json: bool) -> None:
    """Whether the embedded server runs, who uses it, where its data is (exit 3: stopped)."""
    state = _embedded_server().status()
    if as_json:
        _echo(
            json.dumps(
                {
                    "home": str(state.home),
                    "data": str(state.data),
                    "initialised": state.initialised,
                    "running": state.running,
                    "pid": state.pid,
                    "version": state.version,
                    "pinned": state.pinned,
                    "users": [{"pid": u.pid, "command": u.command} for u in state.users],
                    "dsn": state.dsn,
                },
                indent=2,
            )
        )
    else:
        running = f"running (PID {state.pid})" if state.running else "stopped"
        _echo(f"embedded PostgreSQL {state.version}: {running}")
        _echo(f"data: {state.data}" + ("" if state.initialised else " (not initialised)"))
        _echo(f"connection: {state.dsn}")
        kept = (
            "kept running (pgsearch server start)" if state.pinned else "stops with its last user"
        )
        _echo(f"lifetime: {kept}")
        users = ", ".join(f"{u.pid} ({u.command})" for u in state.users) or "none"
        _echo(f"users: {users}")
    if not state.running:
        sys.exit(3)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_ctx
@handle_errors
def doctor(ctx: Context, as_json: bool) -> None:
    """Report the server in use: where, version, locale, extensions, schema, sizes, cache.

    Exit status 1 when something would keep pgsearch from working well.
    """
    from pgsearch.db import diagnose
    from pgsearch.db.dsn import redact_dsn

    early: list[str] = []
    if ctx.uses_embedded:
        srv = _embedded_server()
        dsn = ctx.lease().dsn
        where = f"embedded (private, data in {srv.data})"
        source = "embedded"
        try:  # what any other command would do first: migrate the private database
            ctx.open().close()
        except PgSearchError as exc:
            early.append(str(exc))
    else:
        dsn = ctx.settings().dsn
        source = "--dsn or PGSEARCH_DSN" if ctx.dsn else "libpq PG* variables"
        where = f"{redact_dsn(dsn) or 'libpq defaults'} (from {source})"
    facts = diagnose.inspect(dsn)
    problems = early + facts.problems()
    if as_json:
        _echo(
            json.dumps(
                {
                    "server": source,
                    "where": where,
                    "version": facts.version,
                    "database": facts.database,
                    "user": facts.user,
                    "encoding": facts.encoding,
                    "collate": facts.collate,
                    "ctype": facts.ctype,
                    "locale_provider": facts.locale_provider,
                    "trigrams_see_accents": facts.trigrams_see_accents,
                    "extensions": {
                        e.name: {"installed": e.installed, "available": e.available}
                        for e in facts.extensions
                    },
                    "revision": facts.revision,
                    "head_revision": facts.head_revision,
                    "database_bytes": facts.database_bytes,
                    "tables": [
                        {"table": t, "table_bytes": tb, "index_bytes": ib}
                        for t, tb, ib in facts.tables
                    ],
                    "lists": [
                        {"workspace_id": ws, "built": built, "behind": behind}
                        for ws, built, behind in facts.lists
                    ],
                    "cache": {
                        "shared_buffers_bytes": facts.cache_bytes,
                        "searched_bytes": facts.searched_bytes,
                        "hit_ratio": facts.hit_ratio,
                        "note": facts.cache_note(),
                    },
                    "problems": problems,
                },
                indent=2,
            )
        )
    else:
        _echo(f"server: {where}")
        _echo(f"version: PostgreSQL {facts.version}")
        _echo(f"database: {facts.database} (user {facts.user})")
        _echo(
            f"locale: encoding {facts.encoding}, collation {facts.collate} "
            f"({facts.locale_provider}), ctype {facts.ctype}"
        )
        exts = ", ".join(
            f"{e.name} {e.installed}"
            if e.installed
            else f"{e.name} (not installed{'' if e.available else ', not available'})"
            for e in facts.extensions
        )
        _echo(f"extensions: {exts}")
        current = (
            "current" if facts.revision == facts.head_revision else f"needs {facts.head_revision}"
        )
        _echo(f"schema: revision {facts.revision or 'none'} ({current})")
        sizes = "; ".join(f"{t} {_size(tb)} + {_size(ib)} indexes" for t, tb, ib in facts.tables)
        _echo(f"size: database {_size(facts.database_bytes)}" + (f"; {sizes}" if sizes else ""))
        if facts.lists:
            lists = ", ".join(
                f"{ws} {behind:,} behind" if built else f"{ws} never built"
                for ws, built, behind in facts.lists
            )
            _echo(f"term lists: {lists}")
        _echo(f"cache: {_cache_line(facts)}")
        note = facts.cache_note()
        if note:
            _echo(f"cache hint: {note}")
        for problem in problems:
            _echo(f"problem: {problem}")
        if not problems:
            _echo("no problems found")
    if problems:
        sys.exit(1)


# --- serving over HTTP ----------------------------------------------------------------

#: The only addresses `serve --open` (no token) listens on.
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _open_scope(
    open_mode: bool, host: str, workspace: str | None, session_id: str | None, write: bool
) -> Scope | None:
    """The scope of `serve --open`, or None in token mode; refuses options that do not
    belong to the mode."""
    from pgsearch.validate import check_workspace

    if not open_mode:
        if workspace is not None or session_id is not None or write:
            raise ConfigError(
                "-w, --session and --write belong to --open mode; "
                "without it the token names the scope"
            )
        return None
    if workspace is None:
        raise ConfigError("--open serves one workspace: name it with -w/--workspace")
    if host not in LOOPBACK:
        raise ConfigError(
            f"--open serves without tokens, so it listens on 127.0.0.1 only, not {host!r}"
        )
    return Scope(workspace=check_workspace(workspace), session_id=session_id)


def _bound_roots(
    open_scope: Scope | None, roots: Sequence[str], bound: Sequence[tuple[str, str]]
) -> tuple[tuple[str, Path], ...]:
    """The (workspace, directory) pairs of `serve`'s ingest roots: a bare root is the
    open workspace's; in token mode every root names its workspace."""
    from pgsearch.validate import check_workspace

    pairs = [(check_workspace(ws), Path(d).resolve()) for ws, d in bound]
    if roots and open_scope is None:
        raise ConfigError(
            "--ingest-root is for --open mode; with tokens, bind each directory to the "
            "workspace whose tokens may ingest from it: --ingest-root-for WORKSPACE DIR"
        )
    if open_scope is not None:
        strays = sorted({ws for ws, _ in pairs if ws != open_scope.workspace})
        if strays:
            raise ConfigError(
                f"--open serves workspace {open_scope.workspace!r} only, not {strays[0]!r}"
            )
        pairs += [(open_scope.workspace, Path(d).resolve()) for d in roots]
    return tuple(pairs)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port."
)
@click.option(
    "--open",
    "open_mode",
    is_flag=True,
    help="Local single-user mode: no token, the scope given by -w/--session, "
    "listening on 127.0.0.1 only.",
)
@click.option("--workspace", "-w", default=None, help="The workspace of --open mode.")
@click.option("--session", "session_id", default=None, help="Pin --open mode to one session.")
@click.option("--write", is_flag=True, help="In --open mode, allow appends and ingests.")
@click.option("--append", "enable_append", is_flag=True, help="Serve POST /v1/append.")
@click.option(
    "--ingest-root",
    "ingest_roots",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=str),
    help="In --open mode, serve POST /v1/ingest for files under this directory (repeatable).",
)
@click.option(
    "--ingest-root-for",
    "bound_roots",
    multiple=True,
    nargs=2,
    type=(str, click.Path(exists=True, file_okay=False, path_type=str)),
    metavar="WORKSPACE DIR",
    help="Serve POST /v1/ingest to WORKSPACE's write tokens for files under DIR "
    "(repeatable); tokens of other workspaces cannot reach it.",
)
@click.option(
    "--rate",
    default=None,
    type=click.FloatRange(min=0, min_open=True),
    help="Requests per second of a token that names no rate (default 50).",
)
@click.option(
    "--token-cache",
    default=5.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds a checked token is trusted before it is looked up again "
    "(a revocation takes effect within this time).",
)
@click.option("--pool-size", default=None, type=click.IntRange(1), help="Database connections.")
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    help="A host name clients use to reach this server (repeatable; loopback names are "
    "always answered). Without it, token mode answers any name; --open answers "
    "loopback names only.",
)
@click.option(
    "--allowed-origin",
    "allowed_origins",
    multiple=True,
    help="Another origin whose pages may call this server, e.g. https://search.example.com "
    "(repeatable; the server's own origin is always allowed).",
)
@click.option(
    "--trusted-proxy",
    "trusted_proxies",
    multiple=True,
    help="Address or network of a reverse proxy whose X-Forwarded-For/-Proto headers are "
    "believed (repeatable; none by default).",
)
@click.option(
    "--header-timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds a client has to send a request's headers (then 408).",
)
@click.option(
    "--body-timeout",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds a client has to send a request's body (then 408).",
)
@click.option(
    "--max-connections",
    default=256,
    show_default=True,
    type=click.IntRange(1),
    help="Open connections served at once; more are answered 503.",
)
@pass_ctx
@handle_errors
def serve(
    ctx: Context,
    host: str,
    port: int,
    open_mode: bool,
    workspace: str | None,
    session_id: str | None,
    write: bool,
    enable_append: bool,
    ingest_roots: Sequence[str],
    bound_roots: Sequence[tuple[str, str]],
    rate: float | None,
    token_cache: float,
    pool_size: int | None,
    allowed_hosts: Sequence[str],
    allowed_origins: Sequence[str],
    trusted_proxies: Sequence[str],
    header_timeout: float,
    body_timeout: float,
    max_connections: int,
) -> None:
    """Serve the HTTP API (/v1/...) and the search page (/) until Ctrl-C.

    Every API call needs a bearer token (`pgsearch token create`), which pins the
    workspace, optionally one session, and read or read/write. With --open there is
    no token: one person on this machine, one workspace, 127.0.0.1 only. Deployment
    rules (proxies, timeouts, open mode): docs/http.md.
    Needs the optional web packages: pip install 'pgsearch[http]'.
    """
    open_scope = _open_scope(open_mode, host, workspace, session_id, write)
    try:
        import uvicorn

        from pgsearch.web.app import DEFAULT_RATE, ServeConfig, create_app
        from pgsearch.web.server import ConnectionLimits, uvicorn_config
    except ImportError as exc:
        raise ConfigError(
            f"`pgsearch serve` needs the web packages ({exc.name}): pip install 'pgsearch[http]'"
        ) from None
    config = ServeConfig(
        open_scope=open_scope,
        open_write=write,
        enable_append=enable_append,
        ingest_roots=_bound_roots(open_scope, ingest_roots, bound_roots),
        default_rate=rate or DEFAULT_RATE,
        token_cache_seconds=token_cache,
        allowed_hosts=tuple(allowed_hosts),
        allowed_origins=tuple(allowed_origins),
        body_timeout=body_timeout,
    )
    limits = ConnectionLimits(
        header_timeout=header_timeout,
        max_connections=max_connections,
        trusted_proxies=tuple(trusted_proxies),
    )
    settings = ctx.settings()
    if pool_size is not None:
        settings = settings.with_(pool_max=pool_size, pool_min=min(settings.pool_min, pool_size))
    # Checked (and, for the private embedded database, migrated) before listening,
    # so that a wrong DSN or an old schema fails here with its message.
    ctx.open().close()
    app = create_app(config, settings=settings)
    mode = f"open mode, workspace {open_scope.workspace!r}" if open_scope else "token mode"
    shown = f"[{host}]" if ":" in host else host
    _echo(f"pgsearch: serving on http://{shown}:{port}/ ({mode}); Ctrl-C stops", err=True)
    uvicorn.Server(uvicorn_config(app, limits, host=host, port=port)).run()


@main.group()
def token() -> None:
    """Bearer tokens of `pgsearch serve`: create, list, revoke."""


@token.command("create")
@workspace_option
@click.option("--session", "session_id", default=None, help="Bind the token to one session.")
@click.option("--write", is_flag=True, help="Allow appends and ingests (default: read only).")
@click.option(
    "--rate",
    default=None,
    type=click.FloatRange(min=0, min_open=True),
    help="Requests per second (default: the server's).",
)
@click.option("--label", default=None, help="A note to recognise the token by.")
@click.option("--json", "as_json", is_flag=True, help="Print the token and its record as JSON.")
@pass_ctx
@handle_errors
def token_create(
    ctx: Context,
    workspace: str,
    session_id: str | None,
    write: bool,
    rate: float | None,
    label: str | None,
    as_json: bool,
) -> None:
    """Make a token; it is printed once and only its hash is stored."""
    with ctx.open() as pg:
        made = pg.create_token(
            workspace=workspace, session_id=session_id, write=write, rate=rate, label=label
        )
    if as_json:
        _echo_json({"token": made.secret, **made.token.to_json()})
        return
    _echo(made.secret)
    scope = f"workspace {made.token.workspace_id!r}"
    if made.token.session_id:
        scope += f", session {made.token.session_id!r}"
    rights = "read/write" if made.token.can_write else "read only"
    _echo(
        f"pgsearch: token {made.token.token_id} for {scope}, {rights}; "
        "it is shown only now: keep it",
        err=True,
    )


@token.command("list")
@click.option("--workspace", "-w", default=None, help="Only tokens of this workspace.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_ctx
@handle_errors
def token_list(ctx: Context, workspace: str | None, as_json: bool) -> None:
    """List tokens (never their secrets), revoked ones included."""
    with ctx.open() as pg:
        rows = pg.tokens(workspace=workspace)
    if as_json:
        _echo_json([t.to_json() for t in rows])
        return
    if not rows:
        _echo("no tokens")
    for t in rows:
        state = f"revoked {t.revoked_at.isoformat(timespec='seconds')}" if t.revoked_at else "live"
        rights = "write" if t.can_write else "read"
        rate = f"{t.rate_per_second:g}/s" if t.rate_per_second else "-"
        _echo(
            f"{t.token_id}\t{t.workspace_id}\t{t.session_id or '*'}\t{rights}\t{rate}\t"
            f"{state}\t{t.label or ''}"
        )


@token.command("revoke")
@click.argument("token_id")
@pass_ctx
@handle_errors
def token_revoke(ctx: Context, token_id: str) -> None:
    """Revoke a token by its id (servers stop accepting it within --token-cache seconds)."""
    with ctx.open() as pg:
        revoked = pg.revoke_token(token_id)
    if revoked is None:
        _fail(f"no live token {token_id!r}")
        return
    _echo(f"revoked token {revoked.token_id} of workspace {revoked.workspace_id!r}")
