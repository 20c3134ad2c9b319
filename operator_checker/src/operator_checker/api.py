"""The front door: ``check_operator``.

It validates the options once (``options.Options``), then checks the
operator in this process (``core.run_checks``) or in a child process
(``isolation.run_jobs``), which finds it by name.
"""

import os
import sys
import tempfile

from operator_checker import _torch
from operator_checker.isolation import Job, JobError, reuse_key, run_jobs
from operator_checker.options import DTYPE_NAMES, Options

_torch.require_floor()


def check_operator(
    op,
    samples,
    *,
    devices=None,
    dtypes=DTYPE_NAMES,
    exact=True,
    nondet_tol=0.0,
    nondifferentiable=(),
    indices=None,
    skip=None,
    limitations=None,
    only=None,
    quick=False,
    isolate=False,
    imports=(),
    timeout=300.0,
):
    """Run every check of the course on ``op`` for the variants of ``samples``,
    and return the ``Report``.

    ``op`` is a ``custom_op``, ``torch.ops.ns.name`` or one of its overloads,
    or a target as the command names it (``"ns::name"``,
    ``"package.module:attribute"``). ``samples`` are tuples of arguments, or
    ``Sample(*args, **kwargs)``: one small sample of row-major tensors is
    enough, the checker derives the rest. Each sample is checked as given, in
    its own dtypes (float8, integers and complex included).

    **Variants.** From each sample the checker makes the inputs a caller may
    really pass: in column-major order (``permuted``), as every other element
    of a wider buffer (``strided``), one element into its storage
    (``offset``), with every row the first one (``expanded``, stride 0), and
    with a size of zero (``empty``); in each other dtype of ``dtypes``, where
    the kernel accepts it; with gradients, in its own precision and in
    float64; on every device. The first three keep every value. Arguments
    that hold indices (every integer or bool tensor, unless ``indices``
    names them) keep their values everywhere, and while a sample holds one
    no size changes: the checker cannot tell which sizes they describe.
    Otherwise a size changes only where the eager kernel accepts the change,
    so sizes that move together (four box coordinates, say) stay consistent.

    **Checks**, each on the variants where it can say something:

    * ``test_schema``, ``test_autograd_registration``, ``test_faketensor``,
      ``test_aot_dispatch_dynamic``: ``torch.library.opcheck``'s four tests
      (every variant);
    * ``layout``: outputs and gradients on a variant equal those on its
      row-major copy (the other layouts);
    * ``gradcheck``, ``gradgradcheck``, ``forward-ad``: first and second
      derivatives, and forward mode, against finite differences (float64
      with gradients, on the arguments a backward reaches);
    * ``vmap``: ``torch.func.vmap`` against a loop (the sample);
    * ``compiled``, ``compiled-dynamic``: ``torch.compile(fullgraph=True)``
      with Inductor gives the eager results bit for bit, and the gradients
      within tolerance;
    * ``export-load``, ``export-decomposed``: ``torch.export``, saved and
      loaded, or after ``run_decompositions()``, records the sizes, strides
      and dtypes the kernel returns, and gives the eager results;
    * ``recompiles``: one dynamic compilation serves larger sizes.

    Two eager calls on each variant must agree: a kernel that reads memory it
    never wrote fails ``eager`` there.

    **Options.** ``exact=False`` compares compiled, exported and batched
    results with ``assert_close``'s tolerances instead of bit for bit;
    ``nondet_tol`` is the run-to-run difference a nondeterministic kernel may
    show. ``nondifferentiable``, ``indices``, ``skip`` and ``limitations``
    map argument names, checks or variant kinds (a layout, a dtype, a device)
    to a reason, and the report shows each. ``only`` runs the named checks
    alone; ``quick`` runs the fast ones (``QUICK_CHECKS``) on the samples as
    given. Every check left out is a ``skipped`` row that says why.

    **Isolation.** ``isolate=True`` runs the operator in a child process: a
    crash or a hang of its code is a failed row naming the signal and the
    variant, and the other checks go on in a fresh child. The child finds the
    operator by name: ``imports`` lists the modules, ``.py`` files or ``.so``
    libraries that register it (the libraries this process loaded with
    ``torch.ops.load_library`` are added), and ``timeout`` is the seconds the
    child may stay silent, importing included. The child stays for the next
    isolated call with the same ``imports``, while their files are unchanged.
    With ``isolate=False`` the checks compile in this process, each a
    function of its own: nothing this process compiled before is discarded.
    """
    options = Options.make(
        devices=devices,
        dtypes=dtypes,
        exact=exact,
        nondet_tol=nondet_tol,
        nondifferentiable=nondifferentiable,
        indices=indices,
        skip=skip,
        limitations=limitations,
        only=only,
        quick=quick,
    )
    if isolate:
        return check_isolated(op, samples, options, imports=imports, timeout=timeout)
    from operator_checker.core import run_checks

    if isinstance(op, str):
        from operator_checker.targets import resolve

        op = resolve(op, imports)
    return run_checks(op, samples, options)


def target_of(op, imports=()):
    """The name a child finds ``op`` by, and the module that defines it (None
    when ``op`` is defined in ``__main__`` and ``imports`` register it)."""
    if isinstance(op, str):
        return op, None
    module = None
    function = _torch.custom_op_function(op)
    if function is not None:
        module = function.__module__
        if module == "__main__" and imports:
            module = None  # the imports define it again in the child
        elif module == "__main__":
            raise JobError(
                f"isolate=True runs {_torch.display_name(op)} in a fresh process, "
                "which cannot import __main__: define it in a module, or pass "
                "imports=[path to the .py file that defines it]"
            )
    target = _torch.target_name(op)
    if target is None:
        raise JobError(
            f"{op!r} is not an operator: pass a custom_op, torch.ops.ns.name or one "
            "of its overloads"
        )
    return target, module


def check_isolated(op, samples, options, imports=(), timeout=300.0):
    """``check_operator(op, samples, isolate=True, ...)``: a ``Report``."""
    from operator_checker.samples import save_samples

    target, module = target_of(op, imports)
    imports = [*_torch.loaded_libraries(), *([module] if module else []), *imports]
    extra = [p for p in sys.path if p and os.path.isdir(p)]
    with tempfile.TemporaryDirectory(prefix="operator-checker-samples-") as folder:
        path = os.path.join(folder, "samples.pt")
        save_samples(path, {"sample": samples})
        job = Job(target, path, "sample", list(imports), options.to_json())
        (result,) = run_jobs(
            [job], timeout=timeout, keep=reuse_key(job, extra), extra_path=extra
        )
    if isinstance(result, JobError):
        raise result
    if getattr(result, "interrupted", False):
        raise KeyboardInterrupt
    return result
