// The per-category memory metric names (see metric_names.h).
#include "engine/telemetry/metric_names.h"

namespace tessera::metric {

std::string mem_category_bytes(MemCategory c) {
    std::string_view cat = mem_category_name(c);
    std::string s;
    s.reserve(mem_prefix.size() + cat.size() + 6);
    s.append(mem_prefix).append(cat).append("_bytes");
    return s;
}

std::optional<MemCategory> mem_category_of(std::string_view name) {
    constexpr std::string_view suffix = "_bytes";
    if (name.size() <= mem_prefix.size() + suffix.size() || !name.starts_with(mem_prefix) ||
        !name.ends_with(suffix))
        return std::nullopt;
    std::string_view cat =
        name.substr(mem_prefix.size(), name.size() - mem_prefix.size() - suffix.size());
    for (int c = 0; c < kMemCategoryCount; ++c)
        if (mem_category_name(static_cast<MemCategory>(c)) == cat)
            return static_cast<MemCategory>(c);
    return std::nullopt;
}

}  // namespace tessera::metric
