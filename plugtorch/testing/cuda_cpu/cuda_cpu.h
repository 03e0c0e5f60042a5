// Run CUDA kernels on the CPU: the same .cu source nvcc and NVRTC compile, built with
// g++ -std=c++20 -include cuda_cpu.h. One OS thread per CUDA thread of a block, blocks one
// after another (so __shared__ can be a function-local static), a real barrier for
// __syncthreads(). Not a simulator of GPU timing or memory model: a check of what kernels
// compute, including block reductions and odd sizes that leave threads idle.
#pragma once
#include <atomic>
#include <barrier>
#include <climits>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

struct uint3 { unsigned int x, y, z; };
struct dim3 { unsigned int x = 1, y = 1, z = 1; };

namespace cuda_cpu {
inline thread_local uint3 thread_idx, block_idx;
inline dim3 block_dim, grid_dim;
inline std::barrier<>* block_barrier = nullptr;
}  // namespace cuda_cpu

#define threadIdx (cuda_cpu::thread_idx)
#define blockIdx (cuda_cpu::block_idx)
#define blockDim (cuda_cpu::block_dim)
#define gridDim (cuda_cpu::grid_dim)
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __restrict__ __restrict
#define __shared__ static  // blocks run one after another, so one copy serves each block in turn
#define __launch_bounds__(...)

inline void __syncthreads() { cuda_cpu::block_barrier->arrive_and_wait(); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

template <class T> inline T atomicAdd(T* address, T value) { return std::atomic_ref<T>(*address).fetch_add(value); }
template <class T> inline T atomicMax(T* address, T value) {
    std::atomic_ref<T> ref(*address);
    T old = ref.load();
    while (old < value && !ref.compare_exchange_weak(old, value)) {}
    return old;
}
template <class T> inline T atomicExch(T* address, T value) { return std::atomic_ref<T>(*address).exchange(value); }

inline unsigned int __umulhi(unsigned int a, unsigned int b) {
    return static_cast<unsigned int>((static_cast<unsigned long long>(a) * b) >> 32);
}
inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, sizeof f); return f; }
inline float __uint_as_float(unsigned int v) { float f; std::memcpy(&f, &v, sizeof f); return f; }
inline int __float_as_int(float f) { int v; std::memcpy(&v, &f, sizeof v); return v; }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, sizeof d); return d; }
inline long long __double_as_longlong(double d) { long long v; std::memcpy(&v, &d, sizeof v); return v; }

namespace cuda_cpu {

// The parameter types of a kernel as NumPy dtype names ("*float32" for a pointer), so the
// Python launcher can refuse an argument the GPU would silently misread.
template <class T> constexpr const char* dtype_name() {
    using U = std::remove_cv_t<T>;
    if constexpr (std::is_same_v<U, bool>) return "bool";
    else if constexpr (std::is_same_v<U, float>) return "float32";
    else if constexpr (std::is_same_v<U, double>) return "float64";
    else if constexpr (std::is_integral_v<U> && std::is_signed_v<U>) {
        if constexpr (sizeof(U) == 1) return "int8";
        else if constexpr (sizeof(U) == 2) return "int16";
        else if constexpr (sizeof(U) == 4) return "int32";
        else return "int64";
    } else if constexpr (std::is_integral_v<U>) {
        if constexpr (sizeof(U) == 1) return "uint8";
        else if constexpr (sizeof(U) == 2) return "uint16";
        else if constexpr (sizeof(U) == 4) return "uint32";
        else return "uint64";
    } else return "unsupported";
}

template <class T> std::string param_code() {
    if constexpr (std::is_pointer_v<T>) {
        using E = std::remove_pointer_t<T>;
        return std::string(std::is_const_v<E> ? "*const " : "*") + dtype_name<E>();
    }
    else return dtype_name<T>();
}

template <class... A> std::string signature(void (*)(A...)) {
    std::string s;
    ((s += param_code<A>() + ","), ...);
    return s;
}

template <class... A, std::size_t... I>
void invoke(void (*kernel)(A...), void** args, std::index_sequence<I...>) {
    kernel(*static_cast<std::remove_cv_t<A>*>(args[I])...);
}

// Launch <<<grid, block>>>: blockDim threads, each walking the blocks in order, meeting at a
// barrier after every block so no thread reuses __shared__ memory another still reads.
template <class... A>
void launch(void (*kernel)(A...), dim3 grid, dim3 block, void** args) {
    grid_dim = grid;
    block_dim = block;
    const unsigned int n = block.x * block.y * block.z;
    std::barrier<> barrier(static_cast<std::ptrdiff_t>(n));
    block_barrier = &barrier;
    std::vector<std::thread> threads;
    threads.reserve(n);
    for (unsigned int t = 0; t < n; ++t) {
        threads.emplace_back([=, &barrier] {
            thread_idx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
            for (unsigned int bz = 0; bz < grid.z; ++bz)
                for (unsigned int by = 0; by < grid.y; ++by)
                    for (unsigned int bx = 0; bx < grid.x; ++bx) {
                        block_idx = {bx, by, bz};
                        invoke(kernel, args, std::index_sequence_for<A...>{});
                        barrier.arrive_and_wait();
                    }
        });
    }
    for (auto& th : threads) th.join();
    block_barrier = nullptr;
}

}  // namespace cuda_cpu
