"""
One Wheel for Many PyTorch Releases: the Stable ABI
===================================================

After this page you will be able to write a C++ operator against LibTorch's
stable API, so that one compiled wheel runs on the PyTorch release it targets
and on the releases that follow, within PyTorch's compatibility window,
instead of only on the release it was built with. You will see what the
stable API offers, how to reach the parts of ATen it does not wrap, and how
to check which releases a wheel can run on.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * How to write a kernel with ``torch::stable::Tensor`` and register it
         with ``STABLE_TORCH_LIBRARY`` and ``TORCH_BOX``
       * How ``TORCH_TARGET_VERSION`` sets the oldest PyTorch a wheel supports
       * How to call an ATen operator that ``torch::stable`` does not wrap
       * How to check what a built library needs from PyTorch

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.10 or later
       * A C++ compiler and binutils (``nm``), and the packages the page
         checks first (setuptools, build, installer, packaging)
       * :ref:`sphx_glr_tutorials_cpp_extension_packaging.py`

.. admonition:: Checklist
   :class: checklist

   #. Include only ``torch/csrc/stable/*`` and ``torch/headeronly/*`` headers:
      no ATen, no c10, no ``torch/library.h``, no pybind11 (with
      ``TORCH_TARGET_VERSION`` defined, the others refuse to compile).
   #. Write the kernel with ``torch::stable::Tensor``, the ``torch::stable``
      operators and ``STD_TORCH_CHECK``; call any other ATen operator by name
      with ``torch_call_dispatcher``.
   #. Declare the operator with ``STABLE_TORCH_LIBRARY`` and register the
      kernel with ``STABLE_TORCH_LIBRARY_IMPL`` and ``TORCH_BOX``.
   #. Compile with ``-DTORCH_TARGET_VERSION`` set to the oldest PyTorch you
      support, and make the wheel ``abi3`` as well (free-threaded CPythons
      still need wheels of their own).
   #. Declare ``torch>=X.Y`` in the wheel's metadata: its tags cannot say it.
   #. Check with ``nm`` that the library needs only C functions from
      libtorch, and test the wheel on the oldest release you claim and on
      each new one.

A wheel compiled against PyTorch's C++ API (``at::Tensor``, ``TORCH_LIBRARY``)
is tied to the PyTorch release it was built with: it calls C++ functions
whose names and layouts can change from one release to the next. Projects
that ship such wheels build one per PyTorch release, and again for every new
release. The *stable ABI* removes that axis. Its headers turn your C++ into
calls to a set of C functions that PyTorch promises to keep for at least two
years after they are released, so the same binary keeps working as PyTorch
moves on, for that long at least.
"""

# %%
# Setting up
# ----------
#
# The page builds a wheel and inspects it, so it needs a C++ compiler, ``nm``
# and a few build tools, which it checks first; it runs no pip. The kernel
# on this page is a CPU kernel: the operator is exercised on the CPU whether
# or not a GPU is present.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 10):
    sys.exit(f"This page needs PyTorch 2.10 or later; this is {torch.__version__}.")

import hashlib
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
import time
from importlib import metadata
from itertools import pairwise
from pathlib import Path

# The oldest version of each tool that does what this page asks of it.
NEEDS = {
    "setuptools": "70.1",  # builds wheels without the `wheel` package
    "build": "1.0",
    "installer": "0.7",
    "packaging": "24.0",  # knows that free-threaded CPython refuses abi3
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
from packaging.utils import parse_wheel_filename
from torch.utils import cpp_extension

torch.manual_seed(0)
torch_release = tuple(int(part) for part in torch.__version__.split(".")[:2])
devices = ["cpu"]
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")

compiler = os.environ.get("CXX", "c++")
for tool in (compiler, "nm"):
    if shutil.which(tool) is None:
        sys.exit(f"This page needs {tool!r} on PATH (a C++ compiler and binutils).")
nm = shutil.which("nm")
include = Path(torch.__file__).parent / "include"
print(f"C++ compiler: {shutil.which(compiler)}; nm: {nm}")

# %%
# The stable API in this release
# ------------------------------
#
# The stable API has three layers, all in PyTorch's ``include`` folder:
#
# * C functions that libtorch exports and promises to keep, declared in
#   ``torch/csrc/inductor/aoti_torch/c/shim.h`` (the older ones, which
#   AOTInductor's generated code also uses) and ``torch/csrc/stable/c/shim.h``;
# * ``torch/headeronly``: C++ that lives entirely in headers, such as
#   ``ScalarType`` and ``STD_TORCH_CHECK``, so nothing of it is looked up in
#   libtorch at run time;
# * ``torch/csrc/stable``: C++ wrappers over the C functions, also entirely
#   in headers: ``torch::stable::Tensor``, the ``STABLE_TORCH_LIBRARY``
#   macros, and a set of operators in ``ops.h``.
#
# The operators ``ops.h`` wraps in this release:

ops_header = (include / "torch/csrc/stable/ops.h").read_text()
stable_ops_available = sorted(
    set(re.findall(r"^inline [^(;]*?\b(\w+)\(", ops_header, flags=re.MULTILINE))
)
print(f"{len(stable_ops_available)} functions in torch::stable (ops.h):")
print(", ".join(stable_ops_available))
used_by_our_kernel = {"contiguous", "empty_like", "parallel_for"}
assert used_by_our_kernel <= set(stable_ops_available)
assert "cumsum" not in stable_ops_available
dispatcher_calls = ops_header.count("torch_call_dispatcher(")
assert dispatcher_calls > len(set(re.findall(r"aoti_torch_aten_\w+\(", ops_header)))
stable_shim = (include / "torch/csrc/stable/c/shim.h").read_text()
assert "extension is building with (NOT target version)" in stable_shim
exception_header = (include / "torch/headeronly/util/Exception.h").read_text()
assert "STD_TORCH_CHECK" in exception_header and "CHECK_VALUE" not in exception_header

# %%
# That is a few dozen functions, a small part of ATen: allocation, views,
# copies, ``parallel_for`` and a handful of reductions. ``cumsum`` is not
# among them, and below we call it anyway, through the dispatcher.
#
# The operator
# ------------
#
# We ship the discounted cumulative sum of
# :ref:`sphx_glr_tutorials_cpp_custom_ops.py` once more: along the last
# dimension, ``y[t] = decay * y[t - 1] + x[t]``, or from the end with
# ``reverse=True``. The reference to test against:


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
# The kernel, against the stable API
# ----------------------------------
#
# Compared with the ATen version of the packaging page, every name changes
# and the logic does not:
#
# * ``torch::stable::Tensor`` replaces ``at::Tensor``; it holds an opaque
#   handle and asks libtorch, through C functions, for sizes, dtype and data.
# * ``torch::stable::contiguous``, ``empty_like`` and ``parallel_for``
#   replace their ATen namesakes. ``STD_TORCH_CHECK`` replaces
#   ``TORCH_CHECK``: it throws a ``std::runtime_error``, which reaches Python
#   as a ``RuntimeError``. The stable headers have no counterpart of
#   ``TORCH_CHECK_VALUE``.
# * When ``decay`` is 1 the scan is an ordinary ``cumsum``, which
#   ``torch::stable`` does not wrap. ``torch_call_dispatcher`` calls any
#   operator by name: arguments go in a stack of ``StableIValue`` (converted
#   with ``from``), the result comes back on the same stack (converted with
#   ``to``). The last argument, ``TORCH_ABI_VERSION``, is the release we
#   *build* with (not the target), so that a later libtorch can adapt the
#   call if the operator's schema has changed since. Most wrappers in
#   ``ops.h`` are written this way.
# * ``STABLE_TORCH_LIBRARY`` declares the operator and
#   ``STABLE_TORCH_LIBRARY_IMPL`` registers the CPU kernel. Stable kernels
#   are *boxed*: they receive their arguments as a stack, not as C++
#   parameters. ``TORCH_BOX`` writes that wrapper for an ordinary function.

STABLE_CPP = r"""
// Stable headers only: no ATen, no c10, no torch/library.h, no pybind11.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/shim_utils.h>

#include <array>
#include <optional>

namespace stable_ops {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

template <typename T>
void scan(const T* in, T* out, int64_t rows, int64_t n, T decay, bool reverse) {
  torch::stable::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
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

// torch::stable has no cumsum: call ATen's through the dispatcher, by name.
// aten::cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor
Tensor cumsum_last_dim(const Tensor& x) {
  std::array<StableIValue, 3> stack{
      torch::stable::detail::from(x),
      torch::stable::detail::from(int64_t{-1}),
      torch::stable::detail::from(std::optional<ScalarType>())};
  TORCH_ERROR_CODE_CHECK(
      torch_call_dispatcher("aten::cumsum", "", stack.data(), TORCH_ABI_VERSION));
  return torch::stable::detail::to<Tensor>(stack[0]);
}

Tensor discounted_cumsum(const Tensor& x, double decay, bool reverse) {
  STD_TORCH_CHECK(x.dim() >= 1, "discounted_cumsum: x must have a dimension");
  STD_TORCH_CHECK(
      x.scalar_type() == ScalarType::Float || x.scalar_type() == ScalarType::Double,
      "discounted_cumsum: x must be float32 or float64");
  STD_TORCH_CHECK(decay >= 0.0 && decay <= 1.0,
                  "discounted_cumsum: decay must be in [0, 1], got ", decay);
  const Tensor input = torch::stable::contiguous(x);
  if (decay == 1.0 && !reverse) {
    return cumsum_last_dim(input);
  }
  Tensor output = torch::stable::empty_like(input);
  if (input.numel() == 0) {
    return output;
  }
  const int64_t n = input.size(-1);
  const int64_t rows = input.numel() / n;
  if (input.scalar_type() == ScalarType::Float) {
    scan<float>(input.const_data_ptr<float>(), output.mutable_data_ptr<float>(),
                rows, n, static_cast<float>(decay), reverse);
  } else {
    scan<double>(input.const_data_ptr<double>(), output.mutable_data_ptr<double>(),
                 rows, n, decay, reverse);
  }
  return output;
}

}  // namespace stable_ops

STABLE_TORCH_LIBRARY(stable_ops, m) {
  m.def("discounted_cumsum(Tensor x, float decay, bool reverse=False) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(stable_ops, CPU, m) {
  m.impl("discounted_cumsum", TORCH_BOX(&stable_ops::discounted_cumsum));
}
"""

# %%
# The Python half
# ---------------
#
# The fake kernel and the backward are registered from Python, exactly as
# for an ATen extension; Python code is not part of any C++ ABI. Because the
# kernel's checks arrive as ``RuntimeError``, the package's public function
# checks its arguments in Python first, with the same checks as the fake
# kernel, and raises ``ValueError``. ``__init__.py`` loads the library by
# its path: it contains no Python module.

OPS_PY = '''
"""Python registrations and the public function for stable_ops."""

import torch

_op = torch.ops.stable_ops.discounted_cumsum.default


def _check_args(x, decay):
    if x.dim() < 1:
        raise ValueError("discounted_cumsum: x must have a dimension")
    if x.dtype not in (torch.float32, torch.float64):
        raise ValueError(
            f"discounted_cumsum: x must be float32 or float64, got {x.dtype}"
        )
    if not 0.0 <= decay <= 1.0:
        raise ValueError(f"discounted_cumsum: decay must be in [0, 1], got {decay}")


def discounted_cumsum(x, decay, reverse=False):
    """Discounted cumulative sum along the last dimension of ``x``."""
    _check_args(x, decay)
    return _op(x, decay, reverse)


@torch.library.register_fake("stable_ops::discounted_cumsum")
def _(x, decay, reverse=False):
    _check_args(x, decay)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _setup_context(ctx, inputs, output):
    _, ctx.decay, ctx.reverse = inputs


def _backward(ctx, grad):
    return _op(grad, ctx.decay, not ctx.reverse), None, None


torch.library.register_autograd(
    "stable_ops::discounted_cumsum", _backward, setup_context=_setup_context
)
'''

INIT_PY = '''
"""A discounted cumulative sum, built against LibTorch's stable ABI."""

from pathlib import Path

import torch

(_library,) = Path(__file__).parent.glob("_C*.so")
torch.ops.load_library(str(_library))

from ._ops import discounted_cumsum  # noqa: E402, F401
'''

# %%
# The build
# ---------
#
# ``setup.py`` differs from an ATen extension's in two defines and the
# metadata:
#
# * ``TORCH_TARGET_VERSION`` names the oldest PyTorch the wheel must run on,
#   as a 64-bit number: one byte each for major, minor and patch, then five
#   bytes of ABI tag, so 2.10 is ``0x020A000000000000``. The headers then
#   offer only what that release has; anything newer is a compile error.
# * ``py_limited_api`` makes the wheel ``abi3`` too (see
#   :ref:`sphx_glr_tutorials_cpp_extension_packaging.py`): stable for
#   PyTorch and for every GIL-enabled CPython, one wheel per platform.
# * A wheel's tags say nothing about PyTorch, so the metadata does:
#   ``torch>=2.10``.

SETUP_PY = """
from setuptools import setup
from torch.utils import cpp_extension

# The oldest PyTorch this wheel runs on: 2.10, as [major][minor][patch][ABI tag].
TORCH_TARGET = "0x020A000000000000"
flags = ["-g0", f"-DTORCH_TARGET_VERSION={TORCH_TARGET}"]

setup(
    name="stable_ops",
    version="0.1.0",
    packages=["stable_ops"],
    ext_modules=[
        cpp_extension.CppExtension(
            "stable_ops._C",
            ["stable_ops/csrc/ops.cpp"],
            extra_compile_args={"cxx": flags},
            py_limited_api=True,
        )
    ],
    cmdclass={"build_ext": cpp_extension.BuildExtension},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
    install_requires=["torch>=2.10"],
    python_requires=">=3.10",
)
"""

PYPROJECT_TOML = """
[build-system]
requires = ["setuptools>=70.1", "torch>=2.10"]
build-backend = "setuptools.build_meta"
"""

project_files = {
    "pyproject.toml": PYPROJECT_TOML,
    "setup.py": SETUP_PY,
    "stable_ops/__init__.py": INIT_PY,
    "stable_ops/_ops.py": OPS_PY,
    "stable_ops/csrc/ops.cpp": STABLE_CPP,
}

# %%
# As on the packaging page, ``python -m build --wheel --no-isolation`` builds
# the wheel against this environment's PyTorch, and ``build_wheel`` (hidden)
# keeps it under ``$TORCH_EXTENSIONS_DIR`` (or PyTorch's extensions cache),
# named after a hash of its inputs, so a second run reuses it.

# sphinx_gallery_start_ignore
wheel_cache = (
    Path(
        os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
    )
    / "wheels"
)


def build_wheel(label, files):
    """Build the project ``files`` into a wheel, or reuse the one already built."""
    start = time.perf_counter()
    digest = hashlib.sha256()
    for path, text in sorted(files.items()):
        digest.update(f"{path}\0{text}\0".encode())
    abi = (
        f"{torch.__version__} {sys.implementation.cache_tag} {sysconfig.get_platform()}"
    )
    digest.update(abi.encode())
    folder = wheel_cache / f"{label}-{digest.hexdigest()[:16]}"
    found = sorted(folder.glob("*.whl"))
    if found:
        return found[
            0
        ], f"reused the cached wheel in {time.perf_counter() - start:.1f} s"
    with tempfile.TemporaryDirectory(prefix="stable-build-") as scratch:
        project = Path(scratch) / "project"
        for path, text in files.items():
            (project / path).parent.mkdir(parents=True, exist_ok=True)
            (project / path).write_text(text.lstrip())
        command = [sys.executable, "-m", "build", "--wheel", "--no-isolation"]
        command += ["--outdir", str(Path(scratch) / "dist"), str(project)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            log = done.stdout[-3000:] + done.stderr[-3000:]
            raise RuntimeError(f"the build failed:\n{log}")
        (built,) = (Path(scratch) / "dist").glob("*.whl")
        folder.mkdir(parents=True, exist_ok=True)
        partial = folder / (built.name + ".partial")
        shutil.copyfile(built, partial)
        os.replace(partial, folder / built.name)
    return (
        folder / built.name,
        f"built the wheel in {time.perf_counter() - start:.1f} s",
    )


# sphinx_gallery_end_ignore
wheel, took = build_wheel("stable", project_files)
print(took)
print(f"wheel: {wheel.name} ({wheel.stat().st_size / 1024:.0f} KiB)")
print(f"cache: {wheel.parent}")
(wheel_tag,) = parse_wheel_filename(wheel.name)[3]
print(f"tags: {wheel_tag.interpreter}, {wheel_tag.abi}, {wheel_tag.platform}")
assert (wheel_tag.interpreter, wheel_tag.abi) == ("cp310", "abi3")
assert wheel_tag in set(tags.sys_tags())
free_threaded = tags.cpython_tags(
    (3, 13), abis=["cp313t"], platforms=[wheel_tag.platform]
)
print(f"installs on free-threaded CPython 3.13t: {wheel_tag in set(free_threaded)}")
assert wheel_tag not in set(free_threaded)

# %%
# The wheel is ``cp310-abi3``: any GIL-enabled CPython from 3.10 on, but not
# the free-threaded builds, which need a wheel per version. Nothing in its
# name mentions PyTorch.
#
# Testing the installed wheel
# ---------------------------
#
# As on the packaging page, we install the wheel into a scratch folder and
# test it in a fresh interpreter: against the reference (``decay=1`` takes
# the ``aten::cumsum`` path and must equal ``torch.cumsum``), with
# ``opcheck`` on empty, non-contiguous, permuted and ``requires_grad``
# inputs, with ``gradcheck``, under ``torch.compile``, and with a bad
# ``decay`` through the public function and through ``torch.ops``.


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
CHECK_PACKAGE = r"""
import re

import torch

import stable_ops

torch.manual_seed(0)
op = torch.ops.stable_ops.discounted_cumsum.default


def reference(x, decay, reverse=False):
    out, running = torch.empty_like(x), torch.zeros_like(x[..., 0])
    positions = range(x.shape[-1])
    for t in reversed(positions) if reverse else positions:
        running = decay * running + x[..., t]
        out[..., t] = running
    return out


cases = [
    (torch.randn(4, 3, 50), 0.9, False),
    (torch.randn(6, 20, dtype=torch.float64), 0.5, True),
    (torch.randn(20, 6).t(), 0.99, False),
    (torch.randn(0, 8), 0.7, False),
]
for x, decay, reverse in cases:
    torch.testing.assert_close(op(x, decay, reverse), reference(x, decay, reverse))
x = torch.randn(5, 30)
torch.testing.assert_close(stable_ops.discounted_cumsum(x, 1.0), torch.cumsum(x, -1))
samples = [
    (torch.randn(4, 30), 0.9),
    (torch.randn(0, 5), 0.5),
    (torch.randn(20, 6).t(), 1.0),
    (torch.randn(2, 3, 5).permute(2, 0, 1), 0.7, True),
    (torch.randn(3, 10, dtype=torch.float64, requires_grad=True), 0.5, True),
]
for args in samples:
    torch.library.opcheck(op, args)
x64 = torch.randn(3, 12, dtype=torch.float64, requires_grad=True)
assert torch.autograd.gradcheck(lambda x: op(x, 0.8), (x64,))
compiled = torch.compile(
    lambda x: stable_ops.discounted_cumsum(2 * x, 0.9).sum(),
    backend="aot_eager",
    fullgraph=True,
)
torch.testing.assert_close(compiled(x), op(2 * x, 0.9).sum())
for call in (stable_ops.discounted_cumsum, op):
    try:
        call(x, 1.5)
    except (ValueError, RuntimeError) as error:
        # STD_TORCH_CHECK starts with the function, the source file and the
        # line; keep the message after them.
        message = re.sub(r"^.*?ops\.cpp:\d+, ", "", str(error).splitlines()[0])
        print(f"bad decay: {type(error).__name__}: {message}")
print("imported from", stable_ops.__file__)
print("passed: reference, cumsum path, opcheck, gradcheck, torch.compile")
"""

scratch = Path(tempfile.mkdtemp(prefix="stable-ops-"))
site = install(wheel, scratch / "site")
output = run_fresh(CHECK_PACKAGE, site=site)
print(output)
assert f"imported from {site}" in output
assert "passed: reference, cumsum path, opcheck, gradcheck, torch.compile" in output
bad = [line for line in output.splitlines() if line.startswith("bad decay")]
assert bad[0].startswith("bad decay: ValueError: discounted_cumsum: decay must be")
assert bad[1].startswith("bad decay: RuntimeError: discounted_cumsum: decay must be")

# %%
# The kernel agrees with the reference on every path, ``aten::cumsum``
# included, and passes ``opcheck``, ``gradcheck`` and ``torch.compile``. A
# bad ``decay`` is a ``ValueError`` from the public function and a
# ``RuntimeError`` with the same message from the raw operator: the C++
# check still stops a wrong call from any caller, C++ included.
#
# What the library needs from PyTorch
# -----------------------------------
#
# Whether a compiled library loads under another PyTorch release is decided
# by its *undefined symbols*: the functions it expects the process to
# provide. ``nm -D --undefined-only`` lists them. A library built against
# ATen's C++ API needs C++ functions of c10, ATen and torch, whose mangled
# names start with ``_ZN3c10``, ``_ZN2at`` or ``_ZN5torch`` and encode the
# exact argument types. When one is renamed or removed, the library no longer
# loads; when a class layout or an inline function changes and the names
# stay, it loads and misbehaves, which is worse. Ours:


def undefined_symbols(library):
    listed = subprocess.run(
        [nm, "-D", "--undefined-only", str(library)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(
        {line.split()[-1].split("@")[0] for line in listed.splitlines() if line}
    )


(library,) = (site / "stable_ops").glob("_C*.so")
needed = undefined_symbols(library)
pytorch_cpp = [s for s in needed if s.startswith(("_ZN3c10", "_ZN2at", "_ZN5torch"))]
libtorch_c = [s for s in needed if s.startswith(("aoti_torch_", "torch_"))]
print(f"{library.name}: {len(needed)} undefined symbols")
print(f"  C++ functions of c10, ATen or torch: {pytorch_cpp}")
print(f"  C functions of libtorch: {len(libtorch_c)}, e.g. {libtorch_c[:4]}")
print(f"  CPython functions: {[s for s in needed if s.startswith(('Py', '_Py'))]}")
others = [s for s in needed if s not in libtorch_c]
assert pytorch_cpp == [] and libtorch_c
assert not any(s.startswith(("Py", "_Py")) for s in needed)
assert not any(name in s for s in others for name in ("torch", "c10", "aten"))

# %%
# No C++ symbol of PyTorch at all: everything the library asks of libtorch
# is a plain C function, named ``aoti_torch_...`` or ``torch_...``. The rest
# come from the C++ runtime and the C library (none of them mentions torch,
# c10 or aten). No CPython function either, which is what makes the ``abi3``
# tag honest.
#
# Which releases can run it?
# --------------------------
#
# Each of those C functions exists from some release on. The headers record
# it: functions added since 2.10, when the stable ABI's versioning began,
# sit inside ``#if TORCH_FEATURE_VERSION >= TORCH_VERSION_2_X_0`` blocks;
# the older ones have no such guard. Reading the guards of both C headers
# tells us, for every C function, the release that introduced it:

GATE = re.compile(r"#if\s+TORCH_FEATURE_VERSION\s*>=\s*TORCH_VERSION_(\d+)_(\d+)_0")


def guarded_lines(header):
    """[(line, (major, minor) of the version guard around it, or None)]."""
    guards, result = [], []
    for line in (include / header).read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#if"):
            match = GATE.match(stripped)
            guards.append((int(match[1]), int(match[2])) if match else None)
        elif stripped.startswith("#endif"):
            guards.pop()
        versions = [guard for guard in guards if guard]
        result.append((line, max(versions) if versions else None))
    return result


def introduced_in(header):
    """{C function: the release of its version guard, or None} for a C header."""
    lines = guarded_lines(header)
    found = {}
    for number, (line, guard) in enumerate(lines):
        if "AOTI_TORCH_EXPORT" in line:
            declaration = " ".join(text for text, _ in lines[number : number + 3])
            name = re.search(r"(\w+)\s*\(", declaration.split("AOTI_TORCH_EXPORT")[1])
            if name:
                found[name[1]] = guard
    return found


release_of = {}
for header in ("torch/csrc/inductor/aoti_torch/c/shim.h", "torch/csrc/stable/c/shim.h"):
    release_of.update(introduced_in(header))
unknown = [s for s in libtorch_c if s not in release_of]
ours = {s: release_of[s] for s in libtorch_c if s in release_of}
guarded = {s: v for s, v in ours.items() if v}
floor = max(guarded.values())
print(f"{len(release_of)} C functions declared; our library calls {len(ours)}")
print(f"  without a guard (older than the versioning): {len(ours) - len(guarded)}")
for symbol, (major, minor) in sorted(guarded.items(), key=lambda item: item[1]):
    print(f"  {symbol:<34} since {major}.{minor}")
print(f"newest function the library calls: {floor[0]}.{floor[1]}")
assert unknown == []
assert floor == (2, 10)
assert all(
    guarded[name] == (2, 10)
    for name in (
        "torch_parallel_for",
        "torch_get_const_data_ptr",
        "torch_call_dispatcher",
    )
)

# %%
# The library's floor is the newest function it calls, and that is 2.10,
# the target we compiled for. It is no accident: with
# ``TORCH_TARGET_VERSION`` set to 2.10 the headers hide every newer
# function, so the library cannot call one. The reverse also holds: the
# kernel uses functions that 2.10 introduced (``torch_parallel_for``, typed
# data pointers, ``torch_call_dispatcher``), so it cannot target an older
# release. Ask the compiler to check the source for a 2.9 target (syntax
# only, which is quick):

ATEN_INCLUDE = "#include <ATen/core/Tensor.h>\n"


def syntax_errors(source_text, target):
    """The compiler's error lines for ``source_text`` built for ``target``."""
    with tempfile.TemporaryDirectory(prefix="stable-syntax-") as folder:
        source = Path(folder) / "ops.cpp"
        source.write_text(source_text)
        command = [shutil.which(compiler), "-fsyntax-only", "-std=c++17"]
        command += [f"-DTORCH_TARGET_VERSION={target}", f"-I{include}"]
        command += [f"-I{sysconfig.get_paths()['include']}", str(source)]
        done = subprocess.run(command, capture_output=True, text=True)
    return [
        line.split("include/")[-1]
        for line in done.stderr.splitlines()
        if "error" in line
    ]


older_target = syntax_errors(STABLE_CPP, "0x0209000000000000")
print(f"our kernel for target 2.9: {len(older_target)} errors; the first:")
print("   ", older_target[0].split("ops.cpp:")[-1])
aten = syntax_errors(ATEN_INCLUDE, "0x020A000000000000")
print(f"#include <ATen/core/Tensor.h> for target 2.10:\n    {aten[0]}")
assert older_target and "#error" in aten[0] and "TORCH_TARGET_VERSION" in aten[0]

# %%
# The compiler refuses: what 2.9 does not have is simply not declared. And
# with ``TORCH_TARGET_VERSION`` defined, ATen's headers (like c10's and
# ``torch/library.h``) stop the build with an ``#error``: "stable headers
# only" is enforced, not a matter of discipline.
#
# For later releases, the promise is PyTorch's: it keeps each of these C
# functions for at least two years after the release that added it, and
# calls that go through the dispatcher, like our ``cumsum``, are at your own
# risk (the operator behind the name may change). So a wheel's reach is a
# window, not every future release. This page shows that the wheel runs on
# this release. This site's test suite installs the same wheel under the
# older releases of its version matrix: it runs on each from 2.10 on, and
# does not load on 2.9 or older, where ``load_library`` misses one of the
# 2.10 functions listed above. That makes 2.10 this page's floor too. Test
# each new release as it comes; ``torch>=2.10`` can gain an upper bound when
# one fails.
#
# The figure shows the trade-off every stable-ABI project chooses. Each row
# is a possible target; its cells are the releases a wheel built for it runs
# on (the headers' promise, which the tests check for our row); the labels
# count the C functions such a wheel may call.

targets = sorted({v for v in release_of.values() if v})
runtimes = [(targets[0][0], targets[0][1] - 1)] + targets
callable_at = {
    target: sum(1 for v in release_of.values() if v is None or v <= target)
    for target in targets
}
grid = [
    [1.0 if runtime >= target else 0.0 for runtime in runtimes] for target in targets
]
assert targets[0] == floor
assert all(callable_at[a] < callable_at[b] for a, b in pairwise(targets))

fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
ax.imshow(grid, cmap="Blues", vmin=-0.4, vmax=1.4, aspect="auto")
for row, target in enumerate(targets):
    for column, runtime in enumerate(runtimes):
        runs = runtime >= target
        ax.text(
            column,
            row,
            "runs" if runs else "no",
            ha="center",
            va="center",
            fontsize=8,
            color="white" if runs else "0.45",
        )
ax.set_xticks(range(len(runtimes)), [f"{a}.{b}" for a, b in runtimes], fontsize=8)
ax.set_yticks(
    range(len(targets)),
    [f"target {a}.{b}: {callable_at[(a, b)]} functions" for a, b in targets],
    fontsize=8,
)
ax.set_xlabel("PyTorch release the wheel is loaded in")
ax.add_patch(
    plt.Rectangle((-0.5, -0.5), len(runtimes), 1, fill=False, ec="#d9480f", lw=2)
)
ax.tick_params(length=0)
ax.set_title(
    "A later target offers more functions and runs on fewer releases", fontsize=10
)
plt.show()

# %%
# Our wheel (outlined) targets 2.10, the oldest target its kernel compiles
# for, and so runs on the most releases. A target of this release would
# offer every function its headers declare, and run on this release alone
# until the next one comes out.
#
# What the stable API does not cover
# ----------------------------------
#
# ``torch::stable`` is small on purpose. In exchange for the promise, you
# give up most of ATen's C++ API. Here is how to get along without it:
#
# * An ATen operator that is not wrapped: call it through
#   ``torch_call_dispatcher`` by name, as the kernel does with
#   ``aten::cumsum``. The promise covers the C function, not the operator's
#   schema, which changes rarely but can. From 2.13,
#   ``STABLE_TORCH_ERROR_CODE_CHECK`` reports the error message of a failed
#   call, where ``TORCH_ERROR_CODE_CHECK`` only says that it failed.
# * ``at::Tensor`` methods, ``TensorIterator``, ``AT_DISPATCH_...``:
#   write the loop over raw data pointers and branch on
#   ``scalar_type()`` yourself.
# * Fake kernels and autograd: keep them in Python, as this package does.
#   They are not part of any C++ ABI.
# * A CUDA kernel: the stable headers have a device guard, the current
#   stream (``torch/csrc/stable/accelerator.h``) and ``STD_CUDA_CHECK``. The
#   wheel is still tied to the CUDA major release of the PyTorch it runs
#   with, as :ref:`sphx_glr_tutorials_cpp_extension_packaging.py` shows.
# * ``set_python_module``: the stable library gained it in 2.13, so a
#   wheel targeting 2.10 cannot call it (it is hidden behind a guard):

guards = [
    guard
    for line, guard in guarded_lines("torch/csrc/stable/library.h")
    if "set_python_module(" in line
]
if guards:
    print(f"StableLibrary::set_python_module is guarded: {guards[0][0]}.{guards[0][1]}")
    assert guards[0] == (2, 13)
else:
    print("StableLibrary::set_python_module: not in this release's headers")
    assert torch_release < (2, 13)
stable_headers = "".join(
    (include / "torch/csrc/stable" / name).read_text()
    for name in ("accelerator.h", "macros.h", "library.h")
)
assert "class DeviceGuard" in stable_headers and "getCurrentStream" in stable_headers
assert "define STD_CUDA_CHECK" in stable_headers
assert ("STABLE_TORCH_ERROR_CODE_CHECK" in stable_headers) == (torch_release >= (2, 13))

# %%
# * Anything else: file a request with PyTorch, or build that part per
#   release with the full API, as on the packaging page.
#
# Conclusion
# ----------

print(f"{wheel.name}: {wheel.stat().st_size / 1024:.0f} KiB, tags {wheel_tag}")
print(
    f"requires torch >= {floor[0]}.{floor[1]}; runs on {torch.__version__} (this run)"
)
shutil.rmtree(scratch)

# %%
# The stable API trades convenience for longevity: ``torch::stable::Tensor``
# and a few dozen operators instead of ATen, boxed kernels registered with
# ``STABLE_TORCH_LIBRARY`` and ``TORCH_BOX``, and ``TORCH_TARGET_VERSION``
# to choose the oldest release. In return one ``abi3`` wheel per platform
# serves every GIL-enabled CPython from 3.10 and the PyTorch releases from
# its target on, for as long as PyTorch keeps the C functions it calls (at
# least two years). Check it the way this page does: ``nm`` shows no C++
# symbol of PyTorch, the headers' guards give the floor, and tests load the
# wheel under the oldest release you claim and under each new one.
#
# Related pages:
#
# * :ref:`sphx_glr_tutorials_cpp_extension_packaging.py` for packaging and
#   ``abi3`` wheels
# * :ref:`sphx_glr_tutorials_cpp_custom_ops.py` for the operator and its
#   registrations
# * :ref:`sphx_glr_tutorials_aot_inductor_custom_ops.py` for operators in
#   models compiled ahead of time, which use the same C functions
