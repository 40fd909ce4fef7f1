// pagoda serve's page: picks an image, POSTs it to /api/run and draws what comes back. Maps
// arrive as small grids of 0..255 (docs/serve.md); they are coloured here and laid over the
// image inside `view`, the part of the image the model saw.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { models: [], blob: null, image: null, result: null, busy: false };
const TASK_NAMES = {
  classify: "top-5 classes",
  maps: "attention map and rollout",
  affinity: "non-local affinity of a clicked point",
  detect: "objects (boxes)",
  heads: "attention of each head (DINO)",
  nearest: "nearest images of the gallery",
};
const SIDE = 360;

// dark blue -> purple -> red -> orange -> pale yellow, as the CLI's PNG maps
const RAMP = [[20, 20, 80], [110, 30, 140], [210, 40, 60], [245, 140, 30], [252, 245, 180]];
function ramp(t) {
  const x = Math.min(Math.max(t, 0), 1) * (RAMP.length - 1), i = Math.min(Math.floor(x), 3);
  const f = x - i, a = RAMP[i], b = RAMP[i + 1];
  return [0, 1, 2].map((c) => Math.round(a[c] + (b[c] - a[c]) * f));
}

function showError(msg) {
  const e = $("error");
  e.textContent = msg;
  e.hidden = !msg;
}

function setStatus(msg) { $("status").textContent = msg; }

async function loadModels() {
  let doc;
  try {
    const r = await fetch("/api/models");
    doc = await r.json();
    if (!r.ok) throw new Error(doc.error ? doc.error.message : r.statusText);
  } catch (e) {
    showError("Could not list the models: " + e.message);
    return;
  }
  state.models = doc.models;
  state.devices = doc.devices;
  $("device").textContent = "device: " + doc.devices.join(", ");
  if (doc.devices.length > 1) {
    const opts = doc.devices.map((d, i) => new Option(i + ": " + d, String(i)));
    $("device-select").replaceChildren(...opts, new Option("all, side by side", "all"));
    $("device-label").hidden = false;
  }
  const sel = $("model");
  sel.replaceChildren(...doc.models.map((m) => new Option(m.name, m.name)));
  if (doc.models.some((m) => m.random)) {
    $("real-weights").textContent = doc.real_weights;
    $("note").hidden = false;
  }
  modelChanged();
}

function currentModel() { return state.models.find((m) => m.name === $("model").value); }

function modelChanged() {
  const m = currentModel();
  if (!m) return;
  $("task").replaceChildren(...m.tasks.map((t) => new Option(TASK_NAMES[t] || t, t)));
  $("threshold-label").hidden = !m.tasks.includes("detect");
  $("description").textContent = m.description + (m.random ? " (random weights)" : "");
  if (state.blob) run();
}

async function setImage(blob) {
  if (!blob) return;
  state.blob = blob;
  state.image = null;
  try {
    state.image = await createImageBitmap(blob);
  } catch (e) {
    state.image = null; // the server says what is wrong with it
  }
  run();
}

// One run on device d; the answer, or an Error with the server's status and message.
async function runOn(params, d) {
  const q = new URLSearchParams({ ...params, device: String(d) });
  const r = await fetch("/api/run?" + q, { method: "POST", body: state.blob });
  const doc = await r.json();
  if (!r.ok) {
    const e = doc.error || {};
    throw new Error((e.status || r.status) + " " + (e.reason || r.statusText) + ": " +
                    (e.message || ""));
  }
  return doc;
}

async function run(extra) {
  if (!state.blob || state.busy) return;
  const m = currentModel();
  if (!m) return;
  state.busy = true;
  showError("");
  setStatus("running " + m.name + " on the device\u2026");
  const task = $("task").value, more = task === "detect" ? { threshold: $("threshold").value } : {};
  const params = { model: m.name, task, ...more, ...(extra || {}) };
  const pick = $("device-select").value;
  const devices = pick === "all" ? state.devices.map((_, i) => i) : [Number(pick) || 0];
  const docs = [];
  try {
    for (const d of devices) docs.push(await runOn(params, d));
  } catch (e) {
    state.busy = false;
    setStatus("");
    showError(e.message);
    return;
  }
  state.busy = false;
  setStatus("done");
  state.result = docs[0];
  render(docs[0]);
  fillCompare(pick === "all" ? docs : []);
}

// Several devices side by side: the same image and model on each.
function fillCompare(docs) {
  $("compare").hidden = !docs.length;
  $("compare").tBodies[0].replaceChildren(...docs.map((doc, i) => {
    const tr = document.createElement("tr"), t = doc.timings || {};
    const what = doc.top ? doc.top[0].label + " " + (100 * doc.top[0].p).toFixed(1) + " %"
               : doc.boxes ? doc.boxes.length + " objects" : doc.nearest ? doc.nearest[0].name : "";
    for (const v of [i + ": " + doc.device, (t.preprocess || 0).toFixed(1) + " ms",
                     (t.forward || 0).toFixed(1) + " ms", what]) {
      const td = document.createElement("td");
      td.textContent = v;
      tr.append(td);
    }
    return tr;
  }));
}

function fit(w, h, side) {
  const s = Math.min((side || SIDE) / w, (side || SIDE) / h);
  return [s, w * s, h * s];
}

// The image on a canvas, scaled to fit a square of `side` (default SIDE); returns the scale.
function drawImage(canvas, side) {
  const img = state.image, ctx = canvas.getContext("2d");
  const [s, w, h] = fit(img.width, img.height, side);
  canvas.width = Math.round(w);
  canvas.height = Math.round(h);
  ctx.drawImage(img, 0, 0, canvas.width, canvas.height);
  return s;
}

// A map {w, h, data} coloured over the view rectangle, the rest dimmed.
function drawMap(canvas, map, view, alpha, side) {
  const s = drawImage(canvas, side), ctx = canvas.getContext("2d");
  const grid = document.createElement("canvas");
  grid.width = map.w;
  grid.height = map.h;
  const g = grid.getContext("2d"), px = g.createImageData(map.w, map.h);
  map.data.forEach((v, i) => {
    const c = ramp(v / 255);
    px.data.set([c[0], c[1], c[2], 255], i * 4);
  });
  g.putImageData(px, 0, 0);
  const [x0, y0, x1, y1] = view.map((v) => v * s);
  ctx.fillStyle = "rgba(0,0,0,0.45)";
  ctx.fillRect(0, 0, canvas.width, y0);
  ctx.fillRect(0, y1, canvas.width, canvas.height - y1);
  ctx.fillRect(0, y0, x0, y1 - y0);
  ctx.fillRect(x1, y0, canvas.width - x1, y1 - y0);
  ctx.globalAlpha = alpha;
  ctx.imageSmoothingEnabled = true;
  ctx.drawImage(grid, x0, y0, x1 - x0, y1 - y0);
  ctx.globalAlpha = 1;
  return s;
}

function figure(which, caption, show) {
  $("fig-" + which).hidden = !show;
  $("cap-" + which).textContent = caption || "";
  return $("view-" + which);
}

function fillTop(top) {
  const body = $("top5").tBodies[0];
  body.replaceChildren(...(top || []).map((t) => {
    const tr = document.createElement("tr");
    const name = document.createElement("td");
    name.textContent = t.label;
    const bar = document.createElement("td");
    bar.className = "barcell";
    const b = document.createElement("div");
    b.className = "bar";
    b.style.width = Math.max(1, Math.round(t.p * 140)) + "px";
    bar.append(b);
    const p = document.createElement("td");
    p.className = "num";
    p.textContent = (100 * t.p).toFixed(2) + " %";
    tr.append(name, bar, p);
    return tr;
  }));
  $("top5").hidden = !top;
}

function fillTimings(doc) {
  const t = doc.timings || {};
  const rows = [["device", doc.device], ["image", doc.image.width + " x " + doc.image.height]];
  for (const k of ["decode", "preprocess", "forward"])
    if (k in t) rows.push([k, t[k].toFixed(1) + " ms"]);
  $("timings").tBodies[0].replaceChildren(...rows.map(([k, v]) => {
    const tr = document.createElement("tr");
    const a = document.createElement("td"), b = document.createElement("td");
    a.textContent = k;
    b.textContent = v;
    b.className = "num";
    tr.append(a, b);
    return tr;
  }));
}

function render(doc) {
  $("results").hidden = false;
  fillTop(doc.top);
  fillTimings(doc);
  $("boxes").hidden = true;
  $("heads").hidden = true;
  $("nearest").hidden = true;
  figure("a", "", false);
  figure("b", "", false);
  const canvas = $("view-image");
  canvas.classList.toggle("clickable", doc.task === "affinity");
  if (!state.image) {
    setStatus("done (the browser cannot show this image)");
    return;
  }
  drawImage(canvas);
  $("cap-image").textContent = "the image";
  if (doc.task === "maps") {
    drawMap(figure("a", "attention of the class token, last block", true), doc.attention,
            doc.view, 0.6);
    drawMap(figure("b", "attention rollout over all blocks", true), doc.rollout, doc.view, 0.6);
  } else if (doc.task === "affinity") {
    renderAffinity(doc);
  } else if (doc.task === "detect") {
    renderBoxes(doc, -1);
  } else if (doc.task === "heads") {
    renderHeads(doc);
  } else if (doc.task === "nearest") {
    renderNearest(doc);
  }
}

function renderHeads(doc) {
  $("heads").replaceChildren(...doc.heads.map((map, i) => {
    const f = document.createElement("figure"), c = document.createElement("canvas");
    const cap = document.createElement("figcaption");
    drawMap(c, map, doc.view, 0.7, 170);
    cap.textContent = "head " + (i + 1);
    f.append(c, cap);
    return f;
  }));
  $("heads").hidden = false;
  $("cap-image").textContent = "each head's class-token attention, last block";
}

function renderNearest(doc) {
  $("nearest").replaceChildren(...doc.nearest.map((n) => {
    const f = document.createElement("figure"), img = document.createElement("img");
    const cap = document.createElement("figcaption");
    img.src = "/api/gallery?" + new URLSearchParams({ name: n.name });
    img.alt = n.name;
    cap.textContent = n.name + " \u2014 " + n.similarity.toFixed(3);
    f.append(img, cap);
    return f;
  }));
  $("nearest").hidden = false;
  $("cap-image").textContent = "the nearest images of the gallery (cosine similarity)";
}

function renderAffinity(doc) {
  const a = doc.affinity, c = figure("a", "non-local affinity of the marked point", true);
  const s = drawMap(c, a, doc.view, 0.6);
  const [x0, y0, x1, y1] = doc.view;
  const qx = x0 + (a.query[0] + 0.5) * (x1 - x0) / a.w, qy = y0 + (a.query[1] + 0.5) * (y1 - y0) / a.h;
  for (const cv of [c, $("view-image")]) {
    const g = cv.getContext("2d");
    g.strokeStyle = "#fff";
    g.lineWidth = 3;
    g.beginPath();
    g.arc(qx * s, qy * s, 7, 0, 2 * Math.PI);
    g.stroke();
    g.strokeStyle = "#000";
    g.lineWidth = 1.5;
    g.stroke();
  }
  $("cap-image").textContent = "click a point: its affinity";
}

const PALETTE = ["#e6194b", "#3cb44b", "#ffe119", "#4363d8", "#f58231", "#911eb4"];

function renderBoxes(doc, active) {
  const canvas = $("view-image"), s = drawImage(canvas), ctx = canvas.getContext("2d");
  ctx.lineWidth = 2;
  ctx.font = "12px 'DejaVu Sans', sans-serif";
  doc.boxes.forEach((b, i) => {
    const [x0, y0, x1, y1] = b.box.map((v) => v * s);
    ctx.strokeStyle = PALETTE[i % PALETTE.length];
    ctx.globalAlpha = active < 0 || active === i ? 1 : 0.3;
    ctx.strokeRect(x0, y0, x1 - x0, y1 - y0);
    ctx.fillStyle = ctx.strokeStyle;
    ctx.fillText(b.label, x0 + 3, y0 + 13);
  });
  ctx.globalAlpha = 1;
  $("cap-image").textContent = doc.boxes.length + " objects above " + doc.threshold;
  const body = $("boxes").tBodies[0];
  if (active < 0) {
    body.replaceChildren(...doc.boxes.map((b, i) => {
      const tr = document.createElement("tr");
      const a = document.createElement("td"), p = document.createElement("td");
      a.textContent = b.label;
      a.style.borderLeft = "6px solid " + PALETTE[i % PALETTE.length];
      p.textContent = (100 * b.score).toFixed(1) + " %";
      p.className = "num";
      tr.append(a, p);
      tr.addEventListener("mouseenter", () => objectAttention(doc, i));
      return tr;
    }));
  }
  $("boxes").hidden = false;
  if (doc.boxes.length && active < 0) objectAttention(doc, 0);
}

function objectAttention(doc, i) {
  const b = doc.boxes[i];
  [...$("boxes").tBodies[0].rows].forEach((r, k) => r.classList.toggle("active", k === i));
  drawMap(figure("a", "cross-attention of " + b.label + " (decoder, last layer)", true),
          b.attention, doc.view, 0.6);
  renderBoxesOnly(doc, i);
}

function renderBoxesOnly(doc, i) {
  const canvas = $("view-image"), s = drawImage(canvas), ctx = canvas.getContext("2d");
  ctx.lineWidth = 2;
  doc.boxes.forEach((b, k) => {
    const [x0, y0, x1, y1] = b.box.map((v) => v * s);
    ctx.strokeStyle = PALETTE[k % PALETTE.length];
    ctx.globalAlpha = k === i ? 1 : 0.3;
    ctx.strokeRect(x0, y0, x1 - x0, y1 - y0);
  });
  ctx.globalAlpha = 1;
}

$("view-image").addEventListener("click", (ev) => {
  const doc = state.result;
  if (!doc || doc.task !== "affinity" || !state.image) return;
  const c = $("view-image"), s = fit(state.image.width, state.image.height)[0];
  const r = c.getBoundingClientRect(), [x0, y0, x1, y1] = doc.view;
  const x = (ev.clientX - r.left) / s, y = (ev.clientY - r.top) / s;
  const qx = Math.min(Math.max((x - x0) / (x1 - x0), 0), 0.999);
  const qy = Math.min(Math.max((y - y0) / (y1 - y0), 0), 0.999);
  run({ qx: qx.toFixed(4), qy: qy.toFixed(4) });
});

// The camera, where the browser offers one (a secure context: 127.0.0.1 and localhost are).
function cameraOff() {
  const v = $("video");
  if (v.srcObject) v.srcObject.getTracks().forEach((t) => t.stop());
  v.srcObject = null;
  $("camera-box").hidden = true;
}

$("camera").hidden = !(navigator.mediaDevices && navigator.mediaDevices.getUserMedia);
$("camera").addEventListener("click", async () => {
  try {
    $("video").srcObject = await navigator.mediaDevices.getUserMedia({ video: true });
    $("camera-box").hidden = false;
  } catch (e) {
    showError("The camera could not be opened: " + e.message);
  }
});
$("snap").addEventListener("click", () => {
  const v = $("video"), c = document.createElement("canvas");
  c.width = v.videoWidth;
  c.height = v.videoHeight;
  if (!c.width) return;
  c.getContext("2d").drawImage(v, 0, 0);
  c.toBlob((b) => setImage(b), "image/png");
});
$("camera-off").addEventListener("click", cameraOff);
$("model").addEventListener("change", modelChanged);
$("task").addEventListener("change", () => run());
$("threshold").addEventListener("change", () => run());
$("device-select").addEventListener("change", () => run());
$("file").addEventListener("change", (ev) => setImage(ev.target.files[0]));
const drop = $("drop");
document.addEventListener("dragover", (ev) => { ev.preventDefault(); drop.classList.add("over"); });
document.addEventListener("dragleave", () => drop.classList.remove("over"));
document.addEventListener("drop", (ev) => {
  ev.preventDefault();
  drop.classList.remove("over");
  setImage(ev.dataTransfer.files[0]);
});
document.addEventListener("paste", (ev) => {
  const item = [...ev.clipboardData.items].find((i) => i.type.startsWith("image/"));
  if (item) setImage(item.getAsFile());
});
loadModels();
