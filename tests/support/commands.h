// Test helpers for running programs the way a user does: a shell command line's exit code and
// merged output, and `tessera train` on a project with --set overrides. Header-only; bin_dir()
// (the build's bin folder) comes from tests/support/paths.h.
#pragma once
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/paths.h"

namespace tessera::test_support {

struct CommandResult {
    int exit_code = -1;  // 128 + the signal when one ended it
    std::string output;  // stdout and stderr together
};

// Runs a shell command line; returns its exit code and merged output.
inline CommandResult run_command(const std::string& cmd) {
    CommandResult r;
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    if (!p) return r;
    std::array<char, 4096> buf{};
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
    int status = pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return r;
}

// `tessera train PROJECT [ARGS] --set S...` as a shell command line.
inline std::string train_command(const std::filesystem::path& project,
                                 const std::vector<std::string>& sets,
                                 const std::string& args = "") {
    std::string cmd = bin_dir() + "/tessera train " + project.string();
    if (!args.empty()) cmd += " " + args;
    for (const auto& s : sets) cmd += " --set " + s;
    return cmd;
}

}  // namespace tessera::test_support
