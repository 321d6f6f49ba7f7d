/* Split editor: as the manager types, update each row's change and GPUs, the total handed
   out and the unallocated rest. The server checks everything again on save. */
(function () {
  "use strict";
  var form = document.querySelector("[data-split-form]");
  if (!form) { return; }
  var parentGpus = parseFloat(form.getAttribute("data-parent-gpus")) || 0;

  function parse(text) {
    if (text === null || text.trim() === "") { return NaN; }
    var value = Number(text.trim());
    return isFinite(value) ? value : NaN;
  }
  function pct(value) {
    return value.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 }) + " %";
  }
  function gpus(value) {
    var rounded = Math.round(value * 10) / 10;
    return rounded.toLocaleString("en-US", { maximumFractionDigits: 1 });
  }
  function setText(selector, text) {
    form.querySelectorAll(selector).forEach(function (el) { el.textContent = text; });
  }

  function update() {
    var total = 0;
    var valid = true;
    form.querySelectorAll("[data-row]").forEach(function (row) {
      var input = row.querySelector(".share-input");
      var fixed = row.querySelector(".share-fixed");
      var deltaEl = row.querySelector("[data-delta]");
      var gpusEl = row.querySelector("[data-gpus]");
      var value;
      var current;
      if (input) {
        value = parse(input.value);
        current = parseFloat(input.getAttribute("data-current"));
      } else {
        value = parseFloat(fixed.value);
        current = value;
      }
      if (isNaN(value) || value < 0 || value > 100) {
        valid = false;
        deltaEl.textContent = "—";
        deltaEl.className = "delta";
        gpusEl.textContent = "—";
        row.classList.remove("changed");
        return;
      }
      total += value;
      var delta = Math.round((value - current) * 100) / 100;
      if (delta === 0) {
        deltaEl.textContent = "±0";
        deltaEl.className = "delta";
      } else {
        deltaEl.textContent = (delta > 0 ? "+" : "−") + Math.abs(delta).toFixed(2) + " pp";
        deltaEl.className = "delta " + (delta > 0 ? "up" : "down");
      }
      row.classList.toggle("changed", delta !== 0);
      gpusEl.textContent = gpus(value / 100 * parentGpus);
    });
    if (form.getAttribute("data-complete") !== "true") { return; }
    total = Math.round(total * 100) / 100;
    var bar = form.querySelector("[data-sumbar]");
    var meter = form.querySelector("[data-meter]");
    if (!valid) {
      setText("[data-sum]", "—");
      setText("[data-sum-big]", "—");
      setText("[data-rest]", "—");
      return;
    }
    var over = total > 100;
    setText("[data-sum]", pct(total));
    setText("[data-sum-big]", pct(total));
    setText("[data-rest]", over ? "none" : pct(100 - total));
    bar.classList.toggle("over", over);
    form.querySelector("[data-over-note]").hidden = !over;
    meter.style.width = Math.min(total, 100) + "%";
  }

  form.addEventListener("input", update);
  update();

  // The shares shown are those in force on the day the change starts. Picking another start
  // day before editing reloads them for that day; after editing, the server shows that day's
  // shares on save and asks to check them, so nothing typed is lost.
  var start = form.querySelector("input[name=valid_from]");
  if (start) {
    start.addEventListener("change", function () {
      var edited = Array.prototype.some.call(form.querySelectorAll(".share-input"), function (input) {
        return parse(input.value) !== parseFloat(input.getAttribute("data-current"));
      });
      if (edited || !/^\d{4}-\d{2}-\d{2}$|^$/.test(start.value)) { return; }
      var url = new URL(window.location.href);
      if (start.value) { url.searchParams.set("valid_from", start.value); }
      else { url.searchParams.delete("valid_from"); }
      window.location.assign(url.toString());
    });
  }
})();
