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
