/*
 * Live refresh for the awa admin pages. The control (#awa-live-refresh) is rendered hidden, so
 * without JavaScript nothing changes: every page is a plain page that a reload brings up to
 * date. With JavaScript the control appears; at the chosen interval the page fetches its own
 * URL and swaps its data region (#content-main) for the fresh one, without a reload. The
 * interval is remembered in localStorage for every awa page. Refreshes never stack: the next
 * one is scheduled only when the previous one has answered (or failed), so a slow page (a busy
 * database) is asked for once at a time, however short the interval.
 */
(function () {
  "use strict";

  var STORAGE_KEY = "awa_django.live_refresh_s";
  var control = document.getElementById("awa-live-refresh");
  if (!control || !window.fetch || !window.DOMParser) {
    return;
  }
  var select = control.querySelector("select");
  var status = control.querySelector("[data-awa-live-status]");
  var timer = null;
  // True while a refresh's request is unanswered; the answer schedules the next one.
  var inFlight = false;

  function region(doc) {
    return doc.getElementById("content-main");
  }

  function say(text) {
    status.textContent = text;
  }

  // Swapping the region would throw away what the operator is in the middle of: a ticked row,
  // text typed into a search box, a changed choice, a focused field.
  function inUse(node) {
    var active = document.activeElement;
    if (active && active !== node && node.contains(active) &&
        /^(INPUT|SELECT|TEXTAREA|BUTTON)$/.test(active.tagName)) {
      return true;
    }
    var fields = node.querySelectorAll("input, textarea, option");
    for (var i = 0; i < fields.length; i++) {
      var field = fields[i];
      if (field.tagName === "OPTION") {
        if (field.selected !== field.defaultSelected) {
          return true;
        }
      } else if (field.type === "checkbox" || field.type === "radio") {
        if (field.checked !== field.defaultChecked) {
          return true;
        }
      } else if (field.type !== "hidden" && field.value !== field.defaultValue) {
        return true;
      }
    }
    return false;
  }

  function schedule() {
    window.clearTimeout(timer);
    timer = null;
    if (inFlight) {
      return;
    }
    var seconds = Number(select.value);
    if (seconds > 0) {
      timer = window.setTimeout(refresh, seconds * 1000);
    }
  }

  function refresh() {
    timer = null;
    if (inFlight) {
      return;
    }
    // A background tab keeps its schedule but fetches nothing until it is looked at again.
    if (document.hidden) {
      schedule();
      return;
    }
    if (inUse(region(document))) {
      say("paused while you edit");
      schedule();
      return;
    }
    inFlight = true;
    window.fetch(window.location.href, {credentials: "same-origin", cache: "no-store"})
      .then(function (response) {
        // A redirect here is the login page: the session ended.
        if (!response.ok || response.redirected) {
          throw new Error(response.redirected ? "logged out" : "HTTP " + response.status);
        }
        return response.text();
      })
      .then(function (html) {
        var fresh = region(new DOMParser().parseFromString(html, "text/html"));
        var current = region(document);
        if (!fresh) {
          throw new Error("unexpected page");
        }
        if (inUse(current)) {
          say("paused while you edit");
          return;
        }
        current.replaceWith(document.importNode(fresh, true));
        say("updated " + new Date().toLocaleTimeString());
      })
      .catch(function (error) {
        say("refresh failed (" + error.message + "), retrying");
      })
      .then(function () {
        inFlight = false;
        schedule();
      });
  }

  var stored = null;
  try {
    stored = window.localStorage.getItem(STORAGE_KEY);
  } catch (error) {
    // Storage can be disabled; the control then starts at "off" on every page.
  }
  for (var i = 0; i < select.options.length; i++) {
    if (select.options[i].value === stored) {
      select.value = stored;
    }
  }
  select.addEventListener("change", function () {
    try {
      window.localStorage.setItem(STORAGE_KEY, select.value);
    } catch (error) {
      // Not remembered, but the interval still applies to this page.
    }
    say("");
    schedule();
  });
  control.hidden = false;
  schedule();
})();
