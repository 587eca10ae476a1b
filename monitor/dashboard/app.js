// scorio-monitor live dashboard: plain ES2020 and inline SVG, no dependencies,
// so it works offline and needs no build step.
//
// Data: GET runs, runs/{run}/config and runs/{run}/trace once per run, then the
// server-sent event stream runs/{run}/events ("status" messages carry a Status,
// the other event types carry {seq, run, kind, subject, payload, ts}).
//
// Safety: every string from the server reaches the DOM through textContent or
// setAttribute, never innerHTML, so a model named "<img onerror=...>" is shown
// as text and never run.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const EVENT_KINDS = [
  "pair_resolved",
  "pair_unresolvable",
  "model_done",
  "budget_exhausted",
  "ranking_stable",
];
const LOG_LIMIT = 200;
const TRACE_LIMIT = 2000; // the server keeps as many trace points
const RUNS_POLL_MS = 15000;
const PALETTE = [
  "#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#3ca951", "#ff8ab7",
  "#a463f2", "#97bbf5", "#9c6b4e", "#9498a0", "#1f3a93", "#d4a017",
];

const state = {
  run: null,
  config: null,
  status: null,
  trace: [],
  events: [],
  source: null,
  generation: 0, // bumped on every run switch; late answers for an old run are dropped
  colors: new Map(),
  traceMode: "mu",
  renderQueued: false,
};

// -- small helpers --------------------------------------------------------

function $(selector, root = document) {
  return root.querySelector(selector);
}

function field(name, root = document) {
  return root.querySelector(`[data-field="${name}"]`);
}

function setText(name, text, root = document) {
  const node = field(name, root);
  if (node) node.textContent = text;
}

// An HTML element; attributes go through setAttribute and children become
// text nodes, so server strings are never parsed as markup.
function el(tag, attrs = {}, ...children) {
  return build(document.createElement(tag), attrs, children);
}

function svg(tag, attrs = {}, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

function build(node, attrs, children) {
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null) node.setAttribute(key, String(value));
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Four decimals everywhere; JSON has no infinity, so a missing number is "—".
function fixed(value, digits = 4) {
  return typeof value === "number" && Number.isFinite(value) ? value.toFixed(digits) : "—";
}

function percent(value) {
  return `${(100 * value).toFixed(1)}%`;
}

function clock(ts) {
  return new Date(ts * 1000).toLocaleTimeString([], { hour12: false });
}

function shorten(name, length = 18) {
  return name.length > length ? `${name.slice(0, length - 1)}…` : name;
}

function colorOf(model) {
  if (!state.colors.has(model)) {
    state.colors.set(model, PALETTE[state.colors.size % PALETTE.length]);
  }
  return state.colors.get(model);
}

// Round axis ticks: steps of 1, 2 or 5 times a power of ten.
function ticks(low, high, count) {
  const span = high - low || 1;
  const raw = span / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => span / s <= count) ?? raw;
  const values = [];
  for (let v = Math.ceil(low / step) * step; v <= high + step * 1e-9; v += step) {
    values.push(Number(v.toFixed(12)));
  }
  return values;
}

function scale(domainLow, domainHigh, rangeLow, rangeHigh) {
  const span = domainHigh - domainLow || 1;
  return (v) => rangeLow + ((v - domainLow) / span) * (rangeHigh - rangeLow);
}

async function getJson(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

function runPath(run, rest) {
  return `runs/${encodeURIComponent(run)}/${rest}`;
}

// -- runs and the live stream ----------------------------------------------

async function loadRuns() {
  let runs;
  try {
    runs = await getJson("runs");
  } catch {
    setConnection("offline");
    return;
  }
  const picker = $("#run-picker");
  const shown = Array.from(picker.options, (option) => option.value);
  if (runs.join("\n") !== shown.join("\n")) {
    picker.replaceChildren(...runs.map((run) => el("option", { value: run }, run)));
  }
  $("#no-runs").hidden = runs.length > 0;
  $("#board").hidden = runs.length === 0;
  if (state.run !== null && runs.includes(state.run)) {
    picker.value = state.run;
    return;
  }
  const wanted = new URLSearchParams(location.search).get("run");
  const run = runs.includes(wanted) ? wanted : runs[0];
  if (run !== undefined) selectRun(run);
}

async function selectRun(run) {
  if (state.source) state.source.close();
  const generation = ++state.generation;
  Object.assign(state, { run, config: null, status: null, trace: [], events: [], source: null });
  state.colors = new Map();
  $("#run-picker").value = run;
  const url = new URL(location.href);
  url.searchParams.set("run", run);
  history.replaceState(null, "", url); // a shareable link, without reloading
  document.body.dataset.run = run;
  queueRender();
  try {
    const [config, trace] = await Promise.all([
      getJson(runPath(run, "config")),
      getJson(runPath(run, "trace")),
    ]);
    if (generation !== state.generation) return;
    state.config = config;
    state.trace = trace;
  } catch (error) {
    console.warn("could not load the run's config or trace:", error);
  }
  if (generation === state.generation) openStream(run, generation);
}

// EventSource reconnects by itself and resends Last-Event-ID, so the server
// replays only events we have not seen; a fresh status follows every connect.
function openStream(run, generation) {
  const source = new EventSource(runPath(run, "events"));
  state.source = source;
  const current = (handler) => (message) => {
    if (generation === state.generation) handler(JSON.parse(message.data));
  };
  source.addEventListener("status", current(onStatus));
  for (const kind of EVENT_KINDS) source.addEventListener(kind, current(onEvent));
  source.onopen = () => setConnection("live");
  source.onerror = () => {
    setConnection(source.readyState === EventSource.CLOSED ? "offline" : "reconnecting");
  };
}

function onStatus(status) {
  state.status = status;
  const last = state.trace[state.trace.length - 1];
  if (status.trials > 0 && (!last || last.trials !== status.trials)) {
    const mu = Object.fromEntries(status.models.map((row) => [row.model, row.mu]));
    const order = status.models.map((row) => row.model);
    state.trace.push({ ts: Date.now() / 1000, trials: status.trials, order, mu });
    if (state.trace.length > TRACE_LIMIT) state.trace.shift();
  }
  queueRender();
}

function onEvent(event) {
  state.events.unshift(event);
  state.events.length = Math.min(state.events.length, LOG_LIMIT);
  queueRender();
}

function setConnection(mode) {
  const node = $("#connection");
  node.dataset.state = mode;
  node.textContent = mode;
}

// Statuses can arrive every few milliseconds under load: draw once a frame.
function queueRender() {
  if (state.renderQueued) return;
  state.renderQueued = true;
  requestAnimationFrame(() => {
    state.renderQueued = false;
    render();
  });
}

function render() {
  const status = state.status;
  if (status) {
    // Stable colours: assign in leaderboard order the first time a model shows up.
    status.models.forEach((row) => colorOf(row.model));
    renderSummary(status);
    renderLeaderboard(status);
    renderForest(status);
    renderPairs(status);
    setText("updated", `updated ${new Date().toLocaleTimeString([], { hour12: false })}`);
    document.body.dataset.trials = String(status.trials);
  }
  renderTrace();
  renderLog();
}

// -- summary and tables ---------------------------------------------------

// Budget: every model may take max_trials_per_question trials per question.
function budgetShare(trials, models) {
  const cap = state.config?.max_trials_per_question;
  const questions = state.status?.question_count;
  if (!cap || !questions || !models) return null;
  return { used: trials / (cap * questions * models), total: cap * questions * models };
}

function renderSummary(status) {
  setText("trials", status.trials.toLocaleString("en-US"));
  setText(
    "intake",
    `${status.duplicates} duplicates · ${status.corrections} corrections · ${status.rejected} rejected`,
  );
  const budget = budgetShare(status.trials, status.models.length);
  setText("budget", budget ? percent(budget.used) : "no cap");
  field("budget-bar").style.width = budget ? percent(Math.min(budget.used, 1)) : "0";
  setText(
    "budget-detail",
    budget
      ? `of ${budget.total.toLocaleString("en-US")} (${status.models.length} models × ${status.question_count} questions × ${state.config.max_trials_per_question})`
      : "max_trials_per_question not set",
  );
  setText("question_count", String(status.question_count));
  setText("question-detail", status.open ? "open run: questions seen" : "declared");
  setText("rule", status.rule);
  setText("confidence", `confidence ${fixed(status.confidence)}`);
  const stable = field("stable");
  stable.textContent = status.stable ? "stable" : "sampling";
  stable.dataset.value = String(status.stable);
  const groups = new Set(status.models.map((row) => row.group)).size;
  setText("groups", `${status.models.length} models in ${groups} groups`);
}

function needsText(row) {
  if (!row.needs_trials) return "—";
  return row.predicted_trials === null ? "yes" : `~${row.predicted_trials.toLocaleString("en-US")}`;
}

function renderLeaderboard(status) {
  const rows = status.models.map((row) => {
    const share = budgetShare(row.trials, 1);
    const meter = share
      ? el("span", { class: "meter small", title: `${percent(share.used)} of its budget` },
          el("span", { style: `width:${percent(Math.min(share.used, 1))}` }))
      : "";
    return el(
      "tr",
      { "data-model": row.model, "data-group": row.group, class: row.group % 2 ? "band-odd" : "band-even" },
      el("td", { class: "num", "data-field": "rank" }, row.rank),
      el("td", {}, el("span", { class: "group", "data-field": "group" }, row.group)),
      el("td", { class: "model" },
        el("span", { class: "swatch", style: `background:${colorOf(row.model)}` }),
        el("span", { "data-field": "model" }, row.model)),
      el("td", { class: "num strong", "data-field": "mu" }, fixed(row.mu)),
      el("td", { class: "num", "data-field": "sigma" }, fixed(row.sigma)),
      el("td", { class: "num", "data-field": "interval" }, `${fixed(row.lo)} – ${fixed(row.hi)}`),
      el("td", { class: "num" }, el("span", { "data-field": "trials" }, row.trials), meter),
      el("td", { class: row.needs_trials ? "num needs" : "num muted", "data-field": "needs" }, needsText(row)),
    );
  });
  $("#leaderboard tbody").replaceChildren(...rows);
}

function pairState(pair) {
  if (pair.resolved) return ["resolved", "resolved"];
  if (pair.unresolvable) return ["tie", "statistical tie at this budget"];
  return ["open", "unresolved"];
}

function renderPairs(status) {
  const rows = status.pairs.map((pair) => {
    const [kind, label] = pairState(pair);
    return el(
      "tr",
      { "data-pair": `${pair.a}|${pair.b}`, "data-state": kind },
      el("td", { class: "model" }, `${pair.a} › ${pair.b}`),
      el("td", { class: "num", "data-field": "z" }, fixed(pair.z)),
      el("td", { class: "num", "data-field": "rho" }, fixed(pair.rho)),
      el("td", {}, el("span", { class: `badge ${kind}`, "data-field": "state" }, label)),
    );
  });
  $("#pairs tbody").replaceChildren(...rows);
  const open = status.pairs.filter((pair) => !pair.resolved).length;
  setText("pairs-caption", `${open} of ${status.pairs.length} unresolved`);
}

// -- forest plot ----------------------------------------------------------

// One row per model in leaderboard order; a shaded band per CI group, so
// models the data cannot yet tell apart sit visibly together.
function renderForest(status) {
  const plot = $("#forest");
  const rows = status.models;
  const width = Math.max(plot.clientWidth, 320);
  const rowHeight = 26;
  const margin = { top: 6, right: 44, bottom: 30, left: 118 };
  const height = margin.top + margin.bottom + rowHeight * Math.max(rows.length, 1);
  plot.setAttribute("viewBox", `0 0 ${width} ${height}`);
  plot.setAttribute("height", height);
  setText("forest-caption", `${fixed(status.confidence * 100, 1)}%`);
  if (rows.length === 0) {
    plot.replaceChildren(svg("text", { x: width / 2, y: height / 2, class: "placeholder" }, "no trials yet"));
    return;
  }
  const low = Math.min(...rows.map((row) => row.lo));
  const high = Math.max(...rows.map((row) => row.hi));
  const pad = (high - low) * 0.04 || 0.01;
  const x = scale(low - pad, high + pad, margin.left, width - margin.right);
  const rowY = (index) => margin.top + rowHeight * (index + 0.5);
  const parts = [];
  groupBlocks(rows).forEach((block, index) => {
    const top = margin.top + rowHeight * block.start;
    const blockHeight = rowHeight * block.count;
    parts.push(
      svg("rect", { class: index % 2 ? "band band-even" : "band band-odd", x: 0, y: top, width, height: blockHeight }),
      svg("text", { class: "group-label", x: width - 8, y: top + blockHeight / 2 + 4, "text-anchor": "end" }, `G${block.group}`),
    );
  });
  for (const tick of ticks(low - pad, high + pad, 5)) {
    parts.push(
      svg("line", { class: "grid", x1: x(tick), x2: x(tick), y1: margin.top, y2: height - margin.bottom }),
      svg("text", { class: "tick", x: x(tick), y: height - margin.bottom + 16, "text-anchor": "middle" }, tick.toFixed(2)),
    );
  }
  rows.forEach((row, index) => {
    const y = rowY(index);
    parts.push(
      svg("g", { "data-model": row.model },
        svg("title", {}, `${row.model}: μ ${fixed(row.mu)}, interval ${fixed(row.lo)} – ${fixed(row.hi)}`),
        svg("text", { class: "row-label", x: margin.left - 10, y: y + 4, "text-anchor": "end" }, shorten(row.model)),
        svg("line", { class: "interval", x1: x(row.lo), x2: x(row.hi), y1: y, y2: y, stroke: colorOf(row.model) }),
        svg("circle", { class: "point", cx: x(row.mu), cy: y, r: 4.5, fill: colorOf(row.model) })),
    );
  });
  plot.replaceChildren(...parts);
}

function groupBlocks(rows) {
  const blocks = [];
  rows.forEach((row, index) => {
    const last = blocks[blocks.length - 1];
    if (last && last.group === row.group) last.count += 1;
    else blocks.push({ group: row.group, start: index, count: 1 });
  });
  return blocks;
}

// -- ranking trace --------------------------------------------------------

function traceValue(point, model) {
  if (state.traceMode === "rank") {
    const index = point.order.indexOf(model);
    return index < 0 ? null : index + 1;
  }
  return typeof point.mu[model] === "number" ? point.mu[model] : null;
}

function renderTrace() {
  const plot = $("#trace");
  const points = state.trace;
  const width = Math.max(plot.clientWidth, 320);
  const height = 300;
  const margin = { top: 12, right: 96, bottom: 34, left: 52 };
  plot.setAttribute("viewBox", `0 0 ${width} ${height}`);
  plot.setAttribute("height", height);
  if (points.length === 0) {
    plot.replaceChildren(svg("text", { x: width / 2, y: height / 2, class: "placeholder" }, "no trials yet"));
    return;
  }
  const models = Array.from(new Set(points.flatMap((point) => point.order)));
  const byRank = state.traceMode === "rank";
  const values = points.flatMap((point) => models.map((m) => traceValue(point, m))).filter((v) => v !== null);
  const [low, high] = byRank ? [1, Math.max(models.length, 2)] : [Math.min(...values), Math.max(...values)];
  const pad = byRank ? 0.4 : (high - low) * 0.06 || 0.01;
  const first = points[0].trials;
  const last = points[points.length - 1].trials;
  const x = scale(first, last === first ? first + 1 : last, margin.left, width - margin.right);
  // Rank 1 is drawn at the top, like the leaderboard.
  const y = byRank
    ? scale(low - pad, high + pad, margin.top, height - margin.bottom)
    : scale(low - pad, high + pad, height - margin.bottom, margin.top);
  const parts = [...traceAxes(x, y, { first, last, low, high, pad, byRank, width, height, margin })];
  const ends = [];
  for (const model of models) {
    const coords = points
      .map((point) => [point.trials, traceValue(point, model)])
      .filter(([, v]) => v !== null)
      .map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`);
    if (coords.length === 0) continue;
    const color = colorOf(model);
    parts.push(svg("polyline", { class: "series", points: coords.join(" "), stroke: color, "data-model": model }));
    const [endX, endY] = coords[coords.length - 1].split(",").map(Number);
    parts.push(svg("circle", { cx: endX, cy: endY, r: 2.5, fill: color }));
    ends.push({ model, color, x: endX, y: endY });
  }
  parts.push(...endLabels(ends, margin.top, height - margin.bottom));
  plot.replaceChildren(...parts);
}

function traceAxes(x, y, frame) {
  const { first, last, low, high, pad, byRank, width, height, margin } = frame;
  const parts = [];
  const yTicks = byRank
    ? Array.from({ length: high - low + 1 }, (_, i) => low + i).filter((r) => high <= 12 || r % 2 === 1)
    : ticks(low - pad, high + pad, 5);
  for (const tick of yTicks) {
    parts.push(
      svg("line", { class: "grid", x1: margin.left, x2: width - margin.right, y1: y(tick), y2: y(tick) }),
      svg("text", { class: "tick", x: margin.left - 8, y: y(tick) + 4, "text-anchor": "end" }, byRank ? tick : tick.toFixed(2)),
    );
  }
  const xTicks = last > first ? ticks(first, last, 6) : [first];
  for (const tick of xTicks) {
    parts.push(svg("text", { class: "tick", x: x(tick), y: height - margin.bottom + 16, "text-anchor": "middle" }, tick.toLocaleString("en-US")));
  }
  parts.push(
    svg("line", { class: "axis", x1: margin.left, x2: width - margin.right, y1: height - margin.bottom, y2: height - margin.bottom }),
    svg("text", { class: "axis-title", x: (margin.left + width - margin.right) / 2, y: height - 4, "text-anchor": "middle" }, "trials"),
    svg("text", { class: "axis-title", x: 12, y: margin.top + 4, "text-anchor": "start" }, byRank ? "rank" : "μ"),
  );
  return parts;
}

// Labels at the line ends, pushed apart so that close lines stay readable.
function endLabels(ends, top, bottom) {
  const gap = 12;
  const sorted = [...ends].sort((a, b) => a.y - b.y);
  let previous = top - gap;
  for (const end of sorted) {
    end.labelY = Math.max(end.y, previous + gap);
    previous = end.labelY;
  }
  let next = bottom + gap;
  for (const end of sorted.reverse()) {
    end.labelY = Math.min(end.labelY, next - gap);
    next = end.labelY;
  }
  return ends.flatMap((end) => [
    svg("line", { class: "leader", x1: end.x + 3, x2: end.x + 10, y1: end.y, y2: end.labelY, stroke: end.color }),
    svg("text", { class: "end-label", x: end.x + 13, y: end.labelY + 4, fill: end.color }, shorten(end.model, 12)),
  ]);
}

// -- event log ------------------------------------------------------------

// Payload fields are checked before use: the stream is data, not trusted code.
function describe(event) {
  const p = event.payload && typeof event.payload === "object" ? event.payload : {};
  switch (event.kind) {
    case "pair_resolved":
      return `${p.a} ranks above ${p.b} (z ${fixed(p.z)}, ρ ${fixed(p.rho)})`;
    case "pair_unresolvable":
      return `${p.a} vs ${p.b}: statistical tie at this budget (z ${fixed(p.z)})`;
    case "model_done":
      return `${p.model} needs no more trials: group ${p.group} after ${p.trials} trials`;
    case "budget_exhausted":
      return `budget spent for ${Array.isArray(p.models) ? p.models.join(", ") : "some models"}`;
    case "ranking_stable":
      return `ranking stable after ${p.trials} trials`;
    default:
      return `${event.kind} ${event.subject ?? ""}`;
  }
}

function renderLog() {
  const items = state.events.map((event) =>
    el(
      "li",
      { "data-kind": event.kind, "data-seq": event.seq },
      el("time", {}, clock(event.ts)),
      el("span", { class: `badge kind-${event.kind}` }, event.kind.replace(/_/g, " ")),
      el("span", { class: "message" }, describe(event)),
    ),
  );
  $("#event-log").replaceChildren(...items);
  field("log-empty").hidden = items.length > 0;
}

// -- start ----------------------------------------------------------------

function start() {
  $("#run-picker").addEventListener("change", (event) => selectRun(event.target.value));
  for (const button of document.querySelectorAll("[data-trace-mode]")) {
    button.addEventListener("click", () => {
      state.traceMode = button.dataset.traceMode;
      for (const other of document.querySelectorAll("[data-trace-mode]")) {
        other.setAttribute("aria-pressed", String(other === button));
      }
      queueRender();
    });
  }
  window.addEventListener("resize", queueRender);
  loadRuns();
  setInterval(loadRuns, RUNS_POLL_MS); // new runs appear without a reload
}

start();
