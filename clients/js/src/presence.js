// Presence: who else has this record open, their state ({ name, color }, the application's) and their
// selection as anchors (docs/API.md, presence; the service keeps it in memory, never in the database).
//
// The model, for one record (record.presence, made on first use: a page that never reads it sends
// nothing):
//  * announcing: set(state, selection?) keeps the latest state and selection and marks them unsent.
//    At most one presence/set request is in flight; what was set meanwhile is sent by the next one
//    (the latest wins, intermediate states are dropped), which starts when the one in flight has
//    answered and `throttleMs` have passed since it started (a throttle: the service refuses more
//    than its rate per client with 429). While joined, the state is sent again every timeoutMs/3
//    (the service's `timeoutMs`, from the set answer) so the service does not time the client out.
//    A failure that says "later" (unreachable, 429, 502-504) is retried after a wait doubling from
//    1 s to 30 s (back to 1 s once a set is answered) and at the subscription's next open; any other
//    is an `error` event and waits for the next set() or select() (no heartbeat resends it).
//  * leaving: leave(), record.close() and the page's `pagehide` send presence/leave at once as a
//    keepalive fetch (it outlives the page). From `pagehide` on nothing is sent (a closing page may
//    still run a while, and see its own leave come back), until a `pageshow` (the page came back from
//    the back-forward cache) announces the state again.
//  * others: presence/get when presence is first used and at every (re)open of the subscription,
//    plus the presence messages on the record's channel (join, update, leave). A get answers the
//    state at some moment; a message that came while it was in flight is newer for its client, so
//    the get's answer replaces only the clients no message named meanwhile (no clocks are compared).
//    Others whose heartbeat stopped are removed only by the service's leave (its sweeper publishes
//    one per expiry); a leave of this very client (it was timed out, offline) makes it announce again.
//  * presence messages never make the record sync and are not signs that a retry should run now.
// Cost: a message or set is O(size of the state); `others` copies the entries (O(clients)).

import { FolioError } from './errors.js';

const RETRY_MIN_MS = 1000; // a set that failed "later" is retried after this, doubling to RETRY_MAX_MS
const RETRY_MAX_MS = 30000;
const DEFAULT_TIMEOUT_MS = 30000; // the service's default, until a set answer names its own
const CLIENT_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** A client id the service accepts: 22 random characters of [A-Za-z0-9_-] (132 bits). */
function randomClientId() {
  const bytes = globalThis.crypto.getRandomValues(new Uint8Array(22));
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  let s = '';
  for (const b of bytes) s += alphabet[b & 63];
  return s;
}

function checkSelection(selection) {
  if (selection === null) return null;
  if (!selection || typeof selection !== 'object' || typeof selection.anchor !== 'string' || typeof selection.head !== 'string')
    throw new TypeError('a selection is null or { anchor, head } (anchors: strings from record.anchorAt)');
  return { anchor: selection.anchor, head: selection.head };
}

function copy(entry) {
  return { clientId: entry.clientId, userId: entry.userId, state: entry.state, selection: entry.selection, updatedAt: entry.updatedAt };
}

function sameEntry(a, b) {
  return a.userId === b.userId && JSON.stringify(a.state) === JSON.stringify(b.state) && JSON.stringify(a.selection) === JSON.stringify(b.selection);
}

export class Presence {
  /**
   * `record`: the FolioRecord (its _post, _emit, _after, _cancel, _authHeaders and options);
   * `clientId`, `throttleMs`: connect's presenceClientId and presenceThrottleMs.
   */
  constructor(record, { clientId, throttleMs = 100 } = {}) {
    if (clientId !== undefined && !CLIENT_ID.test(clientId)) throw new TypeError('presenceClientId is 1 to 64 characters of [A-Za-z0-9_-]');
    this._record = record;
    /** This client's id in the record's presence (others see it as clientId). */
    this.clientId = clientId ?? randomClientId();
    this._throttleMs = throttleMs;
    this._state = null; // the state set (null: never set)
    this._selection = null;
    this._joined = false; // set() was called and no leave since
    this._unsent = false; // the latest state or selection has not been sent
    this._sending = false; // a set request is in flight
    this._throttle = null; // the timer before the next set may start
    this._heartbeat = null;
    this._retry = null;
    this._leaveAgain = null; // a leave sent while a set was in flight (its request), to send again after it
    this._retryDelay = RETRY_MIN_MS; // the next retry's wait: doubles per failure, back to the least on an answer
    this._timeoutMs = DEFAULT_TIMEOUT_MS;
    this._others = new Map(); // clientId -> entry
    this._getting = null; // the get in flight
    this._getAgain = false; // another get was asked for while one ran
    this._named = null; // clientIds a message named while the get runs
    this._closed = false;
    this._hidden = false; // between pagehide and pageshow: nothing is sent (the page may still run a while)
    this._onPageHide = () => {
      this._hidden = true;
      this._leaveNow(true);
    };
    this._onPageShow = () => {
      if (!this._hidden) return;
      this._hidden = false;
      if (this._joined) this._send();
    };
    globalThis.addEventListener?.('pagehide', this._onPageHide);
    globalThis.addEventListener?.('pageshow', this._onPageShow);
  }

  /** The others present on the record (not this client), each a copy. */
  get others() {
    return [...this._others.values()].map(copy);
  }

  /** The state and selection this client announces (null before set). */
  get state() {
    return this._state;
  }

  get selection() {
    return this._selection;
  }

  /**
   * Announces this client with `state` (a JSON object; the service refuses more than 4 KiB) and
   * `selection` ({ anchor, head } from record.anchorAt, null for none; absent: kept).
   */
  set(state, selection) {
    if (this._closed) throw new FolioError('the record was closed', { status: 'CANCELLED' });
    if (!state || typeof state !== 'object' || Array.isArray(state)) throw new TypeError('presence state must be a JSON object');
    const sel = selection === undefined ? this._selection : checkSelection(selection);
    this._state = JSON.parse(JSON.stringify(state));
    this._selection = sel;
    this._joined = true;
    this._send();
  }

  /**
   * Changes only the selection (the editor bindings call it). Sent once the client has joined with
   * set(); until then only kept, so a binding alone announces nothing.
   */
  select(selection) {
    if (this._closed) return;
    const sel = checkSelection(selection);
    if (JSON.stringify(sel) === JSON.stringify(this._selection)) return;
    this._selection = sel;
    if (this._joined) this._send();
  }

  /** Leaves now (presence/leave); set() joins again. */
  leave() {
    if (!this._joined) return;
    this._leaveNow(false);
  }

  // ---- announcing ----------------------------------------------------------------------------------

  _send() {
    this._unsent = true;
    this._flush();
  }

  _flush() {
    if (this._closed || this._hidden || !this._joined || !this._unsent || this._sending || this._throttle !== null) return;
    this._unsent = false;
    this._sending = true;
    this._stopTimers();
    const r = this._record;
    const data = { ...r._recordIdsOpen(), clientId: this.clientId, state: this._state, selection: this._selection };
    if (r._o.userId !== undefined) data.userId = r._o.userId;
    if (this._throttleMs > 0) this._throttle = r._after(this._throttleMs, () => {
      this._throttle = null;
      this._flush();
    });
    r._post('/v2/presence/set', data).then(
      (answer) => {
        const timeout = answer?.result?.data?.timeoutMs;
        if (Number.isFinite(timeout) && timeout > 0) this._timeoutMs = timeout;
        this._done(null);
      },
      (e) => this._done(e),
    );
  }

  /** The set request in flight answered (`e`: its failure, or null). */
  _done(e) {
    this._sending = false;
    const leave = this._leaveAgain;
    this._leaveAgain = null;
    if (leave && !e && (this._closed || !this._joined || this._hidden)) this._fetchLeave(leave);
    if (this._closed || !this._joined) return;
    if (e) {
      if (isLater(e)) {
        this._unsent = true;
        const delay = this._retryDelay;
        this._retryDelay = Math.min(delay * 2, RETRY_MAX_MS);
        if (this._retry === null) this._retry = this._record._after(delay, () => {
          this._retry = null;
          this._flush();
        });
        return;
      }
      this._record._emit('error', e);
      // Refused: sent again by the next set() or select(), not by heartbeats (each would be refused).
      if (!this._unsent) return;
    } else this._retryDelay = RETRY_MIN_MS;
    if (this._unsent) {
      this._flush();
      return;
    }
    if (this._heartbeat === null) this._heartbeat = this._record._after(Math.max(1, Math.floor(this._timeoutMs / 3)), () => {
      this._heartbeat = null;
      this._send();
    });
  }

  _stopTimers() {
    const r = this._record;
    if (this._heartbeat !== null) r._cancel(this._heartbeat);
    if (this._retry !== null) r._cancel(this._retry);
    this._heartbeat = this._retry = null;
  }

  /**
   * presence/leave as a keepalive fetch, with the token the record holds (no token function is
   * called: a page being hidden may not wait). `hidden`: for pagehide, the client stays joined, so a
   * pageshow announces it again.
   */
  _leaveNow(hidden) {
    if (!this._joined) return;
    if (!hidden) this._joined = false;
    this._unsent = false;
    this._stopTimers();
    const r = this._record;
    const ids = r._recordIdsOpen();
    const headers = { 'Content-Type': 'application/json', ...r._authHeaders(r._token) };
    const leave = { method: 'POST', headers, keepalive: true, body: JSON.stringify({ data: { ...ids, clientId: this.clientId } }) };
    // A set in flight may reach the service after this leave (another connection): sent again once
    // that set is answered, if the client has not announced itself since (_done).
    if (this._sending) this._leaveAgain = leave;
    this._fetchLeave(leave);
  }

  _fetchLeave(leave) {
    const r = this._record;
    try {
      const sent = r._o.fetch(r._o.baseUrl + '/v2/presence/leave', leave);
      Promise.resolve(sent).catch(() => {}); // gone with the page, or offline: the service's timeout removes it
    } catch {
      // as above
    }
  }

  // ---- others ----------------------------------------------------------------------------------------

  /** A presence message of the channel ({ type, clientId, userId, state, selection, updatedAt }). */
  _message(p) {
    if (this._closed || !p || typeof p !== 'object' || typeof p.clientId !== 'string') return;
    this._named?.add(p.clientId);
    if (p.clientId === this.clientId) {
      // Timed out (this page was offline, or asleep): announce again.
      if (p.type === 'leave' && this._joined) this._send();
      return;
    }
    if (p.type === 'leave') {
      this._remove(p.clientId);
      return;
    }
    if (p.type === 'join' || p.type === 'update') this._upsert(p);
  }

  _upsert(p) {
    const entry = {
      clientId: p.clientId,
      userId: typeof p.userId === 'string' ? p.userId : null,
      state: p.state && typeof p.state === 'object' && !Array.isArray(p.state) ? p.state : {},
      selection: p.selection && typeof p.selection.anchor === 'string' && typeof p.selection.head === 'string' ? { anchor: p.selection.anchor, head: p.selection.head } : null,
      updatedAt: p.updatedAt ?? null,
    };
    const before = this._others.get(p.clientId);
    this._others.set(p.clientId, entry);
    if (before && sameEntry(before, entry)) return; // a heartbeat
    this._record._emit('presence', { type: before ? 'update' : 'join', clientId: entry.clientId, userId: entry.userId, state: entry.state, selection: entry.selection });
  }

  _remove(clientId) {
    const before = this._others.get(clientId);
    if (!before) return;
    this._others.delete(clientId);
    this._record._emit('presence', { type: 'leave', clientId, userId: before.userId, state: before.state, selection: before.selection });
  }

  /** presence/get (at most one in flight; asked again while it runs: once more after it). */
  _refresh() {
    if (this._closed) return;
    if (this._getting) {
      this._getAgain = true;
      return;
    }
    const named = (this._named = new Set());
    this._getting = this._record._post('/v2/presence/get', this._record._recordIdsOpen()).then(
      (answer) => {
        if (this._closed) return;
        const list = Array.isArray(answer?.result?.data?.presence) ? answer.result.data.presence : [];
        const present = new Set();
        for (const p of list) {
          if (!p || typeof p.clientId !== 'string' || p.clientId === this.clientId) continue;
          if (p.editorId !== undefined && p.editorId !== this._record._o.editorId) continue;
          present.add(p.clientId);
          if (!named.has(p.clientId)) this._upsert(p);
        }
        for (const id of [...this._others.keys()]) if (!present.has(id) && !named.has(id)) this._remove(id);
      },
      () => {}, // a service without presence, or unreachable: the next (re)open asks again
    ).finally(() => {
      this._getting = null;
      if (this._named === named) this._named = null;
      if (this._getAgain) {
        this._getAgain = false;
        this._refresh();
      }
    });
  }

  /** The subscription (re)opened: read who is here, and announce again (the service may have timed us out). */
  _opened() {
    this._refresh();
    if (this._joined && !this._sending) {
      if (this._retry !== null) this._record._cancel(this._retry);
      this._retry = null;
      this._send();
    }
  }

  _close() {
    if (this._closed) return;
    this._leaveNow(false);
    this._closed = true;
    if (this._throttle !== null) this._record._cancel(this._throttle);
    this._throttle = null;
    globalThis.removeEventListener?.('pagehide', this._onPageHide);
    globalThis.removeEventListener?.('pageshow', this._onPageShow);
  }
}

// ---- how another client is shown ----------------------------------------------------------------------
// A state is the other client's to choose (any JSON object): every binding shows a name and a colour
// only through these two, so what a hostile state holds is text (textContent) or a colour of a form
// that cannot leave a CSS value (no ';', ':', quotes, url()).

const NAME_MAX = 64; // UTF-16 units shown of a name
const COLOR = /^(?:#[0-9a-fA-F]{3,8}|[a-zA-Z]{1,20}|(?:rgba?|hsla?)\([0-9a-z.,%\s/+-]{1,64}\))$/;

/** A client's display name: its state's `name` (a non-empty string, its first 64 units), else its userId, else its client id. */
export function presenceName(entry) {
  const name = entry?.state?.name;
  if (typeof name === 'string' && name.trim() !== '') return name.length > NAME_MAX ? name.slice(0, NAME_MAX) + '…' : name;
  const id = typeof entry?.userId === 'string' && entry.userId !== '' ? entry.userId : entry?.clientId;
  return typeof id === 'string' ? id.slice(0, NAME_MAX) : '';
}

/**
 * A client's colour: its state's `color` when it is a CSS colour of a safe form (#hex, a name,
 * rgb()/hsl() of numbers), else one made from its client id (hsl). Use it as a CSS value only; a
 * lighter shade is color-mix(in srgb, <colour> 25%, transparent), which any of these forms allows.
 */
export function presenceColor(entry) {
  const c = entry?.state?.color;
  if (typeof c === 'string' && COLOR.test(c)) return c;
  let h = 0;
  for (const ch of String(entry?.clientId ?? '')) h = (h * 31 + ch.charCodeAt(0)) % 360;
  return `hsl(${h} 70% 42%)`;
}

/** A failure worth retrying later: no answer, a gateway's, or the rate limit. */
function isLater(e) {
  return e instanceof FolioError && [0, 429, 502, 503, 504].includes(e.httpStatus);
}
