"""What the version matrix measured for each page: its floor and its releases.

``make matrix`` (``tools/matrix.py``) runs every page under every release of
``versions/matrix.toml`` and commits one record per (page, release) to
``versions/records/<page>.json``. This module reads them back for the build:
the landing page's cards, the Prerequisites card and the verified stamp show
what they say, and nothing a page merely declares.

A page's records are *current* when every release of the matrix has one and
each names the page's code digest as it is now (``contract.code_digest``:
editing prose keeps them current, editing code makes them stale). Its *floor*
is the oldest supported release on which it passed. They are *consistent* when the page
passed on every release from its floor on, stopped with its one-line message
on every release below it (including the matrix's ``below`` releases, under
the supported ones), and states that same floor in its first cell and in its
Prerequisites card. Anything else is a problem the build reports as a warning,
so that ``-W`` fails: a page may not show a floor or a release it has not run
on as it is now.
"""

import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from pagelib import contract, layout
from pagelib.layout import MATRIX, RECORDS, minor  # noqa: F401 - this module's API


def matrix_releases(srcdir):
    """The supported releases, oldest first."""
    return [release["torch"] for release in layout.load_matrix(srcdir)["releases"]]


def releases_below(srcdir):
    """The releases below the supported ones, where every page must stop."""
    return [release["torch"] for release in layout.load_matrix(srcdir).get("below", [])]


def _page_records(srcdir, source):
    """({release: record} of the page ``source``, None), or ({}, why not)."""
    path = Path(srcdir) / RECORDS / f"{Path(source).stem}.json"
    try:
        return (json.loads(path.read_text()) if path.is_file() else {}), None
    except ValueError as error:
        return {}, f"{path.name} is not valid JSON ({error})"


class Record(TypedDict, total=False):
    """One run of one page on one release (``versions/records/<page>.json``
    maps each release to one); ``tools/matrix.py`` writes them with
    ``new_record``."""

    code_digest: str  # contract.code_digest of the code that ran
    result: str  # "pass", "below-floor" or "fail"
    error: str | None  # the first line of what it raised, or why it did not run
    seconds: float
    torch: str  # the exact version that ran, e.g. "2.7.1+cu126"
    devices: list | None  # what its devices line named, e.g. ["cpu", "cuda"]
    ran_at: str  # ISO 8601, UTC, to the second
    edges: dict  # {sharp edge: status}, for a page that tracks PyTorch behaviours


def new_record(
    code_digest,
    result,
    torch,
    *,
    error=None,
    seconds=0.0,
    devices=None,
    ran_at=None,
    edges=None,
):
    """A ``Record``, stamped now unless ``ran_at`` is given."""
    record = Record(
        code_digest=code_digest,
        result=result,
        error=error,
        seconds=round(seconds, 1),
        torch=torch,
        devices=devices,
        ran_at=ran_at
        or datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    )
    if edges:
        record["edges"] = edges
    return record


def standing(by_release, releases, digest):
    """Which of ``releases`` have a current record of the code ``digest`` in
    ``by_release`` ({release: record}): ``(current, missing, stale)``, the
    first a {release: record}, the others lists of releases.

    The one rule of staleness: the build (``read``), ``matrix.py stale`` and
    ``matrix.py table`` all use it.
    """
    current, missing, stale = {}, [], []
    for release in releases:
        record = by_release.get(release)
        if record is None:
            missing.append(release)
        elif record.get("code_digest") != digest:
            stale.append(release)
        else:
            current[release] = record
    return current, missing, stale


def staleness_problems(missing, stale):
    """What ``standing``'s missing and stale releases say, as problems."""
    problems = []
    if missing:
        problems.append(f"no record for PyTorch {', '.join(missing)}")
    if stale:
        problems.append(
            f"its code changed since the matrix ran it on PyTorch {', '.join(stale)}"
        )
    return problems


@dataclass
class PageVersions:
    """The matrix's verdict on one page."""

    floor: str | None = None  # e.g. "2.7"
    passed: list = field(default_factory=list)  # releases as "2.7", "2.8", ...
    devices: list = field(default_factory=list)
    problems: list = field(default_factory=list)

    @property
    def trusted(self):
        return self.floor is not None and not self.problems


def read(srcdir, source):
    """The ``PageVersions`` of the example script ``source``: its records are
    current (``standing``), then its floor is measured (``measure_floor``) and
    checked against what the page states (``stated_floor_problems``)."""
    srcdir, source = Path(srcdir), Path(source)
    result = PageVersions()
    below = releases_below(srcdir)
    releases = matrix_releases(srcdir)
    by_release, problem = _page_records(srcdir, source)
    if problem:
        result.problems.append(problem)
        return result
    current, missing, stale = standing(
        by_release, below + releases, contract.code_digest(source)
    )
    result.problems = staleness_problems(missing, stale)
    if result.problems:
        result.problems[-1] += f"; run `make matrix PAGES={source.stem}`"
        return result
    measure_floor(
        result,
        [(release, current[release]) for release in below],
        [(release, current[release]) for release in releases],
    )
    if result.floor is not None:
        result.problems += stated_floor_problems(
            source.read_text(encoding="utf-8"), result.floor
        )
    return result


def measure_floor(result, below_outcomes, outcomes):
    """Fill ``result`` (a ``PageVersions``) from current records: the floor is
    the oldest supported release the page passed on; below it, and on every
    release under the supported ones (``below_outcomes``), the page must stop
    with its one-line message, and from it on it must pass. Both are
    [(release, record)], oldest first."""
    for release, record in below_outcomes:
        if record["result"] != "below-floor":
            result.problems.append(
                f"on PyTorch {release}, below the supported releases, it did not "
                f"stop with its one-line message: {record.get('error') or 'it ran'}"
            )
    passing = [release for release, record in outcomes if record["result"] == "pass"]
    if not passing:
        result.problems.append("it passed on no release of the matrix")
        return
    floor_release = passing[0]
    result.floor = minor(floor_release)
    under_floor = True
    for release, record in outcomes:
        if release == floor_release:
            under_floor = False
        if under_floor and record["result"] != "below-floor":
            result.problems.append(
                f"below its floor, on PyTorch {release}, it did not stop with its "
                f"one-line message: {record.get('error')}"
            )
        elif not under_floor and record["result"] != "pass":
            result.problems.append(
                f"it fails on PyTorch {release}, above its floor {result.floor}: "
                f"{record.get('error')}"
            )
        if not under_floor:
            for device in record.get("devices") or []:
                if device not in result.devices:
                    result.devices.append(device)
    result.passed = [minor(release) for release in passing]


def stated_floor_problems(text, floor):
    """Where the page's text (its first cell's check, its Prerequisites card)
    states another floor than the measured ``floor``."""
    problems = []
    checked, named = contract.declared_floors(text)
    if checked is None:
        problems.append(
            "its first cell has no floor check (see docs/dev/adding-a-page.md)"
        )
    elif (checked, named) != (floor, floor):
        problems.append(
            f"its first cell stops below PyTorch {checked} and names {named}, but "
            f"its measured floor is {floor}"
        )
    stated = contract.stated_floors(text)
    if stated != [floor]:
        problems.append(
            f'its Prerequisites card says "PyTorch {", ".join(stated) or "?"} or '
            f'later", but its measured floor is {floor}'
        )
    return problems


# A release's cell in the table of tracked PyTorch behaviours when the matrix
# has no passing run of the page's current code there.
NOT_RUN = "not run"


@dataclass
class EdgeTable:
    """Per release of the matrix, whether each tracked PyTorch behaviour was
    there: ``rows`` pairs an edge with one status per release of
    ``releases``, "present", "gone", "not applicable" or ``NOT_RUN``."""

    releases: list = field(default_factory=list)  # "2.7", "2.8", ...
    rows: list = field(default_factory=list)  # (edge, [status, ...])
    problems: list = field(default_factory=list)


def edge_table(srcdir, source):
    """The ``EdgeTable`` of the page ``source``, from its version records.

    A page tracks a behaviour by printing ``sharp edge <name>: <status>``
    (``contract.EDGE_LINE``); ``make matrix`` keeps the statuses of each run in
    the record's ``edges``. Edges come in the order the newest release printed
    them; a release whose record is missing, stale or not a pass is
    ``NOT_RUN`` (the page's own records check names why).
    """
    srcdir, source = Path(srcdir), Path(source)
    releases = matrix_releases(srcdir)
    table = EdgeTable(releases=[minor(release) for release in releases])
    data, problem = _page_records(srcdir, source)
    if problem:
        table.problems.append(problem)
        return table
    digest = contract.code_digest(source)
    current = {
        release: record.get("edges") or {}
        for release, record in data.items()
        if record.get("result") == "pass" and record.get("code_digest") == digest
    }
    edges = []
    for release in reversed(releases):
        for edge in current.get(release, {}):
            if edge not in edges:
                edges.append(edge)
    if not edges:
        table.problems.append(
            f"no current record of {source.stem} names a sharp edge; run "
            f"`make matrix PAGES={source.stem}`"
        )
    for edge in edges:
        statuses = [
            current[release].get(edge, NOT_RUN) if release in current else NOT_RUN
            for release in releases
        ]
        table.rows.append((edge, statuses))
    return table


def edge_spans(releases, statuses):
    """[(first release, last release, status), ...]: runs of one status.

    ``(["2.7", "2.8", "2.9"], ["present", "present", "gone"])`` gives
    ``[("2.7", "2.8", "present"), ("2.9", "2.9", "gone")]``.
    """
    spans = []
    for release, status in zip(releases, statuses, strict=True):
        if spans and spans[-1][2] == status:
            spans[-1] = (spans[-1][0], release, status)
        else:
            spans.append((release, release, status))
    return spans
