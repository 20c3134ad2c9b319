"""
C++ Custom Operators
====================

After this page you will be able to write an operator's kernel in C++,
compile it from a notebook with ``torch.utils.cpp_extension.load_inline``,
declare it with ``TORCH_LIBRARY``, and then give it the Python pieces that
``torch.compile``, ``torch.export`` and autograd need. You will also see what
the compiled route costs and how to keep that cost to a single build.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * How to declare an operator's schema with ``TORCH_LIBRARY`` and
         register a CPU kernel with ``TORCH_LIBRARY_IMPL``
       * How to add a fake kernel and a backward formula from Python
       * How to test the result with ``opcheck``, ``gradcheck`` and a
         reference, and use it in ``torch.compile`` and ``torch.export``
       * How to cache the build, and when C++ is worth the trouble

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * A C++ compiler and ``ninja`` (``nvcc`` too for the optional CUDA
         kernel)
       * :ref:`sphx_glr_tutorials_python_custom_ops.py`

.. admonition:: Checklist
   :class: checklist

   #. Check for a C++ compiler and ``ninja`` (and ``nvcc`` plus a GPU for a
      CUDA kernel) before building.
   #. Declare the schema with ``TORCH_LIBRARY`` and register one kernel per
      device with ``TORCH_LIBRARY_IMPL``; validate arguments with
      ``TORCH_CHECK_VALUE``.
   #. Build with ``load_inline`` into a fixed ``build_directory`` so later
      runs reuse the library.
   #. Test the kernel against a plain PyTorch reference.
   #. Register a fake kernel and a backward formula from Python, and name
      their module with ``m.set_python_module``.
   #. Run ``gradcheck``, ``gradgradcheck`` and ``opcheck`` on empty,
      non-contiguous, permuted and ``requires_grad`` samples.
"""

# %%
# Setting up
# ----------
#
# The page compiles C++ code while it runs, so besides PyTorch it needs a C++
# compiler. Everything runs on the CPU; when a CUDA device and the CUDA
# compiler are both present, a CUDA kernel is compiled and tested as well.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import importlib
import inspect
import os
import shutil
import tempfile
import time
import warnings

import matplotlib.pyplot as plt
from torch.autograd.gradcheck import GradcheckError
from torch.utils import cpp_extension

torch.manual_seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")

# %%
# When is C++ the right choice?
# -----------------------------
#
# :ref:`sphx_glr_tutorials_python_custom_ops.py` showed that any Python
# function can become an operator. Reach for C++ when one of these holds:
#
# * **The kernel itself needs a compiled loop.** Some computations do not map
#   onto a handful of existing tensor operations: each step depends on the
#   previous one, or the data is walked in an order PyTorch has no operator
#   for. In Python that becomes a loop that launches several small tensor
#   operations per step.
# * **The operator must run without Python.** An operator declared with
#   ``TORCH_LIBRARY`` lives in a shared library. A C++ program linked against
#   libtorch can load it, and so can a model compiled ahead of time with
#   AOTInductor, which is how exported models are deployed where there is no
#   Python interpreter. An operator whose kernel is a Python function cannot
#   follow the model there.
#
# The price: you need a compiler toolchain that matches your PyTorch build,
# the code must be compiled (per platform and per PyTorch version) before it
# can run, and a memory error in C++ takes down the whole process instead of
# raising a Python exception. The rest of this page pays that price once and
# measures it.
#
# The operation: a discounted cumulative sum
# ------------------------------------------
#
# Our operator walks along the last dimension of a tensor and keeps a running
# total that fades by a factor ``decay`` at every step::
#
#     y[..., 0] = x[..., 0]
#     y[..., t] = decay * y[..., t - 1] + x[..., t]
#
# With ``reverse=True`` it walks from the end instead, which computes
# discounted returns in reinforcement learning. Scaled by ``1 - decay``, it is
# an exponential moving average. ``torch.cumsum`` is the special case
# ``decay == 1``, but PyTorch has no ready-made operator for the general case:
# every step needs the result of the previous one. Here is the reference we will test
# against, written as the obvious Python loop:


def discounted_cumsum_reference(x, decay, reverse=False):
    """Plain PyTorch reference: one Python iteration per position."""
    positions = range(x.shape[-1])
    if reverse:
        positions = reversed(positions)
    out = torch.empty_like(x)
    running = torch.zeros_like(x[..., 0])
    for t in positions:
        running = decay * running + x[..., t]
        out[..., t] = running
    return out


signal = torch.tensor([1.0, 0.0, 0.0, 2.0])
print(discounted_cumsum_reference(signal, 0.5))
torch.testing.assert_close(
    discounted_cumsum_reference(signal, 0.5), torch.tensor([1.0, 0.5, 0.25, 2.125])
)
torch.testing.assert_close(
    discounted_cumsum_reference(signal, 1.0), torch.cumsum(signal, dim=0)
)

# %%
# The result matches the recurrence worked out by hand, and with ``decay``
# equal to 1 it is an ordinary ``cumsum``. The reference pays for every
# position with a trip through the Python interpreter; the C++ kernel below
# runs the same recurrence as a tight loop.
#
# Checking the toolchain
# ----------------------
#
# ``load_inline`` writes the source to a file, generates a ``ninja`` build
# file and runs the C++ compiler named by the ``CXX`` environment variable
# (``c++`` when it is unset). Without ``ninja``, ``load_inline`` stops at once;
# without a compiler, the build fails deep inside ``cpp_extension`` with a
# long and confusing log. So we check for both first and stop with an error
# that names the missing tool. The page is about C++, so it cannot skip
# this part. The CUDA kernel is different: it needs both a GPU and ``nvcc``,
# and without either one the page builds and tests the CPU kernel only,
# saying which of the two is missing.

compiler = os.environ.get("CXX", "cl" if sys.platform == "win32" else "c++")
compiler_path = shutil.which(compiler)
if compiler_path is None:
    raise RuntimeError(
        f"This page compiles C++ code, but no C++ compiler named {compiler!r} "
        "was found on PATH. Install one (for example g++ or clang++), or point "
        "the CXX environment variable at it, and run the page again."
    )
if not cpp_extension.is_ninja_available():
    raise RuntimeError(
        "This page compiles C++ code with load_inline, which needs the ninja "
        "build tool. Install it (for example `pip install ninja`) and run the "
        "page again."
    )
nvcc = os.path.join(cpp_extension.CUDA_HOME or "", "bin", "nvcc")
has_nvcc = os.path.isfile(nvcc)
build_cuda = torch.cuda.is_available() and has_nvcc
print(f"C++ compiler: {compiler_path}")
if build_cuda:
    print(f"CUDA kernel: will be built with {nvcc}")
else:
    missing = [
        what
        for what, present in (
            ("CUDA GPU", torch.cuda.is_available()),
            ("nvcc", has_nvcc),
        )
        if not present
    ]
    print(f"CUDA kernel: skipped, this machine has no {' and no '.join(missing)}")

# %%
# Declaring the operator and its CPU kernel
# -----------------------------------------
#
# Three pieces of C++ make an operator:
#
# * A kernel: an ordinary C++ function from ``at::Tensor`` and plain values to
#   ``at::Tensor``.
# * ``TORCH_LIBRARY(cpp_ops, m)`` declares the namespace ``cpp_ops`` and, with
#   ``m.def``, the operator's schema. The schema is the contract every other
#   part of PyTorch relies on: argument types, defaults, and the fact that
#   nothing is mutated (no ``Tensor(a!)`` annotations).
# * ``TORCH_LIBRARY_IMPL(cpp_ops, CPU, m)`` registers the kernel for CPU
#   tensors. Other devices get their own ``TORCH_LIBRARY_IMPL`` blocks.
#
# The kernel validates its arguments with ``TORCH_CHECK_VALUE``, which
# surfaces in Python as a ``ValueError``. It makes the input contiguous, treats
# everything but the last dimension as independent rows, and lets
# ``at::parallel_for`` spread the rows over CPU threads. It includes only the
# headers it uses rather than the catch-all ``torch/extension.h``, which
# pulls in all of PyTorch's C++ API and pybind11 and makes every compile
# slower.

CPP_SOURCE = r"""
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

namespace cpp_ops {

// Shared by the CPU and CUDA kernels, so both reject the same inputs.
void check_discounted_cumsum_args(const at::Tensor& x, double decay) {
  TORCH_CHECK_VALUE(x.dim() >= 1,
      "discounted_cumsum: x must have at least one dimension");
  TORCH_CHECK_VALUE(
      x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,
      "discounted_cumsum: x must be float32 or float64, got ", x.scalar_type());
  TORCH_CHECK_VALUE(decay >= 0.0 && decay <= 1.0,
      "discounted_cumsum: decay must be between 0 and 1, got ", decay);
}

template <typename scalar_t>
void scan_rows(const scalar_t* in, scalar_t* out, int64_t rows,
               int64_t length, scalar_t decay, bool reverse) {
  at::parallel_for(0, rows, /*grain_size=*/16, [&](int64_t first, int64_t last) {
    for (int64_t row = first; row < last; ++row) {
      const scalar_t* x = in + row * length;
      scalar_t* y = out + row * length;
      scalar_t running = 0;
      for (int64_t step = 0; step < length; ++step) {
        const int64_t t = reverse ? length - 1 - step : step;
        running = decay * running + x[t];
        y[t] = running;
      }
    }
  });
}

at::Tensor discounted_cumsum_cpu(const at::Tensor& x, double decay,
                                 bool reverse) {
  check_discounted_cumsum_args(x, decay);
  const at::Tensor input = x.contiguous();
  at::Tensor output = at::empty_like(input);
  if (input.numel() == 0) {
    return output;
  }
  const int64_t length = input.size(-1);
  const int64_t rows = input.numel() / length;
  AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "discounted_cumsum_cpu", [&] {
    scan_rows<scalar_t>(input.const_data_ptr<scalar_t>(),
                        output.mutable_data_ptr<scalar_t>(), rows, length,
                        static_cast<scalar_t>(decay), reverse);
  });
  return output;
}

// The discounted return: sum over t of decay**t * x[..., t], which is where
// the reversed running total ends up at position 0.
at::Tensor discounted_return_cpu(const at::Tensor& x, double decay) {
  check_discounted_cumsum_args(x, decay);
  TORCH_CHECK_VALUE(x.size(-1) > 0,
      "discounted_return: the last dimension of x must not be empty");
  return discounted_cumsum_cpu(x, decay, /*reverse=*/true).select(-1, 0).contiguous();
}

}  // namespace cpp_ops

TORCH_LIBRARY(cpp_ops, m) {
  m.def("discounted_cumsum(Tensor x, float decay, bool reverse=False) -> Tensor");
  // The operators defined below this line keep their Python registrations
  // (fake kernel, backward) in this Python module.
  m.set_python_module("cpp_ops_registrations");
  m.def("discounted_return(Tensor x, float decay) -> Tensor");
}

TORCH_LIBRARY_IMPL(cpp_ops, CPU, m) {
  m.impl("discounted_cumsum", &cpp_ops::discounted_cumsum_cpu);
  m.impl("discounted_return", &cpp_ops::discounted_return_cpu);
}
"""

# %%
# A CUDA kernel for the same operator
# -----------------------------------
#
# The CUDA version keeps the same recurrence and gives each row to one GPU
# thread. That is the simplest correct mapping, not the fastest (threads of a
# warp read addresses a whole row apart), but it shows the registration:
# another ``TORCH_LIBRARY_IMPL`` block, this time for the ``CUDA`` dispatch
# key. The kernel launches on PyTorch's current stream, and a device guard
# makes sure it runs on the GPU that holds ``x``. This source is compiled only
# when a GPU and ``nvcc`` are both available.

CUDA_SOURCE = r"""
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

namespace cpp_ops {

void check_discounted_cumsum_args(const at::Tensor& x, double decay);

template <typename scalar_t>
__global__ void scan_rows_kernel(const scalar_t* __restrict__ in,
                                 scalar_t* __restrict__ out, int64_t rows,
                                 int64_t length, scalar_t decay, bool reverse) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) {
    return;
  }
  const scalar_t* x = in + row * length;
  scalar_t* y = out + row * length;
  scalar_t running = 0;
  for (int64_t step = 0; step < length; ++step) {
    const int64_t t = reverse ? length - 1 - step : step;
    running = decay * running + x[t];
    y[t] = running;
  }
}

at::Tensor discounted_cumsum_cuda(const at::Tensor& x, double decay,
                                  bool reverse) {
  check_discounted_cumsum_args(x, decay);
  const c10::cuda::CUDAGuard device_guard(x.device());
  const at::Tensor input = x.contiguous();
  at::Tensor output = at::empty_like(input);
  if (input.numel() == 0) {
    return output;
  }
  const int64_t length = input.size(-1);
  const int64_t rows = input.numel() / length;
  const int threads = 128;
  const int64_t blocks = (rows + threads - 1) / threads;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "discounted_cumsum_cuda", [&] {
    scan_rows_kernel<scalar_t><<<blocks, threads, 0, stream>>>(
        input.const_data_ptr<scalar_t>(), output.mutable_data_ptr<scalar_t>(),
        rows, length, static_cast<scalar_t>(decay), reverse);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return output;
}

}  // namespace cpp_ops

TORCH_LIBRARY_IMPL(cpp_ops, CUDA, m) {
  m.impl("discounted_cumsum", &cpp_ops::discounted_cumsum_cuda);
}
"""

# %%
# Compiling once, reusing the build
# ---------------------------------
#
# ``load_inline`` compiles the sources into a shared library with ``ninja``
# and loads it. We pass ``is_python_module=False`` because the library needs
# no Python bindings: loading it runs the ``TORCH_LIBRARY`` blocks, which
# register the operator with PyTorch's dispatcher, and from then on it is
# reachable as ``torch.ops.cpp_ops.discounted_cumsum``.
#
# We also pass an explicit ``build_directory``. Inside it, ``load_inline``
# rewrites the source file only when its text changes, and ``ninja`` rebuilds
# only when a source, header or flag changes. A later run of this page, in a
# fresh process, finds the finished library and just loads it. The directory
# sits under ``$TORCH_EXTENSIONS_DIR`` when that environment variable is set
# and under PyTorch's default cache folder (``~/.cache/torch_extensions`` on
# Linux) otherwise, in a subfolder per Python and PyTorch version, since a
# library built against one PyTorch version is not meant to be loaded by
# another.
#
# ``no_implicit_headers=True`` (a newer ``load_inline`` option, so we only pass
# it when it exists) stops ``load_inline`` from prepending
# ``torch/extension.h``; our sources include what they need.


def load_cached_extension(name, cpp_source, cuda_source=None):
    """Build (or reuse) a shared library of operators and load it."""
    root = (
        os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
    )
    version_tag = (
        f"py{sys.version_info.major}{sys.version_info.minor}_torch{torch.__version__}"
    )
    build_directory = os.path.join(root, version_tag, name)
    os.makedirs(build_directory, exist_ok=True)
    suffix = ".pyd" if sys.platform == "win32" else ".so"
    library = os.path.join(build_directory, name + suffix)
    stamp_before = os.stat(library).st_mtime_ns if os.path.exists(library) else None

    options = {}
    if "no_implicit_headers" in inspect.signature(cpp_extension.load_inline).parameters:
        options["no_implicit_headers"] = True
    if cuda_source is not None:
        options["cuda_sources"] = [cuda_source]
        options["extra_cuda_cflags"] = ["-O2"]
    start = time.perf_counter()
    loaded = cpp_extension.load_inline(
        name=name,
        cpp_sources=[cpp_source],
        extra_cflags=["-O2"],
        build_directory=build_directory,
        is_python_module=False,
        **options,
    )
    seconds = time.perf_counter() - start
    compiled = loaded != library or os.stat(library).st_mtime_ns != stamp_before
    return loaded, compiled, seconds


extension_name = "cpp_ops_discounted_cumsum" + ("_cuda" if build_cuda else "")
cuda_source = CUDA_SOURCE if build_cuda else None
# A failed build raises RuntimeError with the compiler's output; with a
# compiler (and, for CUDA, a GPU and nvcc) present, that is a real error.
library, compiled, build_seconds = load_cached_extension(
    extension_name, CPP_SOURCE, cuda_source
)
action = "compiled the extension" if compiled else "reused the cached build"
print(f"{action} in {build_seconds:.2f} s")
print(f"library: {library}")
assert os.path.exists(library)

# %%
# The first run of the page pays for the compilation; a second run finds the
# library up to date and only loads it. The same happens within one process,
# for instance when a notebook cell is run twice:

library_again, compiled_again, seconds_again = load_cached_extension(
    extension_name, CPP_SOURCE, cuda_source
)
print(f"second load: compiled={compiled_again}, {seconds_again:.2f} s")
assert library_again == library and not compiled_again

# %%
# To put the cache somewhere else, for instance on a CI runner's persistent
# volume, set ``TORCH_EXTENSIONS_DIR`` before running the page. To force a
# rebuild, delete the directory printed above.
#
# The operator now exists, with the schema written in C++:

discounted_cumsum = torch.ops.cpp_ops.discounted_cumsum.default
print(discounted_cumsum._schema)
assert str(discounted_cumsum._schema) == (
    "cpp_ops::discounted_cumsum(Tensor x, float decay, bool reverse=False) -> Tensor"
)
op_devices = ["cpu"] + (["cuda"] if build_cuda else [])
print(f"kernels registered for: {op_devices}")

# %%
# ``_schema`` is the parsed schema that the dispatcher stores for an operator
# overload. There is no public accessor for it; we read it only to show that
# the declaration from C++ arrived intact.
#
# Testing the kernel against the reference
# ----------------------------------------
#
# ``opcheck`` (below) checks how an operator is registered, not what it
# computes, so first we compare the kernel with the Python reference on every
# device that has a kernel. The cases cover both dtypes, both directions, a
# non-contiguous input, a length-one last dimension and an empty tensor. We
# record each check in ``checks`` to print a summary at the end.

checks = {}


def record(check, device):
    checks.setdefault(check, set()).add(device)


def reference_cases(device):
    """(x, decay, reverse) triples that cover the kernel's code paths."""
    wide = torch.randn(3, 40, 5, device=device).transpose(1, 2)
    return [
        (torch.randn(4, 3, 100, device=device), 0.9, False),
        (torch.randn(6, 50, dtype=torch.float64, device=device), 0.5, True),
        (wide, 0.99, False),
        (torch.randn(7, 1, device=device), 0.3, True),
        (torch.randn(0, 8, device=device), 0.7, False),
        (torch.randn(16, device=device), 1.0, False),
    ]


for device in op_devices:
    for x, decay, reverse in reference_cases(device):
        actual = discounted_cumsum(x, decay, reverse)
        expected = discounted_cumsum_reference(x, decay, reverse)
        torch.testing.assert_close(actual, expected)
    record("matches the Python reference", device)
print(f"kernel matches the reference on {op_devices}")

# %%
# A picture shows the same agreement. Scaled by ``1 - decay``, the operator
# is an exponential moving average; the curves are the C++ kernel and the
# markers the Python reference, for two decays applied to a noisy sine wave.

steps = torch.arange(200, dtype=torch.float32)
noisy = torch.sin(steps / 20) + 0.4 * torch.randn(200)
fig, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
ax.plot(steps, noisy, color="0.75", linewidth=1, label="input")
roughness = {}
for decay in (0.8, 0.95):
    smoothed = (1 - decay) * discounted_cumsum(noisy, decay)
    expected = (1 - decay) * discounted_cumsum_reference(noisy, decay)
    torch.testing.assert_close(smoothed, expected)
    roughness[decay] = smoothed.diff().abs().sum().item()
    line = ax.plot(steps, smoothed, label=f"C++ kernel, decay={decay}")[0]
    ax.plot(steps[::8], expected[::8], "o", color=line.get_color(), markersize=3)
ax.set_xlabel("position along the last dimension")
ax.set_ylabel("value")
ax.set_title("C++ kernel (lines) and Python reference (dots)")
ax.legend(fontsize="small")
plt.show()
print(f"total variation of each curve: {roughness}")
assert roughness[0.95] < roughness[0.8]

# %%
# The larger decay remembers more of the past, so its curve is smoother: its
# total variation (the summed size of its steps) is the smaller one.
#
# Bad input raises ``ValueError``
# -------------------------------
#
# ``TORCH_CHECK_VALUE`` in the kernel turns a bad argument into a Python
# ``ValueError`` with the message written in C++, instead of a silently wrong
# tensor. A decay above 1 would make the running total grow without bound,
# and an integer tensor is not a type the kernel was compiled for:

for device in op_devices:
    bad_calls = {
        "decay above 1": (torch.randn(2, 5, device=device), 1.5),
        "integer input": (torch.arange(5, device=device), 0.5),
    }
    for label, bad_args in bad_calls.items():
        try:
            discounted_cumsum(*bad_args)
        except ValueError as err:
            print(
                f"{device}, {label}: {type(err).__name__}: {str(err).splitlines()[0]}"
            )
        else:
            raise AssertionError(f"expected {label} to be rejected on {device}")
    record("rejects bad input with ValueError", device)

# %%
# No Python in the call path
# --------------------------
#
# What does "no Python" mean in practice? Python's ``sys.setprofile`` hook
# sees every Python function that starts running. We list the ones entered
# while the operator runs, leaving out the ``torch.ops`` entry point that we
# call from Python ourselves. For a kernel written in C++ the list is empty:
# once the call reaches the dispatcher, everything happens in compiled code.

ENTRY_POINT = ("_ops.py", "__call__")


def python_functions_entered(fn, *args):
    """Names of the Python functions that run during fn(*args)."""
    entered = []

    def profiler(frame, event, arg):
        if event == "call":
            code = frame.f_code
            where = (os.path.basename(code.co_filename), code.co_name)
            if where != ENTRY_POINT:
                entered.append(f"{where[0]}:{where[1]}")

    sys.setprofile(profiler)
    try:
        fn(*args)
    finally:
        sys.setprofile(None)
    return entered


entered = python_functions_entered(discounted_cumsum, torch.randn(8, 64), 0.9)
print(f"Python functions entered by the C++ operator: {entered}")
assert entered == []

# %%
# A fake kernel, registered from Python
# -------------------------------------
#
# ``torch.compile`` and ``torch.export`` trace programs with fake tensors,
# which carry shapes, strides and dtypes but no data. A C++ kernel cannot run
# on them, so the operator needs a fake kernel. ``opcheck`` can test just
# that, with ``test_utils="test_faketensor"``. Without a fake kernel it fails:

example = torch.randn(3, 10)
report = torch.library.opcheck(
    discounted_cumsum,
    (example, 0.9),
    test_utils="test_faketensor",
    raise_exception=False,
)
failure = report["test_faketensor"]
print(f"test_faketensor: {type(failure).__name__}: {str(failure).splitlines()[0]}")
assert failure != "SUCCESS"

# %%
# The fake kernel can be written in Python even though the operator was
# declared in C++: ``torch.library.register_fake`` takes the operator's
# qualified name. It repeats the kernel's argument checks, so a bad call fails
# the same way while tracing, and returns an empty tensor shaped like the real
# output: contiguous, whatever the input's strides, because the C++ kernel
# allocates its output from ``x.contiguous()``.


def check_discounted_cumsum_args(x, decay):
    """The Python twin of the C++ argument checks."""
    if x.dim() < 1:
        raise ValueError("discounted_cumsum: x must have at least one dimension")
    if x.dtype not in (torch.float32, torch.float64):
        raise ValueError(
            f"discounted_cumsum: x must be float32 or float64, got {x.dtype}"
        )
    if not 0.0 <= decay <= 1.0:
        raise ValueError(
            f"discounted_cumsum: decay must be between 0 and 1, got {decay}"
        )


@torch.library.register_fake("cpp_ops::discounted_cumsum")
def _(x, decay, reverse=False):
    check_discounted_cumsum_args(x, decay)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


report = torch.library.opcheck(
    discounted_cumsum,
    (example, 0.9),
    test_utils="test_faketensor",
    raise_exception=False,
)
print(f"with the fake kernel: {report}")
assert report == {"test_faketensor": "SUCCESS"}

# %%
# ``register_fake`` also installs a kernel for *meta* tensors (shapes and
# dtypes without data, usable without any compiler) that runs the same fake
# kernel. That lets us check both promises directly: a transposed input gives
# a contiguous output, and a bad ``decay`` is refused.

meta_input = torch.empty(10, 3, device="meta").t()
meta_output = discounted_cumsum(meta_input, 0.9)
print(f"meta input strides {meta_input.stride()} -> output {meta_output.stride()}")
assert meta_output.shape == meta_input.shape and meta_output.is_contiguous()
try:
    discounted_cumsum(meta_input, 1.5)
except ValueError as err:
    print(f"{type(err).__name__}: {err}")
else:
    raise AssertionError("expected the fake kernel to reject decay=1.5")

# %%
# A backward formula, registered from Python
# ------------------------------------------
#
# Autograd does not know the derivative of a C++ kernel either, and this gap
# is easy to miss: PyTorch does not refuse to backpropagate through the
# operator. It only warns, and the input gets no gradient at all:

x = torch.randn(3, 10, requires_grad=True)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    discounted_cumsum(x, 0.9).sum().backward()
user_warnings = [w for w in caught if issubclass(w.category, UserWarning)]
print(f"x.grad after backward: {x.grad}")
assert x.grad is None and len(user_warnings) > 0
print(f"{user_warnings[0].category.__name__}: {str(user_warnings[0].message)[:72]}...")
assert "autograd kernel was not registered" in str(user_warnings[0].message)

# %%
# ``gradcheck`` catches the problem, because it compares the gradient with
# finite differences. (``GradcheckError`` is defined in the
# ``torch.autograd.gradcheck`` module and is not re-exported from
# ``torch.autograd``, so we import it from that module.) The warning we have
# just seen is silenced here.

x64 = torch.randn(3, 12, dtype=torch.float64, requires_grad=True)
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        torch.autograd.gradcheck(lambda x: discounted_cumsum(x, 0.8), (x64,))
except GradcheckError as err:
    print(f"{type(err).__name__}: {str(err).splitlines()[0]}")
else:
    raise AssertionError("expected gradcheck to fail without a backward formula")

# %%
# Now the formula. Each output ``y[t]`` adds up ``x[s] * decay ** (t - s)``
# for every ``s`` up to ``t``, so the gradient with respect to ``x[s]`` adds
# up ``grad[t] * decay ** (t - s)`` for every ``t`` from ``s`` on: the same
# discounted sum, run in the other direction. The backward is therefore the
# operator itself with ``reverse`` flipped. Because it is built from an
# operator with a registered derivative, autograd can differentiate the
# backward too.
#
# ``decay`` and ``reverse`` are plain Python values, not tensors, so their
# gradients are ``None``.


def setup_context(ctx, inputs, output):
    _, decay, reverse = inputs
    ctx.decay = decay
    ctx.reverse = reverse


def backward(ctx, grad_output):
    grad_x = torch.ops.cpp_ops.discounted_cumsum(
        grad_output, ctx.decay, not ctx.reverse
    )
    return grad_x, None, None


torch.library.register_autograd(
    "cpp_ops::discounted_cumsum", backward, setup_context=setup_context
)

# %%
# ``gradcheck`` compares the formula with finite differences, in float64 and
# in both directions; ``gradgradcheck`` does the same for the second
# derivative.

for device in op_devices:
    for reverse in (False, True):
        x = torch.randn(3, 12, dtype=torch.float64, device=device, requires_grad=True)
        assert torch.autograd.gradcheck(
            lambda x, r=reverse: torch.ops.cpp_ops.discounted_cumsum(x, 0.8, r), (x,)
        )
        assert torch.autograd.gradgradcheck(
            lambda x, r=reverse: torch.ops.cpp_ops.discounted_cumsum(x, 0.8, r), (x,)
        )
    record("gradcheck and gradgradcheck", device)
print(f"gradcheck and gradgradcheck pass on {op_devices}")

# %%
# Testing the registrations with ``opcheck``
# ------------------------------------------
#
# Now the full ``opcheck``: the schema is honest about mutation and aliasing,
# the fake kernel agrees with the real one, the autograd registration is the
# supported kind, and the operator gives the same results and gradients
# through the compiler's tracing machinery. The samples cover the layouts an
# operator meets in practice, each with and without ``requires_grad``:
# row-major, non-contiguous (every other column), permuted (dense but
# column-major), channels-last 4-D, empty, and float64.


def opcheck_samples(device):
    def make(*shape, dtype=torch.float32):
        return torch.randn(*shape, dtype=dtype, device=device)

    layouts = {
        "row-major": make(4, 30),
        "non-contiguous": make(4, 60)[:, ::2],
        "permuted": make(30, 4).t(),
        "channels-last": make(2, 3, 4, 5).contiguous(memory_format=torch.channels_last),
        "empty": make(0, 30),
        "float64": make(2, 3, 9, dtype=torch.float64),
    }
    assert not layouts["non-contiguous"].is_contiguous()
    assert not layouts["permuted"].is_contiguous()
    for name, x in layouts.items():
        for requires_grad in (False, True):
            yield name, x.detach().requires_grad_(requires_grad)


for device in op_devices:
    for _name, x in opcheck_samples(device):
        torch.library.opcheck(discounted_cumsum, (x, 0.9, x.requires_grad))
    record("opcheck", device)
print(f"opcheck passes on {op_devices} for every layout, with and without grad")

# %%
# Keeping the Python half with the library
# ----------------------------------------
#
# This page registers the fake kernel and the backward from its own script.
# A packaged extension keeps them in a Python module of its own, which its
# package imports right after loading the shared library. Someone who loads
# only the shared library (``torch.ops.load_library``, or a C++ program that
# later hands tensors back to Python) gets an operator without those
# registrations, and tracing it fails. ``m.set_python_module("module")`` in
# the ``TORCH_LIBRARY`` block records, for every operator defined after it,
# which module holds its Python half, so that:
#
# * the error for a missing fake kernel names the module to import, and
# * ``torch.library.register_fake`` checks that the fake kernel really is
#   registered from that module.
#
# Our C++ source declared a second operator after such a call:
# ``discounted_return``, the discounted sum of a whole sequence (the reversed
# running total at position 0). Before its module is imported, a call with
# meta tensors (a fake kernel's job) fails and says what to import:

discounted_return = torch.ops.cpp_ops.discounted_return.default
stub = torch._C._dispatch_pystub("cpp_ops::discounted_return", "")
print(f"recorded module: {stub[0]!r}")
assert stub[0] == "cpp_ops_registrations"
assert torch._C._dispatch_pystub("cpp_ops::discounted_cumsum", "") is None
try:
    discounted_return(torch.empty(4, 10, device="meta"), 0.9)
except NotImplementedError as err:
    print(f"{type(err).__name__}: {str(err).splitlines()[0]}")
    assert "import the 'cpp_ops_registrations' Python module" in str(err)
else:
    raise AssertionError("expected the missing fake kernel to name its module")

# %%
# ``torch._C._dispatch_pystub`` is the dispatcher's private record of that
# call, read here only to show it. The module itself is ordinary Python. The
# page writes it into a temporary folder and imports it, as a package would:
# a fake kernel that repeats the argument checks, and a backward formula
# (the gradient of ``x[..., t]`` is ``grad * decay ** t``).

REGISTRATIONS = """
import torch


def check_args(x, decay):
    # The same checks, and messages, as the C++ kernel.
    if x.dim() < 1:
        raise ValueError("discounted_cumsum: x must have at least one dimension")
    if x.dtype not in (torch.float32, torch.float64):
        raise ValueError(
            f"discounted_cumsum: x must be float32 or float64, got {x.dtype}"
        )
    if not 0.0 <= decay <= 1.0:
        raise ValueError(
            f"discounted_cumsum: decay must be between 0 and 1, got {decay}"
        )
    if x.shape[-1] == 0:
        raise ValueError(
            "discounted_return: the last dimension of x must not be empty"
        )


@torch.library.register_fake("cpp_ops::discounted_return")
def _(x, decay):
    check_args(x, decay)
    return x.new_empty(x.shape[:-1])


def setup_context(ctx, inputs, output):
    x, decay = inputs
    ctx.decay, ctx.length = decay, x.shape[-1]


def backward(ctx, grad):
    steps = torch.arange(ctx.length, dtype=grad.dtype, device=grad.device)
    return grad.unsqueeze(-1) * ctx.decay**steps, None


torch.library.register_autograd(
    "cpp_ops::discounted_return", backward, setup_context=setup_context
)
"""

module_folder = tempfile.mkdtemp(prefix="cpp_ops_registrations-")
with open(os.path.join(module_folder, "cpp_ops_registrations.py"), "w") as file:
    file.write(REGISTRATIONS)
sys.path.insert(0, module_folder)
try:
    importlib.import_module("cpp_ops_registrations")
finally:
    sys.path.remove(module_folder)

meta_return = discounted_return(torch.empty(4, 10, device="meta"), 0.9)
print(f"after the import, a meta call gives shape {tuple(meta_return.shape)}")
assert meta_return.shape == (4,)

# %%
# The first fake call also ran ``register_fake``'s check that the module
# matches the one named in C++ (it raises ``RuntimeError`` when they differ).
# The operator now passes the same tests as ``discounted_cumsum``; it has a
# CPU kernel only.

rewards = torch.tensor([1.0, 0.0, 2.0])
torch.testing.assert_close(
    discounted_return(rewards, 0.5), torch.tensor(1.0 + 0.25 * 2.0)
)
for _name, x in opcheck_samples("cpu"):
    torch.library.opcheck(discounted_return, (x, 0.9))
    expected = discounted_cumsum_reference(x.detach(), 0.9, reverse=True)[..., 0]
    torch.testing.assert_close(discounted_return(x, 0.9), expected)
x64 = torch.randn(3, 7, dtype=torch.float64, requires_grad=True)
assert torch.autograd.gradcheck(lambda x: discounted_return(x, 0.8), (x64,))
print("discounted_return passes opcheck and gradcheck")
for device in ("cpu", "meta"):  # the C++ kernel, then the fake kernel
    try:
        discounted_return(torch.empty(3, 0, device=device), 0.9)
    except ValueError as err:
        print(f"{device}, empty sequence: {type(err).__name__}: {err}")
    else:
        raise AssertionError("expected an empty sequence to be refused")

# %%
# Where Python comes back
# -----------------------
#
# The fake kernel runs only for fake and meta tensors, never for real ones,
# but the backward formula we registered from Python sits on the *Autograd*
# dispatch key, which every ordinary call passes through, whether or not the
# input requires grad. Run the same measurement again:

entered = python_functions_entered(discounted_cumsum, torch.randn(8, 64), 0.9)
print(f"after register_autograd: {len(entered)} Python functions, e.g. {entered[:2]}")
assert len(entered) > 0

with torch.inference_mode():
    entered = python_functions_entered(discounted_cumsum, torch.randn(8, 64), 0.9)
print(f"under torch.inference_mode: {entered}")
assert entered == []

# %%
# Inside ``torch.inference_mode`` autograd is switched off entirely, the
# Autograd key is skipped, and the call is pure C++ again. That is the
# situation of a deployed inference model. If the training path must be free
# of Python as well, the backward formula has to be written in C++ too, as a
# ``torch::autograd::Function`` registered for the ``Autograd`` key, at the
# cost of more C++ to write and compile.
#
# Using the operator in ``torch.compile``
# ---------------------------------------
#
# With the fake kernel and the backward formula in place, the operator
# compiles into a single graph (``fullgraph=True`` turns any graph break into
# an error) and trains. We use the ``aot_eager`` backend, which runs the same
# tracing and autograd machinery as the default Inductor backend but skips
# generating code, to keep the page quick. The compiled loss and gradient
# must match eager mode.


def smoothed_energy(x):
    smoothed = (1 - 0.9) * torch.ops.cpp_ops.discounted_cumsum(2 * x, 0.9)
    return smoothed.pow(2).mean()


compiled_energy = torch.compile(smoothed_energy, backend="aot_eager", fullgraph=True)
for device in op_devices:
    x_eager = torch.randn(5, 40, device=device, requires_grad=True)
    x_compiled = x_eager.detach().clone().requires_grad_()
    loss_eager = smoothed_energy(x_eager)
    loss_compiled = compiled_energy(x_compiled)
    loss_eager.backward()
    loss_compiled.backward()
    torch.testing.assert_close(loss_compiled, loss_eager)
    torch.testing.assert_close(x_compiled.grad, x_eager.grad)
    record("torch.compile forward and backward", device)
print(f"compiled loss and gradient match eager on {op_devices}")

# %%
# Exporting a model that uses the operator
# ----------------------------------------
#
# ``torch.export`` records the operator as one node that refers to it by its
# qualified name, ``cpp_ops::discounted_cumsum``, exactly as it records
# PyTorch's own operators. It never looks inside the kernel, which is why an
# exported program can later be compiled ahead of time and run from C++ with
# the same shared library.


class ExponentialSmoother(torch.nn.Module):
    def __init__(self, decay):
        super().__init__()
        self.decay = decay

    def forward(self, x):
        return (1 - self.decay) * torch.ops.cpp_ops.discounted_cumsum(x, self.decay)


smoother = ExponentialSmoother(0.9)
for device in op_devices:
    sample = torch.randn(4, 50, device=device)
    exported = torch.export.export(smoother, (sample,))
    targets = [n.target for n in exported.graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.cpp_ops.discounted_cumsum.default) == 1
    assert len(targets) == 2
    torch.testing.assert_close(exported.module()(sample), smoother(sample))
    record("torch.export: one node, same result", device)
print(exported.graph)

# %%
# Besides its input and output, the exported graph holds two calls: the
# operator, exactly once, and the multiplication by ``1 - decay`` written in
# Python. Whoever loads such a program, in Python or in C++, must load the
# shared library first so that the name resolves to a kernel.
#
# What was checked, and what it cost
# ----------------------------------
#
# Here is everything this run verified, per device:

columns = ["cpu", "cuda"]


def cell(check, device):
    if device in checks[check]:
        return "passed"
    if device not in devices:
        return "no GPU"
    return "no nvcc"


print(f"{'check':<38}" + "".join(f"{d:>10}" for d in columns))
for check in checks:
    print(f"{check:<38}" + "".join(f"{cell(check, d):>10}" for d in columns))
print(f"\nbuild: {action} in {build_seconds:.2f} s")
print(f"cache: {os.path.dirname(library)}")

# %%
# The compile time printed above is the one-time cost of the C++ route in this
# run (or, when the cache was warm, the cost of finding and loading the
# library). A real project compiles ahead of time instead, with
# ``setuptools`` and ``torch.utils.cpp_extension.CppExtension`` in a package
# build, and ships the binary; ``load_inline`` is the quickest way to try an
# idea. Three pages take the next steps:
#
# * :ref:`sphx_glr_tutorials_cpp_extension_packaging.py` turns this operator
#   into a real extension package: a ``setup.py``, wheels, the Python module
#   named by ``m.set_python_module``, and ``py_limited_api`` so one wheel
#   serves several Python versions.
# * :ref:`sphx_glr_tutorials_cpp_stable_abi.py` writes the kernel against
#   LibTorch's stable ABI, so one binary keeps working across PyTorch
#   releases instead of being rebuilt for each.
# * :ref:`sphx_glr_tutorials_aot_inductor_custom_ops.py` compiles an exported
#   model that calls a custom operator ahead of time with AOTInductor and runs
#   it without Python.
#
# Conclusion
# ----------
#
# A C++ operator is three small pieces of C++ (a kernel, a schema in
# ``TORCH_LIBRARY``, a registration in ``TORCH_LIBRARY_IMPL``) plus the same
# Python registrations a Python operator needs: a fake kernel for the
# compilers and a backward formula for autograd, kept in the module that
# ``m.set_python_module`` names. Test it the same way, against a reference,
# with ``gradcheck`` and with ``opcheck``. In return, its kernel runs without
# the Python interpreter, inside and outside of Python.
#
# Related pages:
#
# * :ref:`sphx_glr_tutorials_python_custom_ops.py` for the Python route
# * :ref:`sphx_glr_tutorials_custom_op_registrations.py` for the other
#   registrations an operator can have
# * :ref:`sphx_glr_tutorials_custom_ops_in_export.py` for operators in
#   exported programs
# * :ref:`sphx_glr_tutorials_triton_custom_ops.py` for GPU kernels written in
#   Triton
# * :ref:`sphx_glr_tutorials_custom_op_performance.py` for what the operator
#   machinery costs per call
