// scorio-monitor dashboard: runs side by side (/?compare=runA,runB).
//
// Reads GET compare?runs=a,b (models aligned across the runs, see
// monitor/engine/comparison.py) every COMPARE_POLL_MS and draws a table
// (model x run: rank, group, mu, interval; "absent" where a run has no such
// model) and a forest plot with one interval per run in the run's colour.
// Uses app.js's helpers (el, svg, fixed, frame, scale, ticks, tickCount,
// shorten, colorOf). The "Compare with" picker is filled here for both views.
//
// Safety: as in app.js, server strings reach the DOM only through
// textContent (text nodes) and setAttribute.
"use strict";

const COMPARE_POLL_MS = 3000;
const RUN_COLORS = ["#4269d0", "#ff725c", "#3ca951", "#a463f2", "#efb118", "#6cc5b0", "#9c6b4e", "#ff8ab7"];
const compareState = { runs: [], data: null, error: null, timer: null };

// The runs of ?compare=a,b, or null for the one-run view.
function comparedRuns() {
  const text = new URLSearchParams(location.search).get("compare");
  if (text === null) return null;
  return text.split(",").map((run) => run.trim()).filter((run) => run.length > 0);
}

const runColor = (index) => RUN_COLORS[index % RUN_COLORS.length];
const compareUrl = (runs) => `?${new URLSearchParams({ compare: runs.join(",") })}`;

// The runs now shown: the compared ones, or the one run of the main view.
const shownRuns = () => (compareState.runs.length > 0 ? compareState.runs : [state.run].filter((run) => run !== null));

// "Compare with": every run not shown yet; picking one opens (or widens) the
// comparison of the runs shown and it.
function fillComparePicker(runs) {
  const picker = $("#compare-picker");
  const shown = shownRuns();
  const others = runs.filter((run) => !shown.includes(run));
  const wanted = ["", ...others];
  const current = Array.from(picker.options, (option) => option.value);
  if (wanted.length === current.length && wanted.join("\n") === current.join("\n")) return;
  const prompt = el("option", { value: "" }, others.length > 0 ? "choose a run" : "no other run");
  picker.replaceChildren(prompt, ...others.map((run) => el("option", { value: run }, run)));
  picker.value = "";
}

function onComparePick(event) {
  const run = event.target.value;
  if (run === "") return;
  location.search = compareUrl([...shownRuns(), run]);
}

async function startCompare(runs) {
  compareState.runs = runs;
  document.body.dataset.view = "compare";
  $("#board").hidden = true;
  $("#compare-board").hidden = false;
  $("#compare-picker").addEventListener("change", onComparePick);
  // The run picker leaves the comparison for the run picked.
  const picker = $("#run-picker");
  picker.replaceChildren(el("option", { value: "" }, "(comparing)"), ...runs.map((run) => el("option", { value: run }, run)));
  picker.value = "";
  picker.addEventListener("change", (event) => {
    if (event.target.value) location.search = `?${new URLSearchParams({ run: event.target.value })}`;
  });
  window.addEventListener("resize", () => compareState.data && renderCompare());
  const names = await getJson("runs").catch(() => []);
  fillComparePicker(names);
  await loadCompare();
}

async function loadCompare() {
  clearTimeout(compareState.timer);
  try {
    const path = `compare?${new URLSearchParams({ runs: compareState.runs.join(",") })}`;
    const response = await fetch(path, { headers: { Accept: "application/json" } });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(typeof body.detail === "string" ? body.detail : `HTTP ${response.status}`);
    Object.assign(compareState, { data: body, error: null });
    setConnection("live");
  } catch (error) {
    compareState.error = String(error.message ?? error);
    setConnection("offline");
  }
  renderCompare();
  compareState.timer = setTimeout(loadCompare, COMPARE_POLL_MS);
}

function renderCompare() {
  const { data, error } = compareState;
  if (error !== null || data === null) {
    setText("compare-caption", error ?? "loading");
    $("#compare-table tbody").replaceChildren();
    return placeholder($("#compare-forest"));
  }
  const runs = data.runs.map((info) => info.run);
  setText("compare-caption", `${runs.join(" vs ")} · ${data.models.length} models`);
  document.body.dataset.compared = runs.join(",");
  $("#compare-legend").replaceChildren(
    ...data.runs.map((info, index) => {
      const swatch = el("span", { class: "swatch", style: `background:${runColor(index)}` });
      const detail = `${info.trials.toLocaleString("en-US")} trials · ${fixed(info.confidence * 100, 0)}% · ${info.stable ? "stable" : "sampling"}`;
      return el("span", { class: "legend-item", "data-run": info.run }, swatch, el("strong", {}, info.run), ` ${detail}`);
    }),
  );
  renderCompareTable(runs, data.models);
  renderCompareForest(runs, data.models);
  renderCompareExports(runs, data);
}

const COMPARE_COLUMNS = ["model", "run", "present", "rank", "group", "avg", "mu", "sigma", "lo", "hi", "trials"];

// The comparison as files: JSON as GET compare serves it, CSV one row per
// model and run (as `status --compare --format csv`).
function renderCompareExports(runs, data) {
  const rows = data.models.flatMap((model) =>
    runs.map((run) => {
      const cell = model.runs[run] ?? {};
      const row = { ...cell, model: model.model, run, present: model.runs[run] ? "True" : "False" };
      return COMPARE_COLUMNS.map((name) => csvCell(row[name], name)).join(",");
    }),
  );
  const csv = [COMPARE_COLUMNS.join(","), ...rows].join("\n") + "\n";
  const name = runs.join("-vs-").replace(/[^A-Za-z0-9._-]+/g, "_");
  const csvLink = $("#export-csv");
  csvLink.setAttribute("href", `data:text/csv;charset=utf-8,${encodeURIComponent(csv)}`);
  csvLink.setAttribute("download", `${name}.csv`);
  const jsonLink = $("#export-json");
  jsonLink.setAttribute("href", `data:application/json;charset=utf-8,${encodeURIComponent(JSON.stringify(data, null, 2))}`);
  jsonLink.setAttribute("download", `${name}.json`);
}

function renderCompareTable(runs, models) {
  const [top, sub] = $("#compare-table thead").rows;
  top.replaceChildren(
    el("th", { rowspan: 2, class: "key" }, "Model"),
    ...runs.map((run, index) => {
      const swatch = el("span", { class: "swatch", style: `background:${runColor(index)}` });
      return el("th", { colspan: 4, class: "run-head", "data-run": run }, swatch, run);
    }),
  );
  sub.replaceChildren(
    ...runs.flatMap(() => [
      el("th", { class: "num" }, "#"),
      el("th", {}, "Group"),
      el("th", { class: "num" }, "μ"),
      el("th", { class: "num" }, "Credible interval"),
    ]),
  );
  const rows = models.map((model) =>
    el(
      "tr",
      { "data-model": model.model },
      el(
        "td",
        { class: "model key" },
        el("span", { class: "swatch", style: `background:${colorOf(model.model)}` }),
        el("span", { "data-field": "model" }, model.model),
      ),
      ...runs.flatMap((run) => {
        const cell = model.runs[run];
        if (cell === null || cell === undefined) {
          return [el("td", { colspan: 4, class: "absent muted", "data-run": run, "data-state": "absent" }, "absent")];
        }
        const at = { "data-run": run };
        return [
          el("td", { ...at, class: "num run-start", "data-field": "rank" }, cell.rank),
          el("td", at, el("span", { class: "group", "data-field": "group" }, cell.group ?? "-")),
          el("td", { ...at, class: "num strong", "data-field": "mu" }, fixed(cell.mu)),
          el("td", { ...at, class: "num", "data-field": "interval" }, `${fixed(cell.lo)} – ${fixed(cell.hi)}`),
        ];
      }),
    ),
  );
  $("#compare-table tbody").replaceChildren(...rows);
}

// One block per model, one line per run it is in, on one shared axis.
function renderCompareForest(runs, models) {
  const plot = $("#compare-forest");
  const cells = models.flatMap((model) => runs.map((run) => model.runs[run]).filter((cell) => cell));
  if (cells.length === 0) return placeholder(plot);
  const [lineGap, blockGap, top] = [12, 12, 26];
  const blockHeight = runs.length * lineGap + blockGap;
  const height = top + models.length * blockHeight + 4;
  const width = frame(plot, height);
  const longest = Math.max(...models.map((model) => shorten(model.model).length), 4);
  const low = Math.min(...cells.map((cell) => cell.lo));
  const high = Math.max(...cells.map((cell) => cell.hi));
  const pad = (high - low) * 0.04 || 0.01;
  const x = scale(low - pad, high + pad, 20 + 7 * longest, width - 16);
  const parts = [];
  for (const tick of ticks(low - pad, high + pad, tickCount(x(high + pad) - x(low - pad)))) {
    const at = x(tick);
    parts.push(
      svg("line", { class: "grid", x1: at, x2: at, y1: top - 4, y2: height - 4 }),
      svg("text", { class: "tick", x: at, y: top - 10, "text-anchor": "middle" }, tick.toFixed(2)),
    );
  }
  models.forEach((model, row) => {
    const blockTop = top + row * blockHeight;
    const band = row % 2 ? "band band-odd" : "band band-even";
    const label = { class: "row-label", x: x(low - pad) - 10, y: blockTop + blockHeight / 2, "text-anchor": "end" };
    parts.push(
      svg("rect", { class: band, x: 0, y: blockTop, width, height: blockHeight }),
      svg("text", label, shorten(model.model)),
    );
    runs.forEach((run, index) => {
      const cell = model.runs[run];
      if (!cell) return;
      const y = blockTop + blockGap / 2 + index * lineGap + lineGap / 2;
      const color = runColor(index);
      const title = `${model.model} in ${run}: μ ${fixed(cell.mu)}, interval ${fixed(cell.lo)} – ${fixed(cell.hi)}, rank ${cell.rank}, group ${cell.group ?? "-"}`;
      parts.push(
        svg(
          "g",
          { "data-model": model.model, "data-run": run },
          svg("title", {}, title),
          svg("line", { class: "interval", x1: x(cell.lo), x2: x(cell.hi), y1: y, y2: y, stroke: color }),
          svg("circle", { class: "point", cx: x(cell.mu), cy: y, r: 4, fill: color }),
        ),
      );
    });
  });
  plot.replaceChildren(...parts);
}
