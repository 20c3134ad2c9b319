"""What went wrong, in one line
-----------------------------
A row's detail is the deepest error of the chain, whole, without the
traceback and the hints PyTorch appends: a C++ check's file and line go,
the message that Dynamo's wrapper quotes comes out. ``quiet`` silences the
warnings and logs of a step whose row says what went wrong. No torch here.
"""

import contextlib
import logging
import re
import warnings

NOISE = re.compile(
    r"\n\s*(from user code:|Set TORCH_LOGS|Exception raised from|While executing"
    r"|Original traceback|For more information|Developer debug context"
    r"|Explanation:|Hint:|To execute this test|The above exception"
    r"|The error above occurred)"
)
CPP_LOCATION = re.compile(r"^[^,]+, \S+\.(?:cpp|cu|cuh|h|hpp):\d+, ")
QUOTED = re.compile(r"got (\w+)\((['\"])(.*?)\2\)", re.S)
DEBUG_CONTEXT = re.compile(r"Developer debug context: (\w+(?:Error|Exception)) (.*)")


def deepest(error):
    """The innermost error that ``error`` names as its cause and that has a
    message. An error raised while another was handled is not caused by it."""
    chain = [error]
    while True:
        inner = getattr(chain[-1], "inner_exception", None) or chain[-1].__cause__
        if not isinstance(inner, BaseException) or inner in chain:
            break
        chain.append(inner)
    return next((e for e in reversed(chain) if str(e).strip()), error)


def cause(error):
    """The deepest error's type and message, on one line."""
    inner = deepest(error)
    kind, text = type(inner).__name__, str(inner).strip()
    quoted = QUOTED.search(text)  # what Dynamo's run with fake tensors got
    context = DEBUG_CONTEXT.search(text)
    if quoted:
        kind, text = quoted.group(1), quoted.group(3).replace("\\'", "'")
    elif context:
        kind, text = context.groups()
    text = NOISE.split("\n" + text)[0]
    text = re.split(r",?\s*numerical:", text)[0]  # gradcheck's Jacobians
    return f"{kind}: {CPP_LOCATION.sub('', ' '.join(text.split()))}"


@contextlib.contextmanager
def quiet():
    """Silence warnings and log messages: the rows say what went wrong."""
    before = logging.root.manager.disable  # quiet() may be nested
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(before)
