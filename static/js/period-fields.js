/* A period picker shows only the fields of the period picked. Each field of the form marked
   data-for-period="x" is shown, and its inputs sent, only while the form's
   [data-period-fields] select reads x: a month and a from/to range side by side read as one
   period that is both, and a hidden field sent anyway could be the one that fails. */
(function () {
  "use strict";
  document.querySelectorAll("select[data-period-fields]").forEach(function (select) {
    var fields = select.form.querySelectorAll("[data-for-period]");
    function sync() {
      fields.forEach(function (field) {
        var shown = field.getAttribute("data-for-period") === select.value;
        field.hidden = !shown;
        field.querySelectorAll("input, select").forEach(function (input) {
          input.disabled = !shown;
        });
      });
    }
    select.addEventListener("change", sync);
    sync();
  });
})();
