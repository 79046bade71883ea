// The engine as WebAssembly: loading folio-engine.wasm and the Replica class over its C interface
// (clients/js/wasm/folio_wasm.cpp). A Replica is one folio::sync_client — the record's local copy and
// the client state machine of docs/API.md ("The client contract") — so the browser runs the same
// machinery as folio-cli; this file only moves bytes in and out of the module's memory.
//
// Positions are code points (text) or items (arrays), as everywhere in the engine.

import { FolioError, engineError } from './errors.js';
import { canonicalJson, parseJson } from './json.js';

const TYPES = ['text', 'array', 'map', 'xml'];  // TYPES[n - 1] is folio::record_type n (include/folio/record_type.hpp)
const PUSH_STATUS = ['applied', 'gap', 'invalid', 'recreated'];
const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

let loading = null;

/**
 * Loads and instantiates the engine once. `source`: a URL (default: folio-engine.wasm beside this
 * package's dist/), a Response, or the module's bytes.
 */
export function loadEngine(source) {
  if (!loading) {
    loading = createEngine(source).catch((e) => {
      loading = null;
      throw e;
    });
  }
  return loading;
}

async function wasmBytesOrResponse(source) {
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) return source;
  if (typeof Response !== 'undefined' && source instanceof Response) return source;
  const url = source ? new URL(String(source), import.meta.url) : new URL('../dist/folio-engine.wasm', import.meta.url);
  if (url.protocol === 'file:') {
    const { readFile } = await import('node:fs/promises');
    return readFile(url);
  }
  const res = await fetch(url);
  if (!res.ok) throw new FolioError(`could not load the Folio engine from ${url}: HTTP ${res.status}`, { status: 'UNAVAILABLE', httpStatus: res.status });
  return res;
}

async function randomSource() {
  if (globalThis.crypto?.getRandomValues) return globalThis.crypto;
  const { webcrypto } = await import('node:crypto'); // Node 18: no global crypto
  return webcrypto;
}

/** A new instance of the engine (its own memory), not the shared one loadEngine gives. */
export async function createEngine(source) {
  const bytes = await wasmBytesOrResponse(source);
  const crypto = await randomSource();
  let memory = null;
  let heap = null;
  const u8 = () => {
    if (heap === null || heap.buffer !== memory.buffer) heap = new Uint8Array(memory.buffer);
    return heap;
  };
  const imports = {
    env: {
      emscripten_notify_memory_growth: () => { heap = null; },
      getentropy: (ptr, len) => {
        crypto.getRandomValues(u8().subarray(ptr, ptr + len));
        return 0;
      },
    },
    wasi_snapshot_preview1: {
      // The engine reads no environment and never exits; these satisfy the C library's start-up.
      environ_sizes_get: (countPtr, sizePtr) => {
        const v = new DataView(memory.buffer);
        v.setUint32(countPtr, 0, true);
        v.setUint32(sizePtr, 0, true);
        return 0;
      },
      environ_get: () => 0,
      proc_exit: (code) => { throw new FolioError(`the Folio engine stopped (exit ${code})`, { status: 'INTERNAL' }); },
      // A build with assertions writes their messages to stderr: shown on the console.
      fd_write: (fd, iovs, count, writtenPtr) => {
        const v = new DataView(memory.buffer);
        let text = '';
        let n = 0;
        for (let i = 0; i < count; ++i) {
          const p = v.getUint32(iovs + 8 * i, true);
          const len = v.getUint32(iovs + 8 * i + 4, true);
          text += new TextDecoder().decode(u8().subarray(p, p + len));
          n += len;
        }
        if (text.trim()) console.error(`folio engine: ${text.trimEnd()}`);
        v.setUint32(writtenPtr, n, true);
        return 0;
      },
      fd_close: () => 52, // ENOSYS: the engine opens no files
      fd_seek: () => 52,
      fd_read: () => 52,
    },
  };
  const { instance } = typeof Response !== 'undefined' && bytes instanceof Response
    ? await streaming(bytes, imports)
    : await WebAssembly.instantiate(bytes, imports);
  memory = instance.exports.memory;
  instance.exports._initialize();
  return new Engine(instance.exports, u8, crypto);
}

/** Compiles while downloading; a server that does not send application/wasm gets the slower way. */
async function streaming(res, imports) {
  const copy = res.clone();
  try {
    return await WebAssembly.instantiateStreaming(res, imports);
  } catch (e) {
    if (!(e instanceof TypeError)) throw e;
    return WebAssembly.instantiate(await copy.arrayBuffer(), imports);
  }
}

/** The module's exports, with the copying in and out of its memory. */
class Engine {
  constructor(x, u8, crypto) {
    this.x = x;
    this.u8 = u8;
    this.crypto = crypto;
    this.scratch = 0; // putString's space in the module's memory, kept from call to call
    this.scratchSize = 0;
  }

  /**
   * Copies the UTF-8 of `s` into the scratch space (grown when too small) and returns its length in
   * bytes; the bytes are at `this.scratch` until the next putString. ASCII, most of what an editor
   * inserts, is copied unit by unit: TextEncoder and a malloc/free per call cost more than the
   * engine's whole insert (automerge-paper's 259,778 patches in Chromium 156: about 300 ms that way,
   * 16 ms this way; bench/browser.sh). Throws TypeError for a string that is not Unicode.
   */
  putString(s, what) {
    if (typeof s !== 'string') throw new TypeError(`${what} must be a string`);
    const n = s.length;
    if (!this.scratch || 3 * n > this.scratchSize) { // UTF-8 takes at most 3 bytes per UTF-16 unit
      if (this.scratch) this.x.fw_free(this.scratch);
      this.scratchSize = Math.max(3 * n, 1024);
      this.scratch = this.x.fw_alloc(this.scratchSize);
    }
    const h = this.u8();
    const p = this.scratch;
    let i = 0;
    for (let c; i < n && (c = s.charCodeAt(i)) < 0x80; ++i) h[p + i] = c;
    if (i === n) return n;
    if (LONE_SURROGATE.test(s)) throw new TypeError(`${what} is not valid Unicode: it holds a lone surrogate`);
    return encoder.encodeInto(s, h.subarray(p, p + this.scratchSize)).written;
  }

  /** Copies `bytes` into the module; call `free` on the answer's ptr. */
  put(bytes) {
    const ptr = this.x.fw_alloc(bytes.length);
    this.u8().set(bytes, ptr);
    return ptr;
  }

  /** Runs f(args as [ptr, len] pairs) with each Uint8Array of `inputs` copied in, then frees them. */
  with(inputs, f) {
    const ptrs = inputs.map((b) => this.put(b));
    try {
      return f(...inputs.flatMap((b, i) => [ptrs[i], b.length]));
    } finally {
      for (const p of ptrs) this.x.fw_free(p);
    }
  }

  part(i) {
    const p = this.x.fw_part_ptr(i) >>> 0;
    return this.u8().slice(p, p + (this.x.fw_part_len(i) >>> 0));
  }
  parts() {
    const n = this.x.fw_part_count();
    const out = new Array(n);
    for (let i = 0; i < n; ++i) out[i] = this.part(i);
    return out;
  }
  text(i) { return decoder.decode(this.part(i)); }
  nums() {
    const n = this.x.fw_num_count();
    const out = new Array(n);
    for (let i = 0; i < n; ++i) out[i] = this.x.fw_num(i) >>> 0;
    return out;
  }

  /** Throws the engine's error if `rc` is -1; else returns rc. */
  check(rc) {
    if (rc < 0) throw engineError(this.text(0));
    return rc;
  }

  /** 63 random bits, as [hi, lo], never 0 (folio::random_replica_id's rule). */
  randomReplica() {
    const w = new Uint32Array(2);
    do this.crypto.getRandomValues(w); while (w[0] === 0 && w[1] === 0);
    return [w[0] >>> 1, (w[1] >>> 1) | ((w[0] & 1) << 31)];
  }
}

/** A packed list: u32 little-endian length, then the bytes, for each string. */
function pack(strings) {
  const encoded = strings.map((s) => encoder.encode(s));
  const out = new Uint8Array(encoded.reduce((n, b) => n + 4 + b.length, 0));
  const view = new DataView(out.buffer);
  let at = 0;
  for (const b of encoded) {
    view.setUint32(at, b.length, true);
    out.set(b, at + 4);
    at += 4 + b.length;
  }
  return out;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** UTF-8 of a string that must be Unicode (no lone surrogate: TextEncoder would turn it into U+FFFD). */
function utf8(s, what) {
  if (typeof s !== 'string') throw new TypeError(`${what} must be a string`);
  if (LONE_SURROGATE.test(s)) throw new TypeError(`${what} is not valid Unicode: it holds a lone surrogate`);
  return encoder.encode(s);
}

function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * One replica of one record: its value, local edits, its encoded state, and the sync state machine
 * (request / onAnswer / onPush / onRefused / needsSync). Create with Replica.create or Replica.load;
 * call free() when done (the module's memory is not garbage-collected).
 */
export class Replica {
  /** A new empty replica of a record of `type` ('text' | 'array' | 'map' | 'xml'). */
  static create(engine, type, contentKey = 'content') {
    const t = TYPES.indexOf(type) + 1;
    if (t === 0) throw new TypeError(`type must be one of ${TYPES.join(', ')}`);
    const [hi, lo] = engine.randomReplica();
    const key = utf8(contentKey, 'contentKey');
    const h = engine.with([key], (p, n) => engine.x.fw_new(t, hi, lo, p, n));
    if (!h) throw engineError(engine.text(0));
    return new Replica(engine, h);
  }

  /**
   * A replica resuming a saved state under a replica id of its own, new on every call: the state's
   * operations are the same ops of the same (earlier) replica, sent again as they are, and the edits
   * made from now on can never take an id that another copy of the same state took (two tabs, a
   * reload of a state older than what was sent). A state saved before its first sync answer (which
   * never sent its ops: a client sends nothing before it knows the record's incarnation) holds only
   * edits of its own: they are made again as the new replica's (its value, by the engine's diff).
   * A FolioError (INVALID_ARGUMENT) if the bytes do not decode.
   */
  static resume(engine, bytes) {
    const b = toBytes(bytes, 'saved state');
    const { replicaEnd, incarnationLength } = clientStateHeader(b);
    if (incarnationLength === 0) {
      const own = Replica.load(engine, b);
      try {
        const fresh = Replica.create(engine, own.type, own.contentKey);
        const v = own.value;
        if (v.length > 0 || (own.type === 'map' && Object.keys(v).length > 0)) fresh.replace(v);
        return fresh;
      } finally {
        own.free();
      }
    }
    const [hi, lo] = engine.randomReplica();
    const id = varint((BigInt(hi >>> 0) << 32n) | BigInt(lo >>> 0));
    const renamed = new Uint8Array(4 + id.length + b.length - replicaEnd);
    renamed.set(b.subarray(0, 4), 0);
    renamed.set(id, 4);
    renamed.set(b.subarray(replicaEnd), 4 + id.length);
    return Replica.load(engine, renamed);
  }

  /** A replica restored from save() bytes; a FolioError (INVALID_ARGUMENT) if they do not decode. */
  static load(engine, bytes) {
    const h = engine.with([toBytes(bytes, 'saved state')], (p, n) => engine.x.fw_load(p, n));
    if (!h) throw new FolioError(engine.text(0), { status: 'INVALID_ARGUMENT' });
    return new Replica(engine, h);
  }

  constructor(engine, handle) {
    this.e = engine;
    this.h = handle;
    this.x = engine.x;
    const t = engine.check(this.x.fw_info(handle));
    this.type = TYPES[t - 1];
    this.contentKey = engine.text(0);
    this.replicaId = engine.text(2);
    this.tracking = false;
    this.cached = undefined;
  }

  free() {
    if (this.h) this.x.fw_delete(this.h);
    this.h = 0;
  }

  /** The record's incarnation this replica belongs to ('' before its first sync answer). */
  get incarnation() {
    this.e.check(this.x.fw_info(this.h));
    return this.e.text(1);
  }

  /**
   * The record version (crdt/get's `version`) of the last sync answer applied: the state it names is in
   * this replica. '' before the first answer, and after load (a saved state keeps none).
   */
  get recordVersion() {
    this.e.check(this.x.fw_info(this.h));
    return this.e.text(3);
  }

  /**
   * Text records: report the change of replaces and remote batches (costs a diff of the value). Xml
   * records: report the elements they changed (`xmlChanged`, ids; costs a little per op).
   */
  track(on) {
    this.tracking = !!on;
    this.x.fw_track(this.h, on ? 1 : 0);
  }

  // ---- the value ------------------------------------------------------------------------------

  /** text: string; array: array of objects; map: object; xml: canonical markup string. */
  get value() {
    if (this.cached === undefined) {
      this.e.check(this.x.fw_value(this.h));
      const parts = this.e.parts();
      switch (this.type) {
        case 'text':
        case 'xml':
          this.cached = { text: decoder.decode(parts[0]) };
          break;
        case 'array':
          this.cached = { items: parts.map((b) => decoder.decode(b)) };
          break;
        case 'map': {
          const entries = [];
          for (let i = 0; i < parts.length; i += 2) entries.push([decoder.decode(parts[i]), decoder.decode(parts[i + 1])]);
          this.cached = { entries };
          break;
        }
      }
    }
    const c = this.cached;
    if (c.text !== undefined) return c.text;
    // Fresh objects every time: the caller may change them.
    if (c.items) return c.items.map((s) => parseJson(s));
    const out = {};
    for (const [k, v] of c.entries) out[k] = parseJson(v);
    return out;
  }

  /** Text: code points; array: items. */
  get length() {
    return this.e.check(this.x.fw_length(this.h));
  }

  changed() {
    this.cached = undefined;
  }

  // ---- local edits (each returns the unit operations it made) ---------------------------------

  /** Makes the record equal to `value` through the engine's diff. Returns { ops, changes }. */
  replace(value) {
    let input;
    switch (this.type) {
      case 'text':
        input = utf8(value, 'a text record\'s value');
        break;
      case 'xml':
        input = utf8(value, 'an xml record\'s value (markup)');
        break;
      case 'array':
        if (!Array.isArray(value)) throw new TypeError('an array record\'s value must be an array of objects');
        input = pack(value.map((item, i) => {
          if (!isPlainObject(item)) throw new TypeError(`array item ${i} must be an object`);
          return canonicalJson(item);
        }));
        break;
      case 'map': {
        if (!isPlainObject(value)) throw new TypeError('a map record\'s value must be an object');
        const kv = [];
        for (const [k, v] of Object.entries(value)) {
          if (v === undefined) continue;
          utf8(k, 'a map key');
          kv.push(k, canonicalJson(v));
        }
        input = pack(kv);
        break;
      }
    }
    const ops = this.e.with([input], (p, n) => this.e.check(this.x.fw_replace(this.h, p, n)));
    const changes = this.type === 'text' && this.tracking ? this.hunks() : undefined;
    const xmlChanged = this.xmlChanges();
    if (ops > 0) this.changed();
    return xmlChanged ? { ops, changes, xmlChanged } : { ops, changes };
  }

  /** Text: inserts `text` before code point `pos`. Array: inserts the items (objects) before `pos`. */
  insert(pos, ...values) {
    checkIndex(pos, 'position');
    if (this.type === 'text') {
      if (values.length !== 1) throw new TypeError('text insert takes one string');
      const n = this.e.putString(values[0], 'inserted text');
      const ops = this.e.check(this.x.fw_insert(this.h, pos, this.e.scratch, n));
      if (ops > 0) this.changed();
      return ops;
    }
    let input;
    if (this.type === 'array') {
      input = pack(values.map((item, i) => {
        if (!isPlainObject(item)) throw new TypeError(`inserted item ${i} must be an object`);
        return canonicalJson(item);
      }));
    } else {
      throw new TypeError(`insert is for text and array records; this one is ${this.type}`);
    }
    const ops = this.e.with([input], (p, n) => this.e.check(this.x.fw_insert(this.h, pos, p, n)));
    if (ops > 0) this.changed();
    return ops;
  }

  /** Text and array: removes `count` code points or items from `pos`. Map: removes key `pos`. */
  delete(pos, count = 1) {
    let ops;
    if (this.type === 'map') {
      ops = this.e.with([utf8(pos, 'key')], (p, n) => this.e.check(this.x.fw_remove(this.h, p, n)));
    } else if (this.type === 'text' || this.type === 'array') {
      checkIndex(pos, 'position');
      checkIndex(count, 'count');
      ops = this.e.check(this.x.fw_erase(this.h, pos, count));
    } else {
      throw new TypeError('delete is for text, array and map records; edit an xml record with replace');
    }
    if (ops > 0) this.changed();
    return ops;
  }

  /** Map: sets `key` to a JSON value. */
  set(key, value) {
    if (this.type !== 'map') throw new TypeError(`set is for map records; this one is ${this.type}`);
    if (value === undefined) throw new TypeError('a map value must be a JSON value (not undefined)');
    const ops = this.e.with([utf8(key, 'key'), encoder.encode(canonicalJson(value))], (k, kn, v, vn) => this.e.check(this.x.fw_set(this.h, k, kn, v, vn)));
    if (ops > 0) this.changed();
    return ops;
  }

  // ---- encodings ------------------------------------------------------------------------------

  /** The client state (folio::sync_client::save): everything needed to resume, unacknowledged edits included. */
  save() {
    this.e.check(this.x.fw_save(this.h));
    return this.e.part(0);
  }

  /** The whole document (docs/FORMAT.md). */
  encode() {
    this.e.check(this.x.fw_encode(this.h));
    return this.e.part(0);
  }

  /** The version vector, encoded. */
  version() {
    this.e.check(this.x.fw_version(this.h));
    return this.e.part(0);
  }

  /** A batch of what a replica at `version` (encoded) lacks. */
  encodeSince(version) {
    return this.e.with([toBytes(version, 'version')], (p, n) => {
      this.e.check(this.x.fw_encode_since(this.h, p, n));
      return this.e.part(0);
    });
  }

  /** Integrates a batch from a peer. Returns { applied, changes }; a FolioError if it is malformed. */
  apply(batch) {
    const applied = this.e.with([toBytes(batch, 'batch')], (p, n) => {
      const rc = this.x.fw_apply(this.h, p, n);
      if (rc < 0) throw new FolioError(`batch refused: ${this.e.text(0)}`, { status: 'INVALID_ARGUMENT' });
      return rc;
    });
    const changes = this.type === 'text' && this.tracking ? this.hunks() : undefined;
    const xmlChanged = this.xmlChanges();
    if (applied > 0) this.changed();
    return xmlChanged ? { applied, changes, xmlChanged } : { applied, changes };
  }

  /** Unit operations waiting for what they depend on. */
  get pending() {
    return this.x.fw_pending(this.h);
  }

  // ---- the sync state machine (folio::sync_client) --------------------------------------------

  get needsSync() {
    return this.x.fw_needs_sync(this.h) === 1;
  }

  /** The next sync request: { version, update, incarnation } (bytes, bytes, string). */
  request() {
    this.e.check(this.x.fw_request(this.h));
    return { version: this.e.part(0), update: this.e.part(1), incarnation: this.e.text(2) };
  }

  /**
   * Applies a sync answer (its recordVersion: '' for a service that sends none). Returns { changed,
   * changes }; throws a FolioError if the answer is refused.
   */
  onAnswer(update, version, incarnation, recordVersion = '') {
    const rc = this.e.with([update, version, encoder.encode(incarnation), encoder.encode(recordVersion)], (...a) => this.x.fw_on_answer(this.h, ...a));
    if (rc < 0) throw new FolioError(`the server's sync answer was refused: ${this.e.text(0)}`, { status: 'INTERNAL' });
    const changes = this.type === 'text' && this.tracking ? this.hunks() : undefined;
    const xmlChanged = this.xmlChanges();
    if (rc & 1) this.changed();
    return xmlChanged ? { changed: (rc & 1) === 1, changes, xmlChanged } : { changed: (rc & 1) === 1, changes };
  }

  /** Applies a pushed change. Returns { status: 'applied'|'gap'|'invalid'|'recreated', changed, changes }. */
  onPush(update, version, incarnation) {
    const rc = this.e.with([update, version, encoder.encode(incarnation)], (...a) => this.x.fw_on_push(this.h, ...a));
    this.e.check(rc);
    const changes = this.type === 'text' && this.tracking ? this.hunks() : undefined;
    const xmlChanged = this.xmlChanges();
    const changed = (rc & 0x10) !== 0;
    if (changed) this.changed();
    return xmlChanged ? { status: PUSH_STATUS[rc & 0x0f], changed, changes, xmlChanged } : { status: PUSH_STATUS[rc & 0x0f], changed, changes };
  }

  /** The server refused the last push (FAILED_PRECONDITION): the next request pulls first. */
  onRefused() {
    this.x.fw_on_refused(this.h);
  }

  // ---- anchors and xml positions -----------------------------------------------------------------

  /**
   * Text and array: an anchor for `index` that follows its item through concurrent edits: "r.s", the
   * id of the item at `index`, or "end" at the length. RangeError past the end.
   */
  anchorAt(index) {
    checkIndex(index, 'index');
    this.e.check(this.x.fw_anchor_at(this.h, index));
    return this.e.text(0);
  }

  /**
   * Text and array: the index of `anchor` now (its item's; a removed item's: where it was), the length
   * for "end", -1 for an item this replica does not hold (yet). FolioError (INVALID_ARGUMENT) for a
   * malformed anchor.
   */
  indexOf(anchor) {
    const [found, index] = this.anchorCall(anchor, (p, n) => this.x.fw_index_of(this.h, p, n));
    return found ? index : -1;
  }

  /**
   * Xml: an anchor for `offset` in the node at `path` (live child indices from the fragment; [] is
   * the fragment): in an element, the child at `offset`; in a text node, the code point. "r.s" of that
   * item, or "end:r.s" (the node's end; "end:root" for the fragment's). RangeError for a bad path.
   */
  xmlAnchorAt(path, offset) {
    checkIndex(offset, 'offset');
    return this.withPath(path, (p, n) => {
      this.e.check(this.x.fw_xml_anchor_at(this.h, p, n, offset));
      return this.e.text(0);
    });
  }

  /** Xml: { path, offset } of `anchor` now, or null when its node is not visible or the id unknown. */
  xmlResolve(anchor) {
    const nums = this.anchorCall(anchor, (p, n) => this.x.fw_xml_resolve(this.h, p, n));
    return nums[0] ? { path: nums.slice(2), offset: nums[1] } : null;
  }

  /**
   * Xml: makes the live children [from, to) of the element at `path` ([] the fragment) equal to the
   * nodes of `markup` (a fragment), through the engine's diff of that range alone. Returns the unit
   * operations made. RangeError for a bad path or range, FolioError (INVALID_ARGUMENT) for bad markup.
   */
  xmlReplace(path, from, to, markup) {
    checkIndex(from, 'from');
    checkIndex(to, 'to');
    const m = utf8(markup, 'markup');
    const ops = this.withPath(path, (p, n) => this.e.with([m], (mp, mn) => {
      const rc = this.x.fw_xml_replace(this.h, p, n, from, to, mp, mn);
      if (rc < 0 && this.e.text(0).startsWith('[folio.value]')) throw new FolioError(this.e.text(0), { status: 'INVALID_ARGUMENT' });
      return this.e.check(rc);
    }));
    if (ops > 0) this.changed();
    return ops;
  }

  /** Xml: the ids ("r.s") of the live children of the element at `path`. */
  xmlChildIds(path) {
    return this.withPath(path, (p, n) => {
      this.e.check(this.x.fw_xml_child_ids(this.h, p, n));
      const joined = this.e.text(0); // each id followed by a newline
      return joined ? joined.slice(0, -1).split('\n') : [];
    });
  }

  /** Xml: the canonical markup of the node at `path` (not empty) and its subtree. */
  xmlMarkup(path) {
    return this.withPath(path, (p, n) => {
      this.e.check(this.x.fw_xml_markup(this.h, p, n));
      return this.e.text(0);
    });
  }

  /** Xml: the path of the live node made by `id` ("r.s"; "root": []), or null if removed or unknown. */
  xmlPathOf(id) {
    const nums = this.anchorCall(id, (p, n) => this.x.fw_xml_path_of(this.h, p, n));
    return nums[0] ? nums.slice(1) : null;
  }

  /** Runs an engine call on a string anchor or id; a malformed one is a FolioError (INVALID_ARGUMENT). */
  anchorCall(anchor, f) {
    if (typeof anchor !== 'string' || anchor.length > 64) throw new FolioError('malformed anchor: want a string "replica.seq" or an end anchor', { status: 'INVALID_ARGUMENT' });
    return this.e.with([encoder.encode(anchor)], (p, n) => {
      const rc = f(p, n);
      if (rc < 0) {
        const message = this.e.text(0);
        if (message.startsWith('[folio.value]')) throw new FolioError(message, { status: 'INVALID_ARGUMENT' });
        throw engineError(message);
      }
      return this.e.nums();
    });
  }

  /** Runs f(ptr, len) with `path` (an array of child indices) packed as u32 little-endian. */
  withPath(path, f) {
    if (!Array.isArray(path)) throw new TypeError('path must be an array of child indices');
    const b = new Uint8Array(4 * path.length);
    const v = new DataView(b.buffer);
    path.forEach((i, k) => {
      checkIndex(i, `path[${k}]`);
      v.setUint32(4 * k, i, true);
    });
    return this.e.with([b], f);
  }

  /** Xml with tracking on: the ids of the elements the last call changed ("root": the fragment). */
  xmlChanges() {
    if (this.type !== 'xml' || !this.tracking) return undefined;
    return this.e.parts().map((b) => decoder.decode(b));
  }

  /** The tracked change of the last call, as [{ from, to, insert }] in code points of the value before. */
  hunks() {
    const nums = this.e.nums();
    const out = [];
    for (let i = 0, k = 0; i < nums.length; i += 3, ++k) out.push({ from: nums[i], to: nums[i] + nums[i + 1], insert: this.e.text(k) });
    return out;
  }
}

/**
 * Where a client state's replica id ends and how long its incarnation is: "FoC" 2, varint replica,
 * varint incarnation length (include/folio/sync.hpp, sync_client::save; docs/FORMAT.md).
 */
function clientStateHeader(b) {
  const bad = (why) => new FolioError(`saved state: ${why}`, { status: 'INVALID_ARGUMENT' });
  if (b.length < 4 || b[0] !== 0x46 || b[1] !== 0x6f || b[2] !== 0x43) throw bad('not a client state');
  if (b[3] !== 2) throw bad(`client state of format ${b[3]}: start a new client`);
  let at = 4;
  const skip = (what) => {
    let v = 0;
    for (let shift = 0; ; shift += 7) {
      if (at >= b.length || shift > 63) throw bad(`truncated ${what}`);
      const byte = b[at++];
      if (shift < 28) v += (byte & 0x7f) << shift;
      else v += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return v;
    }
  };
  skip('client replica');
  const replicaEnd = at;
  return { replicaEnd, incarnationLength: skip('incarnation length') };
}

function varint(v) {
  const out = [];
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
  return Uint8Array.from(out);
}

function checkIndex(n, what) {
  if (!Number.isInteger(n) || n < 0 || n > 0xffffffff) throw new RangeError(`${what} must be a non-negative integer`);
}

function toBytes(b, what) {
  if (b instanceof Uint8Array) return b;
  if (b instanceof ArrayBuffer) return new Uint8Array(b);
  if (ArrayBuffer.isView(b)) return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  throw new TypeError(`${what} must be a Uint8Array`);
}
