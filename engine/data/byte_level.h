// Byte-level BPE's alphabet (GPT-2's bytes_to_unicode): every byte stands for one printable
// character (printable Latin-1 bytes for themselves, the others for U+0100 + n), so any byte
// string becomes text a BPE vocabulary can hold. Shared by the GPT-2 tokenizer (gpt2_bpe.cpp)
// and tokenizer.json's ByteLevel pre-tokenizer and decoder (hf_tokenizer.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>

namespace tessera {

struct ByteLevelMap {
    std::string encode[256];                       // byte -> UTF-8 of its stand-in character
    std::unordered_map<uint32_t, uint8_t> decode;  // stand-in code point -> byte
};

// The one map (built once, thread-safe).
const ByteLevelMap& byte_level_map();

}  // namespace tessera
