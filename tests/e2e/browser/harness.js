// Runs in the test pages (served by browser.e2e.js's page server, an origin other than Folio's): loads
// the JavaScript client from Folio's nginx (?folio=<its URL>) as any page would, cross-origin, and
// gives the test named records and editors to drive through page.evaluate. Failures come back as
// plain objects ({ error: { name, status, httpStatus, message } }), which page.evaluate can carry.
const folio = new URLSearchParams(location.search).get('folio');
const F = await import(`${folio}/client/folio.js`);

export const records = {};
export const editors = {}; // textareas and CodeMirror views, by record name
const stores = {}; // indexedDbPersistence stores, by record name
const persistStarts = {}; // by record name: { count, waiters }

const encode = (bytes) => btoa(String.fromCharCode(...bytes));
const decode = (text) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));

export function failure(e) {
  return { error: { name: e?.name, status: e?.status, httpStatus: e?.httpStatus, message: String(e?.message ?? e) } };
}

/**
 * Connects record `name`: `ids` (organizationId, documentId, editorId) with `token`. With `store` the
 * replica is kept in IndexedDB under that key (the client's indexedDbPersistence, as its README
 * shows) and resumed from it. With `persistKey` it is kept in localStorage under that key by the
 * snippet earlier READMEs showed (base64 through String.fromCharCode(...bytes), which throws for
 * states above about 125 KB). With `failingPersist` every persist call throws (a store out of quota).
 * `persisted` in state() counts the persist calls that completed.
 */
export async function open(name, { token, ids, persistKey, store, failingPersist }) {
  const o = { baseUrl: folio, token, ...ids };
  let persisted = 0;
  if (failingPersist) {
    o.persist = () => {
      throw new DOMException('The quota has been exceeded.', 'QuotaExceededError');
    };
  } else if (store) {
    const s = await F.indexedDbPersistence(store);
    stores[name] = s;
    const starts = (persistStarts[name] = { count: 0, waiters: [] });
    o.saved = s.saved;
    o.persist = async (bytes, info) => {
      ++starts.count;
      for (const w of starts.waiters.splice(0)) w();
      await s.persist(bytes, info);
      ++persisted;
    };
  } else if (persistKey) {
    const saved = localStorage.getItem(persistKey);
    if (saved) o.saved = decode(saved);
    o.persist = (bytes) => {
      localStorage.setItem(persistKey, encode(bytes));
      ++persisted;
    };
  }
  try {
    const r = await F.connect(o);
    records[name] = r;
    r.errors = [];
    Object.defineProperty(r, 'persisted', { get: () => persisted });
    r.on('error', (e) => r.errors.push(failure(e).error));
    return { type: r.type, value: r.value };
  } catch (e) {
    return failure(e);
  }
}

/** Loads the engine now (connect would fetch it: a page about to go offline needs it first). */
export async function loadEngine() {
  await F.loadEngine();
  return true;
}

export function state(name) {
  const r = records[name];
  return { value: r.value, online: r.online, errors: r.errors, persisted: r.persisted };
}

/** Calls a record method (insert, delete, set, replace) and returns the value after it. */
export function edit(name, method, ...args) {
  records[name][method](...args);
  return records[name].value;
}

export async function sync(name) {
  try {
    await records[name].sync();
    return { value: records[name].value };
  } catch (e) {
    return failure(e);
  }
}

export function close(name) {
  records[name].close();
  delete records[name];
}

/**
 * Appends `first` to the text record, waits until its persist call started, appends `second` (its
 * persist queued behind the running one), then closes the record and at once its store, with no
 * await between (as earlier READMEs showed). Resolves with the errors the record reported by the
 * time record.close()'s promise settled (or at once, when close returns none).
 */
export async function typeAndClose(name, first, second) {
  const r = records[name];
  const starts = persistStarts[name];
  const before = starts.count;
  r.insert(r.length, first);
  if (starts.count === before) await new Promise((w) => starts.waiters.push(w));
  r.insert(r.length, second);
  const closing = r.close();
  stores[name].close();
  delete records[name];
  delete stores[name];
  await closing;
  return r.errors;
}

/** The values of the states stored under `key` (a new store's `saved`), newest first. */
export async function storedValues(key) {
  const engine = await F.loadEngine();
  const s = await F.indexedDbPersistence(key);
  await s.close();
  return (s.saved ?? []).map((b) => {
    const r = F.Replica.load(engine, b);
    try {
      return r.value;
    } finally {
      r.free();
    }
  });
}

/** A real <textarea> bound to the record (bindTextarea), appended to the page. */
export function textarea(name) {
  const ta = document.createElement('textarea');
  ta.id = name;
  ta.cols = 60;
  document.body.append(ta);
  editors[name] = { element: ta, binding: F.bindTextarea(records[name], ta) };
}

/** A CodeMirror 6 EditorView bound to the record (folioSync), appended to the page. */
export async function codemirror(name) {
  const [{ EditorView }, { EditorState }, { folioSync }] = await Promise.all([
    import('@codemirror/view'), import('@codemirror/state'), import(`${folio}/client/src/codemirror.js`),
  ]);
  const parent = document.createElement('div');
  parent.id = name;
  document.body.append(parent);
  const record = records[name];
  const view = new EditorView({ parent, state: EditorState.create({ doc: record.value, extensions: [folioSync(record)] }) });
  editors[name] = { view };
}

/** The editor's text: a textarea's value or a CodeMirror document. */
export function shown(name) {
  const e = editors[name];
  return e.view ? e.view.state.doc.toString() : e.element.value;
}

/** A POST with the client token as a bearer, as the client sends it: { status, body }. */
export async function post(path, token, data) {
  try {
    const res = await fetch(`${folio}${path}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
      body: JSON.stringify({ data }),
    });
    return { status: res.status, body: await res.json() };
  } catch (e) {
    return failure(e);
  }
}

/**
 * What crdt/subscribe answers the token (in the query, as the client's EventSource sends it), read
 * with fetch: { status, body } for a refusal, { status: 200 } once an accepted stream starts.
 */
export async function subscribeAnswer(token, ids) {
  const q = new URLSearchParams({ ...ids, token });
  const abort = new AbortController();
  try {
    const res = await fetch(`${folio}/v2/crdt/subscribe?${q}`, { headers: { Accept: 'text/event-stream' }, signal: abort.signal });
    return res.ok ? { status: res.status } : { status: res.status, body: await res.json() };
  } catch (e) {
    return failure(e);
  } finally {
    abort.abort();
  }
}

// ---- presence (issue 53) ------------------------------------------------------------------------------

const presenceEvents = {}; // by record name: the `presence` events seen, as "type clientId"

/** Announces record `name`'s page with `state` (record.presence.set); starts keeping its events. */
export function presenceSet(name, state) {
  const r = records[name];
  if (!presenceEvents[name]) {
    presenceEvents[name] = [];
    r.on('presence', (e) => presenceEvents[name].push(`${e.type} ${e.clientId}`));
  }
  r.presence.set(state);
  return r.presence.clientId;
}

/** Who record `name` sees: { clientId, userId, name, selection } each, sorted by clientId, and its events. */
export function presenceOthers(name) {
  const r = records[name];
  const others = r.presence.others.map((o) => ({ clientId: o.clientId, userId: o.userId, name: o.state.name ?? null, selection: o.selection }));
  others.sort((a, b) => (a.clientId < b.clientId ? -1 : 1));
  return { clientId: r.presence.clientId, others, events: presenceEvents[name] ?? [] };
}

/** Where record `name` places each other client's caret: clientId -> index (record.indexOf of its head). */
export function presenceHeads(name) {
  const r = records[name];
  return Object.fromEntries(r.presence.others.filter((o) => o.selection).map((o) => [o.clientId, r.indexOf(o.selection.head)]));
}

/** A CodeMirror view bound to the record with the others' cursors (folioSync + folioCursors). */
export async function codemirrorWithCursors(name) {
  const [{ EditorView }, { EditorState }, cm] = await Promise.all([
    import('@codemirror/view'), import('@codemirror/state'), import(`${folio}/client/src/codemirror.js`),
  ]);
  const parent = document.createElement('div');
  parent.id = name;
  document.body.append(parent);
  const record = records[name];
  const view = new EditorView({ parent, state: EditorState.create({ doc: record.value, extensions: [cm.folioSync(record), cm.folioCursors(record)] }) });
  editors[name] = { view, field: cm.folioCursorField };
}

/** Sets the CodeMirror selection of `name` (UTF-16 positions) as the user would. */
export function codemirrorSelect(name, anchor, head = anchor) {
  const { view } = editors[name];
  view.focus();
  view.dispatch({ selection: { anchor, head } });
}

/**
 * The remote carets drawn in CodeMirror editor `name`: [{ clientId, name, pos }] from its decorations
 * (pos in the document), and the DOM's caret labels (their text), sorted.
 */
export function codemirrorCursors(name) {
  const { view, field } = editors[name];
  const carets = [];
  view.state.field(field).between(0, view.state.doc.length, (from, _to, deco) => {
    const w = deco.spec.widget;
    if (w) carets.push({ clientId: w.clientId, name: w.name, pos: from });
  });
  carets.sort((a, b) => a.pos - b.pos || (a.clientId < b.clientId ? -1 : 1));
  const labels = [...view.dom.querySelectorAll('.cm-folio-cursor-label')].map((e) => e.textContent).sort();
  return { carets, labels };
}

/** A who-is-where list (presenceList) of record `name`: returns nothing; presenceListed reads it. */
export function presenceListOf(name) {
  const ul = document.createElement('ul');
  ul.id = `${name}-people`;
  document.body.append(ul);
  F.presenceList(records[name], ul);
}

export function presenceListed(name) {
  return [...document.getElementById(`${name}-people`).children].map((li) => li.textContent);
}
