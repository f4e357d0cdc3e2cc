// YAML plumbing for the config loader: guarded parsing (depth, aliases, documents, duplicate
// keys), mark formatting and message helpers. See config_yaml.h.
// GCC 12 reports false -Wdangling-pointer warnings inside yaml-cpp's node/impl.h.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wdangling-pointer"
#endif
#include "engine/config/config_yaml.h"

#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "engine/core/error.h"

namespace tessera {

// ----------------------------------------------------------------------------
// messages

std::string yaml_format_mark(const std::string& file, const YAML::Mark& mark) {
    if (mark.is_null() || mark.line < 0 || mark.column < 0) return str_cat(file, ":1:1");
    return str_cat(file, ":", mark.line + 1, ":", mark.column + 1);
}

namespace {

// Control and non-ASCII bytes shown as '?', long text cut: messages stay one readable line.
std::string printable(std::string s, size_t max_chars) {
    if (s.size() > max_chars) s = s.substr(0, max_chars - 3) + "...";
    for (char& c : s)
        if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f) c = '?';
    return s;
}

}  // namespace

std::string yaml_describe_node(const YAML::Node& node) {
    if (!node.IsDefined() || node.IsNull()) return "nothing (null)";
    if (node.IsSequence()) return str_cat("a sequence of ", node.size(), " item(s)");
    if (node.IsMap()) return "a map";
    std::string s = printable(node.Scalar(), 40);
    if (node.Tag() == "!") return str_cat("the quoted string \"", s, "\"");
    return str_cat("'", s, "'");
}

int text_edit_distance(const std::string& a, const std::string& b) {
    // Optimal string alignment: insertions, deletions, substitutions, adjacent transpositions.
    size_t n = a.size(), m = b.size();
    std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
    for (size_t i = 0; i <= n; ++i) d[i][0] = (int)i;
    for (size_t j = 0; j <= m; ++j) d[0][j] = (int)j;
    for (size_t i = 1; i <= n; ++i)
        for (size_t j = 1; j <= m; ++j) {
            int cost = a[i - 1] == b[j - 1] ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    return d[n][m];
}

std::string text_suggest(const std::string& word, const std::vector<std::string>& candidates) {
    std::string best;
    int best_d = 1 << 30;
    for (const auto& c : candidates) {
        int d = text_edit_distance(word, c);
        if (d < best_d) best_d = d, best = c;
    }
    // Close enough: one edit for short words, two up to 8 letters, three beyond.
    size_t len = std::max(word.size(), best.size());
    int limit = len <= 3 ? 1 : len <= 8 ? 2 : 3;
    if (best.empty() || best_d > limit) return "";
    return str_cat("did you mean '", best, "'?");
}

// ----------------------------------------------------------------------------
// pass 1: events only — depth, aliases, document count (yaml-cpp 0.7 recurses per level)

namespace {

class GuardHandler : public YAML::EventHandler {
  public:
    GuardHandler(std::string where, std::string key_path, bool is_file)
        : where_(std::move(where)), key_path_(std::move(key_path)), is_file_(is_file) {}

    void OnDocumentStart(const YAML::Mark& mark) override {
        if (++docs_ > 1) fail(mark, "expected one YAML document, found a second one ('---')");
    }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
        fail(mark,
             "expected plain values (YAML aliases '*name' are not supported), found an alias");
    }
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  const std::string&) override {}
    void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                         YAML::EmitterStyle::value) override {
        push(mark);
    }
    void OnSequenceEnd() override { --depth_; }
    void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                    YAML::EmitterStyle::value) override {
        push(mark);
    }
    void OnMapEnd() override { --depth_; }

    [[noreturn]] void fail(const YAML::Mark& mark, const std::string& msg) const {
        std::string at = is_file_ ? yaml_format_mark(where_, mark) : where_;
        throw InputError(str_cat(at, ": ", key_path_, ": ", msg));
    }

  private:
    void push(const YAML::Mark& mark) {
        if (++depth_ > kConfigMaxDepth)
            fail(mark, str_cat("expected nesting at most ", kConfigMaxDepth,
                               " levels deep, found deeper nesting"));
    }
    std::string where_, key_path_;
    bool is_file_;
    int depth_ = 0;
    int docs_ = 0;
};

// pass 2: walk the tree (depth already bounded) and reject repeated map keys.
void check_duplicates(const YAML::Node& node, const std::string& path, const std::string& where,
                      bool is_file) {
    if (node.IsSequence()) {
        for (size_t i = 0; i < node.size(); ++i)
            check_duplicates(node[i], str_cat(path, "[", i, "]"), where, is_file);
        return;
    }
    if (!node.IsMap()) return;
    std::map<std::string, YAML::Mark> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
        const YAML::Node key = it->first;  // a copy: it-> returns a temporary proxy
        std::string name = key.IsScalar() ? key.Scalar() : std::string();
        std::string child = path.empty() || path == "(document)" ? name : str_cat(path, ".", name);
        if (key.IsScalar()) {
            auto [pos, fresh] = seen.emplace(name, key.Mark());
            if (!fresh) {
                std::string at = is_file ? yaml_format_mark(where, key.Mark()) : where;
                throw InputError(str_cat(at, ": ", child, ": expected each key once, found '", name,
                                         "' again (first at line ", pos->second.line + 1,
                                         ", column ", pos->second.column + 1, ")"));
            }
        }
        check_duplicates(it->second, child, where, is_file);
    }
}

}  // namespace

YAML::Node yaml_load_guarded(const std::string& text, const std::string& where,
                             const std::string& key_path, bool where_is_file) {
    auto at = [&](const YAML::Mark& m) {
        return where_is_file ? yaml_format_mark(where, m) : where;
    };
    try {
        {
            std::istringstream in(text);
            YAML::Parser parser(in);
            GuardHandler guard(where, key_path, where_is_file);
            while (parser.HandleNextDocument(guard)) {
            }
        }
        YAML::Node root = YAML::Load(text);
        check_duplicates(root, key_path, where, where_is_file);
        return root;
    } catch (const YAML::ParserException& e) {
        throw InputError(str_cat(at(e.mark), ": ", key_path,
                                 ": expected valid YAML, found a syntax ", "error (",
                                 printable(e.msg, 120), ")"));
    } catch (const YAML::Exception& e) {
        throw InputError(str_cat(at(e.mark), ": ", key_path, ": expected valid YAML, found an ",
                                 "error (", printable(e.msg, 120), ")"));
    }
}

}  // namespace tessera
