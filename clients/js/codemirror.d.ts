// Type declarations of the CodeMirror 6 binding (@folio/client/codemirror).
import type { Annotation, Extension, EditorState, StateEffectType, StateField, Transaction, TransactionSpec } from '@codemirror/state';
import type { DecorationSet, ViewUpdate, WidgetType } from '@codemirror/view';
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

/**
 * The extension showing the others' carets and selections (record.presence) as decorations in their
 * users' colours (state.color) with their names (state.name), and publishing this editor's selection
 * as anchors once the page announced itself (record.presence.set). Elements: .cm-folio-cursor (the
 * caret, data-client-id), .cm-folio-cursor-label (the name), .cm-folio-selection (a selection).
 */
export function folioCursors(record: FolioRecord): Extension;

/** The field holding the remote cursors' decorations (part of folioCursors). */
export const folioCursorField: StateField<DecorationSet>;
/** Replaces the remote cursors' decorations. */
export const setFolioCursors: StateEffectType<DecorationSet>;

/** The caret widget of another client. */
export class FolioCursorWidget extends WidgetType {
  constructor(clientId: string, name: string, color: string);
  readonly clientId: string;
  readonly name: string;
  readonly color: string;
  toDOM(): HTMLElement;
}

/** What folioCursors installs, usable with anything that has `state` (with folioCursorField) and `dispatch`. */
export class FolioCodeMirrorCursors {
  constructor(record: FolioRecord, view: { state: EditorState; dispatch(spec: TransactionSpec): void });
  update(update: Pick<ViewUpdate, 'docChanged' | 'selectionSet'>): void;
  /** Publishes the main selection now. */
  publish(): void;
  /** Resolves the others' anchors and dispatches their decorations now. */
  redraw(): void;
  destroy(): void;
}
