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
       * Matplotlib; a CUDA GPU and Triton for the Triton kernel (without a
         GPU the page says what it skipped)
       * :ref:`sphx_glr_tutorials_python_custom_ops.py`

.. admonition:: Checklist
   :class: checklist

   #. Find out whether the code reads tensor data outside PyTorch: a C
      library, ``ctypes``, Pillow, a pybind11 module.
   #. If it does, make it a ``torch.library.custom_op`` with a fake kernel
      and ``register_autograd``. If the kernel is written in Triton, use
      ``torch.library.triton_op`` with ``wrap_triton`` instead.
   #. If it is PyTorch code that Dynamo cannot trace, mark it with
      ``torch.compiler.nonstrict_trace`` (or ``allow_in_graph``); if all
      that stops Dynamo is a call whose result never changes, mark that call
      with ``torch.compiler.assume_constant_result``.
   #. If Dynamo should merely stay out of it, use ``torch.compiler.disable``
      and accept the graph break.
   #. Measure: count graph breaks, look at AOTAutograd's graph and at the
      code Inductor generates, ``gradcheck`` the compiled function, export,
      and load the AOTInductor package in a fresh process.

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
# Every measurement runs on the CPU; on a CUDA machine (which then needs
# Triton), one more section runs a Triton kernel on the GPU. On a machine
# with CUDA's compiler but no GPU, the setup keeps a harmless notice of
# ``torch.utils.cpp_extension`` (``No CUDA runtime is found``) out of the
# output and says so.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import ctypes
import ctypes.util
import json
import os
import re
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
from torch._dynamo.backends.common import aot_autograd
from torch._inductor.utils import run_and_get_code
from torch.autograd.gradcheck import GradcheckError

try:
    import triton
    import triton.language as tl

    HAS_TRITON = True
except ImportError:
    HAS_TRITON = False

RELEASE = tuple(int(part) for part in torch.__version__.split(".")[:2])
torch.manual_seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")
TRITON_RUNS = torch.cuda.is_available()
assert HAS_TRITON or not TRITON_RUNS, "on a CUDA machine this page needs Triton"
print(f"the Triton kernel runs on this machine: {TRITON_RUNS}")
# sphinx_gallery_start_ignore
# Inductor imports torch.utils.cpp_extension to compile CPU code. Where CUDA's
# compiler is installed but no GPU is visible, that import warns "No CUDA
# runtime is found" (PyTorch 2.7 prints it, later releases log it), which says
# nothing about this page. Import the module now with the notice caught.
import contextlib
import io
import logging

first_import = "torch.utils.cpp_extension" not in sys.modules
notices = []
logging.getLogger("torch.utils.cpp_extension").addFilter(notices.append)
with contextlib.redirect_stderr(io.StringIO()) as printed:
    from torch.utils import cpp_extension
logging.getLogger("torch.utils.cpp_extension").removeFilter(notices.append)
notice = printed.getvalue() + "".join(record.getMessage() for record in notices)
if first_import:
    nvcc_without_gpu = bool(cpp_extension.CUDA_HOME) and not torch.cuda.is_available()
    assert ("No CUDA runtime is found" in notice) == nvcc_without_gpu, notice
    assert not notice or bool(printed.getvalue()) == (RELEASE < (2, 8)), notice
if "No CUDA runtime is found" in notice:
    print(f"CUDA's compiler is installed ({cpp_extension.CUDA_HOME}), but no GPU:")
    print("  torch.utils.cpp_extension's 'No CUDA runtime is found' is kept out")
# sphinx_gallery_end_ignore

# %%
# A word on the tools: ``aot_autograd`` (a backend that shows AOTAutograd's
# forward graph), ``run_and_get_code`` (the code Inductor generates) and
# ``torch._dynamo.explain`` (graph breaks and their reasons) are private; no
# public API does their jobs. ``GradcheckError`` is public.
#
# The opaque function: a cube root from the C library
# ---------------------------------------------------
#
# PyTorch has no cube-root function (no ``torch.cbrt``), and ``x ** (1 / 3)``
# is ``nan`` for negative ``x``; a real cube root must be pieced together
# from sign and magnitude, as the ``triton_op`` below does. The C maths
# library has one, ``cbrt``, and Python's ``ctypes`` can call it. The
# function below copies the tensor and lets ``Tensor.apply_`` call ``cbrt``
# on every element. That is what "opaque" means on this page:
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
    result.apply_(libm.cbrt)  # calls the ctypes wrapper (Python) per element
    return result.to(device=x.device, dtype=x.dtype)


volume = torch.tensor([-27.0, -2.0, 0.0, 0.125, 8.0], dtype=torch.float64)
print(f"cbrt via ctypes: {libm_cube_root(volume).tolist()}")
print(f"x ** (1 / 3):    {(volume ** (1 / 3)).tolist()}")
torch.testing.assert_close(libm_cube_root(volume) ** 3, volume)
assert volume[0] ** (1 / 3) != volume[0] ** (1 / 3)  # nan: the reason for cbrt
assert not hasattr(torch, "cbrt")

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
# ``allow_in_graph`` marks the very function object it is given, and returns
# it, so it gets a function of its own: the plain ``cube_root`` must stay
# plain. ``disable`` and ``nonstrict_trace`` return a new wrapper and leave
# their argument alone. ``nonstrict_trace`` became public in ``torch.compiler`` in
# PyTorch 2.14; where it is missing, we say so and use the older private
# ``torch._dynamo.nonstrict_trace``, which has existed since PyTorch 2.7.


def cube_root_allowed(x):
    return CubeRootFunction.apply(x)


assert torch.compiler.allow_in_graph(cube_root_allowed) is cube_root_allowed
cube_root_disabled = torch.compiler.disable(cube_root)
if hasattr(torch.compiler, "nonstrict_trace"):
    nonstrict_trace = torch.compiler.nonstrict_trace
    print("nonstrict_trace: torch.compiler.nonstrict_trace (public)")
else:
    nonstrict_trace = torch._dynamo.nonstrict_trace
    print("nonstrict_trace: not public on this release; using torch._dynamo's")
assert hasattr(torch.compiler, "nonstrict_trace") == (RELEASE >= (2, 14))
cube_root_nonstrict = nonstrict_trace(cube_root)
assert cube_root_nonstrict is not cube_root and cube_root_disabled is not cube_root

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
#    forward graph AOTAutograd produces. (Inductor runs AOTAutograd with its
#    own decompositions and partitioner, so its graph differs in detail.)
# 3. **Inductor.** The compiled model must match the reference, and the
#    code Inductor generates shows whether it calls our operator.
# 4. **Training.** ``gradcheck`` runs *on the compiled function*, compiled
#    with ``aot_eager``: it runs AOTAutograd, which builds the backward, and
#    skips Inductor's code generation.
# 5. **torch.export**, in non-strict mode (``strict=False``), which runs the
#    Python code with fake tensors instead of tracing it with Dynamo.
# 6. **AOTInductor**, for what exported: compile the program to a package
#    with ``torch._inductor.aoti_compile_and_package``, then load it with
#    ``torch._inductor.aoti_load_package`` and run it in this process and in
#    a fresh one that never defined our operators. Both functions live in a
#    private module; they are AOTInductor's documented entry points.

sample = torch.tensor([-8.0, -1.5, 0.3, 2.0, 27.0], dtype=torch.float64)
package_dir = Path(tempfile.mkdtemp(prefix="mechanisms-"))
has_compiler = any(shutil.which(name) for name in ("c++", "g++", "clang++"))

fresh_process_script = """
import json, sys, torch
import torch._inductor.package  # what the loader needs, imported while we wait
if torch.__version__.startswith("2.10."):  # its loader needs it imported (#173706)
    import torch._inductor.codecache
volume = torch.tensor([-8.0, -1.5, 0.3, 2.0, 27.0], dtype=torch.float64)
for line in sys.stdin:  # one package a line: [path, device, dtype]
    path, device, dtype = json.loads(line)
    try:
        package = torch._inductor.aoti_load_package(path)
        values = package(volume.to(device, getattr(torch, dtype))).tolist()
    except Exception as error:
        first = (str(error).strip().splitlines() or [""])[0]
        print(json.dumps({"error": f"{type(error).__name__}: {first}"}), flush=True)
    else:
        print(json.dumps({"values": values}), flush=True)
"""


def start_fresh_process(env=None):
    """A new Python process, which never defines our operators. It imports
    torch at once and runs the packages ``run_fresh`` gives it later."""
    # The loader unpacks each package into a new folder under TMPDIR and
    # deletes it when the package is freed; a load that fails, or a process
    # that ends holding a package, leaves it: here it goes into package_dir,
    # which the page deletes.
    env = {**(os.environ if env is None else env), "TMPDIR": str(package_dir)}
    return subprocess.Popen(
        [sys.executable, "-c", fresh_process_script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def run_fresh(process, packages):
    """Run each (path, device, dtype) on the sample in ``process``, one after
    the other; a (values, error) pair for each."""
    requests = "".join(json.dumps(package) + "\n" for package in packages)
    stdout, stderr = process.communicate(requests, timeout=600)
    answers = [json.loads(line) for line in stdout.splitlines() if line[:1] == "{"]
    error_lines = [line for line in stderr.splitlines() if "Error" in line]
    died = (error_lines or [f"exit status {process.returncode}"])[-1].strip()
    answers += [{"error": died}] * (len(packages) - len(answers))
    return [
        (torch.tensor(answer["values"], dtype=torch.float64), None)
        if "values" in answer
        else (None, answer["error"])
        for answer in answers
    ]


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


def check_inductor(model, expected, find_operator):
    torch.compiler.reset()
    try:
        result, code = run_and_get_code(torch.compile(model), sample)
        torch.testing.assert_close(result, expected)
    except Exception as error:
        return {"inductor": failure(error)}
    row = {"inductor": "matches"}
    if find_operator:
        calls = re.search(r"mechanisms\.cube_root", "\n".join(code))
        row["inductor_code"] = "calls our operator" if calls else "no operator call"
    return row


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
    """Compile and run the package here; the fresh process runs it later."""
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
    return {"aoti": "runs", "package": path}


def measure(name, model, reference, operators=True):
    """Every check for one model; operators=False skips the operator checks."""
    expected = reference(sample)
    row = {**check_dynamo(model), **check_aot(model)}
    row.update(check_inductor(model, expected, find_operator=operators))
    row.update(check_training(model))
    export_row, exported = check_export(model)
    row.update(export_row)
    if operators:
        row.update(check_aoti(name, exported, expected))
    return row


fresh_process = start_fresh_process()  # it imports torch while we compile
results = {
    name: measure(name, cube_surface_with(fn), reference_surface)
    for name, fn in mechanisms.items()
}
packages = {
    name: row.pop("package") for name, row in results.items() if "package" in row
}
answers = run_fresh(
    fresh_process, [(path, "cpu", "float64") for path in packages.values()]
)
for name, (values, error) in zip(packages, answers, strict=True):
    if error is None:
        torch.testing.assert_close(values, reference_surface(sample))
    results[name]["aoti_fresh"] = error or "runs"
print(f"measured {len(results)} mechanisms")

# %%
# The measured table
# ------------------
#
# Every value below was produced by the run above. A ``|`` separates the
# graphs Dynamo or AOTAutograd produced when there was more than one.
# ``print_rows``, a formatting helper hidden on this page (the downloads
# have it), prints each row with these labels.

labels = {
    "breaks": "graph breaks",
    "reasons": "why Dynamo broke",
    "dynamo": "Dynamo's graphs",
    "aot": "AOTAutograd's forward",
    "inductor": "compiled by Inductor",
    "inductor_code": "Inductor's code",
    "trains": "training (compiled)",
    "export": "torch.export",
    "aoti": "AOTInductor, here",
    "aoti_fresh": "AOTInductor, new process",
}

# sphinx_gallery_start_ignore


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


# sphinx_gallery_end_ignore
print_rows(results)

# %%
# The same table as a picture, one colour per outcome: green where the
# mechanism did what a compiled, exported, trained model needs, red where it
# did not, grey where the check did not apply. The drawing code is hidden
# on this page; the downloads have it.

OPERATOR = re.compile(r"mechanisms::cube_root(_triton)?\b")
# sphinx_gallery_start_ignore


def summary_cells(row):
    """Short (text, outcome) pairs for the figure, derived from one row."""
    if not row["aot_ok"] or row["inductor"] != "matches":
        receives = ("fails", "bad")
    elif row["inductor_code"] == "calls our operator":
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
# sphinx_gallery_end_ignore
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
# body but runs it on fake tensors, and AOTAutograd traces it. With opaque
# code inside, that fake run fails. On PyTorch 2.7 and 2.8 the failure stops
# compilation, as for ``allow_in_graph``. From 2.9 Dynamo turns it into a
# graph break, whose reason reads ``Unsupported output type for
# nonstrict_trace-ed function``, and then traces into the function as if it
# were not marked: the plain call's graphs come back. Either way there is no
# single graph.

nonstrict = results["nonstrict_trace"]
failed_outright = "cbrt needs real data" in nonstrict["dynamo"]
print(
    "nonstrict_trace on this release: "
    + ("compilation fails" if failed_outright else "falls back to graph breaks")
)
assert failed_outright == (RELEASE < (2, 9))
if not failed_outright:
    assert "Unsupported output type for nonstrict_trace" in nonstrict["reasons"]
    assert nonstrict["dynamo"] == plain["dynamo"]

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
assert custom["inductor_code"] == "calls our operator"
assert OPERATOR.search(custom["export"])
if has_compiler:
    assert custom["aoti"] == "runs"
    assert "mechanisms::cube_root" in custom["aoti_fresh"]

# %%
# **triton_op.** Dynamo records the operator as one node, as for
# ``custom_op``, and ``torch.export`` keeps it. AOTAutograd, however,
# replaces it with its body (here the PyTorch branch; on a GPU, the Triton
# kernel), which Inductor compiles with the code around it: its code has no
# call to the operator. So the AOTInductor package holds the computation
# itself and runs in a fresh process that never heard of
# ``mechanisms::cube_root_triton``. That does not make it portable: this
# package is CPU code, and one built on a GPU needs a GPU (see below).

triton_row = results["triton_op"]
assert triton_row["breaks"] == 0 and OPERATOR.search(triton_row["dynamo"])
assert triton_row["aot_ok"] and not OPERATOR.search(triton_row["aot"])
assert triton_row["inductor_code"] == "no operator call"
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
# not support. Our second function calls the C library only on a Python
# number, the edge of a cube of volume 10; the tensor work is a PyTorch
# division. A counter records the C calls. A narrower tool gets a fifth row:
# ``torch.compiler.assume_constant_result`` marks only the C call, as one
# whose result Dynamo may compute once and keep.

c_calls = {"count": 0}
EDGE = 10 ** (1 / 3)


def make_edge(count_calls):
    """A fresh function that asks the C library for the edge."""

    def edge_of_volume_10():
        if count_calls:
            c_calls["count"] += 1
        return libm.cbrt(10.0)

    return edge_of_volume_10


def divide_by(edge_fn):
    def divide_by_edge(x):
        return x / edge_fn()

    return divide_by_edge


def scaled_square_with(divide_fn):
    def scaled_square(volume):
        return divide_fn(volume.abs()) ** 2

    return scaled_square


def reference_scaled_square(volume):
    return (volume.abs() / EDGE) ** 2


def torch_only_mechanisms(count_calls):
    """Each mechanism, applied to function objects of its own."""

    def fresh():
        return divide_by(make_edge(count_calls))

    constant_edge = torch.compiler.assume_constant_result(make_edge(count_calls))
    return {
        "plain call": fresh(),
        "disable": torch.compiler.disable(fresh()),
        "allow_in_graph": torch.compiler.allow_in_graph(fresh()),
        "nonstrict_trace": nonstrict_trace(fresh()),
        "assume_constant_result": divide_by(constant_edge),
    }


def count_c_calls(model):
    """How often three calls of the compiled model call the C library."""
    torch.compiler.reset()
    compiled = torch.compile(model, backend="aot_eager")
    try:
        compiled(sample)
    except Exception as error:
        return failure(error)
    c_calls["count"] = 0
    for _ in range(3):
        torch.testing.assert_close(compiled(sample), reference_scaled_square(sample))
    return f"{c_calls['count']} in 3 calls of the compiled model"


# %%
# The counter gets functions of its own: a compiled function that updates a
# Python counter is recompiled whenever the counter changes.

torch_only = torch_only_mechanisms(count_calls=False)
counted = torch_only_mechanisms(count_calls=True)
torch_only_results = {}
for name, fn in torch_only.items():
    row = measure(name, scaled_square_with(fn), reference_scaled_square, False)
    row["c_calls"] = count_c_calls(scaled_square_with(counted[name]))
    torch_only_results[name] = row
labels["c_calls"] = "C library called"
print_rows(torch_only_results)

# %%
# Now ``allow_in_graph`` and ``nonstrict_trace`` do their job: no graph
# break, and plain ``aten`` operations in AOTAutograd's graph. The last line
# shows the price: the C library ran while the graph was traced and never
# again; its answer became a constant in the graph. That is right for a
# constant, and silently wrong for anything that should be computed anew on
# every call (a counter, a clock, a file's contents), as is any other Python
# in the marked function. ``assume_constant_result`` gives the same graph
# while marking only the call meant to be constant. It works from PyTorch
# 2.8; on 2.7 Dynamo fails on it with an internal error.

for name in ("allow_in_graph", "nonstrict_trace"):
    row = torch_only_results[name]
    assert row["breaks"] == 0 and "div" in row["aot"], name
    assert row["trains"] == "gradcheck passes", name
    assert row["c_calls"].startswith("0 in 3"), name
for name in ("plain call", "disable"):
    assert torch_only_results[name]["breaks"] >= 1, name
    assert torch_only_results[name]["c_calls"].startswith("3 in 3"), name
constant = torch_only_results["assume_constant_result"]
if RELEASE >= (2, 8):
    assert constant["breaks"] == 0
    assert constant["aot"] == torch_only_results["allow_in_graph"]["aot"]
    assert constant["c_calls"].startswith("0 in 3")
else:
    assert constant["dynamo"].startswith("InternalTorchDynamoError")

# %%
# ``torch.compiler.substitute_in_graph`` comes from the other side: it
# registers a Python twin that Dynamo traces in place of a function written
# in C. It takes Python functions and the builtin functions of C extension
# modules, and refuses a ``ctypes`` pointer:

try:
    torch.compiler.substitute_in_graph(libm.cbrt)
except TypeError as error:
    print(f"{type(error).__name__}: {error}")
else:
    raise AssertionError("expected substitute_in_graph to refuse a ctypes pointer")

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
# On a CUDA device, float32 tensors reach the Triton kernel. AOTAutograd's
# graph then holds the kernel itself, as a
# ``triton_kernel_wrapper_functional`` call, instead of the PyTorch branch
# the table measured. On a machine without one, the section says it skipped.

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
    print("Skipped on this machine (no CUDA device): the Triton kernel.")

# %%
# Exported on the GPU and compiled by AOTInductor, the same model gives a
# package that holds the compiled Triton kernel. Like the CPU package in the
# table, it runs in a fresh process that never defined the operator; unlike
# it, it fails in a process that sees no GPU.

if TRITON_RUNS and has_compiler:
    gpu_sample = sample.to("cuda", torch.float32)
    exported = torch.export.export(AsModule(surface), (gpu_sample,), strict=False)
    gpu_package = str(package_dir / "triton_op_cuda.pt2")
    torch._inductor.aoti_compile_and_package(exported, package_path=gpu_package)
    [(values, error)] = run_fresh(
        start_fresh_process(), [(gpu_package, "cuda", "float32")]
    )
    assert error is None, error
    torch.testing.assert_close(values, reference_surface(sample), rtol=1e-5, atol=0)
    no_gpu = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    [(_, error)] = run_fresh(
        start_fresh_process(env=no_gpu), [(gpu_package, "cpu", "float32")]
    )
    assert error is not None
    print(f"the GPU package runs in a fresh process; with no GPU visible: {error}")
elif TRITON_RUNS:  # with a GPU, the GPU package must be built, not skipped
    raise RuntimeError("A GPU is present, but AOTInductor has no C++ compiler")
else:
    print("Skipped on this machine (no CUDA device): the GPU package.")
shutil.rmtree(package_dir)  # the packages, and what the fresh processes unpacked

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
        custom["breaks"] == 0
        and custom["inductor_code"] == "calls our operator"
        and custom["trains"] == "gradcheck passes",
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
        "triton_op: Inductor compiles the body; runs in a new process",
        triton_row["inductor_code"] == "no operator call"
        and (not has_compiler or triton_row["aoti_fresh"] == "runs"),
    ),
    (
        "is PyTorch code with some Python that Dynamo rejects",
        "nonstrict_trace (allow_in_graph for tensor-only arguments)",
        "second table: 0 graph breaks, aten ops, trains; body runs once",
        torch_only_results["nonstrict_trace"]["breaks"] == 0,
    ),
    (
        "is PyTorch code around a call whose result never changes",
        "torch.compiler.assume_constant_result on that call (PyTorch 2.8+)",
        "second table: 0 graph breaks, the call runs once",
        RELEASE < (2, 8) or constant["breaks"] == 0,
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
# ``allow_in_graph`` and ``nonstrict_trace`` let AOTAutograd trace the body,
# so it must be PyTorch code, and its other Python runs once, at trace time.
# ``custom_op`` keeps everybody out behind a schema, a fake kernel and an
# autograd formula: the only way to put truly opaque code in one graph and in
# an exported program. ``triton_op`` is traced on purpose, so that Inductor
# compiles the Triton kernel with the rest.
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
