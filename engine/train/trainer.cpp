#include "engine/train/trainer.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/data/epoch_order.h"
#include "engine/io/checkpoint.h"
#include "engine/kernels/cpu/threads.h"
#include "engine/model/gpt_import.h"
#include "engine/model/hf_import.h"
#include "engine/model/model.h"
#include "engine/store/run_store.h"
#include "engine/telemetry/metric_names.h"
#include "engine/telemetry/system_metrics.h"
#include "engine/telemetry/telemetry.h"
#include "engine/train/data_source.h"
#include "engine/optim/optimizer.h"

namespace tessera {

namespace {

std::atomic<bool> g_stop{false};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string human_bytes(int64_t b) {
    char s[32];
    if (b >= (1LL << 30)) std::snprintf(s, sizeof s, "%.2f GiB", b / 1073741824.0);
    else std::snprintf(s, sizeof s, "%.1f MiB", b / 1048576.0);
    return s;
}

// ---- checkpoints: model parameters, AdamW moments and the loop state ----------------------
std::vector<TensorView> views_of(const ParamTable& t, const float* base, const std::string& prefix) {
    std::vector<TensorView> v;
    for (const auto& p : t.entries()) v.push_back({prefix + p.name, DType::f32, p.shape, base + p.offset});
    return v;
}

std::string save_checkpoint(const RunConfig& cfg, Model& model, AdamW& opt, int64_t steps_done) {
    const ParamTable& t = model.param_table();
    std::vector<CheckpointFile> files{{"model", views_of(t, model.params().f32(), "")},
                                      {"optimizer", views_of(t, opt.m().f32(), "m.")}};
    auto vv = views_of(t, opt.v().f32(), "v.");
    files[1].tensors.insert(files[1].tensors.end(), vv.begin(), vv.end());
    nlohmann::json state = {{"steps_done", steps_done},
                            {"optimizer_t", opt.steps_taken()},
                            {"config_text", cfg.source_text},
                            {"name", cfg.name},
                            {"tessera_version", TESSERA_VERSION}};
    return checkpoint_save(config_resolve_path(cfg, cfg.checkpoint.dir), steps_done, files, state,
                           cfg.checkpoint.keep);
}

int64_t load_checkpoint(const std::string& path, Model& model, AdamW& opt) {
    Checkpoint ck = checkpoint_load(path);
    const SafetensorsFile& mf = checkpoint_file(ck, "model");
    const SafetensorsFile& of = checkpoint_file(ck, "optimizer");
    for (const auto& p : model.param_table().entries()) {
        mf.read_f32(p.name, p.shape, model.params().f32() + p.offset);
        of.read_f32("m." + p.name, p.shape, opt.m().f32() + p.offset);
        of.read_f32("v." + p.name, p.shape, opt.v().f32() + p.offset);
    }
    opt.set_steps_taken(ck.state.value("optimizer_t", (int64_t)0));
    return ck.state.value("steps_done", ck.step);
}

}  // namespace

void train_request_stop() { g_stop = true; }
bool train_stop_requested() { return g_stop; }

// ------------------------------------------------------------------------------------------
// The loop

TrainResult train_run(const RunConfig& cfg, const TrainOptions& opts) {
    std::ostream& out = opts.out ? *opts.out : std::cout;
    g_stop = false;
    if (cfg.runtime.device != "cpu")
        throw InputError(str_cat(cfg.source_path, ": runtime.device: this build trains on 'cpu' "
                                                  "only, found '", cfg.runtime.device, "'"));
    const auto& par = cfg.parallel;
    TS_CHECK(par.dp * par.tp * par.pp == 1, "train_run is the single-rank loop; the launcher runs "
                                            "parallel plans");
    threads_configure(cfg.train.threads);

    auto data = data_source_open(cfg);
    auto model = model_create(cfg.model, data->vocab_size());
    model->init_params(cfg.train.seed);
    if (!cfg.model.init_from.empty()) {
        const std::string path = config_resolve_path(cfg, cfg.model.init_from);
        SafetensorsFile f = SafetensorsFile::open(cfg.model.from_folder ? hf_weights_file(path) : path);
        if (auto* gpt = dynamic_cast<GptModel*>(model.get())) {
            gpt_load_weights(*gpt, f);  // Tessera or Hugging Face GPT-2 names
        } else {
            for (const auto& p : model->param_table().entries())
                f.read_f32(p.name, p.shape, model->params().f32() + p.offset);
        }
    }
    OptimizerConfig oc = optimizer_config(cfg.train);
    AdamW opt(model->param_table(), oc);

    int64_t start_step = 0;
    std::string resume_path = opts.resume_from;
    if (resume_path.empty() && opts.resume) {
        if (cfg.checkpoint.dir.empty())
            throw InputError(str_cat(cfg.source_path, ": checkpoint.dir: --resume needs a "
                                                      "checkpoint directory"));
        auto latest = checkpoint_latest(config_resolve_path(cfg, cfg.checkpoint.dir));
        if (latest) resume_path = *latest;
    }
    if (!resume_path.empty()) start_step = load_checkpoint(resume_path, *model, opt);

    // ---- run store: one writer (this process), batched transactions
    std::string db_path = opts.db_path.empty() ? config_resolve_path(cfg, cfg.log.db) : opts.db_path;
    RunStore store = RunStore::open(db_path);
    RunStartRecord start;
    start.name = cfg.name;
    start.config_text = cfg.source_text;
    start.host = telemetry_host_name();
    start.world_size = 1;
    start.wall_time = telemetry_now();
    int64_t run_id = store.run_begin(start);
    auto sink = store_sink(store, run_id);
    // this trainer runs on the CPU only (a GPU world 1 is the rank loop's)
    sink->write(DeviceRecord{0, start.host, std::string(kDeviceCpu), telemetry_host_memory_bytes(),
                             telemetry_now()});

    const int mb = cfg.train.micro_batch, accum = cfg.train.grad_accum;
    const int64_t global_samples = (int64_t)mb * accum;
    const int64_t targets_per_step = global_samples * model->targets_per_sample();
    const double flops_per_step = model->train_flops_per_target() * targets_per_step;
    out << "tessera: " << model->describe() << "\n"
        << "tessera: data " << data->describe() << "\n"
        << "tessera: " << cfg.train.steps << " steps of " << global_samples << " samples ("
        << mb << " x " << accum << " accumulation), " << targets_per_step
        << " targets per step; run " << run_id << " in " << db_path << "\n";
    if (start_step > 0) out << "tessera: resumed from " << resume_path << " at step " << start_step << "\n";

    TrainResult res;
    res.run_id = run_id;
    res.steps_done = start_step;
    auto run_t0 = Clock::now();
    auto emit = [&](int64_t step, std::string_view name, double value) {
        sink->write(MetricRecord{step, 0, std::string(name), value, telemetry_now()});
    };
    auto evaluate = [&](int64_t step) {
        StepResult tot;
        int64_t n_batches = cfg.train.eval_steps;
        if (data->eval_set_size() > 0) n_batches = (data->eval_set_size() + mb - 1) / mb;
        // GPT: evaluation batch i is a global batch (micro_batch x grad_accum samples), the same
        // samples whatever the plan; a finite test set is read in plain micro-batches.
        const int parts = data->eval_set_size() > 0 ? 1 : accum;
        for (int64_t i = 0; i < n_batches; ++i) {
            for (int part = 0; part < parts; ++part) {
                Batch b = data->eval_batch(i, (int64_t)part * mb, mb);
                if (b.batch_size == 0) break;
                StepResult r = model->evaluate(b);
                tot.loss_sum += r.loss_sum;
                tot.count += r.count;
                tot.correct += r.correct;
            }
        }
        res.last_val_loss = tot.loss_sum / std::max<int64_t>(1, tot.count);
        res.last_val_accuracy = (double)tot.correct / std::max<int64_t>(1, tot.count);
        emit(step, metric::val_loss, res.last_val_loss);
        emit(step, metric::val_accuracy, res.last_val_accuracy);
        out << "eval step " << step << " | val loss " << res.last_val_loss << " | val accuracy "
            << res.last_val_accuracy << std::endl;
    };

    ProcHostSource host;  // the host's CPU and RAM (/proc) every 2 s at most, and the last step
    SystemSampler sampler(host, 0, opts.host_metrics, 2.0);
    try {
        if (cfg.train.eval_every > 0 && start_step == 0) evaluate(0);  // the untrained baseline
        for (int64_t step = start_step; step < cfg.train.steps; ++step) {
            auto t0 = Clock::now();
            model->zero_grads();
            double loss_sum = 0;
            for (int m = 0; m < accum; ++m) {
                Batch b = data->train_batch(step, (int64_t)m * mb, mb);
                double f0 = seconds_since(run_t0);
                StepResult r = model->forward_backward(b, 1.0f / (float)targets_per_step);
                sink->write(SpanRecord{step, 0, 0, m, "forward_backward", f0, seconds_since(run_t0)});
                loss_sum += r.loss_sum;
            }
            double o0 = seconds_since(run_t0);
            double norm = grad_global_norm(model->grads().f32(), model->param_table().total_numel());
            double lr = opt.step(model->params().f32(), model->grads().f32(), step, norm);
            sink->write(SpanRecord{step, 0, 0, -1, "optimizer", o0, seconds_since(run_t0)});
            double step_s = seconds_since(t0);
            double loss = loss_sum / (double)targets_per_step;
            res.last_train_loss = loss;
            res.steps_done = step + 1;
            const int64_t s1 = step + 1;  // metrics are keyed by completed steps
            for (MetricRecord& m : sampler.sample(s1, telemetry_now(), s1 == cfg.train.steps))
                sink->write(m);
            if (!std::isfinite(loss)) {
                emit(s1, metric::train_loss, loss);  // the Monitor marks the step (run_alerts.h)
                sink->flush();
                throw Error(str_cat("step ", step, ": the loss is ", loss,
                                    " (diverged); lower train.lr or enable train.grad_clip"));
            }
            if (s1 % cfg.log.every == 0 || s1 == cfg.train.steps) {
                MemoryTracker& mt = memory_tracker();
                emit(s1, metric::train_loss, loss);
                emit(s1, metric::train_lr, lr);
                emit(s1, metric::train_grad_norm, norm);
                emit(s1, metric::train_epoch, epoch_order_epochs(s1, global_samples, data->train_set_size()));
                emit(s1, metric::perf_step_ms, step_s * 1e3);
                emit(s1, metric::perf_tok_per_s, targets_per_step / step_s);
                emit(s1, metric::perf_gflops, flops_per_step / step_s / 1e9);
                for (int c = 0; c < kMemCategoryCount; ++c) {
                    auto cat = static_cast<MemCategory>(c);
                    emit(s1, metric::mem_category_bytes(cat), (double)mt.peak_bytes(cat));
                }
                emit(s1, metric::mem_total_bytes, (double)mt.total_peak_bytes());
                char line[256];
                std::snprintf(line, sizeof line,
                              "step %6lld/%lld | loss %.4f | lr %.2e | norm %.3f | %8.0f tok/s | "
                              "%7.1f ms | mem %s",
                              (long long)s1, (long long)cfg.train.steps, loss, lr, norm,
                              targets_per_step / step_s, step_s * 1e3,
                              human_bytes(mt.total_peak_bytes()).c_str());
                out << line << std::endl;
            }
            if (cfg.train.eval_every > 0 && (s1 % cfg.train.eval_every == 0 || s1 == cfg.train.steps))
                evaluate(s1);
            bool last = s1 == cfg.train.steps || g_stop;
            if (!cfg.checkpoint.dir.empty() &&
                ((cfg.checkpoint.every > 0 && s1 % cfg.checkpoint.every == 0) || last)) {
                res.checkpoint_dir = save_checkpoint(cfg, *model, opt, s1);
                sink->write(CheckpointRecord{s1, res.checkpoint_dir, telemetry_now()});
            }
            if (s1 % 16 == 0) sink->flush();
            if (g_stop && s1 < cfg.train.steps) {
                res.status = run_status::stopped;
                break;
            }
        }
        if (res.status.empty()) res.status = run_status::completed;
        sink->write(RunEndRecord{res.status, res.status == run_status::stopped ? "stopped by the user" : "",
                                 res.steps_done, telemetry_now()});
        sink->flush();
    } catch (const std::exception& e) {
        sink->write(ErrorRecord{0, res.steps_done, e.what(), telemetry_now()});
        sink->write(RunEndRecord{std::string(run_status::failed), e.what(), res.steps_done, telemetry_now()});
        sink->flush();
        throw;
    }
    return res;
}

}  // namespace tessera
