// The engine wrapper (src/engine.js) over the WebAssembly build: the four record types, their edits
// and replace-by-value, the encodings, convergence in every delivery order, and untrusted bytes.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { createEngine, FolioError, loadEngine, Replica } from '../folio.js';

const engine = await loadEngine();
const make = (type, key) => Replica.create(engine, type, key);

/** Every order of `items`. */
function* permutations(items) {
  if (items.length <= 1) return yield items;
  for (let i = 0; i < items.length; ++i)
    for (const rest of permutations([...items.slice(0, i), ...items.slice(i + 1)])) yield [items[i], ...rest];
}

test('text: code-point edits, replace through the diff, tracked changes', () => {
  const t = make('text');
  t.track(true);
  assert.equal(t.type, 'text');
  t.insert(0, 'héllo 😀 world');
  assert.equal(t.value, 'héllo 😀 world');
  assert.equal(t.length, 13); // the emoji is one code point (two UTF-16 units)
  t.insert(8, 'big '); // after the emoji: code point 8
  assert.equal(t.value, 'héllo 😀 big world');
  t.delete(6, 1); // the emoji
  assert.equal(t.value, 'héllo  big world');
  const r = t.replace('hello big world!');
  assert.deepEqual(r.changes, [
    { from: 1, to: 2, insert: 'e' },
    { from: 6, to: 7, insert: '' }, // either space is a minimal removal; the diff takes the second
    { from: 16, to: 16, insert: '!' },
  ]);
  assert.equal(t.value, 'hello big world!');
  assert.equal(t.replace('hello big world!').ops, 0); // equal: no operation
  assert.throws(() => t.insert(99, 'x'), RangeError);
  assert.throws(() => t.delete(10, 99), RangeError);
  assert.throws(() => t.insert(0, 'bad \ud800 surrogate'), TypeError);
  assert.throws(() => t.set('k', 1), TypeError);
  assert.equal(t.value, 'hello big world!'); // nothing changed by the refusals
});

test('text insert: ASCII, non-ASCII and texts longer than the scratch space the engine reuses', async () => {
  const t = Replica.create(await createEngine(), 'text'); // a fresh engine: its scratch space starts empty
  t.insert(0, 'ab');
  const long = 'x'.repeat(5000); // beyond the first scratch space (1,024 bytes): it grows
  t.insert(1, long);
  assert.equal(t.value, `a${long}b`);
  const wide = 'é😀'.repeat(2000); // 12,000 bytes of UTF-8 from 6,000 units: the bound of 3 bytes per unit
  t.insert(0, wide);
  t.insert(0, 'ascii first, then ü'); // ASCII copied unit by unit until the first other unit
  assert.equal(t.value, `ascii first, then ü${wide}a${long}b`);
  assert.equal(t.length, 19 + 4000 + 5002);
  t.insert(0, ''); // nothing
  assert.throws(() => t.insert(0, 'ascii \udc00'), TypeError); // a lone surrogate after ASCII
  assert.throws(() => t.insert(0, 7), TypeError);
  assert.equal(t.value, `ascii first, then ü${wide}a${long}b`);
  t.free();
});

test('array: items are canonical JSON objects; insert, delete, replace by element', () => {
  const a = make('array');
  a.insert(0, { b: 1, a: [1, 2] }, { x: 'y' });
  assert.deepEqual(a.value, [{ a: [1, 2], b: 1 }, { x: 'y' }]);
  a.delete(0);
  assert.deepEqual(a.value, [{ x: 'y' }]);
  // Replace keeps the equal item: one insert before it, nothing else.
  const before = a.version();
  assert.equal(a.replace([{ n: 0 }, { x: 'y' }]).ops, 1);
  const peer = make('array');
  peer.apply(a.encodeSince(new Uint8Array([0])));
  assert.deepEqual(peer.value, [{ n: 0 }, { x: 'y' }]);
  assert.ok(a.encodeSince(before).length > 0);
  assert.throws(() => a.insert(0, 'not an object'), TypeError);
  assert.throws(() => a.replace([[1]]), TypeError);
  assert.throws(() => a.insert(5, { a: 1 }), RangeError);
  assert.equal(a.length, 2);
});

test('map: set, delete, replace by key; values are any JSON', () => {
  const m = make('map');
  m.set('title', 'Notes');
  m.set('tags', ['a', 'b']);
  m.set('meta', { z: 1, a: null });
  assert.deepEqual(m.value, { meta: { a: null, z: 1 }, tags: ['a', 'b'], title: 'Notes' });
  m.delete('tags');
  assert.deepEqual(Object.keys(m.value), ['meta', 'title']);
  // Only the changed key makes an operation.
  assert.equal(m.replace({ meta: { a: null, z: 1 }, title: 'Notes 2' }).ops, 1);
  assert.equal(m.replace({}).ops, 2);
  assert.deepEqual(m.value, {});
  assert.throws(() => m.set('k', undefined), TypeError);
  assert.throws(() => m.set('k', NaN), TypeError);
  assert.throws(() => m.insert(0, 'x'), TypeError);
});

test('xml: replace with markup, canonical output, parse errors refuse and change nothing', () => {
  const x = make('xml', 'default');
  assert.equal(x.contentKey, 'default');
  x.replace('<p b="2" a="1">Hello <b>world</b></p><p/>');
  assert.equal(x.value, '<p a="1" b="2">Hello <b>world</b></p><p/>');
  assert.ok(x.replace('<p a="1" b="2">Hello <b>there</b></p><p/>').ops > 0);
  assert.throws(() => x.replace('<p>unclosed'), /start-end tags mismatch|not well-formed|end/);
  assert.throws(() => x.replace('<!DOCTYPE x><x/>'), /DOCTYPE/);
  assert.equal(x.value, '<p a="1" b="2">Hello <b>there</b></p><p/>');
});

test('save and load: the client state round-trips, for every type', () => {
  const cases = {
    text: (r) => r.insert(0, 'abc 😀'),
    array: (r) => r.insert(0, { a: 1 }, { b: 2 }),
    map: (r) => r.set('k', { v: [1, 2.5, 'x'] }),
    xml: (r) => r.replace('<a x="1">t</a>'),
  };
  for (const [type, edit] of Object.entries(cases)) {
    const r = make(type, 'root');
    edit(r);
    const saved = r.save();
    const back = Replica.load(engine, saved);
    assert.equal(back.type, type);
    assert.equal(back.contentKey, 'root');
    assert.equal(back.replicaId, r.replicaId);
    assert.deepEqual(back.value, r.value);
    assert.deepEqual(back.save(), saved);
    assert.deepEqual(back.encode(), r.encode());
    assert.equal(back.needsSync, true); // a restored client syncs before trusting its copy
    assert.equal(back.incarnation, '');
    back.free();
  }
});

/** Edits three changes on two replicas of `type`, returns their batches and the converged value. */
function threeChanges(type, edits) {
  const a = make(type);
  const b = make(type);
  const empty = a.version();
  edits.a1(a);
  const b1 = a.encodeSince(empty);
  const v1 = a.version();
  edits.a2(a);
  const b2 = a.encodeSince(v1);
  edits.b1(b);
  const b3 = b.encodeSince(empty);
  a.apply(b3);
  b.apply(b1);
  b.apply(b2);
  assert.deepEqual(a.value, b.value, `${type}: the two editors converge`);
  return { batches: [b1, b2, b3], value: a.value };
}

test('two replicas converge in every delivery order of their changes, for every type', () => {
  const scenarios = {
    text: { a1: (r) => r.insert(0, 'Hello world'), a2: (r) => (r.delete(0, 5), r.insert(0, 'Howdy')), b1: (r) => r.insert(0, '😀 ') },
    array: { a1: (r) => r.insert(0, { n: 1 }, { n: 2 }), a2: (r) => r.delete(0, 1), b1: (r) => r.insert(0, { n: 3 }) },
    map: { a1: (r) => r.set('x', 1), a2: (r) => (r.set('x', 2), r.delete('x'), r.set('y', true)), b1: (r) => r.set('x', 'b') },
    xml: { a1: (r) => r.replace('<p>one</p>'), a2: (r) => r.replace('<p k="v">one two</p>'), b1: (r) => r.replace('<h1>title</h1>') },
  };
  for (const [type, edits] of Object.entries(scenarios)) {
    const { batches, value } = threeChanges(type, edits);
    for (const order of permutations(batches)) {
      const c = make(type);
      for (const batch of order) c.apply(batch);
      assert.equal(c.pending, 0, `${type}: nothing left pending`);
      assert.deepEqual(c.value, value, `${type}: every order gives the same value`);
      // Applying everything again changes nothing (idempotent).
      for (const batch of order) assert.equal(c.apply(batch).applied, 0);
      c.free();
    }
  }
});

test('tracked text changes are where the operations were made, even in runs of equal characters', () => {
  const a = make('text');
  a.insert(0, 'one three aaa');
  const b = make('text');
  b.track(true);
  b.apply(a.encodeSince(b.version()));
  const v = a.version();
  a.insert(4, 'two '); // before "three": the characters alone would say "wo t" after its "t"
  a.insert(14, 'a'); // at the start of "aaa"
  a.delete(17, 1); // the last "a"
  assert.equal(a.value, 'one two three aaa');
  assert.deepEqual(b.apply(a.encodeSince(v)).changes, [
    { from: 4, to: 4, insert: 'two ' },
    { from: 10, to: 10, insert: 'a' },
    { from: 12, to: 13, insert: '' },
  ]);
  assert.equal(b.value, 'one two three aaa');
  // A local replace reports where its own diff made the change.
  assert.deepEqual(b.replace('one two three aa!').changes, [{ from: 16, to: 17, insert: '!' }]);
});

test('out-of-order batches wait as pending until what they need arrives', () => {
  const a = make('text');
  const empty = a.version();
  a.insert(0, 'abc');
  const first = a.encodeSince(empty);
  const v = a.version();
  a.insert(3, 'def');
  const second = a.encodeSince(v);
  const c = make('text');
  c.track(true);
  assert.deepEqual(c.apply(second), { applied: 0, changes: [] });
  assert.equal(c.pending, 3);
  assert.equal(c.value, '');
  const r = c.apply(first);
  assert.equal(r.applied, 6);
  assert.deepEqual(r.changes, [{ from: 0, to: 0, insert: 'abcdef' }]);
  assert.equal(c.pending, 0);
});

test('malformed bytes are refused with an error, never a crash, and change nothing', () => {
  const a = make('text');
  a.insert(0, 'some text to encode');
  const batch = a.encodeSince(new Uint8Array([0]));
  const saved = a.save();
  const b = make('text');
  b.insert(0, 'mine');
  const before = b.save();
  for (let n = 0; n < batch.length; ++n) {
    const cut = batch.slice(0, n);
    assert.throws(() => b.apply(cut), FolioError, `batch cut at ${n}`);
    assert.deepEqual(b.save(), before);
  }
  for (let n = 0; n < saved.length; ++n) assert.throws(() => Replica.load(engine, saved.slice(0, n)), FolioError);
  // Every single-byte change of a saved state either loads or is refused.
  for (let i = 0; i < saved.length; ++i) {
    for (const flip of [0x01, 0x80, 0xff]) {
      const bad = saved.slice();
      bad[i] ^= flip;
      try {
        Replica.load(engine, bad).free();
      } catch (e) {
        assert.ok(e instanceof FolioError, `byte ${i}: ${e}`);
      }
    }
  }
  const map = make('map');
  assert.throws(() => map.apply(batch), /batch holds text operations; this record is map/);
  assert.throws(() => Replica.load(engine, new Uint8Array([1, 2, 3])), /not a Folio encoding/);
  assert.throws(() => a.encodeSince(new Uint8Array([5])), TypeError);
});

test('a length of 2^32 + n in untrusted bytes is refused where size_t has 32 bits', () => {
  // An array item's length is a varint; cut to a 32-bit size_t before the bounds check, 2^32 + 7
  // read as 7 and the state below loaded with a value the bytes do not hold.
  const a = make('array');
  a.insert(0, { a: 1 }); // the item {"a":1}: 7 bytes, the state's last
  const saved = a.save();
  assert.deepEqual([...saved.slice(-8)], [7, ...new TextEncoder().encode('{"a":1}')]);
  const forged = new Uint8Array([...saved.slice(0, -8), 0x87, 0x80, 0x80, 0x80, 0x10, ...saved.slice(-7)]);
  assert.throws(() => Replica.load(engine, forged), /truncated input .*array value/);
});

test('the engine loads from a Response, also one without the application/wasm type', async () => {
  const { readFile } = await import('node:fs/promises');
  const bytes = await readFile(new URL('../dist/folio-engine.wasm', import.meta.url));
  for (const type of ['application/wasm', 'application/octet-stream']) {
    const e = await createEngine(new Response(bytes, { headers: { 'Content-Type': type } }));
    const r = Replica.create(e, 'text');
    r.insert(0, 'loaded');
    assert.equal(r.value, 'loaded');
    r.free();
  }
});

test('resume: a saved state under a new replica id each time; copies resumed from one state never share an op id', () => {
  const r = Replica.create(engine, 'text');
  r.replace('base');
  // A synced state: the replica of a client that had an answer (onAnswer names the incarnation).
  const server = Replica.create(engine, 'text');
  const q = r.request(); // never synced: a pull from empty
  assert.equal(q.update.length, 0);
  assert.equal(r.onAnswer(server.encodeSince(server.version()), server.version(), '7').changed, false);
  const state = r.save();
  const a = Replica.resume(engine, state);
  const b = Replica.resume(engine, state);
  try {
    assert.notEqual(a.replicaId, r.replicaId);
    assert.notEqual(a.replicaId, b.replicaId);
    assert.equal(a.value, 'base');
    assert.equal(a.incarnation, '7');
    // Both push the old replica's ops as they are, and their own edits under their own ids.
    a.insert(4, ' A');
    b.insert(4, ' B');
    server.apply(a.request().update);
    server.apply(b.request().update); // the same ops again (skipped) and b's: nothing is refused
    a.apply(b.encodeSince(a.version()));
    b.apply(a.encodeSince(b.version()));
    assert.equal(server.value, a.value);
    assert.equal(a.value, b.value);
    assert.match(a.value, /^base( A B| B A)$/);
    // Loading the same state twice (what connect did before) makes two ops with one id: refused.
    const c = Replica.load(engine, state);
    const d = Replica.load(engine, state);
    c.insert(0, 'c');
    d.insert(0, 'd');
    assert.throws(() => c.apply(d.encodeSince(new Uint8Array([0]))), FolioError);
    c.free();
    d.free();
  } finally {
    for (const x of [r, server, a, b]) x.free();
  }
  // A state saved before any answer (its ops never sent): its value made again by the new replica.
  for (const [type, value] of [['text', 'never synced'], ['array', [{ a: 1 }]], ['map', { k: [1] }], ['xml', '<p>x</p>'], ['text', '']]) {
    const n = Replica.create(engine, type);
    if (type !== 'text' || value) n.replace(value);
    const m = Replica.resume(engine, n.save());
    assert.notEqual(m.replicaId, n.replicaId);
    assert.deepEqual(m.value, value, type);
    assert.equal(m.incarnation, '');
    n.free();
    m.free();
  }
  assert.throws(() => Replica.resume(engine, new Uint8Array([0x46, 0x6f, 0x43, 2, 0x80])), (e) => e instanceof FolioError && e.status === 'INVALID_ARGUMENT');
  assert.throws(() => Replica.resume(engine, new Uint8Array([1, 2, 3])), (e) => e instanceof FolioError && e.status === 'INVALID_ARGUMENT');
});

test('recordVersion: the last applied answer\'s; a refused answer, a pushed change and load leave none of theirs', () => {
  const server = Replica.create(engine, 'map');
  server.set('a', 1);
  const r = Replica.create(engine, 'map');
  try {
    assert.equal(r.recordVersion, '');
    r.onAnswer(server.encodeSince(r.version()), server.version(), '7', '2-ab');
    assert.equal(r.recordVersion, '2-ab');
    assert.deepEqual(r.value, { a: 1 });
    // An answer of another incarnation is refused and changes nothing, its record version included.
    assert.throws(() => r.onAnswer(new Uint8Array(0), server.version(), '8', '9-cd'), FolioError);
    assert.equal(r.recordVersion, '2-ab');
    // A pushed change moves the value on, not the version the last answer named.
    const before = server.version();
    server.set('b', 2);
    assert.equal(r.onPush(server.encodeSince(before), server.version(), '7').status, 'applied');
    assert.equal(r.recordVersion, '2-ab');
    // An answer without one (a service from before record versions): ''.
    r.onAnswer(server.encodeSince(server.version()), server.version(), '7');
    assert.equal(r.recordVersion, '');
    r.onAnswer(server.encodeSince(server.version()), server.version(), '7', '3-ab');
    const loaded = Replica.load(engine, r.save());
    assert.equal(loaded.recordVersion, ''); // not saved: the next answer names it
    loaded.free();
  } finally {
    r.free();
    server.free();
  }
});

test('anchors (text, array): follow their item through concurrent edits; removed items answer where they were', () => {
  const a = make('text');
  a.insert(0, 'abcdefgh');
  const b = make('text');
  b.apply(a.encodeSince(b.version()));
  const e = a.anchorAt(4);
  assert.match(e, /^\d+\.\d+$/);
  assert.equal(a.anchorAt(8), 'end');
  assert.throws(() => a.anchorAt(9), RangeError);
  assert.equal(b.indexOf(e), 4);
  const v = b.version();
  b.insert(1, 'XYZ');
  b.delete(0, 1);
  a.insert(6, 'QQ');
  a.apply(b.encodeSince(v));
  b.apply(a.encodeSince(b.version()));
  for (const r of [a, b]) {
    assert.equal(r.indexOf(e), 6);
    assert.equal([...r.value][r.indexOf(e)], 'e');
    assert.equal(r.indexOf('end'), r.length);
  }
  a.delete(5, 3); // removes "d", "e", "f" at 5..7: "e" was at 6
  assert.equal(a.indexOf(e), 5);
  assert.equal(a.indexOf('12345.0'), -1);
  for (const bad of ['', 'x', '1.', '.1', '0.1', '01.2', '1.2.3', '1.-2', '1.99999999999', 'end:1.2', 7, null])
    assert.throws(() => a.indexOf(bad), (err) => err instanceof FolioError && err.status === 'INVALID_ARGUMENT', String(bad));
  const arr = make('array');
  arr.insert(0, { n: 1 }, { n: 2 }, { n: 3 });
  const two = arr.anchorAt(1);
  arr.insert(0, { n: 0 });
  assert.equal(arr.indexOf(two), 2);
  a.free(), b.free(), arr.free();
});

test('xml: paths, child ids, markup, anchors and range replaces', () => {
  const a = make('xml');
  a.replace('<p>one</p><p>two words</p><ul><li>x</li></ul>');
  const b = make('xml');
  b.apply(a.encodeSince(b.version()));
  const ids = a.xmlChildIds([]);
  assert.equal(ids.length, 3);
  assert.deepEqual(a.xmlPathOf(ids[2]), [2]);
  assert.deepEqual(a.xmlPathOf('root'), []);
  assert.equal(a.xmlMarkup([2, 0]), '<li>x</li>');
  assert.equal(a.xmlMarkup([1, 0]), 'two words');
  const w = a.xmlAnchorAt([1, 0], 4);
  assert.equal(a.xmlAnchorAt([], 3), 'end:root');
  assert.equal(a.xmlAnchorAt([1, 0], 9), `end:${a.xmlChildIds([1])[0]}`);
  assert.deepEqual(a.xmlResolve(w), { path: [1, 0], offset: 4 });
  // Concurrent: A types before the anchor, B removes the first paragraph.
  const v = a.version();
  assert.equal(a.xmlReplace([1], 0, 1, 'two new words'), 4);
  b.xmlReplace([], 0, 1, '');
  a.apply(b.encodeSince(v));
  b.apply(a.encodeSince(b.version()));
  for (const r of [a, b]) {
    assert.equal(r.value, '<p>two new words</p><ul><li>x</li></ul>');
    assert.deepEqual(r.xmlResolve(w), { path: [0, 0], offset: 8 });
    assert.equal(r.xmlResolve(`end:${ids[2]}`).offset, 1);
  }
  assert.equal(a.xmlPathOf(ids[0]), null); // removed
  assert.deepEqual(a.xmlResolve(ids[0]), { path: [], offset: 0 }); // where it was
  assert.equal(a.xmlResolve('424242.1'), null);
  // Untrusted paths, ranges, markup and anchors.
  assert.throws(() => a.xmlChildIds([5]), RangeError);
  assert.throws(() => a.xmlChildIds([0, 0, 0]), RangeError);
  assert.throws(() => a.xmlChildIds([-1]), RangeError);
  assert.throws(() => a.xmlChildIds([1.5]), RangeError);
  assert.throws(() => a.xmlChildIds('0'), TypeError);
  assert.throws(() => a.xmlMarkup([]), RangeError);
  assert.throws(() => a.xmlAnchorAt([0, 0], 99), RangeError);
  assert.throws(() => a.xmlReplace([], 1, 0, ''), RangeError);
  assert.throws(() => a.xmlReplace([], 0, 9, ''), RangeError);
  assert.throws(() => a.xmlReplace([0], 0, 1, '<b>'), (err) => err instanceof FolioError && err.status === 'INVALID_ARGUMENT');
  assert.throws(() => a.xmlResolve('end:'), (err) => err instanceof FolioError && err.status === 'INVALID_ARGUMENT');
  assert.throws(() => a.xmlPathOf('1'), (err) => err instanceof FolioError && err.status === 'INVALID_ARGUMENT');
  assert.equal(a.value, b.value);
  a.free(), b.free();
});

test('xml: xmlChanged names the elements a remote change touched, with tracking on', () => {
  const a = make('xml');
  a.replace('<doc><p>one</p><p k="1">two</p><sec><p>in</p></sec></doc>');
  const b = make('xml');
  b.apply(a.encodeSince(b.version()));
  b.track(true);
  const [p1, p2] = a.xmlChildIds([0]);
  let v = a.version();
  a.xmlReplace([0, 0], 0, 1, 'one!');
  assert.deepEqual(b.apply(a.encodeSince(v)).xmlChanged, [p1]);
  v = a.version();
  a.xmlReplace([0], 1, 2, '<p k="2">two</p>');
  assert.deepEqual(b.apply(a.encodeSince(v)).xmlChanged, [p2]);
  v = a.version();
  a.xmlReplace([], 0, 0, '<h1/>');
  assert.deepEqual(b.apply(a.encodeSince(v)).xmlChanged, ['root']);
  v = a.version();
  a.xmlReplace([1, 2, 0], 0, 1, 'in!');
  a.xmlReplace([1], 2, 3, '');
  const doc = a.xmlChildIds([])[1];
  assert.deepEqual(b.apply(a.encodeSince(v)).xmlChanged, [doc]); // the <p> in the removed <sec> is not visible
  assert.deepEqual(b.replace('<h1/>').xmlChanged, ['root']);
  b.track(false);
  assert.equal(b.apply(a.encodeSince(v)).xmlChanged, undefined);
  a.free(), b.free();
});

test('xml: onAnswer and onPush answer xmlChanged too, with tracking on', () => {
  const a = make('xml');
  a.replace('<p>one</p><p>two</p>');
  const b = make('xml');
  b.track(true);
  const answer = b.onAnswer(a.encodeSince(b.version()), a.version(), 'i1');
  assert.deepEqual(answer.xmlChanged, ['root', ...a.xmlChildIds([])]); // the list and each new <p>
  const v = a.version();
  a.xmlReplace([1], 0, 1, 'two!');
  const push = b.onPush(a.encodeSince(v), a.version(), 'i1');
  assert.equal(push.status, 'applied');
  assert.deepEqual(push.xmlChanged, [a.xmlChildIds([])[1]]);
  assert.equal(b.value, '<p>one</p><p>two!</p>');
  a.free(), b.free();
});
