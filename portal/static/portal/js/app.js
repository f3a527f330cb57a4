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
            var inputs = form.querySelectorAll("[name='" + name + "']");
            if (!inputs.length) return;
            var value = preset.fields[name];
            var text = value === null || value === undefined ? "" : String(value);
            inputs.forEach(function (input) {
              if (input.type === "radio") input.checked = input.value === text;  // the parallelism mode
              else if (input.type === "checkbox") input.checked = !!value;
              else input.value = text;
            });
          });
          form.dispatchEvent(new Event("change", { bubbles: true }));
        }
        toggleCustom();
      });
      toggleCustom();
    }
  }

  // Scenario builder: a picked fleet supplies the cluster (fields filled from it and disabled); the
  // non-blocking pod size only matters, and is only shown, when the fabric is oversubscribed.
  var FLEET_FIELDS = ["gpu", "gpus", "gpus_per_node", "nics_per_node", "nic_gbps", "fabric", "topology",
                      "oversubscription"];

  function setupCluster() {
    var form = document.getElementById("builder-form");
    if (!form) return;
    var clusters = readJSON("fleet-clusters") || {};
    var picker = form.querySelector("select[name=fleet]");
    var box = document.getElementById("cluster-fields");
    var podField = document.getElementById("pod-field");

    function inputs(name) { return form.querySelectorAll("[name='" + name + "']"); }
    function value(name) {
      var els = inputs(name);
      for (var i = 0; i < els.length; i++) {
        if (els[i].type === "radio") { if (els[i].checked) return els[i].value; }
        else return els[i].value;
      }
      return "";
    }

    function applyFleet() {
      var cluster = picker && picker.value ? clusters[picker.value] : null;
      FLEET_FIELDS.forEach(function (name) {
        inputs(name).forEach(function (el) {
          if (cluster && cluster[name] !== undefined && cluster[name] !== null) {
            if (el.type === "radio") el.checked = String(el.value) === String(cluster[name]);
            else el.value = cluster[name];
          }
          el.disabled = !!cluster;
        });
      });
      if (box) box.classList.toggle("from-fleet", !!cluster);
    }

    function updatePod() {
      // no placeholder of its own: an empty pod lets the engine's fabric sizing place the oversubscription
      var oversub = parseFloat(value("oversubscription")) || 1;
      if (podField) podField.classList.toggle("is-collapsed", !(oversub > 1));
    }

    if (picker) picker.addEventListener("change", function () { applyFleet(); updatePod(); });
    // A GPU sold as a rack-scale system (GB200/GB300 NVL72) comes in its own server size: follow it. Each GPU
    // brings its default NIC speed (the catalog's default_nic_gbps: 800G for GB300, B300).
    var nodeSizes = readJSON("gpu-node-sizes") || {};
    var nicSpeeds = readJSON("gpu-nic-speeds") || {};
    var gpuSelect = form.querySelector("select[name=gpu]");
    var perNodeInput = form.querySelector("[name=gpus_per_node]");
    if (gpuSelect) {
      gpuSelect.addEventListener("change", function () {
        if (picker && picker.value) return;
        var speed = nicSpeeds[gpuSelect.value];
        if (speed !== undefined) {
          inputs("nic_gbps").forEach(function (el) {
            if (el.type === "radio") el.checked = String(el.value) === String(speed);
            else el.value = String(speed);
          });
        }
        if (perNodeInput) {
          var size = nodeSizes[gpuSelect.value];
          var rackSizes = Object.keys(nodeSizes).map(function (k) { return String(nodeSizes[k]); });
          if (size) perNodeInput.value = String(size);
          else if (rackSizes.indexOf(perNodeInput.value) >= 0) perNodeInput.value = "8";  // back from a rack GPU
        }
        updatePod();
      });
    }
    form.addEventListener("input", updatePod);
    form.addEventListener("change", updatePod);
    updatePod();
  }

  // <input data-select-on-focus> (a one-time token secret): focusing selects it for copying.
  document.addEventListener("focusin", function (ev) {
    var el = ev.target;
    if (el && el.matches && el.matches("[data-select-on-focus]")) el.select();
  });

  // <button data-copy="ID"> copies the value of the element #ID (a new token's secret) to the clipboard and says so
  // in the element its aria-describedby names; without the Clipboard API (plain http) it selects and copies.
  document.addEventListener("click", function (ev) {
    var btn = ev.target && ev.target.closest ? ev.target.closest("[data-copy]") : null;
    if (!btn) return;
    ev.preventDefault();
    var source = document.getElementById(btn.getAttribute("data-copy"));
    if (!source) return;
    var text = source.value !== undefined ? source.value : source.textContent;
    var status = document.getElementById(btn.getAttribute("aria-describedby") || "");
    function done(ok) {
      if (status) status.textContent = ok ? "Copied to the clipboard." : "Could not copy: select the text and copy it.";
      if (ok) btn.textContent = "Copied";
    }
    function fallback() {
      var ok = false;
      if (source.select) { source.focus(); source.select(); }
      try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
      done(ok);
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done(true); }, fallback);
    } else {
      fallback();
    }
  });

  onReady(setupBuilder);
  onReady(setupCluster);
})();
