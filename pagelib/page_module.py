"""The module a page publishes: one of its sections, as a file to download.

A page may build a tool in a section of its own (``check_your_operator.py``
builds ``check_operator`` under "The checker"). The build writes that
section's code as a Python module beside the generated page, the page links
it with ``:download:``, and the rest of the page runs the same cells: one
source, so the file a reader imports is the code this build ran. The
section's prose stays in the module as comments; the module's docstring says
where it comes from.

A section runs from its heading (underlined with ``-``) to the next heading
of that level; the module starts at the section's first line of code.
"""

import re

HEADING = re.compile(r"^# (\S.*)\n# (-+)\s*$", re.M)
CELL_MARK = re.compile(r"^# %%.*$")


class NoSuchSection(ValueError):
    """The page has no section of that title, or it holds no code."""


def section_lines(source_text, section):
    """The lines of ``section`` of a page, heading excluded."""
    headings = [
        (match.start(), match.end(), match.group(1).strip())
        for match in HEADING.finditer(source_text)
        if len(match.group(2)) >= len(match.group(1).strip())
    ]
    for number, (_start, end, title) in enumerate(headings):
        if title == section:
            stop = headings[number + 1][0] if number + 1 < len(headings) else None
            return source_text[end:stop].splitlines()
    raise NoSuchSection(f"no section {section!r} (a heading underlined with '-')")


def module_body(source_text, section):
    """The code of ``section`` from its first line of code, cell marks removed,
    prose kept as comments."""
    lines = section_lines(source_text, section)
    first_code = next(
        (
            i
            for i, line in enumerate(lines)
            if line.strip() and not line.startswith("#")
        ),
        None,
    )
    if first_code is None:
        raise NoSuchSection(f"section {section!r} has no code")
    body = [line for line in lines[first_code:] if not CELL_MARK.match(line)]
    while body and (not body[-1].strip() or body[-1].startswith("#")):
        body.pop()  # the prose that introduces the next section
    return "\n".join(body) + "\n"


def module_source(source_text, section, docstring):
    """The module made of ``section``: ``docstring``, then its code."""
    return f'"""{docstring.strip()}\n"""\n\n' + module_body(source_text, section)
