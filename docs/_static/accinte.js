/* Scroll hints of the torch_accinte guide (see accinte.css).
 *
 * A wide table or diagram scrolls sideways inside its own box on a narrow
 * screen, where browsers draw no scroll bar until it is touched: each such
 * box gets a line above it that says it scrolls, and the class
 * `accinte-scrolls` (a shadow at its right edge, see accinte.css). Checked again on resize, and after
 * the load event, once the diagrams' SVG documents have their sizes. An
 * SVG drawing a page includes raw (chapter 07's memory plot: a fixed size,
 * no viewBox, so it cannot shrink) is first put in such a box.
 * tools/browser_test.py checks at 400 px that every box wider than its
 * window has its hint. */
(() => {
  const BOXES = "article .table-wrapper, article .accinte-diagram, article .accinte-svg-box";
  const HINT = "accinte-scroll-hint";
  const update = () => {
    for (const box of document.querySelectorAll(BOXES)) {
      const wide = box.scrollWidth > box.clientWidth + 1;
      let hint = box.previousElementSibling;
      if (!(hint && hint.classList.contains(HINT))) {
        hint = null;
      }
      if (wide && hint === null) {
        hint = document.createElement("div");
        hint.className = HINT;
        hint.textContent = "Scroll sideways for more \u2192";
        box.before(hint);
      }
      if (hint !== null) {
        hint.hidden = !wide;
      }
      box.classList.toggle("accinte-scrolls", wide);
    }
  };
  const box_raw_drawings = () => {
    for (const svg of document.querySelectorAll("article section > svg")) {
      const box = document.createElement("div");
      box.className = "accinte-svg-box";
      svg.before(box);
      box.appendChild(svg);
    }
  };
  window.addEventListener("load", () => {
    box_raw_drawings();
    update();
  });
  window.addEventListener("resize", update);
})();
