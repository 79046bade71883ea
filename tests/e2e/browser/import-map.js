// An import map for a page that imports installed npm packages by name (as a bundler would resolve
// them), served from /node_modules/ by the page's server: each package's "." entry and its subpath
// exports (the "import" condition, else "default"/"browser"; else "module"/"main"), for the packages
// named and everything they depend on (and the peers installed). Used by browser.e2e.js and
// bench/prosemirror.mjs.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

function exportTarget(e) {
  while (e && typeof e === 'object') e = e.import ?? e.default ?? e.browser;
  return e;
}

/** A package's module entries under `dir`/node_modules, as import-map entries, and its package.json. */
function packageEntries(dir, name) {
  const pj = JSON.parse(readFileSync(join(dir, 'node_modules', name, 'package.json'), 'utf8'));
  const out = {};
  const file = (e) => `/node_modules/${name}/${e.replace(/^\.\//, '')}`;
  const exp = pj.exports;
  const subpaths = exp && typeof exp === 'object' && Object.keys(exp).some((k) => k.startsWith('.')) ? exp : { '.': exp };
  for (const [key, target] of Object.entries(subpaths)) {
    if (key.includes('*')) continue;
    const e = exportTarget(target) ?? (key === '.' ? pj.module ?? pj.main ?? 'index.js' : null);
    if (typeof e === 'string' && /\.m?js$/.test(e)) out[key === '.' ? name : name + key.slice(1)] = file(e);
  }
  return { out, pj };
}

/** { imports } for `roots` (package names installed under `dir`/node_modules) and their dependencies. */
export function packagesImportMap(dir, roots) {
  const imports = {};
  const done = new Set();
  const todo = [...roots];
  while (todo.length) {
    const name = todo.pop();
    if (done.has(name)) continue;
    done.add(name);
    const { out, pj } = packageEntries(dir, name);
    Object.assign(imports, out);
    todo.push(...Object.keys(pj.dependencies ?? {}), ...Object.keys(pj.peerDependencies ?? {}).filter((d) => existsSync(join(dir, 'node_modules', d, 'package.json'))));
  }
  return { imports };
}
