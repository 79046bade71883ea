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
import { bindTextarea, connect } from '/client/folio.js';

const params = new URLSearchParams(location.hash.slice(1));
const token = params.get('token');
const organizationId = params.get('org');
const documentId = params.get('doc');
const editors = { text: params.get('text') || 'text', list: params.get('list') || 'tasks' };
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

async function main() {
  if (!token || !organizationId || !documentId) {
    show('error', 'no token');
    // The link as scripts/run prints it, on this page's own origin (its FOLIO_PORT).
    $('help-link').textContent = `${location.origin}${location.pathname}#token=…&org=…&doc=…`;
    $('help').hidden = false;
    return;
  }
  const ids = { baseUrl: location.origin, token, organizationId, documentId };
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
    $('records').hidden = false;
    $('tips').hidden = false;
    watch([text, list]);
  } catch (e) {
    const expired = e.httpStatus === 401 ? ' (run scripts/run again for a fresh link)' : '';
    show('error', `${e.status ?? 'error'}: ${e.message}${expired}`);
  }
}

main();
