"""Serve the operator_checker package's wheel with the site.

The course's checker is a package of its own (``operator_checker/``, see
``pagelib.checker``). When a build finishes, each edition gets its wheel at
``wheels/<wheel>``: pages link it there, and a notebook's install line names
it (``_ext/notebooks.py``). The wheel is built once per content of the
package, into the doctree folder (a second build with the same package
copies it), so that the file a reader installs is this checkout's package.
"""

import shutil
import sys
from pathlib import Path

from sphinx.errors import ExtensionError

from pagelib import checker


def serve_wheel(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    house = Path(app.doctreedir) / "operator-checker-wheel"
    stamp = house / "digest"
    wheel = house / checker.wheel_name()
    digest = checker.digest()
    if not (wheel.is_file() and stamp.is_file() and stamp.read_text() == digest):
        shutil.rmtree(house, ignore_errors=True)
        try:
            checker.build_wheel(sys.executable, house)
        except RuntimeError as error:
            raise ExtensionError(str(error)) from None
        stamp.write_text(digest)
    served = Path(app.outdir) / checker.SERVED / wheel.name
    served.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(wheel, served)


def setup(app):
    app.connect("build-finished", serve_wheel)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
