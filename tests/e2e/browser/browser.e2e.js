// The JavaScript client in a real browser (Debian's headless Chromium, driven by puppeteer-core)
// against the real stack (nginx + Nchan + folio-fcgi), started by tests/e2e/browser_e2e.py, which
// passes: FOLIO_URL (the stack), FOLIO_KEY / FOLIO_TOKEN (tenant a's API key and auth token: this file
// plays the application's backend, which adds records and mints client tokens), FOLIO_PAGES_PORT (the
// port of the page server below, whose origin the stack allows through CORS), FOLIO_CHROMIUM (the
// browser binary) and FOLIO_ARTIFACTS (where the demo's screenshot goes).
//
// The test pages come from a server of their own on another port, so everything a page of another
// origin does is exercised: it imports the client from Folio's nginx (/client/folio.js, its src/*.js
// and its wasm, with CORS), and calls crdt/sync and crdt/subscribe cross-origin with a client token.
// The demo page is the exception: nginx serves it, same-origin. No timed assertions: every wait is
// for a condition, with a generous deadline.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, test as nodeTest } from 'node:test';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';
import { packagesImportMap } from './import-map.js';

// FOLIO_BROWSER_SKIP (a regular expression, browser_e2e.py passes it on): the cases whose names match are
// skipped. Node 20's --test-name-pattern cannot leave one case out: the file's own test matches first.
const skipped = process.env.FOLIO_BROWSER_SKIP ? new RegExp(process.env.FOLIO_BROWSER_SKIP) : null;
const test = (name, ...rest) => (skipped?.test(name) ? nodeTest(name, { skip: 'FOLIO_BROWSER_SKIP' }, rest.at(-1)) : nodeTest(name, ...rest));

const here = dirname(fileURLToPath(import.meta.url));
const base = process.env.FOLIO_URL;
const backend = { 'x-folio-api-key': process.env.FOLIO_KEY, 'x-folio-auth-token': process.env.FOLIO_TOKEN };
const pagesPort = Number(process.env.FOLIO_PAGES_PORT);
const pagesOrigin = `http://127.0.0.1:${pagesPort}`;
const artifacts = process.env.FOLIO_ARTIFACTS;
const org = 'org browser';
const DEADLINE_MS = 60000;
// waitForFunction polls on a timer: its default, requestAnimationFrame, never fires in a tab in the background.
const POLL_MS = 50;

// ---- the backend: REST with the API key ------------------------------------------------------------

async function rest(path, data) {
  const res = await fetch(base + path, { method: 'POST', headers: { 'Content-Type': 'application/json', ...backend }, body: JSON.stringify({ data }) });
  return { status: res.status, body: await res.json() };
}

let documents = 0;
/** A new document id (each test works in its own, so a token for one never opens another's). */
const newDoc = (what) => `${what} ${++documents} ü`;

async function add(ids, type, data) {
  const r = await rest('/v2/crdt/add', { ...ids, type, data });
  assert.equal(r.status, 200, JSON.stringify(r.body));
}

async function stored(ids) {
  const r = await rest('/v2/crdt/get', ids);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.result.data[0].data;
}

/** A client token for one document of `org` (every editor of it), as an application's backend mints it. */
async function mint(documentId, more = {}) {
  const r = await rest('/v2/auth/token', { organizationId: org, documentId, userId: 'browser-user', access: 'write', ...more });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.result.data;
}

/** Waits (polling every 50 ms, up to DEADLINE_MS) until `cond()` holds; the failure names `what` and the last value seen. */
async function until(cond, what) {
  let last;
  const end = Date.now() + DEADLINE_MS;
  while (Date.now() < end) {
    last = await cond();
    if (last === true) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting until ${what} (last: ${JSON.stringify(last)})`);
}

// ---- the page server --------------------------------------------------------------------------------

/** The editors' packages the pages import (the bindings' peers; Tiptap for its example). */
const EDITOR_PACKAGES = ['@codemirror/view', '@codemirror/state', 'prosemirror-model', 'prosemirror-state', 'prosemirror-view', 'prosemirror-transform',
  'prosemirror-history', 'prosemirror-schema-basic', 'prosemirror-schema-list', 'prosemirror-keymap', 'prosemirror-commands',
  '@tiptap/core', '@tiptap/starter-kit', '@tiptap/pm'];
// The client by its package names too, from Folio's nginx (clients/js/examples/*.js import it so).
const importMap = () => {
  const map = packagesImportMap(here, EDITOR_PACKAGES);
  map.imports['@folio/client'] = `${base}/client/folio.js`;
  map.imports['@folio/client/prosemirror'] = `${base}/client/src/prosemirror.js`;
  return map;
};

const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Folio browser test</title>
<script type="importmap">${JSON.stringify(importMap())}</script>
<script type="module">import * as harness from '/harness.js'; window.harness = harness; window.pm = await import('/prosemirror-harness.js');</script>
</head><body></body></html>`;

const TYPES = { js: 'text/javascript', mjs: 'text/javascript', html: 'text/html' };

function servePages() {
  const server = createServer((req, res) => {
    const path = new URL(req.url, pagesOrigin).pathname;
    let body = null;
    if (path === '/page.html') body = PAGE;
    else if (path === '/harness.js' || path === '/prosemirror-harness.js') body = readFileSync(join(here, path.slice(1)));
    else if (path === '/examples/tiptap.js') body = readFileSync(join(here, '../../../clients/js/examples/tiptap.js'));
    else if (/^\/node_modules\/[@a-zA-Z0-9._/-]+\.m?js$/.test(path) && !path.includes('..')) {
      try {
        body = readFileSync(join(here, path));
      } catch {
        body = null;
      }
    }
    if (body === null) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'Content-Type': TYPES[path.split('.').pop()] ?? 'application/octet-stream', 'Cache-Control': 'no-store' });
    res.end(body);
  });
  return new Promise((resolve) => server.listen(pagesPort, '127.0.0.1', () => resolve(server)));
}

// ---- the browser --------------------------------------------------------------------------------------

let browser;
let pages;

before(async () => {
  pages = await servePages();
  browser = await puppeteer.launch({
    executablePath: process.env.FOLIO_CHROMIUM,
    headless: /headless-shell/.test(process.env.FOLIO_CHROMIUM) ? 'shell' : true,   // Debian's chromium-headless-shell, or chromium
    // Root in a container: Chromium's sandbox needs user namespaces it may not have; /dev/shm is small.
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
    protocolTimeout: 120000,
  });
});

after(async () => {
  await browser?.close();
  pages?.close();
});

/** A new tab (its own browser context: storage of its own, like another browser) on the test page. */
async function newPage(context) {
  const ctx = context ?? (await browser.createBrowserContext());
  const page = await ctx.newPage();
  page.log = [];
  page.on('console', (m) => page.log.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => page.log.push(`pageerror: ${e.message}`));
  page.on('requestfailed', (r) => page.log.push(`requestfailed: ${r.url()} ${r.failure()?.errorText}`));
  await load(page);
  return page;
}

async function load(page) {
  await page.goto(`${pagesOrigin}/page.html?folio=${encodeURIComponent(base)}`, { timeout: DEADLINE_MS });
  await page.waitForFunction(() => window.harness !== undefined && window.pm !== undefined, { timeout: DEADLINE_MS, polling: POLL_MS }).catch((e) => {
    throw new Error(`the test page did not load the client: ${e.message}\n${page.log.join('\n')}`);
  });
}

/** Calls harness[fn](...args) in the page. */
const call = (page, fn, ...args) => page.evaluate((f, a) => window.harness[f](...a), fn, args);

async function open(page, name, options) {
  const r = await call(page, 'open', name, options);
  assert.ok(!r.error, `connect failed: ${JSON.stringify(r.error)}\n${page.log.join('\n')}`);
  return r;
}

async function offline(page, on) {
  await page.setOfflineMode(on);
}

/** Puts the caret of textarea `name` at [from, to) (UTF-16 positions) and focuses it. */
async function select(page, name, from, to = from) {
  await page.evaluate((n, a, b) => {
    const ta = document.getElementById(n);
    ta.focus();
    ta.setSelectionRange(a, b);
  }, name, from, to);
}

const selection = (page, name) => page.evaluate((n) => {
  const ta = document.getElementById(n);
  return [ta.selectionStart, ta.selectionEnd];
}, name);

// ---- the cases ----------------------------------------------------------------------------------------

test('two pages edit the same text concurrently, one offline for a while, and converge with each other and with crdt/get', async () => {
  const ids = { organizationId: org, documentId: newDoc('concurrent'), editorId: 'text' };
  await add(ids, 'text', 'Hello');
  const { token } = await mint(ids.documentId);
  const a = await newPage();
  const b = await newPage();
  try {
    await open(a, 'text', { token, ids });
    await open(b, 'text', { token, ids });
    await call(a, 'textarea', 'text');
    await call(b, 'textarea', 'text');
    // Typed into real textareas: the binding turns input events into record edits.
    await select(a, 'text', 5);
    await a.keyboard.type(', world');
    await until(async () => (await call(b, 'shown', 'text')) === 'Hello, world' || (await call(b, 'shown', 'text')), "b shows a's edit");

    await offline(b, true);
    await select(b, 'text', 0);
    await b.keyboard.type('Hi! ');          // offline: its push fails, the edit stays
    await until(async () => (await call(b, 'state', 'text')).online === false || (await call(b, 'state', 'text')), 'b is offline');
    await select(a, 'text', 12);
    await a.keyboard.type(' again');        // meanwhile a edits online
    await select(b, 'text', 9);
    await b.keyboard.type(' there');        // b edits some more, offline
    assert.ok((await call(b, 'shown', 'text')).startsWith('Hi! Hello there, world'));
    await until(async () => (await stored(ids)) === 'Hello, world again' || (await stored(ids)), "the service has a's edit and none of b's");
    assert.equal((await call(b, 'state', 'text')).online, false);

    await offline(b, false);                // back: the client retries and merges by itself
    const expected = 'Hi! Hello there, world again';
    await until(async () => {
      const seen = [await call(a, 'shown', 'text'), await call(b, 'shown', 'text'), await stored(ids)];
      return seen.every((v) => v === expected) || seen;
    }, 'both pages and the service hold the merged text');
    assert.deepEqual((await call(a, 'state', 'text')).errors, []);
    assert.deepEqual((await call(b, 'state', 'text')).errors, []);
  } finally {
    await a.browserContext().close();
    await b.browserContext().close();
  }
});

test('a REST update appears in a page without a reload', async () => {
  const ids = { organizationId: org, documentId: newDoc('rest'), editorId: 'text' };
  await add(ids, 'text', 'one three');
  const { token } = await mint(ids.documentId);
  const page = await newPage();
  try {
    await open(page, 'text', { token, ids });
    await call(page, 'textarea', 'text');
    assert.equal(await call(page, 'shown', 'text'), 'one three');
    const r = await rest('/v2/crdt/update', { ...ids, data: 'one two three' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    await until(async () => (await call(page, 'shown', 'text')) === 'one two three' || (await call(page, 'shown', 'text')), 'the update is shown');
  } finally {
    await page.browserContext().close();
  }
});

test('the textarea keeps the caret and the selection through remote inserts before them', async () => {
  const ids = { organizationId: org, documentId: newDoc('caret'), editorId: 'text' };
  await add(ids, 'text', 'hello world');
  const { token } = await mint(ids.documentId);
  const page = await newPage();
  try {
    await open(page, 'text', { token, ids });
    await call(page, 'textarea', 'text');
    await select(page, 'text', 6);          // before "world"
    assert.equal((await rest('/v2/crdt/update', { ...ids, data: 'a big hello world' })).status, 200);
    await until(async () => (await call(page, 'shown', 'text')) === 'a big hello world' || (await call(page, 'shown', 'text')), 'the insert arrives');
    assert.deepEqual(await selection(page, 'text'), [12, 12], 'the caret moved with "world"');
    await page.keyboard.type('new ');       // the user goes on typing where the caret is
    await until(async () => (await stored(ids)) === 'a big hello new world' || (await stored(ids)), 'the typing reaches the service');

    await select(page, 'text', 16, 21);     // "world" selected
    assert.equal((await rest('/v2/crdt/update', { ...ids, data: '😀 a big hello new world' })).status, 200);
    await until(async () => (await call(page, 'shown', 'text')) === '😀 a big hello new world' || (await call(page, 'shown', 'text')), 'the second insert arrives');
    assert.deepEqual(await selection(page, 'text'), [19, 24], 'the selection still holds "world" (the emoji is two UTF-16 units)');
  } finally {
    await page.browserContext().close();
  }
});

test('all four record types round-trip through the client in the browser', async () => {
  const documentId = newDoc('types');
  const { token } = await mint(documentId);
  const cases = [
    ['text', 'plain', ['replace', 'plain text'], 'plain text'],
    ['map', { a: 1 }, ['set', 'b', { c: [1, 2.5, 1e-7, 'ü'] }], { a: 1, b: { c: [1, 2.5, 1e-7, 'ü'] } }],
    ['array', [{ x: 1 }], ['insert', 1, { y: 'two' }, { z: null }], [{ x: 1 }, { y: 'two' }, { z: null }]],
    ['xml', '<p>Hi</p>', ['replace', '<p class="x">Hi <b>there</b></p><p/>'], '<p class="x">Hi <b>there</b></p><p/>'],
  ];
  const page = await newPage();
  try {
    for (const [type, initial, edit, expected] of cases) {
      const ids = { organizationId: org, documentId, editorId: type };
      await add(ids, type, initial);
      const opened = await open(page, type, { token, ids });
      assert.deepEqual(opened, { type, value: initial }, type);
      await call(page, 'edit', type, ...edit);
      const synced = await call(page, 'sync', type);
      assert.deepEqual(synced, { value: expected }, type);
      assert.deepEqual(await stored(ids), expected, `${type}: the service holds the page's edit`);
      await call(page, 'close', type);
      assert.deepEqual(await open(page, type, { token, ids }), { type, value: expected }, `${type}: a new replica joins with the value`);
      await call(page, 'close', type);
    }
  } finally {
    await page.browserContext().close();
  }
});

test('a token for one document cannot read, sync or subscribe to another (403); an expired one is refused (401)', async () => {
  const mine = { organizationId: org, documentId: newDoc('scope'), editorId: 'text' };
  const other = { ...mine, documentId: newDoc('scope other') };
  await add(mine, 'text', 'mine');
  await add(other, 'text', 'secret');
  const { token } = await mint(mine.documentId);
  const page = await newPage();
  try {
    const denied = { status: 403, body: { error: { message: 'The client token does not cover this documentId.', status: 'PERMISSION_DENIED' } } };
    const get = await call(page, 'post', '/v2/crdt/get', token, other);
    assert.deepEqual(get, denied, 'crdt/get');
    const sync = await call(page, 'post', '/v2/crdt/sync', token, { ...other, version: 'AA==' });
    assert.deepEqual(sync, denied, 'crdt/sync');
    assert.deepEqual(await call(page, 'subscribeAnswer', token, other), denied, 'crdt/subscribe');
    // The client itself: its EventSource is refused, and connect rejects with the service's error.
    const refused = await call(page, 'open', 'other', { token, ids: other });
    assert.deepEqual(refused.error, { name: 'FolioError', status: 'PERMISSION_DENIED', httpStatus: 403, message: denied.body.error.message });
    // The token's own document opens.
    assert.deepEqual(await open(page, 'mine', { token, ids: mine }), { type: 'text', value: 'mine' });
    await call(page, 'close', 'mine');

    const short = await mint(mine.documentId, { expiresInSeconds: 1 });
    const expiry = Date.parse(short.expiresAt);
    await until(() => Date.now() > expiry + 100 || new Date().toISOString(), `the token expires (${short.expiresAt})`);
    const message = `The client token expired at ${short.expiresAt}.`;
    const expired = await call(page, 'open', 'expired', { token: short.token, ids: mine });
    assert.deepEqual(expired.error, { name: 'FolioError', status: 'UNAUTHENTICATED', httpStatus: 401, message });
    assert.deepEqual(await call(page, 'post', '/v2/crdt/get', short.token, mine), { status: 401, body: { error: { message, status: 'UNAUTHENTICATED' } } });
    assert.deepEqual(await call(page, 'subscribeAnswer', short.token, mine), { status: 401, body: { error: { message, status: 'UNAUTHENTICATED' } } });
  } finally {
    await page.browserContext().close();
  }
});

test('a reload with a replica persisted in localStorage keeps the offline edits', async () => {
  const ids = { organizationId: org, documentId: newDoc('persist'), editorId: 'list' };
  await add(ids, 'array', [{ n: 1 }]);
  const { token } = await mint(ids.documentId);
  const page = await newPage();
  const persistKey = 'folio:persist-test';
  try {
    await open(page, 'list', { token, ids, persistKey });
    await offline(page, true);
    await call(page, 'edit', 'list', 'insert', 1, { n: 2 });   // saved before its push, which fails
    await until(async () => (await call(page, 'state', 'list')).online === false || (await call(page, 'state', 'list')), 'the page is offline');
    await call(page, 'edit', 'list', 'insert', 2, { n: 3 });   // saved as an offline edit
    await page.waitForFunction((k) => localStorage.getItem(k) !== null, { timeout: DEADLINE_MS, polling: POLL_MS }, persistKey);
    // The page goes away before the network comes back: only what was persisted survives.
    await call(page, 'close', 'list');
    await offline(page, false);
    assert.deepEqual(await stored(ids), [{ n: 1 }], 'nothing was pushed');
    await page.reload({ timeout: DEADLINE_MS });
    await page.waitForFunction(() => window.harness !== undefined && window.pm !== undefined, { timeout: DEADLINE_MS, polling: POLL_MS });
    const reopened = await open(page, 'list', { token, ids, persistKey });
    assert.deepEqual(reopened.value, [{ n: 1 }, { n: 2 }, { n: 3 }], 'the reloaded page resumes with its edits');
    await until(async () => JSON.stringify(await stored(ids)) === JSON.stringify([{ n: 1 }, { n: 2 }, { n: 3 }]) || (await stored(ids)), 'the edits reach the service');
  } finally {
    await page.browserContext().close();
  }
});

test('a CodeMirror EditorView (folioSync) and a textarea page converge', async () => {
  const ids = { organizationId: org, documentId: newDoc('codemirror'), editorId: 'text' };
  await add(ids, 'text', 'const x = 1;\n');
  const { token } = await mint(ids.documentId);
  const cm = await newPage();
  const ta = await newPage();
  try {
    await open(cm, 'text', { token, ids });
    await call(cm, 'codemirror', 'text');
    await open(ta, 'text', { token, ids });
    await call(ta, 'textarea', 'text');
    assert.equal(await call(cm, 'shown', 'text'), 'const x = 1;\n');
    // Typed into CodeMirror's contenteditable: at the end of the document.
    await cm.click('#text .cm-content');
    await cm.keyboard.down('Control');
    await cm.keyboard.press('End');
    await cm.keyboard.up('Control');
    await cm.keyboard.type('const y = 2;');
    await select(ta, 'text', 0);
    await ta.keyboard.type('// two editors\n');
    const expected = '// two editors\nconst x = 1;\nconst y = 2;';
    await until(async () => {
      const seen = [await call(cm, 'shown', 'text'), await call(ta, 'shown', 'text'), await stored(ids)];
      return seen.every((v) => v === expected) || seen;
    }, 'CodeMirror, the textarea and the service agree');
  } finally {
    await cm.browserContext().close();
    await ta.browserContext().close();
  }
});

test('the demo page: two tabs converge, see each other in the rich text, a REST update appears, a saved version restores in both, and a screenshot is saved', async () => {
  const documentId = newDoc('demo');
  const text = { organizationId: org, documentId, editorId: 'text' };
  const tasks = { organizationId: org, documentId, editorId: 'tasks' };
  const rich = { organizationId: org, documentId, editorId: 'rich' };
  await add(text, 'text', 'Hello from the demo.\n');
  await add(tasks, 'array', [{ title: 'Open a second tab', done: false }]);
  await add(rich, 'xml', '<heading level="1">Rich text</heading><paragraph>Some <strong>bold</strong> words.</paragraph>');
  const { token } = await mint(documentId);
  const link = (name) => `${base}/demo/#${new URLSearchParams({ token, org, doc: documentId, name })}`;
  const ctx = await browser.createBrowserContext();
  const one = await ctx.newPage();
  const two = await ctx.newPage();
  try {
    for (const [page, name] of [[one, 'Ana'], [two, 'Bo']]) {
      await page.bringToFront();
      await page.setViewport({ width: 1100, height: 900 });
      await page.goto(link(name), { timeout: DEADLINE_MS });
      await page.waitForFunction(() => document.getElementById('status').dataset.state === 'online', { timeout: DEADLINE_MS, polling: POLL_MS })
        .catch(async (e) => { throw new Error(`${e.message}: ${await page.$eval('#status', (s) => s.textContent)}`); });
    }
    const shown = (page) => page.$eval('#text', (t) => t.value);
    const titles = (page) => page.$$eval('#tasks li span', (s) => s.map((x) => x.textContent));
    assert.equal(await shown(one), 'Hello from the demo.\n');

    // The rich text: ProseMirror shows the xml record; typing in one tab reaches the other and the
    // service; each tab lists the other and draws its caret with its name.
    const richShown = (page) => page.$eval('#rich .ProseMirror', (e) => e.innerHTML);
    const richText = (page) => page.$eval('#rich .ProseMirror', (e) => e.innerText);
    await until(async () => (await richShown(one)).includes('<h1>Rich text</h1>') || (await richShown(one)), 'tab one shows the rich text');
    assert.match(await richShown(two), /<p>Some <strong>bold<\/strong> words\./);
    await one.bringToFront();
    await one.click('#rich .ProseMirror p');
    await one.keyboard.press('End');
    await one.keyboard.type(' Typed here.');
    await until(async () => (await richText(two)).includes('words. Typed here.') || (await richText(two)), 'tab two shows tab one\'s rich typing');
    await until(async () => (await stored(rich)) === '<heading level="1">Rich text</heading><paragraph>Some <strong>bold</strong> words. Typed here.</paragraph>' || (await stored(rich)), 'the service holds it');
    const here = (page, list) => page.$$eval(`#${list} li .folio-presence-name`, (l) => l.map((x) => x.textContent));
    await until(async () => JSON.stringify([await here(one, 'rich-people'), await here(two, 'rich-people'), await here(one, 'text-people')]) === '[["Bo"],["Ana"],["Bo"]]'
      || [await here(one, 'rich-people'), await here(two, 'rich-people'), await here(one, 'text-people')], 'each tab lists the other');
    const caretLabels = (page) => page.$$eval('#rich .folio-cursor-label', (l) => l.map((x) => x.textContent));
    await until(async () => JSON.stringify(await caretLabels(two)) === '["Ana"]' || (await caretLabels(two)), 'tab two draws Ana\'s caret');
    // Where: right after "Typed here." (the caret's character is the end of the paragraph).
    const caretBefore = (page) => page.$eval('#rich .folio-cursor', (c) => c.previousSibling?.textContent ?? (c.parentElement.previousSibling?.textContent ?? ''));
    assert.match(await caretBefore(two), /Typed here\.$/);

    await one.bringToFront();
    await one.focus('#text');
    await one.$eval('#text', (t) => t.setSelectionRange(t.value.length, t.value.length));
    await one.keyboard.type('Typed in tab one.');
    await until(async () => (await shown(two)) === 'Hello from the demo.\nTyped in tab one.' || (await shown(two)), 'tab two shows tab one\'s typing');

    // Clicks need layout, which Chromium does not run for a tab in the background: bring each forward.
    await two.bringToFront();
    await two.type('#task-title', 'Run the curl line');
    await two.click('#add-task button');
    await until(async () => JSON.stringify(await titles(one)) === JSON.stringify(['Open a second tab', 'Run the curl line']) || (await titles(one)), "tab one lists tab two's task");
    await one.bringToFront();
    await one.click('#tasks li input[type=checkbox]');
    await until(async () => (await stored(tasks))[0].done === true || (await stored(tasks)), 'the ticked task is stored');

    assert.equal((await rest('/v2/crdt/update', { ...text, data: 'Hello from curl!\nTyped in tab one.' })).status, 200);
    await until(async () => {
      const seen = [await shown(one), await shown(two)];
      return seen.every((v) => v === 'Hello from curl!\nTyped in tab one.') || seen;
    }, 'both tabs show the REST update');

    // Versions: tab one saves one; the text changes; tab two restores it: both tabs show it, live.
    const saved = 'Hello from curl!\nTyped in tab one.';
    const versionIds = (page) => page.$$eval('#versions li', (l) => l.map((x) => x.dataset.versionId));
    const before = await versionIds(one);
    await one.bringToFront();
    await one.type('#version-name', 'Before the rewrite');
    await one.click('#save-version button');
    await until(async () => (await versionIds(one)).length === before.length + 1 || (await versionIds(one)), 'tab one lists the saved version');
    const [named] = await versionIds(one);
    assert.match(await one.$eval('#versions li span', (s) => s.textContent), /^Before the rewrite · /);
    assert.equal((await rest('/v2/crdt/update', { ...text, data: 'Rewritten.' })).status, 200);
    await until(async () => {
      const seen = [await shown(one), await shown(two)];
      return seen.every((v) => v === 'Rewritten.') || seen;
    }, 'both tabs show the rewrite');
    await two.bringToFront();
    await two.reload({ timeout: DEADLINE_MS }); // tab two lists the versions as they are now
    await two.waitForFunction(() => document.getElementById('status').dataset.state === 'online', { timeout: DEADLINE_MS, polling: POLL_MS });
    await until(async () => (await versionIds(two))[0] === named || (await versionIds(two)), 'tab two lists the saved version');
    const listedBefore = (await versionIds(two)).length;
    await two.click(`#versions li[data-version-id="${named}"] button`);
    await until(async () => {
      const seen = [await shown(one), await shown(two)];
      return seen.every((v) => v === saved) || seen;
    }, 'both tabs show the restored text');
    assert.equal((await stored(text)), saved);
    // The list was read again: the restore's backup of "Rewritten." is the newest version.
    await until(async () => (await versionIds(two)).length === listedBefore + 1 || (await versionIds(two)), 'tab two lists the backup');
    await until(async () => (await versionIds(one)).length === listedBefore + 1 || (await versionIds(one)), 'tab one lists it after the remote change');
    await one.bringToFront(); // Chromium paints (and screenshots) only the tab in front
    if (artifacts) {
      mkdirSync(artifacts, { recursive: true });
      await one.screenshot({ path: join(artifacts, 'demo.png') });
    }
  } finally {
    await ctx.close();
  }
});

// ---- issue 49: input methods, persistence, tabs, large states, back online ------------------------------

/** The record's state in the page (value, online, errors, persisted: completed persist calls). */
const pageState = (page, name) => call(page, 'state', name);

/**
 * Composes にほん → 日本 at the caret of the page's 'text' editor through Chromium's own input method path
 * (CDP Input.imeSetComposition: compositionstart, compositionupdate, input events with isComposing; then
 * Input.insertText, which commits 日本), while a REST update of the record 'abc' to 'Xabc' arrives
 * mid-composition; waits until `what` (the editor shown), the record and the service all hold 'Xabc日本'.
 */
async function composeAcrossARemoteInsert(page, ids, what) {
  const cdp = await page.createCDPSession();
  const compose = (text) => cdp.send('Input.imeSetComposition', { text, selectionStart: text.length, selectionEnd: text.length });
  await compose('に');
  await compose('にほ');
  assert.equal((await rest('/v2/crdt/update', { ...ids, data: 'Xabc' })).status, 200);
  await until(async () => (await pageState(page, 'text')).value.startsWith('X') || (await pageState(page, 'text')), 'the remote insert reached the record');
  await compose('にほん');  // the composition goes on after the remote change arrived
  await cdp.send('Input.insertText', { text: '日本' });
  const expected = 'Xabc日本';
  await until(async () => {
    const seen = [await call(page, 'shown', 'text'), (await pageState(page, 'text')).value, await stored(ids)];
    return seen.every((v) => v === expected) || seen;
  }, `${what}, the record and the service hold the remote insert and the composed text, not its reading`);
}

test('an input method composing in the textarea while a remote insert arrives: the composed text replaces its reading', async () => {
  const ids = { organizationId: org, documentId: newDoc('ime'), editorId: 'text' };
  await add(ids, 'text', 'abc');
  const { token } = await mint(ids.documentId);
  const page = await newPage();
  try {
    await open(page, 'text', { token, ids });
    await call(page, 'textarea', 'text');
    await select(page, 'text', 3);
    await composeAcrossARemoteInsert(page, ids, 'the textarea');
    assert.deepEqual(await selection(page, 'text'), [6, 6], 'the caret is after the composed text');
    assert.deepEqual((await pageState(page, 'text')).errors, []);
  } finally {
    await page.browserContext().close();
  }
});

test('a CodeMirror editor composing while a remote insert arrives: the composed text replaces its reading', async () => {
  const ids = { organizationId: org, documentId: newDoc('ime codemirror'), editorId: 'text' };
  await add(ids, 'text', 'abc');
  const { token } = await mint(ids.documentId);
  const page = await newPage();
  try {
    await open(page, 'text', { token, ids });
    await call(page, 'codemirror', 'text');
    await page.click('#text .cm-content');
    await page.keyboard.press('End');
    await composeAcrossARemoteInsert(page, ids, 'the editor');
    assert.deepEqual((await pageState(page, 'text')).errors, []);
  } finally {
    await page.browserContext().close();
  }
});

test('typing on a slow link and closing the tab 100 ms after the last key: the reopened page and the service have every key', async () => {
  const ids = { organizationId: org, documentId: newDoc('slow close'), editorId: 'text' };
  await add(ids, 'text', '');
  const { token } = await mint(ids.documentId);
  const ctx = await browser.createBrowserContext();
  const store = 'slow-close';
  try {
    const page = await newPage(ctx);
    await open(page, 'text', { token, ids, store });
    await call(page, 'textarea', 'text');
    const cdp = await page.createCDPSession();
    await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 1500, downloadThroughput: -1, uploadThroughput: -1 });
    await select(page, 'text', 0);
    await page.keyboard.type('hello world');   // the first key's push is on the slow link while the others are typed
    await new Promise((r) => setTimeout(r, 100)); // the user closes the tab just after the last key, while pushes are in flight
    await page.close({ runBeforeUnload: false });

    const again = await newPage(ctx);
    const reopened = await open(again, 'text', { token, ids, store });
    assert.equal(reopened.value, 'hello world', 'the reopened page holds every key');
    await until(async () => (await stored(ids)) === 'hello world' || (await stored(ids)), 'the service gets every key');
    assert.deepEqual((await pageState(again, 'text')).errors, []);
  } finally {
    await ctx.close();
  }
});

test('two tabs of one profile resume the same stored state: both push, nothing is refused, they converge', async () => {
  const ids = { organizationId: org, documentId: newDoc('two tabs'), editorId: 'text' };
  await add(ids, 'text', 'base');
  const { token } = await mint(ids.documentId);
  const ctx = await browser.createBrowserContext();   // one profile: one IndexedDB
  const store = 'two-tabs';
  try {
    // A first tab leaves a state with an edit the service has not seen.
    const first = await newPage(ctx);
    await open(first, 'text', { token, ids, store });
    await offline(first, true);
    await call(first, 'edit', 'text', 'insert', 0, '0 ');
    await until(async () => (await pageState(first, 'text')).persisted > 0 || (await pageState(first, 'text')), 'the first tab persisted its edit');
    await first.close();

    // Two tabs open it at once: the same state, unsent edit included.
    const a = await newPage(ctx);
    const b = await newPage(ctx);
    await open(a, 'text', { token, ids, store });
    await open(b, 'text', { token, ids, store });
    assert.equal((await pageState(a, 'text')).value, '0 base');
    assert.equal((await pageState(b, 'text')).value, '0 base');
    await call(a, 'edit', 'text', 'insert', 6, ' A');
    await call(b, 'edit', 'text', 'insert', 6, ' B');
    await until(async () => {
      const seen = [(await pageState(a, 'text')).value, (await pageState(b, 'text')).value, await stored(ids)];
      return (seen.every((v) => v === seen[0]) && /^0 base( A B| B A)$/.test(seen[0])) || seen;
    }, 'both tabs and the service hold the first tab\'s edit and both tabs\' edits');
    assert.deepEqual((await pageState(a, 'text')).errors, []);
    assert.deepEqual((await pageState(b, 'text')).errors, []);

    // Both tabs edit offline and close; a tab opened later has both tabs' edits and pushes them.
    await offline(a, true);
    await offline(b, true);
    const before = [(await pageState(a, 'text')).persisted, (await pageState(b, 'text')).persisted];
    await call(a, 'edit', 'text', 'insert', 0, 'a: ');
    await call(b, 'edit', 'text', 'insert', 0, 'b: ');
    await until(async () => ((await pageState(a, 'text')).persisted > before[0] && (await pageState(b, 'text')).persisted > before[1]) || 'not yet', 'both tabs persisted their offline edits');
    await a.close();
    await b.close();
    const later = await newPage(ctx);
    const reopened = await open(later, 'text', { token, ids, store });
    assert.ok(/^(a: b: |b: a: )0 base( A B| B A)$/.test(reopened.value), `the later tab holds both tabs' offline edits: ${reopened.value}`);
    await until(async () => (await stored(ids)) === reopened.value || (await stored(ids)), 'the service gets both tabs\' offline edits');
    assert.deepEqual((await pageState(later, 'text')).errors, []);
  } finally {
    await ctx.close();
  }
});

test('a tab that writes its stored state after another tab merged it keeps it: no edit of an open tab is dropped', async () => {
  const ids = { organizationId: org, documentId: newDoc('tab keeps'), editorId: 'text' };
  await add(ids, 'text', 'base');
  const { token } = await mint(ids.documentId);
  const ctx = await browser.createBrowserContext();
  const store = 'tab-keeps';
  try {
    const a = await newPage(ctx);
    await open(a, 'text', { token, ids, store });
    await offline(a, true);
    await call(a, 'edit', 'text', 'insert', 0, 'a1 ');
    await until(async () => (await pageState(a, 'text')).persisted > 0 || 'not yet', 'a stored its first edit');
    const b = await newPage(ctx);
    await call(b, 'loadEngine');
    await offline(b, true);                          // b pushes nothing, so persists nothing, until it edits
    await open(b, 'text', { token, ids, store });   // reads a's entry as it is now
    const before = (await pageState(a, 'text')).persisted;
    await call(a, 'edit', 'text', 'insert', 0, 'a2 ');   // a writes its entry again
    await until(async () => (await pageState(a, 'text')).persisted > before || 'not yet', 'a stored its second edit');
    await call(a, 'close', 'text');                       // a writes no more (its retries would write it again)
    await call(b, 'edit', 'text', 'insert', 7, ' b');    // b's first persist: a's entry changed since b read it, so it stays
    await until(async () => (await pageState(b, 'text')).persisted > 0 || 'not yet', 'b stored its edit');
    await a.close();
    await b.close();
    const c = await newPage(ctx);
    const reopened = await open(c, 'text', { token, ids, store });
    assert.equal(reopened.value, 'a2 a1 base b', 'the later tab holds both of a\'s edits and b\'s');
    await until(async () => (await stored(ids)) === 'a2 a1 base b' || (await stored(ids)), 'the service gets them');
  } finally {
    await ctx.close();
  }
});

test('record.close() then store.close() at once: the keys whose persist was queued are stored, no error', async () => {
  const ids = { organizationId: org, documentId: newDoc('close order'), editorId: 'text' };
  await add(ids, 'text', '');
  const { token } = await mint(ids.documentId);
  const ctx = await browser.createBrowserContext();
  try {
    const page = await newPage(ctx);
    await open(page, 'text', { token, ids, store: 'close-order' });
    await offline(page, true); // the persist calls are all that keeps the keys
    const errors = await call(page, 'typeAndClose', 'text', 'a', 'b');
    let values;
    await until(async () => (values = await call(page, 'storedValues', 'close-order')).includes('ab') || values, 'the state with both keys is stored');
    assert.deepEqual(errors, [], 'no PERSIST_FAILED');
    assert.deepEqual(page.log.filter((l) => /PERSIST_FAILED|InvalidStateError/.test(l)), []);
  } finally {
    await ctx.close();
  }
});

test('a 500 KB text is kept in IndexedDB across a reload; a persist that throws is reported and the push goes on', async () => {
  const big = 'lorem ipsum '.repeat(500000 / 12);
  const ids = { organizationId: org, documentId: newDoc('large'), editorId: 'text' };
  await add(ids, 'text', big);
  const { token } = await mint(ids.documentId);
  const ctx = await browser.createBrowserContext();
  try {
    const page = await newPage(ctx);
    await open(page, 'text', { token, ids, store: 'large' });
    await offline(page, true);
    await call(page, 'edit', 'text', 'insert', 0, 'offline ');
    await until(async () => (await pageState(page, 'text')).persisted > 0 || 'not yet', 'the 500 KB state is persisted');
    await call(page, 'close', 'text');
    await offline(page, false);
    await load(page);
    const reopened = await open(page, 'text', { token, ids, store: 'large' });
    assert.ok(reopened.value === `offline ${big}`, 'the reloaded page resumes with the offline edit');
    await until(async () => (await stored(ids)) === `offline ${big}` || 'not yet', 'the edit reaches the service');
    await call(page, 'close', 'text');

    // A persist that throws (a store out of quota; the base64 snippet earlier READMEs showed, above
    // about 125 KB): an error event, and the edits still reach the service.
    await open(page, 'snippet', { token, ids, failingPersist: true });
    await call(page, 'edit', 'snippet', 'insert', 0, 'pushed ');
    await until(async () => (await stored(ids)) === `pushed offline ${big}` || 'not yet', 'the edit reaches the service although persist failed');
    const { errors } = await pageState(page, 'snippet');
    assert.ok(errors.length >= 1 && errors.every((e) => e.status === 'PERSIST_FAILED' && /^persist failed: /.test(e.message)), JSON.stringify(errors));
  } finally {
    await ctx.close();
  }
});

test('back online after a long outage: offline edits reach the service at once, not at the next backoff retry', async () => {
  const ids = { organizationId: org, documentId: newDoc('back online'), editorId: 'text' };
  await add(ids, 'text', 'start');
  const { token } = await mint(ids.documentId);
  const page = await newPage();
  try {
    await open(page, 'text', { token, ids });
    let failedSyncs = 0;
    page.on('requestfailed', (r) => { if (r.url().endsWith('/v2/crdt/sync')) ++failedSyncs; });
    await offline(page, true);
    await call(page, 'edit', 'text', 'insert', 0, 'offline ');
    // Six failed syncs: the retry now waits 16 s (0.5 s doubling), the subscription's likewise.
    await until(() => failedSyncs >= 6 || failedSyncs, 'the client backed off to 16 s');
    await offline(page, false);
    const back = Date.now();
    await until(async () => (await stored(ids)) === 'offline start' || (await stored(ids)), 'the offline edit reaches the service');
    const took = Date.now() - back;
    console.log(`back online: the offline edit reached the service ${took} ms after the network came back`);
    // The retries then wait 16 s, the subscription's 8 s or more (before the fix: 8 to 16 s); at once is well under 3 s.
    assert.ok(took < 3000, `the edit arrived ${took} ms after the network came back: at the next retry, not when the browser said it was online`);
    await until(async () => (await pageState(page, 'text')).online === true || 'offline', 'the page is online again');
  } finally {
    await page.browserContext().close();
  }
});

// ---- ProseMirror on xml records (src/prosemirror.js) ----------------------------------------------------

const pm = (page, fn, ...args) => page.evaluate((f, a) => window.pm[f](...a), fn, args);

/** Opens xml record 'doc' of `ids` in `n` new pages, each with a ProseMirror editor (user `U<i>`). */
async function proseMirrorPages(ids, n, token) {
  const pages = [];
  for (let i = 0; i < n; ++i) {
    const page = await newPage();
    pages.push(page);
    await open(page, 'doc', { token, ids });
    await pm(page, 'prosemirror', 'doc', { name: `U${i}`, color: ['#c00', '#06c', '#090', '#c60', '#909'][i % 5] });
  }
  return pages;
}

/**
 * Waits until every page shows the same markup as crdt/get's value (in its canonical form: after
 * concurrent inserts the record may hold two elements of one mark side by side); returns it.
 */
async function converged(pages, ids, what) {
  let markup;
  await until(async () => {
    const seen = [...(await Promise.all(pages.map((p) => pm(p, 'shownMarkup', 'doc')))), await pm(pages[0], 'canonical', 'doc', await stored(ids))];
    markup = seen[0];
    return seen.every((v) => v === seen[0]) || seen;
  }, what);
  return spaces(markup);
}

/** Markup with the no-break spaces Chromium may type for a space (before other text, at a line's end) as spaces. */
const spaces = (markup) => markup.replace(/\u00a0/g, ' ');

/** Puts the caret of page `page` where `where` says (prosemirror-harness.js: place) and types `text` with its keyboard. */
async function typeAt(page, where, text) {
  await pm(page, 'place', 'doc', where);
  await page.keyboard.type(text);
}

/** The characters of markup (its text nodes, in order; the no-break spaces Chromium types at a line's end as spaces). */
const textOf = (markup) => spaces(markup).replace(/<[^>]*>/g, '').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

const closeAll = (pages) => Promise.all(pages.map((p) => p.browserContext().close()));

test('ProseMirror: two pages type in one paragraph and across paragraphs, bold, split, join, lists; both converge to crdt/get', async () => {
  const ids = { organizationId: org, documentId: newDoc('prosemirror two'), editorId: 'doc' };
  await add(ids, 'xml', '<paragraph>Hello world</paragraph><paragraph>second</paragraph>');
  const { token } = await mint(ids.documentId);
  const [a, b] = await proseMirrorPages(ids, 2, token);
  try {
    assert.equal(await pm(a, 'shownMarkup', 'doc'), '<paragraph>Hello world</paragraph><paragraph>second</paragraph>');
    // Both type in the first paragraph at once: merged character by character.
    await Promise.all([typeAt(a, { before: 'world' }, 'big '), typeAt(b, { end: 'Hello' }, '!!')]);
    let m = await converged([a, b], ids, 'concurrent typing in one paragraph');
    assert.equal(m, '<paragraph>Hello big world!!</paragraph><paragraph>second</paragraph>');
    // Bold (Mod-b over a selection) on one page while the other types in the second paragraph.
    await pm(a, 'place', 'doc', { select: 'big' });
    await a.keyboard.down('Control');
    await a.keyboard.press('b');
    await a.keyboard.up('Control');
    await typeAt(b, { end: 'second' }, ' line');
    m = await converged([a, b], ids, 'bold and typing');
    assert.equal(m, '<paragraph>Hello <strong>big</strong> world!!</paragraph><paragraph>second line</paragraph>');
    // At once: a split (Enter before "world") on one page, a join (Backspace at the start of the second
    // paragraph) on the other. Whatever the structure merges to, no character is lost or doubled.
    await Promise.all([
      (async () => {
        await pm(a, 'place', 'doc', { before: 'world' });
        await a.keyboard.press('Enter');
      })(),
      (async () => {
        await pm(b, 'place', 'doc', { before: 'second' });
        await b.keyboard.press('Backspace');
      })(),
    ]);
    m = await converged([a, b], ids, 'a split and a join');
    const sorted = (t) => [...t].sort().join('');
    assert.equal(sorted(textOf(m)), sorted('Hello big world!!second line'), m);
    // A list around a new last paragraph on one page while the other types and splits in the first.
    // (Not in the same paragraph: wrapping rewrites the block, and the tree has no move, so what is
    // typed into it meanwhile would go with the old block; docs/CLIENT-JS.md.)
    await typeAt(a, { end: 'line' }, '');
    await a.keyboard.press('Enter');
    await a.keyboard.type('listed');
    await converged([a, b], ids, 'the new paragraph');
    await Promise.all([
      (async () => {
        await pm(a, 'place', 'doc', { before: 'listed' });
        assert.equal(await pm(a, 'bulletList', 'doc'), true);
        await typeAt(a, { end: 'listed' }, '');
        await a.keyboard.press('Enter');
        await a.keyboard.type('item 2');
      })(),
      (async () => {
        await typeAt(b, 1, 'Top ');
        await b.keyboard.press('Enter');
        await b.keyboard.type('then ');
      })(),
    ]);
    m = await converged([a, b], ids, 'list edits');
    // Where the list lands beside the paragraph split at the same time is the tree's choice (the split
    // moves the paragraph's tail into a new element, inserted where the list is inserted).
    assert.ok(m.startsWith('<paragraph>Top </paragraph>') && m.includes('<paragraph>then Hello <strong>big</strong>'), m);
    assert.ok(m.includes('<bullet_list><list_item><paragraph>listed</paragraph></list_item><list_item><paragraph>item 2</paragraph></list_item></bullet_list>'), m);
    assert.equal(sorted(textOf(m)), sorted('Top then Hello big world!!second linelisteditem 2'), m);
    for (const p of [a, b]) assert.deepEqual((await call(p, 'state', 'doc')).errors, []);
  } finally {
    await closeAll([a, b]);
  }
});

test('ProseMirror: five pages edit at once, one offline and back; all converge to crdt/get', async () => {
  const ids = { organizationId: org, documentId: newDoc('prosemirror five'), editorId: 'doc' };
  let initial = '';
  for (let i = 0; i < 5; ++i) initial += `<paragraph>p${i}</paragraph>`;
  await add(ids, 'xml', initial);
  const { token } = await mint(ids.documentId);
  const pages = await proseMirrorPages(ids, 5, token);
  try {
    await offline(pages[4], true);
    await until(async () => (await call(pages[4], 'state', 'doc')).online === false || (await call(pages[4], 'state', 'doc')), 'page 4 is offline');
    // Every page types into its own paragraph and into the first one, splits and bolds, at once.
    await Promise.all(pages.map(async (p, i) => {
      await typeAt(p, { end: `p${i}` }, ` by ${i}`);
      await typeAt(p, 1, `${i}`);
      await typeAt(p, { end: `by ${i}` }, '');
      await p.keyboard.press('Enter');
      await p.keyboard.type(`new ${i}`);
      await pm(p, 'place', 'doc', { select: `new ${i}` });
      await p.keyboard.down('Control');
      await p.keyboard.press('b');
      await p.keyboard.up('Control');
    }));
    const online = await converged(pages.slice(0, 4), ids, 'the four online pages');
    assert.ok(!online.includes('by 4'));
    await offline(pages[4], false);
    const m = await converged(pages, ids, 'all five pages');
    for (let i = 0; i < 5; ++i) {
      assert.ok(m.includes(`by ${i}</paragraph>`), m);
      assert.ok(m.includes(`<paragraph><strong>new ${i}</strong></paragraph>`), m);
    }
    const first = m.slice(0, m.indexOf('</paragraph>'));
    for (let i = 0; i < 5; ++i) assert.ok(first.includes(String(i)), first);
  } finally {
    await closeAll(pages);
  }
});

test('ProseMirror: a REST crdt/update with baseVersion appears in the editors without losing their typing', async () => {
  const ids = { organizationId: org, documentId: newDoc('prosemirror rest'), editorId: 'doc' };
  await add(ids, 'xml', '<paragraph>Hello world</paragraph>');
  const got = await rest('/v2/crdt/get', ids);
  const version = got.body.result.data[0].version;
  const { token } = await mint(ids.documentId);
  const [a] = await proseMirrorPages(ids, 1, token);
  try {
    await typeAt(a, 7, 'big ');                              // typed after the backend's read
    await until(async () => spaces(await stored(ids)) === '<paragraph>Hello big world</paragraph>' || (await stored(ids)), 'the typing is stored');
    await pm(a, 'select', 'doc', 3);
    const r = await rest('/v2/crdt/update', { ...ids, type: 'xml', baseVersion: version, data: '<heading>Title</heading><paragraph>Hello world!</paragraph>' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const m = await converged([a], ids, 'the update in the editor');
    assert.equal(m, '<heading>Title</heading><paragraph>Hello big world!</paragraph>');
    assert.deepEqual(await pm(a, 'selection', 'doc'), [3 + 7, 3 + 7]);  // the caret stays on its character
  } finally {
    await closeAll([a]);
  }
});

test('ProseMirror: composing while a remote insert arrives in its paragraph: the composed text replaces its reading', async () => {
  const ids = { organizationId: org, documentId: newDoc('prosemirror ime'), editorId: 'doc' };
  await add(ids, 'xml', '<paragraph>abc</paragraph>');
  const version = (await rest('/v2/crdt/get', ids)).body.result.data[0].version;
  const { token } = await mint(ids.documentId);
  const [a] = await proseMirrorPages(ids, 1, token);
  try {
    await pm(a, 'place', 'doc', { end: 'abc' });
    const cdp = await a.createCDPSession();
    const compose = (text) => cdp.send('Input.imeSetComposition', { text, selectionStart: text.length, selectionEnd: text.length });
    await compose('に');
    await compose('にほ');
    // A backend's insert of "X" in the paragraph (baseVersion: merged with what the page wrote since).
    const r = await rest('/v2/crdt/update', { ...ids, type: 'xml', baseVersion: version, data: '<paragraph>Xabc</paragraph>' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    await until(async () => (await pm(a, 'shownMarkup', 'doc')).includes('Xabc') || (await pm(a, 'shownMarkup', 'doc')), 'the remote insert reached the editor');
    await compose('にほん'); // the composition goes on after the remote change arrived
    await cdp.send('Input.insertText', { text: '日本' });
    const expected = '<paragraph>Xabc日本</paragraph>';
    await until(async () => {
      const seen = [await pm(a, 'shownMarkup', 'doc'), await stored(ids)];
      return seen.every((v) => v === expected) || seen;
    }, 'the editor and the service hold the remote insert and the composed text, not its reading');
    assert.deepEqual(await pm(a, 'selection', 'doc'), [7, 7], 'the caret is after the composed text');
  } finally {
    await closeAll([a]);
  }
});

test('ProseMirror: undo undoes only this page\'s own changes', async () => {
  const ids = { organizationId: org, documentId: newDoc('prosemirror undo'), editorId: 'doc' };
  await add(ids, 'xml', '<paragraph>base</paragraph>');
  const { token } = await mint(ids.documentId);
  const [a, b] = await proseMirrorPages(ids, 2, token);
  try {
    await typeAt(a, 5, ' mine');
    await converged([a, b], ids, "a's typing everywhere");
    await typeAt(b, 1, 'theirs ');
    await until(async () => spaces(await pm(a, 'shownMarkup', 'doc')) === '<paragraph>theirs base mine</paragraph>' || (await pm(a, 'shownMarkup', 'doc')), "a shows b's typing");
    await a.keyboard.down('Control');
    await a.keyboard.press('z');
    await a.keyboard.up('Control');
    const m = await converged([a, b], ids, 'the undo everywhere');
    assert.equal(m, '<paragraph>theirs base</paragraph>');
  } finally {
    await closeAll([a, b]);
  }
});

test('ProseMirror: a Tiptap editor with its StarterKit and a ProseMirror page converge', async () => {
  const ids = { organizationId: org, documentId: newDoc('tiptap'), editorId: 'doc' };
  await add(ids, 'xml', '<paragraph>Hello <bold>Tiptap</bold></paragraph><bulletList><listItem><paragraph>one</paragraph></listItem></bulletList>');
  const { token } = await mint(ids.documentId);
  const t = await newPage();
  const u = await newPage();
  try {
    // clients/js/examples/tiptap.js: StarterKit's TrailingNode adds an empty paragraph after the list,
    // a change of t's, written to the record (u opens once the service has it).
    assert.equal(await pm(t, 'tiptap', 'doc', { token, ids, user: { name: 'T', color: '#c00' } }),
      '<paragraph>Hello <bold>Tiptap</bold></paragraph><bulletList><listItem><paragraph>one</paragraph></listItem></bulletList><paragraph/>');
    await until(async () => (await stored(ids)).endsWith('<paragraph/>') || (await stored(ids)), 'the service has the trailing paragraph');
    await pm(u, 'tiptap', 'doc', { token, ids, user: { name: 'U', color: '#06c' } });
    await typeAt(t, { after: 'one' }, ' two');
    await t.keyboard.press('Enter');
    await t.keyboard.type('three');
    await pm(u, 'place', 'doc', { select: 'Hello' });
    await u.keyboard.down('Control');
    await u.keyboard.press('i');
    await u.keyboard.up('Control');
    const m = await converged([t, u], ids, 'the Tiptap editors');
    assert.equal(m, '<paragraph><italic>Hello</italic> <bold>Tiptap</bold></paragraph><bulletList><listItem><paragraph>one two</paragraph></listItem><listItem><paragraph>three</paragraph></listItem></bulletList><paragraph/>');
    assert.ok(!t.log.some((l) => l.includes('not in the schema')), t.log.join('\n')); // StarterKit's markup is all its schema's
  } finally {
    await closeAll([t, u]);
  }
});

test('ProseMirror: each page shows the others\' carets at their characters after concurrent edits', async (ctx) => {
  const ids = { organizationId: org, documentId: newDoc('prosemirror cursors'), editorId: 'doc' };
  await add(ids, 'xml', '<paragraph>alpha beta</paragraph><paragraph>gamma</paragraph>');
  const { token } = await mint(ids.documentId);
  const pages = await proseMirrorPages(ids, 3, token);
  try {
    if (!(await pm(pages[0], 'hasPresence', 'doc'))) return ctx.skip('the client has no record.presence yet');
    await typeAt(pages[0], 6, 'A');              // "alphaA| beta"
    await typeAt(pages[1], 13, 'B');             // "B|gamma"
    await typeAt(pages[2], 1, 'C');              // "C|alpha"
    await converged(pages, ids, 'the edits');
    // The documents are equal: each caret must be at the position its page's selection is at.
    const heads = await Promise.all(pages.map(async (p) => (await pm(p, 'selection', 'doc'))[1]));
    const places = await Promise.all(heads.map((h) => pm(pages[0], 'around', 'doc', h)));
    assert.deepEqual([places[0], places[1][1], places[2]], [['lphaA', ' beta'], 'gamma', ['C', 'alpha']]);
    for (const [i, p] of pages.entries()) {
      const want = pages.map((_, j) => ({ name: `U${j}`, pos: heads[j] })).filter((_, j) => j !== i);
      await until(async () => {
        const { shown, carets } = await pm(p, 'carets', 'doc');
        return (shown === 2 && JSON.stringify(carets) === JSON.stringify(want)) || { shown, carets, want, others: await pm(p, 'others', 'doc') };
      }, `page ${i} shows the others' carets where they are`);
    }
  } finally {
    await closeAll(pages);
  }
});

// ---- issue 53: presence and remote cursors --------------------------------------------------------------

const others = (page, name = 'text') => call(page, 'presenceOthers', name);

test('presence: joins reach the other pages (a read-only token announces too); a closed page leaves at once', async () => {
  const ids = { organizationId: org, documentId: newDoc('presence'), editorId: 'text' };
  await add(ids, 'text', 'Hello');
  const { token } = await mint(ids.documentId);
  const { token: readToken } = await mint(ids.documentId, { access: 'read', userId: 'reader' });
  const ctx = await browser.createBrowserContext();
  const [one, two, reader] = [await newPage(ctx), await newPage(ctx), await newPage(ctx)];
  try {
    const idOf = {};
    for (const [page, name, t] of [[one, 'One', token], [two, 'Two', token], [reader, 'Reader', readToken]]) {
      await open(page, 'text', { token: t, ids });
      idOf[name] = await call(page, 'presenceSet', 'text', { name, color: '#c33' });
    }
    const names = async (page) => (await others(page)).others.map((o) => o.name).sort();
    for (const [page, expected] of [[one, ['Reader', 'Two']], [two, ['One', 'Reader']], [reader, ['One', 'Two']]])
      await until(async () => JSON.stringify(await names(page)) === JSON.stringify(expected) || (await names(page)), `a page sees ${expected}`);
    const seenByOne = (await others(one)).others;
    assert.deepEqual(seenByOne.find((o) => o.name === 'Reader').userId, 'reader');
    assert.ok((await others(one)).events.includes(`join ${idOf.Two}`));
    // The presence timeout is long in this stack (browser_e2e.py): only the page's own leave, sent as
    // it closes, can remove it within the deadline.
    await two.close({ runBeforeUnload: true });
    await until(async () => JSON.stringify(await names(one)) === '["Reader"]' || (await names(one)), 'the closed page left');
    assert.ok((await others(one)).events.includes(`leave ${idOf.Two}`));
    await until(async () => JSON.stringify(await names(reader)) === '["One"]' || (await names(reader)), 'the reader sees the leave too');
    const r = await rest('/v2/presence/get', ids);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.result.data.presence.map((p) => p.clientId).sort(), [idOf.One, idOf.Reader].sort());
  } finally {
    await ctx.close();
  }
});

test('remote cursors: after concurrent edits each CodeMirror page shows the others\' carets at the right characters; a textarea page lists them', async () => {
  const ids = { organizationId: org, documentId: newDoc('cursors'), editorId: 'text' };
  await add(ids, 'text', '0123456789');
  const { token } = await mint(ids.documentId);
  const [a, b, c] = [await newPage(), await newPage(), await newPage()];
  try {
    for (const [page, name] of [[a, 'Ana'], [b, 'Bo'], [c, 'Cy']]) {
      await open(page, 'text', { token, ids });
      await call(page, 'presenceSet', 'text', { name, color: '#2f7ed8' });
    }
    await call(a, 'codemirrorWithCursors', 'text');
    await call(b, 'codemirrorWithCursors', 'text');
    await call(c, 'textarea', 'text');
    await call(c, 'presenceListOf', 'text');
    await call(a, 'codemirrorSelect', 'text', 5); // before "5"
    await call(b, 'codemirrorSelect', 'text', 2); // before "2"
    await select(c, 'text', 9); // before "9"
    // Concurrent edits: each page edits before the carets of the others.
    await Promise.all([
      a.evaluate(() => window.harness.editors.text.view.dispatch({ changes: { from: 0, insert: 'AAA' } })),
      b.evaluate(() => window.harness.editors.text.view.dispatch({ changes: { from: 8, insert: 'BB' } })),
      c.evaluate(() => { const r = window.harness.records.text; r.insert(r.length, '!'); }),
    ]);
    const expected = 'AAA01234567BB89!';
    await until(async () => {
      const seen = [await call(a, 'shown', 'text'), await call(b, 'shown', 'text'), await call(c, 'shown', 'text'), await stored(ids)];
      return seen.every((v) => v === expected) || seen;
    }, 'the three pages and the service converge');
    const at = (ch) => expected.indexOf(ch);
    const drawn = async (page) => (await call(page, 'codemirrorCursors', 'text')).carets.map((x) => `${x.name}@${x.pos}`).join(' ');
    await until(async () => (await drawn(a)) === `Bo@${at('2')} Cy@${at('9')}` || (await drawn(a)), 'page A draws Bo before "2" and Cy before "9"');
    await until(async () => (await drawn(b)) === `Ana@${at('5')} Cy@${at('9')}` || (await drawn(b)), 'page B draws Ana before "5" and Cy before "9"');
    assert.deepEqual((await call(a, 'codemirrorCursors', 'text')).labels, ['Bo', 'Cy']);
    const listed = async () => (await call(c, 'presenceListed', 'text')).sort();
    // Each <li>: the swatch (empty), the name, where: "Ana" + "line 1, column 9".
    const expectedList = [`Analine 1, column ${at('5') + 1}`, `Boline 1, column ${at('2') + 1}`];
    await until(async () => JSON.stringify(await listed()) === JSON.stringify(expectedList) || (await listed()), 'the textarea page lists who is where');
  } finally {
    for (const p of [a, b, c]) await p.browserContext().close();
  }
});

test('50 pages present on one document: each sees the 49 others; 10 close and the rest see 39', async () => {
  const ids = { organizationId: org, documentId: newDoc('fifty'), editorId: 'text' };
  await add(ids, 'text', 'fifty');
  const { token } = await mint(ids.documentId);
  const pages = [];
  try {
    for (let i = 0; i < 50; ++i) {
      // Each in a context of its own (like 50 browsers): one profile opens at most six HTTP/1.1
      // connections per origin, and each page holds one for its subscription.
      const page = await newPage();
      await open(page, 'text', { token, ids });
      await call(page, 'presenceSet', 'text', { name: `p${i}` });
      pages.push(page);
    }
    const count = async (page) => (await others(page)).others.length;
    for (const page of [pages[0], pages[24], pages[49]]) await until(async () => (await count(page)) === 49 || (await count(page)), 'a page sees the 49 others');
    // pagehide: each page leaves (a keepalive fetch, which outlives the page but not its context:
    // the contexts close at the end).
    for (const page of pages.slice(40)) await page.close({ runBeforeUnload: true });
    const present = async () => (await rest('/v2/presence/get', ids)).body.result.data.presence.length;
    for (const page of [pages[0], pages[39]]) await until(async () => (await count(page)) === 39 || { seen: await count(page), service: await present() }, 'a page sees the 39 left');
    assert.equal(await present(), 40);
  } finally {
    for (const page of pages) await page.browserContext().close();
  }
});
