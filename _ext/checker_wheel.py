"""Serve the operator_checker package's wheel with the site.

The course's checker is a package of its own (``operator_checker/``, see
``pagelib.checker``). When a build finishes, each edition gets its wheel at
``wheels/<wheel>``: pages link it there, and a notebook's install line names
it (``_ext/notebooks.py``). The wheel is built once per content of the
package (``pagelib.checker.cached_wheel``), so that the file a reader
installs is this checkout's package, and a second build, the other edition
or a scratch copy with the same package copies it.
"""

import shutil
import sys
from pathlib import Path

from sphinx.errors import ExtensionError

from pagelib import checker


def serve_wheel(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    try:
        wheel = checker.cached_wheel(sys.executable)
    except RuntimeError as error:
        raise ExtensionError(str(error)) from None
    served = Path(app.outdir) / checker.SERVED / wheel.name
    served.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(wheel, served)


def setup(app):
    app.connect("build-finished", serve_wheel)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
