"""Cache the configuration as ``conf.py`` gives it, so that a build with
nothing to do says so.

Sphinx keeps the configuration in its pickled environment and, on the next
build, names every option whose value differs from the fresh one, as it
stands after ``config-inited``. Extensions change some options later, at
``builder-inited``: Sphinx-Gallery completes ``sphinx_gallery_conf``, the
theme adds its templates, theme options and permalink icon, sphinx-design and
sphinx-copybutton add their static folders, Sphinx gives ``html_css_files``
their priority. The cached values were those changed ones, so every build,
even one with nothing to do, printed "The configuration has changed (6
options: ...)" and compared six options that could never match.

Here the values as they stand at the end of ``config-inited`` are remembered,
and the environment's file stores those: the next build compares like with
like. Only the environment's file gets them (from ``env-updated`` on, when
Sphinx is about to write it); the build itself keeps using the options as the
extensions left them.
"""

import copy

from sphinx.config import Config, is_serializable
from sphinx.util.typing import ExtensionMetadata

# After every config-inited handler, Sphinx-Gallery's (10, 100 and 900) and
# editions' (500) among them.
REMEMBER_PRIORITY = 10_000


class ConfigAsRead(Config):
    """A ``Config`` whose pickled values are those of ``config-inited``."""

    def __getstate__(self):
        state = super().__getstate__()
        if not self.__dict__.get("_pickle_as_read"):
            return state
        for name, value in self.__dict__.get("_as_read", {}).items():
            if not is_serializable(value):
                continue
            if name in state["_options"]:
                state["_options"][name] = (value, state["_options"][name][1])
            if name in state:
                state[name] = value
        return state


def remember(app, config):
    as_read = {}
    for item in config:
        try:
            as_read[item.name] = copy.deepcopy(item.value)
        except Exception:  # noqa: BLE001, S112 - an uncopyable value is cached as is
            continue
    config._as_read = as_read
    config.__class__ = ConfigAsRead


def pickle_as_read(app, env):
    # Sphinx writes the environment's file right after this event; a parallel
    # read's workers, which pickle the environment too, have finished by then.
    if isinstance(env.config, ConfigAsRead):
        env.config._pickle_as_read = True


def setup(app) -> ExtensionMetadata:
    app.connect("config-inited", remember, priority=REMEMBER_PRIORITY)
    app.connect("env-updated", pickle_as_read)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
