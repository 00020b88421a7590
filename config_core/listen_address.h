#pragma once

// host:port listen addresses (metrics.listen, coexist dashboard --listen).

#include <string>

namespace coexist::config {

// "127.0.0.1:9187" or "[::1]:9187" -> host and port; false when malformed.
bool SplitHostPort(const std::string& text, std::string& host, int& port);

// 127.0.0.0/8, ::1 or "localhost": an address only this host can reach.
bool IsLoopback(const std::string& host);

}  // namespace coexist::config
