"""Named caps of the lowering: each bounds a search or a construction the schema drives, with
the reason on its line."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from logitgate.errors import LimitExceeded


@dataclass(frozen=True)
class Cap:
    """A fixed cap the schema cannot raise, reported under its own name when hit
    (``LimitExceeded.limit`` is ``name``, ``value`` is ``value``; docs/limits.md lists them)."""

    name: str
    value: int
    reason: str

    def exceeded(self, what: str) -> LimitExceeded:
        return LimitExceeded(self.name, self.value, what)


# Caps whose excess raises LimitExceeded (the others below refuse a construct or fall back).
SCHEMA_RULES = Cap("json_schema_rules", 200_000, "distinct schema sets one document lowers to, one rule each")
DECIMAL_DIGITS = Cap("json_schema_decimal_digits", 1200, "digits of a numeric bound written out exactly")
MULTIPLE_OF_STATES = Cap(
    "json_schema_multiple_of_states", 20_000, "digit positions x modulus of a multipleOf automaton"
)
PATTERN_DEPTH = Cap(
    "json_schema_pattern_depth", 800, "nesting of a pattern's IR walked recursively (also 4 x max_nesting)"
)
CAPS = (SCHEMA_RULES, DECIMAL_DIGITS, MULTIPLE_OF_STATES, PATTERN_DEPTH)
_DIGITS_BOUND = 10**DECIMAL_DIGITS.value  # the smallest integer with more digits than DECIMAL_DIGITS

# Caps that refuse a construct (UnsupportedSchemaError) or fall back to another construction.
# Branches of one schema set's distributed disjunctions (more: "anyOf" unsupported), and sets in
# one string-only set's tree (more: the set is distributed instead).
_MAX_BRANCHES = 256
_STRING_TREE_DEPTH = 32  # nested disjunctions a string-only set's tree follows (deeper: distributed)
# Members per block of an ordered object's key alternatives (see MemberPositions.object_in_order).
_OBJECT_KEY_BLOCK = 8
# Bounded repetitions of string characters (StringEmitter.bounded): unrolled up to _UNROLLED_MAX,
# in blocks of _BLOCK up to _BLOCKS_MAX blocks, binary decomposition beyond.
_UNROLLED_MAX = 1024
_BLOCK = 256
_BLOCKS_MAX = 4096
# The longest string length bound lowered: a minLength past it is a max_repeat LimitExceeded, a
# maxLength past it is tightened to it (sound: no longer string can be generated anyway).
_LONGEST = 1 << 31
_MAX_ORDER_ANY = 8  # property_order="any" tracks subsets of at most this many known properties


# Objects merged from up to this many parts are searched part by part for a key's atoms
# (key_atoms; indexing them costs more).
_FEW_PARTS = 4
# Enums up to this long are searched one value at a time (hashing them costs more).
_SHORT_ENUM = 8
# Values nested deeper than this have no hash key (_json_key): they are compared one by one.
_KEY_DEPTH = 32


# Bounds of a double turned into a short decimal (_short_bound): magnitude and fraction digits,
# both rounded in the tightening direction (texts beyond are rare).
_BIG = Fraction(10**30)
_FRAC_DIGITS = 40


_DERIVATIVE_TUPLES = 256  # most derivative tuples intersect_by_derivatives visits
_NFA_PRODUCT_RULES = 4000  # most (NFA states, length) rules one pattern-with-length product may build
_DFA_STATES = 2000  # subsets of a pattern's determinization, or tuples of a DFA product (more: the NFA product)
_MINIMIZE_WORK = 200_000  # predecessor entries one DFA minimization walks (more: left unminimized)
_DFA_LENGTH_RULES = 12_000  # most (DFA state, length) rules a pattern-with-length product builds (more: NFA product)
_LENGTH_PRODUCT_RULES_TOTAL = 36_000  # most rules one lowering's pattern-with-length products (DFA or NFA) build
_STAND_IN_WINDOW = 16  # code points a counted position must have to spare for its loop to stand in (fewer: no claim)
_RELAXED_SPAN = 16  # optional counts of a pattern's repetition from which its loop stands in for it (fewer: none)
_CHAINED_COUNTS = 1024  # most counts of a pattern's wide repetition lowered as a chain of rules (more: unrolled)
_NFA_STATES = 3000  # Thompson NFA states of one pattern product (more: built another way or refused)
_DISJOINT_DEPTH = 16  # oneOf disjointness re-entered through nested oneOfs (deeper: not provably disjoint)
_DISJOINT_CALLS = 5000  # oneOf disjointness questions one compile may ask (more: not provably disjoint)
# Disjointness of two branches' required keys, asked within a pair's question: nested at most
# _DISJOINT_DEPTH pairs deep, and at most this many per compile (more: not provably disjoint).
_DISJOINT_KEY_QUESTIONS = 5000
_NEGATABLE_DEPTH = 16  # sub-schemas looked into for a complement (deeper: not complementable)
_ANY_ORDER_LITERAL = 6  # const/enum objects of up to this many members accept any member order
_EXCEPT_WORD_MAX = 100  # longest listed name a patternProperties pattern is intersected without
# States of one object's property count (members x counts) or of an array's contains counts
# (counts x items x contains choices, twice this); more: the counting keyword is refused.
_COUNT_STATES = 20_000
_FIT_COPIES = 4  # copies of an unbounded-width repeated part kept when a format is fitted to maxLength
# Longest text a format is fitted to (a larger maxLength is fitted to this): fitted repetitions
# unroll, so the automaton grows linearly with the length.
_FIT_LENGTH = 2048
# Steps per rule (plus 256 rules' worth) the emptiness check's search for a derivation of the root
# takes before the exact fixpoint over every rule decides instead (rules.shows_text).
_DERIVATION_STEPS_PER_RULE = 16
