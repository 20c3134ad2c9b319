() => ({
    links: [...document.querySelectorAll("a[href]")].map((a) => a.href),
    editions: [...document.querySelectorAll(".edition-switcher a.edition-link")]
        .map((a) => ({href: a.href, lang: a.getAttribute("hreflang")})),
    alternates: [...document.querySelectorAll("link[rel=alternate][hreflang]")]
        .map((link) => ({href: link.href, lang: link.getAttribute("hreflang")})),
    codeBlocks: document.querySelectorAll("div.highlight pre").length,
    copyButtons: document.querySelectorAll("div.highlight button.copybtn").length,
    theme: document.documentElement.dataset.theme,
})
