// tests/support/xml_documents.hpp — a large, realistic XML document for tests and benchmarks:
// paragraphs with ids, a class, words, an entity and an inline element.
#pragma once

#include <cstddef>
#include <random>
#include <string>

namespace folio::testing {

/// A <doc> of paragraphs at least `min_bytes` long, the same for the same seed.
inline std::string xml_document(std::size_t min_bytes, unsigned seed = 3) {
  std::string doc = "<doc>";
  std::mt19937 rng(seed);
  for (int i = 0; doc.size() < min_bytes; ++i) {
    doc += "<p id=\"p" + std::to_string(i) + "\" class=\"body\">";
    for (int w = 0; w < 12; ++w) doc += "word" + std::to_string(rng() % 1000) + " ";
    doc += "<em>emphasis &amp; more</em></p>";
  }
  return doc + "</doc>";
}

}  // namespace folio::testing
