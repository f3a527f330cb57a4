/* Fabric Planner portal behaviour. Loaded on every page; no inline script (CSP script-src 'self'). */
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  function onReady(fn) {
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", fn);
    else fn();
  }

  // <select data-autosubmit> submits its form on change (team switcher, filters).
  document.addEventListener("change", function (ev) {
    var el = ev.target;
    if (el && el.matches && el.matches("[data-autosubmit]") && el.form) {
      el.form.requestSubmit ? el.form.requestSubmit() : el.form.submit();
    }
  });

  // <button data-confirm="..."> asks before submitting.
  document.addEventListener("click", function (ev) {
    var el = ev.target && ev.target.closest ? ev.target.closest("[data-confirm]") : null;
    if (el && !window.confirm(el.getAttribute("data-confirm"))) {
      ev.preventDefault();
      ev.stopPropagation();
    }
  }, true);

  // <button data-print> opens the print dialog.
  document.addEventListener("click", function (ev) {
    var el = ev.target && ev.target.closest ? ev.target.closest("[data-print]") : null;
    if (el) { ev.preventDefault(); window.print(); }
  });

  // Scenario builder: a workload preset fills the model/training fields (the server keeps the rules).
  function readJSON(id) {
    var node = document.getElementById(id);
    if (!node) return null;
    try { return JSON.parse(node.textContent); } catch (e) { return null; }
  }

  function setupBuilder() {
    var form = document.getElementById("builder-form");
    if (!form) return;
    var presets = readJSON("workload-presets") || {};
    var select = form.querySelector("[name=preset]");
    var custom = document.getElementById("custom-model");

    function toggleCustom() {
      if (!custom || !select) return;
      custom.classList.toggle("is-preset", select.value !== "custom");
    }

    if (select) {
      select.addEventListener("change", function () {
        var preset = presets[select.value];
        if (preset) {
          Object.keys(preset.fields || {}).forEach(function (name) {
            var input = form.querySelector("[name='" + name + "']");
            if (!input) return;
            var value = preset.fields[name];
            if (input.type === "checkbox") input.checked = !!value;
            else input.value = value;
          });
          form.dispatchEvent(new Event("change", { bubbles: true }));
        }
        toggleCustom();
      });
      toggleCustom();
    }
  }

  onReady(setupBuilder);
})();
