#pragma once

#include <chrono>
#include <memory>
#include <string>

namespace coexist::pacing {

class ControlState;

// The control socket: a unix domain stream socket at `path`, served by
// Boost.Asio on its own thread. Each line a client sends is one command
// (ControlState::Handle); each answer is one line of JSON. Lines longer than
// 4 KiB are refused and the connection closed.
//
// The socket file is created with mode 0600 (only the batch's user may steer
// it) and removed when the server is destroyed. A leftover file from a killed
// process (nobody accepts on it) is replaced; a live server on the path, or a
// path that is not a socket, is an error.
class ControlServer {
 public:
  // Binds and starts serving. Throws UnavailableError when the path is in
  // use by a live server, is not a socket, or cannot be bound.
  ControlServer(std::string path, ControlState& state);
  // Stops the thread, closes every connection, removes the socket file.
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  const std::string& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The client side (`coexist ctl`): connects to `path`, sends `command` and a
// newline, returns the answer line without its newline. Throws
// UnavailableError when nothing listens there, TempFailError when no answer
// comes within `timeout`.
std::string SendControlCommand(const std::string& path, const std::string& command,
                               std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace coexist::pacing
