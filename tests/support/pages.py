"""A page written by a test, and the version records that describe it.

Both lanes use these: the unit tests (which must stay light, so nothing here
imports more than the standard library and ``pagelib``'s light modules) and the
scratch projects of the slow tests. A page follows README.md's template
(docs/dev/adding-a-page.md), so one change to the template is one change here.
"""

import json
import re
from pathlib import Path

from pagelib import contract, records

REPO = Path(__file__).resolve().parents[2]
# The small matrix of the unit tests' projects (``matrix_project``): three
# supported releases and one below them, where every page must stop.
SMALL_RELEASES = ["2.7.1", "2.8.0", "2.9.1"]
SMALL_BELOW = "2.6.0"


def pinned_torch():
    """The torch version requirements.txt pins: the site's own release."""
    text = (REPO / "requirements.txt").read_text()
    return re.search(r"^torch==(\S+)", text, re.M).group(1)


def pinned_floor():
    return ".".join(pinned_torch().split(".")[:2])


def floor_check(major_minor):
    """A page's first cell, as docs/dev/adding-a-page.md prescribes it."""
    major, minor = major_minor.split(".")
    return (
        "import sys\n\nimport torch\n\n"
        'if tuple(int(part) for part in torch.__version__.split(".")[:2]) < '
        f"({major}, {minor}):\n"
        f'    sys.exit(f"This page needs PyTorch {major_minor} or later; this is '
        '{torch.__version__}.")\n'
    )


def page_source(
    title="A Page",
    body="",
    *,
    summary="This page is an example made by a test.",
    floor="2.8",
    prerequisite=None,
):
    """A page as the template prescribes: title, a two-sentence introduction,
    a Prerequisites card whose bullet states ``floor``, a Checklist, a first
    cell that stops below ``floor`` and prints the devices line, then ``body``
    as the next cell.

    With ``floor=None`` the page states no floor and checks none: its card
    lists ``prerequisite`` instead, and its first cell is ``body``.
    """
    bullet = f"PyTorch {floor} or later" if floor else prerequisite
    docstring = f'''"""
{title}
{"=" * len(title)}

{summary} It has a second sentence.

.. grid:: 2

    .. grid-item-card:: Prerequisites

       * {bullet}

.. admonition:: Checklist
   :class: checklist

   #. Read this page.
"""
'''
    if floor is None:
        return f"{docstring}\n{body}"
    first_cell = (
        floor_check(floor) + 'print(f"PyTorch {torch.__version__}; devices '
        "exercised: ['cpu'] (no CUDA)\")\n"
    )
    return f"{docstring}\n# %%\n{first_cell}\n# %%\n{body}"


def example_source(title, body, summary="This page is an example made by a test."):
    """A minimal valid page whose floor is the pinned release, then ``body``."""
    return page_source(title, body, summary=summary, floor=pinned_floor())


def record(torch, result="pass", *, code_digest, edges=None, **fields):
    """One release's record, made by the writer ``tools/matrix.py run`` uses
    (``records.new_record``), with fixed values; ``fields`` overrides any."""
    written = records.new_record(
        code_digest,
        result,
        torch,
        error=None if result == "pass" else f"planted {result}",
        seconds=1.0,
        devices=["cpu"],
        ran_at="2026-01-01T00:00:00+00:00",
        edges=edges,
    )
    written.update(fields)
    return written


def matrix_toml(releases, below=(), packages=()):
    """A versions/matrix.toml holding ``releases`` (and ``below`` them)."""
    text = "".join(f'[[below]]\ntorch = "{r}"\n\n' for r in below)
    text += f"[pages]\npackages = {json.dumps(list(packages))}\n\n"
    text += "".join(f'[[releases]]\ntorch = "{r}"\n\n' for r in releases)
    return text


def write_page_records(project, name, results, **fields):
    """versions/records/<name>.json for ``advanced/<name>.py`` as it is now:
    ``results`` maps each release to its result (or to a dict of fields)."""
    digest = contract.code_digest(project / "advanced" / f"{name}.py")
    written = {}
    for torch, outcome in results.items():
        extra = outcome if isinstance(outcome, dict) else {"result": outcome}
        written[torch] = record(torch, code_digest=digest, **{**fields, **extra})
    folder = project / "versions" / "records"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(written, indent=1) + "\n")


# A page whose Prerequisites card names no PyTorch release (and whose first
# cell has no floor check): what the contract and a strict build refuse.
NO_VERSION = page_source(
    "A Page Without a Version",
    'print("hello")\n',
    summary="This page forgot to say which PyTorch it needs.",
    floor=None,
    prerequisite="NumPy",
)
