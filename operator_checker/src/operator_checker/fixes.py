"""Where the course teaches each fix
----------------------------------
A failure's or a limitation's detail picks the page and section of the
course that teach its fix or its remedy, first match first (``FIXES``).
No torch here.
"""

import os
import re

SHAPES = "Fake Kernels and Dynamic Shapes"
TROUBLE = "Troubleshooting Custom Operators"
MUTABLE = "Functional and Mutable Operators"
PYTHON_OPS = "Custom Python Operators"
LAYOUTS_PAGE = "Layouts, CUDA Graphs and Streams"
EDGES = "Sharp Edges: PyTorch Behaviours That Surprise Operator Authors"
CPP = "C++ Custom Operators"
FIXES = [  # (check, pattern of the detail, page, section): the first match wins
    ("", r"torch\.no_grad", "What a Custom Operator Costs",
     "Switching autograd off, properly"),
    ("", r"(?:^|\()no backward", PYTHON_OPS, "Adding training support for crop"),
    ("", r"no double backward.*numpy", TROUBLE, "A backward written in NumPy"),
    ("", r"no double backward", CPP, "A backward formula, registered from Python"),
    ("gradgradcheck", r"modified by an inplace operation",
     "Training and Other Registrations", "Training with register_autograd"),
    ("forward-ad", r"zero tangents", EDGES, "Forward-mode AD returns no tangent"),
    ("eager", r"", LAYOUTS_PAGE, "What the operator receives"),
    ("gradients", r"", PYTHON_OPS, "Adding training support for crop"),
    ("test_autograd", r"", PYTHON_OPS, "Adding training support for crop"),
    ("gradcheck", r"", PYTHON_OPS, "gradcheck catches it"),
    ("gradgradcheck", r"", TROUBLE, "A backward written in NumPy"),
    ("forward-ad", r"", "Custom Operators in Function Transforms",
     "The fix: an autograd.Function around the operator"),
    ("vmap", r"", "Training and Other Registrations", "Batching with register_vmap"),
    ("recompiles", r"", SHAPES, "A fake kernel that specializes"),
    ("layout", r"", LAYOUTS_PAGE, "An operator that sees the layout"),
    ("compiled", r"^Inductor fails", None, None),  # PyTorch's bug: no section
    ("", r"u\d+ >= 2", EDGES, "create_unbacked_symint assumes at least two"),
    ("", r"\bhas size \[|invalid gradient at index \d+ - got \[|negative dimension",
     SHAPES, "Output sizes computed from input sizes"),
    ("compiled", r"capture_dynamic", SHAPES, "Output sizes that depend on the data"),
    ("", r"stride", TROUBLE, "Fake kernel with the wrong strides"),
    ("", r"dtype", TROUBLE, "The two detectors"),
    ("", r"mismatched tensor metadata|MetadataMismatch", TROUBLE, "The two detectors"),
    ("", r"fake impl|fake kernel|\bmeta\b", TROUBLE,
     "No fake kernel under torch.compile"),
    ("", r"not defined as mutable|after the call differs", MUTABLE,
     "What breaks when mutates_args lies"),
    ("", r"alias", MUTABLE, "Never return an input, or a view of one"),
    ("", r"device", TROUBLE, "Tensors on the wrong device"),
    ("compiled", r"differs", PYTHON_OPS, "Testing Python custom operators"),
    ("export", r"", "Custom Operators in torch.export", "Export needs fake kernels"),
    ("", r"", TROUBLE, "Which check catches which mistake"),
]  # fmt: skip


# The file of each page FIXES names, for links to the published course.
PAGES = {
    SHAPES: "fake_kernels_and_shapes",
    TROUBLE: "custom_op_troubleshooting",
    MUTABLE: "mutable_custom_ops",
    PYTHON_OPS: "python_custom_ops",
    LAYOUTS_PAGE: "strides_and_runtime",
    EDGES: "sharp_edges",
    CPP: "cpp_custom_ops",
    "What a Custom Operator Costs": "custom_op_performance",
    "Custom Operators in Function Transforms": "custom_op_transforms",
    "Training and Other Registrations": "custom_op_registrations",
    "Custom Operators in torch.export": "custom_ops_in_export",
}


def see_for(check, detail):
    """The page and section that teach the fix of ``detail``, as
    ``Page > Section``, followed by its address when
    ``OPERATOR_CHECKER_COURSE_URL`` is set."""
    sizes = re.search(r"expected size (\d+)==(\d+)", detail)
    if sizes and sizes.group(1) != sizes.group(2):  # Inductor's check: a size
        section = "Output sizes computed from input sizes"
        return f"{SHAPES} > {section}" + link(SHAPES, section)
    for where, pattern, page, section in FIXES:
        if check.startswith(where) and re.search(pattern, detail, re.I):
            return f"{page} > {section}" + link(page, section) if page else ""
    return ""


def link(page, section):
    """`` (https://.../tutorials/page.html#section)`` under
    ``OPERATOR_CHECKER_COURSE_URL`` (the course's address), else ''. A name of
    the package's own: a library in other people's CI must not react to a
    variable their jobs may set for something else."""
    site = os.environ.get("OPERATOR_CHECKER_COURSE_URL", "").rstrip("/")
    if not site:
        return ""
    anchor = re.sub(r"[^a-z0-9]+", "-", section.lower()).strip("-")
    return f" ({site}/tutorials/{PAGES[page]}.html#{anchor})"
