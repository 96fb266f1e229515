// nxdns dashboard, groups page: each button with data-switch turns one
// service or one engine's safe search of a group on, off, or back to the
// configuration (POST /api/filter/groups/switch with the page's CSRF
// token), says what happened in the status line, and reloads the page to
// show the switches in force. Text from the server goes in with
// textContent only.
"use strict";
(function () {
  var csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  var status = document.getElementById("status");

  function say(text, bad, busy) {
    if (!status) return;
    status.textContent = text;
    status.className = busy ? "status busy" : bad ? "status err" : "status ok";
  }

  document.addEventListener("click", function (ev) {
    var b = ev.target.closest("button[data-switch]");
    if (!b) return;
    ev.preventDefault();
    var params = new URLSearchParams();
    params.set("group", b.dataset.group);
    params.set(b.dataset.switch, b.dataset.id);
    params.set("state", b.dataset.state);
    say("…", false, true);
    fetch("/api/filter/groups/switch?" + params.toString(), {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-CSRF-Token": csrf },
    }).then(function (resp) {
      return resp.text().then(function (body) {
        if (resp.status === 401) {
          window.location = "/login?next=" + encodeURIComponent(location.pathname);
          return;
        }
        var msg = body.trim().slice(0, 300);
        try {
          var j = JSON.parse(body);
          if (j.error) msg = j.error;
          else msg = j.group + ": " + (j.service || j.safe_search) + " " + j.state + (j.changed ? "" : " (no change)") +
            (j.save_error ? "; not saved, a restart forgets it: " + j.save_error : "");
        } catch (e) {}
        say((resp.ok ? "Done: " : "Failed (" + resp.status + "): ") + msg, !resp.ok);
        if (resp.ok) window.location.reload();
      });
    }).catch(function (e) { say("Failed: " + e, true); });
  });
})();
