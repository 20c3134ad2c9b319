"""Where each failure's fix is taught: the first matching row of FIXES.
(That every row names a real section of the course is checked beside the
course: tests/unit/test_checker_fixes.py.)"""

from operator_checker.fixes import see_for


def test_the_first_matching_fix_wins_and_every_failure_gets_one():
    assert see_for("compiled", "RuntimeError: wrong strides") == (
        "Troubleshooting Custom Operators > Fake kernel with the wrong strides"
    )
    assert see_for("test_faketensor", "something new").startswith(
        "Troubleshooting Custom Operators > Which check catches which mistake"
    )


def test_a_fake_kernel_of_the_wrong_shape_is_sent_to_what_opcheck_compares():
    # "MetadataMismatchError" holds "meta", which once sent it to the section
    # on a missing fake kernel.
    detail = "MetadataMismatchError: mismatched tensor metadata for output[0]: shape"
    assert see_for("test_faketensor", detail) == (
        "Troubleshooting Custom Operators > The two detectors"
    )
    assert see_for("compiled", "no fake impl registered for crashing::row_sums") == (
        "Troubleshooting Custom Operators > No fake kernel under torch.compile"
    )


def test_with_the_course_url_a_fix_carries_the_address_of_its_section(monkeypatch):
    assert "https://" not in see_for("vmap", "")
    # A generic name that another job may set changes nothing.
    monkeypatch.setenv("SITE_URL", "https://elsewhere.example.org/")
    assert "https://" not in see_for("vmap", "")
    monkeypatch.setenv("OPERATOR_CHECKER_COURSE_URL", "https://example.org/custom-ops/")
    assert see_for("vmap", "") == (
        "Training and Other Registrations > Batching with register_vmap "
        "(https://example.org/custom-ops/tutorials/custom_op_registrations.html"
        "#batching-with-register-vmap)"
    )


def test_a_missing_double_backward_is_sent_to_a_backward_autograd_can_differentiate():
    # A backward in NumPy leaves autograd; one in C++ (torchvision's) was never
    # in it: the C++ page's backward calls operators that have their own.
    numpy = (
        "no double backward: RuntimeError: Can't call numpy() on Tensor that "
        "requires grad"
    )
    assert see_for("gradgradcheck", numpy) == (
        "Troubleshooting Custom Operators > A backward written in NumPy"
    )
    native = (
        "no double backward: RuntimeError: double backwards on roi_align not supported"
    )
    assert see_for("gradgradcheck", native) == (
        "C++ Custom Operators > A backward formula, registered from Python"
    )
