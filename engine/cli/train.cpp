// `tessera train CONFIG [--steps N] [--db FILE] [--set k=v]... [--resume | --resume-from DIR]`
#include <csignal>
#include <iostream>

#include "engine/cli/cli.h"
#include "engine/config/config.h"
#include "engine/core/error.h"
#include "engine/train/trainer.h"

namespace tessera {

static const char* kTrainUsage =
    "usage: tessera train CONFIG [options]\n"
    "  --steps N          override train.steps\n"
    "  --db FILE          run store (default: log.db of the config)\n"
    "  --set KEY=VALUE    override any config key (repeatable), e.g. --set train.lr=3e-4\n"
    "  --resume           continue from the newest checkpoint in checkpoint.dir\n"
    "  --resume-from DIR  continue from this checkpoint\n";

int cli_train(const CliArgs& args) {
    std::string config_path;
    std::vector<std::string> sets;
    TrainOptions opts;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&]() -> const std::string& {
            if (i + 1 >= args.size()) throw InputError(str_cat("train: ", a, " needs a value"));
            return args[++i];
        };
        if (a == "--help" || a == "-h") {
            std::cout << kTrainUsage;
            return 0;
        } else if (a == "--steps") {
            sets.push_back("train.steps=" + value());
        } else if (a == "--db") {
            opts.db_path = value();
        } else if (a == "--set") {
            sets.push_back(value());
        } else if (a == "--resume") {
            opts.resume = true;
        } else if (a == "--resume-from") {
            opts.resume_from = value();
        } else if (!a.empty() && a[0] == '-') {
            throw InputError(str_cat("train: unknown option '", a, "'\n", kTrainUsage));
        } else if (config_path.empty()) {
            config_path = a;
        } else {
            throw InputError(str_cat("train: unexpected argument '", a, "'"));
        }
    }
    if (config_path.empty()) throw InputError(str_cat("train: missing CONFIG\n", kTrainUsage));
    RunConfig cfg = config_load(config_path, sets);
    std::signal(SIGINT, [](int) { train_request_stop(); });
    std::signal(SIGTERM, [](int) { train_request_stop(); });
    TrainResult r = train_run(cfg, opts);
    std::cout << "tessera: run " << r.run_id << " " << r.status << " after " << r.steps_done
              << " steps; train loss " << r.last_train_loss;
    if (r.last_val_loss >= 0) std::cout << ", val loss " << r.last_val_loss;
    if (cfg.model.preset == "mlp" && r.last_val_accuracy >= 0)
        std::cout << ", test accuracy " << r.last_val_accuracy;
    std::cout << "\n";
    return r.status == "completed" ? 0 : 1;
}

}  // namespace tessera
