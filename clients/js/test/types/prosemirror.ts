// Compiled (not run) by `npm test`: the ProseMirror binding's declarations (prosemirror.d.ts).
import { EditorState } from 'prosemirror-state';
import { EditorView } from 'prosemirror-view';
import { schema } from 'prosemirror-schema-basic';
import { anchorOf, bindProseMirror, docFromMarkup, folioCursors, markupOf, parseMarkup, positionOf } from '@folio/client/prosemirror';
import type { FolioRecord } from '@folio/client';

export function prosemirrorUsage(record: FolioRecord, parent: HTMLElement): string {
  const view = new EditorView(parent, { state: EditorState.create({ schema, plugins: [folioCursors(record, { user: { name: 'Ann', color: '#c00' } })] }) });
  const binding = bindProseMirror(record, view, { onForeign: (what: string) => console.warn(what) });
  const { doc, map } = docFromMarkup(schema, '<paragraph>x</paragraph>');
  void map?.count;
  const anchor: string | null = anchorOf(binding.binding, view.state.doc, 1);
  if (anchor) void (positionOf(binding.binding, view.state.doc, anchor) ?? 0);
  for (const n of parseMarkup('<a x="1">t</a>')) if (typeof n !== 'string') void n.attrs[0]?.[1];
  binding.destroy();
  // @ts-expect-error the view comes second
  bindProseMirror(view, record);
  return markupOf(doc);
}
