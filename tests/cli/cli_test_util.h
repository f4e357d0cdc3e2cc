// Helpers for the CLI end-to-end tests: run the real `tessera` binary (fork + exec) capturing
// stdout, stderr and the exit code; fresh temp dirs; small file utilities.
#pragma once
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"

namespace tessera_cli_test {

namespace fs = std::filesystem;

inline std::string tessera_bin() {
    return std::string(TESSERA_BIN_DIR) + "/tessera";
}
inline std::string projects_dir() {
    return std::string(TESSERA_TESTS_DIR) + "/../projects";
}

struct ProcResult {
    int exit_code = -1;  // -1 when killed by a signal (see term_signal)
    int term_signal = 0;
    std::string out, err;
    double seconds = 0;  // wall time from spawn to exit
};

// A running `tessera` child with stdout and stderr on pipes.
class Child {
  public:
    explicit Child(const std::vector<std::string>& args, const std::string& cwd = "") {
        int o[2], e[2];
        if (pipe(o) != 0 || pipe(e) != 0) throw std::runtime_error("pipe failed");
        t0_ = std::chrono::steady_clock::now();
        pid_ = fork();
        if (pid_ < 0) throw std::runtime_error("fork failed");
        if (pid_ == 0) {
            dup2(o[1], 1);
            dup2(e[1], 2);
            close(o[0]);
            close(o[1]);
            close(e[0]);
            close(e[1]);
            if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(127);
            std::vector<std::string> full{tessera_bin()};
            full.insert(full.end(), args.begin(), args.end());
            std::vector<char*> argv;
            for (auto& s : full) argv.push_back(s.data());
            argv.push_back(nullptr);
            execv(argv[0], argv.data());
            _exit(127);
        }
        close(o[1]);
        close(e[1]);
        out_fd_ = o[0];
        err_fd_ = e[0];
    }
    ~Child() {
        if (pid_ > 0 && !reaped_) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        if (out_fd_ >= 0) close(out_fd_);
        if (err_fd_ >= 0) close(err_fd_);
    }
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    pid_t pid() const { return pid_; }
    const std::string& out() const { return out_; }
    const std::string& err() const { return err_; }

    // Reads from both pipes until `done(out)` is true, both pipes close, or timeout_s passes.
    // Returns whether `done` became true.
    bool read_until(const std::function<bool(const std::string&)>& done, double timeout_s) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
        while (true) {
            if (done && done(out_)) return true;
            if (out_fd_ < 0 && err_fd_ < 0) return false;
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
            if (left <= 0) return false;
            pollfd p[2];
            int n = 0;
            if (out_fd_ >= 0) p[n++] = {out_fd_, POLLIN, 0};
            if (err_fd_ >= 0) p[n++] = {err_fd_, POLLIN, 0};
            int r = poll(p, n, (int)std::min<long long>(left, 200));
            if (r <= 0) continue;
            for (int i = 0; i < n; ++i) {
                if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
                char buf[65536];
                ssize_t k = read(p[i].fd, buf, sizeof buf);
                bool is_out = p[i].fd == out_fd_;
                if (k > 0) {
                    (is_out ? out_ : err_).append(buf, (size_t)k);
                } else {
                    close(p[i].fd);
                    (is_out ? out_fd_ : err_fd_) = -1;
                }
            }
        }
    }

    // Drains the pipes and waits for exit (SIGKILL after timeout_s).
    ProcResult finish(double timeout_s) {
        bool closed =
            read_until([&](const std::string&) { return out_fd_ < 0 && err_fd_ < 0; }, timeout_s);
        if (!closed) kill(pid_, SIGKILL);
        int status = 0;
        waitpid(pid_, &status, 0);
        reaped_ = true;
        ProcResult r;
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
        if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
        if (!closed) r.term_signal = SIGKILL;
        r.out = out_;
        r.err = err_;
        return r;
    }

  private:
    pid_t pid_ = -1;
    int out_fd_ = -1, err_fd_ = -1;
    bool reaped_ = false;
    std::string out_, err_;
    std::chrono::steady_clock::time_point t0_;
};

// Runs `tessera ARGS...` to completion (killed after timeout_s).
inline ProcResult run_tessera(const std::vector<std::string>& args, double timeout_s = 120,
                              const std::string& cwd = "") {
    Child c(args, cwd);
    return c.finish(timeout_s);
}

// What a command did, for failure messages: exit code, signal, stdout (its last 8000 bytes),
// stderr.
inline std::string show(const ProcResult& r) {
    const size_t keep = 8000;
    return "exit " + std::to_string(r.exit_code) + " (signal " + std::to_string(r.term_signal) +
           ")\n--- stdout" + (r.out.size() > keep ? " (tail)" : "") + " ---\n" +
           r.out.substr(r.out.size() > keep ? r.out.size() - keep : 0) + "--- stderr ---\n" + r.err;
}

// The command was refused as bad input (exit 2) and its message says `says`.
inline void expect_refused(const ProcResult& r, const std::string& says) {
    EXPECT_EQ(r.exit_code, 2) << show(r);
    EXPECT_NE(r.err.find(says), std::string::npos) << show(r);
}

using tessera::test_support::TempDir;  // a test's scratch folder (tests/support/temp_dir.h)

inline void write_file(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
    if (!f) throw std::runtime_error("cannot write " + path);
}

inline std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

// A shipped project as a user has it after its README's first step: a project with a prepare.sh
// (its data is made from text: projects/qwen3-own-data) is copied into `tmp` and prepared there
// with `TESSERA=<this tessera> bash prepare.sh`; any other is used where it is. Returns its
// project.yaml, or "" (with a test failure) when preparing failed.
inline std::string shipped_project_yaml(const fs::path& dir, const TempDir& tmp) {
    if (!fs::exists(dir / "prepare.sh")) return (dir / "project.yaml").string();
    const fs::path copy = tmp.path() / dir.filename();
    fs::copy(dir, copy, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    for (const char* made : {"texts", "data", "checkpoints", "runs.db"})
        fs::remove_all(copy / made);
    const std::string cmd = "TESSERA='" + tessera_bin() + "' bash '" +
                            (copy / "prepare.sh").string() + "' > '" +
                            (copy / "prepare.log").string() + "' 2>&1";
    if (std::system(cmd.c_str()) != 0) {
        ADD_FAILURE() << cmd << " failed:\n" << read_file((copy / "prepare.log").string());
        return "";
    }
    return (copy / "project.yaml").string();
}

inline std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    std::stringstream s(text);
    std::string l;
    while (std::getline(s, l)) lines.push_back(l);
    return lines;
}

inline size_t count_lines(const std::string& text) {
    size_t n = 0;
    for (char c : text) n += c == '\n';
    if (!text.empty() && text.back() != '\n') ++n;
    return n;
}

// A one-second tiny GPT on Brown: 2 layers, d_model 64, seq 32, micro_batch 4.
// warmup_steps >= steps of a first half, so the LR of steps 1..warmup does not depend on
// train.steps (a run cut short at N has the same schedule as the first N of a 2N run).
inline std::string tiny_gpt_yaml(int steps, int ckpt_every, int warmup, int eval_every = 0) {
    std::ostringstream s;
    s << "name: tiny-gpt\n"
      << "model: {preset: gpt-tiny, n_layer: 2, d_model: 64, n_head: 2, seq_len: 32}\n"
      << "data: {dataset: brown}\n"
      << "train: {steps: " << steps << ", micro_batch: 4, warmup_steps: " << warmup
      << ", eval_every: " << eval_every << ", eval_steps: 2, seed: 42}\n"
      << "checkpoint: {dir: ck, every: " << ckpt_every << ", keep: 5}\n"
      << "log: {db: runs.db, every: 1}\n";
    return s.str();
}

inline std::string tiny_mlp_yaml(int steps, int ckpt_every, int warmup) {
    std::ostringstream s;
    s << "name: tiny-mlp\n"
      << "model: {preset: mlp, hidden: [32]}\n"
      << "data: {dataset: fashion-mnist}\n"
      << "train: {steps: " << steps << ", micro_batch: 16, warmup_steps: " << warmup
      << ", eval_every: 0, seed: 3}\n"
      << "checkpoint: {dir: ck, every: " << ckpt_every << ", keep: 5}\n"
      << "log: {db: runs.db, every: 1}\n";
    return s.str();
}

inline std::string step_dir(const std::string& root, int step) {
    char b[32];
    std::snprintf(b, sizeof b, "/step_%08d", step);
    return root + b;
}

}  // namespace tessera_cli_test
