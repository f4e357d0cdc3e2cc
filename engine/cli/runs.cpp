// `tessera runs list|show|export --db FILE [--run ID] [--csv]`: read-only views of runs.db.
// Opening is read-only, so a mistyped --db path is reported and never creates a database.
#include <charconv>
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "engine/cli/cli.h"
#include "engine/core/error.h"
#include "engine/store/run_report.h"
#include "engine/store/run_store.h"

namespace tessera {

namespace {

const char* kRunsUsage =
    "usage: tessera runs list   --db FILE\n"
    "       tessera runs show   --db FILE --run ID\n"
    "       tessera runs export --db FILE [--run ID] [--csv]   (CSV on stdout: "
    "run,step,rank,name,value,wall_time)\n";

struct RunsArgs {
    std::string action;
    std::string db;
    std::optional<int64_t> run;
    bool csv = false;
    bool help = false;
};

RunsArgs runs_parse_args(const CliArgs& args) {
    RunsArgs a;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& s = args[i];
        auto value = [&](const char* flag) -> const std::string& {
            if (i + 1 >= args.size())
                throw InputError(str_cat("runs: ", flag,
                                         " expects a value, found end of "
                                         "arguments\n",
                                         kRunsUsage));
            return args[++i];
        };
        if (s == "--help" || s == "-h") {
            a.help = true;
        } else if (s == "--db") {
            a.db = value("--db");
        } else if (s == "--run") {
            const std::string& v = value("--run");
            int64_t id = 0;
            auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), id);
            if (ec != std::errc() || p != v.data() + v.size() || id <= 0)
                throw InputError(
                    str_cat("runs: --run expects a run id (positive integer), found '", v, "'"));
            a.run = id;
        } else if (s == "--csv") {
            a.csv = true;
        } else if (!s.empty() && s[0] == '-') {
            throw InputError(str_cat("runs: unknown option '", s,
                                     "' (expected --db, --run, --csv)\n", kRunsUsage));
        } else if (a.action.empty()) {
            a.action = s;
        } else {
            throw InputError(str_cat("runs: unexpected argument '", s, "'\n", kRunsUsage));
        }
    }
    return a;
}

}  // namespace

int cli_runs(const CliArgs& args) {
    RunsArgs a = runs_parse_args(args);
    if (a.help) {
        std::cout << kRunsUsage;
        return 0;
    }
    if (a.action != "list" && a.action != "show" && a.action != "export")
        throw InputError(str_cat("runs: expected an action list|show|export, found '",
                                 a.action.empty() ? "nothing" : a.action, "'\n", kRunsUsage));
    if (a.db.empty()) throw InputError(str_cat("runs ", a.action, ": --db FILE is required"));

    RunStore store = RunStore::open(a.db, /*read_only=*/true);
    if (a.action == "list") {
        store_write_run_table(std::cout, store);
    } else if (a.action == "show") {
        if (!a.run) throw InputError("runs show: --run ID is required");
        store_write_run_detail(std::cout, store, *a.run);
    } else {
        std::vector<int64_t> ids;
        if (a.run) {
            if (!store.run_get(*a.run))
                throw InputError(str_cat(a.db, ": run ", *a.run, " not found"));
            ids.push_back(*a.run);
        }
        store.export_csv(std::cout, ids);
    }
    std::cout.flush();
    return 0;
}

}  // namespace tessera
