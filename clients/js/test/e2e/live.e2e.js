// The JavaScript client against the real stack (nginx + Nchan + folio-fcgi), started by
// tests/e2e/js_client_e2e.py, which passes FOLIO_URL and tenant a's API key and token. Until the
// service takes client tokens, the client authenticates with those as `headers`, and listens through
// its fetch-based EventSource (Node has none), which can send them.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { connect, FolioError } from '../../folio.js';

const baseUrl = process.env.FOLIO_URL;
const headers = { 'x-folio-api-key': process.env.FOLIO_KEY, 'x-folio-auth-token': process.env.FOLIO_TOKEN };
const org = 'org js';
const doc = 'doc/ü+1';
let editors = 0;

async function rest(path, data) {
  const res = await fetch(baseUrl + path, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify({ data }) });
  return { status: res.status, body: await res.json() };
}

/** A new record of `type` holding `data`; returns its ids. */
async function add(type, data) {
  const ids = { organizationId: org, documentId: doc, editorId: `${type}-${++editors}` };
  const r = await rest('/v2/crdt/add', { ...ids, type, data });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return ids;
}

async function stored(ids) {
  const r = await rest('/v2/crdt/get', ids);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.result.data[0].data;
}

/** Waits (polling every 20 ms, up to 30 s) until `cond()` holds. */
async function until(cond, what) {
  for (let i = 0; i < 1500; ++i) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting until ${what}`);
}

/** A fetch that fails while `net.down` (the network of one client lost). */
function flakyNetwork() {
  const net = { down: false };
  net.fetch = (url, init) => (net.down ? Promise.reject(new TypeError('fetch failed')) : fetch(url, init));
  return net;
}

const open = (ids, more = {}) => connect({ baseUrl, headers, ...ids, ...more });

test('two clients edit the same text concurrently, one offline for a while, and converge with the service', async () => {
  const ids = await add('text', 'Hello');
  const net = flakyNetwork();
  const a = await open(ids);
  const b = await open(ids, { fetch: net.fetch });
  try {
    assert.equal(b.value, 'Hello');
    a.insert(5, ', world');
    await until(() => b.value === 'Hello, world', 'b sees a\'s edit');
    net.down = true;
    b.insert(0, '😀 '); // offline: b's sync fails; it goes on locally
    await until(() => !b.online, 'b notices it is offline');
    a.insert(12, '!');
    b.delete(2, 5); // "Hello"
    b.insert(2, 'Bye');
    assert.equal(b.value, '😀 Bye, world');
    net.down = false;
    await b.sync();
    const expected = '😀 Bye, world!';
    await until(() => a.value === expected && b.value === expected, 'both converge');
    assert.equal(await stored(ids), expected);
  } finally {
    a.close();
    b.close();
  }
});

test('a REST update appears in a connected client, with its change as code points', async () => {
  const ids = await add('text', 'one 😀 three');
  const a = await open(ids);
  try {
    const changes = [];
    a.on('change', (e) => changes.push(e));
    const r = await rest('/v2/crdt/update', { ...ids, data: 'one 😀, two three' });
    assert.equal(r.status, 200);
    await until(() => a.value === 'one 😀, two three', 'the update arrives');
    // Where the service's diff made the insert (code point 5: the emoji is one).
    assert.deepEqual(changes.at(-1), { remote: true, changes: [{ from: 5, to: 5, insert: ', two' }] });
  } finally {
    a.close();
  }
});

test('all four record types round-trip through the client', async () => {
  const cases = [
    ['text', 'plain', (r) => r.replace('plain text'), 'plain text'],
    ['map', { a: 1 }, (r) => r.set('b', { c: [1, 2.5, 1e-7, 'ü'] }).delete('a'), { b: { c: [1, 2.5, 1e-7, 'ü'] } }],
    ['array', [{ x: 1 }], (r) => r.insert(1, { y: 'two' }, { z: null }).delete(0), [{ y: 'two' }, { z: null }]],
    ['xml', '<p>Hi</p>', (r) => r.replace('<p class="x">Hi <b>there</b></p><p/>'), '<p class="x">Hi <b>there</b></p><p/>'],
  ];
  for (const [type, initial, edit, expected] of cases) {
    const ids = await add(type, initial);
    const r = await open(ids);
    try {
      assert.equal(r.type, type);
      assert.deepEqual(r.value, initial);
      edit(r);
      await r.sync();
      assert.deepEqual(await stored(ids), expected, type);
      const again = await open(ids);
      assert.deepEqual(again.value, expected, `${type}: a new client joins with the value`);
      again.close();
    } finally {
      r.close();
    }
  }
});

test('a saved replica keeps its offline edits across a restart', async () => {
  const ids = await add('array', [{ n: 1 }]);
  let state = null;
  const net = flakyNetwork();
  const first = await open(ids, { fetch: net.fetch, persist: (bytes) => { state = bytes; } });
  net.down = true;
  first.insert(1, { n: 2 });
  await until(() => state !== null && !first.online, 'the offline edit is persisted');
  first.close(); // "the page is closed"
  const second = await open(ids, { saved: state });
  try {
    await second.sync();
    assert.deepEqual(await stored(ids), [{ n: 1 }, { n: 2 }]);
  } finally {
    second.close();
  }
});

test('a record deleted and added again: the client follows the new one; refusals are FolioErrors', async () => {
  const ids = await add('text', 'old');
  const a = await open(ids);
  try {
    let recreated = 0;
    a.on('recreated', () => ++recreated);
    assert.equal((await rest('/v2/crdt/delete', ids)).status, 200);
    assert.equal((await rest('/v2/crdt/add', { ...ids, type: 'text', data: 'new' })).status, 200);
    a.insert(0, 'lost ');
    await until(() => a.value === 'new', 'the client joins the new record');
    assert.equal(recreated, 1);
    assert.equal(await stored(ids), 'new');
  } finally {
    a.close();
  }
  await assert.rejects(open({ ...ids, editorId: 'missing' }), (e) => {
    assert.ok(e instanceof FolioError);
    assert.deepEqual([e.status, e.httpStatus, e.message], ['NOT_FOUND', 404, 'No CRDT data found for this editor ID.']);
    return true;
  });
  await assert.rejects(open(ids, { headers: { 'x-folio-api-key': 'fk_0', 'x-folio-auth-token': 'ft_0' } }), (e) => {
    assert.deepEqual([e.status, e.httpStatus, e.message], ['UNAUTHENTICATED', 401, 'Missing or invalid API key or auth token.']);
    return true;
  });
});
