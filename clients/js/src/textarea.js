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
// The element needs value, selectionStart, selectionEnd, setSelectionRange and addEventListener /
// removeEventListener: any HTMLTextAreaElement or HTMLInputElement.

import { codePoints, mapPosition, singleChange, utf16Index } from './positions.js';

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

  record.on('change', onChange);
  element.addEventListener('input', onInput);
  element.addEventListener('compositionstart', onCompositionStart);
  element.addEventListener('compositionend', onCompositionEnd);
  return {
    destroy() {
      record.off('change', onChange);
      element.removeEventListener('input', onInput);
      element.removeEventListener('compositionstart', onCompositionStart);
      element.removeEventListener('compositionend', onCompositionEnd);
    },
  };
}
