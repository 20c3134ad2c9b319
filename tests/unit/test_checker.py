"""The checker's wheel is built once per content of its package and shared."""

from pathlib import Path

import pytest

from pagelib import checker


@pytest.fixture
def builds(monkeypatch, tmp_path):
    """Builds made by ``cached_wheel`` in an empty cache, without setuptools."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    made = []

    def build_wheel(python, outdir):
        made.append(python)
        wheel = Path(outdir) / checker.wheel_name()
        wheel.write_text(f"built {len(made)}")
        return wheel

    monkeypatch.setattr(checker, "build_wheel", build_wheel)
    return made


def test_the_same_package_is_built_once(builds):
    first = checker.cached_wheel("python")
    second = checker.cached_wheel("python")
    assert first == second and first.read_text() == "built 1"
    assert builds == ["python"]
    assert [p.name for p in first.parent.iterdir()] == [checker.wheel_name()]


def test_a_changed_package_is_built_again(builds, monkeypatch):
    first = checker.cached_wheel("python")
    monkeypatch.setattr(checker, "digest", lambda: "f" * 64)
    second = checker.cached_wheel("python")
    assert second != first and second.read_text() == "built 2"


def test_a_failed_build_leaves_no_wheel_behind(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def failing(python, outdir):
        (Path(outdir) / checker.wheel_name()).write_text("half")
        raise RuntimeError("building the operator_checker wheel failed: no")

    monkeypatch.setattr(checker, "build_wheel", failing)
    with pytest.raises(RuntimeError, match="wheel failed"):
        checker.cached_wheel("python")
    assert not list(tmp_path.rglob("*.whl"))
