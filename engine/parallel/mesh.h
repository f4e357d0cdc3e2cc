// The device mesh: world = dp × tp × pp ranks. Global rank order (Megatron's): tensor-parallel
// rank fastest, then data-parallel, then pipeline stage:
//     rank = tp + TP * (dp + DP * pp)
// so the ranks of one TP group are adjacent (one node, fastest links), and a pipeline stage's
// ranks are contiguous. docs/parallelism.md draws it.
#pragma once
#include <string>
#include <vector>

namespace tessera {

struct MeshShape {
    int dp = 1, tp = 1, pp = 1;
    int world() const { return dp * tp * pp; }
};

struct MeshCoord {
    int dp = 0, tp = 0, pp = 0;
};

enum class GroupKind { world, dp, tp, pp, embedding };

int mesh_rank(const MeshShape& m, const MeshCoord& c);
MeshCoord mesh_coord(const MeshShape& m, int rank);
// The global ranks of `rank`'s group of this kind, in group-rank order:
//   dp: same (tp, pp), varying dp; tp: same (dp, pp); pp: same (dp, tp), varying stage;
//   embedding: the first and last stage of the same (dp, tp) (one rank when pp == 1); a middle
//   stage is not a member of the group this returns.
std::vector<int> mesh_group(const MeshShape& m, int rank, GroupKind kind);
// "dp1.tp0.pp2" — the prefix of a rank's log lines and the name of its groups.
std::string mesh_coord_str(const MeshCoord& c);
const char* group_kind_name(GroupKind k);

}  // namespace tessera
