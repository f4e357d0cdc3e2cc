// A word -> token ids cache for BPE tokenizers whose const encode runs on many threads at once
// (`tessera data prepare`'s workers): 16 shards, each with its own mutex, so threads seldom wait
// on one another (one mutex cost a third of the throughput of two threads on a busy machine).
// Entries are never removed: a returned reference stays valid.
#pragma once
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tessera {

class BpeWordCache {
public:
    // The ids of `word`, computed by make(word) the first time.
    template <class F>
    const std::vector<int>& get(const std::string& word, F&& make) const {
        Shard& s = shards_[std::hash<std::string>{}(word) % kShards];
        {
            std::lock_guard<std::mutex> lock(s.mutex);
            auto it = s.map.find(word);
            if (it != s.map.end()) return it->second;
        }
        std::vector<int> ids = make(word);
        std::lock_guard<std::mutex> lock(s.mutex);
        return s.map.emplace(word, std::move(ids)).first->second;  // node references stay valid
    }

private:
    static constexpr size_t kShards = 16;
    struct Shard {
        std::mutex mutex;
        std::unordered_map<std::string, std::vector<int>> map;
    };
    mutable Shard shards_[kShards];
};

}  // namespace tessera
