// Remote cursors on a live record: anchors (record.anchorAt / indexOf), the textarea's selection
// published and presenceList, and the CodeMirror cursors (folioCursors) against a real EditorState
// driven without a DOM. The others are announced through the record's channel (test/model.js).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { EditorSelection, EditorState } from '@codemirror/state';

import { bindTextarea, loadEngine, presenceColor, presenceList, presenceName, presenceWhere } from '../folio.js';
import { folioCursorField, FolioCodeMirrorCursors, FolioCodeMirrorSync, FolioCursorWidget } from '../src/codemirror.js';
import { connectTo, FakeTextarea, ModelService, until } from './model.js';

const engine = await loadEngine();

async function textRecord(initial) {
  const service = new ModelService(engine, 'text');
  service.doc.replace(initial);
  const { record, es, remote } = await connectTo(service, { presenceThrottleMs: 0 });
  /** Another client announcing its caret at index `head` of the service's value (anchors of the service's replica). */
  const announce = (clientId, name, anchor, head = anchor, type = 'join') =>
    es.send({ editorId: 'e', presence: { type, clientId, userId: `u-${clientId}`, state: { name, color: '#d93f3f' }, selection: { anchor: service.doc.anchorAt(anchor), head: service.doc.anchorAt(head) }, updatedAt: 't' } });
  return { service, record, remote, announce, es };
}

const sets = (service) => service.requests.filter((r) => r.path === '/v2/presence/set').map((r) => r.body.data.selection);

test('anchors: anchorAt/indexOf follow their character through concurrent edits, here and in another replica', async () => {
  const { record, remote } = await textRecord('hello world');
  try {
    const w = record.anchorAt(6); // "w"
    const end = record.anchorAt(11);
    assert.equal(end, 'end');
    assert.equal(record.indexOf(w), 6);
    remote((d) => d.insert(0, '>> '));
    record.insert(8, ',');
    assert.equal(record.value, '>> hello, world');
    assert.equal(record.indexOf(w), 10);
    assert.equal(record.indexOf(end), record.length);
    remote((d) => d.delete(8, 6)); // " world" goes (the service lacks the ","), "w" with it: where it was
    assert.equal(record.indexOf(w), 9);
    assert.throws(() => record.anchorAt(99), RangeError);
  } finally {
    record.close();
  }
});

/** The DOM a list needs: elements with children, text, dataset, style, className. */
class FakeElement {
  constructor(doc, tag) {
    Object.assign(this, { ownerDocument: doc, tagName: tag, children: [], dataset: {}, style: {}, className: '', _text: '' });
  }
  get textContent() { return this._text + this.children.map((c) => c.textContent).join(''); }
  set textContent(t) { this._text = t; this.children = []; }
  append(...c) { this.children.push(...c); }
  replaceChildren(...c) { this.children = c; }
}
function fakeList() {
  const doc = { createElement: (tag) => new FakeElement(doc, tag) };
  return new FakeElement(doc, 'ul');
}

test('textarea: the selection is published as anchors once the page announced itself; a list says who is where', async () => {
  const { service, record, remote, announce } = await textRecord('one\ntwo 😀 three');
  try {
    const ta = new FakeTextarea();
    const binding = bindTextarea(record, ta);
    ta.setSelectionRange(4, 7, 'backward'); // "two", selected backwards
    ta.fire('select');
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(sets(service), [], 'not announced: nothing sent');
    record.presence.set({ name: 'Me' });
    ta.fire('keyup');
    await until(() => sets(service).length >= 1 && sets(service).at(-1) !== null);
    const sel = sets(service).at(-1);
    assert.deepEqual([service.doc.indexOf(sel.anchor), service.doc.indexOf(sel.head)], [7, 4]);
    // A remote insert before the caret moves the textarea's selection, not its anchors: nothing is sent.
    const sent = service.requests.length;
    remote((d) => d.insert(0, '# '));
    ta.fire('keyup');
    await new Promise((r) => setImmediate(r));
    assert.equal(service.requests.length, sent);

    const ul = fakeList();
    const list = presenceList(record, ul);
    announce('ana', 'Ana', 12); // "# one\ntwo 😀 three": the "t" of "three", line 2, column 7 (code points)
    announce('bo', 'Bo', 0); // the "#"
    await until(() => ul.children.length === 2);
    assert.deepEqual(ul.children.map((li) => [li.dataset.clientId, li.textContent]), [['ana', 'Analine 2, column 7'], ['bo', 'Boline 1, column 1']]);
    assert.equal(ul.children[0].children[0].style.background, '#d93f3f');
    remote((d) => d.insert(0, 'zero\n'));
    await until(() => ul.children[0].textContent === 'Analine 3, column 7');
    assert.equal(ul.children[1].textContent, 'Boline 2, column 1');
    list.destroy();
    binding.destroy();
  } finally {
    record.close();
  }
});

test('presenceName, presenceColor and presenceWhere: fallbacks and refusals', async () => {
  const { record } = await textRecord('abc');
  try {
    assert.equal(presenceName({ clientId: 'c', userId: 'u', state: {} }), 'u');
    assert.equal(presenceName({ clientId: 'c', userId: null, state: { name: 'N' } }), 'N');
    assert.equal(presenceColor({ clientId: 'c', state: { color: 'red' } }), 'red');
    assert.match(presenceColor({ clientId: 'c', state: { color: 'red; background: url(x)' } }), /^hsl\(/); // not a colour: one of its own
    assert.equal(presenceWhere(record, { clientId: 'c', selection: null }), '');
    assert.equal(presenceWhere(record, { clientId: 'c', selection: { anchor: '99.1', head: '99.1' } }), '…');
  } finally {
    record.close();
  }
});

/** A view with the cursors' field: the state and dispatch, feeding updates to the plugins. */
function fakeView(doc) {
  return {
    state: EditorState.create({ doc, extensions: [folioCursorField] }),
    plugins: [],
    dispatch(spec) {
      const tr = this.state.update(spec);
      this.state = tr.state;
      for (const p of this.plugins) p.update({ docChanged: tr.docChanged, selectionSet: !!tr.selection, transactions: [tr] });
    },
  };
}

function carets(view) {
  const out = [];
  view.state.field(folioCursorField).between(0, view.state.doc.length, (from, to, deco) => {
    out.push(deco.spec.widget ? `${deco.spec.widget.name}@${from}` : `sel ${from}-${to}`);
  });
  return out.sort();
}

test('CodeMirror: the others\' carets and selections are drawn at their characters and follow edits; the local selection is published', async () => {
  const { service, record, remote, announce } = await textRecord('😀 hello world');
  try {
    const view = fakeView(record.value);
    const sync = new FolioCodeMirrorSync(record, view);
    const cursors = new FolioCodeMirrorCursors(record, view);
    view.plugins.push(sync, cursors);
    announce('ana', 'Ana', 2, 7); // "hello" selected, caret after it (code points)
    announce('bo', 'Bo', 8);
    await until(() => carets(view).length === 3);
    assert.deepEqual(carets(view), ['Ana@8', 'Bo@9', 'sel 3-8']); // UTF-16: the emoji is two units
    remote((d) => d.insert(2, 'oh '));
    await until(() => carets(view).includes('Ana@11'));
    assert.deepEqual(carets(view), ['Ana@11', 'Bo@12', 'sel 6-11']);
    view.dispatch({ changes: { from: 0, insert: 'x' } }); // local: mapped at once, then redrawn from the anchors
    assert.deepEqual(carets(view), ['Ana@12', 'Bo@13', 'sel 7-12']);
    announce('bo', 'Bo', 0, 0, 'leave');
    await until(() => carets(view).length === 2);
    // The local selection, once announced: anchors of the characters after its ends.
    record.presence.set({ name: 'Me' });
    view.dispatch({ selection: EditorSelection.range(3, 1) });
    await until(() => sets(service).at(-1) !== null && sets(service).at(-1) !== undefined);
    await record.sync();
    const sel = sets(service).at(-1);
    assert.deepEqual([service.doc.indexOf(sel.anchor), service.doc.indexOf(sel.head)], [2, 1]); // "x😀 ": code points
    const w = new FolioCursorWidget('c', 'Name', '#123456');
    assert.ok(w.eq(new FolioCursorWidget('c', 'Name', '#123456')) && !w.eq(new FolioCursorWidget('c', 'Other', '#123456')));
    cursors.destroy();
    sync.destroy();
  } finally {
    record.close();
  }
});

/** Who is here as presenceList draws it and a CodeMirror view with the cursors, on `record`. */
function drawn(record) {
  const list = fakeList();
  const people = presenceList(record, list);
  const view = fakeView(record.value);
  const sync = new FolioCodeMirrorSync(record, view);
  const cursors = new FolioCodeMirrorCursors(record, view);
  view.plugins.push(sync, cursors);
  return { list, view, unbind: () => [people, cursors, sync].forEach((b) => b.destroy()) };
}

// A hostile client's state, as every other page receives it: a name of markup, a colour that would
// close the CSS declaration, values of other types and huge ones.
const HOSTILE = [
  { name: '<img src=x onerror=alert(1)>', color: 'red; background:url(//evil)' },
  { name: { toString: 'x' }, color: ['#fff'] },
  { name: 'n'.repeat(100000), color: `#${'f'.repeat(100000)}` },
  { name: 42, color: 'rgb(1 2 3); x: url(y)' },
];
const safeColor = (c) => typeof c === 'string' && c.length < 100 && !/[;:"'\\{}]|url|expression/i.test(c);

test('a hostile presence state is inert text and a safe colour: presenceName/presenceColor, the list, CodeMirror', async () => {
  const { record, es } = await textRecord('abc');
  try {
    for (const state of HOSTILE) {
      const entry = { clientId: 'evil', userId: 'u-evil', state };
      assert.ok(safeColor(presenceColor(entry)), presenceColor(entry));
      assert.ok(typeof presenceName(entry) === 'string' && presenceName(entry).length <= 65);
    }
    assert.equal(presenceName({ clientId: 'c', userId: 'u', state: { name: '<b>' } }), '<b>'); // shown as text (textContent)
    assert.equal(presenceColor({ clientId: 'c', state: { color: 'hsl(120 50% 40%)' } }), 'hsl(120 50% 40%)');
    assert.equal(presenceColor({ clientId: 'c', state: { color: 'rgb(1, 2, 3)' } }), 'rgb(1, 2, 3)');
    const { list, view, unbind } = drawn(record);
    HOSTILE.forEach((state, i) =>
      es.send({ editorId: 'e', presence: { type: 'join', clientId: `evil${i}`, userId: 'u', state, selection: { anchor: record.anchorAt(1), head: record.anchorAt(2) }, updatedAt: 't' } }));
    await until(() => list.children.length === HOSTILE.length && carets(view).length === 2 * HOSTILE.length);
    for (const li of list.children) {
      const [swatch, name] = li.children;
      assert.ok(safeColor(swatch.style.background), swatch.style.background);
      assert.equal(name.children.length, 0); // text only
      assert.ok(name.textContent.length <= 65);
    }
    view.state.field(folioCursorField).between(0, view.state.doc.length, (_f, _t, deco) => {
      if (deco.spec.widget) {
        assert.ok(safeColor(deco.spec.widget.color) && deco.spec.widget.name.length <= 65);
      } else {
        const style = deco.spec.attributes.style;
        assert.match(style, /^background-color: color-mix\(in srgb, [^;]* 25%, transparent\)$/);
      }
    });
    unbind();
  } finally {
    record.close();
  }
});

test('odd presence messages: no throw, no caret but at the anchors\' characters; unknown anchors hidden until they resolve', async () => {
  const { record, es, service } = await textRecord('hello world');
  try {
    const errors = [];
    record.on('error', (e) => errors.push(e));
    const { list, view, unbind } = drawn(record);
    const send = (presence, editorId = 'e') => es.send({ editorId, presence: { userId: 'u', updatedAt: 't', ...presence } });
    const sel = (anchor, head = anchor) => ({ anchor, head });
    send({ type: 'join', clientId: 'ok', state: { name: 'Ok' }, selection: sel(record.anchorAt(6)) });
    for (const state of ['x', 7, null, [1, 2], true]) send({ type: 'join', clientId: 'odd', state, selection: null });
    for (const selection of ['x', 5, [], sel(5, 6), sel('end:root'), sel('end:1.1'), sel('1.x'), sel(''), sel('-1.2'), sel('1.99999999999999999999'), { anchor: 'end' }])
      send({ type: 'update', clientId: 'odd', state: { name: 'Odd' }, selection });
    send({ type: 'whatever', clientId: 'ok2', state: {}, selection: null });
    send({ type: 'leave', clientId: 'nobody' });
    send({ type: 'join', clientId: 'other-editor', state: { name: 'Elsewhere' }, selection: sel(record.anchorAt(0)) }, 'another-editor');
    es.send({ editorId: 'e', presence: 'join' });
    es.send({ editorId: 'e', presence: { type: 'join', clientId: 7 } });
    // A caret at a character this replica does not hold yet: hidden, then shown once it arrives.
    const held = service.edit((d) => d.insert(0, '>')); // the push of it, held back
    const unseen = service.doc.anchorAt(0);
    send({ type: 'join', clientId: 'ahead', state: { name: 'Ahead' }, selection: sel(unseen) });
    for (let i = 0; i < 1000; ++i) send({ type: 'update', clientId: `flood${i % 20}`, state: { name: `F${i}` }, selection: null });
    await until(() => record.presence.others.length === 23);
    await new Promise((r) => setTimeout(r, 0)); // CodeMirror's redraw runs a task later
    assert.deepEqual(carets(view), ['Ok@6']);
    assert.equal(list.children.length, 23);
    assert.ok(!record.presence.others.some((o) => o.clientId === 'other-editor' || o.clientId === 'nobody' || o.clientId === 'ok2'));
    assert.deepEqual(record.presence.others.find((o) => o.clientId === 'odd').state, { name: 'Odd' });
    assert.equal(list.children.find((li) => li.dataset.clientId === 'ahead').children[2].textContent, '…');
    es.send(held); // the character arrives
    await until(() => carets(view).length === 2);
    assert.equal(record.value, '>hello world');
    assert.deepEqual(carets(view), ['Ahead@0', 'Ok@7']);
    assert.deepEqual(errors, []);
    unbind();
  } finally {
    record.close();
  }
});
