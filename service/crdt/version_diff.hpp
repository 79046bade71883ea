// service/crdt/version_diff.hpp — what changed in a text or array record between two of its versions,
// with who changed it (versions/diff), and who wrote each run of a text record's value now (crdt/get
// with "attribution": true). docs/API.md, "Versions and history".
//
// Map records: each key's values at the two versions (the checkouts'), and as its userIds the authors
// of the sets and removals of that key one version holds and the other does not (document::
// for_each_map_change). Cost: two checkouts and one pass over the log, linear in the record's size.
//
// XML records: the two checkouts' elements paired by the id of the op that inserted each (document::
// for_each_xml_element): an element in one only was added or removed (an added one's author: its
// insert's), one in both compares its attributes. Its text content (every text node's characters in
// document order) is compared as two strings: a scratch text holding the `from` text replaced by the
// `to` text (folio::replace_text's diff, bounded work) and walked as a sequence diff, without authors.
// Cost: two checkouts plus the text diff, linear in the record's size.
//
// Model: every item a sequence ever held stays in its document with its insert id and the ids of the
// removes that targeted it (folio::sequence::for_each_item_with_removes). An item is in version v when v
// holds its insert and none of its removes; so a diff is one walk in document order: in both versions
// equal, only in `to` inserted, only in `from` deleted. An operation's author is the change row that
// made it (change_authors); an operation whose row was pruned has none. Runs: consecutive items with the
// same op and the same userIds. Cost: O(items + remove units) expected, plus O(log rows) per author
// lookup that leaves the previous item's change.
#pragma once

#include <folio/document.hpp>

#include "crdt/history.hpp"
#include "wire/json.hpp"

namespace folio::service {

/// The diff of a text or array record `d` from version `from` to version `to` (both held by d), as the
/// JSON array of runs docs/API.md describes.
void write_sequence_diff(json_writer& w, const folio::document& d, const folio::version_vector& from, const folio::version_vector& to,
                         const change_authors& authors);
/// The diff of a map record `d` from version `from` to `to`: {added, removed, changed} by key, values
/// read from the two checkouts (`to_now`: `to` is d's own version, d is read as it is), each key's
/// userIds the authors of the ops on it that one version holds and the other does not.
void write_map_diff(json_writer& w, const folio::document& d, const folio::version_vector& from, const folio::version_vector& to, bool to_now,
                    const change_authors& authors);
/// The diff of an xml record `d` from version `from` to `to` (to_now as for maps): {text, elements,
/// attributes}: the text content's runs, the elements added and removed, the attributes of elements in
/// both states added, removed or changed.
void write_xml_diff(json_writer& w, const folio::document& d, const folio::version_vector& from, const folio::version_vector& to, bool to_now,
                    const change_authors& authors);
/// The live text of `d` (a text record) as runs of the characters one change inserted:
/// [{text, userId, lastUpdate}], null userId and lastUpdate where that change's row was pruned.
void write_text_attribution(json_writer& w, const folio::document& d, const change_authors& authors);

}  // namespace folio::service
