// add, sub, mul and div of two C-contiguous arrays of one float dtype and n elements, 16 bytes
// per load and store. CuPy's ufuncs load one element per thread, which keeps too few bytes in
// flight to fill an H100's or H200's memory bandwidth (about half of PyTorch's on a 2**26-element
// add); a Pack of 4 floats or 2 doubles, aligned to 16 bytes, compiles to one 128-bit load.
// Each element is the one IEEE operation the ufunc performs, so the results agree bit for bit.
// The caller guarantees 16-byte aligned operands; the last n % W elements run one at a time.
template <class T>
struct alignas(16) Pack {
    T v[16 / sizeof(T)];
};

struct Add { template <class T> __device__ static T f(T a, T b) { return a + b; } };
struct Sub { template <class T> __device__ static T f(T a, T b) { return a - b; } };
struct Mul { template <class T> __device__ static T f(T a, T b) { return a * b; } };
struct Div { template <class T> __device__ static T f(T a, T b) { return a / b; } };

template <class Op, class T>
__device__ void binary(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, long long n) {
    constexpr int W = 16 / sizeof(T);
    const long long packs = n / W;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long step = (long long)blockDim.x * gridDim.x;
    const Pack<T>* pa = reinterpret_cast<const Pack<T>*>(a);
    const Pack<T>* pb = reinterpret_cast<const Pack<T>*>(b);
    Pack<T>* po = reinterpret_cast<Pack<T>*>(out);
    for (long long p = first; p < packs; p += step) {
        const Pack<T> x = pa[p], y = pb[p];
        Pack<T> r;
        for (int k = 0; k < W; ++k) r.v[k] = Op::f(x.v[k], y.v[k]);
        po[p] = r;
    }
    for (long long i = packs * W + first; i < n; i += step) out[i] = Op::f(a[i], b[i]);
}

extern "C" __global__ void add_f32(const float* a, const float* b, float* out, long long n) {
    binary<Add>(a, b, out, n);
}

extern "C" __global__ void add_f64(const double* a, const double* b, double* out, long long n) {
    binary<Add>(a, b, out, n);
}

extern "C" __global__ void sub_f32(const float* a, const float* b, float* out, long long n) {
    binary<Sub>(a, b, out, n);
}

extern "C" __global__ void sub_f64(const double* a, const double* b, double* out, long long n) {
    binary<Sub>(a, b, out, n);
}

extern "C" __global__ void mul_f32(const float* a, const float* b, float* out, long long n) {
    binary<Mul>(a, b, out, n);
}

extern "C" __global__ void mul_f64(const double* a, const double* b, double* out, long long n) {
    binary<Mul>(a, b, out, n);
}

extern "C" __global__ void div_f32(const float* a, const float* b, float* out, long long n) {
    binary<Div>(a, b, out, n);
}

extern "C" __global__ void div_f64(const double* a, const double* b, double* out, long long n) {
    binary<Div>(a, b, out, n);
}
