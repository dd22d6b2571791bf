"""``lg.generate``: structured output from a ``transformers`` causal LM.

The decode loop, per step: one forward pass (KV cache) -> fill the grammar's mask -> set
disallowed logits to -inf -> temperature / top-p -> sample -> ``matcher.accept``. Sampling
transforms come *after* the mask, so a masked token can never come back through renormalization.

Jump-forward: after each sampled token, when the grammar leaves no choice
(``matcher.forced_bytes()`` is non-empty) the forced bytes are tokenized the way the tokenizer
itself would (canonically), accepted into the matcher without sampling, and fed to the model
together with the sampled token in ONE forward call. Guards (see docs/jump_forward.md):

- left boundary: the sampled token and the forced bytes are tokenized together, so a token that
  spans them (``"`` + ``,"items":`` -> ``",`` ...) is used when the tokenizer would use it;
- right boundary: when a vocabulary token starts with the last one or two forced tokens' bytes
  and goes on, those tokens are held back and left to the model, which may pick the longer token;
- every forced token must be accepted by the matcher, else jump-forward is skipped for this step
  (plain sampling is always correct, only slower).

Truncation (``max_tokens`` reached before the grammar completed) gives ``finish_reason="length"``;
asking such a result for its parsed ``value`` raises :class:`~logitgate.TruncatedOutput` carrying
the partial text, never a JSON parse error.

This module imports torch; ``import logitgate`` does not import it (``lg.generate`` is loaded on
first use).
"""

from __future__ import annotations

import bisect
import codecs
import functools
import inspect
import json
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from .budget import ACCEPTED as BUDGET_ACCEPTED
from .budget import REJECTED as BUDGET_REJECTED
from .budget import BudgetGuard
from .compiler import CompiledGrammar, Compiler
from .errors import LogitgateError, OutputValidationError, TokenRejected, TruncatedOutput, UsageError, _surrogate_at
from .integrations.transformers import vocabulary_for
from .masks import allocate_mask, apply_mask_counted
from .reasoning import Reasoning, ReasoningTracker, as_reasoning, reasoning_grammar
from .repetition import RepetitionControl
from .trace.record import Trace, TraceRecorder, TraceStep
from .vocabulary import Vocabulary

__all__ = [
    "GenerationResult",
    "Timings",
    "TraceStep",
    "compiler_for",
    "forced_tokens",
    "generate",
    "validate_pydantic",
]

_COMPILERS: weakref.WeakKeyDictionary[Vocabulary, Compiler] = weakref.WeakKeyDictionary()
_PREFIX_INDEX: weakref.WeakKeyDictionary[Vocabulary, _TokenPrefixIndex] = weakref.WeakKeyDictionary()
_UNSET: Any = object()


@dataclass
class Timings:
    """Wall-clock seconds.

    ``vocab_s``: building the model's :class:`~logitgate.Vocabulary` (once per tokenizer; ~0
    when cached). ``compile_s``: compiling the structure (excluding the vocabulary).
    ``prefill_s``: the first forward pass, over the prompt. ``first_token_s``: from the start
    of decoding (prefill included, compile excluded) to the first output token.
    ``per_token_s``: mean time per output token after the first (prefill excluded).
    ``mask_s_total``: filling and applying masks. ``model_s_total``: forward passes (prefill
    included).
    """

    vocab_s: float = 0.0
    compile_s: float = 0.0
    prefill_s: float = 0.0
    first_token_s: float = 0.0
    per_token_s: float = 0.0
    mask_s_total: float = 0.0
    model_s_total: float = 0.0
    total_s: float = 0.0


@dataclass
class GenerationResult:
    """What :func:`generate` returns.

    ``finish_reason`` is ``"stop"`` (EOS, a stop string, or the grammar admits nothing more) or
    ``"length"`` (``max_tokens`` ran out). ``complete`` tells whether ``text`` is a full sentence
    of the grammar; :attr:`value` raises :class:`~logitgate.TruncatedOutput` when it is not.
    ``completion_tokens`` counts output token ids (EOS included); ``forced_tokens`` of them were
    appended by jump-forward without sampling; ``forward_passes`` counts model calls (prefill
    included). ``budget_closed`` is true when budget-aware decoding shaped the output: at some
    step the budget removed the token the model ranked first (it closed a string or a list
    earlier than the model would have).
    """

    text: str
    finish_reason: Literal["stop", "length"]
    complete: bool
    prompt_tokens: int
    completion_tokens: int
    forced_tokens: int
    forward_passes: int
    timings: Timings
    token_ids: list[int] = field(default_factory=list)
    kind: Literal["json", "pydantic", "text", "none"] = "none"
    trace: Trace = field(default_factory=Trace)
    budget_closed: bool = False
    #: With ``reasoning``: the reasoning span's text (``text`` is what follows it); None when
    #: the span never closed.
    reasoning: str | None = None
    _pydantic_model: Any = field(default=None, repr=False)
    _refusal_allowed: bool = field(default=False, repr=False)
    _value: Any = field(default=_UNSET, repr=False)

    @property
    def forward_passes_saved(self) -> int:
        """Model calls saved against one call per output token."""
        return max(0, self.completion_tokens - self.forward_passes)

    @property
    def refusal(self) -> str | None:
        """The model's refusal message when the schema came from :func:`~logitgate.with_refusal`
        and the complete output is ``{"refusal": "..."}``; None otherwise."""
        if not (self._refusal_allowed and self.complete):
            return None
        from .toolkit.refusal import refusal_of

        return refusal_of(self.text)

    @property
    def value(self) -> Any:
        """The parsed output: a JSON value (``json_schema``), a Pydantic instance (``pydantic``),
        ``None`` for regex / choice / EBNF / unconstrained output. Raises
        :class:`~logitgate.TruncatedOutput` when the output is not complete."""
        if not self.complete:
            why = "max_tokens reached" if self.finish_reason == "length" else "stopped early"
            raise TruncatedOutput(self.text, f"output is not complete ({why}, finish_reason={self.finish_reason})")
        if self._value is _UNSET:
            if self.kind == "json":
                self._value = json.loads(self.text)
            elif self.kind == "pydantic":
                self._value = validate_pydantic(self._pydantic_model, self.text)
            else:
                self._value = None
        return self._value


def validate_pydantic(model: Any, text: str) -> Any:
    """``model.model_validate_json(text)``, with Pydantic's ``ValidationError`` raised as
    :class:`~logitgate.OutputValidationError` (carrying ``text``): the grammar enforces the
    model's JSON Schema, not its validators (see :mod:`logitgate.frontends.pydantic`)."""
    from pydantic import ValidationError

    try:
        return model.model_validate_json(text)
    except ValidationError as e:
        errors: list[Any] = list(e.errors())
        first = errors[0] if errors else {}
        where = ".".join(str(x) for x in first.get("loc", ())) or "value"
        raise OutputValidationError(
            text,
            f"the output matches {model.__name__}'s schema but its validation rejects it: "
            f"{where}: {first.get('msg', e)} ({len(errors)} error(s))",
            errors,
        ) from None


class _TextStream:
    """Hands a callback the output text as it grows: whole UTF-8 characters only, and, with stop
    strings, never the characters a stop string could still cut away (the last
    ``longest stop - 1``). The output's bytes only grow (jump-forward's replacement of the last
    sampled token spells the same bytes and more), so each call sends a suffix."""

    def __init__(self, callback: Callable[[str], None], stop: Sequence[str] | None) -> None:
        self._callback = callback
        self._stop = [x for x in stop or () if x]
        self._hold = max((len(x) for x in self._stop), default=1) - 1
        self._sent = 0

    def update(self, data: bytes) -> None:
        text = codecs.getincrementaldecoder("utf-8")("replace").decode(data)  # drops a partial char
        upto = len(text) - self._hold
        for x in self._stop:  # a stop string already there: nothing from it on
            at = text.find(x)
            if at >= 0:
                upto = min(upto, at)
        self._send(text, upto)

    def finish(self, text: str) -> None:
        self._send(text, len(text))

    def _send(self, text: str, upto: int) -> None:
        if upto > self._sent:
            self._callback(text[self._sent : upto])
            self._sent = upto


class _TokenPrefixIndex:
    """Sorted text-token bytes: answers "does some vocabulary token strictly extend ``s``?" in
    O(log n) (an extension of ``s`` sorts right after ``s``)."""

    def __init__(self, vocab: Vocabulary) -> None:
        table = vocab.table
        self._sorted = sorted({t for i, t in enumerate(table.tokens) if t and table.is_text(i)})

    def extends(self, s: bytes) -> bool:
        i = bisect.bisect_right(self._sorted, s)
        return i < len(self._sorted) and self._sorted[i].startswith(s)


def compiler_for(vocab: Vocabulary) -> Compiler:
    """One cached :class:`~logitgate.Compiler` per vocabulary (so compiled grammars are reused)."""
    c = _COMPILERS.get(vocab)
    if c is None:
        c = _COMPILERS[vocab] = Compiler(vocab)
    return c


def _prefix_index(vocab: Vocabulary) -> _TokenPrefixIndex:
    idx = _PREFIX_INDEX.get(vocab)
    if idx is None:
        idx = _PREFIX_INDEX[vocab] = _TokenPrefixIndex(vocab)
    return idx


def _canonical(tokenizer: Any, vocab: Vocabulary, data: bytes) -> list[int]:
    """The tokenizer's own tokens for ``data`` (cut to whole UTF-8 characters), or ``[]`` when they
    do not spell exactly those bytes (a normalizer added a prefix space, a special token...)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        data = data[: e.start]
        if not data:
            return []
        text = data.decode("utf-8")
    ids = [int(i) for i in tokenizer.encode(text, add_special_tokens=False)]
    table = vocab.table
    if not ids or table.decode(ids) != data or not all(table.is_text(i) for i in ids):
        return []
    return ids


def _accept_all(m: Any, ids: Sequence[int]) -> bool:
    """Accepts every id or none (rolls back on the first rejection)."""
    for n, tok in enumerate(ids):
        if not m.accept(tok):
            if n:
                m.rollback(n)
            return False
    return True


def _hold_back(vocab: Vocabulary, ids: list[int]) -> int:
    """How many trailing forced tokens to leave to the model: 2 when a vocabulary token extends
    the last two tokens' bytes, 1 when one extends the last token's, else 0."""
    idx = _prefix_index(vocab)
    table = vocab.table
    if len(ids) >= 2 and idx.extends(table.decode(ids[-2:])):
        return 2
    if ids and idx.extends(table.decode(ids[-1:])):
        return 1
    return 0


def forced_tokens(
    m: Any, vocab: Vocabulary, tokenizer: Any, budget: int, last: int | None = None
) -> tuple[list[int], bool]:
    """Jump-forward step: accepts the canonical tokens of the grammar's forced bytes into ``m``.

    ``last`` is the token just sampled and accepted (not yet fed to the model); when the
    tokenizer would merge it with the forced bytes, it is replaced. Returns ``(ids,
    replaced_last)``: the ids to append (when ``replaced_last``, they replace ``last``).
    At most ``budget`` new ids are added. The matcher ends in the state after the returned ids.
    """
    if budget <= 0:
        return [], False
    forced = m.forced_bytes()
    if not forced:
        return [], False
    table = vocab.table
    if last is not None and table.is_text(last):
        last_bytes = table.tokens[last] or b""
        ids = _canonical(tokenizer, vocab, last_bytes + forced)
        if ids and ids[0] != last:
            m.rollback(1)
            if _accept_all(m, ids):
                kept = _trim(m, vocab, ids, budget + 1)
                if len(table.decode(kept)) >= len(last_bytes):
                    return kept, True
                m.rollback(len(kept))
            if not m.accept(last):  # restore the sampled token
                raise TokenRejected(f"token {last} no longer accepted after rollback", code="internal")
    ids = _canonical(tokenizer, vocab, forced)
    if not ids or not _accept_all(m, ids):
        return [], False
    return _trim(m, vocab, ids, budget), False


def _trim(m: Any, vocab: Vocabulary, ids: list[int], budget: int) -> list[int]:
    """Holds back boundary tokens (unless nothing may follow) and cuts to ``budget``; rolls the
    matcher back by what is removed."""
    drop = 0 if m.is_terminated() else _hold_back(vocab, ids)
    drop = max(drop, len(ids) - budget)
    if drop:
        m.rollback(drop)
        ids = ids[: len(ids) - drop]
    return ids


class _Step:
    """One sequence's decoding step under a structure (or none) and a token budget, shared by
    :func:`generate` and the server's engine: budget-aware sampling from masked logits
    (:meth:`choose`) and jump-forward with the budget's check (:meth:`start`,
    :meth:`jump_forward`). The caller runs the model, fills and applies the mask, and feeds
    the tokens; the matcher ends each call in the state after the tokens returned.

    ``guard`` is None without a structure, with ``budget_aware`` off, for grammars with token
    terminals (not measured, see budget.token_budget) and when ``max_tokens`` is below the
    grammar's minimum (truncation, as without a budget)."""

    def __init__(
        self,
        compiled: CompiledGrammar | None,
        vocab: Vocabulary,
        tokenizer: Any,
        max_tokens: int,
        temperature: float,
        top_p: float,
        seed: int | None,
        budget_aware: bool = True,
    ) -> None:
        self.vocab, self.tokenizer = vocab, tokenizer
        self.max_tokens, self.temperature, self.top_p = max_tokens, temperature, top_p
        m = compiled.matcher() if compiled is not None else None
        self.matcher: Any = m
        self.guard: BudgetGuard | None = None
        if compiled is not None and m is not None and budget_aware and not compiled.has_token_terminals:
            guard = BudgetGuard(compiled, max_tokens)
            self.guard = guard if guard.fits(m, max_tokens) else None
        self.generator: torch.Generator | None = None
        if temperature > 0:
            self.generator = torch.Generator(device="cpu")
            self.generator.manual_seed(seed if seed is not None else int(torch.seed() % (1 << 63)))

    def start(self) -> list[int]:
        """The grammar's forced tokens before anything is sampled (an object's ``{`` and first
        key), accepted; none when they would leave no room to finish."""
        m, guard = self.matcher, self.guard
        if m is None:
            return []
        first, _ = forced_tokens(m, self.vocab, self.tokenizer, self.max_tokens)
        if guard is not None and first and not guard.fits(m, self.max_tokens - len(first)):
            m.rollback(len(first))
            first = []
        if guard is not None:
            guard.accepted(first)
        return first

    def choose(
        self, logits: torch.Tensor, bits: Any, remaining: int, allowed: int | None = None
    ) -> tuple[int, int, int]:
        """Samples and accepts the next token from ``logits`` (one row, already masked with
        ``bits``, the row's mask words, whose ``allowed`` count is computed when not given), with
        ``remaining`` tokens left in the budget. Returns ``(token, allowed, budget_cut)``:
        ``allowed`` the final mask's count (-1 without a structure), ``budget_cut`` how many
        tokens the budget removed."""
        m, guard, temperature, top_p, gen = self.matcher, self.guard, self.temperature, self.top_p, self.generator
        budget_cut = 0
        if m is None:
            allowed = -1
        else:
            if guard is not None and top_p < 1.0:
                # Top-p reshapes the distribution after the cut: cut first (see below otherwise).
                budget_cut = guard.restrict(m, bits, remaining, top=functools.partial(_argmax, logits))
                if budget_cut:
                    allowed = apply_mask_counted(logits, bits[None, :])
            if allowed is None:
                allowed = int(torch.isfinite(logits).sum())
            if allowed == 0:
                raise LogitgateError(
                    "no token is allowed here: the vocabulary cannot spell any continuation of the grammar",
                    code="dead-end",
                )
        tok = _sample(logits, temperature, top_p, gen)
        fitted = False  # accepted by the guard
        if guard is not None and m is not None and top_p >= 1.0:
            # Checked lazily: a token drawn from the plain mask that fits is what the cut mask
            # would give (greedy: its argmax; sampling: rejection sampling of the cut
            # distribution), so the cut is computed only when the drawn token does not fit.
            fit = guard.accept(m, tok, remaining)
            if fit == BUDGET_REJECTED:
                raise TokenRejected(f"sampled token {tok} was rejected after masking", code="internal")
            fitted = fit == BUDGET_ACCEPTED
            if not fitted:
                budget_cut = guard.restrict(m, bits, remaining)
                guard.closed = True
                allowed = apply_mask_counted(logits, bits[None, :])
                tok = _sample(logits, temperature, top_p, gen)
        if m is not None and not fitted:
            if not m.accept(tok):
                raise TokenRejected(f"sampled token {tok} was rejected after masking", code="internal")
            if guard is not None:
                guard.accepted([tok])
        return tok, allowed, budget_cut

    def jump_forward(self, tok: int, left: int) -> tuple[list[int], bool]:
        """:func:`forced_tokens` after the sampled ``tok`` with ``left`` tokens of budget left,
        kept only when they leave room to finish: ``(ids, replaced_last)``."""
        m, guard = self.matcher, self.guard
        new, replaced = forced_tokens(m, self.vocab, self.tokenizer, left, last=tok)
        if guard is not None:
            if new and not guard.fits(m, left + replaced - len(new)):
                m.rollback(len(new))  # the forced tokens would not leave room: sample instead
                if replaced and not m.accept(tok):
                    raise TokenRejected(f"token {tok} no longer accepted after rollback", code="internal")
                new, replaced = [], False
            if new or replaced:
                guard.accepted(new, replaced=replaced)
        return new, replaced


def _compile(
    vocab: Vocabulary,
    json_schema: Any,
    pydantic: Any,
    regex: str | None,
    ebnf: str | None,
    choice: Sequence[str] | None,
    grammar: CompiledGrammar | None,
    schema_options: dict[str, Any] | None,
) -> tuple[CompiledGrammar | None, Literal["json", "pydantic", "text", "none"]]:
    given = [x is not None for x in (json_schema, pydantic, regex, ebnf, choice, grammar)]
    if sum(given) > 1:
        raise ValueError("give at most one of json_schema, pydantic, regex, ebnf, choice, grammar")
    compiler = compiler_for(vocab)
    # Compact JSON by default: fewer tokens, longer forced runs for jump-forward, and no
    # whitespace for a small model to loop in. ``schema_options`` overrides it.
    opts = {"whitespace": "compact", **(schema_options or {})}
    if json_schema is not None:
        return compiler.compile_json_schema(json_schema, **opts), "json"
    if pydantic is not None:
        # Pydantic ignores unknown fields on input, so output never needs them: strict (no
        # properties beyond the model's fields) unless schema_options says otherwise.
        return compiler.compile_pydantic(pydantic, **{"strict": True, **opts}), "pydantic"
    if regex is not None:
        return compiler.compile_regex(regex), "text"
    if ebnf is not None:
        return compiler.compile_ebnf(ebnf), "text"
    if choice is not None:
        return compiler.compile_choice(choice), "text"
    if grammar is not None:
        if grammar.vocab is not vocab:
            raise ValueError("grammar was compiled for another Vocabulary than vocabulary_for(model, tokenizer)")
        return grammar, "text"
    return None, "none"


def prompt_ids(tokenizer: Any, prompt: str | Sequence[dict[str, str]], raw: bool = False) -> list[int]:
    """Token ids of the prompt: a message list goes through the chat template; a string too (as
    one user message) when the tokenizer has a template, unless ``raw``. A lone surrogate in
    the text is a :class:`~logitgate.UsageError` (tokenizers take UTF-8 text only)."""
    _check_prompt_text(prompt)
    if isinstance(prompt, str):
        if raw or not getattr(tokenizer, "chat_template", None):
            return [int(i) for i in tokenizer.encode(prompt)]
        messages: list[dict[str, str]] = [{"role": "user", "content": prompt}]
    else:
        messages = [dict(x) for x in prompt]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return [int(i) for i in tokenizer.encode(text, add_special_tokens=False)]


def _check_prompt_text(prompt: str | Sequence[dict[str, str]]) -> None:
    texts = [("prompt", prompt)] if isinstance(prompt, str) else []
    if not isinstance(prompt, str):
        for i, message in enumerate(prompt):
            texts += [(f"prompt[{i}][{k!r}]", v) for k, v in dict(message).items() if isinstance(v, str)]
    for where, text in texts:
        if _surrogate_at(text) >= 0:
            raise UsageError(f"{where} holds a lone surrogate, which no UTF-8 text holds", code="prompt-text")


def _eos_ids(model: Any, tokenizer: Any, vocab: Vocabulary) -> set[int]:
    ids = set(vocab.eos_ids)
    for src in (getattr(tokenizer, "eos_token_id", None), getattr(model.generation_config, "eos_token_id", None)):
        if isinstance(src, int):
            ids.add(src)
        elif isinstance(src, (list, tuple)):
            ids.update(int(i) for i in src)
    return ids


def _sample(logits: torch.Tensor, temperature: float, top_p: float, gen: torch.Generator | None) -> int:
    if temperature <= 0:
        return int(torch.argmax(logits))
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        cum = torch.cumsum(sorted_p, dim=-1)
        # Keep the smallest head reaching top_p, and always the most likely token: top_p=0
        # samples greedily instead of leaving no token at all.
        drop = (cum - sorted_p) >= top_p
        drop[0] = False
        sorted_p[drop] = 0.0
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_p)
    return int(torch.multinomial(probs, 1, generator=gen))


def generate(
    model: Any,
    tokenizer: Any,
    prompt: str | Sequence[dict[str, str]],
    *,
    json_schema: dict[str, Any] | str | bool | None = None,
    pydantic: Any = None,
    regex: str | None = None,
    ebnf: str | None = None,
    choice: Sequence[str] | None = None,
    grammar: CompiledGrammar | None = None,
    max_tokens: int = 256,
    temperature: float = 0.0,
    top_p: float = 1.0,
    seed: int | None = None,
    stop: Sequence[str] | None = None,
    raw: bool = False,
    jump_forward: bool = True,
    parse: bool = False,
    trace: bool = False,
    schema_options: dict[str, Any] | None = None,
    on_token: Callable[[TraceStep], None] | None = None,
    on_text: Callable[[str], None] | None = None,
    budget_aware: bool = True,
    repetition_penalty: float = 1.0,
    frequency_penalty: float = 0.0,
    presence_penalty: float = 0.0,
    dry_multiplier: float = 0.0,
    reasoning: bool | Reasoning | None = None,
) -> GenerationResult:
    """Generates text from ``model`` that matches at most one given structure.

    ``prompt`` is a string (sent as one user message through the chat template, unless ``raw``
    or the tokenizer has none) or a list of ``{"role", "content"}`` messages. ``temperature=0``
    is greedy; otherwise temperature, then top-p, apply to the masked logits (``top_p=0`` keeps
    only the most likely token: greedy); ``seed`` makes sampling reproducible. ``stop`` strings
    end generation (the text is cut before them).
    JSON Schema / Pydantic output is compact JSON unless ``schema_options`` (passed to
    :meth:`~logitgate.Compiler.compile_json_schema`) says otherwise.
    ``parse=True`` computes :attr:`GenerationResult.value` at once (raising
    :class:`~logitgate.TruncatedOutput` on truncated output). Without a structure the
    generation is unconstrained. ``trace=True`` records every output token in ``result.trace``
    (a :class:`~logitgate.trace.Trace`: the mask's allowed count, jump-forward and budget
    flags, the top tokens before and after the mask, the grammar position;
    ``result.trace.to_html()`` shows it, see docs/trace.md). Streaming: ``on_token`` is called
    with each output token's :class:`TraceStep` as it is generated (forced tokens included), ``on_text`` with each new
    piece of the output text (whole characters; text a stop string may still cut is held back).
    Arguments out of range raise :class:`~logitgate.UsageError` before anything runs.

    ``budget_aware`` (default on): with a structure, a token is allowed only if the shortest
    completion after it still fits in the tokens left, so whenever ``max_tokens`` is at least
    the grammar's ``token_budget().min_tokens`` the output is a complete document; when that
    cut changed the model's first choice, ``budget_closed`` is true. Below the minimum the
    generation runs as without it and ends with ``finish_reason="length"``.

    Repetition control (off by default; see :mod:`logitgate.repetition`): ``repetition_penalty``
    (CTRL), ``frequency_penalty`` and ``presence_penalty`` (OpenAI's semantics) and
    ``dry_multiplier`` (a DRY n-gram penalty) lower the logits of tokens the output already
    holds, before the mask.

    ``reasoning`` (True, or a :class:`~logitgate.reasoning.Reasoning` with its tags and a
    token budget): a free reasoning span comes first, only its end excluded, then the
    structure; :attr:`GenerationResult.reasoning` holds the span's text and ``text`` the rest
    (see :mod:`logitgate.reasoning`).
    """
    _check_arguments(max_tokens, temperature, top_p, seed)
    reasoning_spec = as_reasoning(reasoning)
    repetition = RepetitionControl(repetition_penalty, frequency_penalty, presence_penalty, dry_multiplier)
    t_start = time.perf_counter()
    vocab = vocabulary_for(model, tokenizer)
    t_vocab = time.perf_counter()
    compiled, kind = _compile(vocab, json_schema, pydantic, regex, ebnf, choice, grammar, schema_options)
    tracker = None
    if reasoning_spec is not None:
        structure = compiled.grammar if compiled is not None else None
        compiler = compiler_for(vocab)
        compiled = compiler.compile_grammar(reasoning_grammar(reasoning_spec, structure, vocab, compiler.limits))
        tracker = ReasoningTracker(reasoning_spec, vocab)
    timings = Timings(vocab_s=t_vocab - t_start, compile_s=time.perf_counter() - t_vocab)
    table = vocab.table
    eos = _eos_ids(model, tokenizer, vocab)
    ids_prompt = prompt_ids(tokenizer, prompt, raw=raw)
    if not ids_prompt:
        raise ValueError("the prompt has no tokens")
    step = _Step(compiled, vocab, tokenizer, max_tokens, temperature, top_p, seed, budget_aware)
    m = step.matcher
    bits = allocate_mask(vocab)
    device = getattr(model, "device", torch.device("cpu"))
    steps: list[TraceStep] = []
    out: list[int] = []
    n_forced = 0
    passes = 0
    pending = list(ids_prompt)
    finish: Literal["stop", "length"] | None = None
    stop_cut: int | None = None
    past: Any = None
    cache_kw = _cache_keyword(model)
    count_allowed = trace or on_token is not None
    text_stream = _TextStream(on_text, stop) if on_text is not None else None
    tracer = TraceRecorder(table, temperature, frozenset(eos)) if trace else None

    def record(tok: int, allowed: int, forced: bool) -> None:
        if count_allowed:
            st = TraceStep(len(steps), tok, _tok_text(table, tok), allowed, forced)
            if tracer is not None and not forced:
                tracer.annotate(st)
            steps.append(st)
            if on_token is not None:
                on_token(st)
        if text_stream is not None:
            text_stream.update(table.decode(out))

    def record_forced(new: list[int]) -> None:
        for tok in new:
            record(tok, -1, True)

    if m is not None and jump_forward:
        first = step.start()
        out += first
        n_forced += len(first)
        pending += first
        record_forced(first)
    t_dec = time.perf_counter()
    first_token_at: float | None = None
    while True:
        if m is not None and m.is_terminated():
            finish = "stop"  # nothing may follow: no need to ask the model for EOS
            break
        if len(out) >= max_tokens:
            finish = "length"
            break
        if tracker is not None and tracker.must_close():  # the thinking budget is spent
            closing = tracker.closing_tokens(tokenizer)[: max_tokens - len(out)]
            if m is not None and not all(m.accept(t) for t in closing):
                raise TokenRejected("the reasoning span's end was rejected", code="internal")
            out += closing
            pending += closing
            n_forced += len(closing)
            record_forced(closing)
            tracker.update(out)
            continue
        t0 = time.perf_counter()
        with torch.inference_mode():
            res = model(
                input_ids=torch.tensor([pending], dtype=torch.long, device=device),
                use_cache=True,
                logits_to_keep=1,
                **{cache_kw: past},
            )
        past = res.get("cache") if "cache" in res else res.get("past_key_values")
        # A copy: in float32 `.float()` would return the model's own (inference-mode) output,
        # which the mask, applied in place, must not change.
        logits = res.logits[0, -1].to(torch.float32, copy=True)
        timings.model_s_total += time.perf_counter() - t0
        if passes == 0:
            timings.prefill_s = time.perf_counter() - t0
        passes += 1
        if repetition.active:
            repetition.apply(logits, out)
        if tracer is not None:
            tracer.before_mask(logits)
        allowed = None
        if m is not None:
            t0 = time.perf_counter()
            m.fill_mask(bits, 0)
            allowed = apply_mask_counted(logits, bits)
            timings.mask_s_total += time.perf_counter() - t0
        tok, allowed, budget_cut = step.choose(logits, bits[0], max_tokens - len(out), allowed)
        if first_token_at is None:
            first_token_at = time.perf_counter()
        out.append(tok)
        if tracer is not None:
            tracer.after_mask(logits, tok, budget_cut)
        record(tok, allowed, False)
        if tok in eos and (m is None or m.is_terminated()):
            finish = "stop"
            break
        if stop:
            text_now = table.decode(out).decode("utf-8", errors="replace")
            hits = [text_now.find(s) for s in stop if s and s in text_now]
            if hits:
                stop_cut = min(hits)
                finish = "stop"
                break
        pending = [tok]
        if m is not None and jump_forward:
            new, replaced = step.jump_forward(tok, max_tokens - len(out))
            if replaced:
                out.pop()
                pending = []
                if count_allowed:
                    steps[-1].merged = True
                n_forced += len(new) - 1
            else:
                n_forced += len(new)
            out += new
            pending += new
            record_forced(new)
        if tracker is not None:
            tracker.update(out)
    t_end = time.perf_counter()
    text = table.decode(out).decode("utf-8", errors="replace")
    if stop_cut is not None:
        text = text[:stop_cut]
        complete = False if m is not None else True
    elif m is not None:
        complete = m.is_complete()
    else:
        complete = finish == "stop"
    reasoning_text = None
    if tracker is not None and stop_cut is None:
        reasoning_text, text = tracker.split(out)
    if text_stream is not None:
        text_stream.finish(text)
    timings.total_s = t_end - t_start
    timings.first_token_s = (first_token_at or t_end) - t_dec
    if len(out) > 1 and first_token_at is not None:
        timings.per_token_s = (t_end - first_token_at) / (len(out) - 1)
    traced = Trace()  # without trace=True, the steps were recorded for on_token only
    if tracer is not None:
        traced = tracer.finish(
            steps,
            compiled,
            kind,
            finish_reason=finish,
            complete=complete,
            vocab_size=vocab.size,
            temperature=temperature,
        )
    result = GenerationResult(
        text=text,
        finish_reason=finish,
        complete=complete,
        prompt_tokens=len(ids_prompt),
        completion_tokens=len(out),
        forced_tokens=n_forced,
        forward_passes=passes,
        timings=timings,
        token_ids=out,
        kind=kind,
        trace=traced,
        budget_closed=step.guard is not None and step.guard.closed,
        reasoning=reasoning_text,
        _pydantic_model=pydantic,
        _refusal_allowed=_refusal_schema(json_schema),
    )
    if parse:
        _ = result.value
    return result


def _refusal_schema(json_schema: Any) -> bool:
    from .toolkit.refusal import is_refusal_schema

    return is_refusal_schema(json_schema)


# The seeds torch.Generator.manual_seed takes (an int64 or a uint64); past them it raises.
_SEED_MIN, _SEED_MAX = -(2**63), 2**64 - 1


def _check_arguments(max_tokens: int, temperature: float, top_p: float, seed: int | None = None) -> None:
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise UsageError(f"max_tokens must be an integer >= 1, got {max_tokens!r}")
    if not temperature >= 0:  # also refuses NaN
        raise UsageError(f"temperature must be >= 0 (0 = greedy), got {temperature!r}")
    if not 0 <= top_p <= 1:
        raise UsageError(f"top_p must be in [0, 1] (0 = greedy), got {top_p!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not _SEED_MIN <= seed <= _SEED_MAX):
        raise UsageError(f"seed must be an integer in [-2**63, 2**64 - 1], got {seed!r}")


def _argmax(logits: torch.Tensor) -> int:
    return int(torch.argmax(logits))


def _cache_keyword(model: Any) -> str:
    """``cache`` (transformers >= 5) or ``past_key_values`` (older): the forward argument that
    takes the KV cache."""
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def _tok_text(table: Any, tok: int) -> str:
    b = table.tokens[tok] if 0 <= tok < len(table.tokens) else None
    return (b or b"").decode("utf-8", errors="backslashreplace")
