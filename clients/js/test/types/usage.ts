// Compiled (not run) by `npm test` with tsc --strict: the declarations (index.d.ts, codemirror.d.ts)
// accept the documented uses and refuse wrong ones (@ts-expect-error lines).
import { EditorState } from '@codemirror/state';
import { EditorView } from '@codemirror/view';
import { folioCursors, folioRemote, folioSync } from '@folio/client/codemirror';
import { WebSocketEventSource, bindTextarea, presenceList, presenceName, canonicalJson, connect, FetchEventSource, FolioError, FolioRecord, indexedDbPersistence, loadEngine, Replica } from '@folio/client';
import type { ChangeEvent, JsonObject, PresenceEntry, PresenceEvent, RecordMetadata, TextChange, VersionInfo, VersionValue } from '@folio/client';

export async function usage(textarea: HTMLTextAreaElement, parent: HTMLElement): Promise<void> {
  const record: FolioRecord = await connect({
    baseUrl: 'https://folio.example.com',
    token: async () => 'token',
    organizationId: 'o',
    documentId: 'd',
    editorId: 'e',
    persist: (bytes: Uint8Array) => localStorage.setItem('k', String(bytes.length)),
  });
  const value: string | JsonObject[] | JsonObject = record.value;
  if (record.type === 'text') record.insert(0, 'x').delete(0, 1).replace('new');
  if (record.type === 'array') record.insert(0, { a: 1 }, { b: [true, null] });
  if (record.type === 'map') record.set('k', { deep: [1, 'x'] }).delete('k');
  record.on('change', (e: ChangeEvent) => {
    const c: TextChange[] | undefined = e.changes;
    void [e.remote, c?.[0]?.from, value];
  });
  record.on('error', (e: Error) => {
    if (e instanceof FolioError) void [e.status, e.httpStatus, e.message];
  });
  record.on('status', ({ online }) => void online);
  record.on('metadata', (m: RecordMetadata) => void [m.revision, m.lastUpdatedBy, m.sessionId, m.lastUpdate]);
  record.on('deleted', (m) => void m.incarnation);
  const metadata: RecordMetadata | null = record.metadata;
  void metadata?.lastUpdatedBy;
  const base: string = record.recordVersion;
  const { versions, nextPageToken } = await record.listVersions({ pageSize: 10 });
  const first: VersionInfo | undefined = versions[0];
  if (first) {
    const then: VersionValue | null = await record.getVersion(first.versionId);
    void [then?.data, then?.version, first.kind, first.authors, first.pinned, nextPageToken, base];
    const { version, backupVersionId } = await record.restoreVersion(first.versionId);
    void [version, backupVersionId];
  }
  const named: VersionInfo = await record.addVersion('Before the review');
  await record.addVersion();
  void named.versionId;
  // @ts-expect-error recordVersion is read-only
  record.recordVersion = 'x';
  // @ts-expect-error a version's id is a string
  await record.getVersion(7);
  const saved: Uint8Array = record.save();
  const store = await indexedDbPersistence('acme/doc-1/body');
  const stored: Uint8Array[] | undefined = store.saved;
  await connect({ baseUrl: '', organizationId: 'o', documentId: 'd', editorId: 'e', token: 't', ...store });
  await connect({ baseUrl: '', organizationId: 'o', documentId: 'd', editorId: 'e', saved: stored });
  await store.persist(saved);
  await store.clear();
  store.close();
  Replica.resume(await loadEngine(), saved).free();
  await connect({ baseUrl: '', organizationId: 'o', documentId: 'd', editorId: 'e', presenceClientId: 'tab-1', presenceThrottleMs: 0, EventSource: WebSocketEventSource });
  await connect({ baseUrl: '', organizationId: 'o', documentId: 'd', editorId: 'e', saved, headers: { 'x-folio-api-key': 'k' }, EventSource: FetchEventSource });
  record.presence.set({ name: 'Ana', color: '#c33' }, { anchor: record.anchorAt(0), head: record.anchorAt(record.length) });
  record.presence.set({ name: 'Ana' });
  record.presence.select(null);
  const at: number = record.indexOf(record.anchorAt(0));
  const others: PresenceEntry[] = record.presence.others;
  record.on('presence', (e: PresenceEvent) => void [e.type, e.clientId, e.state.name, e.selection?.head, at, others[0]?.userId]);
  presenceList(record, parent).destroy();
  void presenceName(others[0]!);
  record.presence.leave();
  // @ts-expect-error presence state is a JSON object
  record.presence.set('Ana');
  // @ts-expect-error presence is read-only
  record.presence = null;
  const { destroy } = bindTextarea(record, textarea);
  destroy();
  new EditorView({ parent, state: EditorState.create({ doc: String(record.value), extensions: [folioSync(record), folioCursors(record)] }) });
  void folioRemote;
  const engine = await loadEngine();
  const r = Replica.create(engine, 'text');
  const applied: number = r.apply(r.encodeSince(r.version())).applied;
  const push = r.onPush(new Uint8Array(), new Uint8Array([0]), '1');
  if (push.status === 'gap') void applied;
  const index: number = r.indexOf(r.anchorAt(0));
  const x = Replica.create(engine, 'xml');
  const where: { path: number[]; offset: number } | null = x.xmlResolve(x.xmlAnchorAt([], 0));
  const xmlChanged: string[] | undefined = x.apply(new Uint8Array()).xmlChanged;
  const ids: string[] = x.xmlChildIds([]);
  const ops: number = x.xmlReplace([0], 0, 1, '<b>x</b>');
  const markup: string = x.xmlMarkup([0]);
  const path: number[] | null = x.xmlPathOf(ids[0]);
  void index, void where, void xmlChanged, void ops, void markup, void path;
  x.free();
  r.free();
  const json: string = canonicalJson({ a: [1, 'b', null] });
  void json;
  await record.sync();
  record.close();

  // @ts-expect-error organizationId is required
  await connect({ baseUrl: '', documentId: 'd', editorId: 'e' });
  // @ts-expect-error a record type is one of four
  Replica.create(engine, 'list');
  // @ts-expect-error not a JSON value
  record.set('k', () => 1);
  // @ts-expect-error no such event
  record.on('changed', () => {});
}
