() => {
    const width = document.documentElement.clientWidth;
    window.scrollTo(10000, window.scrollY);
    const scrolledBy = window.scrollX;
    window.scrollTo(0, window.scrollY);
    const inCode = (el) => el.closest("pre, div.highlight, .highlight") !== null;
    const describe = (el) => el.tagName.toLowerCase()
        + (el.id ? "#" + el.id : "")
        + (el.className && typeof el.className === "string"
            ? "." + el.className.trim().split(/\s+/).join(".") : "");
    const visible = (el, rect) => rect.width > 1 && rect.height > 1
        && getComputedStyle(el).visibility !== "hidden";
    const scrollers = [];
    const sticking = [];
    for (const el of document.body.querySelectorAll("*")) {
        const style = getComputedStyle(el);
        const rect = el.getBoundingClientRect();
        if (!visible(el, rect)) continue;
        if (el.tagName === "PRE" && el.scrollWidth > el.clientWidth + 1
                && !["auto", "scroll"].includes(style.overflowX)) {
            // A wide code block must scroll inside itself, not be cut off.
            sticking.push(describe(el) + " (wide code block that cannot scroll)");
        }
        if (inCode(el)) continue;
        if (["auto", "scroll"].includes(style.overflowX)
                && el.scrollWidth > el.clientWidth + 1) {
            scrollers.push(describe(el) + ` (${el.scrollWidth} > ${el.clientWidth})`);
        }
        if (rect.right > width + 1 && !el.closest("dialog:not([open])")) {
            sticking.push(describe(el) + ` (right edge ${Math.round(rect.right)})`);
        } else if (style.overflowX === "visible" && el.scrollWidth > el.clientWidth + 1
                   && el.clientWidth > 0
                   && ["block", "list-item", "table-cell", "flex", "grid"]
                       .includes(style.display)) {
            // Text or a child that runs past the element's own right edge.
            sticking.push(describe(el) + ` (content ${el.scrollWidth}px`
                          + ` in ${el.clientWidth}px)`);
        }
    }
    return {
        width,
        scrollWidth: document.documentElement.scrollWidth,
        scrolledBy,
        scrollers: scrollers.slice(0, 15),
        sticking: sticking.slice(0, 15),
    };
}
