#include "engine/model/hf_export.h"

#include <memory>

#include "engine/core/error.h"
#include "engine/io/safetensors.h"

namespace tessera {

void hf_export_weights(const ParamTable& table, const float* params, const HfTensorsOf& hf_tensors,
                       const std::string& path) {
    std::vector<TensorView> views;
    std::vector<std::unique_ptr<float[]>> transposed;  // GPT-2's Conv1D weights, [in, out]
    for (const ParamInfo& p : table.entries()) {
        int64_t covered = 0;
        for (const HfTensor& t : hf_tensors(p)) {
            const int64_t n = shape_numel(t.shape);
            TS_CHECK(t.offset == covered && covered + n <= p.numel, p.name, ": ", t.name,
                     " does not follow on the tensors before it");
            const float* src = params + p.offset + t.offset;
            if (t.transposed) {
                TS_CHECK(p.shape.size() == 2 && t.offset == 0 && n == p.numel, p.name,
                         ": only a whole matrix transposes");
                transposed.push_back(std::make_unique<float[]>(n));
                hf_transpose(src, p.shape[0], p.shape[1], transposed.back().get());
                src = transposed.back().get();
            }
            views.push_back({t.name, DType::f32, t.shape, src});
            covered += n;
        }
        TS_CHECK(covered == p.numel, p.name, ": its Hugging Face tensors hold ", covered, " of ",
                 p.numel, " values");
    }
    safetensors_write(path, views, {{"format", "pt"}});
}

}  // namespace tessera
