"""The torch API the course teaches, as the pages' own code uses it.

Sphinx-Gallery's ``identify_names`` reads every example's code and writes,
beside the generated page, ``<page>.codeobj.json``: for each name the code
writes (``torch.library.custom_op``, ``opcheck`` after ``from torch.library
import opcheck``), the module and name it resolves to. These helpers turn those
files into the list of API entries the site documents (``_ext/api_reference.py``):
the names under the namespaces below, each with the pages that use it. The list
is derived, never written by hand: a page that starts using an API adds its
entry, and one that stops removes it.
"""

import inspect
import json
from pathlib import Path

from pagelib.course import COURSE

# The public torch namespaces the course teaches. A name under one of them
# gets an entry in the API reference and a link wherever a page's code uses it.
NAMESPACES = (
    "torch.library",
    "torch.export",
    "torch.compile",
    "torch.autograd",
    "torch.func",
    "torch.utils.cpp_extension",
    "torch.distributed.tensor",
    "torch.testing",
    # The course's own checker (operator_checker/), documented from its
    # docstrings like PyTorch's names.
    "operator_checker",
)
# Where the generated entry pages live, under the source folder.
FOLDER = "api"
# The namespaces whose docstrings are the course's own prose: a translated
# edition translates their entries as it does the pages, from a catalog per
# entry (``locale/<language>/LC_MESSAGES/api/<name>.po``, which ``make
# catalogs`` keeps current). PyTorch's docstrings are English in every edition.
TRANSLATED_NAMESPACES = ("operator_checker",)


def in_course_api(name):
    """True for a public name under one of NAMESPACES (the namespace itself
    included); False for private names (a part starting with ``_``)."""
    if any(part.startswith("_") for part in name.split(".")):
        return False
    return any(name == space or name.startswith(space + ".") for space in NAMESPACES)


def is_translated(name):
    """True for a name under one of TRANSLATED_NAMESPACES."""
    return any(
        name == space or name.startswith(space + ".") for space in TRANSLATED_NAMESPACES
    )


def public_api(namespace, module):
    """Every name of ``module`` (imported as ``namespace``) that an entry could
    document: its ``__all__`` less dunder names, and the public methods and
    properties that its public classes define, sorted.

    Which of them a build documents depends on the pages' run (Sphinx-Gallery
    names ``report.passed`` as ``Report.passed`` only once the code ran and
    ``report`` has a type), while catalogs are made without running a page:
    the catalogs of a translated namespace therefore cover all of these."""
    names = set()
    for attribute in getattr(module, "__all__", ()):
        if attribute.startswith("_"):
            continue
        names.add(f"{namespace}.{attribute}")
        value = getattr(module, attribute)
        if not inspect.isclass(value):
            continue
        for member, member_value in vars(value).items():
            if member.startswith("_"):
                continue
            if isinstance(member_value, (property, staticmethod, classmethod)) or (
                inspect.isfunction(member_value)
            ):
                names.add(f"{namespace}.{attribute}.{member}")
    return sorted(names)


def names_in_codeobj(codeobj):
    """The course-API names one page's ``.codeobj.json`` mapping resolves to:
    the public module path Sphinx-Gallery found for each (``module_short``),
    then the name."""
    found = set()
    for candidates in codeobj.values():
        for candidate in candidates:
            name = f"{candidate['module_short']}.{candidate['name']}"
            if in_course_api(name):
                found.add(name)
    return found


def course_rank(docname):
    """Where a page stands in the course (``pagelib.course.COURSE``); pages
    not placed yet come last, by name."""
    stem = docname.rsplit("/", 1)[-1] + ".py"
    order = list(COURSE)
    return (order.index(stem) if stem in order else len(order), stem)


def usage(codeobjs):
    """{API name: [docnames of the pages using it, in course order]} from
    {docname: codeobj mapping}, names sorted."""
    users = {}
    for docname, codeobj in codeobjs.items():
        for name in names_in_codeobj(codeobj):
            users.setdefault(name, set()).add(docname)
    return {name: sorted(users[name], key=course_rank) for name in sorted(users)}


def read_codeobjs(docnames, srcdir):
    """{docname: codeobj mapping} of the pages that have a ``.codeobj.json``
    (a page whose code names nothing has none)."""
    found = {}
    for docname in docnames:
        path = Path(srcdir) / f"{docname}.codeobj.json"
        if path.is_file():
            found[docname] = json.loads(path.read_text(encoding="utf-8"))
    return found


def entry_docname(name):
    return f"{FOLDER}/{name}"


def entry_source(name):
    """The reST of one entry's page: its title, then the ``api-entry``
    directive, which documents the object and lists the pages using it."""
    title = f"``{name}``"
    return f"{title}\n{'=' * len(title)}\n\n.. api-entry:: {name}\n"


def namespace_of(name):
    """The longest of NAMESPACES that holds ``name``."""
    return max(
        (s for s in NAMESPACES if name == s or name.startswith(s + ".")),
        key=len,
    )
