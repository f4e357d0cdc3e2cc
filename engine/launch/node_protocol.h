// The node protocol (internal to engine/launch): how a node launcher (`tessera _node`, one per
// host of a multi-host job) reports its ranks to the job launcher, one line each on its stdout
// (the ssh channel):
//   o <text>            a console line of a rank, already prefixed with its coordinates
//   t <rank> <json>     a telemetry line of a rank, verbatim
//   x <rank> <message>  a rank failed (its death message)
//   d <status>          the node is done: completed | stopped | failed
// and reads "stop" lines on its stdin (EOF: the job launcher or the connection is gone).
#pragma once
#include <optional>
#include <string>

namespace tessera {

struct NodeLine {
    char kind = 0;  // 'o', 't', 'x' or 'd'
    int rank = -1;  // 't' and 'x': the rank, -1 when outside the world
    std::string text;
};

std::string node_line(char kind, const std::string& text);            // 'o', 'd'
std::string node_line(char kind, int rank, const std::string& text);  // 't', 'x'
// A protocol line, or nullopt for anything else (a remote shell's own message).
std::optional<NodeLine> node_line_parse(const std::string& line, int world);

}  // namespace tessera
