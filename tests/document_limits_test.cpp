// What a record holds and how far its clock may climb: the Lamport headroom rule (a batch's Lamport
// values stay within the units it changed plus lamport_slack), the clock's limit, and max_units.
#include <gtest/gtest.h>

#include <folio/document.hpp>
#include <algorithm>
#include <functional>
#include <random>
#include <string>

#include "support/documents.hpp"

namespace {

using folio::document;
using folio::record_type;
using folio::testing::round_trip;

// ---- Lamport headroom --------------------------------------------------------------------------------

/// A local edit of each record type; `k` picks one of several values.
void edit(document& d, int k) {
  const std::string n = std::to_string(k);
  switch (d.type()) {
    case record_type::text:
      d.replace_text("text " + n + " with words " + n);
      break;
    case record_type::array:
      d.replace_array({"1", "\"" + n + "\"", "[" + n + "]"});
      break;
    case record_type::map:
      d.set("a", n), d.set("k" + n, "true");
      break;
    case record_type::xml:
      ASSERT_TRUE(d.replace_xml("<p a=\"" + n + "\">text " + n + "</p><q" + n + "/>").first);
      break;
  }
}

std::string value_of(const document& d) {
  switch (d.type()) {
    case record_type::text:
      return d.text();
    case record_type::array: {
      std::string s;
      for (const std::string& v : d.array()) s += v + ",";
      return s;
    }
    case record_type::map: {
      std::string s;
      for (const auto& [k, v] : d.map()) s += k + "=" + v + ",";
      return s;
    }
    case record_type::xml:
      break;
  }
  return d.xml();
}

/// The unit count of `batch` and the Lamport value of its last unit with the highest one.
std::pair<std::uint64_t, std::uint64_t> units_and_top(record_type t, const std::string& batch) {
  std::uint64_t units = 0, top = 0;
  auto add = [&](const auto& o) { units += o.len, top = std::max<std::uint64_t>(top, std::uint64_t(o.lamport) + o.len - 1); };
  if (t == record_type::text) {
    folio::op_batch<char32_t> b;
    EXPECT_TRUE(folio::decode_batch(batch, b));
    for (const auto& o : b.ops) add(o);
  } else if (t == record_type::array) {
    folio::op_batch<std::string> b;
    EXPECT_TRUE(folio::decode_batch(batch, b));
    for (const auto& o : b.ops) add(o);
  } else {
    folio::detail::byte_reader r(batch);
    std::vector<folio::detail::tree_op> ops;
    record_type vt{};
    EXPECT_TRUE(folio::detail::read_header_any(r, folio::detail::kind_batch, vt));
    EXPECT_TRUE(folio::detail::read_tree_ops(r, t == record_type::map ? folio::detail::tree_shape::map : folio::detail::tree_shape::xml, ops));
    for (const auto& o : ops) add(o);
  }
  return {units, top};
}

/// What `batch` adds to a record's units() when each of its ops takes a log entry of its own: its
/// units, but one for each remove.
std::uint64_t held_of(record_type t, const std::string& batch) {
  std::uint64_t held = 0;
  auto add = [&](const auto& o, bool remove) { held += remove ? 1 : o.len; };
  if (t == record_type::text || t == record_type::array) {
    auto each = [&](auto b) {
      EXPECT_TRUE(folio::decode_batch(batch, b));
      for (const auto& o : b.ops) add(o, o.kind == folio::op_kind::remove);
    };
    t == record_type::text ? each(folio::op_batch<char32_t>{}) : each(folio::op_batch<std::string>{});
    return held;
  }
  folio::detail::byte_reader r(batch);
  std::vector<folio::detail::tree_op> ops;
  record_type vt{};
  EXPECT_TRUE(folio::detail::read_header_any(r, folio::detail::kind_batch, vt));
  EXPECT_TRUE(folio::detail::read_tree_ops(r, t == record_type::map ? folio::detail::tree_shape::map : folio::detail::tree_shape::xml, ops));
  for (const auto& o : ops) add(o, o.kind == folio::detail::tree_op_kind::remove);
  return held;
}

/// `batch` with every op's Lamport value raised by the same amount, so that its highest unit has `top`.
std::string raised_to(record_type t, const std::string& batch, std::uint64_t top) {
  const std::uint32_t by = static_cast<std::uint32_t>(top - units_and_top(t, batch).second);
  if (t == record_type::text || t == record_type::array) {
    auto raise = [&](auto b) {
      EXPECT_TRUE(folio::decode_batch(batch, b));
      for (auto& o : b.ops) o.lamport += by;
      return folio::encode_batch(b);
    };
    return t == record_type::text ? raise(folio::op_batch<char32_t>{}) : raise(folio::op_batch<std::string>{});
  }
  const auto shape = t == record_type::map ? folio::detail::tree_shape::map : folio::detail::tree_shape::xml;
  folio::detail::byte_reader r(batch);
  std::vector<folio::detail::tree_op> ops;
  record_type vt{};
  EXPECT_TRUE(folio::detail::read_header_any(r, folio::detail::kind_batch, vt) && folio::detail::read_tree_ops(r, shape, ops));
  for (auto& o : ops) o.lamport += by;
  std::string out;
  folio::detail::put_header(out, folio::detail::kind_batch, vt);
  folio::detail::put_tree_ops(out, shape, ops);
  return out;
}

const record_type all_types[] = {record_type::text, record_type::array, record_type::map, record_type::xml};

/// Two writers of one record of type `t`: `d` (replica 1) has made edits 1 and 2; `peer` (replica 2),
/// decoded from it, has made edit 3 on top; `batch` is what `peer` has that `d` lacks (edit 3's units).
struct diverged {
  document d;
  document peer;
  const std::string batch;
};

diverged two_writers(record_type t) {
  document d(t, 1);
  edit(d, 1);
  edit(d, 2);
  document peer = round_trip(d, 2);
  edit(peer, 3);
  std::string batch = peer.encode_since(d.version());
  return {std::move(d), std::move(peer), std::move(batch)};
}

// The bound is max(clock, changed units + lamport_slack) plus the units the batch changes; an honest
// batch (its author had seen all the record holds) stays within the changed units it leaves.
TEST(Document, TheLamportHeadroomRuleRefusesABatchAboveTheChangedUnitsPlusItsChanges) {
  const folio::apply_options bounded{.bounded_lamport = true};
  for (record_type t : all_types) {
    SCOPED_TRACE(std::string(folio::to_string(t)));
    auto [d, peer, batch] = two_writers(t);
    const auto [units, top] = units_and_top(t, batch);
    ASSERT_GT(units, 1u);
    // peer is d with the batch integrated: what the batch changes is what peer changed beyond d.
    const std::uint64_t changes = peer.changed() - d.changed();
    ASSERT_GT(changes, 0u);
    EXPECT_LE(top, peer.changed());  // an honest batch: no Lamport value past the changed units
    EXPECT_LE(peer.clock(), peer.changed());
    const std::uint64_t bound = std::max<std::uint64_t>(d.clock(), d.changed() + document::lamport_slack) + changes;

    document honest = round_trip(d, 1);
    EXPECT_TRUE(honest.apply(batch, bounded));
    EXPECT_EQ(value_of(honest), value_of(peer));
    document at_bound = round_trip(d, 1);
    EXPECT_TRUE(at_bound.apply(raised_to(t, batch, bound), bounded));
    EXPECT_EQ(at_bound.clock(), bound);

    // One above: refused whole, nothing integrated, the rule named.
    const std::string above = raised_to(t, batch, bound + 1);
    const std::string before = value_of(d);
    const folio::version_vector version = d.version();
    const folio::apply_result r = d.apply(above, bounded);
    EXPECT_FALSE(r);
    EXPECT_NE(r.message.find("the Lamport headroom rule"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("is above " + std::to_string(bound) + ": the larger of the record's clock (" + std::to_string(d.clock()) + ") and its " +
                             std::to_string(d.changed()) + " changed units plus 1024, plus the " + std::to_string(changes) +
                             " unit operations of the batch that change the record"),
              std::string::npos)
        << r.message;
    EXPECT_EQ(d.version(), version);
    EXPECT_EQ(value_of(d), before);
    EXPECT_EQ(d.pending(), 0u);
    // The value check and the rule together: the rule is checked too (map and array values pass).
    EXPECT_FALSE(d.apply(above, [](std::string_view) { return std::string(); }, bounded));
    // Off by default: a peer receiving batches out of order cannot know what it lacks.
    document open = round_trip(d, 1);
    EXPECT_TRUE(open.apply(above));
    EXPECT_EQ(open.clock(), bound + 1);
  }
}

TEST(Document, ARecordWhoseClockReachedTheLimitRefusesLocalEditsAndStaysUsable) {
  for (record_type t : all_types) {
    SCOPED_TRACE(std::string(folio::to_string(t)));
    document d(t, 1);
    edit(d, 1);
    document peer = round_trip(d, 2);
    edit(peer, 2);
    const std::string top = raised_to(t, peer.encode_since(d.version()), folio::max_counter);
    ASSERT_TRUE(d.apply(top));  // what an old build accepted
    ASSERT_EQ(d.clock(), folio::max_counter);
    d.check_invariants();
    const std::string value = value_of(d);
    EXPECT_EQ(value, value_of(peer));
    // Local edits of what holds the top Lamport value fail with [folio.overflow] and change nothing.
    try {
      edit(d, 3);
      EXPECT_EQ(t, record_type::xml) << "an edit past the limit was made";  // xml objects keep their own clocks
    } catch (const folio::error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("[folio.overflow]", 0), 0u) << e.what();
      EXPECT_EQ(value_of(d), value);
    }
    if (t == record_type::text) {
      EXPECT_THROW(d.as_text().insert(0, std::u32string(U"x")), folio::error);
    }
    if (t == record_type::map) {
      EXPECT_THROW(d.set("b", "1"), folio::error);
    }
    // Everything else goes on: encoding, decoding, answering peers, integrating their duplicates.
    d.check_invariants();
    const document back = round_trip(d, 3);
    EXPECT_EQ(value_of(back), value_of(d));
    document fresh(t, 4);
    EXPECT_TRUE(fresh.apply(d.encode_since({})));
    EXPECT_EQ(value_of(fresh), value_of(d));
    const folio::apply_result again = d.apply(top);
    EXPECT_TRUE(again);
    EXPECT_EQ(again.applied, 0u);
    // The rule cannot be broken any more: the decoder refuses Lamport values past the limit.
    EXPECT_TRUE(d.apply(top, folio::apply_options{.bounded_lamport = true}));
  }
}

// ---- what a record holds and how far its clock may climb ----------------------------------------------

/// A remove by replica `author` (its seq `seq`, Lamport value `lamport`) of `author`'s items first..first+n-1.
template <class T>
std::string remove_of(folio::replica_id author, std::uint32_t seq, std::uint32_t lamport, std::uint32_t first, std::uint32_t n) {
  folio::op o;
  o.kind = folio::op_kind::remove, o.id = {author, seq}, o.lamport = lamport, o.len = n, o.ref = {author, first};
  return folio::encode_batch(folio::op_batch<T>{{o}, {}});
}

// A write token could push, again and again, a remove over a long range it had removed already, its
// Lamport value one above the record's clock: each push raised the clock by the range's length and a
// few thousand pushes spent the record's 2^31 Lamport values. The clock may now pass the record's
// changed units by lamport_slack once, in all, not per push; such a remove holds one unit, however
// long its range, so repeating it neither climbs the clock nor fills the record.
template <class Seq>
void removes_of_removed_items_cannot_climb(record_type t, const std::function<void(Seq&, std::size_t)>& fill) {
  using T = typename Seq::value_type;
  constexpr std::uint32_t n = 5000;
  const folio::apply_options bounded{.bounded_lamport = true, .max_units = document::max_units(t)};
  document d(t, 1);
  document c(t, 7);  // the client, whose items these are
  Seq& cs = [&]() -> Seq& {
    if constexpr (std::is_same_v<Seq, folio::text>)
      return c.as_text();
    else
      return c.as_array();
  }();
  fill(cs, n);
  cs.erase(0, n / 2);  // the first half removed, the second live
  ASSERT_TRUE(d.apply(c.encode_since({}), bounded));
  std::uint32_t seq = c.version().get(7);
  ASSERT_EQ(d.changed(), n + n / 2);
  ASSERT_EQ(d.clock(), d.changed());  // one writer: every Lamport value is a changed unit

  // Over the whole range: n/2 of its units change the record; its top is clock + n.
  const std::uint32_t clock = d.clock();
  const std::uint64_t bound = d.changed() + document::lamport_slack + n / 2;
  folio::apply_result r = d.apply(remove_of<T>(7, seq, clock + 1, 0, n), bounded);
  EXPECT_FALSE(r);
  EXPECT_NE(r.message.find("the Lamport headroom rule"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("is above " + std::to_string(bound) + ":"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("plus the 2500 unit operations of the batch that change the record"), std::string::npos) << r.message;
  EXPECT_EQ(d.clock(), clock);
  // Up to the bound: taken; the clock is then the changed units plus the slack.
  r = d.apply(remove_of<T>(7, seq, static_cast<std::uint32_t>(bound - n + 1), 0, n), bounded);
  ASSERT_TRUE(r) << r.message;
  seq += n;
  EXPECT_EQ(d.clock(), bound);
  EXPECT_EQ(d.clock(), d.changed() + document::lamport_slack);
  // Now all removed: the climb of the issue, refused every time, by any amount: the slack is spent.
  for (std::uint32_t len : {n, document::lamport_slack, 1u}) {
    for (int i = 0; i < 20; ++i) {
      const std::uint32_t before = d.clock();
      EXPECT_FALSE(d.apply(remove_of<T>(7, seq, before + 1, 0, len), bounded));
      EXPECT_EQ(d.clock(), before);
    }
  }
  // A low Lamport value never raises the clock, whatever the range, and holds one unit: 2,000 such
  // removes (10,000,000 seqs of the client's, twice what a text may hold under the old count) are taken.
  const std::uint32_t before = d.clock();
  const std::uint64_t held = d.units();
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(d.apply(remove_of<T>(7, seq, 1, 0, n), bounded));
    seq += n;
  }
  EXPECT_EQ(d.clock(), before);
  EXPECT_EQ(d.units(), held + 2000);
  d.check_invariants();
  const document back = round_trip(d, 3);
  EXPECT_EQ(value_of(back), value_of(d));
  EXPECT_EQ(back.units(), d.units());
  EXPECT_EQ(back.changed(), d.changed());
  // The owner's edits go on.
  document w = round_trip(d, 9);
  edit(w, 4);
  ASSERT_TRUE(d.apply(w.encode_since(d.version()), bounded));
  EXPECT_EQ(value_of(d), value_of(w));
}

TEST(Document, RemovesOfRemovedItemsCannotClimbTheClock) {
  removes_of_removed_items_cannot_climb<folio::text>(record_type::text, [](folio::text& x, std::size_t n) { x.insert(0, std::u32string(n, U'a')); });
  removes_of_removed_items_cannot_climb<folio::array>(record_type::array,
                                                      [](folio::array& x, std::size_t n) { x.insert(0, std::vector<std::string>(n, "1")); });
}

// The same in an xml record: a remove over a run of an element's children removed already, its
// Lamport value one above the clock, is refused; up to the changed units plus the slack it is taken,
// once; below the clock it holds one unit.
TEST(Document, RemovesOfRemovedXmlChildrenCannotClimbTheClock) {
  const folio::apply_options bounded{.bounded_lamport = true};
  std::string many;
  for (int i = 0; i < 3000; ++i) many += "<a/>";
  document peer(record_type::xml, 2);
  ASSERT_TRUE(peer.replace_xml(many).first);
  document d(record_type::xml, 1);
  ASSERT_TRUE(d.apply(peer.encode_since({}), bounded));
  const std::string removal = peer.encode_change(peer.replace_xml("").second);
  ASSERT_TRUE(d.apply(removal, bounded));
  ASSERT_EQ(d.xml(), "");
  folio::detail::byte_reader r(removal);
  std::vector<folio::detail::tree_op> ops;
  record_type vt{};
  ASSERT_TRUE(folio::detail::read_header_any(r, folio::detail::kind_batch, vt) && folio::detail::read_tree_ops(r, folio::detail::tree_shape::xml, ops));
  const auto longest = std::max_element(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.len < b.len; });
  ASSERT_EQ(longest->kind, folio::detail::tree_op_kind::remove);
  ASSERT_EQ(longest->len, 3000u);
  auto again = [&](std::uint32_t lamport, std::uint32_t len) {
    folio::detail::tree_op o = *longest;
    o.id.seq = d.version().get(2), o.lamport = lamport, o.len = len;
    std::string out;
    folio::detail::put_header(out, folio::detail::kind_batch, record_type::xml);
    folio::detail::put_tree_ops(out, folio::detail::tree_shape::xml, std::vector<folio::detail::tree_op>{o});
    return out;
  };
  ASSERT_LE(d.clock(), d.changed());
  for (int i = 0; i < 20; ++i) {
    const std::uint32_t before = d.clock();
    const folio::apply_result a = d.apply(again(before + 1, 3000), bounded);
    EXPECT_FALSE(a);
    EXPECT_NE(a.message.find("plus the 0 unit operations of the batch that change the record"), std::string::npos) << a.message;
    EXPECT_EQ(d.clock(), before);
  }
  // Up to the changed units plus the slack: taken once; past it, never again.
  const std::uint32_t reach = static_cast<std::uint32_t>(d.changed() + document::lamport_slack);
  ASSERT_TRUE(d.apply(again(reach - 2999, 3000), bounded));
  EXPECT_EQ(d.clock(), reach);
  for (std::uint32_t len : {3000u, 1u}) {
    const folio::apply_result a = d.apply(again(d.clock() + 1, len), bounded);
    EXPECT_FALSE(a) << len;
  }
  // Below the clock: taken, one unit each however long.
  const std::uint64_t held = d.units();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(d.apply(again(1, 3000), bounded));
  EXPECT_EQ(d.units(), held + 100);
  EXPECT_EQ(d.clock(), reach);
  d.check_invariants();
  const document back = round_trip(d, 3);
  EXPECT_EQ(back.xml(), "");
  EXPECT_EQ(back.units(), d.units());
  EXPECT_EQ(back.changed(), d.changed());
}

// The rule's premise: a replica's op takes one more than the largest Lamport value it has seen, and
// what it has seen changed at least that many units. Three writers edit one record at once, removing
// the same ranges concurrently, each pushing what the server lacks (causally, as a sync push) and
// pulling what it lacks: every push keeps the rule, and the server's clock never passes its changed
// units, for every record type.
TEST(Document, HonestWritersAlwaysKeepTheLamportHeadroomRule) {
  const folio::apply_options bounded{.bounded_lamport = true};
  for (record_type t : all_types) {
    SCOPED_TRACE(std::string(folio::to_string(t)));
    std::mt19937_64 rng(20261204);
    document server(t, 1);
    std::vector<document> writers;
    for (folio::replica_id id : {11, 12, 13}) writers.emplace_back(t, id);
    // An edit of sequence x: a remove of up to `most` items, or an insert of values made by `make(n)`.
    auto edit_sequence = [&](auto& x, std::size_t most, auto&& make) {
      if (x.size() > 4 && rng() % 3 == 0) {
        const std::size_t at = rng() % (x.size() - 2);
        x.erase(at, std::min<std::size_t>(1 + rng() % most, x.size() - at));
      } else {
        x.insert(rng() % (x.size() + 1), make(1 + rng() % 5));
      }
    };
    auto change = [&](document& w) {
      const std::size_t k = rng() % 1000;
      switch (t) {
        case record_type::text:
          edit_sequence(w.as_text(), 40, [&](std::size_t n) { return std::u32string(6 * n, U'a' + char32_t(k % 26)); });
          break;
        case record_type::array:
          edit_sequence(w.as_array(), 10, [&](std::size_t n) { return std::vector<std::string>(n, std::to_string(k)); });
          break;
        case record_type::map:
          if (rng() % 4 == 0)
            w.remove("k" + std::to_string(k % 7));
          else
            w.set("k" + std::to_string(k % 7), std::to_string(k));
          break;
        case record_type::xml: {
          std::string x;
          for (std::size_t i = 0, n = 1 + rng() % 6; i < n; ++i) x += "<p n=\"" + std::to_string(rng() % 3) + "\">t" + std::to_string(rng() % 4) + "</p>";
          ASSERT_TRUE(w.replace_xml(x).first);
          break;
        }
      }
    };
    for (int step = 0; step < 600; ++step) {
      document& w = writers[rng() % writers.size()];
      switch (rng() % 3) {
        case 0:
          ASSERT_NO_FATAL_FAILURE(change(w));
          break;
        case 1: {
          const folio::apply_result r = server.apply(w.encode_since(server.version()), bounded);
          ASSERT_TRUE(r) << r.message;
          ASSERT_LE(server.clock(), server.changed());
          break;
        }
        case 2:
          ASSERT_TRUE(w.apply(server.encode_since(w.version())));
          break;
      }
    }
    for (document& w : writers) ASSERT_TRUE(server.apply(w.encode_since(server.version()), bounded));
    for (document& w : writers) ASSERT_TRUE(w.apply(server.encode_since(w.version())));
    for (const document& w : writers) EXPECT_EQ(value_of(w), value_of(server));
    EXPECT_LE(server.clock(), server.changed());
    server.check_invariants();
  }
}

// units() is what decode counts; a batch that would take a record past apply_options::max_units is
// refused whole (too_large) before anything is integrated; decode refuses a document past
// max_units(type) and reads it with a raised limit.
TEST(Document, MaxUnitsBoundsWhatARecordHoldsAndIsTheDecodersLimit) {
  EXPECT_EQ(document::max_units(record_type::text), folio::text::default_max_ops);
  EXPECT_EQ(document::max_units(record_type::array), folio::array::default_max_ops);
  EXPECT_EQ(document::max_units(record_type::map), document::default_max_tree_ops);
  EXPECT_EQ(document::max_units(record_type::xml), document::default_max_tree_ops);
  for (record_type t : all_types) {
    SCOPED_TRACE(std::string(folio::to_string(t)));
    auto [d, peer, batch] = two_writers(t);
    const std::uint64_t units = held_of(t, batch);
    EXPECT_EQ(round_trip(d, 3).units(), d.units());
    EXPECT_EQ(peer.units(), d.units() + units);
    const folio::version_vector version = d.version();
    folio::apply_result r = d.apply(batch, folio::apply_options{.max_units = static_cast<std::size_t>(d.units() + units - 1)});
    EXPECT_EQ(r.status, folio::apply_status::too_large);
    EXPECT_NE(r.message.find("past the"), std::string::npos) << r.message;
    EXPECT_EQ(d.version(), version);
    EXPECT_EQ(d.pending(), 0u);
    r = d.apply(batch, folio::apply_options{.bounded_lamport = true, .max_units = static_cast<std::size_t>(d.units() + units)});
    ASSERT_TRUE(r) << r.message;
    EXPECT_EQ(d.units(), peer.units());
    // Duplicates add nothing: the same batch again is within any limit the record is within.
    EXPECT_TRUE(d.apply(batch, folio::apply_options{.max_units = static_cast<std::size_t>(d.units())}));
  }
  // An array of 2^22 + 1 elements, all but one removed by one remove: 2^22 + 2 units, what the
  // decoder refuses.
  document big(record_type::array, 1);
  constexpr std::size_t over = (std::size_t(1) << 22) + 1;
  big.as_array().insert(0, std::vector<std::string>(over, "1"));
  big.as_array().erase(0, over - 1);
  EXPECT_EQ(big.units(), over + 1);
  ASSERT_GT(big.units(), document::max_units(record_type::array));
  const std::string bytes = big.encode();
  std::optional<document> back;
  EXPECT_EQ(document::decode(bytes, 2, back).status, folio::decode_status::too_large);
  EXPECT_FALSE(back);
  ASSERT_TRUE(document::decode(bytes, 2, back, std::size_t(1) << 23));
  EXPECT_EQ(back->array(), std::vector<std::string>{"1"});
  EXPECT_EQ(back->units(), big.units());
}

}  // namespace
