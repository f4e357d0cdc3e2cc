// `tessera check CONFIG [--set key.path=value]...`: loads and validates a run config without
// training, then prints a one-line summary. Bad input throws InputError (exit code 2); the
// dispatcher in app/tessera_main.cpp prints it as `tessera check: error: <message>`.
#include <cstdio>
#include <string>
#include <vector>

#include "engine/cli/cli.h"
#include "engine/config/config.h"
#include "engine/core/error.h"

namespace tessera {

namespace {

const char* kCheckUsage =
    "usage: tessera check CONFIG [--set key.path=value]...\n"
    "\n"
    "Validates a run config (see docs/config.md) and prints a summary; exits 0 when valid,\n"
    "2 with one error `FILE:LINE:COL: key.path: expected ..., found ...` when not.\n"
    "\n"
    "options:\n"
    "  --set key.path=value   override a key before validation (repeatable),\n"
    "                         e.g. --set train.steps=5 --set parallel.stages=[2,2]\n"
    "  --help                 this text\n";

// "model gpt-tiny: 4 layers, d_model 128; world 1 = dp1 x tp1 x pp1"
std::string cli_check_summary(const RunConfig& cfg) {
    const ModelConfig& m = cfg.model;
    const ParallelConfig& p = cfg.parallel;
    std::string model;
    if (m.preset == "mlp") {
        model = "model mlp: hidden [";
        for (size_t i = 0; i < m.hidden.size(); ++i) model += str_cat(i ? ", " : "", m.hidden[i]);
        model += "]";
    } else {
        model = str_cat("model ", m.preset, ": ", m.n_layer, " layers, d_model ", m.d_model);
    }
    return str_cat(model, "; world ", p.dp * p.tp * p.pp, " = dp", p.dp, " x tp", p.tp, " x pp",
                   p.pp);
}

}  // namespace

int cli_check(const CliArgs& args) {
    std::string path;
    std::vector<std::string> overrides;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--help" || a == "-h") {
            std::fputs(kCheckUsage, stdout);
            return 0;
        } else if (a == "--set") {
            if (i + 1 >= args.size())
                throw InputError(
                    "--set: expected key.path=value after --set, found the end of the arguments");
            overrides.push_back(args[++i]);
        } else if (a.rfind("--set=", 0) == 0) {
            overrides.push_back(a.substr(6));
        } else if (!a.empty() && a[0] == '-') {
            throw InputError(str_cat(a,
                                     ": expected CONFIG, --set key.path=value or --help, found an ",
                                     "unknown option (see `tessera check --help`)"));
        } else if (path.empty()) {
            path = a;
        } else {
            throw InputError(
                str_cat(a, ": expected one CONFIG, found a second one (first: ", path, ")"));
        }
    }
    if (path.empty())
        throw InputError(
            "expected a CONFIG file argument, found none (usage: tessera check CONFIG "
            "[--set key.path=value]...)");
    RunConfig cfg = config_load(path, overrides);
    std::printf("ok: %s (%s)\n", path.c_str(), cli_check_summary(cfg).c_str());
    return 0;
}

}  // namespace tessera
