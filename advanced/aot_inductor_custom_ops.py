"""
Custom Operators in AOTInductor Packages
========================================

After this page you will be able to compile a model that calls custom
operators ahead of time with AOTInductor, run the package from a C++ program
that has no Python in it, and make that deployment fail loudly instead of
silently. You will see which kinds of custom operator such a program can run,
and read from the package itself what ties it to the machine that built it.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * How to export with dynamic dimensions and package the result with
         ``torch._inductor.aoti_compile_and_package``
       * How a C++ program runs the package with
         ``torch::inductor::AOTIModelPackageLoader``, and what it must load
         first
       * Which custom operators run without Python: C++ operators,
         ``triton_op`` and compositions of ATen operators, but not
         ``custom_op``
       * Why a fixed-shape package returns wrong results silently on more
         rows and crashes the process on fewer, and how
         ``AOTI_RUNTIME_CHECK_INPUTS=1`` turns both into an error
       * What ties a package to its CPU, GPU and PyTorch release

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * A C++ compiler and binutils (``nm``)
       * :ref:`sphx_glr_tutorials_cpp_custom_ops.py`
       * :ref:`sphx_glr_tutorials_custom_ops_in_export.py`

.. admonition:: Checklist
   :class: checklist

   #. Give every operator of the model a form that runs without Python: a
      C++ operator (``TORCH_LIBRARY``, with a fake kernel for tracing), a
      ``torch.library.triton_op``, or a composition of ATen operators. A
      ``torch.library.custom_op`` runs only where Python defines it.
   #. Export with ``torch.export.export(model, args, dynamic_shapes=...)``,
      with a ``torch.export.Dim`` for every dimension that varies in
      production.
   #. Compile with
      ``torch._inductor.aoti_compile_and_package(exported, package_path=...)``
      on a machine with the deployment's CPU instruction set, GPU
      architecture and PyTorch release.
   #. Ship the ``.pt2`` file with the C++ operators' shared library. In C++,
      ``dlopen`` the library, then run the package with
      ``torch::inductor::AOTIModelPackageLoader``; in Python,
      ``torch.ops.load_library``, then ``torch._inductor.aoti_load_package``.
   #. Test and deploy the package with ``AOTI_RUNTIME_CHECK_INPUTS=1``:
      without it, an input of a shape the package was not built for gives
      wrong results or crashes the process.

AOTInductor compiles an exported program ahead of time into a shared
library, and ``aoti_compile_and_package`` puts that library and its metadata
into one ``.pt2`` file. A C++ program or a Python process then runs it
without tracing or compiling anything.
"""

# %%
# Setting up
# ----------
#
# The page compiles C++: the operator's library, the model (that is what
# AOTInductor does) and a program that runs the package. Every build is
# cached, so a second run of the page is quick.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import hashlib
import inspect
import logging
import os
import platform
import re
import shutil
import signal
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path

import matplotlib.pyplot as plt
from torch.utils import cpp_extension

torch.manual_seed(0)
RELEASE = tuple(int(part) for part in torch.__version__.split(".")[:2])
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")

compiler = os.environ.get("CXX", "c++")
for tool in (compiler, "nm"):
    if shutil.which(tool) is None:
        sys.exit(f"This page needs {tool!r} on PATH.")
print(f"C++ compiler: {shutil.which(compiler)}")

# %%
# The C++ operator
# ----------------
#
# The operator is the discounted cumulative sum of
# :ref:`sphx_glr_tutorials_cpp_custom_ops.py`, in the namespace ``aoti_ops``:
# along the last dimension, ``y[t] = decay * y[t - 1] + x[t]`` (from the end
# with ``reverse=True``). We compile it with the C++ compiler straight
# against the installed torch wheel, whose headers and libraries
# ``cpp_extension.include_paths()`` and ``library_paths()`` locate, into a
# plain shared library with no Python in it. ``build_cpp`` keeps each build
# in a folder under ``$TORCH_EXTENSIONS_DIR`` named after a hash of its
# inputs (the source, the command and the torch version), so a second run
# reuses it.

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
torch_libraries = cpp_extension.library_paths()


def build_cpp(name, source, flags):
    """Compile ``source`` into ``name``, or reuse the build cached before."""
    command = [compiler, "-std=c++20", "-O2", "-fPIC", "source.cpp", "-o", name]
    command += [f"-I{folder}" for folder in cpp_extension.include_paths()]
    command += [f"-L{folder}" for folder in torch_libraries]
    command += [*flags, *(f"-Wl,-rpath,{folder}" for folder in torch_libraries)]
    digest = hashlib.sha256("\0".join([source, *command, torch.__version__]).encode())
    target = cache_root / f"{name}-{digest.hexdigest()[:16]}" / name
    start = time.perf_counter()
    action = "reused the cached"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as build:
            (Path(build) / "source.cpp").write_text(source)
            done = subprocess.run(command, cwd=build, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"building {name} failed:\n{done.stderr[-3000:]}")
            os.replace(Path(build) / name, target)
        action = "built"
    print(f"{action} {name} in {time.perf_counter() - start:.1f} s: {target}")
    return target


library = build_cpp("libaoti_ops.so", OPS_CPP, ["-shared", "-ltorch_cpu", "-lc10"])
torch.ops.load_library(str(library))
discounted_cumsum = torch.ops.aoti_ops.discounted_cumsum.default

# %%
# ``torch.export`` traces with fake tensors, so the operator needs a fake
# kernel, registered from Python; it repeats the kernel's checks. A backward
# makes the operator complete. Then the usual tests: against a reference, and
# ``opcheck`` on empty, non-contiguous, permuted and ``requires_grad`` inputs.


def check_args(x, decay):
    if x.dim() < 1:
        raise ValueError("discounted_cumsum: x must have a dimension")
    if x.dtype not in (torch.float32, torch.float64):
        raise ValueError("discounted_cumsum: x must be float32 or float64")
    if not 0.0 <= decay <= 1.0:
        raise ValueError(f"discounted_cumsum: decay must be in [0, 1], got {decay}")


@torch.library.register_fake("aoti_ops::discounted_cumsum")
def discounted_cumsum_fake(x, decay, reverse=False):
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


for x, decay, reverse in [
    (torch.randn(4, 3, 20), 0.8, False),
    (torch.randn(20, 6).t(), 0.5, True),
    (torch.randn(0, 5), 0.9, False),
]:
    torch.testing.assert_close(
        discounted_cumsum(x, decay, reverse),
        discounted_cumsum_reference(x, decay, reverse),
    )
for args in [
    (torch.randn(4, 30), 0.9),
    (torch.randn(0, 5), 0.5),
    (torch.randn(20, 6).t(), 0.8),
    (torch.randn(2, 3, 5).permute(2, 0, 1), 0.7, True),
    (torch.randn(3, 10, dtype=torch.float64, requires_grad=True), 0.5),
]:
    torch.library.opcheck(discounted_cumsum, args)
x64 = torch.randn(3, 12, dtype=torch.float64, requires_grad=True)
assert torch.autograd.gradcheck(lambda x: discounted_cumsum(x, 0.8), (x64,))
print("the operator matches the reference and passes opcheck and gradcheck")

# %%
# Operators written in Python
# ---------------------------
#
# The model uses three more operators, all defined in Python, to find out
# which of them a program without Python can run:
#
# * ``aoti_ops::soft_clip``, ``tanh(x / 2)`` computed as
#   ``2 * sigmoid(x) - 1``, a ``torch.library.triton_op``
#   (:ref:`sphx_glr_tutorials_triton_custom_ops.py`). On a GPU its body
#   launches a Triton kernel; on any other device it is PyTorch operations.
# * ``aoti_ops::swish``, ``x * sigmoid(x)``, registered as a
#   ``CompositeImplicitAutograd`` kernel: a composition of ATen operators.
# * ``aoti_ops::soft_sign``, ``x / (1 + |x|)``, a
#   ``torch.library.custom_op``, opaque to the compiler.

if torch.cuda.is_available():
    import triton
    import triton.language as tl

    @triton.jit
    def soft_clip_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, 2 * tl.sigmoid(x) - 1, mask=mask)


def soft_clip_body(x: torch.Tensor) -> torch.Tensor:
    if x.device.type != "cuda":
        return 2 * torch.sigmoid(x) - 1
    x = x.contiguous()
    out = torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), 1024),)
    torch.library.wrap_triton(soft_clip_kernel)[grid](x, out, x.numel(), BLOCK=1024)
    return out


soft_clip = torch.library.triton_op(
    "aoti_ops::soft_clip", soft_clip_body, mutates_args=()
)

# %%
# The other two need no GPU code. Then a check of all three against PyTorch,
# on every device this machine has:


def swish_body(x):
    return x * torch.sigmoid(x)


torch.library.define("aoti_ops::swish", "(Tensor x) -> Tensor")
torch.library.impl("aoti_ops::swish", "CompositeImplicitAutograd", swish_body)


@torch.library.custom_op("aoti_ops::soft_sign", mutates_args=())
def soft_sign(x: torch.Tensor) -> torch.Tensor:
    return x / (1 + x.abs())


@soft_sign.register_fake
def soft_sign_fake(x):
    return torch.empty_like(x)


for device in devices:
    probe = torch.randn(5, 7, device=device)
    torch.testing.assert_close(soft_clip(probe), torch.tanh(probe / 2))
    torch.testing.assert_close(torch.ops.aoti_ops.swish(probe), probe.sigmoid() * probe)
    torch.testing.assert_close(soft_sign(probe), torch.nn.functional.softsign(probe))
print(f"soft_clip, swish and soft_sign match PyTorch on {devices}")

# %%
# A model, exported with a dynamic batch
# --------------------------------------
#
# A tiny model: a linear layer, ``soft_clip``, our C++ operator smoothing
# along the features, then ``swish``. Its batch size varies in production, so
# we say so when exporting: a ``torch.export.Dim`` names the first dimension
# of ``x`` as dynamic. Without it, ``torch.export`` specializes the program
# to the example's shape, and the package too (we will see what that costs).


class Smoother(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)

    def forward(self, x):
        smoothed = torch.ops.aoti_ops.discounted_cumsum(soft_clip(self.linear(x)), 0.9)
        return torch.ops.aoti_ops.swish(smoothed)


model = Smoother().eval()
example = torch.randn(8, 16)
batch = torch.export.Dim("batch")
exported = torch.export.export(model, (example,), dynamic_shapes={"x": {0: batch}})
targets = [str(n.target) for n in exported.graph.nodes if n.op == "call_function"]
print(targets)
print(f"range of the batch size: {exported.range_constraints}")
assert "aoti_ops.discounted_cumsum.default" in targets

# %%
# The exported graph keeps each custom operator as one call; the batch size
# is a symbol with a range instead of 8.
#
# Compiling and packaging
# -----------------------
#
# ``aoti_compile_and_package`` runs Inductor on the exported program in
# ahead-of-time mode and writes the ``.pt2`` file. It takes a while even for
# this tiny model, so ``compile_package`` keeps each package in a cache
# under ``$TORCH_EXTENSIONS_DIR``. Its key is everything that decides the
# compiled code: the PyTorch release, this machine's CPU features (and
# GPU), the graph with the shape and strides of every value in it (so a
# changed fake kernel counts), the dynamic ranges, the weights, and the
# source of the Python operators Inductor traces into.

package_cache = cache_root / "aoti_packages"


def cpu_features():
    """The CPU's instruction-set flags: -march=native compiles for exactly these."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        return re.search(r"^(?:flags|Features)\s*:(.*)$", cpuinfo, re.MULTILINE)[1]
    except (OSError, TypeError):
        return platform.machine()


def describe_value(value):
    if isinstance(value, torch.Tensor):
        return f"{value.dtype} {value.device} {tuple(value.shape)} {value.stride()}"
    return repr(value)


def compile_package(exported, label, sources):
    """Compile and package ``exported``, or reuse the package built before."""
    start = time.perf_counter()
    machine = [torch.__version__, platform.machine(), cpu_features()]
    if torch.cuda.is_available():
        machine.append(str(torch.cuda.get_device_capability()))
    graph = [
        f"{node.name} {node.target} {describe_value(node.meta.get('val'))}"
        for node in exported.graph.nodes
    ]
    described = [*machine, exported.graph_module.code, *graph, *sources]
    described.append(str(exported.range_constraints))
    digest = hashlib.sha256("\n".join(described).encode())
    for name, tensor in sorted(exported.state_dict.items()):
        digest.update(name.encode() + tensor.detach().cpu().numpy().tobytes())
    package = package_cache / f"{label}-{digest.hexdigest()[:16]}.pt2"
    if not package.exists():
        package_cache.mkdir(parents=True, exist_ok=True)
        partial = package.with_suffix(".partial.pt2")
        torch._inductor.aoti_compile_and_package(exported, package_path=str(partial))
        os.replace(partial, package)
        action = "compiled"
    else:
        action = "reused the cached"
    print(f"{action} {package.name} in {time.perf_counter() - start:.1f} s")
    return package


# %%
# We compile the exported model:

traced_sources = [inspect.getsource(f) for f in (soft_clip_body, swish_body)]
package = compile_package(exported, "smoother", traced_sources)

# %%
# ``torch._inductor`` is not a public module in name, but
# ``aoti_compile_and_package`` and ``aoti_load_package`` are the documented
# entry points. (Older tutorials use ``torch._export.aot_compile`` and
# ``aot_load``; PyTorch logs that they are being deprecated, as the next
# cell shows.)

export_log = logging.getLogger("torch._export")
messages, export_log.propagate = [], False
handler = logging.Handler()
handler.emit = lambda record: messages.append(record.getMessage())
export_log.addHandler(handler)
try:
    torch._export.aot_load(str(package_cache / "no-such-model.so"), "cpu")
except RuntimeError:
    pass
export_log.removeHandler(handler)
export_log.propagate = True
(deprecation,) = [m for m in messages if "deprecated" in m]
print(deprecation)

# %%
# What the package contains
# -------------------------
#
# A ``.pt2`` package is a zip file. Among its members are the shared library
# Inductor compiled, the C++ it was compiled from, and a JSON list of the
# calls the library makes by operator name. What happened to each operator?


def read_package(package):
    """The package's members, its C++ source and library, its calls by name."""
    with zipfile.ZipFile(package) as archive:
        members = {info.filename: info.file_size for info in archive.infolist()}
        (source,) = [n for n in members if n.endswith("wrapper.cpp")]
        (shared_library,) = [n for n in members if n.endswith(".so")]
        calls = "".join(
            archive.read(name).decode()
            for name in members
            if name.endswith(".json") and "metadata" not in name
        )
        return (
            members,
            archive.read(source).decode(),
            archive.read(shared_library),
            sorted(set(re.findall(r'"target": "([\w:.]+)"', calls))),
        )


members, wrapper_cpp, package_so, called_by_name = read_package(package)
for name, size in members.items():
    print(f"{size:>10,d}  {name.split('/', 1)[-1]}")
libtorch_calls = sorted(set(re.findall(r"aoti_torch_cpu_\w+", wrapper_cpp)))
generated = set(re.findall(r"\bcpp_fused_\w+(?=\()", wrapper_cpp))
print(f"called by name through the dispatcher: {called_by_name}")
print(f"ATen kernels of libtorch called directly: {libtorch_calls}")
print(f"kernels Inductor generated: {len(generated)}")
weights = model.linear.weight.detach().numpy().tobytes()
print(f"the linear layer's weights are in the shared library: {weights in package_so}")
assert called_by_name == ["aoti_ops::discounted_cumsum"]
assert "aoti_torch_cpu_addmm_out" in libtorch_calls and generated
assert weights in package_so

# %%
# Three ways to run an operator, then:
#
# * **Generated code.** Inductor traced into ``soft_clip`` (a ``triton_op``
#   hands the compiler its body) and ``swish`` (a composite kernel decomposes
#   into ATen operators), and fused them into the kernels it generated.
#   Neither name is left in the calls.
# * **libtorch's ATen kernels.** The linear layer is not generated code: it
#   is a call to ``addmm`` in libtorch, through a C function
#   (``aoti_torch_cpu_addmm_out``) that the package's library links against.
# * **A call by name.** Our C++ operator is opaque to Inductor. The JSON
#   lists it with its arguments; when the package loads, the dispatcher must
#   find an operator of that name, so the process running the package must
#   have loaded our library.
#
# The weights have no member of their own: they are compiled into the
# shared library.
#
# A C++ program that runs the package
# -----------------------------------
#
# Here is a whole deployment, with no Python in it. It opens the operator
# libraries named on its command line with ``dlopen`` (their
# ``TORCH_LIBRARY`` blocks register the operators), loads the package with
# ``AOTIModelPackageLoader``, prints the package's metadata, moves the input
# to the device the package was compiled for, runs it and writes the
# result. Input and output files hold two ``int64`` sizes, then the
# ``float32`` values.

RUN_PACKAGE_CPP = r"""
#include <dlfcn.h>

#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include <ATen/ATen.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

at::Tensor read_matrix(const char* path) {
  std::ifstream file(path, std::ios::binary);
  int64_t sizes[2];
  file.read(reinterpret_cast<char*>(sizes), sizeof(sizes));
  at::Tensor matrix = at::empty({sizes[0], sizes[1]}, at::kFloat);
  file.read(reinterpret_cast<char*>(matrix.data_ptr<float>()), matrix.nbytes());
  return matrix;
}

void write_matrix(const char* path, const at::Tensor& matrix) {
  std::ofstream file(path, std::ios::binary);
  const int64_t sizes[2] = {matrix.size(0), matrix.size(1)};
  file.write(reinterpret_cast<const char*>(sizes), sizeof(sizes));
  file.write(reinterpret_cast<const char*>(matrix.data_ptr<float>()), matrix.nbytes());
}

// run_package PACKAGE INPUT OUTPUT [OPERATOR_LIBRARY...]
int main(int argc, char** argv) {
  for (int i = 4; i < argc; ++i) {
    if (dlopen(argv[i], RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      std::cout << "dlopen failed: " << dlerror() << "\n";
      return 1;
    }
  }
  std::string step = "loading the package";
  try {
    torch::inductor::AOTIModelPackageLoader loader(argv[1]);
    auto metadata = loader.get_metadata();
    for (const auto& [key, value] : std::map(metadata.begin(), metadata.end())) {
      std::cout << key << "=" << value << "\n";
    }
    const at::Device device(metadata.at("AOTI_DEVICE_KEY"));
    step = "running the package";
    at::Tensor output = loader.run({read_matrix(argv[2]).to(device)})[0];
    write_matrix(argv[3], output.cpu().contiguous());
    std::cout << "ran on " << device << ": output " << output.sizes() << "\n";
  } catch (const std::exception& error) {
    const std::string message = error.what();
    std::cout << step << " failed: " << message.substr(0, message.find('\n')) << "\n";
    return 1;
  }
  return 0;
}
"""

# %%
# ``build_cpp`` compiles it like the operator, linked into an executable.
# ``--no-as-needed`` keeps ``libtorch.so`` linked although the program calls
# nothing in it directly: it is what loads libtorch's CUDA part on CUDA
# builds.

program = build_cpp(
    "run_package",
    RUN_PACKAGE_CPP,
    ["-Wl,--no-as-needed", "-ltorch", "-ltorch_cpu", "-lc10", "-ldl"],
)

# %%
# ``run_program`` is plumbing: it writes the input file, runs the program in
# a new process with the environment we give it, and reads back what it
# printed, its exit status and its output.

scratch = Path(tempfile.mkdtemp(prefix="aoti-ops-"))
# The loader unpacks a package into a new folder under the temporary
# directory and deletes it when the loader is destroyed. A process that
# crashes leaves it behind, so the children unpack into a folder of scratch,
# which the page deletes at the end.
unpacked_in = scratch / "unpacked"
unpacked_in.mkdir()


class Run:
    def __init__(self, done, output_file):
        self.status = done.returncode
        self.lines = done.stdout.strip().splitlines()
        self.stderr = done.stderr
        self.metadata = dict(line.split("=", 1) for line in self.lines if "=" in line)
        self.output = None
        if self.status == 0:
            data = output_file.read_bytes()
            rows, cols = torch.frombuffer(bytearray(data[:16]), dtype=torch.int64)
            values = torch.frombuffer(bytearray(data[16:]), dtype=torch.float32)
            self.output = values.reshape(int(rows), int(cols))


def run_program(package, x, libraries=(), env=None):
    """Run the C++ program on ``x`` in a new process."""
    input_file, output_file = scratch / "input.bin", scratch / "output.bin"
    output_file.unlink(missing_ok=True)
    x = x.detach().cpu().contiguous()
    input_file.write_bytes(
        torch.tensor(x.shape, dtype=torch.int64).numpy().tobytes() + x.numpy().tobytes()
    )
    environment = {
        k: v for k, v in os.environ.items() if k != "AOTI_RUNTIME_CHECK_INPUTS"
    }
    environment["TMPDIR"] = str(unpacked_in)
    args = [program, package, input_file, output_file, *libraries]
    done = subprocess.run(
        [str(arg) for arg in args],
        env={**environment, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )
    return Run(done, output_file)


# %%
# Now the program runs the package on a batch of 5 rows, with our library:

x = torch.randn(5, 16)
with torch.no_grad():
    expected = model(x)
in_cpp = run_program(package, x, libraries=[library])
print("\n".join(in_cpp.lines))
torch.testing.assert_close(in_cpp.output, expected)
in_python = torch._inductor.aoti_load_package(str(package))(x)
torch.testing.assert_close(in_cpp.output, in_python)
print("the C++ program's output matches the eager model and aoti_load_package")

# %%
# The package ran on 5 rows, although it was exported with 8: the batch is
# dynamic. Its output equals the eager model's
# and that of ``aoti_load_package`` in this process. Everything in the model
# ran without Python: the C++ operator, the linear layer, and the two Python
# operators that became generated code. The first lines are the metadata
# the package carries; we come back to them.
#
# Without our library, the name has nothing behind it:

without_library = run_program(package, x)
print(without_library.lines[-1])
assert without_library.status == 1
assert without_library.lines[-1].startswith("loading the package failed")
assert (
    "Could not find schema for aoti_ops::discounted_cumsum" in without_library.lines[-1]
)

# %%
# It fails while the package loads, naming the operator, before any input is
# looked at.
#
# The operator a C++ program cannot run
# -------------------------------------
#
# Now the same model with ``soft_sign``, the ``custom_op``, at the end. Its
# fake kernel lets export and AOTInductor accept it, but Inductor cannot see
# inside it:


class SmootherWithPythonOp(Smoother):
    def forward(self, x):
        return soft_sign(super().forward(x))


model_with_python_op = SmootherWithPythonOp().eval()
model_with_python_op.load_state_dict(model.state_dict())
exported_with_python_op = torch.export.export(
    model_with_python_op, (example,), dynamic_shapes={"x": {0: batch}}
)
package_with_python_op = compile_package(
    exported_with_python_op, "smoother-python-op", traced_sources
)
python_op_run = run_program(package_with_python_op, x, libraries=[library])
print(python_op_run.lines[-1])
assert python_op_run.status == 1
assert "Could not find schema for aoti_ops::soft_sign" in python_op_run.lines[-1]
explained = "torch.library.custom_op" in python_op_run.lines[-1]
print(f"the message says custom_op operators need Python: {explained}")
assert explained == (RELEASE >= (2, 13))

# %%
# The package calls ``soft_sign`` by name, like the C++ operator, but its
# kernel is a Python function and nothing outside Python can register it.
# (Since PyTorch 2.13 the message says so.) A Python process that defines
# the operator before loading the package, as this one did, runs it:

with torch.no_grad():
    expected_with_python_op = model_with_python_op(x)
in_python = torch._inductor.aoti_load_package(str(package_with_python_op))(x)
torch.testing.assert_close(in_python, expected_with_python_op)
print("in a Python process that defines soft_sign, the package runs")

# %%
# So the line is not the language an operator is written in, but whether
# the compiler can see through it. This page's evidence, one row per
# operator:

python_op_calls = read_package(package_with_python_op)[3]
rows = [  # operator, written as, its package, did the C++ program run that package?
    ("discounted_cumsum", "C++, TORCH_LIBRARY", called_by_name, in_cpp.status),
    ("soft_clip", "Python, triton_op", called_by_name, in_cpp.status),
    ("swish", "Python, composite", called_by_name, in_cpp.status),
    ("soft_sign", "Python, custom_op", python_op_calls, python_op_run.status),
]
print(f"{'operator':<19}{'written in':<20}{'in the package':<16}runs in C++")
for name, kind, calls, status in rows:
    inside = "call by name" if f"aoti_ops::{name}" in calls else "generated code"
    print(f"{name:<19}{kind:<20}{inside:<16}{'yes' if status == 0 else 'no'}")
assert [status == 0 for *_, status in rows] == [True, True, True, False]

# %%
# Shapes: a package that fails silently
# -------------------------------------
#
# What if we had exported without ``dynamic_shapes``? The program is then
# specialized to 8 rows, and so is the package. We give that package 16 rows:

exported_fixed = torch.export.export(model, (example,))
fixed_package = compile_package(exported_fixed, "smoother-fixed", traced_sources)
wide = torch.randn(16, 16)
with torch.no_grad():
    wide_expected = model(wide)
    skipped = discounted_cumsum(model.linear(wide), 0.9)
fixed_run = run_program(fixed_package, wide, libraries=[library])
print(f"exit status {fixed_run.status}; {fixed_run.lines[-1]}")
print(f"standard error: {fixed_run.stderr.strip()[:110] or '(nothing)'}")
fixed_error = (fixed_run.output - wide_expected).abs().amax(dim=1)
print(f"largest error per row: {[round(e, 3) for e in fixed_error.tolist()]}")
assert fixed_run.status == 0 and fixed_run.output.shape == wide_expected.shape
assert "Error" not in fixed_run.stderr
torch.testing.assert_close(fixed_run.output[:8], wide_expected[:8])
torch.testing.assert_close(fixed_run.output[8:], skipped[8:])

# %%
# No error, exit status 0, an output of the right shape; the only trace is
# the line on standard error printed above. The first 8 rows are right.
# Rows 8 to 15 are exactly the linear layer and our operator *without*
# ``soft_clip`` and ``swish``: libtorch's ``addmm`` and our kernel follow the
# tensors' real sizes, but the loops Inductor generated were compiled for 8
# rows and never reached the rest.
#
# The package can check its inputs, but only when the environment variable
# ``AOTI_RUNTIME_CHECK_INPUTS`` is set (:ref:`edge-aoti-unchecked-shapes`).
# The package's own C++ shows how it reads the variable:

reads_env = re.search(r".*env_var_value = getenv\(.*", wrapper_cpp)[0].strip()
print(reads_env)
assert '"AOTI_RUNTIME_CHECK_INPUTS"' in reads_env

# %%
# A ``static`` variable: read once, the first time the package runs, so it
# must be set before that. We set it for the new process:

checked_run = run_program(
    fixed_package, wide, libraries=[library], env={"AOTI_RUNTIME_CHECK_INPUTS": "1"}
)
(reported,) = [line for line in checked_run.stderr.splitlines() if "unmatched" in line]
print(f"exit status {checked_run.status}; {checked_run.lines[-1][:60]}...")
print(f"standard error: {reported}")
assert checked_run.status == 1
assert checked_run.lines[-1].startswith("running the package failed")
assert "expected: 8, but got: 16" in reported
dynamic_run = run_program(package, wide, libraries=[library])
torch.testing.assert_close(dynamic_run.output, wide_expected)
dynamic_error = (dynamic_run.output - wide_expected).abs().amax(dim=1)
print("the dynamic package is right on 16 rows")

# %%
# With the checks on, the same call fails, and the runtime reports the input
# and the dimension. The dynamic package needs no check to be right. The
# figure puts the two packages side by side.

fig, ax = plt.subplots(figsize=(7.2, 3.2), layout="constrained")
positions = torch.arange(16)
ax.bar(positions, fixed_error, width=0.6, color="#c0392b", label="exported for (8, 16)")
ax.plot(
    positions,
    dynamic_error,
    "o",
    color="#2a7ab0",
    zorder=3,
    label="exported with a dynamic batch",
)
ax.axvspan(7.5, 15.6, color="0.92", zorder=0)
ax.text(
    11.5, float(fixed_error.max()) * 0.92, "rows the loops never reached", ha="center"
)
ax.text(3.5, float(fixed_error.max()) * 0.92, "compiled for these rows", ha="center")
ax.set_xticks(range(16))
ax.set_xlabel("row of a 16-row input")
ax.set_ylabel("largest error vs. eager model")
ax.set_title(
    "A package exported for 8 rows, given 16: exit status 0, wrong rows", fontsize=10
)
ax.legend(loc="center left")
plt.show()

# %%
# Fewer rows: a crash
# -------------------
#
# Fewer rows than the package was built for is worse. The generated loops
# still run over 8 rows, but the tensors that ``addmm`` and our operator
# return have the real, smaller number of rows, so the loops write past
# their end, into memory that belongs to something else. That can take the
# process down, so we make the call in a child process: the same Python,
# loading our library and the fixed-shape package built above, with 3 rows.
# The child imports ``torch._inductor.codecache`` first, which the loader of
# PyTorch 2.10 needs in a fresh process
# (:ref:`edge-aoti-load-fresh-process`).

CALL_PACKAGE = """
import sys

import torch
import torch._inductor.codecache  # aoti_load_package of PyTorch 2.10 needs it

library, package, rows = sys.argv[1:]
torch.ops.load_library(library)
output = torch._inductor.aoti_load_package(package)(torch.randn(int(rows), 16))
print(f"the call returned {tuple(output.shape)}", flush=True)
"""


def run_in_python(package, rows, env=None):
    """Call ``package`` on ``rows`` rows in a new Python process."""
    # Input checks off unless asked for; no Python traceback on a crash.
    unset = ("AOTI_RUNTIME_CHECK_INPUTS", "PYTHONFAULTHANDLER")
    environment = {k: v for k, v in os.environ.items() if k not in unset}
    environment["TMPDIR"] = str(unpacked_in)
    args = [sys.executable, "-c", CALL_PACKAGE, library, package, rows]
    done = subprocess.run(
        [str(arg) for arg in args],
        env={**environment, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode < 0:
        ended = f"killed by {signal.Signals(-done.returncode).name}"
    else:
        ended = f"exit status {done.returncode}"
    last_line = (done.stderr.strip().splitlines() or ["(nothing)"])[-1]
    return done, ended, last_line


narrow_run, narrow_ended, narrow_last = run_in_python(fixed_package, 3)
print(f"{narrow_ended}; last line of standard error: {narrow_last[:100]}")
print(f"the call returned before the crash: {'returned' in narrow_run.stdout}")
assert narrow_run.returncode in (-signal.SIGABRT, -signal.SIGSEGV), narrow_ended
if narrow_run.returncode == -signal.SIGABRT:
    assert re.search(r"free|malloc|corrupt", narrow_last), narrow_last
else:
    assert "was resized" in narrow_last, narrow_last

# %%
# The child was killed by a signal: no exception, no traceback. With
# ``SIGABRT``, the last line is glibc's allocator, which found its own
# bookkeeping overwritten when it freed or handed out memory; with
# ``SIGSEGV``, the process touched an invalid address and died without a
# word, after the resize warning of the 16-row run. Which of the two, and
# which message, can change from one run to the next with what the extra
# rows overwrote; so can whether the call returned before the crash (the
# line above says). In a server, that is the whole process, not one wrong
# answer.
#
# With the input checks on, the same call raises instead:

checked_narrow, checked_ended, checked_last = run_in_python(
    fixed_package, 3, env={"AOTI_RUNTIME_CHECK_INPUTS": "1"}
)
reason = re.search(r"input_handles\[0\]: unmatched dim.*", checked_narrow.stderr)
print(f"{checked_ended}; last line of standard error: {checked_last[:90]}")
print(f"reported on standard error: {reason[0]}")
named = "unmatched dim" in checked_last
print(f"the RuntimeError itself names the dimension: {named}")
assert checked_narrow.returncode == 1 and checked_last.startswith("RuntimeError: ")
assert reason[0].endswith("unmatched dim value at 0, expected: 8, but got: 3")
assert named == (RELEASE >= (2, 13))

# %%
# The call raises an ordinary ``RuntimeError``, which the caller can catch,
# and the runtime names the input and the dimension on standard error;
# since PyTorch 2.13 the exception's message says it too (before, it only
# says that the call failed). This is why a deployment, not only its tests,
# should run with ``AOTI_RUNTIME_CHECK_INPUTS=1``: an input of a shape the
# package was not built for then costs one exception instead of wrong
# answers or the process.

# %%
# Input shapes are not the only promise a package relies on. The code after
# an opaque operator assumes the output the fake kernel described: its sizes
# and strides (:ref:`sphx_glr_tutorials_operator_signatures.py`). Does the
# package check our operator's output?

output_checks = re.findall(
    r".*assert_size_stride\(\w+,.*aoti_ops\.discounted_cumsum.*", wrapper_cpp
)
for line in output_checks:
    print(line.strip())
print(f"checks of the operator's output: {len(output_checks)}")
assert bool(output_checks) == (RELEASE >= (2, 13))
assert all("_check_aoti_runtime_check_inputs_env()" in line for line in output_checks)

# %%
# From PyTorch 2.13 the package checks it, again only under
# ``AOTI_RUNTIME_CHECK_INPUTS``; earlier releases do not check it at all.
# Run your test suite against the package with the variable set.
#
# What ties a package to its machine
# ----------------------------------
#
# The metadata the C++ program printed says where the package can run. Since
# PyTorch 2.10 it names the CPU instruction set the code was compiled for
# and the GPU's compute capability (empty here: this is a CPU package). The
# compile command recorded in the package shows why the instruction set
# matters:

metadata = in_cpp.metadata
print(metadata)
compile_command = next(line for line in wrapper_cpp.splitlines() if "-shared" in line)
flags = sorted(
    set(re.findall(r"\s(-march=\S+|-m(?:avx|sse|fma|neon|sve)\S*)", compile_command))
)
print(f"instruction-set flags: {flags}")
assert metadata["AOTI_DEVICE_KEY"] == "cpu"
assert ("AOTI_CPU_ISA" in metadata) == (RELEASE >= (2, 10))
if RELEASE >= (2, 10):
    assert metadata["AOTI_COMPUTE_CAPABILITY"] == ""
assert "-march=native" in flags

# %%
# ``-march=native`` lets the compiler use every instruction this CPU has, so
# a CPU that lacks one of them is no safe target: build the package on the
# oldest CPU type you deploy to.
#
# Which PyTorch can run it is decided by what its shared library asks of
# libtorch, and so for the operator's library. ``nm`` lists the undefined
# symbols of both (as on :ref:`sphx_glr_tutorials_cpp_stable_abi.py`):


def undefined_symbols(path):
    listed = subprocess.run(
        ["nm", "-D", "--undefined-only", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line.split()[-1].split("@")[0] for line in listed.splitlines() if line}


package_so_path = scratch / "package.so"
package_so_path.write_bytes(package_so)
for label, path in [("package", package_so_path), ("operator", library)]:
    needed = undefined_symbols(path)
    pytorch_cpp = [
        s for s in needed if s.startswith(("_ZN3c10", "_ZN2at", "_ZN5torch"))
    ]
    c_functions = sorted(s for s in needed if s.startswith("aoti_torch_"))
    python = [s for s in needed if s.startswith(("Py", "_Py"))]
    print(
        f"{label} library: {len(python)} CPython functions, {len(pytorch_cpp)} C++"
        f" functions of PyTorch, {len(c_functions)} C functions of libtorch, e.g."
        f" {(sorted(pytorch_cpp, key=len) + c_functions)[:2]}"
    )
    assert not python
    if label == "package":
        assert not pytorch_cpp and "aoti_torch_cpu_addmm_out" in c_functions
    else:
        assert pytorch_cpp

# %%
# The package's library needs nothing of PyTorch's C++ API: only
# ``aoti_torch_...`` C functions, the kind of interface the stable ABI is
# built on. Our operator's library needs C++ functions of c10 and ATen,
# which PyTorch does not keep stable between releases. Build both with the
# PyTorch release you deploy, or write the operator against the stable ABI.
#
# On a GPU
# --------
#
# A CUDA package is tied to a GPU architecture as well. On a machine with a
# GPU, the page exports the model without our CPU-only operator for CUDA,
# where ``soft_clip`` launches its Triton kernel, and the C++ program runs
# it without any library loaded.

if torch.cuda.is_available():

    class GpuModel(Smoother):
        def forward(self, x):
            return torch.ops.aoti_ops.swish(soft_clip(self.linear(x)))

    gpu_model = GpuModel().cuda().eval()
    gpu_exported = torch.export.export(
        gpu_model, (example.cuda(),), dynamic_shapes={"x": {0: batch}}
    )
    gpu_package = compile_package(
        gpu_exported, "gpu-model", [*traced_sources, soft_clip_kernel.src]
    )
    gpu_run = run_program(gpu_package, x)
    print("\n".join(gpu_run.lines))
    with torch.no_grad():
        torch.testing.assert_close(gpu_run.output, gpu_model(x.cuda()).cpu())
    assert gpu_run.metadata["AOTI_DEVICE_KEY"] == "cuda"
    triton_kernels = re.findall(
        r"\bsoft_clip_kernel_\d+\b", read_package(gpu_package)[1]
    )
    print(f"our Triton kernel in the package: {sorted(set(triton_kernels))}")
    assert triton_kernels
    major, minor = torch.cuda.get_device_capability()
    if RELEASE >= (2, 10):
        assert gpu_run.metadata["AOTI_COMPUTE_CAPABILITY"] == str(major * 10 + minor)
    print("the CUDA package ran in the C++ program and matches the eager model")
else:
    print("skipped: the CUDA package (no GPU on this machine)")

# %%
# On a GPU, the package's C++ launches our Triton kernel, compiled ahead of
# time like Inductor's own kernels, and the metadata names the compute
# capability they were compiled for (since 2.10; ``AOTI_COMPUTE_CAPABILITY``):
# build the package on the GPU type you deploy to.
#
# Conclusion
# ----------
#
# A package runs without Python when every operator in it is generated code,
# an ATen kernel of libtorch, or a C++ operator whose library the program
# loads first; ``triton_op`` and composite operators qualify, ``custom_op``
# does not. Export with dynamic dimensions where the model allows them, and
# test and deploy with ``AOTI_RUNTIME_CHECK_INPUTS=1``: by default a package
# believes whatever shapes it is handed, and fewer rows than it was built for
# can crash the process. Build on the CPU, GPU and PyTorch release you deploy
# to.

shutil.rmtree(scratch)

# %%
# Related pages:
#
# * :ref:`sphx_glr_tutorials_cpp_custom_ops.py` for writing the C++ operator
# * :ref:`sphx_glr_tutorials_triton_custom_ops.py` for ``triton_op``
# * :ref:`sphx_glr_tutorials_cpp_extension_packaging.py` for shipping its
#   library as a wheel
# * :ref:`sphx_glr_tutorials_cpp_stable_abi.py` for a library that works
#   across PyTorch releases
# * :ref:`sphx_glr_tutorials_custom_ops_in_export.py` for exported programs
#   with custom operators
