#pragma once

#include <optional>
#include <string>
#include <vector>

namespace coexist::config {

// `target:` — the user's own table that online users and the batch both
// write. Names are validated identifiers (the loader checks them); SQL quotes
// them. The key column may be of an integer type, text, varchar or uuid
// (coexist's tables keep the key as text in its type's canonical form).
struct TargetTable {
  std::string schema = "public";
  std::string table = "products";
  std::string key_column = "id";
  std::string version_column = "version";
  // Which side owns a row ('online' or 'batch'). None by default: a policy
  // that takes rows over (status_partition) needs one, and the loader says
  // so; with one, the guard refuses online writes to batch-owned rows.
  std::optional<std::string> owner_column;
  // The table's own triggers the operator has looked at (they neither write
  // the version column nor wait on what online users lock): the database
  // check warns about every other user trigger, not about these.
  std::vector<std::string> known_triggers;

  // "public.products", for messages and logs (not for SQL).
  std::string Name() const { return schema + "." + table; }
};

}  // namespace coexist::config
