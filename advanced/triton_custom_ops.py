"""
Triton Custom Operators
=======================

After this page you will be able to turn Triton kernels into a PyTorch
operator that trains, compiles, exports and reports its FLOPs: a forward and a
backward kernel wrapped with ``torch.library.triton_op`` and
``torch.library.wrap_triton``, an autotuned block size, and a CPU kernel for
machines without a GPU. You will check the kernels against PyTorch on a GPU
or, without one, in Triton's interpreter on the CPU, and you will see what
``torch.compile`` receives from a bare Triton kernel, a ``triton_op`` and a
``custom_op``, measured by the page rather than recalled.

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
         interpreter, and without Triton the page runs its PyTorch paths
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
# ``torch.library.triton_op`` and ``torch.library.wrap_triton`` became public
# in PyTorch 2.6. Triton compiles kernels for GPUs; on a machine without one,
# Triton's *interpreter* can still execute a kernel, block by block with
# NumPy, on CPU tensors. It is slow, but it runs the very code you wrote,
# masks and dtype conversions included, so the kernels can be tested anywhere.
# The interpreter is switched on by the environment variable
# ``TRITON_INTERPRET=1``, which this page sets before it imports Triton
# whenever no GPU is present.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import os

# Before anything imports Triton (torch._dynamo does): see "The Triton kernels".
triton_imported_before_this_page = "triton" in sys.modules
if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import contextlib
import logging
import math
import re
import time
import warnings

import matplotlib.pyplot as plt
import torch.nn.functional as F
from matplotlib.patches import Rectangle
from torch._dynamo.backends.common import aot_autograd
from torch.utils.flop_counter import FlopCounterMode, register_flop_formula

torch.manual_seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")

try:
    import triton
    import triton.language as tl

    HAS_TRITON = True
except ImportError:
    HAS_TRITON = False

if not HAS_TRITON:
    KERNELS_RUN_ON = None
    print("Triton is not installed: every path below runs the PyTorch code")
elif os.environ.get("TRITON_INTERPRET") == "1":
    KERNELS_RUN_ON = "interpreter"
    print(f"Triton {triton.__version__}: the kernels run in its interpreter, on CPU")
else:
    KERNELS_RUN_ON = "gpu"
    print(f"Triton {triton.__version__}: the kernels run compiled, on the GPU")

# %%
# ``aot_autograd`` is the helper PyTorch's own ``aot_eager`` backend is built
# from, and the one the ``torch.compile`` documentation on custom backends
# uses. It lives in a private module; we need it to look at the graph the
# compiler produces after autograd and functionalization, which no public API
# returns.
#
# The operation: SiLU times a gate
# --------------------------------
#
# The feed-forward blocks of many language models compute
# ``silu(gate) * up`` for two tensors of the same shape. In eager PyTorch that
# is two operations with a temporary tensor between them; a fused kernel
# reads both inputs once and writes the result once. The plain PyTorch
# version is our reference, and the implementation wherever Triton cannot
# run:


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
        raise ValueError(
            f"silu_mul: expected float16, bfloat16, float32 or float64, "
            f"got {gate.dtype}"
        )


# %%
# The Triton kernels
# ------------------
#
# A Triton kernel is a Python function that ``triton.jit`` compiles for the
# GPU. Each *program* handles one block of ``BLOCK_SIZE`` consecutive
# elements: it computes their offsets, masks off the ones past the end of the
# tensor, loads the inputs, computes in float32 (in float64 for float64
# inputs, which ``gradcheck`` needs later) and stores the result in the
# output's dtype.
#
# There are two kernels: the forward, and the backward that training needs
# later on. With ``s = sigmoid(g)``, the output ``g * s * u`` has the
# derivative ``u * s * (1 + g * (1 - s))`` with respect to the gate ``g`` and
# ``g * s`` with respect to ``u``.
#
# The forward kernel is also *autotuned*: instead of one ``BLOCK_SIZE``,
# ``triton.autotune`` gets a list of ``triton.Config`` objects (meta-parameter
# values and launch options such as ``num_warps``) and a ``key``, the
# arguments whose values decide which config is best. The first launch with a
# new key runs every config, times it with ``do_bench`` and keeps the fastest
# for that key. We pass our own ``do_bench``: it counts the timings, and it
# times on the CPU when the kernels run in the interpreter, which has no GPU
# timer. On a GPU it hands over to Triton's own ``triton.testing.do_bench``.

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

if HAS_TRITON:

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
        tl.store(
            grad_gate_ptr + offsets,
            grad_gate.to(grad_gate_ptr.dtype.element_ty),
            mask=in_bounds,
        )
        tl.store(
            grad_up_ptr + offsets,
            grad_up.to(grad_up_ptr.dtype.element_ty),
            mask=in_bounds,
        )


# %%
# Two small functions launch the kernels on contiguous tensors. The grid, the
# number of programs, depends on the ``BLOCK_SIZE`` the autotuner picks, so
# it is a function of the chosen meta-parameters. ``traceable=True`` wraps the
# kernel with ``torch.library.wrap_triton`` first: that is what a
# ``triton_op``'s body must do so that the compiler can record the launch.
# Code that only ever runs eagerly may launch the kernel directly.


def launch_silu_mul(gate, up, *, traceable=False):
    """silu(gate) * up computed by silu_mul_kernel, in a new tensor."""
    out = torch.empty_like(gate)
    n_elements = out.numel()

    def grid(meta):
        return (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)

    kernel = (
        torch.library.wrap_triton(silu_mul_kernel) if traceable else silu_mul_kernel
    )
    kernel[grid](gate, up, out, n_elements)
    return out


def launch_silu_mul_backward(grad_out, gate, up, *, traceable=False):
    """The gradients of silu(gate) * up, computed by silu_mul_backward_kernel."""
    grad_gate = torch.empty_like(gate)
    grad_up = torch.empty_like(up)
    n_elements = gate.numel()
    grid = (triton.cdiv(n_elements, BACKWARD_BLOCK_SIZE),)
    kernel = silu_mul_backward_kernel
    if traceable:
        kernel = torch.library.wrap_triton(kernel)
    kernel[grid](
        grad_out,
        gate,
        up,
        grad_gate,
        grad_up,
        n_elements,
        BLOCK_SIZE=BACKWARD_BLOCK_SIZE,
    )
    return grad_gate, grad_up


# %%
# When the interpreter is on, ``triton.jit`` returns an interpreted function
# instead of a compiled one: it reads ``TRITON_INTERPRET`` at the moment it
# decorates a kernel. Triton's own helpers in ``triton.language``, such as
# ``tl.sigmoid``, are decorated when ``triton`` is imported, so they run in
# the interpreter only if the variable was set before that import. Set it
# before ``import triton`` and leave it set. A process that imported Triton
# earlier, as a worker of this site's build may have done for another page's
# ``torch.compile``, keeps those helpers compiled-only; that is why our
# kernels compute the sigmoid from ``tl.exp``, a built-in, which the
# interpreter always handles.

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
# Before wrapping anything, check the kernels against the reference, on the
# device where they run: sizes that are and are not a multiple of the block
# sizes, an empty tensor, and each supported dtype. The tolerances are
# ``assert_close``'s defaults for each dtype.

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
# ``triton_op`` makes an operator from a function, much like ``custom_op``,
# with one difference: the function's body must consist only of PyTorch
# operations and Triton kernels launched through ``wrap_triton``. That is what
# lets the compiler trace *into* the body instead of treating it as a black
# box. The body is also used as the fake kernel, so no ``register_fake`` is
# needed.
#
# For machines without a GPU, ``register_kernel("cpu")`` adds a kernel for CPU
# tensors. A natural first attempt puts only the Triton launch in the body and
# relies on the CPU kernel for everything else:

if HAS_TRITON:

    @torch.library.triton_op("triton_ops::silu_mul_gpu_only", mutates_args=())
    def silu_mul_gpu_only(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        check_silu_mul_args(gate, up)
        return launch_silu_mul(gate.contiguous(), up.contiguous(), traceable=True)

    @silu_mul_gpu_only.register_kernel("cpu")
    def _(gate, up):
        check_silu_mul_args(gate, up)
        return silu_mul_torch(gate.contiguous(), up.contiguous())


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


# %%
# In eager mode a CPU call goes to the CPU kernel and works. ``opcheck``, which
# also runs the operator through the compiler's tracing machinery, tells a
# different story. With ``raise_exception=False`` it returns each of its
# sub-tests with ``"SUCCESS"`` or the exception it raised. (The failing
# tracing logs long warnings, which we hide for this one call.)

if HAS_TRITON:
    gate, up = torch.randn(4, 300), torch.randn(4, 300)
    torch.testing.assert_close(silu_mul_gpu_only(gate, up), silu_mul_torch(gate, up))
    print("eager call on CPU tensors: correct result from the CPU kernel")
    with compiler_logs_silenced():
        report = torch.library.opcheck(
            silu_mul_gpu_only, (gate, up), raise_exception=False
        )
    failed = sorted(name for name, outcome in report.items() if outcome != "SUCCESS")
    for name, outcome in report.items():
        if outcome != "SUCCESS":
            outcome = f"{type(outcome).__name__}: {str(outcome).splitlines()[0][:90]}"
        print(f"{name}: {outcome}")
    assert "test_aot_dispatch_dynamic" in failed
    assert report["test_schema"] == "SUCCESS"
    if KERNELS_RUN_ON == "interpreter":
        assert "test_faketensor" in failed
else:
    print("Triton is not installed, so this failing example is skipped.")

# %%
# ``test_aot_dispatch_dynamic`` fails. When the compiler's autograd and
# functionalization pass (AOTAutograd) meets a ``triton_op``, it does not call
# any registered kernel: it traces the body, whatever the device. The CPU
# kernel is used only for eager calls. Here the traced body launches the
# Triton kernel on CPU tensors. A kernel compiled for the GPU cannot read
# them; a kernel in the interpreter cannot be traced at all, which is why,
# where the kernels run in the interpreter, ``test_faketensor`` (which runs
# the body on fake tensors) fails as well.
#
# The fix: make the body handle every device
# -------------------------------------------
#
# The body is traced with fake tensors whose device is known, so it can choose
# a path with an ordinary ``if``: the Triton kernel for CUDA tensors when
# Triton compiles for the GPU, PyTorch operations for everything else. Both
# branches are traceable.
#
# The CPU kernel is a separate matter, since it serves eager calls only. In a
# real project it would be the PyTorch code, or a C++ kernel: the interpreter
# is much too slow for real work (measured below). On this page, when the
# interpreter is on, the CPU kernel launches the Triton kernel in it, so that
# every eager CPU call below, ``gradcheck`` and ``opcheck`` included,
# executes the Triton code you have read. We count its calls to see which
# path ran.


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
# On each device we compare the operator with the reference, for a size that
# is not a multiple of any block size, a transposed input and a bfloat16
# input. CUDA tensors must not reach the CPU kernel.


def sample_inputs(device):
    """(gate, up) pairs covering the kernel's edge cases."""
    wide = torch.randn(64, 48, device=device)
    return [
        (torch.randn(1000, device=device), torch.randn(1000, device=device)),
        (wide.t(), torch.randn(48, 64, device=device)),
        (
            torch.randn(8, 257, device=device, dtype=torch.bfloat16),
            torch.randn(8, 257, device=device, dtype=torch.bfloat16),
        ),
    ]


def path_name(device):
    if triton_runs_on(torch.device(device)):
        return "the Triton kernel " + (
            "in the interpreter" if KERNELS_RUN_ON == "interpreter" else "on the GPU"
        )
    return "PyTorch operations"


for device in devices:
    calls_before = cpu_kernel_calls["count"]
    for gate, up in sample_inputs(device):
        torch.testing.assert_close(silu_mul(gate, up), silu_mul_torch(gate, up))
    used_cpu_kernel = cpu_kernel_calls["count"] > calls_before
    assert used_cpu_kernel == (device == "cpu")
    kernel = "registered CPU kernel" if used_cpu_kernel else "body"
    print(f"{device}: matches the reference; the {kernel} ran {path_name(device)}")

# %%
# How slow is the interpreter? The best of three calls on a hundred thousand
# elements, against the same computation in PyTorch's CPU operations (after
# a first call, which also autotunes):

if KERNELS_RUN_ON == "interpreter":
    gate, up = torch.randn(2, 100_000)
    seconds = {}
    for name, fn in [("interpreter", launch_silu_mul), ("PyTorch", silu_mul_torch)]:
        fn(gate, up)
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            fn(gate, up)
            runs.append(time.perf_counter() - start)
        seconds[name] = min(runs)
    ratio = seconds["interpreter"] / seconds["PyTorch"]
    assert ratio > 1
    print(
        f"interpreter: {seconds['interpreter'] * 1e3:.1f} ms, PyTorch: "
        f"{seconds['PyTorch'] * 1e3:.2f} ms, {ratio:.0f} times slower"
    )
else:
    print("the kernels are not interpreted here")

# %%
# Bad input raises a ``ValueError`` that names the problem, on every device:

for device in devices:
    try:
        silu_mul(torch.randn(3, 4, device=device), torch.randn(4, 3, device=device))
    except ValueError as err:
        print(f"{device}: {type(err).__name__}: {str(err).splitlines()[0]}")
    else:
        raise AssertionError(f"expected mismatched shapes to be rejected on {device}")

# %%
# Training: a backward that is a ``triton_op`` too
# ------------------------------------------------
#
# The operator computes a correct forward, but autograd knows nothing about
# it yet. The forward call records a node in the autograd graph, and the
# error comes when the backward reaches it:

gate = torch.randn(3, 5, requires_grad=True)
try:
    silu_mul(gate, torch.randn(3, 5)).sum().backward()
except RuntimeError as err:
    print(f"{type(err).__name__}: {str(err).splitlines()[0]}")
    assert "register_autograd" in str(err)
else:
    raise AssertionError("expected the backward to fail without a formula")

# %%
# The backward is a second operator. If it called Triton kernels directly,
# it would be opaque to the compiler; as a ``triton_op`` it gets the same
# treatment as the forward: a body with a path for every device, and a CPU
# kernel.


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
# during the forward, and the backward formula calls the backward operator.
# The incoming gradient may have any layout; the body's ``.contiguous()``
# takes care of that.


def save_inputs(ctx, inputs, output):
    gate, up = inputs
    ctx.save_for_backward(gate, up)


def silu_mul_grad(ctx, grad_out):
    gate, up = ctx.saved_tensors
    return silu_mul_backward(grad_out, gate, up)


silu_mul.register_autograd(silu_mul_grad, setup_context=save_inputs)

# %%
# ``gradcheck`` compares the backward with finite differences of the forward,
# in float64: the kernels compute in float64 for float64 inputs, and so does
# the interpreter. On each device we also compare float32 gradients with
# PyTorch's own autograd on a size that spans several blocks.

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
# The forward kernel has been autotuned all along. The first launch for a new
# value of the key times every config; later launches with the same key reuse
# the winner. The key is ``n_elements`` plus, added by the autotuner, the
# dtypes of the tensor arguments. Our counting ``do_bench`` shows all three
# cases below, and the result is correct whichever config won.

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
# what the interpreter shows is the mechanism: one round of timings per new
# key, none for a key it has seen.
#
# Testing with ``opcheck``
# ------------------------
#
# Now that the operator has its autograd formula, ``opcheck`` checks it with
# the inputs that break operators most often: empty tensors, transposed and
# strided views, dense tensors whose memory is not in row-major order
# (``permute`` and ``channels_last``), half-precision dtypes and inputs that
# require gradients. The backward operator gets the same treatment. On the
# CPU these calls run the CPU kernel against the traced body.


def opcheck_samples(device):
    """(gate, up) pairs for opcheck, each a layout or dtype that breaks kernels."""

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
        "float16": (
            randn(5, 33, dtype=torch.float16),
            randn(5, 33, dtype=torch.float16),
        ),
        "requires_grad": (
            randn(3, 7, requires_grad=True),
            randn(3, 7, requires_grad=True),
        ),
    }


for device in devices:
    samples = opcheck_samples(device)
    for gate, up in samples.values():
        torch.library.opcheck(silu_mul, (gate, up))
        grad_out = torch.randn(gate.shape, device=device, dtype=gate.dtype)
        backward_args = (grad_out, gate.detach(), up.detach())
        torch.library.opcheck(silu_mul_backward, backward_args)
    print(f"{device}: opcheck passed for both operators on: {', '.join(samples)}")

# %%
# Counting FLOPs
# --------------
#
# ``torch.utils.flop_counter.FlopCounterMode`` counts the floating-point
# operations of the operators that run under it, from a formula per
# operator. It ships formulas for matrix products, convolutions and
# attention; for our operators we register our own with
# ``register_flop_formula``. A formula
# receives the *shapes* of the tensor arguments (and ``out_shape``). We count
# each exponential, addition, subtraction, multiplication and division as
# one operation, as the kernels compute them.

FORWARD_FLOPS_PER_ELEMENT = 5  # the sigmoid (exp, add, divide), two multiplies
BACKWARD_FLOPS_PER_ELEMENT = 11  # the sigmoid again, 6 for grad_gate, 2 for grad_up


@register_flop_formula(torch.ops.triton_ops.silu_mul)
def silu_mul_flops(gate_shape, up_shape, **kwargs):
    return FORWARD_FLOPS_PER_ELEMENT * math.prod(gate_shape)


@register_flop_formula(torch.ops.triton_ops.silu_mul_backward)
def silu_mul_backward_flops(grad_out_shape, gate_shape, up_shape, **kwargs):
    return BACKWARD_FLOPS_PER_ELEMENT * math.prod(gate_shape)


# %%
# One training step under the counter: the forward and the backward operator
# each report what their formula says, and nothing else is counted.

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
# A Triton kernel can reach a model in three ways: launched directly from the
# model's code (a *bare* kernel), wrapped in a ``triton_op`` as above, or
# hidden inside an ordinary ``custom_op``. Before ``triton_op`` existed,
# ``custom_op`` was the way to make a Triton kernel an operator: launch the
# kernel in the function and register a fake kernel. We build that version,
# with the same CPU path and the same backward, to compare.


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
    for gate, up in sample_inputs(device):
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
# ``torch.compile`` works in stages. Dynamo captures the Python function as a
# graph of operator calls. AOTAutograd traces that graph again, adds the
# backward if needed and removes mutation, producing the graph a backend such
# as Inductor turns into code. The backend below records both graphs (and the
# backward's) and then simply runs them, like ``aot_eager``.
#
# For each variant we then ask: does it compile with ``fullgraph=True``, what
# do Dynamo and AOTAutograd record, does a compiled training step give the
# reference gradients, and what does ``torch.export`` make of it? Each cell
# is computed by running it. A bare kernel only becomes visible to Dynamo
# when Triton can compile for a GPU (without one, Dynamo steps into Triton's
# launcher as plain Python), so without a GPU that row is not run.

if HAS_TRITON and not torch.cuda.is_available():
    NOT_RUN = "needs a GPU; not run here"
else:
    NOT_RUN = "needs Triton compiling for a GPU; not run here"


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


def first_line(err):
    return f"{type(err).__name__}: {str(err).strip().splitlines()[0][:100]}"


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
        errors["compile"] = first_line(err)
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
        errors["training"] = first_line(err)
        row["compiled training"] = "does not train"
    try:
        exported = torch.export.export(Scaled(fn), (gate.detach(), up.detach()))
        row["torch.export"] = "keeps " + ", ".join(call_targets(exported.graph_module))
    except Exception as err:
        errors["export"] = first_line(err)
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
# What the table shows (the checks below assert each point on the rows that
# ran here):
#
# * The ``triton_op`` and the ``custom_op`` both compile as one graph, and
#   Dynamo records both the same way: one call to the operator, then the
#   multiplication.
# * AOTAutograd keeps the ``custom_op`` as a single call that no backend can
#   look into. It replaces the ``triton_op`` by its body: on a GPU the Triton
#   kernel itself, as a ``triton_kernel_wrapper_functional`` call; on a CPU
#   the PyTorch operations of the body's other branch.
# * Both operators train, through the same backward operator. That one is a
#   ``triton_op``, so both backward graphs contain its body, not a call to
#   it: whether the compiler sees a kernel is decided operator by operator.
# * ``torch.export`` keeps both operators as single calls (see below).
# * A bare kernel has no autograd formula, so a compiled training step has
#   nothing to differentiate through. On a GPU Dynamo records it as
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


draw_table(table, f"What compiling and exporting each variant gave (on {compare_on})")

# %%
# Where the kernel ends up: Inductor's code
# -----------------------------------------
#
# On a GPU, what Inductor does with a ``triton_op``'s kernel can be read in
# the code it generates. It emits our kernel's source as written, as a kernel
# of its own, and launches it; the ``* 2.0`` around it becomes a separate
# kernel that Inductor generates. It does not, by default, fuse neighbouring
# operations into a user's kernel. (Since PyTorch 2.12 an opt-in Inductor
# setting, ``epilogue_fusion_user_defined_triton_kernel``, can fold a
# pointwise epilogue into a user kernel that stores once; it is off unless
# you turn it on.) The ``custom_op``'s code has no Triton source of ours at
# all, only a call to the operator.
#
# Inductor's settings live in the private module ``torch._inductor.config``,
# which is nonetheless how its documentation tells you to change them.
# ``run_and_get_code`` returns the generated code; it is a private helper
# from PyTorch's own tests, and no public API returns the code as a string.

from torch._inductor import config as inductor_config

if hasattr(inductor_config, "epilogue_fusion_user_defined_triton_kernel"):
    assert inductor_config.epilogue_fusion_user_defined_triton_kernel is False
    print("this release has the opt-in epilogue fusion setting, and it is off")
else:
    print("this release has no epilogue fusion for user kernels")

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
# ``triton_op`` as one call to the named operator, like any custom operator,
# so the exported program stays at the level of operators instead of
# embedding Triton code that depends on one GPU and one Triton version. On
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
# ``wrap_triton``: the operator then behaves like a built-in one in eager
# mode, in autograd, under ``FlopCounterMode`` and in ``torch.export``,
# while ``torch.compile`` sees and launches the kernel itself rather than an
# opaque call. Two rules follow from the compiler tracing the body: the body
# may contain only PyTorch operations and wrapped Triton kernels, and it must
# have a traceable path for every device you compile for. A kernel
# registered with ``register_kernel`` serves eager calls only. Write the
# backward as a ``triton_op`` too, and test everything with ``opcheck`` and
# ``gradcheck``: on a GPU if you have one, and in Triton's interpreter if you
# do not.
#
# Related pages:
#
# * :ref:`sphx_glr_tutorials_python_custom_ops.py` for ``custom_op`` itself
# * :ref:`sphx_glr_tutorials_custom_op_registrations.py` for
#   ``register_autograd`` and the other registrations
# * :ref:`sphx_glr_tutorials_cpp_custom_ops.py` for kernels written in C++
#   and CUDA
# * :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py` when a check fails
