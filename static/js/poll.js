/* Refresh parts of a page without reloading it (templates/scheduler/*.html).
   <section id="queue" data-poll="5"> is re-read from the same URL every 5 s and its content
   swapped in place, so forms elsewhere on the page keep what was typed. When the fresh copy
   carries another data-poll-state (a simulation finished), the whole page is reloaded once
   so its figures are drawn. Polling pauses while the tab is hidden. */
(function () {
  "use strict";
  function start(el) {
    var seconds = parseInt(el.getAttribute("data-poll"), 10) || 5;
    var busy = false;
    function tick() {
      if (busy || document.hidden) { return; }
      busy = true;
      fetch(window.location.href, { headers: { "X-Requested-With": "poll" }, credentials: "same-origin" })
        .then(function (response) { return response.ok ? response.text() : null; })
        .then(function (text) {
          if (!text) { return; }
          var doc = new DOMParser().parseFromString(text, "text/html");
          var fresh = doc.getElementById(el.id);
          if (!fresh) { return; }
          if (fresh.getAttribute("data-poll-state") !== el.getAttribute("data-poll-state")) {
            window.location.reload();
            return;
          }
          el.innerHTML = fresh.innerHTML;
          el.setAttribute("data-polled", String(Date.now()));
        })
        .catch(function () { /* the next tick tries again */ })
        .then(function () { busy = false; });
    }
    window.setInterval(tick, seconds * 1000);
  }
  function init() {
    document.querySelectorAll("[data-poll]").forEach(start);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
