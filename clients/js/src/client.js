// A live record: one replica of a Folio record kept in step with the service.
//
// The replica (engine.js: the engine's folio::sync_client in WebAssembly) decides what to send and
// what an answer or a pushed change means; this file is the transport around it (docs/API.md):
//  * listen: GET /v2/crdt/subscribe as an EventSource (the token as `Authorization: Bearer` through
//    FetchEventSource; in the query only for another EventSource, as a browser's sends no headers); on
//    every (re)connect — its `open` event — sync, and once more a second later (with several nginx
//    workers a subscription takes effect a moment after it opens);
//  * sync: POST /v2/crdt/sync with the replica's request, the token as `Authorization: Bearer`;
//    repeated while the replica needs it (after a refused push it pulls first, then pushes);
//  * a push refused with 403 (a read-only token): reported once as an `error` event; from then on the
//    client only pulls (syncs without an update) and keeps local edits local, until it gets a new token;
//  * tokens (a `token` function): asked for once and shared by all requests; asked again after a 401,
//    and when the new token is refused too, the failure waits for the retry (backoff) before the next;
//  * pushed messages: a change goes to the replica, which holds out-of-order ops as pending and says
//    when something was missed (then sync); a notice means sync.
//    Messages may come out of commit order (several nodes publish; docs/API.md, live changes), so
//    nothing here depends on their order: the record's metadata (lastUpdatedBy, sessionId,
//    lastUpdate) is that of the largest `revision` seen in the incarnation followed, not of the last
//    message; a change of another incarnation makes the client sync, and only when the service
//    refuses that sync (ABORTED: the record was deleted and added again) is the replica dropped and a
//    new one joins the new record (a late change of an older incarnation changes nothing); messages
//    of an incarnation the client has left are late and ignored; a deletion is `deleted` only for the
//    incarnation followed (one of another incarnation is reported if the replica comes to follow it:
//    one that comes before the answer naming it).
//  * offline: edits go on locally; failed syncs are retried with backoff (0.5 s doubling to 30 s), and
//    at once (the backoff starting again) when the service shows it is reachable: the browser's
//    `online` event, the subscription's (re)open, a message on it while a retry waits. The replica
//    merges when the service answers again.
// One sync runs at a time; sync requests made while one runs are served by one more run after it.
// Persistence (`persist`): every local edit is handed to it, in the microtask after the edit (one
// call for the edits of one task: a keystroke, a paste), and it is awaited before a push too. Calls
// never overlap: each takes the state as it is when the previous one settled, so a store that
// completes in call order (indexedDbPersistence: IndexedDB runs read-write transactions in creation
// order) keeps the newest. A failure is an `error` event and does not stop the push.
// Replica ids: a saved state is resumed under a new replica id each time (Replica.resume), so two
// tabs resuming one state, or a reload of a state older than what was sent, never make two ops with
// one id: the ops in the state are the old replica's, sent again as they are (the service skips
// those it has). So the client contract's "save before sending" holds without the push waiting on a
// store that failed. `saved` may list several states (the tabs' own, from indexedDbPersistence):
// the first of a synced record is resumed and the others' ops of its incarnation merged into it
// (persistence.js); `persist` is told which saved states the replica holds (its `held`), and only
// those may be deleted. A resumed state refused as of a deleted record (ABORTED) is replaced by the
// saved states of the other incarnations, not by an empty replica. close() resolves once the state at
// close is stored.

import { fromBase64, toBase64 } from './base64.js';
import { loadEngine, Replica } from './engine.js';
import { FolioError } from './errors.js';
import { mergeStates } from './persistence.js';
import { FetchEventSource } from './fetch-event-source.js';
import { Presence } from './presence.js';

const EMPTY_VERSION = new Uint8Array([0]); // the empty version vector ("AA==")
const ROUNDS = 8; // sync rounds in one run before yielding (each makes progress: a pull, a push)
const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 30000;
const SETTLE_MS = 1000;
const LEFT_KEPT = 16; // incarnations left behind that are remembered (their late messages are ignored)
const UNNAMED_KEPT = 16; // other incarnations whose messages' metadata or deletion is kept (see _follow)

/**
 * Connects to one record. Resolves once the replica is in step with the service (or, given `saved`
 * state and an unreachable service, at once: it syncs when the service answers).
 */
export async function connect(options) {
  const o = checkOptions(options);
  const engine = await loadEngine(o.engine);
  const record = new FolioRecord(engine, o);
  try {
    await record.start();
  } catch (e) {
    record.close();
    throw e;
  }
  return record;
}

function checkOptions(options) {
  if (!options || typeof options !== 'object') throw new TypeError('connect takes an options object');
  const o = { ...options };
  for (const k of ['baseUrl', 'organizationId', 'documentId', 'editorId'])
    if (typeof o[k] !== 'string' || o[k] === '') throw new TypeError(`${k} must be a non-empty string`);
  if (o.token !== undefined && typeof o.token !== 'string' && typeof o.token !== 'function') throw new TypeError('token must be a string or a function returning one');
  o.baseUrl = o.baseUrl.replace(/\/+$/, '');
  o.fetch = o.fetch ?? globalThis.fetch?.bind(globalThis);
  if (typeof o.fetch !== 'function') throw new TypeError('no fetch: pass one as the fetch option');
  o.EventSource = o.EventSource ?? globalThis.EventSource ?? FetchEventSource;
  if (typeof o.EventSource !== 'function') throw new TypeError('EventSource must be a constructor');
  return o;
}

export class FolioRecord {
  constructor(engine, o) {
    this._engine = engine;
    this._o = o;
    // The saved states (persistence.js): which ones the replica holds (or are of a deleted record),
    // by index, named to `persist` as held; the incarnations found deleted (ABORTED).
    this._saved = o.saved ? (Array.isArray(o.saved) ? o.saved : [o.saved]) : [];
    this._dead = new Set();
    const merged = this._saved.length ? mergeStates(engine, this._saved) : { replica: null, held: new Set() };
    this._replica = merged.replica;
    this._held = merged.held;
    this._listeners = new Map();
    this._closed = false;
    this._online = false;
    this._token = typeof o.token === 'string' ? o.token : undefined;
    this._tokenFetch = null; // the token() call in progress, shared by all who need a token
    this._tokenRenewed = false; // the token replaced a refused one and nothing has accepted it yet
    this._lastToken = this._token; // the last token the function gave (a new one ends read-only)
    this._readOnly = false; // a push was refused (403): pull only until the token changes
    this._authBackoff = false; // a retry waits because a renewed token was refused (401)
    this._running = null; // the sync run in progress
    this._queued = null; // the run that follows it
    this._timers = new Set();
    this._retryTimer = null;
    this._retryDelay = RETRY_MIN_MS;
    this._source = null;
    this._sourceDelay = RETRY_MIN_MS;
    this._resubscribeTimer = null;
    this._persistRunning = null; // the persist call in progress
    this._persistNext = null; // the one after it, not started: it takes the state when it starts
    this._finalState = null; // the state at close(), for a persist call queued then
    // Out-of-order messages (docs/API.md, live changes). Incarnation -> the metadata of its largest
    // revision seen, and the incarnations whose deletion was seen: the followed one's, and those of
    // other incarnations' messages since (at most UNNAMED_KEPT), reported if the replica comes to
    // follow one of them (_follow: then the others are dropped).
    this._metadata = new Map();
    this._deletions = new Set();
    this._deletionTimes = new Map(); // incarnation in _deletions -> its deletion's lastUpdate
    this._left = []; // incarnations this client dropped for a newer one, newest last (at most LEFT_KEPT)
    this._followed = ''; // the incarnation _follow last saw the replica hold
    this._onOnline = () => this._reachable();
    globalThis.addEventListener?.('online', this._onOnline);
    this._presence = null; // made on first use (presence.js)
  }

  // ---- the record --------------------------------------------------------------------------------

  /** 'text' | 'array' | 'map' | 'xml'. */
  get type() { return this._live().type; }
  get contentKey() { return this._live().contentKey; }
  /** The incarnation of the record this replica belongs to (docs/API.md, sync). */
  get incarnation() { return this._live().incarnation; }
  /** text: string; map: object; array: array of objects; xml: markup string. */
  get value() { return this._live().value; }
  /** Text: its length in code points; array: its item count. */
  get length() { return this._live().length; }
  /** True while the last exchange with the service succeeded. */
  get online() { return this._online; }
  /**
   * { revision, lastUpdatedBy, sessionId, lastUpdate } of the change with the largest revision the
   * subscription brought for this incarnation (messages may come out of commit order), or null before
   * one came (sync answers carry no metadata).
   */
  get metadata() {
    const m = this._metadata.get(this._live().incarnation);
    return m ? { ...m } : null;
  }

  /**
   * The record's version (crdt/get's `version`) of the last sync answer this replica applied, '' before
   * the first one (and after the record was deleted and added again, until the new record's answer).
   * This replica holds everything that version names, so a backend may send it as crdt/update's
   * `baseVersion` with a value computed from `value` as it was then, without this client's own edits
   * since: that update is merged with what others wrote after it. It changes with each sync answer
   * (not with a change the subscription brings: `value` may already hold newer changes; `await sync()`
   * before reading both).
   */
  get recordVersion() { return this._live().recordVersion; }

  /**
   * Who else has the record open, and this client's own announcement (presence.js): set(state,
   * selection?), select(selection), leave(), others, and `presence` events. Made on first use, which
   * reads who is here (presence/get); a record whose presence is never used sends nothing about it.
   */
  get presence() {
    if (!this._presence) {
      if (this._closed) throw closedError();
      this._presence = new Presence(this, { clientId: this._o.presenceClientId, throttleMs: this._o.presenceThrottleMs });
      if (this._source?.readyState === 1) this._presence._refresh();
    }
    return this._presence;
  }

  /**
   * Text and array: an anchor for the position before item (code point) `index`: the id of the item
   * there, or "end" at the end. It stays by that item through every edit (Replica.anchorAt).
   */
  anchorAt(index) { return this._live().anchorAt(index); }

  /**
   * Where `anchor` (from anchorAt, here or in another client) is now: the item's index; where it was
   * when it was removed; the length for "end"; -1 for an item this replica does not hold yet.
   */
  indexOf(anchor) { return this._live().indexOf(anchor); }

  /** Makes the record equal to `value` through the engine's diff (like REST update, but local). */
  replace(value) {
    const { ops, changes } = this._live().replace(value);
    if (ops > 0) this._local(changes);
    return this;
  }

  /** Text: inserts a string before code point `pos`. Array: inserts the items (objects) before `pos`. */
  insert(pos, ...values) {
    const r = this._live();
    if (r.insert(pos, ...values) > 0) this._local(r.type === 'text' ? [{ from: pos, to: pos, insert: values[0] }] : undefined);
    return this;
  }

  /** Text and array: removes `count` code points or items from `pos`. Map: removes the key. */
  delete(pos, count = 1) {
    const r = this._live();
    if (r.delete(pos, count) > 0) this._local(r.type === 'text' ? [{ from: pos, to: pos + count, insert: '' }] : undefined);
    return this;
  }

  /** Map: sets a key to a JSON value. */
  set(key, value) {
    if (this._live().set(key, value) > 0) this._local(undefined);
    return this;
  }

  /**
   * The replica's state (bytes): its value, its history and the edits the service may not have yet.
   * connect({ ..., saved }) resumes from it. Use the `persist` option to keep it across reloads: a
   * state saved at other moments may be older than what was sent (docs/API.md, the client contract).
   */
  save() { return this._live().save(); }

  /** Syncs now; resolves when the replica is in step with the service. */
  sync() {
    if (this._closed) return Promise.reject(closedError());
    if (this._queued) return this._queued;
    const before = this._running;
    const queued = (async () => {
      await (before ? before.catch(() => {}) : null);
      this._queued = null; // from now on, a sync request queues another run
      const run = this._run();
      this._running = run;
      try {
        return await run;
      } finally {
        if (this._running === run) this._running = null;
      }
    })();
    this._queued = queued;
    return queued;
  }

  // ---- versions (docs/API.md, "Versions and history") ------------------------------------------------
  // With this record's token: a read token may list and get versions, a write token also add and
  // restore. Failures reject with a FolioError (the service's status and message).

  /**
   * The record's versions, newest first: { versions: [{ versionId, kind, name, createdAt, createdBy,
   * authors, pinned, version }], nextPageToken } (nextPageToken: pass it as `pageToken` for the next
   * page; absent on the last).
   */
  async listVersions({ pageSize, pageToken } = {}) {
    const data = this._recordIds();
    if (pageSize !== undefined) data.pageSize = pageSize;
    if (pageToken !== undefined) data.pageToken = pageToken;
    const r = (await this._post('/v2/crdt/versions/get', data))?.result ?? {};
    const out = { versions: Array.isArray(r.data) ? r.data : [] };
    if (typeof r.nextPageToken === 'string') out.nextPageToken = r.nextPageToken;
    return out;
  }

  /**
   * One version's value, as crdt/get answers a record: { data, id, type, contentKey, version, versionId,
   * createdAt, createdBy } (data: the value as crdt/get renders it).
   */
  async getVersion(versionId) {
    const r = await this._post('/v2/crdt/versions/get', { ...this._recordIds(), versionId });
    return r?.result?.data?.[0] ?? null;
  }

  /** Takes a version of the record as the service holds it now (named `name`, if given); answers it. */
  async addVersion(name) {
    const data = this._recordIds();
    if (name !== undefined) data.name = name;
    if (this._o.userId !== undefined) data.userId = this._o.userId;
    return (await this._post('/v2/crdt/versions/add', data))?.result?.data;
  }

  /**
   * Makes the record's value that of version `versionId`, as a forward change the service publishes:
   * this replica (and every other open one) gets it through the subscription, as any change. Answers
   * { version, backupVersionId } (the record's version after it; the version keeping the state it
   * replaced).
   */
  async restoreVersion(versionId) {
    const data = { ...this._recordIds(), versionId };
    if (this._o.userId !== undefined) data.userId = this._o.userId;
    if (this._o.sessionId !== undefined) data.sessionId = this._o.sessionId;
    return (await this._post('/v2/crdt/versions/restore', data))?.result?.data;
  }

  _recordIds() {
    if (this._closed) throw closedError();
    return this._recordIdsOpen();
  }

  _recordIdsOpen() {
    return { organizationId: this._o.organizationId, documentId: this._o.documentId, editorId: this._o.editorId };
  }

  /**
   * Stops listening and syncing and frees the replica. The record cannot be used afterwards. Resolves
   * (never rejects) once every edit made is stored by `persist` (or its failure was reported): close
   * a store (indexedDbPersistence) after it.
   */
  close() {
    if (this._closed) return this._closing;
    this._presence?._close(); // presence/leave, before the token and timers go
    this._closed = true;
    globalThis.removeEventListener?.('online', this._onOnline);
    if (this._persistNext && this._replica) this._finalState = this._replica.save(); // edits not handed over yet
    this._source?.close();
    this._source = null;
    for (const t of this._timers) clearTimeout(t);
    this._timers.clear();
    this._replica?.free();
    this._replica = null;
    const last = this._persistNext ?? this._persistRunning;
    this._closing = last ? last.then(() => undefined) : Promise.resolve();
    return this._closing;
  }

  // ---- events ------------------------------------------------------------------------------------
  //  change   { remote, changes? }: the value changed (changes: text only, code points, see index.d.ts)
  //  error    FolioError: a failure in the background (a sync or the subscription)
  //  status   { online }: the service became reachable or unreachable
  //  recreated   the record was deleted and added again; the replica now follows the new one
  //  deleted  the record (the incarnation followed) was deleted
  //  metadata { revision, lastUpdatedBy, sessionId, lastUpdate }: a change with a larger revision came

  on(event, fn) {
    if (!this._listeners.has(event)) this._listeners.set(event, new Set());
    this._listeners.get(event).add(fn);
    if (event === 'change') this._replica?.track(true);
    return this;
  }

  off(event, fn) {
    this._listeners.get(event)?.delete(fn);
    if (event === 'change' && !this._listeners.get('change')?.size) this._replica?.track(false);
    return this;
  }

  _emit(event, arg) {
    const listeners = this._listeners.get(event);
    if (event === 'error' && !listeners?.size) {
      console.error('Folio:', arg); // a failure nobody listens for is not dropped silently
      return;
    }
    for (const fn of [...(listeners ?? [])]) {
      try {
        fn(arg);
      } catch (e) {
        if (event === 'error') setTimeout(() => { throw e; });
        else this._emit('error', e);
      }
    }
  }

  _live() {
    if (this._closed) throw closedError();
    return this._replica;
  }

  _local(changes) {
    this._persist(); // before anything else can lose the edit
    this._emit('change', { remote: false, changes });
    if (this._retryTimer === null && !this._readOnly) this._kick(); // else the retry (or a new token) pushes
  }

  /**
   * Hands the replica's state to `persist`. Resolves (never rejects) once a state holding every edit
   * made before this call is stored: true, or false when `persist` failed (an `error` event, status
   * PERSIST_FAILED, the store's exception as its cause). Calls run one after another; the calls
   * asked for while one runs share the next one, which takes the state when it starts.
   */
  _persist() {
    if (!this._o.persist) return Promise.resolve(true);
    if (this._persistNext) return this._persistNext;
    const before = this._persistRunning;
    const next = (async () => {
      await before; // the previous call (never rejects); for the first, a microtask: the task's edits together
      this._persistNext = null;
      this._persistRunning = next;
      try {
        const bytes = this._replica && !this._closed ? this._replica.save() : this._finalState;
        if (!bytes) return true;
        await this._o.persist(bytes, { held: [...this._held].map((i) => this._saved[i]) });
        return true;
      } catch (e) {
        this._emit('error', new FolioError(`persist failed: ${e?.message ?? e}; the edits are kept in this page and pushed, but a reload would not have them`, { status: 'PERSIST_FAILED', cause: e }));
        return false;
      } finally {
        if (this._persistRunning === next) this._persistRunning = null;
      }
    })();
    this._persistNext = next;
    return next;
  }

  // ---- start ---------------------------------------------------------------------------------------

  async start() {
    try {
      await this._subscribe();
      await this.sync();
    } catch (e) {
      // Unreachable with a saved replica: work offline; the retry and the subscription sync later.
      if (this._replica && isUnreachable(e)) {
        this._setOnline(false);
        this._retry();
        return;
      }
      throw e;
    }
  }

  // ---- sync ----------------------------------------------------------------------------------------

  _kick() {
    if (this._closed) return;
    this.sync().catch((e) => this._failed(e));
  }

  /**
   * A background sync failed: retry if the service was unreachable, else report. A token refused
   * right after it was renewed is reported and retried with backoff too: edits meanwhile stay local
   * instead of each costing a request and a token.
   */
  _failed(e) {
    if (this._closed) return;
    if (isUnreachable(e)) {
      this._setOnline(false);
      this._retry();
    } else {
      this._emit('error', e);
      if (e instanceof FolioError && e.httpStatus === 401 && typeof this._o.token === 'function') {
        this._authBackoff = true; // until a request is accepted (_post)
        this._retry();
      }
    }
  }

  _retry() {
    if (this._retryTimer !== null || this._closed) return;
    const delay = this._retryDelay;
    this._retryDelay = Math.min(delay * 2, RETRY_MAX_MS);
    this._retryTimer = this._after(delay, () => {
      this._retryTimer = null;
      this._tokenRenewed = false; // a 401 now may ask for a new token again
      this._kick();
    });
  }

  /**
   * The service is reachable, or may be (the browser's `online` event, the subscription opened or
   * brought a message): the backoffs start again from their least, and a retry that waits (a sync, or
   * the subscription's) is made now. A message on the subscription (`network` false) says only that
   * the network is back: a retry that waits after a token was refused (401 right after a renewal)
   * keeps its backoff, else every message would cost a token and a sync.
   */
  _reachable(network = true) {
    if (this._closed) return;
    if (!network && this._authBackoff) return;
    this._retryDelay = RETRY_MIN_MS;
    this._sourceDelay = RETRY_MIN_MS;
    if (this._retryTimer !== null) {
      this._cancel(this._retryTimer);
      this._retryTimer = null;
      this._tokenRenewed = false;
      this._kick();
    }
    if (this._resubscribeTimer !== null) {
      this._cancel(this._resubscribeTimer);
      this._resubscribeTimer = null;
      this._tokenRenewed = false;
      this._subscribe().catch((e) => this._failed(e));
    }
  }

  _cancel(t) {
    clearTimeout(t);
    this._timers.delete(t);
  }

  _after(ms, f) {
    const t = setTimeout(() => {
      this._timers.delete(t);
      f();
    }, ms);
    this._timers.add(t);
    return t;
  }

  _setOnline(online) {
    if (online) {
      this._retryDelay = RETRY_MIN_MS;
      if (this._retryTimer !== null) {
        this._cancel(this._retryTimer);
        this._retryTimer = null;
      }
    }
    if (this._online === online) return;
    this._online = online;
    this._emit('status', { online });
  }

  async _run() {
    for (let round = 0; round < ROUNDS; ++round) {
      if (this._closed) return;
      const r = this._replica;
      const q = r ? r.request() : { version: EMPTY_VERSION, update: new Uint8Array(0), incarnation: '' };
      // Read-only: a pull. The same request without its update, as the replica makes after a refused push.
      const push = q.update.length > 0 && !this._readOnly;
      if (push) await this._persist(); // save before sending (a failure is reported; the push goes on)
      if (this._closed) return;
      const data = {
        organizationId: this._o.organizationId,
        documentId: this._o.documentId,
        editorId: this._o.editorId,
        version: toBase64(q.version),
      };
      if (push) data.update = toBase64(q.update);
      if (q.incarnation) data.incarnation = q.incarnation;
      if (this._o.userId !== undefined) data.userId = this._o.userId;
      if (this._o.sessionId !== undefined) data.sessionId = this._o.sessionId;
      let answer;
      try {
        answer = await this._post('/v2/crdt/sync', data);
      } catch (e) {
        if (this._closed) return;
        if (e instanceof FolioError && e.status === 'FAILED_PRECONDITION' && this._replica === r && r) {
          r.onRefused(); // the service lacks what the push depends on: pull, then push what it lacks
          continue;
        }
        if (e instanceof FolioError && e.status === 'ABORTED' && this._replica === r && r) {
          this._recreated();
          continue;
        }
        if (e instanceof FolioError && e.httpStatus === 403 && push) {
          // The token may read but not write: say so once, then pull only (edits stay local).
          this._readOnly = true;
          this._emit('error', e);
          continue;
        }
        throw e;
      }
      if (this._closed) return;
      this._setOnline(true);
      this._answer(answer);
      // Read-only, the answer brought everything the service has; the unpushed edits keep needsSync set.
      if (this._readOnly || !this._replica.needsSync) return;
    }
    this._after(0, () => this._kick()); // still behind (edits kept coming): go on after a pause
  }

  _answer(answer) {
    const d = answer?.result?.data;
    if (!d || typeof d !== 'object') throw new FolioError('the sync answer holds no data', { status: 'INTERNAL', httpStatus: 200 });
    const contentKey = typeof d.contentKey === 'string' ? d.contentKey : 'content';
    if (!this._replica) {
      this._replica = this._fresh(d.type, contentKey);
    } else if (this._replica.incarnation === '' && (d.type !== this._replica.type || contentKey !== this._replica.contentKey)) {
      // A replica that never synced (a new one after the record was added again) meets a record of
      // another type or root: the edits it holds cannot join it.
      const old = this._replica;
      this._replica = this._fresh(d.type, contentKey);
      old.free();
    }
    let res;
    try {
      res = this._replica.onAnswer(fromBase64(d.update ?? '', 'update'), fromBase64(d.version, 'version'), String(d.incarnation ?? ''), typeof d.recordVersion === 'string' ? d.recordVersion : '');
    } catch (e) {
      throw e instanceof FolioError ? e : new FolioError(`the sync answer is malformed: ${e.message}`, { status: 'INTERNAL', httpStatus: 200 });
    }
    if (res.changed) this._emit('change', { remote: true, changes: res.changes });
    this._follow();
  }

  /**
   * The replica may have learned its incarnation (an answer named it): what came for it before is its
   * own (its metadata, its deletion), what came for other incarnations is not about its record.
   */
  _follow() {
    const incarnation = this._replica?.incarnation ?? '';
    if (!incarnation || incarnation === this._followed) return;
    this._followed = incarnation;
    this._dropSavedOf((i) => i !== '' && i !== incarnation); // the service named the live incarnation
    for (const k of [...this._metadata.keys()]) if (k !== incarnation) this._metadata.delete(k);
    for (const k of [...this._deletions]) {
      if (k === incarnation) continue;
      this._deletions.delete(k);
      this._deletionTimes.delete(k);
    }
    const m = this._metadata.get(incarnation);
    if (m) this._emit('metadata', { ...m });
    if (this._deletions.has(incarnation)) this._emit('deleted', { editorId: this._o.editorId, incarnation, deleted: true, lastUpdate: this._deletionTimes.get(incarnation) ?? '' });
  }

  /** Marks the saved states whose incarnation `dead` says is deleted as held: a store may delete them. */
  _dropSavedOf(dead) {
    for (let i = 0; i < this._saved.length; ++i) {
      if (this._held.has(i)) continue;
      let r;
      try {
        r = Replica.load(this._engine, this._saved[i]);
      } catch {
        continue;
      }
      if (dead(r.incarnation)) this._held.add(i);
      r.free();
    }
  }

  /**
   * The record was deleted and added again: the replica is of a record that is gone. Its place is
   * taken by the saved states not merged yet of other incarnations (mergeStates: a stale tab's newer
   * state may have been the base), else by a new empty one; either joins the new record at the next
   * sync (edits not pushed go with the old one).
   */
  _recreated() {
    const old = this._replica;
    if (old.incarnation) this._dead.add(old.incarnation);
    let next = null;
    if (this._saved.some((_, i) => !this._held.has(i))) {
      try {
        const m = mergeStates(this._engine, this._saved, { dead: this._dead, skip: new Set(this._held) });
        for (const i of m.held) this._held.add(i);
        next = m.replica;
        if (next && (next.type !== old.type || next.contentKey !== old.contentKey)) {
          next.free();
          next = null;
        }
      } catch {
        next = null; // none decodes
      }
    }
    if (next && this._listeners.get('change')?.size) next.track(true);
    if (old.incarnation) {
      this._left.push(old.incarnation);
      if (this._left.length > LEFT_KEPT) this._left.shift();
      this._metadata.delete(old.incarnation);
      this._deletions.delete(old.incarnation);
      this._deletionTimes.delete(old.incarnation);
    }
    this._followed = '';
    const length = old.type === 'text' ? old.length : 0;
    this._replica = next ?? this._fresh(old.type, old.contentKey);
    old.free();
    this._emit('recreated');
    this._emit('change', { remote: true, changes: old.type === 'text' ? [{ from: 0, to: length, insert: this._replica.value }] : undefined });
    if (next) this._persist(); // the states it merged are held by this page's entry from now on
  }

  _fresh(type, contentKey) {
    const r = Replica.create(this._engine, type, contentKey);
    if (this._listeners.get('change')?.size) r.track(true);
    return r;
  }

  /** The `headers` option with `token` as `Authorization: Bearer`. */
  _authHeaders(token) {
    const h = { ...(this._o.headers ?? {}) };
    if (token) h.Authorization = `Bearer ${token}`;
    return h;
  }

  /** The token; a `token` function is called when there is none, once for all callers waiting. */
  _currentToken() {
    if (this._token !== undefined || typeof this._o.token !== 'function') return Promise.resolve(this._token);
    if (!this._tokenFetch) {
      const fetching = (async () => {
        try {
          const token = await this._o.token();
          if (this._tokenFetch === fetching) {
            if (token !== this._lastToken) this._readOnly = false; // a new token may write
            this._token = this._lastToken = token;
          }
          return token;
        } finally {
          if (this._tokenFetch === fetching) this._tokenFetch = null;
        }
      })();
      this._tokenFetch = fetching;
    }
    return this._tokenFetch;
  }

  /**
   * `token` was refused (401). True when a request should be made again with a new one: the token
   * function is asked again unless the current token already replaced a refused one (then the failure
   * waits for the retry's backoff), and one renewal serves everyone who held the refused token.
   */
  _tokenRefused(token) {
    if (typeof this._o.token !== 'function') return false;
    if (this._token !== token) return true; // renewed (or being renewed) meanwhile
    if (this._tokenRenewed) return false;
    this._tokenRenewed = true;
    this._token = undefined;
    return true;
  }

  /** POSTs {data} to `path`; the answer's JSON, or a FolioError with the service's status and message. */
  async _post(path, data, retried = false) {
    const token = await this._currentToken();
    const headers = { 'Content-Type': 'application/json', ...this._authHeaders(token) };
    let res;
    try {
      res = await this._o.fetch(this._o.baseUrl + path, { method: 'POST', headers, body: JSON.stringify({ data }) });
    } catch (e) {
      throw new FolioError(`the service is unreachable: ${e?.message ?? e}`, { status: 'UNAVAILABLE', cause: e });
    }
    const error = res.ok ? null : await errorOf(res);
    if (error) {
      if (error.httpStatus === 401 && !retried && this._tokenRefused(token)) return this._post(path, data, true); // expired
      throw error;
    }
    if (token === this._token) this._tokenRenewed = this._authBackoff = false; // accepted
    try {
      return await res.json();
    } catch (e) {
      throw new FolioError('the service answered something that is not JSON', { status: 'INTERNAL', httpStatus: res.status, cause: e });
    }
  }

  // ---- subscribe -----------------------------------------------------------------------------------

  /** Opens the subscription; resolves on its first `open`, rejects if it fails before. */
  async _subscribe() {
    const token = await this._currentToken();
    if (this._closed) return;
    const q = new URLSearchParams({ organizationId: this._o.organizationId, documentId: this._o.documentId, editorId: this._o.editorId });
    // FetchEventSource sends the token as a header; another EventSource (a browser's) may send no
    // headers: the token goes in the query. The service refuses a token sent both ways (401).
    const headers = this._o.EventSource === FetchEventSource ? this._authHeaders(token) : { ...(this._o.headers ?? {}) };
    if (token && !headers.Authorization) q.set('token', token);
    const url = `${this._o.baseUrl}/v2/crdt/subscribe?${q}`;
    return new Promise((resolve, reject) => {
      let opened = false;
      let es;
      if (this._o.EventSource === FetchEventSource) es = new FetchEventSource(url, { headers, fetch: this._o.fetch });
      else es = this._o.headers ? new this._o.EventSource(url, { headers }) : new this._o.EventSource(url);
      this._source = es;
      es.onopen = () => {
        this._presence?._opened(); // who is here now; announce again
        this._reachable(); // a sync retry waiting is made now
        if (!opened) {
          opened = true;
          resolve();
        } else {
          this._kick(); // a reconnect: whatever was published meanwhile was missed
        }
        this._after(SETTLE_MS, () => this._kick());
      };
      es.onmessage = (ev) => {
        if (this._presenceMessage(ev.data)) return; // never a sync, nor a retry
        if (this._retryTimer !== null) this._reachable(false); // the service answers: push what waits now
        this._message(ev.data);
      };
      es.onerror = () => {
        if (this._source !== es || this._closed) return;
        if (es.readyState !== 2) {
          // CONNECTING: the EventSource reconnects by itself.
          if (!opened) {
            opened = true;
            reject(new FolioError('the service is unreachable (subscribe)', { status: 'UNAVAILABLE' }));
          }
          return;
        }
        // CLOSED: the service refused the subscription, or answered something else. Ask it why.
        this._source = null;
        this._whyClosed(url, headers).then((e) => {
          if (this._closed) return;
          if (!opened) {
            opened = true;
            // The first token had expired (or was refused): once more with a new one from the function.
            if (e?.httpStatus === 401 && this._tokenRefused(token)) return this._subscribe().then(resolve, reject);
            if (e && !isUnreachable(e)) return reject(e);
            if (!this._replica) return reject(e ?? new FolioError('the subscription closed', { status: 'UNAVAILABLE' }));
            resolve();
          } else if (e && !isUnreachable(e)) {
            if (!(e.httpStatus === 401 && this._tokenRefused(token))) this._emit('error', e);
            if (e.httpStatus !== 401 || typeof this._o.token !== 'function') return;
            // expired: reconnect with a new token (or, when the new one was refused too, after the backoff)
          }
          this._resubscribe();
        });
      };
    });
  }

  _resubscribe() {
    const delay = this._sourceDelay;
    this._sourceDelay = Math.min(delay * 2, RETRY_MAX_MS);
    this._resubscribeTimer = this._after(delay, () => {
      this._resubscribeTimer = null;
      if (this._closed) return;
      this._tokenRenewed = false; // a 401 now may ask for a new token again
      this._subscribe().catch((e) => this._failed(e));
    });
  }

  /** The error the subscribe endpoint answers the subscription's request now (null if it accepts). */
  async _whyClosed(url, headers) {
    const abort = new AbortController();
    try {
      const res = await this._o.fetch(url, { headers: { Accept: 'text/event-stream', ...headers }, signal: abort.signal });
      if (res.ok) return null;
      return await errorOf(res);
    } catch (e) {
      return new FolioError(`the service is unreachable: ${e?.message ?? e}`, { status: 'UNAVAILABLE', cause: e });
    } finally {
      abort.abort();
    }
  }

  /**
   * True when `text` is a presence message ({ editorId, presence: {...} }, docs/API.md): handed to
   * presence (if in use), and nothing else. A cheap test first: every message passes here. A message
   * with a `presence` member but no `update` nor `deleted` is presence whatever its shape (a malformed
   * one is dropped): it never makes the client sync.
   */
  _presenceMessage(text) {
    if (this._closed || typeof text !== 'string' || !text.includes('"presence"')) return false;
    let m;
    try {
      m = JSON.parse(text);
    } catch {
      return false;
    }
    if (!m || typeof m !== 'object' || m.presence === undefined || m.update !== undefined || m.deleted !== undefined) return false;
    if (m.presence && typeof m.presence === 'object' && (m.editorId === undefined || m.editorId === this._o.editorId)) this._presence?._message(m.presence);
    return true;
  }

  _message(text) {
    if (this._closed) return;
    let m;
    try {
      m = JSON.parse(text);
    } catch {
      return; // not a message of ours
    }
    if (!m || typeof m !== 'object') return;
    const incarnation = String(m.incarnation ?? '');
    if (this._left.includes(incarnation)) return; // late: of a record this client has left for a newer one
    this._follow();
    const held = this._replica?.incarnation ?? '';
    if (m.deleted === true) {
      // It ends its incarnation. Of the one followed: the record is gone. Of another: not about the
      // record followed (deleted before it was added again, arriving late), unless the replica comes to
      // follow that one (it does not know its incarnation yet, or a sync is about to drop it for the
      // one added again): kept until then (_follow).
      if (incarnation === '' || this._deletions.has(incarnation)) return;
      if (incarnation !== held && !this._room(this._deletions, incarnation)) return;
      this._deletions.add(incarnation);
      this._deletionTimes.set(incarnation, typeof m.lastUpdate === 'string' ? m.lastUpdate : '');
      if (incarnation === held) this._emit('deleted', m);
      return;
    }
    const r = this._replica;
    if (!r || typeof m.update !== 'string' || typeof m.version !== 'string') {
      this._noteMetadata(m, incarnation);
      this._kick(); // a notice (a change too large to push, or a failed publish)
      return;
    }
    let res;
    try {
      res = r.onPush(fromBase64(m.update, 'update'), fromBase64(m.version, 'version'), String(m.incarnation ?? ''));
    } catch {
      this._kick(); // malformed: sync instead
      return;
    }
    if (res.changed) this._emit('change', { remote: true, changes: res.changes });
    if (res.status === 'recreated') {
      // Another incarnation: the record added again after this one was deleted, or a late change of
      // an older one (before this one was added). The sync, sent with this replica's incarnation, tells
      // which: ABORTED drops the replica for the new record (_run), an answer means it was late.
      this._kick();
    } else if (res.status !== 'applied') {
      this._kick(); // something was missed (a gap) or the message was unusable
    }
    this._noteMetadata(m, incarnation);
  }

  /**
   * Keeps a change's or notice's metadata when its revision is the largest seen for its incarnation;
   * a `metadata` event when that incarnation is the replica's. A message without a revision (a
   * service from before revisions) gives none.
   */
  _noteMetadata(m, incarnation) {
    const revision = m.revision;
    if (!Number.isSafeInteger(revision) || incarnation === '') return;
    const held = this._replica?.incarnation ?? '';
    const best = this._metadata.get(incarnation);
    if (best && best.revision >= revision) return;
    if (!best && incarnation !== held && !this._room(this._metadata, incarnation)) return;
    const meta = {
      revision,
      lastUpdatedBy: typeof m.lastUpdatedBy === 'string' ? m.lastUpdatedBy : null,
      sessionId: typeof m.sessionId === 'string' ? m.sessionId : null,
      lastUpdate: typeof m.lastUpdate === 'string' ? m.lastUpdate : null,
    };
    this._metadata.set(incarnation, meta);
    if (incarnation === held) this._emit('metadata', { ...meta });
  }

  /** Room in `kept` (a Map or Set keyed by incarnation) for one more incarnation not followed. */
  _room(kept, incarnation) {
    return kept.has(incarnation) || kept.size < UNNAMED_KEPT;
  }
}

function closedError() {
  return new FolioError('the record was closed', { status: 'CANCELLED' });
}

/** Unreachable: no HTTP answer, or one saying to retry later (nginx's 502/503/504, a rate limit). */
function isUnreachable(e) {
  return e instanceof FolioError && (e.httpStatus === 0 || e.httpStatus === 502 || e.httpStatus === 503 || e.httpStatus === 504 || e.httpStatus === 429);
}

/** The FolioError of an HTTP answer that is not a success: the JSON error's message and status. */
async function errorOf(res) {
  let text = '';
  try {
    text = await res.text();
  } catch {
    // the body could not be read: report the status alone
  }
  let body = null;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON (Nchan's bare 502, a proxy's page)
  }
  const err = body?.error;
  if (err && typeof err.message === 'string')
    return new FolioError(err.message, { status: typeof err.status === 'string' ? err.status : 'UNKNOWN', httpStatus: res.status });
  return new FolioError(`HTTP ${res.status}${text ? `: ${text.slice(0, 200)}` : ''}`, { status: statusOfHttp(res.status), httpStatus: res.status });
}

function statusOfHttp(code) {
  return { 400: 'INVALID_ARGUMENT', 401: 'UNAUTHENTICATED', 403: 'PERMISSION_DENIED', 404: 'NOT_FOUND', 409: 'ABORTED', 429: 'RESOURCE_EXHAUSTED', 500: 'INTERNAL', 502: 'UNAVAILABLE', 503: 'UNAVAILABLE', 504: 'UNAVAILABLE' }[code] ?? 'UNKNOWN';
}
