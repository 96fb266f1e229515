// nxdns dashboard: the one-click actions. Each button with data-post, or
// form with data-action, calls that endpoint with its data-name,
// data-client and data-minutes (or its fields) as query parameters and the
// page's CSRF token in X-CSRF-Token, then says what happened. An endpoint
// this build lacks (404) is reported, never an error page.
"use strict";
(function () {
  var csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  var status = document.getElementById("status");
  var result = document.getElementById("result");

  function say(text, bad) {
    if (!status) return;
    status.textContent = text;
    status.className = bad ? "status err" : "status ok";
  }

  function call(method, path, params) {
    var qs = params.toString();
    var url = path + (qs ? "?" + qs : "");
    say("…");
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
        try { var j = JSON.parse(body); msg = j.error || j.message || msg; } catch (e) {}
        say((resp.ok ? "Done: " : "Failed (" + resp.status + "): ") + msg, !resp.ok);
        if (result) result.textContent = body;
      });
    }).catch(function (e) { say("Failed: " + e, true); });
  }

  document.addEventListener("click", function (ev) {
    var b = ev.target.closest("button[data-post]");
    if (!b) return;
    ev.preventDefault();
    var params = new URLSearchParams();
    ["name", "client", "minutes"].forEach(function (k) {
      if (b.dataset[k] !== undefined) params.set(k, b.dataset[k]);
    });
    call(b.dataset.method || "POST", b.dataset.post, params);
  });

  document.addEventListener("submit", function (ev) {
    var f = ev.target.closest("form[data-action]");
    if (!f) return;
    ev.preventDefault();
    call(f.dataset.method || "POST", f.dataset.action, new URLSearchParams(new FormData(f)));
  });
})();
