// folio/fwd.hpp — declarations of the engine's public types, for headers that name them (a pointer, a
// reference, a parameter) without needing their definitions. Each type is defined in the public header
// named beside it; include that header to use it. Declares nothing of detail/.
#pragma once

#include <cstdint>

namespace folio {

using replica_id = std::uint64_t;       // id.hpp
struct op_id;                           // id.hpp
struct item_key;                        // id.hpp
class version_vector;                   // version.hpp
enum class version_order;               // version.hpp
enum class record_type : std::uint8_t;  // record_type.hpp
enum class op_kind : std::uint8_t;      // ops.hpp
struct op;                              // ops.hpp
template <class T>
struct op_batch;           // ops.hpp
struct local_change;       // ops.hpp
enum class apply_status;   // ops.hpp
struct apply_result;       // ops.hpp
enum class error_code;     // error.hpp
class error;               // error.hpp
enum class decode_status;  // error.hpp
struct decode_result;      // error.hpp
template <class T>
class sequence;          // sequence.hpp
class text;              // text.hpp: sequence<char32_t>
class array;             // array.hpp: sequence<std::string>
struct apply_options;    // document.hpp
class document;          // document.hpp
struct sync_request;     // sync.hpp
enum class push_status;  // sync.hpp
class sync_client;       // sync.hpp

namespace markup {
struct attribute;         // markup.hpp
struct node;              // markup.hpp
class flat_fragment;      // markup.hpp
enum class parse_status;  // markup.hpp
struct parse_result;      // markup.hpp
}  // namespace markup

}  // namespace folio
