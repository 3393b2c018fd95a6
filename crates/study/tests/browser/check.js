// The browser check of tcplab's HTML report: injected before </body> of a copy of the page by
// tests/browser/mod.rs, it measures the page as Chromium laid it out once everything loaded and
// writes what it found as JSON into a new `pre` element with id tcplab-check (read back
// from `chromium --dump-dom`). It only measures; the Rust side decides what fails.
(function () {
  "use strict";
  // The palette's data colours (crates/report/src/plot/mod.rs), lowercase; black is left out
  // because the axes are black too.
  var DATA = ["#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#882255"];
  var CLIPS = ["auto", "scroll", "hidden", "clip"];

  function text(el) {
    return (el.textContent || "").replace(/\s+/g, " ").trim();
  }

  function describe(el) {
    var r = el.getBoundingClientRect();
    return {
      tag: el.tagName.toLowerCase(),
      id: el.id || "",
      class: el.getAttribute("class") || "",
      text: text(el).slice(0, 60),
      left: Math.round(r.left),
      right: Math.round(r.right),
      width: Math.round(r.width),
    };
  }

  function clips(el) {
    return CLIPS.indexOf(getComputedStyle(el).overflowX) >= 0;
  }

  // Elements whose right edge is past the viewport, unless a scrolling or clipping ancestor
  // that itself fits holds them (a wide table in its scroll box); such boxes are listed apart.
  function overflow(limit) {
    var wide = [];
    var boxes = [];
    var all = document.body.getElementsByTagName("*");
    for (var i = 0; i < all.length; i++) {
      var el = all[i];
      if (el.getBoundingClientRect().right <= limit) continue;
      var held = null;
      for (var a = el.parentElement; a && a !== document.documentElement; a = a.parentElement) {
        if (clips(a) && a.getBoundingClientRect().right <= limit) {
          held = a;
          break;
        }
      }
      if (held === null) {
        wide.push(describe(el));
      } else if (boxes.indexOf(held) < 0) {
        boxes.push(held);
      }
    }
    var scrolled = boxes.map(function (b) {
      var d = describe(b);
      d.scroll_width = b.scrollWidth;
      d.client_width = b.clientWidth;
      return d;
    });
    return { wide: wide, scrolled: scrolled };
  }

  function hasDataColour(el) {
    var s = (el.getAttribute("stroke") || "").toLowerCase();
    var f = (el.getAttribute("fill") || "").toLowerCase();
    return DATA.indexOf(s) >= 0 || DATA.indexOf(f) >= 0;
  }

  function plot(svg) {
    var texts = Array.prototype.slice.call(svg.getElementsByTagName("text"));
    var withClass = function (c) {
      return texts
        .filter(function (t) {
          return t.classList.contains(c);
        })
        .map(text);
    };
    var marks = 0;
    var drawn = svg.getElementsByTagName("*");
    for (var i = 0; i < drawn.length; i++) if (hasDataColour(drawn[i])) marks++;
    var box = svg.getBoundingClientRect();
    // Texts the plot's own box cuts off (plotters places them; the svg clips them).
    var cut = texts
      .filter(function (t) {
        var r = t.getBoundingClientRect();
        return text(t) !== "" && (r.right > box.right + 1 || r.left < box.left - 1);
      })
      .map(text);
    return {
      legend: withClass("legend"),
      categories: withClass("category"),
      axis_labels: withClass("axis-label"),
      data_marks: marks,
      no_data: texts.some(function (t) {
        return text(t) === "no data";
      }),
      cut_texts: cut,
      width: Math.round(box.width),
    };
  }

  function figure(f) {
    var cap = f.getElementsByTagName("figcaption")[0];
    var svgs = Array.prototype.slice.call(f.getElementsByTagName("svg")).filter(function (s) {
      return !s.parentElement.closest("svg");
    });
    return { id: f.id || "", caption: cap ? text(cap) : null, plots: svgs.map(plot) };
  }

  function check() {
    var root = document.documentElement;
    var found = overflow(root.clientWidth + 1);
    var result = {
      inner_width: window.innerWidth,
      client_width: root.clientWidth,
      scroll_width: root.scrollWidth,
      scroll_height: root.scrollHeight,
      wide: found.wide,
      scrolled: found.scrolled,
      figures: Array.prototype.slice.call(document.getElementsByTagName("figure")).map(figure),
    };
    // Appended after measuring, so the findings never measure themselves.
    var pre = document.createElement("pre");
    pre.id = "tcplab-check";
    pre.style.display = "none";
    pre.textContent = JSON.stringify(result);
    document.body.appendChild(pre);
  }

  window.addEventListener("load", function () {
    try {
      check();
    } catch (e) {
      var pre = document.createElement("pre");
      pre.id = "tcplab-check";
      pre.textContent = JSON.stringify({ error: String(e && e.stack ? e.stack : e) });
      document.body.appendChild(pre);
    }
  });
})();
