// One LSTM time step's gate arithmetic, forward and backward, for lstm_layer and
// lstm_layer_backward (core/ops/recurrent.py): the step's GEMM stays cuBLAS (cupy.matmul), the
// rest of the step is one launch here, as cuDNN's fused gate kernel. The time loop runs in
// Python (backends/cupy_backend/rnn_kernels.py). The formulas and their order of operations are
// the NumPy backend's step functions' (backends/numpy_backend/rnn.py), sigmoid included:
// 0.5 + 0.5 * tanh(x / 2), which overflows for no x.
//
// Layout, all C-contiguous: state (6, T, N, H) holding per step h, c, i, f, g, o; the gates
// (N, 4H) in torch's order i, f, g, o; input_gates (T, N, 4H); bias (4H,) (has_bias 0: any T
// array, never read); grad_state as state; out (T + 1, N, 4H). One thread per (n, j) of the
// step's N * H, grid-stride.

__device__ __forceinline__ float ftanh(float v) { return tanhf(v); }
__device__ __forceinline__ double ftanh(double v) { return tanh(v); }

template <class T> __device__ __forceinline__ T sigmoid(T v) { return T(0.5) + T(0.5) * ftanh(v * T(0.5)); }

// step t: pre = (hW[n, :] + input_gates[t, n, :]) + bias; i, f, o = sigmoid, g = tanh;
// c = f * c_prev + i * g; h = tanh(c) * o; all six into state[:, t].
template <class T>
__device__ void forward_step(const T* __restrict__ hw, const T* __restrict__ input_gates, const T* bias,
                             const T* __restrict__ c_prev, T* __restrict__ state, long long t, long long steps,
                             long long n, long long h, int has_bias) {
    const long long nh = n * h, plane = steps * nh, step = (long long)blockDim.x * gridDim.x;
    const T* ig = input_gates + t * n * 4 * h;
    T* st = state + t * nh;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < nh; e += step) {
        const long long row = e / h, j = e - row * h;
        T pre[4];
        for (int k = 0; k < 4; ++k) {
            const long long col = row * 4 * h + k * h + j;
            pre[k] = hw[col] + ig[col];
            if (has_bias) pre[k] = pre[k] + bias[k * h + j];
        }
        const T i = sigmoid(pre[0]), f = sigmoid(pre[1]), g = ftanh(pre[2]), o = sigmoid(pre[3]);
        const T c = f * c_prev[e] + i * g;
        st[e] = ftanh(c) * o;
        st[plane + e] = c;
        st[2 * plane + e] = i;
        st[3 * plane + e] = f;
        st[4 * plane + e] = g;
        st[5 * plane + e] = o;
    }
}

// step t back: dh = dh_in + grad_h, dc += (1 - tanh(c)^2) o dh + grad_c; the gates' gradients
// before their activations into out[t] (N, 4H); dc (N, H, in place) becomes dc * f, the
// gradient of c_prev. The caller's GEMM out[t] @ weight_hh makes the next dh_in.
template <class T>
__device__ void backward_step(const T* __restrict__ grad_state, const T* __restrict__ state,
                              const T* __restrict__ c_prev, const T* __restrict__ dh_in, T* __restrict__ dc,
                              T* __restrict__ out, long long t, long long steps, long long n, long long h) {
    const long long nh = n * h, plane = steps * nh, step = (long long)blockDim.x * gridDim.x;
    const T* gr = grad_state + t * nh;
    const T* st = state + t * nh;
    T* o_t = out + t * n * 4 * h;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < nh; e += step) {
        const long long row = e / h, j = e - row * h;
        const T c = st[plane + e], i = st[2 * plane + e], f = st[3 * plane + e], g = st[4 * plane + e],
                o = st[5 * plane + e];
        const T dh = dh_in[e] + gr[e];
        const T tc = ftanh(c);
        const T d = ((T(1) - tc * tc) * o) * dh;
        const T dcv = (dc[e] + d) + gr[plane + e];
        T* orow = o_t + row * 4 * h + j;
        orow[0] = (dcv * g + gr[2 * plane + e]) * (i * (T(1) - i));
        orow[h] = (dcv * c_prev[e] + gr[3 * plane + e]) * (f * (T(1) - f));
        orow[2 * h] = (dcv * i + gr[4 * plane + e]) * (T(1) - g * g);
        orow[3 * h] = (dh * tc + gr[5 * plane + e]) * (o * (T(1) - o));
        dc[e] = dcv * f;
    }
}

extern "C" __global__ void lstm_forward_step_f32(const float* hw, const float* input_gates, const float* bias,
                                                 const float* c_prev, float* state, long long t, long long steps,
                                                 long long n, long long h, int has_bias) {
    forward_step<float>(hw, input_gates, bias, c_prev, state, t, steps, n, h, has_bias);
}

extern "C" __global__ void lstm_forward_step_f64(const double* hw, const double* input_gates, const double* bias,
                                                 const double* c_prev, double* state, long long t, long long steps,
                                                 long long n, long long h, int has_bias) {
    forward_step<double>(hw, input_gates, bias, c_prev, state, t, steps, n, h, has_bias);
}

extern "C" __global__ void lstm_backward_step_f32(const float* grad_state, const float* state, const float* c_prev,
                                                  const float* dh_in, float* dc, float* out, long long t,
                                                  long long steps, long long n, long long h) {
    backward_step<float>(grad_state, state, c_prev, dh_in, dc, out, t, steps, n, h);
}

extern "C" __global__ void lstm_backward_step_f64(const double* grad_state, const double* state,
                                                  const double* c_prev, const double* dh_in, double* dc, double* out,
                                                  long long t, long long steps, long long n, long long h) {
    backward_step<double>(grad_state, state, c_prev, dh_in, dc, out, t, steps, n, h);
}
