/*
 * Graph views of the dashboard, drawn by Cytoscape.js (static/vendor/cytoscape): a node's neighbourhood
 * (graphadmin/notes/neighbourhood.py) and an injection's candidate subgraph (ranking/subgraph.py).
 *
 * Every element with [data-graph-url] is filled from its JSON endpoint. Edge thickness follows the
 * weight, colour the edge type (with a legend); a click opens the node's or the edge's page. Keyboard:
 * Tab reaches the canvas; arrow keys move between nodes, Enter opens the active node's page, Escape
 * clears. The list under the canvas links every node and edge (the text alternative, as are the tables
 * of the page). No network access beyond the page's own server.
 */
(function () {
  "use strict";

  // Okabe-Ito: told apart with the common colour-vision deficiencies. Types take colours in name order.
  var PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#999933"];
  var STATUS = {
    center: { fill: "#0b5cad", text: "this node" },
    hop1: { fill: "#57606a", text: "one hop away" },
    hop2: { fill: "#afb8c1", text: "two hops away" },
    selected: { fill: "#1a7f37", text: "selected: given to the agent" },
    cut: { fill: "#ffffff", text: "cut: considered, not given", hollow: true },
    path: { fill: "#afb8c1", text: "on a path only" },
  };

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      // Through the CSSOM: the Content-Security-Policy refuses style="..." attributes.
      else if (k === "style") Object.assign(node.style, attrs[k]);
      else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { node.appendChild(c); });
    return node;
  }

  function short(text, n) {
    return text.length > n ? text.slice(0, n - 1) + "\u2026" : text;
  }

  function typeColour(types) {
    var index = {};
    types.forEach(function (t, i) { index[t] = PALETTE[i % PALETTE.length]; });
    return function (t) { return index[t] || "#6e7781"; };
  }

  // How an entry point was found, in words (ranking.views.ENTRY_WORDS says the same on the page's tables).
  var ENTRY = {
    start: "a start node the agent named",
    vector: "found by similarity to the question",
    lexical: "found by words shared with the question",
    triplet: "found through a link similar to the question",
  };

  function describeNode(n) {
    var parts = [STATUS[n.status] ? STATUS[n.status].text : n.status];
    if (n.rank) parts.unshift("rank " + n.rank);
    if (n.entry) parts.push("entry point: " + (ENTRY[n.entry] || n.entry));
    if (n.archived) parts.push("archived");
    return parts.join(", ");
  }

  function elements(data, colour) {
    var nodes = data.nodes.map(function (n) {
      return {
        group: "nodes",
        data: {
          id: "n" + n.id, label: (n.rank ? "#" + n.rank + " " : "") + short(n.title || String(n.id), 28),
          title: n.title, url: n.url, rank: n.rank || 0,
          status: n.status, hops: n.hops || 0, fill: (STATUS[n.status] || STATUS.path).fill,
        },
        classes: [n.entry ? "entry" : "", n.archived ? "archived" : ""].join(" ").trim(),
      };
    });
    var edges = data.edges.map(function (e) {
      return {
        group: "edges",
        data: {
          id: "e" + e.id, source: "n" + e.source, target: "n" + e.target, url: e.url, type: e.type,
          weight: e.weight, colour: colour(e.type), label: e.type + " " + e.weight.toFixed(2),
        },
        classes: e.selected === false ? "off-path" : "",
      };
    });
    return nodes.concat(edges);
  }

  var STYLE = [
    { selector: "node", style: {
      "background-color": "data(fill)", label: "data(label)", "font-size": 11, color: "#1b1f24",
      "text-valign": "bottom", "text-margin-y": 4, "text-wrap": "ellipsis", "text-max-width": 140,
      width: 22, height: 22, "border-width": 1, "border-color": "#ffffff",
    } },
    { selector: "node[status = 'center']", style: { width: 32, height: 32, "font-weight": "bold" } },
    { selector: "node[status = 'cut']", style: { "border-width": 3, "border-color": "#57606a" } },
    { selector: "node.entry", style: { shape: "diamond", width: 30, height: 30 } },
    { selector: "node.archived", style: { "background-opacity": 0.4, "border-style": "dashed", "border-color": "#57606a" } },
    { selector: "node.active", style: { "border-width": 4, "border-color": "#f0b400", "z-index": 10 } },
    { selector: "edge", style: {
      width: "mapData(weight, 0, 1, 1, 9)", "line-color": "data(colour)", "target-arrow-color": "data(colour)",
      "target-arrow-shape": "triangle", "curve-style": "bezier", opacity: 0.85, "arrow-scale": 0.9,
    } },
    { selector: "edge.off-path", style: { "line-style": "dashed", opacity: 0.55 } },
    { selector: "edge.hover, edge.active", style: {
      label: "data(label)", "font-size": 10, "text-background-color": "#ffffff", "text-background-opacity": 0.9,
      opacity: 1,
    } },
    { selector: ".faded", style: { opacity: 0.15 } },
    // The candidate paths read left to right: labels beside the node, not under it.
    { selector: "node.ltr", style: { "text-valign": "center", "text-halign": "right", "text-margin-x": 6,
      "text-margin-y": 0, "text-max-width": 170 } },
    { selector: ".hidden-cut", style: { display: "none" } },
  ];

  // Left to right for an injection: entry points in the first column, each edge's target at least one column
  // right of its source (longest path from an entry point, over the edges drawn); within a column, best rank first.
  var COLUMN = 260, ROW = 44, READABLE = 0.9;  // READABLE: the least zoom a fit goes to (11 px labels at ~10 px)
  var MAX_COLUMNS = 12;
  function columns(data, drawnEdge) {
    var col = {};
    data.nodes.forEach(function (n) { col[n.id] = 0; });
    var edges = data.edges.filter(drawnEdge);
    for (var pass = 0; pass < MAX_COLUMNS; pass++) {
      var moved = false;
      edges.forEach(function (e) {
        var want = Math.min(col[e.source] + 1, MAX_COLUMNS);
        if (col[e.target] < want) { col[e.target] = want; moved = true; }
      });
      if (!moved) break;
    }
    return col;
  }

  function ltrPositions(data, visible, drawnEdge) {
    var col = columns(data, drawnEdge), rows = {}, pos = {};
    data.nodes.filter(function (n) { return visible(n); }).sort(function (a, b) {
      return (a.rank || 1e9) - (b.rank || 1e9) || a.id - b.id;
    }).forEach(function (n) {
      var c = col[n.id];
      rows[c] = (rows[c] || 0) + 1;
      pos["n" + n.id] = { x: c * COLUMN, y: (rows[c] - 1) * ROW };
    });
    return pos;
  }

  function layoutFor(data, cy, visible, drawnEdge) {
    if (data.kind === "injection") {
      var pos = ltrPositions(data, visible || function () { return true; }, drawnEdge || function () { return true; });
      return { name: "preset", positions: function (node) { return pos[node.id()] || { x: 0, y: 0 }; },
        fit: true, padding: 24, animate: false };
    }
    return { name: "concentric", concentric: function (n) { return 3 - n.data("hops"); },
      levelWidth: function () { return 1; }, minNodeSpacing: 60, padding: 30, animate: false };
  }

  function legend(box, data, colour) {
    var present = {};
    data.edges.forEach(function (e) { present[e.type] = true; });
    var statuses = {};
    data.nodes.forEach(function (n) { statuses[n.status] = true; });
    var items = data.types.filter(function (t) { return present[t]; }).map(function (t) {
      return el("li", {}, [el("span", { class: "swatch line", style: { background: colour(t) }, "aria-hidden": "true" }),
        document.createTextNode(t)]);
    });
    Object.keys(STATUS).filter(function (s) { return statuses[s]; }).forEach(function (s) {
      var swatch = "swatch dot" + (STATUS[s].hollow ? " hollow" : "");
      items.push(el("li", {}, [el("span", { class: swatch, style: { background: STATUS[s].fill }, "aria-hidden": "true" }),
        document.createTextNode(STATUS[s].text)]));
    });
    if (data.nodes.some(function (n) { return n.entry; })) {
      items.push(el("li", {}, [el("span", { class: "swatch diamond", "aria-hidden": "true" }), document.createTextNode("entry point")]));
    }
    if (data.edges.some(function (e) { return e.selected === false; })) {
      items.push(el("li", {}, [el("span", { class: "swatch dashed", "aria-hidden": "true" }),
        document.createTextNode("edge on no selected path")]));
    }
    items.push(el("li", { text: "thicker edge: higher weight" }));
    box.replaceChildren(el("ul", {}, items));
  }

  function list(box, data, focusNode) {
    var nodes = data.nodes.map(function (n) {
      var a = el("a", { href: n.url, "data-node": "n" + n.id, text: n.title || String(n.id) });
      a.addEventListener("focus", function () { focusNode("n" + n.id); });
      a.addEventListener("mouseenter", function () { focusNode("n" + n.id); });
      return el("li", {}, [a, el("small", { text: " " + describeNode(n) })]);
    });
    var titles = {};
    data.nodes.forEach(function (n) { titles[n.id] = n.title || String(n.id); });
    var edges = data.edges.map(function (e) {
      return el("li", {}, [el("a", { href: e.url, text: titles[e.source] + " \u2192 " + e.type + " \u2192 " + titles[e.target] }),
        el("small", { text: " weight " + e.weight.toFixed(3) + ", feedback " + e.feedback_weight.toFixed(3) })]);
    });
    box.replaceChildren(
      el("h3", { text: "Nodes in the view (" + nodes.length + ")" }),
      el("ul", { class: "graph-node-list" }, nodes),
      el("details", {}, [el("summary", { text: "Edges in the view (" + edges.length + ")" }), el("ul", {}, edges)])
    );
  }

  function draw(root, data) {
    var canvas = root.querySelector(".graph-canvas");
    var status = root.querySelector(".graph-status");
    var colour = typeColour(data.types);
    if (!data.nodes.length) {
      canvas.hidden = true;
      status.textContent = "Nothing to draw.";
      return;
    }
    var cy = window.cytoscape({
      container: canvas, elements: elements(data, colour), style: STYLE, minZoom: 0.2, maxZoom: 1.6,
      boxSelectionEnabled: false, autounselectify: true,
    });
    var showCut = false;
    var injection = data.kind === "injection";
    var anySelected = data.nodes.some(function (n) { return n.status === "selected"; });
    // A cut candidate that lies on a selected candidate's path (its entry point, a step) stays drawn: the path
    // of every selected candidate is whole without the toggle.
    var onSelectedPath = {};
    data.edges.forEach(function (e) { if (e.selected) { onSelectedPath[e.source] = true; onSelectedPath[e.target] = true; } });
    function visible(n) { return showCut || !anySelected || n.status !== "cut" || onSelectedPath[n.id]; }
    function drawnEdge(e) { return showCut || !anySelected || e.selected; }
    function relayout() {
      if (injection) {
        // Cut candidates (and edges on no selected path) stay behind the toggle: the selected paths first.
        cy.nodes().forEach(function (node) {
          var n = data.nodes[order.indexOf(node.id())];
          node.toggleClass("hidden-cut", !visible(n));
          node.addClass("ltr");
        });
        cy.edges().forEach(function (edge) {
          edge.toggleClass("hidden-cut", edge.source().hasClass("hidden-cut") || edge.target().hasClass("hidden-cut") ||
            (!showCut && anySelected && edge.hasClass("off-path")));
        });
      }
      cy.layout(layoutFor(data, cy, visible, drawnEdge)).run();
      fitTo(cy.elements().not(".hidden-cut"));
    }
    function fitTo(eles) {
      cy.fit(eles, 24);
      // Labels stay readable: never zoom out below the point where they shrink past ~8 px; scroll instead.
      if (injection && cy.zoom() < READABLE && eles.length > 1) {
        var box = eles.boundingBox();
        cy.zoom(READABLE);
        cy.pan({ x: 24 - box.x1 * READABLE, y: 24 - box.y1 * READABLE });
      }
    }
    var order = data.nodes.map(function (n) { return "n" + n.id; });
    relayout();
    controls(root, cy, data, {
      fit: function () { fitTo(cy.elements().not(".hidden-cut")); },
      toggleCut: injection && anySelected && data.nodes.some(function (n) { return n.status === "cut"; }) ? function () {
        showCut = !showCut;
        relayout();
        return showCut;
      } : null,
      pair: injection ? function (i, j) {
        var ids = {};
        (data.paths || []).forEach(function (p) {
          if (p.rank === i || p.rank === j) {
            ids["n" + p.node] = true;
            p.edges.forEach(function (e) { ids["e" + e] = true; });
          }
        });
        var pick = cy.elements().filter(function (x) { return ids[x.id()]; });
        pick = pick.union(pick.edges().connectedNodes());
        if (pick.some(function (x) { return x.hasClass("hidden-cut"); }) && !showCut) {
          showCut = true;
          relayout();
          var toggle = root.querySelector(".graph-toggle-cut");
          if (toggle) toggle.setAttribute("aria-pressed", "true");
        }
        cy.elements().removeClass("active faded");
        cy.elements().not(pick).addClass("faded");
        pick.addClass("active");
        fitTo(pick);
        status.textContent = "Showing #" + i + " and #" + j + " with the paths that reached them.";
      } : null,
    });
    var active = -1;
    status.textContent = "";

    function announce(node) {
      var edges = node.connectedEdges().length;
      status.textContent = node.data("title") + " (" + (order.indexOf(node.id()) + 1) + " of " + order.length + "): " +
        describeNode(data.nodes[order.indexOf(node.id())]) + "; " + edges + " edge" + (edges === 1 ? "" : "s") +
        " in the view. Enter opens its page.";
    }

    function activate(id) {
      cy.elements().removeClass("active faded");
      var node = cy.getElementById(id);
      if (!node.length) return;
      active = order.indexOf(id);
      var near = node.closedNeighborhood();
      cy.elements().not(near).addClass("faded");
      node.addClass("active");
      node.connectedEdges().addClass("active");
      announce(node);
    }

    function clear() {
      active = -1;
      cy.elements().removeClass("active faded");
      status.textContent = "";
    }

    cy.on("tap", "node, edge", function (ev) {
      var url = ev.target.data("url");
      if (url) window.location.assign(url);
    });
    cy.on("mouseover", "edge", function (ev) { ev.target.addClass("hover"); canvas.style.cursor = "pointer"; });
    cy.on("mouseout", "edge", function (ev) { ev.target.removeClass("hover"); canvas.style.cursor = ""; });
    cy.on("mouseover", "node", function () { canvas.style.cursor = "pointer"; });
    cy.on("mouseout", "node", function () { canvas.style.cursor = ""; });

    canvas.addEventListener("keydown", function (ev) {
      var step = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 }[ev.key];
      if (step) {
        ev.preventDefault();
        activate(order[(active + step + order.length) % order.length]);
      } else if (ev.key === "Home" || ev.key === "End") {
        ev.preventDefault();
        activate(order[ev.key === "Home" ? 0 : order.length - 1]);
      } else if (ev.key === "Enter" && active >= 0) {
        ev.preventDefault();
        window.location.assign(cy.getElementById(order[active]).data("url"));
      } else if (ev.key === "Escape") {
        clear();
      }
    });
    canvas.addEventListener("focus", function () {
      if (active < 0) status.textContent = "Graph with " + order.length + " nodes and " + data.edges.length +
        " edges. Arrow keys move between nodes, Enter opens one.";
    });

    legend(root.querySelector(".graph-legend"), data, colour);
    list(root.querySelector(".graph-list"), data, activate);
    if (data.truncated) {
      root.querySelector(".graph-truncated").textContent = "Only the strongest " + data.edges.length +
        " edges are drawn (at most " + data.limit + "); the tables list the rest.";
    }
    root.dataset.state = "ready";
    root.graph = cy;
  }

  // Zoom, fit, the cut-candidates toggle and "show #i and #j" (the comparison's pair), as buttons.
  function controls(root, cy, data, act) {
    var bar = root.querySelector(".graph-controls");
    if (!bar) return;
    function button(text, cls, onClick, pressed) {
      var b = el("button", { type: "button", class: cls, text: text });
      if (pressed !== undefined) b.setAttribute("aria-pressed", pressed ? "true" : "false");
      b.addEventListener("click", function () { onClick(b); });
      return b;
    }
    var zoomBy = function (f) {
      cy.zoom({ level: Math.min(cy.maxZoom(), Math.max(cy.minZoom(), cy.zoom() * f)),
        renderedPosition: { x: cy.width() / 2, y: cy.height() / 2 } });
    };
    var items = [
      button("Zoom in", "graph-zoom-in", function () { zoomBy(1.25); }),
      button("Zoom out", "graph-zoom-out", function () { zoomBy(0.8); }),
      button("Fit", "graph-fit", function () { cy.elements().removeClass("active faded"); act.fit(); }),
    ];
    if (act.toggleCut) {
      var cut = data.nodes.filter(function (n) { return n.status === "cut"; }).length;
      items.push(button("Show the " + cut + " cut candidates", "graph-toggle-cut", function (b) {
        b.setAttribute("aria-pressed", act.toggleCut() ? "true" : "false");
      }, false));
    }
    if (act.pair) {
      items.push(button("Show #i and #j", "graph-show-pair", function () {
        var i = document.getElementById("cmp-i"), j = document.getElementById("cmp-j");
        act.pair(parseInt(i ? i.value : "1", 10), parseInt(j ? j.value : "2", 10));
      }));
    }
    bar.replaceChildren.apply(bar, items);
  }

  function load(root) {
    if (root.dataset.state) return;
    root.dataset.state = "loading";
    var status = root.querySelector(".graph-status");
    if (!window.cytoscape) {
      status.textContent = "The graph view needs JavaScript; the tables on this page list the same nodes and edges.";
      root.dataset.state = "failed";
      return;
    }
    fetch(root.dataset.graphUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (data) { draw(root, data); })
      .catch(function (err) {
        root.dataset.state = "failed";
        status.textContent = "The graph view could not be loaded (" + err.message + "); the tables list the same data.";
      });
  }

  function start() {
    document.querySelectorAll("[data-graph-url]").forEach(load);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
