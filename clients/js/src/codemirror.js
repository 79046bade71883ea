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
//
// folioCursors(record): the others' carets and selections (record.presence) as decorations: a mark
// over each selection in its user's colour and a caret widget with the user's name (presenceName,
// presenceColor: state.name, state.color). Their anchors are resolved with record.indexOf each time
// the presence or the record changes (a redraw, at most once a task, after the editor shows the
// change); between redraws CodeMirror maps the decorations through the editor's changes. While the
// editor's document differs from the record's value (remote changes waiting for a composition to
// end) the redraw waits. The editor's main selection is published as anchors (record.anchorAt)
// through record.presence.select whenever it or the document changes, once the page announced
// itself (record.presence.set); an anchor names the character after the position, so typing at a
// caret leaves its anchor as it is and sends nothing. Cost: O(n + others) a redraw or publish
// (positions are converted over the text).

import { Annotation, ChangeSet, StateEffect, StateField, Transaction } from '@codemirror/state';
import { Decoration, EditorView, ViewPlugin, WidgetType } from '@codemirror/view';
import { codePoints, utf16Index } from './positions.js';
import { presenceColor, presenceName } from './presence.js';

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

// ---- remote cursors -------------------------------------------------------------------------------------

/** Replaces the remote cursors' decorations (a DecorationSet). */
export const setFolioCursors = StateEffect.define();

/** The remote cursors' decorations, mapped through the document's changes between redraws. */
export const folioCursorField = StateField.define({
  create: () => Decoration.none,
  update(decorations, tr) {
    for (const e of tr.effects) if (e.is(setFolioCursors)) return e.value;
    return tr.docChanged ? decorations.map(tr.changes) : decorations;
  },
  provide: (field) => EditorView.decorations.from(field),
});

/** A caret of another client: a bar in its colour with its name above. */
export class FolioCursorWidget extends WidgetType {
  constructor(clientId, name, color) {
    super();
    this.clientId = clientId;
    this.name = name;
    this.color = color;
  }

  eq(other) {
    return other.clientId === this.clientId && other.name === this.name && other.color === this.color;
  }

  toDOM(view) {
    const doc = view?.dom?.ownerDocument ?? document;
    const caret = doc.createElement('span');
    caret.className = 'cm-folio-cursor';
    caret.dataset.clientId = this.clientId;
    caret.style.borderLeftColor = this.color;
    const label = doc.createElement('span');
    label.className = 'cm-folio-cursor-label';
    label.textContent = this.name;
    label.style.backgroundColor = this.color;
    caret.append(label);
    return caret;
  }

  ignoreEvent() {
    return true;
  }
}

const cursorTheme = EditorView.baseTheme({
  '.cm-folio-cursor': { position: 'relative', borderLeft: '2px solid', marginLeft: '-1px', marginRight: '-1px', pointerEvents: 'none' },
  '.cm-folio-cursor-label': {
    position: 'absolute', bottom: '100%', left: '-2px', padding: '0 3px', borderRadius: '3px 3px 3px 0',
    color: 'white', fontSize: '0.75em', lineHeight: '1.3', whiteSpace: 'nowrap', fontFamily: 'system-ui, sans-serif',
  },
});

/**
 * Publishes the view's selection and draws the others' (folioCursors wraps it as a view plugin; use it
 * directly only without an EditorView: tests). The view's state needs folioCursorField.
 */
export class FolioCodeMirrorCursors {
  constructor(record, view) {
    if (record.type !== 'text') throw new TypeError(`the CodeMirror cursors need a text record; this one is ${record.type}`);
    this.record = record;
    this.view = view;
    this.queued = false;
    this.destroyed = false;
    this.onEvent = () => this.queueRedraw();
    record.on('presence', this.onEvent);
    record.on('change', this.onEvent);
    void record.presence; // reads who is here
    this.queueRedraw();
  }

  update(update) {
    if (update.docChanged || update.selectionSet) this.publish();
  }

  /** The main selection as anchors, to record.presence (once the page announced itself). */
  publish() {
    const presence = this.record._presence;
    if (!presence?.state || this.destroyed) return;
    const doc = this.view.state.doc.toString();
    if (doc !== this.record.value) return; // remote changes wait for a composition: positions differ
    const { anchor, head } = this.view.state.selection.main;
    presence.select({ anchor: this.record.anchorAt(codePoints(doc, anchor)), head: this.record.anchorAt(codePoints(doc, head)) });
  }

  queueRedraw() {
    if (this.queued || this.destroyed) return;
    this.queued = true;
    setTimeout(() => {
      this.queued = false;
      this.redraw();
    }, 0);
  }

  /** The others' selections, resolved now, as decorations (a transaction of their own). */
  redraw() {
    if (this.destroyed) return;
    const doc = this.view.state.doc.toString();
    if (doc !== this.record.value) return; // the next change's redraw draws them
    const ranges = [];
    for (const entry of this.record.presence.others) {
      if (!entry.selection) continue;
      let a;
      let h;
      try {
        a = this.record.indexOf(entry.selection.anchor);
        h = this.record.indexOf(entry.selection.head);
      } catch {
        continue; // not an anchor of this record (another client's to choose): not shown
      }
      if (a < 0 || h < 0) continue; // items this replica does not hold yet
      const anchor = utf16Index(doc, a);
      const head = utf16Index(doc, h);
      const color = presenceColor(entry);
      if (anchor !== head)
        ranges.push(Decoration.mark({ class: 'cm-folio-selection', attributes: { style: `background-color: color-mix(in srgb, ${color} 25%, transparent)`, 'data-client-id': entry.clientId } }).range(Math.min(anchor, head), Math.max(anchor, head)));
      ranges.push(Decoration.widget({ widget: new FolioCursorWidget(entry.clientId, presenceName(entry), color), side: 1 }).range(head));
    }
    this.view.dispatch({ effects: setFolioCursors.of(Decoration.set(ranges, true)), annotations: [folioRemote.of(true), Transaction.addToHistory.of(false)] });
  }

  destroy() {
    this.destroyed = true;
    this.record.off('presence', this.onEvent);
    this.record.off('change', this.onEvent);
  }
}

/** The CodeMirror extension showing the others' cursors and publishing this editor's selection. */
export function folioCursors(record) {
  return [folioCursorField, cursorTheme, ViewPlugin.define((view) => new FolioCodeMirrorCursors(record, view))];
}
