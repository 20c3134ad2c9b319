"""The verified stamp's wording (_ext/verified_stamp.py): lists, devices and
sentences joined as each language writes them."""

import verified_stamp

from pagelib.records import PageVersions

RECORD = {
    "torch": "2.9.1+cpu",
    "devices": ["CPU"],
    "ran_at": "2026-03-04T05:06:07+00:00",
}
TRUSTED = PageVersions(floor="2.8", passed=["2.8", "2.9"], devices=["cpu", "cuda"])


def test_lists_are_joined_with_commas_and_a_last_and():
    assert verified_stamp.join_list([]) == ""
    assert verified_stamp.join_list(["2.7"]) == "2.7"
    assert verified_stamp.join_list(["2.7", "2.8", "2.9"]) == "2.7, 2.8, 2.9"
    assert verified_stamp.join_and(["CPU"]) == "CPU"
    assert verified_stamp.join_and(["A", "B", "C"]) == "A, B and C"


def test_devices_are_named_and_a_lone_device_says_there_was_no_cuda():
    assert verified_stamp.describe_devices(["cpu", "cuda"]) == "CPU and CUDA"
    assert verified_stamp.describe_devices([]) == "no device recorded"
    assert verified_stamp.join_devices(["CPU"]) == "CPU (no CUDA device)"
    assert (
        verified_stamp.join_devices(["CPU", "NVIDIA H100 (CUDA 13.2)"])
        == "CPU and NVIDIA H100 (CUDA 13.2)"
    )


def test_english_sentences_are_joined_with_a_space():
    assert verified_stamp.join_sentences(["Verified:", "One.", "Two."]) == (
        "Verified: One. Two."
    )
    assert verified_stamp.join_sentences([]) == ""


def test_chinese_sentences_are_joined_without_a_space():
    assert verified_stamp.join_sentences(["已验证：", "本页。", "网站。"]) == (
        "已验证：本页。网站。"
    )
    # A Chinese sentence after an English one, or before: no space either.
    assert verified_stamp.join_sentences(["Done.", "本页。"]) == "Done.本页。"
    assert (
        verified_stamp.join_sentences(["本页。", "PyTorch 2.9"]) == "本页。PyTorch 2.9"
    )


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
