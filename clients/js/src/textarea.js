// bindTextarea: a <textarea> (or <input>) showing a text record, both ways.
//
//  * The user's edits: on each `input` event the textarea's new value is compared with the value it
//    showed; the one changed stretch (the caret says where, in a run of equal characters) becomes a
//    delete and an insert on the record, at code-point positions.
//  * Changes from elsewhere (remote ones, or the application's own record edits): the textarea takes
//    the record's value, and the selection is carried through the change's positions, so the caret
//    stays by the characters it was by: text inserted before it moves it along, text inserted exactly
//    at a caret goes after it, a selection does not grow by text inserted at its edges, and a caret
//    inside removed text goes to where the removal was.
//  * While an input method composes (compositionstart .. compositionend) the binding touches neither
//    the element nor the record: the input events of the composition are left alone (their text is a
//    reading the input method may still replace, and setting the value would break the composition,
//    leaving the reading in the text), and changes from elsewhere wait. At compositionend the
//    composed text becomes one edit, carried through the waiting changes, and they are shown.
//  * Presence: once the page announces itself (record.presence.set), the textarea's selection is
//    published as anchors (record.presence.select, anchors from record.anchorAt, so others place it
//    by the characters it is by): on focus, select, keyup, mouseup and input. Until then nothing is
//    sent (a binding alone announces nothing).
// The element needs value, selectionStart, selectionEnd, setSelectionRange and addEventListener /
// removeEventListener: any HTMLTextAreaElement or HTMLInputElement.
//
// presenceList: who else is on a record and where, as a list (<li> per other client, its name and
// colour from its state, and its caret's line and column for a text record, its item for an array).

import { codePoints, mapPosition, singleChange, utf16Index } from './positions.js';
import { presenceColor, presenceName } from './presence.js';

export { presenceColor, presenceName };

/** Binds `element` to the text record `record`; returns { destroy() } to unbind. */
export function bindTextarea(record, element) {
  if (record.type !== 'text') throw new TypeError(`bindTextarea needs a text record; this one is ${record.type}`);
  let shown = record.value;
  let ours = false; // the change being reported is the user's edit, already shown
  let composing = false;
  let waiting = []; // the changes that arrived while composing, not shown yet: [changes, ...]
  element.value = shown;

  const onInput = (e) => {
    if (composing || e?.isComposing) return; // compositionend takes the composed text
    const next = element.value;
    const c = singleChange(shown, next, element.selectionEnd ?? -1);
    if (!c) return;
    let from = codePoints(shown, c.from);
    let to = codePoints(shown, c.to);
    for (const changes of waiting) {
      // The record moved on under the shown value: carry the edit's place through those changes.
      from = mapPosition(from, changes, -1);
      to = Math.max(from, mapPosition(to, changes, -1));
    }
    const removed = to - from;
    ours = true;
    try {
      if (removed > 0) record.delete(from, removed);
      if (c.insert) record.insert(from, c.insert);
    } finally {
      ours = false;
    }
    shown = next;
    if (waiting.length) {
      // The textarea no longer shows the value the waiting changes' positions are of: show the record.
      waiting = [];
      show(null);
    }
  };

  /** Shows the record's value; `changes` (code points, of the value shown) carry the selection. */
  const show = (changes) => {
    const value = record.value;
    if (value === shown) return;
    const start = codePoints(shown, element.selectionStart);
    const end = codePoints(shown, element.selectionEnd);
    if (!changes) {
      // Changes not known as positions (several, made while an input method composed): one stretch.
      const c = singleChange(shown, value);
      changes = [{ from: codePoints(shown, c.from), to: codePoints(shown, c.to), insert: c.insert }];
    }
    const collapsed = start === end;
    const newStart = mapPosition(start, changes, collapsed ? -1 : 1);
    const newEnd = collapsed ? newStart : Math.max(newStart, mapPosition(end, changes, -1));
    const direction = element.selectionDirection;
    element.value = value;
    shown = value;
    element.setSelectionRange(utf16Index(value, newStart), utf16Index(value, newEnd), direction);
  };

  const onChange = (e) => {
    if (ours) return;
    if (composing) {
      waiting.push(e.changes);
      return;
    }
    show(e.changes);
  };
  const onCompositionStart = () => {
    composing = true;
  };
  const onCompositionEnd = () => {
    composing = false;
    onInput();
    if (waiting.length) {
      const changes = waiting.length === 1 ? waiting[0] : null;
      waiting = [];
      show(changes);
    }
  };

  /** The selection as anchors, to presence (only while the page is announced). */
  const publish = () => {
    const presence = record._presence;
    if (!presence?.state || composing) return;
    const value = record.value;
    const start = record.anchorAt(Math.min(codePoints(value, element.selectionStart ?? 0), record.length));
    const end = record.anchorAt(Math.min(codePoints(value, element.selectionEnd ?? 0), record.length));
    const backward = element.selectionDirection === 'backward';
    presence.select({ anchor: backward ? end : start, head: backward ? start : end });
  };
  const SELECTION_EVENTS = ['focus', 'select', 'keyup', 'mouseup', 'input'];

  record.on('change', onChange);
  element.addEventListener('input', onInput);
  element.addEventListener('compositionstart', onCompositionStart);
  element.addEventListener('compositionend', onCompositionEnd);
  for (const type of SELECTION_EVENTS) element.addEventListener(type, publish); // after onInput: the record has the edit
  return {
    destroy() {
      record.off('change', onChange);
      for (const type of SELECTION_EVENTS) element.removeEventListener(type, publish);
      element.removeEventListener('input', onInput);
      element.removeEventListener('compositionstart', onCompositionStart);
      element.removeEventListener('compositionend', onCompositionEnd);
    },
  };
}

/**
 * Where another client's caret is: "line L, column C" in a text record (1-based, code points), "item
 * N" in an array, "" without a selection (or one that is not of anchors of this record), "…" for an
 * anchor this replica does not hold yet.
 */
export function presenceWhere(record, entry) {
  if (!entry.selection || (record.type !== 'text' && record.type !== 'array')) return '';
  let at;
  try {
    at = record.indexOf(entry.selection.head);
  } catch {
    return ''; // not an anchor of this record
  }
  if (at < 0) return '…';
  if (record.type === 'array') return `item ${at + 1}`;
  const value = record.value;
  const before = value.slice(0, utf16Index(value, at));
  const lineStart = before.lastIndexOf('\n') + 1;
  const line = before.split('\n').length;
  return `line ${line}, column ${codePoints(before) - codePoints(before, lineStart) + 1}`;
}

/**
 * Keeps `element` (a <ul> or <ol>) listing the others present on `record`: one <li> each, with
 * data-client-id, a swatch in its colour, its name and where its caret is (presenceWhere). Redrawn on
 * `presence` events and on changes (carets move with the text), at most once a task. Reads
 * record.presence (so it asks the service who is here). O(clients + value length) a redraw.
 */
export function presenceList(record, element) {
  const doc = element.ownerDocument;
  let queued = false;
  let destroyed = false;
  const draw = () => {
    queued = false;
    if (destroyed) return;
    element.replaceChildren(...record.presence.others.map((entry) => {
      const li = doc.createElement('li');
      li.dataset.clientId = entry.clientId;
      const swatch = doc.createElement('span');
      swatch.className = 'folio-presence-swatch';
      swatch.style.background = presenceColor(entry);
      const name = doc.createElement('span');
      name.className = 'folio-presence-name';
      name.textContent = presenceName(entry);
      const where = doc.createElement('span');
      where.className = 'folio-presence-where';
      where.textContent = presenceWhere(record, entry);
      li.append(swatch, name, where);
      return li;
    }));
  };
  const redraw = () => {
    if (queued) return;
    queued = true;
    queueMicrotask(draw);
  };
  record.on('presence', redraw);
  record.on('change', redraw);
  draw();
  return {
    destroy() {
      destroyed = true;
      record.off('presence', redraw);
      record.off('change', redraw);
    },
  };
}
