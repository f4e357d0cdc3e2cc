// The config's meaning: each section's keys with their types and ranges, model presets, the
// cross-field rules (parallel layout vs. model shape, data vs. preset, precision vs. device), and
// the canonical YAML writer. Reading helpers and locations live in config.cpp / config_reader.h.
#include <charconv>
#include <filesystem>
#include <numeric>
#include <set>
#include <sstream>

#include "engine/config/cluster_rules.h"
#include "engine/config/config_reader.h"
#include "engine/config/config_yaml.h"
#include "engine/core/error.h"
#include "engine/core/json_text.h"
#include "engine/core/tokenizer_names.h"

namespace fs = std::filesystem;

namespace tessera {

namespace {

// ----------------------------------------------------------------------------
// model presets: dims a preset fills in when the key is absent

struct ModelPreset {
    const char* name;
    const char* family;  // gpt | llama | mlp: the architecture the runtime builds
    const char* series;  // the model line a person picks it by (the studio's family picker)
    int n_layer, n_head, d_model, seq_len;
    const char* vocab;
    // the Llama family (public configs: ../shared/MODELS.md)
    int n_kv_head = 0, head_dim = 0, ffn = 0, vocab_size = 0;
    double norm_eps = 0, rope_theta = 0;
    RopeScaling rope_scaling{};
    bool qkv_bias = false, tie_embeddings = true, qk_norm = false;
};

const RopeScaling kLlama3x32{"llama3", 32.0, 1.0, 4.0, 8192},
    kLlama3x8{"llama3", 8.0, 1.0, 4.0, 8192};

const ModelPreset kPresets[] = {
    {"gpt-tiny", "gpt", "GPT-2", 4, 4, 128, 128, "bytes"},
    {"gpt2", "gpt", "GPT-2", 12, 12, 768, 1024, "gpt2"},
    {"gpt2-medium", "gpt", "GPT-2", 24, 16, 1024, 1024, "gpt2"},
    {"gpt2-large", "gpt", "GPT-2", 36, 20, 1280, 1024, "gpt2"},
    {"gpt2-xl", "gpt", "GPT-2", 48, 25, 1600, 1024, "gpt2"},
    // name, family, series, layers, heads, hidden, seq_len, tokenizer; kv heads, head_dim, ffn,
    // vocab rows, RMSNorm eps, rope theta, rope scaling, qkv bias, tied, q/k norm
    {"llama-tiny",
     "llama",
     "Llama 3",
     4,
     4,
     64,
     64,
     "bytes",
     2,
     16,
     128,
     256,
     1e-5,
     1e4,
     {},
     false,
     true},
    // a Llama-family model sized by its keys (a Hugging Face folder's config.json sets them)
    {"llama",
     "llama",
     "Llama 3",
     4,
     4,
     64,
     64,
     "bytes",
     2,
     16,
     128,
     256,
     1e-5,
     1e4,
     {},
     false,
     true},
    {"smollm-135m",
     "llama",
     "SmolLM",
     30,
     9,
     576,
     2048,
     "bytes",
     3,
     64,
     1536,
     49152,
     1e-5,
     1e4,
     {},
     false,
     true},
    {"smollm2-360m",
     "llama",
     "SmolLM",
     32,
     15,
     960,
     2048,
     "bytes",
     5,
     64,
     2560,
     49152,
     1e-5,
     1e5,
     {},
     false,
     true},
    {"qwen2.5-0.5b",
     "llama",
     "Qwen2.5",
     24,
     14,
     896,
     2048,
     "bytes",
     2,
     64,
     4864,
     151936,
     1e-6,
     1e6,
     {},
     true,
     true},
    {"qwen3-0.6b",
     "llama",
     "Qwen3",
     28,
     16,
     1024,
     2048,
     "bytes",
     8,
     128,
     3072,
     151936,
     1e-6,
     1e6,
     {},
     false,
     true,
     true},
    {"tinyllama-1.1b",
     "llama",
     "TinyLlama",
     22,
     32,
     2048,
     2048,
     "bytes",
     4,
     64,
     5632,
     32000,
     1e-5,
     1e4,
     {},
     false,
     false},
    {"llama-3.2-1b", "llama", "Llama 3", 16, 32, 2048, 2048, "bytes", 8, 64, 8192, 128256, 1e-5,
     5e5, kLlama3x32, false, true},
    {"llama-3.1-8b", "llama", "Llama 3", 32, 32, 4096, 2048, "bytes", 8, 128, 14336, 128256, 1e-5,
     5e5, kLlama3x8, false, false},
    {"mistral-7b",
     "llama",
     "Mistral",
     32,
     32,
     4096,
     2048,
     "bytes",
     8,
     128,
     14336,
     32000,
     1e-5,
     1e4,
     {},
     false,
     false},
    {"qwen2.5-7b",
     "llama",
     "Qwen2.5",
     28,
     28,
     3584,
     2048,
     "bytes",
     4,
     128,
     18944,
     152064,
     1e-6,
     1e6,
     {},
     true,
     false},
    {"mlp", "mlp", "MLP", 0, 0, 0, 0, ""},
};

std::vector<std::string> preset_names() {
    std::vector<std::string> names;
    for (const auto& p : kPresets) names.push_back(p.name);
    return names;
}

const ModelPreset& preset_find(const std::string& name) {
    for (const auto& p : kPresets)
        if (name == p.name) return p;
    return kPresets[0];
}

}  // namespace

std::string model_family(const std::string& preset) {
    return preset_find(preset).family;
}
int config_tokenizer_vocab_size(const std::string& vocab) {
    return vocab == "gpt2" ? 50257 : 256;
}
std::string config_tokenizer(const RunConfig& cfg) {
    return tokenizer_is_named(cfg.model.vocab) ? cfg.model.vocab
                                               : config_resolve_path(cfg, cfg.model.vocab);
}
std::vector<std::string> config_preset_names() {
    return preset_names();
}
std::string config_preset_series(const std::string& preset) {
    return preset_find(preset).series;
}

namespace {

const std::vector<std::string> kGptOnlyKeys = {"n_layer", "n_head", "d_model", "seq_len", "vocab"};
const std::vector<std::string> kLlamaOnlyKeys = {
    "n_kv_head",  "head_dim",     "ffn",      "vocab_size", "norm_eps",
    "rope_theta", "rope_scaling", "qkv_bias", "qk_norm",    "tie_embeddings"};

// ----------------------------------------------------------------------------
// sections

std::string key_of(const ConfigField& f) {
    return f.path.substr(f.path.find_last_of('.') + 1);
}

void read_model(ConfigReader& r, const ConfigField& sec, ModelConfig& m,
                const std::string& base_dir) {
    std::set<std::string> given;
    std::vector<ConfigField> fields =
        r.read_map(sec.value, "model", sec.at, config_section_keys("model"));
    for (const auto& f : fields) {
        std::string k = key_of(f);
        given.insert(k);
        if (k == "preset")
            m.preset = r.read_enum(f, preset_names());
        else if (k == "n_layer")
            m.n_layer = (int)r.read_int(f, 1, 4096);
        else if (k == "n_head")
            m.n_head = (int)r.read_int(f, 1, 4096);
        else if (k == "d_model")
            m.d_model = (int)r.read_int(f, 1, 1 << 16);
        else if (k == "seq_len")
            m.seq_len = (int)r.read_int(f, 1, 1 << 20);
        else if (k == "vocab")
            m.vocab = r.read_string(f, true);
        else if (k == "hidden") {
            m.hidden = r.read_int_list(f, 1, 1 << 20);
            if (m.hidden.empty()) r.fail_field(f, "at least one hidden width like [256]", "[]");
        } else if (k == "init_from")
            m.init_from = r.read_string(f, true);
        else if (k == "n_kv_head")
            m.n_kv_head = (int)r.read_int(f, 1, 4096);
        else if (k == "head_dim")
            m.head_dim = (int)r.read_int(f, 2, 4096);
        else if (k == "ffn")
            m.ffn = (int)r.read_int(f, 1, 1 << 20);
        else if (k == "vocab_size")
            m.vocab_size = (int)r.read_int(f, 1, 1 << 24);
        else if (k == "norm_eps")
            m.norm_eps = r.read_double(f, 0.0, true, 1.0, false);
        else if (k == "rope_theta")
            m.rope_theta = r.read_double(f, 1.0, false);
        else if (k == "qkv_bias")
            m.qkv_bias = r.read_bool(f);
        else if (k == "qk_norm")
            m.qk_norm = r.read_bool(f);
        else if (k == "tie_embeddings")
            m.tie_embeddings = r.read_bool(f);
        else if (k == "rope_scaling") {
            m.rope_scaling = RopeScaling{};
            for (const auto& g : r.read_map(f.value, "model.rope_scaling", f.at,
                                            config_section_keys("model.rope_scaling"))) {
                const std::string rk = key_of(g);
                if (rk == "type")
                    m.rope_scaling.type = r.read_enum(g, {"none", "linear", "llama3"});
                else if (rk == "factor")
                    m.rope_scaling.factor = r.read_double(g, 0.0, true);
                else if (rk == "low_freq_factor")
                    m.rope_scaling.low_freq_factor = r.read_double(g, 0.0, true);
                else if (rk == "high_freq_factor")
                    m.rope_scaling.high_freq_factor = r.read_double(g, 0.0, true);
                else if (rk == "original_max_position_embeddings")
                    m.rope_scaling.original_max_position_embeddings =
                        (int)r.read_int(g, 1, 1 << 24);
            }
            if (m.rope_scaling.type == "none") m.rope_scaling.type.clear();
        }
    }
    // A Hugging Face folder: its config.json is the architecture; beside it, only the sequence
    // length and the tokenizer
    if (!m.init_from.empty()) {
        std::filesystem::path dir(m.init_from);
        if (dir.is_relative() && !base_dir.empty()) dir = std::filesystem::path(base_dir) / dir;
        std::error_code ec;
        if (std::filesystem::is_directory(dir, ec)) {
            for (const auto& f : fields)
                if (key_of(f) != "init_from" && key_of(f) != "seq_len" && key_of(f) != "vocab")
                    r.fail_field(f,
                                 str_cat("no ", key_of(f),
                                         " beside a Hugging Face folder in model.init_from "
                                         "(its config.json sets the architecture)"),
                                 yaml_describe_node(f.value));
            if (!given.count("seq_len")) m.seq_len = 0;
            hf_config_apply(dir.string(), m);
            // the folder's own tokenizer, when it has one
            if (!given.count("vocab") && m.preset != "gpt2")
                m.vocab = std::filesystem::is_regular_file(dir / "tokenizer.json", ec) ? m.init_from
                                                                                       : "bytes";
            return;
        }
    }
    // Resolve the preset: absent dims come from it, explicit keys win.
    if (m.preset == "mlp") {
        for (const auto& f : fields)
            for (const auto& g : kGptOnlyKeys)
                if (key_of(f) == g)
                    r.fail_field(
                        f, str_cat("no ", g, " with preset mlp (an MLP is sized by model.hidden)"),
                        yaml_describe_node(f.value));
        if (m.hidden.empty()) m.hidden = {256};
        m.vocab =
            "bytes";  // unused by the MLP; kept at the struct default so configs compare equal
        return;
    }
    for (const auto& f : fields)
        if (key_of(f) == "hidden")
            r.fail_field(f,
                         str_cat("no hidden with preset ", m.preset, " (hidden is for preset mlp)"),
                         yaml_describe_node(f.value));
    const ModelPreset& p = preset_find(m.preset);
    const bool llama = std::string(p.family) == "llama";
    if (!llama)
        for (const auto& f : fields)
            for (const auto& g : kLlamaOnlyKeys)
                if (key_of(f) == g)
                    r.fail_field(f,
                                 str_cat("no ", g, " with preset ", m.preset, " (", g,
                                         " is for the Llama-family presets)"),
                                 yaml_describe_node(f.value));
    if (!m.n_layer) m.n_layer = p.n_layer;
    if (!m.n_head) m.n_head = p.n_head;
    if (!m.d_model) m.d_model = p.d_model;
    if (!m.seq_len) m.seq_len = p.seq_len;
    if (!given.count("vocab")) m.vocab = p.vocab;
    if (!llama) return;
    if (!m.n_kv_head) m.n_kv_head = given.count("n_head") ? m.n_head : p.n_kv_head;
    if (!m.head_dim)
        m.head_dim =
            given.count("d_model") || given.count("n_head") ? m.d_model / m.n_head : p.head_dim;
    if (!m.ffn) m.ffn = p.ffn;
    if (!m.vocab_size) m.vocab_size = p.vocab_size;
    if (!m.norm_eps) m.norm_eps = p.norm_eps;
    if (!m.rope_theta) m.rope_theta = p.rope_theta;
    if (!given.count("rope_scaling")) m.rope_scaling = p.rope_scaling;
    if (!given.count("qkv_bias")) m.qkv_bias = p.qkv_bias;
    if (!given.count("qk_norm")) m.qk_norm = p.qk_norm;
    if (!given.count("tie_embeddings")) m.tie_embeddings = p.tie_embeddings;
}

void read_data(ConfigReader& r, const ConfigField& sec, DataConfig& d) {
    for (const auto& f : r.read_map(sec.value, "data", sec.at, config_section_keys("data"))) {
        std::string k = key_of(f);
        if (k == "dataset")
            d.dataset = r.read_enum(f, {"brown", "fashion-mnist"});
        else if (k == "train")
            d.train = r.read_string(f, true);
        else if (k == "val")
            d.val = r.read_string(f, true);
        else if (k == "order")
            d.order = r.read_enum(f, {"random", "epoch"});
    }
}

void read_train(ConfigReader& r, const ConfigField& sec, TrainConfig& t) {
    for (const auto& f : r.read_map(sec.value, "train", sec.at, config_section_keys("train"))) {
        std::string k = key_of(f);
        if (k == "steps")
            t.steps = r.read_int(f, 1);
        else if (k == "micro_batch")
            t.micro_batch = (int)r.read_int(f, 1, 1 << 20);
        else if (k == "grad_accum")
            t.grad_accum = (int)r.read_int(f, 1, 1 << 20);
        else if (k == "lr")
            t.lr = r.read_double(f, 0.0, true);
        else if (k == "min_lr")
            t.min_lr = r.read_double(f, 0.0, false);
        else if (k == "warmup_steps")
            t.warmup_steps = r.read_int(f, 0);
        else if (k == "weight_decay")
            t.weight_decay = r.read_double(f, 0.0, false);
        else if (k == "grad_clip")
            t.grad_clip = r.read_double(f, 0.0, false);
        else if (k == "seed")
            t.seed = r.read_uint64(f);
        else if (k == "eval_every")
            t.eval_every = r.read_int(f, 0);
        else if (k == "eval_steps")
            t.eval_steps = (int)r.read_int(f, 1, 1 << 20);
        else if (k == "beta1")
            t.beta1 = r.read_double(f, 0.0, false, 1.0, true);
        else if (k == "beta2")
            t.beta2 = r.read_double(f, 0.0, false, 1.0, true);
        else if (k == "eps")
            t.eps = r.read_double(f, 0.0, true);
        else if (k == "threads")
            t.threads = (int)r.read_int(f, 0, 4096);
        else if (k == "restarts")
            t.restarts = (int)r.read_int(f, 0, 1000);
    }
}

void read_runtime(ConfigReader& r, const ConfigField& sec, RuntimeConfig& rt) {
    for (const auto& f : r.read_map(sec.value, "runtime", sec.at, config_section_keys("runtime"))) {
        std::string k = key_of(f);
        if (k == "device")
            rt.device = r.read_enum(f, {"cpu", "cuda"});
        else if (k == "precision")
            rt.precision = r.read_enum(f, {"fp32", "bf16", "fp8"});
    }
}

void read_parallel(ConfigReader& r, const ConfigField& sec, ParallelConfig& p) {
    const std::vector<std::string> recompute_modes = {"none", "selective", "full"};
    for (const auto& f :
         r.read_map(sec.value, "parallel", sec.at, config_section_keys("parallel"))) {
        std::string k = key_of(f);
        if (k == "dp")
            p.dp = (int)r.read_int(f, 1, 4096);
        else if (k == "tp")
            p.tp = (int)r.read_int(f, 1, 4096);
        else if (k == "pp")
            p.pp = (int)r.read_int(f, 1, 4096);
        else if (k == "zero")
            p.zero = (int)r.read_int(f, 0, 3);
        else if (k == "schedule")
            p.schedule = r.read_enum(f, {"gpipe", "1f1b", "interleaved", "zb-h1"});
        else if (k == "virtual_stages")
            p.virtual_stages = (int)r.read_int(f, 1, 4096);
        else if (k == "stages")
            p.stages = r.read_int_list(f, 1, 1 << 20);
        else if (k == "recompute") {
            p.recompute.clear();
            if (f.value.IsSequence()) {
                if (f.value.size() == 0)
                    r.fail_field(f, "none|selective|full or a list of them, one per stage", "[]");
                for (size_t i = 0; i < f.value.size(); ++i)
                    p.recompute.push_back(r.read_enum(r.element(f, i), recompute_modes));
            } else {
                p.recompute.push_back(r.read_enum(f, recompute_modes));
            }
        } else if (k == "offload_activations")
            p.offload_activations = r.read_bool(f);
        else if (k == "offload_optimizer")
            p.offload_optimizer = r.read_bool(f);
    }
    if (p.recompute.empty()) p.recompute = {"none"};
}

void read_checkpoint(ConfigReader& r, const ConfigField& sec, CheckpointConfig& c) {
    for (const auto& f :
         r.read_map(sec.value, "checkpoint", sec.at, config_section_keys("checkpoint"))) {
        std::string k = key_of(f);
        if (k == "dir")
            c.dir = r.read_string(f, true);
        else if (k == "every")
            c.every = r.read_int(f, 0);
        else if (k == "keep")
            c.keep = (int)r.read_int(f, 1, 1 << 20);
    }
}

void read_log(ConfigReader& r, const ConfigField& sec, LogConfig& l) {
    for (const auto& f : r.read_map(sec.value, "log", sec.at, config_section_keys("log"))) {
        std::string k = key_of(f);
        if (k == "db")
            l.db = r.read_string(f, false);
        else if (k == "every")
            l.every = (int)r.read_int(f, 1, 1 << 30);
    }
}

// A host or user name taken from the config: refused here, before ssh ever sees it.
std::string read_cluster_name(ConfigReader& r, const ConfigField& f, bool is_user) {
    std::string v = r.read_string(f, false);
    std::string problem = cluster_name_problem(v, is_user);
    if (!problem.empty())
        r.fail_field(f,
                     is_user ? "a user name (letters, digits, '.', '_', '-')"
                             : "a host name or address (letters, digits, '.', '-', '_', ':')",
                     str_cat("'", v, "', which ", problem, " (refused before ssh runs)"));
    return v;
}

void read_cluster_host(ConfigReader& r, const ConfigField& item, ClusterHost& h) {
    bool has_host = false;
    for (const auto& f :
         r.read_map(item.value, item.path, item.at, config_section_keys("cluster.hosts[]"))) {
        std::string k = key_of(f);
        if (k == "host")
            h.host = read_cluster_name(r, f, false), has_host = true;
        else if (k == "user")
            h.user = read_cluster_name(r, f, true);
        else if (k == "port")
            h.port = (int)r.read_int(f, 1, kClusterMaxPort);
        else if (k == "identity")
            h.identity = r.read_string(f, false);
        else if (k == "slots")
            h.slots = (int)r.read_int(f, 1, kClusterMaxSlots);
        else if (k == "addr")
            h.addr = read_cluster_name(r, f, false);
    }
    if (!item.value.IsMap())
        r.fail_field(item, "a map with host, slots, ...", yaml_describe_node(item.value));
    if (!has_host) r.fail(item.at, item.path + ".host", "a host name", "none");
}

void read_cluster(ConfigReader& r, const ConfigField& sec, ClusterConfig& c,
                  const std::string& base_dir) {
    const ConfigField* hostfile_field = nullptr;
    ConfigField hf;
    for (const auto& f : r.read_map(sec.value, "cluster", sec.at, config_section_keys("cluster"))) {
        std::string k = key_of(f);
        if (k == "hosts") {
            if (!f.value.IsSequence())  // [] = this machine only
                r.fail_field(f, "a list of hosts ({host: NAME, slots: N, ...})",
                             yaml_describe_node(f.value));
            c.hosts.resize(f.value.size());
            for (size_t i = 0; i < f.value.size(); ++i)
                read_cluster_host(r, r.element(f, i), c.hosts[i]);
        } else if (k == "hostfile") {
            c.hostfile = r.read_string(f, false);
            hf = f;
            hostfile_field = &hf;
        } else if (k == "workdir")
            c.workdir = r.read_string(f, true);
        else if (k == "tessera")
            c.tessera = r.read_string(f, false);
        else if (k == "rendezvous_port")
            c.rendezvous_port = (int)r.read_int(f, 1, kClusterMaxPort);
        else if (k == "known_hosts")
            c.known_hosts = r.read_string(f, true);
        else if (k == "connect_timeout")
            c.connect_timeout = (int)r.read_int(f, 1, kClusterMaxConnectTimeout);
        else if (k == "env") {
            if (f.value.IsNull()) continue;
            if (!f.value.IsMap())
                r.fail_field(f, "a map of NAME: value", yaml_describe_node(f.value));
            for (auto it = f.value.begin(); it != f.value.end(); ++it) {
                std::string name = it->first.Scalar();
                ConfigField v{str_cat(f.path, ".", name), it->second,
                              yaml_format_mark(r.file, it->second.Mark())};
                if (!cluster_env_name_ok(name))
                    r.fail_field(v, "an environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
                                 str_cat("'", name, "'"));
                if (!it->second.IsScalar())
                    r.fail_field(v, "a string value", yaml_describe_node(it->second));
                c.env.emplace_back(name, it->second.Scalar());
            }
        }
    }
    if (hostfile_field) {
        if (!c.hosts.empty())
            r.fail_field(*hostfile_field, "either cluster.hosts or cluster.hostfile, not both",
                         "both");
        fs::path p(c.hostfile);
        std::string path =
            p.is_absolute() ? c.hostfile : (fs::path(base_dir) / p).lexically_normal().string();
        const std::optional<std::string> text = text_file_read(path);
        if (!text)
            r.fail_field(*hostfile_field, "a readable hostfile",
                         str_cat("no readable file ", path));
        c.hosts = cluster_parse_hostfile(*text, path);
        if (c.hosts.empty())
            r.fail_field(*hostfile_field, "a hostfile with at least one host", "no hosts");
    }
}

}  // namespace

// "host slots=N [user=U] [port=P] [identity=F] [addr=A]" per line, '#' comments.
std::vector<ClusterHost> cluster_parse_hostfile(const std::string& text, const std::string& name) {
    std::vector<ClusterHost> hosts;
    std::istringstream in(text);
    std::string line;
    for (int ln = 1; std::getline(in, line); ++ln) {
        if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
        std::istringstream words(line);
        std::string w;
        if (!(words >> w)) continue;
        auto fail = [&](const std::string& what) {
            throw InputError(str_cat(name, ":", ln, ": ", what));
        };
        ClusterHost h;
        h.host = w;
        if (auto pr = cluster_name_problem(h.host, false); !pr.empty())
            fail(str_cat("host '", h.host, "' ", pr, " (refused before ssh runs)"));
        auto to_int = [&](const std::string& key, const std::string& v, int lo, int hi) {
            int x = 0;
            auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
            if (ec != std::errc() || end != v.data() + v.size() || x < lo || x > hi)
                fail(str_cat(key, "=", v, ": expected an integer in [", lo, ", ", hi, "]"));
            return x;
        };
        while (words >> w) {
            auto eq = w.find('=');
            std::string key = w.substr(0, eq), v = eq == std::string::npos ? "" : w.substr(eq + 1);
            if (eq == std::string::npos || v.empty())
                fail(str_cat("'", w,
                             "': expected key=value (slots=N, user=, port=, identity=, addr=)"));
            if (key == "slots")
                h.slots = to_int(key, v, 1, kClusterMaxSlots);
            else if (key == "max_slots")
                to_int(key, v, 1, 1 << 20);  // OpenMPI's cap: accepted, unused
            else if (key == "port")
                h.port = to_int(key, v, 1, kClusterMaxPort);
            else if (key == "user" || key == "addr") {
                if (auto pr = cluster_name_problem(v, key == "user"); !pr.empty())
                    fail(str_cat(key, " '", v, "' ", pr));
                (key == "user" ? h.user : h.addr) = v;
            } else if (key == "identity")
                h.identity = v;
            else
                fail(str_cat("unknown key '", key,
                             "' (expected slots, max_slots, user, port, identity, addr)"));
        }
        hosts.push_back(h);
    }
    return hosts;
}

std::string cluster_name_problem(const std::string& name, bool is_user) {
    if (name.empty()) return "is empty";
    if (name[0] == '-') return "starts with '-'";
    for (unsigned char ch : name) {
        bool ok =
            std::isalnum(ch) || ch == '.' || ch == '_' || ch == '-' || (!is_user && ch == ':');
        if (!ok) {
            if (ch < 0x20 || ch >= 0x7f)
                return str_cat("contains the byte 0x", "0123456789abcdef"[ch >> 4],
                               "0123456789abcdef"[ch & 15]);
            return str_cat("contains '", char(ch), "'");
        }
    }
    return "";
}

void config_read_tree(ConfigReader& r, const YAML::Node& root, RunConfig& cfg) {
    bool has_data = false;
    for (const auto& sec : r.read_map(root, "", str_cat(r.file, ":1:1"), config_top_keys())) {
        const std::string& k = sec.path;
        if (k == "name")
            cfg.name = r.read_string(sec, false);
        else if (k == "model")
            read_model(r, sec, cfg.model, cfg.base_dir);
        else if (k == "data")
            read_data(r, sec, cfg.data), has_data = true;
        else if (k == "train")
            read_train(r, sec, cfg.train);
        else if (k == "runtime")
            read_runtime(r, sec, cfg.runtime);
        else if (k == "parallel")
            read_parallel(r, sec, cfg.parallel);
        else if (k == "checkpoint")
            read_checkpoint(r, sec, cfg.checkpoint);
        else if (k == "log")
            read_log(r, sec, cfg.log);
        else if (k == "cluster")
            read_cluster(r, sec, cfg.cluster, cfg.base_dir);
    }
    // Sections that were absent still need their defaults resolved.
    if (!r.locs.count("model"))
        read_model(r, {"model", YAML::Node(), r.loc("")}, cfg.model, cfg.base_dir);
    if (!r.locs.count("parallel")) cfg.parallel.recompute = {"none"};
    if (!has_data) r.fail(r.loc(""), "data", "a data section (data.dataset or data.train)", "none");
}

// ----------------------------------------------------------------------------
// cross-field rules

void config_check_rules(const ConfigReader& r, const RunConfig& cfg) {
    const ModelConfig& m = cfg.model;
    const ParallelConfig& p = cfg.parallel;
    const DataConfig& d = cfg.data;
    bool mlp = m.preset == "mlp";
    const bool llama = model_family(m.preset) == "llama";
    if (!mlp && !llama && m.vocab != "bytes" && m.vocab != "gpt2")
        r.fail_key({"model.vocab", "model.preset"},
                   "bytes or gpt2 for a GPT preset (a tokenizer.json is for the Llama family)",
                   str_cat("'", m.vocab, "'"));

    // model shape
    if (llama) {
        if (m.n_head % m.n_kv_head != 0)
            r.fail_key({"model.n_kv_head", "model.n_head", "model.preset"},
                       str_cat("n_kv_head dividing n_head (", m.n_head, ")"),
                       str_cat("n_kv_head ", m.n_kv_head));
        if (m.head_dim % 2 != 0)
            r.fail_key({"model.head_dim", "model.preset"}, "an even head_dim (rotary pairs)",
                       str_cat(m.head_dim));
        const int tok = config_tokenizer_vocab_size(m.vocab);
        // a tokenizer.json's size is checked against the data's ids when they are read
        if (m.vocab_size < tok && !m.from_folder && (m.vocab == "bytes" || m.vocab == "gpt2"))
            r.fail_key({"model.vocab_size", "model.vocab"},
                       str_cat("vocab_size at least the ", m.vocab, " tokenizer's ", tok),
                       str_cat(m.vocab_size));
        if (p.tp > 0 && (m.n_kv_head % p.tp != 0 || m.ffn % p.tp != 0))
            r.fail_key({"parallel.tp", "model.n_kv_head"},
                       str_cat("tp dividing n_kv_head (", m.n_kv_head, ") and ffn (", m.ffn,
                               "): each TP rank holds whole key/value heads"),
                       str_cat("tp ", p.tp));
    }
    if (!mlp && !llama && m.d_model % m.n_head != 0)
        r.fail_key({"model.d_model", "model.n_head", "model.preset"},
                   str_cat("d_model divisible by n_head (", m.n_head, ")"),
                   str_cat("d_model ", m.d_model));

    // cluster: enough slots for the ranks
    if (!cfg.cluster.hosts.empty()) {
        const int slots = cluster_total_slots(cfg.cluster);
        if (p.dp * p.tp * p.pp > slots)
            r.fail_key({"cluster.hosts", "cluster.hostfile", "parallel.dp"},
                       str_cat("at least dp x tp x pp = ", p.dp * p.tp * p.pp,
                               " slots on the cluster's hosts"),
                       str_cat(slots, " slots"));
    }

    // parallel layout
    if (mlp && p.tp != 1)
        r.fail_key({"parallel.tp"}, "tp 1 with preset mlp (an MLP is not tensor-split)",
                   str_cat(p.tp));
    if (mlp && p.pp != 1)
        r.fail_key({"parallel.pp"}, "pp 1 with preset mlp (an MLP is not pipelined)",
                   str_cat(p.pp));
    if (mlp && cfg.runtime.device != "cpu")
        r.fail_key({"runtime.device"},
                   "device cpu with preset mlp (the MLP reads its features on the host)",
                   cfg.runtime.device);
    if (mlp)
        for (const std::string& rc : p.recompute)
            if (rc != "none") {
                r.fail_key({"parallel.recompute"},
                           "recompute none with preset mlp (its layers keep "
                           "only their inputs and pre-activations)",
                           rc);
                break;
            }
    if (!mlp && m.n_head % p.tp != 0)
        r.fail_key({"parallel.tp", "model.n_head"},
                   str_cat("tp dividing model.n_head (", m.n_head, ")"), str_cat("tp ", p.tp));
    if (!mlp && !llama && m.d_model % p.tp != 0)
        r.fail_key({"parallel.tp", "model.d_model"},
                   str_cat("tp dividing model.d_model (", m.d_model, ")"), str_cat("tp ", p.tp));
    if (!mlp && p.pp > m.n_layer)
        r.fail_key({"parallel.pp", "model.n_layer"},
                   str_cat("pp at most model.n_layer (", m.n_layer, ")"), str_cat("pp ", p.pp));
    if (p.virtual_stages > 1 && p.schedule != "interleaved")
        r.fail_key({"parallel.virtual_stages", "parallel.schedule"},
                   "virtual_stages 1 unless schedule is interleaved",
                   str_cat("virtual_stages ", p.virtual_stages, " with schedule ", p.schedule));
    if (p.schedule == "interleaved" && p.virtual_stages < 2)
        r.fail_key({"parallel.virtual_stages", "parallel.schedule"},
                   "virtual_stages >= 2 with schedule interleaved",
                   str_cat("virtual_stages ", p.virtual_stages));
    int n_chunks = p.pp * p.virtual_stages;  // model chunks across the pipeline
    if (!mlp && n_chunks > m.n_layer)
        r.fail_key({"parallel.virtual_stages", "parallel.pp"},
                   str_cat("pp x virtual_stages at most model.n_layer (", m.n_layer, ")"),
                   str_cat(p.pp, " x ", p.virtual_stages, " = ", n_chunks));
    if (!p.stages.empty()) {
        if ((int)p.stages.size() != n_chunks)
            r.fail_key({"parallel.stages"}, str_cat("pp x virtual_stages = ", n_chunks, " entries"),
                       str_cat(p.stages.size(), " entries"));
        int64_t sum = std::accumulate(p.stages.begin(), p.stages.end(), int64_t(0));
        if (!mlp && sum != m.n_layer)
            r.fail_key({"parallel.stages"},
                       str_cat("entries summing to model.n_layer (", m.n_layer, ")"),
                       str_cat("sum ", sum));
    } else if (p.schedule == "interleaved" && !mlp && m.n_layer % n_chunks != 0) {
        r.fail_key({"parallel.virtual_stages", "parallel.schedule"},
                   str_cat("model.n_layer (", m.n_layer, ") divisible by pp x virtual_stages (",
                           n_chunks, ") for an interleaved schedule, or explicit parallel.stages"),
                   str_cat("remainder ", m.n_layer % n_chunks));
    }
    if (p.recompute.size() != 1 && (int)p.recompute.size() != p.pp)
        r.fail_key({"parallel.recompute"}, str_cat("one value or pp (", p.pp, ") values"),
                   str_cat(p.recompute.size(), " values"));
    if (p.zero == 3 && p.pp > 1)
        r.fail_key({"parallel.zero"},
                   "zero <= 2 with pp > 1 (ZeRO-3 with pipeline stages is unsupported)", "zero 3");
    // zb-h1: ZeRO-3 would gather every parameter twice per micro-batch (for B and for W), and
    // offloaded activations would come back for B and stay on the device until W: neither
    // combination is implemented
    if (p.schedule == "zb-h1" && p.zero == 3)
        r.fail_key({"parallel.schedule", "parallel.zero"}, "zero <= 2 with schedule zb-h1",
                   "zero 3");
    if (p.schedule == "zb-h1" && p.offload_activations)
        r.fail_key({"parallel.schedule", "parallel.offload_activations"},
                   "offload_activations false with schedule zb-h1", "offload_activations true");

    // data
    bool has_files = !d.train.empty() || !d.val.empty();
    if (!d.dataset.empty() && has_files)
        r.fail_key({d.train.empty() ? "data.val" : "data.train", "data"},
                   "either data.dataset or data.train/val, not both",
                   str_cat("both (dataset ", d.dataset, ")"));
    if (d.dataset.empty() && d.train.empty()) {
        if (!d.val.empty())
            r.fail_key({"data.val"}, "data.train alongside data.val", "no data.train");
        r.fail_key({"data"}, "data.dataset or data.train", "neither");
    }
    if (d.dataset == "fashion-mnist" && !mlp)
        r.fail_key({"data.dataset"},
                   str_cat("brown with preset ", m.preset, " (fashion-mnist is for preset mlp)"),
                   "fashion-mnist");
    if (d.dataset == "brown" && mlp)
        r.fail_key({"data.dataset"},
                   "fashion-mnist with preset mlp (brown is text for GPT presets)", "brown");
    if (mlp && d.dataset.empty())
        r.fail_key({"data.train"},
                   "data.dataset: fashion-mnist with preset mlp (token shards are for GPT presets)",
                   "token shards");
    // On a cluster the files live on the hosts (relative to cluster.workdir): preflight checks
    // them there, not here; ConfigFiles::may_be_missing checks none.
    const bool local_files = r.files_must_exist && cfg.cluster.hosts.empty();
    auto must_exist = [&](const std::string& key, const std::string& value) {
        if (value.empty() || !local_files) return;
        std::string full = config_resolve_path(cfg, value);
        std::error_code ec;
        if (!fs::is_regular_file(full, ec))
            r.fail_key(
                {key}, "an existing file",
                str_cat("'", value, "' (",
                        fs::exists(full, ec) ? "not a regular file: " : "no file at ", full, ")"));
    };
    must_exist("data.train", d.train);
    must_exist("data.val", d.val);
    if (!tokenizer_is_named(m.vocab) && local_files) {
        const fs::path t = config_resolve_path(cfg, m.vocab);
        std::error_code ec;
        if (!fs::is_regular_file(fs::is_directory(t, ec) ? t / "tokenizer.json" : t, ec))
            r.fail_key(
                {"model.vocab"},
                "bytes, gpt2, llama3, qwen3, llama2, a tokenizer.json or a folder holding one",
                str_cat("'", m.vocab, "' (",
                        fs::is_directory(t, ec) ? "no tokenizer.json in " : "no file at ",
                        t.string(), ")"));
    }
    if (!m.from_folder)
        must_exist("model.init_from", m.init_from);  // a file, or a folder read above

    // optimizer, runtime
    if (cfg.train.min_lr > cfg.train.lr)
        r.fail_key({"train.min_lr", "train.lr"}, str_cat("min_lr <= lr (", cfg.train.lr, ")"),
                   str_cat("min_lr ", cfg.train.min_lr));
    if (cfg.runtime.precision != "fp32" && cfg.runtime.device != "cuda")
        r.fail_key({"runtime.precision", "runtime.device"},
                   str_cat("fp32 on device cpu (", cfg.runtime.precision, " needs device cuda)"),
                   cfg.runtime.precision);
}

// ----------------------------------------------------------------------------
// canonical YAML

namespace {

std::string num_text(double v) {
    char buf[64];
    auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest exact round-trip
    std::string s(buf, ptr);
    return s;
}

YAML::Emitter& emit_ints(YAML::Emitter& e, const std::vector<int>& v) {
    e << YAML::Flow << YAML::BeginSeq;
    for (int x : v) e << x;
    return e << YAML::EndSeq;
}

}  // namespace

std::string config_to_yaml(const RunConfig& c) {
    YAML::Emitter e;
    e << YAML::BeginMap;
    e << YAML::Key << "name" << YAML::Value << c.name;

    e << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
    if (c.model.from_folder) {  // the folder's config.json holds the rest
        e << YAML::Key << "init_from" << YAML::Value << c.model.init_from;
        e << YAML::Key << "seq_len" << YAML::Value << c.model.seq_len;
        e << YAML::Key << "vocab" << YAML::Value << c.model.vocab;
        e << YAML::EndMap;
    } else {
        e << YAML::Key << "preset" << YAML::Value << c.model.preset;
        if (c.model.preset == "mlp") {
            e << YAML::Key << "hidden" << YAML::Value;
            emit_ints(e, c.model.hidden);
        } else {
            e << YAML::Key << "n_layer" << YAML::Value << c.model.n_layer;
            e << YAML::Key << "n_head" << YAML::Value << c.model.n_head;
            e << YAML::Key << "d_model" << YAML::Value << c.model.d_model;
            e << YAML::Key << "seq_len" << YAML::Value << c.model.seq_len;
            e << YAML::Key << "vocab" << YAML::Value << c.model.vocab;
            if (model_family(c.model.preset) == "llama") {
                const ModelConfig& m = c.model;
                e << YAML::Key << "n_kv_head" << YAML::Value << m.n_kv_head;
                e << YAML::Key << "head_dim" << YAML::Value << m.head_dim;
                e << YAML::Key << "ffn" << YAML::Value << m.ffn;
                e << YAML::Key << "vocab_size" << YAML::Value << m.vocab_size;
                e << YAML::Key << "norm_eps" << YAML::Value << num_text(m.norm_eps);
                e << YAML::Key << "rope_theta" << YAML::Value << num_text(m.rope_theta);
                e << YAML::Key << "rope_scaling" << YAML::Value << YAML::Flow << YAML::BeginMap;
                e << YAML::Key << "type" << YAML::Value
                  << (m.rope_scaling.type.empty() ? "none" : m.rope_scaling.type);
                if (!m.rope_scaling.type.empty()) {
                    e << YAML::Key << "factor" << YAML::Value << num_text(m.rope_scaling.factor);
                    e << YAML::Key << "low_freq_factor" << YAML::Value
                      << num_text(m.rope_scaling.low_freq_factor);
                    e << YAML::Key << "high_freq_factor" << YAML::Value
                      << num_text(m.rope_scaling.high_freq_factor);
                    e << YAML::Key << "original_max_position_embeddings" << YAML::Value
                      << m.rope_scaling.original_max_position_embeddings;
                }
                e << YAML::EndMap;
                e << YAML::Key << "qkv_bias" << YAML::Value << m.qkv_bias;
                e << YAML::Key << "qk_norm" << YAML::Value << m.qk_norm;
                e << YAML::Key << "tie_embeddings" << YAML::Value << m.tie_embeddings;
            }
        }
        if (!c.model.init_from.empty())
            e << YAML::Key << "init_from" << YAML::Value << c.model.init_from;
        e << YAML::EndMap;
    }

    e << YAML::Key << "data" << YAML::Value << YAML::BeginMap;
    if (!c.data.dataset.empty()) e << YAML::Key << "dataset" << YAML::Value << c.data.dataset;
    if (!c.data.train.empty()) e << YAML::Key << "train" << YAML::Value << c.data.train;
    if (!c.data.val.empty()) e << YAML::Key << "val" << YAML::Value << c.data.val;
    // only when not the default, so the YAML of an existing project is unchanged
    if (c.data.order != "random") e << YAML::Key << "order" << YAML::Value << c.data.order;
    e << YAML::EndMap;

    const TrainConfig& t = c.train;
    e << YAML::Key << "train" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "steps" << YAML::Value << t.steps;
    e << YAML::Key << "micro_batch" << YAML::Value << t.micro_batch;
    e << YAML::Key << "grad_accum" << YAML::Value << t.grad_accum;
    e << YAML::Key << "lr" << YAML::Value << num_text(t.lr);
    e << YAML::Key << "min_lr" << YAML::Value << num_text(t.min_lr);
    e << YAML::Key << "warmup_steps" << YAML::Value << t.warmup_steps;
    e << YAML::Key << "weight_decay" << YAML::Value << num_text(t.weight_decay);
    e << YAML::Key << "grad_clip" << YAML::Value << num_text(t.grad_clip);
    e << YAML::Key << "seed" << YAML::Value << t.seed;
    e << YAML::Key << "eval_every" << YAML::Value << t.eval_every;
    e << YAML::Key << "eval_steps" << YAML::Value << t.eval_steps;
    e << YAML::Key << "beta1" << YAML::Value << num_text(t.beta1);
    e << YAML::Key << "beta2" << YAML::Value << num_text(t.beta2);
    e << YAML::Key << "eps" << YAML::Value << num_text(t.eps);
    e << YAML::Key << "threads" << YAML::Value << t.threads;
    e << YAML::Key << "restarts" << YAML::Value << t.restarts;
    e << YAML::EndMap;

    e << YAML::Key << "runtime" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "device" << YAML::Value << c.runtime.device;
    e << YAML::Key << "precision" << YAML::Value << c.runtime.precision;
    e << YAML::EndMap;

    const ParallelConfig& p = c.parallel;
    e << YAML::Key << "parallel" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "dp" << YAML::Value << p.dp;
    e << YAML::Key << "tp" << YAML::Value << p.tp;
    e << YAML::Key << "pp" << YAML::Value << p.pp;
    e << YAML::Key << "zero" << YAML::Value << p.zero;
    e << YAML::Key << "schedule" << YAML::Value << p.schedule;
    e << YAML::Key << "virtual_stages" << YAML::Value << p.virtual_stages;
    e << YAML::Key << "stages" << YAML::Value;
    emit_ints(e, p.stages);
    e << YAML::Key << "recompute" << YAML::Value;
    if (p.recompute.size() == 1) {
        e << p.recompute[0];
    } else {
        e << YAML::Flow << YAML::BeginSeq;
        for (const auto& s : p.recompute) e << s;
        e << YAML::EndSeq;
    }
    e << YAML::Key << "offload_activations" << YAML::Value << p.offload_activations;
    e << YAML::Key << "offload_optimizer" << YAML::Value << p.offload_optimizer;
    e << YAML::EndMap;

    e << YAML::Key << "checkpoint" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "dir" << YAML::Value << c.checkpoint.dir;
    e << YAML::Key << "every" << YAML::Value << c.checkpoint.every;
    e << YAML::Key << "keep" << YAML::Value << c.checkpoint.keep;
    e << YAML::EndMap;

    e << YAML::Key << "log" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "db" << YAML::Value << c.log.db;
    e << YAML::Key << "every" << YAML::Value << c.log.every;
    e << YAML::EndMap;

    const ClusterConfig& k = c.cluster;
    if (!k.hosts.empty() || !k.hostfile.empty()) {
        e << YAML::Key << "cluster" << YAML::Value << YAML::BeginMap;
        if (!k.hostfile.empty()) {
            e << YAML::Key << "hostfile" << YAML::Value << k.hostfile;
        } else {
            e << YAML::Key << "hosts" << YAML::Value << YAML::BeginSeq;
            for (const auto& h : k.hosts) {
                e << YAML::Flow << YAML::BeginMap << YAML::Key << "host" << YAML::Value << h.host;
                if (!h.user.empty()) e << YAML::Key << "user" << YAML::Value << h.user;
                if (h.port != 22) e << YAML::Key << "port" << YAML::Value << h.port;
                if (!h.identity.empty()) e << YAML::Key << "identity" << YAML::Value << h.identity;
                e << YAML::Key << "slots" << YAML::Value << h.slots;
                if (!h.addr.empty()) e << YAML::Key << "addr" << YAML::Value << h.addr;
                e << YAML::EndMap;
            }
            e << YAML::EndSeq;
        }
        if (!k.workdir.empty()) e << YAML::Key << "workdir" << YAML::Value << k.workdir;
        e << YAML::Key << "tessera" << YAML::Value << k.tessera;
        e << YAML::Key << "rendezvous_port" << YAML::Value << k.rendezvous_port;
        if (!k.env.empty()) {
            e << YAML::Key << "env" << YAML::Value << YAML::BeginMap;
            for (const auto& [n, v] : k.env) e << YAML::Key << n << YAML::Value << v;
            e << YAML::EndMap;
        }
        if (!k.known_hosts.empty()) e << YAML::Key << "known_hosts" << YAML::Value << k.known_hosts;
        e << YAML::Key << "connect_timeout" << YAML::Value << k.connect_timeout;
        e << YAML::EndMap;
    }

    e << YAML::EndMap;
    return str_cat(e.c_str(), "\n");
}

}  // namespace tessera
