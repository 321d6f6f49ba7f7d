/* Pickers in a GET form (cluster on the tree and history pages): a change shows it at once. */
(function () {
  "use strict";
  document.querySelectorAll("[data-cluster-select]").forEach(function (select) {
    select.addEventListener("change", function () { select.form.submit(); });
  });
})();
