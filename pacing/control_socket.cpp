#include "pacing/control_socket.h"

// First, before any other Boost.Asio header: it carries the Boost 1.74
// <utility> workaround.
// clang-format off
#include "common/asio.h"
// clang-format on
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "common/error.h"
#include "common/log.h"
#include "pacing/control_state.h"

namespace coexist::pacing {
namespace {

namespace asio = async::asio;
using async::Awaitable;
using async::use_awaitable;
using Socket = asio::local::stream_protocol::socket;

constexpr std::size_t kMaxLine = 4096;

// A file descriptor closed on every path out.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

sockaddr_un AddressOf(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    throw UnavailableError(
        "control socket path '" + path + "' is empty or too long",
        "use a path shorter than " + std::to_string(sizeof(address.sun_path)) + " bytes.");
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}

// Connects a blocking client socket; -1 with errno set on failure.
int ConnectTo(const std::string& path) {
  sockaddr_un address = AddressOf(path);
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return -1;
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return -1;
  return fd.release();
}

// A socket file left by a killed process refuses connections: remove it.
// Anything else at the path is someone's, and an error.
void ClearStaleSocket(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return;
  if (!S_ISSOCK(info.st_mode)) {
    throw UnavailableError("control socket path '" + path + "' exists and is not a socket",
                           "choose another pacing.control_socket or remove that file.");
  }
  int fd = ConnectTo(path);
  if (fd >= 0) {
    ::close(fd);
    throw UnavailableError("control socket '" + path + "' is in use by a running process",
                           "another run of the batch is steered through it; give this one "
                           "another pacing.control_socket.");
  }
  spdlog::info("stale control socket replaced path={}", log::Value(path));
  ::unlink(path.c_str());
}

int BindListener(const std::string& path) {
  sockaddr_un address = AddressOf(path);
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  // On Linux the socket file takes the mode of the unbound socket's inode
  // (minus umask), so 0600 holds from the moment the file appears.
  if (fd.get() < 0 || ::fchmod(fd.get(), 0600) != 0 ||
      ::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::chmod(path.c_str(), 0600) != 0 || ::listen(fd.get(), 16) != 0) {
    throw UnavailableError("cannot create control socket '" + path + "': " + std::strerror(errno),
                           "check that the folder exists and is writable.");
  }
  return fd.release();
}

// One client: a line in, a JSON line out, until it closes. Errors of the
// client's making end its connection and nothing else.
Awaitable<> Serve(Socket socket, ControlState& state) {
  std::string buffer;
  for (;;) {
    boost::system::error_code ec;
    std::size_t n = co_await asio::async_read_until(socket, asio::dynamic_buffer(buffer, kMaxLine),
                                                    '\n', asio::redirect_error(use_awaitable, ec));
    bool last = false;
    std::string answer;
    if (ec == asio::error::not_found) {
      answer = R"({"ok":false,"error":"command line longer than 4096 bytes"})";
      last = true;
    } else if (ec) {
      // The client closed; a last command without a newline still counts.
      if (ec != asio::error::eof || buffer.empty()) co_return;
      answer = state.Handle(buffer);
      last = true;
    } else {
      answer = state.Handle(std::string_view(buffer).substr(0, n - 1));
      buffer.erase(0, n);
    }
    answer += '\n';
    co_await asio::async_write(socket, asio::buffer(answer),
                               asio::redirect_error(use_awaitable, ec));
    if (ec || last) co_return;
  }
}

}  // namespace

struct ControlServer::Impl {
  std::string path;
  ControlState& state;
  asio::io_context io{1};
  asio::local::stream_protocol::acceptor acceptor{io};
  std::jthread thread;

  Impl(std::string p, ControlState& s) : path(std::move(p)), state(s) {}

  Awaitable<> Accept() {
    for (;;) {
      boost::system::error_code ec;
      Socket socket = co_await acceptor.async_accept(asio::redirect_error(use_awaitable, ec));
      if (ec == asio::error::operation_aborted) co_return;
      if (ec) {
        spdlog::warn("control socket accept failed error={}", log::Value(ec.message()));
        continue;
      }
      async::Spawn(io, Serve(std::move(socket), state), "control socket: serve");
    }
  }
};

ControlServer::ControlServer(std::string path, ControlState& state)
    : impl_(std::make_unique<Impl>(std::move(path), state)) {
  ClearStaleSocket(impl_->path);
  int fd = BindListener(impl_->path);
  impl_->acceptor.assign(asio::local::stream_protocol(), fd);
  async::Spawn(impl_->io, impl_->Accept(), "control socket: accept");
  impl_->thread = std::jthread([this] { impl_->io.run(); });
  spdlog::info("control socket listening path={}", log::Value(impl_->path));
}

ControlServer::~ControlServer() {
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  boost::system::error_code ignored;
  impl_->acceptor.close(ignored);
  ::unlink(impl_->path.c_str());
}

const std::string& ControlServer::path() const { return impl_->path; }

std::string SendControlCommand(const std::string& path, const std::string& command,
                               std::chrono::milliseconds timeout) {
  Fd fd(ConnectTo(path));
  if (fd.get() < 0) {
    throw UnavailableError(
        "cannot connect to control socket '" + path + "': " + std::strerror(errno),
        "is the batch running with pacing.control_socket set to this path?");
  }
  std::string line = command + "\n";
  if (::send(fd.get(), line.data(), line.size(), MSG_NOSIGNAL) != ssize_t(line.size())) {
    throw UnavailableError("cannot send to control socket '" + path + "': " + std::strerror(errno));
  }
  std::string answer;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char chunk[1024];
  while (answer.find('\n') == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd.get(), POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, int(left.count())) == 0) {
      throw TempFailError("no answer from control socket '" + path + "' within " +
                          std::to_string(timeout.count()) + "ms");
    }
    ssize_t n = ::recv(fd.get(), chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    answer.append(chunk, std::size_t(n));
  }
  if (auto end = answer.find('\n'); end != std::string::npos) answer.resize(end);
  if (answer.empty()) throw TempFailError("control socket '" + path + "' closed without answer");
  return answer;
}

}  // namespace coexist::pacing
