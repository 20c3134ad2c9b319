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
