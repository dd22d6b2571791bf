"""What a traced generation records per output token, and the recorder the decode loop feeds.

:func:`logitgate.generate` with ``trace=True`` returns a :class:`Trace`: one :class:`TraceStep`
per output token, in order, with what the mask did at that step (allowed-token count,
jump-forward, the budget's cut), the model's most likely tokens before and after the mask,
the chosen token's probability before and after, and where in the output the token sits (its
characters in :attr:`Trace.text`, its JSON pointer for JSON output).

Invariants:

- steps are numbered 0, 1, ... in generation order; a sampled token that jump-forward merged
  into the forced token after it (``merged``) spells no characters of its own: the forced
  token's span covers them;
- the spans of the steps tile :attr:`Trace.text` left to right (a UTF-8 character split across
  tokens belongs to the step whose token completes it);
- probabilities are the sampler's softmax at the generation's temperature (1 for greedy), after
  any repetition penalty; "after" is that softmax over the logits the mask (and the budget's
  cut) left.

:class:`TraceRecorder` costs nothing unless tracing: the decode loop creates one only when
``trace=True``; per sampled step it takes two top-k's and two log-sum-exps of the logits.
This module needs no torch: the logits are used through tensor methods.
"""

from __future__ import annotations

import codecs
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .json_pointer import json_pointers

__all__ = ["DEFAULT_TOP_K", "TopToken", "Trace", "TraceRecorder", "TraceStep"]

DEFAULT_TOP_K = 5


@dataclass(frozen=True)
class TopToken:
    """One of a step's most likely tokens: its id, its text, its probability; ``masked`` (before
    the mask only): the mask or the budget's cut removed it."""

    token_id: int
    text: str
    prob: float
    masked: bool = False


@dataclass
class TraceStep:
    """One output token.

    ``allowed``: how many tokens the step's mask allowed, the budget's cut included (-1 for a
    forced token, and for unconstrained generation). ``forced``: appended by jump-forward
    without sampling. ``budget_cut``: tokens the budget's cut removed from the mask at this step
    (0: the budget did not narrow it; see :class:`~logitgate.budget.BudgetGuard`).
    ``merged``: a sampled token jump-forward replaced by the forced token after it, which
    spells the same bytes and more. ``top_before`` / ``top_after``: the most likely tokens
    before and after the mask; ``prob_before`` / ``prob_after``: the chosen token's probability
    before and after (sampled steps of a traced generation; empty or None otherwise).
    ``span``: the token's characters in :attr:`Trace.text` (start, end). ``position``: where
    the token writes: for JSON output the deepest JSON pointer among its characters, the later
    one on ties (see :mod:`logitgate.trace.json_pointer`); None when not known.
    """

    step: int
    token_id: int
    text: str
    allowed: int
    forced: bool
    budget_cut: int = 0
    merged: bool = False
    top_before: tuple[TopToken, ...] = ()
    top_after: tuple[TopToken, ...] = ()
    prob_before: float | None = None
    prob_after: float | None = None
    span: tuple[int, int] = (0, 0)
    position: str | None = None

    @property
    def budget_shaped(self) -> bool:
        """True when the budget narrowed this step's choices."""
        return self.budget_cut > 0


class Trace(list[TraceStep]):
    """The steps of one traced generation (a list of :class:`TraceStep`), with what the page
    needs around them: ``text`` (what the steps spell; before any stop-string cut),
    ``kind`` (``"json"``, ``"pydantic"``, ``"text"`` or ``"none"``), ``finish_reason``,
    ``complete``, ``vocab_size`` (the logits' width), ``eos_ids``, ``temperature``, ``top_k``
    and ``title`` (shown on the page)."""

    def __init__(
        self,
        steps: Iterable[TraceStep] = (),
        *,
        text: str = "",
        kind: str = "none",
        finish_reason: str = "",
        complete: bool = False,
        vocab_size: int = 0,
        eos_ids: Sequence[int] = (),
        temperature: float = 0.0,
        top_k: int = DEFAULT_TOP_K,
        title: str = "",
    ) -> None:
        super().__init__(steps)
        self.text = text
        self.kind = kind
        self.finish_reason = finish_reason
        self.complete = complete
        self.vocab_size = vocab_size
        self.eos_ids = tuple(eos_ids)
        self.temperature = temperature
        self.top_k = top_k
        self.title = title

    def to_html(self, title: str | None = None) -> str:
        """The trace as one self-contained HTML page (see :func:`logitgate.trace.render_trace_html`)."""
        from .html import render_trace_html

        return render_trace_html(self, title=title)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (what the page embeds); :meth:`from_dict` reads it back."""
        from .html import trace_data

        return trace_data(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trace:
        from .html import trace_from_data

        return trace_from_data(data)


@dataclass
class _Pending:
    """What the current step's logits said before its token is recorded."""

    top_before: tuple[TopToken, ...] = ()
    lse_before: float = 0.0
    budget_cut: int = 0


@dataclass
class TraceRecorder:
    """Fed by the decode loop: :meth:`before_mask` with the step's logits before the mask,
    :meth:`after_mask` with the logits the sampler drew from; :meth:`annotate` completes the
    sampled step's :class:`TraceStep`; :meth:`finish` builds the :class:`Trace`.

    ``table`` is the vocabulary's token table (``tokens``, ``is_text``), ``temperature`` the
    sampler's (0: greedy, probabilities at 1).
    """

    table: Any
    temperature: float
    eos_ids: frozenset[int]
    top_k: int = DEFAULT_TOP_K
    _pending: _Pending = field(default_factory=_Pending, init=False, repr=False)
    _after: tuple[tuple[TopToken, ...], float | None, float | None] = field(
        default=((), None, None), init=False, repr=False
    )

    def _scaled(self, logits: Any) -> Any:
        return logits / self.temperature if self.temperature > 0 else logits

    def _top(self, z: Any, lse: float) -> tuple[TopToken, ...]:
        values, ids = z.topk(min(self.top_k, int(z.shape[-1])))
        out = []
        for v, i in zip(values.tolist(), ids.tolist(), strict=True):
            if math.isfinite(v):
                out.append(TopToken(int(i), self.token_label(int(i)), math.exp(v - lse)))
        return tuple(out)

    def before_mask(self, logits: Any) -> None:
        """The step's logits before the mask (a 1-D float tensor; read, not changed)."""
        z = self._scaled(logits)
        lse = _logsumexp(z)
        self._pending = _Pending(self._top(z, lse), lse)

    def after_mask(self, logits: Any, token_id: int, budget_cut: int) -> None:
        """The logits the token was drawn from (mask and budget cut applied) and the token."""
        z = self._scaled(logits)
        lse = _logsumexp(z)
        chosen = float(z[token_id])
        p = self._pending
        p.budget_cut = budget_cut
        if p.top_before:  # which of the model's favourites the mask removed
            kept = z[[t.token_id for t in p.top_before]].tolist()
            p.top_before = tuple(
                TopToken(t.token_id, t.text, t.prob, masked=not math.isfinite(v))
                for t, v in zip(p.top_before, kept, strict=True)
            )
        self._after = (self._top(z, lse), math.exp(chosen - p.lse_before), math.exp(chosen - lse))

    def annotate(self, st: TraceStep) -> None:
        """Fills a sampled step with what :meth:`before_mask` and :meth:`after_mask` saw."""
        st.top_before = self._pending.top_before
        st.budget_cut = self._pending.budget_cut
        st.top_after, st.prob_before, st.prob_after = self._after
        self._pending = _Pending()
        self._after = ((), None, None)

    def token_label(self, token_id: int) -> str:
        """A token's text; special tokens (EOS...) by name: ``<EOS>``, ``<special 3>``."""
        if self.table.is_text(token_id):
            return self._bytes(token_id).decode("utf-8", errors="backslashreplace")
        return "<EOS>" if token_id in self.eos_ids else f"<special {token_id}>"

    def finish(self, steps: list[TraceStep], grammar: Any, kind: str, **meta: Any) -> Trace:
        """The :class:`Trace` of ``steps``: spans in the text they spell, positions for JSON.

        The output is JSON when ``kind`` says so or ``grammar`` (a
        :class:`~logitgate.CompiledGrammar`, or None) was compiled from a JSON Schema (it maps
        rules to JSON pointers); the trace's ``kind`` is then ``"json"`` or ``"pydantic"``."""
        if kind == "text" and getattr(grammar, "rule_pointers", None):
            kind = "json"
        spell = [b"" if st.merged else self._bytes(st.token_id) for st in steps]
        text, spans = _spans(spell)
        pointers = json_pointers(text) if kind in ("json", "pydantic") else None
        for st, span in zip(steps, spans, strict=True):
            st.span = span
            if pointers is not None and span[1] > span[0]:
                st.position = _deepest(pointers[span[0] : span[1]])
        return Trace(steps, text=text, kind=kind, eos_ids=sorted(self.eos_ids), top_k=self.top_k, **meta)

    def _bytes(self, token_id: int) -> bytes:
        """What the token spells in the output (nothing for special tokens)."""
        return (self.table.tokens[token_id] or b"") if self.table.is_text(token_id) else b""


# Terms this far below the maximum add less than float32 can hold even summed over a vocabulary
# (e^-80 * 1e6 < 1e-28). Clamping masked logits there keeps exp() off -inf, which CPUs compute
# many times slower than finite values.
_LSE_FLOOR = 80.0


def _logsumexp(z: Any) -> float:
    """log(sum(exp(z))) of a 1-D float tensor whose entries may be -inf (at least one is not)."""
    top = float(z.max())
    if not math.isfinite(top):
        return top
    return top + math.log(float((z.clamp(min=top - _LSE_FLOOR) - top).exp().sum()))


def _deepest(pointers: list[str]) -> str:
    """The deepest of a token's pointers, the later one on ties: ``","`` after a value and
    before a key is placed at that key, where it leads."""
    return max(reversed(pointers), key=lambda p: p.count("/"))


def _spans(pieces: Sequence[bytes]) -> tuple[str, list[tuple[int, int]]]:
    """The text ``pieces`` spell together (decoded as ``bytes.decode(errors="replace")`` would)
    and each piece's characters in it: a character split across pieces belongs to the piece
    that completes it."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    parts: list[str] = []
    spans = []
    at = 0
    for k, piece in enumerate(pieces):
        part = decoder.decode(piece, final=k == len(pieces) - 1)
        parts.append(part)
        spans.append((at, at + len(part)))
        at += len(part)
    return "".join(parts), spans
