// Replays one editing trace in one peer CRDT library, the way bench/trace_bench.cpp replays it in
// Folio: the trace's patches as local ops, then encode, then merge the encoding into an empty
// document, then remote keystrokes (trace_bench's remote_keys: each patch as its own remote update,
// applied one by one by a receiver). Each library is used the fastest way its own documentation and
// benchmarks use it:
//
//   yjs            the ES module (`import * as Y from 'yjs'`; its CommonJS build measured 4-5x slower
//                  in Node 20), a fixed clientID (a random 32-bit one costs up to 5 bytes per struct
//                  in the encoding: 311 KB instead of 223 KB on automerge-paper), one transaction per
//                  trace transaction, as an editor binding makes them (dmonad/crdt-benchmarks' B4
//                  replays automerge-paper the same way: it has one patch per transaction). Also
//                  reported: the whole trace in one transaction. Remote keystrokes: a sender doc
//                  (clientID 1) makes one transaction per keystroke and keeps the v1 update that
//                  doc.on('update') hands it (what Yjs's docs and y-websocket send); timed: a fresh
//                  receiver (clientID 2) applying each in turn with Y.applyUpdate (v1: on these
//                  one-keystroke updates, updateV2 + Y.applyUpdateV2 measured 10-25% slower).
//   diamond-types  OpLog.ins / OpLog.del (the API of its npm README and of crdt-benchmarks), with
//                  checkout() of the text timed too, so both sides end with a document to read; merge
//                  is OpLog.addFromBytes + checkout(). Also reported: Doc.ins / Doc.del, which keeps
//                  the text current after every op. Remote keystrokes: after each op of a sender
//                  OpLog, OpLog.getPatchSince(the version before the op) (how its README sends a peer
//                  what it lacks); timed: a fresh OpLog adding each with OpLog.addFromBytes, then one
//                  checkout() of the text, as merge does. Also reported: Doc.mergeBytes per update,
//                  which keeps the text current after every update (as an open editor needs it).
//
// Remote keystrokes' updates are made as trace_bench makes Folio's batches (support/replay.hpp's
// keystroke_batches): a patch's delete, then its insert, each an update of its own (a patch that deletes
// and inserts gives two), so the receiver applies as many updates as Folio's receiver applies batches
// (reported as remote_keys_updates, with their total size). Making them is untimed, applying them timed.
//
// A run times warm-up untimed repetitions first (V8 compiles WebAssembly with its baseline compiler
// and optimises it later; JavaScript is optimised as it runs: the first repetitions of diamond-types
// took 2-3x the later ones), then `reps` timed ones, and keeps the fastest. Before each repetition
// it collects garbage (node --expose-gc) and frees what the last one built (WebAssembly objects are
// freed explicitly), so that no repetition pays for another's garbage. One library per process, so
// that one library's heap never slows another's run.
//
//   node --expose-gc replay.mjs yjs|diamond-types TRACE.json.gz [REPS] [WARMUP]
//
// Prints one JSON object per figure: {trace, lib, figure, value, unit, reps, warmup}.
import fs from 'node:fs';
import zlib from 'node:zlib';
import {
  diamondDocApply, diamondDocReplay, diamondKeystrokePatches, diamondOpLogApply, diamondOpLogReplay, freeOpLogReplay, patchesOf,
  yjsApplyUpdates, yjsKeystrokeUpdates, yjsReplay, yjsText,
} from './replays.js';

const [lib, file, repsArg, warmArg] = process.argv.slice(2);
const reps = Number(repsArg || 5);
const warmup = Number(warmArg || 2);
if (typeof globalThis.gc !== 'function') throw new Error('run with node --expose-gc');
const trace = JSON.parse(zlib.gunzipSync(fs.readFileSync(file)));
const name = file.split('/').pop().replace(/\.json\.gz$/, '');

/** Fastest of `reps` timed runs of build() after `warmup` untimed ones; free() disposes of a result. */
function fastest(build, check, free = () => {}) {
  let ms = Infinity;
  for (let i = 0; i < warmup + reps; i++) {
    globalThis.gc();
    const t0 = process.hrtime.bigint();
    const out = build();
    const t = Number(process.hrtime.bigint() - t0) / 1e6;
    check(out);
    free(out);
    if (i >= warmup) ms = Math.min(ms, t);
  }
  return ms;
}
const report = (figure, value, unit) => console.log(JSON.stringify({ trace: name, lib, figure, value, unit, reps, warmup }));
const check = (what) => (text) => { if (text !== trace.endContent) throw new Error(`${lib} ${what}: the text is not endContent`); };

if (lib === 'yjs') {
  const Y = await import('yjs');
  const checked = (d) => check('replay')(yjsText(d));
  const destroy = (d) => d.destroy();
  report('local_replay', fastest(() => yjsReplay(Y, trace, true), checked, destroy), 'ms');
  report('local_replay_one_transaction', fastest(() => yjsReplay(Y, trace, false), checked, destroy), 'ms');
  const doc = yjsReplay(Y, trace, true);
  const update = Y.encodeStateAsUpdate(doc);
  report('encoded_bytes', update.length, 'B');
  report('encoded_bytes_v2', Y.encodeStateAsUpdateV2(doc).length, 'B');
  const merge = () => {
    const d = new Y.Doc();
    d.clientID = 2;
    Y.applyUpdate(d, update);
    return d;
  };
  report('remote_merge', fastest(merge, (d) => check('merge')(yjsText(d)), destroy), 'ms');
  const updates = yjsKeystrokeUpdates(Y, patchesOf(trace));
  report('remote_keys_updates', updates.length, 'updates');
  report('remote_keys_bytes', updates.reduce((n, u) => n + u.length, 0), 'B');
  report('remote_keys', fastest(() => yjsApplyUpdates(Y, updates), (d) => check('remote keys')(yjsText(d)), destroy), 'ms');
} else if (lib === 'diamond-types') {
  const dt = await import('diamond-types-node');
  const patches = patchesOf(trace);
  report('local_replay', fastest(() => diamondOpLogReplay(dt, patches), (r) => check('replay')(r.branch.get()), freeOpLogReplay), 'ms');
  report('local_replay_doc', fastest(() => diamondDocReplay(dt, patches), (d) => check('replay')(d.get()), (d) => d.free()), 'ms');
  const built = diamondOpLogReplay(dt, patches);
  const bytes = built.oplog.toBytes();
  freeOpLogReplay(built);
  report('encoded_bytes', bytes.length, 'B');
  const merge = () => {
    const oplog = new dt.OpLog('b');
    oplog.addFromBytes(bytes);
    return { oplog, branch: oplog.checkout() };
  };
  report('remote_merge', fastest(merge, (r) => check('merge')(r.branch.get()), freeOpLogReplay), 'ms');
  const updates = diamondKeystrokePatches(dt, patches);
  report('remote_keys_updates', updates.length, 'updates');
  report('remote_keys_bytes', updates.reduce((n, u) => n + u.length, 0), 'B');
  report('remote_keys', fastest(() => diamondOpLogApply(dt, updates), (r) => check('remote keys')(r.branch.get()), freeOpLogReplay), 'ms');
  report('remote_keys_doc', fastest(() => diamondDocApply(dt, updates), (d) => check('remote keys, Doc')(d.get()), (d) => d.free()), 'ms');
} else {
  throw new Error(`unknown library ${lib}: yjs or diamond-types`);
}
