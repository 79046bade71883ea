// Keeping a replica across page loads: the IndexedDB store the client ships (indexedDbPersistence)
// and how connect resumes from what it stored (mergeStates).
//
// The store keeps one state per tab: entry [key, tab] where `tab` is a random id a page takes when it
// opens the store, so two tabs of one profile never overwrite each other's unsent edits. A page
// opening the store reads every tab's entry of the key, newest first; connect({ saved }) resumes the
// first of a synced record under a new replica id (Replica.resume) and merges the others' ops into
// it. The page's first persist then writes its own entry and, in the same transaction, deletes the
// entries it merged, each only if its tab has not written it again since it was read (its write
// count is unchanged): what it deletes is held by the entry it writes. So after any sequence of tabs
// opening, editing and closing, every edit not yet pushed is in some entry, and entries of closed tabs
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
 * gives them, newest first). The first state whose record was synced (it names an incarnation) is
 * resumed under a new replica id; the ops of the others of the same incarnation are merged into it
 * (the service skips the ones it has). A state of another incarnation is of a record deleted since:
 * left out, as the client contract says. A state saved before its first sync holds only its own
 * edits, never sent: its value is added as new edits (text appended, array items appended, map keys
 * set; xml only into an empty record). States that do not decode are left out when another one
 * does; when none does, the first one's error is thrown.
 */
export function mergeStates(engine, saved) {
  const states = Array.isArray(saved) ? saved : [saved];
  if (states.length === 0) return null;
  const loaded = [];
  let firstError = null;
  for (const s of states) {
    try {
      loaded.push(Replica.load(engine, s));
    } catch (e) {
      firstError ??= e;
    }
  }
  if (loaded.length === 0) throw firstError;
  try {
    const primaryIndex = Math.max(0, loaded.findIndex((r) => r.incarnation !== ''));
    const primary = Replica.resume(engine, loaded[primaryIndex].save());
    try {
      for (let i = 0; i < loaded.length; ++i) {
        const other = loaded[i];
        if (i === primaryIndex || other.type !== primary.type || other.contentKey !== primary.contentKey) continue;
        if (other.incarnation === '') addValue(primary, other.value);
        else if (other.incarnation === primary.incarnation) primary.apply(other.encodeSince(EMPTY_VERSION));
      }
    } catch (e) {
      primary.free();
      throw e;
    }
    return primary;
  } finally {
    for (const r of loaded) r.free();
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
 *  * persist(bytes): stores this page's state; resolves when the transaction completed, rejects with
 *    the store's error (QuotaExceededError, ...);
 *  * clear(): deletes every state stored under `key` (say after the record was deleted);
 *  * close(): closes the database connection.
 */
export async function indexedDbPersistence(key, { database = 'folio', indexedDB = globalThis.indexedDB, IDBKeyRange = globalThis.IDBKeyRange } = {}) {
  if (typeof key !== 'string' || key === '') throw new TypeError('indexedDbPersistence needs a non-empty key');
  if (!indexedDB || !IDBKeyRange) throw new TypeError('indexedDbPersistence needs IndexedDB (a browser, or pass indexedDB and IDBKeyRange)');
  const db = await request(() => {
    const open = indexedDB.open(database, 1);
    open.onupgradeneeded = () => open.result.createObjectStore(STORE, { keyPath: 'id' });
    return open;
  }, 'open');
  const range = IDBKeyRange.bound([key], [key, []]); // [key, any string]: arrays sort after strings
  const entries = await request(() => db.transaction(STORE, 'readonly').objectStore(STORE).getAll(range), 'read');
  entries.sort((a, b) => b.at - a.at);
  const tab = randomTab();
  let merged = entries.map((e) => ({ id: e.id, writes: e.writes })); // deleted by the first persist
  let writes = 0;
  return {
    saved: entries.length ? entries.map((e) => e.bytes) : undefined,
    persist(bytes) {
      if (!(bytes instanceof Uint8Array)) return Promise.reject(new TypeError('persist takes the state bytes'));
      return new Promise((resolve, reject) => {
        let tx;
        try {
          tx = db.transaction(STORE, 'readwrite');
        } catch (e) {
          reject(e);
          return;
        }
        const store = tx.objectStore(STORE);
        store.put({ id: [key, tab], bytes, at: Date.now(), writes: ++writes });
        const folded = merged;
        merged = [];
        for (const m of folded) {
          const get = store.get(m.id);
          get.onsuccess = () => {
            if (get.result && get.result.writes === m.writes) store.delete(m.id);
          };
        }
        if (folded.length === 0) tx.commit?.(); // nothing more to ask: commit now
        tx.oncomplete = () => resolve();
        tx.onabort = () => {
          merged = folded.concat(merged); // still to fold: this state was not stored
          reject(tx.error ?? new FolioError('the IndexedDB transaction was aborted', { status: 'PERSIST_FAILED' }));
        };
      });
    },
    clear() {
      merged = [];
      return new Promise((resolve, reject) => {
        const tx = db.transaction(STORE, 'readwrite');
        tx.objectStore(STORE).delete(range);
        tx.oncomplete = () => resolve();
        tx.onabort = () => reject(tx.error);
      });
    },
    close() {
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
