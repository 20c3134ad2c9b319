"""Order the gallery as a course rather than alphabetically.

Sphinx-Gallery sorts the examples of a gallery with a key class that it builds
from the gallery's source directory (``within_subsection_order``). This one
places the pages listed in ``COURSE`` first, in that order, and any page not
listed yet after them, by file name, so a new page shows up before it has been
given its place.
"""

COURSE = [
    "python_custom_ops.py",
    "mutable_custom_ops.py",
    "custom_op_registrations.py",
    "fake_kernels_and_shapes.py",
    "custom_ops_in_export.py",
    "custom_op_troubleshooting.py",
    "cpp_custom_ops.py",
    "triton_custom_ops.py",
    "custom_op_performance.py",
    "custom_op_internals.py",
]


class CourseOrder:
    """Sort key: a page's position in ``COURSE``, then its file name."""

    def __init__(self, src_dir):
        self.src_dir = src_dir

    def __call__(self, filename):
        position = COURSE.index(filename) if filename in COURSE else len(COURSE)
        return (position, filename)

    def __repr__(self):
        # Sphinx caches the configuration and compares reprs to decide whether
        # to rebuild everything; keep it stable across builds.
        return f"<{type(self).__name__}>"
