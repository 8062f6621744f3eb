#include "clients/h3/devices_command.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "engine/devices.h"
#include "nlohmann/json.hpp"

namespace h3::cli {
namespace {

struct DevicesOptions {
  bool json = false;
  bool no_self_test = false;
};

std::string CudaVersion(int v) {
  return v == 0 ? "none" : absl::StrFormat("%d.%d", v / 1000, (v % 1000) / 10);
}

int RunDevices(const DevicesOptions& options) {
  engine::CudaInventory inventory = engine::ListCudaDevices();
  nlohmann::json out = {
      {"built_with_cuda", inventory.built_with_cuda},
      {"cuda_driver", CudaVersion(inventory.driver_version)},
      {"cuda_runtime", CudaVersion(inventory.runtime_version)},
      {"devices", nlohmann::json::array()},
  };
  if (!inventory.no_device_reason.empty()) {
    out["no_device_reason"] = inventory.no_device_reason;
  }
  int exit_code = 0;
  for (const engine::DeviceInfo& d : inventory.devices) {
    nlohmann::json dev = {
        {"index", d.index},
        {"name", d.name},
        {"pci_bus_id", d.pci_bus_id},
        {"compute_capability",
         absl::StrFormat("%d.%d", d.compute_major, d.compute_minor)},
        {"multiprocessors", d.multiprocessors},
        {"total_memory_bytes", d.total_memory_bytes},
        {"free_memory_bytes", d.free_memory_bytes},
        {"l2_cache_bytes", d.l2_cache_bytes},
        {"shared_memory_per_block_optin_bytes",
         d.shared_memory_per_block_optin_bytes},
        {"supported_by_this_build", d.supported},
        {"kernel_arch", d.kernel_arch},
        {"overlap_and_clusters", d.overlap_and_clusters},
    };
    if (!options.no_self_test && d.supported) {
      absl::StatusOr<double> err = engine::SelfTestDevice(d.index);
      if (err.ok()) {
        dev["self_test"] = {{"ok", true}, {"max_relative_error", *err}};
      } else {
        dev["self_test"] = {{"ok", false},
                            {"error", std::string(err.status().message())}};
        exit_code = 1;
      }
    }
    out["devices"].push_back(dev);
  }

  if (options.json) {
    std::cout << out.dump(2) << std::endl;
    return exit_code;
  }
  std::cout << "CUDA: "
            << (inventory.built_with_cuda ? "built in" : "not built in")
            << ", driver " << out["cuda_driver"].get<std::string>()
            << ", runtime " << out["cuda_runtime"].get<std::string>() << "\n";
  if (inventory.devices.empty()) {
    std::cout << "No GPUs: " << inventory.no_device_reason << "\n";
    return exit_code;
  }
  for (const nlohmann::json& dev : out["devices"]) {
    std::cout << absl::StrFormat(
        "GPU %d: %s (compute %s, %d SMs, %.1f GiB, %.1f GiB free, bus %s)\n",
        dev["index"].get<int>(), dev["name"].get<std::string>(),
        dev["compute_capability"].get<std::string>(),
        dev["multiprocessors"].get<int>(),
        dev["total_memory_bytes"].get<double>() / (1 << 30),
        dev["free_memory_bytes"].get<double>() / (1 << 30),
        dev["pci_bus_id"].get<std::string>());
    if (!dev["supported_by_this_build"].get<bool>()) {
      std::cout << "  not supported: this build has no machine code for it "
                   "(rebuild with its CMAKE_CUDA_ARCHITECTURES)\n";
      continue;
    }
    const int arch = dev["kernel_arch"].get<int>();
    std::cout << absl::StrFormat(
        "  kernels compiled for compute %d.%d; overlapped launches and "
        "clusters: %s\n",
        arch / 10, arch % 10,
        dev["overlap_and_clusters"].get<bool>() ? "yes" : "no");
    if (dev.contains("self_test")) {
      const nlohmann::json& t = dev["self_test"];
      if (t["ok"].get<bool>()) {
        std::cout << absl::StrFormat(
            "  self-test: ok (bias+GELU kernel vs CPU, max rel. error %.2g)\n",
            t["max_relative_error"].get<double>());
      } else {
        std::cout << "  self-test: FAILED: " << t["error"].get<std::string>()
                  << "\n";
      }
    }
  }
  return exit_code;
}

}  // namespace

void AddDevicesCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<DevicesOptions>();
  CLI::App* cmd = app.add_subcommand(
      "devices", "List the GPUs the CUDA runtime sees and self-test each");
  cmd->add_flag("--json", options->json, "Print JSON");
  cmd->add_flag("--no-self-test", options->no_self_test,
                "Only list; run no kernel");
  cmd->callback([options, exit_code] { *exit_code = RunDevices(*options); });
}

}  // namespace h3::cli
