() => {
    const canvas = document.createElement("canvas");
    canvas.width = canvas.height = 1;
    const ctx = canvas.getContext("2d", {willReadFrequently: true});
    const rgba = (color) => {
        ctx.clearRect(0, 0, 1, 1);
        ctx.fillStyle = "rgba(0, 0, 0, 0)";
        ctx.fillStyle = color;
        ctx.fillRect(0, 0, 1, 1);
        const [r, g, b, a] = ctx.getImageData(0, 0, 1, 1).data;
        return [r, g, b, a / 255];
    };
    const over = (top, bottom) => [0, 1, 2].map(
        (i) => top[i] * top[3] + bottom[i] * (1 - top[3])).concat([1]);
    // The colour behind an element: its own background over its parent's,
    // down to an opaque one (white if none is), worked out once per element.
    const backdrops = new Map();
    const backdrop = (el) => {
        if (!el) return [255, 255, 255, 1];
        if (!backdrops.has(el)) {
            const own = rgba(getComputedStyle(el).backgroundColor);
            backdrops.set(el, own[3] >= 1 ? own
                : own[3] > 0 ? over(own, backdrop(el.parentElement))
                : backdrop(el.parentElement));
        }
        return backdrops.get(el);
    };
    const luminance = ([r, g, b]) => {
        const lin = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92
            : Math.pow((c + 0.055) / 1.055, 2.4); };
        return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
    };
    const ratio = (a, b) => {
        const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
        return (hi + 0.05) / (lo + 0.05);
    };
    const opacities = new Map();
    const opacity = (el) => {
        if (!el) return 1;
        if (!opacities.has(el)) {
            opacities.set(el, parseFloat(getComputedStyle(el).opacity)
                          * opacity(el.parentElement));
        }
        return opacities.get(el);
    };
    const kind = (el) => el.closest(".verified-stamp") ? "stamp"
        : el.closest(".sd-card, .sphx-glr-thumbcontainer") ? "card"
        : el.closest("pre, code") ? "code"
        : el.closest("article") ? "body text"
        : "page chrome";
    // Text is measured once per distinct look: the same colour, opacity,
    // size and weight over the same backdrop give the same contrast, so the
    // thousands of alike syntax-highlighting spans of a page cost one
    // measurement, while any instance that looks different is measured.
    const seen = new Set();
    const texts = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
        const el = walker.currentNode.parentElement;
        if (!el || !walker.currentNode.textContent.trim()) continue;
        if (el.closest("script, style, noscript, dialog:not([open]), .visually-hidden,"
                       + " .sr-only, [aria-hidden=true]")) continue;
        const rect = el.getBoundingClientRect();
        const style = getComputedStyle(el);
        if (rect.width < 2 || rect.height < 2 || style.visibility === "hidden"
            || style.display === "none") continue;
        const back = backdrop(el);
        const fore = rgba(style.color);
        const alpha = fore[3] * opacity(el);
        const key = [fore.join(), alpha, back.join(), style.fontSize,
                     style.fontWeight, kind(el)].join("|");
        if (seen.has(key)) continue;
        seen.add(key);
        const text = over([fore[0], fore[1], fore[2], alpha], back);
        const size = parseFloat(style.fontSize);
        const bold = parseInt(style.fontWeight) >= 700;
        const large = size >= 24 || (size >= 18.66 && bold);
        texts.push({
            kind: kind(el), large, contrast: ratio(text, back),
            text: walker.currentNode.textContent.trim().slice(0, 40),
            color: style.color, background: `rgb(${back.slice(0, 3).join(",")})`,
        });
    }
    // A figure's panel: the nearest box, itself included, with a background
    // colour, and how far that colour reaches beyond the picture.
    const figures = [...document.querySelectorAll(
        "img.sphx-glr-single-img, img.sphx-glr-multi-img")].map((img) => {
        const style = getComputedStyle(img);
        let panel = img;
        while (panel && rgba(getComputedStyle(panel).backgroundColor)[3] === 0) {
            panel = panel.parentElement;
        }
        let margin = 0;
        if (panel === img) {
            margin = Math.min(...["Top", "Right", "Bottom", "Left"].map(
                (side) => parseFloat(style["padding" + side])));
        } else if (panel) {
            const [outer, inner] = [panel.getBoundingClientRect(),
                                    img.getBoundingClientRect()];
            margin = Math.min(inner.left - outer.left, outer.right - inner.right,
                              inner.top - outer.top, outer.bottom - inner.bottom);
        }
        return {src: img.src, backdrop: luminance(backdrop(img)), margin,
                filter: style.filter};
    });
    return {texts, figures, theme: document.documentElement.dataset.theme};
}
