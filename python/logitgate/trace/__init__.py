"""Traces of constrained generations: what the mask did at each step, and a page that shows it.

``lg.generate(..., trace=True)`` returns its steps as ``result.trace``, a :class:`Trace`;
``result.trace.to_html()`` (or :func:`render_trace_html`) makes one self-contained HTML page of
it, which ``logitgate generate --trace-html FILE`` writes. See docs/trace.md.

- :mod:`.record`: the per-step records and the recorder the decode loop feeds;
- :mod:`.json_pointer`: the JSON pointer of each character of a JSON output (step positions);
- :mod:`.html`: the page (``page.html``) and the trace's plain-data form.

Nothing here imports torch.
"""

from __future__ import annotations

from .html import render_trace_html
from .record import TopToken, Trace, TraceStep

__all__ = ["TopToken", "Trace", "TraceStep", "render_trace_html"]
