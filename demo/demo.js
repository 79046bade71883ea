// Folio's live demo: two records of one document, live in this page through the JavaScript client
// served by the same nginx (/client/folio.js, no bundler). The link scripts/run prints carries a client
// token for the document in the fragment (#token=...&org=...&doc=..., never sent to a server);
// `text` and `list` name the editors (default "text" and "tasks").
//   * a text record in a <textarea> (bindTextarea: remote changes keep the caret);
//   * an array record as a task list ({ title, done } items), edited with insert, delete and replace;
//   * the text's versions (the client's listVersions, addVersion, restoreVersion, with the same token):
//     "Save version" takes a named one, Restore gives the text a version's value as a forward change
//     that reaches every open tab through the subscription (nothing reloads); the list is read again
//     after each, and a second after remote changes pause (another tab's restore adds a version).
//   * an xml record (`rich`, default "rich") as rich text in ProseMirror (bindProseMirror and its
//     folioCursors plugin, /client/src/prosemirror.js): paragraphs, headings, lists, bold, italic,
//     links; ProseMirror's modules come from demo/node_modules through the page's import map, loaded
//     only for this part (without them, or without the record, the rest of the page works);
//   * presence: this tab announces itself on each record (record.presence.set) with a name and a
//     colour (kept for the tab in sessionStorage; the name is editable), others' cursors show in the
//     rich text and, as a who-is-where list (presenceList), beside the text.
// The records listen over WebSockets (WebSocketEventSource): three EventSources a tab would fill the
// browser's six HTTP/1.1 connections per origin with two tabs, and every request after that would wait.
import { bindTextarea, connect, presenceColor, presenceList, WebSocketEventSource } from '/client/folio.js';

const params = new URLSearchParams(location.hash.slice(1));
const token = params.get('token');
const organizationId = params.get('org');
const documentId = params.get('doc');
const editors = { text: params.get('text') || 'text', list: params.get('list') || 'tasks', rich: params.get('rich') || 'rich' };
const $ = (id) => document.getElementById(id);
const status = $('status');

function show(state, text) {
  status.dataset.state = state;
  status.textContent = text;
}

/** The connection's state: online only while every record's last exchange succeeded. */
function watch(records) {
  const update = () => (records.every((r) => r.online) ? show('online', 'online') : show('offline', 'offline: edits are kept and merge when back'));
  for (const r of records) {
    r.on('status', update);
    r.on('error', (e) => show('error', `${e.status ?? 'error'}: ${e.message}`));
  }
  update();
}

function renderTasks(list) {
  const ul = $('tasks');
  ul.replaceChildren(...list.value.map((item, i) => {
    const li = document.createElement('li');
    li.className = item.done ? 'done' : '';
    const box = document.createElement('input');
    box.type = 'checkbox';
    box.checked = item.done === true;
    box.ariaLabel = 'done';
    box.addEventListener('change', () => {
      // Replace by value: the engine's diff turns it into the change of this one item.
      list.replace(list.value.map((it, j) => (j === i ? { ...it, done: box.checked } : it)));
    });
    const title = document.createElement('span');
    title.textContent = String(item.title ?? JSON.stringify(item));
    const remove = document.createElement('button');
    remove.textContent = '×';
    remove.title = 'delete';
    remove.addEventListener('click', () => list.delete(i, 1));
    li.append(box, title, remove);
    return li;
  }));
}

/** Lists the record's versions (newest first) with a Restore button each; read again after each action. */
function versionList(record) {
  const ol = $('versions');
  const act = async (f) => {
    try {
      await f();
    } catch (e) {
      show('error', `${e.status ?? 'error'}: ${e.message}`);
    }
    await refresh();
  };
  async function refresh() {
    let versions;
    try {
      ({ versions } = await record.listVersions({ pageSize: 20 }));
    } catch (e) {
      show('error', `${e.status ?? 'error'}: ${e.message}`);
      return;
    }
    ol.replaceChildren(...versions.map((v) => {
      const li = document.createElement('li');
      li.dataset.versionId = v.versionId;
      const label = document.createElement('span');
      const when = new Date(v.createdAt).toLocaleTimeString();
      label.textContent = `${v.name ?? (v.kind === 'auto' ? 'automatic' : 'unnamed')} · ${when}${v.createdBy ? ` · ${v.createdBy}` : ''}`;
      label.title = v.authors.length ? `changed by ${v.authors.join(', ')}` : '';
      const restore = document.createElement('button');
      restore.textContent = 'Restore';
      restore.addEventListener('click', () => act(() => record.restoreVersion(v.versionId)));
      li.append(label, restore);
      return li;
    }));
  }
  // A restore in another tab (or any remote change) may have added a version: read the list again
  // once the changes pause for a second.
  let pause = null;
  record.on('change', ({ remote }) => {
    if (!remote) return;
    clearTimeout(pause);
    pause = setTimeout(refresh, 1000);
  });
  $('save-version').addEventListener('submit', (e) => {
    e.preventDefault();
    const name = $('version-name').value.trim();
    $('version-name').value = '';
    act(() => record.addVersion(name || undefined));
  });
  return refresh();
}

// ---- presence: this tab's name and colour -------------------------------------------------------------

const COLORS = ['#d93f3f', '#2f7ed8', '#2e9e5b', '#b15cd6', '#e0821d', '#1b9aa3', '#c2457a', '#6b6bd6'];

/** This tab's presence state: { name, color }, kept in sessionStorage (a reload keeps it, a new tab gets its own). */
function me() {
  try {
    const kept = JSON.parse(sessionStorage.getItem('folio-demo-me'));
    if (kept && typeof kept.name === 'string' && typeof kept.color === 'string') return kept;
  } catch {
    // none kept, or storage refused: a new one
  }
  const n = crypto.getRandomValues(new Uint8Array(2));
  const user = { name: params.get('name') || `Guest ${100 + (n[0] % 900)}`, color: COLORS[n[1] % COLORS.length] };
  try {
    sessionStorage.setItem('folio-demo-me', JSON.stringify(user));
  } catch {
    // not kept
  }
  return user;
}

/** The name field: a change is announced on every record at once (the selection is kept). */
function nameField(user, records) {
  const input = $('my-name');
  input.value = user.name;
  $('my-color').style.background = presenceColor({ clientId: '', state: user });
  input.addEventListener('change', () => {
    user.name = input.value.trim() || user.name;
    input.value = user.name;
    try {
      sessionStorage.setItem('folio-demo-me', JSON.stringify(user));
    } catch {
      // not kept
    }
    for (const r of records) r.presence.set({ ...user });
  });
  $('me').hidden = false;
}

// ---- rich text --------------------------------------------------------------------------------------

/**
 * The xml record in ProseMirror: a basic schema (paragraphs, headings, bullet and numbered lists,
 * hard breaks; bold, italic, links), history (undo/redo of this tab's own changes), keys and a
 * toolbar, and the others' cursors. Resolves to the record, or null when this part cannot run.
 */
async function richText(ids, user) {
  let pm;
  try {
    pm = await Promise.all([
      import('prosemirror-model'), import('prosemirror-state'), import('prosemirror-view'), import('prosemirror-schema-basic'),
      import('prosemirror-schema-list'), import('prosemirror-keymap'), import('prosemirror-commands'), import('prosemirror-history'),
      import('/client/src/prosemirror.js'),
    ]);
  } catch (e) {
    richMissing(`ProseMirror's modules did not load (${e.message}): run npm ci in demo/ (scripts/run does).`);
    return null;
  }
  const [{ Schema }, { EditorState }, { EditorView }, basic, lists, { keymap }, commands, { history, undo, redo }, { bindProseMirror, folioCursors }] = pm;
  let rich;
  try {
    rich = await connect({ ...ids, editorId: editors.rich });
  } catch (e) {
    richMissing(`No rich text here (${e.status ?? 'error'}: ${e.message}); scripts/run adds the record "${editors.rich}" to the welcome document.`);
    return null;
  }
  if (rich.type !== 'xml') {
    richMissing(`The record "${editors.rich}" is ${rich.type}, not xml.`);
    rich.close();
    return null;
  }
  const schema = new Schema({
    nodes: lists.addListNodes(basic.schema.spec.nodes.remove('image').remove('horizontal_rule').remove('code_block').remove('blockquote'), 'paragraph block*', 'block'),
    marks: basic.schema.spec.marks.remove('code'),
  });
  const { toggleMark, setBlockType, baseKeymap, chainCommands, exitCode } = commands;
  const { wrapInList, splitListItem, liftListItem, sinkListItem } = lists;
  const n = schema.nodes;
  const link = (state, dispatch) => {
    const type = schema.marks.link;
    if (state.selection.empty) return false;
    if (!dispatch) return true;
    const { from, to } = state.selection;
    if (state.doc.rangeHasMark(from, to, type)) return toggleMark(type)(state, dispatch);
    const href = prompt('Link to', 'https://');
    return href ? toggleMark(type, { href, title: null })(state, dispatch) : false;
  };
  const run = {
    strong: toggleMark(schema.marks.strong),
    em: toggleMark(schema.marks.em),
    link,
    paragraph: setBlockType(n.paragraph),
    h1: setBlockType(n.heading, { level: 1 }),
    h2: setBlockType(n.heading, { level: 2 }),
    bullet: wrapInList(n.bullet_list),
    ordered: wrapInList(n.ordered_list),
  };
  const keys = keymap({
    'Mod-z': undo, 'Shift-Mod-z': redo, 'Mod-y': redo,
    'Mod-b': run.strong, 'Mod-i': run.em,
    'Mod-Alt-0': run.paragraph, 'Mod-Alt-1': run.h1, 'Mod-Alt-2': run.h2,
    Enter: splitListItem(n.list_item), 'Mod-[': liftListItem(n.list_item), 'Mod-]': sinkListItem(n.list_item),
    'Shift-Enter': chainCommands(exitCode, (state, dispatch) => {
      if (dispatch) dispatch(state.tr.replaceSelectionWith(n.hard_break.create()).scrollIntoView());
      return true;
    }),
  });
  const view = new EditorView($('rich'), {
    state: EditorState.create({ schema, plugins: [history(), keys, keymap(baseKeymap), folioCursors(rich, { user })] }),
  });
  bindProseMirror(rich, view);
  for (const button of $('toolbar').querySelectorAll('button')) {
    button.addEventListener('mousedown', (e) => e.preventDefault()); // keep the editor's selection
    button.addEventListener('click', () => {
      run[button.dataset.command](view.state, view.dispatch, view);
      view.focus();
    });
  }
  $('rich-id').textContent = editors.rich;
  presenceList(rich, $('rich-people'));
  window.folioDemo = { ...window.folioDemo, rich, richView: view };
  return rich;
}

function richMissing(text) {
  $('rich-missing').textContent = text;
  $('rich-missing').hidden = false;
  $('toolbar').hidden = true;
  $('rich-people').parentElement.hidden = true;
}

async function main() {
  if (!token || !organizationId || !documentId) {
    show('error', 'no token');
    // The link as scripts/run prints it, on this page's own origin (its FOLIO_PORT).
    $('help-link').textContent = `${location.origin}${location.pathname}#token=…&org=…&doc=…`;
    $('help').hidden = false;
    return;
  }
  const ids = { baseUrl: location.origin, token, organizationId, documentId, EventSource: WebSocketEventSource };
  try {
    const [text, list] = await Promise.all([
      connect({ ...ids, editorId: editors.text }),
      connect({ ...ids, editorId: editors.list }),
    ]);
    if (text.type !== 'text' || list.type !== 'array') throw new Error(`expected a text and an array record, found ${text.type} and ${list.type}`);
    $('text-id').textContent = `${organizationId} / ${documentId} / ${editors.text}`;
    $('tasks-id').textContent = editors.list;
    bindTextarea(text, $('text'));
    list.on('change', () => renderTasks(list));
    renderTasks(list);
    $('add-task').addEventListener('submit', (e) => {
      e.preventDefault();
      const title = $('task-title').value.trim();
      if (title) list.insert(list.length, { title, done: false });
      $('task-title').value = '';
    });
    await versionList(text);
    const user = me();
    text.presence.set({ ...user }); // bindTextarea publishes the caret from now on
    presenceList(text, $('text-people'));
    window.folioDemo = { ...window.folioDemo, text, list };
    $('records').hidden = false;
    $('tips').hidden = false;
    const rich = await richText(ids, user);
    const live = rich ? [text, list, rich] : [text, list];
    nameField(user, rich ? [text, rich] : [text]);
    watch(live);
  } catch (e) {
    const expired = e.httpStatus === 401 ? ' (run scripts/run again for a fresh link)' : '';
    show('error', `${e.status ?? 'error'}: ${e.message}${expired}`);
  }
}

main();
