"""
Choosing a Mechanism for Opaque Code
====================================

After this page you will be able to choose, for code that ``torch.compile``
cannot trace, the mechanism that keeps your model compiling, exporting and
training: ``torch.compiler.disable``, ``torch.compiler.allow_in_graph``,
``torch.compiler.nonstrict_trace``, ``torch.library.custom_op`` or
``torch.library.triton_op``. The page puts one function through all of them
and builds its comparison table from what each run did.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * What each mechanism hands to Dynamo, to AOTAutograd and to Inductor
       * Which of them survive ``torch.export``, AOTInductor and training
       * How to measure this for your own code: graph breaks, captured
         graphs, ``gradcheck`` of the compiled function, a package loaded in a
         fresh process

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * A C++ compiler, for the AOTInductor columns
       * Matplotlib; Triton and a CUDA GPU for the Triton kernel (the page
         runs without them and says what it ran)
       * :ref:`sphx_glr_tutorials_python_custom_ops.py`

.. admonition:: Checklist
   :class: checklist

   #. Find out whether the code reads tensor data outside PyTorch: a C
      library, ``ctypes``, Pillow, a pybind11 module.
   #. If it does, make it a ``torch.library.custom_op`` with a fake kernel
      and ``register_autograd``. If the kernel is written in Triton, use
      ``torch.library.triton_op`` with ``wrap_triton`` instead.
   #. If it is PyTorch code that Dynamo cannot trace, mark it with
      ``torch.compiler.nonstrict_trace`` (or ``allow_in_graph``).
   #. If Dynamo should merely stay out of it, use ``torch.compiler.disable``
      and accept the graph break.
   #. Measure: count graph breaks, look at the graph Inductor receives,
      ``gradcheck`` the compiled function, export, and load the AOTInductor
      package in a fresh process.

``torch.compile`` understands PyTorch operators and a large part of Python.
Hand it code it cannot follow and it falls back to running that code in plain
Python, with a *graph break* on either side. PyTorch offers five ways to do
better, and they are not interchangeable: they differ in who looks inside the
code (Dynamo, AOTAutograd, nobody) and therefore in what works afterwards.
"""

# %%
# Setting up
# ----------
#
# Every measurement on this page runs on the CPU. With Triton and a CUDA
# device present, one extra section runs a Triton kernel on the GPU.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import ctypes
import ctypes.util
import re
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
from torch._dynamo.backends.common import aot_autograd
from torch.autograd.gradcheck import GradcheckError

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
TRITON_RUNS = HAS_TRITON and torch.cuda.is_available()
print(f"the Triton kernel runs on this machine: {TRITON_RUNS}")

# %%
# A word on the tools. ``aot_autograd`` builds a ``torch.compile`` backend
# that shows us the graph AOTAutograd hands to a compiler such as Inductor;
# it lives in a private module, and no public API returns that graph.
# ``torch._dynamo.explain``, used below to count graph breaks and list their
# reasons, is private too. ``GradcheckError``, raised by ``gradcheck``, is
# public.
#
# The opaque function: a cube root from the C library
# ---------------------------------------------------
#
# PyTorch has no real cube root: ``x ** (1 / 3)`` is ``nan`` for negative
# ``x``. The C maths library has one, ``cbrt``, and Python's ``ctypes`` can
# call it. The function below copies the tensor and lets ``Tensor.apply_``
# call ``cbrt`` on every element. That is what "opaque" means on this page:
# the work happens in machine code that no tracer can look into, and it needs
# real values, which the compiler's fake tensors do not have.
# (NumPy is a poor stand-in for this: Dynamo traces a good part of NumPy.)

libm = ctypes.CDLL(ctypes.util.find_library("m"))
libm.cbrt.restype = ctypes.c_double
libm.cbrt.argtypes = (ctypes.c_double,)


def check_real_floating(x):
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"expected a tensor, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise ValueError(f"expected a real floating-point tensor, got {x.dtype}")


def libm_cube_root(x):
    """The real cube root of every element, computed by the C library."""
    check_real_floating(x)
    result = x.detach().to(
        "cpu", torch.float64, memory_format=torch.contiguous_format, copy=True
    )
    if type(result) is not torch.Tensor:
        # A tracer's stand-in (a fake or functional tensor) has no values to
        # hand to C; refuse it instead of letting C read memory that is not
        # there.
        raise TypeError(f"cbrt needs real data, got a {type(result).__name__}")
    result.apply_(libm.cbrt)  # PyTorch's C++ calls the C function per element
    return result.to(device=x.device, dtype=x.dtype)


volume = torch.tensor([-27.0, -2.0, 0.0, 0.125, 8.0], dtype=torch.float64)
print(f"cbrt via ctypes: {libm_cube_root(volume).tolist()}")
print(f"x ** (1 / 3):    {(volume ** (1 / 3)).tolist()}")
torch.testing.assert_close(libm_cube_root(volume) ** 3, volume)
assert volume[0] ** (1 / 3) != volume[0] ** (1 / 3)  # nan: the reason for cbrt

# %%
# Bad input is refused with a ``ValueError`` rather than converted silently.
# The operators below run the same check, their fake kernels included.

try:
    libm_cube_root(torch.arange(4))
except ValueError as error:
    print(f"{type(error).__name__}: {error}")
else:
    raise AssertionError("expected an integer tensor to be rejected")

# %%
# For training, the derivative of the cube root ``y`` of ``x`` is
# ``1 / (3 * y**2)``, written with PyTorch operations so that any tracer can
# follow it. Before ``torch.library`` existed, the way to give Python code a
# gradient was a ``torch.autograd.Function``; the mechanisms that do not
# create an operator (plain call, ``disable``, ``allow_in_graph``,
# ``nonstrict_trace``) use this one.


def cube_root_backward(ctx, grad):
    (root,) = ctx.saved_tensors
    return grad / (3 * root * root)


class CubeRootFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        root = libm_cube_root(x)
        ctx.save_for_backward(root)
        return root

    backward = staticmethod(cube_root_backward)


def cube_root(x):
    return CubeRootFunction.apply(x)


# %%
# Six ways to call it
# -------------------
#
# ``allow_in_graph`` and ``nonstrict_trace`` mark the function object they are
# given for good, so each gets a wrapper of its own: the plain ``cube_root``
# must stay plain. ``nonstrict_trace`` became public in ``torch.compiler`` in
# PyTorch 2.14; where it is missing, we say so and use the older private
# ``torch._dynamo.nonstrict_trace``, which has existed since PyTorch 2.7.


def cube_root_allowed(x):
    return CubeRootFunction.apply(x)


def cube_root_nonstrict(x):
    return CubeRootFunction.apply(x)


cube_root_disabled = torch.compiler.disable(cube_root)
cube_root_allowed = torch.compiler.allow_in_graph(cube_root_allowed)
if hasattr(torch.compiler, "nonstrict_trace"):
    nonstrict_trace = torch.compiler.nonstrict_trace
    print("nonstrict_trace: torch.compiler.nonstrict_trace (public)")
else:
    nonstrict_trace = torch._dynamo.nonstrict_trace
    print("nonstrict_trace: not public on this release; using torch._dynamo's")
release = tuple(int(part) for part in torch.__version__.split(".")[:2])
assert hasattr(torch.compiler, "nonstrict_trace") == (release >= (2, 14))
cube_root_nonstrict = nonstrict_trace(cube_root_nonstrict)

# %%
# The fifth way makes the function an operator. The fake kernel runs the same
# input check and describes the output: same shape and dtype, contiguous.
# ``register_autograd`` reuses the backward formula from above.


@torch.library.custom_op("mechanisms::cube_root", mutates_args=())
def cube_root_op(x: torch.Tensor) -> torch.Tensor:
    return libm_cube_root(x)


@cube_root_op.register_fake
def _(x):
    check_real_floating(x)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def save_root(ctx, inputs, output):
    ctx.save_for_backward(output)


cube_root_op.register_autograd(cube_root_backward, setup_context=save_root)

# %%
# The sixth, ``triton_op``, cannot wrap the ``ctypes`` function: its body must
# be traceable, because the compiler traces into it (see
# :ref:`sphx_glr_tutorials_triton_custom_ops.py`). It is the mechanism for a
# kernel written in Triton. Ours computes the magnitude as
# ``exp(log(|x|) / 3)`` and restores the sign; float32 tensors on a GPU go to
# that kernel, everything else to the same formula in PyTorch operations.
# Without a GPU, the table below therefore measures the PyTorch branch.

BLOCK_SIZE = 256

if HAS_TRITON:

    @triton.jit
    def cube_root_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
        offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        in_bounds = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=in_bounds, other=1.0)
        magnitude = tl.exp(tl.log(tl.abs(x)) / 3.0)
        root = tl.where(x < 0, -magnitude, magnitude)
        tl.store(out_ptr + offsets, root, mask=in_bounds)


def cube_root_formula(x):
    return torch.sign(x) * x.abs().pow(1 / 3)


@torch.library.triton_op("mechanisms::cube_root_triton", mutates_args=())
def cube_root_triton(x: torch.Tensor) -> torch.Tensor:
    check_real_floating(x)
    if not (HAS_TRITON and x.device.type == "cuda" and x.dtype == torch.float32):
        return cube_root_formula(x).contiguous()
    x = x.contiguous()
    out = torch.empty_like(x)
    n_elements = x.numel()
    if n_elements == 0:
        return out
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    torch.library.wrap_triton(cube_root_kernel)[grid](
        x, out, n_elements, BLOCK_SIZE=BLOCK_SIZE
    )
    return out


cube_root_triton.register_autograd(cube_root_backward, setup_context=save_root)

mechanisms = {
    "plain call": cube_root,
    "disable": cube_root_disabled,
    "allow_in_graph": cube_root_allowed,
    "nonstrict_trace": cube_root_nonstrict,
    "custom_op": cube_root_op,
    "triton_op": cube_root_triton,
}
for fn in mechanisms.values():
    torch.testing.assert_close(fn(volume), libm_cube_root(volume))
print(f"in eager mode all {len(mechanisms)} agree with cbrt")

# %%
# Both operators reject an integer tensor, in eager mode with our
# ``ValueError`` and under ``torch.compile`` already while compiling: their
# fake kernels (for ``triton_op``, the traced body) run the same check, and
# Dynamo reports it as a ``TorchRuntimeError`` that quotes our message.

operators = {"cube_root": cube_root_op, "cube_root_triton": cube_root_triton}
for op_name, op in operators.items():
    try:
        op(torch.arange(4))
    except ValueError as error:
        print(f"eager {op_name}: {type(error).__name__}: {error}")
    else:
        raise AssertionError("expected a ValueError")
    torch.compiler.reset()
    try:
        torch.compile(op, fullgraph=True)(torch.arange(4))
    except torch._dynamo.exc.TorchRuntimeError as error:
        assert "expected a real floating-point tensor" in str(error)
        print(f"compiled {op_name}: {type(error).__name__} quoting our ValueError")
    else:
        raise AssertionError("expected compilation to fail")

# %%
# The model and the measurements
# ------------------------------
#
# The model computes the surface of a cube from its volume, with an operation
# before the cube root and two after it, so that a graph break has something
# to split. Its reference value is ``6 * |v| ** (2 / 3)``.


def cube_surface_with(cube_root_fn):
    def cube_surface(volume):
        return 6 * cube_root_fn(volume.abs()) ** 2

    return cube_surface


class AsModule(torch.nn.Module):
    """A module around a function, for torch.export, which takes modules."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def reference_surface(volume):
    return 6 * volume.abs() ** (2 / 3)


def op_names(graph_module):
    """Short names of the calls in an FX graph, in order."""
    names = []
    for node in graph_module.graph.nodes:
        if node.op not in ("call_function", "call_method"):
            continue
        target = node.target
        if isinstance(target, torch._ops.OpOverload):
            name = target.name().replace("aten::", "")
        else:
            name = getattr(target, "__name__", str(target))
        names.append(name)
    return " ".join(names)


def failure(error):
    """One line naming an exception, with our own message when it is inside."""
    text = str(error)
    ours = re.search(r"cbrt needs real data, got an? \w+", text)
    if ours:
        return f"{type(error).__name__} ({ours.group(0)})"
    first = (text.strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {textwrap.shorten(first, 90)}"


# %%
# Each mechanism goes through the same checks, on CPU float64 volumes away
# from zero (where the cube root's derivative is infinite):
#
# 1. **Dynamo.** ``torch._dynamo.explain`` captures the model without
#    compiling it, counts graph breaks, gives their reasons and returns the
#    graphs.
# 2. **AOTAutograd.** A backend made with ``aot_autograd`` records the
#    forward graph AOTAutograd produces: what Inductor would receive.
# 3. **Inductor.** The model compiled with the default backend must match the
#    reference.
# 4. **Training.** ``gradcheck`` runs *on the compiled function*. For this
#    check we compile with ``aot_eager``: it runs AOTAutograd, the stage that
#    builds the backward, and skips Inductor's code generation, which
#    ``gradcheck``'s many calls would only repeat.
# 5. **torch.export**, in non-strict mode (``strict=False``), which runs the
#    Python code with fake tensors instead of tracing it with Dynamo.
# 6. **AOTInductor**, for what exported: compile the program to a package
#    with ``torch._inductor.aoti_compile_and_package``, then load and run it
#    in this process and in a fresh one that never defined our operators.
#    Both functions live in a private module; they are AOTInductor's
#    documented entry points.

sample = torch.tensor([-8.0, -1.5, 0.3, 2.0, 27.0], dtype=torch.float64)
package_dir = Path(tempfile.mkdtemp(prefix="mechanisms-"))
has_compiler = any(shutil.which(name) for name in ("c++", "g++", "clang++"))

fresh_process_script = """
import sys, torch
import torch._inductor.codecache  # PyTorch 2.10's loader uses it unimported
package = torch._inductor.aoti_load_package(sys.argv[1])
volume = torch.tensor([-8.0, -1.5, 0.3, 2.0, 27.0], dtype=torch.float64)
print(package(volume).tolist())
"""


def check_dynamo(model):
    torch.compiler.reset()
    try:
        explanation = torch._dynamo.explain(model)(sample)
    except Exception as error:
        return {"breaks": "error", "reasons": "", "dynamo": failure(error)}
    reasons = dict.fromkeys(
        str(entry.reason).strip().splitlines()[0] for entry in explanation.break_reasons
    )
    return {
        "breaks": explanation.graph_break_count,
        "reasons": "; ".join(reasons),
        "dynamo": " | ".join(op_names(graph) for graph in explanation.graphs),
    }


def check_aot(model):
    forward_graphs = []

    def keep_forward(graph_module, example_inputs):
        forward_graphs.append(op_names(graph_module))
        return graph_module.forward

    torch.compiler.reset()
    try:
        torch.compile(model, backend=aot_autograd(fw_compiler=keep_forward))(sample)
    except Exception as error:
        return {"aot": failure(error), "aot_ok": False}
    shown = [graph or "(empty)" for graph in forward_graphs]
    return {"aot": " | ".join(shown), "aot_ok": True}


def check_inductor(model, expected):
    torch.compiler.reset()
    try:
        torch.testing.assert_close(torch.compile(model)(sample), expected)
    except Exception as error:
        return {"inductor": failure(error)}
    return {"inductor": "matches"}


def check_training(model):
    torch.compiler.reset()
    leaf = sample.clone().requires_grad_()
    try:
        torch.autograd.gradcheck(torch.compile(model, backend="aot_eager"), (leaf,))
    except (GradcheckError, RuntimeError) as error:
        return {"trains": failure(error)}
    return {"trains": "gradcheck passes"}


def check_export(model):
    try:
        exported = torch.export.export(AsModule(model), (sample,), strict=False)
    except Exception as error:
        return {"export": failure(error)}, None
    return {"export": "exports " + op_names(exported.graph_module)}, exported


def check_aoti(name, exported, expected):
    if exported is None:
        return {"aoti": "nothing to compile", "aoti_fresh": "nothing to compile"}
    if not has_compiler:
        return {"aoti": "no C++ compiler", "aoti_fresh": "no C++ compiler"}
    path = str(package_dir / f"{name.replace(' ', '_')}.pt2")
    try:
        torch._inductor.aoti_compile_and_package(exported, package_path=path)
        package = torch._inductor.aoti_load_package(path)
        torch.testing.assert_close(package(sample), expected)
    except Exception as error:
        return {"aoti": failure(error), "aoti_fresh": "not reached"}
    run = subprocess.run(
        [sys.executable, "-c", fresh_process_script, path],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if run.returncode != 0:
        error_lines = [line for line in run.stderr.splitlines() if "Error" in line]
        return {"aoti": "runs", "aoti_fresh": (error_lines or ["failed"])[-1].strip()}
    fresh = torch.tensor(eval(run.stdout.strip()), dtype=torch.float64)
    torch.testing.assert_close(fresh, expected)
    return {"aoti": "runs", "aoti_fresh": "runs"}


def measure(name, model, reference, with_aoti=True):
    expected = reference(sample)
    row = {**check_dynamo(model), **check_aot(model)}
    row.update(check_inductor(model, expected))
    row.update(check_training(model))
    export_row, exported = check_export(model)
    row.update(export_row)
    if with_aoti:
        row.update(check_aoti(name, exported, expected))
    return row


results = {
    name: measure(name, cube_surface_with(fn), reference_surface)
    for name, fn in mechanisms.items()
}
print(f"measured {len(results)} mechanisms")

# %%
# The measured table
# ------------------
#
# Every value below was produced by the run above. A ``|`` separates the
# graphs Dynamo or AOTAutograd produced when there was more than one.

labels = {
    "breaks": "graph breaks",
    "reasons": "why Dynamo broke",
    "dynamo": "Dynamo's graphs",
    "aot": "AOTAutograd's forward",
    "inductor": "compiled by Inductor",
    "trains": "training (compiled)",
    "export": "torch.export",
    "aoti": "AOTInductor, here",
    "aoti_fresh": "AOTInductor, new process",
}


def print_rows(table):
    for name, row in table.items():
        print(name)
        for key, label in labels.items():
            if key in row and row[key] != "":
                print(
                    textwrap.fill(
                        str(row[key]),
                        width=78,
                        initial_indent=f"  {label:<26}",
                        subsequent_indent=" " * 28,
                    )
                )


print_rows(results)

# %%
# The same table as a picture, one colour per outcome: green where the
# mechanism did what a compiled, exported, trained model needs, red where it
# did not, grey where the check did not apply.

OPERATOR = re.compile(r"mechanisms::cube_root(_triton)?\b")


def summary_cells(row):
    """Short (text, outcome) pairs for the figure, derived from one row."""
    if not row["aot_ok"] or row["inductor"] != "matches":
        receives = ("fails", "bad")
    elif OPERATOR.search(row["aot"]):
        receives = ("one opaque op", "good")
    elif row["breaks"] == 0:
        receives = ("the traced body", "good")
    else:
        receives = ("split graphs", "bad")
    breaks = row["breaks"]
    cells = [
        (str(breaks), "good" if breaks == 0 else "bad"),
        receives,
        ("passes", "good") if row["trains"] == "gradcheck passes" else ("fails", "bad"),
        ("yes", "good") if row["export"].startswith("exports") else ("fails", "bad"),
    ]
    for key in ("aoti", "aoti_fresh"):
        if row[key] == "runs":
            cells.append(("runs", "good"))
        elif row[key] in ("nothing to compile", "no C++ compiler", "not reached"):
            cells.append(("n/a", "none"))
        else:
            cells.append(("fails", "bad"))
    return cells


figure_columns = [
    "graph\nbreaks",
    "Inductor\nreceives",
    "compiled\ngradcheck",
    "torch.export",
    "AOTInductor\nhere",
    "AOTInductor\nnew process",
]
colours = {"good": "#bfe3c0", "bad": "#f3c1bd", "none": "#e4e4e4"}
fig, ax = plt.subplots(figsize=(8.4, 3.6), layout="constrained")
ax.set_xlim(-1.55, len(figure_columns))
ax.set_ylim(len(results), -0.9)
ax.set_axis_off()
for column, title in enumerate(figure_columns):
    ax.text(column + 0.5, -0.45, title, ha="center", va="center", fontsize=9)
for row_index, (name, row) in enumerate(results.items()):
    ax.text(-0.08, row_index + 0.5, name, ha="right", va="center", fontsize=10)
    for column, (text, outcome) in enumerate(summary_cells(row)):
        ax.add_patch(
            plt.Rectangle(
                (column + 0.04, row_index + 0.06),
                0.92,
                0.88,
                facecolor=colours[outcome],
                edgecolor="white",
            )
        )
        ax.text(
            column + 0.5,
            row_index + 0.5,
            text,
            ha="center",
            va="center",
            fontsize=9,
            color="#1b1b1b",
        )
ax.set_title(f"One opaque function, six mechanisms (PyTorch {torch.__version__})")
plt.show()

# %%
# Reading the table
# -----------------
#
# **Plain call.** Dynamo traces into the ``autograd.Function`` and stops at
# ``apply_``, whose argument is a C function it cannot represent. The model
# runs in several graphs with Python in between, and it trains, because
# autograd runs the Python code as usual. ``torch.export`` runs the code on
# fake tensors, and our kernel refuses them.

plain = results["plain call"]
assert plain["breaks"] >= 1 and "apply_" not in plain["dynamo"]
assert len(plain["dynamo"].split(" | ")) > len(
    results["disable"]["dynamo"].split(" | ")
)
assert plain["inductor"] == "matches" and plain["trains"] == "gradcheck passes"
assert "cbrt needs real data" in plain["export"]

# %%
# **disable.** The same graph break, made on purpose and in one place:
# Dynamo does not enter the function at all, so none of the kernel's PyTorch
# pieces land in a graph; there is one graph before the call and one after.
# It trains and it does not export, for the same reasons as the plain call.

disabled = results["disable"]
assert disabled["breaks"] >= 1 and "disable" in disabled["reasons"]
assert len(disabled["dynamo"].split(" | ")) == 2
assert disabled["trains"] == "gradcheck passes"
assert "cbrt needs real data" in disabled["export"]

# %%
# **allow_in_graph.** Dynamo does not trace the function, but it still runs
# it once on fake tensors to learn what it returns, and AOTAutograd would
# trace through it later. Both need the body to be made of PyTorch
# operations. Ours is not, so compilation fails outright: this mechanism
# never helps code that reads tensor data outside PyTorch.

allowed = results["allow_in_graph"]
assert "cbrt needs real data" in allowed["dynamo"]
assert allowed["inductor"] != "matches"

# %%
# **nonstrict_trace.** The same idea with fewer restrictions on arguments
# (modules, and classes registered as pytrees): Dynamo does not trace the
# body, AOTAutograd
# does. With opaque code inside, older releases fail as ``allow_in_graph``
# does; newer ones catch the failure and fall back to tracing into the
# function, graph breaks included. Either way there is no single graph.

nonstrict = results["nonstrict_trace"]
failed_outright = "cbrt needs real data" in nonstrict["dynamo"]
print(
    "nonstrict_trace on this release: "
    + ("compilation fails" if failed_outright else "falls back to graph breaks")
)
assert failed_outright or nonstrict["breaks"] >= 1

# %%
# **custom_op.** One node, ``mechanisms::cube_root``, from Dynamo to Inductor
# to the exported program: nobody looks inside. It compiles in one graph,
# trains through ``register_autograd`` and exports. AOTInductor compiles the
# program around it and, in this process, calls back into our Python
# function. A process that has not defined the operator cannot run the
# package: AOTInductor's C++ runtime looks the operator up by name and finds
# nothing. Deploying without Python needs the operator in C++ (see
# :ref:`sphx_glr_tutorials_cpp_custom_ops.py`).

custom = results["custom_op"]
assert custom["breaks"] == 0
assert OPERATOR.search(custom["dynamo"]) and OPERATOR.search(custom["aot"])
assert custom["inductor"] == "matches" and custom["trains"] == "gradcheck passes"
assert OPERATOR.search(custom["export"])
if has_compiler:
    assert custom["aoti"] == "runs"
    assert "mechanisms::cube_root" in custom["aoti_fresh"]

# %%
# **triton_op.** Dynamo records the operator as one node, exactly as for
# ``custom_op``, and ``torch.export`` keeps it. AOTAutograd, however,
# replaces it with its body, so Inductor receives the PyTorch operations (or,
# on a GPU, the Triton kernel) and compiles them with the code around. For
# the same reason the AOTInductor package holds the computation itself and
# runs in a fresh process that never heard of ``mechanisms::cube_root_triton``.

triton_row = results["triton_op"]
assert triton_row["breaks"] == 0 and OPERATOR.search(triton_row["dynamo"])
assert triton_row["aot_ok"] and not OPERATOR.search(triton_row["aot"])
assert triton_row["trains"] == "gradcheck passes"
assert OPERATOR.search(triton_row["export"])
if has_compiler:
    assert triton_row["aoti"] == "runs" and triton_row["aoti_fresh"] == "runs"
print("asserted the key cells of all six rows")

# %%
# What ``allow_in_graph`` and ``nonstrict_trace`` are for
# --------------------------------------------------------
#
# Both mechanisms exist for PyTorch code that Dynamo cannot trace but
# AOTAutograd can: code whose only obstacle is some Python that Dynamo does
# not support. Our second function calls the C library too, but only on a
# Python number; the tensor work is a PyTorch division. A counter records how
# often the Python body runs. As before, each mechanism gets a function
# object of its own, here made by a small factory.

body_runs = {"count": 0}
EDGE = 10 ** (1 / 3)


def make_divide_by_edge(count_runs):
    """A fresh function that divides by the edge of a cube of volume 10."""

    def divide_by_edge(x):
        if count_runs:
            body_runs["count"] += 1
        return x / libm.cbrt(10.0)  # the C library computes the edge

    return divide_by_edge


def scaled_square_with(divide_fn):
    def scaled_square(volume):
        return divide_fn(volume.abs()) ** 2

    return scaled_square


def reference_scaled_square(volume):
    return (volume.abs() / EDGE) ** 2


def torch_only_mechanisms(count_runs):
    """The four mechanisms, each applied to a function object of its own."""
    return {
        "plain call": make_divide_by_edge(count_runs),
        "disable": torch.compiler.disable(make_divide_by_edge(count_runs)),
        "allow_in_graph": torch.compiler.allow_in_graph(
            make_divide_by_edge(count_runs)
        ),
        "nonstrict_trace": nonstrict_trace(make_divide_by_edge(count_runs)),
    }


# %%
# The counter is a separate set of functions: a compiled function that
# updates a Python counter is recompiled whenever the counter changes, which
# would get in the way of the measurements.

torch_only = torch_only_mechanisms(count_runs=False)
counted = torch_only_mechanisms(count_runs=True)
torch_only_results = {}
for name, fn in torch_only.items():
    row = measure(name, scaled_square_with(fn), reference_scaled_square, False)
    torch.compiler.reset()
    compiled = torch.compile(scaled_square_with(counted[name]))
    compiled(sample)
    body_runs["count"] = 0
    for _ in range(3):
        torch.testing.assert_close(compiled(sample), reference_scaled_square(sample))
    row["body_runs"] = f"{body_runs['count']} in 3 calls of the compiled model"
    torch_only_results[name] = row
labels["body_runs"] = "Python body ran"
print_rows(torch_only_results)

# %%
# Now ``allow_in_graph`` and ``nonstrict_trace`` do their job: no graph
# break, and AOTAutograd hands Inductor plain ``aten`` operations that it can
# fuse with the code around them. The last line shows the price: the Python
# body ran while the graph was being traced and never again. The C library's
# answer became a constant in the graph. That is right for a constant, and
# silently wrong for anything that should be computed anew on every call (a
# counter, a clock, a value read from a file).

for name in ("allow_in_graph", "nonstrict_trace"):
    row = torch_only_results[name]
    assert row["breaks"] == 0 and "div" in row["aot"], name
    assert row["trains"] == "gradcheck passes", name
    assert row["body_runs"].startswith("0 in 3"), name
for name in ("plain call", "disable"):
    assert torch_only_results[name]["breaks"] >= 1, name
    assert torch_only_results[name]["body_runs"].startswith("3 in 3"), name

# %%
# Checking the two operators with ``opcheck``
# -------------------------------------------
#
# The two mechanisms that create an operator come with a test that the
# others lack. ``opcheck`` runs each operator on samples that include an
# empty tensor, two non-contiguous views (a transpose and a strided slice), a
# permuted tensor that is dense but not row-major, and inputs that require
# grad. ``raise_exception=False`` returns the verdict of each sub-test.


def cube_root_samples(device):
    grid = torch.randn(4, 6, dtype=torch.float64, device=device)
    block = torch.randn(2, 3, 4, device=device)
    return [
        torch.randn(0, 3, device=device),
        grid.t(),
        grid[..., ::2],
        block.permute(2, 0, 1),
        torch.randn(5, dtype=torch.float64, device=device, requires_grad=True),
        torch.randn(3, 4, device=device).t().requires_grad_(),
    ]


for device in devices:
    for op_name, op in operators.items():
        for x in cube_root_samples(device):
            verdicts = torch.library.opcheck(op, (x,), raise_exception=False)
            failed = {test: v for test, v in verdicts.items() if v != "SUCCESS"}
            assert not failed, (op_name, device, x.shape, failed)
print(f"opcheck: every sub-test passed for both operators on {devices}")

# %%
# The Triton kernel on a GPU
# --------------------------
#
# With Triton and a CUDA device, float32 GPU tensors reach the Triton kernel.
# AOTAutograd then hands Inductor the kernel itself, as a
# ``triton_kernel_wrapper_functional`` call, instead of the PyTorch branch
# the table measured.

if TRITON_RUNS:
    gpu_volume = torch.randn(1000, device="cuda")
    kernel_graphs = []

    def keep_kernel_graph(graph_module, example_inputs):
        kernel_graphs.append(op_names(graph_module))
        return graph_module.forward

    torch.compiler.reset()
    surface = cube_surface_with(cube_root_triton)
    compiled = torch.compile(
        surface, backend=aot_autograd(fw_compiler=keep_kernel_graph)
    )
    torch.testing.assert_close(
        compiled(gpu_volume).cpu(),
        reference_surface(gpu_volume.cpu().double()).float(),
        rtol=1e-5,
        atol=1e-5,
    )
    torch.testing.assert_close(
        cube_root_triton(gpu_volume).cpu(),
        libm_cube_root(gpu_volume.cpu()),
        rtol=1e-5,
        atol=1e-6,
    )
    assert "triton_kernel_wrapper_functional" in kernel_graphs[0]
    print(f"ran the Triton kernel; AOTAutograd's graph: {kernel_graphs[0]}")
else:
    print("The Triton kernel did not run: this needs Triton and a CUDA device.")

# %%
# A decision guide
# ----------------
#
# The guide below restates the measurements as advice. Each line names the
# cells that support it, and the code checks those cells again, on this
# release.

guide = [
    (
        "reads tensor data outside PyTorch (C, ctypes, Pillow, pybind11)",
        "custom_op + register_fake + register_autograd",
        "custom_op: 0 graph breaks, one opaque op, trains, exports",
        custom["breaks"] == 0 and custom["trains"] == "gradcheck passes",
    ),
    (
        "does that and must also run without Python (AOTInductor from C++)",
        "a C++ operator (TORCH_LIBRARY)",
        "custom_op: the package fails in a process without the operator",
        not has_compiler or custom["aoti_fresh"] != "runs",
    ),
    (
        "is a Triton kernel",
        "triton_op + wrap_triton",
        "triton_op: Inductor receives the body; the package runs anywhere",
        not OPERATOR.search(triton_row["aot"])
        and (not has_compiler or triton_row["aoti_fresh"] == "runs"),
    ),
    (
        "is PyTorch code with some Python that Dynamo rejects",
        "nonstrict_trace (allow_in_graph for tensor-only arguments)",
        "second table: 0 graph breaks, aten ops, trains; body runs once",
        torch_only_results["nonstrict_trace"]["breaks"] == 0,
    ),
    (
        "only needs to run, compiled around (no export, no single graph)",
        "torch.compiler.disable",
        "disable: one deliberate graph break, trains, no export",
        disabled["breaks"] >= 1 and disabled["trains"] == "gradcheck passes",
    ),
    (
        "reads tensor data outside PyTorch, whatever the release",
        "never allow_in_graph or nonstrict_trace",
        "allow_in_graph: compilation fails; nonstrict_trace: no single graph",
        allowed["inductor"] != "matches",
    ),
]
for situation, mechanism, evidence, holds in guide:
    assert holds, situation
    print(f"if the code {situation}")
    print(f"    use:      {mechanism}")
    print(f"    measured: {evidence}")

# %%
# Conclusion
# ----------
#
# The five mechanisms answer one question differently: who may look inside
# the function? ``disable`` lets nobody in and pays with a graph break.
# ``allow_in_graph`` and ``nonstrict_trace`` keep Dynamo out but let
# AOTAutograd trace the body, so the body must be PyTorch code, and any other
# Python in it runs once, at trace time. ``custom_op`` keeps everybody out
# and replaces the body with a schema, a fake kernel and an autograd formula,
# which is why it is the only way to put truly opaque code in one graph and
# in an exported program. ``triton_op`` is the exception that is traced on
# purpose, so Inductor can compile the Triton kernel with the rest.
#
# Related pages:
#
# * :ref:`sphx_glr_tutorials_python_custom_ops.py` builds a ``custom_op``
#   step by step
# * :ref:`sphx_glr_tutorials_triton_custom_ops.py` covers ``triton_op`` in
#   depth
# * :ref:`sphx_glr_tutorials_custom_ops_in_export.py` saves and reloads
#   exported programs with custom operators
# * :ref:`sphx_glr_tutorials_cpp_custom_ops.py` writes operators that run
#   without Python
