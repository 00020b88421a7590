#pragma once

// Headless Chromium for the tests that open a page (the report, the
// dashboard). scripts/setup.sh installs it (Debian package chromium).

#include <filesystem>
#include <string>
#include <vector>

namespace coexist::testing {

inline constexpr const char* kChromium = "/usr/bin/chromium";

// Headless Chromium's command line, with its profile in `dir`.
inline std::vector<std::string> ChromiumCommand(const std::filesystem::path& dir) {
  return {kChromium,
          "--headless",
          "--no-sandbox",
          "--disable-gpu",
          "--disable-quic",
          "--no-first-run",
          "--disable-background-networking",
          "--disable-component-update",
          "--disable-sync",
          "--user-data-dir=" + (dir / "profile").string()};
}

}  // namespace coexist::testing
