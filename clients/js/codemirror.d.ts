// Type declarations of the CodeMirror 6 binding (@folio/client/codemirror).
import type { Annotation, Extension, EditorState, Transaction, TransactionSpec } from '@codemirror/state';
import type { ViewUpdate } from '@codemirror/view';
import type { FolioRecord, TextChange } from './index.js';

/** Marks the transactions that bring the record's changes into the editor. */
export const folioRemote: Annotation<boolean>;

/** The extension keeping an editor and a text record in step (start the editor with doc: record.value). */
export function folioSync(record: FolioRecord): Extension;

/** What folioSync installs, usable with anything that has `state` and `dispatch` (an EditorView). */
export class FolioCodeMirrorSync {
  constructor(record: FolioRecord, view: { state: EditorState; dispatch(spec: TransactionSpec): void });
  update(update: Pick<ViewUpdate, 'docChanged'> & { transactions: readonly Transaction[] }): void;
  fromRecord(changes: TextChange[] | null): void;
  destroy(): void;
}
