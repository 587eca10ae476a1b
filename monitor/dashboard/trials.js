// scorio-monitor dashboard: from a question to its trials.
//
// A click (or Enter) on a row of the Questions table opens a dialog with the
// question's trials per model, read from GET
// runs/{run}/questions/{question}/trials: trial id, category label and
// weight, cost and time where the store keeps them, and the harness's own
// reference where the trial id carries one (Inspect: eval, sample, epoch).
// Uses app.js's helpers (el, $, fixed, clock, colorOf, runPath).
//
// Safety: as in app.js, server strings reach the DOM only through
// textContent (text nodes) and setAttribute.
"use strict";

const trialsState = { asked: 0 }; // a later click drops an earlier answer

function trialsDialog() {
  let dialog = $("#trials-dialog");
  if (dialog === null) {
    const close = el("button", { type: "button", class: "close", "data-field": "trials-close" }, "Close");
    close.addEventListener("click", () => dialog.close());
    dialog = el(
      "dialog",
      { id: "trials-dialog", "aria-label": "trials of a question" },
      el("header", {}, el("h2", { "data-field": "trials-title" }, ""), close),
      el("p", { class: "muted", "data-field": "trials-kept" }, ""),
      el("p", { class: "hint", "data-field": "trials-hint", hidden: "" }, ""),
      el("div", { "data-field": "trials-body" }),
    );
    document.body.append(dialog);
  }
  return dialog;
}

async function openTrials(question) {
  const asked = ++trialsState.asked;
  const run = state.run;
  const dialog = trialsDialog();
  const part = (name) => dialog.querySelector(`[data-field="${name}"]`);
  part("trials-title").textContent = `Question ${question}`;
  part("trials-kept").textContent = "loading…";
  part("trials-hint").hidden = true;
  part("trials-body").replaceChildren();
  dialog.dataset.question = question;
  delete dialog.dataset.loaded;
  if (!dialog.open) dialog.showModal();
  let answer;
  try {
    const path = runPath(run, `questions/${encodeURIComponent(question)}/trials`);
    const response = await fetch(path, { headers: { Accept: "application/json" } });
    answer = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(typeof answer.detail === "string" ? answer.detail : `HTTP ${response.status}`);
  } catch (error) {
    if (asked === trialsState.asked) {
      part("trials-kept").textContent = `no trials shown: ${error.message ?? error}`;
      dialog.dataset.loaded = "error";
    }
    return;
  }
  if (asked !== trialsState.asked) return;
  const total = answer.models.reduce((sum, model) => sum + model.total, 0);
  part("trials-title").textContent = `Question ${answer.question} · ${plural(total, "trial")} · run ${answer.run}`;
  part("trials-kept").textContent = `The store keeps: ${answer.kept}.`;
  const inspect = answer.models.some((model) => model.trials.some((trial) => trial.ref?.startsWith("Inspect ")));
  if (inspect) {
    part("trials-hint").textContent =
      "Inspect trials: open the eval's log with `inspect view` (log directory of the eval), " +
      `then sample ${answer.question} at the epoch shown; the eval id is in the log's header.`;
    part("trials-hint").hidden = false;
  }
  part("trials-body").replaceChildren(...answer.models.map(modelTrials));
  dialog.dataset.loaded = "true";
}

function modelTrials(model) {
  const swatch = el("span", { class: "swatch", style: `background:${colorOf(model.model)}` });
  const shown = model.trials.length < model.total ? ` (first ${model.trials.length} shown)` : "";
  const mean = model.mean === null ? "" : ` · mean ${fixed(model.mean, 3)}`;
  const heading = el("h3", {}, swatch, el("span", { "data-field": "model" }, model.model), el("span", { class: "muted" }, ` ${plural(model.total, "trial")}${mean}${shown}`));
  const rows = model.trials.map((trial) => {
    const label = trial.label === null ? `category ${trial.category}` : trial.label;
    const weight = trial.weight === null ? "" : ` (${fixed(trial.weight, 2)})`;
    const cost = [trial.tokens === null ? null : `${trial.tokens.toLocaleString("en-US")} tokens`, trial.seconds === null ? null : `${fixed(trial.seconds, 1)} s`];
    return el(
      "tr",
      { "data-trial": trial.trial, "data-prior": String(trial.prior) },
      el("td", { class: "model", "data-field": "trial" }, trial.trial),
      el("td", { "data-field": "label" }, `${label}${weight}${trial.prior ? " · prior" : ""}`),
      el("td", { class: "num", "data-field": "cost" }, cost.filter((part) => part !== null).join(", ") || "—"),
      el("td", { class: "num", "data-field": "ts" }, trial.ts === null ? "—" : clock(trial.ts)),
      el("td", { class: "model muted", "data-field": "ref" }, trial.ref ?? ""),
    );
  });
  const head = el("tr", {}, ...["Trial", "Outcome (weight)", "Cost", "Time", "Harness reference"].map((name) => el("th", {}, name)));
  const table = el("table", { class: "grid" }, el("thead", {}, head), el("tbody", {}, ...rows));
  return el("section", { class: "model-trials", "data-model": model.model }, heading, table);
}

function pickQuestion(event) {
  if (event.type === "keydown" && event.key !== "Enter") return;
  const row = event.target.closest("tr[data-question]");
  if (row !== null) openTrials(row.dataset.question);
}

document.addEventListener("DOMContentLoaded", () => {
  const body = $("#questions tbody");
  body.addEventListener("click", pickQuestion);
  body.addEventListener("keydown", pickQuestion);
});
