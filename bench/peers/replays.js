// bench/peers/replays.js — how each peer replays an editing trace, shared by the Node harness
// (replay.mjs) and the browser page (browser-page.js), so both run exactly the same calls. The
// library's module is passed in (Node imports the npm package, the page a browser build of it), and
// nothing here is timed: the callers time these functions and check the text against endContent.

/** The trace's patches in order, [position, deleteCount, insertText] each. */
export const patchesOf = (trace) => trace.txns.flatMap((t) => t.patches);

/** Yjs: Y.Text insert/delete under a fixed clientID, one transaction per trace transaction (or one for all). */
export function yjsReplay(Y, trace, perTxn) {
  const d = new Y.Doc();
  d.clientID = 1;
  const t = d.getText('t');
  const apply = (ps) => {
    for (const [pos, del, ins] of ps) {
      if (del) t.delete(pos, del);
      if (ins) t.insert(pos, ins);
    }
  };
  if (perTxn) for (const txn of trace.txns) d.transact(() => apply(txn.patches));
  else d.transact(() => { for (const txn of trace.txns) apply(txn.patches); });
  return d;
}
export const yjsText = (d) => d.getText('t').toString();

/** diamond-types through OpLog.ins/del (its README's API), the text checked out: { oplog, branch }. */
export function diamondOpLogReplay(dt, patches) {
  const oplog = new dt.OpLog('a');
  for (const [pos, del, ins] of patches) {
    if (del) oplog.del(pos, del);
    if (ins) oplog.ins(pos, ins);
  }
  return { oplog, branch: oplog.checkout() };
}

/** diamond-types through Doc.ins/del, which keeps a branch up to date as it goes. */
export function diamondDocReplay(dt, patches) {
  const d = new dt.Doc('a');
  for (const [pos, del, ins] of patches) {
    if (del) d.del(pos, del);
    if (ins) d.ins(pos, ins);
  }
  return d;
}
export const freeOpLogReplay = (r) => { r.branch.free(); r.oplog.free(); };

// ---- remote keystrokes: one writer's edits as remote updates, applied one by one by a receiver ----
// The same workload as trace_bench's remote_keys: each patch's delete, then its insert, becomes an update
// of its own (a patch that deletes and inserts gives two, as support/replay.hpp's keystroke_batches makes
// Folio's batches), in the trace's order. Making the updates is untimed; applying them is the figure.

/** Yjs: the v1 update of each transaction of a sender (clientID 1), as doc.on('update') hands it to a provider. */
export function yjsKeystrokeUpdates(Y, patches) {
  const d = new Y.Doc();
  d.clientID = 1;
  const t = d.getText('t');
  const updates = [];
  d.on('update', (u) => updates.push(u));
  for (const [pos, del, ins] of patches) {
    if (del) d.transact(() => t.delete(pos, del));
    if (ins) d.transact(() => t.insert(pos, ins));
  }
  d.destroy();
  return updates;
}

/** Yjs: a fresh receiver (clientID 2, its text type defined, as a bound editor has it) applying each update with Y.applyUpdate. */
export function yjsApplyUpdates(Y, updates) {
  const d = new Y.Doc();
  d.clientID = 2;
  d.getText('t');
  for (const u of updates) Y.applyUpdate(d, u);
  return d;
}

/** diamond-types: after each op of a sender OpLog, OpLog.getPatchSince(the version before it), as its README sends a peer what it lacks. */
export function diamondKeystrokePatches(dt, patches) {
  const oplog = new dt.OpLog('a');
  const out = [];
  let v = oplog.getLocalVersion();
  const take = () => {
    out.push(oplog.getPatchSince(v));
    v = oplog.getLocalVersion();
  };
  for (const [pos, del, ins] of patches) {
    if (del) { oplog.del(pos, del); take(); }
    if (ins) { oplog.ins(pos, ins); take(); }
  }
  oplog.free();
  return out;
}

/** diamond-types: a fresh OpLog adding each patch with OpLog.addFromBytes, the text checked out once at the end: { oplog, branch }. */
export function diamondOpLogApply(dt, updates) {
  const oplog = new dt.OpLog('b');
  for (const u of updates) oplog.addFromBytes(u);
  return { oplog, branch: oplog.checkout() };
}

/** diamond-types: a fresh Doc merging each patch with Doc.mergeBytes, which keeps its text current after every update. */
export function diamondDocApply(dt, updates) {
  const d = new dt.Doc('b');
  for (const u of updates) d.mergeBytes(u);
  return d;
}
