// Test helpers for tests/store: a temporary directory removed at scope exit.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>

struct TempDir {
    std::filesystem::path path;
    TempDir() {
        std::string tmpl =
            (std::filesystem::temp_directory_path() / "tessera_store_XXXXXX").string();
        if (!mkdtemp(tmpl.data())) std::abort();
        path = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    std::string file(const std::string& name) const { return (path / name).string(); }
};
