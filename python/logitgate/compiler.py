"""Compiler: frontends -> IR -> core automaton, cached by content hash.

One :class:`Compiler` per vocabulary. It is thread-safe; compiling releases the GIL in the
core. Identical inputs (same IR, same limits) return the same :class:`CompiledGrammar`.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import threading
import traceback
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import astuple, dataclass
from typing import TYPE_CHECKING, Any

from . import _core
from .cancel import CancelToken, checkpoint, current_interrupt, enable_gc_later, interrupt_scope
from .errors import CompileCancelled, CompileTimeout, GrammarError, SchemaError, StructuralTagError, UsageError
from .grammar.ir import Alt, Grammar, Literal
from .grammar.program import serialize
from .limits import DEFAULT_LIMITS, Limits
from .vocabulary import Vocabulary

if TYPE_CHECKING:
    from .budget import TokenBudget

__all__ = ["CacheInfo", "CompiledGrammar", "Compiler"]

DEFAULT_CACHE_BYTES = 128 * 1024 * 1024
"""The default bound on the bytes a :class:`Compiler`'s cache of grammars holds."""


@dataclass(frozen=True)
class CacheInfo:
    """A snapshot of a :class:`Compiler`'s caches (:meth:`Compiler.cache_info`).

    Attributes:
        entries: compiled grammars cached now; ``max_entries`` bounds them (``cache_size``).
        bytes: what they hold now (:attr:`CompiledGrammar.memory_bytes` summed); ``max_bytes``
            bounds it (``cache_bytes``) whenever a grammar is added.
        hits: compiles answered from the cache; ``misses``: compiles that ran the core.
        evictions: grammars dropped to stay within the bounds (a grammar larger than
            ``max_bytes`` alone counts once, when it is not kept).
        vocabulary_bytes: masks computed on first use and shared by every grammar of the
            vocabulary (alphabet masks, loop splits): bounded in count, never evicted.
    """

    entries: int
    max_entries: int
    bytes: int
    max_bytes: int
    hits: int
    misses: int
    evictions: int
    vocabulary_bytes: int


class CompiledGrammar:
    """A grammar compiled for one vocabulary. Cheap to share; make one matcher per request.

    Attributes:
        grammar: the IR that was compiled (print it with :meth:`to_ebnf`).
        vocab: the vocabulary masks are sized for.
    """

    def __init__(
        self,
        core: _core.CompiledGrammar,
        grammar: Grammar,
        vocab: Vocabulary,
        limits: Limits,
        dropped: tuple[str, ...] = (),
        rule_pointers: dict[str, str] | None = None,
    ) -> None:
        self._core = core
        self.grammar = grammar
        self.vocab = vocab
        self.limits = limits
        #: Constraints a ``lenient=True`` JSON Schema compile dropped, one line each
        #: ("<json pointer>: <keyword>: <why>"). Empty for every exact compile.
        self.dropped = dropped
        #: For a JSON Schema: the JSON pointer of each rule that lowers a subschema (``sN`` rules),
        #: which :meth:`token_budget` uses to name what makes the output unbounded.
        self.rule_pointers = dict(rule_pointers or {})
        self._budget: _core.Budget | None = None

    def matcher(self) -> _core.Matcher:
        """A fresh per-request :class:`~logitgate.Matcher` at the start of the grammar."""
        return _core.Matcher(self._core)

    def to_ebnf(self) -> str:
        """The compiled grammar printed in the GBNF dialect."""
        return self.grammar.to_ebnf()

    def token_budget(self) -> TokenBudget:
        """The shortest and longest output of this grammar, in bytes and in output tokens of
        this vocabulary (see :class:`~logitgate.budget.TokenBudget`). The first call runs a
        shortest-path pass over the automaton; the result is not cached."""
        from .budget import token_budget

        return token_budget(self)

    @functools.cached_property
    def has_token_terminals(self) -> bool:
        """True when the grammar reads whole tokens (:class:`~logitgate.grammar.ir.TokenSet`:
        special tokens, ``<[id]>``), which the token budget does not measure yet."""
        from .grammar.ir import TokenSet

        return any(isinstance(n, TokenSet) for n in self.grammar.iter_nodes())

    @property
    def num_states(self) -> int:
        """States of the compiled automaton (a size measure)."""
        return self._core.num_states

    @property
    def memory_bytes(self) -> int:
        """Bytes the grammar holds in the core: its automaton, and the parser state its
        matchers built (configurations, transitions, memoized masks), which grows with use.
        The shared vocabulary is not counted."""
        return self._core.memory_bytes

    def __repr__(self) -> str:
        return (
            f"CompiledGrammar(rules={len(self.grammar.rules)}, states={self.num_states}, vocab_size={self.vocab.size})"
        )


# The Limits fields the core reads; they cross to C++ by name (cpp/bindings/module.cc MakeLimits).
# max_source_bytes is the frontends' only.
CORE_LIMIT_FIELDS = (
    "max_nesting",
    "max_repeat",
    "max_automaton_states",
    "max_stack_depth",
    "max_parse_heads",
    "max_configurations",
    "mask_cache_entries",
)


@functools.lru_cache(maxsize=64)
def _limits_forms(limits: Limits) -> tuple[bytes, dict[str, int]]:
    """The limits as part of a cache key, and the core's fields by name (astuple deep-copies:
    per compile it cost about as much as hashing the program). The dict is shared: not to be
    changed."""
    return repr(astuple(limits)).encode(), {name: getattr(limits, name) for name in CORE_LIMIT_FIELDS}


# The default limits' forms, looked up by identity: a Compiler per request is common, and
# hashing a Limits (every field, through the dataclass's Python __hash__) is not free.
_DEFAULT_LIMITS_FORMS = _limits_forms(DEFAULT_LIMITS)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pauses the cyclic garbage collector: lowering allocates many small acyclic objects
    (IR nodes, tuples) whose collections would cost a tenth of the compile. Restores the
    previous setting (a pause in another thread may overlap; the collector ends up enabled
    when any pauser found it enabled)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    except (CompileCancelled, CompileTimeout) as e:
        # The interrupted lowering's work (possibly millions of objects) is being freed on a
        # background thread (cancel.discard_later); the frames still holding some of it are
        # cleared, and the collector comes back on once the work is gone, so that the
        # interrupted call returns at once rather than after a collection that walks it all.
        traceback.clear_frames(e.__traceback__)
        if was_enabled:
            enable_gc_later()
            was_enabled = False
        raise
    finally:
        if was_enabled:
            gc.enable()


def _check_text(text: object, method: str, what: str) -> None:
    """Grammar sources are text: anything else is a typed error here, not a crash inside a
    frontend."""
    if not isinstance(text, str):
        hint = " (decode it first)" if isinstance(text, (bytes, bytearray)) else ""
        raise GrammarError(f"{method} takes the {what} as str, not {type(text).__name__}{hint}", code="source-type")


class Compiler:
    """Compiles grammars for one vocabulary.

    >>> import logitgate as lg
    >>> vocab = lg.Vocabulary.from_tokens([b"yes", b"no", b"y", b"es", None], eos_ids=[4])
    >>> g = lg.Compiler(vocab).compile_choice(["yes", "no"])
    >>> m = g.matcher()
    >>> bits = lg.allocate_mask(vocab)
    >>> m.fill_mask(bits, row=0)
    >>> [i for i in range(vocab.size) if bits[0, i // 32] >> (i % 32) & 1]
    [0, 1, 2]
    """

    def __init__(
        self,
        vocab: Vocabulary,
        limits: Limits | None = None,
        cache_size: int = 256,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        """``cache_size`` and ``cache_bytes`` bound the cache of compiled grammars: at most
        that many, holding at most that many bytes together (:attr:`CompiledGrammar.memory_bytes`,
        measured whenever a grammar is added; the least recently used go first, and a grammar
        larger than the bound alone is not kept). 0 turns the cache off. See docs/limits.md."""
        for name, value in (("cache_size", cache_size), ("cache_bytes", cache_bytes)):
            if not isinstance(value, int) or value < 0:
                raise UsageError(f"Compiler {name} must be an int >= 0, got {value!r}", code="compiler-cache")
        self.vocab = vocab
        self.limits = limits or DEFAULT_LIMITS
        forms = _DEFAULT_LIMITS_FORMS if self.limits is DEFAULT_LIMITS else _limits_forms(self.limits)
        self._limits_key, self._core_limits = forms
        self._cache: OrderedDict[str, CompiledGrammar] = OrderedDict()
        self._cache_size = cache_size
        self._cache_bytes = cache_bytes
        self._lock = threading.Lock()
        self._hits = self._misses = self._evictions = 0

    def compile_grammar(
        self, grammar: Grammar, *, timeout: float | None = None, cancel: CancelToken | None = None
    ) -> CompiledGrammar:
        """Compiles an IR grammar (cached by content). Every ``compile_*`` method takes
        ``timeout`` (seconds of wall clock for the whole compile) and ``cancel`` (a
        :class:`~logitgate.CancelToken`): past the one, or once the other is cancelled from any
        thread, the compile raises :class:`~logitgate.CompileTimeout` or
        :class:`~logitgate.CompileCancelled` and keeps nothing (docs/limits.md)."""
        with interrupt_scope(timeout, cancel):
            return self._compile_grammar(grammar)

    def _compile_grammar(self, grammar: Grammar) -> CompiledGrammar:
        with _gc_paused():
            program, names = serialize(grammar, self.limits)
        return self._compile_program(grammar, program, names)

    def _compile_program(self, grammar: Grammar, program: bytes, names: list[str]) -> CompiledGrammar:
        """The core's compile of ``grammar``'s serialized ``program`` (cached by content)."""
        checkpoint()
        key = hashlib.blake2b(program + "\0".join(names).encode() + self._limits_key)
        digest = key.hexdigest()
        with self._lock:
            hit = self._cache.get(digest)
            if hit is not None:
                self._hits += 1
                self._cache.move_to_end(digest)
                return hit
        core = _core.compile(self.vocab._core, program, names, self._core_limits, current_interrupt())
        compiled = CompiledGrammar(core, grammar, self.vocab, self.limits)
        with self._lock:
            self._misses += 1
            # Another thread may have compiled the same grammar meanwhile: keep one object.
            compiled = self._cache.setdefault(digest, compiled)
            self._evict_locked()
        return compiled

    def _evict_locked(self) -> None:
        """Drops least recently used grammars until the cache is within both bounds. Sizes are
        measured now: cached grammars grow as their matchers memoize configurations and masks."""
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
            self._evictions += 1
        sizes = [g.memory_bytes for g in self._cache.values()]
        total = sum(sizes)
        for size in sizes:
            if total <= self._cache_bytes:
                break
            self._cache.popitem(last=False)
            self._evictions += 1
            total -= size

    def cache_info(self) -> CacheInfo:
        """Sizes and counters of the caches (thread-safe; sizes measured now)."""
        with self._lock:
            return CacheInfo(
                entries=len(self._cache),
                max_entries=self._cache_size,
                bytes=sum(g.memory_bytes for g in self._cache.values()),
                max_bytes=self._cache_bytes,
                hits=self._hits,
                misses=self._misses,
                evictions=self._evictions,
                vocabulary_bytes=self.vocab._core.shared_cache_bytes,
            )

    @property
    def cached_bytes(self) -> int:
        """Bytes the cached grammars hold now (:attr:`CompiledGrammar.memory_bytes` summed)."""
        with self._lock:
            return sum(g.memory_bytes for g in self._cache.values())

    def compile_ebnf(
        self, text: str, root: str = "root", *, timeout: float | None = None, cancel: CancelToken | None = None
    ) -> CompiledGrammar:
        """Compiles a GBNF grammar (llama.cpp's dialect); ``root`` names the start rule."""
        from .frontends.gbnf import parse_gbnf

        _check_text(text, "compile_ebnf", "grammar")
        with interrupt_scope(timeout, cancel):
            with _gc_paused():
                grammar = parse_gbnf(text, root=root, limits=self.limits, token_id=self.vocab.token_id)
            return self._compile_grammar(grammar)

    def compile_regex(
        self, pattern: str, *, timeout: float | None = None, cancel: CancelToken | None = None
    ) -> CompiledGrammar:
        """Compiles a regular expression; the whole output must match it."""
        from .frontends.regex import parse_regex

        _check_text(pattern, "compile_regex", "pattern")
        with interrupt_scope(timeout, cancel):
            with _gc_paused():
                grammar = parse_regex(pattern, limits=self.limits)
            return self._compile_grammar(grammar)

    def compile_lark(
        self, text: str, *, timeout: float | None = None, cancel: CancelToken | None = None
    ) -> CompiledGrammar:
        """Compiles a Lark grammar in llguidance's dialect (the one OpenAI custom tools and vLLM
        accept), rooted at ``start``; docs/lark.md lists what is supported."""
        from .frontends.lark import parse_lark

        _check_text(text, "compile_lark", "grammar")
        with interrupt_scope(timeout, cancel):
            with _gc_paused():
                grammar = parse_lark(text, limits=self.limits, token_id=self.vocab.token_id)
            return self._compile_grammar(grammar)

    def compile_json_schema(
        self,
        schema: dict[str, Any] | str | bool,
        *,
        timeout: float | None = None,
        cancel: CancelToken | None = None,
        **options: Any,
    ) -> CompiledGrammar:
        """Compiles a JSON Schema (a dict, a bool, or JSON text) to a grammar of JSON documents
        valid against it. Options are documented in docs/json_schema.md (whitespace policy,
        property order, ``strict``, ``lenient``)."""
        if timeout is None and cancel is None:  # what interrupt_scope does then, without its frames
            return self._compile_json_schema(schema, options)
        with interrupt_scope(timeout, cancel):
            return self._compile_json_schema(schema, options)

    def _compile_json_schema(self, schema: dict[str, Any] | str | bool, options: dict[str, Any]) -> CompiledGrammar:
        from .frontends.json_schema import schema_to_grammar

        with _gc_paused():  # one pause for the lowering and the serialization
            pointers: dict[str, str] = {}
            grammar, dropped = schema_to_grammar(
                schema, limits=self.limits, check_empty=False, pointers=pointers, **options
            )
            program, names = serialize(grammar, self.limits)
        try:
            compiled = self._compile_program(grammar, program, names)
        except GrammarError as e:
            if e.code != "empty-language":
                raise
            # Rare: lower again with the frontend's own check, which names the JSON pointer.
            schema_to_grammar(schema, limits=self.limits, **options)
            raise SchemaError(f"empty language: {e.message}", pointer="", code="schema-empty") from None
        # A wrapper of its own (the core is shared through the cache): the pointers and the
        # dropped constraints belong to this schema.
        return CompiledGrammar(compiled._core, grammar, self.vocab, self.limits, tuple(dropped), pointers)

    def compile_pydantic(
        self, model: Any, *, timeout: float | None = None, cancel: CancelToken | None = None, **options: Any
    ) -> CompiledGrammar:
        """Compiles a Pydantic v2 model class through its JSON Schema, narrowed where Pydantic's
        validation is stricter than the schema it prints (datetimes, durations, decimals, UUID
        versions, IP formats: see :mod:`logitgate.frontends.pydantic`). Options as for
        :meth:`compile_json_schema` (whose default is not ``strict``; :func:`~logitgate.generate`
        compiles Pydantic models ``strict``)."""
        from .frontends.pydantic import pydantic_schema

        return self.compile_json_schema(pydantic_schema(model), timeout=timeout, cancel=cancel, **options)

    def compile_structural_tag(
        self, spec: dict[str, Any] | str, *, timeout: float | None = None, cancel: CancelToken | None = None
    ) -> CompiledGrammar:
        """Compiles a structural tag in XGrammar's format (a dict or its JSON text): free text
        with constrained spans, tool calls, reasoning sections, special-token delimiters (see
        docs/structural_tags.md). What cannot be compiled raises
        :class:`~logitgate.StructuralTagError` naming its path inside the tag."""
        from .frontends.json_schema import schema_to_grammar
        from .frontends.structural_tag import lower_structural_tag

        def json_schema(schema: Any, path: str, options: dict[str, Any]) -> Grammar:
            try:
                # (An empty schema language is left to the core, as compile_json_schema does.)
                grammar, _ = schema_to_grammar(schema, limits=self.limits, check_empty=False, **options)
            except SchemaError as e:
                raise StructuralTagError(f"json_schema: {e.message}", path=path, code="structural-tag-schema") from e
            return grammar

        with interrupt_scope(timeout, cancel):
            with _gc_paused():
                grammar = lower_structural_tag(
                    spec,
                    limits=self.limits,
                    token_id=self.vocab.token_id,
                    json_schema=json_schema,
                    special_texts=self.vocab.special_texts(),
                )
            return self._compile_grammar(grammar)

    def compile_choice(
        self, choices: Sequence[str | bytes], *, timeout: float | None = None, cancel: CancelToken | None = None
    ) -> CompiledGrammar:
        """The output is exactly one of ``choices``."""
        if isinstance(choices, (str, bytes)) or not choices:
            raise GrammarError("compile_choice needs a non-empty list of strings", code="choice-empty")
        items = []
        for c in choices:
            if not isinstance(c, (str, bytes)):
                raise GrammarError(f"choices must be str or bytes, got {type(c).__name__}", code="choice-type")
            items.append(Literal(c.encode() if isinstance(c, str) else c))
        return self.compile_grammar(Grammar({"root": Alt(tuple(items))}), timeout=timeout, cancel=cancel)

    def __repr__(self) -> str:
        return f"Compiler(vocab={self.vocab!r}, cached={len(self._cache)})"
