"""Emission of numbers: integer ranges, ``multipleOf``, decimal intervals."""

from __future__ import annotations

import functools
import math
from fractions import Fraction

from logitgate.cancel import checkpoint
from logitgate.errors import _int_text
from logitgate.grammar.ir import (
    EMPTY,
    CharClass,
    Literal,
    Node,
    Ref,
    Repeat,
)
from logitgate.grammar.json_text import EMPTY_LANG as _EMPTY_LANG
from logitgate.grammar.json_text import alt as _alt
from logitgate.grammar.json_text import dec_class as _dec_class
from logitgate.grammar.json_text import digits_node as _digits_node
from logitgate.grammar.json_text import is_empty_language as _is_empty
from logitgate.grammar.json_text import opt as _opt
from logitgate.grammar.json_text import seq as _seq
from logitgate.grammar.json_text import split_fixed as _split_fixed
from logitgate.limits import Limits

from .caps import _BIG, _DIGITS_BOUND, _FRAC_DIGITS, DECIMAL_DIGITS, MULTIPLE_OF_STATES
from .diagnostics import Diagnostics
from .facts import _Facts
from .rules import RuleTable
from .values import _fraction, _json_type


def _short_bound(x: float, up: bool) -> Fraction:
    """A short decimal bound at least as tight as the double ``x`` (up: a lower bound, rounded
    up; else an upper bound, rounded down). Starts from repr(x) -- the shortest decimal that
    parses back to x, so comparing parsed doubles agrees -- then caps magnitude at 1e30 and the
    fraction at 40 digits, both in the tightening direction (sound; texts beyond are rare).
    ``x`` is finite: callers treat a bound stepped past the largest double as an empty side."""
    r = Fraction(repr(x))
    if up:
        r = max(r, -_BIG)
        scaled = r * 10**_FRAC_DIGITS
        return Fraction(-((-scaled.numerator) // scaled.denominator), 10**_FRAC_DIGITS)
    r = min(r, _BIG)
    scaled = r * 10**_FRAC_DIGITS
    return Fraction(scaled.numerator // scaled.denominator, 10**_FRAC_DIGITS)


def _dec_parts(v: Fraction) -> tuple[int, str]:
    """Integer part and fraction digits of a non-negative finite decimal (binary fractions are)."""
    ip = v.numerator // v.denominator
    rem = v - ip
    out: list[str] = []
    while rem:
        rem *= 10
        d = rem.numerator // rem.denominator
        out.append(str(d))
        rem -= d
        if len(out) > DECIMAL_DIGITS.value:
            raise DECIMAL_DIGITS.exceeded("bound with too many decimal digits")
    return ip, "".join(out)


def _nonneg_range(a: int, b: int | None) -> Node:
    """Decimal naturals in [a, b] (b=None: unbounded), no leading zeros."""
    alts: list[Node] = []
    width = 1
    while True:
        checkpoint()  # bounds as wide as 1e308: hundreds of widths, each a digit-by-digit split
        wlo = 0 if width == 1 else 10 ** (width - 1)
        whi = 10**width - 1
        if b is not None and wlo > b:
            break
        if b is None and wlo > a and width > 1:
            alts.append(_seq([CharClass(((0x31, 0x39),)), Repeat(CharClass(((0x30, 0x39),)), width - 1, None)]))
            break
        lo, hi = max(a, wlo), whi if b is None else min(b, whi)
        if lo <= hi:
            alts.append(_digits_node(_split_fixed(lo, hi, width, 10), 10, _dec_class))
        width += 1
    return _alt(alts)


def _int_range(lo: int | None, hi: int | None) -> Node:
    """JSON integers in [lo, hi] (None: open), canonical form (no "-0"). Ranges with bounds of
    up to 18 digits (the ones that recur across schemas: open, from 0, from 1) are built once
    per process and shared (the node is immutable); a longer bound's node, which grows with the
    square of its digits, is not kept."""
    if all(b is None or abs(b) < _SHARED_BOUND for b in (lo, hi)):
        return _shared_int_range(lo, hi)
    return _build_int_range(lo, hi)


_SHARED_BOUND = 10**18


@functools.lru_cache(maxsize=1024)
def _shared_int_range(lo: int | None, hi: int | None) -> Node:
    return _build_int_range(lo, hi)


def _build_int_range(lo: int | None, hi: int | None) -> Node:
    if any(b is not None and abs(b) >= _DIGITS_BOUND for b in (lo, hi)):
        raise DECIMAL_DIGITS.exceeded("integer bound with too many decimal digits")
    alts: list[Node] = []
    if hi is None or hi >= 0:
        alts.append(_nonneg_range(max(lo, 0) if lo is not None else 0, hi))
    if lo is None or lo < 0:
        mag_lo = max(1, -hi) if hi is not None else 1
        mag_hi = -lo if lo is not None else None
        if mag_hi is None or mag_lo <= mag_hi:
            alts.append(_seq([Literal(b"-"), _nonneg_range(mag_lo, mag_hi)]))
    return _alt(alts) if alts else _EMPTY_LANG


class NumberEmitter:
    """Number rules from facts."""

    def __init__(self, table: RuleTable, diag: Diagnostics, limits: Limits, integer_fraction_ok: bool) -> None:
        self.table = table
        self.diag = diag
        self.limits = limits
        # Draft-04 (and 03) count only integer literals as "integer" (9.0 is a number there);
        # from draft-06 on, any number with a zero fraction is an integer.
        self.integer_fraction_ok = integer_fraction_ok

    def emit_number(self, f: _Facts) -> Node:
        integer_only = "fraction" not in f.types
        if "integer" not in f.types:
            return self.fraction_only(f)
        mult = [m for m, _ in f.multiple]
        if mult and not all(m.denominator == 1 for m in mult):
            nonint = [(m, p) for m, p in f.multiple if m.denominator != 1]
            if integer_only and all((1 / m).denominator == 1 for m, _ in nonint):
                mult = [m for m in mult if m.denominator == 1]  # 1/k integral: every integer is a multiple
            else:
                self.diag.unsupported(
                    "multipleOf", "non-integral multipleOf (float semantics) is not lowered", nonint[0][1]
                )
                mult = [m for m in mult if m.denominator == 1]
        if mult:
            integer_only = True
        modulus = 1
        for m in mult:
            modulus = modulus * int(m) // math.gcd(modulus, int(m))
        excluded = [_fraction(v) for v in f.not_enum if _json_type(v) in ("integer", "fraction")]
        if integer_only:
            lo = (
                None
                if f.lo is None
                else (math.floor(f.lo) + 1 if f.lo_excl and f.lo.denominator == 1 else math.ceil(f.lo))
            )
            hi = (
                None
                if f.hi is None
                else (math.ceil(f.hi) - 1 if f.hi_excl and f.hi.denominator == 1 else math.floor(f.hi))
            )
            if lo is not None and hi is not None and lo > hi:
                self.diag.contradiction(f, "", "integer bounds leave no value")
                return _EMPTY_LANG
            # Beyond 1e30 the digit-range grammar would only grow; clamping tightens (sound). A
            # range wholly beyond 1e30 is kept as it is (clamping would empty it).
            if hi is not None and hi > 10**30 and (lo is None or lo <= 10**30):
                hi = 10**30
            if lo is not None and lo < -(10**30) and (hi is None or hi >= -(10**30)):
                lo = -(10**30)
            return self.int_node(lo, hi, modulus, excluded, plain=f.lo is None and f.hi is None and not mult)
        return self.number_node(f, excluded)

    def fraction_only(self, f: _Facts) -> Node:
        """Non-integral numbers (``not: {type: integer}``): a non-zero fraction digit, no exponent, at
        most 15 significant digits (so the text cannot round to an integral double)."""
        if f.lo is not None or f.hi is not None or f.multiple or f.not_enum:
            self.diag.unsupported("not", "non-integral numbers with bounds are not lowered", "")
            return _EMPTY_LANG

        def build() -> Node:
            digits = CharClass(((0x30, 0x39),))
            nz = CharClass(((0x31, 0x39),))
            alts: list[Node] = [_seq([Literal(b"0."), Repeat(digits, 0, 14), nz])]
            for k in range(1, 15):  # k integer digits, at most 15 - k fraction digits
                alts.append(_seq([nz, Repeat(digits, k - 1, k - 1), Literal(b"."), Repeat(digits, 0, 14 - k), nz]))
            return _seq([_opt(Literal(b"-")), _alt(alts)])

        return self.table.rule("fraction", build)

    def int_node(self, lo: int | None, hi: int | None, modulus: int, excluded: list[Fraction], plain: bool) -> Node:
        excl = sorted({int(x) for x in excluded if x.denominator == 1})
        if modulus == 1:

            def ranges() -> Node:
                pieces: list[Node] = []
                cur = lo
                for x in excl:
                    if (cur is None or x >= cur) and (hi is None or x <= hi):
                        if cur is None or cur <= x - 1:
                            pieces.append(_int_range(cur, x - 1))
                        cur = x + 1
                if cur is None or hi is None or cur <= hi:
                    pieces.append(_int_range(cur, hi))
                if (lo is None or lo <= 0) and (hi is None or hi >= 0) and 0 not in excl:
                    pieces.append(Literal(b"-0"))  # zero's other spelling (_int_range has one)
                return _alt(p for p in pieces if not _is_empty(p)) if pieces else _EMPTY_LANG

            if plain and not excl and self.integer_fraction_ok:
                # One rule, built on first use, for every plain integer of the schema.
                return self.table.rule(
                    "integer", lambda: _seq([ranges(), _opt(_seq([Literal(b"."), Repeat(Literal(b"0"), 1, None)]))])
                )
            return ranges()
        if lo is not None and hi is not None:
            first = -(-lo // modulus) * modulus
            count = max(0, (hi - first) // modulus + 1)  # not len(range): may exceed ssize_t
            if count > 4096:
                self.diag.unsupported("multipleOf", f"{count} multiples in range (max 4096)", "")
                return _int_range(lo, hi)
            values = range(first, hi + 1, modulus)
            xs = {int(x) for x in excluded if x.denominator == 1}  # a fraction excludes no integer
            spelled = [str(v) for v in values if v not in xs] + (["-0"] if 0 in values and 0 not in xs else [])
            return _alt(Literal(s.encode()) for s in spelled) if spelled else _EMPTY_LANG
        if excl or modulus > 1000:
            self.diag.unsupported("multipleOf", "open-ended multipleOf over 1000 or with exclusions", "")
            return _int_range(lo, hi)
        # Open range: finite part enumerated, the rest by a remainder automaton on the digits.
        return self.mod_int(lo, hi, modulus)

    def mod_int(self, lo: int | None, hi: int | None, k: int) -> Node:
        """Multiples of ``k`` in a one- or zero-sided range. Magnitudes with more digits than the
        finite bound are matched by a remainder automaton (rule per remainder), the rest listed."""
        name = f"mod{k}"
        if f"{name}_0" not in self.table.rules:
            digit = [Literal(str(i).encode()) for i in range(10)]
            for r in range(k):
                trans: list[Node] = [EMPTY] if r == 0 else []
                trans += [_seq([digit[d], Ref(f"{name}_{(r * 10 + d) % k}")]) for d in range(10)]
                self.table.rules[f"{name}_{r}"] = _alt(trans)

        def mags(a: int, b: int | None) -> Node:  # magnitudes in [a, b] that are multiples of k
            if b is not None:
                first = -(-a // k) * k
                if (b - first) // k + 1 > 4096:
                    self.diag.unsupported("multipleOf", "too many multiples in range", "")
                    return _nonneg_range(a, b)
                vals = range(first, b + 1, k)
                return _alt(Literal(str(v).encode()) for v in vals) if vals else _EMPTY_LANG
            width = len(str(a))
            small = mags(a, 10**width - 1) if a < 10**width else _EMPTY_LANG
            # numbers with > width digits: first digit 1-9, then the automaton from its remainder
            firsts = _alt(_seq([Literal(str(d).encode()), self._mod_after(k, d, width)]) for d in range(1, 10))
            return _alt([small, firsts])

        alts: list[Node] = []
        if hi is None or hi >= 0:
            a = 0 if lo is None else max(lo, 0)
            alts.append(mags(a, hi))
        if lo is None or lo < 0:
            b = None if lo is None else -lo
            a = 1 if hi is None else max(1, -hi)
            if b is None or a <= b:
                alts.append(_seq([Literal(b"-"), mags(a, b)]))
        if (lo is None or lo <= 0) and (hi is None or hi >= 0):
            alts.append(Literal(b"-0"))
        return _alt([x for x in alts if not _is_empty(x)])

    def _mod_after(self, k: int, d: int, width: int) -> Node:
        """After a first digit ``d``: at least ``width`` more digits ending on remainder 0."""
        # Unroll `width` mandatory digits through remainder states, then the automaton rule.
        name = f"mod{k}_w{width}_r"

        def state(r: int, left: int) -> Node:
            rn = f"{name}{r}_{left}"
            if rn not in self.table.rules:
                self.table.rules[rn] = _EMPTY_LANG
                if left == 0:
                    self.table.rules[rn] = Ref(f"mod{k}_{r}")
                else:
                    self.table.rules[rn] = _alt(
                        _seq([Literal(str(x).encode()), state((r * 10 + x) % k, left - 1)]) for x in range(10)
                    )
            return Ref(rn)

        if width * k > MULTIPLE_OF_STATES.value:
            raise MULTIPLE_OF_STATES.exceeded("multipleOf automaton")
        return state(d % k, width)

    def number_node(self, f: _Facts, excluded: list[Fraction] | None = None) -> Node:
        """Any JSON number; with bounds, exact decimal intervals (no exponent notation).

        Float semantics: validators compare the parsed double. Rounding is monotonic and every bound
        is a double, so ``decimal >= L`` implies ``double >= L``; an exclusive bound B becomes the
        inclusive bound nextafter(B), and an excluded value v splits the interval at
        nextafter(v, -inf) / nextafter(v, +inf)."""
        if f.lo is None and f.hi is None and not excluded:
            return self.table.value_rule("number")

        def as_double(v: Fraction, what: str) -> float | None:
            try:
                x = float(v)
            except OverflowError:
                x = math.inf
            if not math.isfinite(x) or Fraction(x) != v:
                shown = _int_text(v.numerator) if v.denominator == 1 else str(v)  # (an int may be huge)
                self.diag.unsupported(what, f"bound {shown} is not a double; number comparison would round", "")
                return None
            return x

        lo: Fraction | None = None
        hi: Fraction | None = None
        if f.lo is not None:
            x = as_double(f.lo, "minimum")
            if x is None:
                return _EMPTY_LANG
            x = math.nextafter(x, math.inf) if f.lo_excl else x
            if math.isinf(x):  # no double lies above the largest one
                self.diag.contradiction(f, "", "number bounds leave no value")
                return _EMPTY_LANG
            lo = _short_bound(x, up=True)
        if f.hi is not None:
            x = as_double(f.hi, "maximum")
            if x is None:
                return _EMPTY_LANG
            x = math.nextafter(x, -math.inf) if f.hi_excl else x
            if math.isinf(x):
                self.diag.contradiction(f, "", "number bounds leave no value")
                return _EMPTY_LANG
            hi = _short_bound(x, up=False)
        intervals: list[tuple[Fraction | None, Fraction | None]] = [(lo, hi)]
        for v in sorted(set(excluded or [])):
            x = as_double(v, "not")
            if x is None:
                return _EMPTY_LANG
            x_below, x_above = math.nextafter(x, -math.inf), math.nextafter(x, math.inf)
            nxt: list[tuple[Fraction | None, Fraction | None]] = []
            for a, b in intervals:
                if (a is not None and v < a) or (b is not None and v > b):
                    nxt.append((a, b))
                    continue
                # Excluding the largest (or most negative) double leaves only the other side.
                if not math.isinf(x_below):
                    nxt.append((a, _short_bound(x_below, up=False)))
                if not math.isinf(x_above):
                    nxt.append((_short_bound(x_above, up=True), b))
            intervals = nxt
        alts = []
        for a, b in intervals:
            if a is not None and b is not None and a > b:
                continue
            alts.append(self._decimal_interval(a, b))
        alts = [x for x in alts if not _is_empty(x)]
        if not alts:
            self.diag.contradiction(f, "", "number bounds leave no value")
            return _EMPTY_LANG
        return _alt(alts)

    def _decimal_interval(self, lo: Fraction | None, hi: Fraction | None) -> Node:
        """Decimal texts (no exponent) whose exact value lies in [lo, hi] (None: open)."""
        alts: list[Node] = []
        if hi is None or hi >= 0:
            alts.append(self._magnitude(max(lo, Fraction(0)) if lo is not None else Fraction(0), hi))
        if lo is None or lo < 0:
            a = max(Fraction(0), -hi) if hi is not None else Fraction(0)
            b = -lo if lo is not None else None
            if b is None or a <= b:
                m = self._magnitude(a, b)
                if not _is_empty(m):
                    alts.append(_seq([Literal(b"-"), m]))
        alts = [x for x in alts if not _is_empty(x)]
        return _alt(alts) if alts else _EMPTY_LANG

    def _magnitude(self, a: Fraction, b: Fraction | None) -> Node:
        """Unsigned decimal texts ``I[.F]`` with exact value in [a, b]."""
        ai, af = _dec_parts(a)
        digits = CharClass(((0x30, 0x39),))
        frac_any = _opt(_seq([Literal(b"."), Repeat(digits, 1, None)]))

        def lit(n: int) -> Node:
            return Literal(str(n).encode())

        if b is None:
            return _alt([_seq([_nonneg_range(ai + 1, None), frac_any]), _seq([lit(ai), self._frac(af, None)])])
        bi, bf = _dec_parts(b)
        if ai == bi:
            return _seq([lit(ai), self._frac(af, bf)])
        alts = [_seq([lit(ai), self._frac(af, None)]), _seq([lit(bi), self._frac(None, bf)])]
        if ai + 1 <= bi - 1:
            alts.insert(0, _seq([_nonneg_range(ai + 1, bi - 1), frac_any]))
        return _alt(alts)

    def _frac(self, t_lo: str | None, t_hi: str | None) -> Node:
        """Optional ``.digits`` whose digit string s satisfies t_lo <= s <= t_hi, comparing as
        decimal fractions (right-padded with zeros). One rule per automaton state."""
        if len(t_lo or "") > DECIMAL_DIGITS.value or len(t_hi or "") > DECIMAL_DIGITS.value:
            raise DECIMAL_DIGITS.exceeded("bound with too many decimal digits")
        digits = CharClass(((0x30, 0x39),))
        base = f"fr{len(self.table.rules)}_"
        lo_s, hi_s = t_lo or "", t_hi or ""

        def state(j: int, tl: bool, th: bool) -> Node:
            tl = tl and j < len(lo_s)
            if not tl and not th:
                return Repeat(digits, 0, None)
            if not tl and th and j >= len(hi_s):
                return Repeat(Literal(b"0"), 0, None)
            name = f"{base}{j}_{int(tl)}_{int(th)}"
            if name in self.table.rules:
                return Ref(name)
            self.table.rules[name] = _EMPTY_LANG
            self.table.rules[name] = _alt(state_alts(j, tl, th, with_empty=True)) or _EMPTY_LANG
            return Ref(name)

        def state_alts(j: int, tl: bool, th: bool, with_empty: bool) -> list[Node]:
            tl = tl and j < len(lo_s)
            out: list[Node] = []
            if with_empty and (not tl or not lo_s[j:].strip("0")):
                out.append(EMPTY)
            dlo = int(lo_s[j]) if tl else 0
            dhi = (int(hi_s[j]) if j < len(hi_s) else 0) if th else 9
            if dlo > dhi:
                return out
            groups: dict[tuple[bool, bool], list[int]] = {}
            for d in range(dlo, dhi + 1):
                key = (tl and d == dlo, th and d == dhi)
                groups.setdefault(key, []).append(d)
            for (tl2, th2), ds in groups.items():
                cls = CharClass(((0x30 + ds[0], 0x30 + ds[-1]),)) if len(ds) > 1 else Literal(str(ds[0]).encode())
                out.append(_seq([cls, state(j + 1, tl2, th2)]))
            return out

        tl0, th0 = t_lo is not None, t_hi is not None
        if not tl0 and not th0:
            return _opt(_seq([Literal(b"."), Repeat(digits, 1, None)]))
        tl_eff = tl0 and len(lo_s) > 0
        nonempty = (
            state_alts(0, tl_eff, th0, with_empty=False)
            if (tl_eff or th0)
            else [_seq([digits, Repeat(digits, 0, None)])]
        )
        empty_ok = not lo_s.strip("0")
        parts: list[Node] = [EMPTY] if empty_ok else []
        if nonempty:
            parts.append(_seq([Literal(b"."), _alt(nonempty)]))
        return _alt(parts) if parts else _EMPTY_LANG
