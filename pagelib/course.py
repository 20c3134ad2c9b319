"""The course: the order of the tutorials and a one-line summary of each.

Sphinx-Gallery sorts the examples of a gallery with a key class that it builds
from the gallery's source directory (``within_subsection_order``).
``CourseOrder`` places the pages listed in ``COURSE`` first, in that order,
and any page not listed yet after them, by file name, so a new page shows up
before it has been given its place. The landing page's cards show each page's
summary from ``COURSE`` (see ``tutorial_cards``), and warn about a page that
is missing from it.
"""

COURSE = {
    "python_custom_ops.py": (
        "Wrap a Python function as an operator that torch.compile and autograd "
        "understand."
    ),
    "choosing_a_mechanism.py": (
        "custom_op, triton_op, allow_in_graph, nonstrict_trace or disable: which?"
    ),
    "mutable_custom_ops.py": (
        "Operators that write into buffers or update tensors in place."
    ),
    "custom_op_side_effects.py": (
        "Operators that log, write or send: keep every call, in order, when compiled."
    ),
    "custom_op_registrations.py": (
        "Gradients, per-device kernels, vmap, autocast and dispatch rules."
    ),
    "operator_signatures.py": (
        "Several outputs, optional and list arguments, SymInt results, defaults."
    ),
    "fake_kernels_and_shapes.py": (
        "Fake kernels for dynamic shapes and data-dependent output sizes."
    ),
    "strides_and_runtime.py": (
        "Input strides under Inductor, the layout tags, CUDA graphs and streams."
    ),
    "custom_ops_in_export.py": (
        "Export, save and reload a model that calls custom operators; draft_export."
    ),
    "custom_op_transforms.py": (
        "torch.func and forward-mode AD on a custom operator, and their wrapper."
    ),
    "custom_op_dtensor.py": (
        "Run a custom operator on DTensors across processes with a sharding rule."
    ),
    "custom_op_troubleshooting.py": (
        "The common mistakes, the errors they raise, and how to fix them."
    ),
    "check_your_operator.py": (
        "A module to import in your tests: every check of this course, one call."
    ),
    "cpp_custom_ops.py": (
        "Write the kernel in C++; add its fake kernel and gradient from Python."
    ),
    "custom_op_objects.py": (
        "Operators that take a stateful object, a C++ class or a Python one."
    ),
    "cpp_extension_packaging.py": (
        "Ship a C++ operator as a wheel that loads in the right order, abi3 too."
    ),
    "cpp_stable_abi.py": (
        "One wheel for several PyTorch releases, with the LibTorch stable ABI."
    ),
    "aot_inductor_custom_ops.py": (
        "Package a model with custom operators for AOTInductor, and what needs Python."
    ),
    "triton_custom_ops.py": (
        "A Triton kernel as an operator torch.compile sees into, trained and tuned."
    ),
    "custom_op_performance.py": (
        "What an operator costs per call, and when that overhead matters."
    ),
    "custom_op_internals.py": (
        "What custom_op registers with the dispatcher, shown live."
    ),
    "sharp_edges.py": (
        "PyTorch's own bugs and surprises around operators, release by release."
    ),
}


class CourseOrder:
    """Sort key: a page's position in ``COURSE``, then its file name."""

    def __init__(self, src_dir):
        self.src_dir = src_dir

    def __call__(self, filename):
        pages = list(COURSE)
        position = pages.index(filename) if filename in pages else len(pages)
        return (position, filename)

    def __repr__(self):
        # Sphinx caches the configuration and compares reprs to decide whether
        # to rebuild everything; keep it stable across builds.
        return f"<{type(self).__name__}>"
