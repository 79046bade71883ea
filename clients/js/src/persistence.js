// Keeping a replica across page loads: the IndexedDB store the client ships (indexedDbPersistence)
// and how connect resumes from what it stored (mergeStates).
//
// The store keeps one state per tab: entry [key, tab] where `tab` is a random id a page takes when it
// opens the store, so two tabs of one profile never overwrite each other's unsent edits. A page
// opening the store reads every tab's entry of the key, newest first; connect({ saved }) resumes one
// of a synced record under a new replica id (Replica.resume) and merges the others of its
// incarnation into it (mergeStates). Each persist writes the page's own entry and, in the same
// transaction, deletes the entries connect names as held (persist's `held`: merged into the state
// written, or of a record known deleted), each only if its tab has not written it again since it was
// read (its write count is unchanged). An entry not held (it does not decode, it is of another type,
// or of another incarnation that may be the live one) is never deleted by a page, only by clear().
// So after any sequence of tabs opening, editing and closing, every edit not yet pushed is in some
// entry, and entries of closed tabs
// are folded into the next page that opens. IndexedDB holds states of any size as bytes (no base64),
// and runs the read-write transactions of one database in the order they were created, so the last
// state handed over is the one kept. Cost: a persist writes the whole state (O(state)); the client
// makes one per task with edits (persist in client.js).

import { FolioError } from './errors.js';
import { Replica } from './engine.js';

const EMPTY_VERSION = new Uint8Array([0]);
const STORE = 'states';

/**
 * The replica `saved` describes: one state (bytes), or several (an array, as indexedDbPersistence
 * gives them, newest first). Returns { replica, held }: `held` the indices of the states whose
 * contents the replica now holds (or that are of an incarnation in `dead`, a record known deleted),
 * which a store may therefore delete; no other state is in it. States whose index is in `skip` are
 * left out (held already by a replica dropped since).
 * The base is the first state of a synced record (it names an incarnation) not in `dead`: resumed
 * under a new replica id (Replica.resume); the ops of the others of its incarnation, type and root
 * are merged into it (the engine skips ops the base holds; the service skips the ones it has). A
 * state of another incarnation is of a record deleted since, or the base is (the service says which
 * at the first sync: ABORTED): not held, so it stays stored, and connect tries it next if the base
 * is refused. A state saved before its first sync holds only its own edits, never sent (the engine
 * refuses any other op in it): into a synced base of text or array its ops are applied as they are
 * (what that tab would have pushed; ops the base holds are skipped, so a state merged twice adds
 * nothing twice); else its value is added as new edits (text appended, array items appended, map
 * keys set oldest state first so the newest set wins; xml only into an empty record).
 * States that do not decode, or of another type or root, are not held. When no state decodes the
 * first one's error is thrown; when every one decoded is dead, `replica` is a new empty one.
 */
export function mergeStates(engine, saved, { dead = new Set(), skip = new Set() } = {}) {
  const states = Array.isArray(saved) ? saved : [saved];
  if (states.length === 0) return { replica: null, held: new Set() };
  const loaded = []; // [index, Replica]
  let firstError = null;
  for (let i = 0; i < states.length; ++i) {
    if (skip.has(i)) continue;
    try {
      loaded.push([i, Replica.load(engine, states[i])]);
    } catch (e) {
      firstError ??= e;
    }
  }
  if (loaded.length === 0 && firstError) throw firstError;
  const held = new Set();
  try {
    const live = loaded.filter(([i, r]) => {
      if (r.incarnation === '' || !dead.has(r.incarnation)) return true;
      held.add(i); // of a deleted record: nothing in it can join the record
      return false;
    });
    if (live.length === 0) {
      const [, first] = loaded[0] ?? [];
      return { replica: first ? Replica.create(engine, first.type, first.contentKey) : null, held };
    }
    const base = live.find(([, r]) => r.incarnation !== '') ?? live[0];
    const primary = Replica.resume(engine, base[1].save());
    held.add(base[0]);
    try {
      const fresh = []; // never-synced states to add, newest first
      for (const [i, other] of live) {
        if (i === base[0] || other.type !== primary.type || other.contentKey !== primary.contentKey) continue;
        if (other.incarnation === '') {
          // Ops of its own from the empty document, as that tab would have pushed at its first answer:
          // into a synced base as they are (text, array), so a state merged twice (a copy kept by a
          // failed persist, an older save of the same tab) adds nothing twice: the engine skips ops the
          // base holds, the service those it has. A never-synced base may hold no other replica's ops
          // (sync_client), and map keys are set by value so that the newest set wins over the base.
          if (primary.incarnation !== '' && (primary.type === 'text' || primary.type === 'array')) primary.apply(other.encodeSince(EMPTY_VERSION));
          else fresh.push([i, other]);
        } else if (other.incarnation === primary.incarnation) primary.apply(other.encodeSince(EMPTY_VERSION));
        else continue;
        held.add(i);
      }
      for (const [, other] of fresh.reverse()) addValue(primary, other.value);
    } catch (e) {
      primary.free();
      throw e;
    }
    return { replica: primary, held };
  } finally {
    for (const [, r] of loaded) r.free();
  }
}

/** Adds a never-synced state's value to `r` as new edits of r's replica. */
function addValue(r, value) {
  switch (r.type) {
    case 'text':
      if (value.length) r.insert(r.length, value);
      break;
    case 'array':
      if (value.length) r.insert(r.length, ...value);
      break;
    case 'map':
      for (const [k, v] of Object.entries(value)) r.set(k, v);
      break;
    case 'xml':
      if (r.value === '' && value !== '') r.replace(value);
      break;
  }
}

/**
 * A store for one record's replica in IndexedDB (database `database`, default "folio"), under `key`
 * (an application's name for the record, e.g. "acme/doc-1/body"). Resolves to
 * { saved, persist, clear, close }: pass `saved` and `persist` to connect (`...store`).
 *  * saved: the states stored under `key` (every tab's, newest first), or undefined;
 *  * persist(bytes, { held }): stores this page's state; `held` lists states of `saved` (the same
 *    Uint8Array objects) that this state holds, or that are of a record deleted since: their entries
 *    are deleted in the same transaction (connect passes them); resolves when the transaction
 *    completed, rejects with the store's error (QuotaExceededError, ...);
 *  * clear(): deletes every state stored under `key` (say after the record was deleted);
 *  * close(): resolves once the writes asked for are done, then closes the connection. A persist
 *    asked for after close() (a record closed just before the store) opens a connection of its own.
 */
export async function indexedDbPersistence(key, { database = 'folio', indexedDB = globalThis.indexedDB, IDBKeyRange = globalThis.IDBKeyRange } = {}) {
  if (typeof key !== 'string' || key === '') throw new TypeError('indexedDbPersistence needs a non-empty key');
  if (!indexedDB || !IDBKeyRange) throw new TypeError('indexedDbPersistence needs IndexedDB (a browser, or pass indexedDB and IDBKeyRange)');
  const openDb = () => request(() => {
    const open = indexedDB.open(database, 1);
    open.onupgradeneeded = () => open.result.createObjectStore(STORE, { keyPath: 'id' });
    return open;
  }, 'open');
  let db = await openDb();
  let closed = false;
  const range = IDBKeyRange.bound([key], [key, []]); // [key, any string]: arrays sort after strings
  const entries = await request(() => db.transaction(STORE, 'readonly').objectStore(STORE).getAll(range), 'read');
  entries.sort((a, b) => b.at - a.at);
  const tab = randomTab();
  // The entries read, not deleted yet: a persist naming one as held deletes it.
  const unfolded = new Map(entries.map((e) => [e.bytes, { id: e.id, writes: e.writes }]));
  const writing = new Set(); // the writes not settled
  let writes = 0;

  const write = (conn, bytes, held) => new Promise((resolve, reject) => {
    let tx;
    try {
      tx = conn.transaction(STORE, 'readwrite');
    } catch (e) {
      reject(e);
      return;
    }
    const store = tx.objectStore(STORE);
    store.put({ id: [key, tab], bytes, at: Date.now(), writes: ++writes });
    const folded = [];
    for (const b of held) {
      const m = unfolded.get(b);
      if (!m) continue;
      unfolded.delete(b);
      folded.push([b, m]);
      const get = store.get(m.id);
      get.onsuccess = () => {
        if (get.result && get.result.writes === m.writes) store.delete(m.id); // not written again since read
      };
    }
    if (folded.length === 0) tx.commit?.(); // nothing more to ask: commit now
    tx.oncomplete = () => resolve();
    tx.onabort = () => {
      for (const [b, m] of folded) unfolded.set(b, m); // still to fold: this state was not stored
      reject(tx.error ?? new FolioError('the IndexedDB transaction was aborted', { status: 'PERSIST_FAILED' }));
    };
  });

  return {
    saved: entries.length ? entries.map((e) => e.bytes) : undefined,
    persist(bytes, { held = [] } = {}) {
      if (!(bytes instanceof Uint8Array)) return Promise.reject(new TypeError('persist takes the state bytes'));
      const done = closed
        ? openDb().then(async (conn) => {
          try {
            await write(conn, bytes, held);
          } finally {
            conn.close(); // closes once the write's transaction is done
          }
        })
        : write(db, bytes, held);
      writing.add(done);
      const forget = () => writing.delete(done);
      done.then(forget, forget);
      return done;
    },
    clear() {
      unfolded.clear();
      return new Promise((resolve, reject) => {
        const tx = db.transaction(STORE, 'readwrite');
        tx.objectStore(STORE).delete(range);
        tx.oncomplete = () => resolve();
        tx.onabort = () => reject(tx.error);
      });
    },
    async close() {
      if (closed) return;
      closed = true;
      await Promise.allSettled([...writing]);
      db.close();
    },
  };
}

/** Runs an IDBRequest made by `make`; its result, or its error. */
function request(make, what) {
  return new Promise((resolve, reject) => {
    let r;
    try {
      r = make();
    } catch (e) {
      reject(e);
      return;
    }
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error ?? new Error(`IndexedDB ${what} failed`));
  });
}

function randomTab() {
  const b = new Uint8Array(8);
  globalThis.crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}
