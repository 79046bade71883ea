// The editor bindings on a live record: bindTextarea against a minimal stand-in for a <textarea>
// (value, selection, events), and the CodeMirror 6 binding against a real EditorState driven without
// a DOM. Remote changes come through the record's subscription (test/model.js).
import assert from 'node:assert/strict';
import { mock, test } from 'node:test';

import { EditorSelection, EditorState, Transaction } from '@codemirror/state';

import { bindTextarea, loadEngine } from '../folio.js';
import { FolioCodeMirrorSync, folioRemote, folioSync } from '../src/codemirror.js';
import { connectTo, FakeTextarea, ModelService, until } from './model.js';

const engine = await loadEngine();

async function textRecord(initial) {
  const service = new ModelService(engine, 'text');
  service.doc.replace(initial);
  const { record, remote } = await connectTo(service); // remote(f): a change made elsewhere, delivered to this record
  return { service, record, remote };
}

test('textarea: the user\'s edits become record edits at code-point positions', async () => {
  const { service, record } = await textRecord('😀 aaa');
  try {
    const ta = new FakeTextarea();
    bindTextarea(record, ta);
    assert.equal(ta.value, '😀 aaa');
    const local = [];
    record.on('change', (e) => local.push(e));
    ta.setSelectionRange(4, 4); // after "😀 a" (UTF-16 4, code point 3)
    ta.type('a');
    assert.equal(record.value, '😀 aaaa');
    // In a run of equal characters the edit is where the caret was, not at the run's end.
    assert.deepEqual(local.at(-1), { remote: false, changes: [{ from: 3, to: 3, insert: 'a' }] });
    ta.setSelectionRange(2, 2);
    ta.backspace(); // the emoji: two UTF-16 units, one code point
    assert.equal(record.value, ' aaaa');
    assert.deepEqual(local.at(-1), { remote: false, changes: [{ from: 0, to: 1, insert: '' }] });
    ta.setSelectionRange(1, 3);
    ta.type('🎉'); // replaces the selection
    assert.equal(record.value, ' 🎉aa');
    await record.sync();
    assert.equal(service.doc.value, ' 🎉aa');
  } finally {
    record.close();
  }
});

test('textarea: remote changes keep the caret and selection by their characters', async () => {
  const { record, remote } = await textRecord('hello world');
  try {
    const ta = new FakeTextarea();
    const binding = bindTextarea(record, ta);
    ta.setSelectionRange(6, 6); // before "world"
    remote((d) => d.insert(0, '😀 ')); // before the caret: moves it by 3 UTF-16 units
    assert.equal(ta.value, '😀 hello world');
    assert.deepEqual([ta.selectionStart, ta.selectionEnd], [9, 9]);
    remote((d) => d.insert(13, '!')); // after: no move
    assert.deepEqual([ta.selectionStart, ta.selectionEnd], [9, 9]);
    remote((d) => d.insert(8, 'big ')); // exactly at the caret: the text goes after it
    assert.equal(ta.value, '😀 hello big world!');
    assert.deepEqual([ta.selectionStart, ta.selectionEnd], [9, 9]);
    ta.setSelectionRange(9, 12, 'backward'); // "big"
    remote((d) => (d.insert(11, '!'), d.insert(8, '['))); // at both edges of the selection: it does not grow
    assert.equal(ta.value, '😀 hello [big! world!');
    assert.deepEqual([ta.selectionStart, ta.selectionEnd, ta.selectionDirection], [10, 13, 'backward']);
    remote((d) => d.insert(10, 'BIG')); // inside: it grows
    assert.deepEqual([ta.selectionStart, ta.selectionEnd], [10, 16]);
    ta.setSelectionRange(12, 12); // inside "BIGbig"
    remote((d) => d.delete(8, 8)); // "[BIGbig!" removed around the caret: it goes where they were
    assert.equal(ta.value, '😀 hello  world!');
    assert.deepEqual([ta.selectionStart, ta.selectionEnd], [9, 9]);
    ta.setSelectionRange(11, 11); // after the "w" of "world"
    // Inserted before "world": by its characters alone it could be "ide w" after that "w", which
    // would leave the caret before "ide"; the change is known exactly, so the caret stays by its "w".
    remote((d) => d.insert(9, 'wide '));
    assert.equal(ta.value, '😀 hello  wide world!');
    assert.deepEqual([ta.selectionStart, ta.selectionEnd], [16, 16]);
    binding.destroy();
    remote((d) => d.insert(0, 'x'));
    assert.equal(ta.value, '😀 hello  wide world!'); // unbound
  } finally {
    record.close();
  }
});

test('textarea: remote changes wait while an input method composes', async () => {
  const { record, remote } = await textRecord('abc');
  try {
    const ta = new FakeTextarea();
    bindTextarea(record, ta);
    ta.setSelectionRange(3, 3);
    ta.fire('compositionstart');
    remote((d) => d.insert(0, 'XY'));
    assert.equal(ta.value, 'abc'); // not now: it would end the composition
    ta.type('に');
    ta.fire('compositionend');
    assert.equal(record.value, 'XYabcに'); // the user's text went where they typed it
    assert.equal(ta.value, 'XYabcに');
    assert.deepEqual([ta.selectionStart, ta.selectionEnd], [6, 6]);
    ta.fire('compositionstart');
    remote((d) => d.insert(0, '1'));
    ta.fire('compositionend');
    assert.equal(ta.value, '1XYabcに');
    assert.deepEqual([ta.selectionStart, ta.selectionEnd], [7, 7]);
  } finally {
    record.close();
  }
});

test('textarea: the composition\'s input events touch neither the record nor the value; the composed text replaces its reading', async () => {
  const { record, remote } = await textRecord('abc');
  try {
    const ta = new FakeTextarea();
    bindTextarea(record, ta);
    let sets = 0;
    const set = Object.getOwnPropertyDescriptor(FakeTextarea.prototype, 'value').set;
    Object.defineProperty(ta, 'value', { get() { return this._value; }, set(v) { ++sets; set.call(this, v); } });
    ta.setSelectionRange(3, 3);
    ta.fire('compositionstart');
    ta.type('に'); // the reading as the input method shows it, input events as a browser fires them
    remote((d) => d.insert(0, 'X'));
    ta.setSelectionRange(3, 4);
    ta.type('にほ');
    ta.setSelectionRange(3, 5);
    ta.type('にほん');
    assert.equal(record.value, 'Xabc', 'the reading is not an edit');
    assert.equal(sets, 0, 'the value is not set while composing');
    ta.setSelectionRange(3, 6);
    ta.type('日本'); // the input method commits
    ta.fire('compositionend');
    assert.equal(record.value, 'Xabc日本');
    assert.equal(ta.value, 'Xabc日本');
    assert.deepEqual([ta.selectionStart, ta.selectionEnd], [6, 6]);
  } finally {
    record.close();
  }
});

/** An EditorView's part the binding uses: the state and dispatch, feeding updates to the plugin. */
function fakeView(doc) {
  const view = {
    state: EditorState.create({ doc }),
    plugin: null,
    transactions: [],
    dispatch(spec) {
      const tr = this.state.update(spec);
      this.state = tr.state;
      this.transactions.push(tr);
      this.plugin?.update({ docChanged: tr.docChanged, transactions: [tr] });
    },
  };
  return view;
}

test('CodeMirror: local transactions become record edits, remote changes become transactions', async () => {
  const { service, record, remote } = await textRecord('😀 one two');
  try {
    assert.equal(typeof folioSync(record), 'object'); // the extension to give EditorState.create
    const view = fakeView(record.value);
    view.plugin = new FolioCodeMirrorSync(record, view);
    // One transaction, two changes: positions in UTF-16, the record's in code points.
    view.dispatch({ changes: [{ from: 3, to: 6, insert: '1' }, { from: 7, to: 10, insert: '2 🎉' }] });
    assert.equal(view.state.doc.toString(), '😀 1 2 🎉');
    assert.equal(record.value, '😀 1 2 🎉');
    view.dispatch({ selection: EditorSelection.cursor(4) }); // after "😀 1"
    remote((d) => d.insert(0, '>> '));
    assert.equal(view.state.doc.toString(), '>> 😀 1 2 🎉');
    assert.equal(view.state.selection.main.head, 7);
    const tr = view.transactions.at(-1);
    assert.equal(tr.annotation(folioRemote), true);
    assert.equal(tr.annotation(Transaction.addToHistory), false);
    remote((d) => d.delete(3, 2)); // "😀 "
    assert.equal(view.state.doc.toString(), '>> 1 2 🎉');
    assert.equal(view.state.selection.main.head, 4);
    await record.sync();
    assert.equal(service.doc.value, '>> 1 2 🎉');
    view.plugin.destroy();
    remote((d) => d.insert(0, 'x'));
    assert.equal(view.state.doc.toString(), '>> 1 2 🎉');
  } finally {
    record.close();
  }
});

test('CodeMirror: remote changes wait while an input method composes; edits meanwhile reach the record at their places', async () => {
  const { service, record, remote } = await textRecord('abc');
  try {
    const view = fakeView(record.value);
    view.plugin = new FolioCodeMirrorSync(record, view);
    view.compositionStarted = true;
    view.dispatch({ changes: { from: 3, insert: 'に' } });
    view.composing = true;
    remote((d) => d.insert(0, 'X'));
    remote((d) => d.delete(2, 1)); // "b": a second change waiting
    assert.equal(view.state.doc.toString(), 'abcに', 'not dispatched while composing');
    assert.equal(record.value, 'Xacに');
    view.dispatch({ changes: { from: 3, to: 4, insert: 'にほ' } });
    view.dispatch({ changes: { from: 3, to: 5, insert: '日本' } });
    assert.equal(record.value, 'Xac日本');
    view.composing = view.compositionStarted = false;
    view.dispatch({ selection: EditorSelection.cursor(5) }); // an update after the composition
    await until(() => view.state.doc.toString() === 'Xac日本');
    assert.equal(view.transactions.at(-1).annotation(folioRemote), true);
    await record.sync();
    assert.equal(service.doc.value, 'Xac日本');
  } finally {
    record.close();
  }
});

test('CodeMirror: an editor started with another text takes the record\'s', async () => {
  const { record } = await textRecord('the record');
  try {
    const view = fakeView('something else');
    view.plugin = new FolioCodeMirrorSync(record, view);
    await until(() => view.state.doc.toString() === 'the record');
    assert.equal(record.value, 'the record');
  } finally {
    record.close();
  }
});

test('CodeMirror: changes that waited are shown once CodeMirror clears its composing flags, however late, with no update', async () => {
  const { record, remote } = await textRecord('abc');
  mock.timers.enable({ apis: ['setTimeout'] });
  try {
    const view = fakeView(record.value);
    view.plugin = new FolioCodeMirrorSync(record, view);
    const handlers = folioSync(record).domEventHandlers;
    view.compositionStarted = view.composing = true;
    handlers.compositionstart?.call(view.plugin, { type: 'compositionstart' }, view);
    remote((d) => d.insert(0, 'X'));
    assert.equal(view.state.doc.toString(), 'abc');
    // compositionend, but CodeMirror clears its flags only much later (a kludge for a missed
    // compositionend), with no update of the view and no event.
    handlers.compositionend.call(view.plugin, { type: 'compositionend' }, view);
    for (let i = 0; i < 200; ++i) mock.timers.tick(100); // 20 s
    assert.equal(view.state.doc.toString(), 'abc', 'not while the flags are set');
    view.compositionStarted = view.composing = false;
    for (let i = 0; i < 10 && view.state.doc.toString() !== 'Xabc'; ++i) mock.timers.tick(500);
    assert.equal(view.state.doc.toString(), 'Xabc');
    assert.equal(view.transactions.at(-1).annotation(folioRemote), true);
  } finally {
    mock.timers.reset();
    record.close();
  }
});
