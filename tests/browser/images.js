async () => Promise.all([...document.images].map(async (img) => {
    img.loading = "eager";
    try { await img.decode(); } catch (e) {}
    return {src: img.currentSrc || img.src, width: img.naturalWidth};
}))
