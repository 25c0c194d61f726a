// Tables read on any screen (static/css/app.css):
// - a word or number with a hyphen, a slash or a colon in it (a date, "loadtest-agent", "->", "user:ana") is never
//   broken at that character: browsers may break after a hyphen, so each such token in a table cell is wrapped in
//   <span class="nobr"> (white-space: nowrap); the cell is then at least as wide as the token, and a table wider
//   than its box scrolls sideways in it;
// - a table wider than its box on a wide screen becomes such a box too (class "scroll");
// - such a box takes keyboard focus, so it can be scrolled without a mouse.
(function () {
  var TOKEN = /\S*[-\u2010-\u2014\/:]\S*/g;

  function keepWhole(root) {
    root.querySelectorAll("main td, main th").forEach(function (cell) {
      var walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
      var nodes = [];
      for (var n = walker.nextNode(); n; n = walker.nextNode()) {
        if (!n.parentElement.closest(".nobr, pre, script") && TOKEN.test(n.data)) nodes.push(n);
        TOKEN.lastIndex = 0;
      }
      nodes.forEach(function (node) {
        var text = node.data, at = 0, frag = document.createDocumentFragment(), m;
        TOKEN.lastIndex = 0;
        while ((m = TOKEN.exec(text))) {
          if (m.index > at) frag.appendChild(document.createTextNode(text.slice(at, m.index)));
          var span = document.createElement("span");
          span.className = "nobr";
          span.textContent = m[0];
          frag.appendChild(span);
          at = m.index + m[0].length;
        }
        if (at < text.length) frag.appendChild(document.createTextNode(text.slice(at)));
        node.parentNode.replaceChild(frag, node);
      });
    });
  }

  function mark() {
    document.querySelectorAll("main table").forEach(function (t) {
      // Wider than its box on a wide screen too (the narrow screens' rule is in app.css): a box of its own.
      if (!t.classList.contains("scroll") && t.getBoundingClientRect().width > t.parentElement.clientWidth + 1) {
        t.classList.add("scroll");
      }
      var scrolls = t.scrollWidth > t.clientWidth + 1 && getComputedStyle(t).overflowX === "auto";
      if (scrolls && !t.hasAttribute("tabindex")) {
        t.setAttribute("tabindex", "0");
        t.dataset.scrolls = "1";
      } else if (!scrolls && t.dataset.scrolls) {
        t.removeAttribute("tabindex");
        delete t.dataset.scrolls;
      }
    });
  }

  document.addEventListener("DOMContentLoaded", function () { keepWhole(document); mark(); });
  window.addEventListener("resize", mark);
  document.addEventListener("htmx:afterSwap", function (e) { keepWhole(e.target); mark(); });
})();
