// str_join: the items of a range as text with a separator between them (the one joiner; str_cat,
// the concatenating formatter, is in error.h).
#pragma once
#include <string>
#include <string_view>

namespace tessera {

// str_join(names, ", "), or with `text(item)` for what is not a string:
// str_join(sizes, "-", [](int n) { return std::to_string(n); }).
template <typename Range, typename Text>
std::string str_join(const Range& range, std::string_view sep, Text&& text) {
    std::string s;
    bool first = true;
    for (const auto& item : range) {
        if (!first) s += sep;
        first = false;
        s += text(item);
    }
    return s;
}
template <typename Range>
std::string str_join(const Range& range, std::string_view sep) {
    return str_join(
        range, sep, [](const auto& item) -> const auto& { return item; });
}

}  // namespace tessera
