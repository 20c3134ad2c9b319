"""Steps of a run, as an isolated child announces them
---------------------------------------------------
A step is a check, or one of the eager calls that make the variants, at a
place. An isolated run's parent keeps which steps are done and which one
crashed a child, so that a fresh child skips them. No torch here.
"""


class Crashed:
    """What a guarded step gives when it crashed an earlier child (the
    parent recorded that as a failed row)."""


class Steps:
    """Where an isolated run stands (see ``operator_checker.isolation``).

    A step is a check, or one of the eager calls that make the variants, at a
    place: ``(check, where)``, ``where`` a tuple (``Variant.key``, or
    ``("as given", sample index)``...) and its label what a row shows. In one
    process every step runs. In the child of an isolated run, each step is
    announced before it starts, so that the parent knows which check and
    variant a crash interrupted; a step that an earlier child finished, or
    that crashed one, is not run again.
    """

    def __init__(self, done=(), crashed=(), announce=None):
        self.done = {step_key(*key) for key in done}
        self.crashed = {step_key(*key) for key in crashed}
        self.announce = announce

    def wanted(self, check, where, label=None):
        """Whether to run the step; announces it if so."""
        key = step_key(check, where)
        if key in self.done or key in self.crashed:
            return False
        if self.announce is not None:
            self.announce(check, key[1], label or label_of(where))
        return True

    def guarded(self, check, where, step, label=None):
        """``step()``, or ``Crashed()`` where it crashed an earlier child."""
        key = step_key(check, where)
        if key in self.crashed:
            return Crashed()
        if self.announce is not None:
            self.announce(check, key[1], label or label_of(where))
        return step()


def step_key(check, where):
    """A step as a hashable key; ``where`` may come back from JSON as a list."""
    return check, tuple(where) if isinstance(where, (list, tuple)) else (where,)


def label_of(where):
    """How a row names a place that is not a variant."""
    if not isinstance(where, (list, tuple)):
        return str(where)
    kind, *rest = where
    if kind == "declared":
        return "declared"
    return " ".join([f"#{rest[0]}", kind, *map(str, rest[1:])])
