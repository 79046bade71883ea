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

/** A Tiptap Editor with its StarterKit bound to xml record `name` (clients/js/examples/tiptap.js does the same). */
export async function tiptap(name) {
  const [{ Editor }, { default: StarterKit }] = await Promise.all([import('@tiptap/core'), import('@tiptap/starter-kit')]);
  const element = document.createElement('div');
  element.id = name;
  document.body.append(element);
  const editor = new Editor({ element, extensions: [StarterKit] });
  foreign[name] = [];
  binding.bindProseMirror(records[name], editor.view, { onForeign: (w) => foreign[name].push(w) });
  views[name] = editor.view;
  window.editors = { ...(window.editors ?? {}), [name]: editor };
  return shownMarkup(name);
}

/** The markup of the editor's document (the record's form). */
export function shownMarkup(name) {
  return binding.markupOf(views[name].state.doc);
}

export function foreignSeen(name) {
  return foreign[name];
}

/** Focuses editor `name` and puts its selection at [from, to) (ProseMirror positions). */
export function select(name, from, to = from) {
  const v = views[name];
  v.focus();
  v.dispatch(v.state.tr.setSelection(state.TextSelection.create(v.state.doc, from, to)));
  return [v.state.selection.from, v.state.selection.to];
}

/** The position just inside the end of top-level block `index` (where typing appends to it). */
export function endOfBlock(name, index) {
  const doc = views[name].state.doc;
  let pos = 0;
  for (let i = 0; i <= index; ++i) pos += doc.child(i).nodeSize;
  return pos - 1;
}

/** Where `text` starts in the document (the first match inside one text node), or -1. */
export function find(name, text) {
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
