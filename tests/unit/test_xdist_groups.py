"""Which xdist worker group a slow test joins (tests/conftest.py): the shared
fixture it needs, else the group its module marks."""

from types import SimpleNamespace

import pytest

from tests import conftest, test_operator_checker


def item(fixtures, group=None, nodeid="tests/test_x.py::test_y"):
    marker = SimpleNamespace(args=(group,)) if group else None
    return SimpleNamespace(
        nodeid=nodeid,
        fixturenames=fixtures,
        get_closest_marker=lambda name: marker if name == "xdist_group" else None,
    )


def test_a_test_that_needs_the_site_goes_where_the_site_is_even_when_marked():
    assert conftest.xdist_group(item(["site", "tmp_path"], "checker")) == "site"


def test_a_marked_test_without_a_shared_fixture_keeps_its_module_s_group():
    assert conftest.xdist_group(item(["field"], "checker")) == "checker"
    assert conftest.xdist_group(item(["tmp_path"])) is None


def test_a_test_that_needs_two_shared_fixtures_is_refused():
    with pytest.raises(pytest.UsageError, match="needs"):
        conftest.xdist_group(item(["site", "outcomes"]))


def test_the_checker_package_s_hang_test_joins_the_field_test_s_group():
    (nodeid,) = conftest.JOINED
    field_test = test_operator_checker.pytestmark.args[0]
    assert conftest.xdist_group(item(["tmp_path"], nodeid=nodeid)) == field_test
    path, name = nodeid.split("::")
    assert f"def {name}(" in (conftest.REPO / path).read_text()
