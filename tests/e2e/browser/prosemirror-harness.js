// Runs in the test pages beside harness.js: ProseMirror editors (and a Tiptap one) bound to the xml
// records harness.open connected, for browser.e2e.js to drive through page.evaluate.
import { records } from '/harness.js';

const folio = new URLSearchParams(location.search).get('folio');
const [model, state, view, basic, list, history, keymap, commands, binding] = await Promise.all([
  import('prosemirror-model'), import('prosemirror-state'), import('prosemirror-view'), import('prosemirror-schema-basic'),
  import('prosemirror-schema-list'), import('prosemirror-history'), import('prosemirror-keymap'), import('prosemirror-commands'),
  import(`${folio}/client/src/prosemirror.js`),
]);

export const schema = new model.Schema({ nodes: list.addListNodes(basic.schema.spec.nodes, 'paragraph block*', 'block'), marks: basic.schema.spec.marks });
export const views = {}; // by record name
const foreign = {}; // by record name: what the binding reported

/**
 * A ProseMirror EditorView (basic schema with lists, history, the base keymap with Mod-b / Mod-i,
 * Enter splitting list items) bound to xml record `name`, with remote cursors labelled `user`.
 */
export function prosemirror(name, user) {
  const parent = document.createElement('div');
  parent.id = name;
  document.body.append(parent);
  const record = records[name];
  const plugins = [
    history.history(),
    keymap.keymap({ 'Mod-z': history.undo, 'Mod-y': history.redo, 'Mod-Shift-z': history.redo, 'Mod-b': commands.toggleMark(schema.marks.strong), 'Mod-i': commands.toggleMark(schema.marks.em), Enter: list.splitListItem(schema.nodes.list_item) }),
    keymap.keymap(commands.baseKeymap),
    binding.folioCursors(record, { user }),
  ];
  const v = new view.EditorView(parent, { state: state.EditorState.create({ schema, plugins }) });
  foreign[name] = [];
  binding.bindProseMirror(record, v, { onForeign: (w) => foreign[name].push(w) });
  views[name] = v;
  return shownMarkup(name);
}

/**
 * A Tiptap Editor with its StarterKit and remote cursors on xml record `name` of `ids`, opened by
 * clients/js/examples/tiptap.js (which connects the record itself).
 */
export async function tiptap(name, { token, ids, user }) {
  const { openTiptap } = await import('/examples/tiptap.js');
  const element = document.createElement('div');
  element.id = name;
  document.body.append(element);
  const opened = await openTiptap(element, { baseUrl: folio, token, ...ids, user });
  records[name] = opened.record;
  opened.record.errors = [];
  opened.record.on('error', (e) => opened.record.errors.push(String(e?.message ?? e)));
  views[name] = opened.editor.view;
  foreign[name] = [];
  return shownMarkup(name);
}

/** The markup of the editor's document (the record's form). */
export function shownMarkup(name) {
  views[name].domObserver.flush();
  return binding.markupOf(views[name].state.doc);
}

/** The canonical form of markup in editor `name`'s schema (crdt/get's value may hold two elements of one mark side by side). */
export function canonical(name, markup) {
  return binding.markupOf(binding.docFromMarkup(views[name].state.schema, markup).doc);
}

export function foreignSeen(name) {
  return foreign[name];
}

/** Focuses editor `name` and puts its selection at [from, to) (ProseMirror positions). */
export function select(name, from, to = from) {
  const v = views[name];
  v.domObserver.flush(); // keys typed before: into the document first (ProseMirror reads the DOM's changes later)
  v.focus();
  v.dispatch(v.state.tr.setSelection(state.TextSelection.create(v.state.doc, from, to)));
  return [v.state.selection.from, v.state.selection.to];
}

/**
 * Focuses editor `name` and puts its selection where `where` says, in one go (positions computed in
 * another call could be stale: remote changes arrive between calls): a position; { before: text } /
 * { after: text }: the caret at the start / end of the first `text`; { end: text }: at the end of the
 * textblock holding it; { select: text }: `text` selected.
 */
export function place(name, where) {
  if (typeof where === 'number') return select(name, where);
  const text = where.before ?? where.after ?? where.end ?? where.select;
  const at = find(name, text);
  if (at < 0) throw new Error(`no "${text}" in ${shownMarkup(name)}`);
  if (where.before !== undefined) return select(name, at);
  if (where.after !== undefined) return select(name, at + text.length);
  if (where.end !== undefined) return select(name, views[name].state.doc.resolve(at).end());
  return select(name, at, at + text.length);
}

/** Others present, as record.presence has them (for failure messages). */
export function others(name) {
  return records[name].presence.others;
}

/** Where `text` starts in the document (the first match inside one text node), or -1. */
export function find(name, text) {
  views[name].domObserver.flush();
  let at = -1;
  views[name].state.doc.descendants((node, pos) => {
    if (at < 0 && node.isText && node.text.includes(text)) at = pos + node.text.indexOf(text);
    return at < 0;
  });
  return at;
}

export function selection(name) {
  const s = views[name].state.selection;
  return [s.from, s.to];
}

/** Wraps the selection in a bullet list. */
export function bulletList(name) {
  const v = views[name];
  return list.wrapInList(schema.nodes.bullet_list)(v.state, v.dispatch);
}

/** The others' carets shown in editor `name`: [{ name, pos }] (pos: the ProseMirror position of the caret), by name. */
export function carets(name) {
  const v = views[name];
  const shown = v.dom.querySelectorAll('.folio-cursor').length;
  const found = binding.folioCursorsKey.getState(v.state).decorations.find().filter((d) => d.spec.name !== undefined);
  return { shown, carets: found.map((d) => ({ name: d.spec.name, pos: d.from })).sort((a, b) => (a.name < b.name ? -1 : 1)) };
}

/** The text of the document around position `pos` (5 characters on each side), to name a caret's place. */
export function around(name, pos) {
  const doc = views[name].state.doc;
  return [doc.textBetween(Math.max(0, pos - 5), pos, '|'), doc.textBetween(pos, Math.min(doc.content.size, pos + 5), '|')];
}

export function hasPresence(name) {
  return !!records[name].presence;
}
