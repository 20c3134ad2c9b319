"""Operators for the tests, in the ``oc_test`` namespace: correct ones, broken
ones, and ones that crash or hang the process on empty inputs.

The tests import this module by name; an isolated run's child process runs
this file (``imports=[OPERATORS_FILE]``, ``--import OPERATORS_FILE``).
"""

import ctypes
import time
from pathlib import Path

import torch

OPERATORS_FILE = str(Path(__file__).resolve())


def scale_samples():
    """One sample of ``oc_test::scale``: what ``--samples FILE.py:function``
    may name."""
    return [(torch.randn(3, 4), 2.0)]


def scale_setup(ctx, inputs, output):
    ctx.factor = inputs[1]


def scale_backward(ctx, grad):
    return grad * ctx.factor, None


def twice_too_steep(ctx, grad):
    return grad * ctx.factor * 2, None


@torch.library.custom_op("oc_test::scale", mutates_args=())
def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    """Correct: a kernel, a fake kernel and a backward that agree."""
    return x * factor


@scale.register_fake
def _(x, factor):
    return torch.empty_like(x)


scale.register_autograd(scale_backward, setup_context=scale_setup)


@torch.library.custom_op("oc_test::wrong_fake", mutates_args=())
def wrong_fake(x: torch.Tensor, factor: float) -> torch.Tensor:
    """Broken: the fake kernel says the output has one row less."""
    return x * factor


@wrong_fake.register_fake
def _(x, factor):
    return x.new_empty(x.shape[0] - 1, *x.shape[1:])


wrong_fake.register_autograd(scale_backward, setup_context=scale_setup)


@torch.library.custom_op("oc_test::wrong_backward", mutates_args=())
def wrong_backward(x: torch.Tensor, factor: float) -> torch.Tensor:
    """Broken: the backward's gradient is twice the true one."""
    return x * factor


@wrong_backward.register_fake
def _(x, factor):
    return torch.empty_like(x)


wrong_backward.register_autograd(twice_too_steep, setup_context=scale_setup)


@torch.library.custom_op("oc_test::no_backward", mutates_args=())
def no_backward(x: torch.Tensor, factor: float) -> torch.Tensor:
    """Limited: no backward, so the gradient checks report a limitation."""
    return x * factor


@no_backward.register_fake
def _(x, factor):
    return torch.empty_like(x)


@torch.library.custom_op("oc_test::crash_on_empty", mutates_args=())
def crash_on_empty(x: torch.Tensor, factor: float) -> torch.Tensor:
    """Crashes the process (SIGSEGV) on an empty input, as a C kernel that
    reads its first element unchecked would."""
    if x.numel() == 0:
        ctypes.string_at(0)  # reads address 0
    return x * factor


@crash_on_empty.register_fake
def _(x, factor):
    return torch.empty_like(x)


crash_on_empty.register_autograd(scale_backward, setup_context=scale_setup)


@torch.library.custom_op("oc_test::hang_on_empty", mutates_args=())
def hang_on_empty(x: torch.Tensor, factor: float) -> torch.Tensor:
    """Hangs on an empty input, as a kernel waiting for work that never comes."""
    if x.numel() == 0:
        time.sleep(600)
    return x * factor


@hang_on_empty.register_fake
def _(x, factor):
    return torch.empty_like(x)


hang_on_empty.register_autograd(scale_backward, setup_context=scale_setup)


# The first call of an operator in a process imports parts of torch (a second
# or more). Made here, when a child process imports this file and before it
# starts its first step, it is not taken for a hang under the tests' timeout.
scale(torch.ones(1), 1.0)


# -- Real bugs that once passed, and correct operators once blamed ------------


def save_input(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def silu_backward_in_place(ctx, grad):
    (x,) = ctx.saved_tensors
    s = torch.sigmoid(x)
    slope = s * (1 + x * (1 - s))
    result = grad * slope
    slope.mul_(2)  # in place on a tensor autograd saved for the double backward
    return result


@torch.library.custom_op("oc_test::silu_breaks_twice", mutates_args=())
def silu_breaks_twice(x: torch.Tensor) -> torch.Tensor:
    """Broken: a right first derivative, but its backward writes in place into
    a tensor autograd saved, so the double backward raises."""
    return x * torch.sigmoid(x)


silu_breaks_twice.register_fake(lambda x: torch.empty_like(x))
silu_breaks_twice.register_autograd(silu_backward_in_place, setup_context=save_input)


def silu_backward_no_graph(ctx, grad):
    (x,) = ctx.saved_tensors
    with torch.no_grad():  # a backward outside autograd: no double backward
        s = torch.sigmoid(x)
        return grad * s * (1 + x * (1 - s))


@torch.library.custom_op("oc_test::silu_once", mutates_args=())
def silu_once(x: torch.Tensor) -> torch.Tensor:
    """Limited: a right first derivative computed outside autograd, so there
    is no double backward, by design."""
    return x * torch.sigmoid(x)


silu_once.register_fake(lambda x: torch.empty_like(x))
silu_once.register_autograd(silu_backward_no_graph, setup_context=save_input)


@torch.library.custom_op("oc_test::wrong_vmap", mutates_args=())
def wrong_vmap(x: torch.Tensor, factor: float) -> torch.Tensor:
    """Broken: its vmap rule returns two out_dims for its one output."""
    return x * factor


wrong_vmap.register_fake(lambda x, factor: torch.empty_like(x))


@wrong_vmap.register_vmap
def _(info, in_dims, x, factor):
    return x * factor, (0, 0)


@torch.library.custom_op("oc_test::wrong_strides", mutates_args=())
def wrong_strides(x: torch.Tensor) -> torch.Tensor:
    """Broken: the kernel returns row-major memory whatever it gets, the fake
    kernel promises the input's layout."""
    return (x * 2).contiguous()


wrong_strides.register_fake(lambda x: torch.empty_like(x))


@torch.library.custom_op("oc_test::sorted_with_order", mutates_args=())
def sorted_with_order(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Correct: the positions of the sorted values (integers), then the values;
    the gradient flows through the values alone."""
    values, order = torch.sort(x, dim=-1)
    return order, values


@sorted_with_order.register_fake
def _(x):
    return torch.empty_like(x, dtype=torch.long), torch.empty_like(x)


def sorted_setup(ctx, inputs, output):
    ctx.save_for_backward(output[0])


def sorted_backward(ctx, grad_order, grad_values):
    (order,) = ctx.saved_tensors
    return torch.zeros_like(grad_values).scatter(-1, order, grad_values)


sorted_with_order.register_autograd(sorted_backward, setup_context=sorted_setup)


@torch.library.custom_op("oc_test::padded_segments", mutates_args=())
def padded_segments(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Correct, for offsets that rise from 0 to the number of rows: each
    segment of rows, padded with zeros to the longest. Like most CPU kernels
    it does not check its offsets, and writes only the rows they name."""
    lengths = offsets[1:] - offsets[:-1]
    longest = int(lengths.max()) if lengths.numel() else 0
    out = torch.empty(lengths.numel(), longest, *values.shape[1:], dtype=values.dtype)
    starts, ends = offsets[:-1].tolist(), offsets[1:].tolist()
    for i, (start, end) in enumerate(zip(starts, ends, strict=True)):
        rows = values[start:end]
        out[i, : rows.shape[0]] = rows
        out[i, end - start :] = 0
    return out


@padded_segments.register_fake
def _(values, offsets):
    longest = torch.library.get_ctx().new_dynamic_size()
    return values.new_empty(offsets.shape[0] - 1, longest, *values.shape[1:])


@torch.library.custom_op("oc_test::unwritten_when_strided", mutates_args=())
def unwritten_when_strided(x: torch.Tensor) -> torch.Tensor:
    """Broken: on a non-contiguous input it returns memory it never wrote.
    What such memory holds differs from call to call only most of the time
    (a freed buffer may come back as it was); here it always does, so that
    the test of the detector is deterministic."""
    if not x.is_contiguous():
        _unwritten_calls.append(1)
        return torch.full(x.shape, float(len(_unwritten_calls)))
    return x * 2


_unwritten_calls = []


unwritten_when_strided.register_fake(
    lambda x: torch.empty_like(x, memory_format=torch.contiguous_format)
)


@torch.library.custom_op("oc_test::dequantize8", mutates_args=())
def dequantize8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Correct: float8 values times a float32 scale, computed in float32 (as
    quantization libraries do); no backward registered."""
    return q.to(torch.float32) * scale


dequantize8.register_fake(lambda q, scale: torch.empty_like(q, dtype=torch.float32))


@torch.library.custom_op("oc_test::quantize8", mutates_args=())
def quantize8(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Correct: float values over a scale, rounded to float8."""
    return (x.to(torch.float32) / scale).to(torch.float8_e4m3fn)


quantize8.register_fake(lambda x, scale: torch.empty_like(x, dtype=torch.float8_e4m3fn))


@torch.library.custom_op("oc_test::scale_in_place_undeclared", mutates_args=())
def scale_in_place_undeclared(x: torch.Tensor, factor: float) -> torch.Tensor:
    """Broken: it writes into x, which mutates_args does not declare."""
    x.mul_(factor)
    return x.clone()


scale_in_place_undeclared.register_fake(lambda x, factor: torch.empty_like(x))


@torch.library.custom_op("oc_test::chatty_crash_on_empty", mutates_args=())
def chatty_crash_on_empty(x: torch.Tensor, factor: float) -> torch.Tensor:
    """Crashes on an empty input, as crash_on_empty; says something on
    every other call, as kernels that log do."""
    if x.numel() == 0:
        ctypes.string_at(0)
    print(f"chatty kernel: {x.numel()} elements", flush=True)
    return x * factor


chatty_crash_on_empty.register_fake(lambda x, factor: torch.empty_like(x))


@torch.library.custom_op("oc_test::crash_unless_contiguous", mutates_args=())
def crash_unless_contiguous(x: torch.Tensor, factor: float) -> torch.Tensor:
    """Crashes on every layout but row-major, as a kernel that assumes it."""
    if not x.is_contiguous():
        ctypes.string_at(0)
    return x * factor


crash_unless_contiguous.register_fake(lambda x, factor: torch.empty_like(x))


@torch.library.custom_op("oc_test::crash_always", mutates_args=())
def crash_always(x: torch.Tensor, factor: float) -> torch.Tensor:
    """Crashes on every input, its own sample included."""
    ctypes.string_at(0)
    return x * factor


crash_always.register_fake(lambda x, factor: torch.empty_like(x))


@torch.library.custom_op("oc_test::reads_row_major", mutates_args=())
def reads_row_major(x: torch.Tensor) -> torch.Tensor:
    """Broken: it reads its input's memory as if it were row-major, as a C
    kernel that ignores strides does."""
    return torch.as_strided(x, x.shape, torch.empty(x.shape).stride()) * 1


reads_row_major.register_fake(lambda x: torch.empty_like(x))


def silu_backward_with_out(ctx, grad):
    (x,) = ctx.saved_tensors
    s = torch.sigmoid(x)
    slope = torch.empty_like(x)
    torch.mul(s, 1 + x * (1 - s), out=slope)  # out= has no derivative
    return grad * slope


@torch.library.custom_op("oc_test::silu_out_backward", mutates_args=())
def silu_out_backward(x: torch.Tensor) -> torch.Tensor:
    """Limited: its backward writes into an out= tensor, which autograd cannot
    differentiate: no double backward, by design (as PyTorch's chunked
    cross-entropy)."""
    return x * torch.sigmoid(x)


silu_out_backward.register_fake(lambda x: torch.empty_like(x))
silu_out_backward.register_autograd(silu_backward_with_out, setup_context=save_input)
