"""A synthetic trace of any length (tests of the trace page: its data, and its rendering of a
thousand steps in a browser)."""

from __future__ import annotations

from logitgate.trace import TopToken, Trace, TraceStep


def synthetic_trace(n: int, *, vocab_size: int = 49152) -> Trace:
    """A trace of ``n`` steps shaped like a JSON generation: every third step forced, every
    seventh budget-cut, allowed counts from the whole vocabulary down to one."""
    steps = []
    text = ""
    for i in range(n):
        piece = f"t{i} "
        forced = i % 3 == 2
        top = tuple(TopToken(100 + j, f"w{j}", 0.5 / 2**j, masked=j == 0) for j in range(5))
        steps.append(
            TraceStep(
                step=i,
                token_id=1000 + i,
                text=piece,
                allowed=-1 if forced else max(1, vocab_size >> (i % 16)),
                forced=forced,
                budget_cut=3 if i % 7 == 6 else 0,
                top_before=() if forced else top,
                top_after=() if forced else top[1:],
                prob_before=None if forced else 0.2,
                prob_after=None if forced else 0.9,
                span=(len(text), len(text) + len(piece)),
                position=f"/items/{i}",
            )
        )
        text += piece
    return Trace(steps, text=text, kind="json", finish_reason="length", vocab_size=vocab_size, eos_ids=[2])
