// The JavaScript client against the real stack (nginx + Nchan + folio-fcgi), started by
// tests/e2e/js_client_e2e.py, which passes FOLIO_URL and tenant a's API key and token. This file plays
// the application's backend with those (adds records, mints client tokens through POST /v2/auth/token)
// and connects clients as browsers do, with a client token; one case is a server-side client with the
// API key headers, which the client documents (README: the `headers` option). Node has no EventSource:
// the client listens through its fetch-based one, the token in the query as a browser's would send it.
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

/** A client token for the document of `ids` (every editor of it), as a backend mints it. */
async function mint(ids, more = {}) {
  const r = await rest('/v2/auth/token', { organizationId: ids.organizationId, documentId: ids.documentId, userId: 'js-user', access: 'write', ...more });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.result.data;
}

/** A client of the record `ids` with a client token of its document (minted unless given). */
const open = async (ids, more = {}) => connect({ baseUrl, token: (await mint(ids)).token, ...ids, ...more });

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
  await assert.rejects(open(ids, { token: 'fct1.nonsense' }), (e) => {
    assert.deepEqual([e.status, e.httpStatus, e.message], ['UNAUTHENTICATED', 401, 'Malformed client token: expected fct1.<tenant>.<key id>.<claims>.<signature>.']);
    return true;
  });
  const otherDocument = (await mint({ ...ids, documentId: 'another doc' })).token;
  await assert.rejects(open(ids, { token: otherDocument }), (e) => {
    assert.deepEqual([e.status, e.httpStatus, e.message], ['PERMISSION_DENIED', 403, 'The client token does not cover this documentId.']);
    return true;
  });
});

test('a client token\'s user is lastUpdatedBy; a read token pulls and cannot push', async () => {
  const ids = await add('text', 'shared');
  const writer = await open(ids);
  const reader = await open(ids, { token: (await mint(ids, { access: 'read', userId: 'reader' })).token });
  try {
    const errors = [];
    reader.on('error', (e) => errors.push(e));
    writer.insert(6, ' text');
    await writer.sync();
    await until(() => reader.value === 'shared text', 'the reader receives the edit');
    const got = await rest('/v2/crdt/get', ids);
    assert.equal(got.body.result.data[0].lastUpdatedBy, 'js-user');
    reader.insert(0, 'no: ');
    await until(() => errors.length > 0, 'the refused push is reported');
    assert.deepEqual([errors[0].status, errors[0].httpStatus, errors[0].message],
      ['PERMISSION_DENIED', 403, 'This token is read-only; sync without an update to only receive changes.']);
    assert.equal(await stored(ids), 'shared text');
  } finally {
    writer.close();
    reader.close();
  }
});

test('a server-side client may use the API key headers instead of a token', async () => {
  const ids = await add('map', { k: 1 });
  const server = await connect({ baseUrl, headers, ...ids });
  try {
    server.set('k', 2);
    await server.sync();
    assert.deepEqual(await stored(ids), { k: 2 });
  } finally {
    server.close();
  }
});

test('a token function is asked again when the token expires', async () => {
  const ids = await add('text', 'a');
  const short = await mint(ids, { expiresInSeconds: 2 }); // at least a second left for connect (whole seconds, rounded down)
  let asked = 0;
  const r = await connect({ baseUrl, ...ids, token: async () => (++asked === 1 ? short.token : (await mint(ids)).token) });
  try {
    const expiry = Date.parse(short.expiresAt);
    await until(() => Date.now() > expiry + 100, 'the first token expires');
    r.insert(1, 'b');
    await r.sync();
    assert.equal(asked, 2);
    assert.equal(await stored(ids), 'ab');
  } finally {
    r.close();
  }
});

test('recordVersion is crdt/get\'s version after a sync; a backend write with it merges with the client\'s edits', async () => {
  const ids = await add('text', 'Hello world');
  const a = await open(ids);
  try {
    await a.sync();
    const got = await rest('/v2/crdt/get', ids);
    assert.equal(a.recordVersion, got.body.result.data[0].version);
    // The backend computes from the client's copy at that version; the client edits meanwhile.
    const base = a.recordVersion;
    const computed = `${a.value}!`;
    a.insert(6, 'big ');
    await a.sync();
    assert.notEqual(a.recordVersion, base);
    const r = await rest('/v2/crdt/update', { ...ids, data: computed, baseVersion: base });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    await until(() => a.value === 'Hello big world!', 'the merged value arrives');
    await a.sync();
    assert.equal(a.recordVersion, (await rest('/v2/crdt/get', ids)).body.result.data[0].version);
    assert.equal(await stored(ids), 'Hello big world!');
  } finally {
    a.close();
  }
});

test('versions through the client: a write token adds and restores, the restore reaches every client; a read token lists only', async () => {
  const ids = await add('text', 'first draft');
  const a = await open(ids);
  const b = await open(ids);
  const reader = await open(ids, { token: (await mint(ids, { access: 'read', userId: 'reader' })).token });
  try {
    const v1 = await a.addVersion('Draft');
    assert.deepEqual([v1.kind, v1.name, v1.createdBy], ['named', 'Draft', 'js-user']);
    a.replace('second draft');
    await until(() => b.value === 'second draft', 'b sees the edit');
    const listed = await reader.listVersions();
    assert.deepEqual(listed.versions.map((v) => v.versionId), [v1.versionId]);
    assert.equal((await reader.getVersion(v1.versionId)).data, 'first draft');
    await assert.rejects(reader.addVersion('no'), (e) => e instanceof FolioError && e.httpStatus === 403);
    await assert.rejects(reader.restoreVersion(v1.versionId), (e) => e instanceof FolioError && e.httpStatus === 403);
    const restored = await b.restoreVersion(v1.versionId);
    await until(() => a.value === 'first draft' && b.value === 'first draft' && reader.value === 'first draft', 'the restore reaches every client');
    assert.equal(restored.version, (await rest('/v2/crdt/get', ids)).body.result.data[0].version);
    const after = await a.listVersions({ pageSize: 1 });
    assert.deepEqual([after.versions[0].versionId, typeof after.nextPageToken], [restored.backupVersionId, 'string']);
    assert.equal((await a.getVersion(restored.backupVersionId)).data, 'second draft');
    await assert.rejects(a.getVersion('v999-0000'), (e) => e instanceof FolioError && (e.httpStatus === 404 || e.httpStatus === 400));
  } finally {
    a.close();
    b.close();
    reader.close();
  }
});
