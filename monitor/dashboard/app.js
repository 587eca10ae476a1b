// scorio-monitor live dashboard: plain ES2020 and inline SVG, no dependencies,
// so it works offline and needs no build step.
//
// Data: GET runs, runs/{run}/config and runs/{run}/history once per run, then the
// server-sent event stream runs/{run}/events ("status" messages carry a Status,
// the other event types carry {seq, run, kind, subject, payload, ts}); GET
// input (has the server's input ended?) when no trial comes.
//
// Safety: every string from the server reaches the DOM through textContent or
// setAttribute, never innerHTML, so a model named "<img onerror=...>" is shown
// as text and never run.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const LOG_LIMIT = 200;
const TRACE_LIMIT = 2000; // the server keeps at most 1,000 per run, thinned
const RUNS_POLL_MS = 15000;
const QUESTIONS_POLL_MS = 2000; // the per-question table: at most this often
// Twenty colours that read on white, ordered so that entries up to three
// apart differ clearly: names that differ only in their last character
// (llm01, llm02, ...) hash to nearby entries.
const PALETTE = [
  "#5a2d82", "#a12a2a", "#8a9a1b", "#0f8b8d", "#d45fd0",
  "#9c6b4e", "#1f3a93", "#6cc5b0", "#efb118", "#ff8ab7",
  "#39424e", "#4269d0", "#f28e2b", "#b8336a", "#2b6a3f",
  "#97bbf5", "#a463f2", "#ff725c", "#3ca951", "#9498a0",
];

// What one run's view holds; a run switch starts from a fresh copy.
const fresh = () => ({
  config: null, status: null, trace: [], events: [], source: null,
  questions: [], rejected: [], questionsAt: 0, questionsLoading: false, costs: [],
  inputEnded: false,
});
const state = {
  run: null,
  ...fresh(),
  generation: 0, // bumped on every run switch: late answers for an old run are dropped
  renderQueued: false,
};

// -- small helpers --------------------------------------------------------

const $ = (selector) => document.querySelector(selector);
const field = (name) => $(`[data-field="${name}"]`);
const setText = (name, text) => (field(name).textContent = text);

// Elements whose attributes go through setAttribute and whose children become
// text nodes, so server strings are never parsed as markup.
const el = (tag, attrs = {}, ...children) => build(document.createElement(tag), attrs, children);
const svg = (tag, attrs = {}, ...children) =>
  build(document.createElementNS(SVG_NS, tag), attrs, children);

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
const fixed = (value, digits = 4) =>
  typeof value === "number" && Number.isFinite(value) ? value.toFixed(digits) : "—";
const approx = (count) => `~${count.toLocaleString("en-US")}`;
const percent = (value) => `${(100 * value).toFixed(1)}%`;
const plural = (count, noun) => `${count.toLocaleString("en-US")} ${noun}${count === 1 ? "" : "s"}`;
const clock = (ts) => new Date(ts * 1000).toLocaleTimeString([], { hour12: false });
const shorten = (name, length = 18) => (name.length > length ? `${name.slice(0, length - 1)}…` : name);
const runPath = (run, rest) => `runs/${encodeURIComponent(run)}/${rest}`;

// A linear map from [domainLow, domainHigh] onto [rangeLow, rangeHigh].
const scale = (domainLow, domainHigh, rangeLow, rangeHigh) => (v) =>
  rangeLow + ((v - domainLow) / (domainHigh - domainLow || 1)) * (rangeHigh - rangeLow);

// Round axis ticks: the step of 1, 2 or 5 times a power of ten that gives
// closest to `count` ticks.
function ticks(low, high, count) {
  const span = high - low || 1;
  const power = 10 ** Math.floor(Math.log10(span / count));
  const step = [1, 2, 5, 10]
    .map((m) => m * power)
    .reduce((best, s) => (Math.abs(span / s - count) < Math.abs(span / best - count) ? s : best));
  const values = [];
  for (let v = Math.ceil(low / step) * step; v <= high + step * 1e-9; v += step) {
    values.push(Number(v.toFixed(12)));
  }
  return values;
}

// A model's colour comes from its name alone (FNV-1a, a 32-bit string hash,
// into the palette): the same on every load, in every run and in the compare
// view, whatever order the models arrive in. Two models may share one; their
// labels tell them apart.
function colorOf(model) {
  let hash = 0x811c9dc5;
  for (let i = 0; i < model.length; i += 1) {
    hash = Math.imul(hash ^ model.charCodeAt(i), 0x01000193);
  }
  return PALETTE[(hash >>> 0) % PALETTE.length];
}

// How many ticks an axis of `length` px holds: one per 64 px, two to six, so
// that a phone's narrow axis keeps its labels apart.
const tickCount = (length) => Math.max(2, Math.min(6, Math.round(length / 64)));

// Size an SVG to its box; returns the width to draw in.
function frame(plot, height) {
  const width = Math.max(plot.clientWidth, 320);
  plot.setAttribute("viewBox", `0 0 ${width} ${height}`);
  plot.setAttribute("height", height);
  return width;
}

function placeholder(plot) {
  const width = frame(plot, 80);
  plot.replaceChildren(svg("text", { x: width / 2, y: 44, class: "placeholder" }, "no trials yet"));
}

async function getJson(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

// -- runs and the live stream ----------------------------------------------

async function loadRuns() {
  const runs = await getJson("runs").catch(() => null);
  if (runs === null) return setConnection("offline");
  const picker = $("#run-picker");
  if (runs.join("\n") !== Array.from(picker.options, (option) => option.value).join("\n")) {
    picker.replaceChildren(...runs.map((run) => el("option", { value: run }, run)));
  }
  if (runs.length === 0) setConnection("no runs");
  $("#no-runs").hidden = runs.length > 0;
  $("#board").hidden = runs.length === 0;
  if (runs.includes(state.run)) {
    picker.value = state.run;
  } else {
    const wanted = new URLSearchParams(location.search).get("run");
    const run = runs.includes(wanted) ? wanted : runs[0];
    if (run !== undefined) selectRun(run);
  }
  fillComparePicker(runs); // compare.js
}

async function selectRun(run) {
  state.source?.close();
  const generation = ++state.generation;
  Object.assign(state, { run, ...fresh() });
  $("#run-picker").value = run;
  history.replaceState(null, "", `?${new URLSearchParams({ run })}`); // shareable, no reload
  document.body.dataset.run = run;
  fillComparePicker(Array.from($("#run-picker").options, (option) => option.value));
  queueRender();
  try {
    loadInput();
    const answers = [getJson(runPath(run, "config")), getJson(runPath(run, "history"))];
    const [config, history] = await Promise.all(answers);
    // The store's history: every kept look, so a restart or a finished run
    // shows its whole trace.
    const trace = history.map((point) => ({
      ts: point.ts,
      trials: point.trials,
      order: point.models.map((row) => row.model),
      mu: Object.fromEntries(point.models.map((row) => [row.model, row.mu])),
    }));
    if (generation === state.generation) Object.assign(state, { config, trace });
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
  for (const kind of Object.keys(SENTENCES)) source.addEventListener(kind, current(onEvent));
  source.onopen = () => setConnection("live");
  source.onerror = () =>
    setConnection(source.readyState === EventSource.CLOSED ? "offline" : "reconnecting");
}

function onStatus(status) {
  state.status = status;
  // Reported cost totals over time, for the cost per minute.
  const total = (field) => status.models.reduce((sum, row) => sum + (row[field] ?? 0), 0);
  state.costs.push({ ts: Date.now() / 1000, seconds: total("cost_seconds"), tokens: total("cost_tokens") });
  if (state.costs.length > TRACE_LIMIT) state.costs.shift();
  const last = state.trace[state.trace.length - 1];
  // Same rule as the server's trace: a point per change in the trial count.
  if (status.trials > 0 && last?.trials !== status.trials) {
    const mu = Object.fromEntries(status.models.map((row) => [row.model, row.mu]));
    const order = status.models.map((row) => row.model);
    state.trace.push({ ts: Date.now() / 1000, trials: status.trials, order, mu });
    if (state.trace.length > TRACE_LIMIT) state.trace.shift();
    // New trials: an input that had ended goes on (a writer came back), so
    // it is asked again once they stop.
    if (last !== undefined) state.inputEnded = false;
  }
  queueRender();
}

function onEvent(event) {
  state.events.unshift(event);
  state.events.length = Math.min(state.events.length, LOG_LIMIT);
  queueRender();
}

function setConnection(mode) {
  $("#connection").dataset.state = mode;
  $("#connection").textContent = mode;
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
    renderSummary(status);
    renderLeaderboard(status); // before the forest plot, which copies its rows
    renderForest(status);
    renderPairs(status);
    renderPace(status);
    renderExports(status);
    loadQuestions();
    setText("updated", `updated ${clock(Date.now() / 1000)}`);
    document.body.dataset.trials = String(status.trials);
  }
  renderTrace();
  renderLog();
  renderQuestions();
  renderRejected();
}

// -- questions --------------------------------------------------------------

// Fetched after a status, at most every QUESTIONS_POLL_MS: the table is a
// view of the counts, not of every status.
async function loadQuestions() {
  const now = Date.now();
  if (state.questionsLoading || now - state.questionsAt < QUESTIONS_POLL_MS) return;
  Object.assign(state, { questionsLoading: true, questionsAt: now });
  const generation = state.generation;
  try {
    const answers = [getJson(runPath(state.run, "questions")), getJson(runPath(state.run, "rejected"))];
    const [questions, rejected] = await Promise.all(answers);
    if (generation === state.generation) {
      Object.assign(state, { questions, rejected });
      queueRender();
    }
  } catch (error) {
    console.warn("could not load the questions:", error);
  } finally {
    if (generation === state.generation) state.questionsLoading = false;
  }
  // Counts that changed while this answer was on its way are fetched next time.
  if (generation === state.generation) setTimeout(queueRender, QUESTIONS_POLL_MS);
}

const SATURATION = { top: "saturated: every outcome top", bottom: "saturated: every outcome bottom" };

function renderQuestions() {
  const rows = state.questions.map((row) => {
    const ranked = Object.entries(row.models).sort((a, b) => b[1] - a[1]);
    const [best, worst] = [ranked[0], ranked[ranked.length - 1]];
    const extremes = `${best[0]} ${fixed(best[1], 2)} / ${worst[0]} ${fixed(worst[1], 2)}`;
    const kind = row.saturated ? "saturated" : row.spread > 0 ? "separates" : "tied";
    const label = row.saturated ? SATURATION[row.saturated] : kind === "separates" ? "separates models" : "no difference yet";
    return el(
      "tr",
      { "data-question": row.question, "data-state": kind, class: "clickable", tabindex: 0, title: "click: this question's trials" },
      el("td", { class: "model key", "data-field": "question" }, row.question),
      el("td", { class: "num", "data-field": "trials" }, row.trials.toLocaleString("en-US")),
      el("td", { class: "num", "data-field": "mean" }, fixed(row.mean, 3)),
      el("td", { class: "num strong", "data-field": "spread" }, fixed(row.spread, 3)),
      el("td", { class: "model muted" }, extremes),
      el("td", {}, el("span", { class: `badge ${kind}`, "data-field": "state" }, label)),
    );
  });
  $("#questions tbody").replaceChildren(...rows);
  const saturated = state.questions.filter((row) => row.saturated).length;
  const separating = state.questions.filter((row) => !row.saturated && row.spread > 0).length;
  setText("questions-caption", `${separating} separate models · ${saturated} saturated · most separating first`);
}

// The run's latest rejected inputs: where, why, and the start of the input.
function renderRejected() {
  const items = state.rejected.map((item) => {
    const where = item.position === null ? item.source : `${item.source}:${item.position}`;
    const text = el("span", { class: "message" }, el("span", { class: "where" }, where), ` ${item.reason}`);
    const raw = el("span", { class: "muted", "data-field": "raw" }, item.raw);
    return el("li", { "data-position": item.position ?? "" }, el("time", {}, clock(item.received_s)), el("span", {}, text, el("br"), raw));
  });
  $("#rejected").replaceChildren(...items);
  const total = state.status?.rejected ?? items.length;
  setText("rejected-caption", total ? `latest ${items.length} of ${total.toLocaleString("en-US")}` : "none");
}

// -- pace and export ------------------------------------------------------

const PACE_WINDOW_S = 60;
const PACE_REDRAW_MS = 2000;

// Trials per minute over the last minute of wall-clock time, up to now: a
// feed that stopped decays to 0 instead of repeating its last pace. Null
// before two points; ``idle`` is the seconds since the last new trial.
function trialRate(now = Date.now() / 1000) {
  const points = state.trace.filter((point) => point.order.length > 0);
  if (points.length < 2) return null;
  const last = points[points.length - 1];
  const idle = Math.max(now - last.ts, 0);
  // The trials before the window: the last point at or before its start.
  const start = now - PACE_WINDOW_S;
  const before = points.filter((point) => point.ts <= start).pop();
  const first = before ?? points[0];
  const minutes = (now - Math.max(first.ts, start)) / 60;
  const gained = before ? last.trials - before.trials : last.trials - first.trials;
  if (!(minutes > 0)) return { perMinute: null, idle };
  return { perMinute: Math.max(gained, 0) / Math.max(minutes, 1 / 60), idle };
}

// Trials still to run: what the forecasts say the models that need trials
// still need, within the budget left; the budget left when a forecast is
// missing; null when neither is known.
function trialsLeft(status) {
  const models = Math.max(status.models.length, state.config?.models?.length ?? 0);
  const budget = budgetShare(status.trials, models);
  const budgetLeft = budget ? Math.max(budget.total - status.trials, 0) : null;
  const forecasts = status.models.filter((row) => row.needs_trials).map((row) => row.predicted_trials);
  if (forecasts.length === 0) return 0;
  if (forecasts.every((value) => typeof value === "number")) {
    const needed = forecasts.reduce((a, b) => a + b, 0);
    return budgetLeft === null ? needed : Math.min(needed, budgetLeft);
  }
  return budgetLeft;
}

const STALLED_AFTER_S = 30;
const since = (seconds) =>
  seconds < 90
    ? `${Math.round(seconds)} s`
    : seconds < 5400
      ? `${Math.round(seconds / 60)} min`
      : seconds < 172800
        ? `${(seconds / 3600).toFixed(1)} h`
        : `${Math.round(seconds / 86400).toLocaleString("en-US")} days`;

// Reported cost per minute over the last minute of statuses: seconds of
// inference when trials report them, else tokens; null when none is reported.
function costRate() {
  const points = state.costs;
  if (points.length < 2) return null;
  const last = points[points.length - 1];
  const first = points.find((point) => point.ts >= last.ts - 60 && point.ts < last.ts) ?? points[points.length - 2];
  const minutes = (last.ts - first.ts) / 60;
  if (!(minutes > 0)) return null;
  if (last.seconds > 0) return { value: (last.seconds - first.seconds) / minutes, unit: "s of inference" };
  if (last.tokens > 0) return { value: (last.tokens - first.tokens) / minutes, unit: "tokens" };
  return null;
}

// Whether the server's input has ended: a file read to its end (not
// followed), a viewed state file whose writer closed. Trials may still come
// otherwise, so a quiet feed then has stalled.
async function loadInput() {
  const generation = state.generation;
  const answer = await getJson("input").catch(() => null);
  if (answer === null || generation !== state.generation) return;
  state.inputEnded = answer.ended === true;
  if (state.status) renderPace(state.status);
}

// No trial for STALLED_AFTER_S (or too few looks to tell a pace).
function isQuiet(status, pace = trialRate()) {
  return status.trials > 0 && (pace === null || pace.idle >= STALLED_AFTER_S);
}

function renderPace(status) {
  const pace = trialRate();
  const rate = pace?.perMinute ?? null;
  const left = trialsLeft(status);
  // Only a feed that should still send trials stalls: not a stable run, a
  // spent budget or an input read to its end.
  const done = status.stable || left === 0 || state.inputEnded;
  const quiet = isQuiet(status, pace);
  const stalled = !done && quiet && pace !== null;
  const perMinute = rate === null ? "—" : `${Math.round(rate).toLocaleString("en-US")}/min`;
  setText("rate", done && quiet ? "finished" : perMinute);
  field("rate").dataset.stalled = String(stalled);
  field("rate").dataset.finished = String(done && quiet);
  let eta = "no estimate yet";
  if (status.stable) eta = "stable: no trials needed";
  else if (left === 0) eta = "nothing left to run";
  else if (state.inputEnded) eta = left === null ? "input ended" : `input ended · ${approx(left)} trials left to run`;
  else if (stalled) eta = `stalled: no new trial for ${since(pace.idle)}`;
  else if (rate && left !== null) eta = `ETA ~${Math.ceil(left / rate).toLocaleString("en-US")} min for ${approx(left)} trials`;
  else if (left === null) eta = "no budget and no forecast: no end to estimate";
  setText("eta", eta);
  const cost = costRate();
  setText(
    "cost-rate",
    cost === null ? "no cost reported" : `${Math.round(cost.value).toLocaleString("en-US")} ${cost.unit}/min`,
  );
}

const CSV_COLUMNS = ["rank", "group", "adjacent_group", "model", "mu", "avg", "sigma", "lo", "hi", "trials", "needs_trials", "predicted_trials"];
const csvCell = (value, name) => {
  let text = value === null || value === undefined ? "" : String(value);
  // A name a spreadsheet would run as a formula is kept as text.
  if (name === "model" && /^[=+\-@]/.test(text)) text = `'${text}`;
  return /[",\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
};

// The status as files: JSON as the API serves it, CSV one row per model.
function renderExports(status) {
  const rows = status.models.map((row) => CSV_COLUMNS.map((name) => csvCell(row[name], name)).join(","));
  const csv = [CSV_COLUMNS.join(","), ...rows].join("\n") + "\n";
  const name = status.run.replace(/[^A-Za-z0-9._-]+/g, "_");
  const csvLink = $("#export-csv");
  csvLink.setAttribute("href", `data:text/csv;charset=utf-8,${encodeURIComponent(csv)}`);
  csvLink.setAttribute("download", `${name}.csv`);
  const jsonLink = $("#export-json");
  const json = JSON.stringify(status, null, 2);
  jsonLink.setAttribute("href", `data:application/json;charset=utf-8,${encodeURIComponent(json)}`);
  jsonLink.setAttribute("download", `${name}.json`);
}

// -- summary and tables ---------------------------------------------------

// The budget: every model may take max_trials_per_question on every question.
function budgetShare(trials, models) {
  const cap = state.config?.max_trials_per_question;
  const questions = state.status?.question_count;
  if (!cap || !questions) return null;
  const total = cap * questions * models;
  return { used: total > 0 ? trials / total : 0, total };
}

function renderSummary(status) {
  const { duplicates, corrections, rejected } = status;
  setText("trials", status.trials.toLocaleString("en-US"));
  const intake = [plural(duplicates, "duplicate"), plural(corrections, "correction")];
  setText("intake", [...intake, `${rejected} rejected`].join(" · "));
  // Declared models count toward the budget before their first trial.
  const models = Math.max(status.models.length, state.config?.models?.length ?? 0);
  const budget = budgetShare(status.trials, models);
  const cap = state.config?.max_trials_per_question;
  setText("budget", budget ? percent(budget.used) : "no cap");
  field("budget-bar").style.width = budget ? percent(Math.min(budget.used, 1)) : "0";
  const total = budget?.total.toLocaleString("en-US");
  setText("budget-detail", budget ? `of ${total}: ${cap} per question and model` : "no trial cap set");
  setText("question_count", String(status.question_count));
  setText("question-detail", status.open ? "open run: questions seen" : "declared");
  setText("rule", status.rule);
  setText("confidence", `confidence ${fixed(status.confidence)}`);
  setText("stable", status.stable ? "stable" : "sampling");
  field("stable").dataset.value = String(status.stable);
  const groups = new Set(status.models.map((row) => row.group)).size;
  setText("groups", `${plural(status.models.length, "model")} in ${plural(groups, "group")}`);
}

function needsText(row) {
  if (!row.needs_trials) return "—";
  return row.predicted_trials === null ? "yes" : approx(row.predicted_trials);
}

function budgetMeter(trials) {
  const share = budgetShare(trials, 1);
  if (!share) return "";
  const bar = el("span", { style: `width:${percent(Math.min(share.used, 1))}` });
  return el("span", { class: "meter small", title: `${percent(share.used)} of its budget` }, bar);
}

function renderLeaderboard(status) {
  const rows = status.models.map((row) => {
    const swatch = el("span", { class: "swatch", style: `background:${colorOf(row.model)}` });
    const band = row.group % 2 ? "band-odd" : "band-even";
    const [meter, needs] = [budgetMeter(row.trials), row.needs_trials ? "needs" : "muted"];
    return el(
      "tr",
      { "data-model": row.model, "data-group": row.group, class: band },
      el("td", { class: "num", "data-field": "rank" }, row.rank),
      el("td", {}, el("span", { class: "group", "data-field": "group" }, row.group ?? "-")),
      el("td", { class: "model key" }, swatch, el("span", { "data-field": "model" }, row.model)),
      el("td", { class: "num strong", "data-field": "mu" }, fixed(row.mu)),
      el("td", { class: "num", "data-field": "avg" }, fixed(row.avg)),
      el("td", { class: "num", "data-field": "sigma" }, fixed(row.sigma)),
      el("td", { class: "num", "data-field": "interval" }, `${fixed(row.lo)} – ${fixed(row.hi)}`),
      el("td", { class: "num" }, el("span", { "data-field": "trials" }, row.trials), meter),
      el("td", { class: `num ${needs}`, "data-field": "needs" }, needsText(row)),
    );
  });
  $("#leaderboard tbody").replaceChildren(...rows);
  renderMetrics(status);
}

// The run's live metrics (avg first), one column each, in leaderboard order.
function renderMetrics(status) {
  const names = [];
  for (const row of status.models) {
    for (const name of Object.keys(row.metrics ?? {})) if (!names.includes(name)) names.push(name);
  }
  const table = $("#metrics");
  table.hidden = names.length < 2; // avg alone is already in the leaderboard
  const head = names.map((name) => el("th", { class: "num", "data-metric": name }, name));
  table.querySelector("thead tr").replaceChildren(el("th", { class: "key" }, "Model"), ...head);
  const rows = status.models.map((row) =>
    el(
      "tr",
      { "data-model": row.model },
      el("td", { class: "model key" }, row.model),
      ...names.map((name) => {
        const value = row.metrics?.[name];
        const title = value ? `${name}: ${fixed(value.lo)} – ${fixed(value.hi)}` : "";
        const text = value ? `${fixed(value.mu)} ± ${fixed(value.sigma)}` : "—";
        return el("td", { class: "num", "data-metric": name, title }, text);
      }),
    ),
  );
  table.querySelector("tbody").replaceChildren(...rows);
}

const PAIR_STATES = {
  resolved: "resolved",
  equivalent: "equivalent within the margin",
  tie: "statistical tie at this budget",
  open: "unresolved",
};
const pairKind = (pair) =>
  pair.resolved ? "resolved" : pair.equivalent ? "equivalent" : pair.unresolvable ? "tie" : "open";

// Trials until the boundary settles, where the server forecasts them.
const forecastText = (pair) =>
  pair.resolved || pair.unresolvable || pair.equivalent || !pair.predicted_trials
    ? "—"
    : approx(pair.predicted_trials);

function renderPairs(status) {
  const rows = status.pairs.map((pair) => {
    const kind = pairKind(pair);
    return el(
      "tr",
      { "data-pair": `${pair.a}|${pair.b}`, "data-state": kind },
      el("td", { class: "model key" }, `${pair.a} › ${pair.b}`),
      el("td", { class: "num", "data-field": "z" }, fixed(pair.z)),
      el("td", { class: "num muted", "data-field": "threshold" }, fixed(pair.threshold ?? null, 2)),
      el("td", { class: "num", "data-field": "rho" }, fixed(pair.rho)),
      el("td", { class: "num muted", "data-field": "forecast" }, forecastText(pair)),
      el("td", {}, el("span", { class: `badge ${kind}`, "data-field": "state" }, PAIR_STATES[kind])),
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
  const models = status.models;
  const rows = tableRows();
  setText("forest-caption", `${fixed(status.confidence * 100, 1)}%`);
  if (models.length === 0 || rows.length !== models.length) return placeholder(plot);
  const [first, last] = [rows[0].top, rows[rows.length - 1].bottom];
  const width = frame(plot, last + 2);
  const longest = Math.max(...models.map((row) => shorten(row.model).length), 4);
  const low = Math.min(...models.map((row) => row.lo));
  const high = Math.max(...models.map((row) => row.hi));
  const pad = (high - low) * 0.04 || 0.01;
  const x = scale(low - pad, high + pad, 20 + 7 * longest, width - 44);
  const parts = [];
  for (const block of groupBlocks(models)) {
    const [top, bottom] = [rows[block.start].top, rows[block.end].bottom];
    const band = block.group % 2 ? "band band-odd" : "band band-even"; // as in the table
    const label = { class: "group-label", x: width - 8, y: (top + bottom) / 2 + 4 };
    parts.push(
      svg("rect", { class: band, x: 0, y: top, width, height: bottom - top }),
      svg("text", label, `G${block.group}`),
    );
  }
  for (const tick of ticks(low - pad, high + pad, tickCount(x(high + pad) - x(low - pad)))) {
    const at = x(tick);
    parts.push(
      svg("line", { class: "grid", x1: at, x2: at, y1: first, y2: last }),
      svg("text", { class: "tick", x: at, y: first - 6, "text-anchor": "middle" }, tick.toFixed(2)),
    );
  }
  models.forEach((row, index) => {
    const y = (rows[index].top + rows[index].bottom) / 2;
    const color = colorOf(row.model);
    const title = `${row.model}: μ ${fixed(row.mu)}, interval ${fixed(row.lo)} – ${fixed(row.hi)}`;
    const label = { class: "row-label", x: x(low - pad) - 10, y: y + 4, "text-anchor": "end" };
    const marks = svg("g", { "data-model": row.model }, svg("title", {}, title));
    marks.append(
      svg("text", label, shorten(row.model)),
      svg("line", { class: "interval", x1: x(row.lo), x2: x(row.hi), y1: y, y2: y, stroke: color }),
      svg("circle", { class: "point", cx: x(row.mu), cy: y, r: 4.5, fill: color }),
    );
    parts.push(marks);
  });
  plot.replaceChildren(...parts);
}

// The leaderboard's row spans, measured from the table's top. The plot copies
// them, so beside the table each interval sits level with its model's line
// and the axis with the column headings.
function tableRows() {
  const origin = $("#leaderboard").getBoundingClientRect().top;
  return Array.from(document.querySelectorAll("#leaderboard tbody tr"), (row) => {
    const rect = row.getBoundingClientRect();
    return { top: rect.top - origin, bottom: rect.bottom - origin };
  });
}

function groupBlocks(rows) {
  const blocks = [];
  rows.forEach((row, index) => {
    const last = blocks[blocks.length - 1];
    if (last?.group === row.group) last.end = index;
    else blocks.push({ group: row.group, start: index, end: index });
  });
  return blocks;
}

// -- ranking trace --------------------------------------------------------

function renderTrace() {
  const plot = $("#trace");
  // The server also records the empty status a run starts with.
  const points = state.trace.filter((point) => point.order.length > 0);
  if (points.length === 0) return placeholder(plot);
  const height = 330;
  const margin = { top: 12, right: 96, bottom: 34, left: 52 };
  const width = frame(plot, height);
  const models = Array.from(new Set(points.flatMap((point) => point.order)));
  const values = points.flatMap((point) => Object.values(point.mu));
  const [low, high] = [Math.min(...values), Math.max(...values)];
  const pad = (high - low) * 0.06 || 0.01;
  const first = points[0].trials;
  const last = points[points.length - 1].trials;
  const x = scale(first, Math.max(last, first + 1), margin.left, width - margin.right);
  const [top, bottom] = [margin.top, height - margin.bottom];
  const y = scale(low - pad, high + pad, bottom, top);
  const yTicks = ticks(low - pad, high + pad, 5);
  const xTicks = last > first ? ticks(first, last, tickCount(width - margin.left - margin.right)) : [first];
  const parts = traceAxes(x, y, { xTicks, yTicks, width, height, margin });
  const ends = [];
  for (const model of models) {
    // A model that shows up late starts its line at its first point.
    const coords = points
      .filter((point) => typeof point.mu[model] === "number")
      .map((point) => [x(point.trials), y(point.mu[model])]);
    if (coords.length === 0) continue;
    const color = colorOf(model);
    const line = coords.map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(" ");
    const [endX, endY] = coords[coords.length - 1];
    parts.push(
      svg("polyline", { class: "series", points: line, stroke: color, "data-model": model }),
      svg("circle", { cx: endX, cy: endY, r: 2.5, fill: color }),
    );
    ends.push({ model, color, x: endX, y: endY });
  }
  parts.push(...endLabels(ends, top, bottom));
  plot.replaceChildren(...parts);
}

function traceAxes(x, y, { xTicks, yTicks, width, height, margin }) {
  const [left, right, base] = [margin.left, width - margin.right, height - margin.bottom];
  const parts = yTicks.flatMap((tick) => [
    svg("line", { class: "grid", x1: left, x2: right, y1: y(tick), y2: y(tick) }),
    svg("text", { class: "tick", x: left - 8, y: y(tick) + 4, "text-anchor": "end" }, tick.toFixed(2)),
  ]);
  for (const tick of xTicks) {
    const label = { class: "tick", x: x(tick), y: base + 16, "text-anchor": "middle" };
    parts.push(svg("text", label, tick.toLocaleString("en-US")));
  }
  const title = { class: "axis-title", x: (left + right) / 2, y: height - 4, "text-anchor": "middle" };
  parts.push(
    svg("line", { class: "axis", x1: left, x2: right, y1: base, y2: base }),
    svg("text", title, "trials"),
    svg("text", { class: "axis-title", x: 12, y: margin.top + 4 }, "μ"),
  );
  return parts;
}

// Labels at the line ends, pushed apart so that close lines stay readable:
// one pass down keeps them `gap` apart, one pass up keeps them inside.
function endLabels(ends, top, bottom) {
  const gap = 12;
  const sorted = [...ends].sort((a, b) => a.y - b.y);
  sorted.forEach((end, i) => {
    end.labelY = Math.max(end.y, i > 0 ? sorted[i - 1].labelY + gap : top);
  });
  for (let i = sorted.length - 1; i >= 0; i -= 1) {
    const limit = i < sorted.length - 1 ? sorted[i + 1].labelY - gap : bottom;
    sorted[i].labelY = Math.min(sorted[i].labelY, limit);
  }
  return ends.flatMap(({ model, color, x, y, labelY }) => [
    svg("line", { class: "leader", x1: x + 3, x2: x + 10, y1: y, y2: labelY, stroke: color }),
    svg("text", { class: "end-label", x: x + 13, y: labelY + 4, fill: color }, shorten(model, 12)),
  ]);
}

// -- event log ------------------------------------------------------------

// The event kinds the stream carries, one sentence each; payload fields are
// only ever formatted as text.
const SENTENCES = {
  pair_resolved: (p) => `${p.a} ranks above ${p.b} (z ${fixed(p.z)}, ρ ${fixed(p.rho)})`,
  pair_unresolvable: (p) => `${p.a} vs ${p.b}: statistical tie at this budget (z ${fixed(p.z)})`,
  pair_equivalent: (p) => `${p.a} and ${p.b} are equivalent within the margin (z ${fixed(p.z)})`,
  model_done: (p) => `${p.model} needs no more trials: group ${p.group} after ${p.trials} trials`,
  budget_exhausted: (p) => `budget spent for ${[].concat(p.models ?? []).join(", ")}`,
  ranking_stable: (p) => `ranking stable after ${p.trials} trials`,
};

function describe(event) {
  const sentence = SENTENCES[event.kind];
  return sentence ? sentence(event.payload ?? {}) : `${event.kind} ${event.subject ?? ""}`;
}

function renderLog() {
  const items = state.events.map((event) => {
    const badge = el("span", { class: `badge kind-${event.kind}` }, event.kind.replace(/_/g, " "));
    const message = el("span", { class: "message" }, describe(event));
    const attrs = { "data-kind": event.kind, "data-seq": event.seq };
    return el("li", attrs, el("time", {}, clock(event.ts)), badge, message);
  });
  $("#event-log").replaceChildren(...items);
  field("log-empty").hidden = items.length > 0;
}

// -- start ----------------------------------------------------------------

function start() {
  const compared = comparedRuns(); // compare.js: ?compare=a,b is its view
  if (compared !== null) return startCompare(compared);
  $("#run-picker").addEventListener("change", (event) => selectRun(event.target.value));
  $("#compare-picker").addEventListener("change", onComparePick);
  window.addEventListener("resize", queueRender);
  // A page going into the back/forward cache keeps its connections, and the
  // server would hold the stream (and a subscriber queue) for it: close on
  // hide, reopen when the page comes back.
  window.addEventListener("pagehide", () => state.source?.close());
  window.addEventListener("pageshow", (event) => {
    if (event.persisted && state.run !== null) selectRun(state.run);
  });
  loadRuns();
  setInterval(loadRuns, RUNS_POLL_MS); // new runs appear without a reload
  // A stalled feed sends no statuses: the pace is redrawn on the clock, and
  // while no trial comes the server is asked whether its input has ended.
  setInterval(() => {
    if (!state.status) return;
    if (!state.inputEnded && isQuiet(state.status)) loadInput();
    renderPace(state.status);
  }, PACE_REDRAW_MS);
}

// After every deferred script (compare.js, trials.js) has run.
document.addEventListener("DOMContentLoaded", start);
