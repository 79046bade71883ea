// Base64 (the standard alphabet, padded) for the sync and subscribe messages (docs/API.md).

export function toBase64(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

/** The bytes of standard or URL-safe base64, padded or not; a TypeError if `text` is not base64. */
export function fromBase64(text, what) {
  if (typeof text !== 'string') throw new TypeError(`${what} is not a base64 string`);
  let s = text.replace(/-/g, '+').replace(/_/g, '/');
  while (s.length % 4) s += '=';
  let bin;
  try {
    bin = atob(s);
  } catch {
    throw new TypeError(`${what} is not valid base64`);
  }
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; ++i) out[i] = bin.charCodeAt(i);
  return out;
}
