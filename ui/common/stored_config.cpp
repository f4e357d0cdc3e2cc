// A stored run's config as the pages read it (stored_config.h).
#include "ui/common/stored_config.h"

#include <filesystem>

namespace tessera::studio {

tessera::RunConfig stored_run_config(const tessera::RunStore& store, const std::string& config_text,
                                     const std::string& name) {
    std::error_code ec;
    const std::filesystem::path db = std::filesystem::absolute(store.path(), ec);
    return tessera::config_parse(config_text, name, {}, ec ? "" : db.parent_path().string(),
                                 tessera::ConfigFiles::may_be_missing);
}

}  // namespace tessera::studio
