/* Draws the report charts with the vendored Chart.js (portal/vendor/chartjs).
 *
 * Each chart is a <canvas data-chart="ID"> next to a <script type="application/json" id="ID"> written by
 * Django's json_script filter. The JSON is a small spec, not a Chart.js config, so no code travels in data:
 *
 *   {"type": "bar"|"line", "labels": [...], "datasets": [{"label", "data", "stack"?, "type"?, "fill"?,
 *    "fill_alpha"?}], "stacked": bool, "horizontal": bool, "x_title": str, "y_title": str,
 *    "format": "usd"|"days"|"pct"|"s"|"num", "floating": bool,
 *    "all_ticks": bool (every category label drawn, none skipped or rotated),
 *    "tick_lines": [[word, ...], ...] (each category label drawn as these lines),
 *    "begin_at_zero": bool (default true) with "axis_cut": str (said on the value axis when it is false),
 *    "segment_labels": bool (each stacked part labelled on its bar where it fits), "legend": bool}
 *
 * Drawn charts are kept in window.fpCharts[ID] (the browser tests read them).
 */
(function () {
  "use strict";
  var PALETTE = ["#2456d6", "#e07b1a", "#16946b", "#c23b6c", "#7a4ddb", "#0f8fb3", "#b58a00", "#5b6475", "#d9463b", "#3aa34a"];
  window.fpCharts = window.fpCharts || {};

  function fmt(kind, v) {
    if (v === null || v === undefined || isNaN(v)) return "";
    var a = Math.abs(v);
    switch (kind) {
      case "usd4": return "$" + v.toFixed(3);
      case "usd2": return "$" + v.toFixed(2);
      case "usd":
        if (a >= 1e9) return "$" + (v / 1e9).toFixed(2) + "B";
        if (a >= 1e6) return "$" + (v / 1e6).toFixed(2) + "M";
        if (a >= 1e3) return "$" + (v / 1e3).toFixed(1) + "k";
        return "$" + v.toFixed(0);
      case "pct": return (v * 100).toFixed(1) + "%";
      case "days": return (a < 20 ? v.toFixed(2) : v.toFixed(1)) + " d";
      case "s": return a < 1 ? (v * 1000).toFixed(0) + " ms" : v.toFixed(2) + " s";
      default: return a >= 1000 ? v.toLocaleString() : String(Math.round(v * 100) / 100);
    }
  }

  function color(i, alpha) {
    var hex = PALETTE[i % PALETTE.length];
    if (alpha === undefined) return hex;
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + alpha + ")";
  }

  // Writes each stacked part's name and value on its bar where the text fits (the table beside names the rest).
  function segmentLabels(spec) {
    return {
      id: "fpSegmentLabels",
      afterDatasetsDraw: function (chart) {
        var ctx = chart.ctx;
        ctx.save();
        ctx.font = "12px system-ui, sans-serif";
        ctx.textAlign = "center";
        ctx.textBaseline = "middle";
        ctx.fillStyle = "#ffffff";
        chart.data.datasets.forEach(function (ds, i) {
          var meta = chart.getDatasetMeta(i);
          if (meta.hidden) return;
          meta.data.forEach(function (bar, j) {
            var p = bar.getProps(["x", "y", "base", "width", "height"], true);
            var w = Math.abs(spec.horizontal ? p.x - p.base : p.width);
            var text = ds.label + " " + fmt(spec.format, ds.data[j]);
            if (ctx.measureText(text).width + 8 > w) text = ds.label;
            if (ctx.measureText(text).width + 8 > w) return;
            var cx = spec.horizontal ? (p.x + p.base) / 2 : p.x;
            var cy = spec.horizontal ? p.y : (p.y + p.base) / 2;
            ctx.fillText(text, cx, cy);
          });
        });
        ctx.restore();
      }
    };
  }

  function build(spec) {
    var horizontal = !!spec.horizontal;
    var valueAxis = horizontal ? "x" : "y";
    var catAxis = horizontal ? "y" : "x";
    var datasets = (spec.datasets || []).map(function (ds, i) {
      var c = ds.color_index !== undefined ? ds.color_index : i;
      var type = ds.type || spec.type || "bar";
      var out = {
        label: ds.label,
        data: ds.data,
        type: type,
        borderColor: color(c),
        backgroundColor: type === "line" ? color(c, ds.fill ? 0.15 : 1) : color(c, 0.85),
        borderWidth: type === "line" ? 2 : 0,
        pointRadius: type === "line" ? 3 : 0,
        spanGaps: true,
        tension: 0.15
      };
      if (ds.stack) out.stack = ds.stack;
      if (ds.overlap) { out.grouped = false; out.barPercentage = 0.6; out.categoryPercentage = 0.9; }
      if (ds.fill) { out.fill = ds.fill; out.backgroundColor = color(c, ds.fill_alpha || 0.15); }
      if (ds.dashed) out.borderDash = [5, 4];
      if (ds.hidden_point) out.pointRadius = 0;
      return out;
    });
    var scales = {};
    var catTicks = {};
    if (spec.all_ticks) { catTicks.autoSkip = false; catTicks.maxRotation = 0; catTicks.minRotation = 0; }
    if (spec.tick_lines) {
      catTicks.callback = function (v, i) {
        var lines = spec.tick_lines[i];
        return lines && lines.length ? lines : this.getLabelForValue(v);
      };
    }
    scales[catAxis] = {
      stacked: !!spec.stacked,
      title: { display: !!spec.x_title, text: spec.x_title || "" },
      grid: { display: false },
      ticks: catTicks
    };
    var zero = spec.begin_at_zero !== false;
    scales[valueAxis] = {
      stacked: !!spec.stacked,
      beginAtZero: zero,
      title: { display: !!spec.y_title, text: spec.y_title || "" },
      ticks: { callback: function (v) { return fmt(spec.format, v); } }
    };
    if (horizontal) { scales[catAxis].title = { display: !!spec.y_title, text: spec.y_title || "" }; scales[valueAxis].title = { display: !!spec.x_title, text: spec.x_title || "" }; }
    // an axis that does not start at zero says so on its title, in the chart's own words
    if (!zero) {
      var t = scales[valueAxis].title;
      t.display = true;
      t.text = (t.text ? t.text + " — " : "") + (spec.axis_cut || "axis cut: does not start at zero");
      t.color = "#b3261e";  // the portal's --bad
    }
    return {
      type: spec.type || "bar",
      data: { labels: spec.labels || [], datasets: datasets },
      plugins: spec.segment_labels ? [segmentLabels(spec)] : [],
      options: {
        responsive: true,
        maintainAspectRatio: false,
        animation: { duration: 250 },
        indexAxis: horizontal ? "y" : "x",
        interaction: { mode: "nearest", intersect: false, axis: horizontal ? "y" : "x" },
        plugins: {
          legend: { display: spec.legend !== false, position: "bottom", labels: { boxWidth: 12, usePointStyle: false } },
          tooltip: {
            callbacks: {
              label: function (ctx) {
                var raw = ctx.raw;
                if (Array.isArray(raw)) return ctx.dataset.label + ": " + fmt(spec.format, raw[0]) + " – " + fmt(spec.format, raw[1]);
                return ctx.dataset.label + ": " + fmt(spec.format, horizontal ? ctx.parsed.x : ctx.parsed.y);
              }
            }
          }
        },
        scales: scales
      }
    };
  }

  function draw(root) {
    if (typeof window.Chart === "undefined") return;
    (root || document).querySelectorAll("canvas[data-chart]").forEach(function (canvas) {
      var id = canvas.getAttribute("data-chart");
      var node = document.getElementById(id);
      if (!node) return;
      var spec;
      try { spec = JSON.parse(node.textContent); } catch (e) { return; }
      var existing = window.Chart.getChart(canvas);
      if (existing) existing.destroy();
      window.fpCharts[id] = new window.Chart(canvas, build(spec));
      canvas.setAttribute("data-drawn", "1");
    });
  }

  window.fpDrawCharts = draw;
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", function () { draw(); });
  else draw();
  // After an htmx swap (a finished run's results arriving), draw what came in; an outerHTML swap leaves
  // the event's target detached, so fall back to the whole document.
  document.addEventListener("htmx:afterSettle", function (ev) {
    draw(ev.target && ev.target.isConnected ? ev.target : document);
  });
  // Charts re-flow for paper: resize before printing, restore after.
  window.addEventListener("beforeprint", function () { Object.values(window.fpCharts).forEach(function (c) { c.resize(); }); });
  window.addEventListener("afterprint", function () { Object.values(window.fpCharts).forEach(function (c) { c.resize(); }); });
})();
