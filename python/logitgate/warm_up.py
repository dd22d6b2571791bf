"""Vocabulary-level work done ahead of the first requests (:meth:`Compiler.warm_up`).

Part of a grammar's first masks is work for the vocabulary, not for the grammar: the split of
the token trie by an ASCII set that a string loops on (a URL's host, an e-mail address's local
part), a set's alphabet mask, computed once per vocabulary and set and then kept for every
grammar compiled for that vocabulary. Without a warm-up, the first request whose schema has a
``format: uri`` field pays for the URI sets' splits (on Llama 3, about a hundred microseconds on
its slowest mask) and later requests do not. :func:`warm_up` pays for them once: it compiles a
schema holding the string formats that recur across JSON Schemas and fills the mask after every
character of a document of it. The grammar is thrown away; the vocabulary keeps what its
masks computed.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .compiler import Compiler

__all__ = ["WARM_UP_DOCUMENT", "WARM_UP_SCHEMA", "warm_up"]

# The formats (docs/json_schema.md) whose values loop on ASCII sets, and a document whose
# values visit each of their parts: scheme, user, host, port, path, query and fragment; local
# part and domain; digits and separators.
WARM_UP_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        name: {"type": "string", "format": name}
        for name in ("uri", "uri-reference", "email", "hostname", "date-time", "date", "time", "uuid", "ipv4", "ipv6")
    },
}
WARM_UP_DOCUMENT: dict[str, str] = {
    "uri": "https://user:pass@www.example.com:8080/path/to_some-file.html?query=1&b=two#frag",
    "uri-reference": "../images/photo_01.png?size=large#top",
    "email": "first.last+tag@mail.example.co.uk",
    "hostname": "api-v2.service.example.org",
    "date-time": "2024-05-17T08:30:00.123Z",
    "date": "2024-05-17",
    "time": "23:59:59+01:00",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "ipv4": "192.168.0.1",
    "ipv6": "2001:db8::ff00:42:8329",
}


def warm_up(compiler: Compiler) -> int:
    """Fills ``compiler``'s vocabulary's caches for the formats of :data:`WARM_UP_SCHEMA`;
    returns the number of masks filled (one per character of the document, and one before
    it; 0 where ``compiler``'s limits refuse the schema). Leaves ``compiler``'s own grammar cache
    and statistics as they were."""
    from .compiler import Compiler
    from .errors import LogitgateError
    from .masks import allocate_mask

    scratch = Compiler(compiler.vocab, limits=compiler.limits, cache_size=0)
    try:
        matcher = scratch.compile_json_schema(WARM_UP_SCHEMA).matcher()
    except LogitgateError:
        return 0  # limits too tight for the warm-up schema: nothing is done ahead, nothing fails
    bits = allocate_mask(compiler.vocab)
    matcher.fill_mask(bits, row=0)
    filled = 1
    # Every character's position, not only the token boundaries of one tokenization: the
    # positions a request's tokens stop at are among them.
    for ch in json.dumps(WARM_UP_DOCUMENT):
        if not matcher.accept_bytes(ch.encode()):
            break  # (a test keeps the document valid: tests/unit/test_warm_up.py)
        matcher.fill_mask(bits, row=0)
        filled += 1
    return filled
