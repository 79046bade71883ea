// The live record (src/client.js) against scripted service answers (test/model.js): subscribe then
// sync, pushes, pending and gaps, notices, refusals, incarnations, offline editing, persistence,
// errors.
import assert from 'node:assert/strict';
import { mock, test } from 'node:test';

import { IDBKeyRange as FakeIDBKeyRange, indexedDB as fakeIndexedDB } from 'fake-indexeddb';

import { connect, FetchEventSource, FolioError, indexedDbPersistence, loadEngine, Replica } from '../folio.js';
import { FakeEventSource, ModelService, until } from './model.js';

const engine = await loadEngine();
const ids = { baseUrl: 'http://folio.test/', organizationId: 'org 1', documentId: 'doc', editorId: 'body' };

/** Connects to `service`, opening the subscription when the record creates it. */
async function open(service, options = {}) {
  const before = FakeEventSource.instances.length;
  const pending = connect({ ...ids, token: 'tok', fetch: service.fetch, EventSource: FakeEventSource, ...options });
  await until(() => FakeEventSource.instances.length > before);
  const es = FakeEventSource.last();
  es.open();
  const record = await pending;
  return { record, es };
}

test('connect subscribes first, then syncs with the token, and joins the record', async () => {
  const service = new ModelService(engine, 'text');
  service.doc.replace('Hello');
  const { record, es } = await open(service);
  try {
    const u = new URL(es.url);
    assert.equal(u.origin + u.pathname, 'http://folio.test/v2/crdt/subscribe');
    assert.deepEqual(Object.fromEntries(u.searchParams), { organizationId: 'org 1', documentId: 'doc', editorId: 'body', token: 'tok' });
    const [first] = service.syncs();
    assert.equal(first.headers.Authorization, 'Bearer tok');
    assert.equal(first.headers['Content-Type'], 'application/json');
    assert.deepEqual(first.body, { data: { organizationId: 'org 1', documentId: 'doc', editorId: 'body', version: 'AA==' } });
    assert.equal(record.type, 'text');
    assert.equal(record.value, 'Hello');
    assert.equal(record.incarnation, service.incarnation);
    assert.equal(record.online, true);
  } finally {
    record.close();
  }
});

test('local edits are pushed, persisted first; the pushed state holds them', async () => {
  const service = new ModelService(engine, 'map');
  const saves = [];
  const { record } = await open(service, {
    persist: async (bytes) => {
      // At this moment the push has not gone out yet.
      saves.push({ bytes, syncsSoFar: service.syncs().length });
    },
  });
  try {
    const events = [];
    record.on('change', (e) => events.push(e));
    record.set('title', 'Notes').set('n', 1);
    await record.sync();
    assert.deepEqual(service.doc.value, { n: 1, title: 'Notes' });
    assert.deepEqual(events, [{ remote: false, changes: undefined }, { remote: false, changes: undefined }]);
    const pushes = service.syncs().filter((r) => r.body.data.update);
    assert.ok(pushes.length >= 1);
    assert.equal(pushes[0].body.data.incarnation, service.incarnation);
    assert.ok(saves.length >= 1);
    const first = pushes[0];
    const index = service.syncs().indexOf(first);
    assert.ok(saves.some((s) => s.syncsSoFar === index), 'saved before the push went out');
    const restored = Replica.load(engine, saves.at(-1).bytes);
    assert.deepEqual(restored.value, { n: 1, title: 'Notes' });
    restored.free();
  } finally {
    record.close();
  }
});

test('pushed changes apply; out of order they wait, and the gap makes the client sync', async () => {
  const service = new ModelService(engine, 'text');
  service.doc.replace('abc');
  const { record, es } = await open(service);
  try {
    const events = [];
    record.on('change', (e) => events.push(e));
    const m1 = service.edit((d) => d.insert(3, 'def'));
    es.send(m1);
    assert.equal(record.value, 'abcdef');
    assert.deepEqual(events.at(-1), { remote: true, changes: [{ from: 3, to: 3, insert: 'def' }] });
    const syncsBefore = service.syncs().length;
    const m2 = service.edit((d) => d.insert(0, '1'));
    const m3 = service.edit((d) => d.insert(1, '2'));
    es.send(m3); // before m2: held as pending; the client lacks part of m3's version: sync
    assert.equal(record.value, 'abcdef');
    await until(() => record.value === '12abcdef');
    assert.ok(service.syncs().length > syncsBefore, 'the gap made it sync');
    es.send(m2); // late: already there
    assert.equal(record.value, '12abcdef');
    // A notice (no update, no version) means: sync now.
    service.doc.insert(8, '!');
    es.send({ editorId: 'body', incarnation: service.incarnation, lastUpdatedBy: 'ana', sessionId: null, lastUpdate: '2025-01-20T10:30:00.000Z' });
    await until(() => record.value === '12abcdef!');
    // Messages that are not the service's are ignored.
    es.send('not json');
    es.send('[1,2]');
    assert.equal(record.value, '12abcdef!');
  } finally {
    record.close();
  }
});

test('a refused push (FAILED_PRECONDITION) is followed by a pull, then the push again', async () => {
  const service = new ModelService(engine, 'array');
  const { record } = await open(service);
  try {
    record.insert(0, { a: 1 });
    service.refuseNext(400, 'FAILED_PRECONDITION', 'update depends on operations the server does not have; ...');
    await record.sync();
    await until(() => service.doc.value.length === 1);
    const tail = service.syncs().slice(-3).map((r) => (r.body.data.update ? 'push' : 'pull'));
    assert.deepEqual(tail, ['push', 'pull', 'push']);
    assert.deepEqual(service.doc.value, [{ a: 1 }]);
  } finally {
    record.close();
  }
});

test('a record deleted and added again: the replica is dropped and joins the new record', async () => {
  const service = new ModelService(engine, 'text', { incarnation: '12' });
  service.doc.replace('old');
  const { record, es } = await open(service);
  try {
    const seen = [];
    record.on('recreated', () => seen.push('recreated'));
    record.on('change', (e) => seen.push(e.remote ? 'remote' : 'local'));
    service.recreate('13', 'new record');
    record.insert(0, 'lost: '); // pushed with incarnation 12: ABORTED
    await until(() => record.value === 'new record');
    assert.equal(record.incarnation, '13');
    assert.ok(seen.includes('recreated'));
    assert.ok(service.syncs().some((r) => r.body.data.incarnation === '12' && r.body.data.update));
    assert.equal(service.doc.value, 'new record'); // the old record's edit never joined the new one
    // A pushed change of yet another incarnation (the deletion was missed) does the same.
    service.recreate('14', 'newest');
    es.send(service.message(service.doc.encodeSince(new Uint8Array([0]))));
    await until(() => record.value === 'newest');
    assert.equal(record.incarnation, '14');
  } finally {
    record.close();
  }
});

// Messages of one record may arrive out of commit order across nodes (docs/API.md, live changes).
test('out of order: a late deletion or change of an incarnation the client left is ignored; its own deletion is `deleted`', async () => {
  const service = new ModelService(engine, 'text', { incarnation: '12' });
  service.doc.replace('old');
  const { record, es } = await open(service);
  try {
    const seen = [];
    record.on('deleted', (m) => seen.push(`deleted ${m.incarnation}`));
    record.on('recreated', () => seen.push('recreated'));
    const lateChange = service.edit((d) => d.insert(3, '!')); // of 12, held back by a stalled node
    const lateDeletion = service.deletion();
    service.recreate('13', 'new');
    es.send(service.message(service.doc.encodeSince(new Uint8Array([0])))); // 13's change first
    await until(() => record.incarnation === '13' && record.value === 'new');
    record.insert(0, 'kept '); // pushed in the background
    es.send(lateDeletion); // 12 ended before 13 began: not about this record
    es.send(lateChange);
    await until(() => service.doc.value === 'kept new');
    await record.sync();
    assert.equal(record.value, 'kept new');
    assert.equal(record.incarnation, '13');
    assert.deepEqual(seen, ['recreated']);
    es.send(service.deletion());
    es.send(service.deletion()); // twice (a node resent it): said once
    assert.deepEqual(seen, ['recreated', 'deleted 13']);
  } finally {
    record.close();
  }
});

test('out of order: a deletion that comes before the replica knows its incarnation waits for the answer that names it', async () => {
  const service = new ModelService(engine, 'text', { incarnation: '12' });
  service.doc.replace('old');
  const { record, es } = await open(service);
  try {
    const seen = [];
    record.on('deleted', (m) => seen.push(m.incarnation));
    const oldDeletion = service.deletion();
    service.recreate('13', 'new');
    es.send(service.message(service.doc.encodeSince(new Uint8Array([0])))); // a sync goes out: refused, the replica is dropped
    es.send({ ...oldDeletion, incarnation: '11' }); // an older one still, never followed
    es.send(service.deletion()); // 13's, before the answer naming 13
    assert.deepEqual(seen, []);
    await until(() => record.incarnation === '13');
    assert.deepEqual(seen, ['13']);
  } finally {
    record.close();
  }
});

test('out of order: a late change of an incarnation the client never followed does not drop its replica', async () => {
  // The record was deleted and added again (12, then 13) just before the client joined 13; a node
  // held back a change of 12, which comes now.
  const old = new ModelService(engine, 'text', { incarnation: '12' });
  const late = old.edit((d) => d.replace('old'));
  old.doc.free();
  const service = new ModelService(engine, 'text', { incarnation: '13' });
  service.doc.replace('new');
  const { record, es } = await open(service);
  try {
    const seen = [];
    record.on('recreated', () => seen.push('recreated'));
    record.insert(0, 'kept '); // pushed in the background
    es.send(late); // the sync it makes is answered for 13: the replica stays
    await until(() => service.doc.value === 'kept new');
    await record.sync();
    assert.equal(record.value, 'kept new');
    assert.equal(record.incarnation, '13');
    assert.deepEqual(seen, []);
  } finally {
    record.close();
  }
});

test('out of order: the metadata is the largest revision\'s, not the last message\'s', async () => {
  const service = new ModelService(engine, 'text', { incarnation: '12' });
  service.doc.replace('abc');
  const { record, es } = await open(service);
  try {
    const events = [];
    record.on('metadata', (m) => events.push(m));
    assert.equal(record.metadata, null); // sync answers carry none
    const m2 = service.edit((d) => d.insert(3, 'd'), 'bo');
    const m3 = service.edit((d) => d.insert(4, 'e'), 'cy');
    const m4 = service.edit((d) => d.insert(5, 'f'), 'di');
    es.send(m2);
    es.send(m4); // before m3: held as pending, the gap syncs
    es.send(m3); // late
    await until(() => record.value === 'abcdef');
    assert.deepEqual(record.metadata, { revision: 4, lastUpdatedBy: 'di', sessionId: null, lastUpdate: '2025-01-20T10:30:00.000Z' });
    assert.deepEqual(events.map((m) => [m.revision, m.lastUpdatedBy]), [[2, 'bo'], [4, 'di']]);
    // A notice (no update) carries the metadata of its revision too; an older one changes nothing.
    service.doc.insert(6, 'g');
    es.send({ editorId: 'e', incarnation: '12', revision: 6, lastUpdatedBy: 'ed', sessionId: 's1', lastUpdate: '2025-01-20T10:32:00.000Z' });
    es.send({ ...m3, revision: 5, lastUpdatedBy: 'fay' });
    await until(() => record.value === 'abcdefg');
    assert.deepEqual(record.metadata, { revision: 6, lastUpdatedBy: 'ed', sessionId: 's1', lastUpdate: '2025-01-20T10:32:00.000Z' });
    // A new incarnation starts afresh: its first message's metadata, whatever the old revisions were.
    service.recreate('13', 'new');
    es.send(service.edit((d) => d.insert(0, '>'), 'gus'));
    await until(() => record.incarnation === '13' && record.value === '>new');
    assert.deepEqual(record.metadata, { revision: 2, lastUpdatedBy: 'gus', sessionId: null, lastUpdate: '2025-01-20T10:30:00.000Z' });
    assert.deepEqual(events.at(-1).lastUpdatedBy, 'gus');
  } finally {
    record.close();
  }
});

test('offline: edits go on locally and are persisted; the client merges when back', async () => {
  const service = new ModelService(engine, 'text');
  service.doc.replace('shared');
  let saved = null;
  const { record, es } = await open(service, { persist: (bytes) => { saved = bytes; } });
  const statuses = [];
  const errors = [];
  record.on('status', (s) => statuses.push(s.online));
  record.on('error', (e) => errors.push(e));
  try {
    service.offline = true;
    es.fail(false); // the connection drops; the EventSource reconnects by itself
    record.insert(6, ' text');
    await until(() => statuses.includes(false));
    record.insert(0, 'my ');
    assert.equal(record.value, 'my shared text');
    await until(() => saved !== null && Replica.load(engine, saved).value === 'my shared text');
    service.doc.replace('shared, edited'); // meanwhile on the service
    service.offline = false;
    es.open(); // reconnected: sync
    await until(() => record.value === service.doc.value && record.online);
    // Both sides inserted after "shared": the engine orders the two inserts the same way everywhere.
    assert.match(record.value, /^my shared(, edited text| text, edited)$/);
    assert.deepEqual(errors, []);
    assert.deepEqual(statuses, [false, true]);
  } finally {
    record.close();
  }
});

test('a saved replica reopens offline with its edits, and merges when the service answers', async () => {
  const service = new ModelService(engine, 'text');
  service.doc.replace('base');
  const first = await open(service);
  first.record.insert(4, ' synced');
  await first.record.sync();
  service.offline = true;
  first.record.insert(0, 'offline ');
  const state = first.record.save();
  first.record.close();

  const before = FakeEventSource.instances.length;
  const connecting = connect({ ...ids, token: 'tok', fetch: service.fetch, EventSource: FakeEventSource, saved: state });
  await until(() => FakeEventSource.instances.length > before);
  const es = FakeEventSource.instances[before];
  es.fail(false); // the subscription cannot connect either
  const record = await connecting;
  try {
    assert.equal(record.value, 'offline base synced');
    assert.equal(record.online, false);
    service.offline = false;
    es.open();
    await until(() => service.doc.value === 'offline base synced');
    assert.equal(record.value, 'offline base synced');
  } finally {
    record.close();
  }
  // Without a saved replica there is nothing to show: connect fails.
  service.offline = true;
  const failing = connect({ ...ids, token: 'tok', fetch: service.fetch, EventSource: FakeEventSource });
  await until(() => FakeEventSource.instances.length > before + 1);
  FakeEventSource.last().fail(false);
  await assert.rejects(failing, (e) => e instanceof FolioError && e.status === 'UNAVAILABLE' && e.httpStatus === 0);
});

test('service errors reach the caller as FolioError: from connect, and as error events', async () => {
  const service = new ModelService(engine, 'text');
  service.refuseNext(404, 'NOT_FOUND', 'No CRDT data found for this editor ID.');
  await assert.rejects(open(service), (e) => {
    assert.ok(e instanceof FolioError);
    assert.equal(e.name, 'FolioError');
    assert.equal(e.status, 'NOT_FOUND');
    assert.equal(e.httpStatus, 404);
    assert.equal(e.message, 'No CRDT data found for this editor ID.');
    return true;
  });

  // A subscription the service refuses: the EventSource closes; the client asks why.
  const before = FakeEventSource.instances.length;
  const refused = connect({ ...ids, token: 'other', fetch: service.fetch, EventSource: FakeEventSource });
  await until(() => FakeEventSource.instances.length > before);
  service.refuseNext(403, 'PERMISSION_DENIED', 'This token is for another document.');
  FakeEventSource.last().fail(true);
  await assert.rejects(refused, (e) => e.status === 'PERMISSION_DENIED' && e.httpStatus === 403);
  const probe = service.requests.at(-1);
  assert.equal(probe.path, '/v2/crdt/subscribe');
  assert.equal(probe.headers.Accept, 'text/event-stream');
  assert.equal(probe.query.token, 'other'); // as the EventSource sent it: in the query, not also as a header
  assert.equal(probe.headers.Authorization, undefined);

  // In the background: an error event.
  const { record } = await open(service);
  try {
    const errors = [];
    record.on('error', (e) => errors.push(e));
    service.refuseNext(403, 'PERMISSION_DENIED', 'This token is read-only; sync without an update to only receive changes.');
    record.insert(0, 'x');
    await until(() => errors.length === 1);
    assert.ok(errors[0] instanceof FolioError);
    assert.equal(errors[0].status, 'PERMISSION_DENIED');
    assert.equal(errors[0].httpStatus, 403);
    assert.match(errors[0].message, /read-only/);
    // A 502 without a JSON body (Nchan's) is an error too, named by its HTTP status.
    service.refuseNext(500, undefined, undefined);
    service.refusals[0].body = 'oops';
    await assert.rejects(record.sync(), (e) => e.status === 'UNKNOWN' || e.status === 'INTERNAL');
  } finally {
    record.close();
  }
  await assert.rejects(record.sync(), /closed/);
  assert.throws(() => record.value, /closed/);
});

test('a token given as a function is asked again after a 401', async () => {
  const service = new ModelService(engine, 'text');
  let n = 0;
  const token = async () => `t${++n}`;
  service.refuseNext(401, 'UNAUTHENTICATED', 'The client token has expired.');
  const { record } = await open(service, { token });
  try {
    const [refused, retried] = service.syncs();
    assert.equal(refused.headers.Authorization, 'Bearer t1');
    assert.equal(retried.headers.Authorization, 'Bearer t2');
    assert.equal(new URL(FakeEventSource.last().url).searchParams.get('token'), 't1');
  } finally {
    record.close();
  }
});

test('a token function whose first token is refused at subscribe is asked again, and connect succeeds', async () => {
  const service = new ModelService(engine, 'text');
  service.doc.replace('abc');
  let n = 0;
  const before = FakeEventSource.instances.length;
  const pending = connect({ ...ids, token: async () => `t${++n}`, fetch: service.fetch, EventSource: FakeEventSource });
  await until(() => FakeEventSource.instances.length > before);
  const first = FakeEventSource.last();
  service.refuseNext(401, 'UNAUTHENTICATED', 'The client token expired at 2026-11-24T10:00:00.000Z.');
  first.fail(true); // refused: the client asks the subscribe endpoint why (the 401 above)
  await until(() => FakeEventSource.instances.length > before + 1);
  const second = FakeEventSource.last();
  second.open();
  const record = await pending;
  try {
    assert.equal(new URL(first.url).searchParams.get('token'), 't1');
    assert.equal(new URL(second.url).searchParams.get('token'), 't2');
    assert.equal(n, 2);
    assert.equal(record.value, 'abc');
  } finally {
    record.close();
  }
});

test('a push refused as read-only (403) is reported once; then the client pulls only, until a new token', async () => {
  const service = new ModelService(engine, 'text');
  service.doc.replace('abc');
  service.readOnly = true;
  let n = 0;
  const { record, es } = await open(service, { token: async () => `t${++n}` });
  try {
    const errors = [];
    record.on('error', (e) => errors.push(e));
    record.insert(0, 'mine ');
    await until(() => errors.length === 1);
    assert.ok(errors[0] instanceof FolioError);
    assert.equal(errors[0].status, 'PERMISSION_DENIED');
    assert.equal(errors[0].httpStatus, 403);
    await record.sync(); // a pull: in step with everything the service has
    const syncsBefore = service.syncs().length;
    record.insert(0, 'more '); // stays local: nothing to send
    assert.equal(service.syncs().length, syncsBefore);
    // A gap: the client pulls what it missed.
    service.edit((d) => d.insert(3, '1'));
    const m2 = service.edit((d) => d.insert(4, '2'));
    es.send(m2);
    await until(() => record.value === 'more mine abc12');
    const after = service.syncs().slice(syncsBefore);
    assert.ok(after.length >= 1);
    assert.ok(after.every((r) => !r.body.data.update), 'pulls only');
    assert.equal(service.syncs().filter((r) => r.body.data.update).length, 1, 'one push was tried');
    assert.equal(errors.length, 1, 'reported once');
    assert.equal(service.doc.value, 'abc12');
    // A new token (after a 401) may write: the edits kept locally are pushed.
    service.readOnly = false;
    service.refuseNext(401, 'UNAUTHENTICATED', 'The client token has expired.');
    await record.sync();
    await until(() => service.doc.value === 'more mine abc12');
    assert.equal(service.syncs().at(-1).headers.Authorization, 'Bearer t2');
    assert.equal(errors.length, 1);
  } finally {
    record.close();
  }
});

test('with FetchEventSource the token is sent as a header only: no URL holds it', async () => {
  const service = new ModelService(engine, 'text');
  service.doc.replace('abc');
  const seen = [];
  let streams = true;
  const fetch = (url, init = {}) => {
    seen.push({ url, authorization: init.headers?.Authorization });
    if (new URL(url).pathname === '/v2/crdt/subscribe' && streams)
      return Promise.resolve(new Response(new ReadableStream({ start() {} }), { status: 200, headers: { 'Content-Type': 'text/event-stream' } }));
    return service.fetch(url, init);
  };
  const record = await connect({ ...ids, token: 'tok', fetch, EventSource: FetchEventSource });
  try {
    assert.equal(record.value, 'abc');
  } finally {
    record.close();
  }
  // A refused subscription: the client asks why with the same request.
  streams = false;
  service.refuseNext(403, 'PERMISSION_DENIED', 'The client token does not cover this documentId.');
  service.refuseNext(403, 'PERMISSION_DENIED', 'The client token does not cover this documentId.');
  await assert.rejects(connect({ ...ids, token: 'tok', fetch, EventSource: FetchEventSource }), (e) => e.httpStatus === 403);
  assert.deepEqual(seen.map((r) => new URL(r.url).pathname), ['/v2/crdt/subscribe', '/v2/crdt/sync', '/v2/crdt/subscribe', '/v2/crdt/subscribe']);
  for (const r of seen) {
    assert.doesNotMatch(r.url, /token=/);
    assert.equal(r.authorization, 'Bearer tok');
  }
});

test('while tokens are refused, edits do not each ask for a new one: renewals wait for the backoff', async () => {
  mock.timers.enable({ apis: ['setTimeout'] }); // the retry's backoff passes only when the test says
  const service = new ModelService(engine, 'text');
  let calls = 0;
  const { record } = await open(service, { token: async () => `t${++calls}` });
  try {
    const errors = [];
    record.on('error', (e) => errors.push(e));
    assert.equal(calls, 1);
    service.expired = true;
    for (let i = 0; i < 10; ++i) {
      record.insert(0, 'x');
      await record.sync().catch(() => {});
    }
    assert.equal(calls, 2, 'one renewal for 10 edits');
    assert.ok(errors.length >= 1 && errors.every((e) => e.httpStatus === 401));
    // The backoff passed: the retry syncs again; the service takes the token now, and the edits.
    service.expired = false;
    mock.timers.tick(500);
    await until(() => service.doc.value === 'x'.repeat(10));
    assert.equal(calls, 2);
  } finally {
    record.close();
    mock.timers.reset();
  }
});

test('the subscription and a sync needing a new token at once share one token() call', async () => {
  mock.timers.enable({ apis: ['setTimeout'] });
  const service = new ModelService(engine, 'text');
  let calls = 0;
  const waiting = [];
  const token = () => {
    const n = ++calls;
    return new Promise((resolve) => waiting.push(() => resolve(`t${n}`)));
  };
  const before = FakeEventSource.instances.length;
  const pending = connect({ ...ids, token, fetch: service.fetch, EventSource: FakeEventSource });
  await until(() => waiting.length === 1);
  waiting.shift()();
  await until(() => FakeEventSource.instances.length > before);
  FakeEventSource.last().open();
  const record = await pending;
  try {
    service.expired = true;
    FakeEventSource.last().fail(true); // refused: the client asks why (401) and subscribes again later
    await until(() => service.requests.at(-1).path === '/v2/crdt/subscribe');
    for (let i = 0; i < 10; ++i) await new Promise((r) => setImmediate(r));
    record.insert(0, 'a'); // its sync needs a new token too
    await until(() => waiting.length === 1);
    mock.timers.tick(500); // the subscription's retry, while the token is being fetched
    for (let i = 0; i < 10; ++i) await new Promise((r) => setImmediate(r));
    service.expired = false;
    while (waiting.length) waiting.shift()();
    await until(() => service.doc.value === 'a');
    assert.equal(calls, 2);
    assert.equal(new URL(FakeEventSource.last().url).searchParams.get('token'), 't2');
  } finally {
    record.close();
    mock.timers.reset();
  }
});

test('options are checked', async () => {
  await assert.rejects(connect({ ...ids, documentId: '' }), /documentId must be a non-empty string/);
  await assert.rejects(connect({ ...ids, fetch: () => {}, EventSource: 'no' }), /EventSource must be a constructor/);
});

test('every local edit is handed to persist, also while a push waits for its answer', async () => {
  const service = new ModelService(engine, 'text');
  const states = [];
  const { record } = await open(service, { persist: (bytes) => { states.push(bytes); } });
  const slow = service.fetch;
  let release;
  const held = new Promise((r) => { release = r; });
  record._o.fetch = async (url, init) => {
    await held; // a slow link: no answer until the test says
    return slow(url, init);
  };
  try {
    const value = () => (states.length ? Replica.load(engine, states.at(-1)).value : null);
    record.insert(0, 'h'); // its push waits on the link
    await until(() => service.requests.length > 0 && value() === 'h');
    for (const c of 'ello world') record.insert(record.length, c);
    await until(() => value() === 'hello world'); // stored while the push is still out
    assert.equal(service.doc.value, '');
    release();
    await until(() => service.doc.value === 'hello world');
  } finally {
    release();
    record.close();
  }
});

test('a persist that throws is an error event (PERSIST_FAILED) and the push goes on', async () => {
  const service = new ModelService(engine, 'text');
  const cause = new RangeError('Maximum call stack size exceeded');
  const { record } = await open(service, { persist: () => { throw cause; } });
  try {
    const errors = [];
    record.on('error', (e) => errors.push(e));
    record.insert(0, 'pushed');
    await until(() => service.doc.value === 'pushed');
    record.insert(6, ' again');
    await until(() => service.doc.value === 'pushed again');
    assert.ok(errors.length >= 2);
    for (const e of errors) {
      assert.ok(e instanceof FolioError);
      assert.equal(e.status, 'PERSIST_FAILED');
      assert.equal(e.cause, cause);
      assert.match(e.message, /^persist failed: Maximum call stack size exceeded/);
    }
  } finally {
    record.close();
  }
});

test('persist calls never overlap, each with the state when it starts; close hands the last edits over', async () => {
  const service = new ModelService(engine, 'text');
  const seen = [];
  let running = 0;
  let overlapped = false;
  const { record } = await open(service, {
    persist: async (bytes) => {
      overlapped ||= running > 0;
      ++running;
      await new Promise((r) => setImmediate(r));
      seen.push(Replica.load(engine, bytes).value);
      --running;
    },
  });
  record.insert(0, 'a');
  record.insert(1, 'b'); // the same task: one call
  await until(() => seen.includes('ab'));
  record.insert(2, 'c'); // while the push's call may run: queued after it
  record.insert(3, 'd');
  record.close(); // before the queued call started: it stores the state at close
  await until(() => seen.at(-1) === 'abcd');
  assert.equal(overlapped, false);
  assert.ok(!seen.includes('a'), 'the edits of one task are one call');
});

test('several saved states (tabs): merged into one replica of a new id; none of their edits is lost', async () => {
  const service = new ModelService(engine, 'text');
  service.doc.replace('base');
  const tab = async () => {
    let state = null;
    const { record } = await open(service, { persist: (b) => { state = b; } });
    return { record, state: () => state };
  };
  const a = await tab();
  const b = await tab();
  service.offline = true;
  a.record.insert(0, 'a ');
  b.record.insert(4, ' b');
  await until(() => a.state() && Replica.load(engine, a.state()).value === 'a base' && b.state() && Replica.load(engine, b.state()).value === 'base b');
  a.record.close();
  b.record.close();
  const never = Replica.create(engine, 'text');
  never.replace(' never synced');
  service.offline = false;
  const { record } = await open(service, { saved: [b.state(), never.save(), a.state()] });
  never.free();
  try {
    // The never-synced ops are inserts into the empty document: at the start, among the other inserts
    // there ordered by replica id (as its tab's own first push would have put them).
    const once = (v) => v.split(' never synced').length === 2 && v.replace(' never synced', '') === 'a base b';
    await until(() => once(service.doc.value));
    assert.equal(record.value, service.doc.value);
    assert.ok(![Replica.load(engine, a.state()).replicaId, Replica.load(engine, b.state()).replicaId].includes(record._replica.replicaId));
  } finally {
    record.close();
  }
});

test('back: the online event and a message on the open subscription retry at once, the backoff starting again', async () => {
  mock.timers.enable({ apis: ['setTimeout'] }); // the backoff never passes in this test
  const target = new EventTarget(); // the browser's window
  globalThis.addEventListener = target.addEventListener.bind(target);
  globalThis.removeEventListener = target.removeEventListener.bind(target);
  const service = new ModelService(engine, 'text');
  const { record, es } = await open(service);
  try {
    // The responder is down (503) while Nchan still serves the subscription.
    const down = () => { for (let i = 0; i < 20; ++i) service.refuseNext(503, 'UNAVAILABLE', 'The service is unavailable; retry later.'); };
    down();
    record.insert(0, 'x');
    await until(() => record.online === false);
    service.refusals.length = 0;
    const other = service.edit((d) => d.insert(0, 'y')); // another client's change arrives on the subscription
    es.send(other);
    await until(() => service.doc.value.includes('x'));
    assert.equal(record.online, true);

    down();
    record.insert(0, 'z');
    await until(() => record.online === false);
    service.refusals.length = 0;
    target.dispatchEvent(new Event('online'));
    await until(() => service.doc.value.includes('z'));
    assert.equal(record.value, service.doc.value);
  } finally {
    record.close();
    delete globalThis.addEventListener;
    delete globalThis.removeEventListener;
    mock.timers.reset();
  }
});

// ---- IndexedDB persistence (indexedDbPersistence on fake-indexeddb, an in-memory IndexedDB) ----------

const idb = { indexedDB: fakeIndexedDB, IDBKeyRange: FakeIDBKeyRange };

/** The values of the states stored under `key`, newest first. */
async function storedValues(key, database) {
  const s = await indexedDbPersistence(key, { ...idb, database });
  await s.close();
  return (s.saved ?? []).map((b) => Replica.load(engine, b).value);
}

test('tabs on a record deleted and added again: a stale tab\'s newer entry does not cost the live tab\'s unsent edits', async () => {
  const database = 'stale-tab';
  const old = new ModelService(engine, 'text', { incarnation: '12' });
  old.doc.replace('old');
  // Tab Z joined the old record; tab A the new one (the record was deleted and added again).
  const z = await open(old, {});
  const service = new ModelService(engine, 'text', { incarnation: '13' });
  service.doc.replace('new');
  const a = await open(service, {});
  const storeA = await indexedDbPersistence('k', { ...idb, database });
  service.offline = old.offline = true;
  a.record.insert(3, ' by A');
  await storeA.persist(a.record.save());
  await a.record.close();
  await storeA.close();
  // Z edits the old record later: its entry is the newest.
  const at = Date.now();
  await until(() => Date.now() > at, 1e6);
  const storeZ = await indexedDbPersistence('k', { ...idb, database });
  z.record.insert(3, ' by Z');
  await storeZ.persist(z.record.save());
  await z.record.close();
  await storeZ.close();
  // Tab C opens: Z's entry first. The sync refuses it (ABORTED); A's edits must survive, stored and pushed.
  service.offline = false;
  const storeC = await indexedDbPersistence('k', { ...idb, database });
  assert.deepEqual(storeC.saved.map((b) => Replica.load(engine, b).value), ['old by Z', 'new by A']);
  const { record } = await open(service, { ...storeC });
  try {
    await until(() => service.doc.value === 'new by A');
    assert.equal(record.value, 'new by A');
    record.insert(0, '>');
    await until(() => service.doc.value === '>new by A');
    assert.equal(await record.close(), undefined);
    await storeC.close();
    assert.deepEqual(await storedValues('k', database), ['>new by A']); // A's and Z's entries folded
  } finally {
    record.close();
  }
});

test('an entry of another incarnation is not deleted while the record is not known: offline, only merged entries go', async () => {
  const database = 'offline-fold';
  const old = new ModelService(engine, 'text', { incarnation: '12' });
  const service = new ModelService(engine, 'text', { incarnation: '13' });
  const z = await open(old, {});
  const a = await open(service, {});
  old.offline = service.offline = true;
  for (const [tab, text] of [[a, 'A'], [z, 'Z']]) {
    const s = await indexedDbPersistence('k', { ...idb, database });
    tab.record.insert(0, text);
    await s.persist(tab.record.save());
    await tab.record.close();
    await s.close();
    const at = Date.now();
    await until(() => Date.now() > at, 1e6);
  }
  const storeC = await indexedDbPersistence('k', { ...idb, database });
  const { record: c } = await open(service, { ...storeC }); // offline: on Z's entry, the newest
  c.insert(0, 'C');
  await c.close();
  await storeC.close();
  const values = await storedValues('k', database);
  assert.ok(values.includes('A'), `A's entry is kept: ${JSON.stringify(values)}`);
  assert.ok(!values.includes('Z'), 'Z\'s entry, merged into C\'s, is deleted');
});

test('close resolves once the last edits are stored; a store closed right after the record still stores them', async () => {
  const service = new ModelService(engine, 'text');
  let release;
  const gate = new Promise((r) => { release = r; });
  const seen = [];
  const { record } = await open(service, { persist: async (bytes) => { await gate; seen.push(Replica.load(engine, bytes).value); } });
  record.insert(0, 'ab');
  let closed = false;
  const closing = record.close().then(() => { closed = true; });
  await until(() => service.requests.length > 0);
  assert.equal(closed, false, 'close waits for the persist');
  release();
  await closing;
  assert.equal(seen.at(-1), 'ab');

  // record.close(); store.close() with no await between: the queued persist is stored, no error.
  const database = 'close-order';
  const store = await indexedDbPersistence('k', { ...idb, database });
  const errors = [];
  const second = await open(service, { ...store });
  second.record.on('error', (e) => errors.push(e));
  second.record.insert(0, 'x');
  await second.record.sync(); // a persist ran; the next edits queue one after it
  second.record.insert(0, 'y');
  const done = second.record.close();
  const storeClosed = store.close();
  await done;
  await storeClosed;
  assert.deepEqual(errors, []);
  assert.deepEqual(await storedValues('k', database), ['yx']);
});

test('a 401 for a renewed token: messages on the open subscription do not each ask for a token and sync', async () => {
  mock.timers.enable({ apis: ['setTimeout'] }); // the retry's backoff passes only when the test says
  const service = new ModelService(engine, 'text');
  let calls = 0;
  const { record, es } = await open(service, { token: async () => `t${++calls}` });
  try {
    record.on('error', () => {});
    service.expired = true;
    record.insert(0, 'x');
    await until(() => calls === 2 && record._retryTimer !== null);
    const syncs = service.syncs().length;
    for (let i = 0; i < 5; ++i) {
      es.send(service.edit((d) => d.insert(0, 's'))); // another client's change: it applies
      for (let t = 0; t < 5; ++t) await new Promise((r) => setImmediate(r));
    }
    assert.equal(calls, 2, 'no token asked for by the messages');
    assert.equal(service.syncs().length, syncs, 'no sync made by the messages');
  } finally {
    record.close();
    mock.timers.reset();
  }
});

test('never-synced states: one merged twice adds nothing twice; map keys of the newest state win', async () => {
  const service = new ModelService(engine, 'text');
  service.doc.replace('base');
  const { record: first } = await open(service, {});
  const synced = first.save();
  first.close();
  const never = Replica.create(engine, 'text');
  never.insert(0, 'hi');
  const older = never.save(); // an older save of the same tab (a persist that failed left it)
  never.insert(2, ' there');
  const newer = never.save();
  never.free();
  const { record } = await open(service, { saved: [synced, newer, older] });
  try {
    await until(() => !record._replica.needsSync);
    assert.equal(record.value.split('hi').length - 1, 1, `once: ${record.value}`);
    assert.equal(service.doc.value, record.value);
    assert.ok(service.doc.value.includes('hi there') && service.doc.value.includes('base'));
  } finally {
    record.close();
  }

  const maps = new ModelService(engine, 'map');
  maps.doc.set('k', 0);
  const { record: m0 } = await open(maps, {});
  const mapState = m0.save();
  m0.close();
  const states = [2, 1].map((v) => { // newest first: k = 2 was set after k = 1
    const r = Replica.create(engine, 'map');
    r.set('k', v);
    const b = r.save();
    r.free();
    return b;
  });
  const { record: m } = await open(maps, { saved: [mapState, ...states] });
  try {
    assert.deepEqual(m.value, { k: 2 });
  } finally {
    m.close();
  }
});

test('recordVersion: the sync answer\'s; kept while pushed changes apply; \'\' for a saved state until an answer', async () => {
  const service = new ModelService(engine, 'text');
  service.doc.replace('Hello');
  const { record, es } = await open(service);
  try {
    assert.equal(record.recordVersion, service.recordVersion());
    const joined = record.recordVersion;
    // A pushed change: the value moves on, the version it names does not (the answer named it).
    es.send(service.edit((d) => d.insert(5, ' world')));
    await until(() => record.value === 'Hello world');
    assert.equal(record.recordVersion, joined);
    // A push's answer names the state after the push, which holds the pushed change too.
    record.insert(0, '> ');
    await record.sync();
    assert.equal(service.doc.value, '> Hello world');
    assert.notEqual(service.recordVersion(), joined);
    assert.equal(record.recordVersion, service.recordVersion());
    // A saved state keeps no record version: '' until the service answers again.
    service.offline = true;
    const state = record.save();
    const before = FakeEventSource.instances.length;
    const connecting = connect({ ...ids, token: 'tok', fetch: service.fetch, EventSource: FakeEventSource, saved: state });
    await until(() => FakeEventSource.instances.length > before);
    const es2 = FakeEventSource.instances[before];
    es2.fail(false);
    const resumed = await connecting;
    try {
      assert.equal(resumed.recordVersion, '');
      service.offline = false;
      es2.open();
      await until(() => resumed.recordVersion === service.recordVersion());
    } finally {
      resumed.close();
    }
  } finally {
    record.close();
  }
  // A service that sends no recordVersion: ''.
  const old = new ModelService(engine, 'map');
  const handle = old.fetch;
  old.fetch = async (url, init) => {
    const res = await handle(url, init);
    const body = await res.json();
    if (body?.result?.data) delete body.result.data.recordVersion;
    return new Response(JSON.stringify(body), { status: res.status, headers: { 'Content-Type': 'application/json' } });
  };
  const { record: r2 } = await open(old);
  try {
    assert.equal(r2.recordVersion, '');
  } finally {
    r2.close();
  }
});

test('versions: add, list (paged), get and restore with the record\'s token; a restore arrives as a pushed change', async () => {
  const service = new ModelService(engine, 'text');
  service.doc.replace('first');
  const { record, es } = await open(service, { userId: 'ana' });
  try {
    const v1 = await record.addVersion('Draft');
    const add = service.requests.at(-1);
    assert.equal(add.path, '/v2/crdt/versions/add');
    assert.equal(add.headers.Authorization, 'Bearer tok');
    assert.deepEqual(add.body, { data: { organizationId: 'org 1', documentId: 'doc', editorId: 'body', name: 'Draft', userId: 'ana' } });
    assert.equal(v1.kind, 'named');
    assert.equal(v1.name, 'Draft');
    assert.equal(v1.version, record.recordVersion);
    record.replace('second');
    await record.sync();
    const v2 = await record.addVersion();
    assert.equal(service.requests.at(-1).body.data.name, undefined);
    assert.deepEqual((await record.listVersions()).versions.map((v) => v.versionId), [v2.versionId, v1.versionId]);
    const page1 = await record.listVersions({ pageSize: 1 });
    assert.deepEqual(page1.versions.map((v) => v.versionId), [v2.versionId]);
    const page2 = await record.listVersions({ pageSize: 1, pageToken: page1.nextPageToken });
    assert.deepEqual(page2, { versions: [{ ...v1 }] });
    const got = await record.getVersion(v1.versionId);
    assert.equal(got.data, 'first');
    assert.equal(got.versionId, v1.versionId);
    // Restore: the service publishes the change; the replica takes it as any pushed change.
    const changes = [];
    record.on('change', (e) => changes.push(e));
    const restored = await record.restoreVersion(v1.versionId);
    assert.deepEqual(service.requests.at(-1).body, { data: { organizationId: 'org 1', documentId: 'doc', editorId: 'body', versionId: v1.versionId, userId: 'ana' } });
    assert.equal(restored.version, service.recordVersion());
    assert.equal(typeof restored.backupVersionId, 'string');
    assert.equal(record.value, 'second');
    es.send(service.published.at(-1));
    await until(() => record.value === 'first');
    assert.ok(changes.every((e) => e.remote));
    await assert.rejects(record.getVersion('v99'), (e) => e instanceof FolioError && e.status === 'NOT_FOUND' && e.httpStatus === 404);
    // A read token may list but not add or restore: the service's refusal, as a FolioError.
    service.readOnly = true;
    assert.equal((await record.listVersions()).versions.length, 3);
    await assert.rejects(record.addVersion('x'), (e) => e instanceof FolioError && e.status === 'PERMISSION_DENIED' && e.httpStatus === 403);
    await assert.rejects(record.restoreVersion(v2.versionId), (e) => e instanceof FolioError && e.httpStatus === 403);
  } finally {
    record.close();
  }
  await assert.rejects(record.listVersions(), (e) => e instanceof FolioError && e.status === 'CANCELLED');
});
