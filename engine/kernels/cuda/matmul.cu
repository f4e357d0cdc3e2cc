// Linear layer through cuBLASLt (row-major semantics of engine/kernels/cpu/matmul.h).
//
// cuBLASLt is column-major; a row-major (R, K) matrix is a column-major (K, R) one. So
//   forward  out^T (OC, N) = weight^T-view... i.e. D(OC,N) = op_T(W: C x OC) * inp(C x N)
//   dinp     D(C, N)  = W(C x OC) * dout(OC x N)
//   dweight  D(C, OC) = inp(C x N) * op_T(dout: OC x N)       (fp32 C/D, beta = 1)
// Plans (descriptors, layouts, the heuristic's algorithm) are cached per shape, dtype, epilogue
// and pointer alignment in a per-thread map (the cuBLASLt handle is per thread too).
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "engine/core/choice_cache.h"
#include "engine/kernels/cuda/cuda_common.cuh"
#include "engine/kernels/cuda/cuda_handles.cuh"
#include "engine/kernels/cuda/device_helpers.cuh"
#include "engine/kernels/cuda/elementwise.cuh"
#include "engine/kernels/cuda/fp8.cuh"
#include "engine/kernels/cuda/gelu.cuh"
#include "engine/kernels/cuda/matmul.cuh"
#include "engine/kernels/fp8_workspace.h"

namespace tessera {

// ---------------------------------------------------------------------------------------------
// kernels

// out, pre are (N, OC); bias is (OC) or null. x = out + bias; pre = x (if not null);
// out = gelu(x) if gelu else x.
template <typename T>
static __global__ void bias_gelu_kernel(T* out, T* pre, const T* bias, long N, int OC, bool gelu) {
    long total = N * OC;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total;
         i += (long)gridDim.x * blockDim.x) {
        float x = to_float(out[i]);
        if (bias) x = to_float(from_float<T>(x + to_float(bias[i % OC])));  // round like a GEMM
        if (pre) pre[i] = from_float<T>(x);
        out[i] = from_float<T>(gelu ? gelu_tanh(x) : x);
    }
}

// dbias (OC) += column sums of dout (N, OC), in one kernel. partial is (chunks, OC): partial[c, o]
// = sum of dout[n, o] over the rows n of chunk c (blockIdx.y). Block of 8 warps over VEC * 32
// columns: each lane sums VEC adjacent columns (one 16-byte load per row when VEC > 1), warp w the
// chunk's rows w, w + 8, ...; the warps' sums are added in warp order. The last block of a column
// group to finish (counted in done[blockIdx.x], which it sets back to zero) adds the group's
// chunks in chunk order into dbias: every order fixed, so every run gives the same bits, without
// the second launch the chunks' sum used to take.
template <typename T, int VEC>
static __global__ void column_sum_kernel(float* dbias, float* partial, unsigned* done,
                                         const T* dout, int N, int OC, int rows_per_chunk) {
    __shared__ float sh[8][32 * VEC + 1];
    __shared__ bool last;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int o = (blockIdx.x * 32 + lane) * VEC;
    const int r0 = blockIdx.y * rows_per_chunk;
    const int r1 = min(N, r0 + rows_per_chunk);
    float acc[VEC] = {};
    if (o < OC)
        for (int n = r0 + warp; n < r1; n += 8) {
            Vec<T, VEC> v = load_vec<VEC>(dout + (long)n * OC + o);
#pragma unroll
            for (int k = 0; k < VEC; ++k) acc[k] += to_float(v.v[k]);
        }
#pragma unroll
    for (int k = 0; k < VEC; ++k) sh[warp][lane * VEC + k] = acc[k];
    __syncthreads();
    for (int c = threadIdx.x; c < 32 * VEC; c += blockDim.x) {
        const int oc = blockIdx.x * 32 * VEC + c;
        if (oc >= OC) continue;
        float s = 0.0f;
        for (int w = 0; w < 8; ++w) s += sh[w][c];
        partial[(long)blockIdx.y * OC + oc] = s;
    }
    __threadfence();  // this block's partial sums reach L2 before the count says so
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&done[blockIdx.x], 1u) == gridDim.y - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int c = threadIdx.x; c < 32 * VEC; c += blockDim.x) {
        const int oc = blockIdx.x * 32 * VEC + c;
        if (oc >= OC) continue;
        float s = 0.0f;
#pragma unroll 16
        for (int k = 0; k < (int)gridDim.y; ++k) s += __ldcg(partial + (long)k * OC + oc);
        dbias[oc] += s;
    }
    if (threadIdx.x == 0) done[blockIdx.x] = 0;  // ready for the next launch on this stream
}

// ---------------------------------------------------------------------------------------------
// cuBLASLt plans

namespace {

// D (m, n) = op(A) (m, k) * op(B) (k, n) [+ beta * D], column-major, with an epilogue; with
// c_in, D = op(A) * op(B) + C, C an operand of D's layout (a residual stream).
struct GemmShape {
    int device;
    cudaDataType_t a_type, b_type, d_type;
    bool trans_a, trans_b;
    int m, n, k;
    long lda, ldb, ldd;
    cublasLtEpilogue_t epilogue;
    long aux_ld;
    int align_a, align_b, align_d;  // bytes, up to 256
    bool fast_accum = false;        // FP8: accumulate without cuBLASLt's periodic promotion
    bool c_in = false;              // C is an operand of its own (beta 1), not D
    auto tie() const {
        return std::tie(device, a_type, b_type, d_type, trans_a, trans_b, m, n, k, lda, ldb, ldd,
                        epilogue, aux_ld, align_a, align_b, align_d, fast_accum, c_in);
    }
    bool operator<(const GemmShape& o) const { return tie() < o.tie(); }
};

struct GemmPlan {
    bool supported = false;  // the heuristic found an algorithm
    CublasLtDesc desc;
    CublasLtLayout a, b, d;
    cublasLtMatmulAlgo_t algo{};
    // FP8: the heuristic's next candidates, tried in order when cuBLASLt refuses one at run time
    std::vector<cublasLtMatmulAlgo_t> spare;
    bool chosen = false;  // gemm_choose ran (on the first call, which has the operands)
};

bool is_fp8(cudaDataType_t t) {
    return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2;
}

int ptr_align(const void* p) {
    int a = 256;
    while (a > 1 && ((uintptr_t)p % a) != 0) a /= 2;
    return a;
}

template <typename T>
cudaDataType_t cuda_type() {
    return std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;
}

CublasLtLayout make_layout(cudaDataType_t type, long rows, long cols, long ld) {
    cublasLtMatrixLayout_t l = nullptr;
    CUBLAS_CHECK(lt_api().MatrixLayoutCreate(&l, type, rows, cols, ld));
    return CublasLtLayout(l);
}

// FP8 plans are made with the operands' scale pointers set (the heuristic then offers only
// algorithms that scale), any pair of device floats: gemm_run sets the call's own.
// The plan for g with cuBLASLt's first `count` heuristic candidates (algo, then spare: the
// next at the back).
GemmPlan make_plan(const GemmShape& g, const float* a_scale, const float* b_scale, int count) {
    GemmPlan p;
    cublasLtMatmulDesc_t desc = nullptr;
    CUBLAS_CHECK(lt_api().MatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    if (is_fp8(g.a_type)) {
        TS_CUDA_REQUIRE(a_scale && b_scale, "gemm_plan: an FP8 plan needs its scale pointers");
        CUBLAS_CHECK(lt_api().MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                     &a_scale, sizeof(a_scale)));
        CUBLAS_CHECK(lt_api().MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                     &b_scale, sizeof(b_scale)));
    }
    p.desc.reset(desc);
    cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(
        lt_api().MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    CUBLAS_CHECK(
        lt_api().MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    CUBLAS_CHECK(lt_api().MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &g.epilogue,
                                                 sizeof(g.epilogue)));
    if (g.aux_ld > 0) {
        int64_t ld = g.aux_ld;
        CUBLAS_CHECK(lt_api().MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                     &ld, sizeof(ld)));
    }
    if (g.fast_accum) {
        const int8_t on = 1;
        CUBLAS_CHECK(lt_api().MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &on,
                                                     sizeof(on)));
    }
    p.a =
        g.trans_a ? make_layout(g.a_type, g.k, g.m, g.lda) : make_layout(g.a_type, g.m, g.k, g.lda);
    p.b =
        g.trans_b ? make_layout(g.b_type, g.n, g.k, g.ldb) : make_layout(g.b_type, g.k, g.n, g.ldb);
    p.d = make_layout(g.d_type, g.m, g.n, g.ldd);

    CublasLt& lt = cublaslt();
    cublasLtMatmulPreference_t pref_raw = nullptr;
    CUBLAS_CHECK(lt_api().MatmulPreferenceCreate(&pref_raw));
    CublasLtPref pref(pref_raw);
    uint64_t ws = lt.workspace_bytes;
    CUBLAS_CHECK(lt_api().MatmulPreferenceSetAttribute(
        pref_raw, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    uint32_t al_a = g.align_a, al_b = g.align_b, al_d = g.align_d;
    CUBLAS_CHECK(lt_api().MatmulPreferenceSetAttribute(
        pref_raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a)));
    CUBLAS_CHECK(lt_api().MatmulPreferenceSetAttribute(
        pref_raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b)));
    CUBLAS_CHECK(lt_api().MatmulPreferenceSetAttribute(
        pref_raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_d, sizeof(al_d)));
    CUBLAS_CHECK(lt_api().MatmulPreferenceSetAttribute(
        pref_raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof(al_d)));
    std::vector<cublasLtMatmulHeuristicResult_t> result((size_t)count);
    int found = 0;
    cublasStatus_t st =
        lt_api().MatmulAlgoGetHeuristic(lt.handle, desc, p.a.get(), p.b.get(), p.d.get(), p.d.get(),
                                        pref_raw, count, result.data(), &found);
    if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
        p.supported = true;
        p.algo = result[0].algo;
        for (int i = found - 1; i >= 1; --i) p.spare.push_back(result[i].algo);  // next at the back
    } else if (st != CUBLAS_STATUS_NOT_SUPPORTED && st != CUBLAS_STATUS_SUCCESS) {
        CUBLAS_CHECK(st);
    }
    return p;
}

// ---------------------------------------------------------------------------------------------
// Choosing among cuBLASLt's candidates. Its heuristic ranks algorithms by a model of the device;
// on the H200 its first choice ran up to 31% slower than the fastest of its first eight at the
// models' own shapes (bench/kernels_cuda --gemm-algos, 2026-12-05: Qwen2.5-0.5B's 896-wide
// projections), 3-6% of a step's GEMM time. So every bf16 and fp32 shape times those candidates
// on its first call, with the call's operands, and runs the fastest from then on; the choice is
// kept per host (ChoiceCache: the GPU's name and the cuBLASLt version name the file), so that
// every later run, and every rank of the host, runs the same algorithm for the same shape: the
// bits of a run do not depend on one timing's noise. TESSERA_GEMM_TUNING=off keeps the
// heuristic's first choice (comparisons). FP8 shapes keep the heuristic's order (spare).

constexpr int kChoiceCandidates = 8;  // cuBLASLt offered at most 8 at the models' shapes

// The plan's candidates in the heuristic's order.
std::vector<cublasLtMatmulAlgo_t> candidates_of(const GemmPlan& p) {
    std::vector<cublasLtMatmulAlgo_t> algos;
    if (p.supported) algos.push_back(p.algo);
    for (auto it = p.spare.rbegin(); it != p.spare.rend(); ++it) algos.push_back(*it);
    return algos;
}

size_t dtype_bytes(cudaDataType_t t) {
    return t == CUDA_R_32F ? 4 : t == CUDA_R_16BF ? 2 : 1;
}

// Milliseconds per call of each algorithm with the plan's descriptor (its pointers as set), one
// call then `reps` timed; +inf where cuBLASLt refuses it. With beta != 0 the calls add into D
// (C null: C is D), so D is kept in pinned host memory meanwhile and put back: D ends as it was.
std::vector<float> time_algos(const GemmShape& g, const GemmPlan& p,
                              const std::vector<cublasLtMatmulAlgo_t>& algos, const void* A,
                              const void* B, void* D, float beta, int reps, cudaStream_t s,
                              const void* C = nullptr) {
    const size_t d_bytes = dtype_bytes(g.d_type) * ((size_t)g.ldd * (g.n - 1) + g.m);
    PinnedBuffer<char> kept;
    if (!C) C = D;
    if (beta != 0.0f && C == D) {
        kept = cuda_malloc_pinned<char>(d_bytes);
        CUDA_CHECK(cudaMemcpyAsync(kept.get(), D, d_bytes, cudaMemcpyDeviceToHost, s));
    }
    CublasLt& lt = cublaslt();
    const float alpha = 1.0f;
    CudaEvent e0 = cuda_event_create(cudaEventDefault), e1 = cuda_event_create(cudaEventDefault);
    std::vector<float> ms;
    for (const cublasLtMatmulAlgo_t& a : algos) {
        auto call = [&] {
            return lt_api().Matmul(lt.handle, p.desc.get(), &alpha, A, p.a.get(), B, p.b.get(),
                                   &beta, C, p.d.get(), D, p.d.get(), &a, lt.workspace.get(),
                                   lt.workspace_bytes, s);
        };
        if (call() != CUBLAS_STATUS_SUCCESS) {
            ms.push_back(std::numeric_limits<float>::infinity());
            continue;
        }
        CUDA_CHECK(cudaEventRecord(e0.get(), s));
        for (int i = 0; i < reps; ++i) CUBLAS_CHECK(call());
        CUDA_CHECK(cudaEventRecord(e1.get(), s));
        CUDA_CHECK(cudaEventSynchronize(e1.get()));
        float t = 0;
        CUDA_CHECK(cudaEventElapsedTime(&t, e0.get(), e1.get()));
        ms.push_back(t / reps);
    }
    if (kept) {
        CUDA_CHECK(cudaMemcpyAsync(D, kept.get(), d_bytes, cudaMemcpyHostToDevice, s));
        CUDA_CHECK(cudaStreamSynchronize(s));  // before `kept` goes
    }
    return ms;
}

bool gemm_choice_on() {
    static const bool on = [] {
        const char* e = std::getenv("TESSERA_GEMM_TUNING");
        return !(e && std::string(e) == "off");
    }();
    return on;
}

// A shape's plan, made on its first call with the candidates it needs: FP8's first four (spares
// for a refusal at run time), bf16 and fp32's first kChoiceCandidates when the choice is on (timed
// once by gemm_choose, which then keeps one), else the heuristic's first alone.
GemmPlan& gemm_plan(const GemmShape& g, const float* a_scale = nullptr,
                    const float* b_scale = nullptr) {
    thread_local std::map<GemmShape, GemmPlan> plans;
    auto it = plans.find(g);
    if (it != plans.end()) return it->second;
    const int count = is_fp8(g.a_type) ? 4 : gemm_choice_on() ? kChoiceCandidates : 1;
    return plans.emplace(g, make_plan(g, a_scale, b_scale, count)).first->second;
}

// The host's choices for this GPU model and cuBLASLt version:
// devices_cache_dir()/gemm_<device_file_slug(GPU name)>_cublaslt<version>.txt
ChoiceCache& gemm_choices(int device) {
    static std::mutex mu;
    static std::map<int, std::unique_ptr<ChoiceCache>> caches;
    std::lock_guard<std::mutex> lock(mu);
    std::unique_ptr<ChoiceCache>& c = caches[device];
    if (!c) {
        cudaDeviceProp prop{};
        CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
        c = std::make_unique<ChoiceCache>(str_cat(devices_cache_dir(), "/gemm_",
                                                  device_file_slug(prop.name), "_cublaslt",
                                                  lt_api().GetVersion(), ".txt"));
    }
    return *c;
}

// The shape as a key without blanks: every field of GemmShape but the device.
std::string shape_key(const GemmShape& g) {
    return str_cat("t", (int)g.a_type, ".", (int)g.b_type, ".", (int)g.d_type, "_",
                   g.trans_a ? "T" : "N", g.trans_b ? "T" : "N", "_m", g.m, "n", g.n, "k", g.k,
                   "_ld", g.lda, ".", g.ldb, ".", g.ldd, "_e", (int)g.epilogue, ".", g.aux_ld,
                   "_al", g.align_a, ".", g.align_b, ".", g.align_d, "_f", g.fast_accum ? 1 : 0,
                   g.c_in ? "_c" : "");
}

// On the plan's first call (its pointers set): the host's choice for the shape, made by timing
// the candidates where the host has none. The heuristic's first stays unless another is faster
// by more than 2%.
void gemm_choose(const GemmShape& g, GemmPlan& p, const void* A, const void* B, void* D, float beta,
                 cudaStream_t s, const void* C) {
    p.chosen = true;
    if (is_fp8(g.a_type) || !gemm_choice_on()) return;
    const std::vector<cublasLtMatmulAlgo_t> algos = candidates_of(p);
    p.spare.clear();  // only FP8 plans fall back to a spare
    if (algos.size() < 2) return;
    const int pick = gemm_choices(g.device).get_or_choose(shape_key(g), [&] {
        const std::vector<float> ms = time_algos(g, p, algos, A, B, D, beta, 3, s, C);
        int best = 0;
        for (int i = 1; i < (int)ms.size(); ++i)
            if (ms[i] < ms[best]) best = i;
        return ms[0] <= 1.02f * ms[best] ? 0 : best;
    });
    if (pick > 0 && pick < (int)algos.size()) p.algo = algos[(size_t)pick];
}

// Runs D = op(A) op(B) + beta D (g.c_in: + C) with the plan's epilogue; returns false when
// cuBLASLt has no algorithm for it (the caller falls back or fails). FP8 operands: their
// dequantization factors (device floats) multiply the product.
bool gemm_run(const GemmShape& g, const void* A, const void* B, void* D, float beta,
              const void* bias, void* aux, cudaStream_t s, const float* a_scale = nullptr,
              const float* b_scale = nullptr, const void* C = nullptr) {
    TS_CUDA_REQUIRE(g.c_in == (C != nullptr), "gemm_run: C given where the shape has none");
    if (g.c_in) beta = 1.0f;
    if (!C) C = D;
    GemmPlan& p = gemm_plan(g, a_scale, b_scale);
    if (!p.supported) return false;
    cublasLtMatmulDesc_t desc = p.desc.get();
    if (a_scale)
        CUBLAS_CHECK(lt_api().MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                     &a_scale, sizeof(a_scale)));
    if (b_scale)
        CUBLAS_CHECK(lt_api().MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                     &b_scale, sizeof(b_scale)));
    if (bias)
        CUBLAS_CHECK(lt_api().MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                     sizeof(bias)));
    if (aux)
        CUBLAS_CHECK(lt_api().MatmulDescSetAttribute(
            desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
    if (!p.chosen) gemm_choose(g, p, A, B, D, beta, s, C);
    const float alpha = 1.0f;
    CublasLt& lt = cublaslt();
    for (;;) {
        const cublasStatus_t st = lt_api().Matmul(
            lt.handle, desc, &alpha, A, p.a.get(), B, p.b.get(), &beta, C, p.d.get(), D, p.d.get(),
            &p.algo, lt.workspace.get(), lt.workspace_bytes, s);
        if (st == CUBLAS_STATUS_SUCCESS) return true;
        // The heuristic's choice may still be refused at run time for FP8 (NVIDIA's FP8 sample
        // says so): the next candidate, and when none is left the caller's fallback.
        if (st != CUBLAS_STATUS_NOT_SUPPORTED || !is_fp8(g.a_type)) CUBLAS_CHECK(st);
        if (p.spare.empty()) {
            p.supported = false;
            return false;
        }
        p.algo = p.spare.back();
        p.spare.pop_back();
    }
}

GemmShape gemm_shape(cudaDataType_t ab, cudaDataType_t d, bool ta, bool tb, int m, int n, int k,
                     long lda, long ldb, long ldd, const void* A, const void* B, const void* D,
                     cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT, long aux_ld = 0) {
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    return GemmShape{dev, ab,  ab,  d,      ta,           tb,           m,           n, k, lda,
                     ldb, ldd, epi, aux_ld, ptr_align(A), ptr_align(B), ptr_align(D)};
}

struct {
    std::atomic<long> forward{0}, dinp{0}, dweight{0};
} fp8_counts_;  // this process's FP8 GEMMs (all threads; for the benches and tests)

// An FP8 GEMM workspace's scale slots (Fp8Workspace: amax k, then the 1/scale k cuBLASLt reads).
struct Fp8Slots {
    char* ws;
    float* amax(int k) const { return reinterpret_cast<float*>(ws + Fp8Workspace::kSlotBytes * k); }
    float* scale_inv(int k) const {
        return reinterpret_cast<float*>(ws + Fp8Workspace::kScaleInvOffset +
                                        Fp8Workspace::kSlotBytes * k);
    }
    void clear_amax(cudaStream_t s) const {
        CUDA_CHECK(cudaMemsetAsync(ws, 0, Fp8Workspace::kScaleInvOffset, s));
    }
};

// An FP8 GEMM's shape: A and B of their own formats, fast accumulation in the forward only (as
// FP8 training recipes do: the backward's sums are longer and keep cuBLASLt's promotion).
GemmShape gemm_shape_fp8(cudaDataType_t a, cudaDataType_t b, cudaDataType_t d, int m, int n, int k,
                         long lda, long ldb, long ldd, const void* A, const void* B, const void* D,
                         bool fast_accum, cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT,
                         long aux_ld = 0) {
    GemmShape g = gemm_shape(a, d, true, false, m, n, k, lda, ldb, ldd, A, B, D, epi, aux_ld);
    g.b_type = b;
    g.fast_accum = fast_accum;
    return g;
}

// The FP8 forward: inp and weight quantized to e4m3 in the workspace, then
// D(OC, N) = op_T(weight_q) · inp_q with the bias / GELU epilogue where cuBLASLt has one (else
// the plain product, the epilogue left to the caller: returns bias_done / gelu_done false).
// Returns false, with nothing written, where cuBLASLt has no FP8 algorithm for the shape.
bool forward_fp8(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int N, int C,
                 int OC, bool gelu, bf16* pre_gelu, void* workspace, cudaStream_t s,
                 bool* epilogue_done) {
    const Fp8Workspace L = Fp8Workspace::of(N, C, OC, false);
    char* ws = static_cast<char*>(workspace);
    const Fp8Slots sl{ws};  // slot 0: inp, 1: weight
    uint8_t* xq = reinterpret_cast<uint8_t*>(ws + L.x);
    uint8_t* wq = reinterpret_cast<uint8_t*>(ws + L.w);
    auto shape = [&](bool fast, cublasLtEpilogue_t epi) {
        return gemm_shape_fp8(
            CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_16BF, OC, N, C, C, C, OC, wq, xq, out, fast, epi,
            epi == CUBLASLT_EPILOGUE_GELU_AUX || epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ? OC : 0);
    };
    const bool bias_ok = bias && ptr_align(bias) >= 16;
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    if ((gelu || bias) && (!bias || bias_ok) &&
        (!pre_gelu || (OC % 8 == 0 && ptr_align(pre_gelu) >= 16)))
        epi =
            gelu ? (pre_gelu ? (bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                             : (bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU))
                 : CUBLASLT_EPILOGUE_BIAS;
    // the first of: the epilogue with fast accumulation, the plain product with and without it
    struct Try {
        bool fast;
        cublasLtEpilogue_t epi;
    };
    const Try tries[] = {
        {true, epi}, {true, CUBLASLT_EPILOGUE_DEFAULT}, {false, CUBLASLT_EPILOGUE_DEFAULT}};
    bool any = false;
    for (const Try& t : tries)
        any = any || gemm_plan(shape(t.fast, t.epi), sl.scale_inv(1), sl.scale_inv(0)).supported;
    if (!any) return false;
    sl.clear_amax(s);
    fp8_amax(sl.amax(0), inp, (long)N * C, s);
    fp8_amax(sl.amax(1), weight, (long)OC * C, s);
    fp8_quantize(xq, sl.scale_inv(0), inp, sl.amax(0), N, C, Fp8Format::e4m3, false, s);
    fp8_quantize(wq, sl.scale_inv(1), weight, sl.amax(1), OC, C, Fp8Format::e4m3, false, s);
    for (const Try& t : tries) {
        const bool with_epi = t.epi != CUBLASLT_EPILOGUE_DEFAULT;
        if (gemm_run(shape(t.fast, t.epi), wq, xq, out, 0.0f, with_epi && bias ? bias : nullptr,
                     with_epi ? pre_gelu : nullptr, s, sl.scale_inv(1), sl.scale_inv(0))) {
            *epilogue_done = with_epi || (!gelu && !bias);
            fp8_counts_.forward++;
            return true;
        }
    }
    return false;  // every FP8 plan refused at run time: the caller's bf16 GEMM
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// launchers

Fp8Counts matmul_fp8_counts() {
    return {fp8_counts_.forward.load(), fp8_counts_.dinp.load(), fp8_counts_.dweight.load()};
}

template <typename T>
void matmul_forward_cuda(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC,
                         cudaStream_t s, bool gelu, T* pre_gelu, void* fp8_workspace,
                         const T* residual) {
    TS_CUDA_REQUIRE(N >= 0 && C > 0 && OC > 0, "matmul_forward_cuda: bad shape N=", N, " C=", C,
                    " OC=", OC);
    TS_CUDA_REQUIRE(out && inp && weight, "matmul_forward_cuda: null out/inp/weight");
    TS_CUDA_REQUIRE(gelu || !pre_gelu, "matmul_forward_cuda: pre_gelu given without gelu");
    TS_CUDA_REQUIRE(!gelu || !residual, "matmul_forward_cuda: a residual after a GELU");
    if (N == 0) return;
    if constexpr (std::is_same_v<T, bf16>) {
        bool epilogue_done = false;
        if (fp8_workspace && forward_fp8(out, inp, weight, bias, N, C, OC, gelu, pre_gelu,
                                         fp8_workspace, s, &epilogue_done)) {
            if (!epilogue_done) {
                bias_gelu_kernel<T>
                    <<<grid_for((long)N * OC, 256), 256, 0, s>>>(out, pre_gelu, bias, N, OC, gelu);
                CUDA_CHECK_LAUNCH("bias_gelu_kernel");
            }
            if (residual) add_bias_residual_cuda<T>(out, nullptr, residual, N, OC, s);
            return;
        }
    }
    const cudaDataType_t t = cuda_type<T>();
    constexpr bool is_bf16 = std::is_same_v<T, bf16>;
    // 1) bf16 + gelu: try the fused GELU_AUX(_BIAS) epilogue (aux ld must be a multiple of 8)
    const bool bias_ok = bias && ptr_align(bias) >= 16;
    if (is_bf16 && gelu && (!bias || bias_ok) &&
        (!pre_gelu || (OC % 8 == 0 && ptr_align(pre_gelu) >= 16))) {
        cublasLtEpilogue_t epi =
            pre_gelu ? (bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                     : (bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU);
        GemmShape g = gemm_shape(t, t, true, false, OC, N, C, C, C, OC, weight, inp, out, epi,
                                 pre_gelu ? OC : 0);
        if (gemm_run(g, weight, inp, out, 0.0f, bias, pre_gelu, s)) return;
    }
    // 2) GEMM (+ bias epilogue when the bias is aligned; + the residual as cuBLASLt's C), then
    // what it could not do in a kernel
    auto shape = [&](cublasLtEpilogue_t epi, bool with_res) {
        GemmShape g = gemm_shape(t, t, true, false, OC, N, C, C, C, OC, weight, inp, out, epi);
        if (with_res) {
            g.c_in = true;
            g.align_d = std::min(g.align_d, ptr_align(residual));
        }
        return g;
    };
    cublasLtEpilogue_t epi = bias_ok ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    bool bias_done = bias_ok, res_done = residual != nullptr;
    if (!gemm_run(shape(epi, res_done), weight, inp, out, 0.0f, bias_ok ? bias : nullptr, nullptr,
                  s, nullptr, nullptr, residual)) {
        bias_done = res_done = false;
        TS_CUDA_REQUIRE(gemm_run(shape(CUBLASLT_EPILOGUE_DEFAULT, false), weight, inp, out, 0.0f,
                                 nullptr, nullptr, s),
                        "matmul_forward_cuda: cuBLASLt has no algorithm for N=", N, " C=", C,
                        " OC=", OC);
    }
    const T* kbias = bias_done ? nullptr : bias;
    if (residual && !res_done) {
        add_bias_residual_cuda<T>(out, kbias, residual, N, OC, s);  // no GELU with a residual
    } else if (gelu || kbias) {
        bias_gelu_kernel<T>
            <<<grid_for((long)N * OC, 256), 256, 0, s>>>(out, pre_gelu, kbias, N, OC, gelu);
        CUDA_CHECK_LAUNCH("bias_gelu_kernel");
    }
}

// The DGELU epilogue from this many rows (tokens) on. Below it, cuBLASLt's epilogue kernels ran
// 5-15% slower on the H200 than the plain GEMM and a separate gelu_backward together (bench
// op_sweep, 2026-12-04: GPT-2's MLP widths, C 3072-6400, at N 512-2048); from 4096 rows the
// epilogue saves 1-14% of the pair.
constexpr int kDgeluEpilogueMinRows = 4096;

template <typename T>
void matmul_backward_cuda(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                          const T* weight, int N, int C, int OC, cudaStream_t s,
                          void* fp8_workspace, const T* gelu_pre, bool dweight_overwrite) {
    TS_CUDA_REQUIRE(N >= 0 && C > 0 && OC > 0, "matmul_backward_cuda: bad shape N=", N, " C=", C,
                    " OC=", OC);
    TS_CUDA_REQUIRE(dout, "matmul_backward_cuda: null dout");
    TS_CUDA_REQUIRE(!gelu_pre || dinp, "matmul_backward_cuda: gelu_pre given without dinp");
    if (N == 0) return;
    T* const dinp_out = dinp;  // for the GELU derivative after an FP8 or plain GEMM
    const float dweight_beta = dweight_overwrite ? 0.0f : 1.0f;
    const cudaDataType_t t = cuda_type<T>();
    if constexpr (std::is_same_v<T, bf16>) {
        // FP8: dout quantized to e5m2 (straight for dinp, transposed for dweight), weight and inp
        // to e4m3 transposed (cuBLASLt's FP8 GEMMs are "TN" only); what has no FP8 algorithm
        // runs in bf16 below
        if (fp8_workspace) {
            const Fp8Workspace L = Fp8Workspace::of(N, C, OC, true);
            char* ws = static_cast<char*>(fp8_workspace);
            const Fp8Slots sl{ws};  // amax: dout, inp, weight; 1/scale: dout, doutᵀ, inpᵀ, weightᵀ
            uint8_t* xt = reinterpret_cast<uint8_t*>(ws + L.x);
            uint8_t* wt = reinterpret_cast<uint8_t*>(ws + L.w);
            uint8_t* g = reinterpret_cast<uint8_t*>(ws + L.g);
            uint8_t* gt = reinterpret_cast<uint8_t*>(ws + L.gt);
            const GemmShape gi =
                gemm_shape_fp8(CUDA_R_8F_E4M3, CUDA_R_8F_E5M2, CUDA_R_16BF, C, N, OC, OC, OC, C, wt,
                               g, dinp ? (const void*)dinp : ws, false);
            const GemmShape gw =
                gemm_shape_fp8(CUDA_R_8F_E4M3, CUDA_R_8F_E5M2, CUDA_R_32F, C, OC, N, N, N, C, xt,
                               gt, dweight ? (const void*)dweight : ws, false);
            const bool dinp8 =
                dinp && weight && gemm_plan(gi, sl.scale_inv(3), sl.scale_inv(0)).supported;
            const bool dw8 =
                dweight && inp && gemm_plan(gw, sl.scale_inv(2), sl.scale_inv(1)).supported;
            if (dinp8 || dw8) {
                sl.clear_amax(s);
                fp8_amax(sl.amax(0), dout, (long)N * OC, s);
            }
            if (dinp8) {
                fp8_amax(sl.amax(2), weight, (long)OC * C, s);
                fp8_quantize(g, sl.scale_inv(0), dout, sl.amax(0), N, OC, Fp8Format::e5m2, false,
                             s);
                fp8_quantize(wt, sl.scale_inv(3), weight, sl.amax(2), OC, C, Fp8Format::e4m3, true,
                             s);
                if (gemm_run(gi, wt, g, dinp, 0.0f, nullptr, nullptr, s, sl.scale_inv(3),
                             sl.scale_inv(0))) {
                    fp8_counts_.dinp++;
                    dinp = nullptr;
                }
            }
            if (dw8) {
                fp8_amax(sl.amax(1), inp, (long)N * C, s);
                fp8_quantize(gt, sl.scale_inv(1), dout, sl.amax(0), N, OC, Fp8Format::e5m2, true,
                             s);
                fp8_quantize(xt, sl.scale_inv(2), inp, sl.amax(1), N, C, Fp8Format::e4m3, true, s);
                if (gemm_run(gw, xt, gt, dweight, dweight_beta, nullptr, nullptr, s,
                             sl.scale_inv(2), sl.scale_inv(1))) {
                    fp8_counts_.dweight++;
                    dweight = nullptr;
                }
            }
        }
    }
    bool fused = false;  // the GELU derivative applied in the dinp GEMM's epilogue
    if (dinp) {
        TS_CUDA_REQUIRE(weight, "matmul_backward_cuda: dinp needs weight");
        // bf16 with a GELU behind: the DGELU epilogue (aux ld a multiple of 8, 16-byte aligned)
        if (std::is_same_v<T, bf16> && gelu_pre && N >= kDgeluEpilogueMinRows && C % 8 == 0 &&
            ptr_align(gelu_pre) >= 16) {
            GemmShape g = gemm_shape(t, t, false, false, C, N, OC, C, OC, C, weight, dout, dinp,
                                     CUBLASLT_EPILOGUE_DGELU, C);
            fused = gemm_run(g, weight, dout, dinp, 0.0f, nullptr, const_cast<T*>(gelu_pre), s);
        }
        if (!fused) {
            GemmShape g = gemm_shape(t, t, false, false, C, N, OC, C, OC, C, weight, dout, dinp);
            TS_CUDA_REQUIRE(gemm_run(g, weight, dout, dinp, 0.0f, nullptr, nullptr, s),
                            "matmul_backward_cuda: cuBLASLt has no dinp algorithm for N=", N,
                            " C=", C, " OC=", OC);
        }
    }
    if (gelu_pre && !fused) gelu_backward_cuda<T>(dinp_out, gelu_pre, dinp_out, (long)N * C, s);
    if (dweight) {
        TS_CUDA_REQUIRE(inp, "matmul_backward_cuda: dweight needs inp");
        GemmShape g =
            gemm_shape(t, CUDA_R_32F, false, true, C, OC, N, C, OC, C, inp, dout, dweight);
        TS_CUDA_REQUIRE(gemm_run(g, inp, dout, dweight, dweight_beta, nullptr, nullptr, s),
                        "matmul_backward_cuda: cuBLASLt has no dweight algorithm for N=", N,
                        " C=", C, " OC=", OC);
    }
    if (dbias) {
        // at most 128 chunks: the last block of a column group adds them one after another
        const int rows_per_chunk = std::max(256, ceil_div(N, 128));
        const int chunks = ceil_div(N, rows_per_chunk);
        float* partial = static_cast<float*>(
            cuda_scratch(ScratchSlot::matmul_dbias, sizeof(float) * (size_t)chunks * OC));
        constexpr int V = 16 / sizeof(T);
        const bool vec = OC % V == 0 && ptr_align(dout) >= 16;
        const dim3 grid(ceil_div(OC, 32 * (vec ? V : 1)), chunks);
        auto* done = static_cast<unsigned*>(
            cuda_scratch_zeroed(ScratchSlot::matmul_dbias_done, sizeof(unsigned) * grid.x, s));
        if (vec)
            column_sum_kernel<T, V>
                <<<grid, 256, 0, s>>>(dbias, partial, done, dout, N, OC, rows_per_chunk);
        else
            column_sum_kernel<T, 1>
                <<<grid, 256, 0, s>>>(dbias, partial, done, dout, N, OC, rows_per_chunk);
        CUDA_CHECK_LAUNCH("column_sum_kernel");
    }
}

// ---------------------------------------------------------------------------------------------
// bench: cuBLASLt's heuristic candidates timed

static __global__ void fill_bf16_kernel(bf16* x, long n, unsigned seed) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
         i += (long)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        x[i] = __float2bfloat16(((h & 0xffff) / 65535.0f - 0.5f) * 0.1f);
    }
}

std::string matmul_choice_file() {
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    return gemm_choices(dev).path();
}

bool matmul_choice_on() {
    return gemm_choice_on();
}

std::vector<GemmCandidate> matmul_candidates_cuda(int kind, int N, int C, int OC, int count,
                                                  int reps) {
    TS_CUDA_REQUIRE(kind >= 0 && kind <= 2 && N > 0 && C > 0 && OC > 0 && count > 0,
                    "matmul_candidates_cuda: bad arguments");
    cudaStream_t s = nullptr;
    auto inp = cuda_malloc_device<bf16>((size_t)N * C),
         w = cuda_malloc_device<bf16>((size_t)OC * C),
         dout = cuda_malloc_device<bf16>((size_t)N * OC);
    auto out = cuda_malloc_device((size_t)N * std::max(C, OC) * 2);
    auto dw = cuda_malloc_device<float>((size_t)OC * C);
    fill_bf16_kernel<<<1024, 256>>>(inp.get(), (long)N * C, 1);
    fill_bf16_kernel<<<1024, 256>>>(w.get(), (long)OC * C, 2);
    fill_bf16_kernel<<<1024, 256>>>(dout.get(), (long)N * OC, 3);
    CUDA_CHECK(cudaMemset(dw.get(), 0, sizeof(float) * (size_t)OC * C));
    const cudaDataType_t t = CUDA_R_16BF;
    GemmShape g;
    const void *A, *B;
    void* D;
    float beta = 0.0f;
    if (kind == 0) {
        g = gemm_shape(t, t, true, false, OC, N, C, C, C, OC, w.get(), inp.get(), out.get());
        A = w.get(), B = inp.get(), D = out.get();
    } else if (kind == 1) {
        g = gemm_shape(t, t, false, false, C, N, OC, C, OC, C, w.get(), dout.get(), out.get());
        A = w.get(), B = dout.get(), D = out.get();
    } else {
        g = gemm_shape(t, CUDA_R_32F, false, true, C, OC, N, C, OC, C, inp.get(), dout.get(),
                       dw.get());
        A = inp.get(), B = dout.get(), D = dw.get(), beta = 1.0f;
    }
    const GemmPlan p = make_plan(g, nullptr, nullptr, count);
    const std::vector<cublasLtMatmulAlgo_t> algos = candidates_of(p);
    const std::vector<float> ms = time_algos(g, p, algos, A, B, D, beta, reps, s);
    std::vector<GemmCandidate> r(algos.size());
    for (size_t i = 0; i < algos.size(); ++i) {
        r[i].ms = std::isinf(ms[i]) ? -1.0f : ms[i];
        r[i].id = reinterpret_cast<const int*>(&algos[i])[0];
    }
    // what this process runs for the shape (the host's choice, made now where it has none)
    gemm_run(g, A, B, D, beta, nullptr, nullptr, s);
    const cublasLtMatmulAlgo_t& run = gemm_plan(g).algo;
    for (size_t i = 0; i < algos.size(); ++i)
        if (std::memcmp(&algos[i], &run, sizeof(run)) == 0) r[i].chosen = true;
    CUDA_CHECK(cudaDeviceSynchronize());
    return r;
}

template void matmul_forward_cuda<float>(float*, const float*, const float*, const float*, int, int,
                                         int, cudaStream_t, bool, float*, void*, const float*);
template void matmul_forward_cuda<bf16>(bf16*, const bf16*, const bf16*, const bf16*, int, int, int,
                                        cudaStream_t, bool, bf16*, void*, const bf16*);
template void matmul_backward_cuda<float>(float*, float*, float*, const float*, const float*,
                                          const float*, int, int, int, cudaStream_t, void*,
                                          const float*, bool);
template void matmul_backward_cuda<bf16>(bf16*, float*, float*, const bf16*, const bf16*,
                                         const bf16*, int, int, int, cudaStream_t, void*,
                                         const bf16*, bool);

}  // namespace tessera
