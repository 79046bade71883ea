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
