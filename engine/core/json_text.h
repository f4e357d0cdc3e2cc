// json_text: the one way a file's text is read and parsed as JSON for the engine, and the one way
// a message names the JSON value it found. Every reader of a JSON file (a Hugging Face config or
// tokenizer, a costs file, a data manifest, a checkpoint's manifest, a safetensors header, the
// preflight report) reports a parse failure the same way: "WHERE: not valid JSON (byte N):
// expected WHAT".
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace tessera {

// A whole file's bytes; nullopt when it cannot be opened.
std::optional<std::string> text_file_read(const std::string& path);

// `text` parsed; InputError "WHERE: not valid JSON (byte N): expected EXPECTED" when it is not
// JSON. `keep`, when given, is nlohmann's parser callback: what it returns false for stays out of
// the tree (a reader taking a large part of the file as it is read).
nlohmann::json json_parse_text(std::string_view text, const std::string& where,
                               const std::string& expected,
                               const nlohmann::json::parser_callback_t& keep = nullptr);

// A found value for "expected X, found ...": its type and its text, cut at 40 characters
// ("string \"abc\"", "number 3", "array [1,2]", "null").
std::string json_kind(const nlohmann::json& value);

}  // namespace tessera
