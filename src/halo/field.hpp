// halo/field.hpp — checks of one field's description, shared by the plan and the verification.
#pragma once

#include <ferry/halo.hpp>

#include <string>

namespace ferry::halo::detail {

// "field 2" or "field 'rho'", for messages.
std::string field_name(const Field& f, int index);
// Why the field cannot hold a subdomain of `extent` interior points with its halo, or "" if it can.
std::string check_field(const Field& f, int index, const Index3& extent);
// Bytes from the data pointer to one past the last byte of the last allocated point.
i64 span_bytes(const Field& f);

}  // namespace ferry::halo::detail
