// The package's entry point, also served as /client/folio.js (import { connect } from '/client/folio.js').
export * from './src/index.js';
