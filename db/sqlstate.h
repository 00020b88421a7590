#pragma once

// SQLSTATEs that coexist's SQL functions and triggers raise (class CX is
// coexist's own), and the PostgreSQL ones the product reacts to. Online
// applications in any language match on these codes; docs/database-api.md
// lists them with their messages.

namespace coexist::db::sqlstate {

// coexist's own.
inline constexpr const char* kEditLockBusy = "CX001";   // another owner holds the edit lock
inline constexpr const char* kEditLockLost = "CX002";   // expired, released or revoked
inline constexpr const char* kWindowRefused = "CX003";  // time_window: batch window active
inline constexpr const char* kOwnerRefused = "CX004";   // status_partition: row owned by batch
inline constexpr const char* kEditLockedRefused =
    "CX005";  // write to a row another owner edit-locks

// PostgreSQL's.
inline constexpr const char* kLockNotAvailable = "55P03";  // NOWAIT, lock_timeout
inline constexpr const char* kQueryCanceled = "57014";     // statement_timeout, pg_cancel_backend
inline constexpr const char* kAdminShutdown = "57P01";     // pg_terminate_backend
inline constexpr const char* kInsufficientPrivilege = "42501";
inline constexpr const char* kDeadlockDetected = "40P01";
inline constexpr const char* kSerializationFailure = "40001";
inline constexpr const char* kUniqueViolation = "23505";
inline constexpr const char* kStringTooLong = "22001";  // an edit-lock owner over 200 bytes

}  // namespace coexist::db::sqlstate
