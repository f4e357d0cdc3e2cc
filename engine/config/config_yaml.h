// YAML plumbing for the config loader (internal to engine/config): a guarded load that turns
// every yaml-cpp failure into one InputError, duplicate-key detection, mark formatting, value
// descriptions for messages, and the edit-distance "did you mean" helper.
#pragma once
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace tessera {

// Documents nested deeper than this (sequences/maps inside each other) are rejected before
// yaml-cpp can recurse on them.
constexpr int kConfigMaxDepth = 64;
// Config files larger than this are rejected unread (a config is a few hundred bytes).
constexpr size_t kConfigMaxBytes = 4u << 20;

// "FILE:LINE:COL" from a 0-based yaml-cpp mark (1-based in the text); "FILE:1:1" for a null mark.
std::string yaml_format_mark(const std::string& file, const YAML::Mark& mark);

// Parses `text` into a node tree. Throws one InputError (prefixed `where`, e.g. the file name or
// "--set k=v") for: syntax errors (yaml-cpp's mark and message), nesting deeper than
// kConfigMaxDepth, aliases (*name), more than one document, and duplicate map keys (naming both
// positions). `key_path` names the document's place in the config for messages.
YAML::Node yaml_load_guarded(const std::string& text, const std::string& where,
                             const std::string& key_path, bool where_is_file);

// How a node reads in "found ..." phrases: 'ten', the string "5", a sequence, a map, nothing.
std::string yaml_describe_node(const YAML::Node& node);

// Levenshtein distance between two short strings.
int text_edit_distance(const std::string& a, const std::string& b);
// "did you mean 'X'?" for the closest candidate within a small distance, else "".
std::string text_suggest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace tessera
