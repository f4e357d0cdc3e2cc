// The node protocol's lines (see node_protocol.h).
#include "engine/launch/node_protocol.h"

#include <cstdlib>

#include "engine/core/error.h"

namespace tessera {

std::string node_line(char kind, const std::string& text) {
    return str_cat(kind, " ", text);
}

std::string node_line(char kind, int rank, const std::string& text) {
    return str_cat(kind, " ", rank, " ", text);
}

std::optional<NodeLine> node_line_parse(const std::string& line, int world) {
    if (line.size() < 2 || line[1] != ' ') return std::nullopt;
    NodeLine n{line[0], -1, line.substr(2)};
    switch (n.kind) {
        case 'o':
        case 'd':
            return n;
        case 't':
        case 'x': {
            const size_t sp = n.text.find(' ');
            const int r = std::atoi(n.text.substr(0, sp).c_str());
            n.rank = r >= 0 && r < world ? r : -1;
            n.text = sp == std::string::npos ? "" : n.text.substr(sp + 1);
            return n;
        }
        default:
            return std::nullopt;
    }
}

}  // namespace tessera
