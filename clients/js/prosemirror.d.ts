// Type declarations of the ProseMirror binding (@folio/client/prosemirror). docs/CLIENT-JS.md has the mapping.
import type { Node as PMNode, Schema } from 'prosemirror-model';
import type { Plugin, PluginKey } from 'prosemirror-state';
import type { EditorView } from 'prosemirror-view';
import type { FolioRecord } from './index.js';

export interface ProseMirrorBindingOptions {
  /** Called once per kind of markup the schema cannot show (default: console.warn). */
  onForeign?: (what: string) => void;
}

/** What bindProseMirror keeps for a view (opaque: for anchorOf and positionOf). */
export interface ProseMirrorBinding {
  readonly record: FolioRecord;
  readonly view: EditorView;
}

/** Keeps a view and an xml record in step; the view shows the record at once. */
export function bindProseMirror(record: FolioRecord, view: EditorView, options?: ProseMirrorBindingOptions): { destroy(): void; binding: ProseMirrorBinding };

/** The engine anchor ("r.s" or "end:r.s") of position `pos` of the bound document `doc`; null where none can be. */
export function anchorOf(binding: ProseMirrorBinding, doc: PMNode, pos: number): string | null;

/** The position of an engine anchor in the bound document `doc`; null when it is not shown. */
export function positionOf(binding: ProseMirrorBinding, doc: PMNode, anchor: string): number | null;

/** A node of markup as parseMarkup gives it: text, or an element with its attributes (name, value) in order. */
export type ParsedMarkup = string | { name: string; attrs: [string, string][]; children: ParsedMarkup[] };

/** Parses markup as the engine writes it (a fragment). */
export function parseMarkup(markup: string): ParsedMarkup[];

/** The markup of one node (its element), and of a node's content. */
export function nodeMarkup(node: PMNode): string;
export function contentMarkup(node: PMNode): string;

/** Marks (as transaction meta) the transactions that bring the record's changes into the editor. */
export const folioRemoteKey: PluginKey;

/** The state key of the remote cursors plugin. */
export const folioCursorsKey: PluginKey;

export interface FolioCursorsOptions {
  /** This client's presence state, e.g. { name, color }: what the others' editors label its caret with. */
  user?: { name?: string; color?: string; [key: string]: unknown };
  /** The DOM element of another client's caret (default: span.folio-cursor holding span.folio-cursor-label). */
  render?: (other: { clientId: string; userId: string; state: { name?: string; color?: string; [key: string]: unknown } | null }) => HTMLElement;
}

/** The others present on the record as carets and selections; announces this editor's selection. */
export function folioCursors(record: FolioRecord, options?: FolioCursorsOptions): Plugin;

/** The markup of a document (the record's value once in step: the engine's canonical form). */
export function markupOf(doc: PMNode): string;

/**
 * The document of markup. `map` tells which XML child each top-level node is when some are foreign
 * (null when one to one). Foreign markup goes to `foreign` and is not shown.
 */
export function docFromMarkup(schema: Schema, markup: string, foreign?: (what: string) => void, maps?: WeakMap<PMNode, unknown>): { doc: PMNode; map: { xml: (number | null)[]; count: number } | null };
