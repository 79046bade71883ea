// Presence on a live record (src/presence.js) against the scripted service (test/model.js): announcing
// (coalesced, one request in flight, heartbeats), others from presence/get and the channel's
// messages, leaving on leave(), close() and pagehide, and presence messages that never make a sync.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { connect, loadEngine } from '../folio.js';
import { FakeEventSource, ModelService, until } from './model.js';

const engine = await loadEngine();
const ids = { baseUrl: 'http://folio.test', organizationId: 'o', documentId: 'd', editorId: 'body' };

async function open(service, options = {}) {
  const before = FakeEventSource.instances.length;
  const pending = connect({ ...ids, token: 'tok', fetch: service.fetch, EventSource: FakeEventSource, presenceThrottleMs: 0, ...options });
  await until(() => FakeEventSource.instances.length > before);
  const es = FakeEventSource.last();
  es.open();
  return { record: await pending, es };
}

const calls = (service, name) => service.requests.filter((r) => r.path === `/v2/presence/${name}`);

/** Another client's announcement, as the service publishes it. */
function other(clientId, type, more = {}) {
  return { editorId: 'body', presence: { type, clientId, userId: `u-${clientId}`, state: { name: clientId }, selection: null, updatedAt: '2025-01-20T10:30:00.000Z', ...more } };
}

test('a record sends nothing about presence until it is used; then it reads who is here', async () => {
  const service = new ModelService(engine, 'text');
  service.present.set('ana', { clientId: 'ana', userId: 'u-ana', state: { name: 'Ana', color: '#c00' }, selection: { anchor: 'end', head: 'end' }, updatedAt: 't' });
  const { record } = await open(service);
  try {
    await record.sync();
    assert.equal(service.requests.filter((r) => r.path.startsWith('/v2/presence/')).length, 0);
    const events = [];
    record.on('presence', (e) => events.push(e));
    const presence = record.presence;
    await until(() => presence.others.length === 1);
    assert.deepEqual(calls(service, 'get')[0].body, { data: { organizationId: 'o', documentId: 'd', editorId: 'body' } });
    assert.equal(calls(service, 'get')[0].headers.Authorization, 'Bearer tok');
    assert.deepEqual(presence.others, [{ clientId: 'ana', userId: 'u-ana', state: { name: 'Ana', color: '#c00' }, selection: { anchor: 'end', head: 'end' }, updatedAt: 't' }]);
    assert.deepEqual(events, [{ type: 'join', clientId: 'ana', userId: 'u-ana', state: { name: 'Ana', color: '#c00' }, selection: { anchor: 'end', head: 'end' } }]);
  } finally {
    record.close();
  }
});

test('set announces the state and selection with the client id; others exclude this client; join, update, leave events', async () => {
  const service = new ModelService(engine, 'text');
  const { record, es } = await open(service, { presenceClientId: 'me-1', userId: 'bo' });
  try {
    const events = [];
    record.on('presence', (e) => events.push(`${e.type} ${e.clientId} ${JSON.stringify(e.state)}`));
    record.presence.set({ name: 'Bo', color: '#00c' }, { anchor: 'end', head: 'end' });
    await until(() => calls(service, 'set').length === 1 && service.present.has('me-1'));
    assert.deepEqual(calls(service, 'set')[0].body.data, { organizationId: 'o', documentId: 'd', editorId: 'body', clientId: 'me-1', state: { name: 'Bo', color: '#00c' }, selection: { anchor: 'end', head: 'end' }, userId: 'bo' });
    for (const m of service.presenceMessages) es.send(m); // its own join: not among the others
    es.send(other('ana', 'join'));
    es.send(other('ana', 'update', { state: { name: 'Ana!' } }));
    es.send(other('ana', 'update', { state: { name: 'Ana!' } })); // a heartbeat: no event
    es.send(other('cy', 'update')); // an update of a client whose join was missed: a join
    es.send(other('ana', 'leave', { state: undefined, selection: undefined }));
    es.send(other('zed', 'leave')); // never seen: nothing
    await until(() => events.length === 4);
    assert.deepEqual(events, ['join ana {"name":"ana"}', 'update ana {"name":"Ana!"}', 'join cy {"name":"cy"}', 'leave ana {"name":"Ana!"}']);
    assert.deepEqual(record.presence.others.map((o) => o.clientId), ['cy']);
    assert.equal(record.presence.clientId, 'me-1');
    assert.throws(() => record.presence.set('not an object'), TypeError);
    assert.throws(() => record.presence.set({}, { anchor: 1 }), TypeError);
  } finally {
    record.close();
  }
});

test('at most one set is in flight; what is set meanwhile is coalesced, the latest wins', async () => {
  const service = new ModelService(engine, 'text');
  const { record } = await open(service);
  try {
    let release;
    service.holdPresence = new Promise((r) => (release = r));
    let inFlight = 0;
    let most = 0;
    const fetch = record._o.fetch;
    record._o.fetch = async (url, init) => {
      const isSet = String(url).endsWith('/v2/presence/set');
      if (isSet) most = Math.max(most, ++inFlight);
      try {
        return await fetch(url, init);
      } finally {
        if (isSet) --inFlight;
      }
    };
    record.presence.set({ n: 0 });
    for (let n = 1; n <= 20; ++n) record.presence.set({ n });
    await until(() => calls(service, 'set').length === 1);
    assert.equal(inFlight, 1);
    release();
    service.holdPresence = null;
    await until(() => service.present.size === 1 && [...service.present.values()][0].state.n === 20);
    assert.deepEqual(calls(service, 'set').map((r) => r.body.data.state.n), [0, 20]);
    assert.equal(most, 1);
  } finally {
    record.close();
  }
});

test('while joined the state is sent again every timeoutMs/3; leave() stops it', async () => {
  const service = new ModelService(engine, 'text');
  service.presenceTimeoutMs = 30; // a short timeout: heartbeats every timeoutMs / 3
  const { record } = await open(service);
  try {
    record.presence.set({ name: 'x' });
    await until(() => calls(service, 'set').length >= 3, 100000);
    assert.ok(calls(service, 'set').every((r) => r.body.data.state.name === 'x'));
    record.presence.leave();
    await until(() => calls(service, 'leave').length === 1);
    const sets = calls(service, 'set').length;
    await new Promise((r) => setTimeout(r, 50)); // five heartbeat periods: none comes
    assert.equal(calls(service, 'set').length, sets);
    assert.equal(service.present.size, 0);
  } finally {
    record.close();
  }
});

test('presence messages never make the record sync, even while a sync retry waits', async () => {
  const service = new ModelService(engine, 'text');
  const { record, es } = await open(service);
  try {
    void record.presence;
    await record.sync();
    const syncs = service.syncs().length;
    for (let i = 0; i < 50; ++i) es.send(other(`c${i}`, i % 2 ? 'update' : 'join'));
    service.offline = true;
    record.insert(0, 'x'); // fails: a retry waits (0.5 s)
    await until(() => record._retryTimer !== null);
    const offlineSyncs = service.syncs().length;
    service.offline = false;
    for (let i = 0; i < 20; ++i) es.send(other(`d${i}`, 'join'));
    for (let i = 0; i < 50; ++i) await new Promise((r) => setImmediate(r));
    assert.equal(service.syncs().length, offlineSyncs, 'no sync after presence messages');
    assert.ok(offlineSyncs > syncs);
    assert.equal(record.presence.others.length, 70);
  } finally {
    record.close();
  }
});

test('close() and pagehide send presence/leave at once as a keepalive fetch; pageshow announces again', async () => {
  const target = new EventTarget();
  globalThis.addEventListener = target.addEventListener.bind(target);
  globalThis.removeEventListener = target.removeEventListener.bind(target);
  const service = new ModelService(engine, 'text');
  try {
    const { record, es } = await open(service, { presenceClientId: 'tab' });
    const keepalive = [];
    const fetch = record._o.fetch;
    record._o.fetch = (url, init) => {
      if (String(url).endsWith('/leave')) keepalive.push(init.keepalive);
      return fetch(url, init);
    };
    record.presence.set({ name: 'Tab' });
    await until(() => service.present.has('tab'));
    target.dispatchEvent(new Event('pagehide'));
    assert.equal(calls(service, 'leave').length, 1, 'sent synchronously, in the pagehide handler');
    await until(() => !service.present.has('tab'));
    // The closing page still runs: its own leave comes back on the channel, a heartbeat falls due, the
    // subscription reopens. None of it announces it again.
    const sets = calls(service, 'set').length;
    es.send({ editorId: 'body', presence: { type: 'leave', clientId: 'tab', userId: 'user:tok' } });
    record.presence.set({ name: 'Tab', more: 1 });
    es.open();
    for (let i = 0; i < 20; ++i) await new Promise((r) => setImmediate(r));
    assert.equal(calls(service, 'set').length, sets);
    target.dispatchEvent(new Event('pageshow'));
    await until(() => service.present.has('tab'));
    record.close();
    assert.equal(calls(service, 'leave').length, 2);
    assert.deepEqual(calls(service, 'leave')[1].body.data, { organizationId: 'o', documentId: 'd', editorId: 'body', clientId: 'tab' });
    assert.equal(calls(service, 'leave')[1].headers.Authorization, 'Bearer tok');
    assert.deepEqual(keepalive, [true, true]);
    await until(() => !service.present.has('tab'));
  } finally {
    delete globalThis.addEventListener;
    delete globalThis.removeEventListener;
  }
});

test('a reconnect reads who is here again and announces again; a message during the read wins over it', async () => {
  const service = new ModelService(engine, 'text');
  const { record, es } = await open(service, { presenceClientId: 'me' });
  try {
    record.presence.set({ name: 'Me' });
    await until(() => service.present.has('me') && calls(service, 'get').length === 1);
    const sets = calls(service, 'set').length;
    // While disconnected: ana joined (missed), bo left (missed), the service timed this client out.
    service.present.set('bo', { clientId: 'bo', userId: 'u', state: {}, selection: null, updatedAt: 't' });
    es.send(other('bo', 'join'));
    await until(() => record.presence.others.length === 1);
    es.fail(false);
    service.present.delete('bo');
    service.present.delete('me');
    service.present.set('ana', { clientId: 'ana', userId: 'u', state: { name: 'old' }, selection: null, updatedAt: 't' });
    const fetch = record._o.fetch;
    let answerGet;
    const gate = new Promise((r) => (answerGet = r));
    record._o.fetch = async (url, init) => {
      const res = await fetch(url, init);
      if (String(url).endsWith('/get')) await gate;
      return res;
    };
    es.open();
    await until(() => calls(service, 'get').length === 2);
    es.send(other('ana', 'update', { state: { name: 'new' } })); // newer than the get's answer
    answerGet();
    await until(() => service.present.has('me') && record.presence.others.length === 1 && record.presence.others[0].clientId === 'ana');
    assert.deepEqual(record.presence.others[0].state, { name: 'new' });
    assert.ok(calls(service, 'set').length > sets);
    // The service's leave of this very client (a timeout): it announces again.
    service.present.delete('me');
    es.send(other('me', 'leave'));
    await until(() => service.present.has('me'));
  } finally {
    record.close();
  }
});

test('a rate-limited set is sent again later; a refused one is an error event', async () => {
  const service = new ModelService(engine, 'text');
  const { record } = await open(service);
  try {
    const errors = [];
    record.on('error', (e) => errors.push(e.status));
    service.refuseNext(429, 'RESOURCE_EXHAUSTED', 'Too many presence updates; retry later.');
    record.presence.set({ name: 'x' });
    await until(() => service.present.size === 1, 100000);
    assert.deepEqual(errors, []);
    service.refuseNext(400, 'INVALID_ARGUMENT', 'state: more than 4096 bytes.');
    record.presence.set({ big: 'y' });
    await until(() => errors.length === 1);
    assert.deepEqual(errors, ['INVALID_ARGUMENT']);
  } finally {
    record.close();
  }
});

test('a set refused with 429 backs off (1 s doubling to 30 s, 1 s again after an answer); a refused one is not resent by heartbeats', async () => {
  const service = new ModelService(engine, 'text');
  const { record } = await open(service);
  const waits = []; // what the presence asked to wait: heartbeats (10 s) run on the clock, retries at once
  const after = record._after.bind(record);
  record._after = (ms, f) => {
    waits.push(ms);
    return after(ms === 10000 ? ms : 0, f);
  };
  try {
    const presence = record.presence;
    await until(() => calls(service, 'get').length === 1 && presence._getting === null);
    const errors = [];
    record.on('error', (e) => errors.push(e.status));
    for (let i = 0; i < 7; ++i) service.refuseNext(429, 'RESOURCE_EXHAUSTED', 'Too many presence updates; retry later.');
    presence.set({ name: 'x' });
    await until(() => service.present.size === 1, 100000);
    assert.deepEqual(waits, [1000, 2000, 4000, 8000, 16000, 30000, 30000, 10000]);
    service.refuseNext(429, 'RESOURCE_EXHAUSTED', 'Too many presence updates; retry later.');
    presence.set({ name: 'y' });
    await until(() => service.present.get(presence.clientId)?.state.name === 'y', 100000);
    assert.deepEqual(waits.slice(8), [1000, 10000]);
    assert.deepEqual(errors, []);
    service.refuseNext(400, 'INVALID_ARGUMENT', 'state: more than 4096 bytes.');
    presence.set({ name: 'z' });
    await until(() => errors.length === 1);
    for (let i = 0; i < 5; ++i) await new Promise((r) => setImmediate(r));
    assert.deepEqual(waits.slice(10), [], 'no heartbeat resends what was refused');
    assert.equal(presence._heartbeat, null);
  } finally {
    record.close();
  }
});

test('a leave sent while a set is in flight is sent again once that set is answered: no ghost when the set arrives last', async () => {
  const service = new ModelService(engine, 'text');
  const { record } = await open(service);
  const fetch = record._o.fetch;
  let release;
  const held = new Promise((r) => (release = r));
  let holding = true;
  record._o.fetch = async (url, init) => {
    if (holding && String(url).endsWith('/presence/set')) await held; // the set arrives after the leave
    return fetch(url, init);
  };
  try {
    record.presence.set({ name: 'x' });
    await until(() => record.presence._sending);
    record.presence.leave();
    await until(() => calls(service, 'leave').length === 1);
    holding = false;
    release();
    await until(() => calls(service, 'set').length === 1);
    await until(() => calls(service, 'leave').length === 2 && service.present.size === 0);
    // A leave with no set in flight is sent once.
    record.presence.set({ name: 'y' });
    await until(() => service.present.size === 1);
    record.presence.leave();
    await until(() => service.present.size === 0);
    for (let i = 0; i < 5; ++i) await new Promise((r) => setImmediate(r));
    assert.equal(calls(service, 'leave').length, 3);
  } finally {
    record.close();
  }
});
