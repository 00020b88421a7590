#pragma once

// Seed 001's experiment as a built-in scenario: `clients` users each make
// `per_client` stock reservations (stock - 1) on one of `items` products,
// with `app_work` between read and write, by four methods. It runs on its
// own table, coexist_reserve.product, created afresh for every row of the
// result and dropped at the end, so it disturbs nothing else.

#include <chrono>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

namespace coexist::online_sim {

class Simulator;

struct ReserveOptions {
  int clients = 16;
  int per_client = 25;
  std::chrono::milliseconds app_work{2};
  std::vector<int> items{1, 4, 16, 256};
  // nolock, optimistic, pessimistic, atomic (in the seed's order).
  std::vector<std::string> methods{"nolock", "optimistic", "pessimistic", "atomic"};
  int max_retries = 10;  // optimistic: retries after the first try
  long long initial_stock = 100000;
  long long seed = 1;
};

// One line of the seed's table.
struct ReserveRow {
  int items = 0;
  std::string method;
  long long ok = 0;               // reservations reported successful
  long long gaveup = 0;           // optimistic: retries exhausted
  long long conflicts = 0;        // optimistic: UPDATEs that matched 0 rows
  long long stock_decreased = 0;  // what the table actually lost
  long long lost = 0;             // ok - stock_decreased
  double seconds = 0;             // wall time of the 400 reservations
};

class Reserve {
 public:
  // Throws std::invalid_argument for an unknown method.
  Reserve(std::string conninfo, ReserveOptions options);
  ~Reserve();

  // Runs every (items, method) pair in order. Throws what Simulator::Prepare
  // throws. After Stop() it returns the rows finished so far.
  std::vector<ReserveRow> Run();
  // Thread-safe (from a signals::Handler): stops the running pair.
  void Stop();
  bool stopped() const;

 private:
  ReserveRow RunOne(int items, const std::string& method);

  std::string conninfo_;
  ReserveOptions options_;
  mutable std::mutex mutex_;
  Simulator* current_ = nullptr;
  bool stopped_ = false;
};

// The seed's columns, one line per row.
void PrintReserve(std::ostream& out, const std::vector<ReserveRow>& rows);
// A JSON array of objects with exactly the keys items, method, ok, gaveup,
// conflicts, stock_decreased, lost, seconds.
std::string ReserveJson(const std::vector<ReserveRow>& rows);

}  // namespace coexist::online_sim
