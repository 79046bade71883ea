// Map values and array items as the service keeps them: canonical JSON (service/wire/json.hpp,
// canonical_json), so that a value written here has the bytes the service gives the same value, and
// the engine's diffs, which compare values by bytes, see equal values as equal.
//
// The service's form: no whitespace; object keys sorted by their UTF-8 bytes (code point order, which
// is not JavaScript's UTF-16 order); strings with ", \ and the control characters escaped (\b \t \n \f
// \r, else \u00XX in upper case); an integer written as the integer text JavaScript sends (the service
// keeps integers that fit 64 bits as written); any other number as C++'s std::to_chars writes a
// double: its shortest round-trip digits, fixed or exponent notation, whichever is shorter (fixed on a
// tie), with an exponent of at least two digits ("1e-07", "1.5e+300").

const MAX_DEPTH = 64; // the service refuses deeper nesting

export function canonicalJson(value) {
  let out = '';
  const write = (v, depth) => {
    if (v !== null && typeof v === 'object' && typeof v.toJSON === 'function') v = v.toJSON();
    switch (typeof v) {
      case 'string':
        out += quote(v);
        return;
      case 'number':
        out += number(v);
        return;
      case 'boolean':
        out += v ? 'true' : 'false';
        return;
      case 'object':
        break;
      default:
        throw new TypeError(`${typeof v} is not a JSON value`);
    }
    if (v === null) {
      out += 'null';
      return;
    }
    if (depth >= MAX_DEPTH) throw new TypeError(`JSON nesting is deeper than ${MAX_DEPTH} levels`);
    if (Array.isArray(v)) {
      out += '[';
      for (let i = 0; i < v.length; ++i) {
        if (i) out += ',';
        const item = v[i];
        if (item === undefined || typeof item === 'function' || typeof item === 'symbol') out += 'null';
        else write(item, depth + 1);
      }
      out += ']';
      return;
    }
    const keys = Object.keys(v).filter((k) => v[k] !== undefined && typeof v[k] !== 'function' && typeof v[k] !== 'symbol');
    keys.sort(compareCodePoints);
    out += '{';
    keys.forEach((k, i) => {
      if (i) out += ',';
      out += quote(k);
      out += ':';
      write(v[k], depth + 1);
    });
    out += '}';
  };
  write(value, 0);
  return out;
}

export function parseJson(text) {
  return JSON.parse(text);
}

/** Orders strings by code point (= by UTF-8 bytes), not by UTF-16 code unit. */
export function compareCodePoints(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; ++i) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    // Surrogates (D800-DFFF) stand for code points above FFFF: move them above E000-FFFF.
    if (x >= 0xd800) x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
    if (y >= 0xd800) y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
    return x - y;
  }
  return a.length - b.length;
}

const SHORT = { 8: '\\b', 9: '\\t', 10: '\\n', 12: '\\f', 13: '\\r', 34: '\\"', 92: '\\\\' };
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function quote(s) {
  if (LONE_SURROGATE.test(s)) throw new TypeError('a string in a JSON value holds a lone surrogate (not valid Unicode)');
  let out = '"';
  let start = 0;
  for (let i = 0; i < s.length; ++i) {
    const c = s.charCodeAt(i);
    if (c >= 0x20 && c !== 34 && c !== 92) continue;
    out += s.slice(start, i) + (SHORT[c] ?? '\\u00' + c.toString(16).toUpperCase().padStart(2, '0'));
    start = i + 1;
  }
  return out + s.slice(start) + '"';
}

const INT64_MIN = -(2n ** 63n);
const UINT64_MAX = 2n ** 64n - 1n;

function number(x) {
  if (!Number.isFinite(x)) throw new TypeError(`${x} is not a JSON number`);
  const text = String(x);
  // JavaScript writes integers below 1e21 without an exponent; the service reads such text as an
  // integer when it fits 64 bits and keeps it as written.
  if (/^-?\d+$/.test(text)) {
    const n = BigInt(text);
    if (n >= INT64_MIN && n <= UINT64_MAX) return text;
  }
  // A double: std::to_chars's shortest form. toExponential() gives the shortest round-trip digits.
  const [mantissa, exp] = Math.abs(x).toExponential().split('e');
  const digits = mantissa.replace('.', '');
  const e = Number(exp);
  const sign = x < 0 ? '-' : '';
  const sci = digits[0] + (digits.length > 1 ? '.' + digits.slice(1) : '') + 'e' + (e < 0 ? '-' : '+') + String(Math.abs(e)).padStart(2, '0');
  let fixed;
  if (e >= digits.length - 1) fixed = digits + '0'.repeat(e - (digits.length - 1));
  else if (e >= 0) fixed = digits.slice(0, e + 1) + '.' + digits.slice(e + 1);
  else fixed = '0.' + '0'.repeat(-e - 1) + digits;
  return sign + (fixed.length <= sci.length ? fixed : sci);
}
