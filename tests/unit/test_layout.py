"""The layout the architecture asks for: Sphinx extensions in _ext/, helpers in
pagelib/, tools in tools/, no import cycle, no extension importing another, no
module reaching into another's private names, and each unit test module named
after the module it tests; tests/ lists tests, its shared code in tests/support/."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXTENSIONS = {p.stem: p for p in (REPO / "_ext").glob("*.py")}
MODULES = {
    **EXTENSIONS,
    **{f"pagelib.{p.stem}": p for p in (REPO / "pagelib").glob("*.py")},
    # The tools import each other by their bare names (tools/ is their path).
    **{p.stem: p for p in (REPO / "tools").glob("*.py")},
}
# The one extension that uses another: the translated edition's notebooks are
# made by notebooks.build, whose package table (notebooks.PACKAGES) is the
# place a page's new import is added.
EXTENSION_USES = {("translated_downloads", "notebooks")}


def project_imports(path):
    """{imported project module: names taken from it or used on it}."""
    tree = ast.parse(path.read_text())
    found = {}
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    found.setdefault(alias.name, set())
                    aliases[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module in MODULES:
                found.setdefault(node.module, set()).update(a.name for a in node.names)
            elif node.module == "pagelib":
                for alias in node.names:
                    module = f"pagelib.{alias.name}"
                    found.setdefault(module, set())
                    aliases[alias.asname or alias.name] = module
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
        ):
            found[aliases[node.value.id]].add(node.attr)
    return found


GRAPH = {name: project_imports(path) for name, path in MODULES.items()}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_uses_another_modules_private_names(name):
    private = {
        f"{module}.{used}"
        for module, names in GRAPH[name].items()
        for used in names
        if used.startswith("_") and not used.startswith("__")
    }
    assert not private, f"{name} uses {sorted(private)}"


def test_helpers_import_no_sphinx_extension():
    for name, imports in GRAPH.items():
        if name.startswith("pagelib."):
            assert all(m.startswith("pagelib.") for m in imports), (name, imports)


def test_no_extension_imports_another_extension():
    uses = {
        (name, imported)
        for name in EXTENSIONS
        for imported in GRAPH[name]
        if imported in EXTENSIONS
    }
    assert uses == EXTENSION_USES, (
        "an extension imports another; move what they share into pagelib/"
    )


def test_tools_import_no_sphinx_extension():
    for name, path in MODULES.items():
        if path.parent.name == "tools":
            assert not set(GRAPH[name]) & set(EXTENSIONS), (name, GRAPH[name])


def test_extensions_and_helpers_import_no_cycle():
    def visit(name, path):
        if name in path:
            cycle = path[path.index(name) :] + [name]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        for imported in GRAPH.get(name, {}):
            if imported != name:
                visit(imported, [*path, name])

    for name in GRAPH:
        visit(name, [])


def test_every_extension_in_ext_is_a_sphinx_extension():
    for path in (REPO / "_ext").glob("*.py"):
        tree = ast.parse(path.read_text())
        functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert "setup" in functions, f"_ext/{path.name} is not a Sphinx extension"


# The unit test modules that test no one module of _ext/, pagelib/ or tools/,
# each with what it tests instead (docs/dev/testing.md lists them all).
NOT_NAMED_AFTER_A_MODULE = {
    "test_layout": "the layout of the modules (this file), not pagelib/layout.py",
    "test_pages": "the rules every page of advanced/ follows that need no build",
    "test_extension_contracts": "what one extension writes and another reads",
    "test_checker_fixes": "operator_checker's FIXES against the course's sections",
    "test_troubleshooting_index": "the troubleshooting page's error index",
    "test_survey_plan": "tests/support/survey_plan.py, the browser survey's plan",
    "test_xdist_groups": "tests/conftest.py's worker groups",
}


def test_each_unit_test_module_is_named_after_the_module_it_tests():
    modules = {path.stem for path in MODULES.values()}
    unplaced = [
        path.name
        for path in sorted((REPO / "tests" / "unit").glob("test_*.py"))
        if path.stem.removeprefix("test_") not in modules
        and path.stem not in NOT_NAMED_AFTER_A_MODULE
    ]
    assert not unplaced, (
        f"{unplaced}: a unit test module is named test_<module>.py after the "
        "module of _ext/, pagelib/ or tools/ it tests; one that tests something "
        "else is listed, with why, in NOT_NAMED_AFTER_A_MODULE"
    )
    listed = set(NOT_NAMED_AFTER_A_MODULE)
    present = {p.stem for p in (REPO / "tests" / "unit").glob("test_*.py")}
    assert listed <= present, f"listed but gone: {sorted(listed - present)}"


def test_the_tests_folder_holds_tests_and_their_support_apart():
    # A module that is not a test belongs in tests/support/, so that a
    # newcomer reading tests/ sees the tests and nothing else.
    allowed = {"__init__.py", "conftest.py"}
    strays = [
        path.name
        for path in sorted((REPO / "tests").glob("*.py"))
        if path.name not in allowed and not path.name.startswith("test_")
    ]
    assert not strays, f"not tests, move them to tests/support/: {strays}"
