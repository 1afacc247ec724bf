// Mission Control: the page of `till ui`. Every action is a verb call through the server's
// API (/api/call, /api/preview, /api/apply), with this run's token in a header; the live
// feed is the family's events (/api/events), read as server-sent events over fetch so the
// token never sits in a URL.

const TOKEN_KEY = "tillage-ui-token";
const PAGE = 100; // snapshots per timeline page
const IMAGE = /\.(png|jpe?g|gif|webp|bmp|ico|avif)$/i;
const IMAGE_LIMIT = 4 << 20;

const state = {
  token: takeToken(),
  universes: [], // from /api/overview
  radar: { conflicts: [] },
  claims: [],
  selected: null, // universe id
  snapshots: [], // the selected universe's timeline, newest first
  more: 0,
  loading: false,
  snapshot: null, // the selected snapshot's id
  cursor: null, // the last event seen
};

// -- the token: from the URL's fragment once, then kept for this tab only -----------------

function takeToken() {
  const found = new URLSearchParams(location.hash.slice(1)).get("token");
  if (found) {
    sessionStorage.setItem(TOKEN_KEY, found);
    history.replaceState(null, "", location.pathname);
    return found;
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

// -- calls ---------------------------------------------------------------------------------

class CallError extends Error {
  constructor(error, status) {
    super(error.message);
    this.error = error;
    this.status = status;
  }
}

async function request(method, path, body) {
  const init = { method, headers: { "X-Tillage-Token": state.token || "" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const doc = await response.json();
  if (doc.error) throw new CallError(doc.error, response.status);
  return doc.result;
}

const call = (verb, universe, params = {}) =>
  request("POST", "/api/call", { verb, universe, params });
const preview = (verb, universe, params = {}) =>
  request("POST", "/api/preview", { verb, universe, params });
// An apply gives back what its preview showed: the digest, and the snapshot (an undo: the
// operation) the person confirms.
const apply = (verb, universe, params, previewed) =>
  request("POST", "/api/apply", {
    verb,
    universe,
    params,
    preview_digest: previewed.preview_digest,
    confirm_snapshot: previewed.confirm_snapshot,
    confirm_operation: previewed.confirm_operation,
  });

// -- small helpers -------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key === "style") Object.assign(node.style, value); // CSSOM: the CSP allows no style attribute
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const $ = (id) => document.getElementById(id);
const short = (id) => (id ? id.slice(0, 12) : "—");

function bytes(n) {
  if (n === null || n === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${i ? v.toFixed(v < 10 ? 1 : 0) : v} ${units[i]}`;
}

function ago(iso) {
  if (!iso) return "never";
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 45) return "just now";
  if (s < 90) return "a minute ago";
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  if (s < 86400 * 30) return `${Math.round(s / 86400)} d ago`;
  return new Date(iso).toISOString().slice(0, 10);
}

function toast(text, bad = false) {
  const node = $("toast");
  node.textContent = text;
  node.className = bad ? "toast bad" : "toast";
  node.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (node.hidden = true), bad ? 12000 : 6000);
}

function explain(err) {
  if (err instanceof CallError) {
    const e = err.error;
    return `${e.name}: ${e.message}${e.next ? ` — next: ${e.next}` : ""}`;
  }
  return String(err);
}

const universe = (id) => state.universes.find((u) => u.id === id);

// -- universes -----------------------------------------------------------------------------

async function loadOverview() {
  const doc = await request("GET", "/api/overview");
  state.universes = doc.universes;
  state.radar = doc.radar;
  state.claims = doc.claims.claims || [];
  if (state.cursor === null) state.cursor = doc.cursor; // the feed goes on from here
  if (!state.selected || !universe(state.selected)) state.selected = doc.here;
  renderUniverses();
  renderCollisions();
  renderClaims();
  renderUniverseHead();
}

function colliding() {
  // Universe ids that share a changed path with another (radar), the root included.
  const ids = new Set();
  const root = state.universes[0];
  for (const c of state.radar.conflicts || []) {
    for (const name of c.forks) {
      const u = state.universes.find((x) => x.fork && x.fork.name === name);
      if (u) ids.add(u.id);
    }
    if (c.workspace && root) ids.add(root.id);
  }
  return ids;
}

function renderUniverses() {
  const hot = colliding();
  const list = $("universes");
  list.replaceChildren(
    ...state.universes.map((u) => {
      const head = u.status && u.status.head;
      const fork = u.fork;
      const conflicts = fork ? fork.conflicts.length : 0;
      return el(
        "li",
        {
          class: [u.id === state.selected ? "selected" : "", hot.has(u.id) ? "collides" : ""].join(" "),
          style: { marginLeft: `${u.depth * 14}px` },
          dataset: { universe: u.id, name: u.name },
          onclick: () => select(u.id),
        },
        el("div", {},
          el("span", { class: "name" }, u.name),
          el("span", { class: "badge" }, fork ? "fork" : "workspace"),
          conflicts ? el("span", { class: "badge bad", "data-testid": "conflict-badge" }, `${conflicts} colliding`) : null,
          u.status && u.status.watching ? el("span", { class: "badge good" }, "watching") : null,
          u.error ? el("span", { class: "badge bad" }, u.error.name) : null,
        ),
        el("div", { class: "facts" },
          head ? `head ${short(head.id)} · sealed ${ago(head.sealed_at)}` : "no snapshot yet",
          head ? ` · ${head.files.toLocaleString()} files, ${bytes(head.bytes)}` : "",
          fork ? ` · ${bytes(fork.disk_bytes)} on disk · ${fork.changed_paths} changed` : "",
          u.status ? ` · ${u.status.snapshots} snapshots` : "",
        ),
      );
    }),
  );
  const root = state.universes[0];
  $("family").textContent = root ? root.folder : "";
}

function renderCollisions() {
  const list = $("collisions");
  const rows = state.radar.conflicts || [];
  if (!rows.length) {
    list.replaceChildren(el("li", { class: "muted" }, "No two universes changed the same path."));
    return;
  }
  list.replaceChildren(
    ...rows.map((c) =>
      el("li", { dataset: { path: c.path } },
        el("code", {}, c.path), " ",
        el("span", { class: "muted" },
          [...c.forks, ...(c.workspace ? ["the workspace"] : [])].join(" · ")),
        c.claimed_by && c.claimed_by.length ? el("span", { class: "badge warn" }, `claimed by ${c.claimed_by.join(", ")}`) : null,
      ),
    ),
  );
}

function renderClaims() {
  const list = $("claims");
  if (!state.claims.length) {
    list.replaceChildren(el("li", { class: "muted" }, "No claims held."));
    return;
  }
  list.replaceChildren(
    ...state.claims.map((c) =>
      el("li", { dataset: { claim: c.id } },
        el("code", {}, c.pattern), " ",
        el("span", { class: "muted" }, `${c.owner} · until ${ago(c.expires_at).replace(" ago", "")}`), " ",
        el("button", { type: "button", onclick: () => release(c) }, "Release"),
      ),
    ),
  );
}

async function claim(event) {
  event.preventDefault();
  const root = state.universes[0];
  const pattern = $("claim-pattern").value.trim();
  const owner = $("claim-owner").value.trim();
  try {
    const doc = await call("claim.take", root.id, { pattern, owner });
    toast(`claimed ${doc.claim.pattern} for ${doc.claim.owner}`);
    $("claim-pattern").value = "";
    await Promise.all([loadOverview(), loadOperations()]);
  } catch (err) {
    toast(explain(err), true);
  }
}

async function release(c) {
  try {
    await call("claim.release", state.universes[0].id, { claim: c.id, owner: c.owner });
    toast(`released ${c.pattern}`);
    await Promise.all([loadOverview(), loadOperations()]);
  } catch (err) {
    toast(explain(err), true);
  }
}

// -- the timeline --------------------------------------------------------------------------

async function loadOperations() {
  const id = state.selected;
  if (!id) return;
  const doc = await call("operation.log", id, { limit: 15 });
  if (state.selected !== id) return;
  const u = universe(id);
  $("operations-title").textContent = `Operations · ${u ? u.name : ""}`;
  const list = $("operations");
  if (!doc.operations.length) {
    list.replaceChildren(el("li", { class: "muted" }, "No operation changed this universe yet."));
    return;
  }
  list.replaceChildren(
    ...doc.operations.map((op) =>
      el("li", { dataset: { operation: op.id } },
        el("span", {}, op.command), " ",
        el("span", { class: "muted" }, `${ago(op.at)}${op.agent ? ` · ${op.agent}` : ""}`),
        op.undone_by ? el("span", { class: "badge" }, "undone") : null,
        op.undoable && !op.undone_by
          ? el("button", { type: "button", class: "small", title: op.description, onclick: () => undo(u, op) }, "Undo…")
          : null,
      ),
    ),
  );
}

async function undo(u, op) {
  let previewed;
  try {
    previewed = await preview("operation.undo", u.id, { id: op.id });
  } catch (err) {
    toast(explain(err), true);
    return;
  }
  const body = (doc, note) => [
    note ? el("p", { class: "error", "data-testid": "stale" }, note) : null,
    el("p", {}, `Undo `, el("code", {}, op.command), ` (${ago(op.at)}): ${doc.description}.`),
    changeList(doc.changes || []),
    el("p", { class: "muted" }, "An undo is an operation too: it can be undone in turn."),
  ].filter(Boolean);
  const result = await confirmDialog({
    title: "Undo an operation",
    body: body(previewed.preview),
    applyLabel: "Undo it",
    danger: true,
    run: async ({ setBody }) => {
      try {
        return await apply("operation.undo", u.id, { id: op.id }, previewed);
      } catch (err) {
        if (err instanceof CallError && err.error.name === "ui.stale_preview") {
          previewed = err.error.details;
          setBody(body(previewed.preview, "This universe changed since this preview. This is what the undo would do now:"));
          return undefined;
        }
        throw err;
      }
    },
  });
  if (!result) return;
  toast(`undone: ${result.description}`);
  await loadOverview();
  if (universe(state.selected)) await Promise.all([refreshHead(), loadOperations()]);
}

async function select(id) {
  state.selected = id;
  state.snapshots = [];
  state.more = 0;
  state.snapshot = null;
  renderUniverses();
  renderUniverseHead();
  $("timeline").replaceChildren();
  $("snapshot").replaceChildren(el("p", { class: "muted" }, "Pick a snapshot in the timeline."));
  await Promise.all([loadPage(), loadOperations()]);
}

function renderUniverseHead() {
  const u = universe(state.selected);
  const head = $("universe-head");
  const actions = $("universe-actions");
  if (!u) {
    head.replaceChildren();
    actions.replaceChildren();
    return;
  }
  $("timeline-title").textContent = `Timeline · ${u.name}`;
  head.replaceChildren(
    ...[
      el("div", { class: "mono muted" }, u.folder),
      u.fork ? el("div", { class: "muted" }, `forked from ${short(u.fork.base)} · made ${ago(u.fork.created_at)}`) : null,
    ].filter(Boolean),
  );
  const buttons = [];
  if (u.fork && u.parent) {
    buttons.push(el("button", { type: "button", "data-testid": "merge", onclick: () => mergeFork(u) }, `Merge into ${universe(u.parent)?.name ?? "parent"}…`));
    buttons.push(el("button", { type: "button", class: "danger", "data-testid": "fork-rm", onclick: () => removeFork(u) }, "Remove fork…"));
  }
  actions.replaceChildren(...buttons);
}

async function loadPage() {
  if (state.loading || !state.selected) return;
  const id = state.selected;
  state.loading = true;
  try {
    const params = { limit: PAGE };
    const last = state.snapshots[state.snapshots.length - 1];
    if (last) params.after = last.id;
    const doc = await call("timeline.list", id, params);
    if (state.selected !== id) return;
    state.snapshots.push(...doc.snapshots);
    state.more = doc.more;
    appendRows(doc.snapshots);
  } catch (err) {
    toast(explain(err), true);
  } finally {
    state.loading = false;
  }
  $("timeline-end").textContent = state.more
    ? `${state.more.toLocaleString()} older — scroll for more`
    : `${state.snapshots.length.toLocaleString()} snapshots, the oldest shown`;
  if (state.more && nearEnd()) loadPage();
}

function row(s) {
  return el(
    "li",
    {
      class: s.id === state.snapshot ? "selected" : "",
      dataset: { snapshot: s.id, trigger: s.trigger },
      title: `${s.id}\n${s.sealed_at}`,
      onclick: () => showSnapshot(s.id),
    },
    el("span", { class: "when" }, ago(s.sealed_at)),
    el("span", { class: "what" },
      s.pinned ? "★ " : "",
      el("span", { class: "badge" }, s.trigger), " ",
      s.label ? s.label : el("span", { class: "mono muted" }, short(s.id)),
      s.grade !== "exact" ? el("span", { class: "badge warn" }, s.grade) : null,
    ),
    el("span", { class: "who" },
      s.agent ? `${s.agent}${s.turn ? ` · turn ${s.turn}` : ""}` : "",
    ),
  );
}

function appendRows(snapshots) {
  $("timeline").append(...snapshots.map(row));
}

function prependRows(snapshots) {
  $("timeline").prepend(...snapshots.map(row));
}

function nearEnd() {
  const pane = $("timeline").closest(".pane");
  return pane.scrollTop + pane.clientHeight >= pane.scrollHeight - 400;
}

async function refreshHead() {
  // New snapshots of the selected universe, put on top (a live seal).
  const id = state.selected;
  if (!id) return;
  const doc = await call("timeline.list", id, { limit: 20 });
  if (state.selected !== id) return;
  const known = new Set(state.snapshots.map((s) => s.id));
  const fresh = doc.snapshots.filter((s) => !known.has(s.id));
  if (fresh.length) {
    state.snapshots.unshift(...fresh);
    prependRows(fresh);
  }
  // Pins change rows in place.
  for (const s of doc.snapshots) {
    const i = state.snapshots.findIndex((x) => x.id === s.id);
    if (i >= 0 && state.snapshots[i].pinned !== s.pinned) {
      state.snapshots[i] = s;
      const old = document.querySelector(`#timeline li[data-snapshot="${s.id}"]`);
      if (old) old.replaceWith(row(s));
    }
  }
}

// -- a snapshot ----------------------------------------------------------------------------

async function showSnapshot(id) {
  state.snapshot = id;
  for (const li of document.querySelectorAll("#timeline li")) {
    li.classList.toggle("selected", li.dataset.snapshot === id);
  }
  const u = universe(state.selected);
  const box = $("snapshot");
  box.replaceChildren(el("p", { class: "muted" }, "Loading…"));
  try {
    const shown = await call("timeline.show", u.id, { id });
    const s = shown.snapshot;
    const diff = s.parent
      ? await call("timeline.diff", u.id, { target: s.parent, to: s.id, patch: true })
      : null;
    if (state.snapshot !== id) return;
    renderSnapshot(u, shown, diff);
  } catch (err) {
    box.replaceChildren(el("p", { class: "error" }, explain(err)));
  }
}

function renderSnapshot(u, shown, diff) {
  const s = shown.snapshot;
  const facts = [
    ["ID", el("code", { "data-testid": "snapshot-id" }, s.id)],
    ["sealed", `${ago(s.sealed_at)} (${s.sealed_at})`],
    ["trigger", s.trigger],
    ["label", s.label || "—"],
    ["grade", s.grade],
    ["agent", s.agent ? `${s.agent}${s.turn ? `, turn ${s.turn}` : ""}` : "—"],
    ["session", s.session || "—"],
    ["files", `${s.files.toLocaleString()} · ${bytes(s.bytes)}`],
    ["changes", s.parent ? `${shown.changes_from_parent} from ${short(s.parent)}` : "the first snapshot"],
  ];
  const actions = el("div", { class: "actions" },
    el("button", { type: "button", "data-testid": "rewind", class: "primary", onclick: () => rewind(u, s.id) }, "Rewind to this…"),
    el("button", { type: "button", "data-testid": "pin", onclick: () => pin(u, s) }, s.pinned ? "Unpin" : "Pin"),
  );
  const changes = diff ? diff.changes : [];
  const patches = new Map((diff && diff.patches ? diff.patches : []).map((p) => [p.path, p]));
  const view = el("div", { id: "file-view", "data-testid": "file-view" });
  const list = el("ul", { class: "changes", "data-testid": "changes" },
    ...changes.map((c) =>
      el("li", {
        dataset: { path: c.path, kind: c.kind },
        onclick: (event) => {
          for (const li of list.children) li.classList.remove("selected");
          event.currentTarget.classList.add("selected");
          showFile(u, s, c, patches.get(c.path), view);
        },
      },
      el("span", { class: `kind ${c.kind}` }, c.kind),
      el("code", {}, c.path),
      el("span", { class: "muted" }, c.new_size !== null ? bytes(c.new_size) : ""),
      el("button", { type: "button", class: "small", title: "rewind only this path", onclick: (event) => { event.stopPropagation(); rewind(u, s.id, [c.path]); } }, "rewind path"),
      ),
    ),
  );
  $("snapshot").replaceChildren(
    el("dl", { class: "snapshot-facts" }, ...facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])),
    actions,
    el("h2", {}, `Changed paths (${changes.length})`),
    changes.length ? list : el("p", { class: "muted" }, s.parent ? "Nothing changed from its parent." : "The first snapshot: every file is new."),
    view,
  );
}

async function showFile(u, s, change, patch, view) {
  if (IMAGE.test(change.path)) {
    view.replaceChildren(el("div", { class: "images", "data-testid": "image-preview" },
      await image(u, s.parent, change.path, change.old_size, "before"),
      await image(u, s.id, change.path, change.new_size, "after"),
    ));
    return;
  }
  if (!patch) {
    view.replaceChildren(el("p", { class: "muted" }, "No line changes to show."));
    return;
  }
  if (!patch.text) {
    view.replaceChildren(el("p", { class: "muted" }, patch.note || (patch.binary ? "A binary file." : "No text diff.")));
    return;
  }
  const lines = patch.text.split("\n").map((line) => {
    const kind = line.startsWith("@@") ? "hunk" : line.startsWith("+") && !line.startsWith("+++") ? "add" : line.startsWith("-") && !line.startsWith("---") ? "del" : null;
    return kind ? el("span", { class: kind }, line) : `${line}\n`;
  });
  view.replaceChildren(el("div", { class: "patch", "data-testid": "patch" }, ...lines));
}

async function image(u, snapshot, path, size, caption) {
  if (!snapshot || size === null || size === undefined) return el("figure", {}, el("figcaption", {}, `${caption}: none`));
  if (size > IMAGE_LIMIT) return el("figure", {}, el("figcaption", {}, `${caption}: ${bytes(size)}, too large to preview`));
  try {
    const doc = await call("timeline.cat", u.id, { id: snapshot, path });
    const raw = Uint8Array.from(atob(doc.content_base64), (c) => c.charCodeAt(0));
    const url = URL.createObjectURL(new Blob([raw], { type: mime(path) }));
    return el("figure", {}, el("img", { src: url, alt: `${path} ${caption}` }), el("figcaption", {}, `${caption} · ${bytes(size)}`));
  } catch (err) {
    return el("figure", {}, el("figcaption", { class: "error" }, explain(err)));
  }
}

function mime(path) {
  const ext = path.split(".").pop().toLowerCase();
  return { jpg: "image/jpeg", jpeg: "image/jpeg", svg: "image/svg+xml", ico: "image/x-icon" }[ext] || `image/${ext}`;
}

async function pin(u, s) {
  try {
    await call(s.pinned ? "timeline.unpin" : "timeline.pin", u.id, { id: s.id });
    toast(`${s.pinned ? "unpinned" : "pinned"} ${short(s.id)}`);
    await Promise.all([refreshHead(), loadOperations()]);
    const i = state.snapshots.findIndex((x) => x.id === s.id);
    if (i >= 0) state.snapshots[i] = { ...state.snapshots[i], pinned: !s.pinned };
    await showSnapshot(s.id);
  } catch (err) {
    toast(explain(err), true);
  }
}

// -- actions a person confirms -------------------------------------------------------------

// Shows a dialog and resolves with the result of `run` when the person applies, or null.
function confirmDialog({ title, body, applyLabel, danger = false, ready = () => true, run }) {
  const dialog = $("dialog");
  $("dialog-title").textContent = title;
  $("dialog-body").replaceChildren(...body);
  const error = $("dialog-error");
  error.hidden = true;
  const button = $("dialog-apply");
  button.textContent = applyLabel;
  button.className = danger ? "danger primary" : "primary";
  button.disabled = !ready();
  const refresh = () => (button.disabled = !ready());
  dialog.addEventListener("input", refresh);
  return new Promise((resolve) => {
    const onApply = async (event) => {
      event.preventDefault();
      button.disabled = true;
      button.textContent = "Working…";
      try {
        const result = await run({ setBody: (nodes) => $("dialog-body").replaceChildren(...nodes), setError: (text) => { error.textContent = text; error.hidden = false; } });
        if (result === undefined) {
          button.textContent = applyLabel;
          button.disabled = !ready();
          return;
        }
        done(result);
      } catch (err) {
        error.textContent = explain(err);
        error.hidden = false;
        button.textContent = applyLabel;
        button.disabled = !ready();
      }
    };
    const onClose = () => done(null);
    function done(result) {
      button.removeEventListener("click", onApply);
      dialog.removeEventListener("close", onClose);
      dialog.removeEventListener("input", refresh);
      if (dialog.open) dialog.close();
      resolve(result);
    }
    button.addEventListener("click", onApply);
    dialog.addEventListener("close", onClose);
    dialog.showModal();
  });
}

function changeList(changes, limit = 200) {
  if (!changes.length) return el("p", { class: "muted" }, "Nothing would change.");
  return el("ul", { class: "changes", "data-testid": "preview-changes" },
    ...changes.slice(0, limit).map((c) => el("li", { dataset: { path: c.path } }, el("span", { class: `kind ${c.kind}` }, c.kind), el("code", {}, c.path))),
    changes.length > limit ? el("li", { class: "muted" }, `… and ${changes.length - limit} more`) : null,
  );
}

function rewindBody(u, previewed, note) {
  const doc = previewed.preview;
  return [
    note ? el("p", { class: "error", "data-testid": "stale" }, note) : null,
    el("p", {}, `Rewinding `, el("b", {}, u.name), ` to `, el("code", {}, short(doc.snapshot.id)),
      ` (${ago(doc.snapshot.sealed_at)}) changes ${doc.changes.length} path${doc.changes.length === 1 ? "" : "s"}:`),
    changeList(doc.changes),
    el("p", { class: "muted" }, "The folder as it is now is sealed first, so this rewind can be undone."),
  ].filter(Boolean);
}

async function rewind(u, snapshotId, paths = null) {
  const params = paths ? { id: snapshotId, paths } : { id: snapshotId };
  let previewed;
  try {
    previewed = await preview("workspace.rewind", u.id, params);
  } catch (err) {
    toast(explain(err), true);
    return;
  }
  const result = await confirmDialog({
    title: paths ? `Rewind ${paths.join(", ")}` : "Rewind the folder",
    body: rewindBody(u, previewed),
    applyLabel: "Apply rewind",
    danger: true,
    run: async ({ setBody }) => {
      try {
        return await apply("workspace.rewind", u.id, params, previewed);
      } catch (err) {
        if (err instanceof CallError && err.error.name === "ui.stale_preview") {
          previewed = err.error.details;
          setBody(rewindBody(u, previewed, "The folder changed since this preview. This is what the rewind would do now:"));
          return undefined;
        }
        throw err;
      }
    },
  });
  if (!result) return;
  toast(`rewound ${u.name} to ${short(result.snapshot.id)}: ${result.changes.length} changed`);
  showRewound(u, result);
  await Promise.all([loadOverview(), refreshHead()]);
}

function showRewound(u, result) {
  const box = el("div", { class: "actions", "data-testid": "undo" },
    el("span", {}, `Rewound. The state before is kept as `, el("code", {}, short(result.undo)), "."),
    result.undo ? el("button", { type: "button", onclick: () => rewind(u, result.undo) }, "Undo this rewind…") : null,
  );
  $("snapshot").prepend(box);
}

function mergeBody(u, parent, doc, check) {
  const conflicts = doc.conflicts || [];
  return [
    el("p", {}, `Merging fork `, el("b", {}, u.name), ` into `, el("b", {}, parent.name),
      `: ${doc.changes} change${doc.changes === 1 ? "" : "s"} land, three-way from its base ${short(doc.base)}.`),
    conflicts.length
      ? el("div", { "data-testid": "merge-conflicts" },
          el("p", { class: "error" }, `${conflicts.length} conflict${conflicts.length === 1 ? "" : "s"}: this merge would land nothing.`),
          el("ul", { class: "changes" }, ...conflicts.map((c) => el("li", {}, el("span", { class: "kind deleted" }, c.kind), el("code", {}, c.path), el("span", { class: "muted" }, c.reason || "")))))
      : null,
    doc.changed && doc.changed.length ? changeList(doc.changed.map((p) => (typeof p === "string" ? { path: p, kind: "changed" } : p))) : null,
    el("label", {}, "Check command (runs in a scratch copy of the merged result; the merge lands only if it passes):",
      el("input", { id: "merge-check", value: check || "", placeholder: "make test", class: "wide", "data-testid": "merge-check" })),
  ].filter(Boolean);
}

async function mergeFork(u) {
  const parent = universe(u.parent);
  let previewed;
  try {
    previewed = await preview("merge.apply", parent.id, { name: u.fork.name });
  } catch (err) {
    toast(explain(err), true);
    return;
  }
  const result = await confirmDialog({
    title: `Merge ${u.name}`,
    body: mergeBody(u, parent, previewed.preview, ""),
    applyLabel: "Run the check and merge",
    run: async ({ setBody }) => {
      const check = $("merge-check").value.trim() || null;
      const params = { name: u.fork.name, check };
      try {
        return await apply("merge.apply", parent.id, params, previewed);
      } catch (err) {
        if (err instanceof CallError && (err.error.name === "ui.stale_preview" || err.error.name === "merge.stale_preview")) {
          previewed = await preview("merge.apply", parent.id, { name: u.fork.name });
          setBody([el("p", { class: "error", "data-testid": "stale" }, "The fork or the folder changed since this preview. This is what the merge would do now:"), ...mergeBody(u, parent, previewed.preview, check || "")]);
          return undefined;
        }
        throw err;
      }
    },
  });
  if (!result) return;
  showMerged(u, parent, result);
  await loadOverview();
  if (result.landed) await refreshHead();
}

function showMerged(u, parent, result) {
  const landed = result.landed;
  const why = landed
    ? `Landed ${result.changes} change${result.changes === 1 ? "" : "s"} from ${u.name} into ${parent.name} as ${short(result.result)}.`
    : result.check_failed
      ? `Nothing landed: the check failed (exit ${result.check_exit_code}).`
      : `Nothing landed: ${result.conflicts.length} conflict${result.conflicts.length === 1 ? "" : "s"}.`;
  const box = el("div", { "data-testid": "merge-result", class: landed ? "" : "error" },
    el("p", {}, why),
    result.check_output ? el("pre", { "data-testid": "check-output" }, result.check_output) : null,
  );
  $("snapshot").replaceChildren(el("h2", {}, landed ? "Merged" : "Not merged"), box);
  toast(why, !landed);
}

async function removeFork(u) {
  const parent = universe(u.parent);
  let previewed;
  try {
    previewed = await preview("fork.remove", parent.id, { name: u.fork.name });
  } catch (err) {
    toast(explain(err), true);
    return;
  }
  const doc = previewed.preview;
  const result = await confirmDialog({
    title: `Remove fork ${u.name}`,
    body: [
      el("p", {}, `This deletes the fork's folder `, el("code", {}, doc.path), ` (${doc.files_removed.toLocaleString()} files).`),
      el("p", { class: "muted" }, `Its last state is sealed first${doc.snapshot ? ` (${short(doc.snapshot.id)})` : ""}: it stays restorable by ID from ${parent.name}.`),
      el("label", {}, `Type the fork's name (${u.fork.name}) to confirm: `,
        el("input", { id: "confirm-name", autocomplete: "off", "data-testid": "confirm-name" })),
    ],
    applyLabel: "Remove the fork",
    danger: true,
    ready: () => ($("confirm-name")?.value ?? "") === u.fork.name,
    run: () => apply("fork.remove", parent.id, { name: u.fork.name }, previewed),
  });
  if (!result) return;
  toast(`removed fork ${u.name}; its last state is ${short(result.snapshot && result.snapshot.id)}`);
  await loadOverview();
  await select(parent.id);
}

// -- live updates --------------------------------------------------------------------------

let refreshTimer = null;
function scheduleRefresh(event) {
  if (refreshTimer) clearTimeout(refreshTimer);
  const touchesSelected = event.workspace_id === state.selected;
  refreshTimer = setTimeout(async () => {
    refreshTimer = null;
    try {
      await loadOverview();
      if (touchesSelected) await Promise.all([refreshHead(), loadOperations()]);
    } catch (err) {
      toast(explain(err), true);
    }
  }, 120);
}

async function follow() {
  const live = $("live");
  for (;;) {
    try {
      const headers = { "X-Tillage-Token": state.token || "" };
      if (state.cursor !== null) headers["Last-Event-ID"] = String(state.cursor);
      const response = await fetch("/api/events", { headers });
      if (!response.ok || !response.body) throw new Error(`events: ${response.status}`);
      live.textContent = "live";
      live.className = "live on";
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
          if (!data) continue;
          const event = JSON.parse(data);
          state.cursor = event.cursor;
          scheduleRefresh(event);
        }
      }
    } catch (err) {
      // Reconnect below.
    }
    live.textContent = "reconnecting…";
    live.className = "live off";
    await new Promise((r) => setTimeout(r, 1000));
  }
}

// -- start ---------------------------------------------------------------------------------

async function start() {
  $("claim-form").addEventListener("submit", claim);
  const pane = $("timeline").closest(".pane");
  pane.addEventListener("scroll", () => {
    if (state.more && !state.loading && nearEnd()) loadPage();
  });
  if (!state.token) {
    const fatal = $("fatal");
    fatal.textContent = "This page needs the link `till ui` printed (it carries this run's token).";
    fatal.hidden = false;
    return;
  }
  try {
    await loadOverview();
  } catch (err) {
    const fatal = $("fatal");
    fatal.textContent = explain(err);
    fatal.hidden = false;
    return;
  }
  follow();
  await Promise.all([loadPage(), loadOperations()]);
  document.body.dataset.ready = "true";
  performance.mark("tillage-ready"); // bench/ui.py: the first paint with the page's data
}

start();
