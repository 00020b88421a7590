#include "common/asio.h"

#include <spdlog/spdlog.h>

#include "common/log.h"

namespace coexist::async {

void Spawn(asio::io_context& io, Awaitable<> task, std::string what,
           std::function<void(std::exception_ptr)> on_error) {
  asio::co_spawn(io, std::move(task),
                 [what = std::move(what), on_error = std::move(on_error)](std::exception_ptr e) {
                   if (!e) return;
                   try {
                     std::rethrow_exception(e);
                   } catch (const std::exception& ex) {
                     spdlog::error("task failed task={} error={}", what, log::Value(ex.what()));
                   } catch (...) {
                     spdlog::error("task failed task={} error=unknown", what);
                   }
                   if (on_error) on_error(e);
                 });
}

Awaitable<> Sleep(std::chrono::steady_clock::duration duration) {
  if (duration <= std::chrono::steady_clock::duration::zero()) co_return;
  asio::steady_timer timer(co_await asio::this_coro::executor, duration);
  co_await timer.async_wait(use_awaitable);
}

}  // namespace coexist::async
