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
//  * While an input method composes (view.composing or view.compositionStarted), changes from
//    elsewhere wait: a transaction changing the document mid-composition breaks it (the reading stays
//    beside the composed text). They are kept as one ChangeSet `pending` on the editor's document,
//    with the invariant record.value == pending applied to the document: a local change made
//    meanwhile goes to the record mapped over them (changes.map(pending)) and they are mapped over it;
//    once the composition ended they are dispatched as one remote transaction: at compositionend
//    (the DOM event, after CodeMirror's own handlers cleared its flags, or the EditContext's where
//    CodeMirror uses one), at the next view update, or, when CodeMirror clears its flags later with
//    no update (its kludges for missed compositionend events), at checks made after compositionend at
//    growing intervals (capped), for as long as the flags stay set and no new composition starts.
// The editor must start with the record's value (doc: record.value); one that does not is set to it.
// Cost: converting positions walks the text before them (O(n) a change); the record's change itself
// is O(n) too (engine.js: tracked changes).

import { Annotation, ChangeSet, Transaction } from '@codemirror/state';
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
    this.pending = null; // remote changes not shown yet (while composing), a ChangeSet on the document
    this.flushQueued = false;
    this.endedCheck = null; // the timer checking CodeMirror's flags after a compositionend
    this.endedDelay = 0;
    // Where CodeMirror uses an EditContext, composition events fire on it (its listener first: ours,
    // added later, sees the flags cleared).
    this.editContext = view.contentDOM?.editContext ?? null;
    this.onContextEnd = () => this.compositionEnded();
    this.editContext?.addEventListener?.('compositionend', this.onContextEnd);
    this.onChange = (e) => {
      if (this.ours) return;
      if (this.pending || this.composing()) this.wait(e.changes);
      else this.fromRecord(e.changes);
    };
    record.on('change', this.onChange);
    if (view.state.doc.toString() !== record.value) queueMicrotask(() => this.fromRecord(null));
  }

  /** True while an input method composes in the view. */
  composing() {
    return !!(this.view.composing || this.view.compositionStarted);
  }

  /** The view plugin's update: local document changes go to the record. */
  update(update) {
    if (update.docChanged) {
      for (const tr of update.transactions) {
        if (!tr.docChanged || tr.annotation(folioRemote)) continue;
        let changes = tr.changes;
        let before = tr.startState.doc;
        if (this.pending) {
          // The record holds the waiting changes: the local change goes over them, they over it.
          before = this.pending.apply(before);
          changes = tr.changes.map(this.pending);
          this.pending = this.pending.map(tr.changes, true);
        }
        this.toRecord(changes, before);
      }
    }
    if (this.pending && !this.composing()) this.queueFlush();
  }

  /** Makes `changes` (a ChangeSet on `before`, the record's value as a CodeMirror Text) on the record. */
  toRecord(changes, before) {
    this.ours = true;
    try {
      const after = changes.apply(before).toString();
      const was = before.toString();
      // Each change at its place in the document as the earlier ones left it: fromB in the new text.
      changes.iterChanges((fromA, toA, fromB, _toB, inserted) => {
        const at = codePoints(after, fromB);
        const removed = codePoints(was, toA) - codePoints(was, fromA);
        if (removed > 0) this.record.delete(at, removed);
        if (inserted.length > 0) this.record.insert(at, inserted.toString());
      });
    } finally {
      this.ours = false;
    }
  }

  /** A change from elsewhere while composing: added to `pending` (`changes` in code points; null: the whole value). */
  wait(changes) {
    const doc = this.view.state.doc;
    const shownBefore = this.pending ? this.pending.apply(doc) : doc; // the record's value before the change
    const was = shownBefore.toString();
    const spec = changes
      ? changes.map((c) => ({ from: utf16Index(was, c.from), to: utf16Index(was, c.to), insert: c.insert }))
      : [{ from: 0, to: was.length, insert: this.record.value }];
    const set = ChangeSet.of(spec, was.length);
    this.pending = this.pending ? this.pending.compose(set) : set;
    if (!this.composing()) this.queueFlush();
  }

  /**
   * A composition ended (compositionend): the waiting changes are shown once CodeMirror's flags are
   * clear, however long it takes to clear them (see the top of this file); a compositionstart stops
   * the checks (that composition's end starts them again).
   */
  compositionEnded() {
    this.stopEndedCheck();
    if (!this.pending) return;
    if (!this.composing()) {
      this.queueFlush();
      return;
    }
    this.endedDelay = Math.min(this.endedDelay ? this.endedDelay * 2 : 20, 500);
    this.endedCheck = setTimeout(() => {
      this.endedCheck = null;
      this.compositionEnded();
    }, this.endedDelay);
  }

  compositionStarted() {
    this.stopEndedCheck();
    this.endedDelay = 0;
  }

  stopEndedCheck() {
    if (this.endedCheck !== null) clearTimeout(this.endedCheck);
    this.endedCheck = null;
  }

  /** Shows the waiting changes once no composition runs (a view cannot dispatch during its update). */
  queueFlush() {
    if (this.flushQueued) return;
    this.flushQueued = true;
    setTimeout(() => {
      this.flushQueued = false;
      if (!this.pending) return;
      if (this.composing()) return; // the next update or compositionend after the composition flushes
      this.stopEndedCheck();
      this.endedDelay = 0;
      const pending = this.pending;
      this.pending = null;
      this.view.dispatch({ changes: pending, annotations: [folioRemote.of(true), Transaction.addToHistory.of(false)] });
      if (this.view.state.doc.toString() !== this.record.value) this.fromRecord(null);
    }, 0);
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
    this.pending = null;
    this.stopEndedCheck();
    this.editContext?.removeEventListener?.('compositionend', this.onContextEnd);
    this.record.off('change', this.onChange);
  }
}

/** The CodeMirror extension binding an editor to a text record. */
export function folioSync(record) {
  return ViewPlugin.define((view) => new FolioCodeMirrorSync(record, view), {
    eventHandlers: {
      compositionstart() {
        this.compositionStarted();
      },
      compositionend() {
        this.compositionEnded();
      },
    },
  });
}
