() => {
    const stamp = document.querySelector(".verified-stamp");
    const code = document.querySelector("div.highlight");
    return !code || Boolean(stamp.compareDocumentPosition(code)
        & Node.DOCUMENT_POSITION_FOLLOWING);
}
