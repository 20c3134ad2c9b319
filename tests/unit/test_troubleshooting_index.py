"""The error index atop the troubleshooting page is the one the page checks.

The page's last cell asserts that every (fragment, section) row of its
``error_index`` occurs in the errors it provoked while running. The reader,
though, sees the list-table in the page's docstring; this test makes sure the
two are the same rows, so the table a reader uses cannot drift from the one
the page verifies.
"""

import ast
import re

from tests.support.pages import REPO

PAGE = REPO / "advanced" / "custom_op_troubleshooting.py"


def docstring_rows(docstring):
    # Rows look like:  * - ``fragment``\n     - `Section title`_
    pattern = r"\* - ``(.+?)``\s*\n\s*- `(.+?)`_"
    return re.findall(pattern, docstring)


def checked_rows(module):
    for node in module.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "error_index"
            for target in node.targets
        ):
            return [tuple(row) for row in ast.literal_eval(node.value)]
    raise AssertionError("the page defines no error_index")


def test_error_index_table_matches_the_rows_the_page_checks():
    module = ast.parse(PAGE.read_text())
    table = docstring_rows(ast.get_docstring(module))
    assert table, "no error index table found in the page's docstring"
    assert table == checked_rows(module)


def test_every_indexed_section_exists_on_the_page():
    source = PAGE.read_text()
    for _, section in docstring_rows(ast.get_docstring(ast.parse(source))):
        underline = rf"# [-~]{{{len(section)}}}"
        assert re.search(rf"# {re.escape(section)}\n{underline}\n", source), section
