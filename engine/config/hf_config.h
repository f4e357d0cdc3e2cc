// Reading a Hugging Face model folder's JSON files (config.json, model.safetensors.index.json).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace tessera {

// The parsed file; InputError naming the path when it is missing or not JSON (`missing` says
// what the caller expected to find there).
nlohmann::json hf_read_json(const std::string& path, const std::string& missing);

}  // namespace tessera
