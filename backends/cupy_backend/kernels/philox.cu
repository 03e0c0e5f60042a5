// Philox4x32-10 random numbers (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC'11; the Random123 library), the CuPy backend's generator. Its state is {seed, offset}:
// the key is the seed's two 32-bit halves (low word first), and counter k is the 128-bit
// value (lo32(k), hi32(k), 0, 0). A draw of n values at offset o reads the blocks of the
// counters o, o+1, ..., each block four 32-bit words w0..w3, and the host then moves the
// offset past every counter the draw touched (a partly used last block is not reused).
//
// Which words make element i (the same on every backend; philox.py is the NumPy reference):
//   uniform_f32, normal_f32: 4 per counter; element i lives in counter o + i/4.
//     uniform: word w[i%4]; (w >> 8) * 2^-24, in [0, 1 - 2^-24].
//     normal:  Box-Muller on the pair (w0, w1) -> elements 0 (cos), 1 (sin), and on
//              (w2, w3) -> elements 2, 3: u1 = (float(w_even) + 0.5) * 2^-32 in (0, 1], so
//              log(u1) is finite; theta = 2 pi (w_odd >> 8) * 2^-24.
//   uniform_f64, normal_f64, randint_i64, keys_u64: 2 per counter; element i lives in counter
//     o + i/2. Element 0 takes the 64-bit word v0 = w0 | w1 << 32, element 1 takes v1 = w2 | w3 << 32.
//     uniform: (v >> 11) * 2^-53, in [0, 1 - 2^-53].
//     normal:  Box-Muller on (v0, v1) -> element 0 (cos), element 1 (sin); u1 = (double(v0) + 0.5)
//              * 2^-64 in (0, 1], theta = 2 pi (v1 >> 11) * 2^-53.
//     randint: low + v % range (64-bit wrap-around), range = high - low in [1, 2^64 - 1]; the
//              modulo's bias is below range / 2^64 (under 2^-32 for ranges under 2^32).
//     keys:    v itself (permutation sorts them).
// Every kernel takes (out, n, seed, offset, ...) and walks the counters with a grid-stride
// loop; the exact arithmetic (no a*b+c that a GPU could fuse into an fma) keeps uniform,
// randint and keys bit-identical to the reference; normal goes through log/sqrt/sin/cos and
// matches it to a few ulp.

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

struct philox_block {
    unsigned int w[4];
};

// Ten rounds; the key is bumped by the Weyl constants before every round but the first.
__device__ __forceinline__ philox_block philox4x32_10(unsigned int c0, unsigned int c1, unsigned int c2,
                                                      unsigned int c3, unsigned int k0, unsigned int k1) {
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        const unsigned int hi0 = __umulhi(PHILOX_M0, c0);
        const unsigned int lo0 = PHILOX_M0 * c0;
        const unsigned int hi1 = __umulhi(PHILOX_M1, c2);
        const unsigned int lo1 = PHILOX_M1 * c2;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    philox_block out;
    out.w[0] = c0;
    out.w[1] = c1;
    out.w[2] = c2;
    out.w[3] = c3;
    return out;
}

// The block of stream counter `counter` under `seed`.
__device__ __forceinline__ philox_block philox_at(unsigned long long seed, unsigned long long counter) {
    return philox4x32_10(static_cast<unsigned int>(counter), static_cast<unsigned int>(counter >> 32), 0u, 0u,
                         static_cast<unsigned int>(seed), static_cast<unsigned int>(seed >> 32));
}

__device__ __forceinline__ unsigned long long philox_word64(const philox_block& b, int half) {
    return static_cast<unsigned long long>(b.w[2 * half]) |
           (static_cast<unsigned long long>(b.w[2 * half + 1]) << 32);
}

__device__ __forceinline__ long long philox_first() {
    return static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ long long philox_stride() {
    return static_cast<long long>(blockDim.x) * gridDim.x;
}

// The raw generator, for the known-answer tests: block i of out is Philox(ctr[4i..], key[2i..]).
extern "C" __global__ void philox4x32_10_raw(unsigned int* __restrict__ out, const unsigned int* __restrict__ ctr,
                                             const unsigned int* __restrict__ key, long long n) {
    for (long long i = philox_first(); i < n; i += philox_stride()) {
        const philox_block b = philox4x32_10(ctr[4 * i], ctr[4 * i + 1], ctr[4 * i + 2], ctr[4 * i + 3],
                                             key[2 * i], key[2 * i + 1]);
        for (int j = 0; j < 4; ++j) out[4 * i + j] = b.w[j];
    }
}

extern "C" __global__ void philox_uniform_f32(float* __restrict__ out, long long n, unsigned long long seed,
                                              unsigned long long offset) {
    const long long counters = (n + 3) / 4;
    for (long long k = philox_first(); k < counters; k += philox_stride()) {
        const philox_block b = philox_at(seed, offset + static_cast<unsigned long long>(k));
        for (int j = 0; j < 4 && 4 * k + j < n; ++j)
            out[4 * k + j] = static_cast<float>(b.w[j] >> 8) * 5.9604644775390625e-08f;  // 2^-24
    }
}

extern "C" __global__ void philox_uniform_f64(double* __restrict__ out, long long n, unsigned long long seed,
                                              unsigned long long offset) {
    const long long counters = (n + 1) / 2;
    for (long long k = philox_first(); k < counters; k += philox_stride()) {
        const philox_block b = philox_at(seed, offset + static_cast<unsigned long long>(k));
        for (int j = 0; j < 2 && 2 * k + j < n; ++j)
            out[2 * k + j] = static_cast<double>(philox_word64(b, j) >> 11) * 1.1102230246251565e-16;  // 2^-53
    }
}

extern "C" __global__ void philox_normal_f32(float* __restrict__ out, long long n, unsigned long long seed,
                                             unsigned long long offset) {
    const long long counters = (n + 3) / 4;
    for (long long k = philox_first(); k < counters; k += philox_stride()) {
        const philox_block b = philox_at(seed, offset + static_cast<unsigned long long>(k));
        for (int p = 0; p < 2 && 4 * k + 2 * p < n; ++p) {
            const float u1 = (static_cast<float>(b.w[2 * p]) + 0.5f) * 2.3283064365386963e-10f;  // 2^-32
            const float u2 = static_cast<float>(b.w[2 * p + 1] >> 8) * 5.9604644775390625e-08f;
            const float radius = sqrtf(-2.0f * logf(u1));
            const float theta = 6.2831853071795865f * u2;
            out[4 * k + 2 * p] = radius * cosf(theta);
            if (4 * k + 2 * p + 1 < n) out[4 * k + 2 * p + 1] = radius * sinf(theta);
        }
    }
}

extern "C" __global__ void philox_normal_f64(double* __restrict__ out, long long n, unsigned long long seed,
                                             unsigned long long offset) {
    const long long counters = (n + 1) / 2;
    for (long long k = philox_first(); k < counters; k += philox_stride()) {
        const philox_block b = philox_at(seed, offset + static_cast<unsigned long long>(k));
        const double u1 = (static_cast<double>(philox_word64(b, 0)) + 0.5) * 5.421010862427522e-20;  // 2^-64
        const double u2 = static_cast<double>(philox_word64(b, 1) >> 11) * 1.1102230246251565e-16;
        const double radius = sqrt(-2.0 * log(u1));
        const double theta = 6.283185307179586 * u2;
        out[2 * k] = radius * cos(theta);
        if (2 * k + 1 < n) out[2 * k + 1] = radius * sin(theta);
    }
}

extern "C" __global__ void philox_randint_i64(long long* __restrict__ out, long long n, unsigned long long seed,
                                              unsigned long long offset, long long low, unsigned long long range) {
    const long long counters = (n + 1) / 2;
    for (long long k = philox_first(); k < counters; k += philox_stride()) {
        const philox_block b = philox_at(seed, offset + static_cast<unsigned long long>(k));
        for (int j = 0; j < 2 && 2 * k + j < n; ++j)
            out[2 * k + j] = static_cast<long long>(static_cast<unsigned long long>(low) + philox_word64(b, j) % range);
    }
}

extern "C" __global__ void philox_keys_u64(unsigned long long* __restrict__ out, long long n, unsigned long long seed,
                                           unsigned long long offset) {
    const long long counters = (n + 1) / 2;
    for (long long k = philox_first(); k < counters; k += philox_stride()) {
        const philox_block b = philox_at(seed, offset + static_cast<unsigned long long>(k));
        for (int j = 0; j < 2 && 2 * k + j < n; ++j) out[2 * k + j] = philox_word64(b, j);
    }
}
