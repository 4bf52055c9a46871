"use strict";
// The report page: draws the summary and the counterexample viewer from the JSON in #report-data.
// Every step's state, rows and variables come from that data (the verifier's replay); this only draws.
(function () {
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const view = { entry: -1, check: -1, step: 0, trace: null, items: [], drawn: 0, scrolling: false };

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = value;
      else if (key === "on") for (const [ev, fn] of Object.entries(value)) node.addEventListener(ev, fn);
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children) if (child !== null && child !== undefined) node.append(child);
    return node;
  }

  function svgEl(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function verdictWord(ok) { return ok ? "✓ ok" : "✗ FAILED"; }
  function stepHash(e, c, s) { return `#e${e}-c${c}-s${s}`; }

  // The summary: every entry and check, failures first (the data is ordered so).
  function summary() {
    const main = document.getElementById("summary");
    const failed = data.entries.filter((entry) => !entry.ok).length;
    document.getElementById("verdict").textContent = data.ok
      ? `All ${data.entries.length} hold.`
      : `${failed} of ${data.entries.length} FAILED.`;
    data.entries.forEach((entry, e) => {
      const figures = el("dl", { class: "figures" });
      for (const [name, value] of entry.figures) figures.append(el("dt", { text: name }), el("dd", { text: value.toLocaleString("en") }));
      const checks = el("ul", { class: "checks" });
      entry.checks.forEach((check, c) => {
        const item = el("li", { class: check.ok ? "ok" : "fail" },
          el("span", { class: "mark", text: check.ok ? "✓ ok" : "✗ FAIL" }), " ",
          el("strong", { text: check.title }), check.message ? `: ${check.message}` : "");
        if (check.trace) {
          const count = check.trace.steps.length;
          item.append(" ", el("a", { href: stepHash(e, c, 0), class: "open", id: `open-e${e}-c${c}`,
            text: `step through the counterexample (${count} step${count === 1 ? "" : "s"})` }));
        }
        checks.append(item);
      });
      main.append(el("section", { class: `entry ${entry.ok ? "ok" : "fail"}`, id: `e${e}` },
        el("h2", {}, el("span", { class: "mark", text: verdictWord(entry.ok) }), ` ${entry.kind} ${entry.title}`),
        entry.file ? el("p", { class: "file", text: entry.file }) : null, figures, checks));
    });
  }

  // The viewer: one counterexample at a time, stepped by buttons, keys and the URL fragment.
  function route() {
    const match = /^#e(\d+)-c(\d+)-s(\d+)$/.exec(location.hash);
    const viewer = document.getElementById("viewer");
    if (!match) { viewer.hidden = true; view.entry = -1; return; }
    const [e, c, s] = match.slice(1).map(Number);
    const entry = data.entries[e];
    const check = entry && entry.checks[c];
    if (!check || !check.trace) { viewer.hidden = true; return; }
    if (view.entry !== e || view.check !== c) open(e, c);
    go(s, false);
  }

  function open(e, c) {
    const entry = data.entries[e];
    const check = entry.checks[c];
    Object.assign(view, { entry: e, check: c, trace: check.trace, step: 0 });
    const viewer = document.getElementById("viewer");
    viewer.replaceChildren();
    viewer.hidden = false;
    const count = check.trace.steps.length;
    const controls = el("div", { class: "controls", role: "toolbar", "aria-label": "steps" },
      el("button", { type: "button", id: "first", text: "« First", on: { click: () => go(0) } }),
      el("button", { type: "button", id: "back", text: "◀ Back", on: { click: () => go(view.step - 1) } }),
      el("span", { id: "position" }),
      el("button", { type: "button", id: "forward", text: "Forward ▶", on: { click: () => go(view.step + 1) } }),
      el("button", { type: "button", id: "last", text: "Last »", on: { click: () => go(count) } }),
      el("a", { id: "permalink", text: "link to this step" }),
      el("a", { href: "#", text: "back to the summary" }));
    if (entry.coverage) {
      controls.append(el("label", { class: "toggle" }, el("input", { type: "checkbox", id: "coverage",
        on: { change: (ev) => viewer.classList.toggle("coverage", ev.target.checked) } }), " coverage overlay (row fire counts)"));
    }
    viewer.classList.remove("coverage");
    const keys = "Keys: ← → step, Home and End go to the first and last step.";
    viewer.append(
      el("h2", { id: "viewer-title", tabindex: "-1" }, `${entry.kind} ${entry.title}: `, el("span", { class: check.ok ? "" : "fail-text", text: check.title })),
      el("p", { class: "message", text: check.message }),
      controls, el("p", { class: "keys", text: keys }),
      el("p", { id: "status", role: "status", "aria-live": "polite" }));
    if (check.trace.kind === "system") openSystem(viewer, check.trace);
    else openTable(viewer, entry, check.trace);
    const steps = el("ol", { id: "steps", start: "0" });
    steps.append(el("li", {}, el("a", { href: stepHash(e, c, 0), text: "initial configuration" })));
    check.trace.steps.forEach((step, k) => {
      const loop = check.trace.loop_start === k ? " ↻ (the cycle starts here)" : "";
      steps.append(el("li", { class: step.fault ? "fault" : "" },
        el("a", { href: stepHash(e, c, k + 1), text: (step.fault ? "⚠ fault: " : "") + step.label + loop })));
    });
    viewer.append(el("h3", { text: "Steps" }), steps);
    view.stepLis = [...steps.children];
    view.currentLi = null;
    viewer.querySelector("#viewer-title").focus();
  }

  function openTable(viewer, entry, trace) {
    const picture = el("div", { id: "diagram", class: "diagram" });
    picture.innerHTML = data.pictures[entry.picture] || "";
    const vars = el("table", { id: "vars" }, el("caption", { text: "Configuration after this step" }),
      el("thead", {}, el("tr", {}, el("th", { text: "name" }), el("th", { text: "value" }), el("th", { text: "change" }))),
      el("tbody"));
    const side = el("div", { class: "side" }, vars);
    if (trace.kind === "vector") {
      side.append(el("table", { id: "compare" }, el("caption", { text: `Vector ${trace.vector}: expected beside actual` }),
        el("thead", {}, el("tr", {}, el("th", { text: "" }), el("th", { text: "expected (the table)" }), el("th", { text: "actual (the implementation)" }))),
        el("tbody")));
      if (trace.failure) side.append(el("pre", { class: "failure", text: trace.failure }));
    }
    viewer.append(el("div", { class: "panes" }, picture, side), rowsTable(entry));
    if (entry.coverage) coverSvg(picture, entry.coverage);
    Object.assign(view, { states: new Map(), boxes: new Map(), rowEls: new Map(), rowTrs: new Map(), lit: [], firedTrs: [],
      label: svgEl("text", { class: "now-label" }, "▼ current state") });
    for (const node of picture.querySelectorAll("g.node[data-state]")) {
      view.states.set(node.getAttribute("data-state"), node);
      view.boxes.set(node.getAttribute("data-state"), node.getBBox());
    }
    for (const g of picture.querySelectorAll("[data-rows]")) {
      for (const row of rowsOf(g)) (view.rowEls.get(row) || view.rowEls.set(row, []).get(row)).push(g);
    }
    for (const tr of viewer.querySelectorAll("#rows tbody tr")) view.rowTrs.set(Number(tr.getAttribute("data-row")), tr);
  }

  function rowsTable(entry) {
    const body = el("tbody");
    for (const row of entry.rows) {
      const count = entry.coverage ? entry.coverage[String(row.row)] || 0 : null;
      body.append(el("tr", { "data-row": row.row },
        el("td", { text: row.row }), el("td", { text: `${row.source} → ${row.target}` }),
        el("td", {}, row.text, row.updates ? el("span", { class: "updates", text: ` ${row.updates}` }) : null),
        el("td", { class: "fired-cell" }),
        el("td", { class: "cover", text: count === null ? "" : count === 0 ? "never fired" : `fired ×${count.toLocaleString("en")}` })));
    }
    return el("table", { id: "rows" }, el("caption", { text: "Rows" }),
      el("thead", {}, el("tr", {}, el("th", { text: "row" }), el("th", { text: "from → to" }), el("th", { text: "event [guard] / actions, updates" }),
        el("th", { text: "this step" }), el("th", { class: "cover", text: "coverage" }))), body);
  }

  function rowsOf(node) { return (node.getAttribute("data-rows") || "").split(" ").filter(Boolean).map(Number); }

  function coverSvg(picture, coverage) {
    for (const node of picture.querySelectorAll("g.edge[data-rows], g.node[data-rows]")) {
      const rows = rowsOf(node);
      if (!rows.length) continue;
      const fires = rows.map((r) => coverage[String(r)] || 0);
      const text = rows.map((r, k) => `row ${r}: ${fires[k] ? `fired ×${fires[k]}` : "never fired"}`).join("; ");
      node.setAttribute("data-coverage", text);
      if (fires.some((f) => f === 0)) node.classList.add("never");
      node.append(svgEl("desc", { class: "cover-desc" }, `coverage: ${text}`));
    }
  }

  function configAt(trace, s) { return s === 0 ? trace.initial : trace.steps[s - 1]; }

  function go(s, push = true) {
    const trace = view.trace;
    if (!trace) return;
    const count = trace.steps.length;
    view.step = Math.max(0, Math.min(count, s));
    const hash = stepHash(view.entry, view.check, view.step);
    if (push && location.hash !== hash) history.replaceState(null, "", hash);
    document.getElementById("position").textContent = `step ${view.step} of ${count}`;
    document.getElementById("permalink").setAttribute("href", hash);
    document.getElementById("first").disabled = document.getElementById("back").disabled = view.step === 0;
    document.getElementById("last").disabled = document.getElementById("forward").disabled = view.step === count;
    if (view.currentLi) view.currentLi.removeAttribute("aria-current");
    view.currentLi = view.stepLis[view.step];
    view.currentLi.setAttribute("aria-current", "step");
    if (trace.kind === "system") showSystem(trace);
    else showTable(trace);
  }

  function showTable(trace) {
    const s = view.step;
    const entry = data.entries[view.entry];
    const now = configAt(trace, s);
    const before = s === 0 ? null : configAt(trace, s - 1);
    const fired = s === 0 ? [] : now.rows;
    // The elements to light come from maps made when the viewer opened: a step costs what it changes.
    for (const old of view.lit) old.classList.remove("current", "fired");
    view.lit = [];
    const node = view.states.get(now.state);
    if (node) {
      node.classList.add("current");
      const box = view.boxes.get(now.state);
      view.label.setAttribute("x", box.x);
      view.label.setAttribute("y", box.y - 4);
      node.append(view.label);
      view.lit.push(node);
    }
    for (const row of fired) {
      for (const g of view.rowEls.get(row) || []) { g.classList.add("fired"); view.lit.push(g); }
    }
    const body = document.querySelector("#vars tbody");
    body.replaceChildren(varRow("state", now.state, before ? before.state : null, "state"));
    entry.variables.forEach((name, k) => body.append(varRow(name, now.vars[k], before ? before.vars[k] : null, "var")));
    for (const tr of view.firedTrs) { tr.classList.remove("fired"); tr.querySelector(".fired-cell").textContent = ""; }
    view.firedTrs = fired.map((row) => view.rowTrs.get(row)).filter(Boolean);
    for (const tr of view.firedTrs) { tr.classList.add("fired"); tr.querySelector(".fired-cell").textContent = "◀ fired at this step"; }
    let status = s === 0 ? `Initial configuration. Current state: ${now.state}.`
      : `Step ${s} of ${trace.steps.length}: ${now.label} ${now.status}` +
        (fired.length ? `, row${fired.length > 1 ? "s" : ""} ${fired.join(", ")} fired` : ", no row fired") +
        `. Current state: ${now.state}.`;
    if (s > 0 && now.actions.length) status += ` Actions: ${now.actions.join(", ")}.`;
    if (s > 0 && now.error) status += ` ${now.status}: ${now.error}`;
    if (s > 0 && now.broken.length) status += ` Invariant broken: ${now.broken.join(", ")}.`;
    if (trace.loop_start !== null && s === trace.steps.length) status += ` The steps from ${trace.loop_start + 1} on repeat forever.`;
    if (trace.kind === "vector") status += compare(now, s);
    document.getElementById("status").textContent = status;
  }

  function varRow(name, value, was, kind) {
    const changed = was !== null && was !== value;
    return el("tr", { class: changed ? `changed ${kind}` : kind, "data-name": name },
      el("th", { scope: "row", text: name }), el("td", { class: "value", text: value }),
      el("td", { class: "change", text: changed ? `changed (was ${was})` : "" }));
  }

  function shown(value) {
    if (value === null || value === undefined) return "—";
    if (Array.isArray(value)) return `[${value.join(", ")}]`;
    if (typeof value === "object") return Object.entries(value).map(([k, v]) => `${k}=${v}`).join(", ");
    return String(value);
  }

  function compare(now, s) {
    const body = document.querySelector("#compare tbody");
    body.replaceChildren();
    if (s === 0) return "";
    const expected = now.expected;
    const actual = now.actual;
    const keys = expected.refused ? ["refused"] : ["accepted", "state", "actions", "vars"];
    for (const key of keys) {
      const want = expected[key];
      const got = actual ? actual[key] : (now.problems.length ? null : want);
      const differs = actual !== null && shown(want) !== shown(got);
      body.append(el("tr", { class: differs ? "differs" : "" }, el("th", { scope: "row", text: key }),
        el("td", { text: shown(want) }),
        el("td", { text: actual === null && !now.problems.length ? `${shown(got)} (as expected)` : shown(got) + (differs ? " ✗ differs" : "") })));
    }
    return now.problems.length ? ` The implementation differs: ${now.problems.join("; ")}.` : " The implementation agreed.";
  }

  // Systems: the sequence chart and one column per instance under the same cursor.
  function openSystem(viewer, trace) {
    const names = ["environment", ...trace.lifelines];
    const column = 170;
    const rows = [];
    trace.steps.forEach((step, k) => step.items.forEach((item) => rows.push([k + 1, item])));
    Object.assign(view, { items: [], drawn: trace.steps.length });
    const height = 60 + 28 * rows.length + 20;
    const width = column * names.length;
    const chart = svgEl("svg", { id: "chart", viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
      "aria-label": "sequence chart of the counterexample" });
    const x = (name) => column / 2 + column * Math.max(0, names.indexOf(name === "(environment)" ? "environment" : name));
    names.forEach((name) => {
      chart.append(svgEl("rect", { x: x(name) - 75, y: 8, width: 150, height: 24, rx: 4, class: "lifeline-head" }));
      chart.append(svgEl("text", { x: x(name), y: 25, "text-anchor": "middle" }, name));
      chart.append(svgEl("line", { x1: x(name), y1: 32, x2: x(name), y2: height - 8, class: "lifeline" }));
    });
    rows.forEach(([n, item], r) => {
      const y = 60 + 28 * r;
      const g = svgEl("g", { class: `item later${item.alarm ? " alarm" : ""}`, "data-step": n });
      (view.items[n] = view.items[n] || []).push(g);
      if (item.arrow) {
        let x1 = x(item.from), x2 = x(item.to);
        if (x1 === x2) x2 = x1 + 30;
        g.append(svgEl("line", { x1, y1: y, x2, y2: y, class: "message" }));
        g.append(svgEl("path", { d: `M${x2},${y} l${x2 > x1 ? -8 : 8},-4 v8 z`, class: "head" }));
        g.append(svgEl("text", { x: (x1 + x2) / 2, y: y - 4, "text-anchor": "middle" }, (item.alarm ? "✗ " : "") + item.text));
      } else {
        const text = (item.alarm ? "⚠ " : "") + item.text;
        const w = Math.max(60, 6 * text.length + 12);
        const centre = Math.min(Math.max(x(item.over), w / 2 + 4), width - w / 2 - 4);
        g.append(svgEl("rect", { x: centre - w / 2, y: y - 13, width: w, height: 18, class: "note" }));
        g.append(svgEl("text", { x: centre, y, "text-anchor": "middle" }, text));
      }
      chart.append(g);
    });
    const columns = el("div", { id: "instances", class: "instances" });
    trace.lifelines.forEach((name, i) => columns.append(el("section", { class: "instance", "data-instance": name },
      el("h3", { text: name }), el("p", { class: "acting" }),
      el("p", {}, "state: ", el("span", { class: "inst-state" }), el("span", { class: "state-change" })),
      el("p", {}, "mailbox: ", el("span", { class: "mailbox" })),
      el("table", { class: "inst-vars" }, el("tbody")))));
    viewer.append(el("div", { class: "chart-wrap" }, chart), columns);
    if (trace.verdict) viewer.append(el("p", { class: "verdict", text: `✗ ${trace.verdict}` }));
  }

  function showSystem(trace) {
    const s = view.step;
    const now = configAt(trace, s);
    const at = (k) => (k === 0 ? trace.initial : trace.steps[k - 1].instances);
    const insts = at(s);
    const was = s === 0 ? null : at(s - 1);
    // Only the steps between the old cursor and the new one change their look: a long trace stays quick.
    const [low, high] = [Math.min(view.drawn, s), Math.max(view.drawn, s)];
    for (let n = Math.max(1, low); n <= high; n++) {
      for (const g of view.items[n] || []) {
        g.classList.toggle("now", n === s);
        g.classList.toggle("later", n > s);
      }
    }
    view.drawn = s;
    if (!view.scrolling) {  // scrolled once a frame, not once a key: scrolling lays the page out
      view.scrolling = true;
      requestAnimationFrame(() => {
        view.scrolling = false;
        const first = (view.items[view.step] || [])[0];
        if (first) first.scrollIntoView({ block: "nearest" });
      });
    }
    trace.lifelines.forEach((name, i) => {
      const card = document.querySelector(`#instances section[data-instance="${CSS.escape(name)}"]`);
      const inst = insts[i];
      const old = was ? was[i] : null;
      const acting = s > 0 && now.instance === name;
      card.classList.toggle("acting", acting);
      card.querySelector(".acting").textContent = acting ? (now.fault ? "⚠ fault at this step" : "▶ acts at this step") : "";
      card.querySelector(".inst-state").textContent = inst.state + (inst.stalled ? " (stalled)" : "");
      card.querySelector(".state-change").textContent = old && old.state !== inst.state ? ` (changed, was ${old.state})` : "";
      card.querySelector(".mailbox").textContent = inst.mailbox.length ? inst.mailbox.join(", ") : "empty";
      const body = card.querySelector(".inst-vars tbody");
      body.replaceChildren();
      trace.variables[i].forEach((v, k) => body.append(varRow(v, inst.vars[k], old ? old.vars[k] : null, "var")));
    });
    let status = s === 0 ? "Initial configuration." : `Step ${s} of ${trace.steps.length}: ${now.fault ? "⚠ FAULT: " : ""}${now.label}.`;
    status += " " + trace.lifelines.map((name, i) => `${name}: ${insts[i].state}`).join(", ") + ".";
    if (s === trace.steps.length && trace.verdict) status += ` ${trace.verdict}`;
    document.getElementById("status").textContent = status;
  }

  function onKey(event) {
    if (view.entry < 0 || document.getElementById("viewer").hidden) return;
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    const moves = { ArrowLeft: view.step - 1, ArrowRight: view.step + 1, Home: 0, End: view.trace.steps.length };
    if (!(event.key in moves)) return;
    event.preventDefault();
    go(moves[event.key]);
  }

  summary();
  window.addEventListener("hashchange", route);
  document.addEventListener("keydown", onKey);
  route();
  document.body.setAttribute("data-ready", "true");
  performance.mark("report-ready");
})();
