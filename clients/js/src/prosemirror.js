// A ProseMirror editor showing an xml record, both ways (import from '@folio/client/prosemirror').
//
//   const record = await connect({ ..., editorId: 'body' });            // an xml record
//   const view = new EditorView(parent, { state: EditorState.create({ schema, plugins: [folioCursors(record)] }) });
//   const binding = bindProseMirror(record, view);                      // shows the record, then keeps both in step
//
// The mapping (docs/CLIENT-JS.md, "ProseMirror"): the document's content is the record's top-level
// fragment; a node is an element named by its type, its attributes (those not at their default) are
// attributes, strings as they are and other values as JSON; text is text; marks are elements
// wrapping the inline nodes they apply to, nested in the schema's mark order (the first mark
// outermost), adjacent inline nodes sharing marks under one element. markupOf(doc) writes exactly
// the engine's canonical markup (attributes by name, <name/> when empty, its escapes), so
// record.value == markupOf(view.state.doc) once in step.
//
// Local: a transaction changing the document becomes one xmlReplace of the smallest range that
// changed: Fragment.findDiffStart/findDiffEnd give it, the binding descends while it lies inside one
// node and writes that node's children [from, to) (a textblock's inline content as a whole). Cost:
// the depth, the diff of the changed node's children, the markup of the range; not the document.
// Remote: the record's change event lists the elements that changed (xmlChanged); the binding
// rebuilds those nodes only (xmlMarkup of a textblock or element; the top level through its child ids)
// and dispatches one transaction replacing only what differs (findDiffStart/End again), with
// addToHistory false, so the selection maps through it and prosemirror-history undoes only this
// editor's own changes. A change event without xmlChanged (an engine without it, a recreated record)
// rebuilds the document from record.value and still dispatches only the range that differs.
//
// Foreign content (markup the schema cannot hold: an unknown element or attribute, a node where the
// schema allows none, whitespace between blocks) never throws: an unknown element in inline content is
// shown by its content (unwrapped), elsewhere it and stray text are not shown; an unknown attribute
// is not shown. Each is reported once per name through options.onForeign (default console.warn). The
// record keeps them until this editor changes the node holding them: the binding keeps, per container
// holding some, which of its XML children each ProseMirror child is, so edits elsewhere keep them.

import { Fragment } from 'prosemirror-model';
import { Plugin, PluginKey } from 'prosemirror-state';
import { Decoration, DecorationSet } from 'prosemirror-view';
import { codePoints, utf16Index } from './positions.js';
import { presenceColor, presenceName } from './presence.js';

// ---- markup: the engine's canonical form ------------------------------------------------------------

const TEXT_ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '\r': '&#13;' };
const ATTR_ESCAPES = { ...TEXT_ESCAPES, '"': '&quot;', '\t': '&#9;', '\n': '&#10;' };
const escapeText = (s) => s.replace(/[&<>\r]/g, (c) => TEXT_ESCAPES[c]);
const escapeAttr = (s) => s.replace(/[&<>"\t\n\r]/g, (c) => ATTR_ESCAPES[c]);
const NAMED = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
const unescape = (s) =>
  s.indexOf('&') < 0
    ? s
    : s.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-z]+);/g, (m, e) =>
        e[0] === '#' ? String.fromCodePoint(e[1] === 'x' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10)) : NAMED[e] ?? m);

/**
 * Parses markup as the engine writes it (well-formed XML content: elements, attributes in double or
 * single quotes, text, the five entities and character references, CDATA) into plain nodes: a string
 * for text, { name, attrs: [[name, value]...], children } for an element. Iterative, O(length).
 */
export function parseMarkup(s) {
  const top = { children: [] };
  const stack = [top];
  const re = /<!\[CDATA\[([\s\S]*?)\]\]>|<\/([^\s>]+)\s*>|<([^\s/>]+)((?:\s+[^\s=/>]+\s*=\s*(?:"[^"]*"|'[^']*'))*)\s*(\/?)>|([^<]+)/g;
  const attrRe = /([^\s=]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/g;
  let m;
  const text = (t) => {
    const kids = stack[stack.length - 1].children;
    if (typeof kids[kids.length - 1] === 'string') kids[kids.length - 1] += t;
    else kids.push(t);
  };
  while ((m = re.exec(s)) !== null) {
    if (m[1] !== undefined) {
      if (m[1]) text(m[1]);
    } else if (m[2] !== undefined) {
      if (stack.length > 1) stack.pop();
    } else if (m[3] !== undefined) {
      const attrs = [];
      let a;
      attrRe.lastIndex = 0;
      while ((a = attrRe.exec(m[4])) !== null) attrs.push([a[1], unescape(a[2] ?? a[3])]);
      const el = { name: m[3], attrs, children: [] };
      stack[stack.length - 1].children.push(el);
      if (!m[5]) stack.push(el);
    } else {
      text(unescape(m[6]));
    }
  }
  return top.children;
}

function element(name, attrs, inner) {
  let s = `<${name}`;
  for (const [k, v] of attrs) s += ` ${k}="${escapeAttr(v)}"`;
  return inner ? `${s}>${inner}</${name}>` : `${s}/>`;
}

/** Parsed markup nodes (parseMarkup's) written back as the engine writes them. */
function parsedMarkup(nodes) {
  let s = '';
  for (const c of nodes) s += typeof c === 'string' ? escapeText(c) : element(c.name, c.attrs, parsedMarkup(c.children));
  return s;
}

const isDefault = (v, spec) => spec.hasDefault && (v === spec.default || JSON.stringify(v) === JSON.stringify(spec.default));

/** The attributes written for a node's or mark's attrs: those not at their default, ordered by name. */
function attrsOut(type, attrs) {
  const out = [];
  for (const name of Object.keys(type.attrs).sort()) {
    const v = attrs[name];
    if (v === undefined || isDefault(v, type.attrs[name])) continue;
    out.push([name, typeof v === 'string' ? v : JSON.stringify(v)]);
  }
  return out.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

/**
 * Whether an attribute is read back as a string: its default is one, or it has none and its spec's
 * `validate` names "string" and no other type.
 */
function stringAttr(type, name) {
  const spec = type.attrs[name];
  if (spec.hasDefault) return typeof spec.default === 'string';
  const v = type.spec.attrs?.[name]?.validate;
  return typeof v === 'string' && v.split('|').every((t) => t === 'string' || t === 'null' || t === 'undefined') && v.includes('string');
}

/** Whether `value` passes the attribute's validation (none: every value does). */
function valid(spec, value) {
  try {
    spec.validate?.(value);
    return true;
  } catch {
    return false;
  }
}

/**
 * attrs of `type` from markup attributes: strings as they are, other attributes through JSON.parse
 * (the text itself when it is not JSON or fails the attribute's validation). An unknown attribute, or
 * a value the attribute refuses, goes to foreign(what) and is not shown (the default is).
 */
function attrsIn(type, list, foreign) {
  const attrs = {};
  for (const [name, value] of list) {
    const spec = type.attrs[name];
    if (!spec) {
      foreign(`attribute ${name} of ${type.name}`);
      continue;
    }
    let v = value;
    if (!stringAttr(type, name)) {
      try {
        v = JSON.parse(value);
      } catch {
        v = value;
      }
      if (!valid(spec, v)) v = value;
    }
    if (valid(spec, v)) attrs[name] = v;
    else foreign(`attribute ${name}="${value}" of ${type.name}`);
  }
  return attrs;
}

/** Markup of inline content: marks as nested elements in schema order, shared ones merged. */
function inlineMarkup(node) {
  let out = '';
  const open = []; // [mark, markup before it was opened, attributes]
  const close = (keep) => {
    while (open.length > keep) {
      const [mark, before, attrs] = open.pop();
      const inner = out.slice(before.length);
      out = before + element(mark.type.name, attrs, inner);
    }
  };
  node.forEach((child) => {
    const marks = child.marks;
    let keep = 0;
    while (keep < open.length && keep < marks.length && open[keep][0].eq(marks[keep])) ++keep;
    close(keep);
    for (let i = keep; i < marks.length; ++i) open.push([marks[i], out, attrsOut(marks[i].type, marks[i].attrs)]);
    out += child.isText ? escapeText(child.text) : nodeMarkup(child);
  });
  close(0);
  return out;
}

/** The markup of one node (its element). */
export function nodeMarkup(node) {
  return element(node.type.name, attrsOut(node.type, node.attrs), contentMarkup(node));
}

/** The markup of a node's content: its children's elements, or its inline content. */
export function contentMarkup(node) {
  if (node.inlineContent) return inlineMarkup(node);
  let s = '';
  node.forEach((child) => {
    s += nodeMarkup(child);
  });
  return s;
}

/** The markup of a document: the record's value once in step (the engine's canonical form). */
export function markupOf(doc) {
  return contentMarkup(doc);
}

// ---- markup to nodes --------------------------------------------------------------------------------

/**
 * Builds the ProseMirror nodes of parsed markup children for a parent of `type`. Returns
 * { nodes, xml }: xml[i] is the index among `children` of nodes[i], or null for a node the schema
 * needed and the markup lacks (filled in); xml is null when the children are the nodes one to one.
 */
function buildChildren(schema, type, children, foreign, maps) {
  if (type.inlineContent) return { nodes: buildInline(schema, type, children, [], foreign), xml: null };
  const nodes = [];
  const xml = [];
  let match = type.contentMatch;
  let regular = true;
  children.forEach((c, i) => {
    if (typeof c === 'string') {
      if (!/^\s*$/.test(c)) foreign('text between blocks');
      regular = false;
      return;
    }
    const t = schema.nodes[c.name];
    if (!t || t.isInline || t.isText) {
      foreign(t ? `inline node ${c.name} among blocks` : `element ${c.name}`);
      regular = false;
      return;
    }
    let next = match.matchType(t);
    if (!next) {
      foreign(`${c.name} in ${type.name}`);
      regular = false;
      return;
    }
    const node = buildNode(schema, t, c, foreign, maps);
    nodes.push(node);
    xml.push(i);
    match = next;
  });
  if (!match.validEnd) {
    const fill = match.fillBefore(Fragment.empty, true);
    if (fill) {
      fill.forEach((n) => {
        nodes.push(n);
        xml.push(null);
      });
      regular = false;
    }
  }
  return { nodes, xml: regular && xml.length === children.length ? null : xml };
}

function buildInline(schema, parentType, children, marks, foreign) {
  const out = [];
  for (const c of children) {
    if (typeof c === 'string') {
      if (c) out.push(schema.text(c, marks.filter((m) => parentType.allowsMarkType(m.type))));
      continue;
    }
    const markType = schema.marks[c.name];
    const nodeType = schema.nodes[c.name];
    if (nodeType && nodeType.isInline && !nodeType.isText) {
      try {
        const n = nodeType.create(attrsIn(nodeType, c.attrs, foreign), null, marks.filter((m) => parentType.allowsMarkType(m.type)));
        if (parentType.contentMatch.matchType(nodeType)) out.push(n);
        else foreign(`${c.name} in ${parentType.name}`);
      } catch {
        foreign(`element ${c.name}`);
      }
    } else if (markType) {
      const mark = markType.create(attrsIn(markType, c.attrs, foreign));
      out.push(...buildInline(schema, parentType, c.children, mark.addToSet(marks), foreign));
    } else {
      foreign(`element ${c.name}`);
      out.push(...buildInline(schema, parentType, c.children, marks, foreign));
    }
  }
  return out;
}

/** A node of `type` from a parsed element; its children's map goes to maps when irregular. */
function buildNode(schema, type, el, foreign, maps) {
  const { nodes, xml } = buildChildren(schema, type, el.children, foreign, maps);
  let node;
  try {
    node = type.create(attrsIn(type, el.attrs, foreign), Fragment.fromArray(nodes));
    node.check();
  } catch {
    foreign(`content of ${type.name}`);
    node = type.createAndFill(attrsIn(type, el.attrs, () => {})) ?? type.create();
    maps.set(node, { xml: node.content.childCount ? new Array(node.content.childCount).fill(null) : [], count: el.children.length });
    return node;
  }
  if (xml) maps.set(node, { xml, count: el.children.length });
  return node;
}

/**
 * The document of markup (the record's value): { doc, map } (map: the top level's, null when the
 * document's children are the fragment's nodes one to one). Foreign content goes to foreign(what).
 */
export function docFromMarkup(schema, markup, foreign = () => {}, maps = new WeakMap()) {
  const top = schema.topNodeType;
  const children = parseMarkup(markup);
  const { nodes, xml } = buildChildren(schema, top, children, foreign, maps);
  let doc;
  try {
    doc = top.create(null, Fragment.fromArray(nodes));
    doc.check();
  } catch {
    foreign(`content of ${top.name}`);
    doc = top.createAndFill();
    return { doc, map: { xml: new Array(doc.content.childCount).fill(null), count: children.length } };
  }
  return { doc, map: xml ? { xml, count: children.length } : null };
}

// ---- edits of a textblock, on its markup as the record has it ------------------------------------

/**
 * The exact children of the element at `path` as the record has them (parseMarkup of the element's
 * markup would join adjacent text nodes, which concurrent inserts make): a string per text node
 * (empty ones included), an inline node's parsed element as it is, a mark's (or a foreign) element
 * with its exact children. Top-level ones carry `top`, their index. O(size of the element · depth).
 */
function exactChildren(replica, schema, path) {
  const out = [];
  const n = replica.xmlChildIds(path).length;
  for (let k = 0; k < n; ++k) {
    const at = [...path, k];
    const node = parseMarkup(replica.xmlMarkup(at))[0];
    if (node === undefined || typeof node === 'string') out.push(node ?? '');
    else {
      const t = schema.nodes[node.name];
      out.push(t && t.isInline && !t.isText ? node : { name: node.name, attrs: node.attrs, children: exactChildren(replica, schema, at) });
    }
  }
  return out;
}

/**
 * The record edit that makes textblock `a`'s inline content `b`'s, on its children as the record has
 * them (`xml`: exactChildren): { from, to, markup }, its children [from, to) to replace with
 * `markup`. Only the range findDiffStart/findDiffEnd give changes: the leaves (text, inline nodes)
 * before and after it keep their text nodes and elements, new inline content joins its neighbours'
 * elements (and text node) as far as its marks match, and the children replaced are only those the
 * range touches. So a keystroke rewrites one text node, and what concurrent inserts left (two
 * <strong> side by side, two text nodes side by side) stays as it is: writing the canonical form would
 * join them (delete one, add its text to the other), and two clients doing so at once would double
 * that text. null when `xml` does not show `a`. O(size of the textblock).
 */
function textblockEdit(schema, xml, a, b) {
  xml.forEach((c, k) => {
    if (typeof c !== 'string') c.top = k;
  });
  const leaves = markupLeaves(schema, a.type, xml);
  let total = 0;
  for (const l of leaves) total += l.size;
  if (total !== a.content.size) return null;
  const start = a.content.findDiffStart(b.content);
  if (start === null) return null;
  let { a: endA, b: endB } = a.content.findDiffEnd(b.content);
  const overlap = start - Math.min(endA, endB);
  if (overlap > 0) {
    endA += overlap;
    endB += overlap;
  }
  // The leaves before `start` and from `endA` (a text leaf cut where the range starts or ends); the
  // top-level children the range removes something from are touched.
  const before = [];
  const after = [];
  const touched = new Set();
  let o = 0;
  for (const l of leaves) {
    const end = o + l.size;
    const top = l.rel[0];
    if (o < endA && end > start) touched.add(top);
    if (l.text !== undefined) {
      if (o < start) before.push({ ...l, top, text: l.text.slice(0, Math.min(l.size, start - o)) });
      if (end > endA) after.push({ ...l, top, text: l.text.slice(Math.max(0, endA - o)) });
    } else if (end <= start && (l.size > 0 || o < start)) before.push({ ...l, top });
    else if (o >= endA) after.push({ ...l, top });
    o = end;
  }
  // The new range: each inline node under its neighbours' elements as far as its marks match them.
  const matches = (chain, marks) => {
    let k = 0;
    while (k < chain.length && k < marks.length && chain[k].name === marks[k].type.name &&
           JSON.stringify(chain[k].attrs) === JSON.stringify(attrsOut(marks[k].type, marks[k].attrs))) ++k;
    return k;
  };
  const middle = [];
  b.content.cut(start, endB).forEach((n) => {
    const left = middle.length ? middle[middle.length - 1] : before[before.length - 1];
    const right = after[0];
    const kl = left ? matches(left.chain, n.marks) : -1;
    const kr = right ? matches(right.chain, n.marks) : -1;
    const from = kl >= kr ? left : right;
    const k = Math.max(kl, kr, 0);
    const chain = (from?.chain ?? []).slice(0, k);
    for (let i = chain.length; i < n.marks.length; ++i) chain.push({ name: n.marks[i].type.name, attrs: attrsOut(n.marks[i].type, n.marks[i].attrs) });
    // In its neighbour's top-level child when it shares its outer element, or its text node.
    const joins = from && (k > 0 || (n.isText && n.marks.length === 0 && from.chain.length === 0 && from.text !== undefined));
    const top = joins ? from.top : undefined;
    if (top !== undefined) touched.add(top);
    middle.push(n.isText ? { text: n.text, chain, top } : { markup: nodeMarkup(n.mark([])), chain, top });
  });
  // The children replaced: from the first touched to the last; new ones alone go where the range is.
  let from = Infinity;
  let to = -Infinity;
  for (const t of touched) {
    from = Math.min(from, t);
    to = Math.max(to, t + 1);
  }
  if (from === Infinity) {
    const prior = before.length ? before[before.length - 1].top + 1 : after.length ? after[0].top : xml.length;
    from = to = Math.min(prior, after.length ? after[0].top : xml.length);
  }
  // Written back: the leaves of those children and the new ones; elements by identity (a kept element
  // is one element again), text of one text node together.
  const kept = [...before, ...middle, ...after].filter((l) => (l.top === undefined || (l.top >= from && l.top < to)) && l.text !== '');
  let out = '';
  const open = []; // [element, markup before it]
  const close = (keep) => {
    while (open.length > keep) {
      const [el, prior] = open.pop();
      out = prior + element(el.name, el.attrs, out.slice(prior.length));
    }
  };
  for (const l of kept) {
    let k = 0;
    while (k < open.length && k < l.chain.length && open[k][0] === l.chain[k]) ++k;
    close(k);
    for (let i = k; i < l.chain.length; ++i) open.push([l.chain[i], out]);
    out += l.text !== undefined ? escapeText(l.text) : l.markup;
  }
  close(0);
  return { from, to, markup: out };
}

// ---- the binding ------------------------------------------------------------------------------------

const CHANGED = Symbol('folio.xmlChanged'); // on a replica: what its last change call changed

/** Marks the transactions that bring the record's changes into the editor. */
export const folioRemoteKey = new PluginKey('folioRemote');

/** The XML index of ProseMirror child i of a container with `map` (children one to one without). */
function xmlStart(map, i) {
  if (!map) return i;
  for (let j = i; j < map.xml.length; ++j) if (map.xml[j] !== null) return map.xml[j];
  return map.count;
}
function xmlEnd(map, from, to) {
  if (!map) return to;
  for (let j = to - 1; j >= from; --j) if (map.xml[j] !== null) return map.xml[j] + 1;
  return xmlStart(map, from);
}
/** The ProseMirror child of XML child x, or -1 (a foreign node). */
function pmIndex(map, x) {
  return map ? map.xml.indexOf(x) : x;
}

class ProseMirrorBinding {
  constructor(record, view, options = {}) {
    if (record.type !== 'xml') throw new TypeError(`the ProseMirror binding needs an xml record; this one is ${record.type}`);
    this.record = record;
    this.view = view;
    this.schema = view.state.schema;
    for (const name of Object.keys(this.schema.marks))
      if (this.schema.nodes[name]) throw new TypeError(`the schema names a node and a mark ${name}: the markup could not tell them apart`);
    const seen = new Set();
    const report = options.onForeign ?? ((what) => console.warn(`Folio ProseMirror binding: not in the schema, not shown: ${what}`));
    this.foreign = (what) => {
      if (seen.has(what)) return;
      seen.add(what);
      report(what);
    };
    this.maps = new WeakMap(); // container node -> { xml, count } when its children are not its XML children one to one
    this.rootMap = null; // the same for the document (its node changes with every edit)
    this.rootIds = null; // ids of the fragment's children, as the editor shows them
    this.ours = false;
    this.destroyed = false;
    this.onChange = (e) => {
      if (this.ours || this.destroyed) return;
      const r = record._replica;
      this.fromRecord(e?.xmlChanged ?? (r && r === this.hooked ? r[CHANGED] : null));
      this.hook();
    };
    this.hooked = null;
    this.hook();
    record.on('change', this.onChange);
    // Local transactions: wrap the view's dispatch (the only place every transaction passes).
    this.dispatchBefore = view.props.dispatchTransaction ?? null;
    const dispatch = (tr) => {
      if (this.dispatchBefore) this.dispatchBefore.call(view, tr);
      else view.updateState(view.state.apply(tr));
    };
    // What the view shows after a transaction, beyond the record's own changes (a remote transaction's
    // document: plugins' appendTransaction may add to it), goes to the record.
    this.dispatch = (tr) => {
      const before = tr.getMeta(folioRemoteKey) ? tr.doc : this.view.state.doc;
      dispatch(tr);
      if (this.destroyed) return;
      if (this.view.state.doc !== before) this.toRecord(before, this.view.state.doc);
      // The selection's anchors once the record holds what the view shows (folioCursors).
      if (tr.docChanged) cursorsOf(this.view)?.announce(this.view.state);
    };
    view.setProps({ dispatchTransaction: this.dispatch });
    this.fromRecord(null);
  }

  /**
   * The record's change event carries no xmlChanged (client.js reports text hunks only): the elements
   * changed are read from the answer of the replica call that made the event (apply, onAnswer, onPush,
   * replace; xmlReplace: its path), which the record makes right before emitting it, synchronously.
   * Kept on the replica under a symbol; a replica not hooked yet (a new one after the record was
   * added again) gives null: the whole document is compared.
   */
  hook() {
    const r = this.record._replica;
    if (!r || r === this.hooked) return;
    this.hooked = r;
    if (r[CHANGED] !== undefined) return; // another binding hooked it
    r[CHANGED] = null;
    for (const m of ['apply', 'onAnswer', 'onPush', 'replace']) {
      const f = r[m];
      r[m] = function (...args) {
        const res = f.apply(this, args);
        r[CHANGED] = res?.xmlChanged ?? null;
        return res;
      };
    }
    const replace = r.xmlReplace;
    if (replace)
      r.xmlReplace = function (path, ...args) {
        const ops = replace.call(this, path, ...args);
        r[CHANGED] = [[...path]];
        return ops;
      };
  }

  get replica() {
    return this.record._live();
  }

  /** Whether the engine has the XML range edits (else the binding writes the whole value). */
  get ranged() {
    return typeof this.replica.xmlReplace === 'function';
  }

  // ---- local -> record --------------------------------------------------------------------------------

  /**
   * Writes the change from document `a` to `b` to the record: the smallest range, as one xmlReplace.
   * The children ProseMirror left untouched are the same objects in both documents, so the range of
   * a container's children that changed is what lies between its identical children at both ends
   * (not findDiffStart/End's range, which cannot tell a split at the end of one paragraph from one
   * at the start of the next: the engine would then move the text of a paragraph someone else is
   * typing in). While that range is one child of the same type and attributes on both sides, the
   * binding descends into it; in a textblock it writes the inline content whole.
   */
  toRecord(a, b) {
    if (a === b || a.eq(b)) return;
    if (!this.ranged) {
      this.write(() => this.record.replace(markupOf(b)));
      return;
    }
    const path = [];
    let na = a;
    let nb = b;
    let map = this.rootMap;
    let depth = 0;
    let from;
    let toA;
    let toB;
    for (;;) {
      if (na.inlineContent) break;
      const n = na.childCount;
      const m = nb.childCount;
      let p = 0;
      while (p < n && p < m && na.child(p) === nb.child(p)) ++p;
      let s = 0;
      while (s < n - p && s < m - p && na.child(n - 1 - s) === nb.child(m - 1 - s)) ++s;
      [from, toA, toB] = [p, n - s, m - s];
      const x = map ? map.xml[p] : p;
      const one = toA - from === 1 && toB - from === 1 && na.child(p).sameMarkup(nb.child(p)) && !na.child(p).isLeaf;
      if (!one || x === null || x === undefined) break;
      // Inside child p: this container keeps its children but that one; its map goes to the new node.
      if (depth > 0 && map) this.maps.set(nb, map);
      path.push(x);
      na = na.child(p);
      nb = nb.child(p);
      map = this.maps.get(na);
      ++depth;
    }
    let xFrom;
    let xTo;
    let markup;
    if (na.inlineContent) {
      // A textblock: the children its change touches, on its markup as the record has it (else, when
      // the record does not show it as the editor did, its inline content whole, canonical).
      const edit = textblockEdit(this.schema, exactChildren(this.replica, this.schema, path), na, nb);
      if (edit) ({ from: xFrom, to: xTo, markup } = edit);
      else {
        xFrom = 0;
        xTo = this.replica.xmlChildIds(path).length;
        markup = inlineMarkup(nb);
      }
    } else {
      // A pure insertion goes right after the node before it (foreign nodes after that stay after it).
      xFrom = toA === from && from > 0 ? xmlEnd(map, 0, from) : xmlStart(map, from);
      xTo = toA === from ? xFrom : xmlEnd(map, from, toA);
      markup = '';
      for (let i = from; i < toB; ++i) markup += nodeMarkup(nb.child(i));
    }
    this.write(() => {
      const r = this.replica;
      if (r.xmlReplace(path, xFrom, xTo, markup) > 0) this.record._local(undefined);
    });
    if (na.inlineContent) return;
    // The map follows: the new container's children [from, toB) are now XML children [xFrom, +k).
    const k = toB - from;
    if (map) {
      const xml = map.xml.slice(0, from);
      for (let i = 0; i < k; ++i) xml.push(xFrom + i);
      const shift = k - (xTo - xFrom);
      for (const x of map.xml.slice(toA)) xml.push(x === null ? null : x + shift);
      const next = { xml, count: map.count + shift };
      if (depth === 0) this.rootMap = next;
      else this.maps.set(nb, next);
    }
    if (depth === 0 && this.rootIds) {
      const r = this.replica;
      const ids = [];
      for (let i = 0; i < k; ++i) ids.push(r.xmlAnchorAt([], xFrom + i));
      this.rootIds.splice(xFrom, xTo - xFrom, ...ids);
    }
  }

  write(f) {
    this.ours = true;
    try {
      f();
    } finally {
      this.ours = false;
    }
  }

  // ---- record -> editor ---------------------------------------------------------------------------------

  /** Shows the record's change: `changed` the ids of the elements that changed, or null (everything). */
  fromRecord(changed) {
    const state = this.view.state;
    const tr = state.tr;
    if (!changed || !this.ranged || typeof this.replica.xmlPathOf !== 'function') this.wholeDocument(tr);
    else this.changedNodes(tr, changed);
    if (!tr.docChanged) return;
    tr.setMeta(folioRemoteKey, true);
    tr.setMeta('addToHistory', false);
    this.view.dispatch(tr);
  }

  /** wholeDocument, for topLevel's answer: null (no range; the whole document was rebuilt). */
  whole(tr) {
    this.wholeDocument(tr);
    return null;
  }

  wholeDocument(tr) {
    const { doc, map } = docFromMarkup(this.schema, this.record.value, this.foreign, this.maps);
    this.rootMap = map;
    this.rootIds = this.ranged && !map ? this.replica.xmlChildIds([]) : null;
    patch(tr, 0, tr.doc, doc);
    this.carry(doc, tr.doc);
  }

  changedNodes(tr, changed) {
    const r = this.replica;
    const targets = [];
    for (const id of changed) {
      const path = Array.isArray(id) ? id : id === 'root' ? [] : r.xmlPathOf(id);
      if (path) targets.push(path);
    }
    targets.sort((p, q) => p.length - q.length);
    const done = [];
    if (targets.length && targets[0].length === 0) {
      if (this.rootMap || !this.rootIds) return this.wholeDocument(tr);
      const rebuilt = this.topLevel(tr);
      if (!rebuilt) return; // the whole document was
      for (let i = rebuilt[0]; i < rebuilt[1]; ++i) done.push([i]);
      targets.shift();
    }
    for (const xpath of targets) {
      // Down to the node to rebuild: the element itself, or the textblock holding it.
      let node = tr.doc;
      let pos = 0;
      let map = this.rootMap;
      const xmlPath = [];
      let found = true;
      for (let d = 0; d < xpath.length; ++d) {
        const i = pmIndex(map, xpath[d]);
        if (i < 0 || i >= node.childCount) {
          found = false;
          break;
        }
        xmlPath.push(xpath[d]);
        pos += d === 0 ? 0 : 1;
        for (let j = 0; j < i; ++j) pos += node.child(j).nodeSize;
        node = node.child(i);
        if (node.inlineContent) break;
        map = this.maps.get(node);
      }
      if (!found) continue; // under a node not shown
      if (done.some((p) => p.length <= xmlPath.length && p.every((x, k) => x === xmlPath[k]))) continue;
      done.push(xmlPath);
      const parsed = parseMarkup(r.xmlMarkup(xmlPath))[0];
      const type = this.schema.nodes[parsed?.name];
      if (!type) continue;
      const fresh = buildNode(this.schema, type, parsed, this.foreign, this.maps);
      replaceNode(tr, pos, node, fresh);
      this.carry(fresh, tr.doc.nodeAt(pos));
    }
  }

  /**
   * The top level's children changed: rebuilds the children between the unchanged ids at both ends.
   * Returns that range of the fragment's children, or null when it rebuilt the whole document.
   */
  topLevel(tr) {
    const r = this.replica;
    const ids = r.xmlChildIds([]);
    const old = this.rootIds;
    let p = 0;
    while (p < old.length && p < ids.length && old[p] === ids[p]) ++p;
    let s = 0;
    while (s < old.length - p && s < ids.length - p && old[old.length - 1 - s] === ids[ids.length - 1 - s]) ++s;
    const nodes = [];
    for (let i = p; i < ids.length - s; ++i) {
      const parsed = parseMarkup(r.xmlMarkup([i]))[0];
      const type = parsed && typeof parsed !== 'string' ? this.schema.nodes[parsed.name] : null;
      if (!type || type.isInline) return this.whole(tr);
      nodes.push(buildNode(this.schema, type, parsed, this.foreign, this.maps));
    }
    const doc = tr.doc;
    if (old.length !== doc.childCount) return this.whole(tr);
    let from = 0;
    for (let i = 0; i < p; ++i) from += doc.child(i).nodeSize;
    let to = from;
    for (let i = p; i < old.length - s; ++i) to += doc.child(i).nodeSize;
    const next = doc.copy(replaceChildren(doc.content, p, old.length - s, nodes));
    try {
      next.check();
    } catch {
      return this.whole(tr);
    }
    this.rootIds = ids;
    patch(tr, 0, doc, next);
    for (let i = p; i < ids.length - s; ++i) this.carry(next.child(i), tr.doc.child(i));
    return [p, ids.length - s];
  }

  /**
   * The maps of the nodes of `built` (made from markup) go to the equal nodes the transaction left in
   * the document in their place (`shown`): patch() keeps nodes that were equal and makes new ones for
   * what it replaced. O(size of `built`), less where both share nodes.
   */
  carry(built, shown) {
    if (!shown || built === shown) return;
    const m = this.maps.get(built);
    if (m) this.maps.set(shown, m);
    if (built.isTextblock || built.childCount !== shown.childCount) return;
    for (let i = 0; i < built.childCount; ++i) this.carry(built.child(i), shown.child(i));
  }

  destroy() {
    this.destroyed = true;
    this.record.off('change', this.onChange);
    if (this.view.props.dispatchTransaction === this.dispatch) this.view.setProps({ dispatchTransaction: this.dispatchBefore ?? undefined });
  }
}

function replaceChildren(fragment, from, to, nodes) {
  const kids = [];
  fragment.forEach((c, _o, i) => {
    if (i === from) kids.push(...nodes);
    if (i < from || i >= to) kids.push(c);
  });
  if (from >= fragment.childCount) kids.push(...nodes);
  return Fragment.fromArray(kids);
}

/**
 * Makes node `a` (whose content starts at `base`) show the content of `b` (of the same markup),
 * replacing only what differs, so the selection and the scroll stay. Inline content: the range
 * findDiffStart/findDiffEnd give. Block content: the equal children at both ends are kept, then the
 * children of the same type and attributes at both ends of what is left are patched in place
 * (recursively), and the rest in between is replaced. O(size of a and b) at worst; children shared
 * with `b` (the same objects) are compared in O(1).
 */
function patch(tr, base, a, b) {
  if (a === b) return;
  if (a.inlineContent || a.isLeaf) {
    const start = a.content.findDiffStart(b.content);
    if (start === null) return;
    let { a: endA, b: endB } = a.content.findDiffEnd(b.content);
    const overlap = start - Math.min(endA, endB);
    if (overlap > 0) {
      endA += overlap;
      endB += overlap;
    }
    tr.replace(base + start, base + endA, b.slice(start, endB));
    return;
  }
  const n = a.childCount;
  const m = b.childCount;
  let p = 0;
  while (p < n && p < m && a.child(p).eq(b.child(p))) ++p;
  let hi = n;
  let hj = m;
  while (hi > p && hj > p && a.child(hi - 1).eq(b.child(hj - 1))) --hi, --hj;
  const offsets = [0];
  for (let i = 0; i < n; ++i) offsets.push(offsets[i] + a.child(i).nodeSize);
  // The children left, a[p, hi) and b[p, hj), paired: pairs[k] = [i, j], ascending.
  const pairs = align(a, b, p, hi, hj);
  pairs.push([hi, hj]);
  // From the end backwards: each step leaves the positions before it as they were.
  for (let k = pairs.length - 1; k >= 0; --k) {
    const [i, j] = pairs[k];
    if (i < hi) patch(tr, base + offsets[i] + 1, a.child(i), b.child(j));
    const [pi, pj] = k > 0 ? [pairs[k - 1][0] + 1, pairs[k - 1][1] + 1] : [p, p];
    if (i > pi || j > pj) {
      const kids = [];
      for (let x = pj; x < j; ++x) kids.push(b.child(x));
      tr.replaceWith(base + offsets[pi], base + offsets[i], Fragment.fromArray(kids));
    }
  }
}

/** Whether two children are one node changed (same markup, and their texts share a start or an end). */
function similar(x, y) {
  if (!x.sameMarkup(y)) return false;
  const s = x.textContent;
  const t = y.textContent;
  if (!s || !t) return !s && !t;
  const k = Math.min(3, s.length, t.length);
  return s.slice(0, k) === t.slice(0, k) || s.slice(-k) === t.slice(-k);
}

/**
 * Pairs children a[p, hi) with b[p, hj) that are one node changed: the longest common subsequence
 * under similar() for up to 64 x 64 children (O(n * m)), else those of the same markup at the start.
 */
function align(a, b, p, hi, hj) {
  const n = hi - p;
  const m = hj - p;
  const pairs = [];
  if (n === 0 || m === 0) return pairs;
  if (n > 64 || m > 64) {
    for (let i = p; i < hi && i < hj && a.child(i).sameMarkup(b.child(i)); ++i) pairs.push([i, i]);
    return pairs;
  }
  const L = Array.from({ length: n + 1 }, () => new Uint8Array(m + 1));
  for (let i = n - 1; i >= 0; --i)
    for (let j = m - 1; j >= 0; --j) L[i][j] = similar(a.child(p + i), b.child(p + j)) ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  for (let i = 0, j = 0; i < n && j < m; ) {
    if (similar(a.child(p + i), b.child(p + j)) && L[i][j] === L[i + 1][j + 1] + 1) pairs.push([p + i++, p + j++]);
    else if (L[i + 1][j] >= L[i][j + 1]) ++i;
    else ++j;
  }
  return pairs;
}

/** Makes the node `a` at `pos` equal to `b`: its content's differing parts, or the whole node. */
function replaceNode(tr, pos, a, b) {
  if (a.sameMarkup(b)) patch(tr, pos + 1, a, b);
  else tr.replaceWith(pos, pos + a.nodeSize, b);
}

/**
 * Keeps a ProseMirror view and an xml record in step (see the top of this file). The view shows the
 * record at once (a transaction kept out of the history). options.onForeign(what): called once per
 * kind of markup the schema cannot show (default console.warn). Returns { destroy() }.
 */
export function bindProseMirror(record, view, options) {
  const b = new ProseMirrorBinding(record, view, options);
  const presence = cursorsOf(view);
  if (presence) presence.attach(b);
  return {
    destroy: () => {
      b.destroy();
      if (presence?.binding === b) presence.detach(); // its presence listener goes with the binding
    },
    binding: b,
  };
}

// ---- positions <-> anchors ------------------------------------------------------------------------------

/**
 * The engine anchor ("r.s" or "end:r.s") of ProseMirror position `pos` of a bound document: the
 * character or node right after it, in the record. null when it cannot be anchored (a filled-in node).
 */
export function anchorOf(binding, doc, pos) {
  const $p = doc.resolve(pos);
  const path = [];
  for (let d = 0; d < $p.depth; ++d) {
    const map = d === 0 ? binding.rootMap : binding.maps.get($p.node(d));
    const x = map ? map.xml[$p.index(d)] : $p.index(d);
    if (x === null || x === undefined) return null;
    path.push(x);
  }
  const r = binding.replica;
  const parent = $p.parent;
  if (!parent.inlineContent) {
    const map = $p.depth === 0 ? binding.rootMap : binding.maps.get(parent);
    return r.xmlAnchorAt(path, xmlStart(map, $p.index()));
  }
  // Inside a textblock: the leaf holding the character (or inline node) after the position.
  const off = $p.parentOffset;
  let o = 0;
  for (const leaf of inlineLeaves(binding, parent, path)) {
    if (leaf.size > 0 && off < o + leaf.size) {
      if (leaf.text !== undefined) return r.xmlAnchorAt([...path, ...leaf.rel], codePoints(leaf.text, off - o));
      return r.xmlAnchorAt([...path, ...leaf.rel.slice(0, -1)], leaf.rel[leaf.rel.length - 1]);
    }
    o += leaf.size;
  }
  return r.xmlAnchorAt(path, r.xmlChildIds(path).length); // the end of the textblock
}

/**
 * The leaves of a textblock's markup in order, as the record has it (exactChildren): { rel (the XML
 * path below its element), size (in ProseMirror positions), text (a text node's) }. O(its size).
 */
function inlineLeaves(binding, node, path) {
  return markupLeaves(binding.schema, node.type, exactChildren(binding.replica, binding.schema, path));
}

/** The leaves of parsed markup children of a textblock of `type` (see inlineLeaves), with the elements around each (`chain`). */
function markupLeaves(schema, type, xml) {
  const leaves = [];
  const walk = (nodes, chain, rel) => {
    nodes.forEach((c, k) => {
      if (typeof c === 'string') {
        if (c) leaves.push({ text: c, size: c.length, chain, rel: [...rel, k] });
        return;
      }
      const t = schema.nodes[c.name];
      if (t && t.isInline && !t.isText) leaves.push({ markup: parsedMarkup([c]), size: type.contentMatch.matchType(t) ? 1 : 0, chain, rel: [...rel, k] });
      else walk(c.children, [...chain, c], [...rel, k]);
    });
  };
  walk(xml, [], []);
  return leaves;
}

function offsetOfChild(parent, i) {
  let o = 0;
  for (let j = 0; j < i; ++j) o += parent.child(j).nodeSize;
  return o;
}

/** The ProseMirror position of an engine anchor in a bound document, or null (not shown). */
export function positionOf(binding, doc, anchor) {
  const at = binding.replica.xmlResolve(anchor);
  if (!at) return null;
  const { path, offset } = at;
  let node = doc;
  let pos = 0;
  let map = binding.rootMap;
  let d = 0;
  for (; d < path.length; ++d) {
    if (node.inlineContent) break;
    const i = pmIndex(map, path[d]);
    if (i < 0 || i >= node.childCount) return null;
    pos += (d === 0 ? 0 : 1) + offsetOfChild(node, i);
    node = node.child(i);
    map = binding.maps.get(node);
  }
  const start = d === 0 ? 0 : pos + 1; // where the node's content starts
  if (!node.inlineContent) {
    if (d < path.length) return null;
    let i = 0;
    if (map) while (i < map.xml.length && (map.xml[i] === null || map.xml[i] < offset)) ++i;
    else i = Math.min(offset, node.childCount);
    return start + offsetOfChild(node, i);
  }
  // Inside a textblock: `rest` is the path below its element.
  const rest = path.slice(d);
  let o = start;
  let lastEnd = null;
  for (const leaf of inlineLeaves(binding, node, path.slice(0, d))) {
    const rel = leaf.rel;
    if (leaf.text !== undefined && rel.length === rest.length && rel.every((x, k) => x === rest[k])) return o + utf16Index(leaf.text, offset);
    // The first leaf at or after XML child `offset` of the element at `rest`.
    if (rel.length > rest.length && rest.every((x, k) => x === rel[k])) {
      if (rel[rest.length] >= offset) return o;
      lastEnd = o + leaf.size;
    }
    o += leaf.size;
  }
  return lastEnd ?? (rest.length === 0 ? o : null);
}

// ---- remote cursors -------------------------------------------------------------------------------------

export const folioCursorsKey = new PluginKey('folioCursors');

function cursorsOf(view) {
  return folioCursorsKey.getState(view.state)?.controller ?? null;
}

/**
 * A plugin showing the others present on the record (record.presence) as carets with their name and
 * selections in their colour (presence state { name, color }), and publishing this editor's selection
 * as engine anchors (record.presence.select: sent once the page called record.presence.set). With
 * options.user (this client's state, { name, color }) the plugin calls set(user, selection) itself.
 * options.render(other): the caret's DOM element (default: a span.folio-cursor with a
 * span.folio-cursor-label). Works once bindProseMirror(record, view) bound the view.
 */
export function folioCursors(record, options = {}) {
  const controller = {
    binding: null,
    view: null,
    lastSent: undefined,
    attach(binding) {
      this.binding = binding;
      this.view = binding.view;
      // Presence events come one per message (a flood of them, from many clients): one redraw a task.
      this.queued = false;
      this.onPresence = () => {
        if (this.queued) return;
        this.queued = true;
        queueMicrotask(() => {
          this.queued = false;
          if (this.binding === binding && !binding.destroyed) this.view.dispatch(this.view.state.tr.setMeta(folioCursorsKey, 'presence'));
        });
      };
      record.on('presence', this.onPresence);
      this.announce(this.view.state);
      this.view.dispatch(this.view.state.tr.setMeta(folioCursorsKey, 'presence'));
    },
    detach() {
      if (this.onPresence) record.off('presence', this.onPresence);
      this.onPresence = null;
      this.binding = null;
    },
    announce(state) {
      const b = this.binding;
      if (!b || !record.presence || b.destroyed) return;
      let selection = null;
      try {
        const anchor = anchorOf(b, state.doc, state.selection.anchor);
        const head = anchorOf(b, state.doc, state.selection.head);
        if (anchor && head) selection = { anchor, head };
      } catch {
        selection = null;
      }
      const key = JSON.stringify(selection);
      if (key === this.lastSent) return;
      this.lastSent = key;
      // With options.user the plugin joins; else the selection goes out once the page called set().
      if (options.user && !this.joined) {
        this.joined = true;
        record.presence.set(options.user, selection);
      } else record.presence.select(selection);
    },
    decorations(state) {
      const b = this.binding;
      const others = record.presence?.others ?? [];
      if (!b || !others.length) return DecorationSet.empty;
      const decos = [];
      for (const other of others) {
        const sel = other.selection;
        if (!sel) continue;
        let anchor;
        let head;
        try {
          anchor = positionOf(b, state.doc, sel.anchor);
          head = positionOf(b, state.doc, sel.head);
        } catch {
          continue;
        }
        anchor ??= head;
        const size = state.doc.content.size;
        if (head === null || head < 0 || head > size || anchor < 0 || anchor > size) continue; // not shown: no caret
        const color = presenceColor(other);
        const name = presenceName(other);
        const from = Math.min(anchor, head);
        const to = Math.max(anchor, head);
        if (from < to) decos.push(Decoration.inline(from, to, { class: 'folio-selection', style: `background-color: color-mix(in srgb, ${color} 25%, transparent)` }, { clientId: other.clientId }));
        decos.push(
          Decoration.widget(head, () => (options.render ? options.render(other) : caret(name, color, other.clientId)), {
            key: `${other.clientId}:${name}:${color}`,
            side: 10,
            clientId: other.clientId,
            name,
          }),
        );
      }
      return DecorationSet.create(state.doc, decos);
    },
  };
  return new Plugin({
    key: folioCursorsKey,
    state: {
      init: () => ({ controller, decorations: DecorationSet.empty }),
      apply: (tr, value, _old, state) => {
        if (!tr.docChanged && !tr.getMeta(folioCursorsKey)) return value;
        return { controller, decorations: controller.decorations(state) };
      },
    },
    props: {
      decorations(state) {
        return folioCursorsKey.getState(state).decorations;
      },
    },
    view: () => ({
      // A change of the document: the binding announces once it wrote it (anchors are the record's).
      update(view, prev) {
        if (view.state.doc === prev.doc && !view.state.selection.eq(prev.selection)) controller.announce(view.state);
      },
      destroy() {
        controller.detach();
      },
    }),
  });
}

function caret(name, color, clientId) {
  const el = document.createElement('span');
  el.className = 'folio-cursor';
  el.dataset.clientId = clientId;
  el.style.cssText = `border-left: 2px solid ${color}; margin-left: -1px; margin-right: -1px; position: relative; word-break: normal; pointer-events: none;`;
  const label = document.createElement('span');
  label.className = 'folio-cursor-label';
  label.textContent = name;
  label.style.cssText = `position: absolute; top: -1.3em; left: -2px; font-size: 11px; line-height: 1; padding: 1px 3px; white-space: nowrap; color: #fff; background: ${color}; border-radius: 3px;`;
  el.append(label);
  return el;
}
