// tessera: the command-line engine. Dispatches to the subcommands in engine/cli; every failure
// reaches the user as one line on stderr and an exit code (2 = bad input, 1 = other failure).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "engine/cli/cli.h"
#include "engine/core/error.h"

namespace {

const char* kUsage =
    "tessera " TESSERA_VERSION
    " — distributed transformer training engine\n"
    "\n"
    "usage: tessera <command> [options]\n"
    "\n"
    "commands:\n"
    "  train CONFIG [--steps N] [--db FILE] [--set key.path=value]...   train a model\n"
    "  check CONFIG [--set key.path=value]...                           validate a config\n"
    "  plan CONFIG [--device H200|H100|A100-80GB|A100-40GB|cpu] [--json] [--set k=v]...  estimate "
    "memory/time\n"
    "  runs list|show|export --db FILE [--run ID] [--csv]               inspect stored runs\n"
    "  data prepare brown [--vocab bytes|gpt2] [--force] | data prepare fashion-mnist | data "
    "where\n"
    "  data encode|decode --tokenizer FILE|DIR|gpt2|bytes   stdin text <-> ids (tokenizer.json "
    "BPE)\n"
    "  preflight CONFIG [--json]                                        check the cluster's hosts\n"
    "  hosts CONFIG [scan | trust HOST [--yes]]                         host keys of the cluster\n"
    "  launch-script CONFIG --format sbatch|mpirun                      the plan for Slurm / "
    "mpirun\n"
    "  sample --checkpoint DIR --prompt TEXT [--tokens N] [--temperature T] [--top-k K] [--seed "
    "S]\n"
    "  export --hf CHECKPOINT OUT_DIR [--force]                          a Hugging Face model "
    "folder\n"
    "  --version, --help\n"
    "\n"
    "Run `tessera <command> --help` for a command's options. Docs: docs/ in the source tree.\n";

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
        std::fputs(kUsage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    std::string cmd = argv[1];
    if (cmd == "--version" || cmd == "version") {
        std::printf("tessera %s\n", TESSERA_VERSION);
        return 0;
    }
    tessera::CliArgs args(argv + 2, argv + argc);
    try {
        if (cmd == "train") return tessera::cli_train(args);
        if (cmd == "check") return tessera::cli_check(args);
        if (cmd == "plan") return tessera::cli_plan(args);
        if (cmd == "runs") return tessera::cli_runs(args);
        if (cmd == "data") return tessera::cli_data(args);
        if (cmd == "sample") return tessera::cli_sample(args);
        if (cmd == "export") return tessera::cli_export(args);
        if (cmd == "preflight") return tessera::cli_preflight(args);
        if (cmd == "hosts") return tessera::cli_hosts(args);
        if (cmd == "launch-script") return tessera::cli_launch_script(args);
        if (cmd == "_rank") return tessera::cli_rank(args);
        if (cmd == "_node") return tessera::cli_node(args);
        if (cmd == "_probe") return tessera::cli_probe(args);
        std::fprintf(stderr, "tessera: unknown command '%s' (try `tessera --help`)\n", cmd.c_str());
        return 2;
    } catch (const tessera::Error& e) {
        std::fprintf(stderr, "tessera %s: error: %s\n", cmd.c_str(), e.what());
        return e.exit_code();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tessera %s: internal error: %s\n", cmd.c_str(), e.what());
        return 1;
    }
}
