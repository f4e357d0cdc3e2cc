#include "engine/core/choice_cache.h"

#include <fcntl.h>
#include <sys/file.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "engine/core/error.h"
#include "engine/core/unique_fd.h"

namespace tessera {

std::string devices_cache_dir() {
    if (const char* d = std::getenv("TESSERA_DEVICES_DIR"); d && *d) return d;
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
        return std::string(x) + "/tessera/devices";
    const char* home = std::getenv("HOME");
    return std::string(home && *home ? home : ".") + "/.cache/tessera/devices";
}

std::string device_file_slug(const std::string& name) {
    std::string slug;
    for (char ch : name) {
        const char c = (char)std::tolower((unsigned char)ch);
        if (std::isalnum((unsigned char)c))
            slug += c;
        else if (!slug.empty() && slug.back() != '-')
            slug += '-';
    }
    while (!slug.empty() && slug.back() == '-') slug.pop_back();
    return slug;
}

void ChoiceCache::read_file() {
    std::ifstream in(path_);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream ls(line);
        std::string key, rest;
        long value = 0;
        if (!(ls >> key >> value) || (ls >> rest)) continue;  // not "KEY VALUE": ignored
        known_.emplace(key, (int)value);
    }
}

int ChoiceCache::get_or_choose(const std::string& key, const std::function<int()>& choose) {
    TS_CHECK(!key.empty() && key.find_first_of(" \t\n") == std::string::npos,
             "ChoiceCache: a key must be non-empty and without blanks, got '", key, "'");
    std::lock_guard<std::mutex> guard(mu_);
    if (auto it = known_.find(key); it != known_.end()) return it->second;
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
    UniqueFd lock(::open((path_ + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644));
    const bool locked = lock.get() >= 0 && ::flock(lock.get(), LOCK_EX) == 0;
    std::string why = locked ? "" : std::strerror(errno);
    if (locked) {
        read_file();  // another process may have chosen it meanwhile
        if (auto it = known_.find(key); it != known_.end()) return it->second;
    }
    const int value = choose();
    known_.emplace(key, value);
    if (locked) {
        std::ofstream out(path_, std::ios::app);
        out << key << ' ' << value << '\n';
        out.flush();
        if (!out) why = "cannot append to it";
    }
    if (!why.empty() && !warned_) {
        warned_ = true;
        std::cerr << "tessera: cannot keep choices in " << path_ << " (" << why
                  << "): they are made again by each process\n";
    }
    return value;  // the lock goes with `lock`
}

}  // namespace tessera
