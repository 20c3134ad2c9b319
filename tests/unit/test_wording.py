"""The build's wording helpers (pagelib/wording.py): lists, devices and
sentences joined as each language writes them."""

from pagelib import wording


def test_lists_are_joined_with_commas_and_a_last_and():
    assert wording.join_list([]) == ""
    assert wording.join_list(["2.7"]) == "2.7"
    assert wording.join_list(["2.7", "2.8", "2.9"]) == "2.7, 2.8, 2.9"
    assert wording.join_and(["CPU"]) == "CPU"
    assert wording.join_and(["A", "B", "C"]) == "A, B and C"


def test_devices_are_named_and_a_lone_device_says_there_was_no_cuda():
    assert wording.describe_devices(["cpu", "cuda"]) == "CPU and CUDA"
    assert wording.describe_devices([]) == "no device recorded"
    assert wording.join_devices(["CPU"]) == "CPU (no CUDA device)"
    assert (
        wording.join_devices(["CPU", "NVIDIA H100 (CUDA 13.2)"])
        == "CPU and NVIDIA H100 (CUDA 13.2)"
    )


def test_english_sentences_are_joined_with_a_space():
    assert wording.join_sentences(["Verified:", "One.", "Two."]) == (
        "Verified: One. Two."
    )
    assert wording.join_sentences([]) == ""


def test_chinese_sentences_are_joined_without_a_space():
    assert wording.join_sentences(["已验证：", "本页。", "网站。"]) == (
        "已验证：本页。网站。"
    )
    # A Chinese sentence after an English one, or before: no space either.
    assert wording.join_sentences(["Done.", "本页。"]) == "Done.本页。"
    assert wording.join_sentences(["本页。", "PyTorch 2.9"]) == "本页。PyTorch 2.9"
