// WebSocketEventSource: the EventSource interface connect() uses, over a WebSocket to the same
// subscribe URL (docs/API.md, crdt/subscribe: Nchan answers EventSource, WebSocket and long-poll).
//
// Why: browsers open at most six HTTP/1.1 connections per origin and profile, and an EventSource holds
// one for as long as it is open; a page with three records, opened in two tabs, holds all six, and
// every request after that (a sync, a presence call) waits forever. WebSockets have a pool of their own
// (Chromium: 255). Over HTTP/2 (TLS) the EventSource shares one connection and this is not needed.
//
// The model: readyState 0 (connecting), 1 (open), 2 (closed), as EventSource. A socket that opened
// and then dropped reconnects by itself after RECONNECT_MS (readyState 0 and an `error` meanwhile, as
// an EventSource does); one that never opened (refused: a bad token, another origin; or unreachable)
// closes (readyState 2 and an `error`), after which connect() asks the service why over HTTP and
// resubscribes with backoff. Only text frames are messages. The token goes in the URL (`token`): a
// browser's WebSocket sends no headers, which connect() knows of any EventSource other than
// FetchEventSource. The page's origin must be one the operator allows (a WebSocket always sends an
// Origin; docs/OPERATIONS.md, CORS).

const RECONNECT_MS = 1000;

export class WebSocketEventSource {
  /** `url`: the subscribe URL (http or https; ws or wss is used). init.WebSocket: the constructor (default the global one). */
  constructor(url, init = {}) {
    this.url = String(url);
    this._WebSocket = init.WebSocket ?? globalThis.WebSocket;
    if (typeof this._WebSocket !== 'function') throw new TypeError('no WebSocket here: pass one as init.WebSocket');
    this.readyState = 0;
    this.onopen = this.onmessage = this.onerror = null;
    this._socket = null;
    this._timer = null;
    this._connect();
  }

  _connect() {
    const u = new URL(this.url);
    u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
    const socket = new this._WebSocket(u.href);
    this._socket = socket;
    let opened = false;
    socket.onopen = () => {
      if (this._socket !== socket || this.readyState === 2) return;
      opened = true;
      this.readyState = 1;
      this.onopen?.({});
    };
    socket.onmessage = (ev) => {
      if (this._socket !== socket || this.readyState === 2 || typeof ev.data !== 'string') return;
      this.onmessage?.({ data: ev.data });
    };
    socket.onclose = () => {
      if (this._socket !== socket || this.readyState === 2) return;
      if (!opened) {
        this.readyState = 2; // refused or unreachable: connect() asks why over HTTP
        this.onerror?.({});
        return;
      }
      this.readyState = 0;
      this.onerror?.({});
      this._timer = setTimeout(() => {
        this._timer = null;
        if (this.readyState !== 2) this._connect();
      }, RECONNECT_MS);
    };
  }

  close() {
    this.readyState = 2;
    if (this._timer !== null) clearTimeout(this._timer);
    this._timer = null;
    try {
      this._socket?.close();
    } catch {
      // already closing
    }
  }
}
