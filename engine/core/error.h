// Errors: one exception type for the engine, a check macro that names file and line, and a
// concatenating formatter (GCC 12 has no std::format).
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace tessera {

template <typename... Args>
std::string str_cat(Args&&... args) {
    std::ostringstream os;
    (os << ... << std::forward<Args>(args));
    return os.str();
}

// A failure the user can act on. `exit_code` is what the CLI returns: 2 for bad input (config,
// data, checkpoint, host list), 1 for everything else.
class Error : public std::runtime_error {
  public:
    explicit Error(const std::string& what, int exit_code = 1)
        : std::runtime_error(what), exit_code_(exit_code) {}
    int exit_code() const { return exit_code_; }

  private:
    int exit_code_;
};

// Bad user input: exit code 2.
class InputError : public Error {
  public:
    explicit InputError(const std::string& what) : Error(what, 2) {}
};

}  // namespace tessera

#define TS_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond))                                                                               \
            throw ::tessera::Error(::tessera::str_cat(__FILE__, ":", __LINE__, ": check `", #cond, \
                                                      "` failed: ", __VA_ARGS__));                 \
    } while (0)
