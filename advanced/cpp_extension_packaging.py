"""
Shipping a C++ Operator as a Wheel
==================================

After this page you will be able to turn a C++ operator into a package that
others install with pip: a ``setup.py`` driven by ``torch.utils.cpp_extension``,
a wheel built from it, and a Python package that loads the shared library and
its Python registrations in the right order. You will also build the one wheel
that serves every CPython from 3.10 on, and check that it really stays within
Python's limited API.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * How to lay out a package whose operator is declared in C++ and whose
         fake kernel and gradient are registered from Python
       * How to build, name, install and test its wheel in a fresh interpreter
       * The two ways to load the shared library, and the error you get when
         the C++ half is loaded without the Python half
       * How to build a CPython-agnostic (``abi3``) wheel and what it demands
         of the code

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * A C++ compiler (``nvcc`` too for the optional CUDA kernel), pip,
         setuptools and packaging
       * :ref:`sphx_glr_tutorials_cpp_custom_ops.py`

.. admonition:: Checklist
   :class: checklist

   #. Declare the operator with ``TORCH_LIBRARY`` and register its kernels
      with ``TORCH_LIBRARY_IMPL``; in the ``TORCH_LIBRARY`` block, name the
      Python module that holds its registrations with
      ``m.set_python_module("yourpkg._ops")``.
   #. Put the fake kernel and the autograd formula in ``yourpkg/_ops.py``.
   #. Make ``yourpkg/__init__.py`` load the shared library first and import
      ``yourpkg._ops`` second.
   #. Write a ``setup.py`` with ``CppExtension`` (``CUDAExtension`` when there
      are ``.cu`` files) and ``BuildExtension``, and a ``pyproject.toml`` that
      names ``torch`` as a build requirement.
   #. Build with ``python -m pip wheel . --no-build-isolation --no-deps`` and
      check the wheel's tags.
   #. Install it somewhere clean and test it in a fresh interpreter: against a
      reference, with ``opcheck`` and under ``torch.compile``.
   #. For one wheel for every CPython: ``py_limited_api=True``, a matching
      ``Py_LIMITED_API`` define and the ``bdist_wheel`` ``py_limited_api``
      option; no pybind11, and load the library with
      ``torch.ops.load_library``.

:ref:`sphx_glr_tutorials_cpp_custom_ops.py` compiled its operator from a
notebook with ``load_inline``. That is the quickest way to try an idea, but
nobody else can ``pip install`` it. A project that ships a C++ operator builds
it ahead of time into a *wheel*, the binary package format pip installs. This
page writes such a project from scratch, builds it, installs the result and
tests it the way a user would meet it: in a new Python process that knows
nothing of the source tree.
"""

# %%
# Setting up
# ----------
#
# The page compiles C++ code and runs pip, so it needs a C++ compiler besides
# PyTorch. Everything runs on the CPU; when a CUDA device and the CUDA compiler
# are both present, the package also gets a CUDA kernel and is tested on the
# GPU.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import hashlib
import os
import shutil
import subprocess
import sysconfig
import tempfile
import time
import zipfile
from pathlib import Path

import matplotlib.pyplot as plt
from packaging import tags
from packaging.utils import parse_wheel_filename
from torch.utils import cpp_extension

torch.manual_seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")

# %%
# Checking the toolchain
# ----------------------
#
# ``BuildExtension`` compiles with the compiler named by the ``CXX``
# environment variable (``c++`` when it is unset). Without one, pip fails
# after a long build log, so we look for it first and stop with one line
# that says what is missing. The CUDA kernel needs ``nvcc`` and a GPU to test
# it on; ``nm`` (from binutils, which comes with the compiler on Linux) lets us
# look at the symbols a library needs, and the page skips that check without
# it.

compiler = os.environ.get("CXX", "cl" if sys.platform == "win32" else "c++")
if shutil.which(compiler) is None:
    sys.exit(
        f"This page compiles C++ code, but no C++ compiler named {compiler!r} was "
        "found on PATH: install one (for example g++) or point CXX at it."
    )
nvcc = os.path.join(cpp_extension.CUDA_HOME or "", "bin", "nvcc")
with_cuda = torch.cuda.is_available() and os.path.isfile(nvcc)
nm = shutil.which("nm")
print(f"C++ compiler: {shutil.which(compiler)}")
print(f"CUDA kernel: {'built' if with_cuda else 'not built (needs nvcc and a GPU)'}")
print(f"nm: {nm or 'not found, symbol checks skipped'}")

# %%
# The operator
# ------------
#
# We ship the discounted cumulative sum from
# :ref:`sphx_glr_tutorials_cpp_custom_ops.py`: along the last dimension,
# ``y[t] = decay * y[t - 1] + x[t]``, or from the end when ``reverse=True``.
# The point of this page is the packaging, not the kernel, so here is just the
# reference every build will be tested against:


def discounted_cumsum_reference(x, decay, reverse=False):
    """One Python step per position along the last dimension."""
    out = torch.empty_like(x)
    running = torch.zeros_like(x[..., 0])
    positions = range(x.shape[-1])
    for t in reversed(positions) if reverse else positions:
        running = decay * running + x[..., t]
        out[..., t] = running
    return out


torch.testing.assert_close(
    discounted_cumsum_reference(torch.tensor([1.0, 0.0, 2.0]), 0.5),
    torch.tensor([1.0, 0.5, 2.25]),
)

# %%
# The project
# -----------
#
# A package with a C++ operator has two halves. The C++ half declares the
# operator and holds its kernels; the Python half adds what PyTorch wants to
# be told in Python: the fake kernel that ``torch.compile`` and
# ``torch.export`` trace with, and the backward formula. Here is the whole
# project, file by file; the page writes it to a temporary folder and builds
# it. The package (and the operator namespace) is called
# ``extension_package``::
#
#     pyproject.toml
#     setup.py
#     extension_package/
#         __init__.py        loads the library, then _ops
#         _ops.py            fake kernel and autograd, in Python
#         csrc/ops.cpp       kernel, TORCH_LIBRARY and TORCH_LIBRARY_IMPL
#         csrc/module.cpp    an empty Python module, so that import _C works
#         csrc/ops_cuda.cu   CUDA kernel (built only with nvcc and a GPU)
#
# The C++ source declares the operator and registers a CPU kernel. The first
# line of the ``TORCH_LIBRARY`` block is new: ``m.set_python_module`` records
# which Python module holds the operator's Python registrations, so that
# PyTorch can name it when they are missing (we will see where that helps).
# ``TORCH_CHECK_VALUE`` turns a bad argument into a Python ``ValueError``.

OPS_CPP = r"""
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

namespace extension_package {

void check_args(const at::Tensor& x, double decay) {
  TORCH_CHECK_VALUE(x.dim() >= 1, "discounted_cumsum: x must have a dimension");
  TORCH_CHECK_VALUE(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,
                    "discounted_cumsum: x must be float32 or float64, got ",
                    x.scalar_type());
  TORCH_CHECK_VALUE(decay >= 0.0 && decay <= 1.0,
                    "discounted_cumsum: decay must be in [0, 1], got ", decay);
}

template <typename T>
void scan(const T* in, T* out, int64_t rows, int64_t n, T decay, bool reverse) {
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      T running = 0;
      for (int64_t step = 0; step < n; ++step) {
        const int64_t t = row * n + (reverse ? n - 1 - step : step);
        running = decay * running + in[t];
        out[t] = running;
      }
    }
  });
}

at::Tensor discounted_cumsum_cpu(const at::Tensor& x, double decay, bool reverse) {
  check_args(x, decay);
  const at::Tensor input = x.contiguous();
  at::Tensor output = at::empty_like(input);
  if (input.numel() == 0) {
    return output;
  }
  const int64_t n = input.size(-1);
  const int64_t rows = input.numel() / n;
  if (input.scalar_type() == at::kFloat) {
    scan<float>(input.const_data_ptr<float>(), output.mutable_data_ptr<float>(),
                rows, n, static_cast<float>(decay), reverse);
  } else {
    scan<double>(input.const_data_ptr<double>(), output.mutable_data_ptr<double>(),
                 rows, n, decay, reverse);
  }
  return output;
}

}  // namespace extension_package

TORCH_LIBRARY(extension_package, m) {
  m.set_python_module("extension_package._ops");
  m.def("discounted_cumsum(Tensor x, float decay, bool reverse=False) -> Tensor");
}

TORCH_LIBRARY_IMPL(extension_package, CPU, m) {
  m.impl("discounted_cumsum", &extension_package::discounted_cumsum_cpu);
}
"""

# %%
# The CUDA kernel gives each row to one GPU thread and registers itself for
# the ``CUDA`` dispatch key. It reuses the argument checks from ``ops.cpp``,
# launches on PyTorch's current stream and guards the input's device.

OPS_CUDA = r"""
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

namespace extension_package {

void check_args(const at::Tensor& x, double decay);

template <typename T>
__global__ void scan_kernel(const T* in, T* out, int64_t rows, int64_t n,
                            T decay, bool reverse) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) {
    return;
  }
  T running = 0;
  for (int64_t step = 0; step < n; ++step) {
    const int64_t t = row * n + (reverse ? n - 1 - step : step);
    running = decay * running + in[t];
    out[t] = running;
  }
}

template <typename T>
void launch(const at::Tensor& input, at::Tensor& output, double decay, bool reverse) {
  const int64_t n = input.size(-1);
  const int64_t rows = input.numel() / n;
  const int threads = 128;
  const int64_t blocks = (rows + threads - 1) / threads;
  scan_kernel<T><<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      input.const_data_ptr<T>(), output.mutable_data_ptr<T>(), rows, n,
      static_cast<T>(decay), reverse);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor discounted_cumsum_cuda(const at::Tensor& x, double decay, bool reverse) {
  check_args(x, decay);
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor input = x.contiguous();
  at::Tensor output = at::empty_like(input);
  if (input.numel() == 0) {
    return output;
  }
  if (input.scalar_type() == at::kFloat) {
    launch<float>(input, output, decay, reverse);
  } else {
    launch<double>(input, output, decay, reverse);
  }
  return output;
}

}  // namespace extension_package

TORCH_LIBRARY_IMPL(extension_package, CUDA, m) {
  m.impl("discounted_cumsum", &extension_package::discounted_cumsum_cuda);
}
"""

# %%
# ``module.cpp`` is four lines of the Python C API: an extension module named
# ``_C`` with nothing in it. It exists so that ``import extension_package._C``
# works; importing it loads the shared library, which runs the
# ``TORCH_LIBRARY`` blocks. It uses only functions of Python's *limited API*,
# which matters later on this page.

MODULE_CPP = r"""
#include <Python.h>

// An empty module: importing it loads this shared library, and loading it
// registers the operators.
extern "C" PyObject* PyInit__C(void) {
  static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module);
}
"""

# %%
# The Python half. ``_ops.py`` registers the fake kernel, which repeats the C++
# checks so that a bad call fails the same way while tracing, and the
# backward: the gradient of a discounted sum is the same sum run in the other
# direction. This is the module that ``set_python_module`` names.

OPS_PY = '''
"""Python registrations for the operator that csrc/ops.cpp declares."""

import torch


def _check_args(x, decay):
    if x.dim() < 1:
        raise ValueError("discounted_cumsum: x must have a dimension")
    if x.dtype not in (torch.float32, torch.float64):
        raise ValueError(
            f"discounted_cumsum: x must be float32 or float64, got {x.dtype}"
        )
    if not 0.0 <= decay <= 1.0:
        raise ValueError(f"discounted_cumsum: decay must be in [0, 1], got {decay}")


@torch.library.register_fake("extension_package::discounted_cumsum")
def _(x, decay, reverse=False):
    _check_args(x, decay)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _setup_context(ctx, inputs, output):
    _, ctx.decay, ctx.reverse = inputs


def _backward(ctx, grad):
    op = torch.ops.extension_package.discounted_cumsum.default
    return op(grad, ctx.decay, not ctx.reverse), None, None


torch.library.register_autograd(
    "extension_package::discounted_cumsum", _backward, setup_context=_setup_context
)
'''

# %%
# ``__init__.py`` is where the order is decided: first the shared library
# (importing ``_C`` loads it), then the Python registrations, which refer to
# an operator that must already exist.

INIT_IMPORT_C = '''
"""A discounted cumulative sum, as a PyTorch operator written in C++."""

import torch

from . import _C  # noqa: F401  (loads the library: defines the operator)
from . import _ops  # noqa: F401  (adds its fake kernel and gradient)

discounted_cumsum = torch.ops.extension_package.discounted_cumsum.default
'''

# %%
# ``setup.py`` describes the compiled part. ``CppExtension`` adds PyTorch's
# include paths and libraries to an ordinary setuptools ``Extension``
# (``CUDAExtension`` adds CUDA's too), and ``BuildExtension`` compiles it with
# the C++ settings PyTorch needs. Two details are worth copying:
#
# * setuptools compiles with the flags Python itself was built with, which
#   may include ``-g``; ``-g0`` after them leaves the debug information out
#   of the library and keeps the wheel small.
# * Compiled against PyTorch's C++ API, the library is promised to work only
#   with the PyTorch release it was built against, so the wheel says so in
#   its metadata: ``torch == X.Y.*``.
#
# ``pyproject.toml`` tells pip to build with setuptools and that the build
# itself imports ``torch``.

SETUP_PY = """
import os

import torch
from setuptools import setup
from torch.utils import cpp_extension

# The CUDA kernel is built when nvcc and a GPU are both present;
# EXTENSION_PACKAGE_CPU_ONLY=1 builds the CPU kernel alone.
with_cuda = (
    cpp_extension.CUDA_HOME is not None
    and torch.cuda.is_available()
    and os.environ.get("EXTENSION_PACKAGE_CPU_ONLY") != "1"
)
sources = ["extension_package/csrc/ops.cpp", "extension_package/csrc/module.cpp"]
flags = {"cxx": ["-g0"]}
if with_cuda:
    sources.append("extension_package/csrc/ops_cuda.cu")
    flags["nvcc"] = ["-O2"]
Extension = cpp_extension.CUDAExtension if with_cuda else cpp_extension.CppExtension
major, minor = torch.__version__.split(".")[:2]

setup(
    name="extension_package",
    version="0.1.0",
    packages=["extension_package"],
    ext_modules=[Extension("extension_package._C", sources, extra_compile_args=flags)],
    cmdclass={"build_ext": cpp_extension.BuildExtension},
    install_requires=[f"torch=={major}.{minor}.*"],
    python_requires=">=3.10",
)
"""

PYPROJECT_TOML = """
[build-system]
requires = ["setuptools>=64", "torch"]
build-backend = "setuptools.build_meta"
"""

project_files = {
    "pyproject.toml": PYPROJECT_TOML,
    "setup.py": SETUP_PY,
    "extension_package/__init__.py": INIT_IMPORT_C,
    "extension_package/_ops.py": OPS_PY,
    "extension_package/csrc/ops.cpp": OPS_CPP,
    "extension_package/csrc/module.cpp": MODULE_CPP,
    "extension_package/csrc/ops_cuda.cu": OPS_CUDA,
}

# %%
# Building the wheel, once
# ------------------------
#
# ``pip wheel`` runs the build and leaves a ``.whl`` file. Three options keep
# it to what is already installed: ``--no-build-isolation`` builds against
# the ``torch`` of this environment instead of downloading one into a
# throwaway environment (the wheel must match the torch it will run with),
# ``--no-deps`` skips building the dependencies, and ``--no-index`` makes sure
# nothing is downloaded.
#
# Compiling takes a while, so ``build_wheel`` keeps every wheel it builds, in
# a folder named after a hash of the project's files, the PyTorch version,
# the Python ABI and the build options. The next run with the same inputs
# finds the wheel and reuses it. The folder sits under
# ``$TORCH_EXTENSIONS_DIR`` when that is set, and under PyTorch's default
# extensions cache otherwise.

wheel_cache = (
    Path(
        os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
    )
    / "wheels"
)


def build_wheel(label, files, options):
    """Build the project ``files`` into a wheel, or reuse the one already built.

    ``options`` are environment variables for the build. Returns the wheel's
    path, whether it was built now, and the seconds it took.
    """
    start = time.perf_counter()
    digest = hashlib.sha256()
    for path, text in sorted({**files, **options}.items()):
        digest.update(f"{path}\0{text}\0".encode())
    abi = (
        f"{torch.__version__} {sys.implementation.cache_tag} {sysconfig.get_platform()}"
    )
    digest.update(abi.encode())
    folder = wheel_cache / f"{label}-{digest.hexdigest()[:16]}"
    found = sorted(folder.glob("*.whl"))
    if found:
        return found[0], False, time.perf_counter() - start
    with tempfile.TemporaryDirectory(prefix="extension-build-") as scratch:
        project = Path(scratch) / "project"
        for path, text in files.items():
            (project / path).parent.mkdir(parents=True, exist_ok=True)
            (project / path).write_text(text.lstrip())
        command = [sys.executable, "-m", "pip", "wheel", str(project)]
        command += ["--no-build-isolation", "--no-deps", "--no-index"]
        command += ["--wheel-dir", str(Path(scratch) / "dist")]
        done = subprocess.run(
            command, capture_output=True, text=True, env={**os.environ, **options}
        )
        if done.returncode != 0:
            raise RuntimeError(
                "pip wheel failed:\n" + done.stdout[-3000:] + done.stderr[-3000:]
            )
        (built,) = (Path(scratch) / "dist").glob("*.whl")
        folder.mkdir(parents=True, exist_ok=True)
        partial = folder / (built.name + ".partial")
        shutil.copyfile(built, partial)
        os.replace(partial, folder / built.name)
    return folder / built.name, True, time.perf_counter() - start


def report(label, built, seconds):
    action = "built the wheel" if built else "reused the cached wheel"
    print(f"{label}: {action} in {seconds:.1f} s")


build_options = {} if with_cuda else {"EXTENSION_PACKAGE_CPU_ONLY": "1"}
try:
    wheel, built, seconds = build_wheel("per-python", project_files, build_options)
except RuntimeError as error:
    if not with_cuda:
        raise
    # Usually a CUDA toolkit that does not match PyTorch's: the CPU kernel
    # still teaches the rest of the page.
    print(
        f"The CUDA build failed ({str(error).splitlines()[-1]}); building for CPU only."
    )
    with_cuda, build_options = False, {"EXTENSION_PACKAGE_CPU_ONLY": "1"}
    wheel, built, seconds = build_wheel("per-python", project_files, build_options)
report("per-Python wheel", built, seconds)
print(f"cache: {wheel.parent}")
wheel_devices = ["cpu"] + (["cuda"] if with_cuda else [])

# %%
# The first run pays for the compilation; a second run of the page (or of the
# cell) finds the wheel in the cache. Delete the folder printed above to
# force a rebuild.
#
# What the wheel is
# -----------------
#
# A wheel's file name is its label: name, version, then three *tags* that
# say which Python interpreter it is for, which ABI (the binary interface
# between the library and that interpreter) and which platform. pip installs
# a wheel only on an interpreter that supports all three.

name, version, _, wheel_tags = parse_wheel_filename(wheel.name)
(wheel_tag,) = wheel_tags
print(f"wheel:    {wheel.name} ({wheel.stat().st_size / 1024:.0f} KiB)")
print(f"tags:     {wheel_tag.interpreter}, {wheel_tag.abi}, {wheel_tag.platform}")
this_python = sys.implementation.cache_tag.replace("cpython-", "cp")
assert (wheel_tag.interpreter, wheel_tag.abi) == (this_python, this_python)
assert wheel_tag in set(tags.sys_tags())

# %%
# The interpreter and ABI tags are both this Python's (``cp`` followed by its
# version): the extension module was compiled against this CPython's headers,
# and pip will install the wheel on this Python version only. The platform
# tag names the operating system and processor.
#
# A wheel is a zip file. Inside are the package's Python files, the compiled
# library, and the metadata pip reads, including the dependency that pins
# PyTorch's release:

with zipfile.ZipFile(wheel) as archive:
    contents = {info.filename: info.file_size for info in archive.infolist()}
    metadata_name = next(n for n in contents if n.endswith(".dist-info/METADATA"))
    metadata = archive.read(metadata_name).decode()
for member, size in contents.items():
    print(f"{size:>10,d}  {member}")
requirements = [
    line for line in metadata.splitlines() if line.startswith("Requires-Dist")
]
print(requirements)
library_member = next(m for m in contents if m.startswith("extension_package/_C"))
assert {"extension_package/__init__.py", "extension_package/_ops.py"} <= set(contents)
assert not any(m.endswith((".cpp", ".cu")) for m in contents)
major_minor = ".".join(torch.__version__.split(".")[:2])
assert requirements == [f"Requires-Dist: torch=={major_minor}.*"]

# %%
# The C++ sources are not in the wheel: users get the compiled library,
# ``extension_package/_C`` with the platform's extension suffix, and never
# compile anything.
#
# Installing and testing in a fresh interpreter
# ---------------------------------------------
#
# The test that matters is the one a user runs: install the wheel, start a
# new Python, import the package. ``pip install --target`` installs into a
# folder of its own, and ``PYTHONPATH`` points the new interpreter at it. Its
# working directory is an empty folder, so nothing can be imported from the
# source tree by accident.


def install(wheel, folder):
    """pip-install ``wheel`` into ``folder``, without touching anything else."""
    command = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index"]
    command += ["--quiet", "--no-compile", "--target", str(folder), str(wheel)]
    subprocess.run(command, check=True, capture_output=True, text=True)
    return folder


def run_fresh(script, *args, site):
    """Run ``script`` in a new Python that sees the packages in ``site``."""
    env = {**os.environ, "PYTHONPATH": str(site)}
    with tempfile.TemporaryDirectory(prefix="fresh-python-") as cwd:
        done = subprocess.run(
            [sys.executable, "-c", script, *map(str, args)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    if done.returncode != 0:
        raise RuntimeError(f"the fresh process failed:\n{done.stderr[-3000:]}")
    return done.stdout


scratch = Path(tempfile.mkdtemp(prefix="extension-package-"))
site = install(wheel, scratch / "per-python")
print(sorted(p.name for p in (site / "extension_package").iterdir()))

# %%
# The script below is what a user's test would do. It imports the package,
# compares the operator with the reference (on the CPU, and on the GPU when
# the wheel has a CUDA kernel), checks the registrations with ``opcheck`` on
# inputs that are empty, non-contiguous, permuted or require grad, checks the
# gradient with ``gradcheck``, compiles a function that calls the operator
# with ``fullgraph=True``, and feeds it a bad ``decay``.

CHECK_PACKAGE = """
import sys

import torch

import extension_package

torch.manual_seed(0)
devices = sys.argv[1].split(",")
op = extension_package.discounted_cumsum


def reference(x, decay, reverse=False):
    out, running = torch.empty_like(x), torch.zeros_like(x[..., 0])
    positions = range(x.shape[-1])
    for t in reversed(positions) if reverse else positions:
        running = decay * running + x[..., t]
        out[..., t] = running
    return out


for device in devices:
    def randn(*shape, **kwargs):
        return torch.randn(*shape, device=device, **kwargs)

    cases = [
        (randn(4, 3, 50), 0.9, False),
        (randn(6, 20, dtype=torch.float64), 0.5, True),
        (randn(20, 6).t(), 0.99, False),
        (randn(0, 8), 0.7, False),
    ]
    for x, decay, reverse in cases:
        torch.testing.assert_close(op(x, decay, reverse), reference(x, decay, reverse))
    samples = [
        (randn(4, 30), 0.9),
        (randn(0, 5), 0.5),
        (randn(20, 6).t(), 0.8),
        (randn(2, 3, 5).permute(2, 0, 1), 0.7, True),
        (randn(3, 10, dtype=torch.float64, requires_grad=True), 0.5, True),
    ]
    for args in samples:
        torch.library.opcheck(op, args)
    x64 = randn(3, 12, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: op(x, 0.8), (x64,))
    compiled = torch.compile(
        lambda x: op(2 * x, 0.9).sum(), backend="aot_eager", fullgraph=True
    )
    x = randn(5, 40)
    torch.testing.assert_close(compiled(x), op(2 * x, 0.9).sum())
    try:
        op(randn(3, 4), 1.5)
    except ValueError as error:
        bad_input = f"{type(error).__name__}: {str(error).splitlines()[0]}"
print("imported from", extension_package.__file__)
print("passed on", devices, ": reference, opcheck, gradcheck, torch.compile")
print("bad input:", bad_input)
"""

output = run_fresh(CHECK_PACKAGE, ",".join(wheel_devices), site=site)
print(output)
assert f"imported from {site}" in output
assert f"passed on {wheel_devices}" in output
assert "bad input: ValueError: discounted_cumsum: decay must be in [0, 1]" in output

# %%
# The package came from the scratch folder, and the installed operator passes
# every check on every device it has a kernel for. Its bad-input check
# reached Python as a ``ValueError``.
#
# Two ways to load the library
# ----------------------------
#
# ``__init__.py`` loaded the library by importing ``_C`` as a Python module.
# That works because ``module.cpp`` defines ``PyInit__C``, the function
# Python calls when it imports an extension module. The other way needs no
# Python C API at all: ``torch.ops.load_library(path)`` loads any shared
# library, like ``dlopen``, and its ``TORCH_LIBRARY`` blocks run as it loads.
# The catch is finding the file, whose name carries a platform-specific
# suffix; a package's ``__init__.py`` can look next to itself.
#
# ``load_library`` is also how code that does not import the package gets the
# operator: a serving script, or a program that runs an exported model. And
# that is where the two halves can come apart. Loading the library alone
# gives an operator with a CPU kernel but no fake kernel:

LIBRARY_ONLY = """
import sys
from pathlib import Path

import torch

(library,) = Path(sys.argv[1]).glob("extension_package/_C*")
torch.ops.load_library(str(library))
if sys.argv[2] == "import-ops":
    import extension_package._ops  # noqa: F401  (what the hint says to do)

op = torch.ops.extension_package.discounted_cumsum.default
x = torch.randn(3, 8)
print("eager call:", tuple(op(x, 0.5).shape))
print("extension_package._ops imported:", "extension_package._ops" in sys.modules)
results = torch.library.opcheck(op, (x, 0.5), raise_exception=False)
print("opcheck:", {test: "SUCCESS" if result == "SUCCESS" else type(result).__name__
                   for test, result in results.items()})
try:
    op(torch.empty(3, 8, device="meta"), 0.5)
    print("meta call: works")
except NotImplementedError as error:
    print("meta call:", type(error).__name__, str(error).splitlines()[0])
try:
    torch.compile(lambda x: op(x, 0.5), backend="aot_eager", fullgraph=True)(x)
    print("torch.compile: works")
except RuntimeError as error:
    print("torch.compile:", type(error).__name__, str(error).splitlines()[0])
    hint = [line.strip() for line in str(error).splitlines() if "import" in line]
    print("  hint:", hint[0].split(", otherwise")[0] if hint else None)
"""

before = run_fresh(LIBRARY_ONLY, site, "library-only", site=site)
print(before)
assert "eager call: (3, 8)" in before
assert "extension_package._ops imported: False" in before
assert "'test_faketensor': 'UnsupportedOperatorException'" in before
meta_line = next(line for line in before.splitlines() if line.startswith("meta"))
assert meta_line.startswith("meta call: NotImplementedError")
assert "extension_package._ops" in meta_line
assert "torch.compile: Unsupported" in before
assert "import extension_package._ops" in before

# %%
# The eager call works: it only needs the CPU kernel. Everything that traces
# with fake tensors fails, because the fake kernel lives in
# ``extension_package._ops``, which nobody imported. ``opcheck`` reports it
# in its ``test_faketensor`` sub-test, a call on ``meta`` tensors raises
# ``NotImplementedError``, and ``torch.compile`` stops with
# ``torch._dynamo.exc.Unsupported`` (a ``RuntimeError``).
#
# This is what ``m.set_python_module("extension_package._ops")`` buys: both
# messages name the module to import. In this PyTorch release it does not
# import the module for you (the run above shows it was not imported); it
# makes the error say what is missing. Do what it says, in the same order as
# ``__init__.py``, library first, in a fresh process:

after = run_fresh(LIBRARY_ONLY, site, "import-ops", site=site)
print(after)
assert "extension_package._ops imported: True" in after
assert "'test_faketensor': 'SUCCESS'" in after
assert "meta call: works" in after
assert "torch.compile: works" in after

# %%
# With the registrations imported, every sub-test of ``opcheck`` passes and
# the operator compiles. The rule for packages: whoever loads the library
# also imports the module with its Python registrations, and the package's
# ``__init__.py`` is the place to do both.
#
# One wheel for every CPython
# ---------------------------
#
# The wheel above is tagged for one Python version, and a project that
# supports four of them builds four wheels per platform, for every release.
# Python offers a way out: an extension that uses only the *limited API*, a
# subset of the C API that CPython promises to keep, can be tagged ``abi3``
# and installed on that Python version and every later one.
#
# For a PyTorch extension that is less work than it sounds, because the
# operator reaches Python through ``TORCH_LIBRARY`` and the dispatcher, not
# through the C API. Three things change:
#
# * ``setup.py`` passes ``py_limited_api=True`` to ``CppExtension``, which
#   stops linking ``libtorch_python`` (PyTorch's Python bindings, which use
#   far more than the limited API), and defines ``Py_LIMITED_API`` as the
#   oldest CPython we support (3.10 is ``0x030A0000``). With it,
#   ``Python.h`` declares nothing outside the limited API of that version,
#   so a violation fails to compile instead of crashing later on another
#   Python.
# * The ``bdist_wheel`` option ``py_limited_api="cp310"`` tags the wheel
#   ``cp310-abi3``.
# * Nothing may include pybind11 (or ``torch/extension.h``, which includes
#   it). We go one step further and drop ``module.cpp``: the library contains
#   no Python C API at all, and ``__init__.py`` loads it with
#   ``torch.ops.load_library``.

LIMITED_SETUP_PY = """
import torch
from setuptools import setup
from torch.utils import cpp_extension

# The oldest CPython this wheel supports: 3.10, as a hex version and a tag.
LIMITED_API = "0x030A0000"
sources = ["extension_package/csrc/ops.cpp"]
flags = {"cxx": ["-g0", f"-DPy_LIMITED_API={LIMITED_API}"]}
major, minor = torch.__version__.split(".")[:2]

setup(
    name="extension_package",
    version="0.1.0",
    packages=["extension_package"],
    ext_modules=[
        cpp_extension.CppExtension(
            "extension_package._C",
            sources,
            extra_compile_args=flags,
            py_limited_api=True,
        )
    ],
    cmdclass={"build_ext": cpp_extension.BuildExtension},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
    install_requires=[f"torch=={major}.{minor}.*"],
    python_requires=">=3.10",
)
"""

INIT_LOAD_LIBRARY = '''
"""A discounted cumulative sum, as a PyTorch operator written in C++."""

from pathlib import Path

import torch

# _C is a plain shared library, not a Python module: load it by its path.
(_library,) = Path(__file__).parent.glob("_C*.so")
torch.ops.load_library(str(_library))

from . import _ops  # noqa: E402, F401  (adds its fake kernel and gradient)

discounted_cumsum = torch.ops.extension_package.discounted_cumsum.default
'''

limited_files = {
    "pyproject.toml": PYPROJECT_TOML,
    "setup.py": LIMITED_SETUP_PY,
    "extension_package/__init__.py": INIT_LOAD_LIBRARY,
    "extension_package/_ops.py": OPS_PY,
    "extension_package/csrc/ops.cpp": OPS_CPP,
}
limited_wheel, built, seconds = build_wheel("abi3", limited_files, {})
report("abi3 wheel", built, seconds)
_, _, _, limited_tags = parse_wheel_filename(limited_wheel.name)
(limited_tag,) = limited_tags
print(f"wheel:    {limited_wheel.name} ({limited_wheel.stat().st_size / 1024:.0f} KiB)")
print(f"tags:     {limited_tag.interpreter}, {limited_tag.abi}, {limited_tag.platform}")
assert (limited_tag.interpreter, limited_tag.abi) == ("cp310", "abi3")
assert limited_tag in set(tags.sys_tags())

# %%
# (This variant keeps to the CPU kernel; a ``.cu`` file joins the sources the
# same way as before, with ``CUDAExtension``.) The wheel is tagged
# ``cp310-abi3``: CPython 3.10 or later, stable ABI, which includes the
# Python running this page. ``CppExtension`` left ``libtorch_python`` out of
# the libraries to link:

linked = {
    "default": cpp_extension.CppExtension("demo", []).libraries,
    "py_limited_api=True": cpp_extension.CppExtension(
        "demo", [], py_limited_api=True
    ).libraries,
}
print(linked)
assert "torch_python" in linked["default"]
assert "torch_python" not in linked["py_limited_api=True"]

# %%
# The same check script passes in a fresh process:

limited_site = install(limited_wheel, scratch / "abi3")
output = run_fresh(CHECK_PACKAGE, "cpu", site=limited_site)
print(output)
assert f"imported from {limited_site}" in output
assert "passed on ['cpu']" in output

# %%
# Which Python accepts which wheel?
# ---------------------------------
#
# pip decides by comparing a wheel's tags with the list of tags an
# interpreter supports, and ``packaging.tags`` computes that list for any
# CPython version. We ask it about CPython 3.9 to 3.14 on this platform, for
# both wheels:

python_versions = [(3, minor) for minor in range(9, 15)]


def accepted_by(tag, python_version):
    supported = tags.cpython_tags(
        python_version=python_version, platforms=[tag.platform]
    )
    return tag in set(supported)


acceptance = {
    label: [accepted_by(tag, version) for version in python_versions]
    for label, tag in [(wheel.name, wheel_tag), (limited_wheel.name, limited_tag)]
}
for label, accepted in acceptance.items():
    print(label)
    print(
        "   ",
        {f"{a}.{b}": ok for (a, b), ok in zip(python_versions, accepted, strict=True)},
    )
assert sum(acceptance[wheel.name]) == 1
assert acceptance[limited_wheel.name] == [
    version >= (3, 10) for version in python_versions
]

fig, ax = plt.subplots(figsize=(6.4, 2.2), layout="constrained")
grid = [[1.0 if ok else 0.0 for ok in row] for row in acceptance.values()]
ax.imshow(grid, cmap="Greens", vmin=-0.3, vmax=1.3, aspect="auto")
for row, accepted in enumerate(acceptance.values()):
    for column, ok in enumerate(accepted):
        ax.text(
            column,
            row,
            "installs" if ok else "refused",
            ha="center",
            va="center",
            color="white" if ok else "0.35",
            fontsize=9,
        )
ax.set_xticks(
    range(len(python_versions)),
    [f"CPython {a}.{b}" for a, b in python_versions],
    fontsize=8,
)
ax.set_yticks(
    [0, 1],
    [
        f"{wheel_tag.interpreter}-{wheel_tag.abi}",
        f"{limited_tag.interpreter}-{limited_tag.abi}",
    ],
)
ax.tick_params(length=0)
ax.set_title("Which interpreter pip installs each wheel on")
plt.show()

# %%
# The per-Python wheel installs on exactly one version; the ``abi3`` wheel
# on 3.10 and every later version, and not on 3.9, older than its promise.
# One build replaces one per Python version. (PyTorch itself still pins the
# wheel to one PyTorch release: that is the other axis, which
# :ref:`sphx_glr_tutorials_cpp_stable_abi.py` removes.)
#
# What the limited API demands
# ----------------------------
#
# ``Py_LIMITED_API`` hides what is outside the limited API, so code that
# uses it does not compile. pybind11 is the common culprit: it needs parts of
# the C API that the limited API leaves out. A two-line pybind11
# module, compiled (syntax check only, which is quick) with the ``abi3``
# build's ``Py_LIMITED_API``, fails:

PYBIND_MODULE = """
#include <pybind11/pybind11.h>
PYBIND11_MODULE(_C, m) {}
"""

includes = [*cpp_extension.include_paths(), sysconfig.get_paths()["include"]]
with tempfile.TemporaryDirectory(prefix="limited-api-") as folder:
    source = Path(folder) / "binding.cpp"
    source.write_text(PYBIND_MODULE)
    command = [
        shutil.which(compiler),
        "-fsyntax-only",
        "-std=c++17",
        "-DPy_LIMITED_API=0x030A0000",
    ]
    command += [f"-I{path}" for path in includes] + [str(source)]
    done = subprocess.run(command, capture_output=True, text=True)
errors = [line for line in done.stderr.splitlines() if "error" in line]
print(f"exit status {done.returncode}; {len(errors)} error lines, the first:")
print("   ", errors[0].split("include/")[-1])
assert done.returncode != 0 and errors

# %%
# The compiler gives up inside pybind11's own headers. That is why the
# ``abi3`` variant registers its operator with ``TORCH_LIBRARY`` only: the
# dispatcher, not pybind11, makes it callable from Python.
#
# ``Py_LIMITED_API`` checks the source; the library itself tells what it
# will ask of the interpreter at run time. Its undefined symbols are the
# functions it expects to find when it is loaded, and ``nm -D`` lists them.
# Those of the CPython C API start with ``Py`` or ``_Py``:


def library_in(site):
    (library,) = (site / "extension_package").glob("_C*.so")
    return library


def python_symbols(library):
    """The CPython functions a shared library expects the interpreter to provide."""
    listed = subprocess.run(
        [nm, "-D", "--undefined-only", str(library)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    names = [
        line.split()[-1].split("@")[0] for line in listed.splitlines() if line.strip()
    ]
    return sorted(n for n in names if n.startswith(("Py", "_Py")))


if nm is None:
    print("nm was not found: skipping the symbol check.")
else:
    per_python_needs = python_symbols(library_in(site))
    abi3_needs = python_symbols(library_in(limited_site))
    print(f"per-Python library ({library_in(site).name}): {per_python_needs}")
    print(f"abi3 library       ({library_in(limited_site).name}): {abi3_needs}")
    assert per_python_needs == ["PyModule_Create2"]
    assert abi3_needs == []
assert library_in(limited_site).name.endswith(".abi3.so")

# %%
# The per-Python library needs one CPython function, ``PyModule_Create2``,
# behind ``PyModule_Create`` in ``module.cpp``; it belongs to the stable ABI,
# so that variant could have been ``abi3`` too. The ``abi3`` library needs
# none: it is a plain shared library of operators, which is exactly why it
# does not care which Python loads it. Its extension suffix says the same
# thing: ``.abi3.so`` instead of ``.cpython-3XX-...so``.
#
# Conclusion
# ----------
#
# Here is what this run built:

print(f"{'wheel':<58} {'KiB':>6}  tags")
for built_wheel in (wheel, limited_wheel):
    (tag,) = parse_wheel_filename(built_wheel.name)[3]
    print(f"{built_wheel.name:<58} {built_wheel.stat().st_size / 1024:>6.0f}  {tag}")
shutil.rmtree(scratch)

# %%
# A C++ operator ships as an ordinary wheel: ``CppExtension`` and
# ``BuildExtension`` in ``setup.py``, ``pip wheel`` to build, and a package
# whose ``__init__.py`` loads the library before the Python registrations.
# Test the installed wheel, not the source tree, in a fresh interpreter.
# When the operator is reached through ``TORCH_LIBRARY`` only, the same
# sources build one ``abi3`` wheel for every CPython from 3.10 on.
#
# Related pages:
#
# * :ref:`sphx_glr_tutorials_cpp_custom_ops.py` for the operator itself and
#   its registrations
# * :ref:`sphx_glr_tutorials_cpp_stable_abi.py` for one wheel across
#   PyTorch releases
# * :ref:`sphx_glr_tutorials_aot_inductor_custom_ops.py` for running the
#   operator in a model compiled ahead of time
