// Seeds the load benchmark's history records straight into a service database: "history" holds a
// whole editing trace (every patch one op, the record's full causal history), "fresh" the same final
// text added in one go. The final text goes to OUT_TEXT (UTF-8) for the benchmark's request bodies.
//   seed-history DB TENANT ORG DOC TRACE_FILE OUT_TEXT
#include <folio/document.hpp>
#include <fstream>
#include <iostream>

#include "platform/clock.hpp"
#include "responder.hpp"
#include "storage/database.hpp"
#include "support/trace.hpp"

int main(int argc, char** argv) {
  if (argc != 7) return std::cerr << "usage: seed-history DB TENANT ORG DOC TRACE_FILE OUT_TEXT\n", 2;
  namespace svc = folio::service;
  svc::database db(argv[1], svc::responder::tables());
  const folio::testing::trace t = folio::testing::load_trace(argv[5]);
  const std::uint64_t history_incarnation = svc::new_incarnation(), fresh_incarnation = svc::new_incarnation();
  folio::document history(folio::record_type::text, history_incarnation);
  folio::text& text = history.as_text();
  for (const auto& tx : t.txns)
    for (const auto& p : tx.patches) {
      if (p.del) text.erase(p.pos, p.del);
      if (!p.ins.empty()) text.insert(p.pos, p.ins);
    }
  const std::string final_text = history.text();
  folio::document fresh(folio::record_type::text, fresh_incarnation);
  fresh.replace_text(final_text);
  db.write([&] {
    for (auto [editor, doc] : {std::pair<const char*, folio::document*>{"history", &history}, {"fresh", &fresh}}) {
      svc::record_key k{argv[2], argv[3], argv[4], editor};
      svc::delete_record(db, k);
      svc::record_row row;
      row.editor = editor, row.type = "text", row.content_key = "content", row.snapshot = doc->encode(), row.revision = 1;
      row.last_update = svc::now_iso(), row.last_updated_by = "seed", row.incarnation = doc->replica();
      svc::insert_record(db, k, row);
    }
  });
  std::ofstream(argv[6], std::ios::binary) << final_text;
  std::cout << "history: " << t.patch_count() << " patches, " << history.encode().size() << " bytes encoded; final text "
            << final_text.size() << " bytes\n";
}
