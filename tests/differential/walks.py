"""Random walks through the core's masks, checked token by token against the reference recognizer.

A walk samples uniformly among the tokens the core allows, takes EOS with some probability when it
is allowed, and (optionally) finishes by following the reference's shortest completion with
single-byte tokens so that walks end in sentences. At chosen steps the core's mask bit for every
checked token id is compared with the reference's verdict:

- a text token is allowed iff ``reference.advance(state, token_bytes)`` is not None;
- an EOS id is allowed iff ``reference.is_complete(state)``;
- special ids, ids without bytes, empty tokens and padding ids are never allowed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tests.reference.recognizer import Reference, State, TokenTrie


@dataclass
class VocabView:
    """What the checks need from a Vocabulary: bytes per id, EOS/special sets, the ids to check."""

    vocab: Any
    width: int
    token_bytes: list[bytes | None]
    eos: list[int]
    special: frozenset[int]
    check_ids: np.ndarray  # ids whose mask bit is compared at a full check
    trie: TokenTrie  # the text tokens among check_ids
    single_byte: dict[int, int] = field(default_factory=dict)  # byte -> a text token spelling it


_VIEWS: dict[tuple[int, int | None], VocabView] = {}


def vocab_view(vocab: Any, sample: int | None = None, seed: int = 0) -> VocabView:
    """Cached view of ``vocab``; with ``sample``, check only that many random ids plus every
    single-byte token and every EOS id (for 262k vocabularies)."""
    key = (id(vocab), sample)
    if key in _VIEWS:
        return _VIEWS[key]
    width = int(vocab.size)
    eos = sorted(int(i) for i in vocab.eos_ids)
    special = frozenset(int(i) for i in vocab.special_ids) | frozenset(eos)
    tbytes: list[bytes | None] = [vocab.token_bytes(i) for i in range(width)]
    single: dict[int, int] = {}
    for i, tb in enumerate(tbytes):
        if tb is not None and len(tb) == 1 and i not in special and tb[0] not in single:
            single[tb[0]] = i
    if sample is None:
        check = np.arange(width)
    else:
        rng = random.Random(seed)
        chosen = set(rng.sample(range(width), min(sample, width))) | set(single.values()) | set(eos)
        check = np.array(sorted(chosen))
    text = [(int(i), tbytes[i]) for i in check if i not in special and tbytes[i]]
    view = VocabView(vocab, width, tbytes, eos, special, check, TokenTrie(text), single)  # type: ignore[arg-type]
    _VIEWS[key] = view
    return view


def mask_to_bools(bits: np.ndarray, width: int) -> np.ndarray:
    """Bit ``i`` of the row = bit ``i % 32`` of int32 word ``i // 32`` (decoded here, independently)."""
    words = np.ascontiguousarray(bits[0]).astype("<i4")
    return np.unpackbits(words.view(np.uint8), bitorder="little")[:width].astype(bool)


@dataclass
class Disagreement:
    grammar: str
    text: bytes
    token_id: int
    token_bytes: bytes | None
    core: bool
    reference: bool

    def __str__(self) -> str:
        return (
            f"[{self.grammar}] after {self.text!r}: token {self.token_id} {self.token_bytes!r}: "
            f"core={'allow' if self.core else 'deny'} reference={'allow' if self.reference else 'deny'}"
        )


def expected_mask(ref: Reference, state: State, view: VocabView) -> np.ndarray:
    exp = np.zeros(view.width, dtype=bool)
    allowed = ref.allowed_tokens(state, view.trie)
    if allowed:
        exp[np.fromiter(allowed, dtype=np.int64, count=len(allowed))] = True
    if ref.is_complete(state):
        exp[view.eos] = True
    return exp


def compare_full(
    name: str, ref: Reference, state: State, text: bytes, core: np.ndarray, view: VocabView
) -> list[Disagreement]:
    """Every id in ``view.check_ids``: the core's bit against the reference's verdict."""
    exp = expected_mask(ref, state, view)
    ids = view.check_ids
    bad = ids[core[ids] != exp[ids]]
    return [Disagreement(name, text, int(i), view.token_bytes[i], bool(core[i]), bool(exp[i])) for i in bad[:20]]


def _ref_verdict(ref: Reference, state: State, view: VocabView, tid: int) -> bool:
    if tid in view.eos:
        return ref.is_complete(state)
    tb = view.token_bytes[tid]
    if tid in view.special or not tb:
        return False
    return ref.advance(state, tb) is not None


def shortest_completion_first_byte(ref: Reference, state: State) -> int | None:
    """First byte of a shortest byte string that completes ``state`` (None if already complete)."""
    if ref.is_complete(state):
        return None
    best: tuple[int, int] | None = None
    for b in ref.next_bytes(state):
        nxt = ref.advance(state, bytes((b,)))
        cost = ref.min_completion_length(nxt) if nxt is not None else None
        if cost is not None and (best is None or cost < best[0]):
            best = (cost, b)
    return None if best is None else best[1]


@dataclass
class WalkResult:
    text: bytes
    ended_with_eos: bool
    tokens: list[int]
    full_checks: int
    disagreements: list[Disagreement]


def random_walk(
    name: str,
    compiled: Any,
    ref: Reference,
    view: VocabView,
    rng: random.Random,
    *,
    max_tokens: int = 24,
    eos_prob: float = 0.3,
    full_check_steps: Sequence[int] = (),
    finish: bool = False,
    spot_checks: int = 32,
    short_bias: float = 0.5,
) -> WalkResult:
    """One seeded walk; full mask comparisons at ``full_check_steps`` (-1 = start of the finishing phase).

    With probability ``short_bias`` a step picks among allowed tokens of at most two bytes, which
    steers walks out of long string bodies into punctuation and structure (more distinct states).
    """
    import logitgate as lg

    m = compiled.matcher()
    bits = lg.allocate_mask(view.vocab, batch=1)
    state: State | None = ref.start()
    text = b""
    tokens: list[int] = []
    bad: list[Disagreement] = []
    checks = 0
    step = 0
    eos_set = set(view.eos)
    while state is not None and not bad:
        m.fill_mask(bits, row=0)
        core = mask_to_bools(bits, view.width)
        finishing = step >= max_tokens
        if step in full_check_steps or (finishing and -1 in full_check_steps and step == max_tokens):
            bad += compare_full(name, ref, state, text, core, view)
            checks += 1
        allowed = np.flatnonzero(core)
        # Spot checks every step: some allowed and some denied ids against the reference.
        denied_sample = [rng.randrange(view.width) for _ in range(spot_checks)]
        allowed_sample = [int(allowed[rng.randrange(len(allowed))]) for _ in range(spot_checks)] if len(allowed) else []
        for tid in allowed_sample + denied_sample:
            want = _ref_verdict(ref, state, view, tid)
            if want != bool(core[tid]):
                bad.append(Disagreement(name, text, tid, view.token_bytes[tid], bool(core[tid]), want))
        if bad:
            break
        eos_allowed = [int(i) for i in view.eos if core[i]]
        non_eos = [int(i) for i in allowed if int(i) not in eos_set]
        if eos_allowed and (not non_eos or rng.random() < eos_prob or (finishing and ref.is_complete(state))):
            if not m.accept(eos_allowed[0]):
                bad.append(Disagreement(name, text, eos_allowed[0], None, False, True))
            tokens.append(eos_allowed[0])
            return WalkResult(text, True, tokens, checks, bad)
        if not non_eos:
            break
        if finishing:
            if not finish or step >= max_tokens + 400:
                break
            first = shortest_completion_first_byte(ref, state)
            if first is None or first not in view.single_byte:
                break
            tid = view.single_byte[first]
        else:
            pool = non_eos
            if rng.random() < short_bias:
                short = [i for i in non_eos if len(view.token_bytes[i] or b"") <= 2]
                pool = short or non_eos
            tid = pool[rng.randrange(len(pool))]
        tb = view.token_bytes[tid]
        assert tb is not None
        if not m.accept(tid):
            bad.append(Disagreement(name, text, tid, tb, False, True))
            break
        tokens.append(tid)
        text += tb
        state = ref.advance(state, tb)
        if state is None:
            bad.append(Disagreement(name, text[: -len(tb)], tid, tb, True, False))
        step += 1
    return WalkResult(text, False, tokens, checks, bad)


def format_disagreements(bad: Sequence[Disagreement], limit: int = 5) -> str:
    return "\n".join(str(d) for d in bad[:limit]) + (f"\n... and {len(bad) - limit} more" if len(bad) > limit else "")
