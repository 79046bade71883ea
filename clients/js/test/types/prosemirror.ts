// Compiled (not run) by `npm test`: the ProseMirror binding's declarations (prosemirror.d.ts).
import { EditorState } from 'prosemirror-state';
import { EditorView } from 'prosemirror-view';
import { schema } from 'prosemirror-schema-basic';
import { bindProseMirror, docFromMarkup, folioCursors, markupOf } from '@folio/client/prosemirror';
import type { FolioRecord } from '@folio/client';

export function prosemirrorUsage(record: FolioRecord, parent: HTMLElement): string {
  const view = new EditorView(parent, { state: EditorState.create({ schema, plugins: [folioCursors(record, { user: { name: 'Ann', color: '#c00' } })] }) });
  const binding = bindProseMirror(record, view, { onForeign: (what: string) => console.warn(what) });
  const { doc, map } = docFromMarkup(schema, '<paragraph>x</paragraph>');
  void map?.count;
  binding.destroy();
  // @ts-expect-error the view comes second
  bindProseMirror(view, record);
  return markupOf(doc);
}
