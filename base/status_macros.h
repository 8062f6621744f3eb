#ifndef H3_BASE_STATUS_MACROS_H_
#define H3_BASE_STATUS_MACROS_H_

// Early-return helpers for absl::Status / absl::StatusOr, which the Debian
// abseil does not provide. Our code reports errors with these, never with
// exceptions.

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace h3 {

// `status` with "context: " before its message and the same code (OK stays
// OK), to say which file, field or request an error is about.
inline absl::Status Annotate(const absl::Status& status,
                             absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(context, ": ", status.message()));
}

}  // namespace h3

// Evaluates `expr` (an absl::Status) once; returns it from the enclosing
// function if it is not OK.
#define H3_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::absl::Status h3_status_ = (expr);      \
    if (!h3_status_.ok()) return h3_status_; \
  } while (false)

// `H3_ASSIGN_OR_RETURN(auto x, MakeX());` or `H3_ASSIGN_OR_RETURN(x, ...)`:
// evaluates the absl::StatusOr expression once; on error returns its status
// from the enclosing function, else move-assigns the value to `lhs`.
#define H3_ASSIGN_OR_RETURN(lhs, expr)                                      \
  H3_ASSIGN_OR_RETURN_IMPL_(H3_STATUS_CONCAT_(h3_statusor_, __LINE__), lhs, \
                            expr)

#define H3_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr)     \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#define H3_STATUS_CONCAT_(a, b) H3_STATUS_CONCAT_INNER_(a, b)
#define H3_STATUS_CONCAT_INNER_(a, b) a##b

#endif  // H3_BASE_STATUS_MACROS_H_
