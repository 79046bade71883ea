// A CodeMirror 6 editor showing a text record, both ways (import from '@folio/client/codemirror').
//
//   const record = await connect({ ... });
//   new EditorView({ state: EditorState.create({ doc: record.value, extensions: [folioSync(record)] }), parent });
//
//  * Local transactions that change the document become record edits: each change of the
//    transaction, in order, a delete and an insert at code-point positions.
//  * Changes from elsewhere (remote ones, or the application's own record edits) become one
//    transaction of the same changes, in UTF-16 positions, annotated `folioRemote` and kept out of the
//    undo history; CodeMirror maps the selection through them.
// The editor must start with the record's value (doc: record.value); one that does not is set to it.
// Cost: converting positions walks the text before them (O(n) a change); the record's change itself
// is O(n) too (engine.js: tracked changes).

import { Annotation, Transaction } from '@codemirror/state';
import { ViewPlugin } from '@codemirror/view';
import { codePoints, utf16Index } from './positions.js';

/** Marks the transactions that bring changes from the record (not the user's). */
export const folioRemote = Annotation.define();

/**
 * Keeps a view (anything with `state` and `dispatch`: an EditorView) and a text record in step.
 * folioSync() wraps it as a view plugin; use it directly only without an EditorView (tests).
 */
export class FolioCodeMirrorSync {
  constructor(record, view) {
    if (record.type !== 'text') throw new TypeError(`the CodeMirror binding needs a text record; this one is ${record.type}`);
    this.record = record;
    this.view = view;
    this.ours = false;
    this.onChange = (e) => {
      if (!this.ours) this.fromRecord(e.changes);
    };
    record.on('change', this.onChange);
    if (view.state.doc.toString() !== record.value) queueMicrotask(() => this.fromRecord(null));
  }

  /** The view plugin's update: local document changes go to the record. */
  update(update) {
    if (!update.docChanged) return;
    for (const tr of update.transactions) {
      if (!tr.docChanged || tr.annotation(folioRemote)) continue;
      this.ours = true;
      try {
        const after = tr.newDoc.toString();
        const before = tr.startState.doc.toString();
        // Each change at its place in the document as the earlier ones left it: fromB in the new text.
        tr.changes.iterChanges((fromA, toA, fromB, _toB, inserted) => {
          const at = codePoints(after, fromB);
          const removed = codePoints(before, toA) - codePoints(before, fromA);
          if (removed > 0) this.record.delete(at, removed);
          if (inserted.length > 0) this.record.insert(at, inserted.toString());
        });
      } finally {
        this.ours = false;
      }
    }
  }

  /** Shows the record's change (`changes` in code points of the value shown; null: the whole value). */
  fromRecord(changes) {
    const doc = this.view.state.doc.toString();
    const value = this.record.value;
    if (doc === value) return;
    const whole = [{ from: 0, to: doc.length, insert: value }];
    let spec = changes ? changes.map((c) => ({ from: utf16Index(doc, c.from), to: utf16Index(doc, c.to), insert: c.insert })) : whole;
    // The positions are of the value the editor showed; an editor that showed something else (it
    // started with another text) takes the whole value.
    if (spec !== whole && this.view.state.update({ changes: spec }).newDoc.toString() !== value) spec = whole;
    this.view.dispatch({ changes: spec, annotations: [folioRemote.of(true), Transaction.addToHistory.of(false)] });
  }

  destroy() {
    this.record.off('change', this.onChange);
  }
}

/** The CodeMirror extension binding an editor to a text record. */
export function folioSync(record) {
  return ViewPlugin.define((view) => new FolioCodeMirrorSync(record, view));
}
