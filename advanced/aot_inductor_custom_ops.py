"""
Custom Operators in AOTInductor Packages
========================================

After this page you will be able to compile a model that calls a C++ custom
operator ahead of time with AOTInductor, package it as a ``.pt2`` file, and
run that package in a fresh process that loads nothing but the operator's
shared library. You will also see what becomes of an operator written in
Python on the same trip, and why.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * How to compile and package an exported program with
         ``torch._inductor.aoti_compile_and_package``
       * Where a custom operator ends up in the package, and what the process
         that runs it must load first
       * Why a Python custom operator cannot run without Python, and what
         happens when a packaged model calls one

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * A C++ compiler and ``ninja``
       * :ref:`sphx_glr_tutorials_cpp_custom_ops.py`
       * :ref:`sphx_glr_tutorials_custom_ops_in_export.py`

.. admonition:: Checklist
   :class: checklist

   #. Write the operator's kernels in C++ and declare it with
      ``TORCH_LIBRARY``; give it a fake kernel so that ``torch.export`` can
      trace it.
   #. Export the model with ``torch.export.export``.
   #. Compile and package it with
      ``torch._inductor.aoti_compile_and_package(exported, package_path=...)``.
   #. Ship the ``.pt2`` file together with the operator's shared library.
   #. Where the package runs, load the library (``torch.ops.load_library``)
      before ``torch._inductor.aoti_load_package``; the Python registrations
      are not needed there.
   #. Keep operators written in Python out of models that must run without
      Python.

AOTInductor compiles an exported program ahead of time into a shared library,
and ``aoti_compile_and_package`` puts that library, the weights and some
metadata into one ``.pt2`` file. The result runs from Python or from a C++
program, without tracing or compiling anything at load time. The operators
Inductor knows become generated C++; a custom operator, whose kernel Inductor
cannot see, stays a call by name that is resolved when the package runs.
"""

# %%
# Setting up
# ----------
#
# The page compiles C++ twice: the operator's library, and the model (that is
# what AOTInductor does). Both run on the CPU here; the operator on this page
# has a CPU kernel only.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import hashlib
import inspect
import os
import shutil
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch
from torch.utils import cpp_extension

torch.manual_seed(0)
torch_release = tuple(int(part) for part in torch.__version__.split(".")[:2])
devices = ["cpu"]
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")

compiler = os.environ.get("CXX", "c++")
if shutil.which(compiler) is None:
    sys.exit(
        f"This page compiles C++ code: no C++ compiler named {compiler!r} on PATH."
    )
if not cpp_extension.is_ninja_available():
    sys.exit("This page builds its operator with load_inline, which needs ninja.")
print(f"C++ compiler: {shutil.which(compiler)}")

# %%
# The C++ operator
# ----------------
#
# The operator is the discounted cumulative sum of
# :ref:`sphx_glr_tutorials_cpp_custom_ops.py`, in the namespace ``aoti_ops``:
# along the last dimension, ``y[t] = decay * y[t - 1] + x[t]`` (from the end
# with ``reverse=True``). We compile it with ``load_inline`` into a plain
# shared library (no Python module), in a build folder that persists between
# runs, so only the first run compiles.

OPS_CPP = r"""
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

namespace aoti_ops {

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

at::Tensor discounted_cumsum(const at::Tensor& x, double decay, bool reverse) {
  TORCH_CHECK_VALUE(x.dim() >= 1, "discounted_cumsum: x must have a dimension");
  TORCH_CHECK_VALUE(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,
                    "discounted_cumsum: x must be float32 or float64");
  TORCH_CHECK_VALUE(decay >= 0.0 && decay <= 1.0,
                    "discounted_cumsum: decay must be in [0, 1], got ", decay);
  const at::Tensor input = x.contiguous();
  at::Tensor output = at::empty_like(input);
  if (input.numel() == 0) {
    return output;
  }
  const int64_t n = input.size(-1);
  if (input.scalar_type() == at::kFloat) {
    scan<float>(input.const_data_ptr<float>(), output.mutable_data_ptr<float>(),
                input.numel() / n, n, static_cast<float>(decay), reverse);
  } else {
    scan<double>(input.const_data_ptr<double>(), output.mutable_data_ptr<double>(),
                 input.numel() / n, n, decay, reverse);
  }
  return output;
}

}  // namespace aoti_ops

TORCH_LIBRARY(aoti_ops, m) {
  m.def("discounted_cumsum(Tensor x, float decay, bool reverse=False) -> Tensor");
}

TORCH_LIBRARY_IMPL(aoti_ops, CPU, m) {
  m.impl("discounted_cumsum", &aoti_ops::discounted_cumsum);
}
"""

cache_root = Path(
    os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
)
version_tag = f"py{sys.version_info[0]}{sys.version_info[1]}_torch{torch.__version__}"
build_directory = cache_root / version_tag / "aoti_ops"
build_directory.mkdir(parents=True, exist_ok=True)
library_path = build_directory / "aoti_ops.so"
stamp = library_path.stat().st_mtime_ns if library_path.exists() else None
options = {}
if "no_implicit_headers" in inspect.signature(cpp_extension.load_inline).parameters:
    options["no_implicit_headers"] = True  # our source includes what it needs
start = time.perf_counter()
library = cpp_extension.load_inline(
    name="aoti_ops",
    cpp_sources=[OPS_CPP],
    extra_cflags=["-O2"],
    build_directory=str(build_directory),
    is_python_module=False,
    **options,
)
library_seconds = time.perf_counter() - start
rebuilt = stamp is None or library_path.stat().st_mtime_ns != stamp
action = "compiled the extension" if rebuilt else "reused the cached build"
print(f"{action} in {library_seconds:.1f} s: {library}")
discounted_cumsum = torch.ops.aoti_ops.discounted_cumsum.default

# %%
# ``torch.export`` traces with fake tensors, so the operator needs a fake
# kernel, registered from Python as usual; it repeats the kernel's checks.
# We also register its backward (the same scan, run the other way), so that
# the operator is complete. Then the usual tests: against a reference, and
# ``opcheck`` on inputs that are empty, non-contiguous, permuted and
# ``requires_grad``.


def check_args(x, decay):
    if x.dim() < 1:
        raise ValueError("discounted_cumsum: x must have a dimension")
    if x.dtype not in (torch.float32, torch.float64):
        raise ValueError("discounted_cumsum: x must be float32 or float64")
    if not 0.0 <= decay <= 1.0:
        raise ValueError(f"discounted_cumsum: decay must be in [0, 1], got {decay}")


@torch.library.register_fake("aoti_ops::discounted_cumsum")
def _(x, decay, reverse=False):
    check_args(x, decay)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def setup_context(ctx, inputs, output):
    _, ctx.decay, ctx.reverse = inputs


def backward(ctx, grad):
    return discounted_cumsum(grad, ctx.decay, not ctx.reverse), None, None


torch.library.register_autograd(
    "aoti_ops::discounted_cumsum", backward, setup_context=setup_context
)


def discounted_cumsum_reference(x, decay, reverse=False):
    out, running = torch.empty_like(x), torch.zeros_like(x[..., 0])
    positions = range(x.shape[-1])
    for t in reversed(positions) if reverse else positions:
        running = decay * running + x[..., t]
        out[..., t] = running
    return out


cases = [
    (torch.randn(4, 3, 20), 0.8, False),
    (torch.randn(20, 6).t(), 0.5, True),
    (torch.randn(0, 5), 0.9, False),
]
for x, decay, reverse in cases:
    torch.testing.assert_close(
        discounted_cumsum(x, decay, reverse),
        discounted_cumsum_reference(x, decay, reverse),
    )
samples = [
    (torch.randn(4, 30), 0.9),
    (torch.randn(0, 5), 0.5),
    (torch.randn(20, 6).t(), 0.8),
    (torch.randn(2, 3, 5).permute(2, 0, 1), 0.7, True),
    (torch.randn(3, 10, dtype=torch.float64, requires_grad=True), 0.5),
]
for args in samples:
    torch.library.opcheck(discounted_cumsum, args)
x64 = torch.randn(3, 12, dtype=torch.float64, requires_grad=True)
assert torch.autograd.gradcheck(lambda x: discounted_cumsum(x, 0.8), (x64,))
try:
    discounted_cumsum(torch.randn(3), 1.5)
except ValueError as error:
    print(f"{type(error).__name__}: {str(error).splitlines()[0]}")
print("the operator matches the reference and passes opcheck and gradcheck")

# %%
# A model, exported
# -----------------
#
# A tiny model: a linear layer, the operator smoothing its output along the
# features, then a ReLU. We export it for a fixed input shape; the exported
# graph calls our operator by its qualified name.


class Smoother(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)

    def forward(self, x):
        return torch.relu(torch.ops.aoti_ops.discounted_cumsum(self.linear(x), 0.9))


model = Smoother().eval()
example = torch.randn(8, 16)
with torch.no_grad():
    expected = model(example)
start = time.perf_counter()
exported = torch.export.export(model, (example,))
export_seconds = time.perf_counter() - start
targets = [str(n.target) for n in exported.graph.nodes if n.op == "call_function"]
print(targets)
assert "aoti_ops.discounted_cumsum.default" in targets

# %%
# Compiling and packaging
# -----------------------
#
# ``aoti_compile_and_package`` runs Inductor on the exported program in
# ahead-of-time mode: it generates C++ for the whole graph, compiles it into
# a shared library and zips that library with the weights into a ``.pt2``
# file. It takes a while even for this tiny model, so ``compile_package``
# keeps each package in a cache named after a hash of the exported program
# (its graph's code, input shapes and weights) and the PyTorch version, and
# reuses it when nothing changed.
#
# The operator's kernel is not part of that hash, and need not be: as the
# next section shows, the package refers to the operator by name only.

package_cache = cache_root / "aoti_packages"


def compile_package(exported, label):
    """Compile and package ``exported``, or reuse the package built before."""
    start = time.perf_counter()
    # The graph's code, its inputs' shapes and dtypes, the weights and the
    # PyTorch version decide the package.
    inputs = [
        f"{node.name}: {node.meta['val'].dtype} {tuple(node.meta['val'].shape)}"
        for node in exported.graph.nodes
        if node.op == "placeholder"
    ]
    described = "\n".join([torch.__version__, exported.graph_module.code, *inputs])
    digest = hashlib.sha256(described.encode())
    for name, tensor in sorted(exported.state_dict.items()):
        digest.update(name.encode() + tensor.detach().numpy().tobytes())
    package = package_cache / f"{label}-{digest.hexdigest()[:16]}.pt2"
    if package.exists():
        return package, False, time.perf_counter() - start
    package_cache.mkdir(parents=True, exist_ok=True)
    partial = package.with_suffix(".partial.pt2")
    torch._inductor.aoti_compile_and_package(exported, package_path=str(partial))
    os.replace(partial, package)
    return package, True, time.perf_counter() - start


package, compiled, compile_seconds = compile_package(exported, "smoother")
action = "compiled the package" if compiled else "reused the cached package"
print(f"{action} in {compile_seconds:.1f} s")
print(f"{package.name}: {package.stat().st_size / 1024:.0f} KiB")

# %%
# ``torch._inductor`` is not a public module in name, but
# ``aoti_compile_and_package`` and ``aoti_load_package`` are the documented
# entry points to AOTInductor.
#
# What the package contains
# -------------------------
#
# A ``.pt2`` package is a zip file. Among its members is the shared library
# Inductor compiled, the C++ it was compiled from, and a JSON description of
# the calls the library cannot make directly. Which of them mention our
# operator?

with zipfile.ZipFile(package) as archive:
    members = {info.filename: info.file_size for info in archive.infolist()}
    mentions = [
        name
        for name in members
        if name.endswith((".cpp", ".json"))
        and b"aoti_ops::discounted_cumsum" in archive.read(name)
    ]
for name, size in members.items():
    print(f"{size:>10,d}  {name.split('/', 1)[-1]}")
print("mention aoti_ops::discounted_cumsum:")
print("   ", [name.rsplit("/", 1)[-1] for name in mentions])
assert all(any(n.endswith(suffix) for n in members) for suffix in (".so", ".cpp"))
assert any(name.endswith(".json") for name in mentions)

# %%
# Inductor compiled the linear layer and the ReLU into the package's shared
# library. Our operator it could not compile: the JSON member lists it as a
# call to ``aoti_ops::discounted_cumsum``, with its arguments, which the
# compiled code hands to PyTorch's dispatcher. The dispatcher finds
# operators by name, so the process that runs the package must have
# registered this one by loading our library.
#
# Running the package in a fresh process
# --------------------------------------
#
# The script below is all a deployment needs: it loads the operator's
# library when asked to, loads the package and runs it, and compares the
# result with what the eager model computed in this process. It never
# imports the fake kernel: that was only needed to trace the model. (Its
# one private import works around a bug of PyTorch 2.10, where
# ``aoti_load_package`` fails in a process that has not compiled anything.)

RUN_PACKAGE = """
import sys

import torch

# PyTorch 2.10's aoti_load_package uses this module without importing it
# (fixed in 2.11); importing it here works around that bug.
import torch._inductor.codecache  # noqa: F401

library, package, inputs, expected, loads = sys.argv[1:6]
if "library" in loads:
    torch.ops.load_library(library)
if "python-op" in loads:
    @torch.library.custom_op("aoti_ops::soft_sign", mutates_args=())
    def soft_sign(x: torch.Tensor) -> torch.Tensor:
        print("the Python kernel of aoti_ops::soft_sign ran")
        return x / (1 + x.abs())

step = "loading the package"
try:
    runner = torch._inductor.aoti_load_package(package)
    step = "running the package"
    result = runner(torch.load(inputs))
except RuntimeError as error:
    print(f"{step}: {type(error).__name__}: {str(error).splitlines()[0]}")
    sys.exit(0)
torch.testing.assert_close(result, torch.load(expected))
print("the package's output matches the eager model")
"""

scratch = Path(tempfile.mkdtemp(prefix="aoti-ops-"))
torch.save(example, scratch / "inputs.pt")
torch.save(expected, scratch / "expected.pt")


def run_package(package, expected, loads):
    """Run RUN_PACKAGE in a new Python; returns what it printed."""
    args = [library, package, scratch / "inputs.pt", scratch / expected, loads]
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", RUN_PACKAGE, *map(str, args)],
        cwd=scratch,
        capture_output=True,
        text=True,
        timeout=900,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"the fresh process failed:\n{done.stderr[-3000:]}")
    return done.stdout.strip(), seconds


output, run_seconds = run_package(package, "expected.pt", "library")
print(f"library loaded first: {output}")
assert output == "the package's output matches the eager model"

# %%
# With the library loaded first, the package runs and agrees with the eager
# model. Without it, the dispatcher has no operator of that name:

output, _ = run_package(package, "expected.pt", "nothing")
print(f"library not loaded: {output}")
assert output.startswith("loading the package: RuntimeError: Could not find schema")
assert "aoti_ops::discounted_cumsum" in output

# %%
# It fails while the package loads, and names the operator it could not
# find. AOTInductor does not put custom operators' kernels in the package
# (it could not: it never saw them), so the library travels next to the
# ``.pt2`` file, and whoever runs the package, in Python or in C++, loads it
# first.
#
# An operator written in Python
# -----------------------------
#
# Now the same model with one more operator, made in Python with
# ``torch.library.custom_op``: a soft sign, ``x / (1 + |x|)``. It has a fake
# kernel, so export and AOTInductor accept it like the C++ one.


@torch.library.custom_op("aoti_ops::soft_sign", mutates_args=())
def soft_sign(x: torch.Tensor) -> torch.Tensor:
    return x / (1 + x.abs())


@soft_sign.register_fake
def _(x):
    return torch.empty_like(x)


class SmootherWithPythonOp(Smoother):
    def forward(self, x):
        return torch.ops.aoti_ops.soft_sign(super().forward(x))


model_with_python_op = SmootherWithPythonOp().eval()
model_with_python_op.load_state_dict(model.state_dict())
with torch.no_grad():
    expected_with_python_op = model_with_python_op(example)
torch.save(expected_with_python_op, scratch / "expected_python_op.pt")
exported_with_python_op = torch.export.export(model_with_python_op, (example,))
package_with_python_op, compiled, seconds = compile_package(
    exported_with_python_op, "smoother-python-op"
)
action = "compiled the package" if compiled else "reused the cached package"
print(f"{action} in {seconds:.1f} s")
with zipfile.ZipFile(package_with_python_op) as archive:
    python_op_mentioned = any(
        b"aoti_ops::soft_sign" in archive.read(name)
        for name in archive.namelist()
        if name.endswith((".cpp", ".json"))
    )
print(f"the package calls aoti_ops::soft_sign by name: {python_op_mentioned}")
assert python_op_mentioned

# %%
# Compiling worked, and the package refers to the Python operator by name,
# exactly as to the C++ one. But a name needs a kernel behind it when the
# package runs, and this operator's kernel is a Python function. A fresh
# process that loads our library, as a deployment would, but does not run
# the Python code that defines ``soft_sign``:

output, _ = run_package(package_with_python_op, "expected_python_op.pt", "library")
print(output)
assert output.startswith("loading the package: RuntimeError: Could not find schema")
assert "aoti_ops::soft_sign" in output
explained = "torch.library.custom_op" in output
print(f"the message explains that Python operators need Python: {explained}")
assert explained == (torch_release >= (2, 13))

# %%
# Loading fails for the same reason as before: nothing registered the
# operator. Since PyTorch 2.13 the message goes on to say that operators
# made with ``torch.library.custom_op`` cannot run through AOTInductor
# without a Python environment; older releases stop after the first
# sentence. In a Python process the cure is to run the definition again
# before loading the package, as the script does when asked for
# ``python-op``:

output, _ = run_package(
    package_with_python_op, "expected_python_op.pt", "library,python-op"
)
print(output)
assert "the Python kernel of aoti_ops::soft_sign ran" in output
assert output.endswith("the package's output matches the eager model")

# %%
# It works: the compiled model called into the dispatcher, which called the
# Python function. So a packaged model with a Python operator runs where
# Python is, provided the process defines the operator first. A C++ program
# that loads the package has no interpreter to define it in, and no way to
# run it. That is the line between the two kinds of operators: a C++
# operator's kernel lives in a shared library any process can load; a
# Python operator's kernel lives in the Python interpreter.
#
# The whole trip
# --------------
#
# The figure follows the model from export to a fresh process, with the
# times and sizes this run measured. (A step served from the cache shows the
# time it took to find it; the fresh process's time includes starting
# Python and importing PyTorch.)

steps = [
    (
        "torch.export\n.export",
        f"{export_seconds:.1f} s",
        "a graph that calls\nour operator by name",
    ),
    (
        "aoti_compile\n_and_package",
        f"{compile_seconds:.1f} s",
        "C++ generated for the\ngraph, compiled; the\noperator stays a call",
    ),
    (
        ".pt2 package",
        f"{package.stat().st_size / 1024:.0f} KiB",
        "shared library, weights\nand metadata in a zip",
    ),
    (
        "fresh process",
        f"{run_seconds:.1f} s",
        f"load_library({Path(library).name}),\nthen aoti_load_package",
    ),
]
fig, ax = plt.subplots(figsize=(7.2, 2.9), layout="constrained")
ax.set_xlim(0, len(steps) * 2.5)
ax.set_ylim(-0.6, 1.9)
ax.axis("off")
for index, (title, measured, note) in enumerate(steps):
    left = index * 2.5 + 0.15
    box = FancyBboxPatch(
        (left, 0.5), 2.0, 1.2, boxstyle="round,pad=0.05", fc="#e8f1f8", ec="#2a7ab0"
    )
    ax.add_patch(box)
    ax.text(left + 1.0, 1.28, title, ha="center", va="center", fontsize=9)
    ax.text(
        left + 1.0,
        0.75,
        measured,
        ha="center",
        va="center",
        fontsize=9,
        color="#1f5f8b",
        fontweight="bold",
    )
    ax.text(left + 1.0, 0.3, note, ha="center", va="top", fontsize=7.5, color="0.25")
    if index:
        ax.annotate(
            "",
            xy=(left - 0.05, 1.1),
            xytext=(left - 0.45, 1.1),
            arrowprops={"arrowstyle": "->", "color": "0.3"},
        )
ax.set_title("From an exported program to a package that runs elsewhere", fontsize=10)
plt.show()

# %%
# Conclusion
# ----------
#
# AOTInductor compiles what it knows into a shared library and leaves custom
# operators as calls by name, which the dispatcher resolves wherever the
# package runs. For a C++ operator, ship its library with the ``.pt2`` file and load
# it first; the fake kernel is needed only to export and compile. A Python
# operator survives compilation too, but runs only in a process that defines
# it again, which rules it out wherever the package must run without Python.

shutil.rmtree(scratch)

# %%
# Related pages:
#
# * :ref:`sphx_glr_tutorials_cpp_custom_ops.py` for writing the C++ operator
# * :ref:`sphx_glr_tutorials_cpp_extension_packaging.py` for shipping its
#   library as a wheel
# * :ref:`sphx_glr_tutorials_cpp_stable_abi.py` for a library that works
#   across PyTorch releases
# * :ref:`sphx_glr_tutorials_custom_ops_in_export.py` for exported programs
#   with custom operators
