// bench/instruction_counts — one editing-trace workload of bench/trace_bench per run, its measured part
// alone in a function of its own (measured_<mode>), for bench/instructions.sh to count the instructions
// of under callgrind (--toggle-collect). Instruction counts do not move with other work on the cores,
// so they steer changes that wall-clock time on a shared machine cannot resolve (a few percent). They
// are not time (a load that misses the cache counts as one instruction like any other): trace_bench's
// time ratios stay the figures the issues' targets are judged by.
//
//   instruction_counts MODE [TRACE]      (TRACE: a file of bench/traces, default automerge-paper.json.gz)
//   gap          every patch replayed into the gap buffer (the baseline)
//   local        every patch replayed as a local edit of folio::text
//   remote_keys  every patch as its own encoded batch, applied in turn with folio::document::apply
//   decode       the same batches decoded (folio::decode_batch): remote_keys' reading, alone
//   integrate    the same batches, decoded beforehand, integrated with folio::text::apply: its
//                integrating, alone (document::apply does both without an op_batch between them)
// Prints "<mode> <units>": the patches (gap, local) or batches (the rest) the measured part handled,
// after checking that it gives the trace's final text (decode: that every batch decodes).
#include <cstdio>
#include <cstring>
#include <folio/folio.hpp>
#include <string>
#include <vector>

#include "support/replay.hpp"
#include "support/trace.hpp"

using folio::testing::trace;

// Each is the whole measured part of its mode, kept out of line so that callgrind can count it alone.
[[gnu::noinline]] void measured_gap(const trace& t, folio::bench::gap_buffer& g) { folio::bench::replay(t, g); }
[[gnu::noinline]] void measured_local(const trace& t, folio::text& doc) { folio::bench::replay(t, doc); }
[[gnu::noinline]] bool measured_remote_keys(const std::vector<std::string>& batches, folio::document& doc) {
  for (const std::string& b : batches)
    if (const folio::apply_result r = doc.apply(b); !r || r.pending) return false;
  return true;
}
[[gnu::noinline]] bool measured_decode(const std::vector<std::string>& batches, folio::op_batch<char32_t>& into) {
  for (const std::string& b : batches)
    if (!folio::decode_batch(b, into)) return false;
  return true;
}
[[gnu::noinline]] bool measured_integrate(const std::vector<folio::op_batch<char32_t>>& decoded, folio::text& doc) {
  for (const auto& b : decoded)
    if (const folio::apply_result r = doc.apply(b); !r || r.pending) return false;
  return true;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: instruction_counts gap|local|remote_keys|decode|integrate [TRACE]\n");
    return 2;
  }
  const std::string mode = argv[1];
  const trace t = folio::testing::load_trace(argc > 2 ? argv[2] : "automerge-paper.json.gz");
  auto done = [&](bool ok, std::size_t units) {
    if (!ok) return std::fprintf(stderr, "%s: the replay went wrong\n", mode.c_str()), 1;
    std::printf("%s %zu\n", mode.c_str(), units);
    return 0;
  };
  if (mode == "gap") {
    folio::bench::gap_buffer g;
    measured_gap(t, g);
    return done(g.size() == t.end.size(), t.patch_count());
  }
  if (mode == "local") {
    folio::text doc(1);
    measured_local(t, doc);
    return done(doc.to_u32string() == t.end, t.patch_count());
  }
  const std::vector<std::string> batches = folio::bench::keystroke_batches(t);
  if (mode == "remote_keys") {
    folio::document doc(folio::record_type::text, 2);
    const bool ok = measured_remote_keys(batches, doc);
    return done(ok && doc.as_text().to_u32string() == t.end, batches.size());
  }
  if (mode == "decode") {
    folio::op_batch<char32_t> into;
    return done(measured_decode(batches, into), batches.size());
  }
  if (mode == "integrate") {
    std::vector<folio::op_batch<char32_t>> decoded(batches.size());
    for (std::size_t i = 0; i < batches.size(); ++i)
      if (!folio::decode_batch(batches[i], decoded[i])) return done(false, 0);
    folio::text doc(2);
    const bool ok = measured_integrate(decoded, doc);
    return done(ok && doc.to_u32string() == t.end, batches.size());
  }
  std::fprintf(stderr, "instruction_counts: unknown mode %s\n", mode.c_str());
  return 2;
}
