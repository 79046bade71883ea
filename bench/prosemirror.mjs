// The Node side of bench/prosemirror.sh: serves bench/prosemirror-page.js, the client (clients/js) and
// the npm packages of tests/e2e/browser (ProseMirror, Yjs, y-prosemirror, puppeteer-core) from one
// origin on loopback, cross-origin isolated (COOP + COEP: performance.now() then has 5 µs resolution
// instead of 100 µs), and runs the page in Debian's headless Chromium, a fresh browser per library.
// Prints one JSON line per library (bench/prosemirror-page.js: run()).
//   node bench/prosemirror.mjs BYTES SAMPLES WARMUP [prosemirror] [folio] [yjs]
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, '..');
const browserTests = join(repo, 'tests/e2e/browser');
const require = createRequire(join(browserTests, 'package.json'));
const { default: puppeteer } = await import(pathToFileURL(require.resolve('puppeteer-core')).href);
const { packagesImportMap } = await import(pathToFileURL(join(browserTests, 'import-map.js')).href);

const [bytes = '1000000', samples = '500', warmup = '50', ...libs] = process.argv.slice(2);
const chromium = process.env.FOLIO_CHROMIUM || '/usr/bin/chromium';
const map = packagesImportMap(browserTests, ['prosemirror-model', 'prosemirror-state', 'prosemirror-view', 'prosemirror-schema-basic', 'prosemirror-schema-list', 'yjs', 'y-prosemirror']);
const PAGE = `<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><title>ProseMirror benchmark</title>
<script type="importmap">${JSON.stringify(map)}</script><body></body>`;
const TYPES = { js: 'text/javascript', mjs: 'text/javascript', wasm: 'application/wasm', html: 'text/html; charset=utf-8' };

function file(path) {
  if (path === '/' || path === '/page.html') return PAGE;
  if (path === '/prosemirror-page.js') return readFileSync(join(here, 'prosemirror-page.js'));
  const clean = normalize(path);
  if (clean.includes('..')) return null;
  if (/^\/client\/(folio\.js|src\/[a-z0-9-]+\.js|dist\/folio-engine\.wasm)$/.test(clean)) return readFileSync(join(repo, 'clients/js', clean.slice('/client/'.length)));
  if (/^\/node_modules\/[@a-zA-Z0-9._/-]+\.m?js$/.test(clean)) return readFileSync(join(browserTests, clean));
  return null;
}

const server = createServer((req, res) => {
  let body = null;
  const path = new URL(req.url, 'http://x').pathname;
  try {
    body = file(path);
  } catch {
    body = null;
  }
  if (body === null) return res.writeHead(404).end();
  res.writeHead(200, {
    'Content-Type': TYPES[path.split('.').pop()] ?? TYPES.html,
    'Cross-Origin-Opener-Policy': 'same-origin',
    'Cross-Origin-Embedder-Policy': 'require-corp',
    'Cache-Control': 'no-store',
  });
  res.end(body);
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const origin = `http://127.0.0.1:${server.address().port}`;

try {
  for (const lib of libs.length ? libs : ['prosemirror', 'folio', 'yjs']) {
    const browser = await puppeteer.launch({ executablePath: chromium, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'], protocolTimeout: 600000 });
    try {
      const page = await browser.newPage();
      const log = [];
      page.on('console', (m) => log.push(m.text()));
      page.on('pageerror', (e) => log.push(e.message));
      await page.goto(`${origin}/page.html`);
      const result = await page.evaluate(async (l, b, s, w) => (await import('/prosemirror-page.js')).run(l, b, s, w), lib, Number(bytes), Number(samples), Number(warmup)).catch((e) => {
        throw new Error(`${lib}: ${e.message}\n${log.join('\n')}`);
      });
      result.browser = await browser.version();
      console.log(JSON.stringify(result));
    } finally {
      await browser.close();
    }
  }
} finally {
  server.close();
}
