// Folio's JavaScript client: a record of the Folio service, kept live in the browser (or Node) by the
// engine compiled to WebAssembly. README.md has the guide; index.d.ts the exact API.
export { connect, FolioRecord } from './client.js';
export { FolioError } from './errors.js';
export { FetchEventSource } from './fetch-event-source.js';
export { WebSocketEventSource } from './websocket-event-source.js';
export { createEngine, loadEngine, Replica } from './engine.js';
export { bindTextarea, presenceColor, presenceList, presenceName, presenceWhere } from './textarea.js';
export { indexedDbPersistence } from './persistence.js';
export { canonicalJson } from './json.js';
