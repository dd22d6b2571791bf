"""Compiler: frontends -> IR -> core automaton, cached by content hash.

One :class:`Compiler` per vocabulary. It is thread-safe; compiling releases the GIL in the
core. Identical inputs (same IR, same limits) return the same :class:`CompiledGrammar`. With
a ``cache_dir``, automata are also kept on disk (:mod:`logitgate.disk_cache`), so that another
process, or this one after a restart, loads them instead of compiling.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import json
import os
import threading
import traceback
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import astuple, dataclass
from typing import TYPE_CHECKING, Any

from . import _core
from .cancel import CancelToken, checkpoint, current_interrupt, enable_gc_later, interrupt_scope
from .disk_cache import DEFAULT_DISK_CACHE_BYTES, ENVELOPE_VERSION, DiskCache, Entry, pack_entry, unpack_entry
from .errors import (
    CacheFileError,
    CompileCancelled,
    CompileTimeout,
    GrammarError,
    LimitExceeded,
    LogitgateError,
    SchemaError,
    StructuralTagError,
    UsageError,
    _surrogate_at,
)
from .grammar.ir import Alt, Grammar, Literal
from .grammar.program import deserialize, serialize
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
            vocabulary (alphabet masks, loop splits, class tries): bounded in count, never evicted.
        compiles: automata the core built (a miss that the disk cache did not answer).
        disk_hits: misses answered from the ``cache_dir`` without compiling; ``disk_misses``:
            misses it had no file for; ``disk_errors``: files found unusable (truncated,
            corrupt, another version: counted, removed, compiled again) or that could not be
            written.
        disk_bytes: bytes of the cache files in ``cache_dir`` now (all processes'); bounded
            by ``max_disk_bytes`` (``cache_dir_bytes``). Both 0 without a ``cache_dir``.
    """

    entries: int
    max_entries: int
    bytes: int
    max_bytes: int
    hits: int
    misses: int
    evictions: int
    vocabulary_bytes: int
    compiles: int = 0
    disk_hits: int = 0
    disk_misses: int = 0
    disk_errors: int = 0
    disk_bytes: int = 0
    max_disk_bytes: int = 0


class CompiledGrammar:
    """A grammar compiled for one vocabulary. Cheap to share; make one matcher per request.

    Attributes:
        vocab: the vocabulary masks are sized for.
    """

    def __init__(
        self,
        core: _core.CompiledGrammar,
        grammar: Grammar | None,
        vocab: Vocabulary,
        limits: Limits,
        dropped: tuple[str, ...] = (),
        rule_pointers: dict[str, str] | None = None,
        program: tuple[bytes, list[str]] | None = None,
    ) -> None:
        # Either the IR, or (a grammar loaded from the on-disk cache) the program and rule
        # names it is rebuilt from on first use.
        self._grammar = grammar
        self._program = program
        self._core = core
        self.vocab = vocab
        self.limits = limits
        #: Constraints a ``lenient=True`` JSON Schema compile dropped, one line each
        #: ("<json pointer>: <keyword>: <why>"). Empty for every exact compile.
        self.dropped = dropped
        #: For a JSON Schema: the JSON pointer of each rule that lowers a subschema (``sN`` rules),
        #: which :meth:`token_budget` uses to name what makes the output unbounded.
        self.rule_pointers = dict(rule_pointers or {})
        self._budget: _core.Budget | None = None

    @property
    def grammar(self) -> Grammar:
        """The IR that was compiled (print it with :meth:`to_ebnf`). A grammar loaded from the
        on-disk cache rebuilds it from its program on first use."""
        if self._grammar is None:
            assert self._program is not None
            self._grammar = deserialize(*self._program)
        return self._grammar

    def _with_details(self, dropped: tuple[str, ...], rule_pointers: dict[str, str]) -> CompiledGrammar:
        """This grammar (its core shared) carrying a JSON Schema's own details."""
        return CompiledGrammar(
            self._core, self._grammar, self.vocab, self.limits, dropped, rule_pointers, self._program
        )

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


def _open_disk_cache(directory: Any, max_bytes: int) -> DiskCache:
    """The Compiler's ``cache_dir``, made if missing; a typed error when it is not a path or
    cannot be a directory (a file there, no permission)."""
    if not isinstance(directory, (str, os.PathLike)):
        raise UsageError(f"Compiler cache_dir must be a path, got {directory!r}", code="compiler-cache-dir")
    try:
        return DiskCache(directory, max_bytes)
    except OSError as e:
        raise UsageError(
            f"Compiler cache_dir {os.fspath(directory)!r} cannot be used as a directory: {e.strerror or e}",
            code="compiler-cache-dir",
        ) from e


_json_text = functools.partial(json.dumps, ensure_ascii=False, separators=(",", ":"))


@functools.lru_cache(maxsize=64)
def _limits_forms(limits: Limits) -> tuple[bytes, dict[str, int]]:
    """The limits as part of a cache key, and the core's fields by name (astuple deep-copies:
    per compile it cost about as much as hashing the program). The dict is shared: not to be
    changed."""
    return repr(astuple(limits)).encode(), {name: getattr(limits, name) for name in CORE_LIMIT_FIELDS}


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
        cache_dir: str | os.PathLike[str] | None = None,
        cache_dir_bytes: int = DEFAULT_DISK_CACHE_BYTES,
    ) -> None:
        """``cache_size`` and ``cache_bytes`` bound the cache of compiled grammars: at most
        that many, holding at most that many bytes together (:attr:`CompiledGrammar.memory_bytes`,
        measured whenever a grammar is added; the least recently used go first, and a grammar
        larger than the bound alone is not kept). 0 turns the cache off. See docs/limits.md.

        ``cache_dir``: a directory (made if missing) where compiled automata are kept across
        processes, holding at most ``cache_dir_bytes`` (least recently used files go first).
        A compile that misses the cache in memory loads the grammar from there instead of
        building it. A schema, regex, grammar text or structural tag is keyed by that input,
        its options and the limits, so a hit skips the frontend as well as the core; an IR
        grammar or a choice list by its program. Processes may share the directory. See
        docs/limits.md, "The on-disk cache"."""
        for name, value in (
            ("cache_size", cache_size),
            ("cache_bytes", cache_bytes),
            ("cache_dir_bytes", cache_dir_bytes),
        ):
            if not isinstance(value, int) or value < 0:
                raise UsageError(f"Compiler {name} must be an int >= 0, got {value!r}", code="compiler-cache")
        self.vocab = vocab
        self.limits = limits or DEFAULT_LIMITS
        self._limits_key, self._core_limits = _limits_forms(self.limits)
        self._cache: OrderedDict[str, CompiledGrammar] = OrderedDict()
        self._cache_size = cache_size
        self._cache_bytes = cache_bytes
        self._lock = threading.Lock()
        self._hits = self._misses = self._evictions = 0
        self._compiles = self._disk_hits = self._disk_misses = self._disk_errors = 0
        self._disk = _open_disk_cache(cache_dir, cache_dir_bytes) if cache_dir is not None else None
        # The inputs compiled lately (spec key -> the program's digest and a JSON Schema's
        # details), so that compiling one again finds the grammar in memory without its
        # frontend (or a file).
        self._specs: OrderedDict[bytes, tuple[str, tuple[str, ...], dict[str, str]]] = OrderedDict()
        # Everything a file's name must change with besides the grammar (which the digest of
        # each compile adds): the vocabulary, this library and both file formats.
        self._disk_salt = b""
        if self._disk is not None:
            from . import __version__

            versions = f"logitgate {__version__} envelope {ENVELOPE_VERSION} image {_core.image_version}"
            self._disk_salt = vocab.fingerprint() + versions.encode()

    def warm_up(self) -> int:
        """Does ahead of time the vocabulary-level work that the first grammars with the common
        string formats (``uri``, ``email``, ``date-time``...) would pay for on their first masks,
        and that every later grammar for this vocabulary reuses (see :mod:`logitgate.warm_up`).
        For a server, at startup. Returns the number of masks filled (0, and nothing done, where
        this compiler's limits refuse the warm-up's schema); this compiler's cache is left as it
        was. Tens of milliseconds, most of them the warm-up schema's compile.

        >>> import logitgate as lg
        >>> vocab = lg.Vocabulary.from_tokens([b"a", b"1", b'"', b"{", b"}", None], eos_ids=[5])
        >>> lg.Compiler(vocab).warm_up() > 100
        True
        """
        from .warm_up import warm_up

        return warm_up(self)

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
        return self._compile_program(grammar)[0]

    def _compile_program(
        self, grammar: Grammar, by_program: bool = True
    ) -> tuple[CompiledGrammar, bytes, list[str], str]:
        """The compiled grammar (from the cache in memory, the one on disk keyed by the
        program when ``by_program``, or the core), its program, rule names and digest (the
        memory cache's key)."""
        with _gc_paused():
            program, names = serialize(grammar, self.limits)
        checkpoint()
        key = hashlib.blake2b(program + "\0".join(names).encode() + self._limits_key)
        digest = key.hexdigest()
        with self._lock:
            hit = self._cache.get(digest)
            if hit is not None:
                self._hits += 1
                self._cache.move_to_end(digest)
                return hit, program, names, digest
        disk_key = self._disk_key(b"program", digest.encode()) if self._disk is not None and by_program else None
        entry = self._read(disk_key) if disk_key is not None else None
        core = None
        if disk_key is not None and entry is not None:
            core = self._load_image(disk_key, entry, digest)
        if core is None:
            core = _core.compile(self.vocab._core, program, names, self._core_limits, current_interrupt())
            with self._lock:
                self._compiles += 1
            if disk_key is not None:
                self._write(disk_key, Entry(digest, names, program, core.save_image()))
        return self._keep(digest, CompiledGrammar(core, grammar, self.vocab, self.limits)), program, names, digest

    def _keep(self, digest: str, compiled: CompiledGrammar) -> CompiledGrammar:
        """Adds a grammar the cache missed; returns the one kept (another thread may have
        compiled the same meanwhile: one object)."""
        with self._lock:
            self._misses += 1
            compiled = self._cache.setdefault(digest, compiled)
            self._evict_locked()
        return compiled

    # -- the on-disk cache ----------------------------------------------------------------------
    def _disk_key(self, kind: bytes, text: bytes) -> bytes:
        return hashlib.blake2b(
            kind + b"\0" + text + b"\0" + self._limits_key + self._disk_salt, digest_size=32
        ).digest()

    def _spec_key(self, kind: str, spec: object, options: dict[str, Any]) -> bytes | None:
        """The key of a compile of ``spec`` (text or JSON) with ``options``: in memory (a
        compile of the same input finds its grammar without running the frontend) and, with a
        ``cache_dir``, on disk. None for an input that is not plain JSON (such compiles are
        keyed by their program only). Property order is kept: it is part of what a schema
        means here. The key's text is ``json.dumps([kind, spec, options])`` for JSON data (the
        round trip tells it plain); text input is taken as it is, after ``[kind, options]`` and
        a NUL (which JSON text never holds raw, so the two forms never meet)."""
        try:
            opts = _json_text(options) if options else "{}"
            if options and json.loads(opts) != options:
                return None
            if isinstance(spec, str):
                text = f'["{kind}",{opts}]\0{spec}'
            else:
                body = _json_text(spec)
                # Tuples, non-str keys, NaN: not plain (``kind`` is one of this module's names).
                if json.loads(body) != spec:
                    return None
                text = f'["{kind}",{body},{opts}]'
        except (TypeError, ValueError, RecursionError):
            return None
        return self._disk_key(b"spec", text.encode("utf-8", "surrogatepass"))

    def _find_spec(self, key: bytes | None) -> tuple[CompiledGrammar, tuple[str, ...], dict[str, str]] | None:
        """The grammar compiled for a spec key before (in memory, else on disk), with its
        JSON Schema details; None when neither has it."""
        if key is None:
            return None
        with self._lock:
            known = self._specs.get(key)
            hit = self._cache.get(known[0]) if known is not None else None
            if known is not None and hit is not None:
                self._hits += 1
                self._cache.move_to_end(known[0])
                self._specs.move_to_end(key)
                return hit, known[1], known[2]
        if self._disk is None:
            return None
        entry = self._read(key)
        if entry is None:
            return None
        with self._lock:
            hit = self._cache.get(entry.digest)
            if hit is not None:
                self._hits += 1
                self._cache.move_to_end(entry.digest)
        if hit is None:
            core = self._load_image(key, entry)
            if core is None:
                return None
            loaded = CompiledGrammar(core, None, self.vocab, self.limits, program=(entry.program, entry.names))
            hit = self._keep(entry.digest, loaded)
        self._remember(key, entry.digest, entry.dropped, entry.pointers)
        return hit, entry.dropped, entry.pointers

    def _store_spec(
        self,
        key: bytes | None,
        compiled: tuple[CompiledGrammar, bytes, list[str], str],
        dropped: tuple[str, ...] = (),
        pointers: dict[str, str] | None = None,
    ) -> None:
        if key is None:
            return
        grammar, program, names, digest = compiled
        pointers = pointers or {}
        if self._disk is not None:
            self._write(key, Entry(digest, names, program, grammar._core.save_image(), dropped, pointers))
        self._remember(key, digest, dropped, pointers)

    def _remember(self, key: bytes, digest: str, dropped: tuple[str, ...], pointers: dict[str, str]) -> None:
        with self._lock:
            self._specs[key] = (digest, dropped, pointers)
            self._specs.move_to_end(key)
            # Worth keeping only while the cache holds the grammar: bounded by its entries.
            while len(self._specs) > 2 * len(self._cache) + 16:
                self._specs.popitem(last=False)

    def _read(self, key: bytes) -> Entry | None:
        """The entry stored under ``key`` (counted as a disk hit later, by _load_image), or
        None: no file (a disk miss) or an unusable one (an error, the file removed)."""
        assert self._disk is not None
        try:
            blob = self._disk.load(key)
            entry = None if blob is None else unpack_entry(blob)
        except (LogitgateError, OSError):
            self._disk.remove(key)
            with self._lock:
                self._disk_errors += 1
            return None
        if entry is None:
            with self._lock:
                self._disk_misses += 1
        return entry

    def _load_image(self, key: bytes, entry: Entry, digest: str | None = None) -> _core.CompiledGrammar | None:
        """The core grammar of an entry's image, or None (counted as an error, the file
        removed) when the image cannot be loaded, or is not of the program ``digest``."""
        assert self._disk is not None
        try:
            if digest is not None and entry.digest != digest:
                raise CacheFileError("cache entry of another program", code="cache-key")
            core = _core.load_grammar(self.vocab._core, entry.image, self._core_limits)
        except LogitgateError:
            # CacheFileError, or (for an image the checks pass but the grammar's own do not)
            # the typed error that found it: either way a miss.
            self._disk.remove(key)
            with self._lock:
                self._disk_errors += 1
            return None
        with self._lock:
            self._disk_hits += 1
        return core

    def _write(self, key: bytes, entry: Entry) -> None:
        """Stores an entry; a failed write costs the compile nothing (counted as an error)."""
        assert self._disk is not None
        try:
            self._disk.store(key, pack_entry(entry))
        except OSError:
            with self._lock:
                self._disk_errors += 1

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
        """Sizes and counters of the caches (thread-safe; sizes measured now, the cache
        directory's by listing it)."""
        disk_bytes = self._disk.size_bytes() if self._disk is not None else 0
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
                compiles=self._compiles,
                disk_hits=self._disk_hits,
                disk_misses=self._disk_misses,
                disk_errors=self._disk_errors,
                disk_bytes=disk_bytes,
                max_disk_bytes=self._disk.max_bytes if self._disk is not None else 0,
            )

    @property
    def cached_bytes(self) -> int:
        """Bytes the cached grammars hold now (:attr:`CompiledGrammar.memory_bytes` summed)."""
        with self._lock:
            return sum(g.memory_bytes for g in self._cache.values())

    def _compile_text(
        self, kind: str, spec: object, options: dict[str, Any], lower: Callable[[], Grammar]
    ) -> CompiledGrammar:
        """Compiles an input through the on-disk cache keyed by the input (see _spec_key):
        ``lower`` runs the frontend only when neither cache has it."""
        key = self._spec_key(kind, spec, options)
        found = self._find_spec(key)
        if found is not None:
            return found[0]
        with _gc_paused():
            grammar = lower()
        compiled = self._compile_program(grammar, by_program=key is None)
        self._store_spec(key, compiled)
        return compiled[0]

    def compile_ebnf(
        self, text: str, root: str = "root", *, timeout: float | None = None, cancel: CancelToken | None = None
    ) -> CompiledGrammar:
        """Compiles a GBNF grammar (llama.cpp's dialect); ``root`` names the start rule."""
        from .frontends.gbnf import parse_gbnf

        _check_text(text, "compile_ebnf", "grammar")
        with interrupt_scope(timeout, cancel):
            return self._compile_text(
                "ebnf",
                text,
                {"root": root},
                lambda: parse_gbnf(text, root=root, limits=self.limits, token_id=self.vocab.token_id),
            )

    def compile_regex(
        self, pattern: str, *, timeout: float | None = None, cancel: CancelToken | None = None
    ) -> CompiledGrammar:
        """Compiles a regular expression; the whole output must match it."""
        from .frontends.regex import parse_regex

        _check_text(pattern, "compile_regex", "pattern")
        with interrupt_scope(timeout, cancel):
            return self._compile_text("regex", pattern, {}, lambda: parse_regex(pattern, limits=self.limits))

    def compile_lark(
        self, text: str, *, timeout: float | None = None, cancel: CancelToken | None = None
    ) -> CompiledGrammar:
        """Compiles a Lark grammar in llguidance's dialect (the one OpenAI custom tools and vLLM
        accept), rooted at ``start``; docs/lark.md lists what is supported."""
        from .frontends.lark import parse_lark

        _check_text(text, "compile_lark", "grammar")
        with interrupt_scope(timeout, cancel):
            return self._compile_text(
                "lark", text, {}, lambda: parse_lark(text, limits=self.limits, token_id=self.vocab.token_id)
            )

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
        from .frontends.json_schema import schema_to_grammar

        with interrupt_scope(timeout, cancel):
            key = self._spec_key("json_schema", schema, options)
            found = self._find_spec(key)
            if found is not None:
                return found[0]._with_details(found[1], found[2])
            with _gc_paused():
                pointers: dict[str, str] = {}
                grammar, dropped = schema_to_grammar(
                    schema, limits=self.limits, check_empty=False, pointers=pointers, **options
                )
            compiled = self._finish_json_schema(schema, grammar, options, by_program=key is None)
            self._store_spec(key, compiled, tuple(dropped), pointers)
            return compiled[0]._with_details(tuple(dropped), pointers)

    def _finish_json_schema(
        self,
        schema: dict[str, Any] | str | bool,
        grammar: Grammar,
        options: dict[str, Any],
        by_program: bool,
    ) -> tuple[CompiledGrammar, bytes, list[str], str]:
        try:
            return self._compile_program(grammar, by_program)
        except GrammarError as e:
            if e.code != "empty-language":
                raise
            # Rare: lower again with the frontend's own check, which names the JSON pointer.
            from .frontends.json_schema import schema_to_grammar

            schema_to_grammar(schema, limits=self.limits, **options)
            raise SchemaError(f"empty language: {e.message}", pointer="", code="schema-empty") from None

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
        from .frontends.json_schema import schema_to_grammar, schemas_to_grammar
        from .frontends.structural_tag import lower_structural_tag

        def json_schema(schema: Any, path: str, options: dict[str, Any]) -> Grammar:
            try:
                # (An empty schema language is left to the core, as compile_json_schema does.)
                grammar, _ = schema_to_grammar(schema, limits=self.limits, check_empty=False, **options)
            except SchemaError as e:
                raise StructuralTagError(f"json_schema: {e.message}", path=path, code="structural-tag-schema") from e
            except CompileTimeout:
                raise
            except LimitExceeded as e:  # (its pointer is the schema's own: the path says which schema)
                raise StructuralTagError(f"json_schema: {e.message}", path=path, code="structural-tag-limit") from e
            return grammar

        def json_schemas(schemas: list[Any], options: dict[str, Any]) -> tuple[Grammar, list[str | None]] | None:
            try:
                return schemas_to_grammar(schemas, limits=self.limits, **options)
            except (CompileCancelled, CompileTimeout):
                raise
            except (LogitgateError, ValueError, TypeError, AttributeError):
                return None  # lowered one by one, for the error of the schema at fault

        def lower() -> Grammar:
            return lower_structural_tag(
                spec,
                limits=self.limits,
                token_id=self.vocab.token_id,
                json_schema=json_schema,
                special_texts=self.vocab.special_texts(),
                json_schemas=json_schemas,
                vocab_size=self.vocab.size,
            )

        with interrupt_scope(timeout, cancel):
            return self._compile_text("structural_tag", spec, {}, lower)

    def compile_choice(
        self, choices: Sequence[str | bytes], *, timeout: float | None = None, cancel: CancelToken | None = None
    ) -> CompiledGrammar:
        """The output is exactly one of ``choices``."""
        if isinstance(choices, (str, bytes)) or not choices:
            raise GrammarError("compile_choice needs a non-empty list of strings", code="choice-empty")
        items = []
        for i, c in enumerate(choices):
            if not isinstance(c, (str, bytes)):
                raise GrammarError(f"choices must be str or bytes, got {type(c).__name__}", code="choice-type")
            if isinstance(c, str) and (at := _surrogate_at(c)) >= 0:
                raise GrammarError(
                    f"choices[{i}] holds a lone surrogate ({c[at]!r} at index {at}), which no UTF-8 text holds",
                    code="choice-surrogate",
                )
            items.append(Literal(c.encode() if isinstance(c, str) else c))
        return self.compile_grammar(Grammar({"root": Alt(tuple(items))}), timeout=timeout, cancel=cancel)

    def __repr__(self) -> str:
        return f"Compiler(vocab={self.vocab!r}, cached={len(self._cache)})"
