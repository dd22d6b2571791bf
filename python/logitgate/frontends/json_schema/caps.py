"""Named caps of the lowering: each bounds a search or a construction the schema drives."""

from __future__ import annotations

from fractions import Fraction

_MAX_BRANCHES = 256  # disjunction product bound per schema set
_MAX_RULES = 200_000
# Members per block of an ordered object's key alternatives (see MemberPositions.object_in_order).
_OBJECT_KEY_BLOCK = 8
# Bounded repetitions of string characters (StringEmitter.bounded): unrolled up to _UNROLLED_MAX,
# in blocks of _BLOCK up to _BLOCKS_MAX blocks, binary decomposition beyond.
_UNROLLED_MAX = 1024
_BLOCK = 256
_BLOCKS_MAX = 4096
_MAX_ORDER_ANY = 8  # property_order="any" tracks subsets of at most this many known properties


# Objects merged from up to this many parts are searched part by part for a key's atoms
# (key_atoms; indexing them costs more).
_FEW_PARTS = 4
# Enums up to this long are searched one value at a time (hashing them costs more).
_SHORT_ENUM = 8
# Values nested deeper than this have no hash key (_json_key): they are compared one by one.
_KEY_DEPTH = 32


_BIG = Fraction(10**30)
_FRAC_DIGITS = 40


_DERIVATIVE_TUPLES = 256  # most derivative tuples intersect_by_derivatives visits
_NFA_PRODUCT_RULES = 4000  # most (NFA states, length) rules one pattern-with-length product may build
