"""Token bitmasks: allocation, batch filling, and applying a mask to logits.

Layout (shared by every call): int32 array ``[batch, ceil(width / 32)]``; token ``i`` is bit
``i % 32`` of word ``i // 32`` (little-endian bit order within the word).
"""

from __future__ import annotations

import operator
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import UsageError

if TYPE_CHECKING:
    from .vocabulary import Vocabulary

__all__ = ["allocate_mask", "apply_mask", "apply_mask_counted", "fill_masks", "mask_to_bool"]


def allocate_mask(vocab: Vocabulary, batch: int = 1) -> np.ndarray:
    """A zeroed int32 mask buffer ``[batch, ceil(vocab.size / 32)]``."""
    if batch < 1:
        raise UsageError(f"batch must be >= 1, got {batch}", code="mask-shape")
    return np.zeros((batch, (vocab.size + 31) // 32), dtype=np.int32)


def mask_to_bool(bits: np.ndarray, width: int) -> np.ndarray:
    """Unpacks ``bits`` ([batch, words] or [words]) into a bool array [..., width]."""
    as_bytes = np.ascontiguousarray(bits, dtype=np.int32).view(np.uint8)
    flat = np.unpackbits(as_bytes, axis=-1, bitorder="little")
    return flat[..., :width].astype(bool)


def apply_mask(logits: Any, bits: Any, indices: Sequence[int] | None = None) -> Any:
    """Sets ``logits`` to -inf in place wherever the mask bit is 0; returns ``logits``.

    ``logits`` is a numpy array or a torch tensor (float32, float16 or bfloat16), shape
    ``[width]`` with a mask of one row (``[words]`` or ``[1, words]``), or ``[batch, width]``
    with a mask of ``batch`` rows; ``indices`` lists the rows to mask (the same row of logits
    and mask; default all). Columns beyond the mask's width (a wider logits row) are masked off
    too. The core masks CPU logits without a copy, the GIL released; torch tensors on another
    device are masked there with torch operations. Shapes, dtypes and layouts are checked the
    same way for every kind of array: a mismatch raises :class:`~logitgate.UsageError`.
    """
    apply_mask_counted(logits, bits, indices)
    return logits


def apply_mask_counted(logits: Any, bits: Any, indices: Sequence[int] | None = None) -> int:
    """:func:`apply_mask`, returning how many columns the mask allows (summed over the rows
    masked)."""
    from . import _core

    if indices is not None:
        indices = _row_indices(indices)
    torch = sys.modules.get("torch")  # a tensor means torch was imported; never import it here
    if torch is not None and isinstance(logits, torch.Tensor):
        if logits.requires_grad:  # writing through the tensor's memory would bypass autograd
            raise UsageError(
                "logits require grad: mask them under torch.no_grad(), or pass logits.detach()", code="logits-grad"
            )
        # torch's C exporter: Tensor.__dlpack__, which the core would call, is Python code
        # costing several times the masking of a 50k-token row.
        allowed = _core.apply_mask(torch.utils.dlpack.to_dlpack(logits), bits, indices)
    else:
        allowed = _core.apply_mask(logits, bits, indices)
    return allowed if allowed >= 0 else _apply_with_torch(logits, bits, indices)


def _row_indices(indices: Any) -> list[int]:
    """``indices`` (any iterable of integers: a list, a numpy array, a tensor) as a list."""
    try:
        return [operator.index(i) for i in indices]
    except TypeError:
        raise UsageError(f"indices must be row numbers (integers), got {indices!r}", code="mask-row") from None


def _apply_with_torch(logits: Any, bits: Any, indices: Sequence[int] | None) -> int:
    """Masks a torch tensor with torch operations on its own device (the core masks CPU
    memory only); the core has checked the shapes and dtypes."""
    import torch

    width = logits.shape[-1]
    words = torch.as_tensor(bits).to(device=logits.device, dtype=torch.int32).reshape(-1, bits.shape[-1])
    shifts = torch.arange(32, device=logits.device, dtype=torch.int32)
    allowed = ((words.unsqueeze(-1) >> shifts) & 1).bool().flatten(-2)[:, :width]
    if allowed.shape[-1] < width:
        allowed = torch.nn.functional.pad(allowed, (0, width - allowed.shape[-1]))
    rows = logits.reshape(-1, width)  # a view of the same memory: [width] as one row, [batch, width] as is
    if indices is not None:
        picked = torch.as_tensor(list(indices), dtype=torch.long, device=logits.device)
        allowed = allowed[picked]
        rows[picked] = rows[picked].masked_fill(~allowed, float("-inf"))
    else:
        rows.masked_fill_(~allowed, float("-inf"))
    return int(allowed.sum())


def _explain_rejected(obj: Any, role: str) -> None:
    """Raises the :class:`~logitgate.UsageError` that says why the core could not take ``obj``
    as ``role``: "mask" (an int32 ``[batch, words]`` buffer on the CPU, C-contiguous and
    writable for the fills) or "logits" (a writable float array). The core calls it when
    nanobind refused the object, on the error path only."""
    if isinstance(obj, np.ndarray):
        if not obj.dtype.isnative:
            native = obj.dtype.newbyteorder("=").str
            raise UsageError(
                f"{role} of byte order {obj.dtype.byteorder!r}: it must be the machine's own "
                f"(convert with .astype({native!r}))",
                code=f"{role}-byteorder",
            )
        if role == "mask":
            _explain_mask(obj.dtype == np.int32, str(obj.dtype), obj.ndim, obj.shape, obj.flags.c_contiguous, True)
            if not obj.flags.writeable:
                raise UsageError("mask is read-only: the core writes the allowed tokens into it", code="mask-readonly")
        elif not obj.flags.writeable:
            raise UsageError("logits are read-only: the mask is applied in place", code="logits-readonly")
        if role == "logits":
            raise UsageError(f"logits of dtype {obj.dtype} cannot be masked", code="logits-dtype")
    elif type(obj).__module__.startswith("torch"):
        import torch

        if role == "mask":
            on_cpu = obj.device.type == "cpu"
            _explain_mask(
                obj.dtype == torch.int32, str(obj.dtype), obj.ndim, tuple(obj.shape), obj.is_contiguous(), on_cpu
            )
    else:
        what = "an int32 numpy array or torch tensor" if role == "mask" else "a numpy array or a torch tensor"
        raise UsageError(f"{role} must be {what}, not {type(obj).__name__}", code=f"{role}-type")
    raise UsageError(f"{role} of type {type(obj).__name__} was not accepted", code=f"{role}-type")


def _explain_mask(
    is_int32: bool, dtype: str, ndim: int, shape: tuple[int, ...], c_contiguous: bool, on_cpu: bool
) -> None:
    """Raises for what a mask buffer the core fills must be: int32, [batch, words],
    C-contiguous, on the CPU."""
    if not is_int32:
        raise UsageError(f"mask dtype is {dtype}, it must be int32 (lg.allocate_mask makes one)", code="mask-dtype")
    if ndim != 2:
        raise UsageError(f"mask must be 2-D [batch, words], got shape {shape}", code="mask-shape")
    if not c_contiguous:
        raise UsageError(
            "mask must be C-contiguous: the core writes its rows in place, and a copy would lose them",
            code="mask-layout",
        )
    if not on_cpu:
        raise UsageError(
            "mask must be on the CPU: the core writes it (copy it to the device afterwards)", code="mask-device"
        )


def fill_masks(matchers: Sequence[Any], bits: np.ndarray, threads: int | None = None) -> None:
    """Fills row ``i`` of ``bits`` for ``matchers[i]`` on a thread pool, GIL released.

    ``threads`` defaults to the number of CPUs. Each matcher may appear once.
    """
    from . import _core

    n = threads if threads is not None else (os.cpu_count() or 1)
    _core.fill_masks(list(matchers), bits, n)
