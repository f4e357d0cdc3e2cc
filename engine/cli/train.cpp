// `tessera train CONFIG [--steps N] [--db FILE] [--set k=v]... [--resume | --resume-from DIR]`
//
// One rank (dp = tp = pp = 1): trains in this process, as the parallel runtime's 1x1x1 case (the
// same step loop as every rank). Several: this process becomes the job's launcher (engine/launch)
// and starts one `tessera _rank` process per rank. Started by torchrun,
// mpirun or srun (RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, SLURM_* set), it runs as one rank itself;
// rank 0 then writes the run store.
#include <unistd.h>

#include <csignal>
#include <iostream>

#include "engine/cli/cli.h"
#include "engine/config/config.h"
#include "engine/core/error.h"
#include "engine/kernels/cpu/threads.h"
#ifdef TESSERA_HAVE_CUDA
#include "engine/kernels/cuda/device.cuh"
#endif
#include "engine/launch/cluster.h"
#include "engine/launch/launcher.h"
#include "engine/parallel/comm.h"
#include "engine/store/run_store.h"
#include "engine/telemetry/metric_names.h"
#include "engine/train/parallel_trainer.h"

namespace tessera {

static const char* kTrainUsage =
    "usage: tessera train CONFIG [options]\n"
    "  --steps N          override train.steps\n"
    "  --db FILE          run store (default: log.db of the config)\n"
    "  --set KEY=VALUE    override any config key (repeatable), e.g. --set train.lr=3e-4\n"
    "  --resume           continue from the newest checkpoint in checkpoint.dir\n"
    "  --resume-from DIR  continue from this checkpoint\n";

namespace {

struct TrainArgs {
    std::string config_path;
    std::vector<std::string> sets;
    TrainOptions opts;
    bool help = false;
};

TrainArgs parse_train_args(const CliArgs& args, const char* cmd) {
    TrainArgs t;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&]() -> const std::string& {
            if (i + 1 >= args.size()) throw InputError(str_cat(cmd, ": ", a, " needs a value"));
            return args[++i];
        };
        if (a == "--help" || a == "-h")
            t.help = true;
        else if (a == "--steps") {
            const std::string& v = value();
            if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos ||
                std::stoll(v) < 1)
                throw InputError(
                    str_cat(cmd, ": --steps: expected an integer >= 1, found '", v, "'"));
            t.sets.push_back("train.steps=" + v);
        } else if (a == "--db")
            t.opts.db_path = value();
        else if (a == "--set")
            t.sets.push_back(value());
        else if (a == "--resume")
            t.opts.resume = true;
        else if (a == "--resume-from")
            t.opts.resume_from = value();
        else if (!a.empty() && a[0] == '-')
            throw InputError(str_cat(cmd, ": unknown option '", a, "'\n", kTrainUsage));
        else if (t.config_path.empty())
            t.config_path = a;
        else
            throw InputError(str_cat(cmd, ": unexpected argument '", a, "'"));
    }
    if (!t.help && t.config_path.empty())
        throw InputError(str_cat(cmd, ": missing CONFIG\n", kTrainUsage));
    return t;
}

class NullSink final : public TelemetrySink {
  public:
    void write(const Record&) override {}
};

// Runs this process as one rank of a parallel job.
int run_rank(const RunConfig& cfg, const RankEnv& env, const TrainOptions& opts) {
    MeshShape mesh{cfg.parallel.dp, cfg.parallel.tp, cfg.parallel.pp};
    if (env.world_size != mesh.world())
        throw InputError(str_cat(cfg.source_path, ": parallel: dp x tp x pp = ", mesh.world(),
                                 " but the launcher (", env.source, ") started ", env.world_size,
                                 " ranks"));
    // ranks on this host share its cores (the launcher's ranks all run here)
    int local_ranks = env.source == "tessera" ? mesh.world() : 1;
    if (const char* n = std::getenv("LOCAL_WORLD_SIZE")) local_ranks = std::max(1, std::atoi(n));
    threads_configure(cfg.train.threads, local_ranks);
    CommOptions co;
    if (cfg.runtime.device == "cuda") {
#ifdef TESSERA_HAVE_CUDA
        cuda_device_init(env.local_rank);  // before NCCL: one GPU per rank on its host
        co.backend = "nccl";
#else
        throw InputError(str_cat(cfg.source_path,
                                 ": runtime.device: cuda, but this tessera was "
                                 "built without CUDA (configure with nvcc present)"));
#endif
    }
    if (const char* ms = std::getenv("TESSERA_COMM_TIMEOUT_MS"))  // watchdog; default 60 s
        co.timeout = std::chrono::milliseconds(std::max(100, std::atoi(ms)));
    ProcessGroups groups = comm_create_groups(env, mesh, co);
    // Where telemetry goes: the launcher's pipe; or, for the rank that writes the run itself (one
    // rank in this process, or rank 0 under torchrun / mpirun / srun), runs.db, opened once the
    // rank is built and its weights loaded (bad input records no run); other ranks: nowhere.
    std::unique_ptr<TelemetrySink> sink;
    std::unique_ptr<RunStore> store;
    int64_t run_id = 0;
    if (const char* fd = std::getenv("TESSERA_TELEMETRY_FD"))
        sink = telemetry_stream_sink(std::atoi(fd));
    else if (env.rank != 0)
        sink = std::make_unique<NullSink>();
    auto open_sink = [&]() -> TelemetrySink& {
        if (!sink) {
            std::string db =
                opts.db_path.empty() ? config_resolve_path(cfg, cfg.log.db) : opts.db_path;
            store = std::make_unique<RunStore>(RunStore::open(db));
            RunStartRecord start{cfg.name, cfg.source_text, telemetry_host_name(), mesh.world(),
                                 "",       telemetry_now()};
            run_id = store->run_begin(start);
            sink = store_sink(*store, run_id);
            std::cout << "tessera: run " << run_id << " in " << db << std::endl;
        }
        return *sink;
    };
    int64_t steps_done = 0;
    try {
        TrainOptions rank_opts = opts;
        rank_opts.host_metrics = env.local_rank == 0;
        TrainResult r =
            parallel_train_rank(cfg, groups, open_sink, rank_opts, std::cout, &steps_done);
        if (env.rank == 0 || r.status == run_status::stopped)
            sink->write(RunEndRecord{r.status,
                                     r.status == run_status::stopped ? "stopped by the user" : "",
                                     r.steps_done, telemetry_now()});
        sink->flush();
        if (store) {  // this process wrote the run: say how it ended
            std::cout << "tessera: run " << run_id << " " << r.status << " after " << r.steps_done
                      << " steps; train loss " << r.last_train_loss;
            if (r.last_val_loss >= 0) std::cout << ", val loss " << r.last_val_loss;
            if (r.last_val_accuracy >= 0) std::cout << ", test accuracy " << r.last_val_accuracy;
            std::cout << std::endl;
        }
        // under the launcher a stopped rank exits 0: the launcher reads "stopped" from run_end
        if (r.status == run_status::stopped && std::getenv("TESSERA_TELEMETRY_FD")) return 0;
        return run_status::exit_code(r.status);
    } catch (const std::exception& e) {
        if (sink) {  // a run that started (or the launcher's pipe) records why it ended
            sink->write(ErrorRecord{env.rank, steps_done, e.what(), telemetry_now()});
            if (store)
                sink->write(RunEndRecord{std::string(run_status::failed), e.what(), steps_done,
                                         telemetry_now()});
            sink->flush();
        }
        throw;
    }
}

}  // namespace

int cli_train(const CliArgs& args) {
    TrainArgs t = parse_train_args(args, "train");
    if (t.help) {
        std::cout << kTrainUsage;
        return 0;
    }
    RunConfig cfg = config_load(t.config_path, t.sets);
    const int world = cfg.parallel.dp * cfg.parallel.tp * cfg.parallel.pp;
    RankEnv env = rank_env_from_environment();
    if (env.source != "single" && env.source != "tessera") return run_rank(cfg, env, t.opts);
    bool remote = !cfg.cluster.hosts.empty();
    if (world == 1 && !remote) {
        // one rank: the runtime at 1x1x1 in this process (it writes the store itself); Ctrl-C
        // and SIGTERM stop it after the current step, with a checkpoint where one is configured
        std::signal(SIGINT, [](int) { train_request_stop(); });
        std::signal(SIGTERM, [](int) { train_request_stop(); });
        return run_rank(cfg, env, t.opts);
    }
    // the launcher: one `tessera _rank` process per rank (or, with cluster hosts, one node
    // launcher per host over ssh); this process writes the store
    LaunchSpec spec;
    spec.mesh = MeshShape{cfg.parallel.dp, cfg.parallel.tp, cfg.parallel.pp};
    std::vector<std::string> rank_args;
    if (t.opts.resume) rank_args.push_back("--resume");
    if (!t.opts.resume_from.empty()) {
        rank_args.push_back("--resume-from");
        rank_args.push_back(t.opts.resume_from);
    }
    spec.argv = {cli_self_exe(), "_rank", t.config_path};
    for (const auto& s : t.sets) {
        spec.argv.push_back("--set");
        spec.argv.push_back(s);
    }
    spec.argv.insert(spec.argv.end(), rank_args.begin(), rank_args.end());
    spec.resume_argv = {"--resume"};
    if (!cfg.cluster.hosts.empty())
        cluster_fill_launch_spec(cfg, rank_args, spec.resume_argv, spec);
    spec.restarts = cfg.train.restarts;
    spec.run = RunStartRecord{cfg.name, cfg.source_text, telemetry_host_name(), world,
                              "",       telemetry_now()};
    spec.db_path = t.opts.db_path.empty() ? config_resolve_path(cfg, cfg.log.db) : t.opts.db_path;
    std::signal(SIGINT, [](int) { launch_request_stop(); });
    std::signal(SIGTERM, [](int) { launch_request_stop(); });
    LaunchResult r = launch_job(spec, std::cout);
    std::cout << "tessera: run " << r.run_id << " " << r.status << " after " << r.last_step
              << " steps (" << world << " ranks, " << r.attempts << " attempt"
              << (r.attempts == 1 ? "" : "s") << ")";
    if (!r.message.empty()) std::cout << ": " << r.message;
    std::cout << "\n";
    return run_status::exit_code(r.status);
}

std::string cli_self_exe() {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) throw Error("cannot find the tessera executable (/proc/self/exe)");
    buf[n] = 0;
    return buf;
}

// `tessera _rank CONFIG ...`: one rank, started by the launcher (not for users).
int cli_rank(const CliArgs& args) {
    TrainArgs t = parse_train_args(args, "_rank");
    // A rank of a multi-host job gets its config as text (the node launcher's host may not
    // have the file); relative paths resolve against the config's name (the working directory).
    const char* text = std::getenv("TESSERA_CONFIG_TEXT");
    RunConfig cfg =
        text ? config_parse(text, t.config_path, t.sets) : config_load(t.config_path, t.sets);
    std::signal(SIGINT, [](int) { train_request_stop(); });
    return run_rank(cfg, rank_env_from_environment(), t.opts);
}

}  // namespace tessera
