/* Draw every Plotly figure on the page: <div data-figure="ID"> takes its data from the
   json_script element with that id (a figure built server-side by governance/figures.py). */
(function () {
  "use strict";
  function draw() {
    if (typeof Plotly === "undefined") { return; }
    document.querySelectorAll("[data-figure]").forEach(function (el) {
      var source = document.getElementById(el.getAttribute("data-figure"));
      if (!source) { return; }
      var figure = JSON.parse(source.textContent);
      var layout = Object.assign({}, figure.layout || {}, { autosize: true });
      Plotly.newPlot(el, figure.data, layout, {
        responsive: true,
        displaylogo: false,
        modeBarButtonsToRemove: ["toImage", "select2d", "lasso2d"]
      }).then(function () { el.setAttribute("data-drawn", "true"); });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
