"""Token-level acceptance of a text: the text is split into vocabulary tokens (longest match
first), and each token must be allowed by the mask, accepted by the matcher, and the mask must
allow an EOS id at the end. The mask bit is compared with ``accept`` at every step, so a test
that uses this checks the mask, not only the matcher.

On the byte vocabulary this is the exact byte-level check; on a real tokenizer (SmolLM2) the
tokens span several bytes, so a constraint is checked across token boundaries too. Any split
works: a token is allowed iff its bytes keep the output a viable prefix, whatever tokenization
led there.
"""

from __future__ import annotations

from typing import Any

import logitgate as lg


class TokenLevel:
    """A vocabulary and its longest-match splitter."""

    def __init__(self, vocab: Any) -> None:
        self.vocab = vocab
        self.compiler = lg.Compiler(vocab)
        self.ids: dict[bytes, int] = {}
        special = set(vocab.special_ids) | set(vocab.eos_ids)
        for i in range(vocab.size):
            b = vocab.token_bytes(i)
            if b and i not in special:
                self.ids.setdefault(b, i)
        self.longest = max(len(b) for b in self.ids)
        self.mask = lg.allocate_mask(vocab, batch=1)

    def split(self, data: bytes) -> list[int]:
        out: list[int] = []
        i = 0
        while i < len(data):
            for n in range(min(self.longest, len(data) - i), 0, -1):
                tid = self.ids.get(data[i : i + n])
                if tid is not None:
                    out.append(tid)
                    i += n
                    break
            else:
                raise ValueError(f"no token spells byte {data[i]:#x}")
        return out

    def _allowed(self, tid: int) -> bool:
        return bool(int(self.mask[0, tid >> 5]) >> (tid & 31) & 1)

    def accepts(self, compiled: Any, text: str) -> bool:
        m = compiled.matcher()
        for tid in self.split(text.encode("utf-8")):
            m.fill_mask(self.mask, row=0)
            bit = self._allowed(tid)
            ok = bool(m.accept(tid))
            assert bit == ok, f"mask bit {bit} but accept {ok} for token {tid} in {text!r}"
            if not ok:
                return False
        m.fill_mask(self.mask, row=0)
        return any(self._allowed(e) for e in self.vocab.eos_ids)


def byte_vocabulary() -> Any:
    return lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)] + [b"</s>"], eos_ids=[256])
