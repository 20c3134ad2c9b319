"""``pagelib.page_module``: a page's section as a module, strings in, strings out;
and the module that ``check_your_operator.py`` publishes."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conf import page_modules
from pagelib import page_module

REPO = Path(__file__).resolve().parents[2]
PAGE = """'''
Title
=====
'''

# %%
# Setting up
# ----------

import sys

# %%
# The tool
# --------
#
# What the tool is for.

import math


# %%
# Squares
# ~~~~~~~
#
# A subsection stays in the module, as comments.


def square(x):
    return x * x


# %%
# Using it
# --------

print(square(3))
"""


def test_the_module_is_the_section_from_its_first_code_line():
    module = page_module.module_source(PAGE, "The tool", "tool: squares.")
    assert module.startswith('"""tool: squares.\n"""\n\nimport math\n')
    assert "# A subsection stays in the module, as comments." in module
    assert "# Squares" in module and "# %%" not in module
    assert "print(square(3))" not in module and "What the tool is for" not in module
    assert module.endswith("    return x * x\n")
    namespace = {}
    exec(compile(module, "tool.py", "exec"), namespace)
    assert namespace["square"](4) == 16


def test_a_missing_section_or_one_without_code_is_an_error():
    with pytest.raises(page_module.NoSuchSection, match="no section 'Nothing'"):
        page_module.module_source(PAGE, "Nothing", "x")
    without_code = PAGE.replace("import math\n", "").replace(
        "def square(x):\n    return x * x\n", ""
    )
    with pytest.raises(page_module.NoSuchSection, match="has no code"):
        page_module.module_source(without_code, "The tool", "x")


# -- The checker that check_your_operator.py publishes ------------------------

CHECKER_PAGE = REPO / "advanced" / "check_your_operator.py"


def checker_module():
    section = page_modules[CHECKER_PAGE.name]["section"]
    return page_module.module_source(CHECKER_PAGE.read_text(), section, "doc")


def test_the_checker_module_imports_only_torch_and_the_standard_library():
    imported = set()
    for node in ast.walk(ast.parse(checker_module())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module.split(".")[0])
    assert imported - set(sys.stdlib_module_names) == {"torch"}


def test_the_checker_module_names_nothing_it_does_not_define_or_import(tmp_path):
    # The page imports some modules before the section starts; the module
    # must import everything it uses itself.
    module = tmp_path / "operator_checker.py"
    module.write_text(checker_module())
    ruff = Path(sys.executable).parent / "ruff"
    found = subprocess.run(
        [str(ruff), "check", "--isolated", "--select", "F821,F822,F823", str(module)],
        capture_output=True,
        text=True,
    )
    assert found.returncode == 0, found.stdout


def headings():
    """{page title: {section titles}}, inline literals as plain text."""
    found = {}
    for page in (REPO / "advanced").glob("*.py"):
        lines = page.read_text().splitlines()
        title = ast.get_docstring(ast.parse("\n".join(lines))).splitlines()[0]
        sections = {
            lines[i - 1][2:].replace("``", "")
            for i in range(1, len(lines))
            if re.match(r"^# ([-~])\1{2,}\s*$", lines[i])
            and lines[i - 1].startswith("# ")
        }
        found[title] = sections
    return found


def fixes():
    """The checker's FIXES table, its page names resolved: the module's string
    constants are read, not run (that would import torch)."""
    constants, table = {}, None
    for node in ast.parse(checker_module()).body:
        if not isinstance(node, ast.Assign) or not isinstance(
            node.targets[0], ast.Name
        ):
            continue
        name = node.targets[0].id
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            constants[name] = node.value.value
        elif name == "FIXES":
            table = node.value
    return eval(compile(ast.Expression(table), "FIXES", "eval"), {}, constants)


def test_every_fix_the_checker_names_is_a_section_of_the_course():
    sections = headings()
    for _check, _pattern, page, section in fixes():
        assert page in sections, f"FIXES names no page of the course: {page!r}"
        assert section in sections[page], f"{page!r} has no section {section!r}"
