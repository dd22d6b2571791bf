"""Mask buffers and applying masks to logits: the core's in-place kernel against an unpacked
reference, for every logits dtype, width, batch layout and row selection; and the typed errors
for buffers the core cannot take."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import logitgate as lg
from logitgate.masks import _apply_with_torch, apply_mask_counted, mask_to_bool

torch = pytest.importorskip("torch")

TOKENS = [b"a", b"b", b"ab", b"ba", b"aaa", b"<s>", None]


@pytest.fixture
def vocab() -> lg.Vocabulary:
    return lg.Vocabulary.from_tokens(TOKENS, eos_ids=[5], logits_width=16)


def random_bits(rng: np.random.Generator, rows: int, words: int, density: float) -> np.ndarray:
    allowed = rng.random((rows, words * 32)) < density
    return np.packbits(allowed, axis=-1, bitorder="little").view(np.int32).copy()


def expected_after(logits: np.ndarray, bits: np.ndarray) -> tuple[np.ndarray, int]:
    """The reference: unpack the bits, pad with False past the mask, -inf where False."""
    width = logits.shape[-1]
    allowed = mask_to_bool(bits, min(width, bits.shape[-1] * 32))
    allowed = np.pad(allowed, [(0, 0)] * (allowed.ndim - 1) + [(0, width - allowed.shape[-1])])
    return np.where(allowed, logits, -np.inf), int(allowed.sum())


def as_float64(x: Any) -> np.ndarray:
    return x.to(torch.float64).numpy() if isinstance(x, torch.Tensor) else x.astype(np.float64)


TORCH_DTYPES = ["float32", "float16", "bfloat16"]


@pytest.mark.parametrize("kind", ["numpy-float32", "numpy-float16", *TORCH_DTYPES])
@pytest.mark.parametrize("width,words", [(1, 1), (31, 1), (32, 1), (33, 2), (100, 2), (100, 4), (1000, 32)])
def test_apply_mask_matches_the_unpacked_reference(kind: str, width: int, words: int) -> None:
    # Logits narrower than the mask (bits past the width are ignored), exactly as wide, and
    # wider (columns past the mask are masked off); sparse, half and dense masks.
    rng = np.random.default_rng(width * 100 + words)
    for density in (0.02, 0.5, 0.98):
        bits = random_bits(rng, 3, words, density)
        values = rng.standard_normal((3, width)).astype(np.float32)
        values[0, : min(3, width)] = [np.nan, np.inf, -np.inf][: min(3, width)]  # kept where allowed
        if kind.startswith("numpy"):
            logits: Any = values.astype(kind.split("-")[1])
        else:
            logits = torch.from_numpy(values).to(getattr(torch, kind))
        before = as_float64(logits)
        want, count = expected_after(before, bits)
        assert apply_mask_counted(logits, bits) == count
        np.testing.assert_array_equal(as_float64(logits), want)


def test_apply_mask_one_row_and_its_return_value() -> None:
    bits = np.array([[0b101]], dtype=np.int32)
    for logits in (np.zeros(20, dtype=np.float32), torch.zeros(20)):
        assert lg.apply_mask(logits, bits) is logits
        assert set(np.flatnonzero(np.isfinite(as_float64(logits)))) == {0, 2}
    one_d = torch.zeros(20)
    lg.apply_mask(one_d, bits[0])  # a mask of one row may be 1-D too
    assert set(torch.nonzero(torch.isfinite(one_d)).flatten().tolist()) == {0, 2}


def test_apply_mask_rows_by_index_and_strided_rows() -> None:
    rng = np.random.default_rng(7)
    bits = random_bits(rng, 4, 3, 0.3)
    big = torch.from_numpy(rng.standard_normal((4, 130)).astype(np.float32))
    logits = big[:, :90]  # rows 130 apart: the row stride is not the width
    untouched = big[:, 90:].clone()
    before = logits.numpy().copy()
    count = apply_mask_counted(logits, bits, [3, 1])
    want, _ = expected_after(before, bits)
    np.testing.assert_array_equal(logits[[1, 3]].numpy(), want[[1, 3]])
    np.testing.assert_array_equal(logits[[0, 2]].numpy(), before[[0, 2]])  # rows not listed
    assert torch.equal(big[:, 90:], untouched)  # nothing past each row's width
    assert count == int(mask_to_bool(bits[[1, 3]], 90).sum())
    for rows in (np.array([3, 1]), torch.tensor([3, 1]), (3, 1)):  # any iterable of row numbers
        assert apply_mask_counted(logits, bits, rows) == count
    usage_error("mask-row", apply_mask_counted, logits, bits, [1.5])


@pytest.mark.parametrize("indices", [None, [2, 0]])
def test_torch_operations_path_agrees_with_the_core(indices: list[int] | None) -> None:
    # The path for tensors off the CPU, run on CPU tensors: same result and count as the core.
    rng = np.random.default_rng(3)
    bits = random_bits(rng, 3, 2, 0.4)
    values = torch.from_numpy(rng.standard_normal((3, 70)).astype(np.float32))
    a, b = values.clone(), values.clone()
    assert apply_mask_counted(a, bits, indices) == _apply_with_torch(b, bits, indices)
    assert torch.equal(a, b)


def usage_error(code: str, fn: Any, *args: Any, **kwargs: Any) -> lg.UsageError:
    with pytest.raises(lg.UsageError) as e:
        fn(*args, **kwargs)
    assert e.value.code == code, e.value
    assert isinstance(e.value, lg.LogitgateError)
    return e.value


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_apply_mask_checks_shapes_alike_for_numpy_and_torch(framework: str) -> None:
    def arr(shape: tuple[int, ...], dtype: str = "float32") -> Any:
        a = np.zeros(shape, dtype=dtype)
        return a if framework == "numpy" else torch.from_numpy(a)

    one_row = np.full((1, 1), -1, dtype=np.int32)
    two_rows = np.full((2, 1), -1, dtype=np.int32)
    e = usage_error("mask-shape", lg.apply_mask, arr((2, 20)), one_row)  # no silent broadcast of row 0
    assert "need a mask of 2 rows" in str(e)
    usage_error("mask-shape", lg.apply_mask, arr((20,)), two_rows)
    usage_error("mask-shape", lg.apply_mask, arr((2, 20)), np.full((2, 1, 1), -1, dtype=np.int32))
    usage_error("logits-shape", lg.apply_mask, arr((2, 2, 20)), two_rows)
    usage_error("logits-dtype", lg.apply_mask, arr((20,), "float64"), one_row)
    usage_error("logits-dtype", lg.apply_mask, arr((20,), "int32"), one_row)
    usage_error("logits-layout", lg.apply_mask, arr((20, 2)).T, two_rows)
    usage_error("mask-dtype", lg.apply_mask, arr((20,)), np.zeros((1, 1), dtype=np.int64))
    usage_error("mask-row", lg.apply_mask, arr((2, 20)), two_rows, [0, 2])
    usage_error("mask-row", lg.apply_mask, arr((2, 20)), two_rows, [-1])


def test_apply_mask_refuses_what_it_must_not_write() -> None:
    bits = np.full((1, 1), -1, dtype=np.int32)
    frozen = np.zeros(20, dtype=np.float32)
    frozen.flags.writeable = False
    usage_error("logits-readonly", lg.apply_mask, frozen, bits)
    usage_error("logits-byteorder", lg.apply_mask, np.zeros(20, dtype=">f4"), bits)
    usage_error("logits-grad", lg.apply_mask, torch.zeros(20, requires_grad=True), bits)
    usage_error("logits-type", lg.apply_mask, [0.0] * 20, bits)
    with torch.no_grad():  # the documented way out
        t = torch.zeros(20, requires_grad=True)
        lg.apply_mask(t.detach(), bits)


def test_mask_buffers_get_named_problems(vocab: lg.Vocabulary) -> None:
    m = lg.Compiler(vocab).compile_regex("a").matcher()
    frozen = lg.allocate_mask(vocab)
    frozen.flags.writeable = False
    cases = [
        ("mask-dtype", np.zeros((1, 1), dtype=np.int64)),
        ("mask-dtype", np.zeros((1, 1), dtype=np.float32)),
        ("mask-dtype", np.zeros((1, 1), dtype=np.uint32)),
        ("mask-byteorder", np.zeros((1, 1), dtype=">i4")),
        ("mask-shape", np.zeros(1, dtype=np.int32)),
        ("mask-layout", np.zeros((2, 2), dtype=np.int32).T),
        ("mask-layout", np.zeros((1, 4), dtype=np.int32)[:, ::2]),
        ("mask-readonly", frozen),
        ("mask-type", [[0]]),
        ("mask-dtype", torch.zeros((1, 1), dtype=torch.int64)),
        ("mask-layout", torch.zeros((2, 2), dtype=torch.int32).T),
    ]
    for code, bad in cases:
        e = usage_error(code, m.fill_mask, bad, 0)
        assert "fill_mask(): incompatible function arguments" not in str(e)
        usage_error(code, lg.fill_masks, [m], bad)
    usage_error("mask-row", m.fill_mask, lg.allocate_mask(vocab), 3)
    usage_error("mask-shape", m.fill_mask, np.zeros((1, 0), dtype=np.int32), 0)
    usage_error("mask-shape", lg.fill_masks, [m, m.fork()], lg.allocate_mask(vocab))
    usage_error("duplicate-matcher", lg.fill_masks, [m, m], lg.allocate_mask(vocab, 2))
    usage_error("mask-shape", lg.allocate_mask, vocab, 0)
    t = torch.zeros((1, 1), dtype=torch.int32)  # a CPU tensor of the right kind is a mask buffer
    m.fill_mask(t, 0)
    assert int(t[0, 0]) == 1


def test_mask_buffers_are_written_in_place_through_views(vocab: lg.Vocabulary) -> None:
    # numpy arrays, views and other exporters of a writable 2-D int32 buffer are read through
    # the buffer protocol: the fill lands in the exporter's memory, in the row asked for.
    m = lg.Compiler(vocab).compile_regex("a").matcher()
    want = lg.allocate_mask(vocab)
    m.fill_mask(want)
    words = want.shape[1]
    big = np.full((3, words + 1), -1, dtype=np.int32)  # a spare word per row
    m.fill_mask(big[1:2], 0)
    assert (big[1, :words] == want[0]).all() and big[1, words] == -1
    assert (big[0] == -1).all() and (big[2] == -1).all()
    m.fill_mask(big, 2)
    assert (big[2, :words] == want[0]).all()
    raw = bytearray(want.nbytes)
    m.fill_mask(np.frombuffer(raw, dtype=np.int32).reshape(1, words), 0)
    assert bytes(raw) == want.tobytes()
    view = memoryview(bytearray(2 * want.nbytes)).cast("i", (2, words))
    lg.fill_masks([m, m.fork()], view)
    assert view.tobytes() == 2 * want.tobytes()


def test_logits_processor_masks_in_place_row_by_row(vocab: lg.Vocabulary) -> None:
    # Without a model: a constrained row, an unconstrained row (None), and a finished row that
    # may only take the end ids; scores wider than the vocabulary.
    pytest.importorskip("transformers")
    from logitgate.integrations.transformers import GrammarLogitsProcessor

    compiler = lg.Compiler(vocab)
    proc = GrammarLogitsProcessor([compiler.compile_regex("ab?"), None, compiler.compile_choice(["a"])], trace=True)
    prompt = torch.zeros((3, 2), dtype=torch.long)
    scores = torch.zeros((3, 20))
    assert proc(prompt, scores) is scores
    finite = [set(torch.nonzero(torch.isfinite(r)).flatten().tolist()) for r in scores]
    assert finite == [{0, 2}, set(range(20)), {0}]  # "a", "ab"; all; "a"
    step = torch.cat([prompt, torch.tensor([[0], [1], [0]])], dim=1)  # "a" for the constrained rows
    scores = torch.zeros((3, 20))
    proc(step, scores)
    finite = [set(torch.nonzero(torch.isfinite(r)).flatten().tolist()) for r in scores]
    assert finite[0] == {1, 5} and finite[1] == set(range(20))
    assert proc.finished[2] and finite[2] == {5}  # the choice is complete: only EOS
    assert proc.trace == [[2, 20, 1], [2, 20, 1]]
