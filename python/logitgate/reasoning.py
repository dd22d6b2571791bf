"""Reasoning outside the mask: a free reasoning span, then the constrained structure.

Constraining what a model thinks costs accuracy (CRANE); constraining only the answer does
not. :class:`Reasoning` describes the span: ``begin`` (omitted when the prompt already opens
it), free text in which only ``end`` is excluded (its first occurrence closes the span), then
``end``, then the structure. Where ``begin`` or ``end`` is the text of a special token of the
vocabulary (Qwen3's ``<think>``), that token is accepted as well. With a ``budget`` of tokens,
the generation loop forces ``end`` once the span has used that many
(:class:`ReasoningTracker`); the structure follows as usual.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .grammar.ir import Grammar, Node, Ref, Seq, references
from .limits import Limits
from .vocabulary import Vocabulary

__all__ = ["Reasoning", "ReasoningTracker", "as_reasoning", "reasoning_grammar"]


@dataclass(frozen=True)
class Reasoning:
    """A reasoning span: ``begin`` (empty: the prompt opened it), ``end``, and an optional
    ``budget`` in tokens after which ``end`` is forced."""

    begin: str = "<think>"
    end: str = "</think>"
    budget: int | None = None

    def __post_init__(self) -> None:
        from .errors import UsageError, _surrogate_at

        for name in ("begin", "end"):
            text = getattr(self, name)
            if not isinstance(text, str):
                raise UsageError(f"reasoning {name} must be a str, not {type(text).__name__}", code="reasoning")
            if _surrogate_at(text) >= 0:
                raise UsageError(
                    f"reasoning {name} {text!r} holds a lone surrogate, which no UTF-8 text holds", code="reasoning"
                )
        if not self.end:
            raise UsageError("a reasoning span needs a non-empty end", code="reasoning")
        if self.budget is not None and (not isinstance(self.budget, int) or self.budget < 0):
            raise UsageError(f"reasoning budget must be an int >= 0, got {self.budget!r}", code="reasoning")


def as_reasoning(value: bool | Reasoning | None) -> Reasoning | None:
    """``reasoning=`` of :func:`~logitgate.generate`: True is ``<think>...</think>``."""
    if value is None or value is False:
        return None
    if value is True:
        return Reasoning()
    if isinstance(value, Reasoning):
        return value
    from .errors import UsageError

    raise UsageError(f"reasoning must be a bool or a Reasoning, not {type(value).__name__}", code="reasoning")


def reasoning_grammar(spec: Reasoning, structure: Grammar | None, vocab: Vocabulary, limits: Limits) -> Grammar:
    """The grammar of ``spec``'s span followed by ``structure`` (any text when None)."""
    from .frontends.structural_tag import lower_structural_tag

    def no_schema(schema: object, path: str, options: dict[str, object]) -> Grammar:
        raise AssertionError("no json_schema in a reasoning span")

    after = {"type": "any_text"} if structure is None else {"type": "const_string", "value": ""}
    tag = {
        "type": "sequence",
        "elements": [{"type": "tag", "begin": spec.begin, "content": {"type": "any_text"}, "end": spec.end}, after],
    }
    span = lower_structural_tag(
        tag,
        limits=limits,
        token_id=vocab.token_id,
        json_schema=no_schema,
        special_texts=vocab.special_texts(),
        vocab_size=vocab.size,
    )
    if structure is None:
        return span
    rules: dict[str, Node] = {}
    for name, body in span.rules.items():
        rules["reasoning_" + name] = _prefixed(body, "reasoning_")
    for name, body in structure.rules.items():
        rules["answer_" + name] = _prefixed(body, "answer_")
    root: Node = Seq((Ref("reasoning_" + span.root), Ref("answer_" + structure.root)))
    return Grammar({"root": root, **rules})


def _prefixed(node: Node, prefix: str) -> Node:
    from .frontends.structural_tag import rename_refs

    return rename_refs(node, {name: prefix + name for name in references(node)})


class ReasoningTracker:
    """Follows a generation's output through the reasoning span: whether the span is still
    open, and (with a budget) when its end must be forced."""

    def __init__(self, spec: Reasoning, vocab: Vocabulary) -> None:
        self.spec = spec
        self.vocab = vocab
        self.end_id = vocab.special_texts().get(spec.end)
        self.open_tokens = 0  # tokens the span has used
        self.closed = False

    def update(self, out: list[int]) -> None:
        """Reads the output so far (call after each step)."""
        if self.closed:
            return
        if self.end_id is not None and self.end_id in out:
            self.closed = True
            return
        text = self.vocab.table.decode(out)
        self.closed = self.spec.end.encode() in text
        self.open_tokens = len(out)

    def must_close(self) -> bool:
        return not self.closed and self.spec.budget is not None and self.open_tokens >= self.spec.budget

    def split(self, out: list[int]) -> tuple[str | None, str]:
        """(the reasoning text, the answer text) of the output ``out``; ``None`` and all of its
        text while the span is open."""
        table = self.vocab.table
        if self.end_id is not None and self.end_id in out:
            at = out.index(self.end_id)
            inside, answer = table.decode(out[:at]), table.decode(out[at + 1 :])
        else:
            full, end = table.decode(out), self.spec.end.encode()
            at = full.find(end)
            if at < 0:
                return None, full.decode("utf-8", errors="replace")
            inside, answer = full[:at], full[at + len(end) :]
        text = inside.decode("utf-8", errors="replace")
        if self.spec.begin and text.startswith(self.spec.begin):
            text = text[len(self.spec.begin) :]
        return text, answer.decode("utf-8", errors="replace")

    def closing_tokens(self, tokenizer: Any) -> list[int]:
        """Tokens spelling the end (its special token where there is one)."""
        if self.end_id is not None:
            return [self.end_id]
        return list(tokenizer.encode(self.spec.end, add_special_tokens=False))
