// A Tiptap editor (its StarterKit: paragraphs, headings, lists, bold, italic, links, code, undo) on a
// Folio xml record, with the others' carets. In a page with an import map (or a bundler) resolving
// @tiptap/core, @tiptap/starter-kit and prosemirror-*; the browser suite (tests/e2e/browser) runs the
// same binding under Tiptap.
//
//   <div id="editor"></div>
//   <script type="module">import { openTiptap } from './tiptap.js'; openTiptap(document.getElementById('editor'), { ... });</script>
import { Editor, Extension } from '@tiptap/core';
import StarterKit from '@tiptap/starter-kit';
import { connect } from '@folio/client';
import { bindProseMirror, folioCursors } from '@folio/client/prosemirror';

/**
 * Connects to xml record `ids` with a client token (minted by the application's backend) and shows it
 * in a Tiptap editor in `element`. `user`: { name, color } for the others' view of this caret.
 * Resolves with { editor, record, close() }.
 */
export async function openTiptap(element, { baseUrl, token, organizationId, documentId, editorId, user }) {
  const record = await connect({ baseUrl, token, organizationId, documentId, editorId });
  // The remote cursors plugin goes in as a Tiptap extension; the binding needs the editor's view.
  const Cursors = Extension.create({ name: 'folioCursors', addProseMirrorPlugins: () => [folioCursors(record, { user })] });
  const editor = new Editor({ element, extensions: [StarterKit, Cursors] });
  const binding = bindProseMirror(record, editor.view);
  return {
    editor,
    record,
    async close() {
      binding.destroy();
      editor.destroy();
      await record.close();
    },
  };
}
