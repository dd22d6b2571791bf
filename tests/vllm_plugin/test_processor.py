"""The logits processor's contract with vLLM's persistent batch, on a small vocabulary and
without an engine: rows added, removed, moved and swapped; tokens accepted from the request's
own output list (placeholders skipped); end ids only where the grammar may end; bad requests
rejected by ``validate_params``; failures inside the engine end the row instead of raising."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

pytestmark = pytest.mark.vllm

# ids: 0 "a", 1 "b", 2 "ab", 3 "1", 4 "2", 5 "x", 6 EOS, 7 a stop token without text
TOKENS = [b"a", b"b", b"ab", b"1", b"2", b"x", None, None]
EOS, STOP = 6, 7
WIDTH = 40  # wider than the vocabulary, like a padded model head


@pytest.fixture
def proc() -> Any:
    import logitgate as lg
    from logitgate.integrations.vllm import LogitgateLogitsProcessor

    config = SimpleNamespace(model_config=SimpleNamespace())
    p = LogitgateLogitsProcessor(config, None, False)  # V1 runner: (config, device, is_pin_memory)
    p._compiler = lg.Compiler(lg.Vocabulary.from_tokens(TOKENS, eos_ids=[EOS], logits_width=WIDTH))
    return p


def params(spec: Any = None, **kw: Any) -> Any:
    from vllm import SamplingParams

    sp = SamplingParams(extra_args={"logitgate": spec} if spec is not None else None, **kw)
    return sp


def update(added: Any = (), removed: Any = (), moved: Any = (), size: int = 4) -> Any:
    from vllm.v1.sample.logits_processor import BatchUpdate

    return BatchUpdate(batch_size=size, removed=list(removed), added=list(added), moved=list(moved))


def allowed(proc: Any, batch: int = 4) -> list[set[int]]:
    import torch

    logits = torch.zeros(batch, WIDTH)
    out = proc.apply(logits)
    assert out is logits
    return [{i for i in range(WIDTH) if out[r, i] != float("-inf")} for r in range(batch)]


def test_rows_masked_and_unconstrained_untouched(proc: Any) -> None:
    outs: list[list[int]] = [[], [], []]
    proc.update_state(
        update(
            added=[
                (0, params({"regex": "a+b"}), [9], outs[0]),
                (1, params(), [9], outs[1]),
                (2, params({"choice": ["12", "x"]}), [9], outs[2]),
            ]
        )
    )
    masks = allowed(proc, 3)
    assert masks[0] == {0, 2}  # "a" or "ab"; not "b", never EOS before the end
    assert masks[1] == set(range(WIDTH))
    assert masks[2] == {3, 5}


def test_tokens_accepted_from_output_list_and_end_only_when_complete(proc: Any) -> None:
    out: list[int] = []
    proc.update_state(update(added=[(0, params({"regex": "a+b"}, stop_token_ids=[STOP]), [9], out)]))
    assert allowed(proc, 1)[0] == {0, 2}
    out.append(0)  # "a"
    assert allowed(proc, 1)[0] == {0, 1, 2}
    out.append(-1)  # async scheduling's placeholder: not accepted yet
    assert allowed(proc, 1)[0] == {0, 1, 2}
    out[-1] = 1  # filled in: "ab", complete
    assert allowed(proc, 1)[0] == {EOS, STOP}


def test_stop_token_not_allowed_before_complete(proc: Any) -> None:
    """A request stop id that is an ordinary token of the grammar is still withheld until the
    output is complete (vLLM would stop on it)."""
    out: list[int] = []
    proc.update_state(update(added=[(0, params({"regex": "(ab)+"}, stop_token_ids=[2]), [9], out)]))
    assert 2 not in allowed(proc, 1)[0]
    out.append(2)
    assert allowed(proc, 1)[0] == {0, 2, EOS}  # complete: it may end (EOS, the stop id) or go on


def test_removed_moved_swapped(proc: Any) -> None:
    from vllm.v1.sample.logits_processor import MoveDirectionality

    a: list[int] = []
    b: list[int] = []
    proc.update_state(update(added=[(0, params({"regex": "1"}), [9], a), (1, params({"regex": "x"}), [9], b)]))
    assert allowed(proc, 2)[:2] == [{3}, {5}]
    proc.update_state(update(moved=[(0, 1, MoveDirectionality.SWAP)]))
    assert allowed(proc, 2)[:2] == [{5}, {3}]
    proc.update_state(update(removed=[0], moved=[(1, 0, MoveDirectionality.UNIDIRECTIONAL)], size=1))
    masks = allowed(proc, 2)
    assert masks[0] == {3}
    assert masks[1] == set(range(WIDTH))  # nothing constrained at 1 any more
    c: list[int] = []
    proc.update_state(update(added=[(0, params(), [9], c)], size=1))  # a new request takes index 0
    assert allowed(proc, 1)[0] == set(range(WIDTH))


def test_compile_failure_in_engine_ends_the_row(proc: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A special token the vocabulary lacks passes validate_params (no vocabulary there) and
    fails the engine's compile: the row may only end, and the others go on."""
    spec = {"grammar": 'root ::= "a" <|missing|>'}
    proc.validate_params(params(spec))
    a: list[int] = []
    b: list[int] = []
    proc.update_state(
        update(added=[(0, params(spec, stop_token_ids=[STOP]), [9], a), (1, params({"regex": "b"}), [9], b)])
    )
    masks = allowed(proc, 2)
    assert masks[0] == {EOS, STOP}
    assert masks[1] == {1}
    assert "failed to compile" in caplog.text


def test_rejected_token_ends_the_row(proc: Any, caplog: pytest.LogCaptureFixture) -> None:
    out: list[int] = []
    proc.update_state(update(added=[(0, params({"regex": "ab"}), [9], out)]))
    out.append(5)  # "x": not allowed (another processor or a bug forced it)
    assert allowed(proc, 1)[0] == {EOS}
    assert "rejects" in caplog.text


def test_json_text_spec_as_vllm_xargs_carries_it(proc: Any) -> None:
    out: list[int] = []
    proc.update_state(update(added=[(0, params(json.dumps({"choice": ["ab"]})), [9], out)]))
    assert allowed(proc, 1)[0] == {0, 2}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("{not json", "not valid JSON"),
        (["regex"], "must be an object"),
        ({}, "exactly one of"),
        ({"regex": "a", "choice": ["a"]}, "exactly one of"),
        ({"regex": "a", "strict": True}, "unknown option strict for regex"),
        ({"json_schema": {"type": "object"}, "colour": 1}, "unknown option colour"),
        ({"choice": []}, "non-empty list"),
        ({"regex": 5}, "must be a string"),
        ({"regex": "a("}, "regex"),
        ({"grammar": 'root ::= "a'}, "grammar"),
        ({"grammar": "root ::= undefined"}, "grammar"),
        ({"json_schema": {"type": "nonsense"}}, "json_schema"),
        ({"json_schema": {"type": "string"}, "whitespace": "wide"}, "whitespace"),
        ({"json_schema": "{bad"}, "not valid JSON"),
        ('{"regex": ' + "9" * 5000 + "}", "extra_args.logitgate holds an integer of more than 4,300 digits"),
        ({"json_schema": '{"const": ' + "9" * 5000 + "}"}, "json_schema holds an integer of more than 4,300"),
        ({"json_schema": "[" * 100_000 + "]" * 100_000}, "json_schema is nested deeper than"),
    ],
)
def test_validate_params_rejects(spec: Any, message: str) -> None:
    from logitgate.integrations.vllm import LogitgateLogitsProcessor

    with pytest.raises(ValueError, match=message):
        LogitgateLogitsProcessor.validate_params(params(spec))


def test_validate_params_accepts() -> None:
    from logitgate.integrations.vllm import LogitgateLogitsProcessor

    for spec in [
        None,
        {"json_schema": {"type": "object"}, "strict": True, "whitespace": "compact"},
        {"regex": r"\d+"},
        {"choice": ["a", "b"]},
        {"grammar": 'start ::= "x"', "root": "start"},
        json.dumps({"regex": "a"}),
    ]:
        LogitgateLogitsProcessor.validate_params(params(spec))
