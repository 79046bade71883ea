// Replays one editing trace in peer CRDT libraries (Yjs, diamond-types through Node), the way
// bench/trace_bench.cpp replays it in Folio: one local op per patch, then encode, then merge the
// encoding into an empty document. Prints one JSON object per figure; bench/peers.sh turns them into
// ratios against the gap buffer measured in the same run. Fastest of `reps` runs.
import fs from 'node:fs';
import zlib from 'node:zlib';
import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const Y = require('yjs');
const DT = require('diamond-types-node');

const [file, repsArg] = process.argv.slice(2);
const reps = Number(repsArg || 3);
const trace = JSON.parse(zlib.gunzipSync(fs.readFileSync(file)));
const patches = trace.txns.flatMap((t) => t.patches);
const name = file.split('/').pop().replace(/\.json\.gz$/, '');

function best(fn) {
  let ms = Infinity, out;
  for (let i = 0; i < reps; i++) {
    const t0 = process.hrtime.bigint();
    out = fn();
    ms = Math.min(ms, Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return [ms, out];
}
const report = (lib, figure, value, unit) => console.log(JSON.stringify({ trace: name, lib, figure, value, unit }));
const check = (lib, text) => { if (text !== trace.endContent) throw new Error(`${lib}: replay does not give endContent`); };

{ // Yjs: one transaction per patch, as an editor binding makes them.
  const [ms, doc] = best(() => {
    const d = new Y.Doc();
    const t = d.getText('t');
    for (const [pos, del, ins] of patches) {
      if (del) t.delete(pos, del);
      if (ins) t.insert(pos, ins);
    }
    return d;
  });
  check('yjs', doc.getText('t').toString());
  report('yjs', 'local_replay', ms, 'ms');
  const update = Y.encodeStateAsUpdate(doc);
  report('yjs', 'encoded_bytes', update.length, 'B');
  report('yjs', 'encoded_bytes_v2', Y.encodeStateAsUpdateV2(doc).length, 'B');
  const [mms, merged] = best(() => { const d = new Y.Doc(); Y.applyUpdate(d, update); return d; });
  check('yjs merge', merged.getText('t').toString());
  report('yjs', 'remote_merge', mms, 'ms');
}
{ // diamond-types (Rust through WebAssembly).
  const [ms, doc] = best(() => {
    const d = new DT.Doc('agent');
    for (const [pos, del, ins] of patches) {
      if (del) d.del(pos, del);
      if (ins) d.ins(pos, ins);
    }
    return d;
  });
  check('diamond-types', doc.get());
  report('diamond-types', 'local_replay', ms, 'ms');
  const bytes = doc.toBytes();
  report('diamond-types', 'encoded_bytes', bytes.length, 'B');
  const [mms, merged] = best(() => { const d = new DT.Doc('other'); d.mergeBytes(bytes); return d; });
  check('diamond-types merge', merged.get());
  report('diamond-types', 'remote_merge', mms, 'ms');
}
