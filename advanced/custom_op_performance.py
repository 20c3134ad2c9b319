"""
What a Custom Operator Costs
============================

After this page you will be able to measure what the operator machinery adds
to every call, tell whether that overhead matters for your model, and choose
the cheapest way to keep it out of the way. You will time one tiny operation
written in several ways, from a plain Python function to C++ operators, and
compare a graph break with an opaque custom operator inside a compiled model.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * How to time per-call overhead with ``torch.utils.benchmark``
       * What ``custom_op``, the low-level ``torch.library.Library`` API and
         a C++ operator each add to a call
       * What a graph break costs, compared with a custom operator, under
         ``torch.compile``
       * How to keep operator overhead out of hot loops

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * NumPy and Matplotlib; a C++ compiler and ``ninja`` for the C++
         variants (the page skips them, saying so, without a compiler)
       * :ref:`sphx_glr_tutorials_python_custom_ops.py`
       * :ref:`sphx_glr_tutorials_cpp_custom_ops.py`

.. admonition:: Checklist
   :class: checklist

   #. Check that every variant computes the same values and gradients before
      timing anything.
   #. Time per-call overhead with ``torch.utils.benchmark.Timer`` on a CPU
      thread clock, in interleaved rounds, and report rather than assert.
   #. Count the Python functions a call runs with ``sys.setprofile``: that
      count explains the timings and does not vary from run to run.
   #. Batch small calls, and run inference under ``torch.inference_mode``.
   #. Under ``torch.compile``, wrap untraceable code in a custom operator with a
      fake kernel instead of leaving a graph break; count graphs with a
      backend of your own.
   #. Move a hot, small operator to C++ only knowing what its dispatch key
      gives up: a ``CompositeImplicitAutograd`` kernel is not opaque to the
      compiler.

Every call to a custom operator goes through PyTorch's *dispatcher*, which
picks the kernel for the inputs at hand, and an operator written in Python
adds layers of Python around your function. Behind a large kernel that
bookkeeping is lost; for a tiny operator called thousands of times per step it
can be a large part of the cost. Every number below comes from the run you
are reading.
"""

# %%
# Setting up
# ----------
#
# The timings are taken on the CPU. When a CUDA device is present, every
# operator is also checked on it for correct results.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

# sphinx_gallery_start_ignore
import logging

# With a CUDA toolkit but no GPU, importing cpp_extension logs a warning that
# does not concern this page, which builds for the CPU only.
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
# sphinx_gallery_end_ignore

import inspect
import os
import shutil
import statistics
import textwrap
import time

import matplotlib.pyplot as plt
import numpy as np
from torch.utils import benchmark, cpp_extension

torch.manual_seed(0)
np.random.seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")
print(f"timings: CPU, one thread ({os.cpu_count()} cores on this machine)")

# %%
# The operation under test
# ------------------------
#
# To see the overhead rather than the work, the operation is almost free:
# ``x * 2 + 1`` on 16 numbers. Every variant first checks that the input is
# a floating-point tensor, raising a ``ValueError`` if not. The plain Python
# function is the baseline.


def check_floating(x):
    if not x.is_floating_point():
        raise ValueError(
            f"scale_shift: x must be a floating-point tensor, got {x.dtype}"
        )


def scale_shift_python(x):
    check_floating(x)
    return x * 2 + 1


def scale_shift_backward(ctx, grad_output):
    return grad_output * 2


# %%
# Several ways to write it
# ------------------------
#
# **An autograd.Function** is the classic way to give PyTorch a hand-written
# derivative. It is not an operator: ``torch.compile`` traces into it, and it
# never reaches the dispatcher as a unit.


class ScaleShiftFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        check_floating(x)
        return x * 2 + 1

    @staticmethod
    def backward(ctx, grad_output):
        return scale_shift_backward(ctx, grad_output)


# %%
# **A custom_op** is a real operator, ``perf_ops::scale_shift``, with a fake
# kernel and a backward formula, as in
# :ref:`sphx_glr_tutorials_python_custom_ops.py`. We time both the object the
# decorator returns and ``torch.ops.perf_ops.scale_shift``, the way code that
# did not define the operator calls it.


@torch.library.custom_op("perf_ops::scale_shift", mutates_args=())
def scale_shift_op(x: torch.Tensor) -> torch.Tensor:
    check_floating(x)
    return x * 2 + 1


@scale_shift_op.register_fake
def _(x):
    check_floating(x)
    return torch.empty_like(x)


scale_shift_op.register_autograd(scale_shift_backward)

# %%
# **The low-level API**: ``torch.library.Library(namespace, "DEF")`` opens
# the namespace, ``define`` declares the schema and ``impl`` registers a
# Python kernel for a dispatch key (``CompositeExplicitAutograd`` serves every
# device); fake kernel and backward are registered by name. This is what
# ``custom_op`` builds for you, minus the wrapping it adds around the kernel.

low_level_library = torch.library.Library("perf_ops", "DEF")
low_level_library.define("scale_shift_lowlevel(Tensor x) -> Tensor")


def scale_shift_kernel(x):
    check_floating(x)
    return x * 2 + 1


def scale_shift_fake(x):
    check_floating(x)
    return torch.empty_like(x)


low_level_library.impl(
    "scale_shift_lowlevel", scale_shift_kernel, "CompositeExplicitAutograd"
)
torch.library.register_fake(
    "perf_ops::scale_shift_lowlevel", scale_shift_fake, lib=low_level_library
)
torch.library.register_autograd(
    "perf_ops::scale_shift_lowlevel", scale_shift_backward, lib=low_level_library
)

# %%
# **Two C++ operators** share one C++ kernel (building one is taught in
# :ref:`sphx_glr_tutorials_cpp_custom_ops.py`). The namespace already has its
# ``DEF`` library, from Python, so the C++ code adds to it with
# ``TORCH_LIBRARY_FRAGMENT``. Their dispatch keys differ, which changes more
# than speed:
#
# * ``scale_shift_cpp`` is registered for ``CompositeImplicitAutograd``: the
#   kernel takes the place of the operator's ``Autograd`` entry, and autograd
#   differentiates the ATen calls inside it. No Python runs on its call path,
#   but it is not opaque: tracing down to ATen operators (AOTAutograd,
#   ``run_decompositions``) dissolves it into ``aten.mul`` and ``aten.add``.
# * ``scale_shift_cpp_opaque`` is registered for ``CompositeExplicitAutograd``,
#   like ``custom_op``'s Python kernel, with its fake kernel and backward
#   from Python. It stays one node in graphs and pays for a trip into Python
#   on the ``Autograd`` key, as ``custom_op`` does: the like-for-like rival,
#   only the kernel's language differs.

CPP_SOURCE = r"""
#include <ATen/core/Tensor.h>
#include <ATen/ops/add.h>
#include <ATen/ops/mul.h>
#include <torch/library.h>

namespace perf_ops {

at::Tensor scale_shift_cpp(const at::Tensor& x) {
  TORCH_CHECK_VALUE(x.is_floating_point(),
      "scale_shift_cpp: x must be a floating-point tensor, got ", x.scalar_type());
  return at::add(at::mul(x, 2), 1);
}

}  // namespace perf_ops

TORCH_LIBRARY_FRAGMENT(perf_ops, m) {
  m.def("scale_shift_cpp(Tensor x) -> Tensor");
  m.def("scale_shift_cpp_opaque(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(perf_ops, CompositeImplicitAutograd, m) {
  m.impl("scale_shift_cpp", &perf_ops::scale_shift_cpp);
}

TORCH_LIBRARY_IMPL(perf_ops, CompositeExplicitAutograd, m) {
  m.impl("scale_shift_cpp_opaque", &perf_ops::scale_shift_cpp);
}
"""

# %%
# The build is cached under PyTorch's extension folder, so a second run only
# loads it. Without a C++ compiler or ``ninja`` the C++ variants are left out,
# as the page says; with them, a failed build stops the page.

# sphinx_gallery_start_ignore


def build_cpp_operators(name="perf_ops_scale_shift"):
    """Compile or reuse the C++ operators; return a sentence saying which."""
    compiler = os.environ.get("CXX", "cl" if sys.platform == "win32" else "c++")
    if shutil.which(compiler) is None:
        return f"skipped: no C++ compiler named {compiler!r} on PATH"
    if not cpp_extension.is_ninja_available():
        return "skipped: the ninja build tool is not installed"
    cache = os.environ.get("TORCH_EXTENSIONS_DIR") or (
        cpp_extension.get_default_build_root()
    )
    version = f"py{sys.version_info.major}{sys.version_info.minor}"
    folder = os.path.join(cache, f"{version}_torch{torch.__version__}", name)
    os.makedirs(folder, exist_ok=True)
    library = os.path.join(
        folder, name + (".pyd" if sys.platform == "win32" else ".so")
    )
    stamp = os.stat(library).st_mtime_ns if os.path.exists(library) else None
    options = {"build_directory": folder, "is_python_module": False}
    if "no_implicit_headers" in inspect.signature(cpp_extension.load_inline).parameters:
        options["no_implicit_headers"] = True
    start = time.perf_counter()
    # A failed build raises RuntimeError carrying the compiler's output.
    cpp_extension.load_inline(name, [CPP_SOURCE], extra_cflags=["-O2"], **options)
    seconds = time.perf_counter() - start
    reused = stamp is not None and os.stat(library).st_mtime_ns == stamp
    action = "loaded the cached build" if reused else "compiled"
    return f"{action} in {seconds:.1f} s ({folder})"


# sphinx_gallery_end_ignore

cpp_status = build_cpp_operators()
have_cpp = not cpp_status.startswith("skipped")
print(f"C++ operators: {cpp_status}")
if have_cpp:
    torch.library.register_fake(
        "perf_ops::scale_shift_cpp_opaque", scale_shift_fake, lib=low_level_library
    )
    torch.library.register_autograd(
        "perf_ops::scale_shift_cpp_opaque",
        scale_shift_backward,
        lib=low_level_library,
    )

# %%
# ``opcheck`` confirms that the operators are registered correctly, on every
# device this run has, for inputs in every layout an operator meets (row-major,
# non-contiguous, permuted, empty), with and without ``requires_grad``:

operators = {
    "custom_op": scale_shift_op,
    "Library": torch.ops.perf_ops.scale_shift_lowlevel.default,
}
if have_cpp:
    operators["C++ implicit"] = torch.ops.perf_ops.scale_shift_cpp.default
    operators["C++ explicit"] = torch.ops.perf_ops.scale_shift_cpp_opaque.default


def layouts(device, grad_modes=(False, True)):
    """One input per layout, with and without requires_grad."""
    samples = {
        "row-major": torch.randn(4, 4, device=device),
        "non-contiguous": torch.randn(4, 8, device=device)[:, ::2],
        "permuted": torch.randn(4, 3, device=device).t(),
        "empty": torch.randn(0, 4, device=device),
    }
    for x in samples.values():
        for requires_grad in grad_modes:
            yield x.detach().requires_grad_(requires_grad)


for device in devices:
    for op in operators.values():
        for x in layouts(device):
            torch.library.opcheck(op, (x,))
print(f"opcheck passed for {list(operators)} on {devices}")

# %%
# ``torch.export`` shows what the key does to the operator in a graph. Its
# first graph names both operators; ``run_decompositions``, which lowers it to
# ATen operators, and ``make_fx`` (in ``torch.fx.experimental``), the tracer
# underneath AOTAutograd, keep the explicit one and dissolve the implicit one.


class Wrapper(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, x):
        return self.op(x)


def call_targets(graph):
    return [str(node.target) for node in graph.nodes if node.op == "call_function"]


if have_cpp:
    from torch.fx.experimental.proxy_tensor import make_fx

    traced = {}
    for name in ("C++ implicit", "C++ explicit"):
        op = operators[name]
        program = torch.export.export(Wrapper(op), (torch.randn(16),))
        traced[name] = {
            "export": call_targets(program.graph),
            "run_decompositions": call_targets(program.run_decompositions().graph),
            "make_fx": call_targets(make_fx(op)(torch.randn(16)).graph),
        }
        for step, targets in traced[name].items():
            print(f"{name:>13}, {step:<18}: {targets}")
    explicit = ["perf_ops.scale_shift_cpp_opaque.default"]
    assert all(targets == explicit for targets in traced["C++ explicit"].values())
    assert traced["C++ implicit"]["export"] == ["perf_ops.scale_shift_cpp.default"]
    for step in ("run_decompositions", "make_fx"):
        targets = traced["C++ implicit"][step]
        assert len(targets) == 2 and all(t.startswith("aten.") for t in targets)
else:
    print("No C++ operators in this run: the export check is skipped.")

# %%
# Same answers everywhere
# -----------------------
#
# Before timing anything, every variant must compute the same values and the
# same gradient as the plain function, on every device, and reject an integer
# tensor with a ``ValueError``.

variants = {
    "Python function": scale_shift_python,
    "autograd.Function": ScaleShiftFunction.apply,
    "custom_op, called directly": scale_shift_op,
    "custom_op via torch.ops": torch.ops.perf_ops.scale_shift,
    "Library via torch.ops": torch.ops.perf_ops.scale_shift_lowlevel,
}
if have_cpp:
    variants["C++ implicit via torch.ops"] = torch.ops.perf_ops.scale_shift_cpp
    variants["C++ explicit via torch.ops"] = torch.ops.perf_ops.scale_shift_cpp_opaque
else:
    print("The C++ variants are left out of this run.")

for device in devices:
    sample = torch.randn(16, device=device, requires_grad=True)
    expected = scale_shift_python(sample)
    (expected_grad,) = torch.autograd.grad(expected.sum(), sample)
    for fn in variants.values():
        result = fn(sample)
        (grad,) = torch.autograd.grad(result.sum(), sample)
        torch.testing.assert_close(result, expected)
        torch.testing.assert_close(grad, expected_grad)
print(f"{len(variants)} variants agree on values and gradients on {devices}")

integers = torch.arange(16)
for name, fn in variants.items():
    try:
        fn(integers)
    except ValueError as err:
        print(f"{name:>28}: {type(err).__name__}: {str(err).splitlines()[0]}")
    else:
        raise AssertionError(f"expected {name} to reject an integer tensor")

# %%
# Timing one call
# ---------------
#
# ``torch.utils.benchmark.Timer`` warms up, switches off the garbage
# collector while it measures and pins the number of threads (one here).
# Because other programs share the machine that builds this page, we take two
# more precautions:
#
# * The clock is ``time.thread_time``, the CPU time of our own thread, so time
#   spent running someone else is not counted (on Linux; elsewhere the wall
#   clock).
# * The variants are measured in interleaved *rounds*, one short block of
#   each per round, and each result is the median over rounds: a disturbance
#   hits one block of everyone rather than every block of one variant.
#
# Timings are never asserted; ``report`` prints whether this run saw each
# relation one expects.

clock = time.thread_time if sys.platform.startswith("linux") else time.perf_counter
print(f"clock: time.{clock.__name__}")


def time_per_call(stmts, rounds=21, block_seconds=0.003):
    """Median seconds per call of each ``{key: (fn, x)}`` entry."""
    timers, calls_per_block = {}, {}
    for key, (fn, x) in stmts.items():
        timer = benchmark.Timer(
            "fn(x)", globals={"fn": fn, "x": x}, num_threads=1, timer=clock
        )
        number, elapsed = 1, 0.0
        while elapsed < block_seconds / 10:  # also warms the call up
            per_call = timer.timeit(number).median
            elapsed, number = per_call * number, number * 10
        timers[key] = timer
        calls_per_block[key] = max(1, round(block_seconds / per_call))
    samples = {key: [] for key in stmts}
    for _ in range(rounds):
        for key, timer in timers.items():
            samples[key].append(timer.timeit(calls_per_block[key]).median)
    return {key: statistics.median(values) for key, values in samples.items()}


def report(observations):
    """Print whether this run's timings showed each expected relation."""
    for text, seen in observations.items():
        print(f"[{'seen' if seen else 'not seen in this run'}] {text}")


# %%
# Each variant runs on 16 numbers, once without and once with
# ``requires_grad`` (then autograd records a graph node on every call).

small = torch.randn(16)
stmts = {}
for name, fn in variants.items():
    stmts[name, "no grad"] = (fn, small)
    stmts[name, "grad"] = (fn, small.clone().requires_grad_())
seconds = time_per_call(stmts)
micros = {key: value * 1e6 for key, value in seconds.items()}

baseline = micros["Python function", "no grad"]
print(f"{'variant':<28}{'no grad (us)':>14}{'grad (us)':>12}{'vs Python fn':>14}")
for name in variants:
    no_grad, grad = micros[name, "no grad"], micros[name, "grad"]
    print(f"{name:<28}{no_grad:>14.2f}{grad:>12.2f}{no_grad / baseline:>13.1f}x")

# %%
# The last column divides each variant's time without grad by the plain
# function's. On a log scale:

fig, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
positions = np.arange(len(variants))
for offset, mode, color in ((-0.2, "no grad", "tab:blue"), (0.2, "grad", "tab:orange")):
    widths = [micros[name, mode] for name in variants]
    label = "input requires grad" if mode == "grad" else "no grad"
    bars = ax.barh(positions + offset, widths, height=0.4, color=color, label=label)
    ax.bar_label(bars, fmt="%.1f", padding=2, fontsize="x-small")
ax.set_yticks(positions, list(variants))
ax.invert_yaxis()
ax.set_xscale("log")
# Bars on a log axis start at its left edge: put that edge at a round value.
ax.set_xlim(10 ** np.floor(np.log10(min(micros.values()))), 3 * max(micros.values()))
ax.xaxis.set_major_formatter(lambda value, _: f"{value:g}")
ax.set_xlabel("microseconds per call (log scale)")
ax.set_title("Cost of one call to x * 2 + 1 on 16 numbers")
ax.legend(fontsize="small", loc="lower right")
plt.show()

# %%
# Reading the numbers
# ~~~~~~~~~~~~~~~~~~~
#
# One expects the Python ``custom_op`` to cost clearly more than the plain
# function, the direct call and ``torch.ops`` to cost about the same, and
# each C++ operator to cost less than the ``custom_op``; the last lines say
# what this run saw. Only the explicit C++ operator is a like-for-like rival,
# since it passes through the same ``Autograd`` layer in Python.


def us(name, mode="no grad"):
    return micros[name, mode]


direct, via_ops = us("custom_op, called directly"), us("custom_op via torch.ops")
low_level = us("Library via torch.ops")
function = us("autograd.Function")
print(
    f"custom_op called directly: {direct / baseline:.1f}x the plain function, "
    f"{direct - baseline:.1f} us extra per call."
)
print(
    f"custom_op through torch.ops: {via_ops / baseline:.1f}x the plain "
    f"function, {via_ops - direct:+.1f} us compared with the direct call."
)
print(
    f"Low-level Library registration: {low_level / baseline:.1f}x the plain function."
)
print(f"autograd.Function: {function / baseline:.1f}x the plain function.")
expected = {
    "custom_op costs more than 1.5x the plain function": direct > 1.5 * baseline,
    "torch.ops and the direct call are within 1.5x": 1 / 1.5 < via_ops / direct < 1.5,
}
if have_cpp:
    for kind in ("implicit", "explicit"):
        cpp = us(f"C++ {kind} via torch.ops")
        print(
            f"C++ {kind} operator: {cpp / baseline:.1f}x the plain function; the "
            f"custom_op costs {direct / cpp:.1f}x as much."
        )
        expected[f"the {kind} C++ operator is cheaper than the custom_op"] = (
            cpp < direct
        )
report(expected)

# %%
# Counting the trips into Python
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
#
# Where does the difference come from? Python's ``sys.setprofile`` hook sees
# every Python function that starts, so it lists what one call of each
# variant runs in Python, a count that does not vary from run to run. The
# last column runs under ``torch.inference_mode``, which switches autograd
# off (more below).


def python_functions_run(fn, x):
    """The Python functions that start while ``fn(x)`` runs."""
    entered = []

    def listen(frame, event, arg):
        if event == "call":
            code = frame.f_code
            entered.append(f"{os.path.basename(code.co_filename)}:{code.co_name}")

    fn(x)  # a first call may import or cache things; do not count it
    sys.setprofile(listen)
    try:
        fn(x)
    finally:
        sys.setprofile(None)
    return entered


trips = {}
for name, fn in variants.items():
    trips[name, "no grad"] = python_functions_run(fn, small)
    trips[name, "grad"] = python_functions_run(fn, small.clone().requires_grad_())
    with torch.inference_mode():
        trips[name, "inference"] = python_functions_run(fn, small)

print(f"{'Python functions per call':<28}{'no grad':>9}{'grad':>7}{'inference':>11}")
for name in variants:
    counts = [len(trips[name, mode]) for mode in ("no grad", "grad", "inference")]
    print(f"{name:<28}{counts[0]:>9}{counts[1]:>7}{counts[2]:>11}")
print("\ncustom_op, called directly, no grad:")
print(textwrap.fill(" -> ".join(trips["custom_op, called directly", "no grad"]), 88))

# %%
# The plain function runs our two Python functions and nothing else. A
# Python operator runs many more: the dispatcher calls back into Python for
# the autograd layer that ``register_autograd`` installed, on every call, and
# again for the kernel, converting the arguments each time. ``custom_op``
# adds more layers than the low-level registration. Under ``inference_mode``
# the autograd layer drops out. For the implicit C++ operator, the one
# function through which ``torch.ops`` enters is all the Python that runs;
# the explicit one still calls back for its ``Autograd`` entry, except under
# ``inference_mode``. The cell checks each statement:

plain_trips = [entry.split(":")[-1] for entry in trips["Python function", "no grad"]]
assert plain_trips == ["scale_shift_python", "check_floating"], plain_trips
direct_trips = trips["custom_op, called directly", "no grad"]
via_ops_trips = trips["custom_op via torch.ops", "no grad"]
low_level_trips = trips["Library via torch.ops", "no grad"]
assert len(direct_trips) > len(low_level_trips) > len(plain_trips)
assert len(via_ops_trips) > len(low_level_trips)
for name in ("custom_op, called directly", "Library via torch.ops"):
    assert len(trips[name, "inference"]) < len(trips[name, "no grad"])
if have_cpp:
    for mode in ("no grad", "grad", "inference"):
        cpp_trips = trips["C++ implicit via torch.ops", mode]
        assert len(cpp_trips) == 1 and cpp_trips[0].startswith("_ops.py:"), cpp_trips
    opaque_trips = trips["C++ explicit via torch.ops", "no grad"]
    print(f"implicit C++ operator: {cpp_trips}")
    print(f"explicit C++ operator, no grad: {len(opaque_trips)} functions")
    assert len(opaque_trips) > 1
    assert len(trips["C++ explicit via torch.ops", "inference"]) == 1

# %%
# ``torch.ops.perf_ops.scale_shift`` is an *overload packet* that picks its
# overload on every call, while the ``custom_op`` object holds its one
# overload, so the two routes should cost about the same.
#
# When the overhead matters
# -------------------------
#
# The overhead is paid per call, whatever the size of the tensor. Here are
# the plain function and the ``custom_op`` on tensors of growing size:

sizes = [16, 2**10, 2**14, 2**23]
by_size = {}
for n in sizes:
    x = torch.randn(n)
    by_size[n, "Python function"] = (scale_shift_python, x)
    by_size[n, "custom_op"] = (scale_shift_op, x)
size_micros = {k: v * 1e6 for k, v in time_per_call(by_size, rounds=7).items()}

print(f"{'elements':>10}{'Python fn (us)':>16}{'custom_op (us)':>16}{'ratio':>8}")
size_ratios = {}
for n in sizes:
    plain, op = size_micros[n, "Python function"], size_micros[n, "custom_op"]
    size_ratios[n] = op / plain
    print(f"{n:>10}{plain:>16.1f}{op:>16.1f}{size_ratios[n]:>7.2f}x")
report(
    {
        "the ratio is lower for the largest tensor than for the smallest": (
            size_ratios[sizes[-1]] < size_ratios[sizes[0]]
        ),
        "for the largest tensor the two are within 1.5x": (
            1 / 1.5 < size_ratios[sizes[-1]] < 1.5
        ),
    }
)

# %%
# The ratio should fall as the tensor grows: the arithmetic grows, the
# overhead does not. So the overhead matters for a small operator called many
# times per step, in a Python loop over rows, time steps or tokens.
#
# Fewer, larger calls
# ~~~~~~~~~~~~~~~~~~~
#
# The simplest fix is free: one call on the whole batch instead of one per
# row. Both functions compute the same 64 rows of 16 numbers.

rows = torch.randn(64, 16)


def one_call_per_row(batch):
    return torch.stack([scale_shift_op(row) for row in batch])


def one_call(batch):
    return scale_shift_op(batch)


torch.testing.assert_close(one_call_per_row(rows), one_call(rows))
batching = time_per_call(
    {"per row": (one_call_per_row, rows), "batched": (one_call, rows)}
)
speedup = batching["per row"] / batching["batched"]
print(
    f"64 calls: {batching['per row'] * 1e6:.0f} us; one call: "
    f"{batching['batched'] * 1e6:.1f} us; batching is {speedup:.0f}x faster"
)
report({"one batched call is more than 5x faster than one call per row": speedup > 5})

# %%
# Switching autograd off, properly
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
#
# For inference there is a second free fix. Under ``torch.inference_mode``
# the dispatcher skips the autograd layer, and its trip into Python. Under
# ``torch.no_grad`` the layer still runs, only to find grad mode off, as the
# count of Python functions shows first. Then each mode is timed over 100
# calls inside one ``with`` block, keeping the cost of entering it out, for
# the extra cost per call of the ``custom_op`` over the plain function.


def hundred_calls(fn, mode):
    def run(x):
        with mode():
            for _ in range(100):
                fn(x)

    return run


modes = {
    "grad mode": torch.enable_grad,
    "torch.no_grad": torch.no_grad,
    "torch.inference_mode": torch.inference_mode,
}
with torch.no_grad():
    no_grad_trips = python_functions_run(scale_shift_op, small)
inference_trips = trips["custom_op, called directly", "inference"]
print(
    f"Python functions per custom_op call: {len(no_grad_trips)} under no_grad, "
    f"{len(inference_trips)} under inference_mode"
)
assert len(no_grad_trips) > len(inference_trips)

loops = {}
for mode_name, mode in modes.items():
    loops[mode_name, "plain"] = (hundred_calls(scale_shift_python, mode), small)
    loops[mode_name, "op"] = (hundred_calls(scale_shift_op, mode), small)
loop_seconds = time_per_call(loops, rounds=9)
extra = {
    name: (loop_seconds[name, "op"] - loop_seconds[name, "plain"]) / 100 * 1e6
    for name in modes
}
for name, cost in extra.items():
    print(f"{name:>22}: custom_op costs {cost:5.1f} us more per call than the plain fn")
report(
    {
        "inference_mode costs less extra than grad mode": (
            extra["torch.inference_mode"] < extra["grad mode"]
        ),
        "inference_mode costs less extra than no_grad": (
            extra["torch.inference_mode"] < extra["torch.no_grad"]
        ),
    }
)

# %%
# A graph break versus an opaque operator
# ---------------------------------------
#
# Inside a model compiled with ``torch.compile`` the question changes. Say one
# step is done by NumPy: a response curve known as a table of points, applied
# with ``np.interp``. Dynamo cannot trace it, so it *breaks the graph*: it
# compiles the code before and after separately and runs the call in Python
# between them. A custom operator with a fake kernel keeps the model in one
# graph, with the operator as one opaque node.

CURVE_X = np.linspace(-3.0, 3.0, 25)
CURVE_Y = np.tanh(CURVE_X) + 0.1 * np.sin(4 * CURVE_X)


def apply_curve_numpy(x):
    check_floating(x)
    values = np.interp(x.numpy(force=True), CURVE_X, CURVE_Y)
    return torch.from_numpy(values).to(device=x.device, dtype=x.dtype)


@torch.library.custom_op("perf_ops::apply_curve", mutates_args=())
def apply_curve(x: torch.Tensor) -> torch.Tensor:
    return apply_curve_numpy(x)


@apply_curve.register_fake
def _(x):
    check_floating(x)
    return x.new_empty(x.shape)  # np.interp always returns a row-major array


for device in devices:
    for x in layouts(device, grad_modes=(False,)):
        torch.library.opcheck(apply_curve, (x,))
print(f"opcheck passed for perf_ops::apply_curve on {devices}, every layout")

# %%
# The model is a linear layer, the curve, and another linear layer. Two copies
# share the same weights: one calls NumPy directly, the other the operator.


class CurveNet(torch.nn.Module):
    def __init__(self, curve, width=32):
        super().__init__()
        self.curve = curve
        self.expand = torch.nn.Linear(width, width)
        self.project = torch.nn.Linear(width, 8)

    def forward(self, x):
        return self.project(self.curve(self.expand(x)))


net_numpy = CurveNet(apply_curve_numpy)
net_op = CurveNet(apply_curve)
net_op.load_state_dict(net_numpy.state_dict())

# %%
# ``torch._dynamo.explain`` traces a function as ``torch.compile`` would and
# reports its graphs and why each break happened. It is private, and no
# public API gives the reasons. It also resets Dynamo's caches, so we call it
# before compiling anything.

with torch.no_grad():
    example = torch.randn(8, 32)
    explained_numpy = torch._dynamo.explain(net_numpy)(example)
    explained_op = torch._dynamo.explain(net_op)(example)
first_reason = str(explained_numpy.break_reasons[0].reason).splitlines()[0]
print(f"NumPy called directly: {explained_numpy.graph_break_count} graph break(s)")
print(f"  first reason: {first_reason}")
print(f"custom op: {explained_op.graph_break_count} graph breaks")
assert explained_numpy.graph_break_count >= 1
assert explained_op.graph_break_count == 0 and len(explained_op.graphs) == 1
op_nodes = [
    node
    for node in explained_op.graphs[0].graph.nodes
    if node.target is torch.ops.perf_ops.apply_curve.default
]
assert len(op_nodes) == 1

# %%
# Now the timings, over four batch sizes, without autograd; ``dynamic=True``
# compiles once for all sizes. The backend counts the graphs Dynamo hands it
# and runs each unchanged, as in
# :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py`. Dynamo's part,
# capturing graphs and breaking them, is the same for every backend; ours
# leaves out what Inductor does next (pass ``backend="inductor"`` to time
# that).


class CountingBackend:
    """A torch.compile backend that counts the graphs it is handed."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, graph_module, example_inputs):
        self.graphs += 1
        return graph_module.forward


backends = {"graph break": CountingBackend(), "custom op": CountingBackend()}
compiled_numpy = torch.compile(net_numpy, backend=backends["graph break"], dynamic=True)
compiled_op = torch.compile(net_op, backend=backends["custom op"], dynamic=True)
models = {"eager": net_numpy, "graph break": compiled_numpy, "custom op": compiled_op}
batch_sizes = [8, 128, 2048, 16384]

new_graphs = {name: [] for name in backends}
model_stmts = {}
with torch.no_grad():
    start = time.perf_counter()
    for batch in batch_sizes:
        x = torch.randn(batch, 32)
        expected = net_numpy(x)
        for name, model in models.items():
            graphs_before = backends[name].graphs if name in backends else 0
            torch.testing.assert_close(model(x), expected)
            if name in backends:
                new_graphs[name].append(backends[name].graphs - graphs_before)
            model_stmts[batch, name] = (model, x)
    print(f"compiling and checking took {time.perf_counter() - start:.1f} s")
    model_seconds = time_per_call(model_stmts, rounds=7, block_seconds=0.01)
model_micros = {key: value * 1e6 for key, value in model_seconds.items()}

print(f"{'batch':>7}" + "".join(f"{name + ' (us)':>18}" for name in models))
for batch in batch_sizes:
    print(f"{batch:>7}" + "".join(f"{model_micros[batch, m]:>18.1f}" for m in models))

# %%
# The three versions agree at every size. The counting backends show how
# many graphs each first call produced, and that the later sizes produced
# none:

for name in ("graph break", "custom op"):
    print(f"{name:>12}: new graphs per batch size {new_graphs[name]}")
    assert new_graphs[name][0] >= 1 and sum(new_graphs[name][1:]) == 0
assert new_graphs["graph break"][0] > new_graphs["custom op"][0] == 1

# %%
# On log-log axes:

fig, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
for name, marker in zip(models, "osD", strict=True):
    times = [model_micros[batch, name] for batch in batch_sizes]
    ax.plot(batch_sizes, times, marker=marker, label=name)
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("batch size (rows of 32 numbers)")
ax.set_ylabel("microseconds per forward pass")
ax.set_title("CurveNet forward pass, counting backend")
ax.legend(fontsize="small")
plt.show()

# %%
# What the break costs is the gap between the two compiled versions, and
# what compiling costs is the gap between them and eager mode:

for batch in batch_sizes:
    eager = model_micros[batch, "eager"]
    broken, opaque = (
        model_micros[batch, "graph break"],
        model_micros[batch, "custom op"],
    )
    print(
        f"batch {batch:>5}: graph break {broken / opaque:.2f}x the custom op "
        f"({broken - opaque:+.0f} us); custom op {opaque / eager:.2f}x eager"
    )

smallest, largest = batch_sizes[0], batch_sizes[-1]
at_largest = [model_micros[largest, name] for name in models]
report(
    {
        "smallest batch: the graph break is slower than the custom op": (
            model_micros[smallest, "graph break"] > model_micros[smallest, "custom op"]
        ),
        "smallest batch: the custom op is slower than eager": (
            model_micros[smallest, "custom op"] > model_micros[smallest, "eager"]
        ),
        "largest batch: all three within 2x": max(at_largest) < 2 * min(at_largest),
    }
)

# %%
# Three things usually show; the last lines above say which this run saw:
#
# * At the smallest batch the graph break should make the compiled model
#   slower than the one with the custom operator: each break adds a compiled
#   piece to enter and leave, with its guards and wrappers, and Python
#   between pieces.
# * At that batch both compiled versions should be slower than eager: a
#   compiled call pays for guards and wrappers, and the counting backend wins
#   nothing back.
# * At the largest batch all three should take about the same time, within a
#   factor of two, as ``np.interp`` on a large array dominates.
#
# The same operators on the GPU
# -----------------------------
#
# The timings are CPU-only, but the compiled models must give the same
# answers on every device. NumPy runs only on the CPU, so on a GPU the curve
# step copies its input to the host and back.

with torch.no_grad():
    for device in devices[1:]:
        x = torch.randn(64, 32, device=device)
        expected = net_numpy.to(device)(x)
        net_op.to(device)
        torch.testing.assert_close(compiled_numpy(x), expected)
        torch.testing.assert_close(compiled_op(x), expected)
        print(f"compiled models match eager on {device}")
if len(devices) == 1:
    print("No CUDA device in this run: the GPU check is skipped.")

# %%
# Conclusion: what to do about overhead
# -------------------------------------
#
# Every call pays for the dispatcher and, for a Python operator, for trips
# into Python: heavy on a tiny operator, lost behind a large one. Measure
# first; when it matters, in order of effort:
#
# * **Make fewer, larger calls**: batch rows, time steps or tokens.
# * **Run inference under** ``torch.inference_mode``, not ``no_grad``.
# * **Keep the model in one graph**: give a Python step a custom operator with
#   a fake kernel instead of leaving a graph break.
# * **Register the operator in C++**, choosing the dispatch key for what it
#   keeps and gives up: with its backward in Python (the explicit operator)
#   it still enters Python whenever autograd is on; a
#   ``CompositeImplicitAutograd`` kernel (the implicit one) dissolves into
#   its ATen calls when traced down to ATen operators.
#   :ref:`sphx_glr_tutorials_cpp_custom_ops.py` says when the backward must
#   be C++ too.
# * **On a GPU**, replay CUDA graphs, as
#   :ref:`sphx_glr_tutorials_strides_and_runtime.py` shows with a custom
#   operator.
#
# Related pages:
#
# * :ref:`sphx_glr_tutorials_python_custom_ops.py` for writing Python
#   operators
# * :ref:`sphx_glr_tutorials_cpp_custom_ops.py` for writing and building C++
#   operators
# * :ref:`sphx_glr_tutorials_custom_op_internals.py` for what ``custom_op``
#   registers under the hood
# * :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py` when an operator
#   misbehaves
