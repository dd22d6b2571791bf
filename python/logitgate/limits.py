"""One place for every limit logitgate enforces. See docs/limits.md for the reasoning behind
each default. Hitting a limit raises :class:`~logitgate.LimitExceeded` naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["Limits"]


@dataclass(frozen=True)
class Limits:
    """Resource limits for compiling and matching.

    Attributes:
        max_source_bytes: size of one grammar/regex/schema text (bytes). Bounds parse time.
        max_nesting: nesting depth of groups/parentheses in a grammar, regex or IR tree.
            Frontends and the core walk trees with explicit stacks; this bounds their memory.
        max_repeat: largest bound in ``{m,n}``; bounded repetition is unrolled in the automaton.
        max_automaton_states: states of the compiled byte automaton (all rules together).
        max_stack_depth: run-time rule nesting (e.g. JSON nesting depth) in one output. The
            mask enforces it: a token that would nest deeper is not allowed.
        max_parse_heads: simultaneous parse heads in one parser configuration (ambiguity bound).
        max_configurations: parser configurations in one store of a compiled grammar (shared
            by its matchers; memory bound). A full store is replaced by a fresh one and the
            matchers move over, so it fails only a request whose own history plus one step
            does not fit a fresh store.
        mask_cache_entries: masks memoized per store (about vocab/8 bytes each).
    """

    max_source_bytes: int = 8 * 1024 * 1024
    max_nesting: int = 200
    max_repeat: int = 100_000
    max_automaton_states: int = 2_000_000
    max_stack_depth: int = 2_000
    max_parse_heads: int = 20_000
    max_configurations: int = 200_000
    mask_cache_entries: int = 4_096

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"Limits.{f.name} must be a positive int, got {v!r}")


DEFAULT_LIMITS = Limits()
