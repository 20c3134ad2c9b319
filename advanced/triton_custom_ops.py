"""
Triton Custom Operators
=======================

After this page you will be able to turn a Triton GPU kernel into a PyTorch
operator with ``torch.library.triton_op`` and ``torch.library.wrap_triton``,
give it a CPU kernel so that it also runs where there is no GPU, and check
what ``torch.compile`` sees of it compared with the same kernel hidden inside
an ordinary ``custom_op``.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * How to wrap a Triton kernel with ``triton_op`` and ``wrap_triton``
       * How to add a CPU kernel, and why the operator's body must still
         handle every device you compile for
       * How ``triton_op`` and ``custom_op`` differ in the graphs the
         compiler works on

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * Triton and a CUDA GPU for the Triton path (the page also runs,
         and teaches, without them)
       * :ref:`sphx_glr_tutorials_python_custom_ops.py`
"""

# %%
# Setting up
# ----------
#
# ``torch.library.triton_op`` and ``torch.library.wrap_triton`` became public
# in PyTorch 2.6. Triton compiles kernels for GPUs, so the Triton code on this
# page runs only when both Triton and a CUDA device are present. Without them
# the page still runs from top to bottom on the CPU, and says which path each
# check took.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import logging

import torch.nn.functional as F
from torch._dynamo.backends.common import aot_autograd
from torch.testing._internal.optests.generate_tests import OpCheckError

if not hasattr(torch.library, "triton_op") or not hasattr(torch.library, "wrap_triton"):
    sys.exit(
        "This tutorial needs torch.library.triton_op and torch.library.wrap_triton."
    )

try:
    import triton
    import triton.language as tl

    HAS_TRITON = True
except ImportError:
    HAS_TRITON = False

torch.manual_seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")
if HAS_TRITON:
    print(f"Triton {triton.__version__} is installed")
else:
    print("Triton is not installed: only the CPU path of the operator can run")
TRITON_RUNS = HAS_TRITON and torch.cuda.is_available()
print(f"the Triton kernel will run on this machine: {TRITON_RUNS}")

# %%
# ``OpCheckError`` is the exception ``opcheck`` raises, and ``aot_autograd``
# is the helper PyTorch's own ``aot_eager`` backend is built from. Neither is
# exported from a public module; we need the first to catch a failure and the
# second to look at the graph the compiler produces after autograd and
# functionalization, which no public API returns.
#
# The operation: SiLU times a gate
# --------------------------------
#
# The feed-forward blocks of many language models compute
# ``silu(gate) * up`` for two tensors of the same shape. In eager PyTorch that
# is two operations with a temporary tensor between them; a fused kernel
# reads both inputs once and writes the result once. The plain PyTorch
# version is our reference, and also the CPU implementation:


def silu_mul_torch(gate, up):
    return F.silu(gate) * up


def check_silu_mul_args(gate, up):
    """Raise ValueError for inputs the kernels do not support."""
    if gate.shape != up.shape:
        raise ValueError(
            f"silu_mul: gate and up must have the same shape, got "
            f"{tuple(gate.shape)} and {tuple(up.shape)}"
        )
    if gate.dtype != up.dtype or gate.device != up.device:
        raise ValueError(
            f"silu_mul: gate and up must share dtype and device, got "
            f"{gate.dtype} on {gate.device} and {up.dtype} on {up.device}"
        )
    if gate.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(
            f"silu_mul: expected float16, bfloat16 or float32, got {gate.dtype}"
        )


# %%
# The Triton kernel
# -----------------
#
# A Triton kernel is a Python function compiled for the GPU by
# ``triton.jit``. Each *program* handles one block of ``BLOCK_SIZE``
# consecutive elements: it computes their offsets, masks off the ones past the
# end of the tensor, loads both inputs, computes in float32 and stores the
# result in the output's dtype. The definition sits under ``if HAS_TRITON`` so
# that the page still runs where Triton is not installed.

BLOCK_SIZE = 1024

if HAS_TRITON:

    @triton.jit
    def silu_mul_kernel(
        gate_ptr, up_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr
    ):
        block_start = tl.program_id(axis=0) * BLOCK_SIZE
        offsets = block_start + tl.arange(0, BLOCK_SIZE)
        in_bounds = offsets < n_elements
        gate = tl.load(gate_ptr + offsets, mask=in_bounds).to(tl.float32)
        up = tl.load(up_ptr + offsets, mask=in_bounds).to(tl.float32)
        result = gate * tl.sigmoid(gate) * up
        tl.store(out_ptr + offsets, result.to(out_ptr.dtype.element_ty), mask=in_bounds)


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
        gate, up = gate.contiguous(), up.contiguous()
        out = torch.empty_like(gate)
        n_elements = out.numel()
        grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
        torch.library.wrap_triton(silu_mul_kernel)[grid](
            gate, up, out, n_elements, BLOCK_SIZE=BLOCK_SIZE
        )
        return out

    @silu_mul_gpu_only.register_kernel("cpu")
    def _(gate, up):
        check_silu_mul_args(gate, up)
        return silu_mul_torch(gate.contiguous(), up.contiguous())


# %%
# In eager mode a CPU call goes to the CPU kernel and works. ``opcheck``, which
# also runs the operator through the compiler's tracing machinery, tells a
# different story. (Without a GPU, Triton cannot analyse the kernel either,
# and PyTorch's compiler logs a long warning about that; we silence the
# compiler's logger, ``torch._dynamo``, for this one call.)

if HAS_TRITON:
    gate, up = torch.randn(4, 300), torch.randn(4, 300)
    torch.testing.assert_close(silu_mul_gpu_only(gate, up), silu_mul_torch(gate, up))
    print("eager call on CPU tensors: correct result from the CPU kernel")
    compiler_logger = logging.getLogger("torch._dynamo")

    def drop_all(record):
        return False

    compiler_logger.addFilter(drop_all)
    try:
        torch.library.opcheck(silu_mul_gpu_only, (gate, up))
    except OpCheckError as err:
        print(f"{type(err).__name__}: {str(err).splitlines()[0]}")
        assert "test_aot_dispatch_dynamic" in str(err)
    else:
        raise AssertionError("expected opcheck to fail for CPU inputs")
    finally:
        compiler_logger.removeFilter(drop_all)
else:
    print("Triton is not installed, so this failing example is skipped.")

# %%
# The failing step is ``test_aot_dispatch_dynamic``. When the compiler's
# autograd and functionalization pass (AOTAutograd) meets a ``triton_op``, it
# does not call any registered kernel: it traces the body, whatever the
# device. The CPU kernel is used only for eager calls. Here the traced body
# launches a Triton kernel on CPU tensors, which cannot work.
#
# The fix: make the body handle every device
# -------------------------------------------
#
# The body is traced with fake tensors whose device is known, so it can choose
# a path with an ordinary ``if``: the Triton kernel for CUDA tensors, PyTorch
# operations for everything else (and for CUDA too when Triton is missing).
# Both branches are traceable. We keep a CPU kernel as well and count its
# calls, to see which path ran.

cpu_kernel_calls = {"count": 0}


@torch.library.triton_op("triton_ops::silu_mul", mutates_args=())
def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    check_silu_mul_args(gate, up)
    gate, up = gate.contiguous(), up.contiguous()
    if gate.device.type != "cuda" or not HAS_TRITON:
        return silu_mul_torch(gate, up)
    out = torch.empty_like(gate)
    n_elements = out.numel()
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    torch.library.wrap_triton(silu_mul_kernel)[grid](
        gate, up, out, n_elements, BLOCK_SIZE=BLOCK_SIZE
    )
    return out


@silu_mul.register_kernel("cpu")
def _(gate, up):
    cpu_kernel_calls["count"] += 1
    check_silu_mul_args(gate, up)
    return silu_mul_torch(gate.contiguous(), up.contiguous())


# %%
# Checking the results, and which path ran
# ----------------------------------------
#
# On each device we compare the operator with the reference, for a size that
# is not a multiple of ``BLOCK_SIZE``, a non-contiguous input and a
# bfloat16 input. On a CUDA machine the CPU kernel must not be called
# for CUDA tensors: those go through the Triton kernel.


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


for device in devices:
    calls_before = cpu_kernel_calls["count"]
    for gate, up in sample_inputs(device):
        torch.testing.assert_close(silu_mul(gate, up), silu_mul_torch(gate, up))
    used_cpu_kernel = cpu_kernel_calls["count"] > calls_before
    assert used_cpu_kernel == (device == "cpu")
    if used_cpu_kernel:
        path = "registered CPU kernel"
    elif HAS_TRITON:
        path = "Triton kernel"
    else:
        path = "PyTorch fallback in the body"
    print(f"{device}: matches the reference, computed by the {path}")

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
# ``opcheck`` now passes on every device present, including the
# ``test_aot_dispatch_dynamic`` step that failed before:

for device in devices:
    for gate, up in sample_inputs(device):
        torch.library.opcheck(silu_mul, (gate, up))
print(f"opcheck passed for triton_ops::silu_mul on {devices}")

# %%
# The same kernel inside a plain ``custom_op``
# --------------------------------------------
#
# Before ``triton_op`` existed, the way to make a Triton kernel an operator was
# ``custom_op``: launch the kernel directly in the function and register a fake
# kernel. That works, but ``custom_op`` functions are opaque: the compiler
# records a call to the operator and never looks inside, so it cannot see the
# kernel. We build that version, with the same CPU fallback, to compare.


@torch.library.custom_op("triton_ops::silu_mul_opaque", mutates_args=())
def silu_mul_opaque(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    check_silu_mul_args(gate, up)
    gate, up = gate.contiguous(), up.contiguous()
    if gate.device.type != "cuda" or not HAS_TRITON:
        return silu_mul_torch(gate, up)
    out = torch.empty_like(gate)
    n_elements = out.numel()
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    silu_mul_kernel[grid](gate, up, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out


@silu_mul_opaque.register_fake
def _(gate, up):
    check_silu_mul_args(gate, up)
    return torch.empty_like(gate, memory_format=torch.contiguous_format)


for device in devices:
    for gate, up in sample_inputs(device):
        torch.testing.assert_close(silu_mul_opaque(gate, up), silu_mul_torch(gate, up))
        torch.library.opcheck(silu_mul_opaque, (gate, up))
print(f"triton_ops::silu_mul_opaque matches the reference, opcheck passed on {devices}")

# %%
# What the compiler sees
# ----------------------
#
# ``torch.compile`` works in stages. Dynamo first captures the Python function
# as a graph of operator calls. AOTAutograd then traces that graph again, adds
# the backward if needed and removes mutation, producing the graph a backend
# such as Inductor turns into code. The backend below records both graphs and
# then simply runs the second one, like ``aot_eager``. We compile a small
# function that uses each operator and list the operations in each graph.


def call_targets(graph_module):
    """Short names of the operations called in an FX graph."""
    names = []
    for node in graph_module.graph.nodes:
        if node.op == "call_function":
            name = getattr(node.target, "__name__", str(node.target))
            names.append(name.replace(".default", "").replace(".Tensor", ""))
    return names


def compile_and_capture(fn, *args):
    """Compile fn with fullgraph=True and return its output and both graphs."""
    graphs = {}

    def keep_aot_graph(graph_module, example_inputs):
        graphs["AOTAutograd"] = graph_module
        return graph_module.forward

    run_aot = aot_autograd(fw_compiler=keep_aot_graph)

    def backend(graph_module, example_inputs):
        graphs["Dynamo"] = graph_module
        return run_aot(graph_module, example_inputs)

    output = torch.compile(fn, backend=backend, fullgraph=True)(*args)
    return output, graphs


def scaled_with_triton_op(gate, up):
    return silu_mul(gate, up) * 2.0


def scaled_with_custom_op(gate, up):
    return silu_mul_opaque(gate, up) * 2.0


# %%
# The comparison runs on the best device present: the GPU when the Triton
# kernel can run, the CPU otherwise.

compare_on = "cuda" if TRITON_RUNS else "cpu"
gate = torch.randn(16, 128, device=compare_on)
up = torch.randn(16, 128, device=compare_on)
expected = silu_mul_torch(gate, up) * 2.0
calls_before = cpu_kernel_calls["count"]
seen = {}
for label, fn in [
    ("triton_op", scaled_with_triton_op),
    ("custom_op", scaled_with_custom_op),
]:
    output, graphs = compile_and_capture(fn, gate, up)
    torch.testing.assert_close(output, expected)
    seen[label] = {stage: call_targets(gm) for stage, gm in graphs.items()}
compiled_cpu_kernel_calls = cpu_kernel_calls["count"] - calls_before

print(f"graphs compiled on: {compare_on}\n")
print(f"{'stage':<13}{'operator':<11}operations called in the graph")
for stage in ("Dynamo", "AOTAutograd"):
    for label in ("triton_op", "custom_op"):
        print(f"{stage:<13}{label:<11}{', '.join(seen[label][stage])}")
print(
    f"\nregistered CPU kernel calls while compiling and running: "
    f"{compiled_cpu_kernel_calls}"
)

# %%
# Dynamo records both operators the same way: one call to the operator, then
# the multiplication. The difference appears after AOTAutograd. The
# ``custom_op`` is still a single call that no backend can look into. The
# ``triton_op`` has been replaced by its body: on a GPU that is the Triton
# kernel itself (as a ``triton_kernel_wrapper_functional`` call, which
# Inductor can compile and schedule together with the code around it); on a
# CPU it is the PyTorch operations of the fallback branch, which a backend
# can fuse like any others. Either way the registered CPU kernel was never
# called: compiled code runs the traced body, not the kernel.

for stage in ("Dynamo", "AOTAutograd"):
    assert seen["custom_op"][stage].count("silu_mul_opaque") == 1
assert seen["triton_op"]["Dynamo"].count("silu_mul") == 1
assert seen["triton_op"]["Dynamo"] == ["silu_mul", "mul"]
assert seen["custom_op"]["Dynamo"] == ["silu_mul_opaque", "mul"]
assert "silu_mul" not in seen["triton_op"]["AOTAutograd"]
if TRITON_RUNS:
    assert "triton_kernel_wrapper_functional" in seen["triton_op"]["AOTAutograd"]
else:
    assert "silu" in seen["triton_op"]["AOTAutograd"]
assert compiled_cpu_kernel_calls == 0
print("asserted: the triton_op was traced into, the custom_op was not")

# %%
# ``torch.export`` keeps the operator
# -----------------------------------
#
# Exporting is different on purpose: ``torch.export`` keeps a ``triton_op`` as
# one call to the named operator, like any custom operator, so the exported
# program stays at the level of operators instead of embedding Triton code.


class GatedUnit(torch.nn.Module):
    def forward(self, gate, up):
        return silu_mul(gate, up) * 2.0


for device in devices:
    sample = (torch.randn(4, 64, device=device), torch.randn(4, 64, device=device))
    exported = torch.export.export(GatedUnit(), sample)
    targets = call_targets(exported.graph_module)
    assert targets.count("silu_mul") == 1
    torch.testing.assert_close(exported.module()(*sample), GatedUnit()(*sample))
    print(f"{device}: exported graph calls {targets}")

# %%
# Conclusion
# ----------
#
# Wrap a Triton kernel with ``triton_op`` and launch it through
# ``wrap_triton``: the operator then behaves like a built-in one in eager mode
# and in ``torch.export``, while ``torch.compile`` sees the kernel itself
# rather than an opaque call. Two rules follow from the compiler tracing the
# body: the body may contain only PyTorch operations and wrapped Triton
# kernels, and it must have a traceable path for every device you compile
# for. A kernel registered with ``register_kernel`` serves eager calls only.
# Test all of it with ``opcheck`` on every device you have.
#
# Related pages:
#
# * :ref:`sphx_glr_tutorials_python_custom_ops.py` for ``custom_op`` itself
# * :ref:`sphx_glr_tutorials_cpp_custom_ops.py` for kernels written in C++
#   and CUDA
# * :ref:`sphx_glr_tutorials_custom_op_registrations.py` for adding autograd
#   and other registrations
# * :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py` when a check fails
