// A communicator on the meta device (the estimator's ParamStore): it moves nothing and allocates
// nothing, but answers as the backend it stands in for, so the store takes the same paths and
// allocates the same buffers as on that backend.
//   Gloo (CPU ranks): no background collectives, no symmetric buffers — the store reduces on
//     its comm thread and gathers through comm slices.
//   NCCL (GPUs): background all-reduces and reduce-scatters; bf16 all-gathers into the
//     symmetric image buffer; symmetric buffers (placeholders: their bytes are counted by the
//     store). fp32 all-gathers go through the comm thread, as the estimator has always
//     predicted them.
#pragma once
#include <memory>

#include "engine/parallel/comm.h"

namespace tessera {

enum class MetaBackend { gloo, nccl };

// Group rank `rank` of `size`.
std::unique_ptr<Communicator> comm_meta_create(MetaBackend backend, int rank, int size);

}  // namespace tessera
