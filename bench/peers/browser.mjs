// Folio in a browser, against its peers: the Node side of bench/browser.sh. It drives Debian's
// Chromium (headless, through puppeteer-core: no browser is downloaded) and prints one JSON object
// per figure, which bench/browser.sh turns into tables.
//
//   node browser.mjs replay folio|diamond-types|yjs TRACE.json.gz [REPS] [WARMUP]
//       a fresh browser for the library; the page replays the trace through the library's JavaScript
//       API REPS times after WARMUP untimed runs (bench/peers/browser-page.js says how each is used)
//       and checks each result against the trace's endContent; prints every timed run.
//   node browser.mjs size
//       what a page downloads to use each library: its WebAssembly and its JavaScript, as published and
//       as one minified ES module (esbuild, the same settings for all three), in bytes, gzip -9 (the
//       gzip program) and brotli (quality 11).
//   node browser.mjs live URL API_KEY AUTH_TOKEN SAMPLES WARMUP
//       the time from a REST update to the change visible in a page, against a running stack
//       (bench/support/http_stack.sh): a page of the stack's origin connected with a client token, a
//       textarea bound to a text record; a Node.js client (the same clients/js, in this process) on a
//       second record, as the baseline. Updates alternate between the two records, one at a time: the
//       next is sent 10 ms after the last was seen, so none queues behind another. Each sample: the
//       REST update's round trip (sent -> answered) and the receiver's latency (sent -> the change
//       seen: the page's textarea shows the new text, which the page reports through a DevTools
//       binding, so the page's figure includes that hop to this process; the Node client's `change`
//       event). One clock: this process's performance.now().
//
// Pages are served by this process through the DevTools protocol (Fetch.requestPaused): the replay
// pages from a made-up origin (http://folio-bench.localhost, nothing goes on the network), the live page
// from the stack's own origin, where only /client/ (clients/js, as nginx serves it at /client/) and
// /bench/ are answered here and every other request (the API, the subscription) goes to nginx.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import zlib from 'node:zlib';
import * as esbuild from 'esbuild';
import puppeteer from 'puppeteer-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../..');
const clientDir = path.join(repo, 'clients/js');
const chromium = process.env.CHROMIUM || '/usr/bin/chromium';
const [mode, ...args] = process.argv.slice(2);
const print = (o) => console.log(JSON.stringify(o));

/** `entry` as one ES module (esbuild resolves Yjs's lib0 through its package exports, as a bundler does), and the files it took. */
async function bundle(entry, minify) {
  const r = await esbuild.build({
    ...entry, absWorkingDir: here, bundle: true, format: 'esm', platform: 'browser', minify, write: false, metafile: true, logLevel: 'silent',
    external: ['node:*'], // clients/js imports node:fs and node:crypto only under Node (dynamic imports)
  });
  return { bytes: r.outputFiles[0].contents, inputs: Object.keys(r.metafile.inputs).filter((f) => !f.startsWith('<')).map((f) => path.resolve(here, f)) };
}
const yjsEntry = { stdin: { contents: "export * from 'yjs';", resolveDir: here, loader: 'js' } };
const folioEntry = { entryPoints: [path.join(clientDir, 'folio.js')] };
const dtDir = path.join(here, 'node_modules/diamond-types-web');
const dtEntry = { entryPoints: [path.join(dtDir, 'dt.js')] };

const TYPES = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html; charset=utf-8' };
const PAGE = '<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><title>Folio browser benchmark</title><body></body>';

/** The bytes for a path of the page's origin, or null: 404. */
function files(extra) {
  return (p) => {
    if (p === '/bench/') return Buffer.from(PAGE);
    if (p in extra) return extra[p];
    const roots = [['/client/', clientDir], ['/bench/diamond-types-web/', dtDir]];
    if (p === '/bench/browser-page.js' || p === '/bench/replays.js') return fs.readFileSync(path.join(here, p.slice('/bench/'.length)));
    for (const [prefix, dir] of roots) {
      if (!p.startsWith(prefix)) continue;
      const f = path.resolve(dir, '.' + path.posix.normalize('/' + p.slice(prefix.length)));
      return f.startsWith(dir + path.sep) && fs.existsSync(f) && fs.statSync(f).isFile() ? fs.readFileSync(f) : null;
    }
    return null;
  };
}

/** A headless Chromium and a page whose requests under `patterns` are answered by `serve(path)`. */
async function openPage(origin, patterns, serve) {
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    protocolTimeout: 600000, // a page's whole replay is one evaluate (Yjs: about a minute)
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--js-flags=--expose-gc'],
  });
  const page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error') console.error(`page: ${m.text()}`); });
  page.on('pageerror', (e) => console.error(`page: ${e.message}`));
  const cdp = await page.createCDPSession();
  cdp.on('Fetch.requestPaused', ({ requestId, request }) => {
    const p = new URL(request.url).pathname;
    const body = serve(p);
    const type = TYPES[path.extname(p)] ?? (p.endsWith('/') ? TYPES['.html'] : 'application/octet-stream');
    cdp.send('Fetch.fulfillRequest', body === null
      ? { requestId, responseCode: 404, responseHeaders: [{ name: 'Content-Type', value: 'text/plain' }], body: Buffer.from(`no ${p}`).toString('base64') }
      : { requestId, responseCode: 200, responseHeaders: [{ name: 'Content-Type', value: type }, { name: 'Cache-Control', value: 'no-store' }], body: Buffer.from(body).toString('base64') })
      .catch((e) => console.error(`serving ${p}: ${e.message}`));
  });
  await cdp.send('Fetch.enable', { patterns: patterns.map((p) => ({ urlPattern: origin + p, requestStage: 'Request' })) });
  await page.goto(origin + '/bench/');
  return { browser, page, version: (await browser.version()).replace(/^(Headless)?Chrome\//, 'Chromium ') };
}

if (mode === 'replay') {
  const [lib, trace, repsArg, warmArg] = args;
  const reps = Number(repsArg || 5);
  const warmup = Number(warmArg || 2);
  const extra = { '/bench/trace.json.gz': fs.readFileSync(trace) };
  if (lib === 'yjs') extra['/bench/yjs.js'] = (await bundle(yjsEntry, true)).bytes;
  const origin = 'http://folio-bench.localhost';
  const { browser, page, version } = await openPage(origin, ['/*'], files(extra));
  try {
    const out = await page.evaluate(async (origin, lib, reps, warmup) => {
      const m = await import(`${origin}/bench/browser-page.js`);
      return m.replay(lib, `${origin}/bench/trace.json.gz`, reps, warmup);
    }, origin, lib, reps, warmup);
    const name = path.basename(trace).replace(/\.json\.gz$/, '');
    for (const [figure, runs] of Object.entries(out.figures)) {
      print({ trace: name, lib, figure, runs, unit: 'ms', reps, warmup, patches: out.patches, browser: version });
    }
  } finally {
    await browser.close();
  }
} else if (mode === 'size') {
  const gzip = (b) => execFileSync('gzip', ['-9c'], { input: b, maxBuffer: 1 << 28 }).length;
  const brotli = (b) => zlib.brotliCompressSync(b, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 11 } }).length;
  const sizes = (list) => ({ files: list.length, raw: list.reduce((n, b) => n + b.length, 0), gzip: list.reduce((n, b) => n + gzip(b), 0), brotli: list.reduce((n, b) => n + brotli(b), 0) });
  const version = (pkg) => JSON.parse(fs.readFileSync(path.join(here, 'node_modules', pkg, 'package.json'))).version;
  const wasmFile = path.join(clientDir, 'dist/folio-engine.wasm');
  const libs = [
    ['folio', folioEntry, [wasmFile], JSON.parse(fs.readFileSync(path.join(clientDir, 'package.json'))).version],
    ['diamond-types', dtEntry, [path.join(dtDir, 'dt_bg.wasm')], `diamond-types-web ${version('diamond-types-web')}`],
    ['yjs', yjsEntry, [], version('yjs')],
  ];
  for (const [lib, entry, wasm, v] of libs) {
    const plain = await bundle(entry, false);
    const minified = await bundle(entry, true);
    print({
      lib, version: v,
      wasm: sizes(wasm.map((f) => fs.readFileSync(f))),
      // As published: each module file the entry imports, downloaded (and compressed) one by one, as a
      // page without a bundler loads them.
      js_published: sizes(plain.inputs.map((f) => fs.readFileSync(f))),
      js_minified: sizes([minified.bytes]),
    });
  }
} else if (mode === 'live') {
  const [url, key, authToken, samplesArg, warmArg] = args;
  const samples = Number(samplesArg || 200);
  const warmup = Number(warmArg || 10);
  const api = { 'Content-Type': 'application/json', 'x-folio-api-key': key, 'x-folio-auth-token': authToken };
  const post = async (p, data) => {
    const res = await fetch(url + p, { method: 'POST', headers: api, body: JSON.stringify({ data }) });
    const body = await res.json();
    if (res.status !== 200) throw new Error(`${p}: HTTP ${res.status} ${JSON.stringify(body)}`);
    return body;
  };
  // About 1 KB of text; each update changes the number at its end (REST update is replace-by-value).
  const text = (n) => 'The quick brown fox jumps over the lazy dog. '.repeat(22) + `update ${n}`;
  const receivers = {};
  for (const who of ['page', 'node']) {
    const ids = { organizationId: 'bench', documentId: 'browser', editorId: who };
    await post('/v2/crdt/add', { ...ids, type: 'text', data: text(0) });
    const minted = await post('/v2/auth/token', { ...ids, userId: `bench-${who}`, access: 'write' });
    receivers[who] = { ids, token: minted.result.data.token, waiting: null, n: 0, update: [], seen: [] };
  }
  /** The receiver has shown `value`: resolves the update waiting for it. */
  const seen = (who) => (value) => {
    const t = performance.now();
    const w = receivers[who].waiting;
    if (value.startsWith('error: ')) console.error(`${who}: ${value}`);
    if (w && value === w.value) w.resolve(t);
  };
  const { browser, page, version } = await openPage(url, ['/client/*', '/bench/*'], files({}));
  let node;
  try {
    await page.exposeFunction('folioVisible', seen('page'));
    const shown = await page.evaluate(async (origin, token, ids) => {
      const m = await import(`${origin}/bench/browser-page.js`);
      return m.live(origin, token, ids);
    }, url, receivers.page.token, receivers.page.ids);
    if (shown !== text(0)) throw new Error(`the page shows ${JSON.stringify(shown.slice(-20))}, not the record`);
    const { connect } = await import(pathToFileURL(path.join(clientDir, 'folio.js')).href);
    node = await connect({ baseUrl: url, token: receivers.node.token, ...receivers.node.ids });
    node.on('change', ({ remote }) => { if (remote) seen('node')(node.value); });
    node.on('error', (e) => console.error(`node client: ${e.status} ${e.message}`));
    for (let i = 0; i < warmup + samples; ++i) {
      for (const who of ['page', 'node']) {
        const r = receivers[who];
        const value = text(++r.n);
        const visible = new Promise((resolve, reject) => {
          r.waiting = { value, resolve };
          setTimeout(() => reject(new Error(`${who}: update ${r.n} not seen within 10 s`)), 10000).unref();
        });
        const t0 = performance.now();
        await post('/v2/crdt/update', { ...r.ids, data: value });
        const t1 = performance.now();
        const t2 = await visible;
        r.waiting = null;
        if (i >= warmup) {
          r.update.push(t1 - t0);
          r.seen.push(t2 - t0);
        }
        await new Promise((res) => setTimeout(res, 10));
      }
    }
    for (const who of ['page', 'node']) {
      print({ figure: 'live', receiver: who, browser: version, samples, warmup, update_ms: receivers[who].update, seen_ms: receivers[who].seen });
    }
  } finally {
    node?.close();
    await browser.close();
  }
} else {
  console.error('usage: node browser.mjs replay LIB TRACE [REPS] [WARMUP] | size | live URL API_KEY AUTH_TOKEN SAMPLES WARMUP');
  process.exit(2);
}
