/* The series chart: uPlot (vendor/uPlot.iife.min.js, MIT) drawing a series' data file
   (ci/site/data.py). Hover shows a run's value, spread, commit and subject; a click opens the
   commit; dragging zooms and the buttons pick a range; "Compare parameter values" overlays the
   benchmark's other parameter points. Nothing comes from the network: the data files are scripts
   beside the pages, so a site opened from disk works too. Text from the store is inserted with
   textContent only. */
(function () {
  "use strict";
  var api = window.raggedDashboard = window.raggedDashboard || {};
  var store = {}, waiting = {}, requested = {};
  api.charts = [];

  /* A data file calls this with its key and payload. */
  api.put = function (key, value) {
    store[key] = value;
    (waiting[key] || []).forEach(function (done) { done(value); });
    delete waiting[key];
  };

  function load(src, key) {
    return new Promise(function (resolve, reject) {
      if (Object.prototype.hasOwnProperty.call(store, key)) { resolve(store[key]); return; }
      (waiting[key] = waiting[key] || []).push(resolve);
      if (requested[key]) return;
      requested[key] = true;
      var s = document.createElement("script");
      s.src = src;
      s.onerror = function () { reject(new Error("could not load " + src)); };
      document.head.appendChild(s);
    });
  }

  /* ---- the value formatter: a port of ci/format.py `format_value`, tested against it ------------ */
  var TIME = [[1, "s"], [1e-3, "ms"], [1e-6, "\u00b5s"], [1e-9, "ns"]];
  var BYTES = [[1073741824, "GiB"], [1048576, "MiB"], [1024, "KiB"], [1, "B"]];

  function strip(s) { return s.indexOf(".") >= 0 ? s.replace(/0+$/, "").replace(/\.$/, "") : s; }

  /* Python's format(x, ".<p>g"). (Exact binary ties round half up here and half to even in Python:
     measured values are never exact ties.) */
  function fmtG(x, p) {
    if (x === 0) return "0";
    var parts = x.toExponential(p - 1).split("e"), e = Number(parts[1]);
    if (e < -4 || e >= p) {
      var a = Math.abs(e);
      return strip(parts[0]) + "e" + (e < 0 ? "-" : "+") + (a < 10 ? "0" : "") + a;
    }
    return strip(x.toFixed(Math.max(p - 1 - e, 0)));
  }

  /* The y axis' tick labels, in the axis' unit: 4 significant digits, more where that would print two
     ticks alike (five ticks of a one-run series all read "20.01"), and a thousands prefix from 10^4 on
     ("3300000000" overran the 72 px gutter and the axis title on memory counts in a unit of their own). */
  var PREFIX = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  function tick(v, p) {
    var a = Math.abs(v);
    for (var i = 0; a >= 1e4 && i < PREFIX.length; i++) {
      if (a >= PREFIX[i][0]) return String(Number((v / PREFIX[i][0]).toPrecision(p))) + PREFIX[i][1];
    }
    return String(Number(v.toPrecision(p)));
  }
  api.tickLabels = function (splits) {
    var distinct = new Set(splits).size, out = [];
    for (var p = 4; p <= 15; p++) {
      out = splits.map(function (v) { return v === null || !isFinite(v) ? "" : tick(v, p); });
      if (new Set(out).size >= distinct) break;
    }
    return out;
  };

  api.formatValue = function (v, unit, missing) {
    if (v === null || v === undefined || !isFinite(v)) return missing === undefined ? "n/a" : missing;
    var scales = unit === "seconds" ? TIME : unit === "bytes" ? BYTES : null;
    if (scales) {
      var i = 0;
      while (i < scales.length - 1 && !(Math.abs(v) >= scales[i][0])) i++;
      var t = fmtG(v / scales[i][0], 3);
      if (i > 0 && Math.abs(Number(t)) >= 1000) { i--; t = fmtG(v / scales[i][0], 3); }
      return t + " " + scales[i][1];
    }
    if (Math.abs(v) >= 1000) return (v.toFixed(0).replace(/\B(?=(\d{3})+(?!\d))/g, ",") + " " + unit).replace(/\s+$/, "");
    return (fmtG(v, 4) + " " + unit).replace(/\s+$/, "");
  };

  /* ---- the chart ---------------------------------------------------------------------------- */
  var COLORS = ["#8250df", "#bf3989", "#1a7f37", "#bc4c00", "#0550ae", "#6e7781", "#953800", "#116329"];
  var MARK_COLOR = { reg: "#cf222e", suspect: "#bc4c00", withdrawn: "#656d76", confirmed: "#cf222e",
                     ack: "#9a6700", fixed: "#656d76", cp: "#656d76" };

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function Chart(box, commits, series) {
    this.box = box;
    this.root = box.getAttribute("data-root");
    this.commits = commits;
    this.main = series;
    this.overlays = [];  /* {slug, label, data} */
    this.plot = box.querySelector(".chart-plot");
    this.tip = box.querySelector(".chart-tip");
    this.marksAt = {};
    var self = this;
    series.marks.forEach(function (m) { (self.marksAt[m[0]] = self.marksAt[m[0]] || []).push(m); });
    var tools = box.querySelector(".chart-tools");
    if (tools) tools.hidden = false;  /* before drawing: uPlot measures the plot's place on the page */
    this.draw();
    if (tools) {
      tools.querySelectorAll("button[data-range]").forEach(function (b) {
        b.addEventListener("click", function () { self.range(Number(b.getAttribute("data-range"))); });
      });
      var details = tools.querySelector("details.overlay");
      if (details) details.addEventListener("toggle", function () { if (details.open) self.overlayList(); });
    }
    window.addEventListener("resize", function () { self.u.setSize(self.size()); });
  }

  Chart.prototype.size = function () {
    return { width: Math.max(this.plot.clientWidth, 300), height: 340 };
  };

  Chart.prototype.commitHref = function (x) {
    var page = this.commits.page[String(x)] || this.commits.sha[x];
    return this.root + "commit/" + page + ".html";
  };

  /* The uPlot data: one x per commit in the union of the drawn series, null where a series has no run. */
  Chart.prototype.columns = function () {
    var all = [this.main].concat(this.overlays.map(function (o) { return o.data; }));
    var seen = {}, xs = [];
    all.forEach(function (d) { d.x.forEach(function (x) { if (!seen[x]) { seen[x] = true; xs.push(x); } }); });
    xs.sort(function (a, b) { return a - b; });
    var at = {};
    xs.forEach(function (x, i) { at[x] = i; });
    function column(d, key, div) {
      var out = new Array(xs.length).fill(null), scale = d.div / div;
      d.x.forEach(function (x, i) { var v = d[key][i]; out[at[x]] = v === null ? null : v * scale; });
      return out;
    }
    var div = this.main.div;
    var cols = [xs, column(this.main, "v", div), column(this.main, "lo", div), column(this.main, "hi", div)];
    this.overlays.forEach(function (o) { cols.push(column(o.data, "v", div)); });
    this.index = {};
    var self = this;
    all.forEach(function (d, k) {
      var m = {};
      d.x.forEach(function (x, i) { m[x] = i; });
      self.index[k] = m;
    });
    return cols;
  };

  Chart.prototype.draw = function () {
    var self = this, d = this.main, commits = this.commits;
    if (this.u) this.u.destroy();
    var series = [
      {},
      { label: d.value, stroke: "#0969da", width: 1.5, points: { show: true, size: 5, fill: "#0969da" } },
      { label: "q25", stroke: "transparent", points: { show: false } },
      { label: "q75", stroke: "transparent", points: { show: false } },
    ];
    this.overlays.forEach(function (o, i) {
      series.push({ label: o.label, stroke: COLORS[i % COLORS.length], width: 1.2,
                    points: { show: true, size: 4, fill: COLORS[i % COLORS.length] } });
    });
    var gate = d.gate ? d.gate[0] : null;
    var opts = {
      width: this.size().width, height: this.size().height,
      legend: { show: false },
      cursor: { drag: { x: true, y: false }, points: { size: 9 } },
      scales: {
        /* half a commit of margin: the newest run is not on the plot's edge, where it is hard to hover */
        x: { time: false, range: function (u, lo, hi) { return [lo - 0.5, hi + 0.5]; } },
        y: { range: function (u, lo, hi) {
          if (gate !== null) { lo = Math.min(lo, gate); hi = Math.max(hi, gate); }
          if (lo === null || hi === null) return [0, 1];
          var pad = (hi - lo) * 0.08 || Math.abs(hi) * 0.05 || 1;
          return [lo - pad, hi + pad];
        } },
      },
      bands: [{ series: [3, 2], fill: "rgba(9,105,218,0.14)" }],
      axes: [
        { label: "commit (oldest \u2192 newest)", space: 90, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000],
          values: function (u, splits) {
            return splits.map(function (x) { return Number.isInteger(x) && commits.sha[x] ? commits.sha[x].slice(0, 7) : ""; });
          } },
        { label: d.value + " (" + d.label + ")", size: 72,
          values: function (u, splits) { return api.tickLabels(splits); } },
      ],
      series: series,
      hooks: {
        setCursor: [function (u) { self.hover(u); }],
        draw: [function (u) { self.drawMarks(u); }],
      },
    };
    this.u = new uPlot(opts, this.columns(), this.plot);
    var downX = null;
    this.u.over.addEventListener("mousedown", function (e) { downX = e.clientX; });
    this.u.over.addEventListener("click", function (e) {
      var idx = self.u.cursor.idx;
      if (idx === null || idx === undefined || (downX !== null && Math.abs(e.clientX - downX) > 3)) return;
      window.location.href = self.commitHref(self.u.data[0][idx]);
    });
    this.u.over.addEventListener("mouseleave", function () { self.tip.hidden = true; });
    api.charts = api.charts.filter(function (c) { return c.chart !== self; });
    api.charts.push({ chart: this, uplot: this.u });
    var colour = {};
    this.overlays.forEach(function (o, i) { colour[o.slug] = COLORS[i % COLORS.length]; });
    this.box.querySelectorAll(".overlay-list label").forEach(function (label) {
      var box = label.querySelector("input[type=checkbox]"), swatch = label.querySelector(".swatch");
      if (box && swatch) swatch.style.background = colour[box.value] || "transparent";
    });
  };

  Chart.prototype.range = function (n) {
    var xs = this.u.data[0];
    if (!xs.length) return;
    var hi = xs[xs.length - 1], lo = n > 0 ? Math.max(xs[0], hi - n + 1) : xs[0];
    this.u.setScale("x", { min: lo, max: hi });  /* the scale's range adds the half-commit margins */
  };

  Chart.prototype.hover = function (u) {
    var idx = u.cursor.idx, tip = this.tip;
    if (idx === null || idx === undefined || u.cursor.left < 0) { tip.hidden = true; return; }
    var x = u.data[0][idx], d = this.main, unit = d.unit, f = api.formatValue;
    tip.textContent = "";
    var i = this.index[0][x];
    if (i !== undefined && d.v[i] !== null) {
      var n = typeof d.n === "number" ? d.n : d.n[i];
      var lo = d.lo[i], hi = d.hi[i];
      var spread = n > 1 && lo !== null && hi !== null ? "IQR " + f(lo * d.div, unit) + " \u2013 " + f(hi * d.div, unit) + ", " : "";
      tip.appendChild(el("div", "tip-value", f(d.v[i] * d.div, unit)));
      tip.appendChild(el("div", "tip-spread", spread + "n = " + n));
    } else {
      tip.appendChild(el("div", "tip-value", "no run of this series"));
    }
    var self = this;
    this.overlays.forEach(function (o, k) {
      var j = self.index[k + 1][x];
      var v = j === undefined ? null : o.data.v[j];
      tip.appendChild(el("div", "tip-overlay", o.label + ": " + f(v === null ? null : v * o.data.div, o.data.unit, "\u2014")));
    });
    var c = this.commits;
    tip.appendChild(el("div", "tip-commit", c.sha[x].slice(0, 10) + (c.time[x] ? " \u00b7 " + c.time[x] : "")));
    tip.appendChild(el("div", "tip-sub", c.subject[x]));
    (this.marksAt[x] || []).forEach(function (m) { tip.appendChild(el("div", "tip-mark", m[2])); });
    tip.hidden = false;
    var left = u.over.offsetLeft + u.cursor.left + 14, top = u.over.offsetTop + u.cursor.top + 14;
    var width = tip.offsetWidth, boxWidth = this.box.clientWidth;
    if (left + width > boxWidth) left = Math.max(0, u.over.offsetLeft + u.cursor.left - width - 14);
    tip.style.left = left + "px";
    tip.style.top = top + "px";
  };

  Chart.prototype.drawMarks = function (u) {
    var ctx = u.ctx, b = u.bbox, dpr = window.devicePixelRatio || 1, d = this.main;
    ctx.save();
    if (d.gate) {
      var gy = u.valToPos(d.gate[0], "y", true);
      ctx.strokeStyle = "#cf222e"; ctx.setLineDash([6 * dpr, 4 * dpr]); ctx.lineWidth = dpr;
      ctx.beginPath(); ctx.moveTo(b.left, gy); ctx.lineTo(b.left + b.width, gy); ctx.stroke();
    }
    d.marks.forEach(function (m) {
      if (m[0] < u.scales.x.min || m[0] > u.scales.x.max) return;
      var cx = u.valToPos(m[0], "x", true), color = MARK_COLOR[m[1]] || "#656d76";
      if (m[1] === "cp") {
        ctx.strokeStyle = color; ctx.setLineDash([3 * dpr, 3 * dpr]); ctx.lineWidth = dpr;
        ctx.beginPath(); ctx.moveTo(cx, b.top); ctx.lineTo(cx, b.top + b.height); ctx.stroke();
        return;
      }
      ctx.setLineDash([]);
      ctx.beginPath();
      ctx.moveTo(cx - 6 * dpr, b.top); ctx.lineTo(cx + 6 * dpr, b.top); ctx.lineTo(cx, b.top + 11 * dpr); ctx.closePath();
      if (m[1] === "withdrawn" || m[1] === "confirmed") {
        ctx.strokeStyle = color; ctx.lineWidth = 1.5 * dpr; ctx.stroke();
      } else {
        ctx.fillStyle = color; ctx.fill();
      }
    });
    ctx.restore();
  };

  /* The benchmark's other parameter points on this machine, as checkboxes. */
  Chart.prototype.overlayList = function () {
    var self = this, list = this.box.querySelector(".overlay-list"), key = this.box.getAttribute("data-params");
    if (list.getAttribute("data-done")) return;
    list.setAttribute("data-done", "1");
    load(this.root + "data/params/" + key + ".js", key).then(function (p) {
      var own = self.box.getAttribute("data-series");
      var others = p.series.filter(function (s) { return s[0] !== own; });
      if (!others.length) { list.textContent = "This benchmark has no other parameter values on this machine."; return; }
      var filter = null;
      if (others.length > 12) {
        filter = el("input");
        filter.type = "search";
        filter.placeholder = "filter " + others.length + " parameter values";
        list.appendChild(filter);
      }
      var labels = others.map(function (s) {
        var label = el("label"), box = el("input");
        box.type = "checkbox";
        box.value = s[0];
        label.appendChild(box);
        label.appendChild(el("span", "swatch", ""));  /* the line's colour once drawn: the chart has no legend */
        label.appendChild(document.createTextNode(" " + (s[1] || "(no parameters)")));
        box.addEventListener("change", function () { self.toggle(s[0], s[1], box.checked); });
        list.appendChild(label);
        return label;
      });
      if (filter) filter.addEventListener("input", function () {
        var q = filter.value.toLowerCase();
        labels.forEach(function (l) { l.hidden = q && l.textContent.toLowerCase().indexOf(q) < 0; });
      });
    }, function (e) { list.textContent = e.message; });
  };

  Chart.prototype.toggle = function (slug, label, on) {
    var self = this;
    if (!on) {
      this.overlays = this.overlays.filter(function (o) { return o.slug !== slug; });
      this.draw();
      return;
    }
    load(this.root + "data/series/" + slug + ".js", slug).then(function (d) {
      if (self.overlays.some(function (o) { return o.slug === slug; })) return;
      self.overlays.push({ slug: slug, label: label, data: d });
      self.draw();
    });
  };

  function start() {
    if (typeof uPlot === "undefined") return;
    document.querySelectorAll("figure.chart-box[data-series]").forEach(function (box) {
      var root = box.getAttribute("data-root"), slug = box.getAttribute("data-series");
      Promise.all([load(root + "data/commits.js", "commits"), load(root + "data/series/" + slug + ".js", slug)])
        .then(function (r) { new Chart(box, r[0], r[1]); })
        .catch(function (e) { box.querySelector(".chart-plot").textContent = "The chart could not be drawn: " + e.message; });
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
