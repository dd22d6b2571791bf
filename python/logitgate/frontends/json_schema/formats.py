"""The ``format`` values lowered, as regexes in the common subset of ECMA and Python
(Python's ``re`` checks enum values against them)."""

from __future__ import annotations

import functools

from logitgate.frontends.regex import regex_to_node
from logitgate.grammar.ir import Node
from logitgate.limits import Limits

from .format_dfa_tables import TABLES as _DFA_TABLES
from .pattern_dfa import Dfa, minimal_dfa
from .patterns import _Nfa, _relax_counts

_DATE_RE = (
    r"(?:[0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})-"
    r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
    r"|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29"
)
# A leap second only at 23:59:60 UTC (offset Z or +-00:00): stricter than RFC 3339 allows.
_TIME_RE = (
    r"(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?(?:[zZ]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
    r"|23:59:60(?:\.[0-9]+)?(?:[zZ]|[+-]00:00))"
)
_DEC_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
_IPV4_RE = rf"{_DEC_OCTET}(?:\.{_DEC_OCTET}){{3}}"
_H16 = r"[0-9a-fA-F]{1,4}"
_LS32 = rf"(?:{_H16}:{_H16}|{_IPV4_RE})"
_IPV6_RE = (
    rf"(?:(?:{_H16}:){{6}}{_LS32}|::(?:{_H16}:){{5}}{_LS32}|(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}"
    rf"|(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}|(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}"
    rf"|(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}|(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}"
    rf"|(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}|(?:(?:{_H16}:){{0,6}}{_H16})?::)"
)
# Labels never carry "--" at positions 3-4 (IDNA A-labels "xn--" are rejected, not checked).
_AN = "[A-Za-z0-9]"
_LDH = "[A-Za-z0-9-]"
_LABEL63 = rf"(?:{_AN}(?:{_LDH}?{_AN})?|{_AN}{_LDH}{{2}}{_AN}|{_AN}{_LDH}(?:{_AN}{_LDH}|-{_AN}){_LDH}{{0,58}}{_AN})"
_LABEL30 = rf"(?:{_AN}(?:{_LDH}?{_AN})?|{_AN}{_LDH}{{2}}{_AN}|{_AN}{_LDH}(?:{_AN}{_LDH}|-{_AN}){_LDH}{{0,25}}{_AN})"
# At most 253 characters: up to 3 labels of 63, or up to 8 labels of 30 (both bounded below 253).
_HOSTNAME_RE = rf"(?:{_LABEL63}(?:\.{_LABEL63}){{0,2}}|{_LABEL30}(?:\.{_LABEL30}){{0,7}})"
_UNRESERVED = r"A-Za-z0-9\-._~"
_SUBDELIMS = r"!$&'()*+,;="
_PCT = r"%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[{_UNRESERVED}{_SUBDELIMS}:@]|{_PCT})"
_SEGMENT = rf"{_PCHAR}*"
_AUTHORITY = (
    rf"(?:(?:[{_UNRESERVED}{_SUBDELIMS}:]|{_PCT})*@)?"
    rf"(?:\[{_IPV6_RE}\]|(?:[{_UNRESERVED}{_SUBDELIMS}]|{_PCT})*)(?::[0-9]*)?"
)
_QUERY = rf"(?:{_PCHAR}|[/?])*"
_HIER = rf"(?://{_AUTHORITY}(?:/{_SEGMENT})*|/(?:{_PCHAR}+(?:/{_SEGMENT})*)?|{_PCHAR}+(?:/{_SEGMENT})*|)"
_URI_RE = rf"[A-Za-z][A-Za-z0-9+\-.]*:{_HIER}(?:\?{_QUERY})?(?:#{_QUERY})?"
_NOSCHEME = rf"(?:[{_UNRESERVED}{_SUBDELIMS}@]|{_PCT})"
_RELATIVE = (
    rf"(?://{_AUTHORITY}(?:/{_SEGMENT})*|/(?:{_PCHAR}+(?:/{_SEGMENT})*)?|{_NOSCHEME}+(?:/{_SEGMENT})*|)"
    rf"(?:\?{_QUERY})?(?:#{_QUERY})?"
)
_JSON_POINTER_RE = r"(?:/(?:[^~/]|~[01])*)*"
_FORMATS: dict[str, str] = {
    "date": _DATE_RE,
    "time": _TIME_RE,
    "date-time": rf"(?:{_DATE_RE})[tT]{_TIME_RE}",
    "duration": (
        r"P(?:(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)"
        r"(?:T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?"
        r"|T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)|[0-9]+W)"
    ),
    "email": rf"[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~-]+)*@{_HOSTNAME_RE}",
    "idn-email": rf"[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~-]+)*@{_HOSTNAME_RE}",
    "hostname": _HOSTNAME_RE,
    "ipv4": _IPV4_RE,
    "ipv6": _IPV6_RE,
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "uri": _URI_RE,
    "uri-reference": rf"(?:{_URI_RE}|{_RELATIVE})",
    "json-pointer": _JSON_POINTER_RE,
    "relative-json-pointer": rf"(?:0|[1-9][0-9]*)(?:#|{_JSON_POINTER_RE})",
}
# Formats jsonschema's FormatChecker knows but we do not lower: rejected (never silently ignored).
_UNSUPPORTED_FORMATS = frozenset({"idn-hostname", "iri", "iri-reference", "uri-template", "regex"})
# Formats lowered as their minimal DFA, one rule per state (length_rules.format_contents), rather
# than as their regex's node: the core determinizes a rule but does not minimize it, and the forms
# of an IPv6 address (in a uri's authority too) make many times the minimal DFA's states. Their
# DFAs are stored (format_dfa_tables.py, written by write_dfa_tables), since building one from
# its regex costs tens of milliseconds.
AUTOMATON_FORMATS = frozenset({"uri", "uri-reference", "ipv6"})


# Per (format, limits), the format's node: the regexes are the library's constants, so one
# lowering serves every compile of the process, as json_text.any_value_rules does. Nodes are
# immutable. Limits are part of the key: a lowering under small limits may raise.
_FORMAT_NODES: dict[tuple[str, Limits], Node] = {}


def _format_node(fmt: str, limits: Limits) -> Node:
    """The code-point node of a supported ``format`` (full-match semantics)."""
    key = (fmt, limits)
    hit = _FORMAT_NODES.get(key)
    if hit is None:
        hit, _ = regex_to_node(_FORMATS[fmt], limits)
        if len(_FORMAT_NODES) < 4 * len(_FORMATS):  # bounded: limits vary only across compilers
            _FORMAT_NODES[key] = hit
            _AUTOMATA[id(hit)] = FormatAutomata(hit, limits, fmt)
    return hit


class FormatAutomata:
    """A format node's Thompson NFA and minimal DFA, and the node with its wide counts unbounded
    (patterns._relax_counts, whose DFA a length product's stand-ins take), each built on first
    use (an exception, such as an interrupt, leaves it to the next). They are constants like the
    node, and cost far more to build (a length bound or an intersection with a pattern needs
    them: hostname's DFA takes 25 ms), so they too serve every compile of the process (all the
    formats' automata under one Limits hold about 7 MB)."""

    def __init__(self, node: Node, limits: Limits, fmt: str | None = None) -> None:
        self.node = node
        self.fmt = fmt  # the format whose node this is (None: a node derived from one)
        self._limits = limits

    @functools.cached_property
    def relaxed(self) -> Node:
        """``_relax_counts(node, limits)``: the node itself where it has no wide count, else a
        node whose automata are shared too."""
        relaxed = _relax_counts(self.node, self._limits)
        if relaxed is not self.node:
            _AUTOMATA[id(relaxed)] = FormatAutomata(relaxed, self._limits)
        return relaxed

    @functools.cached_property
    def nfa(self) -> _Nfa | None:
        """``_Nfa.build(node, limits)`` (None: too large)."""
        return _Nfa.build(self.node, self._limits)

    @functools.cached_property
    def dfa(self) -> Dfa | None:
        """The minimal DFA of the node (None: an automaton too large on the way)."""
        if self.fmt in AUTOMATON_FORMATS:
            return stored_dfa(self.fmt)
        return None if self.nfa is None else minimal_dfa([self.nfa])


# Per node of _FORMAT_NODES (which keeps it alive, so its id is not reused): its automata.
_AUTOMATA: dict[int, FormatAutomata] = {}


def format_automata(node: Node) -> FormatAutomata | None:
    """The shared automata of ``node`` where it is a format's node, else None."""
    hit = _AUTOMATA.get(id(node))
    return hit if hit is not None and hit.node is node else None


@functools.cache
def stored_dfa(fmt: str) -> Dfa:
    """The minimal DFA of ``fmt``'s regex (one of AUTOMATON_FORMATS), as format_dfa_tables.py stores it."""
    edges = []
    accepting = []
    for state in _DFA_TABLES[fmt].split(";"):
        accepting.append(state[0] == "+")
        moves = []
        for move in state[1:].split():
            ranges, target = move.split(">")
            bounds = (r.partition("-") for r in ranges.split(","))
            moves.append((tuple((int(lo, 16), int(hi or lo, 16)) for lo, _, hi in bounds), int(target)))
        edges.append(tuple(moves))
    return Dfa(tuple(edges), tuple(accepting))


def _encoded_dfa(dfa: Dfa) -> str:
    """``dfa`` as stored_dfa reads it: its states in order, ``;`` between them, each ``+``
    (accepting) or ``-`` then its moves, each its ranges (hex ``lo-hi`` or ``lo``, ``,`` between)
    ``>`` its target."""

    def hex_range(lo: int, hi: int) -> str:
        return f"{lo:x}" if lo == hi else f"{lo:x}-{hi:x}"

    states = []
    for moves, accepts in zip(dfa.edges, dfa.accepting, strict=True):
        parts = [",".join(hex_range(lo, hi) for lo, hi in ranges) + f">{t}" for ranges, t in moves]
        states.append(("+" if accepts else "-") + " ".join(parts))
    return ";".join(states)


def dfa_tables_source() -> str:
    """The text of format_dfa_tables.py: the minimal DFAs of AUTOMATON_FORMATS, built from their
    regexes (tens of milliseconds each)."""
    lines = [
        '"""The minimal DFAs of the formats lowered as automata (formats.AUTOMATON_FORMATS), encoded as',
        "formats.stored_dfa reads them. Written by formats.write_dfa_tables (``make format-dfas``) from the",
        'formats\' regexes: do not edit; tests/unit/json_schema/test_js_format_dfas.py checks it."""',
        "",
        "TABLES: dict[str, str] = {",
    ]
    for fmt in sorted(AUTOMATON_FORMATS):
        nfa = _Nfa.build(_format_node(fmt, Limits()), Limits())
        dfa = None if nfa is None else minimal_dfa([nfa])
        if dfa is None:
            raise RuntimeError(f"the {fmt} format's minimal DFA is past the caps")
        text = _encoded_dfa(dfa)
        lines.append(f'    "{fmt}": (')
        lines += [f'        "{text[i : i + 96]}"' for i in range(0, len(text), 96)]
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_dfa_tables() -> None:
    """Rewrites format_dfa_tables.py (after a change to a regex of AUTOMATON_FORMATS or to the DFA
    construction)."""
    from pathlib import Path

    (Path(__file__).parent / "format_dfa_tables.py").write_text(dfa_tables_source())
