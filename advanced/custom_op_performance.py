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

A custom operator is a promise to the rest of PyTorch: a schema, a kernel per
device, a fake kernel for the compilers, a formula for autograd. Keeping that
promise means every call goes through PyTorch's *dispatcher*, which looks up
the right kernel for the inputs at hand, and for an operator written in
Python it also means a few layers of Python wrapping around your function.
For most operators that bookkeeping is lost in the time the kernel takes. For
a tiny operator called thousands of times per step it can be a large part of
the cost. This page measures it on the machine that builds the page, so every
number below comes from the run you are reading.
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
# To see the overhead rather than the work, the operation must be almost
# free: ``x * 2 + 1`` on a tensor of 16 numbers. Every variant first checks
# that the input is a floating-point tensor and raises a ``ValueError`` if it
# is not, so all of them do the same work. The plain Python function
# is the baseline that everything else is compared with.


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
# :ref:`sphx_glr_tutorials_python_custom_ops.py`. The decorator returns a
# Python object that you can call directly. The same operator is also
# reachable as ``torch.ops.perf_ops.scale_shift``, which is how code that
# did not define it refers to it. We time both.


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
# the namespace for definitions, ``define`` declares the schema and ``impl``
# registers a Python kernel for a dispatch key. The key
# ``CompositeExplicitAutograd`` makes the kernel serve every device. Fake
# kernel and backward formula are registered by name. This is what
# ``custom_op`` builds for you, minus the layers of wrapping it adds around
# the kernel (a table further down lists them).

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
# **Two C++ operators** do the same in C++ (see
# :ref:`sphx_glr_tutorials_cpp_custom_ops.py` for the details of building
# one). The ``perf_ops`` namespace already has its ``DEF`` library (ours, from
# Python), and a namespace may be defined only once, so the C++ code adds to
# it with ``TORCH_LIBRARY_FRAGMENT``. The two share one kernel and differ in
# the dispatch key it is registered for, which changes more than speed:
#
# * ``scale_shift_cpp`` registers it for ``CompositeImplicitAutograd``. Such a
#   kernel takes the place of the operator's ``Autograd`` entry: the
#   operator gets no autograd node of its own, and autograd differentiates
#   the ATen calls inside the kernel instead. There is no Python on the call
#   path, with or without grad. But the operator is not opaque: the graph
#   Dynamo captures, and the first graph of ``torch.export``, still name it,
#   but every tracing down to ATen operators (AOTAutograd in
#   ``torch.compile``'s ``aot_eager`` and Inductor backends,
#   ``run_decompositions`` on an exported program) dissolves it into
#   ``aten.mul`` and ``aten.add``.
# * ``scale_shift_cpp_opaque`` registers it for ``CompositeExplicitAutograd``,
#   like ``custom_op`` does with a Python kernel, and gets its fake kernel
#   and backward formula from Python. It stays one node in compiled and
#   exported graphs, and it pays for a trip into Python on the ``Autograd``
#   key, exactly as ``custom_op`` does. This one is the like-for-like rival
#   of ``custom_op``: only the kernel's language differs.

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
# The build goes into a fixed folder under PyTorch's extension cache
# (``$TORCH_EXTENSIONS_DIR`` if set), one per Python and PyTorch version, so
# that a second run of the page finds the finished library and only loads
# it. Without a C++ compiler or ``ninja`` the C++ variants are left out, and
# the page says so in one line. With them, a failed build stops the page with
# the compiler's message: a broken build is an error, not a reason to skip.


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
# ``torch.export`` shows what the registration key does to the operator in a
# graph. Its first graph names both operators. ``run_decompositions``, which
# lowers an exported program to ATen operators (as AOTInductor needs), keeps
# the explicit one as a single node and dissolves the implicit one into the
# ATen calls of its kernel. ``make_fx`` (in ``torch.fx.experimental``), the
# tracer underneath AOTAutograd, does the same.


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
# ``torch.utils.benchmark.Timer`` takes care of the details that make
# hand-written timing loops lie: it warms up, switches off Python's garbage
# collector while it measures, and pins the number of threads (we use one).
# ``Timer.timeit(n)`` runs the statement ``n`` times and reports the time per
# run.
#
# Two more precautions, because other programs share the machine that builds
# this page:
#
# * The clock is ``time.thread_time``, the CPU time of our own thread, instead
#   of the wall clock. Time during which the operating system ran someone
#   else is then not counted. For single-threaded work on the CPU, which is
#   all we time here, that is the time the work itself took. The thread
#   clock is precise on Linux; elsewhere the helper uses the wall clock
#   (``time.perf_counter``).
# * The variants are measured in *rounds*: each round times one short block
#   of every variant, and each variant's result is the median over all
#   rounds. A disturbance then hits one block of everyone rather than all
#   blocks of one variant.

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
    """Print whether this run's timings showed each expected relation.

    Timings depend on the machine and on what else it is doing, so the page
    asserts none of them; it says what this run saw instead.
    """
    for text, seen in observations.items():
        print(f"[{'seen' if seen else 'not seen in this run'}] {text}")


# %%
# Each variant runs on a 16-element tensor, once with an input that does not
# require grad and once with one that does (then autograd records a graph
# node on every call).

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
# function's. On a log scale, the bars show the whole range at once:

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
# The sentences below are computed from this run's timings, so they describe
# the machine that built the page. Timings are not asserted: a busy machine
# must not break the page. Instead the last lines say whether this run saw
# the relations one expects: the Python ``custom_op`` costs clearly more
# than the plain function, calling it directly or through ``torch.ops`` makes
# little difference, and each C++ operator is cheaper than the Python one.
# Only the explicit C++ operator is a like-for-like rival, though: it goes
# through the same ``Autograd`` layer in Python, so the gap measures the
# kernel's language alone. The implicit one has no ``Autograd`` entry to go
# through and gives up being one node in a graph. The next section explains
# the numbers with something that does not vary from run to run: a count of
# the Python functions each call goes through.


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
# Where does the difference come from? Python's ``sys.setprofile`` hook is
# told about every Python function that starts running, so it can list what
# one call of each variant executes in Python. Everything else happens in
# C++. The last column runs the call under ``torch.inference_mode``, which
# switches autograd off entirely (more on that below).


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
# the autograd layer that ``register_autograd`` installed, which runs on
# every call to decide whether a graph node is needed, and again for the
# kernel, and each trip converts the arguments between C++ and Python.
# ``custom_op`` wraps the kernel in more layers of its own than the low-level
# registration does. Under ``inference_mode`` the autograd layer drops out.
# ``torch.ops`` enters through one Python function, which for the implicit
# C++ operator is all the Python that runs, in every mode. The explicit C++
# operator still calls back into Python for its ``Autograd`` entry, and only
# under ``inference_mode`` shrinks to that one function. The cell checks each
# of these statements:

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
# ``torch.ops.perf_ops.scale_shift`` is an *overload packet*: it picks the
# overload that matches the arguments on every call, while the object
# returned by ``custom_op`` already holds the one overload it defines. That
# is why skipping the object's own ``__call__`` should not make the call
# noticeably cheaper; the timings above say whether the two routes came out
# within 1.5 times of each other in this run.
#
# When the overhead matters
# -------------------------
#
# The overhead comes with every call, whatever the size of the tensor, so
# whether it matters depends on how it compares with the work the call does.
# Here are the plain function and the ``custom_op`` on tensors of growing
# size:

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
# Expect the ratio to fall as the tensor grows (the lines above say whether
# this run saw it): the arithmetic grows with the tensor, the overhead does
# not. So the overhead matters when an operator is small and called many
# times per step, for instance inside a Python loop over rows, time steps or
# tokens. The more work one call does, the smaller the share of the
# overhead.
#
# Fewer, larger calls
# ~~~~~~~~~~~~~~~~~~~
#
# The simplest fix costs nothing: call the operator once on a whole batch
# instead of once per row. Both functions below compute the same 64 rows of
# 16 numbers.

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
# the dispatcher skips the autograd layer altogether, and with it one of the
# two trips into Python. ``torch.no_grad`` is not enough: the autograd layer
# still runs, only to find that grad mode is off. The cell first confirms
# this by counting the Python functions one call runs under each of the two.
# Then it times all three modes: to keep the cost of entering a mode out of
# the measurement, each function below makes 100 calls inside one ``with``
# block, and we compare the extra cost per call of the ``custom_op`` over the
# plain function in each mode.


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
# step of the model is done by NumPy: here, a response curve known only as a
# table of points, applied with ``np.interp``. Dynamo cannot trace
# ``np.interp``, so it *breaks the graph*: it compiles the code before the
# call and the code after it separately and runs the call in ordinary Python
# in between. Wrapping the step as a custom operator with a fake kernel keeps
# the model in one graph, with the operator as a single opaque node.

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
# ``torch._dynamo.explain`` traces a function the way ``torch.compile`` would
# and reports the graphs it found and why each break happened. It lives in a
# private module, and no public API gives the reasons; the number of graphs
# can be had publicly, as the next cell shows. ``explain`` also resets
# Dynamo's caches, so we call it before compiling anything.

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
# Now the timings, over four batch sizes, without autograd. ``dynamic=True``
# compiles once for all sizes instead of once per size. The backend is a
# small one of our own, built only from the public backend interface: a
# backend is any callable that receives each graph Dynamo captured and
# returns something to run. Ours counts the graphs and runs each one as it
# is. Dynamo's part, capturing graphs with fake tensors and breaking them where
# it cannot trace, is the same whatever the backend; what ours leaves out is
# everything a real backend does next: AOTAutograd's joint tracing, and
# Inductor's decompositions, partitioning and code generation, the expensive
# part of compiling. To time Inductor, pass ``backend="inductor"`` instead
# (the counts below need the counting backend).


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
# Three things usually show in these numbers; the last lines of the cell
# above say which of them this run saw:
#
# * At the smallest batch the graph break should make the compiled model
#   slower than the version with the custom operator. Every break means
#   another compiled piece to enter and leave, each with its own guards and
#   wrappers, plus the Python code that runs between them.
# * At the same batch, both compiled versions are expected to be slower than
#   eager mode. Calling a compiled model has a cost of its own on every call
#   (guards, wrappers), and with the counting backend nothing is won back,
#   because the operators themselves run unchanged. At this batch size the
#   model is too small for compilation to pay off.
# * At the largest batch all three should take about the same time (within a
#   factor of two), because ``np.interp`` on a large array dominates.
#
# With Inductor the operators on each side of the curve run as generated
# kernels, but the version with the break still pays for entering and leaving
# each piece. On a GPU, a model without breaks can also be recorded whole as a
# CUDA graph (see below).
#
# The same operators on the GPU
# -----------------------------
#
# The timings above are CPU-only, but the compiled models must give the same
# answers on every device this run has. NumPy only runs on the CPU, so on a
# GPU the curve step copies its input to the host and back.

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
# What to do about overhead
# -------------------------
#
# Measure first: for most operators the overhead is negligible next to the
# work. When it is not, in order of effort:
#
# * **Make fewer, larger calls.** Batch rows, time steps or tokens into one
#   call; the section on batching shows what that saves.
# * **Run inference under** ``torch.inference_mode``, which takes the
#   autograd layer, and its trip into Python, off every call. ``no_grad`` does
#   not.
# * **Keep the surrounding code in one graph.** Give a Python step a custom
#   operator with a fake kernel instead of leaving a graph break, and let
#   ``torch.compile`` capture the region around it.
# * **Register the operator in C++** (see
#   :ref:`sphx_glr_tutorials_cpp_custom_ops.py`) when a hot, small operator
#   must stay fast. A C++ kernel with its backward registered from Python
#   (the explicit operator above) still enters Python on the ``Autograd`` key
#   whenever autograd is on; only ``inference_mode`` removes that trip. To keep
#   Python off the call path with autograd on, the backward must be C++ too:
#   a ``torch::autograd::Function`` registered for the ``Autograd`` key keeps
#   the operator one opaque node, while a ``CompositeImplicitAutograd`` kernel
#   built from ATen calls (the implicit operator above) is cheaper to write
#   but dissolves into those calls under ``torch.compile`` and
#   ``torch.export``.
# * **On a GPU, use CUDA graphs** (``torch.compile(mode="reduce-overhead")``
#   or ``torch.cuda.graph``), which record a sequence of kernel launches once
#   and replay it without the CPU launching each kernel again. They work best
#   on a model without graph breaks (each piece between breaks is recorded
#   separately), and every operator inside must stay on the GPU without
#   waiting for the CPU, which rules out the NumPy step above.
#
# Conclusion
# ----------
#
# Every call to a custom operator pays for the dispatcher and, for an
# operator written in Python, for trips back into Python. It weighs heavily
# on a tiny operator and matters less behind a large one. Inside a compiled
# model at small batch sizes, a graph break is expected to cost more than an
# opaque custom operator (the report above says whether this run saw it), and
# avoiding graph breaks is one of the main reasons to write a custom operator
# in the first place. When the per-call cost does matter, batch the work,
# switch autograd off with ``inference_mode``, keep the model in one graph, or
# move the operator to C++, choosing its dispatch key for what it keeps and
# what it gives up.
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
