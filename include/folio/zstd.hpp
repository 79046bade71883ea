// folio/zstd.hpp — optional zstd compression of Folio encodings (documents and batches).
//
// Not part of folio::crdt, which needs nothing but the standard library: link the `folio::zstd`
// target (it brings libzstd) and include this header to use it. A compressed encoding is a plain zstd
// frame around the bytes of encoding.hpp, so any zstd tool can inspect it.
//
// Decompression takes untrusted bytes: the output is capped (`max_size`), so a small frame cannot
// expand into gigabytes; failures return a decode_result like every other Folio decoder.
// Thread-safety: free functions; each call uses its own zstd context.
#pragma once

#include <zstd.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "error.hpp"

namespace folio::zstd {

/// Compresses `bytes` into one zstd frame that records its content size. Level 3 is zstd's default;
/// higher levels trade much more time for a little less size.
inline std::string compress(std::string_view bytes, int level = 3) {
  std::string out(ZSTD_compressBound(bytes.size()), '\0');
  const std::size_t n = ZSTD_compress(out.data(), out.size(), bytes.data(), bytes.size(), level);
  if (ZSTD_isError(n)) detail::fail(error_code::zstd, ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

/// Decompresses one zstd frame into `out`, refusing output larger than `max_size` bytes.
inline decode_result decompress(std::string_view frame, std::string& out, std::size_t max_size = std::size_t(64) << 20) {
  out.clear();
  const unsigned long long size = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (size == ZSTD_CONTENTSIZE_ERROR) return {decode_status::bad_magic, 0, "not a zstd frame"};
  if (size != ZSTD_CONTENTSIZE_UNKNOWN && size > max_size) return {decode_status::too_large, 0, "zstd content size over the limit"};
  ZSTD_DCtx* ctx = ZSTD_createDCtx();
  if (!ctx) detail::fail(error_code::zstd, "out of memory");
  ZSTD_inBuffer in{frame.data(), frame.size(), 0};
  std::string buf(ZSTD_DStreamOutSize(), '\0');
  decode_result result{};
  for (;;) {
    ZSTD_outBuffer o{buf.data(), buf.size(), 0};
    const std::size_t rc = ZSTD_decompressStream(ctx, &o, &in);
    if (ZSTD_isError(rc)) {
      result = {decode_status::inconsistent, in.pos, "corrupt zstd frame"};
      break;
    }
    if (out.size() + o.pos > max_size) {
      result = {decode_status::too_large, in.pos, "zstd content over the limit"};
      break;
    }
    out.append(buf.data(), o.pos);
    if (rc == 0) {  // frame complete
      if (in.pos != in.size) result = {decode_status::trailing_bytes, in.pos, "after zstd frame"};
      break;
    }
    if (in.pos == in.size && o.pos < o.size) {
      result = {decode_status::truncated, in.pos, "zstd frame"};
      break;
    }
  }
  ZSTD_freeDCtx(ctx);
  if (!result) out.clear();
  return result;
}

}  // namespace folio::zstd
