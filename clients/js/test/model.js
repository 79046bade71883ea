// Test doubles for the client's transport: a scripted stand-in for the service's sync and subscribe
// endpoints and an EventSource the test drives. The stand-in answers as docs/API.md says the service
// does — the ops the client's version lacks (computed before its push), the record's version and
// incarnation, and the JSON errors — from a replica of the engine holding the record, so the answers
// carry real encoded batches. It is for the client's unit tests only: the end-to-end tests use the
// real service.
import { fromBase64, toBase64 } from '../src/base64.js';
import { Replica } from '../folio.js';

export class FakeEventSource {
  static instances = [];
  constructor(url, init) {
    this.url = url;
    this.init = init;
    this.readyState = 0;
    this.onopen = this.onmessage = this.onerror = null;
    FakeEventSource.instances.push(this);
  }
  open() {
    this.readyState = 1;
    this.onopen?.({});
  }
  send(message) {
    this.onmessage?.({ data: typeof message === 'string' ? message : JSON.stringify(message) });
  }
  /** A failure: `closed` as after an HTTP refusal (no reconnection), else a dropped connection. */
  fail(closed) {
    this.readyState = closed ? 2 : 0;
    this.onerror?.({});
  }
  close() {
    this.readyState = 2;
  }
  static last() {
    return FakeEventSource.instances.at(-1);
  }
}

/** What a browser's textarea does that the binding relies on. */
export class FakeTextarea {
  constructor() {
    this._value = '';
    this.selectionStart = this.selectionEnd = 0;
    this.selectionDirection = 'none';
    this.listeners = {};
  }
  get value() { return this._value; }
  set value(v) {
    // A browser puts the caret at the end when a script sets the value.
    this._value = v;
    this.selectionStart = this.selectionEnd = v.length;
  }
  setSelectionRange(start, end, direction = 'none') {
    this.selectionStart = start;
    this.selectionEnd = end;
    this.selectionDirection = direction;
  }
  addEventListener(type, f) { (this.listeners[type] ??= new Set()).add(f); }
  removeEventListener(type, f) { this.listeners[type]?.delete(f); }
  fire(type) { for (const f of this.listeners[type] ?? []) f({ type }); }
  /** The user types `text` over the selection (UTF-16 positions), as the browser does. */
  type(text) {
    const v = this._value;
    this._value = v.slice(0, this.selectionStart) + text + v.slice(this.selectionEnd);
    this.selectionStart = this.selectionEnd = this.selectionStart + text.length;
    this.fire('input');
  }
  /** Backspace: removes the selection, or the code point before the caret. */
  backspace() {
    const v = this._value;
    let from = this.selectionStart;
    if (from === this.selectionEnd) from -= /[\uDC00-\uDFFF]/.test(v[from - 1] ?? '') ? 2 : 1;
    this._value = v.slice(0, from) + v.slice(this.selectionEnd);
    this.selectionStart = this.selectionEnd = from;
    this.fire('input');
  }
}

export class ModelService {
  constructor(engine, type, { incarnation = '4187203945523807211', contentKey = 'content' } = {}) {
    this.engine = engine;
    this.type = type;
    this.contentKey = contentKey;
    this.doc = Replica.create(engine, type, contentKey);
    this.incarnation = incarnation;
    this.revision = 1; // the record's revision: each edit commits the next one
    this.requests = [];
    this.offline = false;
    this.readOnly = false; // the token's access: syncs with an update are refused (403)
    this.expired = false; // every request is refused with 401, whatever its token
    this.refusals = []; // queued answers: { status, body } served before anything else
    this.versions = []; // versions/add and restore's backups, oldest first: { ...the answer's, value }
    this.published = []; // the live messages of restores, for the test to send
    // Presence (docs/API.md): clientId -> entry; the messages set and leave publish, for the test to
    // send; the timeout the set answer names; a hold on set answers (a promise the answer waits for).
    this.present = new Map();
    this.presenceMessages = [];
    this.presenceTimeoutMs = 30000;
    this.holdPresence = null;
    this.fetch = (url, init) => this.handle(url, init);
  }

  /** The service's own edit (a REST update) by `by`: returns the live message it publishes. */
  edit(f, by = 'ana') {
    const before = this.doc.version();
    f(this.doc);
    ++this.revision;
    return this.message(this.doc.encodeSince(before), by);
  }

  /** The record's version (crdt/get's `version`) now. */
  recordVersion() {
    return `${this.revision}-${this.incarnation}`;
  }

  message(update, by = 'ana') {
    return { editorId: 'e', incarnation: this.incarnation, revision: this.revision, update: toBase64(update), version: toBase64(this.doc.version()), lastUpdatedBy: by, sessionId: null, lastUpdate: '2025-01-20T10:30:00.000Z' };
  }

  /** The live message of the record's deletion (no revision: it ends its incarnation). */
  deletion() {
    return { editorId: 'e', incarnation: this.incarnation, deleted: true, lastUpdate: '2025-01-20T10:31:00.000Z' };
  }

  /** The record deleted and added again: a new incarnation with `value`. */
  recreate(incarnation, value) {
    this.doc.free();
    this.doc = Replica.create(this.engine, this.type, this.contentKey);
    this.incarnation = incarnation;
    this.revision = 1;
    if (value !== undefined) this.doc.replace(value);
  }

  refuseNext(httpStatus, status, message) {
    this.refusals.push({ httpStatus, body: { error: { message, status } } });
  }

  syncs() {
    return this.requests.filter((r) => r.path === '/v2/crdt/sync');
  }

  async handle(url, init = {}) {
    const u = new URL(url);
    const request = { path: u.pathname, query: Object.fromEntries(u.searchParams), headers: { ...(init.headers ?? {}) }, body: init.body ? JSON.parse(init.body) : null };
    this.requests.push(request);
    await null; // answers come later, as over a network
    if (this.offline) throw new TypeError('fetch failed');
    if (this.expired) return json(401, { error: { message: 'The client token has expired.', status: 'UNAUTHENTICATED' } });
    if (this.refusals.length) {
      const r = this.refusals.shift();
      return json(r.httpStatus, r.body);
    }
    if (u.pathname.startsWith('/v2/crdt/versions/')) return this.versionsEndpoint(u.pathname, request.body.data);
    if (u.pathname.startsWith('/v2/presence/')) return this.presenceEndpoint(u.pathname, request);
    if (u.pathname !== '/v2/crdt/sync') return json(404, { error: { message: `No endpoint at ${u.pathname}.`, status: 'NOT_FOUND' } });
    const d = request.body.data;
    if (this.readOnly && d.update)
      return json(403, { error: { message: 'This token is read-only; sync without an update to only receive changes.', status: 'PERMISSION_DENIED' } });
    const version = fromBase64(d.version, 'version');
    const hasState = !(version.length === 1 && version[0] === 0) || d.update;
    if (hasState && d.incarnation === undefined)
      return json(400, { error: { message: 'incarnation is required with a version that is not empty or an update: ...', status: 'INVALID_ARGUMENT' } });
    if (d.incarnation !== undefined && d.incarnation !== this.incarnation)
      return json(409, { error: { message: `This record was deleted and added again since the client's state was synced (incarnation ${d.incarnation}, now ${this.incarnation}): drop the local state and sync again from the empty version.`, status: 'ABORTED' } });
    const answer = this.doc.encodeSince(version); // from the state before the push
    if (d.update) {
      const probe = Replica.create(this.engine, this.type, this.contentKey);
      probe.apply(this.doc.encodeSince(new Uint8Array([0])));
      probe.apply(fromBase64(d.update, 'update'));
      const pending = probe.pending;
      probe.free();
      if (pending > 0)
        return json(400, { error: { message: 'update depends on operations the server does not have; sync without an update first, then send the operations the server\'s version lacks.', status: 'FAILED_PRECONDITION' } });
      if (this.doc.apply(fromBase64(d.update, 'update')).applied > 0) ++this.revision;
    }
    return json(200, { result: { status: 'success', message: 'CRDT data synced successfully.', data: { incarnation: this.incarnation, update: toBase64(answer), version: toBase64(this.doc.version()), recordVersion: this.recordVersion(), type: this.type, contentKey: this.contentKey } } });
  }

  /** versions/add, get (list, paged by index; one) and restore (its live message goes to `published`). */
  versionsEndpoint(path, d) {
    const ok = (message, data, extra = {}) => json(200, { result: { status: 'success', message, data, ...extra } });
    const take = (kind, name, by) => {
      const v = { versionId: `v${this.versions.length + 1}`, kind, name: name ?? null, createdAt: '2025-01-20T10:30:00.000Z', createdBy: by, authors: [], pinned: false, version: this.recordVersion() };
      this.versions.push({ ...v, value: this.doc.value });
      return v;
    };
    const find = () => this.versions.find((v) => v.versionId === d.versionId);
    const public_ = ({ value, ...v }) => v;
    if (this.readOnly && path !== '/v2/crdt/versions/get')
      return json(403, { error: { message: 'This client token may only read.', status: 'PERMISSION_DENIED' } });
    if (path === '/v2/crdt/versions/add') return ok('Version added successfully.', take('named', d.name, d.userId ?? 'tok'));
    if (path === '/v2/crdt/versions/get') {
      if (d.versionId !== undefined) {
        const v = find();
        if (!v) return json(404, { error: { message: 'No version found for this versionId.', status: 'NOT_FOUND' } });
        return ok('Version retrieved successfully.', [{ data: v.value, id: d.editorId, type: this.type, contentKey: this.contentKey, version: v.version, versionId: v.versionId, createdAt: v.createdAt, createdBy: v.createdBy }]);
      }
      const newest = [...this.versions].reverse();
      const from = d.pageToken === undefined ? 0 : Number(d.pageToken);
      const size = d.pageSize ?? 100;
      const page = newest.slice(from, from + size).map(public_);
      return ok('Versions fetched successfully.', page, from + size < newest.length ? { nextPageToken: String(from + size) } : {});
    }
    if (path === '/v2/crdt/versions/restore') {
      const v = find();
      if (!v) return json(404, { error: { message: 'No version found for this versionId.', status: 'NOT_FOUND' } });
      const backup = take('auto', null, d.userId ?? 'tok');
      this.published.push(this.edit((doc) => doc.replace(v.value), d.userId ?? 'tok'));
      return ok('Version restored successfully.', { version: this.recordVersion(), backupVersionId: backup.versionId });
    }
    return json(404, { error: { message: `No endpoint at ${path}.`, status: 'NOT_FOUND' } });
  }
}

/** presence/set, leave and get as docs/API.md says (userId: the body's, else "user:" + the bearer token). */
ModelService.prototype.presenceEndpoint = async function (path, request) {
  const d = request.body.data;
  const ok = (message, data) => json(200, { result: { status: 'success', message, data } });
  const userId = d.userId ?? `user:${String(request.headers.Authorization ?? '').replace(/^Bearer /, '')}`;
  if (path === '/v2/presence/set') {
    if (this.holdPresence) await this.holdPresence;
    const before = this.present.get(d.clientId);
    const entry = { clientId: d.clientId, userId, state: d.state ?? before?.state ?? {}, selection: d.selection === undefined ? before?.selection ?? null : d.selection, updatedAt: `2025-01-20T10:30:${String(this.presenceMessages.length % 60).padStart(2, '0')}.000Z` };
    this.present.set(d.clientId, entry);
    this.presenceMessages.push({ editorId: d.editorId, presence: { type: before ? 'update' : 'join', ...entry } });
    return ok('Presence set.', { clientId: d.clientId, timeoutMs: this.presenceTimeoutMs });
  }
  if (path === '/v2/presence/leave') {
    const before = this.present.get(d.clientId);
    this.present.delete(d.clientId);
    if (before) this.presenceMessages.push({ editorId: d.editorId, presence: { type: 'leave', clientId: d.clientId, userId: before.userId, updatedAt: before.updatedAt } });
    return ok('Presence left.', { clientId: d.clientId });
  }
  if (path === '/v2/presence/get') return ok('Presence fetched.', { presence: [...this.present.values()].map((e) => ({ editorId: d.editorId, ...e })) });
  return json(404, { error: { message: `No endpoint at ${path}.`, status: 'NOT_FOUND' } });
};

function json(status, body) {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
}

/** Resolves once `cond()` holds, checking after each turn of the event loop (at most `turns`). */
export async function until(cond, turns = 200) {
  for (let i = 0; i < turns; ++i) {
    if (cond()) return;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error(`condition not reached: ${cond}`);
}

/**
 * A record connected to `service` (its fetch and a FakeEventSource, opened; `options`: more of
 * connect's): { record, es, remote }, where remote(f) makes the change f(replica) in the service and
 * delivers its message to the record.
 */
export async function connectTo(service, options = {}) {
  const { connect } = await import('../folio.js');
  const before = FakeEventSource.instances.length;
  const pending = connect({ baseUrl: 'http://folio.test', organizationId: 'o', documentId: 'd', editorId: 'e', fetch: service.fetch, EventSource: FakeEventSource, ...options });
  await until(() => FakeEventSource.instances.length > before);
  const es = FakeEventSource.last();
  es.open();
  const record = await pending;
  return { record, es, remote: (f) => es.send(service.edit(f)) };
}
