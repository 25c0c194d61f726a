// Draw every chart on the page: <div class="chart" data-figure="ID"> with <script type="application/json" id="ID">.
(function () {
  function draw(root) {
    root.querySelectorAll("div.chart[data-figure]").forEach(function (el) {
      var source = document.getElementById(el.dataset.figure);
      if (!source || el.dataset.drawn) return;
      var fig = JSON.parse(source.textContent);
      el.dataset.drawn = "1";
      Plotly.newPlot(el, fig.data, fig.layout, { responsive: true, displaylogo: false });
    });
  }
  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:afterSwap", function (e) { draw(e.target); });
})();
