"""A :class:`~logitgate.trace.Trace` as one self-contained HTML page.

The page (``page.html`` beside this module) holds its CSS and JavaScript inline and the trace
as JSON in a ``<script type="application/json">`` element: it fetches nothing, so it can be
mailed, attached to a bug report or served as it is (a server answers ``/trace/{request_id}``
with :func:`render_trace_html` of a stored trace; :meth:`Trace.to_dict` /
:meth:`Trace.from_dict` store one as plain data).

The embedded data is compact: one array per step (see :func:`trace_data`), probabilities to
four significant digits. The page builds the timeline and the output text once, as one HTML
string each, and a step's details only when it is selected, so a thousand steps render at once.
"""

from __future__ import annotations

import html
import json
from functools import cache
from importlib import resources
from typing import Any

from ..errors import UsageError
from .record import TopToken, Trace, TraceStep

__all__ = ["TRACE_FORMAT", "render_trace_html", "trace_data", "trace_from_data"]

TRACE_FORMAT = 1
_DATA_MARK = "/*__TRACE_DATA__*/"
_TITLE_MARK = "__TRACE_TITLE__"

# The fields of one step's array, in order (the page reads them by these positions).
_FORCED, _MERGED = 1, 2


@cache
def _template() -> str:
    text = resources.files(__package__).joinpath("page.html").read_text(encoding="utf-8")
    assert text.count(_DATA_MARK) == 1, "page.html must hold the data mark once"
    return text


def _p(x: float | None) -> float | None:
    return None if x is None else float(f"{x:.4g}")


def _tops(tops: tuple[TopToken, ...]) -> list[list[Any]]:
    return [[t.token_id, t.text, _p(t.prob), int(t.masked)] for t in tops]


def trace_data(trace: Trace) -> dict[str, Any]:
    """The trace as plain JSON-ready data. Each step is an array: ``[token_id, text, allowed,
    flags (1 forced, 2 merged), span start, span end, position, prob_before, prob_after,
    budget_cut, top_before, top_after]``, each top token ``[token_id, text, prob, masked]``."""
    steps = [
        [
            st.token_id,
            st.text,
            st.allowed,
            (_FORCED if st.forced else 0) | (_MERGED if st.merged else 0),
            st.span[0],
            st.span[1],
            st.position,
            _p(st.prob_before),
            _p(st.prob_after),
            st.budget_cut,
            _tops(st.top_before),
            _tops(st.top_after),
        ]
        for st in trace
    ]
    return {
        "format": TRACE_FORMAT,
        "title": trace.title,
        "kind": trace.kind,
        "finish_reason": trace.finish_reason,
        "complete": trace.complete,
        "vocab_size": trace.vocab_size,
        "eos_ids": list(trace.eos_ids),
        "temperature": trace.temperature,
        "top_k": trace.top_k,
        "text": trace.text,
        "steps": steps,
    }


def trace_from_data(data: dict[str, Any]) -> Trace:
    """The :class:`Trace` that :func:`trace_data` wrote (probabilities as rounded there)."""
    if not isinstance(data, dict) or data.get("format") != TRACE_FORMAT:
        got = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise UsageError(f"not trace data of format {TRACE_FORMAT} (format: {got!r})", code="trace-format")
    try:
        steps = [
            TraceStep(
                step=i,
                token_id=int(s[0]),
                text=str(s[1]),
                allowed=int(s[2]),
                forced=bool(s[3] & _FORCED),
                merged=bool(s[3] & _MERGED),
                span=(int(s[4]), int(s[5])),
                position=s[6],
                prob_before=s[7],
                prob_after=s[8],
                budget_cut=int(s[9]),
                top_before=tuple(TopToken(int(t[0]), str(t[1]), float(t[2]), bool(t[3])) for t in s[10]),
                top_after=tuple(TopToken(int(t[0]), str(t[1]), float(t[2]), bool(t[3])) for t in s[11]),
            )
            for i, s in enumerate(data["steps"])
        ]
        meta = {k: data[k] for k in ("kind", "finish_reason", "complete", "vocab_size", "temperature", "top_k")}
        return Trace(steps, text=data["text"], eos_ids=data["eos_ids"], title=data.get("title", ""), **meta)
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise UsageError(f"malformed trace data: {type(e).__name__}: {e}", code="trace-format") from None


def render_trace_html(trace: Trace | dict[str, Any], title: str | None = None) -> str:
    """One self-contained HTML page showing ``trace`` (a :class:`Trace`, or the data of
    :meth:`Trace.to_dict`): per step the chosen token, the allowed-token count, jump-forward
    and budget flags, the top tokens before and after the mask, the grammar position; a
    timeline of all steps colored by how constrained each was; the output text with each
    token underlined. ``title`` (default: the trace's own, else "logitgate trace") heads it.
    The page selects step N when opened with ``#step=N``."""
    data = dict(trace_data(trace) if isinstance(trace, Trace) else trace_data(trace_from_data(trace)))
    data["title"] = title or data["title"] or "logitgate trace"
    # Inside <script>, "</script" or "<!--" would end or confuse the element: no "<" at all.
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    head, tail = _template().split(_DATA_MARK)
    return head.replace(_TITLE_MARK, html.escape(data["title"])) + payload + tail
