// Run configuration: the one YAML file (project.yaml) that describes a run. Every key is
// documented in docs/config.md. Parsing is strict: unknown or duplicate keys, wrong types,
// out-of-range values and broken cross-field rules each raise one InputError naming
// file:line:col, the key path, and expected versus found.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/rope_scaling.h"

namespace tessera {

struct ModelConfig {
    std::string preset = "gpt-tiny";  // a GPT, Llama-family or MLP preset (model_family)
    int n_layer = 0;                  // 0 = take the preset's value
    int n_head = 0;
    int d_model = 0;
    int seq_len = 0;
    // the tokenizer: bytes | gpt2 | (Llama family) llama3 | qwen3 | llama2 | a Hugging Face
    // tokenizer.json or a folder holding one, relative to the config file; a Hugging Face folder's
    // own tokenizer by default
    std::string vocab = "bytes";
    // MLP only: hidden layer widths (preset mlp: {256})
    std::vector<int> hidden;
    // The Llama family (presets llama-tiny, smollm-135m, ...; docs/config.md); 0 = the preset's
    int n_kv_head = 0;      // key/value heads (grouped-query attention)
    int head_dim = 0;       // per head
    int ffn = 0;            // the SwiGLU MLP's width (intermediate_size)
    int vocab_size = 0;     // the embedding's rows; 0 (GPT) = the tokenizer's size
    double norm_eps = 0;    // RMSNorm epsilon
    double rope_theta = 0;  // rotary base
    RopeScaling rope_scaling;
    bool qkv_bias = false;       // biases on the q, k, v projections (Qwen2)
    bool qk_norm = false;        // RMSNorm on each query and key head before the rotation (Qwen3)
    bool tie_embeddings = true;  // the head reads the token embedding (else its own lm_head)
    // init_from is a Hugging Face folder: its config.json set the architecture and sizes above
    // (only seq_len and vocab may be given beside it)
    bool from_folder = false;
    std::string hf_architecture;  // that folder's architectures[0] (LlamaForCausalLM, ...)
    std::string init_from;        // optional safetensors file (HF GPT-2 names accepted)

    bool operator==(const ModelConfig&) const = default;
};

struct DataConfig {
    std::string dataset;  // "" | brown | fashion-mnist (prepared into the data cache)
    std::string train;    // token shard (.bin) path, resolved relative to the config file
    std::string val;
    // reading order of the training set (docs/data.md "Reading order"): random windows, or
    // every fixed window once per epoch in a shuffled order
    std::string order = "random";  // random | epoch

    bool operator==(const DataConfig&) const = default;
};

struct TrainConfig {
    int64_t steps = 100;
    int micro_batch = 8;
    int grad_accum = 1;
    double lr = 1e-3;
    double min_lr = 1e-4;
    int64_t warmup_steps = 10;
    double weight_decay = 0.1;
    double grad_clip = 1.0;  // 0 = off
    double beta1 = 0.9;
    double beta2 = 0.95;
    double eps = 1e-8;
    uint64_t seed = 1337;
    int64_t eval_every = 50;  // 0 = never
    int eval_steps = 10;
    int threads = 0;   // CPU threads per rank; 0 = default_threads_per_rank (threads.h)
    int restarts = 0;  // relaunches after a failure (parallel runtime)

    bool operator==(const TrainConfig&) const = default;
};

struct RuntimeConfig {
    std::string device = "cpu";  // cpu | cuda
    // fp32 | bf16 | fp8 (bf16 activations, the blocks' GEMMs in FP8; cuda only)
    std::string precision = "fp32";

    // activations and weight copies in bf16 (bf16 and fp8 on cuda)
    bool bf16_activations() const {
        return device == "cuda" && (precision == "bf16" || precision == "fp8");
    }
    bool fp8_gemms() const { return device == "cuda" && precision == "fp8"; }
    bool operator==(const RuntimeConfig&) const = default;
};

struct ParallelConfig {
    int dp = 1, tp = 1, pp = 1;
    int zero = 0;                   // 0..3
    std::string schedule = "1f1b";  // gpipe | 1f1b | interleaved | zb-h1
    int virtual_stages = 1;
    std::vector<int> stages;             // layers per stage (sum = n_layer); empty = balanced
    std::vector<std::string> recompute;  // one per stage or a single value: none|selective|full
    bool offload_activations = false;
    bool offload_optimizer = false;
    // Stage s's recompute policy: recompute[s], the single value every stage shares, or "none".
    std::string recompute_of(int stage) const {
        return recompute.empty()       ? "none"
               : recompute.size() == 1 ? recompute[0]
                                       : recompute.at((size_t)stage);
    }

    bool operator==(const ParallelConfig&) const = default;
};

struct CheckpointConfig {
    std::string dir;    // "" = no checkpoints; resolved relative to the config file
    int64_t every = 0;  // steps; 0 = only at the end
    int keep = 3;

    bool operator==(const CheckpointConfig&) const = default;
};

struct LogConfig {
    std::string db = "runs.db";  // resolved relative to the config file
    int every = 1;

    bool operator==(const LogConfig&) const = default;
};

// One machine of a cluster (docs/launch.md "Several hosts over SSH").
struct ClusterHost {
    std::string host;  // ssh destination: a name or an address (no shell metacharacters)
    std::string user;  // "" = ssh's default (the local user, or ~/.ssh/config)
    int port = 22;
    std::string identity;  // private key file ("" = ssh's defaults and agent); never a passphrase
    int slots = 1;         // ranks (GPUs) this host runs
    std::string addr;      // address the other hosts reach this one at ("" = host)

    bool operator==(const ClusterHost&) const = default;
};

// Where the ranks run. No hosts = this machine, as before. Ranks fill the hosts in order
// (rank r on the first host whose slots are not yet used), so a TP group stays on one host.
struct ClusterConfig {
    std::vector<ClusterHost> hosts;   // from `hosts:` or from `hostfile:` (not both)
    std::string hostfile;             // OpenMPI/DeepSpeed style, relative to the config file
    std::string workdir;              // remote working directory ("" = the remote login directory)
    std::string tessera = "tessera";  // remote executable (a path, or a name on the remote PATH)
    int rendezvous_port = 29400;      // the store, served on the first host
    std::vector<std::pair<std::string, std::string>> env;  // passed to every remote rank
    std::string known_hosts;                               // "" = ~/.ssh/known_hosts
    int connect_timeout = 10;                              // seconds (ssh ConnectTimeout)

    bool operator==(const ClusterConfig&) const = default;
};

struct RunConfig {
    std::string name = "run";
    ModelConfig model;
    DataConfig data;
    TrainConfig train;
    RuntimeConfig runtime;
    ParallelConfig parallel;
    CheckpointConfig checkpoint;
    LogConfig log;
    ClusterConfig cluster;

    std::string source_path;  // the file it was read from ("" for text)
    std::string source_text;  // the YAML text after overrides (stored with the run)
    std::string base_dir;     // directory relative paths are resolved against

    // Compares every field, source_path/source_text/base_dir included.
    bool operator==(const RunConfig&) const = default;
};

// Whether the files a config names (data.train and data.val, a tokenizer.json for model.vocab,
// a model.init_from file) must exist now: to train, yes; to plan, to open a project in the
// studio or to read a stored run's config, no (the data may not be prepared yet, or may have
// moved since the run). A model.init_from folder is read either way: it gives the model's sizes.
enum class ConfigFiles { must_exist, may_be_missing };

// Reads, overrides ("key.path=value", applied before validation) and validates.
RunConfig config_load(const std::string& path, const std::vector<std::string>& overrides = {},
                      ConfigFiles files = ConfigFiles::must_exist);
// The same from text; `name` stands for the file in messages. Relative paths resolve against
// `base_dir`, or when it is empty against the folder of `name`.
RunConfig config_parse(const std::string& text, const std::string& name,
                       const std::vector<std::string>& overrides = {},
                       const std::string& base_dir = "",
                       ConfigFiles files = ConfigFiles::must_exist);
// Canonical YAML for a config (every key, resolved values) — what the studio saves.
std::string config_to_yaml(const RunConfig& cfg);
// The model presets (GPT, the Llama family, the MLP), and the family of one: gpt | llama | mlp.
std::vector<std::string> config_preset_names();
// The model series a preset belongs to, as a person picks it: GPT-2, Llama 3, SmolLM, Qwen2.5,
// TinyLlama, Mistral or MLP (one column of the preset table; the studio's family picker).
std::string config_preset_series(const std::string& preset);
// Fills `m` from the Hugging Face folder `dir`'s config.json (engine/config/hf_config.cpp);
// InputError naming the file and key, or the unsupported architecture and the supported ones.
void hf_config_apply(const std::string& dir, ModelConfig& m);
std::string model_family(const std::string& preset);
// The size of a built-in tokenizer's vocabulary (model.vocab): bytes 256, gpt2 50257.
int config_tokenizer_vocab_size(const std::string& vocab);
// The run's tokenizer as tokenizer_make takes it: a name (engine/core/tokenizer_names.h) or the
// resolved path of model.vocab.
std::string config_tokenizer(const RunConfig& cfg);
// The hosts of an OpenMPI/DeepSpeed hostfile ("host slots=N", plus Tessera's optional user=,
// port=, identity=, addr=); `name` stands for the file in messages (name:line: ...).
std::vector<ClusterHost> cluster_parse_hostfile(const std::string& text, const std::string& name);
// A host or user name that is safe to hand to ssh (letters, digits, . _ - and : for IPv6);
// returns "" when fine, else what is wrong ("contains ';'").
std::string cluster_name_problem(const std::string& name, bool is_user);
// Resolves a path from the config relative to cfg.base_dir.
std::string config_resolve_path(const RunConfig& cfg, const std::string& p);

}  // namespace tessera
