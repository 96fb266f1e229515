// nxdns dashboard: the one-click actions. Each button with data-post, or
// form with data-action, calls that endpoint with its data-name,
// data-client and data-minutes (or its fields) as query parameters and the
// page's CSRF token in X-CSRF-Token, then says what happened. An endpoint
// this build lacks (404) is reported, never an error page. data-confirm
// asks first; data-reload reloads the page after a success (the lists of
// allowed names). A check that finds a name blocked offers to allow it.
// Every text from the server goes in with textContent, never as markup,
// except the status banner and the live query log, which are this
// server's own rendered (escaped) HTML fetched from the same origin.
// Answers are shown in words (a check as facts, a cache entry as a
// table), never as raw JSON (docs/dashboard.md).
"use strict";
(function () {
  var csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  var status = document.getElementById("status");
  var result = document.getElementById("result");
  var actions = document.getElementById("result-actions");

  // describe turns a JSON answer into a sentence.
  function describe(j) {
    if (j.error) return j.error;
    if (j.explanation) return j.name + ": " + j.explanation;
    if (typeof j.allowed === "boolean" && j.name) {
      var s = j.allowed ? j.name + " and the names below it are allowed now" : j.name + " is no longer allowed";
      if (!j.changed) s += " (no change)";
      if (j.save_error) s += "; not saved, a restart forgets it: " + j.save_error;
      return s;
    }
    if (typeof j.blocked === "boolean" && typeof j.changed === "boolean" && j.name) {
      var t = j.blocked ? j.name + " and the names below it are blocked now, for every device" : j.name + " is no longer blocked from the dashboard";
      if (!j.changed) t += " (no change)";
      if (j.save_error) t += "; not saved, a restart forgets it: " + j.save_error;
      return t;
    }
    if (typeof j.flushed === "number") return j.flushed + " cached answers flushed";
    if (typeof j.paused === "boolean") return j.paused ? "Blocking paused until " + new Date(j.until).toLocaleTimeString() : "Blocking resumed";
    if (Array.isArray(j.entries)) return j.entries.length + " cached entries";
    if (Array.isArray(j.lists)) return j.lists.map(function (l) { return l.name + (l.ok ? ": " + l.rules + " rules" : ": failed, the last good copy is kept (" + l.error + ")"); }).join("; ") || "no list has a url";
    if (typeof j.changed === "boolean" && j.name && j.allowed === undefined && j.blocked === undefined && !j.until) return "DNSSEC validation of " + j.name + " and the names below it is back on" + (j.changed ? "" : " (no change)") + (j.save_error ? "; not saved: " + j.save_error : "");
    if (j.until && j.name) return "DNSSEC validation of " + j.name + " and the names below it stops until " + new Date(j.until).toLocaleString() + (j.save_error ? "; not saved: " + j.save_error : "");
    return null;
  }

  // el makes an element with text (never markup).
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  // show renders a JSON answer into the result box in words: a check as
  // a list of facts, cache entries as a table; anything else is said by
  // the status line alone.
  function show(j) {
    if (!result) return;
    result.textContent = "";
    if (!j) return;
    if (j.explanation) {
      var dl = el("dl", null, "facts");
      var facts = [["Name", j.name], ["Device", j.client], ["Group", j.group], ["Blocked", j.blocked ? "yes" : "no"],
        ["List", j.list], ["Rule", j.rule], ["Paused until", j.paused ? new Date(j.paused_until).toLocaleString() : ""]];
      facts.forEach(function (f) {
        if (f[1] === undefined || f[1] === "") return;
        dl.appendChild(el("dt", f[0]));
        dl.appendChild(el("dd", f[1], "name"));
      });
      result.appendChild(dl);
    } else if (Array.isArray(j.entries)) {
      if (j.entries.length === 0) { result.appendChild(el("p", "Nothing is cached for this name.")); return; }
      var t = el("table");
      var head = el("tr");
      ["Type", "Answer", "State", "Age", "TTL left", "From"].forEach(function (h) { head.appendChild(el("th", h)); });
      t.appendChild(head);
      j.entries.forEach(function (e) {
        var tr = el("tr");
        [e.type + (e.do ? " (DO)" : "") + (e.cd ? " (CD)" : ""), e.answer || e.rcode, e.state,
         Math.round(e.age_s) + " s", Math.round(e.ttl_left_s) + " s", e.origin + (e.via ? " via " + e.via : "")].forEach(function (v) {
          tr.appendChild(el("td", v, "name"));
        });
        t.appendChild(tr);
      });
      result.appendChild(t);
    }
  }

  // offerAllow puts an "allow" button for a blocked name under the status.
  function offerAllow(name) {
    if (!actions) return;
    var b = document.createElement("button");
    b.dataset.post = "/api/filter/allow";
    b.dataset.name = name;
    b.textContent = "Allow " + name;
    actions.appendChild(b);
  }

  // say shows text in the status line: "status busy" while a call runs,
  // then "status ok" or "status err" (tests wait for those).
  function say(text, bad, busy) {
    if (!status) return;
    status.textContent = text;
    status.className = busy ? "status busy" : bad ? "status err" : "status ok";
  }

  function call(method, path, params, reload) {
    var qs = params.toString();
    var url = path + (qs ? "?" + qs : "");
    say("…", false, true);
    if (actions) actions.textContent = "";
    fetch(url, {
      method: method,
      credentials: "same-origin",
      headers: method === "GET" ? {} : { "X-CSRF-Token": csrf },
    }).then(function (resp) {
      return resp.text().then(function (body) {
        if (resp.status === 404) {
          say("This nxdns has no " + path + " endpoint: the action is not available.", true);
          return;
        }
        if (resp.status === 401) {
          window.location = "/login?next=" + encodeURIComponent(location.pathname + location.search);
          return;
        }
        var msg = body.trim().slice(0, 300);
        var j = null;
        try { j = JSON.parse(body); msg = describe(j) || msg; } catch (e) {}
        say((resp.ok ? "Done: " : "Failed (" + resp.status + "): ") + msg, !resp.ok);
        show(resp.ok ? j : null);
        if (resp.ok && j && j.explanation && j.blocked === true && j.name) offerAllow(j.name);
        if (resp.ok && reload) window.location.reload();
      });
    }).catch(function (e) { say("Failed: " + e, true); });
  }

  document.addEventListener("click", function (ev) {
    var b = ev.target.closest("button[data-post]");
    if (!b) return;
    ev.preventDefault();
    if (b.dataset.confirm && !window.confirm(b.dataset.confirm)) return;
    var params = new URLSearchParams();
    ["name", "client", "minutes"].forEach(function (k) {
      if (b.dataset[k] !== undefined) params.set(k, b.dataset[k]);
    });
    call(b.dataset.method || "POST", b.dataset.post, params, !!b.dataset.reload);
  });

  document.addEventListener("submit", function (ev) {
    var f = ev.target.closest("form[data-action]");
    if (!f) return;
    ev.preventDefault();
    var params = new URLSearchParams();
    new FormData(f).forEach(function (v, k) { if (v !== "") params.set(k, v); });
    call(f.dataset.method || "POST", f.dataset.action, params, !!f.dataset.reload);
  });

  // One actions menu open at a time.
  document.addEventListener("toggle", function (ev) {
    var d = ev.target;
    if (!d.open || !d.classList || !d.classList.contains("menu")) return;
    document.querySelectorAll("details.menu[open]").forEach(function (o) { if (o !== d) o.open = false; });
  }, true);

  // The status banner follows the server every bannerPoll while the page
  // is open (and visible), so a failure shows, and goes, without a reload.
  var banner = document.getElementById("banner");
  var bannerPoll = 10000;
  function pollBanner() {
    if (document.hidden) return;
    fetch("/status/banner", { credentials: "same-origin" }).then(function (resp) {
      if (!resp.ok) return null;
      return resp.text();
    }).then(function (html) {
      if (html === null || html === undefined || !banner) return;
      banner.innerHTML = html;
      banner.className = "banner" + (banner.querySelector("p.error") ? " error" : "");
    }).catch(function () {});
  }
  if (banner) setInterval(pollBanner, bannerPoll);

  // The live query log: with "Live" ticked, the log is fetched again
  // every livePoll (this page's own HTML, its rows swapped in), for at
  // most liveMax polls, never while hidden or while a menu is open.
  var live = document.getElementById("live");
  var livePoll = 3000, liveMax = 600, timer = null, polls = 0;
  function refreshLog() {
    if (document.hidden || document.querySelector("details.menu[open]")) return;
    if (++polls > liveMax) { live.checked = false; stopLive(); say("Live updates stopped after " + Math.round(liveMax * livePoll / 60000) + " minutes: tick Live again to go on."); return; }
    fetch(location.href, { credentials: "same-origin" }).then(function (resp) { return resp.ok ? resp.text() : null; }).then(function (html) {
      if (!html) return;
      var doc = new DOMParser().parseFromString(html, "text/html");
      var fresh = doc.getElementById("log"), cur = document.getElementById("log");
      if (fresh && cur) cur.replaceWith(document.importNode(fresh, true));
    }).catch(function () {});
  }
  function stopLive() { if (timer) clearInterval(timer); timer = null; }
  if (live) live.addEventListener("change", function () {
    stopLive();
    if (live.checked) { polls = 0; refreshLog(); timer = setInterval(refreshLog, livePoll); }
  });
})();
