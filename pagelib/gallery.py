"""Where the examples are: Sphinx-Gallery's folders, read from its settings."""

from pathlib import Path


def _as_list(value):
    return [value] if isinstance(value, str) else list(value)


def galleries(gallery_conf, srcdir):
    """(examples folder, gallery folder) pairs, as absolute paths."""
    srcdir = Path(srcdir)
    return [
        (srcdir / examples, srcdir / gallery)
        for examples, gallery in zip(
            _as_list(gallery_conf["examples_dirs"]),
            _as_list(gallery_conf["gallery_dirs"]),
            strict=False,
        )
    ]


def examples(gallery_conf, srcdir):
    """{docname: (source script, gallery folder)} of every example."""
    pages = {}
    for examples_dir, gallery_dir in galleries(gallery_conf, srcdir):
        for source in sorted(examples_dir.rglob("*.py")):
            relative = source.relative_to(examples_dir).with_suffix("")
            folder = gallery_dir / relative.parent
            docname = (gallery_dir / relative).relative_to(srcdir).as_posix()
            pages[docname] = (source, folder)
    return pages


def locate(gallery_conf, fname):
    """(script, gallery folder) of the example ``fname`` Sphinx-Gallery runs,
    or (None, None)."""
    for examples_dir, gallery_dir in galleries(gallery_conf, gallery_conf["src_dir"]):
        source = Path(fname) if Path(fname).is_absolute() else examples_dir / fname
        if source.is_file() and source.is_relative_to(examples_dir):
            return source, gallery_dir / source.parent.relative_to(examples_dir)
    return None, None
