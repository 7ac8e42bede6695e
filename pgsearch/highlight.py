"""Matched words of an excerpt: ranges beside the text, and how each reader sees them.

A result carries its excerpt as the text itself and the matched words apart, as
``(start, end)`` code-point offsets into it (end exclusive): stored text, which
agents fill with Markdown (``**bold**``), is never confused with a mark. Each
reader then marks them its own way:

- JSON, HTTP and MCP structured output: ``excerpt`` and ``highlights`` as they are;
- a terminal: bold colour around each range, only when the output is a terminal
  (`terminal_excerpt`); plain text otherwise;
- the page: ``<mark>`` elements built from the ranges (``app.js``);
- text for models: ``⟦`` and ``⟧`` around each range (`model_excerpt`), with any
  ``⟦`` or ``⟧`` of the text itself escaped by a backslash (backslashes right before
  one doubled), so the marks cannot be faked; `read_model_excerpt` reads it back.

`pgsearch.excerpt` cuts the excerpt with one-character marks (`split_marks` takes
them out): C1 controls, which it replaces where the text itself holds them.
"""

from __future__ import annotations

from collections.abc import Sequence

from pgsearch.excerpt import MARK_CLOSE, MARK_OPEN
from pgsearch.terminal import flat

Span = tuple[int, int]

MODEL_OPEN = "⟦"
MODEL_CLOSE = "⟧"
_SPECIAL = (MODEL_OPEN, MODEL_CLOSE)
#: Bold yellow, and back to normal.
ANSI_ON = "\x1b[1;33m"
ANSI_OFF = "\x1b[0m"


def split_marks(marked: str) -> tuple[str, tuple[Span, ...]]:
    """The text of a marked excerpt and its marked ranges (code points, end exclusive).
    A mark left open by a cut closes at the end; an empty range is dropped."""
    if MARK_OPEN not in marked:
        return marked.replace(MARK_CLOSE, ""), ()
    out: list[str] = []
    spans: list[Span] = []
    length = 0
    for i, piece in enumerate(marked.split(MARK_OPEN)):
        if i == 0:
            text = piece.replace(MARK_CLOSE, "")
            out.append(text)
            length += len(text)
            continue
        inside, _, after = piece.partition(MARK_CLOSE)
        after = after.replace(MARK_CLOSE, "")
        if inside:
            spans.append((length, length + len(inside)))
        out.append(inside)
        out.append(after)
        length += len(inside) + len(after)
    return "".join(out), tuple(spans)


def segments(text: str, spans: Sequence[Span]) -> list[tuple[str, bool]]:
    """`text` cut into pieces, each with whether it is a matched range. Ranges out of
    order, overlapping or outside the text are ignored (never raise)."""
    pieces: list[tuple[str, bool]] = []
    pos = 0
    for start, end in spans:
        if start < pos or end <= start or end > len(text):
            continue
        if start > pos:
            pieces.append((text[pos:start], False))
        pieces.append((text[start:end], True))
        pos = end
    if pos < len(text) or not pieces:
        pieces.append((text[pos:], False))
    return pieces


def terminal_excerpt(text: str, spans: Sequence[Span], *, color: bool) -> str:
    """An excerpt as one line for a terminal: stored controls escaped, line breaks
    folded, and with `color` each matched range in bold colour."""
    out = []
    for piece, matched in segments(text, spans):
        shown = flat(piece)
        out.append(f"{ANSI_ON}{shown}{ANSI_OFF}" if matched and color else shown)
    return "".join(out)


def _escape_model(piece: str, *, before_mark: bool) -> str:
    """A piece of text for `model_excerpt`: ``⟦``/``⟧`` escaped by a backslash, the
    backslashes right before one (or before a mark that follows) doubled."""
    out: list[str] = []
    run = 0  # backslashes seen just before the current character
    for ch in piece:
        if ch == "\\":
            run += 1
            continue
        if ch in _SPECIAL:
            out.append("\\" * (2 * run + 1) + ch)
        else:
            out.append("\\" * run + ch)
        run = 0
    out.append("\\" * (2 * run if before_mark else run))
    return "".join(out)


def model_excerpt(text: str, spans: Sequence[Span]) -> str:
    """An excerpt for a model to read: each matched range between ``⟦`` and ``⟧``,
    which the text itself cannot fake (its own are escaped)."""
    pieces = segments(text, spans)
    out = []
    for i, (piece, matched) in enumerate(pieces):
        before_mark = matched or (i + 1 < len(pieces) and pieces[i + 1][1])
        escaped = _escape_model(piece, before_mark=before_mark)
        out.append(f"{MODEL_OPEN}{escaped}{MODEL_CLOSE}" if matched else escaped)
    return "".join(out)


def read_model_excerpt(shown: str) -> tuple[str, tuple[Span, ...]]:
    """The text and ranges `model_excerpt` wrote `shown` from."""
    out: list[str] = []
    spans: list[Span] = []
    length = 0
    start: int | None = None
    run = 0
    for ch in shown:
        if ch == "\\":
            run += 1
            continue
        if ch in _SPECIAL:
            out.append("\\" * (run // 2))
            length += run // 2
            if run % 2:
                out.append(ch)
                length += 1
            elif ch == MODEL_OPEN:
                start = length
            elif start is not None:
                spans.append((start, length))
                start = None
        else:
            out.append("\\" * run + ch)
            length += run + 1
        run = 0
    out.append("\\" * run)
    return "".join(out), tuple(spans)
