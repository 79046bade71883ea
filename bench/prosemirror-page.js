// The page's side of bench/prosemirror.mjs: one ProseMirror EditorView (the basic schema with lists)
// on a ~1 MB document, bound to Folio (clients/js: bindProseMirror on an xml replica) or to Yjs
// (y-prosemirror: initProseMirrorDoc + ySyncPlugin, its README's setup without cursors and undo).
//  * local keystroke: view.dispatch(insertText) of one character at the middle of a paragraph, timed
//    until dispatch returns: ProseMirror's update and DOM redraw, the binding, the CRDT's op.
//  * remote keystroke: a peer in the page (Folio: a replica bound to a ProseMirror state without a
//    view; Yjs: a Y.Doc, its paragraph's Y.XmlText.insert, as y-prosemirror writes one) types one
//    character; its update's bytes are made untimed; timed: handing them to the editor's side
//    (Folio: replica.apply, then the binding's transaction from xmlChanged; Yjs: Y.applyUpdate, then
//    y-prosemirror's transaction) until the view shows it.
//  * the baseline: the same keystrokes in the editor alone (no binding, no CRDT).
// Paragraphs are picked by a seeded generator, the same for every library.
import { Schema } from 'prosemirror-model';
import { EditorState } from 'prosemirror-state';
import { EditorView } from 'prosemirror-view';
import { schema as basic } from 'prosemirror-schema-basic';
import { addListNodes } from 'prosemirror-schema-list';

const schema = new Schema({ nodes: addListNodes(basic.spec.nodes, 'paragraph block*', 'block'), marks: basic.spec.marks });

/** The benchmark document's markup: `bytes` of paragraphs with bold and italic runs and a list every 40 paragraphs. */
export function documentMarkup(bytes) {
  let s = '';
  for (let i = 0; s.length < bytes; ++i) {
    if (i % 40 === 39) s += `<bullet_list><list_item><paragraph>item ${i} one</paragraph></list_item><list_item><paragraph>item ${i} two</paragraph></list_item></bullet_list>`;
    else s += `<paragraph>Paragraph ${i} of the benchmark document, with <strong>a few words in bold</strong> and <em>some in italic</em>, then plain text to the end of the line.</paragraph>`;
  }
  return s;
}

function rng(seed) {
  let x = seed >>> 0;
  return (n) => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) % n);
}

/** The position at the middle of the text of top-level paragraph `index` of `doc` (a list: its first item's). */
function middleOf(doc, index) {
  let pos = 0;
  for (let i = 0; i < index; ++i) pos += doc.child(i).nodeSize;
  let node = doc.child(index);
  pos += 1;
  while (!node.inlineContent) {
    node = node.firstChild;
    pos += 1;
  }
  return pos + Math.floor(node.content.size / 2);
}

/** What the binding needs of an EditorView, without a DOM (the peer's editor). */
class HeadlessView {
  constructor(state) {
    this.state = state;
    this.props = {};
  }
  setProps(p) { Object.assign(this.props, p); }
  updateState(s) { this.state = s; }
  dispatch(tr) {
    if (this.props.dispatchTransaction) this.props.dispatchTransaction.call(this, tr);
    else this.updateState(this.state.apply(tr));
  }
}

/** A record's side the binding uses, over a replica (no service: the bytes go between replicas here). */
class LocalRecord {
  constructor(replica) {
    this.r = replica;
    this.type = 'xml';
    this.listeners = new Set();
  }
  get value() { return this.r.value; }
  get _replica() { return this.r; }
  on(_e, f) { this.listeners.add(f); this.r.track(true); }
  off(_e, f) { this.listeners.delete(f); }
  _live() { return this.r; }
  _local() { for (const f of this.listeners) f({ remote: false }); }
  receive(batch) {
    const res = this.r.apply(batch);
    for (const f of this.listeners) f({ remote: true, xmlChanged: res.xmlChanged });
  }
}

const percentile = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.round((p / 100) * (s.length - 1)))];
};

/** Runs the benchmark for `lib` ('folio' | 'yjs' | 'prosemirror': no binding): { lib, bytes, blocks, local: [ms], remote: [ms] }. */
export async function run(lib, bytes, samples, warmup) {
  const markup = documentMarkup(bytes);
  const parent = document.createElement('div');
  document.body.append(parent);
  let view;
  let peerKeystroke; // (index) => bytes of the peer's update
  let deliver; // (bytes) => void
  let shown; // () => markup or text, to check convergence at the end
  if (lib === 'folio') {
    const F = await import('/client/folio.js');
    const P = await import('/client/src/prosemirror.js');
    const engine = await F.loadEngine();
    const main = F.Replica.create(engine, 'xml');
    main.replace(markup);
    const peer = F.Replica.load(engine, main.save());
    const record = new LocalRecord(main);
    const peerRecord = new LocalRecord(peer);
    view = new EditorView(parent, { state: EditorState.create({ schema }) });
    P.bindProseMirror(record, view);
    const peerView = new HeadlessView(EditorState.create({ schema }));
    P.bindProseMirror(peerRecord, peerView);
    let version = main.version();
    peerKeystroke = (index) => {
      peerView.dispatch(peerView.state.tr.insertText('r', middleOf(peerView.state.doc, index)));
      const batch = peer.encodeSince(version);
      return batch;
    };
    deliver = (batch) => {
      record.receive(batch);
      version = main.version();
    };
    shown = () => [P.markupOf(view.state.doc), main.value, P.markupOf(peerView.state.doc)];
    // The peer learns the main editor's keystrokes untimed, before the remote part.
    shown.sync = () => peerRecord.receive(main.encodeSince(peer.version()));
  } else if (lib === 'prosemirror') {
    // The editor alone, no collaboration: the baseline. Its "remote keystroke" is a transaction made
    // elsewhere in the page, applied to the view.
    const P = await import('/client/src/prosemirror.js');
    view = new EditorView(parent, { state: EditorState.create({ doc: P.docFromMarkup(schema, markup).doc, schema }) });
    peerKeystroke = (index) => view.state.tr.insertText('r', middleOf(view.state.doc, index));
    deliver = (tr) => view.dispatch(tr);
    shown = () => [];
    shown.sync = () => {};
  } else {
    const Y = await import('yjs');
    const YP = await import('y-prosemirror');
    const P = await import('/client/src/prosemirror.js'); // its markup parser only, to build the same document
    const pmDoc = P.docFromMarkup(schema, markup).doc;
    const ydoc = new Y.Doc();
    const peerDoc = new Y.Doc();
    YP.prosemirrorToYXmlFragment(pmDoc, peerDoc.getXmlFragment('prosemirror'));
    Y.applyUpdate(ydoc, Y.encodeStateAsUpdate(peerDoc));
    const type = ydoc.getXmlFragment('prosemirror');
    const { doc, mapping } = YP.initProseMirrorDoc(type, schema);
    view = new EditorView(parent, { state: EditorState.create({ doc, schema, plugins: [YP.ySyncPlugin(type, { mapping })] }) });
    const peerType = peerDoc.getXmlFragment('prosemirror');
    let update = null;
    peerDoc.on('update', (u, origin) => {
      if (origin !== 'main') update = u;
    });
    peerKeystroke = (index) => {
      let el = peerType.get(index);
      while (el.nodeName !== 'paragraph') el = el.get(0);
      // The paragraph's first text (y-prosemirror keeps a run of text with the same marks as one Y.XmlText).
      const text = el.get(0);
      text.insert(Math.floor(text.length / 2), 'r');
      return update;
    };
    deliver = (u) => Y.applyUpdate(ydoc, u);
    shown = () => [YP.yXmlFragmentToProseMirrorRootNode(type, schema).eq(view.state.doc), YP.yXmlFragmentToProseMirrorRootNode(peerType, schema).eq(view.state.doc)];
    shown.sync = () => Y.applyUpdate(peerDoc, Y.encodeStateAsUpdate(ydoc, Y.encodeStateVector(peerDoc)), 'main');
  }
  const blocks = view.state.doc.childCount;
  const next = rng(53);
  const local = [];
  for (let k = 0; k < warmup + samples; ++k) {
    const pos = middleOf(view.state.doc, next(blocks));
    const tr = view.state.tr.insertText('l', pos);
    const t0 = performance.now();
    view.dispatch(tr);
    const t1 = performance.now();
    if (k >= warmup) local.push(t1 - t0);
  }
  shown.sync();
  const remote = [];
  for (let k = 0; k < warmup + samples; ++k) {
    const update = peerKeystroke(next(blocks));
    const before = view.state.doc;
    const t0 = performance.now();
    deliver(update);
    const t1 = performance.now();
    if (view.state.doc === before) throw new Error(`${lib}: the remote keystroke did not reach the view`);
    if (k >= warmup) remote.push(t1 - t0);
  }
  const end = shown();
  if (lib === 'folio' ? !(end[0] === end[1] && end[1] === end[2]) : !end.every((x) => x)) throw new Error(`${lib}: the editor and the replicas differ at the end`);
  return {
    lib, bytes: markup.length, blocks, samples, warmup, isolated: globalThis.crossOriginIsolated === true,
    local, remote, p50: [percentile(local, 50), percentile(remote, 50)],
  };
}
