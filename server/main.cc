// h3serve: serves a hybrid H3 language model over gRPC.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include "CLI/CLI.hpp"
#include "base/build_info.h"
#include "server/memory_amount.h"
#include "server/server.h"

namespace {

// SIGINT/SIGTERM are turned into a byte on this pipe, read by a thread that
// drains and stops the server. A handler (rather than blocking the signals
// and calling sigwait) works whichever thread the kernel picks, including
// threads that libraries start before main (OpenBLAS does).
int stop_pipe[2] = {-1, -1};

void OnStopSignal(int signal) {
  const char byte = static_cast<char>(signal);
  // A second signal while draining kills at once (the default action).
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  if (write(stop_pipe[1], &byte, 1) < 0) _exit(1);
}

bool InstallStopHandlers() {
  if (pipe(stop_pipe) != 0) return false;
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  return sigaction(SIGINT, &action, nullptr) == 0 &&
         sigaction(SIGTERM, &action, nullptr) == 0;
}

// Blocks until a stop signal arrives; returns it.
int WaitForStopSignal() {
  char byte = 0;
  while (read(stop_pipe[0], &byte, 1) < 0 && errno == EINTR) {
  }
  return byte;
}

}  // namespace

int main(int argc, char** argv) {
  h3::server::ServerOptions options;
  options.http.port = 8080;
  double grace_seconds = 30;
  int threads = 0;

  CLI::App app{
      "h3serve: an inference server for hybrid H3 language models.\n"
      "Serves h3.v1.TextGeneration, grpc.health.v1.Health and server "
      "reflection over gRPC, an OpenAI-compatible API (/v1/completions, "
      "/v1/models, /health) over HTTP, and Prometheus metrics.",
      "h3serve"};
  app.set_version_flag("--version", h3::VersionLine("h3serve"));
  app.add_option("--host", options.host,
                 "Address the gRPC, HTTP and metrics ports listen on; "
                 "0.0.0.0 for every interface (docs/security.md)")
      ->capture_default_str();
  app.add_option("--metrics-host", options.metrics_host,
                 "Address of the metrics port (default: --host)");
  std::string api_key_file;
  app.add_option("--api-key-file", api_key_file,
                 "File of API keys, one \"name:key\" or \"key\" a line; "
                 "every RPC but health and every HTTP route but /health then "
                 "needs \"authorization: Bearer <key>\" (docs/security.md)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-cert", options.grpc.tls_cert,
                 "PEM certificate chain: serve gRPC over TLS (with --tls-key)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", options.grpc.tls_key,
                 "PEM private key of --tls-cert")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-client-ca", options.grpc.tls_client_ca,
                 "PEM CA certificates: gRPC clients must present a "
                 "certificate one of them signed (mutual TLS)")
      ->check(CLI::ExistingFile);
  app.add_option("--grpc-max-message-bytes", options.grpc.max_message_bytes,
                 "Largest gRPC request message (larger: RESOURCE_EXHAUSTED)")
      ->check(CLI::Range(1024, 1 << 30))
      ->capture_default_str();
  app.add_option("--grpc-max-streams", options.grpc.max_concurrent_streams,
                 "Concurrent gRPC calls per connection (HTTP/2 "
                 "MAX_CONCURRENT_STREAMS)")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--grpc-max-metadata", options.grpc.max_metadata_bytes,
                 "Largest gRPC request metadata (headers) in bytes")
      ->check(CLI::Range(1024, 1 << 24))
      ->capture_default_str();
  app.add_option("--grpc-max-threads", options.grpc.max_threads,
                 "Threads serving gRPC calls (one per call in flight); "
                 "further calls get RESOURCE_EXHAUSTED")
      ->check(CLI::Range(8, 1 << 16))
      ->capture_default_str();
  app.add_option("--grpc-idle-timeout-ms", options.grpc.max_connection_idle_ms,
                 "A gRPC connection without calls for this long is closed")
      ->check(CLI::Range(int64_t{1000}, int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--port", options.port, "gRPC port (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--http-port", options.http.port,
                 "Port of the OpenAI-compatible HTTP API, on --host too (0: "
                 "any free port, -1: none)")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  app.add_option("--http-threads", options.http.threads,
                 "HTTP connections served at once (one thread each); as many "
                 "more may wait, later ones get 503")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--http-max-body", options.http.max_body_bytes,
                 "Largest HTTP request body in bytes (larger: 413)")
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 30))
      ->capture_default_str();
  app.add_option("--metrics-port", options.metrics_port,
                 "Port of the Prometheus /metrics endpoint (0: any free "
                 "port, -1: none)")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  app.add_option("--shutdown-grace", grace_seconds,
                 "Seconds that requests in flight get to finish after "
                 "SIGINT/SIGTERM")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  bool no_model = false;
  CLI::Option* model =
      app.add_option("--model", options.model_path,
                     "Model file to serve (made by `h3 convert`); without "
                     "it, the embedded default model h3-kjv")
          ->check(CLI::ExistingFile);
  app.add_flag("--no-model", no_model,
               "Serve no model: health NOT_SERVING, generation UNAVAILABLE, "
               "server info only")
      ->excludes(model);
  app.add_option("--model-name", options.model_name,
                 "Name GetModelInfo reports (default: the file name)");
  app.add_option("--max-sequence-length", options.max_sequence_length,
                 "Prompt plus generated tokens per request; sizes each "
                 "slot's attention KV cache")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--max-prompt-bytes", options.max_prompt_bytes,
                 "Longest prompt text (and Tokenize text) in bytes, refused "
                 "before tokenizing (default: 16 per token of "
                 "--max-sequence-length)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  app.add_option("--max-new-tokens", options.max_new_tokens,
                 "Most tokens one request may generate (also the default)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--slots", options.slots,
                 "Requests generating at once (each slot holds SSM states "
                 "and a KV cache)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--max-waiting", options.scheduler.max_waiting,
                 "Requests that may wait for a slot before new ones get "
                 "RESOURCE_EXHAUSTED")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--prefill-tokens", options.scheduler.step_tokens,
                 "Tokens per engine step: every running request's next "
                 "token, then prompt chunks up to this many in all (longer "
                 "prompts are split, so running requests keep generating). "
                 "At least --slots. Default: 64 on the CPU, 1024 on a GPU, or "
                 "4 per slot if more (docs/scheduling.md)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--prefill-chunk", options.prefill_chunk,
                 "Tokens per H3 prefill call (state passing joins calls)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  std::string cache_memory = "0.1";
  app.add_option("--prefix-cache-memory", cache_memory,
                 "Memory for snapshots of prompts' states (SSM states and "
                 "attention K/V at exact token positions), reused by later "
                 "requests with the same prefix: bytes (512M, 2G) or a "
                 "fraction of the device's free memory after the slots "
                 "(0.1); 0 turns the cache off (docs/prefix-cache.md)")
      ->capture_default_str();
  app.add_option("--prefix-cache-interval", options.prefix_cache.interval,
                 "A snapshot every this many prompt tokens during long "
                 "prefills (0: only at prompt ends and branch points)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->capture_default_str();
  h3::engine::BackendFlags backend;  // parsed after CLI11_PARSE
  app.add_option("--device", backend.device,
                 "cpu, cuda, cuda:N, or auto (the first GPU if there is one)")
      ->capture_default_str();
  app.add_option("--dtype", backend.dtype,
                 "Weight matrices on the GPU: fp16, bf16, fp32 (auto: fp16 on "
                 "a GPU, fp32 on the CPU)")
      ->check(CLI::IsMember({"auto", "fp32", "fp16", "bf16"}))
      ->capture_default_str();
  app.add_option("--attention", backend.attention,
                 "Prefill attention on a GPU: fma (fp32 kernel), flash "
                 "(tensor cores in the --dtype's 16-bit type; with half "
                 "activations, 23% more Table 4 throughput on an H200) or "
                 "auto (flash with a 16-bit --dtype, else fma; "
                 "docs/cuda-engine.md)")
      ->check(CLI::IsMember({"auto", "fma", "flash"}))
      ->capture_default_str();
  app.add_option("--h3-prefill", backend.h3_prefill,
                 "H3 prefill on a GPU with 16-bit --dtype: chunked (the "
                 "chunked-scan kernel), chunked-mma (its shift convolution "
                 "on tensor cores), fft (the fused FlashConv kernel) or auto "
                 "(chunked; fp32 weights take the cuFFT path either way; "
                 "docs/flashconv.md)")
      ->check(CLI::IsMember(h3::engine::H3PrefillKernelNames()))
      ->capture_default_str();
  app.add_flag("--batch-invariant", backend.batch_invariant,
               "GPU: every matrix product by a kernel whose per-row result "
               "does not depend on the other rows of the step, so a "
               "sequence's logits are bitwise the same alone or batched "
               "(slower prefill; prompts are cut at fixed positions and the "
               "prefix cache is off; docs/cuda-engine.md, \"Batch "
               "invariance\"). The CPU is batch-invariant without it");
  app.add_option("--batch-invariant-kernel", backend.batch_invariant_kernel,
                 "with --batch-invariant: skinny (CUDA-core kernel, slow at "
                 "large batches), cublaslt (one pinned cuBLASLt algorithm per "
                 "shape), stream (tensor-core decode kernel, 16-bit --dtype)"
                 ", stream-split (the same on thread-block clusters, compute "
                 "capability 9.0+) or tile (64 x 64 tiles through shared "
                 "memory, 16-bit activations, 9.0+)")
      ->check(CLI::IsMember(h3::engine::BatchInvariantKernelNames()))
      ->capture_default_str();
  app.add_option("--decode-products", backend.decode_products,
                 "GPU without --batch-invariant: the products of at most 64 "
                 "rows by auto (stream up to 8 rows, cublaslt above), "
                 "cublaslt, stream (tensor-core kernel that streams 16-bit "
                 "weights), cublaslt-tuned (cuBLASLt's fastest of a few "
                 "algorithms, timed at first use), stream-split (stream up "
                 "to 8 rows, its cluster variant above; compute capability "
                 "9.0+), measured (the fastest of those kernels per "
                 "product, timed at first use) or tile (stream up to 8 rows, "
                 "64 x 64 tiles through shared memory above; 16-bit "
                 "activations, 9.0+); "
                 "docs/cuda-engine.md, \"Decode products\"")
      ->check(CLI::IsMember(h3::engine::DecodeProductsNames()))
      ->capture_default_str();
  CLI::Option* half_flag = app.add_flag(
      "--half-activations", backend.half_activations,
      "GPU: the activations that feed matrix products in the --dtype's "
      "16-bit type (no conversion kernels; faster on an H200, with "
      "--attention flash; docs/cuda-engine.md, \"Half activations\"). The "
      "default with a 16-bit --dtype on a GPU");
  app.add_flag("--fp32-activations", backend.fp32_activations,
               "GPU with a 16-bit --dtype: fp32 activations (and K/V cache) "
               "instead of the default half ones")
      ->excludes(half_flag);
  app.add_option("--pdl", backend.pdl,
                 "GPU, compute capability 9.0 and later: on launches the "
                 "decode step's own kernels overlapped with the kernel before "
                 "each (programmatic dependent launch), hiding launch gaps "
                 "and weight reads; off launches them in stream order; "
                 "docs/cuda-engine.md, \"Overlapped launches\"")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  bool no_warm_up = false;
  app.add_flag("--no-warm-up", no_warm_up,
               "GPU: serve at once, without first running a decode step of "
               "padding rows per batch size (which captures its graph, "
               "chooses --decode-products measured's kernels and allocates "
               "the largest step's activations); the first requests then "
               "pay for that");
  app.add_option("--threads", threads,
                 "CPU threads of the engine (default: $H3_NUM_THREADS, else "
                 "all hardware threads)")
      ->check(CLI::Range(1, 1024));
  CLI11_PARSE(app, argc, argv);
  if (!api_key_file.empty()) {
    absl::StatusOr<h3::server::ApiKeys> keys =
        h3::server::ApiKeys::Load(api_key_file);
    if (!keys.ok()) {
      std::cerr << "h3serve: " << keys.status().message() << std::endl;
      return 1;
    }
    options.api_keys = *std::move(keys);
  }
  options.default_model = !no_model;
  options.warm_up = !no_warm_up;
  options.http.max_queued_connections = options.http.threads;
  // CLI11 checked every name already.
  options.backend = *h3::engine::ParseBackendFlags(backend);
  auto cache =
      h3::server::ParseMemoryAmount(cache_memory, "--prefix-cache-memory");
  if (!cache.ok()) {
    std::cerr << "h3serve: " << cache.status().message() << std::endl;
    return 2;
  }
  options.prefix_cache.max_bytes = cache->bytes;
  options.prefix_cache.memory_fraction = cache->fraction;
  if (threads > 0) setenv("H3_NUM_THREADS", std::to_string(threads).c_str(), 1);

  if (!InstallStopHandlers()) {
    std::perror("h3serve: cannot install signal handlers");
    return 1;
  }
  auto server = h3::server::Server::Start(options);
  if (!server.ok()) {
    std::cerr << "h3serve: " << server.status().message() << std::endl;
    return 1;
  }
  std::cout << h3::VersionLine("h3serve") << "\n"
            << "listening: grpc=" << options.host << ":" << (*server)->port();
  if ((*server)->http_port() >= 0) {
    std::cout << " http=http://" << options.host << ":"
              << (*server)->http_port();
  }
  if ((*server)->metrics_port() >= 0) {
    std::cout << " metrics=http://"
              << (options.metrics_host.empty() ? options.host
                                               : options.metrics_host)
              << ":" << (*server)->metrics_port() << "/metrics";
  }
  std::cout << "\n";
  if (!options.api_keys.empty()) {
    std::cout << options.api_keys.size()
              << " API keys loaded; requests without one are refused\n";
  }
  if ((*server)->model_loaded()) {
    std::cout << "serving "
              << (options.model_path.empty()
                      ? "the embedded default model h3-kjv (--model serves "
                        "another)"
                      : options.model_path)
              << "; Ctrl-C drains and stops\n";
  } else {
    std::cout << "no model loaded (--no-model): health is NOT_SERVING and "
                 "generation answers UNAVAILABLE; Ctrl-C stops\n";
  }
  std::cout << std::flush;

  std::thread signal_waiter([&] {
    const int signal = WaitForStopSignal();
    // Refusing first: whoever reads "draining" finds the server refusing.
    (*server)->BeginDrain();
    std::cout << "h3serve: " << (signal == SIGINT ? "SIGINT" : "SIGTERM")
              << ", draining" << std::endl;
    const bool drained = (*server)->Drain(
        std::chrono::milliseconds(static_cast<int64_t>(grace_seconds * 1000)));
    std::cout << "h3serve: "
              << (drained ? "all requests finished"
                          : "grace period over; cancelling the rest")
              << ", shutting down" << std::endl;
    // A moment for handlers to send their last messages.
    (*server)->Shutdown(std::chrono::milliseconds(drained ? 2000 : 0));
  });
  (*server)->Wait();
  signal_waiter.join();  // Wait returns only after the waiter's Shutdown
  return 0;
}
