// rank_env_from_environment(): where this process sits in the job, read from the variables of
// whichever launcher started it — Tessera's own (TESSERA_*), torchrun, mpirun (Open MPI) or srun
// (Slurm) — in that order of preference; none of them means a single-process run.
#include <cerrno>
#include <cstdlib>
#include <string>

#include "engine/core/error.h"
#include "engine/parallel/comm.h"

namespace tessera {

namespace {

const char* env_get(const char* name) {
    const char* v = std::getenv(name);
    return (v && *v) ? v : nullptr;
}

// An integer variable in [lo, hi]; InputError naming the variable otherwise.
int env_int(const char* name, int lo, int hi, const char* source) {
    const char* v = env_get(name);
    if (!v)
        throw InputError(str_cat("environment: ", name, " is not set (expected an integer; ",
                                 source, " sets it)"));
    char* end = nullptr;
    errno = 0;
    long x = std::strtol(v, &end, 10);
    if (*end != '\0' || errno != 0 || x < lo || x > hi)
        throw InputError(
            str_cat("environment: ", name, "='", v, "' is not an integer in [", lo, ", ", hi, "]"));
    return int(x);
}

// master_addr/master_port from MASTER_ADDR / MASTER_PORT (required by mpirun/srun jobs).
void env_master(RankEnv& e, const char* addr_var, const char* port_var, bool required) {
    const char* addr = env_get(addr_var);
    const char* port = env_get(port_var);
    if (!addr || !port) {
        if (!required) return;
        throw InputError(str_cat(
            "environment: ", e.source, " started this rank but ", !addr ? addr_var : port_var,
            " is not set; set ", addr_var, " to the host of rank 0 and ", port_var,
            " to a free TCP port (e.g. export ", addr_var, "=$(hostname) ", port_var, "=29500)"));
    }
    e.master_addr = addr;
    e.master_port = env_int(port_var, 1, 65535, e.source.c_str());
}

void env_check(const RankEnv& e, const char* rank_var) {
    if (e.rank >= e.world_size)
        throw InputError(str_cat("environment: ", rank_var, "=", e.rank,
                                 " is not below the world size ", e.world_size));
}

}  // namespace

RankEnv rank_env_from_environment() {
    RankEnv e;
    constexpr int kMaxWorld = 1 << 20;
    if (env_get("TESSERA_RANK")) {
        e.source = "tessera";
        e.world_size = env_int("TESSERA_WORLD_SIZE", 1, kMaxWorld, "tessera's launcher");
        e.rank = env_int("TESSERA_RANK", 0, kMaxWorld, "tessera's launcher");
        e.local_rank = env_get("TESSERA_LOCAL_RANK")
                           ? env_int("TESSERA_LOCAL_RANK", 0, kMaxWorld, "tessera's launcher")
                           : e.rank;
        env_master(e, "TESSERA_MASTER_ADDR", "TESSERA_MASTER_PORT", true);
        env_check(e, "TESSERA_RANK");
    } else if (env_get("RANK") && env_get("WORLD_SIZE")) {
        e.source = "torchrun";
        e.world_size = env_int("WORLD_SIZE", 1, kMaxWorld, "torchrun");
        e.rank = env_int("RANK", 0, kMaxWorld, "torchrun");
        e.local_rank = env_get("LOCAL_RANK") ? env_int("LOCAL_RANK", 0, kMaxWorld, "torchrun") : 0;
        env_master(e, "MASTER_ADDR", "MASTER_PORT", e.world_size > 1);
        env_check(e, "RANK");
    } else if (env_get("OMPI_COMM_WORLD_RANK")) {
        e.source = "mpirun";
        e.world_size = env_int("OMPI_COMM_WORLD_SIZE", 1, kMaxWorld, "mpirun");
        e.rank = env_int("OMPI_COMM_WORLD_RANK", 0, kMaxWorld, "mpirun");
        e.local_rank = env_get("OMPI_COMM_WORLD_LOCAL_RANK")
                           ? env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, kMaxWorld, "mpirun")
                           : 0;
        env_master(e, "MASTER_ADDR", "MASTER_PORT", e.world_size > 1);
        env_check(e, "OMPI_COMM_WORLD_RANK");
    } else if (env_get("SLURM_PROCID") && env_get("SLURM_NTASKS")) {
        e.source = "srun";
        e.world_size = env_int("SLURM_NTASKS", 1, kMaxWorld, "srun");
        e.rank = env_int("SLURM_PROCID", 0, kMaxWorld, "srun");
        e.local_rank =
            env_get("SLURM_LOCALID") ? env_int("SLURM_LOCALID", 0, kMaxWorld, "srun") : 0;
        env_master(e, "MASTER_ADDR", "MASTER_PORT", e.world_size > 1);
        env_check(e, "SLURM_PROCID");
    } else {
        e.source = "single";
    }
    return e;
}

}  // namespace tessera
