() => {
    const skip = "pre, code, kbd, samp, script, style, noscript, .highlight, "
        + ".sphx-glr-script-out, .edition-switcher, .math, math, [lang=en]";
    const texts = [document.title];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
        const parent = walker.currentNode.parentElement;
        if (!parent || parent.closest(skip)) continue;
        texts.push(walker.currentNode.textContent);
    }
    const attributes = [];
    const named = ["title", "aria-label", "placeholder", "alt", "tooltip"];
    for (const el of document.querySelectorAll(named.map((n) => `[${n}]`).join(","))) {
        if (el.closest(skip)) continue;
        for (const name of named) {
            const value = el.getAttribute(name);
            if (value && value.trim()) attributes.push(`${name}="${value.trim()}"`);
        }
    }
    return {texts: texts.map((t) => t.trim()).filter(Boolean), attributes};
}
