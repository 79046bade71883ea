// canonicalJson writes values with the bytes the service's canonical_json gives them (service/wire/json.cpp):
// keys in UTF-8 byte order, RapidJSON's string escapes, integers as sent, other numbers as
// std::to_chars writes a double (docs/API.md, "Numbers").
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { canonicalJson } from '../folio.js';

test('objects: no whitespace, keys in code point (UTF-8 byte) order, nested', () => {
  assert.equal(canonicalJson({ b: 1, a: { d: [true, null], c: 'x' } }), '{"a":{"c":"x","d":[true,null]},"b":1}');
  // U+FF5E (one UTF-16 unit, EF BD 9E in UTF-8) sorts before U+1F600 (F0 9F 98 80), though its UTF-16
  // unit is above the emoji's surrogates.
  assert.equal(canonicalJson({ '😀': 1, '～': 2, Z: 3 }), '{"Z":3,"～":2,"😀":1}');
  assert.equal(canonicalJson({ skip: undefined, f() {}, keep: 0 }), '{"keep":0}');
  assert.equal(canonicalJson([undefined, () => 1]), '[null,null]');
  assert.equal(canonicalJson({ when: new Date(Date.UTC(2025, 0, 20, 10, 30)) }), '{"when":"2025-01-20T10:30:00.000Z"}');
});

test('strings: RapidJSON escapes (short forms, else \\u00XX upper case); the rest as it is', () => {
  assert.equal(canonicalJson('a"b\\c\n\t\r\b\f'), '"a\\"b\\\\c\\n\\t\\r\\b\\f"');
  assert.equal(canonicalJson('\u0001\u001f\u007f/é😀'), '"\\u0001\\u001F\u007f/é😀"');
  assert.throws(() => canonicalJson('\ud800'), /lone surrogate/);
});

test('numbers: integers as JavaScript sends them, other doubles as std::to_chars', () => {
  const cases = [
    [0, '0'], [-0, '0'], [100, '100'], [1e6, '1000000'], [2 ** 53 + 2, '9007199254740994'],
    [2 ** 63, '9223372036854776000'], [-(2 ** 63), '-9223372036854776000'], [1e20, '1e+20'], [1e21, '1e+21'],
    [0.1, '0.1'], [1.5e-7, '1.5e-07'], [1e-7, '1e-07'], [0.001, '0.001'], [0.0001, '1e-04'], [0.00001, '1e-05'],
    [123456789.12345679, '123456789.12345679'], [2.2250738585072014e-308, '2.2250738585072014e-308'],
    [1e300, '1e+300'], [-1.5, '-1.5'], [1.7976931348623157e308, '1.7976931348623157e+308'],
  ];
  for (const [n, text] of cases) assert.equal(canonicalJson(n), text, String(n));
  assert.throws(() => canonicalJson(NaN), TypeError);
  assert.throws(() => canonicalJson(Infinity), TypeError);
  assert.throws(() => canonicalJson(1n), TypeError);
});

test('nesting deeper than the service takes is refused here', () => {
  let v = 1;
  for (let i = 0; i < 64; ++i) v = [v];
  assert.equal(canonicalJson(v).length, 129);
  assert.throws(() => canonicalJson([v]), /deeper than 64/);
});
