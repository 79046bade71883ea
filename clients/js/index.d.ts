// Type declarations of Folio's JavaScript client (folio.js). README.md is the guide.

/** A record's type. */
export type RecordType = 'text' | 'array' | 'map' | 'xml';

/** A JSON value as the service keeps it (map values; array items are objects). */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/**
 * One stretch of a text change: code points [from, to) of the value before were replaced by `insert`.
 * A change's stretches are ascending and apart; positions are all of the value before it.
 */
export interface TextChange {
  from: number;
  to: number;
  insert: string;
}

export interface ChangeEvent {
  /** true: from the service (another client, a REST update); false: an edit of this record object. */
  remote: boolean;
  /** Text records: what changed, in code points of the value before. Other types: undefined. */
  changes?: TextChange[];
}

/** Anything with the constructor of the browser's EventSource. */
export interface EventSourceLike {
  readyState: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  close(): void;
}
export type EventSourceConstructor = new (url: string, init?: { headers?: Record<string, string> }) => EventSourceLike;

export interface ConnectOptions {
  /** The service's base URL, e.g. "https://folio.example.com" (no trailing path). */
  baseUrl: string;
  /**
   * A client token (POST /v2/auth/token, minted by the application's backend), sent as
   * `Authorization: Bearer`; in a URL (the subscription's `token` query parameter) only through an
   * EventSource other than FetchEventSource, as a browser's sends no headers. A function is asked for
   * a token when one is needed (one call shared by every request waiting) and again after a 401 (an
   * expired token); when the new token is refused too, the next call waits for the retry's backoff.
   * A read-only token: the first push is refused (an `error` event, once); the client then only pulls,
   * keeping local edits local, until the function gives another token.
   */
  token?: string | (() => string | Promise<string>);
  organizationId: string;
  documentId: string;
  editorId: string;
  /** lastUpdatedBy / sessionId of the changes this client pushes (defaults: the token's). */
  userId?: string;
  sessionId?: string;
  /**
   * A state from record.save() (or `persist`) to resume from: works offline, keeps unsent edits. It is
   * resumed under a new replica id, so any number of pages may resume one state. Several states (as
   * indexedDbPersistence gives them: every tab's, newest first): the first of a synced record is
   * resumed and the others of its incarnation merged into it; when the service refuses it as of a
   * deleted record (ABORTED), the states of other incarnations are tried next.
   */
  saved?: Uint8Array | Uint8Array[];
  /**
   * Called with the replica's state after every local edit (once per task: the edits of one keystroke
   * or paste together) and before every request that pushes edits. Calls never overlap: each is made
   * when the previous one settled, with the state as it is then. A call that throws (or rejects) is an
   * `error` event (FolioError, status PERSIST_FAILED, the exception as its cause); the push goes on.
   * `held`: the states of `saved` (the same objects) that `state` holds, or that are of a record
   * deleted since: a store may delete them once `state` is stored. indexedDbPersistence makes one.
   */
  persist?: (state: Uint8Array, info: { held: Uint8Array[] }) => void | Promise<void>;
  /** Extra request headers (e.g. x-folio-api-key and x-folio-auth-token for a server-side client). */
  headers?: Record<string, string>;
  /** Defaults: globalThis.fetch, and globalThis.EventSource or else FetchEventSource (Node). */
  fetch?: typeof fetch;
  EventSource?: EventSourceConstructor;
  /** Where folio-engine.wasm is (default: dist/folio-engine.wasm beside this package), or its bytes. */
  engine?: string | URL | Response | ArrayBuffer | Uint8Array;
  /** This client's id in the record's presence: 1 to 64 of [A-Za-z0-9_-] (default: 22 random ones). */
  presenceClientId?: string;
  /** The least time between the starts of two presence/set requests, in ms (default 100). */
  presenceThrottleMs?: number;
}

/** A selection as anchors (record.anchorAt): the fixed end and the moving end (the caret). */
export interface PresenceSelection {
  anchor: string;
  head: string;
}

/** Another client present on the record, as the service announced it. */
export interface PresenceEntry {
  clientId: string;
  /** The user of its token (a tenant-key client: the userId it sent). */
  userId: string | null;
  /** The JSON object it announced (by convention { name, color }). */
  state: JsonObject;
  selection: PresenceSelection | null;
  /** When the service last heard from it (the service's clock; not for ordering). */
  updatedAt: string | null;
}

/** A join, a change of state or selection (heartbeats are not reported), or a leave. */
export interface PresenceEvent {
  type: 'join' | 'update' | 'leave';
  clientId: string;
  userId: string | null;
  /** leave: the last state and selection known. */
  state: JsonObject;
  selection: PresenceSelection | null;
}

/**
 * Who else has the record open (record.presence). Made on first use, which reads who is here
 * (presence/get, and again at every reconnect); a record whose presence is never used sends nothing.
 */
export interface RecordPresence {
  /** This client's id (connect's presenceClientId, or a random one). */
  readonly clientId: string;
  /** The others present (never this client), each a copy. Updated by `presence` events. */
  readonly others: PresenceEntry[];
  /** The state and selection this client announces (null before set). */
  readonly state: JsonObject | null;
  readonly selection: PresenceSelection | null;
  /**
   * Announces this client (joins, or updates): `state` a JSON object (at most 4 KiB as canonical
   * JSON), `selection` anchors or null (absent: kept). Throttled: one request in flight, the latest
   * state wins; sent again every timeoutMs/3 while joined. A refusal is an `error` event; a read-only
   * token may announce.
   */
  set(state: JsonObject, selection?: PresenceSelection | null): void;
  /** Changes only the selection; sent once set() has joined (the editor bindings call it). */
  select(selection: PresenceSelection | null): void;
  /** Leaves now; set() joins again. close() and the page's pagehide leave too. */
  leave(): void;
}

/** Errors from the service, the network, or bytes that do not decode. */
export class FolioError extends Error {
  name: 'FolioError';
  /**
   * The JSON error's status ("PERMISSION_DENIED", "ABORTED", ...; "UNAVAILABLE" for the network;
   * "PERSIST_FAILED" for a `persist` call that threw, with its exception as `cause`).
   */
  status: string;
  /** The HTTP status; 0 when no HTTP answer came. */
  httpStatus: number;
  constructor(message: string, options?: { status?: string; httpStatus?: number; cause?: unknown });
}

/**
 * What is not CRDT state, of the change with the largest revision the subscription brought for the
 * record's incarnation (messages may arrive out of commit order; docs/API.md, live changes).
 */
export interface RecordMetadata {
  /** The record's revision the change committed. */
  revision: number;
  lastUpdatedBy: string | null;
  sessionId: string | null;
  lastUpdate: string | null;
}

/** A version of the record, as versions/add and versions/get list it. */
export interface VersionInfo {
  versionId: string;
  kind: 'named' | 'auto';
  name: string | null;
  createdAt: string;
  createdBy: string | null;
  /** The userIds that changed the record since the version before this one, in order of first change. */
  authors: string[];
  pinned: boolean;
  /** The record's version at that state (as crdt/get's). */
  version: string;
}

/** A version's value (versions/get with a versionId): the record as crdt/get answers it, then. */
export interface VersionValue {
  /** text: string; map: an object; array: objects; xml: markup (as crdt/get renders each). */
  data: string | JsonObject[] | JsonObject;
  id: string;
  type: RecordType;
  contentKey: string;
  version: string;
  versionId: string;
  createdAt: string;
  createdBy: string | null;
}

export interface RecordEvents {
  change: ChangeEvent;
  error: Error;
  status: { online: boolean };
  recreated: undefined;
  /**
   * The incarnation the replica follows was deleted (once). A deletion of an incarnation it does not
   * follow — one deleted before the record was added again, arriving late — is not reported.
   */
  deleted: { editorId: string; incarnation: string; deleted: true; lastUpdate: string };
  /** A change with a larger revision than any seen for this incarnation came: `metadata` is now it. */
  metadata: RecordMetadata;
  /** Another client joined, changed its state or selection, or left (record.presence). */
  presence: PresenceEvent;
}

/**
 * A live record. `value` and the edits are local and immediate; edits are pushed to the service in
 * the background, and changes from the service arrive as `change` events.
 */
export class FolioRecord {
  readonly type: RecordType;
  readonly contentKey: string;
  /** The incarnation of the record this replica belongs to. */
  readonly incarnation: string;
  /** text: string; array: objects; map: an object; xml: canonical markup. A fresh copy each read. */
  readonly value: string | JsonObject[] | JsonObject;
  /** Text: code points; array: items. */
  readonly length: number;
  /** True while the last exchange with the service succeeded. */
  readonly online: boolean;
  /**
   * The metadata of the largest revision the subscription brought for this incarnation (a copy); null
   * before the first (sync answers carry none) and after the record was added again.
   */
  readonly metadata: RecordMetadata | null;
  /**
   * The record's version (crdt/get's `version`) of the last sync answer applied; '' before the first
   * (a replica resumed from `saved`, or after the record was added again). The replica holds all that
   * it names, so a backend may send it as crdt/update's `baseVersion` with a value computed from this
   * copy as it was then, without the client's edits since. It changes with each sync answer, not with
   * pushed changes (`value` may be ahead of it: `await sync()` first).
   */
  readonly recordVersion: string;
  /** Who else has the record open, and this client's announcement. */
  readonly presence: RecordPresence;

  /**
   * Text and array: an anchor for the position before item (code point) `index`, "end" at the end; it
   * stays by that item through every edit, here and in other clients. RangeError past the end.
   */
  anchorAt(index: number): string;
  /**
   * Where `anchor` is now: the item's index; where it was if removed; the length for "end"; -1 for an
   * item this replica does not hold (yet). A FolioError (INVALID_ARGUMENT) for a malformed anchor.
   */
  indexOf(anchor: string): number;

  /** Makes the record equal to `value` through the engine's diff. Throws TypeError for a wrong shape. */
  replace(value: string | JsonObject[] | JsonObject): this;
  /** Text: inserts a string before code point `pos`. Array: inserts objects before item `pos`. */
  insert(pos: number, text: string): this;
  insert(pos: number, ...items: JsonObject[]): this;
  /** Text: removes `count` code points from `pos`; array: `count` items. RangeError past the end. */
  delete(pos: number, count?: number): this;
  /** Map: removes a key. */
  delete(key: string): this;
  /** Map: sets a key to a JSON value. */
  set(key: string, value: JsonValue): this;

  /** The replica's state, for connect({ saved }). */
  save(): Uint8Array;
  /** Syncs now; resolves once in step with the service, rejects with a FolioError. */
  sync(): Promise<void>;

  // Versions (docs/API.md, "Versions and history"), with the record's token: a read token may list and
  // get, a write token also add and restore. Each rejects with a FolioError (the service's refusal).
  /** The versions, newest first, a page at a time: pass `nextPageToken` as `pageToken` for the next. */
  listVersions(options?: { pageSize?: number; pageToken?: string }): Promise<{ versions: VersionInfo[]; nextPageToken?: string }>;
  /** A version's value, in the shape crdt/get answers a record; null if the service answered none. */
  getVersion(versionId: string): Promise<VersionValue | null>;
  /** Takes a version (kind "named") of the record as the service holds it now. */
  addVersion(name?: string | null): Promise<VersionInfo>;
  /**
   * Gives the record the value of a version, as a forward change the service publishes (it reaches
   * this replica and every other through the subscription). `version`: the record's version after it;
   * `backupVersionId`: the automatic version of the state it replaced.
   */
  restoreVersion(versionId: string): Promise<{ version: string; backupVersionId: string }>;
  /**
   * Stops syncing and listening and frees the replica; the record is unusable afterwards. Resolves
   * (never rejects) once every edit made is stored by `persist`, or its failure was an `error` event:
   * `await record.close()` before closing the store.
   */
  close(): Promise<void>;

  on<E extends keyof RecordEvents>(event: E, listener: (arg: RecordEvents[E]) => void): this;
  off<E extends keyof RecordEvents>(event: E, listener: (arg: RecordEvents[E]) => void): this;
}

/** Connects to one record; resolves once in step with the service (or at once, offline, with `saved`). */
export function connect(options: ConnectOptions): Promise<FolioRecord>;

/** What indexedDbPersistence resolves to: spread it into connect's options (`...store`). */
export interface IndexedDbPersistence {
  /** The states stored under the key (every tab's, newest first), or undefined when there are none. */
  readonly saved: Uint8Array[] | undefined;
  /**
   * Stores this page's state and deletes the entries of the `held` states of `saved` (connect says
   * which); rejects with the store's error (a QuotaExceededError, ...).
   */
  persist(state: Uint8Array, info?: { held: Uint8Array[] }): Promise<void>;
  /** Deletes every state stored under the key. */
  clear(): Promise<void>;
  /**
   * Resolves once the writes asked for are done, then closes the database connection. A persist
   * asked for after it opens a connection of its own.
   */
  close(): Promise<void>;
}

/**
 * A store for one record's replica in IndexedDB: one entry per tab under `key` (so tabs of one
 * profile never overwrite each other's unsent edits), read at once by the next page, whose persist
 * folds the entries it merged into its own (no other entry is deleted). `database` defaults to "folio".
 */
export function indexedDbPersistence(
  key: string,
  options?: { database?: string; indexedDB?: IDBFactory; IDBKeyRange?: typeof IDBKeyRange },
): Promise<IndexedDbPersistence>;

/**
 * Keeps a <textarea> or <input> and a text record in step; destroy() unbinds. Once the page announced
 * itself (record.presence.set), the element's selection is published as anchors (presence.select).
 */
export function bindTextarea(
  record: FolioRecord,
  element: Pick<HTMLTextAreaElement, 'value' | 'selectionStart' | 'selectionEnd' | 'selectionDirection' | 'setSelectionRange' | 'addEventListener' | 'removeEventListener'>,
): { destroy(): void };

/**
 * Keeps `element` (a <ul> or <ol>)
 * listing the others on `record` (record.presence): an <li data-client-id> each, holding
 * span.folio-presence-swatch (its colour), span.folio-presence-name and span.folio-presence-where
 * (presenceWhere). Redrawn on presence events and changes; destroy() stops.
 */
export function presenceList(record: FolioRecord, element: HTMLElement): { destroy(): void };
/** A client's display name: state.name (a non-empty string, its first 64 characters), else its userId, else its client id. */
export function presenceName(entry: PresenceEntry): string;
/** A client's colour, safe as a CSS value: state.color when it is #hex, a colour name or rgb()/hsl() of numbers, else an hsl() derived from its client id. */
export function presenceColor(entry: PresenceEntry): string;
/**
 * Where a client's caret is: "line L, column C" (text), "item N" (array), "" without a selection,
 * "…" for an anchor not held yet.
 */
export function presenceWhere(record: FolioRecord, entry: PresenceEntry): string;

/**
 * An EventSource over fetch (connect uses it where there is no global EventSource, as in Node). Unlike
 * a browser's it can send headers. Reconnects a second after a dropped stream; an answer other than a
 * 200 event stream closes it (readyState 2) with an `error`.
 */
export class FetchEventSource implements EventSourceLike {
  constructor(url: string | URL, init?: { headers?: Record<string, string>; fetch?: typeof fetch });
  readonly url: string;
  readyState: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  close(): void;
}

/**
 * The EventSource interface over a WebSocket to the same subscribe URL (connect({ EventSource:
 * WebSocketEventSource })): browsers allow six HTTP/1.1 connections per origin, which a few open
 * EventSources fill (several records, several tabs); WebSockets have a pool of their own. Reconnects
 * a second after a dropped socket; one that never opened closes (readyState 2) with an `error`. The
 * page's origin must be allowed by the operator (a WebSocket always sends an Origin).
 */
export class WebSocketEventSource {
  /** init.headers: not sent (a browser's WebSocket cannot); the token goes in the URL. */
  constructor(url: string | URL, init?: { WebSocket?: typeof WebSocket; headers?: Record<string, string> });
  readonly url: string;
}
// readyState, onopen, onmessage, onerror and close(), as EventSourceLike says.
export interface WebSocketEventSource extends EventSourceLike {}

/** A JSON value in the service's canonical form (keys sorted by UTF-8 bytes, no whitespace). */
export function canonicalJson(value: JsonValue): string;

// ---- the engine underneath (no network) ----------------------------------------------------------

export interface Engine {
  readonly __brand: 'FolioEngine';
}

/** Loads the WebAssembly engine once (connect does it). */
export function loadEngine(source?: string | URL | Response | ArrayBuffer | Uint8Array): Promise<Engine>;
/** A separate instance of the engine, with its own memory. */
export function createEngine(source?: string | URL | Response | ArrayBuffer | Uint8Array): Promise<Engine>;

/**
 * One replica of a record in the engine: the value, edits, encodings, batches to and from peers, and
 * the sync state machine connect drives. Call free() when done.
 */
export class Replica {
  static create(engine: Engine, type: RecordType, contentKey?: string): Replica;
  /** Throws a FolioError (INVALID_ARGUMENT) for bytes that are not a saved state. */
  static load(engine: Engine, saved: Uint8Array): Replica;
  /**
   * A saved state under a new replica id (connect's way to resume): the state's ops are kept as they
   * are; the edits made from now on are the new replica's. A state saved before its first sync has its
   * value made again as the new replica's edits.
   */
  static resume(engine: Engine, saved: Uint8Array): Replica;
  readonly type: RecordType;
  readonly contentKey: string;
  /** The replica id, decimal. */
  readonly replicaId: string;
  readonly incarnation: string;
  /** The record version of the last sync answer applied ('' before one, and after load). */
  readonly recordVersion: string;
  readonly value: string | JsonObject[] | JsonObject;
  readonly length: number;
  /** Unit operations waiting for what they depend on. */
  readonly pending: number;
  readonly needsSync: boolean;
  /**
   * Text: report the changes of replace, apply, onAnswer and onPush (a diff of the value). Xml: report
   * the elements they changed as `xmlChanged` (ids "r.s", "root" for the fragment; visible ones only).
   */
  track(on: boolean): void;
  replace(value: string | JsonObject[] | JsonObject): { ops: number; changes?: TextChange[]; xmlChanged?: string[] };
  insert(pos: number, ...values: (string | JsonObject)[]): number;
  delete(pos: number | string, count?: number): number;
  set(key: string, value: JsonValue): number;
  save(): Uint8Array;
  /** The whole document (docs/FORMAT.md). */
  encode(): Uint8Array;
  /** The version vector, encoded. */
  version(): Uint8Array;
  /** A batch of what a replica at `version` lacks. */
  encodeSince(version: Uint8Array): Uint8Array;
  /** Integrates a batch; a FolioError if it is refused (nothing changes then). */
  apply(batch: Uint8Array): { applied: number; changes?: TextChange[]; xmlChanged?: string[] };
  request(): { version: Uint8Array; update: Uint8Array; incarnation: string };
  onAnswer(update: Uint8Array, version: Uint8Array, incarnation: string, recordVersion?: string): { changed: boolean; changes?: TextChange[]; xmlChanged?: string[] };
  onPush(update: Uint8Array, version: Uint8Array, incarnation: string): { status: 'applied' | 'gap' | 'invalid' | 'recreated'; changed: boolean; changes?: TextChange[]; xmlChanged?: string[] };
  /** Text and array: "r.s" of the item at `index` (follows it through concurrent edits), "end" at the length. RangeError past it. */
  anchorAt(index: number): string;
  /** Text and array: the index of an anchor now (a removed item: where it was; "end": the length), -1 for an unknown id. FolioError (INVALID_ARGUMENT) if malformed. */
  indexOf(anchor: string): number;
  /** Xml: the anchor at `offset` of the node at `path` (child index in an element, code point in a text node): "r.s", or "end:r.s" / "end:root" at its end. */
  xmlAnchorAt(path: number[], offset: number): string;
  /** Xml: where an anchor is now, or null when its node is not visible or the id unknown. */
  xmlResolve(anchor: string): { path: number[]; offset: number } | null;
  /** Xml: makes the live children [from, to) of the element at `path` ([] the fragment) equal to `markup`'s nodes. Returns the unit operations made. */
  xmlReplace(path: number[], from: number, to: number, markup: string): number;
  /** Xml: the ids ("r.s") of the live children of the element at `path`. */
  xmlChildIds(path: number[]): string[];
  /** Xml: the canonical markup of the node at `path` (not empty). */
  xmlMarkup(path: number[]): string;
  /** Xml: the path of the live node made by `id` ("root": []), or null when removed or unknown. */
  xmlPathOf(id: string): number[] | null;
  onRefused(): void;
  free(): void;
}
