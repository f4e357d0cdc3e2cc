// Choices that the processes of one host make once and then share: a text file of lines
// "KEY VALUE" (KEY without blanks, VALUE an integer), read and appended under an exclusive
// flock(2) of PATH.lock, so that when several processes (a node's ranks) need the same choice at
// once, the first makes it and the others read it, and every later run reads it too. Its use: the
// GEMM algorithm each shape runs (engine/kernels/cuda/matmul.cu), timed once per host, so that a
// run's bits do not depend on that timing's noise from one run to the next.
//
// A line that does not parse is ignored (the file is a cache: a choice missing is made again).
// Where the file cannot be used (no folder, read-only), choices are made in memory only and one
// line on stderr says so, once per file.
#pragma once
#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace tessera {

// $TESSERA_DEVICES_DIR, else ${XDG_CACHE_HOME:-$HOME/.cache}/tessera/devices: what Tessera
// measures of a host's devices (CPU op costs, GEMM choices).
std::string devices_cache_dir();
// A device's name as part of a file name there: lower case, runs of [a-z0-9] joined by '-'
// ("NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3").
std::string device_file_slug(const std::string& name);

class ChoiceCache {
  public:
    explicit ChoiceCache(std::string path) : path_(std::move(path)) {}
    // KEY's value: the file's (or this process's) where there is one, else choose()'s, recorded.
    // choose() runs under the file's lock. KEY must be non-empty and free of blanks.
    int get_or_choose(const std::string& key, const std::function<int()>& choose);
    const std::string& path() const { return path_; }

  private:
    void read_file();  // known_ += the file's lines (the first line of a key wins)
    std::string path_;
    std::mutex mu_;
    std::map<std::string, int> known_;
    bool warned_ = false;
};

}  // namespace tessera
