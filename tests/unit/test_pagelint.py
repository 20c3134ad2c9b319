"""The page lint names exactly what a new page lacks, and each piece it is given.

A copy of the files the lint reads (everything but the pages), with one real
page and all its pieces, and a scratch page that is only a script.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

from pagelib import contract, course, pagelint, records

REPO = Path(__file__).resolve().parents[2]
NEEDED = [
    "requirements.txt",
    "constraints.txt",
    "start_here.rst",
    "versions/matrix.toml",
    "pagelib",
]
REAL_PAGE = "custom_op_transforms"  # a page with every piece
SCRATCH = "scratch_page"
SCRATCH_SOURCE = '''"""
A Scratch Page
==============

A page made by a test. It has every field its card needs.

.. grid:: 2

    .. grid-item-card:: What you will learn
       :class-card: card-prerequisites

       * Nothing

    .. grid-item-card:: Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later

.. admonition:: Checklist
   :class: checklist

   #. Read it.
"""

# %%
import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import bs4
import no_such_module_anywhere

print(torch.__version__, bs4.__name__, no_such_module_anywhere)
'''


def project_with_scratch_page(tmp_path):
    project = tmp_path / "project"
    for name in NEEDED:
        if (REPO / name).is_dir():
            shutil.copytree(
                REPO / name,
                project / name,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
        else:
            (project / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / name, project / name)
    real = {
        f"advanced/{REAL_PAGE}.py",
        f"versions/records/{REAL_PAGE}.json",
        f"locale/zh_CN/LC_MESSAGES/tutorials/{REAL_PAGE}.po",
    }
    for name in real:
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, project / name)
    (project / course.COURSE_FILE).write_text("")
    course.add_page(project, f"{REAL_PAGE}.py", course.COURSE[f"{REAL_PAGE}.py"])
    (project / "advanced" / f"{SCRATCH}.py").write_text(SCRATCH_SOURCE)
    return project


def edit(path, old, new):
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} is not once in {path}"
    path.write_text(text.replace(old, new))


def write_records(project, digest, floor_release):
    """Records of the scratch page: stopped below ``floor_release``, passed
    from it on, all for the code ``digest``."""
    below = records.releases_below(project)
    releases = below + records.matrix_releases(project)
    passing = releases[releases.index(floor_release) :]
    (project / records.RECORDS / f"{SCRATCH}.json").write_text(
        json.dumps(
            {
                release: {
                    "code_digest": digest,
                    "result": "pass" if release in passing else "below-floor",
                }
                for release in releases
            }
        )
    )


def test_lint_names_exactly_what_a_new_page_lacks_and_each_piece_it_gets(tmp_path):
    project = project_with_scratch_page(tmp_path)
    catalog = f"locale/zh_CN/LC_MESSAGES/tutorials/{SCRATCH}.po"
    # `make check` runs exactly this; the real page is clean.
    process = subprocess.run(
        [sys.executable, "-m", "pagelib.pagelint"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert process.returncode == 1
    assert process.stdout.splitlines() == [
        f"{SCRATCH}: no place or summary in the course — edit pagelib/course.toml",
        f'{SCRATCH}: no row in "Which page do I need?" — edit start_here.rst',
        f"{SCRATCH}: no version records — run `make matrix PAGES={SCRATCH}`",
        f"{SCRATCH}: no zh_CN catalog — run `make catalogs`, then translate {catalog}",
        f"{SCRATCH}: it imports bs4, from beautifulsoup4, which the version "
        "matrix's environments lack — edit versions/matrix.toml ([pages] packages)",
        f"{SCRATCH}: it imports no_such_module_anywhere, which no installed package "
        "provides — pin the package in requirements.txt and constraints.txt, "
        "then run make",
    ]

    def lacks():
        return pagelint.missing(project)

    def lacks_only(line):
        assert lacks() == [f"{SCRATCH}: {line}"]

    # Each piece, given: its line goes, and nothing else changes.
    before = lacks()
    course.add_page(project, f"{SCRATCH}.py", "A page made by a test. " * 5)
    too_long = (
        f"{SCRATCH}: its course summary has 115 characters, 90 at most "
        "— edit pagelib/course.toml"
    )
    assert lacks() == [too_long, *before[1:]]
    edit(project / course.COURSE_FILE, "A page made by a test. " * 5, "A page.")
    assert lacks() == before[1:]
    edit(
        project / "start_here.rst",
        "\nEvery page runs",
        f"   * - try the lint\n     - :ref:`sphx_glr_tutorials_{SCRATCH}.py`\n"
        "\nEvery page runs",
    )
    assert lacks() == before[2:]
    (project / catalog).write_text("")
    assert lacks() == before[2:3] + before[4:]
    edit(project / records.MATRIX, '"pytest",', '"pytest", "beautifulsoup4",')
    assert lacks() == before[2:3] + before[5:]
    edit(project / "constraints.txt", "beautifulsoup4==", "# beautifulsoup4==")
    unpinned = (
        f"{SCRATCH}: it imports bs4, from beautifulsoup4, which no requirements file "
        "pins — edit requirements.txt and constraints.txt"
    )
    assert lacks() == before[2:3] + [unpinned] + before[5:]
    edit(project / "constraints.txt", "# beautifulsoup4==", "beautifulsoup4==")
    page = project / "advanced" / f"{SCRATCH}.py"
    edit(page, "import no_such_module_anywhere\n", "")
    edit(page, ", no_such_module_anywhere)", ")")
    assert lacks() == before[2:3]

    # Records: stale, then current but with another floor, then right.
    releases = records.matrix_releases(project)
    write_records(project, "0" * 16, releases[0])
    stale = ", ".join(records.releases_below(project) + releases)
    lacks_only(
        f"its code changed since the matrix ran it on PyTorch {stale} "
        f"— run `make matrix PAGES={SCRATCH}`"
    )
    write_records(project, contract.code_digest(page), releases[1])
    floors = lacks()
    assert floors[0].startswith(f"{SCRATCH}: its first cell stops below PyTorch 2.7")
    assert all(line.endswith(f" — edit advanced/{SCRATCH}.py") for line in floors)
    write_records(project, contract.code_digest(page), releases[0])
    assert lacks() == []

    # The card's fields: prose, so the records stay current.
    edit(page, ".. admonition:: Checklist", ".. admonition:: Steps")
    lacks_only(
        f"its docstring has no Checklist admonition — edit advanced/{SCRATCH}.py"
    )
    edit(page, ".. admonition:: Steps", ".. admonition:: Checklist")

    # A course entry whose page is gone, and a summary on two lines.
    course.add_page(project, "gone.py", "A page that was renamed.")
    edit(project / course.COURSE_FILE, '"A page."', '"A page.\\nOn two lines."')
    assert lacks() == [
        f"{SCRATCH}: its course summary is not one line — edit pagelib/course.toml",
        "gone: in the course, but advanced/gone.py does not exist "
        "— edit pagelib/course.toml",
    ]
