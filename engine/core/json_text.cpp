// json_text: file text and JSON parsing with one error form (json_text.h).
#include "engine/core/json_text.h"

#include <fstream>
#include <sstream>

#include "engine/core/error.h"

namespace tessera {

std::optional<std::string> text_file_read(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return std::nullopt;
    std::ostringstream text;
    text << f.rdbuf();
    return std::move(text).str();
}

nlohmann::json json_parse_text(std::string_view text, const std::string& where,
                               const std::string& expected,
                               const nlohmann::json::parser_callback_t& keep) {
    try {
        return nlohmann::json::parse(text.begin(), text.end(), keep);
    } catch (const nlohmann::json::parse_error& e) {
        throw InputError(
            str_cat(where, ": not valid JSON (byte ", e.byte, "): expected ", expected));
    }
}

std::string json_kind(const nlohmann::json& value) {
    std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (text == value.type_name()) return text;  // null
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    return str_cat(value.type_name(), " ", text);
}

}  // namespace tessera
