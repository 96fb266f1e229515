// nxdns dashboard: the one-click actions. Each button with data-post, or
// form with data-action, calls that endpoint with its data-name,
// data-client and data-minutes (or its fields) as query parameters and the
// page's CSRF token in X-CSRF-Token, then says what happened. An endpoint
// this build lacks (404) is reported, never an error page. data-confirm
// asks first; data-reload reloads the page after a success (the lists of
// allowed names). A check that finds a name blocked offers to allow it.
// Every text from the server goes in with textContent, never as markup.
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
    if (typeof j.flushed === "number") return j.flushed + " cached answers flushed";
    if (j.until && j.name) return "DNSSEC validation of " + j.name + " and the names below it stops until " + new Date(j.until).toLocaleString() + (j.save_error ? "; not saved: " + j.save_error : "");
    return null;
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
        if (result) result.textContent = body;
        if (resp.ok && j && j.blocked === true && j.name) offerAllow(j.name);
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
})();
