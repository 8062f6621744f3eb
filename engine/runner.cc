#include "engine/runner.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace h3::engine {
namespace {

int64_t RoundUp64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace

// Where a step's arguments live in the staging area (byte offsets): token
// ids for up to `rows` rows; then, for up to `heads` rows (the step rows and
// the LM-head rows), positions, sampling rows and histories, and per H3
// layer an H3State per row, per attention layer a KvCache per row.
struct Runner::Layout {
  Layout(int64_t rows, int64_t heads, int h3_layers, int kv_layers)
      : h3(h3_layers) {
    positions = RoundUp64(rows * sizeof(int32_t));
    sampling = positions + RoundUp64(heads * sizeof(int64_t));
    histories = sampling + RoundUp64(heads * sizeof(kernels::SamplingRow));
    states = histories + RoundUp64(heads * sizeof(kernels::TokenHistory));
    h3_bytes = RoundUp64(heads * sizeof(kernels::H3State));
    kv_bytes = RoundUp64(heads * sizeof(kernels::KvCache));
    bytes = states + h3_layers * h3_bytes + kv_layers * kv_bytes;
  }
  int64_t H3States(int i) const { return states + i * h3_bytes; }
  int64_t KvCaches(int j) const {
    return states + h3 * h3_bytes + j * kv_bytes;
  }

  int h3;
  int64_t ids = 0, positions, sampling, histories, states, bytes;
  int64_t h3_bytes, kv_bytes;
};

namespace {

template <typename T>
T* At(const Staging& staging, int64_t offset) {
  return reinterpret_cast<T*>(static_cast<char*>(staging.host()) + offset);
}
template <typename T>
T* OnDevice(const Staging& staging, int64_t offset) {
  return reinterpret_cast<T*>(static_cast<char*>(staging.device()) + offset);
}

}  // namespace

Runner::Runner(std::unique_ptr<Model> model, const RunnerOptions& options)
    : model_(std::move(model)), options_(options) {}

Runner::~Runner() = default;

absl::StatusOr<std::unique_ptr<Runner>> Runner::Create(
    std::unique_ptr<Model> model, const RunnerOptions& options) {
  if (options.slots < 1 || options.max_sequence_length < 1 ||
      options.max_step_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "runner options: slots (", options.slots, "), max_sequence_length (",
        options.max_sequence_length, ") and max_step_tokens (",
        options.max_step_tokens, ") must be >= 1"));
  }
  std::unique_ptr<Runner> r(new Runner(std::move(model), options));
  Backend& backend = r->model_->backend();
  r->use_graphs_ = options.graphs && backend.SupportsGraphs();
  H3_ASSIGN_OR_RETURN(r->memory_,
                      SequenceMemory::Create(*r->model_, options.slots,
                                             options.max_sequence_length));
  r->head_capacity_ = r->Bucket(options.slots);
  const loader::ModelConfig& c = r->model_->config();
  H3_ASSIGN_OR_RETURN(
      r->logits_, backend.Allocate(r->head_capacity_ * c.padded_vocab_size));
  H3_ASSIGN_OR_RETURN(r->sampled_, backend.AllocateStaging(
                                       2 * r->head_capacity_ * sizeof(float)));
  H3_RETURN_IF_ERROR(
      r->Reserve(std::min(options.max_step_tokens, r->head_capacity_)));
  PrefixCacheOptions cache = options.prefix_cache;
  if (cache.max_bytes < 0 || cache.interval < 0 ||
      !(cache.memory_fraction >= 0 && cache.memory_fraction <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prefix cache: memory (", cache.max_bytes, " bytes, fraction ",
        cache.memory_fraction, ") and interval (", cache.interval,
        " tokens) must be >= 0, the fraction <= 1"));
  }
  if (cache.memory_fraction > 0) {
    H3_ASSIGN_OR_RETURN(const int64_t free, backend.FreeMemoryBytes());
    cache.max_bytes =
        static_cast<int64_t>(cache.memory_fraction * static_cast<double>(free));
  }
  r->prefix_cache_ =
      std::make_unique<PrefixCache>(*r->memory_, *r->model_, cache);
  return r;
}

int64_t Runner::Bucket(int64_t sequences) const {
  return model_->backend().SupportsGraphs() ? GraphBucket(sequences)
                                            : sequences;
}

absl::Status Runner::Reserve(int64_t rows) {
  if (rows <= act_.rows) return absl::OkStatus();
  // Grow by doubling, within the limit, so that a run of growing steps
  // reallocates a few times only.
  rows = std::max(rows, std::min(options_.max_step_tokens, 2 * act_.rows));
  // Captured graphs point into the memory about to be replaced.
  model_->backend().DropGraphs();
  graphs_.clear();
  H3_RETURN_IF_ERROR(model_->backend().Synchronize());
  H3_ASSIGN_OR_RETURN(act_, model_->NewActivations(rows));
  layout_ = std::make_unique<Layout>(rows, head_capacity_, model_->h3_layers(),
                                     model_->attention_layers());
  H3_ASSIGN_OR_RETURN(staging_,
                      model_->backend().AllocateStaging(layout_->bytes));
  return absl::OkStatus();
}

absl::Status Runner::Validate(const StepPlan& plan, int64_t* rows) const {
  if (plan.sequences.empty()) {
    return absl::InvalidArgumentError("the step plan is empty");
  }
  const bool kv = model_->attention_layers() > 0;
  absl::flat_hash_set<SlotId> seen;
  *rows = 0;
  for (const SequenceStep& s : plan.sequences) {
    if (!memory_->acquired(s.slot)) {
      return absl::InvalidArgumentError(
          absl::StrCat("slot ", s.slot, " is not acquired"));
    }
    if (!seen.insert(s.slot).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("slot ", s.slot, " appears twice in one step"));
    }
    if (s.tokens.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("slot ", s.slot, ": no tokens to feed"));
    }
    H3_RETURN_IF_ERROR(model_->CheckTokens(s.tokens));
    const int64_t end =
        memory_->position(s.slot) + static_cast<int64_t>(s.tokens.size());
    if (kv && end > options_.max_sequence_length) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the sequence would reach ", end, " tokens; this server allows ",
          options_.max_sequence_length));
    }
    *rows += static_cast<int64_t>(s.tokens.size());
  }
  if (*rows > options_.max_step_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("a step of ", *rows, " tokens; at most ",
                     options_.max_step_tokens, " fit one step"));
  }
  return absl::OkStatus();
}

ForwardBatch Runner::StepBatch(int64_t bucket) const {
  ForwardBatch batch;
  batch.ids = OnDevice<int32_t>(staging_, layout_->ids);
  StepRows& step = batch.step;
  step.count = bucket;
  step.positions = OnDevice<int64_t>(staging_, layout_->positions);
  for (int i = 0; i < model_->h3_layers(); ++i) {
    step.h3.push_back(
        OnDevice<kernels::H3State>(staging_, layout_->H3States(i)));
  }
  for (int j = 0; j < model_->attention_layers(); ++j) {
    step.kv.push_back(
        OnDevice<kernels::KvCache>(staging_, layout_->KvCaches(j)));
  }
  step.kv_capacity = options_.max_sequence_length;
  return batch;
}

absl::Status Runner::MakePad() {
  if (pad_ != nullptr) return absl::OkStatus();
  H3_ASSIGN_OR_RETURN(
      pad_, SequenceMemory::Create(*model_, 1, options_.max_sequence_length));
  return pad_->Acquire().status();
}

void Runner::StageStepRows(const StepPlan* plan,
                           absl::Span<const size_t> singles, int64_t bucket) {
  // Padding rows feed token 0 at position 0 of the pad slot, greedily and
  // without a history (rows may not share one). They share the pad slot's
  // states and caches, and race on them (results discarded;
  // kernels/cuda/h3_step.h): a slot each would cost up to 31 sequences'
  // memory.
  const Layout& l = *layout_;
  int32_t* ids = At<int32_t>(staging_, l.ids);
  int64_t* positions = At<int64_t>(staging_, l.positions);
  auto* rows_out = At<kernels::SamplingRow>(staging_, l.sampling);
  auto* histories = At<kernels::TokenHistory>(staging_, l.histories);
  const kernels::SamplingRow greedy{.temperature = 0.0f};
  const int64_t count = static_cast<int64_t>(singles.size());
  for (int64_t b = 0; b < bucket; ++b) {
    const SequenceStep* s = b < count ? &plan->sequences[singles[b]] : nullptr;
    const SequenceMemory& memory = s != nullptr ? *memory_ : *pad_;
    const SlotId slot = s != nullptr ? s->slot : 0;
    ids[b] = s != nullptr ? s->tokens[0] : 0;
    positions[b] = memory.position(slot);
    const SequenceView view = memory.View(slot);
    for (int i = 0; i < model_->h3_layers(); ++i) {
      At<kernels::H3State>(staging_, l.H3States(i))[b] = view.h3[i];
    }
    for (int j = 0; j < model_->attention_layers(); ++j) {
      At<kernels::KvCache>(staging_, l.KvCaches(j))[b] = view.kv[j];
    }
    const bool draws = s != nullptr && s->sample;
    rows_out[b] = draws ? s->sampling : greedy;
    histories[b] = draws ? memory_->History(slot) : kernels::TokenHistory{};
  }
}

absl::StatusOr<int> Runner::WarmUp() {
  Backend& backend = model_->backend();
  if (!backend.SupportsGraphs()) return 0;
  // Activations for the largest step now: growing them later drops every
  // graph.
  H3_RETURN_IF_ERROR(
      Reserve(std::max(options_.max_step_tokens, head_capacity_)));
  H3_RETURN_IF_ERROR(MakePad());
  int steps = 0;
  for (int64_t bucket = 1; bucket <= head_capacity_;
       bucket = GraphBucket(bucket + 1)) {
    H3_RETURN_IF_ERROR(backend.Synchronize());
    StageStepRows(nullptr, {}, bucket);
    ForwardBatch batch = StepBatch(bucket);
    batch.rows = bucket;
    H3_RETURN_IF_ERROR(RunGraphed(batch, /*sample=*/true));
    ++steps;
  }
  H3_RETURN_IF_ERROR(backend.Synchronize());
  return steps;
}

absl::Status Runner::Execute(const StepPlan& plan, StepResult* result) {
  int64_t rows = 0;
  H3_RETURN_IF_ERROR(Validate(plan, &rows));
  Backend& backend = model_->backend();
  const int64_t vocab = model_->config().padded_vocab_size;
  const int64_t d = model_->config().d_model;

  // Single tokens are step rows (in plan order), longer feeds segments.
  std::vector<size_t> singles, chunks;
  bool sample = false;
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    const SequenceStep& s = plan.sequences[i];
    (s.tokens.size() == 1 ? singles : chunks).push_back(i);
    sample = sample || s.sample;
  }
  const int64_t count = static_cast<int64_t>(singles.size());
  const bool pure = chunks.empty();
  const int64_t bucket = pure ? Bucket(count) : count;
  if (bucket > count) H3_RETURN_IF_ERROR(MakePad());
  rows += bucket - count;
  H3_RETURN_IF_ERROR(Reserve(rows));
  // The previous step's upload may still be reading the staging area.
  H3_RETURN_IF_ERROR(backend.Synchronize());
  StageStepRows(&plan, singles, bucket);

  const Layout& l = *layout_;
  int32_t* ids = At<int32_t>(staging_, l.ids);
  auto* rows_out = At<kernels::SamplingRow>(staging_, l.sampling);
  auto* histories = At<kernels::TokenHistory>(staging_, l.histories);
  const kernels::SamplingRow greedy{.temperature = 0.0f};
  // Segments, and the LM-head rows of those that sample or want logits:
  // their last rows are gathered to rows bucket, bucket + 1, ...
  std::vector<Segment> segments;
  std::vector<std::pair<int64_t, int64_t>> gather;  // (from row, to row)
  std::vector<int64_t> head_row(plan.sequences.size(), -1);
  for (int64_t b = 0; b < count; ++b) head_row[singles[b]] = b;
  int64_t row = bucket, head = bucket;
  for (size_t i : chunks) {
    const SequenceStep& s = plan.sequences[i];
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    std::copy(s.tokens.begin(), s.tokens.end(), ids + row);
    segments.push_back({memory_->position(s.slot), n, memory_->View(s.slot)});
    row += n;
    if (!s.sample && !s.logits) continue;
    gather.push_back({row - 1, head});
    rows_out[head] = s.sample ? s.sampling : greedy;
    histories[head] =
        s.sample ? memory_->History(s.slot) : kernels::TokenHistory{};
    head_row[i] = head++;
  }

  ForwardBatch batch = StepBatch(bucket);
  batch.rows = rows;
  batch.segments = segments;
  if (pure) {
    H3_RETURN_IF_ERROR(RunGraphed(batch, sample));
  } else {
    Profiler* const prof = backend.profiler();
    H3_RETURN_IF_ERROR(TimeOp(prof, "upload", "model", [&] {
      return backend.Upload(staging_, l.bytes);
    }));
    H3_RETURN_IF_ERROR(model_->Forward(batch, act_));
    void* normed = act_.normed.data();
    const ElementType at = act_.type;
    for (auto [from, to] : gather) {
      if (from == to) continue;
      H3_RETURN_IF_ERROR(TimeOp(prof, "gather_rows", "model", [&] {
        return backend.CopyBytes(ElementAt(normed, from * d, at),
                                 d * ElementSize(at),
                                 ElementAt(normed, to * d, at));
      }));
    }
    H3_RETURN_IF_ERROR(HeadAndSample(head, sample));
  }

  // Results: ids and logprobs of the LM-head rows, and the logits asked for.
  const size_t n = plan.sequences.size();
  result->ids.assign(n, -1);
  result->logprobs.assign(n, 0.0f);
  result->logits_row.assign(n, -1);
  result->padded_vocab = vocab;
  // sampled_'s ids and the logprobs after them, which the step copied to
  // its host side: there once the step is done, read in place.
  static_assert(sizeof(int32_t) == sizeof(float));
  const auto* drawn = static_cast<const int32_t*>(sampled_.host());
  const float* logprobs =
      static_cast<const float*>(sampled_.host()) + head_capacity_;
  if (sample) H3_RETURN_IF_ERROR(backend.Synchronize());
  int logits_rows = 0;
  for (size_t i = 0; i < n; ++i) logits_rows += plan.sequences[i].logits;
  result->logits.resize(logits_rows * vocab);
  int next = 0;
  for (size_t i = 0; i < n; ++i) {
    const SequenceStep& s = plan.sequences[i];
    if (s.sample) {
      result->ids[i] = drawn[head_row[i]];
      result->logprobs[i] = logprobs[head_row[i]];
    }
    if (s.logits) {
      result->logits_row[i] = next;
      ProfileRange range(backend.profiler(), "logits_to_host");
      H3_RETURN_IF_ERROR(
          backend.CopyToHost(logits_.data() + head_row[i] * vocab, vocab,
                             result->logits.data() + next * vocab));
      ++next;
    }
  }
  if (!sample && logits_rows == 0) H3_RETURN_IF_ERROR(backend.Synchronize());
  for (const SequenceStep& s : plan.sequences) {
    memory_->Advance(s.slot, static_cast<int64_t>(s.tokens.size()));
  }
  return absl::OkStatus();
}

absl::Status Runner::RunGraphed(const ForwardBatch& batch, bool sample) {
  const int64_t bucket = batch.step.count;
  Backend& backend = model_->backend();
  auto graph = std::find_if(
      graphs_.begin(), graphs_.end(),
      [&](const Graph& g) { return g.bucket == bucket && g.sample == sample; });
  Profiler* const prof = backend.profiler();
  auto step = [&]() -> absl::Status {
    H3_RETURN_IF_ERROR(TimeOp(prof, "upload", "model", [&] {
      return backend.Upload(staging_, layout_->bytes);
    }));
    H3_RETURN_IF_ERROR(model_->Forward(batch, act_));
    return HeadAndSample(bucket, sample);
  };
  // A profiled step runs op by op: a graph would hide its ops.
  if (prof != nullptr) return step();
  if (graph != graphs_.end()) {
    return graph->id >= 0 ? backend.Replay(graph->id) : step();
  }
  H3_RETURN_IF_ERROR(step());
  if (!use_graphs_) return absl::OkStatus();
  // Captured after one uncaptured run of the same shape, which has chosen
  // the matrix product algorithms and sized every workspace. Capture
  // records without running, so nothing is sampled twice.
  absl::Status captured = backend.BeginCapture();
  if (captured.ok()) {
    captured = step();
    absl::StatusOr<int> id = backend.EndCapture();
    if (captured.ok()) captured = id.status();
    if (captured.ok()) {
      graphs_.push_back({bucket, sample, *id});
      return absl::OkStatus();
    }
  }
  // The step ran above and stands; without a graph this shape runs op by
  // op, as with graphs off, rather than failing every step.
  capture_error_ = captured;
  graphs_.push_back({bucket, sample, -1});
  return absl::OkStatus();
}

absl::Status Runner::HeadAndSample(int64_t head_rows, bool sample) {
  H3_RETURN_IF_ERROR(
      model_->LmHead(act_.normed.data(), head_rows, logits_.data()));
  if (!sample) return absl::OkStatus();
  kernels::SampleParams p;
  p.batch = static_cast<int>(head_rows);
  p.vocab_size = static_cast<int32_t>(model_->config().vocab_size);
  p.row_stride = model_->config().padded_vocab_size;
  p.logits = logits_.data();
  p.rows = OnDevice<kernels::SamplingRow>(staging_, layout_->sampling);
  p.histories = OnDevice<kernels::TokenHistory>(staging_, layout_->histories);
  p.ids = static_cast<int32_t*>(sampled_.device());
  p.logprobs = static_cast<float*>(sampled_.device()) + head_capacity_;
  Backend& backend = model_->backend();
  H3_RETURN_IF_ERROR(TimeOp(backend.profiler(), "sample", "model",
                            [&] { return backend.Sample(p); }));
  // The ids and logprobs back to the host within the step (and its graph).
  return TimeOp(backend.profiler(), "ids_to_host", "model", [&] {
    return backend.Download(sampled_, 2 * head_capacity_ * sizeof(float));
  });
}

}  // namespace h3::engine
