"""The verified stamp's sentences (_ext/verified_stamp.py), in English and
Chinese; the joins they are made with are pagelib/wording's (test_wording)."""

import verified_stamp

from pagelib.records import PageVersions

RECORD = {
    "torch": "2.9.1+cpu",
    "devices": ["CPU"],
    "ran_at": "2026-03-04T05:06:07+00:00",
}
TRUSTED = PageVersions(floor="2.8", passed=["2.8", "2.9"], devices=["cpu", "cuda"])


def test_stamp_sentences_name_the_releases_and_the_recorded_run():
    assert verified_stamp.stamp_sentences(RECORD, TRUSTED) == [
        "this page ran to the end on PyTorch 2.8, 2.9 (CPU and CUDA).",
        "Every output on it came from running it with PyTorch 2.9.1+cpu on "
        "CPU (no CUDA device), 2026-03-04 05:06 UTC.",
    ]
    # Records that cannot be trusted are not quoted; the run still is.
    (only,) = verified_stamp.stamp_sentences(RECORD, PageVersions())
    assert only.startswith("Every output on it came from")


def test_stamp_sentences_in_chinese(chinese):
    first, second = verified_stamp.stamp_sentences(RECORD, TRUSTED)
    assert first == "本页已在 PyTorch 2.8、2.9 上完整运行（CPU 和 CUDA）。"
    assert "PyTorch 2.9.1+cpu" in second and "CPU（无 CUDA 设备）" in second
