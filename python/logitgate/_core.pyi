"""Type stub of the C++ extension (cpp/bindings/module.cc). Calls marked "GIL released" run
without the GIL and may take milliseconds; the rest take nanoseconds to microseconds."""

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

class Vocabulary:
    @property
    def width(self) -> int: ...
    @property
    def mask_words(self) -> int: ...
    @property
    def eos_ids(self) -> list[int]: ...
    @property
    def trie_size(self) -> int: ...
    @property
    def shared_cache_bytes(self) -> int:
        """Bytes of the masks computed on first use and shared by every grammar of this vocabulary
        (alphabet masks, loop splits; bounded in count)."""
    def is_text(self, arg: int, /) -> bool: ...

def make_vocabulary(
    tokens: Sequence[bytes | None], special_ids: Sequence[int], eos_ids: Sequence[int], width: int
) -> Vocabulary:
    """Builds a vocabulary and its token trie (GIL released)."""

class CompiledGrammar:
    @property
    def num_states(self) -> int: ...
    @property
    def num_configurations(self) -> int: ...
    @property
    def num_byte_classes(self) -> int: ...
    @property
    def num_transitions(self) -> int: ...
    @property
    def class_trie_nodes(self) -> int:
        """Nodes of the class trie the grammar's mask walks take (tokens by their string of the
        automaton's coarse byte classes), 0 when it has none."""
    @property
    def character_chains(self) -> int:
        """Classes reading only some characters of a lead byte whose chains the grammar's mask
        walks decide from the vocabulary's character split (tokens by their count of the
        class's characters), 0 for most grammars."""
    @property
    def memory_bytes(self) -> int:
        """Bytes the grammar holds: its automaton, and the parser state matchers built
        (configurations, transitions, memoized masks), which grows as they are used. The
        vocabulary is not counted."""
    def save_image(self) -> bytes:
        """The automaton as bytes, for load_grammar (the on-disk cache); GIL released while
        writing."""

class CancelFlag:
    """A flag any thread may set once; compiles holding it stop."""
    def __init__(self) -> None: ...
    def cancel(self) -> None:
        """Set the flag (thread-safe, idempotent)."""
    @property
    def cancelled(self) -> bool: ...

class Interrupt:
    """One compile's cancel flag and deadline (counted from construction)."""
    def __init__(self, cancel: CancelFlag | None, timeout_s: float) -> None: ...
    def check(self) -> None:
        """Raise CompileCancelled or CompileTimeout when the flag is set or the deadline passed."""
    @property
    def timeout_s(self) -> float: ...

def serialize_ir(
    types: tuple[type, ...],
    nodes: list[object],
    names: list[str],
    root: int,
    max_nesting: int,
    max_repeat: int,
    interrupt: Interrupt | None = None,
) -> bytes:
    """The program of an IR grammar (native int32s as bytes; see grammar/program.py)."""

def compile(
    vocab: Vocabulary,
    program: bytes,
    rule_names: Sequence[str],
    limits: Mapping[str, int],
    interrupt: Interrupt | None = None,
) -> CompiledGrammar:
    """Compiles a grammar program into an automaton (GIL released)."""

def pending_discards() -> int:
    """Interrupted compiles whose memory a background thread is still freeing (tests wait
    for 0)."""

image_version: int
"""The layout version of automaton images (save_image, load_grammar)."""

def load_grammar(vocab: Vocabulary, image: bytes, limits: Mapping[str, int]) -> CompiledGrammar:
    """A compiled grammar from an automaton image (CompiledGrammar.save_image) saved under
    the same limits, without compiling (GIL released). A truncated, foreign or inconsistent
    image raises CacheFileError."""

class Matcher:
    def __init__(self, grammar: CompiledGrammar) -> None: ...
    def fill_mask(self, bits: object, row: int = 0) -> None:
        """Writes the allowed-token bitmask into row `row` of `bits`, an int32 [batch, words]
        C-contiguous writable CPU array (GIL released unless it is a copy); any other buffer
        raises UsageError naming what is wrong."""
    def accept(self, token_id: int) -> bool: ...
    def accept_bytes(self, data: bytes) -> bool: ...
    def is_complete(self) -> bool: ...
    def is_terminated(self) -> bool: ...
    def rollback(self, n: int) -> None: ...
    def reset(self) -> None: ...
    def forced_bytes(self, max_bytes: int = 4096) -> bytes: ...
    def fork(self) -> Matcher: ...
    @property
    def num_accepted(self) -> int: ...
    @property
    def last_walk_nodes(self) -> int: ...

def fill_masks(matchers: Sequence[Matcher], bits: object, threads: int) -> None:
    """Fills row i for matchers[i] on a persistent thread pool (GIL released); `bits` as for
    Matcher.fill_mask."""

def apply_mask(logits: object, bits: object, indices: Sequence[int] | None = None) -> int:
    """Sets the logits the mask forbids to -inf in place (float32/float16/bfloat16 [width] or
    [batch, width], any DLPack or buffer-protocol array; GIL released); `indices` picks the
    rows. Returns how many columns the mask allows, or -1 for logits off the CPU (checked,
    not touched: the caller masks them on their device)."""

def _set_split_walk_budget(nodes: int) -> int:
    """Test hook: trie nodes a mask walk visits before it computes a loop split (process-wide);
    returns the previous value."""

def _set_region_walks(enabled: bool) -> bool:
    """Test hook: whether mask walks may decide a closed region's tokens from its split
    (process-wide); returns the previous value."""

def _set_stand_ins(enabled: bool) -> bool:
    """Test hook: whether masks may be taken from a configuration's stand-in (process-wide);
    returns the previous value."""

def _set_class_trie_min_states(states: int) -> int:
    """Test hook: automaton states a grammar needs for a class trie (0: every grammar with coarse
    classes gets one, of any size); process-wide, read at compile time; returns the previous value."""

class Budget:
    """Shortest completions and budget-cut masks of one compiled grammar; thread-safe."""

    UNREACHABLE: int
    REJECTED: int
    ACCEPTED: int
    NO_ROOM: int
    def __init__(self, grammar: CompiledGrammar) -> None: ...
    def cost(self, matcher: Matcher) -> tuple[int, int]:
        """(bytes, tokens) of the shortest completion; tokens counts an EOS where one is needed."""
    def shortest_completion(self, matcher: Matcher) -> bytes: ...
    def completion_tokens(self, matcher: Matcher) -> list[int]: ...
    def exact_from(self, matcher: Matcher, longest_token: int) -> int: ...
    def token_fits(self, matcher: Matcher, token: int, remaining: int) -> bool: ...
    def accept_within(self, matcher: Matcher, token: int, remaining: int) -> int:
        """Accepts `token` when it leaves room to finish: ACCEPTED, else REJECTED or NO_ROOM."""
    def restrict_mask(self, matcher: Matcher, row: npt.NDArray[np.int32], remaining: int) -> int:
        """Clears the tokens after which the output cannot finish within `remaining` tokens."""
    @property
    def bytes_are_tokens(self) -> bool: ...
    @property
    def growth_per_byte(self) -> int: ...
