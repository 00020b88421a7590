#pragma once

#include <string_view>
#include <vector>

namespace coexist {

// A file compiled into the binary by cmake/EmbedFiles.cmake (SQL, templates).
struct EmbeddedFile {
  std::string_view name;  // file name without directories, e.g. "0001_core.sql"
  std::string_view text;
};

}  // namespace coexist
