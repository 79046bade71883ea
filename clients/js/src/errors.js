// How the client reports failure.
//
// FolioError: anything from the service or the network, and bytes that do not decode. `status` is the
// JSON error's status string ("PERMISSION_DENIED", "ABORTED", ...: docs/API.md), `httpStatus` the HTTP
// status (0 when no HTTP answer came: the network, or a local decoding failure), `message` the
// service's message as it sent it.
// Local misuse of a record (a position past the end, a value of the wrong shape) throws RangeError or
// TypeError with the engine's message ("[folio.range] ..."), as the engine's own exceptions do.

export class FolioError extends Error {
  constructor(message, { status = 'UNKNOWN', httpStatus = 0, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'FolioError';
    this.status = status;
    this.httpStatus = httpStatus;
  }
}

/** The exception for a message of the engine ("[folio.range] position past the end"). */
export function engineError(message) {
  if (message.startsWith('[folio.range]')) return new RangeError(message);
  return new TypeError(message);
}
