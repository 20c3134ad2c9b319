"""
C++ Custom Operators
====================

After this page you will be able to write an operator's kernel in C++ (and
CUDA), compile it from a notebook with ``torch.utils.cpp_extension.load_inline``,
declare it with ``TORCH_LIBRARY``, and give it the Python pieces that
``torch.compile``, ``torch.export`` and autograd need, paying for the build
once.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * How to declare an operator's schema with ``TORCH_LIBRARY`` and
         register a CPU kernel with ``TORCH_LIBRARY_IMPL``
       * How to add a fake kernel and a backward formula from Python
       * How to test the result with ``opcheck``, ``gradcheck`` and a
         reference, and use it in ``torch.compile`` and ``torch.export``
       * How to cache the build, compile a CUDA kernel for chosen GPUs, and
         when C++ is worth the trouble

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * A C++ compiler and ``ninja`` (for the CUDA kernel, the CUDA compiler
         of your PyTorch's CUDA release)
       * :ref:`sphx_glr_tutorials_python_custom_ops.py`

.. admonition:: Checklist
   :class: checklist

   #. Check for a C++ compiler and ``ninja`` (and a CUDA toolkit for a CUDA
      kernel) before building.
   #. Declare the schema with ``TORCH_LIBRARY`` and register one kernel per
      device with ``TORCH_LIBRARY_IMPL``; validate arguments with
      ``TORCH_CHECK_VALUE``.
   #. Build with ``load_inline`` into a fixed ``build_directory`` so later
      runs reuse the library; name the GPUs in ``TORCH_CUDA_ARCH_LIST``.
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
# The page compiles C++ while it runs, so besides PyTorch it needs a C++
# compiler. Everything runs on the CPU; with a CUDA toolkit a CUDA kernel is
# compiled as well, and tested when a GPU is present.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import importlib
import inspect
import os
import re
import shutil
import subprocess
import tempfile
import time
import warnings
from importlib import metadata
from pathlib import Path

import matplotlib.pyplot as plt
from torch.autograd.gradcheck import GradcheckError

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
# * **The kernel needs a compiled loop**: each step depends on the previous
#   one, or the data is walked in an order no PyTorch operator offers. In
#   Python that is a loop launching small tensor operations per step.
# * **The operator must run without Python**: an operator declared with
#   ``TORCH_LIBRARY`` lives in a shared library, which a C++ program or a
#   model compiled ahead of time with AOTInductor can load.
#
# The price: a toolchain that matches your PyTorch build, a compile per
# platform and PyTorch release, and memory errors that take down the whole
# process instead of raising an exception.
#
# The operation: a discounted cumulative sum
# ------------------------------------------
#
# Our operator walks along the last dimension and keeps a running total that
# fades by a factor ``decay`` at every step::
#
#     y[..., 0] = x[..., 0]
#     y[..., t] = decay * y[..., t - 1] + x[..., t]
#
# With ``reverse=True`` it walks from the end, which computes discounted
# returns in reinforcement learning; scaled by ``1 - decay`` it is an
# exponential moving average. ``torch.cumsum`` is the case ``decay == 1``;
# PyTorch has no operator for the general case. The reference we test
# against is the obvious Python loop:


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
# equal to 1 it is ``cumsum``.
#
# Checking the toolchain
# ----------------------
#
# ``load_inline`` builds with ``ninja`` and the C++ compiler named by ``CXX``
# (``c++`` when unset); without either, the build fails deep inside
# ``cpp_extension`` with a long log, so we check first. The CUDA kernel needs
# no GPU to compile, only the CUDA compiler and headers of PyTorch's CUDA
# release: the toolkit ``CUDA_HOME`` names, or pip's ``nvidia-cuda-nvcc``
# and its siblings, which ``find_cuda_toolkit`` (hidden) looks for.
# ``cpp_extension`` reads ``CUDA_HOME`` when it is imported, so we set it
# first (without a GPU, it logs that it found no CUDA runtime: expected),
# and on the module too, in case something in this process imported it
# earlier and found another toolkit.
# Without a toolkit the page skips the CUDA kernel, unless a GPU is present:
# then it is an error.

# sphinx_gallery_start_ignore
# The CUDA compiler, its headers and cuobjdump, as pip installs them (CUDA 13
# and later put them all in site-packages/nvidia/cu13).
CUDA_PACKAGES = [
    "nvidia-cuda-nvcc",
    "nvidia-cuda-crt",
    "nvidia-nvvm",
    "nvidia-cuda-runtime",
    "nvidia-cuda-cuobjdump",
]


def version_of(name):
    try:
        return ".".join(re.findall(r"\d+", metadata.version(name))[:2])
    except metadata.PackageNotFoundError:
        return None


def find_cuda_toolkit():
    """(the CUDA_HOME to build with, or None; a few words on where it came from)."""
    if torch.version.cuda is None:
        return None, f"this PyTorch ({torch.__version__}) has no CUDA"
    if os.environ.get("CUDA_HOME"):
        return Path(os.environ["CUDA_HOME"]), "the toolkit CUDA_HOME names"
    cuda = ".".join(torch.version.cuda.split(".")[:2])
    if int(cuda.split(".")[0]) < 13:  # no single CUDA_HOME folder from pip
        return None, f"no CUDA {cuda} toolkit (set CUDA_HOME to one)"
    if any(version_of(name) != cuda for name in CUDA_PACKAGES):
        wanted = " ".join(f"{name}=={cuda}.*" for name in CUDA_PACKAGES)
        return None, f"no CUDA {cuda} toolkit (pip install {wanted})"
    (nvcc,) = [f for f in metadata.files("nvidia-cuda-nvcc") if f.name == "nvcc"]
    home = Path(nvcc.locate()).resolve().parent.parent
    return home, f"CUDA {cuda} from pip ({home})"


# sphinx_gallery_end_ignore
compiler = os.environ.get("CXX", "c++")
if shutil.which(compiler) is None:
    sys.exit(f"This page compiles C++: no compiler {compiler!r} on PATH (set CXX).")
cuda_home, toolkit = find_cuda_toolkit()
if cuda_home is None and torch.cuda.is_available():
    raise RuntimeError(f"A GPU is present, but its kernel cannot be built: {toolkit}")
if cuda_home is not None:
    os.environ["CUDA_HOME"] = str(cuda_home)

from torch.utils import cpp_extension  # noqa: E402  (after CUDA_HOME is set)

if cuda_home is not None:  # imported earlier (another cell)? it kept its own
    cpp_extension.CUDA_HOME = str(cuda_home)

if not cpp_extension.is_ninja_available():
    sys.exit(
        "This page builds C++ with load_inline, which needs ninja (pip install ninja)."
    )
print(f"C++ compiler: {shutil.which(compiler)}")
print(f"CUDA kernel: {'built with ' if cuda_home else 'skipped the build, '}{toolkit}")

# %%
# Declaring the operator and its CPU kernel
# -----------------------------------------
#
# Three pieces of C++ make an operator:
#
# * A kernel: an ordinary C++ function from ``at::Tensor`` and plain values to
#   ``at::Tensor``.
# * ``TORCH_LIBRARY(cpp_ops, m)`` declares the namespace and, with ``m.def``,
#   the operator's schema: argument types, defaults, and the fact that
#   nothing is mutated (no ``Tensor(a!)``).
# * ``TORCH_LIBRARY_IMPL(cpp_ops, CPU, m)`` registers the kernel for CPU
#   tensors; other devices get their own blocks.
#
# ``TORCH_CHECK_VALUE`` surfaces in Python as a ``ValueError``. The kernel
# treats everything but the last dimension as rows, which ``at::parallel_for``
# spreads over CPU threads, and includes only the headers it uses, not
# ``torch/extension.h``, which pulls in pybind11 and slows every compile.

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
# The CUDA version gives each row to one GPU thread: the simplest correct
# mapping, not the fastest. It registers for the ``CUDA`` dispatch key,
# launches on PyTorch's current stream, and a device guard makes it run on
# the GPU that holds ``x``.

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
# ``load_inline`` compiles the sources with ``ninja`` and loads the library.
# ``is_python_module=False``: the library needs no Python bindings, since
# loading it runs the ``TORCH_LIBRARY`` blocks. A fixed ``build_directory``
# per Python and PyTorch version, under ``$TORCH_EXTENSIONS_DIR`` (or
# PyTorch's default cache), lets ``ninja`` rebuild only what changed, so a
# later run just loads the library. ``no_implicit_headers=True`` (newer
# releases) stops ``load_inline`` from prepending ``torch/extension.h``.
#
# The CUDA kernel is compiled for the GPUs ``TORCH_CUDA_ARCH_LIST`` names:
# compute capability 8.0 (A100) and 9.0 (H100, also as PTX that the driver
# compiles for newer GPUs), plus any GPU this machine has. Without the list,
# ``load_inline`` compiles for this machine's GPUs, and fails when it has
# none.


def load_cached_extension(name, cpp_source, cuda_source=None):
    """Build (or reuse) a shared library of operators and load it."""
    root = (
        os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
    )
    version_tag = (
        f"py{sys.version_info.major}{sys.version_info.minor}_torch{torch.__version__}"
    )
    build_directory = Path(root, version_tag, name)
    build_directory.mkdir(parents=True, exist_ok=True)
    library = build_directory / f"{name}.so"
    stamp_before = library.stat().st_mtime_ns if library.exists() else None

    options = {}
    if "no_implicit_headers" in inspect.signature(cpp_extension.load_inline).parameters:
        options["no_implicit_headers"] = True
    if cuda_source is not None:
        options |= {"cuda_sources": [cuda_source], "extra_cuda_cflags": ["-O2"]}
        # pip's CUDA runtime has libcudart.so.13, not the libcudart.so link
        # that load_inline's -lcudart needs: put one in the build folder.
        link = build_directory / "libcudart.so"
        if not link.exists():
            cudart = next(Path(cpp_extension.CUDA_HOME).glob("lib*/libcudart.so*"))
            link.symlink_to(cudart)
        options["extra_ldflags"] = [f"-L{build_directory}"]
    start = time.perf_counter()
    loaded = cpp_extension.load_inline(
        name=name,
        cpp_sources=[cpp_source],
        extra_cflags=["-O2"],
        build_directory=str(build_directory),
        is_python_module=False,
        **options,
    )
    seconds = time.perf_counter() - start
    compiled = loaded != str(library) or library.stat().st_mtime_ns != stamp_before
    return Path(loaded), compiled, seconds


gpus = {
    "{}.{}".format(*torch.cuda.get_device_capability(i))
    for i in range(torch.cuda.device_count())
}
cuda_archs = ["8.0", "9.0+PTX", *sorted(gpus - {"8.0", "9.0"})]
os.environ["TORCH_CUDA_ARCH_LIST"] = ";".join(cuda_archs)
extension_name = "cpp_ops_discounted_cumsum" + ("_cuda" if cuda_home else "")
cuda_source = CUDA_SOURCE if cuda_home else None
library, compiled, build_seconds = load_cached_extension(
    extension_name, CPP_SOURCE, cuda_source
)
action = "compiled the extension" if compiled else "reused the cached build"
print(f"{action} in {build_seconds:.2f} s")
print(f"library: {library}")

# %%
# The first run of the page pays for the compilation; a second run, or a
# notebook cell run twice, finds the library up to date and only loads it.
# Delete the folder printed above to force a rebuild.

library_again, compiled_again, seconds_again = load_cached_extension(
    extension_name, CPP_SOURCE, cuda_source
)
print(f"second load: compiled={compiled_again}, {seconds_again:.2f} s")
assert library_again == library and not compiled_again

# %%
# ``cuobjdump``, from the CUDA toolkit, lists the GPU code in the library:
# machine code (``ELF``) per architecture, and ``PTX``.

if cuda_home:
    listed = subprocess.run(
        [cuda_home / "bin" / "cuobjdump", "--list-elf", "--list-ptx", library],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    print(listed.strip())
    elf = {f"sm_{n}" for n in re.findall(r"ELF file.*\.sm_(\d+)\.cubin", listed)}
    ptx = {f"sm_{n}" for n in re.findall(r"PTX file.*\.sm_(\d+)\.ptx", listed)}
    asked = {"sm_" + arch.split("+")[0].replace(".", "") for arch in cuda_archs}
    assert elf == asked and ptx == {"sm_90"}
else:
    print(f"no GPU code in {library.name}: the CUDA build was skipped")

# %%
# The library holds code for exactly the architectures asked for, whether or
# not this machine has a GPU. The operator now exists, with the schema
# written in C++:

discounted_cumsum = torch.ops.cpp_ops.discounted_cumsum.default
print(discounted_cumsum._schema)
assert str(discounted_cumsum._schema) == (
    "cpp_ops::discounted_cumsum(Tensor x, float decay, bool reverse=False) -> Tensor"
)
op_devices = devices
print(f"tested on: {op_devices}")

# %%
# (``_schema`` is private; we read it only to show that the declaration
# arrived intact.)
#
# Testing the kernel against the reference
# ----------------------------------------
#
# ``opcheck`` (below) checks how an operator is registered, not what it
# computes, so first we compare the kernel with the reference on every device
# tested: both dtypes, both directions, a non-contiguous input, a length-one
# last dimension and an empty tensor. ``checks`` records each check for a
# summary at the end.

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
# A picture of the same agreement: the exponential moving average of a noisy
# sine wave, from the C++ kernel (lines) and the reference (dots).

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
# ``TORCH_CHECK_VALUE`` turns a bad argument into a ``ValueError`` with the
# message written in C++: a decay above 1 (the total would grow without
# bound) and an integer tensor (a type the kernel was not compiled for):

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
# Python's ``sys.setprofile`` hook sees every Python function that starts
# running. We list those entered while the operator runs, leaving out the
# ``torch.ops`` entry point we call ourselves. For a C++ kernel the list is
# empty: past the dispatcher, everything is compiled code.

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
# ``torch.compile`` and ``torch.export`` trace with fake tensors, which carry
# shapes, strides and dtypes but no data. A C++ kernel cannot run on them, so
# the operator needs a fake kernel; ``opcheck`` with
# ``test_utils="test_faketensor"`` tests just that, and fails without one:

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
# ``torch.library.register_fake`` takes the qualified name of an operator
# declared in C++. The fake kernel repeats the C++ argument checks, so a bad
# call fails the same way while tracing, and returns an empty tensor shaped
# like the real output: contiguous, like the C++ kernel's, which allocates
# from ``x.contiguous()``.


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
# ``register_fake`` also serves *meta* tensors (no data, no compiler needed),
# so we can check both promises directly: a transposed input gives a
# contiguous output, and a bad ``decay`` is refused.

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
# Autograd does not know the derivative of a C++ kernel either, and the gap
# is easy to miss: PyTorch only warns, and the input gets no gradient:

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
# ``gradcheck`` catches it, comparing the gradient with finite differences
# (``GradcheckError`` comes from ``torch.autograd.gradcheck``; the warning is
# silenced here).

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
# sum in the other direction. The backward is the operator with ``reverse``
# flipped, so autograd can differentiate it too. ``decay`` and ``reverse``
# are not tensors: their gradients are ``None``.


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
# ``gradcheck`` and ``gradgradcheck`` check the first and second derivatives
# in float64, in both directions.

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
# The full ``opcheck`` checks the schema's honesty about mutation and
# aliasing, the fake kernel against the real one, the autograd registration,
# and results and gradients through the compiler's tracing. The samples,
# each with and without ``requires_grad``: row-major, non-contiguous,
# permuted (dense, column-major), channels-last, empty, and float64.


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
# A packaged extension keeps its Python registrations in a module that the
# package imports right after loading the library. Whoever loads only the
# library (``torch.ops.load_library``) gets an operator that cannot be
# traced. ``m.set_python_module("module")`` in the ``TORCH_LIBRARY`` block
# records, for the operators defined after it, which module holds their
# Python half: the error for a missing fake kernel names it, and
# ``register_fake`` checks that the fake kernel comes from it.
#
# Our C++ source declared ``discounted_return`` after such a call: the
# discounted sum of a whole sequence (the reversed running total at position
# 0). Before its module is imported, a meta call fails and says what to
# import:

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
# (``torch._C._dispatch_pystub`` is the dispatcher's private record, read
# only to show it.) The module is ordinary Python, written to a temporary
# folder and imported as a package would: a fake kernel with the argument
# checks, and a backward (the gradient of ``x[..., t]`` is
# ``grad * decay ** t``).

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
    shutil.rmtree(module_folder)  # imported: the module no longer needs its file

meta_return = discounted_return(torch.empty(4, 10, device="meta"), 0.9)
print(f"after the import, a meta call gives shape {tuple(meta_return.shape)}")
assert meta_return.shape == (4,)

# %%
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
# The fake kernel never runs for real tensors, but the Python backward sits
# on the *Autograd* dispatch key, which every ordinary call passes through.
# The same measurement again:

entered = python_functions_entered(discounted_cumsum, torch.randn(8, 64), 0.9)
print(f"after register_autograd: {len(entered)} Python functions, e.g. {entered[:2]}")
assert len(entered) > 0

with torch.inference_mode():
    entered = python_functions_entered(discounted_cumsum, torch.randn(8, 64), 0.9)
print(f"under torch.inference_mode: {entered}")
assert entered == []

# %%
# Inside ``torch.inference_mode`` the Autograd key is skipped and the call is
# pure C++ again, as in a deployed inference model. A training path free of
# Python needs the backward in C++ too, as a ``torch::autograd::Function``
# registered for the ``Autograd`` key.
#
# Using the operator in ``torch.compile``
# ---------------------------------------
#
# With the fake kernel and the backward in place, the operator compiles into
# one graph (``fullgraph=True`` turns a graph break into an error) and
# trains. The ``aot_eager`` backend traces forward and backward with
# AOTAutograd but generates no code, which keeps the page quick. Loss and
# gradient must match eager mode.


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
# ``torch.export`` records the operator as one node named
# ``cpp_ops::discounted_cumsum``, as it records PyTorch's own operators; it
# never looks inside the kernel.


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
# The graph holds two calls: the operator, once, and the multiplication by
# ``1 - decay``. Whoever loads such a program must load the shared library
# first, so that the name resolves to a kernel.
#
# What was checked, and what it cost
# ----------------------------------

columns = ["cpu", "cuda"]


def cell(check, device):
    if device in checks[check]:
        return "passed"
    assert device not in devices, f"{check} did not run on {device}"
    return "no GPU"


print(f"{'check':<38}" + "".join(f"{d:>10}" for d in columns))
for check in checks:
    print(f"{check:<38}" + "".join(f"{cell(check, d):>10}" for d in columns))
print(f"\nbuild: {action} in {build_seconds:.2f} s")
print(f"cache: {library.parent}")

# %%
# The compile time is the one-time cost of the C++ route (on a warm cache,
# the cost of loading the library). ``load_inline`` is the quickest way to
# try an idea; a real project compiles ahead of time and ships the binary:
#
# * :ref:`sphx_glr_tutorials_cpp_extension_packaging.py` turns this operator
#   into a package and a wheel you can publish.
# * :ref:`sphx_glr_tutorials_cpp_stable_abi.py` builds one binary that keeps
#   working across PyTorch releases.
# * :ref:`sphx_glr_tutorials_aot_inductor_custom_ops.py` runs an exported
#   model that calls the operator without Python.
#
# Conclusion
# ----------
#
# A C++ operator is a kernel, a schema in ``TORCH_LIBRARY`` and a
# registration in ``TORCH_LIBRARY_IMPL``, plus the Python registrations any
# operator needs: a fake kernel and a backward formula, in the module that
# ``m.set_python_module`` names. Test it against a reference, with
# ``gradcheck`` and with ``opcheck``. In return, its kernel runs without the
# Python interpreter.
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
