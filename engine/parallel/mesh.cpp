#include "engine/parallel/mesh.h"

#include "engine/core/error.h"

namespace tessera {

int mesh_rank(const MeshShape& m, const MeshCoord& c) {
    return c.tp + m.tp * (c.dp + m.dp * c.pp);
}

MeshCoord mesh_coord(const MeshShape& m, int rank) {
    TS_CHECK(rank >= 0 && rank < m.world(), "rank ", rank, " outside world ", m.world());
    MeshCoord c;
    c.tp = rank % m.tp;
    c.dp = (rank / m.tp) % m.dp;
    c.pp = rank / (m.tp * m.dp);
    return c;
}

std::vector<int> mesh_group(const MeshShape& m, int rank, GroupKind kind) {
    MeshCoord c = mesh_coord(m, rank);
    std::vector<int> out;
    switch (kind) {
        case GroupKind::world:
            for (int r = 0; r < m.world(); ++r) out.push_back(r);
            break;
        case GroupKind::dp:
            for (int d = 0; d < m.dp; ++d) out.push_back(mesh_rank(m, {d, c.tp, c.pp}));
            break;
        case GroupKind::tp:
            for (int t = 0; t < m.tp; ++t) out.push_back(mesh_rank(m, {c.dp, t, c.pp}));
            break;
        case GroupKind::pp:
            for (int p = 0; p < m.pp; ++p) out.push_back(mesh_rank(m, {c.dp, c.tp, p}));
            break;
        case GroupKind::embedding:
            out.push_back(mesh_rank(m, {c.dp, c.tp, 0}));
            if (m.pp > 1) out.push_back(mesh_rank(m, {c.dp, c.tp, m.pp - 1}));
            break;
    }
    return out;
}

std::string mesh_coord_str(const MeshCoord& c) {
    return str_cat("dp", c.dp, ".tp", c.tp, ".pp", c.pp);
}

const char* group_kind_name(GroupKind k) {
    switch (k) {
        case GroupKind::world:
            return "world";
        case GroupKind::dp:
            return "dp";
        case GroupKind::tp:
            return "tp";
        case GroupKind::pp:
            return "pp";
        case GroupKind::embedding:
            return "embedding";
    }
    return "?";
}

}  // namespace tessera
