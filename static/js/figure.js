/* Draw every Plotly figure on the page: <div data-figure="ID"> takes its data from the
   json_script element with that id (a figure built server-side by governance/figures.py). */
(function () {
  "use strict";
  // A heatmap whose cells are category codes names them in meta.labels (the simulator's
  // timeline): the hover text is made here rather than shipped once per cell.
  function hoverLabels(trace) {
    var labels = trace.type === "heatmap" && trace.meta && trace.meta.labels;
    if (!labels) { return; }
    trace.text = trace.z.map(function (row) {
      return row.map(function (code) { return code === null ? "" : labels[code]; });
    });
  }
  function draw() {
    if (typeof Plotly === "undefined") { return; }
    document.querySelectorAll("[data-figure]").forEach(function (el) {
      var source = document.getElementById(el.getAttribute("data-figure"));
      if (!source) { return; }
      var figure = JSON.parse(source.textContent);
      (figure.data || []).forEach(hoverLabels);
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
