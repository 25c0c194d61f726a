// Draw every chart on the page: <div class="chart" data-figure="ID"> with <script type="application/json" id="ID">.
// plotly.js (1.2 MB) is fetched only once the page's text has been painted (the frame after DOMContentLoaded),
// so the text is readable while the bundle downloads and parses; charts swapped in by htmx wait for it the same way.
(function () {
  if (window.__chartsJs) return; // included twice on one page: one loader
  window.__chartsJs = true;
  var me = document.currentScript;
  var src = me && me.dataset.plotly;
  var waiting = [];
  var state = "idle"; // idle -> loading -> ready

  function withPlotly(fn) {
    if (state === "ready") return fn();
    waiting.push(fn);
    if (state === "loading") return;
    state = "loading";
    var s = document.createElement("script");
    s.src = src;
    s.onload = function () {
      state = "ready";
      waiting.splice(0).forEach(function (f) { f(); });
    };
    document.head.appendChild(s);
  }

  function draw(root) {
    var charts = root.querySelectorAll("div.chart[data-figure]:not([data-drawn])");
    if (!charts.length) return;
    withPlotly(function () {
      charts.forEach(function (el) {
        var source = document.getElementById(el.dataset.figure);
        if (!source || el.dataset.drawn) return;
        var fig = JSON.parse(source.textContent);
        el.dataset.drawn = "1";
        Plotly.newPlot(el, fig.data, fig.layout, { responsive: true, displaylogo: false });
      });
    });
  }

  function afterPaint(fn) {
    // rAF runs before the next paint; the timeout queued from it runs after that paint.
    requestAnimationFrame(function () { setTimeout(fn, 0); });
  }

  document.addEventListener("DOMContentLoaded", function () { afterPaint(function () { draw(document); }); });
  document.addEventListener("htmx:afterSwap", function (e) { draw(e.target); });
})();
