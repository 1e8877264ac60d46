// rayqueue's web view: read-only, no build step, no dependencies. Every value from the server is
// put into the page with textContent (never innerHTML), so a task name cannot inject markup.
"use strict";

const REFRESH_MS = 3000;
const PAGE_ROWS = 500; // rows asked for a page of api/tasks
const MAX_ROWS = 5000; // rows the table loads at most: beyond them, the total is shown
const HISTORY_REFRESH_MS = 15000;
const TOKEN_KEY = "rayqueue.token";
const state = { resource: "cpu", window: "1h", tasks: [], total: 0, now: 0, history: null, overview: null };

// -- the API token: from #token=..., else asked for once a request is refused ---------------------
function takeTokenFromHash() {
  const match = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname + location.search); // keep it out of the URL bar
  }
}

async function getJSON(path) {
  const headers = {};
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers["Authorization"] = "Bearer " + token;
  const response = await fetch(path, { headers, cache: "no-store" });
  if (response.status === 401) {
    const given = window.prompt("rayqueue API token");
    if (given) {
      sessionStorage.setItem(TOKEN_KEY, given);
      return getJSON(path);
    }
  }
  if (!response.ok) throw new Error(path + ": HTTP " + response.status);
  return response.json();
}

// -- formatting ---------------------------------------------------------------------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value !== null && value !== undefined) node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  return node;
}

function amount(resource, value) {
  if (value === null || value === undefined) return "–";
  if (resource !== "memory") return (Math.round(value * 100) / 100).toString();
  // The plot's axis: binary units as Kubernetes writes them (15Gi), like every other figure.
  const units = ["B", "Ki", "Mi", "Gi", "Ti", "Pi"];
  let v = value, i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (Math.round(v * 10) / 10) + units[i];
}

function duration(seconds) {
  if (seconds === null || seconds === undefined || !isFinite(seconds)) return "";
  seconds = Math.max(0, seconds);
  if (seconds >= 2 * 86400) return Math.floor(seconds / 86400) + "d";
  if (seconds >= 2 * 3600) return Math.floor(seconds / 3600) + "h";
  if (seconds >= 60) return Math.floor(seconds / 60) + "m";
  return Math.floor(seconds) + "s";
}

function epoch(iso) { return iso ? Date.parse(iso) / 1000 : null; }

// -- header tiles -------------------------------------------------------------------------------
function tile(label, value, fraction, testid) {
  const box = el("div", { class: "tile", "data-testid": testid }, el("div", { class: "label" }, label),
    el("div", { class: "value" }, value));
  if (fraction !== null && fraction !== undefined && isFinite(fraction)) {
    const bar = el("div", { class: "bar" }, el("div", {}));
    bar.firstChild.style.width = Math.min(100, Math.max(0, fraction * 100)) + "%";
    box.append(bar);
  }
  return box;
}

function renderOverview(o, finished24h) {
  const meta = document.getElementById("meta");
  const parts = ["queue " + o.queueId, "policy " + o.policy];
  if (o.lastPassAt) parts.push("last pass " + duration(o.now - epoch(o.lastPassAt)) + " ago");
  meta.textContent = o.rayAvailable === false ? "Ray unavailable: " + (o.rayError || "?") + " · " + parts.join(" · ")
                                              : parts.join(" · ");
  meta.className = o.rayAvailable === false ? "meta bad" : "meta";
  const tiles = [
    tile("running", o.counts.running ?? "–", null, "tile-running"),
    tile("starting", o.counts.starting ?? "–", null, "tile-starting"),
    tile("queued", o.counts.queued ?? "–", null, "tile-queued"),
    tile("finished (24 h)", finished24h ?? "–", null, "tile-finished"),
  ];
  for (const resource of ["cpu", "gpu", "memory"]) {
    const cap = o.capacity ? o.capacity[resource] : null;
    const used = o.reserved ? o.reserved[resource] : null;
    tiles.push(tile(resource + " reserved / capacity", amount(resource, used) + " / " + amount(resource, cap),
      cap ? used / cap : null, "tile-" + resource));
  }
  document.getElementById("tiles").replaceChildren(...tiles);
}

// -- the tasks table ----------------------------------------------------------------------------
function labelFilter() {
  const text = document.getElementById("filter-label").value.trim();
  if (!text) return () => true;
  const [key, ...rest] = text.split("=");
  const value = rest.join("=");
  return (task) => key in task.labels && (rest.length === 0 || task.labels[key] === value);
}

function fillSelect(id, values) {
  const select = document.getElementById(id);
  const current = select.value;
  const options = [el("option", { value: "" }, "all"), ...values.map((v) => el("option", { value: v }, v))];
  select.replaceChildren(...options);
  select.value = values.includes(current) ? current : "";
}

// The table's rows, page after page (each page's `continue` names the next), up to MAX_ROWS. A row
// that moved across a page boundary between two reads may come twice: the first is kept.
async function getTasks() {
  const first = await getJSON("api/tasks?limit=" + PAGE_ROWS);
  const tasks = [...first.tasks];
  let next = first.continue;
  while (next && tasks.length < MAX_ROWS) {
    const page = await getJSON("api/tasks?limit=" + PAGE_ROWS + "&continue=" + encodeURIComponent(next));
    tasks.push(...page.tasks);
    next = page.continue;
  }
  const seen = new Set();
  const unique = tasks.filter((t) => !seen.has(t.name) && seen.add(t.name));
  return { now: first.now, finished24h: first.finished24h, tasks: unique, total: next ? first.total : unique.length };
}

function renderTasks(data) {
  state.tasks = data.tasks;
  state.total = data.total;
  state.now = data.now;
  const phases = [...new Set(data.tasks.map((t) => t.phase).filter(Boolean))].sort();
  const queues = [...new Set(data.tasks.map((t) => t.queue).filter(Boolean))].sort();
  fillSelect("filter-phase", phases);
  fillSelect("filter-queue", queues);
  const phase = document.getElementById("filter-phase").value;
  const queue = document.getElementById("filter-queue").value;
  const byLabel = labelFilter();
  const shown = data.tasks.filter((t) => (!phase || t.phase === phase) && (!queue || t.queue === queue) && byLabel(t));
  const rows = shown.map((t) => {
    // Written by the server's formatter (0.5 CPU, 15Gi), the one the CLI uses.
    const resText = t.resourcesText || "";
    let since = "";
    if (t.phase === "Running" && t.startedAt) since = "running " + duration(data.now - epoch(t.startedAt));
    else if (t.phase === "Starting" && t.submittedAt) since = "starting " + duration(data.now - epoch(t.submittedAt));
    else if (t.queuedAt && !t.finishedAt && (t.phase === "Queued" || t.phase === "Unschedulable"))
      since = "waiting " + duration(data.now - epoch(t.queuedAt));
    else if (t.finishedAt && t.startedAt) since = "ran " + duration(epoch(t.finishedAt) - epoch(t.startedAt));
    const why = el("td", { class: "why" });
    if (t.reason) why.append(el("span", { class: "reason" }, t.reason), " ");
    if (t.message) why.append(el("span", {}, t.message));
    if (t.array) {
      // A task array: one row, a bar of its elements (succeeded, running, failed, the rest).
      const a = t.array;
      const bar = el("div", { class: "array-bar", title: t.message, "data-testid": "array-bar" });
      for (const [part, n] of [["succeeded", a.succeeded], ["running", a.running], ["failed", a.failed]]) {
        if (n) bar.append(el("span", { class: "array-" + part, style: "width:" + (100 * n / a.size) + "%" }));
      }
      why.append(bar);
    }
    const job = el("td", {});
    if (t.submissionId) {
      job.append(t.jobUrl ? el("a", { href: t.jobUrl, target: "_blank", rel: "noopener" }, t.submissionId) : t.submissionId);
    }
    if (t.revision) {
      // The commit the run's spec came from: branch@short sha, and whether the file differed.
      const match = /^(?:(.*)@)?sha1:([0-9a-f]{7})/.exec(t.revision);
      const short = match ? (match[1] ? match[1] + "@" : "") + match[2] : t.revision;
      job.append(el("div", { class: "rev", title: t.revision }, short + (t.dirty ? " (dirty)" : "")));
    }
    return el("tr", { "data-task": t.name, "data-phase": t.phase || "" },
      el("td", {}, t.name),
      el("td", {}, t.queue || ""),
      el("td", { class: "num" }, t.priority ?? ""),
      el("td", { class: "phase phase-" + (t.phase || "none") }, t.phase || "not seen yet"),
      el("td", { class: "num" }, t.position ?? ""),
      el("td", {}, resText),
      el("td", { class: "num" }, since),
      why,
      el("td", { class: "num" }, t.run || ""),
      job);
  });
  const body = document.getElementById("task-rows");
  if (rows.length === 0) rows.push(el("tr", {}, el("td", { colspan: "10", class: "empty" }, "no tasks")));
  body.replaceChildren(...rows);
  const loaded = data.total > data.tasks.length ? " (the first " + data.tasks.length + " loaded)" : "";
  document.getElementById("task-count").textContent = shown.length + " of " + data.total + loaded;
}

// -- the team queues: the same figures as GET /queues; hidden when no _queues.yaml is in force --
function quantities(q, key) {
  // The server's readable form of the queue's amounts (4 CPU, 15Gi), as `rayqueue queues` shows.
  return (q.text && q.text[key]) || "0";
}

function renderQueues(data) {
  const section = document.getElementById("queues-section");
  const config = data.config;
  section.hidden = !data.queues || (data.queues.length === 0 && !(config && config.error));
  if (section.hidden) return;
  const notes = [];
  if (config && config.error) notes.push(el("span", { class: "bad" }, config.file + ": " + config.error));
  if (data.warning) notes.push(el("span", { class: "bad" }, data.warning));
  document.getElementById("queues-config").replaceChildren(...notes);
  const rows = data.queues.map((q) => el("tr", { "data-queue": q.name },
    el("td", {}, q.name),
    el("td", {}, quantities(q, "nominalQuota")),
    el("td", {}, quantities(q, "usage")),
    el("td", {}, quantities(q, "borrowed")),
    el("td", { class: "num" }, q.decayedUsage ? (Math.round(q.decayedUsage.cpu / 36) / 100).toString() + " CPU-h" : "-"),
    el("td", { class: "num" }, (Math.round(q.weightedShare * 1000) / 1000).toString() + (q.weight !== 1 ? " (weight " + q.weight + ")" : "")),
    el("td", { class: "num", "data-col": "pending" }, q.pending),
    el("td", { class: "num", "data-col": "running" }, q.admitted)));
  document.getElementById("queue-rows").replaceChildren(...rows);
}

// -- the plot: inline SVG, drawn here (a few step lines need no charting library) ---------------------
function renderPlot() {
  const h = state.history;
  const box = document.getElementById("plot");
  if (!h) return;
  const W = 1000, H = 220, L = 70, R = 40, T = 10, B = 22;
  const r = state.resource;
  const use = h.mean[r], useMax = h.max[r], cap = h.max["cap_" + r], wait = h.max.queued;
  const values = [...use, ...useMax, ...cap].filter((v) => v !== null);
  const yMax = Math.max(1e-9, ...values) * 1.1;
  const waitMax = Math.max(1, ...wait.filter((v) => v !== null)) * 1.1;
  const x = (t) => L + ((t - h.start) / (h.end - h.start)) * (W - L - R);
  const y = (v) => T + (1 - v / yMax) * (H - T - B);
  const yw = (v) => T + (1 - v / waitMax) * (H - T - B);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img",
    "aria-label": "declared " + r + " use against capacity" });
  root.append(svg("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  for (const frac of [0, 0.5, 1]) {
    const v = (yMax / 1.1) * frac;
    const label = svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" });
    label.textContent = amount(r, v);
    root.append(label, svg("line", { class: "axis", x1: L, x2: W - R, y1: y(v), y2: y(v), "stroke-dasharray": "1 3" }));
  }
  const waitLabel = svg("text", { x: W - R + 6, y: yw(waitMax / 1.1) + 4 });
  waitLabel.textContent = Math.round(waitMax / 1.1);
  root.append(waitLabel);
  for (const [frac, anchor] of [[0, "start"], [0.5, "middle"], [1, "end"]]) {
    const t = h.start + frac * (h.end - h.start);
    const label = svg("text", { x: x(t), y: H - 6, "text-anchor": anchor });
    label.textContent = new Date(t * 1000).toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
    root.append(label);
  }
  let points = 0;
  const width = (h.end - h.start) / Math.max(1, h.time.length);
  function line(series, cls, scale) {
    // A bucket without data breaks the line: a gap means rayqueue was not running.
    let run = [];
    const flush = () => {
      if (run.length) root.append(svg("polyline", { class: cls, points: run.join(" ") }));
      run = [];
    };
    series.forEach((v, i) => {
      if (v === null) { flush(); return; }
      const t0 = h.time[i];
      run.push(`${x(t0).toFixed(1)},${scale(v).toFixed(1)}`, `${x(t0 + width).toFixed(1)},${scale(v).toFixed(1)}`);
      points++;
    });
    flush();
  }
  line(cap, "cap", y);
  line(useMax, "usemax", y);
  line(use, "use", y);
  line(wait, "wait", yw);
  root.setAttribute("data-points", String(points));
  box.replaceChildren(root);
}

// -- refresh ------------------------------------------------------------------------------------
async function refresh() {
  try {
    const [overview, tasks, queues] = await Promise.all([getJSON("api/overview"), getTasks(),
      getJSON("api/queues")]);
    state.overview = overview;
    renderOverview(overview, tasks.finished24h);
    renderQueues(queues);
    renderTasks(tasks);
  } catch (error) {
    const meta = document.getElementById("meta");
    meta.textContent = "cannot refresh: " + error.message;
    meta.className = "meta bad";
  }
}

async function refreshHistory() {
  try {
    state.history = await getJSON("api/history?window=" + encodeURIComponent(state.window));
    renderPlot();
  } catch (error) {
    document.getElementById("plot").textContent = "no history: " + error.message;
  }
}

function toggle(groupId, attribute, onChange) {
  const group = document.getElementById(groupId);
  group.addEventListener("click", (event) => {
    const button = event.target.closest("button");
    if (!button) return;
    for (const b of group.querySelectorAll("button")) b.setAttribute("aria-pressed", String(b === button));
    onChange(button.getAttribute(attribute));
  });
}

takeTokenFromHash();
toggle("resource-buttons", "data-resource", (value) => { state.resource = value; renderPlot(); });
toggle("window-buttons", "data-window", (value) => { state.window = value; refreshHistory(); });
for (const id of ["filter-phase", "filter-queue", "filter-label"]) {
  document.getElementById(id).addEventListener("input", () => renderTasks({ tasks: state.tasks, total: state.total, now: state.now }));
}
refresh();
refreshHistory();
setInterval(refresh, REFRESH_MS);
setInterval(refreshHistory, HISTORY_REFRESH_MS);
