// `tessera sample --checkpoint DIR --prompt TEXT [--tokens N] [--temperature T] [--top-k K] [--seed
// S]
//  [--device cpu|cuda]`: GPT through its single-rank model; the Llama family through the runtime's
// layers with a key/value cache, on the CPU or a GPU.
#include <iostream>

#include "engine/cli/cli.h"
#include "engine/config/config.h"
#include "engine/core/error.h"
#include "engine/data/tokenizer.h"
#include "engine/io/checkpoint.h"
#ifdef TESSERA_HAVE_CUDA
#include "engine/kernels/cuda/device.cuh"
#endif
#include "engine/model/gpt.h"
#include "engine/parallel/layer_ops.h"
#include "engine/train/sampler.h"

namespace tessera {

static const char* kSampleUsage =
    "usage: tessera sample --checkpoint DIR [--prompt TEXT] [--tokens N] [--temperature T]\n"
    "                      [--top-k K] [--seed S] [--device cpu|cuda]\n"
    "  DIR is a checkpoint directory or a checkpoint root (its newest checkpoint is used).\n"
    "  --device: where a Llama-family model decodes (default: the run's runtime.device);\n"
    "  --temperature 0 is greedy.\n";

int cli_sample(const CliArgs& args) {
    std::string ckpt, prompt, device;
    SampleOptions o;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&]() -> const std::string& {
            if (i + 1 >= args.size()) throw InputError(str_cat("sample: ", a, " needs a value"));
            return args[++i];
        };
        auto number = [&](double lo, double hi) {
            const std::string& v = value();
            try {
                size_t used = 0;
                double d = std::stod(v, &used);
                if (used == v.size() && d >= lo && d <= hi) return d;
            } catch (const std::exception&) {
            }
            throw InputError(str_cat("sample: ", a, ": expected a number in [", lo, ", ", hi,
                                     "], found '", v, "'"));
        };
        if (a == "--help" || a == "-h") {
            std::cout << kSampleUsage;
            return 0;
        } else if (a == "--checkpoint")
            ckpt = value();
        else if (a == "--prompt")
            prompt = value();
        else if (a == "--tokens")
            o.max_new_tokens = (int)number(1, 100000);
        else if (a == "--temperature")
            o.temperature = number(0, 100);
        else if (a == "--top-k")
            o.top_k = (int)number(0, 1e9);
        else if (a == "--seed")
            o.seed = (uint64_t)number(0, 1e18);
        else if (a == "--device") {
            device = value();
            if (device != "cpu" && device != "cuda")
                throw InputError(
                    str_cat("sample: --device: expected cpu or cuda, found '", device, "'"));
        } else
            throw InputError(str_cat("sample: unknown argument '", a, "'\n", kSampleUsage));
    }
    if (ckpt.empty()) throw InputError(str_cat("sample: missing --checkpoint DIR\n", kSampleUsage));
    Checkpoint ck = checkpoint_load(ckpt);
    RunConfig cfg = cli_checkpoint_config(ck);
    if (cfg.model.preset == "mlp")
        throw InputError(
            str_cat("checkpoint ", ck.dir, ": an MLP classifier cannot generate text"));
    auto tok = tokenizer_make(config_tokenizer(cfg));
    o.stop_token = tok->eot_token();
    if (model_family(cfg.model.preset) == "llama") {
        const ModelShape shape = model_shape(cfg.model, tok->vocab_size());
        const ParamTable& table = shape.param_table();
        std::vector<float> params(table.total_numel());
        const SafetensorsFile& weights = checkpoint_file(ck, "model");
        for (const auto& p : table.entries())
            weights.read_f32(p.name, p.shape, params.data() + p.offset);
        if (device.empty()) device = cfg.runtime.device;
        const bool cuda = device == "cuda";
        if (cuda) {
#ifdef TESSERA_HAVE_CUDA
            TS_CHECK(cuda_device_count() > 0, "sample: --device cuda, but no CUDA GPU is visible");
            cuda_device_init(0);  // the stream and the allocator CUDA tensors come from
#else
            throw InputError("sample: --device cuda needs a CUDA build of tessera");
#endif
        }
        LayerOps& ops =
            layer_ops_for(cuda ? Device::cuda : Device::cpu,
                          cuda && cfg.runtime.bf16_activations() ? DType::bf16 : DType::f32);
        LayerDecoder decoder(shape, ops, params);
        o.vocab_limit = tok->vocab_size();  // ids the tokenizer can write
        std::vector<int> ids = tok->encode(prompt);
        for (int id : ids)
            if (id >= shape.vocab())
                throw InputError(str_cat("sample: the prompt's token ", id,
                                         " is outside the model's vocabulary (", shape.vocab(),
                                         ")"));
        std::cout << prompt << tok->decode(sample_tokens(decoder, ids, o)) << std::endl;
        return 0;
    }
    GptDims d{cfg.model.n_layer, cfg.model.n_head, cfg.model.d_model, cfg.model.seq_len,
              tok->vocab_size()};
    GptModel model(d);
    const SafetensorsFile& weights = checkpoint_file(ck, "model");
    for (const auto& p : model.param_table().entries())
        weights.read_f32(p.name, p.shape, model.params().f32() + p.offset);
    std::vector<int> ids = tok->encode(prompt);
    std::vector<int> gen = sample_tokens(model, ids, o);
    std::cout << prompt << tok->decode(gen) << std::endl;
    return 0;
}

}  // namespace tessera
