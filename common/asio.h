#pragma once

// The one header that brings Boost.Asio into coexist (online-sim's
// connections and users, pacing's control socket). Include it only from
// .cpp files and folder-private headers (online-sim/pg_connection.h), never
// from a header other folders include: Asio costs seconds of compile time
// per translation unit on two cores. Further Asio headers a file needs
// (local sockets, read_until, write) come after this one.

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>;
// g++ 12 no longer pulls it in transitively. (Its own block, so that
// clang-format keeps it first.)
// clang-format off
#include <utility>
// clang-format on
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <exception>
#include <functional>
#include <string>

namespace coexist::async {

namespace asio = boost::asio;
template <typename T = void>
using Awaitable = asio::awaitable<T>;
using asio::redirect_error;
using asio::use_awaitable;

// Starts `task` on `executor`. An exception that escapes it is logged with
// `what` (never swallowed, as asio::detached would) and handed to
// `on_error`, which decides whether the run goes on.
void Spawn(asio::io_context& io, Awaitable<> task, std::string what,
           std::function<void(std::exception_ptr)> on_error = {});

// Waits `duration` on a fresh timer; zero or negative returns at once.
Awaitable<> Sleep(std::chrono::steady_clock::duration duration);

}  // namespace coexist::async
