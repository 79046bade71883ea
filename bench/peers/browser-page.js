// The in-page half of bench/peers/browser.mjs: what a Chromium page runs, loaded from the driver's
// intercepted origin (nothing here touches the network but that origin and, for live(), the Folio
// stack's own origin).
//
// replay(lib): the trace's patches as local edits through each library's JavaScript API, the way
// bench/peers/replay.mjs replays them in Node (the same choices, for the same reasons):
//   folio          the JS client's engine directly (clients/js: createEngine, Replica.create(engine,
//                  'text'), insert / delete at code-point positions, one call per patch): no network,
//                  the same calls a connected record makes for a local edit, without the events;
//   diamond-types  diamond-types-web (wasm-pack's web build): OpLog.ins / OpLog.del, then checkout()
//                  (timed: both sides end with a document to read); also Doc.ins / Doc.del;
//   yjs            the ES module (bundled for the page), a fixed clientID, one transaction per trace
//                  transaction; also the whole trace in one transaction.
// Each run: collect garbage (Chromium runs with --js-flags=--expose-gc), time the build, check the
// text against the trace's endContent (untimed), free what WebAssembly holds. `warmup` untimed runs
// first (V8 tiers WebAssembly and JavaScript up as they run), then `reps` timed ones.
//
// live(...): a page connected to the Folio stack with a client token, a textarea bound to the record,
// and each remote change reported to the driver (window.folioVisible, a DevTools binding) once the
// textarea shows it.

import { diamondDocReplay, diamondOpLogReplay, freeOpLogReplay, patchesOf, yjsReplay, yjsText } from './replays.js';

/** All timed runs (ms) of `build` after `warmup` untimed ones. */
function timed(build, check, free, reps, warmup) {
  const runs = [];
  for (let i = 0; i < warmup + reps; ++i) {
    globalThis.gc();
    const t0 = performance.now();
    const out = build();
    const t = performance.now() - t0;
    check(out);
    free(out);
    if (i >= warmup) runs.push(t);
  }
  return runs;
}

export async function replay(lib, traceUrl, reps, warmup) {
  if (typeof globalThis.gc !== 'function') throw new Error('run Chromium with --js-flags=--expose-gc');
  const res = await fetch(traceUrl);
  const trace = await new Response(res.body.pipeThrough(new DecompressionStream('gzip'))).json();
  const patches = patchesOf(trace);
  const check = (what) => (text) => {
    if (text !== trace.endContent) throw new Error(`${lib} ${what}: the text is not the trace's endContent`);
  };
  const figures = {};
  if (lib === 'folio') {
    const { createEngine, Replica } = await import('/client/folio.js');
    const engine = await createEngine();
    const build = () => {
      const r = Replica.create(engine, 'text');
      for (const [pos, del, ins] of patches) {
        if (del) r.delete(pos, del);
        if (ins) r.insert(pos, ins);
      }
      return r;
    };
    figures.local_replay = timed(build, (r) => check('replay')(r.value), (r) => r.free(), reps, warmup);
  } else if (lib === 'diamond-types') {
    const dt = await import('/bench/diamond-types-web/dt.js');
    await dt.default(); // fetches and instantiates dt_bg.wasm beside dt.js
    figures.local_replay = timed(() => diamondOpLogReplay(dt, patches), (r) => check('replay')(r.branch.get()), freeOpLogReplay, reps, warmup);
    figures.local_replay_doc = timed(() => diamondDocReplay(dt, patches), (d) => check('replay')(d.get()), (d) => d.free(), reps, warmup);
  } else if (lib === 'yjs') {
    const Y = await import('/bench/yjs.js');
    const checked = (d) => check('replay')(yjsText(d));
    figures.local_replay = timed(() => yjsReplay(Y, trace, true), checked, (d) => d.destroy(), reps, warmup);
    figures.local_replay_one_transaction = timed(() => yjsReplay(Y, trace, false), checked, (d) => d.destroy(), reps, warmup);
  } else {
    throw new Error(`unknown library ${lib}: folio, diamond-types or yjs`);
  }
  return { patches: patches.length, figures };
}

/**
 * Connects to the record with the client token, binds a textarea to it, and calls
 * window.folioVisible(value) after every remote change, once the textarea shows it.
 */
export async function live(baseUrl, token, ids) {
  const { connect, bindTextarea } = await import('/client/folio.js');
  const record = await connect({ baseUrl, token, ...ids });
  const textarea = document.createElement('textarea');
  document.body.append(textarea);
  bindTextarea(record, textarea); // its change listener runs first: registered first
  record.on('change', ({ remote }) => {
    if (remote) globalThis.folioVisible(textarea.value);
  });
  record.on('error', (e) => globalThis.folioVisible(`error: ${e.status} ${e.message}`));
  return record.value;
}
