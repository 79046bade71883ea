// An EventSource over fetch, for where there is none (Node): connect() uses it when neither the
// `EventSource` option nor globalThis.EventSource is there. It behaves as a browser's does for what the
// client uses: `open` once the answer is a 200 event stream, `message` per event's data, `error` and a
// reconnection a second later when the stream ends or the network fails, and `error` with readyState
// CLOSED (no reconnection) when the answer is anything else — an HTTP refusal. Unlike a browser's it
// can send headers (`new FetchEventSource(url, { headers })`). Comments, `event:`, `id:` and `retry:`
// lines are read and ignored (Folio sends data-only events and resumes from nothing: docs/API.md).

const CONNECTING = 0;
const OPEN = 1;
const CLOSED = 2;
const RECONNECT_MS = 1000;

export class FetchEventSource {
  constructor(url, { headers, fetch = globalThis.fetch } = {}) {
    this.url = String(url);
    this.readyState = CONNECTING;
    this.onopen = this.onmessage = this.onerror = null;
    this._headers = headers ?? {};
    this._fetch = fetch;
    this._abort = null;
    this._timer = null;
    this._connect();
  }

  close() {
    this.readyState = CLOSED;
    this._abort?.abort();
    clearTimeout(this._timer);
  }

  async _connect() {
    const abort = new AbortController();
    this._abort = abort;
    let res;
    try {
      res = await this._fetch(this.url, { headers: { Accept: 'text/event-stream', ...this._headers }, signal: abort.signal });
    } catch {
      return this._lost();
    }
    if (this.readyState === CLOSED) return abort.abort();
    if (res.status !== 200 || !(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
      abort.abort();
      this.readyState = CLOSED;
      this.onerror?.({ type: 'error' });
      return;
    }
    this.readyState = OPEN;
    this.onopen?.({ type: 'open' });
    const decoder = new TextDecoder();
    let buffer = '';
    let data = [];
    try {
      for await (const chunk of res.body) {
        buffer += decoder.decode(chunk, { stream: true });
        let nl;
        while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
          if (nl === buffer.length - 1 && buffer[nl] === '\r') break; // maybe the first half of CR LF
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + (buffer.startsWith('\r\n', nl) ? 2 : 1));
          if (line === '') {
            if (data.length && this.readyState === OPEN) this.onmessage?.({ type: 'message', data: data.join('\n') });
            data = [];
          } else if (line.startsWith('data:')) {
            data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
          }
        }
      }
    } catch {
      // the connection dropped
    }
    this._lost();
  }

  _lost() {
    if (this.readyState === CLOSED) return;
    this.readyState = CONNECTING;
    this.onerror?.({ type: 'error' });
    if (this.readyState === CLOSED) return;
    this._timer = setTimeout(() => this._connect(), RECONNECT_MS);
  }
}
