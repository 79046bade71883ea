// Positions in text: the engine counts code points, JavaScript strings (and the DOM, and CodeMirror)
// count UTF-16 code units; a code point above U+FFFF is two units (a surrogate pair).

/** Code points in s[0, end) (end in UTF-16 units; all of s by default). O(end). */
export function codePoints(s, end = s.length) {
  let n = end;
  for (let i = 0; i < end; ++i) {
    const c = s.charCodeAt(i);
    if (c >= 0xdc00 && c <= 0xdfff && i > 0) {
      const p = s.charCodeAt(i - 1);
      if (p >= 0xd800 && p <= 0xdbff) --n;
    }
  }
  return n;
}

/** The UTF-16 index of code point `cp` of s (s.length if past the end). O(index). */
export function utf16Index(s, cp) {
  let i = 0;
  for (let k = 0; k < cp && i < s.length; ++k) {
    const c = s.charCodeAt(i);
    i += c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00 ? 2 : 1;
  }
  return i;
}

/**
 * Where position `pos` goes through `changes` ([{ from, to, insert }], ascending and apart, positions
 * in code points of the text before). Text inserted exactly at `pos` goes after it when assoc < 0
 * (pos stays before the insert) and before it when assoc > 0; a position inside removed text goes to
 * where the removal was.
 */
export function mapPosition(pos, changes, assoc = -1) {
  let delta = 0;
  for (const c of changes) {
    if (c.from > pos) break;
    const inserted = codePoints(c.insert);
    if (c.from === pos && c.to === pos) return pos + delta + (assoc > 0 ? inserted : 0);
    if (c.to <= pos) {
      delta += inserted - (c.to - c.from);
      continue;
    }
    return c.from + delta + (assoc > 0 ? inserted : 0);
  }
  return pos + delta;
}

/**
 * The one change turning `before` into `after` (UTF-16 strings), as UTF-16 { from, to, insert }, or
 * null if they are equal. `caret`, the caret in `after` (-1: none), decides where in a run of equal
 * characters the change is: an edit ends at the caret, so the common prefix stops at caret minus what
 * was added. Never splits a surrogate pair.
 */
export function singleChange(before, after, caret = -1) {
  if (before === after) return null;
  const grown = Math.max(0, after.length - before.length);
  let start = 0;
  const limit = Math.min(before.length, after.length, caret >= 0 ? Math.max(0, caret - grown) : Infinity);
  while (start < limit && before.charCodeAt(start) === after.charCodeAt(start)) ++start;
  if (start > 0 && isHigh(before.charCodeAt(start - 1))) --start;
  let endB = before.length;
  let endA = after.length;
  while (endB > start && endA > start && before.charCodeAt(endB - 1) === after.charCodeAt(endA - 1)) --endB, --endA;
  if (endB < before.length && isLow(before.charCodeAt(endB)) && endB > start) ++endB, ++endA;
  return { from: start, to: endB, insert: after.slice(start, endA) };
}

function isHigh(c) {
  return c >= 0xd800 && c <= 0xdbff;
}
function isLow(c) {
  return c >= 0xdc00 && c <= 0xdfff;
}
