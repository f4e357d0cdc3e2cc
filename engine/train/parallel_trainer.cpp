#include "engine/train/parallel_trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <utility>

#include "engine/core/error.h"
#include "engine/data/epoch_order.h"
#include "engine/data/tokenizer.h"
#include "engine/io/checkpoint.h"
#include "engine/kernels/cpu/threads.h"
#include "engine/model/gpt.h"
#include "engine/model/gpt_import.h"
#include "engine/model/hf_import.h"
#include "engine/optim/optimizer.h"
#include "engine/parallel/device_ops.h"
#include "engine/parallel/schedule.h"
#include "engine/parallel/stage_runner.h"
#include "engine/parallel/tp_layers.h"
#include "engine/parallel/zero.h"
#include "engine/plan/estimator.h"
#include "engine/telemetry/background_sink.h"
#include "engine/telemetry/metric_names.h"
#include "engine/telemetry/pipeline_spans.h"
#include "engine/telemetry/system_metrics.h"
#include "engine/train/data_source.h"
#include "engine/train/step_clock.h"
#ifdef TESSERA_HAVE_CUDA
#include "engine/kernels/cuda/device.cuh"
#endif

namespace tessera {

namespace fs = std::filesystem;

std::vector<int> pipeline_blocks_per_chunk(const RunConfig& cfg) {
    return plan_blocks_per_chunk(cfg);  // one source: the estimator predicts this very split
}

namespace {

using Clock = std::chrono::steady_clock;

// Tags of point-to-point messages: unique per (direction, global chunk, micro-batch) in a step;
// evaluation's micro-batches are tagged apart from training's (2048 up).
int p2p_tag(int dir, int g, int micro, bool eval) {
    return (dir << 24) | (g << 12) | (eval ? micro + 2048 : micro);
}

// Fault injection for the failure tests: TESSERA_FAULT_STALL="RANK:STEP" makes that rank sleep
// (as if stuck) after completing STEP, before the next step's collectives;
// TESSERA_FAULT_CRASH="RANK:STEP" makes it abort after STEP, on the first attempt only (a
// restarted job then runs through).
enum class Fault { none, stall, crash };
Fault fault_injected(int rank, int64_t step) {
    int r = -1;
    long long s = -1;
    const char* f = std::getenv("TESSERA_FAULT_STALL");
    if (f && std::sscanf(f, "%d:%lld", &r, &s) == 2 && r == rank && s == step) return Fault::stall;
    const char* c = std::getenv("TESSERA_FAULT_CRASH");
    const char* attempt = std::getenv("TESSERA_ATTEMPT");
    if (c && (!attempt || std::atoi(attempt) <= 1) && std::sscanf(c, "%d:%lld", &r, &s) == 2 &&
        r == rank && s == step)
        return Fault::crash;
    return Fault::none;
}

// The rank's system metrics (system_metrics.h): the host from /proc and, on a GPU rank, the GPU
// from NVML. A thin layer over cuda_nvml_read: what it reads is tested with a fake source.
class RankSystemSource final : public SystemSource {
  public:
    explicit RankSystemSource(bool gpu) : gpu_(gpu) {}
    std::optional<GpuSample> gpu() override {
#ifdef TESSERA_HAVE_CUDA
        if (!gpu_) return std::nullopt;
        int dev = 0;
        cudaGetDevice(&dev);
        GpuReading r = cuda_nvml_read(dev);
        if (!r.ok) return std::nullopt;
        GpuSample g;
        g.util_percent = r.util_percent;
        g.memory_used_bytes = r.used_bytes;
        g.power_watts = r.power_watts;
        g.temperature_c = r.temperature_c;
        g.sm_clock_mhz = r.sm_clock_mhz;
        return g;
#else
        return std::nullopt;
#endif
    }
    std::optional<HostSample> host() override {
        return host_.host();
    }

  private:
    bool gpu_;
    ProcHostSource host_;
};

std::unique_ptr<SystemSource> rank_system_source(Device dev) {
    return std::make_unique<RankSystemSource>(dev == Device::cuda);
}

// The rank's training loop: data, the step's tail (gradient norm, optimizer, stop votes),
// metrics, evaluation and checkpoints. The schedule walk is StageRunner's (shared with the
// estimator); this class is its edges: pipeline messages, the losses and the timeline spans.
class RankRunner final : private StageEdges {
  public:
    RankRunner(const RunConfig& cfg, ProcessGroups& groups, std::ostream& out)
        : cfg_(cfg), g_(groups), out_(out) {
        const auto& par = cfg.parallel;
        pp_ = par.pp;
        v_ = par.virtual_stages;
        stage_ = groups.coord.pp;
        n_micro_ = cfg.train.grad_accum;
        data_ = data_source_open(cfg);
        model_ = model_shape(cfg.model, data_->vocab_size());
        if (model_.family != ModelShape::Family::mlp && data_->vocab_size() > model_.vocab())
            throw InputError(str_cat(
                cfg.source_path, ": model.vocab: the data's tokenizer (", cfg.model.vocab, ", ",
                data_->vocab_size(), " ids) does not fit the model's ", model_.vocab(),
                "-row vocabulary; tokenize the data with the model's own tokenizer"));
        TpGroup tp{groups.tp.get(), groups.coord.tp, par.tp};
        dev_ = cfg.runtime.device == "cuda" ? Device::cuda : Device::cpu;
        // a run starts from an empty pool, as in a process of its own (what the estimator runs)
        if (dev_ == Device::cuda) device_cuda_release_cached();
        act_dtype_ = cfg.runtime.bf16_activations() ? DType::bf16 : DType::f32;
        ops_ = &device_ops_for(dev_);
        const int64_t targets = (int64_t)cfg.train.micro_batch * cfg.train.grad_accum * par.dp *
                                model_.targets_per_sample();
        ShardSpec spec{model_, tp, recompute_parse(par.recompute_of(stage_)),
                       &layer_ops_for(dev_, act_dtype_, cfg.runtime.fp8_gemms()),
                       1.0f / (float)targets};
        layers_ = stage_layers_build(spec, pipeline_blocks_per_chunk(cfg), pp_, stage_);
        all_layers_ = layers_.all();
        ZeroOptions zo{.stage = par.zero,
                       .ops = ops_,
                       .offload_optimizer = par.offload_optimizer,
                       .seed = cfg.train.seed,
                       .gather_bf16 = act_dtype_ == DType::bf16,  // bf16 only on GPUs
                       .gpu = dev_ == Device::cuda,
                       .comm_in_place = dev_ == Device::cpu && !cpu_comm_thread(),
                       .micro_batches = n_micro_};
        store_ = std::make_unique<ParamStore>(all_layers_, zo, groups.dp_async.get(),
                                              groups.coord.tp, pp_ > 1 && stage_ == pp_ - 1);
        schedule_ = schedule_build(schedule_kind_parse(par.schedule), pp_, n_micro_, v_)[stage_];
        StageRunner::Options so;
        so.pp = pp_, so.v = v_, so.n_micro = n_micro_, so.act = act_dtype_, so.device = dev_;
        so.offload_activations = par.offload_activations;
        so.recv_ahead = recv_ahead_on(dev_ == Device::cuda);
        StageEdges& edges = *this;
        runner_ = std::make_unique<StageRunner>(model_, layers_.views(), *store_, edges, so);
        oc_ = optimizer_config(cfg.train);
        run_t0_ = Clock::now();
        run_t0_wall_ = telemetry_now();
        for (const LayerSpec& l : model_.layer_specs())
            model_flops_per_token_ += 3.0 * l.flops_per_token;
#ifdef TESSERA_HAVE_CUDA
        DeviceSpec
            device;  // the device table (engine/plan): MFU, and what the allocator cannot see
        if (dev_ == Device::cuda && device_spec_for_gpu(cuda_device_name(), &device)) {
            peak_flops_ = device.peak_flops;
            memory_tracker().add(MemCategory::context, device.context_bytes);
            memory_tracker().add(MemCategory::libraries, device.libraries_bytes);
        }
#endif
    }

    // The weights to start from (a checkpoint to resume, model.init_from, or the seed's); returns
    // the steps already done. A bad checkpoint or weights file fails here, before run().
    int64_t prepare(const TrainOptions& opts);
    // Trains from step `start` to train.steps, reporting to `sink`.
    TrainResult run(BackgroundSink& sink, int64_t start, const TrainOptions& opts,
                    int64_t* steps_done);

  private:
    DeviceRecord device_record() const;
    // Span times: the wall clock (seconds since the Unix epoch), so every rank's spans share one
    // time base (exactly on one host, to the hosts' clock sync across several), advanced by the
    // steady clock from the runner's start (no jumps within a run).
    double now_s() const {
        return run_t0_wall_ + std::chrono::duration<double>(Clock::now() - run_t0_).count();
    }
    int stage_of(int g) const {
        return g % pp_;
    }  // the stage holding global chunk g
    const Batch& batch(int64_t step, int micro, bool eval);
    // StageEdges: the pp group's messages, the losses summed on the device, the spans
    void recv_post(Tensor& x, int dir, int g, int micro, bool eval) override;
    void recv_wait(int dir, int g, int micro, bool eval) override;
    void send(Tensor x, int dir, int g, int micro, bool eval) override;
    void losses(const Tensor& x, bool eval) override;
    void span_begin(const char* kind, int micro) override;
    void span_end(bool eval) override;
    void layer_issued(int layer) override;
    void fault_stall(int64_t step) {
        const Fault f = fault_injected(g_.rank, step);
        if (f == Fault::none) return;
        sink_->drain();  // the steps done are in the store, as a real fault would find them
        std::fprintf(stderr, "fault injection: rank %d %s after step %lld\n", g_.rank,
                     f == Fault::stall ? "stalls" : "crashes", (long long)step);
        if (f == Fault::crash) std::abort();
        ::sleep(3600);
    }
    void metric(int64_t step, std::string_view name, double v) {
        metric(step, name, v, telemetry_now());
    }
    // at wall time wall_s (a step's own figures: when the step ended)
    void metric(int64_t step, std::string_view name, double v, double wall_s) {
        sink_->write(MetricRecord{step, g_.rank, std::string(name), v, wall_s});
    }
    struct EvalSums {
        double loss = 0;
        int64_t targets = 0, correct = 0;
    };
    EvalSums evaluate(int64_t index);
    // a finite test set's micro-batches (every DP rank reads whole micro-batches)
    int64_t test_batches() const {
        return (data_->eval_set_size() + cfg_.train.micro_batch - 1) / cfg_.train.micro_batch;
    }
    int64_t eval_targets_ = 0;     // targets whose losses this rank summed in the evaluation
    bool eval_uncounted_ = false;  // this rank's evaluation batch repeats one (not summed)
    std::string save_checkpoint(int64_t steps_done);
    int64_t load_checkpoint(const std::string& path);
    void load_initial_weights();

    const RunConfig& cfg_;
    ProcessGroups& g_;
    BackgroundSink* sink_ = nullptr;  // run()'s
    std::string resumed_from_;        // prepare()'s checkpoint, if any
    CheckpointsSetAside set_aside_;   // an earlier run's checkpoints prepare() moved aside
    std::ostream& out_;
    std::unique_ptr<DataSource> data_;
    ModelShape model_;
    Device dev_ = Device::cpu;
    DType act_dtype_ = DType::f32;
    DeviceOps* ops_ = nullptr;
    // timeline spans; on GPUs the times come from events on the compute stream, resolved at the
    // end of the step (kernel launches return long before the work is done)
    // On logged steps a span also marks each layer's end (layer_issued): a layer's time runs
    // from the previous mark (or the span's start) to its own, the last layer's to the span's
    // end, so a span's layers add up to the span.
    struct LayerMark {
        int layer;
        double t_s;
        void* ev = nullptr;
    };
    struct OpenSpan {
        const char* kind;
        int micro;
        double start_s, end_s;
        void* ev0 = nullptr;
        void* ev1 = nullptr;
        std::vector<LayerMark> marks;
    };
    std::vector<OpenSpan> spans_;
    void* step_event_ = nullptr;
    double step_start_s_ = 0;
    void span_begin(OpenSpan& sp);
    void span_end(OpenSpan& sp);
    void span_resolve(OpenSpan& sp);
    void spans_flush(int64_t step);
    bool layer_marks_ = false;                             // this step records per-layer times
    std::map<int, std::pair<double, double>> layer_sums_;  // layer -> forward, backward seconds
    int pp_ = 1, v_ = 1, stage_ = 0, n_micro_ = 1;
    StageLayers layers_;
    std::vector<Layer*> all_layers_;
    std::unique_ptr<ParamStore> store_;
    std::unique_ptr<StageRunner> runner_;
    OpenSpan open_span_;  // the span StageRunner began
    StageSchedule schedule_;
    OptimizerConfig oc_;
    Clock::time_point run_t0_;
    double run_t0_wall_ = 0;                         // telemetry_now() at run_t0_
    std::map<std::pair<int, bool>, Batch> batches_;  // (micro, eval) -> batch of this step
    std::vector<std::pair<std::unique_ptr<CommRequest>, Tensor>> sends_;
    std::map<int, std::unique_ptr<CommRequest>> recvs_;  // posted receives by tag
    double busy_s_ = 0;
    double model_flops_per_token_ = 0, peak_flops_ = 0;  // for perf/mfu (GPU runs)
};

const Batch& RankRunner::batch(int64_t step, int micro, bool eval) {
    auto key = std::make_pair(micro, eval);
    auto it = batches_.find(key);
    if (it != batches_.end()) return it->second;
    const int mb = cfg_.train.micro_batch, dp = cfg_.parallel.dp;
    int64_t first = ((int64_t)micro * dp + g_.coord.dp) * mb;
    Batch b = eval ? data_->eval_batch(step, first, mb) : data_->train_batch(step, first, mb);
    return batches_.emplace(key, std::move(b)).first->second;
}

// Chunk g receives activations from chunk g - 1 and gradients from chunk g + 1.
void RankRunner::recv_post(Tensor& x, int dir, int g, int micro, bool eval) {
    const int peer = stage_of(dir == 0 ? g - 1 : g + 1), tag = p2p_tag(dir, g, micro, eval);
    auto [it, fresh] =
        recvs_.emplace(tag, g_.pp->irecv(x.data(), x.numel(), act_dtype_, peer, tag));
    TS_CHECK(fresh, "recv_post: a receive with tag ", tag, " is already posted");
}

void RankRunner::recv_wait(int dir, int g, int micro, bool eval) {
    auto it = recvs_.find(p2p_tag(dir, g, micro, eval));
    TS_CHECK(it != recvs_.end(), "recv_wait: no receive posted for chunk ", g, " micro-batch ",
             micro);
    std::unique_ptr<CommRequest> req = std::move(it->second);
    recvs_.erase(it);
    req->wait();
}

void RankRunner::send(Tensor x, int dir, int g, int micro, bool eval) {
    auto req =
        g_.pp->isend(x.data(), x.numel(), act_dtype_, stage_of(g), p2p_tag(dir, g, micro, eval));
    sends_.emplace_back(std::move(req), std::move(x));
}

void RankRunner::losses(const Tensor& x, bool eval) {
    if (g_.coord.tp != 0 || (eval && eval_uncounted_)) return;  // TP ranks hold the same losses
    ops_->sum_add(x.f32(), x.numel());
    if (eval) eval_targets_ += x.numel();
}

void RankRunner::span_begin(const char* kind, int micro) {
    open_span_ = OpenSpan{kind, micro, 0, 0, nullptr, nullptr, {}};
    span_begin(open_span_);
}

void RankRunner::span_end(bool eval) {
    span_end(open_span_);
    if (!eval) {
        spans_.push_back(std::move(open_span_));
        return;
    }
#ifdef TESSERA_HAVE_CUDA
    // an evaluation's span is not kept: give its events back
    for (void* e : {open_span_.ev0, open_span_.ev1})
        if (e) cuda_event_free(e);
    for (const LayerMark& m : open_span_.marks)
        if (m.ev) cuda_event_free(m.ev);
#endif
    open_span_.marks.clear();
}

void RankRunner::layer_issued(int layer) {
    if (!layer_marks_) return;
    LayerMark m{layer, 0};
#ifdef TESSERA_HAVE_CUDA
    if (dev_ == Device::cuda) {
        m.ev = cuda_event_record_now();
        open_span_.marks.push_back(m);
        return;
    }
#endif
    m.t_s = now_s();
    open_span_.marks.push_back(m);
}

void RankRunner::span_begin(OpenSpan& sp) {
#ifdef TESSERA_HAVE_CUDA
    if (dev_ == Device::cuda) {
        sp.ev0 = cuda_event_record_now();
        return;
    }
#endif
    sp.start_s = now_s();
}

void RankRunner::span_end(OpenSpan& sp) {
#ifdef TESSERA_HAVE_CUDA
    if (dev_ == Device::cuda) {
        sp.ev1 = cuda_event_record_now();
        return;
    }
#endif
    sp.end_s = now_s();
}

// A GPU span's times from its events (the step's work is done); CPU spans have theirs.
void RankRunner::span_resolve(OpenSpan& sp) {
#ifdef TESSERA_HAVE_CUDA
    if (sp.ev0) {
        sp.start_s = step_start_s_ + cuda_event_ms(step_event_, sp.ev0) / 1e3;
        sp.end_s = step_start_s_ + cuda_event_ms(step_event_, sp.ev1) / 1e3;
        cuda_event_free(sp.ev0);
        cuda_event_free(sp.ev1);
        sp.ev0 = sp.ev1 = nullptr;
    }
    for (LayerMark& m : sp.marks)
        if (m.ev) {
            m.t_s = step_start_s_ + cuda_event_ms(step_event_, m.ev) / 1e3;
            cuda_event_free(m.ev);
            m.ev = nullptr;
        }
#endif
}

// Emits the step's spans and adds their compute time (span_is_compute) to busy_s_.
void RankRunner::spans_flush(int64_t step) {
    for (OpenSpan& sp : spans_) {
        span_resolve(sp);
        if (span_is_compute(sp.kind)) busy_s_ += sp.end_s - sp.start_s;
        sink_->write(SpanRecord{step, g_.rank, stage_, sp.micro, sp.kind, sp.start_s, sp.end_s});
        const bool forward = std::string_view(sp.kind) == "forward";
        double t = sp.start_s;
        for (size_t i = 0; i < sp.marks.size(); ++i) {
            const LayerMark& m = sp.marks[i];
            // the last layer's time runs to the span's end: what follows its mark (the store's
            // hooks after it: a release, a gradient reduction's launch) is its work too
            const double end = i + 1 == sp.marks.size() ? sp.end_s : m.t_s;
            auto& sums = layer_sums_[m.layer];
            (forward ? sums.first : sums.second) += end - t;
            t = m.t_s;
        }
    }
    spans_.clear();
    for (const auto& [layer, sums] : layer_sums_)
        sink_->write(LayerTimeRecord{step, g_.rank, stage_, layer, sums.first / n_micro_,
                                     sums.second / n_micro_});
    layer_sums_.clear();
#ifdef TESSERA_HAVE_CUDA
    if (step_event_) cuda_event_free(step_event_);
    step_event_ = nullptr;
#endif
}

// Evaluation round `index`: the losses summed over the world, with their count and (a
// classifier) the rows answered right. A finite test set (the MLP's) is read in plain
// micro-batches as one rank would read it, one per DP rank per round (rank d takes
// batch index·dp + d; past the end it repeats the last batch uncounted, since ZeRO-3's gathers
// need every DP rank in every forward). Otherwise round `index` is global batch `index`
// (micro_batch x grad_accum x dp samples), the same samples whatever the plan.
RankRunner::EvalSums RankRunner::evaluate(int64_t index) {
    batches_.clear();
    ops_->sum_begin();
    eval_targets_ = 0;
    bool uncounted = false;
    if (data_->eval_set_size() > 0) {
        const int64_t batches = test_batches();
        const int64_t j = index * cfg_.parallel.dp + g_.coord.dp;
        uncounted = eval_uncounted_ = j >= batches;
        Batch b = data_->eval_batch(std::min(j, batches - 1), 0, cfg_.train.micro_batch);
        for (int c = 0; c < v_; ++c) runner_->forward(0, c, b, true);
        eval_uncounted_ = false;
    } else {
        for (int m = 0; m < n_micro_; ++m)
            for (int c = 0; c < v_; ++c) runner_->forward(m, c, batch(index, m, true), true);
    }
    for (auto& s : sends_) s.first->wait();
    sends_.clear();
    int64_t correct = 0;
    for (Layer* l : all_layers_) correct += std::exchange(l->eval_correct, 0);
    if (uncounted) correct = 0;
    // counts of a finite test set (at most its size) are exact in fp32; a global batch's
    // targets are known
    float v[3] = {(float)ops_->sum_end(), (float)eval_targets_, (float)correct};
    if (g_.world) g_.world->all_reduce(v, 3);
    batches_.clear();
    const int64_t global =
        (int64_t)cfg_.train.micro_batch * n_micro_ * cfg_.parallel.dp * model_.targets_per_sample();
    return {v[0], data_->eval_set_size() > 0 ? (int64_t)v[1] : global, (int64_t)v[2]};
}

// The device this rank trains on, for the run's record (RunStore::devices): the GPU as its driver
// names it with the memory NVML reports (the runtime's figure without NVML), or the host's RAM.
DeviceRecord RankRunner::device_record() const {
    DeviceRecord d{g_.rank, telemetry_host_name(), std::string(kDeviceCpu),
                   telemetry_host_memory_bytes(), telemetry_now()};
#ifdef TESSERA_HAVE_CUDA
    if (dev_ == Device::cuda) {
        int dev = 0;
        cudaGetDevice(&dev);
        GpuReading gr = cuda_nvml_read(dev);
        d.name = cuda_device_name();
        d.memory_bytes = gr.ok && gr.total_bytes > 0 ? gr.total_bytes : cuda_device_memory_bytes();
    }
#endif
    return d;
}

int64_t RankRunner::prepare(const TrainOptions& opts) {
    std::string resume = opts.resume_from;
    if (resume.empty() && opts.resume) {
        if (cfg_.checkpoint.dir.empty())
            throw InputError(str_cat(cfg_.source_path,
                                     ": checkpoint.dir: --resume needs a checkpoint directory"));
        auto latest = checkpoint_latest(config_resolve_path(cfg_, cfg_.checkpoint.dir));
        if (latest) resume = *latest;
    }
    resumed_from_ = resume;
    int64_t start = 0;
    if (!resume.empty())
        start = load_checkpoint(resume);
    else if (!cfg_.model.init_from.empty())
        load_initial_weights();
    // A run that does not continue checkpoint.dir's own checkpoints moves them aside (rank 0
    // writes the checkpoints): its saves would otherwise replace or rotate them away.
    if (g_.rank == 0 && !cfg_.checkpoint.dir.empty()) {
        const fs::path root = config_resolve_path(cfg_, cfg_.checkpoint.dir);
        std::error_code ec;
        const fs::path from = fs::path(resume).lexically_normal();
        const bool continues_root =
            !resume.empty() &&
            (fs::equivalent(from, root, ec) || fs::equivalent(from.parent_path(), root, ec));
        if (!continues_root) set_aside_ = checkpoint_set_aside(root.string());
    }
    return start;
}

TrainResult RankRunner::run(BackgroundSink& sink, int64_t start, const TrainOptions& opts,
                            int64_t* steps_done) {
    TrainResult res;
    sink_ = &sink;
    sink_->write(device_record());
    const int mb = cfg_.train.micro_batch, dp = cfg_.parallel.dp;
    const int64_t targets = (int64_t)mb * n_micro_ * dp * model_.targets_per_sample();
    res.steps_done = start;
    if (steps_done) *steps_done = start;
    const bool leader = g_.rank == 0;
    if (leader) {
        out_ << "tessera: " << model_.describe() << "\n";
        if (g_.mesh.world() > 1)
            out_ << "tessera: rank " << g_.rank << " of " << g_.mesh.world() << ": "
                 << model_.n_blocks() << " blocks over " << pp_ * v_ << " chunks, dp " << dp
                 << " x tp " << cfg_.parallel.tp << " x pp " << pp_ << ", zero "
                 << cfg_.parallel.zero << ", schedule " << cfg_.parallel.schedule << "\n";
        // how the collectives travel (the world group spans every rank)
        if (g_.world) out_ << "tessera: collectives through " << g_.world->transport() << "\n";
        if (g_.pp) out_ << "tessera: pipeline messages through " << g_.pp->transport() << "\n";
        out_ << "tessera: data " << data_->describe() << "\n"
             << "tessera: " << cfg_.train.steps << " steps of " << (int64_t)mb * n_micro_ * dp
             << " samples (" << mb << " x " << n_micro_ << " accumulation x " << dp << " dp), "
             << targets << " targets per step" << std::endl;
        if (start > 0)
            out_ << "tessera: resumed from " << resumed_from_ << " at step " << start << std::endl;
        if (set_aside_.count > 0)
            out_ << "tessera: checkpoint.dir held " << set_aside_.count << " checkpoint"
                 << (set_aside_.count == 1 ? "" : "s") << " of an earlier run (step "
                 << set_aside_.first_step
                 << (set_aside_.count == 1 ? "" : str_cat(" to ", set_aside_.last_step))
                 << "): moved to " << set_aside_.dir
                 << " (this run starts afresh; --resume continues the newest checkpoint)"
                 << std::endl;
    }
    const bool classifier = model_.family == ModelShape::Family::mlp;
    auto eval_and_log = [&](int64_t s1) {
        double total = 0;
        int64_t count = 0, correct = 0;
        const int64_t n = data_->eval_set_size() > 0 ? (test_batches() + dp - 1) / dp  // rounds
                                                     : cfg_.train.eval_steps;
        for (int64_t i = 0; i < n; ++i) {
            EvalSums e = evaluate(i);
            total += e.loss;
            count += e.targets;
            correct += e.correct;
        }
        res.last_val_loss = total / (double)std::max<int64_t>(1, count);
        if (classifier)
            res.last_val_accuracy = (double)correct / (double)std::max<int64_t>(1, count);
        if (leader) {
            metric(s1, metric::val_loss, res.last_val_loss);
            if (classifier) metric(s1, metric::val_accuracy, res.last_val_accuracy);
            out_ << "eval step " << s1 << " | val loss " << res.last_val_loss;
            if (classifier) out_ << " | val accuracy " << res.last_val_accuracy;
            out_ << std::endl;
        }
    };
    if (cfg_.train.eval_every > 0 && start == 0) eval_and_log(0);
    // GPU (NVML) and host (/proc) metrics at a modest rate: every 2 s at most, and the last step
    std::unique_ptr<SystemSource> system = rank_system_source(dev_);
    SystemSampler sampler(*system, g_.rank, opts.host_metrics, 2.0);
    StepClock step_clock;
    for (int64_t step = start; step < cfg_.train.steps; ++step) {
        double step_t0 = now_s();
        step_clock.step_begin(step_t0);
        store_->zero_grads();
        batches_.clear();
        runner_->step_begin();
        ops_->sum_begin();
        busy_s_ = 0;
        spans_.clear();
        layer_marks_ = (step + 1) % cfg_.log.every == 0 || step + 1 == cfg_.train.steps;
        step_start_s_ = step_t0;
#ifdef TESSERA_HAVE_CUDA
        if (dev_ == Device::cuda) step_event_ = cuda_event_record_now();
#endif
        runner_->run(schedule_,
                     [&](int micro) -> const Batch& { return batch(step, micro, false); });
        for (auto& s : sends_) s.first->wait();
        sends_.clear();
        // The optimizer's share, queued behind the backward with no host round trip: the
        // squared gradient norm, the loss and the stop votes summed over the world in one
        // all-reduce (one rank leaving after a Ctrl-C takes every rank with it, after the same
        // step), the clipping scale computed by the AdamW kernel from the summed norm.
        OpenSpan opt{"optimizer", -1, 0, 0, nullptr, nullptr, {}};
        span_begin(opt);
        // the tied copies of the vocabulary table on the first and last stage (none untied)
        store_->finish_gradients(model_.tied() ? g_.embedding.get() : nullptr);
        float* scalars = ops_->step_scalars(train_stop_requested() ? 1.0f : 0.0f);
        if (g_.world) g_.world->all_reduce(scalars, 3);
        store_->optimizer_step(oc_, step, scalars);
        span_end(opt);
        float red[3];
        ops_->read_step_scalars(red);  // synchronises the step's work
        span_resolve(opt);
        spans_flush(step);
        const bool stop = red[2] > 0.0f;
        double norm = std::sqrt((double)red[0]);
        double lr = lr_at_step(oc_, step);
        if (comm_trace())
            std::fprintf(stderr,
                         "[step] rank %d step %lld: forward+backward %.3f ms, optimizer %.3f ms\n",
                         g_.rank, (long long)step, (opt.start_s - step_t0) * 1e3,
                         (opt.end_s - opt.start_s) * 1e3);
        sink_->write(SpanRecord{step, g_.rank, stage_, -1, "optimizer", opt.start_s, opt.end_s});
        // since the previous step's end; the step's own figures carry the time it ended, so
        // the steps' times add up to the time between their records
        const double end_s = now_s();
        const double step_s = step_clock.step_end(end_s);
        double loss = red[1] / (double)targets;
        res.last_train_loss = loss;
        res.steps_done = step + 1;
        if (steps_done) *steps_done = res.steps_done;
        const int64_t s1 = step + 1;
        // this step's own figures, at the time it ended
        auto step_metric = [&](std::string_view name, double v) { metric(s1, name, v, end_s); };
        for (MetricRecord& m : sampler.sample(s1, telemetry_now(), s1 == cfg_.train.steps))
            sink_->write(m);
        if (!std::isfinite(loss)) {
            // every rank writes the value it saw, with its wall time, so the Monitor marks the
            // step with the rank that saw it first (run_alerts.h), then the run fails
            step_metric(metric::train_loss, loss);
            sink_->flush();
            throw Error(str_cat("step ", s1, ": the loss is ", loss,
                                " (diverged); lower train.lr or enable train.grad_clip"));
        }
        if (s1 % cfg_.log.every == 0 || s1 == cfg_.train.steps) {
            MemoryTracker& mt = memory_tracker();
            for (int c = 0; c < kMemCategoryCount; ++c) {
                auto cat = static_cast<MemCategory>(c);
                step_metric(metric::mem_category_bytes(cat), (double)mt.peak_bytes(cat));
            }
            step_metric(metric::mem_total_bytes, (double)mt.total_peak_bytes());
            step_metric(metric::mem_device_bytes, (double)mt.device_peak_bytes());
            double pipe_s = opt.start_s - step_t0;
            if (pp_ > 1)
                step_metric(metric::pipeline_rank_idle, pipe_s > 0 ? 1.0 - busy_s_ / pipe_s : 0.0);
            if (leader) {
                step_metric(metric::train_loss, loss);
                step_metric(metric::train_lr, lr);
                step_metric(metric::train_grad_norm, norm);
                step_metric(metric::train_epoch, epoch_order_epochs(s1, (int64_t)mb * n_micro_ * dp,
                                                                    data_->train_set_size()));
                step_metric(metric::perf_step_ms, step_s * 1e3);
                step_metric(metric::perf_tok_per_s, targets / step_s);
                step_metric(metric::perf_gflops, targets / step_s * model_flops_per_token_ / 1e9);
                if (peak_flops_ > 0)  // model FLOPs utilisation: 6N + 12·L·d·T per token
                    step_metric(metric::perf_mfu, targets / step_s * model_flops_per_token_ /
                                                      (g_.mesh.world() * peak_flops_));
                char line[256];
                std::snprintf(line, sizeof line,
                              "step %6lld/%lld | loss %.4f | lr %.2e | norm %.3f | %8.0f tok/s | "
                              "%7.1f ms",
                              (long long)s1, (long long)cfg_.train.steps, loss, lr, norm,
                              targets / step_s, step_s * 1e3);
                out_ << line << std::endl;
            }
        }
        if (cfg_.train.eval_every > 0 &&
            (s1 % cfg_.train.eval_every == 0 || s1 == cfg_.train.steps)) {
            eval_and_log(s1);
            step_clock.interrupted();
        }
        if (!cfg_.checkpoint.dir.empty() &&
            ((cfg_.checkpoint.every > 0 && s1 % cfg_.checkpoint.every == 0) ||
             s1 == cfg_.train.steps || stop)) {
            res.checkpoint_dir = save_checkpoint(s1);
            if (leader) sink_->write(CheckpointRecord{s1, res.checkpoint_dir, telemetry_now()});
            step_clock.interrupted();
        }
        sink_->flush();
        if (stop && s1 < cfg_.train.steps) {
            res.status = run_status::stopped;
            return res;
        }
        fault_stall(s1);
    }
    res.status = run_status::completed;
    return res;
}

// ---- checkpoints: gathered full tensors under the full model's names --------------------------

std::string RankRunner::save_checkpoint(int64_t steps_done) {
    // Staging buffers are plain host vectors, outside the memory accounting: they are not part
    // of the training step's footprint.
    ParamTable global = model_.param_table();
    auto held = store_->held();
    std::vector<std::vector<float>> model_t, m_t, v_t;
    for (const ParamInfo& p : global.entries()) {
        std::vector<float> buf(3 * p.numel, 0.0f);
        float* pv = buf.data();
        float* mv = pv + p.numel;
        float* vv = mv + p.numel;
        for (const auto& h : held) {
            const ParamInfo& lp = h.layer->table().entries()[h.param];
            if (lp.name != p.name) continue;
            const ParamShard& sh = h.layer->shards()[h.param];
            const int64_t n = h.end - h.begin;
            std::vector<float> hp(n), hm(n), hv(n);  // the slices may live on the GPU
            if (h.params_on_host)
                std::memcpy(hp.data(), h.param_values, sizeof(float) * n);
            else
                ops_->download(hp.data(), h.param_values, n);
            if (h.moments_on_host) {
                std::memcpy(hm.data(), h.m, sizeof(float) * n);
                std::memcpy(hv.data(), h.v, sizeof(float) * n);
            } else {
                ops_->download(hm.data(), h.m, n);
                ops_->download(hv.data(), h.v, n);
            }
            for (int64_t i = 0; i < n; ++i) {
                int64_t gi = sh.global_offset(h.begin + i);
                pv[gi] = hp[i];
                mv[gi] = hm[i];
                vv[gi] = hv[i];
            }
        }
        if (g_.world) g_.world->all_reduce(buf.data(), (int64_t)buf.size());
        if (g_.rank == 0) {
            model_t.emplace_back(pv, pv + p.numel);
            m_t.emplace_back(mv, mv + p.numel);
            v_t.emplace_back(vv, vv + p.numel);
        }
    }
    std::string dir;
    if (g_.rank == 0) {
        std::vector<CheckpointFile> files{{"model", {}}, {"optimizer", {}}};
        const auto& es = global.entries();
        for (size_t i = 0; i < es.size(); ++i) {
            files[0].tensors.push_back({es[i].name, DType::f32, es[i].shape, model_t[i].data()});
            files[1].tensors.push_back({"m." + es[i].name, DType::f32, es[i].shape, m_t[i].data()});
        }
        for (size_t i = 0; i < es.size(); ++i)
            files[1].tensors.push_back({"v." + es[i].name, DType::f32, es[i].shape, v_t[i].data()});
        nlohmann::json state = {{"steps_done", steps_done},
                                {"optimizer_t", store_->optimizer_steps()},
                                {"config_text", cfg_.source_text},
                                {"name", cfg_.name},
                                {"tessera_version", TESSERA_VERSION}};
        dir = checkpoint_save(config_resolve_path(cfg_, cfg_.checkpoint.dir), steps_done, files,
                              state, cfg_.checkpoint.keep);
    }
    if (g_.world) g_.world->barrier();  // nobody resumes from a half-written checkpoint
    return dir;
}

int64_t RankRunner::load_checkpoint(const std::string& path) {
    Checkpoint ck = checkpoint_load(path);
    const SafetensorsFile& mf = checkpoint_file(ck, "model");
    const SafetensorsFile& of = checkpoint_file(ck, "optimizer");
    ParamTable global = model_.param_table();
    std::map<std::string, std::vector<float>> cache;
    auto full = [&](const std::string& key, const SafetensorsFile& f,
                    const std::string& name) -> const std::vector<float>& {
        auto it = cache.find(key);
        if (it != cache.end()) return it->second;
        const ParamInfo& p = global.at(name);
        std::vector<float> v(p.numel);
        f.read_f32(key, p.shape, v.data());
        return cache.emplace(key, std::move(v)).first->second;
    };
    store_->load([&](const std::string& name, int which, const ParamShard& sh, int64_t lo,
                     int64_t hi, float* dst) {
        const std::vector<float>& src = which == 0   ? full(name, mf, name)
                                        : which == 1 ? full("m." + name, of, name)
                                                     : full("v." + name, of, name);
        for (int64_t i = lo; i < hi; ++i) dst[i - lo] = src[sh.global_offset(i)];
    });
    store_->set_optimizer_steps(ck.state.value("optimizer_t", (int64_t)0));
    return ck.state.value("steps_done", ck.step);
}

// model.init_from: Tessera or Hugging Face GPT-2 weights (gpt_load_weights maps the names and
// transposes Conv1D), or an MLP's by name, into a host copy of the full model, from which each
// rank takes its slices.
void RankRunner::load_initial_weights() {
    const std::string path = config_resolve_path(cfg_, cfg_.model.init_from);
    const ParamTable& table = model_.param_table();
    std::vector<float> values(table.total_numel());
    if (cfg_.model.from_folder && model_.family == ModelShape::Family::llama) {
        llama_load_hf_weights(path, model_.llama, values.data());  // Hugging Face names
    } else if (model_.family == ModelShape::Family::gpt) {
        SafetensorsFile f =
            SafetensorsFile::open(cfg_.model.from_folder ? hf_weights_file(path) : path);
        GptModel full(model_.gpt);
        gpt_load_weights(full, f);
        std::memcpy(values.data(), full.params().f32(), sizeof(float) * values.size());
    } else {
        SafetensorsFile f = SafetensorsFile::open(path);
        for (const ParamInfo& p : table.entries())
            f.read_f32(p.name, p.shape, values.data() + p.offset);
    }
    store_->load([&](const std::string& name, int which, const ParamShard& sh, int64_t lo,
                     int64_t hi, float* dst) {
        if (which != 0) {  // fresh AdamW moments
            std::fill(dst, dst + (hi - lo), 0.0f);
            return;
        }
        const float* src = values.data() + table.at(name).offset;
        for (int64_t i = lo; i < hi; ++i) dst[i - lo] = src[sh.global_offset(i)];
    });
}

}  // namespace

TrainResult parallel_train_rank(const RunConfig& cfg, ProcessGroups& groups,
                                const std::function<TelemetrySink&()>& open_sink,
                                const TrainOptions& opts, std::ostream& out, int64_t* steps_done) {
    RankRunner r(cfg, groups, out);
    const int64_t start = r.prepare(opts);
    // the step hands its records over; a thread of their own writes them (background_sink.h)
    BackgroundSink sink(open_sink());
    TrainResult res = r.run(sink, start, opts, steps_done);
    sink.drain();
    return res;
}

}  // namespace tessera
