"""
Triton Custom Operators
=======================

After this page you will be able to turn Triton kernels into a PyTorch
operator that trains, compiles, exports and reports its FLOPs, and to test
those kernels without a GPU, in Triton's interpreter. You will also see, as
measured by the page, what ``torch.compile`` receives from a bare Triton
kernel, a ``triton_op`` and a ``custom_op``.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * How to wrap Triton kernels with ``triton_op`` and ``wrap_triton``,
         and why the operator's body needs a path for every device
       * How to run and test Triton kernels without a GPU, in Triton's
         interpreter
       * How to train through a Triton kernel: a backward that is a
         ``triton_op`` too, registered with ``register_autograd``
       * How ``triton.autotune`` and a FLOP formula fit in
       * What ``torch.compile`` and ``torch.export`` see of a bare kernel, a
         ``triton_op`` and a ``custom_op``

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * Triton (it comes with PyTorch's CUDA wheels for Linux); a CUDA GPU
         for compiled kernels. Without a GPU the kernels run in Triton's
         interpreter; with neither, the page runs its PyTorch paths
       * Matplotlib
       * :ref:`sphx_glr_tutorials_python_custom_ops.py`

.. admonition:: Checklist
   :class: checklist

   #. Write the kernel with ``@triton.jit`` and test it against a PyTorch
      reference: on a GPU, or on CPU tensors in Triton's interpreter
      (``TRITON_INTERPRET=1``, set before anything imports ``triton``).
   #. Wrap it with ``@torch.library.triton_op``: the body launches the kernel
      through ``torch.library.wrap_triton`` and has a path made of PyTorch
      operations for every other device.
   #. Add ``register_kernel("cpu")`` if eager CPU calls need their own kernel.
   #. For training, write the backward as a second ``triton_op``, connect it
      with ``register_autograd`` and run ``gradcheck``.
   #. Add ``@triton.autotune`` with a few configs and a ``key``; launch with a
      grid function of the chosen meta-parameters.
   #. Register a FLOP formula with ``register_flop_formula`` so that
      ``FlopCounterMode`` counts the operator.
   #. Run ``opcheck`` with empty, non-contiguous, permuted and
      ``requires_grad`` samples on every device, and compile with
      ``fullgraph=True``.
"""

# %%
# Setting up
# ----------
#
# ``torch.library.triton_op`` and ``torch.library.wrap_triton`` are public
# from PyTorch 2.6. Without a GPU, Triton's *interpreter* runs a kernel block
# by block with NumPy, on CPU tensors: slowly, but it executes the code you
# wrote, masks and dtype conversions included. ``TRITON_INTERPRET=1`` turns
# it on; the page sets it before importing Triton whenever no GPU is present.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import os

# Before anything imports Triton (torch._dynamo does): see "The Triton kernels".
triton_imported_before_this_page = "triton" in sys.modules
if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import functools
import math
import re
import time
import timeit

import matplotlib.pyplot as plt
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode, register_flop_formula

torch.manual_seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")

try:
    import triton
    import triton.language as tl
except ImportError:
    if torch.cuda.is_available():
        raise  # with a GPU, the Triton paths must run, not be skipped
    triton = None

if triton is None:
    KERNELS_RUN_ON = None
    print("Triton is not installed: every path below runs the PyTorch code")
elif os.environ.get("TRITON_INTERPRET") == "1":
    KERNELS_RUN_ON = "interpreter"
    print(f"Triton {triton.__version__}: the kernels run in its interpreter, on CPU")
else:
    KERNELS_RUN_ON = "gpu"
    print(f"Triton {triton.__version__}: the kernels run compiled, on the GPU")
if torch.cuda.is_available() and KERNELS_RUN_ON != "gpu":
    raise RuntimeError("a GPU is present: unset TRITON_INTERPRET so that it is used")

# %%
# The operation: SiLU times a gate
# --------------------------------
#
# The feed-forward blocks of many language models compute
# ``silu(gate) * up``. Eager PyTorch does that in two operations with a
# temporary tensor between them; a fused kernel reads both inputs once and
# writes the result once. The PyTorch version is our reference, and the
# implementation wherever Triton cannot run:


def silu_mul_torch(gate, up):
    """silu(gate) * up, computed in float32 (float64 for float64 inputs)."""
    compute_dtype = torch.promote_types(gate.dtype, torch.float32)
    result = F.silu(gate.to(compute_dtype)) * up.to(compute_dtype)
    return result.to(gate.dtype)


SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_silu_mul_args(gate, up, names=("gate", "up")):
    """Raise ValueError for inputs the kernels do not support."""
    first, second = names
    if gate.shape != up.shape:
        raise ValueError(
            f"silu_mul: {first} and {second} must have the same shape, got "
            f"{tuple(gate.shape)} and {tuple(up.shape)}"
        )
    if gate.dtype != up.dtype or gate.device != up.device:
        raise ValueError(
            f"silu_mul: {first} and {second} must share dtype and device, got "
            f"{gate.dtype} on {gate.device} and {up.dtype} on {up.device}"
        )
    if gate.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"silu_mul: expected a floating dtype, got {gate.dtype}")


# %%
# The Triton kernels
# ------------------
#
# Each *program* of a ``triton.jit`` kernel handles ``BLOCK_SIZE``
# consecutive elements: it computes their offsets, masks off those past the
# end, loads the inputs, computes in float32 (float64 for float64 inputs,
# which ``gradcheck`` needs) and stores in the output's dtype. With
# ``s = sigmoid(g)``, the backward kernel computes the derivatives of
# ``g * s * u``: ``u * s * (1 + g * (1 - s))`` for the gate, ``g * s`` for
# ``u``.
#
# The forward kernel is *autotuned*: ``triton.autotune`` gets a few
# ``triton.Config`` candidates and a ``key``, the arguments whose values
# decide which candidate is fastest. Our own ``do_bench`` counts the
# timings, and times on the CPU in the interpreter, which has no GPU timer.

autotune_timings = {"count": 0}


def time_config(kernel_call, quantiles):
    """Time one autotuning candidate, in milliseconds, for each quantile."""
    autotune_timings["count"] += 1
    if KERNELS_RUN_ON == "gpu":
        return triton.testing.do_bench(kernel_call, quantiles=quantiles)
    start = time.perf_counter()
    kernel_call()
    return [(time.perf_counter() - start) * 1e3] * len(quantiles)


BACKWARD_BLOCK_SIZE = 512

if triton is not None:

    @triton.autotune(
        configs=[
            triton.Config({"BLOCK_SIZE": 128}, num_warps=2),
            triton.Config({"BLOCK_SIZE": 512}, num_warps=4),
            triton.Config({"BLOCK_SIZE": 1024}, num_warps=8),
        ],
        key=["n_elements"],
        do_bench=time_config,
    )
    @triton.jit
    def silu_mul_kernel(
        gate_ptr, up_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr
    ):
        offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        in_bounds = offsets < n_elements
        gate = tl.load(gate_ptr + offsets, mask=in_bounds)
        up = tl.load(up_ptr + offsets, mask=in_bounds)
        if gate.dtype != tl.float64:
            gate = gate.to(tl.float32)
            up = up.to(tl.float32)
        sigmoid = 1.0 / (1.0 + tl.exp(-gate))
        result = gate * sigmoid * up
        tl.store(out_ptr + offsets, result.to(out_ptr.dtype.element_ty), mask=in_bounds)

    @triton.jit
    def silu_mul_backward_kernel(
        grad_out_ptr,
        gate_ptr,
        up_ptr,
        grad_gate_ptr,
        grad_up_ptr,
        n_elements,
        BLOCK_SIZE: tl.constexpr,
    ):
        offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        in_bounds = offsets < n_elements
        grad_out = tl.load(grad_out_ptr + offsets, mask=in_bounds)
        gate = tl.load(gate_ptr + offsets, mask=in_bounds)
        up = tl.load(up_ptr + offsets, mask=in_bounds)
        if gate.dtype != tl.float64:
            grad_out = grad_out.to(tl.float32)
            gate = gate.to(tl.float32)
            up = up.to(tl.float32)
        sigmoid = 1.0 / (1.0 + tl.exp(-gate))
        grad_gate = grad_out * up * sigmoid * (1.0 + gate * (1.0 - sigmoid))
        grad_up = grad_out * gate * sigmoid
        grad_gate = grad_gate.to(grad_gate_ptr.dtype.element_ty)
        tl.store(grad_gate_ptr + offsets, grad_gate, mask=in_bounds)
        grad_up = grad_up.to(grad_up_ptr.dtype.element_ty)
        tl.store(grad_up_ptr + offsets, grad_up, mask=in_bounds)


# %%
# Two functions launch the kernels on contiguous tensors. The number of
# programs depends on the ``BLOCK_SIZE`` the autotuner picks, so the grid is a
# function of the chosen meta-parameters. ``traceable=True`` first wraps the
# kernel with ``torch.library.wrap_triton``, which a ``triton_op``'s body must
# do so that the compiler can record the launch.


def launch_silu_mul(gate, up, *, traceable=False):
    """silu(gate) * up computed by silu_mul_kernel, in a new tensor."""
    out = torch.empty_like(gate)
    n_elements = out.numel()

    def grid(meta):
        return (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)

    kernel = silu_mul_kernel
    kernel = torch.library.wrap_triton(kernel) if traceable else kernel
    kernel[grid](gate, up, out, n_elements)
    return out


def launch_silu_mul_backward(grad_out, gate, up, *, traceable=False):
    """The gradients of silu(gate) * up, computed by silu_mul_backward_kernel."""
    grad_gate, grad_up = torch.empty_like(gate), torch.empty_like(up)
    grid = (triton.cdiv(gate.numel(), BACKWARD_BLOCK_SIZE),)
    kernel = silu_mul_backward_kernel
    kernel = torch.library.wrap_triton(kernel) if traceable else kernel
    pointers = (grad_out, gate, up, grad_gate, grad_up)
    kernel[grid](*pointers, gate.numel(), BLOCK_SIZE=BACKWARD_BLOCK_SIZE)
    return grad_gate, grad_up


# %%
# ``triton.jit`` reads ``TRITON_INTERPRET`` when it decorates a kernel, so
# here both kernels are interpreted functions. Triton's own helpers, such as
# ``tl.sigmoid``, were decorated when ``triton`` was first imported: in a
# process that imported it before the variable was set (a gallery worker may
# have, for another page) they cannot run in the interpreter. That is why
# the kernels compute the sigmoid from the built-in ``tl.exp``.

if KERNELS_RUN_ON == "interpreter":
    from triton.runtime.interpreter import InterpretedFunction

    assert isinstance(silu_mul_kernel.fn, InterpretedFunction)
    assert isinstance(silu_mul_backward_kernel, InterpretedFunction)
    sigmoid_interpreted = isinstance(tl.sigmoid, InterpretedFunction)
    assert sigmoid_interpreted == (not triton_imported_before_this_page)
    print(
        "both kernels are interpreted functions; tl.sigmoid is one too: "
        f"{sigmoid_interpreted} (triton imported before this page: "
        f"{triton_imported_before_this_page})"
    )
elif KERNELS_RUN_ON == "gpu":
    print("both kernels are compiled for the GPU by triton.jit")
else:
    print("no kernels: Triton is not installed")

# %%
# The kernels on their own
# ------------------------
#
# Before wrapping anything, check the kernels against the reference where
# they run: sizes that are and are not a multiple of the block sizes, an
# empty tensor, each supported dtype, with ``assert_close``'s default
# tolerances.

kernel_device = "cuda" if KERNELS_RUN_ON == "gpu" else "cpu"


def reference_gradients(grad_out, gate, up):
    """The gradients of silu(gate) * up, computed by PyTorch's autograd."""
    gate = gate.detach().requires_grad_()
    up = up.detach().requires_grad_()
    return torch.autograd.grad(silu_mul_torch(gate, up), (gate, up), grad_out)


if KERNELS_RUN_ON is not None:
    checked = 0
    for dtype in SUPPORTED_DTYPES:
        for n_elements in (0, 1, 1000, 2048):
            gate, up, grad_out = torch.randn(
                3, n_elements, device=kernel_device, dtype=dtype
            ).unbind(0)
            torch.testing.assert_close(
                launch_silu_mul(gate, up), silu_mul_torch(gate, up)
            )
            torch.testing.assert_close(
                launch_silu_mul_backward(grad_out, gate, up),
                reference_gradients(grad_out, gate, up),
            )
            checked += 1
    print(f"forward and backward kernels match PyTorch in {checked} cases")
else:
    print("Triton is not installed, so there are no kernels to check.")

# %%
# A first attempt: Triton in the body, a CPU kernel on the side
# -------------------------------------------------------------
#
# ``triton_op`` makes an operator from a function, like ``custom_op``, but
# the body may contain only PyTorch operations and Triton kernels launched
# through ``wrap_triton``. The compiler then traces *into* the body, which
# also serves as the fake kernel. A natural first attempt puts only the
# Triton launch in the body and adds a CPU kernel with
# ``register_kernel("cpu")``:

if triton is not None:

    @torch.library.triton_op("triton_ops::silu_mul_gpu_only", mutates_args=())
    def silu_mul_gpu_only(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        check_silu_mul_args(gate, up)
        return launch_silu_mul(gate.contiguous(), up.contiguous(), traceable=True)

    @silu_mul_gpu_only.register_kernel("cpu")
    def _(gate, up):
        check_silu_mul_args(gate, up)
        return silu_mul_torch(gate.contiguous(), up.contiguous())


# %%
# An eager CPU call goes to the CPU kernel and works. ``opcheck``, which also
# traces the operator as the compiler does, disagrees; with
# ``raise_exception=False`` it returns each sub-test's outcome.

# sphinx_gallery_start_ignore
import contextlib
import logging
import warnings


@contextlib.contextmanager
def compiler_logs_silenced():
    """Hide the warnings and log records of a check that is meant to fail."""
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(logging.NOTSET)


def first_line(err, width=None):
    return f"{type(err).__name__}: {str(err).strip().splitlines()[0][:width]}"


# sphinx_gallery_end_ignore

if triton is not None:
    gate, up = torch.randn(4, 300), torch.randn(4, 300)
    torch.testing.assert_close(silu_mul_gpu_only(gate, up), silu_mul_torch(gate, up))
    print("eager call on CPU tensors: correct result from the CPU kernel")
    with compiler_logs_silenced():  # the failing tracing logs long warnings
        report = torch.library.opcheck(
            silu_mul_gpu_only, (gate, up), raise_exception=False
        )
    for name, outcome in report.items():
        print(f"{name}: {outcome if outcome == 'SUCCESS' else first_line(outcome, 90)}")
    failed = {name for name, outcome in report.items() if outcome != "SUCCESS"}
    assert "test_aot_dispatch_dynamic" in failed
    assert report["test_schema"] == "SUCCESS"
    if KERNELS_RUN_ON == "interpreter":
        assert "test_faketensor" in failed
else:
    print("Triton is not installed, so this failing example is skipped.")

# %%
# ``test_aot_dispatch_dynamic`` fails because AOTAutograd, the compiler's
# autograd and functionalization pass, never calls a ``triton_op``'s
# registered kernels: it traces the body, whatever the device, and here the
# body launches the Triton kernel on CPU tensors. (An interpreted kernel
# cannot be traced at all, so in the interpreter ``test_faketensor`` fails
# too.) A registered kernel serves eager calls only.
#
# The fix: make the body handle every device
# -------------------------------------------
#
# The body is traced with fake tensors whose device is known, so an ordinary
# ``if`` can choose a traceable path: the Triton kernel for CUDA tensors when
# Triton compiles for the GPU, PyTorch operations otherwise. The CPU kernel
# of a real project would be PyTorch or C++ code, as the interpreter is far
# too slow (measured below); this page's CPU kernel launches the kernels in
# the interpreter, so that its eager CPU calls, ``gradcheck`` and ``opcheck``
# included, run the Triton code. It counts its calls, to show which path
# ran.


def triton_runs_on(device):
    """Whether this page launches its Triton kernels for tensors on device."""
    if KERNELS_RUN_ON == "gpu":
        return device.type == "cuda"
    return KERNELS_RUN_ON == "interpreter" and device.type == "cpu"


cpu_kernel_calls = {"count": 0}


@torch.library.triton_op("triton_ops::silu_mul", mutates_args=())
def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    check_silu_mul_args(gate, up)
    gate, up = gate.contiguous(), up.contiguous()
    if gate.device.type == "cuda" and KERNELS_RUN_ON == "gpu":
        return launch_silu_mul(gate, up, traceable=True)
    return silu_mul_torch(gate, up)


@silu_mul.register_kernel("cpu")
def _(gate, up):
    cpu_kernel_calls["count"] += 1
    check_silu_mul_args(gate, up)
    gate, up = gate.contiguous(), up.contiguous()
    if triton_runs_on(gate.device):
        return launch_silu_mul(gate, up)
    return silu_mul_torch(gate, up)


# %%
# Checking the results, and which path ran
# ----------------------------------------
#
# These samples are the inputs that break operators most often: empty
# tensors, transposed and strided views, dense tensors not in row-major
# order, half precision, sizes that are no multiple of a block size, inputs
# that require grad. On each device the operator must match the reference,
# CUDA tensors must not reach the CPU kernel, and mismatched shapes must
# raise a ``ValueError`` that names the problem.


def samples(device):
    """(gate, up) pairs, each a layout or dtype that breaks kernels."""

    def randn(*shape, **kwargs):
        return torch.randn(*shape, device=device, **kwargs)

    return {
        "empty": (randn(0, 4), randn(0, 4)),
        "transposed": (randn(8, 6).t(), randn(6, 8)),
        "every other column": (randn(4, 10)[..., ::2], randn(4, 5)),
        "permuted": (randn(2, 3, 4, 5).permute(0, 2, 3, 1), randn(2, 4, 5, 3)),
        "channels_last": (
            randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
            randn(2, 3, 4, 5),
        ),
        "bfloat16": (
            randn(8, 257, dtype=torch.bfloat16),
            randn(8, 257, dtype=torch.bfloat16),
        ),
        "float16": (
            randn(5, 33, dtype=torch.float16),
            randn(5, 33, dtype=torch.float16),
        ),
        "requires_grad": (
            randn(3, 7, requires_grad=True),
            randn(3, 7, requires_grad=True),
        ),
    }


def path_name(device):
    if not triton_runs_on(torch.device(device)):
        return "PyTorch operations"
    where = "in the interpreter" if KERNELS_RUN_ON == "interpreter" else "on the GPU"
    return f"the Triton kernel {where}"


for device in devices:
    calls_before = cpu_kernel_calls["count"]
    for gate, up in samples(device).values():
        torch.testing.assert_close(silu_mul(gate, up), silu_mul_torch(gate, up))
    used_cpu_kernel = cpu_kernel_calls["count"] > calls_before
    assert used_cpu_kernel == (device == "cpu")
    kernel = "registered CPU kernel" if used_cpu_kernel else "body"
    print(f"{device}: matches the reference; the {kernel} ran {path_name(device)}")
    try:
        silu_mul(torch.randn(3, 4, device=device), torch.randn(4, 3, device=device))
    except ValueError as err:
        print(f"{device}: bad input raises {first_line(err)}")
    else:
        raise AssertionError(f"expected mismatched shapes to be rejected on {device}")

# %%
# How slow is the interpreter? The best of three calls on a hundred thousand
# elements, against PyTorch's CPU operations (after a first call, which also
# autotunes):

if KERNELS_RUN_ON == "interpreter":
    gate, up = torch.randn(2, 100_000)
    seconds = {}
    for name, fn in [("interpreter", launch_silu_mul), ("PyTorch", silu_mul_torch)]:
        fn(gate, up)
        call = functools.partial(fn, gate, up)
        seconds[name] = min(timeit.repeat(call, number=1, repeat=3))
    ratio = seconds["interpreter"] / seconds["PyTorch"]
    assert ratio > 1
    print(
        f"interpreter: {seconds['interpreter'] * 1e3:.1f} ms, PyTorch: "
        f"{seconds['PyTorch'] * 1e3:.2f} ms, {ratio:.0f} times slower"
    )
else:
    print("the kernels are not interpreted here")

# %%
# Training: a backward that is a ``triton_op`` too
# ------------------------------------------------
#
# Autograd knows nothing about the operator yet. The forward records a node
# in the autograd graph, and the error comes when the backward reaches it:

gate = torch.randn(3, 5, requires_grad=True)
try:
    silu_mul(gate, torch.randn(3, 5)).sum().backward()
except RuntimeError as err:
    print(first_line(err))
    assert "register_autograd" in str(err)
else:
    raise AssertionError("expected the backward to fail without a formula")

# %%
# The backward is a second operator. As a ``triton_op`` it is as visible to
# the compiler as the forward: a body with a path for every device, and a
# CPU kernel.


def silu_mul_backward_torch(grad_out, gate, up):
    """The gradients of silu(gate) * up, computed like the backward kernel."""
    dtype = gate.dtype
    compute_dtype = torch.promote_types(dtype, torch.float32)
    grad_out, gate, up = (t.to(compute_dtype) for t in (grad_out, gate, up))
    sigmoid = torch.sigmoid(gate)
    grad_gate = grad_out * up * sigmoid * (1 + gate * (1 - sigmoid))
    grad_up = grad_out * gate * sigmoid
    return grad_gate.to(dtype), grad_up.to(dtype)


@torch.library.triton_op("triton_ops::silu_mul_backward", mutates_args=())
def silu_mul_backward(
    grad_out: torch.Tensor, gate: torch.Tensor, up: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    check_silu_mul_args(gate, up)
    check_silu_mul_args(grad_out, gate, names=("grad_out", "gate"))
    grad_out, gate, up = grad_out.contiguous(), gate.contiguous(), up.contiguous()
    if gate.device.type == "cuda" and KERNELS_RUN_ON == "gpu":
        return launch_silu_mul_backward(grad_out, gate, up, traceable=True)
    return silu_mul_backward_torch(grad_out, gate, up)


@silu_mul_backward.register_kernel("cpu")
def _(grad_out, gate, up):
    check_silu_mul_args(gate, up)
    check_silu_mul_args(grad_out, gate, names=("grad_out", "gate"))
    grad_out, gate, up = grad_out.contiguous(), gate.contiguous(), up.contiguous()
    if triton_runs_on(gate.device):
        return launch_silu_mul_backward(grad_out, gate, up)
    return silu_mul_backward_torch(grad_out, gate, up)


# %%
# ``register_autograd`` connects the two: ``setup_context`` saves the inputs
# during the forward, and the backward formula calls the backward operator,
# whose body makes an incoming gradient of any layout contiguous.


def save_inputs(ctx, inputs, output):
    gate, up = inputs
    ctx.save_for_backward(gate, up)


def silu_mul_grad(ctx, grad_out):
    gate, up = ctx.saved_tensors
    return silu_mul_backward(grad_out, gate, up)


silu_mul.register_autograd(silu_mul_grad, setup_context=save_inputs)

# %%
# ``gradcheck`` compares the backward with finite differences of the forward
# in float64, which the kernels, interpreted or not, compute in. On each
# device, float32 gradients over several blocks must also match PyTorch's.

for device in devices:
    gate = torch.randn(3, 7, device=device, dtype=torch.float64, requires_grad=True)
    up = torch.randn(3, 7, device=device, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(silu_mul, (gate, up))
    gate = torch.randn(2500, device=device, requires_grad=True)
    up = torch.randn(2500, device=device, requires_grad=True)
    grad_out = torch.randn(2500, device=device)
    grads = torch.autograd.grad(silu_mul(gate, up), (gate, up), grad_out)
    torch.testing.assert_close(grads, reference_gradients(grad_out, gate, up))
    print(f"{device}: gradcheck passed, float32 gradients match; {path_name(device)}")

# %%
# Autotuning the block size
# -------------------------
#
# The first launch for a new value of the key times every config; later
# launches with the same key reuse the winner. The autotuner adds the tensor
# arguments' dtypes to the key. Our counting ``do_bench`` shows the three
# cases, and the result is right whichever config won:

if KERNELS_RUN_ON is not None:
    configs = silu_mul_kernel.configs
    launches = [
        (3001, torch.float32, "new size"),
        (3001, torch.float32, "same size and dtype"),
        (3001, torch.float16, "same size, new dtype"),
    ]
    for n_elements, dtype, what in launches:
        gate, up = torch.randn(2, n_elements, device=kernel_device, dtype=dtype)
        timings_before = autotune_timings["count"]
        torch.testing.assert_close(launch_silu_mul(gate, up), silu_mul_torch(gate, up))
        timed = autotune_timings["count"] - timings_before
        assert timed == (0 if what == "same size and dtype" else len(configs))
        best = silu_mul_kernel.best_config
        assert best in configs
        print(
            f"{what}: {timed} of {len(configs)} configs timed, then "
            f"BLOCK_SIZE={best.kwargs['BLOCK_SIZE']}, num_warps={best.num_warps} ran"
        )
else:
    print("Triton is not installed, so there is nothing to autotune.")

# %%
# Which config wins in the interpreter says nothing about speed on a GPU;
# what it shows is the mechanism: one round of timings per new key.
#
# Testing with ``opcheck``
# ------------------------
#
# With its autograd formula in place, ``opcheck`` tests the operator, and
# the backward operator too, on the samples from above. On the CPU it
# compares the CPU kernel with the traced body.

for device in devices:
    for gate, up in samples(device).values():
        torch.library.opcheck(silu_mul, (gate, up))
        grad_out = torch.randn(gate.shape, device=device, dtype=gate.dtype)
        backward_args = (grad_out, gate.detach(), up.detach())
        torch.library.opcheck(silu_mul_backward, backward_args)
    print(
        f"{device}: opcheck passed for both operators on: {', '.join(samples(device))}"
    )

# %%
# Counting FLOPs
# --------------
#
# ``torch.utils.flop_counter.FlopCounterMode`` counts floating-point
# operations from a formula per operator. PyTorch ships formulas for matrix
# products, convolutions and attention; ``register_flop_formula`` adds ours.
# A formula receives the *shapes* of the tensor arguments. We count each
# exponential, addition, subtraction, multiplication and division as one, as
# the kernels compute them.

FORWARD_FLOPS_PER_ELEMENT = 5  # the sigmoid (exp, add, divide), two multiplies
BACKWARD_FLOPS_PER_ELEMENT = 11  # the sigmoid again, 6 for grad_gate, 2 for grad_up


@register_flop_formula(torch.ops.triton_ops.silu_mul)
def silu_mul_flops(gate_shape, up_shape, **kwargs):
    return FORWARD_FLOPS_PER_ELEMENT * math.prod(gate_shape)


@register_flop_formula(torch.ops.triton_ops.silu_mul_backward)
def silu_mul_backward_flops(grad_out_shape, gate_shape, up_shape, **kwargs):
    return BACKWARD_FLOPS_PER_ELEMENT * math.prod(gate_shape)


# %%
# One training step under the counter: each operator reports what its
# formula says, and nothing else is counted.

for device in devices:
    gate = torch.randn(64, 96, device=device, requires_grad=True)
    up = torch.randn(64, 96, device=device, requires_grad=True)
    with FlopCounterMode(display=False) as flop_counter:
        silu_mul(gate, up).sum().backward()
    counts = {str(op): n for op, n in flop_counter.get_flop_counts()["Global"].items()}
    assert counts == {
        "triton_ops.silu_mul": FORWARD_FLOPS_PER_ELEMENT * gate.numel(),
        "triton_ops.silu_mul_backward": BACKWARD_FLOPS_PER_ELEMENT * gate.numel(),
    }
    assert flop_counter.get_total_flops() == sum(counts.values())
    print(f"{device}: {counts}")

# %%
# Three ways to call a Triton kernel from a model
# -----------------------------------------------
#
# A model can launch a Triton kernel directly (a *bare* kernel), call a
# ``triton_op``, or call a ``custom_op`` that launches the kernel in its
# body, the way to make a Triton kernel an operator before ``triton_op``
# existed. We build that last one, with the same CPU path and backward:


@torch.library.custom_op("triton_ops::silu_mul_opaque", mutates_args=())
def silu_mul_opaque(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    check_silu_mul_args(gate, up)
    gate, up = gate.contiguous(), up.contiguous()
    if triton_runs_on(gate.device):
        return launch_silu_mul(gate, up)
    return silu_mul_torch(gate, up)


@silu_mul_opaque.register_fake
def _(gate, up):
    check_silu_mul_args(gate, up)
    return torch.empty_like(gate, memory_format=torch.contiguous_format)


silu_mul_opaque.register_autograd(silu_mul_grad, setup_context=save_inputs)

for device in devices:
    for gate, up in samples(device).values():
        torch.testing.assert_close(silu_mul_opaque(gate, up), silu_mul_torch(gate, up))
        torch.library.opcheck(silu_mul_opaque, (gate, up))
print(f"triton_ops::silu_mul_opaque matches the reference, opcheck passed on {devices}")

# %%
# Each variant computes ``silu(gate) * up * 2``, so that there is an
# operation around the kernel:


def scaled_by_bare_kernel(gate, up):
    return launch_silu_mul(gate, up) * 2.0


def scaled_by_triton_op(gate, up):
    return silu_mul(gate, up) * 2.0


def scaled_by_custom_op(gate, up):
    return silu_mul_opaque(gate, up) * 2.0


VARIANTS = {
    "bare @triton.jit kernel": scaled_by_bare_kernel,
    "triton_op + wrap_triton": scaled_by_triton_op,
    "custom_op around the launch": scaled_by_custom_op,
}

# %%
# ``torch.compile`` works in stages: Dynamo captures the Python function as
# a graph of operator calls; AOTAutograd traces that graph again, adds the
# backward and removes mutation; a backend such as Inductor turns the result
# into code. The backend below records the three graphs and runs them. It is
# built with ``aot_autograd``, the helper PyTorch's ``aot_eager`` backend is
# made from; it lives in a private module, as no public API returns the
# graphs AOTAutograd produces.
#
# For each variant we ask: does it compile with ``fullgraph=True``, what do
# Dynamo and AOTAutograd record, does a compiled training step give the
# reference gradients, and what does ``torch.export`` keep? Dynamo sees a
# bare kernel only when Triton compiles for a GPU, so without one that row is
# not run.

from torch._dynamo.backends.common import aot_autograd

NOT_RUN = "needs a GPU; not run here"


def call_targets(graph_module):
    """Short names of the operations called in an FX graph."""
    names = []
    for node in graph_module.graph.nodes:
        if node.op == "call_function":
            name = getattr(node.target, "__name__", str(node.target))
            names.append(name.split(".")[0])  # drop the overload: mul.Tensor
    return names


def compile_and_record(fn, *args):
    """Compile fn with fullgraph=True, run it, and return the output and graphs."""
    graphs = {}

    def keep(stage):
        def compiler(graph_module, example_inputs):
            graphs[stage] = call_targets(graph_module)
            return graph_module.forward

        return compiler

    run_aot = aot_autograd(
        fw_compiler=keep("AOTAutograd"), bw_compiler=keep("backward")
    )

    def backend(graph_module, example_inputs):
        graphs["Dynamo"] = call_targets(graph_module)
        return run_aot(graph_module, example_inputs)

    torch.compiler.reset()
    return torch.compile(fn, backend=backend, fullgraph=True)(*args), graphs


class Scaled(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, gate, up):
        return self.fn(gate, up)


def compare(label, fn, device):
    """One row of the table: what compiling, training and exporting fn gave."""
    if label.startswith("bare") and KERNELS_RUN_ON != "gpu":
        return dict.fromkeys(COLUMNS, NOT_RUN), {}
    gate = torch.randn(16, 128, device=device)
    up = torch.randn(16, 128, device=device)
    row, errors = {}, {}
    try:
        output, graphs = compile_and_record(fn, gate, up)
        torch.testing.assert_close(output, silu_mul_torch(gate, up) * 2.0)
        row["fullgraph=True"] = "compiles"
        row["Dynamo graph"] = ", ".join(graphs["Dynamo"])
        row["AOTAutograd graph"] = ", ".join(graphs["AOTAutograd"])
    except Exception as err:  # record what happened, whatever it is
        errors["compile"] = first_line(err, 100)
        row["fullgraph=True"] = "fails"
        row["Dynamo graph"] = row["AOTAutograd graph"] = "-"
    gate.requires_grad_()
    up.requires_grad_()
    try:
        output, graphs = compile_and_record(fn, gate, up)
        grads = torch.autograd.grad(output.sum(), (gate, up))
        reference = silu_mul_torch(gate, up) * 2.0
        expected = torch.autograd.grad(reference.sum(), (gate, up))
        torch.testing.assert_close(grads, expected)
        row["compiled training"] = "trains"
        row["backward graph"] = ", ".join(graphs["backward"])
    except Exception as err:
        errors["training"] = first_line(err, 100)
        row["compiled training"] = "does not train"
    try:
        exported = torch.export.export(Scaled(fn), (gate.detach(), up.detach()))
        row["torch.export"] = "keeps " + ", ".join(call_targets(exported.graph_module))
    except Exception as err:
        errors["export"] = first_line(err, 100)
        row["torch.export"] = "fails"
    return row, errors


COLUMNS = [
    "fullgraph=True",
    "Dynamo graph",
    "AOTAutograd graph",
    "compiled training",
    "torch.export",
]
compare_on = "cuda" if KERNELS_RUN_ON == "gpu" else "cpu"
table, backward_graphs = {}, {}
with compiler_logs_silenced():
    for label, fn in VARIANTS.items():
        row, errors = compare(label, fn, compare_on)
        backward_graphs[label] = row.pop("backward graph", None)
        table[label] = row
        for stage, message in errors.items():
            print(f"{label}, {stage}: {message}")

print(f"\nrun on: {compare_on}")
for label, row in table.items():
    print(f"\n{label}")
    for column in COLUMNS:
        print(f"  {column:<19}{row[column]}")
    if backward_graphs[label] is not None:
        print(f"  {'backward graph':<19}{backward_graphs[label]}")

# %%
# What the table shows (the cell below asserts each point on the rows that
# ran here):
#
# * Both operators compile as one graph, in which Dynamo records one call to
#   the operator, then the multiplication.
# * AOTAutograd keeps the ``custom_op`` as one call that no backend can look
#   into, and replaces the ``triton_op`` by its body: on a GPU the Triton
#   kernel itself, as a ``triton_kernel_wrapper_functional`` call; on a CPU
#   the body's PyTorch operations.
# * Both train, through the same backward operator, a ``triton_op`` whose
#   body appears in both backward graphs: whether the compiler sees a kernel
#   is decided operator by operator.
# * ``torch.export`` keeps both operators as single calls (see below).
# * A bare kernel has no autograd formula, so a compiled training step has
#   nothing to differentiate through. On a GPU, Dynamo records it as
#   ``triton_kernel_wrapper_mutation``, a launch that writes into its output
#   argument, which AOTAutograd turns into the functional form.

triton_op_row = table["triton_op + wrap_triton"]
custom_op_row = table["custom_op around the launch"]
for row in (triton_op_row, custom_op_row):
    assert row["fullgraph=True"] == "compiles"
    assert row["compiled training"] == "trains"
assert triton_op_row["Dynamo graph"] == "silu_mul, mul"
assert custom_op_row["Dynamo graph"] == "silu_mul_opaque, mul"
assert custom_op_row["AOTAutograd graph"] == "silu_mul_opaque, mul"
assert "silu_mul" not in triton_op_row["AOTAutograd graph"].split(", ")
for label in ("triton_op + wrap_triton", "custom_op around the launch"):
    assert "silu_mul_backward" not in backward_graphs[label].split(", ")
    if KERNELS_RUN_ON == "gpu":
        assert "triton_kernel_wrapper_functional" in backward_graphs[label]
    else:
        assert "sigmoid" in backward_graphs[label]
if KERNELS_RUN_ON == "gpu":
    assert "triton_kernel_wrapper_functional" in triton_op_row["AOTAutograd graph"]
    bare_row = table["bare @triton.jit kernel"]
    assert "triton_kernel_wrapper_mutation" in bare_row["Dynamo graph"]
    assert "triton_kernel_wrapper_functional" in bare_row["AOTAutograd graph"]
    assert bare_row["compiled training"] == "does not train"
else:
    assert triton_op_row["AOTAutograd graph"].split(", ")[0] == "silu"
    assert table["bare @triton.jit kernel"]["Dynamo graph"] == NOT_RUN
assert triton_op_row["torch.export"] == "keeps silu_mul, mul"
assert custom_op_row["torch.export"] == "keeps silu_mul_opaque, mul"
print("asserted: the triton_op was traced into, the custom_op was not")

# %%
# The table as a picture: amber where the variant works but the graph handed
# to the backend hides the kernel in an opaque call, red where something
# fails, grey where this machine could not run the cell.

# sphinx_gallery_start_ignore
from matplotlib.patches import Rectangle

CELL_COLOURS = {
    "works": "#cdebd3",
    "works, kernel hidden": "#fbe3b5",
    "fails": "#f6c9c4",
    "not run here": "#e3e3e3",
}


def cell_kind(column, text):
    if text == NOT_RUN:
        return "not run here"
    if text in ("fails", "does not train"):
        return "fails"
    if column == "AOTAutograd graph" and "silu_mul_opaque" in text:
        return "works, kernel hidden"
    return "works"


def wrap(text, width):
    """Break text into lines at spaces, or after an underscore in long names."""
    lines = [""]
    for chunk in re.findall(r"[^\s_]*_|[^\s_]+|\s+", text):
        if len(lines[-1] + chunk.rstrip()) > width and lines[-1].strip():
            lines.append("")
        lines[-1] += chunk if lines[-1] or not chunk.isspace() else ""
    return "\n".join(line.strip() for line in lines)


def draw_table(table, title):
    fig, ax = plt.subplots(figsize=(9, 4.6), layout="constrained")
    ax.set_xlim(0, len(COLUMNS) + 1.3)
    ax.set_ylim(len(table) + 1.5, 0.1)
    ax.set_axis_off()
    for col, column in enumerate(COLUMNS):
        header = wrap(column, 12)
        ax.text(col + 1.8, 0.55, header, ha="center", va="center", weight="bold")
    for row_index, (label, row) in enumerate(table.items(), start=1):
        ax.text(0.0, row_index + 0.45, wrap(label, 13), va="center")
        for col, column in enumerate(COLUMNS):
            text = row[column]
            colour = CELL_COLOURS[cell_kind(column, text)]
            ax.add_patch(
                Rectangle((col + 1.33, row_index), 0.94, 0.9, facecolor=colour)
            )
            ax.text(
                col + 1.8,
                row_index + 0.45,
                wrap(text, 16),
                ha="center",
                va="center",
                fontsize=9,
                color="#1a1a1a",
            )
    for index, (kind, colour) in enumerate(CELL_COLOURS.items()):
        x = 0.05 + index * 1.6
        ax.add_patch(Rectangle((x, len(table) + 1.1), 0.2, 0.28, facecolor=colour))
        ax.text(x + 0.28, len(table) + 1.24, kind, va="center", fontsize=9)
    ax.set_title(title)
    plt.show()


# sphinx_gallery_end_ignore

draw_table(table, f"What compiling and exporting each variant gave (on {compare_on})")

# %%
# Where the kernel ends up: Inductor's code
# -----------------------------------------
#
# On a GPU, Inductor's generated code shows what becomes of a ``triton_op``'s
# kernel: its source, emitted as written and launched as a kernel of its
# own, while the ``* 2.0`` becomes a separate kernel that Inductor
# generates. The ``custom_op``'s code holds no Triton source of ours, only a
# call to the operator. ``run_and_get_code`` returns that code; it is a
# private helper from PyTorch's own tests, as no public API returns it.

if KERNELS_RUN_ON == "gpu":
    from torch._inductor.utils import run_and_get_code

    gate = torch.randn(16, 128, device="cuda")
    up = torch.randn(16, 128, device="cuda")
    for label in ("triton_op + wrap_triton", "custom_op around the launch"):
        torch.compiler.reset()
        compiled = torch.compile(VARIANTS[label], fullgraph=True)
        output, sources = run_and_get_code(compiled, gate, up)
        torch.testing.assert_close(output, silu_mul_torch(gate, up) * 2.0)
        kernels = re.findall(r"async_compile\.triton\('(\w+)'", "\n".join(sources))
        ours = [name for name in kernels if name.startswith("silu_mul_kernel")]
        generated = [name for name in kernels if name not in ours]
        print(f"{label}: our kernels {ours}, Inductor's kernels {generated}")
        is_triton_op = label == "triton_op + wrap_triton"
        assert generated
        assert bool(ours) == is_triton_op
        our_source_line = "sigmoid = 1.0 / (1.0 + tl.exp(-gate))"
        assert any(our_source_line in source for source in sources) == is_triton_op
else:
    print(f"Inductor's generated GPU code: {NOT_RUN}")

# %%
# ``torch.export`` keeps the operator
# -----------------------------------
#
# Exporting differs from compiling on purpose: ``torch.export`` keeps a
# ``triton_op`` as one call to the named operator, so the exported program
# does not embed Triton code tied to one GPU and one Triton version. On
# every device present:

for device in devices:
    sample = (torch.randn(4, 64, device=device), torch.randn(4, 64, device=device))
    exported = torch.export.export(Scaled(scaled_by_triton_op), sample)
    targets = call_targets(exported.graph_module)
    assert targets.count("silu_mul") == 1
    expected = silu_mul_torch(*sample) * 2.0
    torch.testing.assert_close(exported.module()(*sample), expected)
    print(f"{device}: exported graph calls {targets}")

# %%
# Conclusion
# ----------
#
# Wrap Triton kernels with ``triton_op`` and launch them through
# ``wrap_triton``: the operator then works like a built-in one in eager
# mode, in autograd, under ``FlopCounterMode`` and in ``torch.export``,
# while ``torch.compile`` sees the kernel itself rather than an opaque call.
# Because the compiler traces the body, the body may hold only PyTorch
# operations and wrapped kernels, with a traceable path for every device you
# compile for; ``register_kernel`` serves eager calls only. Write the
# backward as a ``triton_op`` too, and test everything with ``opcheck`` and
# ``gradcheck``: on a GPU if you have one, in Triton's interpreter if not.
#
# Related pages:
#
# * :ref:`sphx_glr_tutorials_python_custom_ops.py` for ``custom_op`` itself
# * :ref:`sphx_glr_tutorials_custom_op_registrations.py` for
#   ``register_autograd`` and the other registrations
# * :ref:`sphx_glr_tutorials_cpp_custom_ops.py` for kernels written in C++
#   and CUDA
# * :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py` when a check fails
