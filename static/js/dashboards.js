/* Dashboards: a picker submits its GET form at once; the custom dates show only for "Custom". */
(function () {
  "use strict";
  document.querySelectorAll("[data-autosubmit]").forEach(function (select) {
    select.addEventListener("change", function () { select.form.submit(); });
  });
  document.querySelectorAll("[data-period-select]").forEach(function (select) {
    var dates = select.form.querySelectorAll("[data-custom-dates]");
    function sync() {
      dates.forEach(function (el) { el.classList.toggle("is-hidden", select.value !== "custom"); });
    }
    select.addEventListener("change", function () {
      sync();
      if (select.value !== "custom") { select.form.submit(); }
    });
    sync();
  });
})();
