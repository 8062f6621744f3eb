#include "tests/support/server_stats.h"

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "httplib.h"

namespace h3::testing {
namespace {

// Entries of a directory other than "." and "..", or -1.
int CountEntries(const std::string& path) {
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return -1;
  int count = 0;
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") ++count;
  }
  closedir(dir);
  return count;
}

}  // namespace

int CountThreads(pid_t pid) {
  return CountEntries("/proc/" + std::to_string(pid) + "/task");
}

int CountOpenFiles(pid_t pid) {
  return CountEntries("/proc/" + std::to_string(pid) + "/fd");
}

std::map<std::string, int> ThreadsByName(pid_t pid) {
  std::map<std::string, int> threads;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = opendir(tasks.c_str());
  if (dir == nullptr) return threads;
  while (const dirent* entry = readdir(dir)) {
    const std::string tid = entry->d_name;
    if (tid == "." || tid == "..") continue;
    std::ifstream comm(tasks + "/" + tid + "/comm");
    std::string name;
    if (std::getline(comm, name)) ++threads[name];
  }
  closedir(dir);
  return threads;
}

std::string ThreadGrowth(const std::map<std::string, int>& before,
                         const std::map<std::string, int>& after) {
  const int pool_bound =
      2 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string growth;
  for (const auto& [name, count] : after) {
    const auto it = before.find(name);
    const int was = it == before.end() ? 0 : it->second;
    const bool grpc_pool = name == "default-executo" ||
                           name == "event_engine" || name == "grpc_global_tim";
    const int allowed = grpc_pool ? std::max(was, pool_bound) : was;
    if (count > allowed) {
      growth += name + ": " + std::to_string(was) + " -> " +
                std::to_string(count) + "; ";
    }
  }
  return growth;
}

std::string ScrapeMetrics(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  const httplib::Result result = client.Get("/metrics");
  if (!result || result->status != 200) return "";
  return result->body;
}

std::optional<double> MetricValue(const std::string& text,
                                  const std::string& sample) {
  std::istringstream lines(text);
  std::string line;
  const std::string prefix = sample + " ";
  while (std::getline(lines, line)) {
    if (line.compare(0, prefix.size(), prefix) != 0) continue;
    return std::strtod(line.c_str() + prefix.size(), nullptr);
  }
  return std::nullopt;
}

bool LoadGauges::IdleWith(int slots) const {
  return running == 0 && waiting == 0 && slots_used == 0 && slots_free == slots;
}

std::string LoadGauges::ToString() const {
  char text[160];
  std::snprintf(text, sizeof(text),
                "running %g, waiting %g, slots used %g, slots free %g", running,
                waiting, slots_used, slots_free);
  return text;
}

LoadGauges ReadLoadGauges(const std::string& metrics) {
  auto value = [&](const char* name) {
    return MetricValue(metrics, name).value_or(-1);
  };
  return {value("h3_requests_running"), value("h3_requests_waiting"),
          value("h3_slots_used"), value("h3_slots_free")};
}

LoadGauges WaitForIdleGauges(int port, int slots,
                             std::chrono::milliseconds timeout) {
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  LoadGauges gauges = ReadLoadGauges(ScrapeMetrics(port));
  while (!gauges.IdleWith(slots) &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    gauges = ReadLoadGauges(ScrapeMetrics(port));
  }
  return gauges;
}

int MetricsPortOf(const std::string& output) {
  static const std::regex kMetrics(R"(metrics=http://[^ ]+:([0-9]+)/metrics)");
  std::smatch match;
  if (!std::regex_search(output, match, kMetrics)) return -1;
  return std::stoi(match[1].str());
}

}  // namespace h3::testing
