// tokenizer_vocab_size (tokenizer.h): a tokenizer's vocabulary size without building it. One
// SAX pass over the JSON keeps only the ids — a tokenizer.json's model.vocab values and
// added_tokens[].id, GPT-2's encoder.json values — and stops once it has them (a tokenizer.json's
// merges, half the file, come after model.vocab and are never read). No DOM, no BPE tables, no
// regex: about a tenth of the full load's time (Qwen3: 0.14 s against 1.5 s, Llama 3: 0.16 s
// against 2.1 s on a busy 2-core machine). Ranks use it to check their shards' ids
// (engine/train/data_source.cpp).
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/data/tokenizer.h"

namespace tessera {

namespace {

using nlohmann::json;

constexpr long long kMaxId = 1 << 30;  // as the full loads accept

// Where the parser is: one frame per open object or array.
struct Frame {
    bool array;
    std::string key;  // objects: the current member's key
    size_t index;     // arrays: the current element's index
};

class IdScan final : public nlohmann::json_sax<json> {
  public:
    enum class Layout { tokenizer_json, encoder_json };
    IdScan(std::string path, Layout layout) : path_(std::move(path)), layout_(layout) {}

    int vocab_size() const {
        if (layout_ == Layout::encoder_json) {
            if (!saw_root_object_)
                throw InputError(str_cat(path_, ": expected a JSON object of token -> id"));
            return (int)entries_;
        }
        if (!saw_root_object_)
            throw InputError(
                str_cat(path_, ": expected a JSON object (a Hugging Face tokenizer file)"));
        if (!saw_vocab_)
            throw InputError(str_cat(path_, ": model.vocab: expected an object of token -> id"));
        return (int)(max_id_ + 1);
    }
    bool done() const { return done_; }

    // ---- the SAX events ----
    bool null() override { return other("null"); }
    bool boolean(bool) override { return other("a boolean"); }
    bool number_float(number_float_t v, const string_t&) override { return other(str_cat(v)); }
    bool string(string_t&) override { return other("a string"); }
    bool binary(binary_t&) override { return other("binary"); }
    bool number_integer(number_integer_t v) override { return id((long long)v); }
    bool number_unsigned(number_unsigned_t v) override {
        return id(v > (number_unsigned_t)kMaxId ? kMaxId + 1 : (long long)v);
    }
    bool start_object(std::size_t) override {
        if (stack_.empty()) saw_root_object_ = true;
        stack_.push_back({false, "", 0});
        if (in_vocab()) saw_vocab_ = true;
        return true;
    }
    bool key(string_t& k) override {
        stack_.back().key = k;
        return true;
    }
    bool end_object() override {
        const bool vocab_ended = in_vocab();
        pop();
        // model.vocab is whole; added_tokens usually come first (stop now), else read on to them
        if (vocab_ended && saw_added_tokens_) done_ = true;
        return !done_;
    }
    bool start_array(std::size_t) override {
        stack_.push_back({true, "", 0});
        return true;
    }
    bool end_array() override {
        const bool added_ended = stack_.size() == 2 && stack_[0].key == "added_tokens";
        pop();
        if (added_ended) {
            saw_added_tokens_ = true;
            if (saw_vocab_) done_ = true;
        }
        return !done_;
    }
    bool parse_error(std::size_t position, const std::string&,
                     const nlohmann::detail::exception&) override {
        throw InputError(str_cat(path_, ": not valid JSON (byte ", position, "): expected ",
                                 layout_ == Layout::encoder_json
                                     ? "a JSON object of token -> id"
                                     : "a Hugging Face tokenizer file"));
    }

  private:
    std::string path_;
    Layout layout_;
    std::vector<Frame> stack_;
    long long max_id_ = -1;
    size_t entries_ = 0;
    bool saw_root_object_ = false, saw_vocab_ = false, saw_added_tokens_ = false, done_ = false;

    // Inside model.vocab's object: root {"model": {"vocab": {<here>}}}.
    bool in_vocab() const {
        return layout_ == Layout::tokenizer_json && stack_.size() == 3 && !stack_[0].array &&
               stack_[0].key == "model" && !stack_[1].array && stack_[1].key == "vocab" &&
               !stack_[2].array;
    }
    // An element of added_tokens: root {"added_tokens": [{"id": <here>}]}.
    bool in_added_id() const {
        return layout_ == Layout::tokenizer_json && stack_.size() == 3 &&
               stack_[0].key == "added_tokens" && stack_[1].array && !stack_[2].array &&
               stack_[2].key == "id";
    }
    bool in_encoder() const {
        return layout_ == Layout::encoder_json && stack_.size() == 1 && !stack_[0].array;
    }
    void pop() {
        stack_.pop_back();
        if (!stack_.empty() && stack_.back().array) ++stack_.back().index;
    }
    // Where a value sits, for an error: model.vocab["tok"], added_tokens[3].id, "tok".
    std::string where() const {
        if (in_encoder()) return str_cat("key \"", stack_[0].key, "\"");
        if (in_vocab()) return str_cat("model.vocab[\"", stack_[2].key, "\"]");
        return str_cat("added_tokens[", stack_[1].index, "].id");
    }
    bool id(long long v) {
        const bool counted = in_vocab() || in_added_id() || in_encoder();
        if (counted && (v < 0 || v > kMaxId))
            throw InputError(
                str_cat(path_, ": ", where(), ": expected a non-negative integer id, found ", v));
        if (counted) {
            max_id_ = std::max(max_id_, v);
            ++entries_;
        }
        return value_seen();
    }
    bool other(const std::string& found) {
        if (in_vocab() || in_added_id() || in_encoder())
            throw InputError(str_cat(path_, ": ", where(),
                                     ": expected a non-negative integer id, found ", found));
        return value_seen();
    }
    bool value_seen() {
        if (!stack_.empty() && stack_.back().array) ++stack_.back().index;
        return true;
    }
};

int ids_scan(const std::string& path, IdScan::Layout layout) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw InputError(str_cat(path, ": cannot open the file"));
    std::string text;
    f.seekg(0, std::ios::end);
    text.resize((size_t)std::max<std::streamoff>(0, f.tellg()));
    f.seekg(0, std::ios::beg);
    if (!f.read(text.data(), (std::streamsize)text.size()))
        throw InputError(str_cat(path, ": cannot read the file"));
    IdScan scan(path, layout);
    const bool whole = json::sax_parse(text, &scan);
    if (!whole && !scan.done()) throw InputError(str_cat(path, ": not valid JSON"));
    return scan.vocab_size();
}

}  // namespace

int tokenizer_vocab_size(const std::string& spec) {
    const std::vector<std::string> files = tokenizer_files(spec);
    if (files.empty()) return 256;  // bytes
    if (spec == "gpt2") return ids_scan(files[0], IdScan::Layout::encoder_json);
    return ids_scan(files[0], IdScan::Layout::tokenizer_json);
}

}  // namespace tessera
