/* Dashboards: a picker submits its GET form at once; a period other than "Custom" too (its
   dates are shown, and sent, only for "Custom": period-fields.js). */
(function () {
  "use strict";
  document.querySelectorAll("[data-autosubmit]").forEach(function (select) {
    select.addEventListener("change", function () { select.form.submit(); });
  });
  document.querySelectorAll("[data-period-select]").forEach(function (select) {
    select.addEventListener("change", function () {
      if (select.value !== "custom") { select.form.submit(); }
    });
  });
})();
