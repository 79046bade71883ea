// FetchEventSource: an EventSource over fetch (Node has none), with the browser's behaviour the client
// relies on: open, data-only events, reconnection after a dropped stream, CLOSED after a refusal.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { FetchEventSource } from '../folio.js';
import { until } from './model.js';

/** A fetch answering each call with the next of `answers`: [status, contentType, chunks] or an Error. */
function scripted(answers) {
  const calls = [];
  const fetch = async (url, init) => {
    calls.push({ url, init });
    const a = answers.shift();
    if (!a) return new Promise(() => {}); // never answers
    if (a instanceof Error) throw a;
    const [status, type, chunks] = a;
    const body = new ReadableStream({
      start(c) {
        for (const chunk of chunks) c.enqueue(new TextEncoder().encode(chunk));
        c.close();
      },
    });
    return new Response(body, { status, headers: { 'Content-Type': type } });
  };
  return { fetch, calls };
}

test('events: data lines joined, comments and other fields ignored, CRLF and split chunks', async () => {
  const { fetch, calls } = scripted([[200, 'text/event-stream; charset=utf-8', [': hi\n\n', 'data: {"a":', '1}\n\nid: 7\r\nevent: x\r\ndata: one\r\ndata:two\r', '\n\r\n']]]);
  const es = new FetchEventSource('http://x/s?q=1', { fetch, headers: { 'x-folio-api-key': 'k' } });
  const seen = [];
  es.onopen = () => seen.push('open');
  es.onmessage = (e) => seen.push(e.data);
  es.onerror = () => {
    seen.push(`error ${es.readyState}`);
    es.close(); // the stream ended: stop the reconnection
  };
  await until(() => seen.length === 4);
  assert.deepEqual(seen, ['open', '{"a":1}', 'one\ntwo', 'error 0']);
  assert.equal(calls[0].url, 'http://x/s?q=1');
  assert.deepEqual(calls[0].init.headers, { Accept: 'text/event-stream', 'x-folio-api-key': 'k' });
});

test('a refusal closes it for good; a network failure reconnects', async () => {
  const refused = new FetchEventSource('http://x/s', { fetch: scripted([[403, 'application/json', ['{"error":{}}']]]).fetch });
  let errors = 0;
  refused.onerror = () => ++errors;
  await until(() => errors === 1);
  assert.equal(refused.readyState, 2);

  const { fetch, calls } = scripted([new TypeError('fetch failed'), [200, 'text/event-stream', ['data: back\n\n']]]);
  const es = new FetchEventSource('http://x/s', { fetch });
  const seen = [];
  es.onerror = () => seen.push(`error ${es.readyState}`);
  es.onopen = () => seen.push('open');
  es.onmessage = (e) => {
    seen.push(e.data);
    es.close();
  };
  await until(() => seen.includes('back'), 1e6);
  assert.deepEqual(seen, ['error 0', 'open', 'back']);
  assert.equal(calls.length, 2);
});

// WebSocketEventSource (src/websocket-event-source.js) against a scripted WebSocket.
class FakeWebSocket {
  static instances = [];
  constructor(url) {
    this.url = url;
    this.closed = false;
    FakeWebSocket.instances.push(this);
  }
  close() { this.closed = true; }
}

test('WebSocketEventSource: ws URL, open and text messages, a drop reconnects, a refusal closes, close() stops', async () => {
  const { WebSocketEventSource } = await import('../src/websocket-event-source.js');
  const seen = [];
  const es = new WebSocketEventSource('http://folio.test/v2/crdt/subscribe?token=t', { WebSocket: FakeWebSocket });
  es.onopen = () => seen.push(`open ${es.readyState}`);
  es.onmessage = (m) => seen.push(`message ${m.data}`);
  es.onerror = () => seen.push(`error ${es.readyState}`);
  const first = FakeWebSocket.instances.at(-1);
  assert.equal(first.url, 'ws://folio.test/v2/crdt/subscribe?token=t');
  assert.equal(es.readyState, 0);
  first.onopen();
  first.onmessage({ data: '{"a":1}' });
  first.onmessage({ data: new ArrayBuffer(2) }); // not text: not a message
  first.onclose(); // dropped after it opened: reconnects by itself
  assert.deepEqual(seen, ['open 1', 'message {"a":1}', 'error 0']);
  await new Promise((r) => setTimeout(r, 1100));
  const second = FakeWebSocket.instances.at(-1);
  assert.notEqual(second, first);
  first.onmessage({ data: 'late' }); // the old socket's: ignored
  second.onclose(); // never opened: refused or unreachable, closed for the client to ask why
  assert.deepEqual(seen.slice(3), ['error 2']);
  assert.equal(es.readyState, 2);
  const third = new WebSocketEventSource('https://folio.test/s', { WebSocket: FakeWebSocket });
  assert.equal(FakeWebSocket.instances.at(-1).url, 'wss://folio.test/s');
  third.close();
  assert.equal(FakeWebSocket.instances.at(-1).closed, true);
  FakeWebSocket.instances.at(-1).onclose();
  assert.equal(third.readyState, 2);
});
