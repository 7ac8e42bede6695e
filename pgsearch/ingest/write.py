"""Writing entries inside one transaction: files and appends, in set-based stages.

A write goes through the same stages whether it carries one file, a group of files
or an append, and each stage is one store operation (one round trip) for all of
them:

1. *claim* the files: take their locks, read their records, the records a new file
   may have moved from and which of their sessions the user forgot;
2. *re-home* a file that moved and *restore* forgotten sessions asked back (rare,
   per file), and *forget* what a rewritten file stored;
3. *open* the sessions: create the missing ones and lock all of them; a session that
   holds messages of another source refuses the file;
4. *name* tool results whose call an earlier write stored;
5. *insert* the messages (a staging table and ``COPY`` for large batches);
6. *resolve* titles that name their session through a message (Claude Code);
7. *finish*: store every session changed, the files' records, and fold the
   vocabulary and statistics deltas, with ``COMMIT`` in the same trip.

What the transaction knows (locked sessions, forgotten ids, deltas, records) lives
in a `WriteState`, so that a large file's later chunks, and titles resolved for
sessions of other files, reuse what was read instead of asking again. A group whose
write fails for one file is written again file by file (`pgsearch.ingest.batch`),
each file in a savepoint with a state of its own (`WriteState.child`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from pgsearch import adapters, policy
from pgsearch.adapters.common import SessionTitle
from pgsearch.db import store
from pgsearch.db.store import Deltas, FileRecord, MessageRow, SessionFields, SessionState
from pgsearch.db.work import Work
from pgsearch.errors import IngestError
from pgsearch.indexing import IndexedText, index_session_fields
from pgsearch.ingest.files import next_chunk, record_of, same_prefix
from pgsearch.ingest.prepare import Prepared, index_entries, plain_entries, prepare
from pgsearch.ingest.report import FileResult
from pgsearch.ingest.targets import FileJob
from pgsearch.messages import Entry
from pgsearch.settings import Settings
from pgsearch.sources import FileView, is_assembled, open_source, read_source
from pgsearch.titles import prompt_title

#: Rows one insert statement carries.
_BATCH_ROWS = 5000
#: Tool-call names kept while streaming a file; earlier ones are found in the rows
#: already written (`store.tool_call_names`).
_STREAM_CALLS = 100_000
#: Distinct terms whose counts a streamed file accumulates before they are folded
#: into the vocabulary (in its transaction), so a file of ever new words (ids,
#: hashes) keeps memory bounded too.
_STREAM_TERMS = 200_000


@dataclass(slots=True)
class WriteState:
    """What one transaction's writes have read and changed so far."""

    ws: str
    settings: Settings
    deltas: Deltas = field(default_factory=Deltas)
    #: Sessions locked in this transaction, by id (created when missing).
    states: dict[str, SessionState] = field(default_factory=dict)
    #: Of those, the ones whose row must be stored (`finish`).
    changed: set[str] = field(default_factory=set)
    #: Session ids looked up among the forgotten ones, and those that were.
    checked: set[str] = field(default_factory=set)
    forgotten: set[str] = field(default_factory=set)
    #: Records of the files written, stored by `finish`.
    records: list[FileRecord] = field(default_factory=list)
    #: The staging table of large inserts exists in this transaction.
    staged: bool = False

    def child(self) -> WriteState:
        """A state for work that may be rolled back on its own (a savepoint): what is
        known so far, with sessions copied so that its changes stay its own."""
        return WriteState(
            ws=self.ws,
            settings=self.settings,
            states={sid: replace(s) for sid, s in self.states.items()},
            changed=set(self.changed),
            checked=set(self.checked),
            forgotten=set(self.forgotten),
            staged=self.staged,
        )

    def adopt(self, child: WriteState) -> None:
        """Take over what `child` read and changed (its savepoint was released)."""
        self.deltas.merge(child.deltas)
        self.states = child.states
        self.changed = child.changed
        self.checked = child.checked
        self.forgotten = child.forgotten
        self.records.extend(child.records)
        self.staged = child.staged


@dataclass(slots=True)
class Part:
    """Entries of one source for `write_entries`: a file's new part, or an append."""

    #: The file the entries come from (None: an append through the API).
    source: str | None
    #: Where, in error messages.
    where: str
    entries: list[Entry]
    indexed: list[IndexedText]
    #: The time of entries that carry none and follow none that does.
    fallback_time: datetime
    #: The entries continue their sessions (turns and times go on from them).
    continuing: bool
    #: Seqs are assigned per session (agent logs, appends), not taken from lines.
    assign_seq: bool
    titles: dict[str, SessionTitle] = field(default_factory=dict)
    parents: dict[str, str] = field(default_factory=dict)
    #: An append's key per entry (its id, else one the append call assigned), and the
    #: keys its session already held when it was locked (key -> seq).
    keys: list[str] | None = None
    found: dict[str, int] | None = None
    #: Set by the write: keys of the rows stored, entry ids among them, entries of
    #: forgotten sessions left out, the sessions written.
    inserted: set[tuple[str, int]] = field(default_factory=set)
    entry_ids: set[str] = field(default_factory=set)
    forgotten: int = 0
    sessions: set[str] = field(default_factory=set)

    def session_ids(self) -> set[str]:
        return {e.session_id for e in self.entries} | set(self.titles) | set(self.parents)


# --- entries: stages 3 to 5 ----------------------------------------------------------


def write_entries(tx: WriteState, parts: Sequence[Part]) -> Work[None]:
    """Insert the entries of `parts` (sessions opened, checked and counted)."""
    wanted = [sid for p in parts if p.source is not None for sid in p.session_ids()]
    unchecked = set(wanted) - tx.checked
    if unchecked:
        tx.forgotten |= yield from store.forgotten_among(tx.ws, unchecked)
        tx.checked |= unchecked
    for part in parts:
        _drop_forgotten(tx, part)
    yield from _open_sessions(tx, parts)
    for part in parts:
        _check_source(tx, part)
    yield from _name_tool_results(tx, parts)
    rows = [_rows(tx, part) for part in parts]
    flat = [row for part_rows in rows for row in part_rows]
    inserted: set[tuple[str, int]] = set()
    for i in range(0, len(flat), _BATCH_ROWS):
        chunk = flat[i : i + _BATCH_ROWS]
        inserted |= yield from store.insert_messages(tx.ws, chunk, tx.deltas, staged=tx.staged)
        tx.staged = tx.staged or store.uses_stage(len(chunk))
    for part, part_rows in zip(parts, rows, strict=True):
        _count(tx, part, part_rows, inserted)


def write_append(tx: WriteState, part: Part) -> Work[None]:
    """An append (`Part.source` None, seqs assigned, one key per entry): its session
    opened and locked, the entries whose keys it already holds left out (recorded in
    `Part.found`), then the rows, the session and the statistics stored with
    ``COMMIT`` in one round trip. Its seqs continue the session this transaction
    locked and its keys were looked up under that lock, so every row is new."""
    assert part.source is None and part.assign_seq and part.keys is not None
    (sid,) = part.session_ids()
    state, found = yield from store.open_append(tx.ws, sid, part.keys)
    tx.states[sid] = state
    part.found = found
    if found:
        keep = [k not in found for k in part.keys]
        part.entries = [e for e, k in zip(part.entries, keep, strict=True) if k]
        part.indexed = [ix for ix, k in zip(part.indexed, keep, strict=True) if k]
        part.keys = [key for key, k in zip(part.keys, keep, strict=True) if k]
    _check_source(tx, part)
    yield from _name_tool_results(tx, [part])
    rows = _rows(tx, part)
    _count(tx, part, rows, {(r.session_id, r.seq) for r in rows})
    yield from finish(tx, appended=rows)


def _drop_forgotten(tx: WriteState, part: Part) -> None:
    """A session the user forgot is not brought back by its file."""
    if part.source is None or tx.forgotten.isdisjoint(part.session_ids()):
        return
    keep = [e.session_id not in tx.forgotten for e in part.entries]
    part.forgotten = keep.count(False)
    part.entries = [e for e, k in zip(part.entries, keep, strict=True) if k]
    part.indexed = [ix for ix, k in zip(part.indexed, keep, strict=True) if k]
    part.titles = {sid: t for sid, t in part.titles.items() if sid not in tx.forgotten}
    part.parents = {sid: p for sid, p in part.parents.items() if sid not in tx.forgotten}


def _open_sessions(tx: WriteState, parts: Sequence[Part]) -> Work[None]:
    sources: dict[str, str | None] = {}
    for part in parts:
        for sid in part.session_ids():
            if sid in sources and sources[sid] != part.source:
                # Never in one write (`pgsearch.ingest.batch` keeps such files apart):
                # written file by file, the second is refused as it should be.
                raise IngestError(f"session {sid!r} is named by two files", path=part.where)
            sources[sid] = part.source
    missing = {sid: src for sid, src in sources.items() if sid not in tx.states}
    if not missing:
        return
    rows = sum(len(p.entries) for p in parts)
    stage = not tx.staged and store.uses_stage(min(rows, _BATCH_ROWS))
    tx.states.update((yield from store.open_sessions(tx.ws, missing, stage=stage)))
    tx.staged = tx.staged or stage


def _check_source(tx: WriteState, part: Part) -> None:
    """Sessions hold the messages of one source: a file, or API appends."""
    for sid in sorted(part.session_ids()):
        state = tx.states[sid]
        if state.message_count and state.source != part.source:
            origin = state.source or "API appends"
            # A file's entries carry their line (seq = line - 1 until assigned).
            first = next((e for e in part.entries if e.session_id == sid), None)
            raise IngestError(
                f"session {sid!r} already holds messages from {origin}",
                path=part.where,
                line=first.seq + 1 if part.source is not None and first is not None else None,
            )


def _name_tool_results(tx: WriteState, parts: Sequence[Part]) -> Work[None]:
    """A tool result whose call was stored earlier (an earlier append, an earlier pass
    over a growing file) is named after that call."""
    unnamed: dict[str, set[str]] = {}
    for part in parts:
        for entry in part.entries:
            call_id = _unnamed_call(entry)
            if call_id is not None and tx.states[entry.session_id].message_count:
                unnamed.setdefault(entry.session_id, set()).add(call_id)
    if not unnamed:
        return
    found = yield from store.tool_call_names(tx.ws, unnamed)
    for part in parts:
        part.entries = [_named(e, found.get(e.session_id, {})) for e in part.entries]


def _unnamed_call(entry: Entry) -> str | None:
    """The call id of a tool result that names no tool, if it has one."""
    if entry.role != "tool" or entry.tool_name is not None or not entry.extra:
        return None
    call_id = entry.extra.get("tool_call_id")
    return call_id if isinstance(call_id, str) and call_id else None


def _named(entry: Entry, names: dict[str, str]) -> Entry:
    call_id = _unnamed_call(entry)
    if call_id is None or call_id not in names:
        return entry
    return replace(entry, tool_name=names[call_id])


def _rows(tx: WriteState, part: Part) -> list[MessageRow]:
    """The rows of `part`'s entries: turns, seqs and times go on from their sessions;
    titles, summaries and parents the source gives go to the sessions."""
    states = {sid: tx.states[sid] for sid in part.session_ids()}
    turns = {sid: (s.last_turn if part.continuing else 0) for sid, s in states.items()}
    last_time = {sid: (s.updated_at if part.continuing else None) for sid, s in states.items()}
    next_seq = {sid: s.next_seq for sid, s in states.items()}
    keys = part.keys if part.keys is not None else [None] * len(part.entries)
    rows: list[MessageRow] = []
    for entry, ix, key in zip(part.entries, part.indexed, keys, strict=True):
        sid = entry.session_id
        if entry.role == "user" and entry.kind == policy.USER_TEXT:
            turns[sid] += 1
        created = entry.created_at or last_time[sid] or part.fallback_time
        last_time[sid] = created
        seq = next_seq[sid] if part.assign_seq else entry.seq
        next_seq[sid] = max(next_seq[sid], seq + 1)
        rows.append(
            MessageRow(
                session_id=sid,
                seq=seq,
                entry_id=entry.entry_id,
                kind=entry.kind,
                role=entry.role,
                turn=turns[sid],
                tool_name=entry.tool_name,
                created_at=created,
                content=entry.content,
                arguments=entry.arguments,
                extra=entry.extra,
                tsvector=ix.tsvector,
                terms=ix.terms,
                token_count=ix.length,
                append_key=key,
            )
        )
        _fields_from(tx, states[sid], entry)
    _titles_and_parents(tx, states, part)
    for sid, state in states.items():
        state.next_seq = max(state.next_seq, next_seq[sid])
    return rows


def _fields_from(tx: WriteState, state: SessionState, entry: Entry) -> None:
    if entry.title is not None:
        state.title, state.title_auto, state.title_leaf_seq = entry.title, False, None
        tx.changed.add(state.session_id)
    if entry.summary is not None:
        state.summary = entry.summary
        tx.changed.add(state.session_id)


def _titles_and_parents(tx: WriteState, states: dict[str, SessionState], part: Part) -> None:
    for sid, title in part.titles.items():
        state = states[sid]
        if title.auto and state.title is not None and not state.title_auto:
            continue  # a chosen title stays
        if (state.title, state.title_auto) != (title.title, title.auto):
            state.title, state.title_auto, state.title_leaf_seq = title.title, title.auto, None
            tx.changed.add(sid)
    for sid, parent in part.parents.items():
        if states[sid].parent_session_id != parent:
            states[sid].parent_session_id = parent
            tx.changed.add(sid)


def _count(
    tx: WriteState, part: Part, rows: list[MessageRow], inserted: set[tuple[str, int]]
) -> None:
    """Fold the rows stored into their sessions' counters."""
    mine: dict[str, list[MessageRow]] = {sid: [] for sid in part.session_ids()}
    for row in rows:
        if (row.session_id, row.seq) in inserted:
            mine[row.session_id].append(row)
            part.inserted.add((row.session_id, row.seq))
            if row.entry_id:
                part.entry_ids.add(row.entry_id)
    part.sessions = {e.session_id for e in part.entries}
    for sid, stored in mine.items():
        state = tx.states[sid]
        if stored or not state.message_count:
            # A new session is stored even without messages (a title, a parent).
            tx.changed.add(sid)
        if not stored:
            continue
        times = [r.created_at for r in stored]
        state.created_at = min([*times, *([state.created_at] if state.created_at else [])])
        state.updated_at = max([*times, *([state.updated_at] if state.updated_at else [])])
        state.message_count += len(stored)
        state.last_turn = max(state.last_turn, max(r.turn for r in stored))
        if state.prompt_title is None:
            state.prompt_title = _prompt_title(stored)


def _prompt_title(rows: list[MessageRow]) -> str | None:
    """The title the first of `rows`' user prompts that reads as one gives their
    session (`pgsearch.titles`): made once, when the session's first such prompt is
    stored, whether it comes first, after a title, or in a later append or pass."""
    prompts = sorted((r for r in rows if r.kind == policy.USER_TEXT), key=lambda r: r.seq)
    return prompt_title([r.content for r in prompts])


# --- finishing: stage 7 --------------------------------------------------------------


def finish(tx: WriteState, *, appended: Sequence[MessageRow] = ()) -> Work[None]:
    """Store the sessions and file records of the transaction (and the rows of an
    append) and fold its deltas into vocabulary and statistics, with ``COMMIT`` (one
    round trip)."""
    max_chars = tx.settings.max_indexed_chars
    sessions = []
    for sid in sorted(tx.changed):
        state = tx.states[sid]
        ix = index_session_fields(state.title, state.summary, max_chars=max_chars)
        sessions.append((state, SessionFields(ix.tsvector, ix.terms, ix.length)))
    yield from store.finish(
        tx.ws, tx.deltas, sessions=sessions, records=tx.records, appended=appended
    )


# --- files: stages 1, 2 and 6 --------------------------------------------------------


@dataclass(slots=True)
class _File:
    """One file of a write as it goes through the stages."""

    job: FileJob
    prepared: Prepared
    #: Its record as claimed (after a move, the record it took over).
    record: FileRecord | None
    moved_from: str | None = None
    restored: list[str] = field(default_factory=list)
    part: Part | None = None
    result: FileResult = field(default_factory=lambda: FileResult(path=""))


def write_files(
    tx: WriteState, items: Sequence[tuple[FileJob, Prepared | None]]
) -> Work[list[FileResult]]:
    """Write files (each prepared against its last known record, or None) inside the
    caller's transaction; their sessions, records and deltas go to `tx` (`finish`).

    A file whose record changed since it was prepared is prepared again here. With
    `FileJob.include_forgotten`, the sessions the user forgot from a file come back:
    their tombstones go, and the file is read again whole.
    """
    files, candidates = yield from _claim(tx, items)
    for f in files:
        yield from _rehome(tx, f, candidates)
        yield from _restore(tx, f)
        f.result = _result(f)
    rewritten = [f.job.source for f in files if f.prepared.rewrite and not f.prepared.unchanged]
    if rewritten:
        yield from store.forget_sources(tx.ws, rewritten, tx.deltas)
    writing = [f for f in files if not f.prepared.unchanged]
    for f in writing:
        f.part = _part(f)
    parts = [f.part for f in writing if f.part is not None]
    if parts:
        yield from write_entries(tx, parts)
    yield from _leaf_titles(tx, writing)
    for f in writing:
        _tally(f)
        done = f.prepared.done
        if f.prepared.stream_next is not None:
            done = yield from _write_stream(tx, f)
        tx.records.append(done)
    return [f.result for f in files]


def _claim(
    tx: WriteState, items: Sequence[tuple[FileJob, Prepared | None]]
) -> Work[tuple[list[_File], list[FileRecord]]]:
    """Stage 1: lock the files and read their records (and the records new files may
    have moved from, and which of their sessions were forgotten); prepare again a
    file whose record changed since it was prepared."""
    prepared = [p for _, p in items if p is not None and not p.unchanged]
    new = [p for p in prepared if p.snapshot is None]
    ids = set().union(*(p.session_ids for p in prepared)) if prepared else set()
    claim = yield from store.claim_files(
        tx.ws,
        [job.source for job, _ in items],
        heads=[p.head for p in new],
        session_ids=sorted(ids),
    )
    tx.checked |= ids
    tx.forgotten |= claim.forgotten
    files = []
    for job, ready in items:
        record = claim.records.get(job.source)
        if ready is None or ready.snapshot != record:
            ready = prepare(job, record, tx.settings)
        files.append(_File(job, ready, record))
    asked = {id(p) for p in new}
    late = [
        f.prepared
        for f in files
        if f.record is None and not f.prepared.unchanged and id(f.prepared) not in asked
    ]
    candidates = list(claim.candidates)
    if late:
        # Prepared again: the records its head may match were not asked for yet.
        ids = set().union(*(p.session_ids for p in late))
        candidates += yield from store.moved_candidates(tx.ws, [p.head for p in late], ids)
    return files, candidates


def _rehome(tx: WriteState, f: _File, candidates: list[FileRecord]) -> Work[None]:
    """Stage 2: a new file that is a known file at a new path takes over its record
    (and what it stored) and is read on from there."""
    if f.record is not None or f.prepared.unchanged:
        return
    moved = _moved_from(f, candidates)
    if moved is None:
        return
    candidates.remove(moved)  # another file of the write cannot have moved from it too
    yield from store.claim_files(tx.ws, [moved.path])
    yield from store.relocate(tx.ws, moved.path, f.job.source)
    f.moved_from, f.record = moved.path, replace(moved, path=f.job.source)
    f.prepared = prepare(f.job, f.record, tx.settings)


def _moved_from(f: _File, candidates: list[FileRecord]) -> FileRecord | None:
    """The record of the file this one was at another path, if it moved here.

    Candidates are records whose first window is this file's and those of the files
    its sessions came from; one is this file when its path no longer exists, it was
    read with the same mapping, and this file starts with the bytes it recorded. A
    copy (the old path still there) is not a move.
    """
    parser = adapters.ADAPTERS[f.prepared.format].parser
    found = [
        c
        for c in sorted(candidates, key=lambda r: r.path)
        if c.path != f.job.source and c.parser in (parser, None) and not os.path.lexists(c.path)
    ]
    if not found:
        return None
    job = f.job
    if is_assembled(job.real):  # its bytes are the assembled session
        try:
            data = read_source(job.real, shown=job.shown, pin=job.pin).data
        except IngestError:
            return None
        return next((c for c in found if same_prefix(data, c)), None)
    try:
        fd, st = open_source(job.real, shown=job.shown, pin=job.pin)
    except IngestError:
        return None
    with os.fdopen(fd, "rb"):
        view = FileView(fd, st.st_size)  # the windows are read, not the file
        return next((c for c in found if same_prefix(view, c)), None)


def _restore(tx: WriteState, f: _File) -> Work[None]:
    """Stage 2: sessions forgotten from the file come back when asked for; what was
    read before skipped them, so the file is read again whole."""
    if not f.job.include_forgotten:
        return
    f.restored = yield from store.restore_forgotten(tx.ws, f.job.source)
    tx.forgotten -= set(f.restored)
    if f.restored and (f.prepared.start or f.prepared.unchanged):
        again = prepare(f.job, None, tx.settings)
        f.prepared = replace(again, snapshot=f.record, rewrite=True)


def _part(f: _File) -> Part | None:
    """What of the file's new part goes to `write_entries` (None: nothing does)."""
    prepared, parsed = f.prepared, f.prepared.parsed
    if not (prepared.entries or parsed.titles or parsed.parents):
        return None
    return Part(
        source=f.job.source,
        where=f.job.shown,
        entries=list(prepared.entries),
        indexed=list(prepared.indexed),
        fallback_time=prepared.mtime,
        continuing=prepared.start > 0,
        assign_seq=not adapters.ADAPTERS[prepared.format].seq_from_line,
        titles=dict(parsed.titles),
        parents=dict(parsed.parents),
    )


def _result(f: _File) -> FileResult:
    """The file's result before its entries are counted."""
    prepared, parsed = f.prepared, f.prepared.parsed
    return FileResult(
        path=f.job.shown,
        workspace=f.job.workspace,
        format=prepared.format,
        rewritten=prepared.rewrite,
        unchanged=prepared.unchanged,
        bad_lines=parsed.skipped_lines,
        warnings=list(parsed.problems),
        unknown_events=dict(parsed.unknown),
        restored=f.restored,
        moved_from=f.moved_from,
        no_cwd=f.job.no_cwd,
    )


def _tally(f: _File) -> None:
    """Count what the write of the file's (first) part stored."""
    part = f.part
    if part is None:
        return
    f.result.messages += len(part.inserted)
    f.result.forgotten += part.forgotten
    f.result.skipped += len(f.prepared.entries) - len(part.inserted) - part.forgotten
    f.result.sessions |= part.sessions


def _leaf_titles(tx: WriteState, files: Sequence[_File]) -> Work[None]:
    """Stage 6: store the files' summary titles, then title every session whose named
    message is now stored (from these files or any other, this run or an earlier).

    Of several titles for one session, the one naming its latest message wins; a
    generated title never replaces one the user chose.
    """
    titled = [f for f in files if adapters.ADAPTERS[f.prepared.format].leaf_titles]
    saved = {
        f.job.source: {t.leaf_uuid: t.title for t in f.prepared.parsed.leaf_titles}
        for f in titled
        if f.prepared.parsed.leaf_titles
    }
    # A summary names a line's uuid: the id of the first entry of that line.
    keys = {t.leaf_uuid for f in titled for t in f.prepared.parsed.leaf_titles}
    keys |= {i for f in titled if f.part for i in f.part.entry_ids if "#" not in i}
    if not saved and not keys:
        return
    best: dict[str, tuple[int, str]] = {}
    for sid, seq, title in (yield from store.leaf_titles(tx.ws, saved, sorted(keys))):
        if sid not in best or seq >= best[sid][0]:
            best[sid] = (seq, title)
    missing = [sid for sid in best if sid not in tx.states]
    if missing:
        tx.states.update((yield from store.lock_sessions(tx.ws, missing)))
    for sid, (seq, title) in sorted(best.items()):
        state = tx.states.get(sid)
        if state is None:
            continue
        if state.title is not None and not (
            state.title_auto and (state.title_leaf_seq is None or seq >= state.title_leaf_seq)
        ):
            continue
        state.title, state.title_auto, state.title_leaf_seq = title, True, seq
        tx.changed.add(sid)


def _write_stream(tx: WriteState, f: _File) -> Work[FileRecord]:
    """Write the chunks of a streamed file after its first; returns its record."""
    prepared = f.prepared
    assert prepared.stream_next is not None
    limit = tx.settings.ingest_chunk_bytes
    fd, _ = open_source(f.job.real, shown=f.job.shown, pin=f.job.pin)
    with os.fdopen(fd, "rb"):
        view = FileView(fd, prepared.stream_size)
        pos, line = prepared.stream_next, prepared.stream_line
        calls: dict[str, str] = {}
        while pos < len(view):
            data = next_chunk(view, pos, limit)
            if not data:
                break  # the file shrank meanwhile: the next ingest sees a rewrite
            entries, line = plain_entries(
                data, line, f.job.shown, prepared.header.session_id, calls
            )
            pos += len(data)
            del data
            if len(calls) > _STREAM_CALLS:
                calls.clear()
            if entries:
                yield from _write_chunk(tx, f, entries)
        parser = adapters.ADAPTERS[prepared.format].parser
        return record_of(f.job.source, view, pos, line, parser)


def _write_chunk(tx: WriteState, f: _File, entries: list[Entry]) -> Work[None]:
    part = Part(
        source=f.job.source,
        where=f.job.shown,
        entries=entries,
        indexed=index_entries(entries, tx.settings),
        fallback_time=f.prepared.mtime,
        continuing=True,
        assign_seq=False,
    )
    yield from write_entries(tx, [part])
    f.result.messages += len(part.inserted)
    f.result.forgotten += part.forgotten
    f.result.skipped += len(entries) - len(part.inserted) - part.forgotten
    f.result.sessions |= part.sessions
    if len(tx.deltas.df) + len(tx.deltas.sf) > _STREAM_TERMS:
        # Another pass over vocabulary rows in this transaction: a writer it
        # deadlocks with is retried by the driver.
        yield from store.apply_deltas(tx.ws, tx.deltas)
        tx.deltas.clear()
