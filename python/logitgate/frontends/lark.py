"""Lark frontend (llguidance's dialect) -> :class:`~logitgate.grammar.ir.Grammar`.

llguidance reads a Lark grammar as a lexer-based grammar: terminals (uppercase names, string
literals, regexes) are lexemes, and ``%ignore`` text may sit between two lexemes. We lower it
to a character-level grammar that has the same language:

- a terminal is its own IR rule (named as in the source), built at character level: no
  ignored text inside it; terminals may reference terminals, never rules, never themselves;
- in rules, every lexeme is followed by ``(ignore)*`` (``(ignore)?`` with the option
  ``ignore_once``), so nothing is ignored before the first lexeme (llguidance's default; the
  option ``allow_initial_skip`` allows it);
- after the *last* lexeme llguidance allows ignored text only while the output could still
  continue. Rules reached at the end of the output get an end variant (``-end-NAME``) that
  keeps the trailing ignore exactly where the grammar can continue: after an optional or
  unbounded tail, inside a bounded repetition short of its maximum, and after a rule that can
  extend itself through left recursion (``sum: sum "+" product``).
- ``%json {...}`` lowers through the JSON Schema frontend (flexible whitespace inside);
  ``%import common.X`` uses llguidance's own table of common terminals.

Departures, each documented in docs/lark.md: llguidance's lexer is greedy (maximal munch)
where this grammar is not, so a split of one lexeme's text into two adjacent lexemes (``a b``
read from ``ab`` with ``NAME NAME``) is accepted here; trailing ignored text after an output
that only *another* parse could continue (``start: a | a "z"``) is refused here.

Invariants: expression lowering recurses along the syntax tree, whose depth the syntax reader
bounds by ``Limits.max_nesting``; terminal references are followed with an explicit depth bound.
Every failure is a :class:`GrammarError` with a ``lark-*`` code (or ``special-token-unsupported``)
and the line and column of the fault, or a :class:`LimitExceeded`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from logitgate.errors import GrammarError, LimitExceeded, SchemaError
from logitgate.frontends.gbnf import MAX_TOKEN_SET_IDS
from logitgate.frontends.lark_lexing import check_greedy_lexing
from logitgate.frontends.lark_regex import regex_node, string_node
from logitgate.frontends.lark_syntax import (
    Alternatives,
    Definition,
    Expr,
    JsonSchema,
    LarkFile,
    Name,
    Quantified,
    RegexLit,
    Sequence,
    SpecialToken,
    StringLit,
    StringRange,
    Unsupported,
    parse_lark_syntax,
)
from logitgate.grammar.ir import (
    EMPTY,
    Alt,
    CharClass,
    Grammar,
    Node,
    Ref,
    Repeat,
    Seq,
    StringExcept,
    TokenSet,
)
from logitgate.limits import DEFAULT_LIMITS, Limits

__all__ = ["COMMON_TERMINALS", "lower_special_token", "parse_lark"]

CODE_UNDEFINED = "lark-undefined"
CODE_DUPLICATE = "lark-duplicate"
CODE_MISSING_START = "lark-missing-start"
CODE_UNSUPPORTED = "lark-unsupported"
CODE_OPTION = "lark-option-unsupported"
CODE_IMPORT = "lark-import"
CODE_RECURSIVE_TERMINAL = "lark-recursive-terminal"
CODE_RULE_IN_TERMINAL = "lark-rule-in-terminal"
CODE_JSON = "lark-json"
CODE_SPECIAL_TOKEN = "special-token-unsupported"
CODE_UNKNOWN_TOKEN = "lark-unknown-token"

# llguidance's common terminals (parser/src/lark/common.rs), in its regex syntax.
COMMON_TERMINALS: dict[str, str] = {
    "DIGIT": r"[0-9]",
    "HEXDIGIT": r"[a-fA-F0-9]",
    "INT": r"[0-9]+",
    "SIGNED_INT": r"(\+|-)?[0-9]+",
    "DECIMAL": r"([0-9]+\.[0-9]*)|(\.[0-9]+)",
    "_EXP": r"[eE](\+|-)?[0-9]+",
    "FLOAT": r"([0-9]+\.[0-9]*|\.[0-9]+)([eE](\+|-)?[0-9]+)?|[0-9]+[eE](\+|-)?[0-9]+",
    "SIGNED_FLOAT": r"(\+|-)?(([0-9]+\.[0-9]*|\.[0-9]+)([eE](\+|-)?[0-9]+)?|[0-9]+[eE](\+|-)?[0-9]+)",
    "NUMBER": r"([0-9]+)|([0-9]+\.[0-9]*|\.[0-9]+)([eE](\+|-)?[0-9]+)?|[0-9]+[eE](\+|-)?[0-9]+",
    "SIGNED_NUMBER": r"(\+|-)?(([0-9]+)|([0-9]+\.[0-9]*|\.[0-9]+)([eE](\+|-)?[0-9]+)?|[0-9]+[eE](\+|-)?[0-9]+)",
    "ESCAPED_STRING": r"\"([^\"\\]|\\.)*\"",
    "LCASE_LETTER": r"[a-z]",
    "UCASE_LETTER": r"[A-Z]",
    "LETTER": r"[A-Za-z]",
    "WORD": r"[A-Za-z]+",
    "CNAME": r"[_A-Za-z][_A-Za-z0-9]*",
    "WS_INLINE": r"[ \t]+",
    "WS": r"[ \t\f\r\n]+",
    "CR": r"\r",
    "LF": r"\n",
    "NEWLINE": r"(\r?\n)+",
    "SH_COMMENT": r"#[^\n]*",
    "CPP_COMMENT": r"//[^\n]*",
    "C_COMMENT": r"\/\*[^*]*\*+(?:[^/*][^*]*\*+)*\/",
    "SQL_COMMENT": r"--[^\n]*",
}

# %llguidance options: the ones that change nothing we emit, and the ones we implement.
_SUPPORTED_OPTIONS = frozenset({"allow_initial_skip", "ignore_once"})
# Rule attributes that only name captures (no effect on the language).
_CAPTURE_ATTRIBUTES = frozenset({"capture"})

_IGNORE_RULE = "-ignore"
_ROOT_RULE = "-root"


def lower_special_token(token: SpecialToken, source: str, token_id: Callable[[str], int | None] | None) -> Node:
    """The one place a special token (``<|im_end|>``, ``<[128010]>``, ranges, negations) lowers
    to the IR: a :class:`~logitgate.grammar.ir.TokenSet`, one whole token, never text. Names
    resolve through ``token_id`` (the vocabulary's); an unknown name, or a name without a
    vocabulary, is a typed error with its line and column."""
    if token.name is not None:
        resolved = token_id(token.name) if token_id is not None else None
        if resolved is None:
            why = "is not a token of this vocabulary" if token_id is not None else "needs a vocabulary to resolve"
            raise GrammarError(f"token {token.name} {why}", code=CODE_UNKNOWN_TOKEN, source=source, offset=token.offset)
        return TokenSet((resolved,))
    if token.ids == ((0, None),):
        if token.negated:
            raise GrammarError("'<[^*]>' matches no token", code=CODE_SPECIAL_TOKEN, source=source, offset=token.offset)
        return TokenSet((), negated=True)
    ids: set[int] = set()
    for lo, hi in token.ids:
        if hi is None:
            raise GrammarError(
                f"special token {token.text}: an id range open to the vocabulary's end is not supported "
                "(write its last id)",
                code=CODE_SPECIAL_TOKEN,
                source=source,
                offset=token.offset,
            )
        if hi < lo or len(ids) + hi - lo + 1 > MAX_TOKEN_SET_IDS:
            why = f"bad token id range {lo}-{hi} in {token.text}"
            raise GrammarError(why, code=CODE_SPECIAL_TOKEN, source=source, offset=token.offset)
        ids.update(range(lo, hi + 1))
    return TokenSet(tuple(sorted(ids)), negated=token.negated)


def parse_lark(
    text: str,
    limits: Limits | None = None,
    *,
    check_lexing: bool = True,
    token_id: Callable[[str], int | None] | None = None,
) -> Grammar:
    """Parse a Lark grammar in llguidance's dialect into a :class:`Grammar` rooted at ``start``.

    ``token_id`` resolves a special token's name (``<|im_end|>``) to its id, or None when the
    vocabulary has none (:meth:`logitgate.Vocabulary.token_id`). ``check_lexing=False`` skips
    the greedy-lexing check (:mod:`logitgate.frontends.lark_lexing`) and returns the
    character-level grammar even where llguidance's language is smaller: for tests that show
    the difference.

    >>> g = parse_lark('start: "a" NUM\\nNUM: /[0-9]+/')
    >>> print(g.to_ebnf(), end="")
    -root ::= -end-start
    -end-start ::= "a" NUM
    NUM ::= [0-9]+
    """
    lim = limits if limits is not None else DEFAULT_LIMITS
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > lim.max_source_bytes:
        raise LimitExceeded("max_source_bytes", lim.max_source_bytes, f"Lark text is {size} bytes")
    return _Lowering(text, parse_lark_syntax(text, lim), lim, token_id).run(check_lexing)


class _Lowering:
    def __init__(
        self, text: str, file: LarkFile, limits: Limits, token_id: Callable[[str], int | None] | None = None
    ) -> None:
        self.text = text
        self.token_id = token_id
        self.file = file
        self.limits = limits
        self.defs: dict[str, Definition] = {}
        self.rules: dict[str, Node] = {}
        self.pending: list[tuple[str, Definition, bool]] = []  # (IR name, definition, end variant)
        self.terminals_in_progress: set[str] = set()
        self.json_count = 0
        self.ignore_once = False
        self.initial_skip = False
        self.skip: Node | None = None
        self._self_extending: set[str] | None = None

    def error(self, message: str, code: str, offset: int) -> GrammarError:
        return GrammarError(message, code=code, source=self.text, offset=offset)

    # -- declarations -----------------------------------------------------------------------

    def run(self, check_lexing: bool) -> Grammar:
        f = self.file
        if f.refused:
            raise self.error(f"{f.refused[0].what} is not supported", CODE_UNSUPPORTED, f.refused[0].offset)
        for options, offset in f.options:
            for key, value in options.items():
                if key not in _SUPPORTED_OPTIONS:
                    raise self.error(f"%llguidance option {key!r} is not supported", CODE_OPTION, offset)
                if value is True:
                    setattr(self, "ignore_once" if key == "ignore_once" else "initial_skip", True)
                elif value is not False:
                    raise self.error(f"%llguidance option {key!r} takes true or false", CODE_OPTION, offset)
        for d in f.definitions:
            self.declare(d)
        for path, alias, offset in f.imports:
            module, _, name = path.rpartition(".")
            if module != "common":
                raise self.error(f"only '%import common.NAME' is supported, not {path!r}", CODE_IMPORT, offset)
            if name not in COMMON_TERMINALS:
                raise self.error(f"unknown common terminal {name!r}", CODE_IMPORT, offset)
            body = RegexLit(COMMON_TERMINALS[name], "", offset)
            self.declare(Definition(alias, alias.lstrip("_")[:1].isupper(), body, offset))
        for d in self.defs.values():
            self.check_definition(d)
        if "start" not in self.defs:
            raise self.error("the grammar has no 'start' rule", CODE_MISSING_START, len(self.text))
        if self.defs["start"].terminal:
            raise self.error("'start' must be a rule", CODE_MISSING_START, self.defs["start"].offset)
        if f.ignores:
            ignored = [self.terminal_expr(e, 0) for e in f.ignores]
            self.rules[_IGNORE_RULE] = ignored[0] if len(ignored) == 1 else Alt(tuple(ignored))
            self.skip = Repeat(Ref(_IGNORE_RULE), 0, 1 if self.ignore_once else None)
        root_body = self.rule_ref("start", end=True)
        if self.initial_skip and self.skip is not None:
            root_body = Seq((self.skip, root_body))
        rules: dict[str, Node] = {_ROOT_RULE: root_body}
        while self.pending:
            name, d, end = self.pending.pop()
            self.rules[name] = _without_left_recursion(name, self.rule_expr(d.body, end, 0))
        rules.update(self.rules)
        skip = self.rules.get(_IGNORE_RULE)
        if check_lexing:
            self.check_lexing(skip)
        return Grammar(rules, root=_ROOT_RULE)

    def check_lexing(self, skip: Node | None) -> None:
        check_greedy_lexing(
            self.defs,
            self.reachable_rules(),
            self.lexeme_node,
            None if skip is None else _Inliner(self.rules)(skip),
            self.text,
        )

    def reachable_rules(self) -> list[str]:
        seen = {"start"}
        work = [self.defs["start"].body]
        while work:
            e = work.pop()
            if isinstance(e, Name) and not self.defs[e.name].terminal and e.name not in seen:
                seen.add(e.name)
                work.append(self.defs[e.name].body)
            elif isinstance(e, (Sequence, Alternatives)):
                work.extend(e.items)
            elif isinstance(e, Quantified):
                work.append(e.item)
        return sorted(seen)

    def lexeme_node(self, e: Expr) -> Node | None:
        """A lexeme's character-level language with terminal references inlined (terminals are
        not recursive), for the greedy-lexing check; None for what is not a plain lexeme."""
        if isinstance(e, JsonSchema):
            return None
        node = self.terminal_ref(e.name, e.offset, 0) if isinstance(e, Name) else self.terminal_expr(e, 0)
        return _Inliner(self.rules)(node)

    def declare(self, d: Definition) -> None:
        if d.name in self.defs:
            raise self.error(f"{d.name!r} is defined twice", CODE_DUPLICATE, d.offset)
        if d.template_offset is not None:
            raise self.error("templates are not supported", CODE_UNSUPPORTED, d.template_offset)
        if d.priority_offset is not None and d.terminal:
            raise self.error("terminal priorities are not supported", CODE_UNSUPPORTED, d.priority_offset)
        for key, offset in d.attributes:
            if key not in _CAPTURE_ATTRIBUTES:
                raise self.error(f"rule attribute {key!r} is not supported", CODE_UNSUPPORTED, offset)
        self.defs[d.name] = d

    def check_definition(self, d: Definition) -> None:
        """Every name used is defined, and terminals use no rules (checked for unused
        definitions too, as llguidance does)."""
        stack: list[Expr] = [d.body]
        while stack:
            e = stack.pop()
            if isinstance(e, Name):
                target = self.defs.get(e.name)
                if target is None:
                    raise self.error(f"undefined name {e.name!r}", CODE_UNDEFINED, e.offset)
                if d.terminal and not target.terminal:
                    raise self.error(
                        f"terminal {d.name!r} uses the rule {e.name!r} (terminals may use terminals only)",
                        CODE_RULE_IN_TERMINAL,
                        e.offset,
                    )
            elif isinstance(e, (Sequence, Alternatives)):
                stack.extend(e.items)
            elif isinstance(e, Quantified):
                stack.append(e.item)

    # -- terminals (character level) ----------------------------------------------------------

    def terminal_ref(self, name: str, offset: int, depth: int) -> Node:
        if name in self.rules:
            return Ref(name)
        if name in self.terminals_in_progress:
            raise self.error(f"terminal {name!r} references itself", CODE_RECURSIVE_TERMINAL, offset)
        if depth > self.limits.max_nesting:
            raise LimitExceeded("max_nesting", self.limits.max_nesting, f"terminal references nest deeper at {offset}")
        self.terminals_in_progress.add(name)
        body = self.terminal_expr(self.defs[name].body, depth + 1)
        self.terminals_in_progress.discard(name)
        self.rules[name] = body
        return Ref(name)

    def terminal_expr(self, e: Expr, depth: int) -> Node:
        if isinstance(e, StringLit):
            return string_node(e.value, e.icase)
        if isinstance(e, RegexLit):
            return regex_node(e.pattern, e.flags, self.text, e.offset, self.limits)
        if isinstance(e, StringRange):
            return CharClass(((ord(e.lo), ord(e.hi)),))
        if isinstance(e, Name):
            target = self.defs.get(e.name)
            if target is None:
                raise self.error(f"undefined name {e.name!r}", CODE_UNDEFINED, e.offset)
            if not target.terminal:
                raise self.error(f"a terminal cannot use the rule {e.name!r}", CODE_RULE_IN_TERMINAL, e.offset)
            return self.terminal_ref(e.name, e.offset, depth)
        if isinstance(e, Sequence):
            return _seq([self.terminal_expr(i, depth + 1) for i in e.items])
        if isinstance(e, Alternatives):
            return Alt(tuple(self.terminal_expr(i, depth + 1) for i in e.items))
        if isinstance(e, Quantified):
            return _repeat(self.terminal_expr(e.item, depth + 1), e.lo, e.hi)
        if isinstance(e, SpecialToken):
            raise self.error(
                f"special token {e.text} inside a terminal (special tokens go in rules)", CODE_UNSUPPORTED, e.offset
            )
        if isinstance(e, JsonSchema):
            raise self.error("%json inside a terminal (it goes in rules)", CODE_UNSUPPORTED, e.offset)
        assert isinstance(e, Unsupported)
        raise self.error(f"{e.what} is not supported", CODE_UNSUPPORTED, e.offset)

    # -- rules (lexemes with ignored text between them) ---------------------------------------

    def rule_ref(self, name: str, end: bool) -> Node:
        if end and name in self.self_extending():
            end = False  # a complete output can always continue: ignored text may trail it
        ir_name = f"-end-{name}" if end else name
        if ir_name not in self.rules:
            self.rules[ir_name] = EMPTY  # placeholder: lowered from the pending list
            self.pending.append((ir_name, self.defs[name], end))
        return Ref(ir_name)

    def lexeme(self, node: Node, end: bool) -> Node:
        return node if end or self.skip is None else Seq((node, self.skip))

    def rule_expr(self, e: Expr, end: bool, depth: int) -> Node:
        if depth > self.limits.max_nesting:
            raise LimitExceeded("max_nesting", self.limits.max_nesting, "Lark expression nests deeper")
        if isinstance(e, Name):
            if self.defs[e.name].terminal:
                return self.lexeme(self.terminal_ref(e.name, e.offset, 0), end)
            return self.rule_ref(e.name, end)
        if isinstance(e, (StringLit, RegexLit, StringRange)):
            return self.lexeme(self.terminal_expr(e, depth), end)
        if isinstance(e, SpecialToken):
            return lower_special_token(e, self.text, self.token_id)
        if isinstance(e, JsonSchema):
            return self.lexeme(self.json_schema(e), end)
        if isinstance(e, Sequence):
            if not e.items:
                return EMPTY
            last = len(e.items) - 1
            return _seq([self.rule_expr(item, end and k == last, depth + 1) for k, item in enumerate(e.items)])
        if isinstance(e, Alternatives):
            return Alt(tuple(self.rule_expr(i, end, depth + 1) for i in e.items))
        if isinstance(e, Quantified):
            return self.quantified(e, end, depth)
        assert isinstance(e, Unsupported)
        raise self.error(f"{e.what} is not supported", CODE_UNSUPPORTED, e.offset)

    def quantified(self, e: Quantified, end: bool, depth: int) -> Node:
        mid = self.rule_expr(e.item, False, depth + 1)
        if not end or e.hi is None:
            # Unbounded: a complete repetition can always take one more item, so ignored text
            # may trail it even at the end.
            return _repeat(mid, e.lo, e.hi)
        if e.hi == 0:
            return EMPTY
        # Short of the maximum the output can continue (trailing ignore allowed); at the
        # maximum the last item is in end position.
        last = _seq([_repeat(mid, e.hi - 1, e.hi - 1), self.rule_expr(e.item, True, depth + 1)])
        if e.lo <= e.hi - 1:
            return Alt((_repeat(mid, e.lo, e.hi - 1), last))
        return last

    def self_extending(self) -> set[str]:
        """Rules that derive themselves followed by more (``sum: sum "+" product``, directly or
        through leftmost rules): a complete one at the end of the output can still continue."""
        if self._self_extending is None:
            edges: dict[str, list[tuple[str, bool]]] = {}
            for name, d in self.defs.items():
                if not d.terminal:
                    edges[name] = list(_leftmost_rules(d.body, self.defs))
            found: set[str] = set()
            for start in edges:
                seen: set[tuple[str, bool]] = set()
                work = [(t, ext) for t, ext in edges[start]]
                while work:
                    node, ext = work.pop()
                    if node == start and ext:
                        found.add(start)
                        break
                    if (node, ext) in seen:
                        continue
                    seen.add((node, ext))
                    work.extend((t, ext or e2) for t, e2 in edges.get(node, ()))
            self._self_extending = found
        return self._self_extending

    # -- %json ------------------------------------------------------------------------------

    def json_schema(self, e: JsonSchema) -> Node:
        from logitgate.frontends.json_schema import schema_to_grammar

        try:
            grammar, _ = schema_to_grammar(e.schema, limits=self.limits)
        except SchemaError as err:
            raise self.error(f"in %json: {err.message}", CODE_JSON, e.offset) from None
        self.json_count += 1
        prefix = f"-json{self.json_count}-"
        renamed = _Renamer(lambda n: prefix + n)
        for name, body in grammar.rules.items():
            self.rules[prefix + name] = renamed(body)
        return Ref(prefix + grammar.root)


def _without_left_recursion(name: str, body: Node) -> Node:
    """``A: A x | A y | b | c`` as ``A: (b | c) (x | y)*``: the core parses no left recursion,
    and Lark grammars use it for operators. Indirect left recursion is left to the core, which
    refuses it with a typed error."""
    branches = body.items if isinstance(body, Alt) else (body,)
    tails: list[Node] = []
    heads: list[Node] = []
    for b in branches:
        items = b.items if isinstance(b, Seq) else (b,)
        if items and items[0] == Ref(name):
            if len(items) > 1:  # `A: A` alone adds nothing to the language
                tails.append(_seq(list(items[1:])))
        else:
            heads.append(b)
    if not tails:
        return body
    head = heads[0] if len(heads) == 1 else Alt(tuple(heads))
    tail = tails[0] if len(tails) == 1 else Alt(tuple(tails))
    return _seq([head, Repeat(tail, 0, None)])


def _leftmost_rules(body: Expr, defs: dict[str, Definition]) -> list[tuple[str, bool]]:
    """(rule, followed by more) for each rule reference in leftmost position of ``body``."""
    out: list[tuple[str, bool]] = []
    work: list[tuple[Expr, bool]] = [(body, False)]
    while work:
        e, more = work.pop()
        if isinstance(e, Name):
            d = defs.get(e.name)
            if d is not None and not d.terminal:
                out.append((e.name, more))
        elif isinstance(e, Alternatives):
            work.extend((i, more) for i in e.items)
        elif isinstance(e, Sequence) and e.items:
            work.append((e.items[0], more or len(e.items) > 1))
        elif isinstance(e, Quantified):
            work.append((e.item, more or e.hi is None or e.hi > 1))
    return out


def _seq(items: list[Node]) -> Node:
    flat: list[Node] = []
    for i in items:
        if isinstance(i, Seq):
            flat.extend(i.items)
        else:
            flat.append(i)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def _repeat(item: Node, lo: int, hi: int | None) -> Node:
    if hi == 0:
        return EMPTY
    if lo == 1 and hi == 1:
        return item
    return Repeat(item, lo, hi)


class _Inliner:
    """Replaces references by the referenced (non-recursive) rules' bodies."""

    def __init__(self, rules: dict[str, Node]) -> None:
        self.rules = rules
        self.done: dict[str, Node] = {}

    def __call__(self, node: Node) -> Node:
        if isinstance(node, Ref):
            hit = self.done.get(node.name)
            if hit is None:
                hit = self.done[node.name] = self(self.rules[node.name])
            return hit
        if isinstance(node, Seq):
            return Seq(tuple(self(i) for i in node.items))
        if isinstance(node, Alt):
            return Alt(tuple(self(i) for i in node.items))
        if isinstance(node, Repeat):
            return Repeat(self(node.item), node.min, node.max)
        return node


class _Renamer:
    """Rebuilds IR nodes with every rule reference renamed (memoized by node identity, so
    shared subtrees are rebuilt once)."""

    def __init__(self, rename: Callable[[str], str]) -> None:
        self.rename = rename
        self.done: dict[int, Node] = {}
        self.keep: list[Any] = []

    def __call__(self, node: Node) -> Node:
        hit = self.done.get(id(node))
        if hit is not None:
            return hit
        out: Node
        if isinstance(node, Ref):
            out = Ref(self.rename(node.name))
        elif isinstance(node, Seq):
            out = Seq(tuple(self(i) for i in node.items))
        elif isinstance(node, Alt):
            out = Alt(tuple(self(i) for i in node.items))
        elif isinstance(node, Repeat):
            out = Repeat(self(node.item), node.min, node.max)
        elif isinstance(node, StringExcept):
            out = StringExcept(node.words, self(node.tail))
        else:
            out = node
        self.done[id(node)] = out
        self.keep.append(node)
        return out
