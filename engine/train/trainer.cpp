#include "engine/train/trainer.h"

#include <atomic>

namespace tessera {

namespace {
std::atomic<bool> g_stop{false};
}  // namespace

void train_request_stop() {
    g_stop = true;
}
bool train_stop_requested() {
    return g_stop;
}

}  // namespace tessera
