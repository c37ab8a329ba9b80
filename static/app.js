// Gatehouse dashboard: live refresh of the overview, the connections list, the
// client keys list, the request list and the usage charts.
// Everything works without this script; it only keeps the numbers, bars and
// sparklines current by polling the JSON endpoint named in data-live-url (same shape
// as GET /api/v1/gates).
(function () {
  "use strict";

  // After a failed save, focus moves to the error summary: the page's first news.
  var summary = document.querySelector("[data-error-summary]");
  if (summary) summary.focus();

  var root = document.querySelector("[data-live-url]");
  if (!root || !window.fetch) return;

  var url = root.getAttribute("data-live-url");
  var interval = parseInt(root.getAttribute("data-live-interval"), 10) || 2000;
  var labels = {};
  try { labels = JSON.parse(root.getAttribute("data-labels") || "{}"); } catch (e) { labels = {}; }
  var sparkW = 120, sparkH = 24, sparkLen = 120;
  var history = []; // [{at, rejected: {key: n}, total: n}]
  var initialRejected = num(root.querySelector('[data-sum="rejected"]'));
  var started = Date.now();
  var failures = 0;
  var timer = null;
  var fragments = {}; // the last HTML set per data-live-fragment name

  function num(el) { return el ? parseInt(el.textContent, 10) || 0 : 0; }
  function label(key, fallback) { return labels[key] || fallback; }
  function setText(el, text) { if (el && el.textContent !== text) el.textContent = text; }

  function ratio(inFlight, cap) { return inFlight + " / " + (cap > 0 ? cap : "–"); }
  function pct(v, cap) { return cap > 0 ? Math.min(100, Math.round(v * 1000 / cap) / 10) + "%" : "0%"; }

  function duration(ms) {
    var s = Math.max(0, ms) / 1000;
    var dec = labels.locale === "pt-BR" ? "," : ".";
    if (s < 10) return s.toFixed(1).replace(".", dec) + " s";
    if (s < 100) return Math.round(s) + " s";
    if (s < 6000) return Math.round(s / 60) + " min";
    return Math.round(s / 3600) + " h";
  }

  function stateOf(g, rejected) {
    if (rejected > 0) return "rejecting";
    if (g.queued > 0) return "queueing";
    var inForce = g.adaptive && g.effectiveCap > 0 ? g.effectiveCap : g.cap;
    if (inForce > 0 && g.inFlight >= inForce) return "full";
    if (g.inFlight > 0) return "busy";
    return "idle";
  }
  var stateIcons = { idle: "○", busy: "◑", full: "●", queueing: "◐", rejecting: "✕" };
  var healthIcons = { ok: "✓", cooling: "◐", "half-open": "◐", disabled: "–" };
  var healthTones = { ok: "good", cooling: "warn", "half-open": "warn", disabled: "off" };

  function points(values, top) {
    if (!values.length) return "";
    if (values.length === 1) values = [values[0], values[0]];
    var step = sparkW / (values.length - 1), out = [];
    for (var i = 0; i < values.length; i++) {
      var y = (sparkH - 1) - values[i] * (sparkH - 2) / top;
      out.push((i * step).toFixed(1) + "," + y.toFixed(1));
    }
    return out.join(" ");
  }
  function series(attr) {
    return attr ? attr.split(",").map(function (s) { return parseInt(s, 10) || 0; }) : [];
  }

  // rejectedSince returns, per gate, timeouts+queueFull added over the last minute.
  function rejectedLastMinute(now, counts) {
    history.push({ at: now, counts: counts });
    while (history.length > 2 && history[1].at <= now - 60000) history.shift();
    var base = history[0], out = {};
    Object.keys(counts).forEach(function (k) {
      out[k] = Math.max(0, counts[k] - (base.counts[k] || 0));
    });
    return out;
  }

  function update(data) {
    var now = Date.now();
    var gates = {}, counts = {};
    (data.gates || []).forEach(function (g) {
      gates[g.key] = g;
      counts[g.key] = (g.timeouts || 0) + (g.queueFull || 0);
    });
    var rejected = rejectedLastMinute(now, counts);

    var inFlight = 0, queued = 0, rejectedTotal = 0;
    (data.gates || []).forEach(function (g) {
      if (g.shadow) return; // counted, never enforced: not in the summary
      queued += g.queued || 0;
      if (g.level === "connection") inFlight += g.inFlight || 0;
      rejectedTotal += rejected[g.key] || 0;
    });
    setText(root.querySelector('[data-sum="inflight"]'), String(inFlight));
    setText(root.querySelector('[data-sum="queued"]'), String(queued));
    // Until a minute of history exists, add what was rejected before the page loaded.
    if (now - started < 60000) rejectedTotal += initialRejected;
    setText(root.querySelector('[data-sum="rejected"]'), String(rejectedTotal));
    var wrap = root.querySelector('[data-sum-wrap="rejected"]');
    if (wrap) wrap.classList.toggle("bad", rejectedTotal > 0);

    root.querySelectorAll("[data-gate]").forEach(function (row) {
      var g = gates[row.getAttribute("data-gate")];
      if (!g) return;
      if (g.shadow) {
        setText(row.querySelector('[data-f="ratio"]'), ratio(g.inFlight, g.cap));
        var sf = row.querySelector('[data-f="fill"]');
        if (sf) sf.style.width = pct(g.inFlight, g.cap);
        var wq = row.querySelector('[data-f="would-queue"]');
        if (wq) {
          var n = g.wouldQueue || 0, single = labels.locale === "pt-BR" ? n <= 1 : n === 1;
          setText(wq, label(single ? "wouldQueue.one" : "wouldQueue.other", "%d").replace("%d", String(n)));
          wq.classList.toggle("warn", n > 0);
        }
        setText(row.querySelector('[data-f="peak"]'), label("peak", "%1").replace("%1", String(g.peakInFlight || 0)));
        return;
      }
      var rej = rejected[g.key] || 0;
      // Until a minute of history exists, add what the server counted before the page loaded.
      if (now - started < 60000) rej += parseInt(row.getAttribute("data-rejected"), 10) || 0;
      var state = stateOf(g, rej);
      row.setAttribute("data-state", state);
      row.classList.remove("state-idle", "state-busy", "state-full", "state-queueing", "state-rejecting");
      row.classList.add("state-" + state);
      row.classList.toggle("uncapped", !(g.cap > 0));
      var inForce = g.adaptive && g.effectiveCap > 0 ? g.effectiveCap : g.cap;
      setText(row.querySelector('[data-f="ratio"]'), g.adaptive && g.effectiveCap > 0
        ? label("learned", "%1 / %2 of %3").replace("%1", String(g.inFlight)).replace("%2", String(g.effectiveCap)).replace("%3", String(g.cap))
        : ratio(g.inFlight, g.cap));
      setText(row.querySelector('[data-f="queued"]'), String(g.queued));
      var fill = row.querySelector('[data-f="fill"]');
      if (fill) fill.style.width = pct(g.inFlight, inForce);
      var pips = row.querySelector('[data-f="pips"]');
      if (pips) pips.style.width = Math.min(g.queued, 30) * 6 + "px";
      setText(row.querySelector('[data-f="state"] .icon'), stateIcons[state]);
      setText(row.querySelector('[data-f="state-text"]'), label("state." + state, state));
      var spark = row.querySelector("svg[data-spark-in]");
      if (spark) {
        var si = series(spark.getAttribute("data-spark-in")).concat([g.inFlight]).slice(-sparkLen);
        var sq = series(spark.getAttribute("data-spark-q")).concat([g.queued]).slice(-sparkLen);
        spark.setAttribute("data-spark-in", si.join(","));
        spark.setAttribute("data-spark-q", sq.join(","));
        var top = Math.max(g.cap || 0, 1, Math.max.apply(null, si), Math.max.apply(null, sq));
        spark.querySelector(".spark-in").setAttribute("points", points(si, top));
        var anyQ = sq.some(function (v) { return v > 0; });
        spark.querySelector(".spark-q").setAttribute("points", anyQ ? points(sq, top) : "");
      }
      var rejEl = row.querySelector('[data-f="rejected"]');
      if (rejEl) {
        rejEl.hidden = rej <= 0;
        var one = labels.locale === "pt-BR" ? rej <= 1 : rej === 1;
        setText(rejEl, label(one ? "rejected.one" : "rejected.other", "%d").replace("%d", String(rej)));
      }
      row.setAttribute("data-queued", String(g.queued));
    });

    // The bottleneck of each connection: the gate with the most waiters.
    root.querySelectorAll("[data-block]").forEach(function (block) {
      var best = null, most = 0;
      block.querySelectorAll("[data-gate]").forEach(function (row) {
        var q = parseInt(row.getAttribute("data-queued"), 10) || 0;
        if (q > most) { most = q; best = row; }
      });
      block.querySelectorAll("[data-gate]").forEach(function (row) {
        var mark = row.querySelector('[data-f="bottleneck"]');
        if (mark) mark.hidden = row !== best;
      });
    });

    // The connections list: each row's load, as the server renders it — in flight
    // on the connection gate, queued on any of the connection's gates.
    root.querySelectorAll("tr[data-conn]").forEach(function (row) {
      var load = (data.connectionLoad || {})[row.getAttribute("data-conn")] || {};
      var inF = load.inFlight || 0, q = load.queued || 0;
      setText(row.querySelector('[data-live-conn="inflight"]'), String(inF));
      var qc = row.querySelector('[data-live-conn="queued"]');
      setText(qc, String(q));
      if (qc) qc.classList.toggle("tone-warn", q > 0);
    });

    // The client keys list: each key's load on this replica, as the server renders it.
    var clients = {};
    (data.clients || []).forEach(function (c) { clients[c.id] = c; });
    root.querySelectorAll("tr[data-client]").forEach(function (row) {
      var c = clients[row.getAttribute("data-client")];
      if (!c) return; // not in the gateway's config yet: keep what the server drew
      var q = c.queued || 0;
      setText(row.querySelector('[data-live-client="inflight"]'), ratio(c.inFlight || 0, c.cap || 0));
      var qc = row.querySelector('[data-live-client="queued"]');
      setText(qc, String(q));
      if (qc) qc.classList.toggle("tone-warn", q > 0);
    });

    // The overview's request-log parts (errors by code, volume, keys), drawn by the
    // server: each replaces the content of its data-live-fragment element.
    var frags = data.fragments || {};
    root.querySelectorAll("[data-live-fragment]").forEach(function (el) {
      var html = frags[el.getAttribute("data-live-fragment")];
      if (typeof html !== "string" || fragments[el.getAttribute("data-live-fragment")] === html) return;
      fragments[el.getAttribute("data-live-fragment")] = html;
      // A table someone opened ("The numbers") stays open when its part is redrawn.
      var open = [];
      el.querySelectorAll("details").forEach(function (d, i) { if (d.open) open.push(i); });
      el.innerHTML = html;
      var details = el.querySelectorAll("details");
      open.forEach(function (i) { if (details[i]) details[i].open = true; });
    });

    (data.connections || []).forEach(function (c) {
      var block = root.querySelector('[data-conn="' + (window.CSS && CSS.escape ? CSS.escape(c.id) : c.id) + '"]');
      if (!block) return;
      var h = block.querySelector("[data-health]");
      if (!h || h.getAttribute("data-health") === "disabled") return;
      var health = c.health || "ok";
      h.setAttribute("data-health", health);
      h.className = "health tone-" + (healthTones[health] || "bad");
      setText(h.querySelector('[data-f="health-icon"]'), healthIcons[health] || "✕");
      var word = label("health." + health, health);
      var left = c.until ? Date.parse(c.until) - now : 0;
      if (left > 0) word = label("for", "%1 %2").replace("%1", word).replace("%2", duration(left));
      setText(h.querySelector('[data-f="health-text"]'), word);
      setText(h.querySelector('[data-f="health-reason"]'), c.reason && health !== "ok" ? "(" + c.reason + ")" : "");
    });
  }

  // status shows why the numbers stopped: the session ended (the server answered
  // 401 or 403: sign in again) or the server did not answer.
  function status(why) {
    var el = root.querySelector("[data-live-status]");
    if (!el) return;
    el.hidden = !why;
    if (!why) return;
    el.setAttribute("data-why", why);
    if (why === "signed-out") {
      el.textContent = label("signedOut", "") + " ";
      var a = document.createElement("a");
      a.href = "/login?next=" + encodeURIComponent(location.pathname);
      a.textContent = label("signIn", "");
      el.appendChild(a);
    } else {
      setText(el, label("stale", ""));
    }
  }

  function tick() {
    timer = null;
    if (document.hidden) return;
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (r.status === 401 || r.status === 403) { failures = Infinity; return null; }
        if (!r.ok) throw new Error("status " + r.status);
        return r.json();
      })
      .then(function (data) {
        if (data === null) { status("signed-out"); return; }
        failures = 0; status(""); update(data);
      })
      .catch(function () { failures++; status("stale"); })
      .then(schedule);
  }

  function schedule() {
    if (timer !== null || failures === Infinity) return;
    // back off while the server does not answer, up to 30 s
    var wait = Math.min(30000, interval * Math.pow(2, Math.min(failures, 4)));
    timer = setTimeout(tick, wait);
  }

  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && timer === null) tick();
  });
  schedule();
})();
